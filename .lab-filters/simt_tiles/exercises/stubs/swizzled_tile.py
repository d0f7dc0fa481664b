"""Exercise swizzled_tile — store the A tile transposed without bank conflicts: the XOR swizzle.

Statement
    ``matmul_kernel`` stores its A tile *transposed* (``a_t[k, ·]`` holds column k of the
    tile), so that the TM values of A a thread reads per ``kk`` are consecutive words (k06).
    The store is the problem: a warp's 32 lanes write 4 rows r × 8 values of k, to words
    ``k·BM + r``; BM = 32 puts all 8 k of one r in bank r — an 8-way conflict. Instead of
    padding (k07), write ``swizzle(k, m)``: the column where logical element (k, m) lives in
    row k, a permutation of each row that sends the 8 k of one r to 8 different banks and
    keeps each aligned group of 4 columns together (so reads stay wide). The grader checks
    ragged shapes in both dtypes, then measures the wavefronts of your shared stores and
    loads with the analyzer: more than the reference's fails, naming the line.

Hints
    1. An XOR with a value that depends on k permutes the columns of row k.
    2. XOR bits 2-4 of m (groups of 4 stay together) with k % 8: ``m ^ ((k % 8) << 2)``
       moves the 8 values of k to banks 4 apart.
    3. Reads use the same ``swizzle`` — the layout, not the data, changed.

Check: ``python -m simt_tiles.exercises check swizzled_tile swizzled_tile.py``
"""

from numba import cuda

from simt_tiles.runtime import numba_dtype

BM, BN, BK, TM, TN = 32, 32, 8, 4, 4  # k08's layout at a small size
THREADS = (BM // TM) * (BN // TN)  # 64 threads: two warps
COLS = BN // TN
A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS


@cuda.jit(device=True, inline="always")  # inlined before typing: no call, and no driver needed to compile
def swizzle(k, m):
    """The column of row k of the transposed tile where logical element (k, m) lives."""
    return m  # TODO: k06's layout (no permutation): 8-way conflicting stores


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
