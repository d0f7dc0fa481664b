"""Reference solution of exercise halo_tile (see simt_tiles/exercises/stubs/halo_tile.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

TX, TY = 16, 4  # block: TX columns × TY rows of threads (two warps), one output each
PH, PW = TY + 2, TX + 2  # the patch: the tile and its halo


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def correlate3x3_kernel(image, w, out):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        h, wd = image.shape
        row0 = cuda.blockIdx.y * TY
        col0 = cuda.blockIdx.x * TX
        patch = cuda.shared.array((PH, PW), DT)

        for p in range(ty * TX + tx, PH * PW, TX * TY):  # the block walks the patch
            pr, pc = p // PW, p % PW
            ir, ic = row0 + pr - 1, col0 + pc - 1
            patch[pr, pc] = image[ir, ic] if 0 <= ir < h and 0 <= ic < wd else DT(0)
        r, c = row0 + ty, col0 + tx
        cuda.syncthreads()  # RAW: the patch is staged

        if r < h and c < wd:
            acc = DT(0)
            for di in range(3):
                for dj in range(3):
                    acc += w[di, dj] * patch[ty + di, tx + dj]
            out[r, c] = acc

    return correlate3x3_kernel
