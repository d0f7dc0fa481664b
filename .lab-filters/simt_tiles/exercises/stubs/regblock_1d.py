"""Exercise regblock_1d — 1-D register blocking: TM outputs per thread, B reused from a register.

Statement
    ``matmul_kernel`` computes ``c = a @ b`` with blocks of THREADS = BM·BN/TM threads, each
    block a BM × BN tile of C, walking K in steps of BK through shared memory (k03's tiles).
    Thread ``tid`` owns column ``tc = tid % BN`` and the TM rows ``tr·TM + [0, TM)``,
    ``tr = tid // BN``. The stub computes only the first of those rows. Keep TM accumulators
    in registers and, per ``kk``, load ``b_s[kk, tc]`` ONCE and reuse it for the TM
    multiply-adds: TM + 1 shared loads for TM FMAs where k03 needs 2·TM. The grader checks
    ragged shapes (1×1×1, K = 0, not tile multiples) in float32 and float64, then counts your
    shared-memory requests with the analyzer: more than the reference's fails.

Hints
    1. ``acc = cuda.local.array(TM, DT)`` is registers when its size is a constant and every
       index comes from an unrolled ``for i in range(TM)`` loop.
    2. ``b_val = b_s[kk, tc]`` before ``for i in range(TM):``, not inside it.
    3. The store loop writes TM rows, each guarded by ``row < m and col < n``.

Check: ``python -m simt_tiles.exercises check regblock_1d regblock_1d.py``
"""

from numba import cuda

from simt_tiles.runtime import numba_dtype

BM, BN, BK, TM = 16, 16, 4, 4  # block tile BM×BN, K step BK, TM outputs per thread
THREADS = BM * BN // TM  # 64 threads: two warps; one A and one B element each per K step


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def matmul_kernel(a, b, c):
        tid = cuda.threadIdx.x
        m, k_len = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        tr, tc = tid // BN, tid % BN  # rows row0 + tr·TM + [0, TM) of column col0 + tc
        a_s = cuda.shared.array((BM, BK), DT)
        b_s = cuda.shared.array((BK, BN), DT)
        acc = DT(0)  # TODO: TM accumulators

        for k0 in range(0, k_len, BK):
            r, q = tid // BK, tid % BK
            a_s[r, q] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            r, q = tid // BN, tid % BN
            b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW: the tiles are complete
            for kk in range(BK):
                acc += a_s[tr * TM, kk] * b_s[kk, tc]  # TODO: all TM rows, b_s read once per kk
            cuda.syncthreads()  # WAR: everyone is done reading before the next step's loads

        row, col = row0 + tr * TM, col0 + tc
        if row < m and col < n:  # TODO: TM rows
            c[row, col] = acc

    return matmul_kernel
