"""Exercise tiled_matmul — the shared-memory tiled matmul and its two barriers.

Statement
    A block of T × T threads computes a T × T tile of C = A @ B. It walks K in steps of T:
    every thread copies one element of the A tile and one of the B tile into shared memory,
    the block waits, each thread does T multiply-adds from shared memory, and the block waits
    again before the next step overwrites the tiles. Complete ``make_kernel``. The grader
    builds it for T = 4 and T = 8 (two warps a block), launches grid ``(ceil(N / T), ceil(M / T))`` of blocks ``(T, T)``
    on ragged shapes (1×1×1, 5×7×3, 9×6×13, 4×4×0, ...) in float32 and float64, compares
    with a long-double reference within γ_K·|A|·|B|, and checks for a missing barrier.

Hints
    1. Loads outside A or B store 0 into the tile (a masked load): then any M, N, K works,
       K = 0 included (the loop runs zero times).
    2. Barrier 1 (read-after-write): nobody reads the tiles before everyone has written them.
       Barrier 2 (write-after-read): nobody overwrites them before everyone has read them.
    3. Threads whose C element is outside C must still load and reach both barriers — only
       the final store is guarded. An early ``return`` deadlocks the block.

Check: ``python -m simt_tiles.exercises check tiled_matmul tiled_matmul.py``
"""

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
            # TODO: masked loads of a_tile[ty, tx] (A row `row`, column k0 + tx)
            #       and b_tile[ty, tx] (B row k0 + ty, column `col`)
            # TODO: barrier 1
            # TODO: acc += a_tile[ty, kk] * b_tile[kk, tx] for kk in range(T)
            # TODO: barrier 2
            pass

        if row < m and col < n:
            c[row, col] = acc

    return matmul_kernel
