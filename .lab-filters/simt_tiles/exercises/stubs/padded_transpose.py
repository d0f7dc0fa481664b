"""Exercise padded_transpose — remove a 32-way bank conflict with one word of padding.

Statement
    ``transpose_kernel`` transposes ``a`` (M × N) into ``out`` (N × M) through a T × T shared
    tile, T = 32, with blocks of 32 × 8 threads (each thread moves T / 8 rows). It is correct —
    and slow: the write-out phase reads the tile down a *column*, ``tile[tx, ty + j]``. With
    rows of 32 four-byte words, word ``tx · 32 + c`` sits in bank ``(tx · 32 + c) % 32 = c``:
    all 32 lanes of a warp hit one bank, a 32-way conflict (32 wavefronts per request).
    Choose ``PAD`` so every lane of that read lands in a different bank, using as little
    extra shared memory as possible. The grader checks the transpose on ragged shapes in
    float32 and float64 and counts the wavefronts of the column read for float32.

Hints
    1. With rows of ``T + PAD`` words, lane tx reads word ``tx · (T + PAD) + c``: its bank is
       ``(tx · (T + PAD) + c) % 32``.
    2. The 32 banks are distinct for tx = 0..31 exactly when T + PAD is odd (coprime to 32).
    3. The padding column is never read or written: it only shifts each row's bank.

Check: ``python -m simt_tiles.exercises check padded_transpose padded_transpose.py``
"""

from numba import cuda

from simt_tiles.runtime import numba_dtype

T = 32  # tile side: one warp's width
ROWS = 8  # block = (T, ROWS) threads; each thread moves T // ROWS rows
PAD = 0  # TODO: words of padding per tile row


def make_kernel(dtype):
    DT = numba_dtype(dtype)
    W = T + PAD  # a shared-array shape must be a plain constant

    @cuda.jit
    def transpose_kernel(a, out):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        m, n = a.shape
        tile = cuda.shared.array((T, W), DT)
        col = cuda.blockIdx.x * T + tx
        for j in range(0, T, ROWS):  # coalesced read of a's rows
            row = cuda.blockIdx.y * T + ty + j
            if row < m and col < n:
                tile[ty + j, tx] = a[row, col]
        cuda.syncthreads()  # RAW: the whole tile is in shared memory
        ocol = cuda.blockIdx.y * T + tx
        for j in range(0, T, ROWS):  # coalesced write of out's rows: a column of the tile
            orow = cuda.blockIdx.x * T + ty + j
            if orow < n and ocol < m:
                out[orow, ocol] = tile[tx, ty + j]

    return transpose_kernel
