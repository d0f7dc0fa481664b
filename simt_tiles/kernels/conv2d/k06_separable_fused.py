"""k06 — a separable filter in one kernel: column pass into shared memory, barrier, row pass.

What it computes (``correlate_separable``)
    The 2-D correlation with the rank-1 filter ``wy[:, None] · wx[None, :]``
    (KH × KW), as two 1-D passes: a column pass with ``wy`` then a row pass
    with ``wx`` — KH + KW multiply-adds per output instead of KH·KW
    (7 × 7: 14 instead of 49).  The mode semantics are the 2-D ones,
    ``scipy.ndimage.correlate(image, outer)``: the column pass runs over the
    halo columns too, so in mode "constant" a halo column carries
    Σ wy·cval, exactly what the 2-D filter sees there.  (scipy's chained
    ``correlate1d`` pads the intermediate with cval itself — different in
    mode "constant" when cval ≠ 0 and Σ wy ≠ 1; every other mode agrees, see
    the package docstring.)

What changed versus the two-pass composition
    ``variant="two_pass"`` runs ``correlate1d`` twice (the conv2d ladder with a
    KH × 1, then a 1 × KW filter): the intermediate image makes a round trip
    through global memory — read the image, write the intermediate, read it,
    write the output: 4 image-sized transfers instead of 2.  Here one block
    does both passes on its tile:

    1. stage the patch (TH + KH − 1) × (TW + KW − 1) with the boundary mode
       applied while loading (k05's loader: an interior fast path with
       constant offsets, an edge path mapping columns once per thread), and
       ``wy``, ``wx`` — barrier;
    2. column pass: thread (tx, ty) takes patch columns tx + j·BX and RY
       consecutive rows; it loads RY + KH − 1 values of its column into
       registers once and writes RY results of the TH × (TW + KW − 1)
       intermediate ``mid`` in shared memory — barrier;
    3. row pass: RX consecutive outputs of RY rows per thread from a register
       window of RX + KW − 1 values of ``mid`` (k03's register blocking);
    4. results staged in shared memory (over the patch) and stored row by row,
       coalesced (k05) — two barriers.

Rounding
    The intermediate is rounded to the image's dtype (as the two-pass path and
    scipy's chained ``correlate1d``).  Against the exact 2-D correlation, two
    dot products of KH and KW terms give
    |out − exact| ≤ (γ_KH + γ_KW + γ_KH·γ_KW)·Σ|wy_a|·|wx_b|·|x| ≤
    γ_{KH+KW}·Σ|wy_a|·|wx_b|·|x| (one more term for mode "constant", whose
    cval is rounded to the dtype) — :func:`simt_tiles.kernels.conv2d.reference.
    correlate_separable_reference`.

Memory traffic (teaching number)
    Global: (TH + KH − 1)·(TW + KW − 1) loads and TH·TW stores per block —
    default 16 × 96 tile, 7 + 7 taps: 1.46 loads and 1 store per output.
    The two-pass path with k03's 8 × 96 tiles: 1.75 + 1.06 loads and 2 stores
    per output, and of those, 2 loads and 2 stores reach DRAM (the halo
    re-reads mostly hit L2) against 1 + 1 here.  Shared: column pass
    (RY + KH − 1)/RY loads per intermediate value (4 for RY = 2, KH = 7),
    row pass (RX + KW − 1)/RX per output (3 for RX = 3, KW = 7), weights
    read from shared memory as broadcasts.  Shared memory per block:
    ((TH + KH − 1) + TH)·(TW + KW − 1) + KH + KW elements (15.6 KB for the
    default float32 7 + 7 taps, 31.1 KB float64; RY = 4 would not fit
    float64 in 48 KB).

Shared-memory banks
    Column pass: consecutive lanes read and write consecutive columns —
    conflict-free.  Row pass: lane tx reads ``mid[r, tx·RX + q]``, RX words
    apart — odd RX is conflict-free.

Filter shape compiled in (config fields ``kh``/``kw``/``mode``, set by the
launcher), filter values passed as arrays: one compilation per shape, as k03.

Headline (H200, benchmarks/results/conv_h200.json, impl "separable (wy, wx)"): 2.69 TB/s on 8192² 7x7 constant, 63% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda, int64, uint32, void

from ...runtime import cdiv, numba_dtype
from ._common import SEPARABLE, TINY_WEIGHT, FilterRung, Mode
from ._common import RegisterTileConfig, geometry
from ._staging import make_patch_loader, make_tile_store


@dataclasses.dataclass(frozen=True)
class Config(RegisterTileConfig):
    """A ``block_x × block_y`` block; each thread computes ``ry × rx`` outputs
    (``rx`` consecutive columns of ``ry`` consecutive rows): output tile
    ``(ry·block_y) × (rx·block_x)`` — k05's tiling and fields
    (``_common.RegisterTileConfig``), with ``ry = 2`` by default (float64 fits).

    ``kh`` (length of ``wy``), ``kw`` (length of ``wx``) and ``mode`` are set by
    the launcher from the call."""

    ry: int = 2

    def smem_bytes(self, itemsize):
        th, tw = self.tile()
        sw = tw + self.kw - 1
        return ((th + self.kh - 1) * sw + th * sw + self.kh + self.kw) * itemsize


# A call replaces kh, kw and mode; the presets' values only choose what the compile
# gate builds (sim: an even length and mode wrap).
PRESETS = {
    "sim": Config(block_x=2, block_y=2, rx=2, ry=2, kh=2, kw=3, mode=Mode.WRAP),
    "default": Config(block_x=32, block_y=8, rx=3, ry=2, kh=7, kw=7, mode=Mode.MIRROR),
    # float32 only (the compile gate builds a "_float32" preset for float32 alone): 32×8 of 4×5,
    # 46.5 KB for 7 + 7 taps; correlate_separable tries it first for float32 without a config
    # (SEPARABLE_FLOAT32_PRESET) and falls back to "default" when the filters do not fit
    "fast_float32": Config(block_x=32, block_y=8, rx=5, ry=4, kh=7, kw=7, mode=Mode.MIRROR),
}


def signature(dtype):
    """``void(image, wy, wx, out, cval, anchor_h, anchor_w)``; wy and wx are 1-D
    and may be strided views."""
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[:], t[:], t[:, ::1], t, int64, int64)


def make_kernel(config: Config, dtype):
    BX, RX, RY, KH, KW = config.block_x, config.rx, config.ry, config.kh, config.kw
    TH, TW = config.tile()
    SH, SW = TH + KH - 1, TW + KW - 1  # the patch: output tile plus halo (plain constants)
    COL_WIN = RY + KH - 1  # values of one column a thread reads in the column pass
    WIN = RX + KW - 1  # values of one intermediate row a thread reads in the row pass
    OUTS = RY * RX
    THREADS = config.threads
    LOAD_COLS = cdiv(SW, BX)  # patch columns per thread (the column pass's too)
    TAPS = KH + KW  # wy and wx, staged together
    W_LOADS = cdiv(TAPS, THREADS)
    DT = numba_dtype(dtype)
    # scipy's correlate with outer(wy, wx) skips zero taps: skipping a zero wy[a] in the
    # column pass and a zero wx[b] in the row pass skips them all (_common.TINY_WEIGHT)
    TINY = DT(TINY_WEIGHT)
    load_patch = make_patch_loader(config)  # k05's, inlined (see _staging)
    store_tile = make_tile_store(config)

    def conv2d_k06_separable_fused(image, wy, wx, out, cval, anchor_h, anchor_w):
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        tid = ty * uint32(BX) + tx
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH  # the block's output tile starts here
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SW), DT)
        mid = cuda.shared.array((TH, SW), DT)  # the column pass's result
        w_s = cuda.shared.array(TAPS, DT)  # wy, then wx

        # --- 1. stage the patch (k05's loader) and the weights -------------------------
        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tx, ty)
        for p in range(W_LOADS):
            e = tid + uint32(p * THREADS)
            if e < KH:
                w_s[e] = wy[e]
            elif e < TAPS:
                w_s[e] = wx[e - uint32(KH)]
        cuda.syncthreads()  # RAW: patch and weights complete

        # --- 2. column pass: mid[r, c] = sum_a wy[a] * patch[r + a, c] -----------------
        col = cuda.local.array(COL_WIN, DT)  # registers: unrolled indices only
        r0 = ty * uint32(RY)  # this thread's first row (column pass and row pass)
        for j in range(LOAD_COLS):
            c = tx + uint32(j * BX)
            if (j + 1) * BX <= SW or c < SW:
                for q in range(COL_WIN):  # RY + KH - 1 loads serve RY * KH multiply-adds
                    col[q] = patch[r0 + uint32(q), c]
                for oy in range(RY):
                    s = DT(0)
                    for a in range(KH):
                        wv = w_s[a]
                        if abs(wv) > TINY:
                            s += wv * col[oy + a]
                    mid[r0 + uint32(oy), c] = s
        cuda.syncthreads()  # RAW: mid complete (and WAR: the patch is free to reuse below)

        # --- 3. row pass: out[r, c] = sum_b wx[b] * mid[r, c + b], RY x RX per thread ---
        acc = cuda.local.array(OUTS, DT)
        win = cuda.local.array(WIN, DT)
        c0 = tx * uint32(RX)
        for oy in range(RY):
            for q in range(WIN):  # RX + KW - 1 loads serve RX * KW multiply-adds
                win[q] = mid[r0 + uint32(oy), c0 + uint32(q)]
            for i in range(RX):
                acc[oy * RX + i] = DT(0)
            for b in range(KW):
                wv = w_s[KH + b]  # one broadcast load, reused RX times
                if abs(wv) > TINY:
                    for i in range(RX):
                        acc[oy * RX + i] += wv * win[i + b]

        # --- 4. stage the results over the patch, then store whole rows (k05) -----------
        store_tile(out, patch, acc, row0, col0, tx, ty, h, w)  # barrier, then whole rows

    return conv2d_k06_separable_fused


RUNG = FilterRung("k06_separable_fused", Config, PRESETS, make_kernel, geometry, signature, bind=SEPARABLE)
