"""Reference solution of exercise halo_modes (see simt_tiles/exercises/stubs/halo_modes.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

TX, TY = 16, 4  # block: TX × TY threads (two warps), one output each
PH, PW = TY + 2, TX + 2  # the patch: the tile and its one-element halo
REFLECT, CONSTANT, NEAREST, MIRROR, WRAP = range(5)  # scipy.ndimage's modes
MODES = {"reflect": REFLECT, "constant": CONSTANT, "nearest": NEAREST, "mirror": MIRROR, "wrap": WRAP}


@cuda.jit(device=True, inline="always")  # inlined before typing: no call, and no driver needed to compile
def source_index(p, n, mode):
    """The image index that coordinate p of the extended line reads; -1: the constant 0."""
    if 0 <= p < n:
        return p
    if mode == CONSTANT:
        return -1
    if mode == NEAREST:  # a a a | a b c d | d d d
        return 0 if p < 0 else n - 1
    if mode == WRAP:  # b c d | a b c d | a b c
        return p % n
    if mode == REFLECT:  # d c b a | a b c d | d c b a
        q = p % (2 * n)
        return q if q < n else 2 * n - 1 - q
    if n == 1:  # MIRROR: d c b | a b c d | c b a
        return 0
    q = p % (2 * n - 2)
    return q if q < n else 2 * n - 2 - q


def make_kernel(dtype, mode):
    DT = numba_dtype(dtype)
    MODE = MODES[mode]

    @cuda.jit
    def correlate3x3_kernel(image, w, out):
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        h, wd = image.shape
        row0, col0 = cuda.blockIdx.y * TY, cuda.blockIdx.x * TX
        patch = cuda.shared.array((PH, PW), DT)
        for p in range(ty * TX + tx, PH * PW, TX * TY):  # the block walks the patch
            ir = source_index(row0 + p // PW - 1, h, MODE)
            ic = source_index(col0 + p % PW - 1, wd, MODE)
            patch[p // PW, p % PW] = image[ir, ic] if ir >= 0 and ic >= 0 else DT(0)
        cuda.syncthreads()  # RAW: the patch is staged
        r, c = row0 + ty, col0 + tx
        if r < h and c < wd:
            acc = DT(0)
            for di in range(3):
                for dj in range(3):
                    acc += w[di, dj] * patch[ty + di, tx + dj]
            out[r, c] = acc

    return correlate3x3_kernel
