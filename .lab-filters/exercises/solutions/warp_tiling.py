"""Reference solution of exercise warp_tiling (see simt_tiles/exercises/stubs/warp_tiling.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

BM, BN, BK, TM, TN = 32, 32, 4, 4, 4  # block tile, K step, a TM×TN tile of C per thread
WM, WN = 32, 16  # each warp's tile of the block tile: WM·WN = 32·TM·TN
WARPS_N = BN // WN  # warps side by side along N (2 × 1 warps here)
LN = WN // TN  # the 32 lanes of a warp form an (WM // TM) × LN grid
THREADS = (BM // WM) * WARPS_N * 32  # 64 threads: two warps
A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS  # elements each thread stages per K step


@cuda.jit(device=True, inline="always")  # inlined before typing: no call, and no driver needed to compile
def owner(tid):
    """(first row, first column) of thread ``tid``'s TM×TN tile in the block tile."""
    warp, lane = tid // 32, tid % 32
    m_base = (warp // WARPS_N) * WM + (lane // LN) * TM  # the warp's tile, then the lane's place in it
    n_base = (warp % WARPS_N) * WN + (lane % LN) * TN
    return m_base, n_base


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def matmul_kernel(a, b, c):
        tid = cuda.threadIdx.x
        m, k_len = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        m_base, n_base = owner(tid)  # rows m_base + [0, TM), columns n_base + [0, TN)
        a_s = cuda.shared.array((BM, BK), DT)
        b_s = cuda.shared.array((BK, BN), DT)
        acc = cuda.local.array((TM, TN), DT)
        a_reg = cuda.local.array(TM, DT)
        b_reg = cuda.local.array(TN, DT)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)

        for k0 in range(0, k_len, BK):
            for p in range(A_LOADS):
                e = tid + p * THREADS
                r, q = e // BK, e % BK
                a_s[r, q] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            for p in range(B_LOADS):
                e = tid + p * THREADS
                r, q = e // BN, e % BN
                b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW
            for kk in range(BK):
                for i in range(TM):  # TM + TN shared loads ...
                    a_reg[i] = a_s[m_base + i, kk]
                for j in range(TN):
                    b_reg[j] = b_s[kk, n_base + j]
                for i in range(TM):  # ... for TM·TN multiply-adds from registers
                    for j in range(TN):
                        acc[i, j] += a_reg[i] * b_reg[j]
            cuda.syncthreads()  # WAR

        for i in range(TM):
            for j in range(TN):
                row, col = row0 + m_base + i, col0 + n_base + j
                if row < m and col < n:
                    c[row, col] = acc[i, j]

    return matmul_kernel
