"""Exercise halo_modes — the halo of a 3 × 3 filter under scipy.ndimage's five boundary modes.

Statement
    ``correlate3x3_kernel`` is the halo_tile exercise's solution, generalised: every patch
    cell reads image element ``(source_index(row, h, MODE), source_index(col, w, MODE))``,
    and ``source_index(p, n, mode)`` maps a coordinate of the *extended* line (p = −1 or n
    here, one step outside; any p should work) to the image index it reads, or −1 for the
    constant 0. The stub knows only "constant". Write the other four as scipy.ndimage
    defines them, for a line ``a b c d``:

        reflect   d c b a | a b c d | d c b a        nearest   a a a | a b c d | d d d
        mirror      d c b | a b c d | c b a          wrap      b c d | a b c d | a b c

    The grader runs every mode on a 1 × 1 image (where mirror and reflect differ from the
    formulas' general case) and a ragged one, in both dtypes, against the project's
    long-double reference of ``scipy.ndimage.correlate``.

Hints
    1. wrap: ``p % n`` (Python's %, which Numba keeps, is never negative for n > 0).
    2. reflect has period 2n: ``q = p % (2n)``, then fold ``q >= n`` back to ``2n − 1 − q``.
    3. mirror has period 2n − 2 (the edge is not repeated), and a 1-element line is all a.

Check: ``python -m simt_tiles.exercises check halo_modes halo_modes.py``
"""

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
    return -1  # TODO: right for CONSTANT only; NEAREST, WRAP, REFLECT and MIRROR read the image


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
