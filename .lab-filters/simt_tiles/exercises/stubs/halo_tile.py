"""Exercise halo_tile — a shared-memory tile with its halo for a 3 × 3 filter.

Statement
    ``correlate3x3_kernel`` computes ``out[i, j] = sum_{di, dj} w[di, dj] · image[i + di − 1,
    j + dj − 1]`` with zeros outside the image (``scipy.ndimage.correlate(image, w,
    mode="constant")``). A block of TX × TY threads computes a TY × TX tile of ``out``; the
    inputs it needs are that tile plus a one-element *halo* all around: (TY + 2) × (TX + 2)
    values, more than there are threads. The stub stages only the centre, so outputs on a
    tile's border read shared memory nobody wrote. Stage the whole patch (zeros outside the
    image), then compute. The grader launches grid ``(ceil(W / TX), ceil(H / TY))`` of blocks
    ``(TX, TY)`` on ragged images (1×1, 4×9, 11×17, ...), float32 and float64, against a
    long-double reference within γ_10·Σ|w|·|x|, and checks for a missing barrier.

Hints
    1. Number the patch's (TY + 2)(TX + 2) cells linearly and let the block's threads walk
       them in steps of TX · TY: ``for p in range(t, PH * PW, TX * TY)`` with
       ``t = ty · TX + tx``; cell p is patch row ``p // PW``, column ``p % PW``.
    2. Patch cell (pr, pc) is image element (tile row0 + pr − 1, tile col0 + pc − 1).
    3. One barrier between staging and computing; threads outside the image still help load.

Check: ``python -m simt_tiles.exercises check halo_tile halo_tile.py``
"""

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

        # TODO: stage all PH × PW cells (zeros outside the image), not just the centre
        r, c = row0 + ty, col0 + tx
        patch[ty + 1, tx + 1] = image[r, c] if r < h and c < wd else DT(0)
        cuda.syncthreads()  # RAW: the patch is staged

        if r < h and c < wd:
            acc = DT(0)
            for di in range(3):
                for dj in range(3):
                    acc += w[di, dj] * patch[ty + di, tx + dj]
            out[r, c] = acc

    return correlate3x3_kernel
