"""Reference solution of exercise tiled_matmul (see simt_tiles/exercises/stubs/tiled_matmul.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype


def make_kernel(T, dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def matmul_kernel(a, b, c):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * T + ty
        col = cuda.blockIdx.x * T + tx
        m, k_len = a.shape
        n = b.shape[1]

        a_tile = cuda.shared.array((T, T), DT)
        b_tile = cuda.shared.array((T, T), DT)

        acc = DT(0)
        for k0 in range(0, k_len, T):
            ka = k0 + tx
            a_tile[ty, tx] = a[row, ka] if row < m and ka < k_len else DT(0)
            kb = k0 + ty
            b_tile[ty, tx] = b[kb, col] if kb < k_len and col < n else DT(0)
            cuda.syncthreads()  # RAW: the tiles are complete before anyone reads them
            for kk in range(T):
                acc += a_tile[ty, kk] * b_tile[kk, tx]
            cuda.syncthreads()  # WAR: everyone has read them before the next step overwrites

        if row < m and col < n:
            c[row, col] = acc

    return matmul_kernel
