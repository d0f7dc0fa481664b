"""Reference solution of exercise padded_transpose (see simt_tiles/exercises/stubs/padded_transpose.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

T = 32  # tile side: one warp's width
ROWS = 8  # block = (T, ROWS) threads; each thread moves T // ROWS rows
PAD = 1  # rows of 33 words: lane tx's column read is in bank (tx + c) % 32, all distinct


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
