"""k02 — shared-memory tiling with register blocking: implicit GEMM in SIMT, one channel step at a time.

What changed versus k01
    A block owns a ``TH × TW`` tile of output pixels of one image for ``CO``
    output channels and walks the input channels ``CK`` at a time.  Per step:

    1. stage the CK input patches — each the tile plus a halo of KH − 1 rows
       and KW − 1 columns, ``(TH + KH − 1) × (TW + KW − 1)`` — and the
       ``CO × CK × KH × KW`` weights in shared memory.  Zero padding is
       applied while loading (a coordinate outside the input stores 0), as
       are the tails: channels ≥ C_in and output channels ≥ C_out store 0.
       Consecutive threads load consecutive columns of an input row
       (coalesced along W); weights are loaded in runs of 4 consecutive
       reduction indices (16 bytes) of 8 output channels per warp and stored
       transposed, ``w_s[k, o]``, so that a thread's channels are adjacent;
    2. barrier (RAW: nobody reads before everything is stored);
    3. accumulate from shared memory and registers;
    4. barrier (WAR: nobody overwrites a tile another thread still reads).

    Each thread owns RCO output channels × RP consecutive pixels of one tile
    row: RCO·RP accumulators.  Per (channel, filter row a) it reads the
    RP + KW − 1 input values its pixels need into a register window ``win``
    once, then for each filter column b reads its RCO weights (adjacent in
    ``w_s``: 128-bit loads when RCO is a multiple of 4, the same address for
    every lane of the warp — a broadcast) and runs RCO × RP multiply-adds
    from registers.  ``acc``, ``win`` and ``wr`` are ``cuda.local.array``s
    indexed only by unrolled constants, so they stay in registers (the compile
    gate checks there is no stack frame).

    The kernel body is in ``_tiled.py`` (for its length); k03 writes the
    same pieces out in its own file.

Memory traffic (teaching number)
    Global loads per block and channel step: CK·(TH + KH − 1)·(TW + KW − 1)
    input values + CO·CK·KH·KW weights for CO·TH·TW·CK·KH·KW multiply-adds.
    Default (TH × TW = 8 × 14, CO = 64, CK = 4), 3 × 3 filter: 640 + 2304 =
    2944 loads for 258 048 FMAs — 88 FMAs per global load (k01: 0.5).
    Shared loads per thread and (channel, filter row): RP + KW − 1 = 9 input
    values and KW·RCO = 24 weights (6 128-bit broadcasts) for KW·RCO·RP = 168
    FMAs: 11 FMAs per shared-load instruction, 5 per value.

Shared-memory banks
    Thread t takes pixel group ``g = t % PG`` (PG = TH·TW/RP) and output
    channel group ``t // PG``; pixel group g is tile row ``g % TH``, columns
    ``(g // TH)·RP …``.  So 8 consecutive lanes read 8 consecutive tile rows
    of one column group, and the patch's rows are padded to a stride of
    4·odd words (``_common.padded_row``): those reads hit distinct banks.  The
    weight rows are padded to 8 (mod 16) words so that the transposed stores
    are conflict-free too (``_common.padded_co``).

Staging cost
    Offsets are unsigned 32-bit (``_common``).  What does not change from one
    channel step to the next is computed once, before the channel loop: the
    offsets of the input elements a thread stages (``x_off``; a position in
    the zero padding gets 2**31, so the one test "offset < end of the image"
    rejects padding and missing channels alike) and of its first weight
    (``_common.WeightStaging``: later passes add constants).  A step's staging
    is then ~8 instructions per element.  SASS of the default preset, 3 × 3,
    float32: ~240 instructions of staging per step against 12 × 190 in the
    FMA loop (one per channel and filter row), 168 of every 190 FFMA.

Why 8 × 14 pixels, 64 channels, 7 pixels per thread (the "default" preset)
    ResNet's spatial sizes are multiples of 7 (56, 28, 14, 7): TW = 14 and
    TH = 8 cover 56 × 56 without idle pixels (14 × 14: 87.5 % of the
    rows).  RCO × RP = 8 × 7 = 56 accumulators per thread, 128 threads, ≤ 128
    registers (launch bounds ask for 4 blocks per SM: 16 warps; ptxas: 111).
    CK = 4: 13.6 KiB of shared memory (float32).  A layer with few output pixels
    (N = 8, C = 256, 14 × 14: 401 k outputs) gives too few such blocks to
    fill 132 SMs; the "small" preset (7 × 14 pixels, 32 channels, 2 × 7
    per thread) makes 4× more threads — ``conv2d_nchw`` picks it when the
    default would not fill the GPU (see ``__init__``).

The filter shape is compiled in: the patch shape, the window length
``RP + KW − 1`` and the unrolled loops need it.  The launcher sets ``kh``/``kw``
from the call (``_common.specialise``); a filter whose staging does not fit in
48 KiB gets a smaller CK (presets only), else k01 (``variant=None``).

Why the weights and not the inputs are the broadcast
    A warp holds pixel groups of at most 2–3 output-channel groups: the weight
    reads are (near-)broadcasts and the input windows are the per-lane reads.
    Per (channel, filter row) a thread reads KW·RCO weights but only RP + KW − 1
    inputs, so the many reads are the cheap ones (broadcast, 128-bit).

Headline (H200, benchmarks/results/conv_h200.json): 26.0 TFLOP/s on N32 C64 56x56 3x3 p1, 0.97× cuDNN
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._common import TiledConfig, signature, tiled_geometry, tiled_launch_bounds
from ._tiled import make_body


@dataclasses.dataclass(frozen=True)
class Config(TiledConfig):
    """See :class:`~simt_tiles.kernels.conv_nchw._common.TiledConfig` (one shared-memory stage)."""


# A call replaces kh and kw; the presets' values only choose what the compile gate
# builds (sim: an even filter width).
PRESETS = {
    "sim": Config(tile_h=2, tile_w=4, co=2, ck=2, rco=2, rp=2, kh=3, kw=2, min_blocks=1),
    "default": Config(tile_h=8, tile_w=14, co=64, ck=4, rco=8, rp=7, kh=3, kw=3, min_blocks=4),
    "small": Config(tile_h=7, tile_w=14, co=32, ck=8, rco=2, rp=7, kh=3, kw=3, min_blocks=2),
}


def make_kernel(config: Config, dtype):
    return make_body(config, dtype, "conv_nchw_k02_smem_tiled", double_buffer=False)


RUNG = Rung("k02_smem_tiled", Config, PRESETS, make_kernel, tiled_geometry, signature, tiled_launch_bounds)
