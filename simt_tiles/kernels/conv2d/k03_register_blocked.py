"""k03 — register blocking: each thread computes RX outputs of a row, reusing loaded values from registers.

What changed versus k02
    In k02 every multiply-add reads two shared-memory values (an image value
    and a weight).  Neighbouring outputs of one row need almost the same image
    values: outputs j … j + RX − 1 with a KW-wide filter together read only
    RX + KW − 1 values per filter row.  So each thread now owns RX consecutive
    outputs of a row.  Per filter row it loads those RX + KW − 1 values from
    shared memory into a register array ``win`` once, then runs RX × KW
    multiply-adds from registers, reading each weight once (a broadcast) and
    reusing it RX times.  The staging (patch + halo, boundary mode applied
    while loading, one barrier) is k02's, for a tile RX times wider.

    ``win`` and the RX accumulators are ``cuda.local.array``s indexed only by
    the unrolled constants of ``range(WIN)``, ``range(KW)`` and ``range(RX)``,
    so they stay in registers — the compile gate checks there is no stack frame.

Memory traffic (teaching number)
    Shared loads per output: KH·(RX + KW − 1)/RX image values + KH·KW/RX
    weights, instead of 2·KH·KW (k02).  5 × 5 filter, RX = 3: 11.7 + 8.3 = 20
    instead of 50 (2.5× fewer).  Global loads per block: (TH + KH − 1)·(RX·TW
    + KW − 1) + KH·KW for RX·TH·TW outputs — TH × RX·TW = 8 × 96, 5 × 5:
    1.56 image loads per output (k02's 8 × 32 tile: 1.69).

Shared-memory banks
    Lane tx of a warp (one ty when block_x ≥ 32) reads ``patch[ty + a, tx·RX + q]``:
    addresses RX words apart.  32 lanes hit 32 / gcd(RX, 32) distinct banks,
    so an even RX costs a gcd(RX, 32)-way conflict (RX = 4: 4-way) while an
    odd RX is conflict-free — hence RX = 3 in the default preset.  (float64: a
    half-warp's 16 lanes read 2·RX words apart; again conflict-free for odd RX.)
    The weight ``w_s[a, b]`` is a broadcast.

The filter shape is compiled in, as in k02 (config fields ``kh``/``kw``/``mode``
set by the launcher); the patch shape and the register-array length
``WIN = RX + KW − 1`` are plain constants computed in the factory.  This is the
default rung (``variant=None``): it compiles once per filter *shape*.

Headline (H200, benchmarks/results/conv_h200.json): 0.54 TB/s on 8192² 7x7 constant, 13% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda

from ...runtime import cdiv, numba_dtype
from ._common import (
    SLICES_GATE,
    TINY_WEIGHT,
    WEIGHTS_ARGUMENT,
    FilterRung,
    Mode,
    RowTileConfig,
    geometry,
    on_grid_z,
    signature,
)
from .k02_halo_tiled import make_patch_loader


@dataclasses.dataclass(frozen=True)
class Config(RowTileConfig):
    """A ``block_x × block_y`` block; each thread computes ``rx`` consecutive
    outputs of one row, so the output tile is ``block_y × (rx·block_x)``
    (``_common.RowTileConfig``: the fields, the tile, the patch, the geometry).

    ``kh``, ``kw`` (the filter shape compiled in) and ``mode`` are set by the
    launcher from the call; the presets' values are what the compile gate builds."""

    def smem_bytes(self, itemsize):
        rows, cols = self.patch()
        return (rows * cols + self.kh * self.kw) * itemsize  # the patch and the weights


# A call replaces kh, kw and mode; the presets' values only choose what the compile
# gate builds (sim: an even filter side and another mode than reflect).
PRESETS = {
    "sim": Config(block_x=2, block_y=4, rx=2, kh=2, kw=5, mode=Mode.WRAP),
    "default": Config(block_x=32, block_y=8, rx=3, kh=5, kw=5, mode=Mode.REFLECT),
}


def make_kernel(config: Config, dtype, all_taps=False, slices=False):
    BX, RX, KH, KW = config.block_x, config.rx, config.kh, config.kw
    TH, TW = config.tile()
    SH, SW = TH + KH - 1, TW + KW - 1  # the patch: output tile plus halo (plain constants)
    WIN = RX + KW - 1  # image values one thread needs per filter row (register array length)
    THREADS = config.threads
    TAPS = KH * KW
    W_LOADS = cdiv(TAPS, THREADS)
    DT = numba_dtype(dtype)
    TINY = DT(TINY_WEIGHT)  # scipy skips taps with |w| <= 2**-52 (_common.TINY_WEIGHT)
    ALL_TAPS = bool(all_taps)  # correlate1d: every tap counts (0·NaN = NaN, as scipy)

    load_patch = make_patch_loader(SH, SW, THREADS, config.mode)  # k02's cooperative halo load

    def conv2d_k03_register_blocked(image, weights, out, cval, anchor_h, anchor_w):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * BX + tx
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH  # the block's output tile starts here
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SW), DT)
        w_s = cuda.shared.array((KH, KW), DT)

        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tid)  # as k02
        for p in range(W_LOADS):
            e = tid + p * THREADS
            if e < TAPS:
                w_s[e // KW, e % KW] = weights[e // KW, e % KW]
        # RAW hazard: no thread may read the patch or the weights before every thread
        # has stored its elements.  (Written once: no WAR hazard, no second barrier.)
        cuda.syncthreads()

        acc = cuda.local.array(RX, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        for i in range(RX):
            acc[i] = DT(0)
        c0 = tx * RX  # this thread's first output column within the tile
        for a in range(KH):
            for q in range(WIN):  # RX + KW - 1 shared loads serve RX * KW multiply-adds
                win[q] = patch[ty + a, c0 + q]
            for b in range(KW):
                wv = w_s[a, b]  # one broadcast load, reused RX times from a register
                if ALL_TAPS or abs(wv) > TINY:  # one test per tap, not per output
                    for i in range(RX):
                        acc[i] += wv * win[i + b]

        row = row0 + ty
        if row < h:
            for i in range(RX):
                col = col0 + c0 + i
                if col < w:
                    out[row, col] = acc[i]

    return on_grid_z(conv2d_k03_register_blocked) if slices else conv2d_k03_register_blocked  # (_common)


# variant=None's rung past 7 taps, so it takes a volume's slices in one launch too: the gate builds both forms
RUNG = FilterRung("k03_register_blocked", Config, PRESETS, make_kernel, geometry, signature, gate=SLICES_GATE,
                  bind=WEIGHTS_ARGUMENT, slices=True)
