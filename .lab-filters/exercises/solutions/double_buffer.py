"""Reference solution of exercise double_buffer (see simt_tiles/exercises/stubs/double_buffer.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

T = 8  # T×T threads (two warps), one output each; K walked in steps of T


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def matmul_kernel(a, b, c):
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        m, k_len = a.shape
        n = b.shape[1]
        row, col = cuda.blockIdx.y * T + ty, cuda.blockIdx.x * T + tx
        a_s = cuda.shared.array((2, T, T), DT)  # two stages: compute from one, fill the other
        b_s = cuda.shared.array((2, T, T), DT)
        a_s[0, ty, tx] = a[row, tx] if row < m and tx < k_len else DT(0)  # prologue: tile 0
        b_s[0, ty, tx] = b[ty, col] if ty < k_len and col < n else DT(0)
        cuda.syncthreads()
        acc = DT(0)
        for t in range((k_len + T - 1) // T):
            s = t % 2
            k1 = (t + 1) * T  # tile t + 1 from global memory into registers; in flight during the FMAs
            a_next = a[row, k1 + tx] if row < m and k1 + tx < k_len else DT(0)
            b_next = b[k1 + ty, col] if k1 + ty < k_len and col < n else DT(0)
            for kk in range(T):
                acc += a_s[s, ty, kk] * b_s[s, kk, tx]
            a_s[1 - s, ty, tx] = a_next  # the other stage: nobody reads it in this step
            b_s[1 - s, ty, tx] = b_next
            cuda.syncthreads()  # RAW for stage 1 - s, and WAR for stage s (rewritten next step)
        if row < m and col < n:
            c[row, col] = acc

    return matmul_kernel
