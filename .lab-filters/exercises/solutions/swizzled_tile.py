"""Reference solution of exercise swizzled_tile (see simt_tiles/exercises/stubs/swizzled_tile.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

BM, BN, BK, TM, TN = 32, 32, 8, 4, 4  # k08's layout at a small size
THREADS = (BM // TM) * (BN // TN)  # 64 threads: two warps
COLS = BN // TN
A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS


@cuda.jit(device=True, inline="always")  # inlined before typing: no call, and no driver needed to compile
def swizzle(k, m):
    """The column of row k of the transposed tile where logical element (k, m) lives."""
    return m ^ ((k % 8) << 2)  # XOR bits 2-4 of m with k: groups of 4 stay together


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def matmul_kernel(a, b, c):
        tid = cuda.threadIdx.x
        m, k_len = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        tr, tc = tid // COLS, tid % COLS
        a_t = cuda.shared.array((BK, BM), DT)  # A transposed: a_t[k, swizzle(k, m)] = A[row0 + m, k0 + k]
        b_s = cuda.shared.array((BK, BN), DT)
        acc = cuda.local.array((TM, TN), DT)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)

        for k0 in range(0, k_len, BK):
            for p in range(A_LOADS):  # coalesced along k in global memory, transposed on the way in
                e = tid + p * THREADS
                r, q = e // BK, e % BK
                a_t[q, swizzle(q, r)] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            for p in range(B_LOADS):
                e = tid + p * THREADS
                r, q = e // BN, e % BN
                b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW
            for kk in range(BK):
                for i in range(TM):
                    a_val = a_t[kk, swizzle(kk, tr * TM + i)]
                    for j in range(TN):
                        acc[i, j] += a_val * b_s[kk, tc * TN + j]
            cuda.syncthreads()  # WAR

        for i in range(TM):
            for j in range(TN):
                row, col = row0 + tr * TM + i, col0 + tc * TN + j
                if row < m and col < n:
                    c[row, col] = acc[i, j]

    return matmul_kernel
