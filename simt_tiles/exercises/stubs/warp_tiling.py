"""Exercise warp_tiling — which outputs a thread owns: first its warp's tile, then its place in it.

Statement
    ``matmul_kernel`` is the regblock_2d solution with one change: thread ``tid``'s TM × TN tile
    of C is chosen in two steps, as k10 does. The block tile (BM × BN) is split into warp tiles of
    WM × WN (here 1 × 2 warps of 32 × 16); inside its warp's tile, lane ``lane`` sits in an
    (WM / TM) × LN grid of lanes, LN = WN / TN, and owns the TM × TN tile at that grid position.
    Write ``owner(tid)``: the first row and column of the thread's tile in the block tile. The
    stub places each warp but forgets the lane's column, so lanes overwrite each other's outputs.
    The grader checks ragged shapes in both dtypes, race-checked, and prints the traffic beside
    the reference's.

Hints
    1. ``warp, lane = tid // 32, tid % 32``; warp w's tile starts at row ``(w // WARPS_N)·WM``,
       column ``(w % WARPS_N)·WN``.
    2. Lane l's tile in it starts at row ``(l // LN)·TM``, column ``(l % LN)·TN``.
    3. Why: a warp's lanes then read a compact WM × BK strip of A and BK × WN strip of B, which
       k10's transposed A tile and 128-bit reads turn into one wavefront per load. Here A is
       read down a column, and the score shows the price: 320 shared wavefronts against
       regblock_2d's 192 (lane rows 16 words apart, TM rows of BK = 4 words: 4-way conflicts) — why k10 keeps A
       transposed.

Check: ``python -m simt_tiles.exercises check warp_tiling warp_tiling.py``
"""

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
    n_base = (warp % WARPS_N) * WN  # TODO: the lane's column in the warp's tile
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
