"""k02 — halo tiling: a block stages its output tile plus a filter-sized halo in shared memory.

What changed versus k01
    A block of TW × TH threads owns a TH × TW tile of the output.  The windows
    of those outputs together cover an (TH + KH − 1) × (TW + KW − 1) patch of
    the extended image: the tile plus a *halo* of KH − 1 rows and KW − 1
    columns.  All threads copy that patch into shared memory cooperatively
    (consecutive threads take consecutive elements of a row: coalesced), and
    the boundary mode is applied *while loading* — each patch element is
    mapped once (reflect / mirror fold with a modulo, so a filter larger than
    the image works; constant stores cval).  The KH × KW weights are staged
    too.  After one barrier every thread computes its output from shared
    memory only: no index mapping, no bounds checks in the inner loop.

Memory traffic (teaching number)
    Global loads per block: (TH + KH − 1)·(TW + KW − 1) image values + KH·KW
    weights for TH·TW outputs, instead of 2·TH·TW·KH·KW (k01).  TH × TW =
    8 × 32, 5 × 5 filter: 12·36 + 25 = 457 loads instead of 12 800 (28×
    fewer); each image value is reused up to KH·KW = 25 times from shared
    memory.  Shared memory per block: ((TH + KH − 1)·(TW + KW − 1) + KH·KW)
    elements (5 × 5, float32: 1.8 KiB).

Shared-memory banks
    Inner loop: lanes of a warp (consecutive tx, one ty when TW ≥ 32) read
    ``patch[ty + a, tx + b]``: 32 consecutive words — no conflicts.  The
    weight ``w_s[a, b]`` is one address for the warp: a broadcast.

The filter shape is compiled in
    The patch's shape is a plain constant computed here in the factory
    (``SH = TH + KH − 1``): the GPU compiler rejects expressions as shared-array
    shapes.  So the config carries ``kh``/``kw`` (and ``mode``); the launcher
    sets them from the call (``_common.specialise``) and ``Rung.kernel``
    compiles once per (tile, filter shape, mode, dtype).  A filter whose patch
    does not fit in 48 KiB of static shared memory raises ConfigError here;
    ``variant=None`` then falls back to k01.

Headline (H200, benchmarks/results/conv_h200.json): 0.35 TB/s on 8192² 7x7 constant, 8.2% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda

from ...runtime import TileConfig, cdiv, grid_for, numba_dtype
from ._common import TINY_WEIGHT, WEIGHTS_ARGUMENT, FilterRung, Mode, mode_rule, signature
from ._staging import inline, make_extend


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A ``tile_w × tile_h`` block computes a ``tile_h × tile_w`` output tile.

    ``kh``, ``kw`` (the filter shape compiled in) and ``mode`` are set by the
    launcher from the call; the presets' values are what the compile gate builds.
    The later tiled rungs take their config from ``_common`` (``RowTileConfig``,
    ``RegisterTileConfig``); this one stays here, as the lesson: the block *is* the
    tile, one output per thread, and the patch is the tile plus the halo."""

    tile_w: int = 32
    tile_h: int = 8
    kh: int = 5
    kw: int = 5
    mode: int = Mode.REFLECT

    def block(self):
        return (self.tile_w, self.tile_h)

    def smem_bytes(self, itemsize):
        patch = (self.tile_h + self.kh - 1) * (self.tile_w + self.kw - 1)
        return (patch + self.kh * self.kw) * itemsize

    def rules(self):
        yield mode_rule(self)


# A call replaces kh, kw and mode; the presets' values only choose what the compile
# gate builds (sim: an even filter side and another mode than reflect).
PRESETS = {
    "sim": Config(tile_w=4, tile_h=4, kh=4, kw=3, mode=Mode.MIRROR),
    "default": Config(tile_w=32, tile_h=8, kh=5, kw=5, mode=Mode.REFLECT),
}


def make_patch_loader(sh: int, sw: int, threads: int, mode):
    """``load_patch(image, patch, cval, top, left, tid)``: the block's threads copy the
    ``sh × sw`` patch whose element (0, 0) is coordinate (``top``, ``left``) of the
    extended image into the shared array ``patch`` — consecutive threads take
    consecutive elements of a row (coalesced), and the boundary mode is applied here,
    once per element (``extend``; constant mode stores ``cval``).  An ``inline="always"``
    device function (see ``_staging``): k03 and k04 load their patch with it too."""
    PATCH = sh * sw
    SW = sw
    THREADS = threads
    PATCH_LOADS = cdiv(PATCH, THREADS)  # elements of the patch each thread copies (at most)
    MODE = int(mode)
    CONSTANT = int(Mode.CONSTANT)
    extend = make_extend(mode)  # the boundary mapping, inlined (see _staging)

    @inline
    def load_patch(image, patch, cval, top, left, tid):
        h, w = image.shape
        for p in range(PATCH_LOADS):
            e = tid + p * THREADS
            if e < PATCH:
                r = e // SW
                c = e % SW
                gr = extend(top + r, h)
                gc = extend(left + c, w)
                if MODE == CONSTANT:
                    patch[r, c] = cval if gr < 0 or gc < 0 else image[gr, gc]
                else:
                    patch[r, c] = image[gr, gc]

    return load_patch


def make_kernel(config: Config, dtype, all_taps=False):
    TW, TH, KH, KW = config.tile_w, config.tile_h, config.kh, config.kw
    SH, SW = TH + KH - 1, TW + KW - 1  # the patch: output tile plus halo (plain constants)
    THREADS = config.threads
    TAPS = KH * KW
    W_LOADS = cdiv(TAPS, THREADS)
    DT = numba_dtype(dtype)
    TINY = DT(TINY_WEIGHT)  # scipy skips taps with |w| <= 2**-52 (_common.TINY_WEIGHT)
    ALL_TAPS = bool(all_taps)  # correlate1d: every tap counts (0·NaN = NaN, as scipy)
    load_patch = make_patch_loader(SH, SW, THREADS, config.mode)

    def conv2d_k02_halo_tiled(image, weights, out, cval, anchor_h, anchor_w):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * TW + tx
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH  # the block's output tile starts here
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SW), DT)
        w_s = cuda.shared.array((KH, KW), DT)

        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tid)  # the halo, see above
        for p in range(W_LOADS):
            e = tid + p * THREADS
            if e < TAPS:
                w_s[e // KW, e % KW] = weights[e // KW, e % KW]
        # RAW hazard: no thread may read the patch or the weights before every thread
        # has stored its elements.  (One barrier: shared memory is written once, so
        # there is no WAR hazard to guard.)
        cuda.syncthreads()

        row = row0 + ty
        col = col0 + tx
        if row < h and col < w:  # threads past the edge loaded their share, then stop here
            acc = DT(0)
            for a in range(KH):
                for b in range(KW):
                    wv = w_s[a, b]
                    if ALL_TAPS or abs(wv) > TINY:  # a zero tap adds nothing (not 0·NaN)
                        acc += wv * patch[ty + a, tx + b]
            out[row, col] = acc

    return conv2d_k02_halo_tiled


def geometry(config: Config, h: int, w: int):
    """One block per tile_h × tile_w output tile; grid x over columns, y over rows."""
    return grid_for((w, h), (config.tile_w, config.tile_h)), config.block()


RUNG = FilterRung("k02_halo_tiled", Config, PRESETS, make_kernel, geometry, signature, bind=WEIGHTS_ARGUMENT)
