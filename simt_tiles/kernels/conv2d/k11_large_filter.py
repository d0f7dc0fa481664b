"""k11 — large filters: filter rows in a run-time loop, weights in shared memory, 128-bit loads into a register tile.

What changed versus k10
    k10 writes every patch row and every tap out (its weights are kernel
    parameters at constant indices); past 7 × 7 that stops, so filters
    of 8 taps or more on an axis fell to k03 — 4.6–9.2 % of the copy at
    9 × 9 … 15 × 15.  There the arithmetic is the wall, not DRAM: a K × K
    filter does K² FMAs for the 8 bytes an output moves, 2K²/8 FLOP per
    byte, against the H200's ridge of 55.9 TFLOP/s ÷ 4.27 TB/s ≈ 13 — past
    it from 8 × 8 (64 taps; 7 × 7 sits at 12).  An FMA-bound kernel must
    spend (nearly) every issue slot on an FFMA, with a code size and a
    compile time that do not grow with the filter.  k11:

    * **stages the filter in shared memory** (a device array; NumPy weights
      are uploaded), rows padded to a multiple of 4 values so that each
      group of 4 weights is one 128-bit load — a broadcast (one address per
      warp): a new filter value compiles nothing, as k10;
    * **walks the patch rows in a run-time loop.**  Output rows oy of a
      thread read patch rows r0 + oy + a (filter row a).  Patch row p is
      loaded once into registers — the RX + KC − 1 values a chunk of KC
      filter columns needs, with ``load4`` (LDS.128) — and added to every
      output row oy through filter row a = p − oy: its KC weights (load4,
      broadcast), then RX·KC FMAs from registers.  Only a patch row's work
      is written out (generated source, :mod:`simt_tiles.codegen`): filter
      rows are the loop, and past two full chunks so are the chunks, so the
      code holds at most RY·RX·(3·KC − 1) FMAs, whatever KH and KW;
    * **tests only where it must.**  The first and last RY − 1 patch rows
      miss some output rows' filter rows (a = p − oy outside 0 … KH − 1): one
      loop takes those rows with a block-uniform test per output row (a
      wrapped-around unsigned a fails ``a < KH``); a second loop takes the
      KH − RY + 1 middle rows with none.
    * Zero taps as k10: the staging threads set every skipped weight
      (``|w| <= 2**-52``, scipy's rule) to 0 and say so; a block whose patch
      then holds a NaN or inf takes a plain loop over the taps that skips
      them (rare: finite data never pays, a filter without such a tap not
      even for the scan).

The arithmetic of one (patch row, chunk) of a thread, middle loop
    FMAs RY·RX·KC; shared-load instructions ⌈(RX + KC − 1)/4⌉ (window) +
    RY·⌈KC/4⌉ (weights, broadcasts), so about 4·RX FMAs per load.  float32
    preset ``fast_float32`` (4 × 16 outputs, KC 16): 1024 FFMAs for 7 + 16
    LDS.128 and 3 LDS.32 — sm_90 SASS of the middle loop: 94.7 / 96.2 / 97.1 %
    of its instructions FFMAs at 9 × 9 / 15 × 15 / 31 × 31, the edge loop
    90.3 / 93.4 / 95.1 % (its test per output row: ~6 instructions).  The
    edge rows hold (RY − 1)/KH of the FMAs (RY = 4: a fifth at 15 × 15).
    Outside the loops a thread copies (TH + KH − 1)(TW + KW − 1)/threads patch
    values and stores its 64 outputs, 16 128-bit stores from registers
    (~350 instructions: 7 % of its 5184 FFMAs at 9 × 9, 2.5 % at 15 × 15).  float64 (``default``: 8 × 4 outputs, KC 8):
    256 DFMAs for 6 + 32 loads; a DFMA holds the FP64 pipe 2 clocks, so the
    loads and the test issue in the free slots: the pipe, not the issue, is
    the limit.

Memory traffic (teaching number)
    Global: the patch (TH + KH − 1)·(TW + KW − 1) and the KH·KW weights per
    TH·TW outputs — 32 × 128 tile, 15 × 15: 1.6 loads per output, from L2
    (DRAM still 8 bytes per output), beside 225 FMAs per output.  Stores:
    k07's — a whole tile whose rows start 16-byte aligned (``out`` aligned, its
    width a multiple of 4) one 128-bit store per 4 outputs from registers;
    else (edge tiles, other widths) staged through shared memory as k05's.

Shared-memory banks
    Window loads: lane tx reads 16 bytes at ``patch[r, tx·RX + …]``; lanes
    RX·itemsize bytes apart fall on RX·itemsize/16 times fewer bank groups than
    lanes: ``fast_float32`` (64 bytes) 16 wavefronts a window load, 4 without
    the conflict.  Per patch row a warp asks 96 window + 24 broadcast wavefronts
    for 576 FFMAs at 9 × 9; an SM's four schedulers issue FFMAs side by side
    while its shared memory serves one wavefront a clock: ~83 % busy (the
    simulator's bank model, ``simt_tiles.analyze``), ~55 % at 31 × 31.
    ``Config.skew`` (off) pads a patch row by 16 bytes every 64 or 128: the 8
    lanes land on 8 bank groups, 4 wavefronts a window load (the H100: bank
    conflicts −88 %): 9 × 9 0.364 → 0.311 ms, 31 × 31 3.15 → 2.73 ms on the
    H100, the float32 default (``dispatch.LARGE_SKEW``; :func:`skew`,
    :func:`pitch`; conv2d.md, sessions 40-41).

Register tile: RY·RX accumulators, the window (RX + KC − 1) and one chunk's KC
weights; ``min_blocks`` holds ptxas to the launch bounds (the compile gate: no
spills; ``fast_float32`` 124–128 registers at 9 × 9 … 31 × 31, 8 blocks of 64
threads per SM).

Headline: none yet — not measured on a GPU (benchmarks/lab/large_filter_probe.py on an H100/H200)
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
from numba import boolean, cuda, int64, uint32, void

from ... import codegen
from ...runtime import SM_SMEM, SMEM_ALIGN, Gate, cdiv, numba_dtype
from ...vector import aligned
from ._common import (
    Binding,
    FilterCall,
    FilterRung,
    Mode,
    RegisterTileConfig,
    _weights_argument,
    geometry,
    image_type,
    on_grid_z,
)
from ._staging import inline, make_output_store, make_patch_loader, make_patch_scan, make_weight_stager


@dataclasses.dataclass(frozen=True)
class Config(RegisterTileConfig):
    """A ``block_x × block_y`` block of threads with ``ry × rx`` outputs each (the tile
    ``(ry·block_y) × (rx·block_x)``, ``_common.RegisterTileConfig``); ``kc``: filter columns per
    chunk (the widest chunk the code holds; a filter up to ``kc`` wide is one chunk);
    ``min_blocks``: the launch bounds' blocks per SM for float32 (float64: ``min_blocks64``).

    ``kh``, ``kw`` and ``mode`` are set by the launcher from the call."""

    kc: int = 16
    min_blocks: int = 1
    min_blocks64: int = 1
    skew: int = 1

    def rules(self):
        yield from super().rules()
        yield ("kc", self.kc <= 32, "kc <= 32 (the generated chunk's code grows with it)")
        yield ("skew", self.skew == 1 or (self.rx % 4 == 0 and self.skew % (4 * self.rx) == 0),
               "skew: 1 (none), or bytes a multiple of a thread's float32 outputs' row (4·rx, rx a multiple of 4; "
               "float64 skews where it is a multiple of 8·rx)")

    def smem_bytes(self, itemsize):
        rows = self.patch()[0]
        weights = self.kh * 4 * cdiv(self.kw, 4)  # rows padded to 4 values: 128-bit loads
        return (rows * pitch(self, itemsize) + weights) * itemsize


def skew(config: Config, itemsize: int) -> tuple[int, int]:
    """``(V, P)``: a patch row holds V values of padding (one 16-byte unit) after every P values (``config.skew``
    bytes; 1: none), or ``(0, 1)``: none.  Lanes tx read windows RX values apart: with RX·itemsize = 64 bytes
    their 128-bit loads fall on 2 of a row's 8 bank groups of 16 bytes.  A unit after every G = P / RX windows
    moves lane tx's k-th window unit on by ⌊(tx + k) / G⌋: G = 1 (64 bytes) puts 8 lanes on 8 groups for
    every k; G = 2 (128 bytes, half the memory) for even k, and :func:`pitch` starts the half-warp's second
    thread row 64 bytes on, onto the groups the first row's odd windows leave free.  It applies where P is a
    whole number of lanes' windows (so float64 ignores a period that is not) and the chunks are written out."""
    lane, period = config.rx * itemsize, config.skew
    if period == 1 or period % lane or lane % 16 or chunks(config)[1] > WRITTEN_CHUNKS:
        return 0, 1
    return 16 // itemsize, period // itemsize


def blocks_per_sm(config: Config, itemsize: int) -> int:
    """Blocks of ``config`` an sm_90 SM holds: its launch bounds' (the registers ptxas keeps to) or fewer where
    the patch's shared memory (and 1 KiB reserved a block) runs out first."""
    bound = config.min_blocks if itemsize == 4 else config.min_blocks64
    return min(bound, SM_SMEM // (config.smem_bytes(itemsize) + 1024))


def pitch(config: Config, itemsize: int) -> int:
    """A patch row's values in shared memory: its columns, the skew's padding, rounded up to 16 bytes' worth;
    skewed, one 16-byte unit more where thread rows (RY patch rows) would start a multiple of 128 bytes apart."""
    v, p = skew(config, itemsize)
    sw = config.patch()[1]
    values = 4 * cdiv(sw + v * ((sw - 1) // p), 4)
    if v and config.ry * values * itemsize % 128 == 0:
        values += 16 // itemsize
    return values


def chunks(config: Config) -> tuple[int, int, int]:
    """``(kc, full, rest)``: the chunk width, how many full chunks the run-time loop takes, and the
    columns of the last one (0: none) — a filter up to ``config.kc`` wide is one chunk."""
    kc = min(config.kc, config.kw)
    full = config.kw // kc
    rest = config.kw - full * kc
    if full == 1 and rest == 0:  # one chunk: written out, no loop
        return kc, 0, kc
    return kc, full, rest


#: full chunks of filter columns :func:`make_accumulator` writes out one after the other; more run in a
#: loop (its addresses, carried from chunk to chunk, made ptxas spill 48–84 B at 33 × 33 with the
#: 4 × 16 tile at 128 registers; written out, 35 × 35 has none)
WRITTEN_CHUNKS = 2


# A call replaces kh, kw and mode; the presets choose tiles (dispatch.large_configs: the first that
# fits the filter) and what the compile gate builds — each at the filter width that needs the most
# registers (one full chunk: the widest window)
PRESETS = {
    # 4 threads of 2 × 4 outputs, chunks of 4: 128-bit loads in the simulator too (vector.load4 checks them)
    "sim": Config(block_x=2, block_y=2, rx=4, ry=2, kc=4, kh=9, kw=6, mode=Mode.REFLECT),
    # the same with rows padded by 16 bytes after every 32 (skew: float32 lanes 2 windows a period, float64 1)
    "sim_skew": Config(block_x=2, block_y=2, rx=4, ry=2, kc=4, kh=9, kw=6, mode=Mode.REFLECT, skew=32),
    # float32: 8 × 8 threads of 4 × 16 outputs (32 × 128), chunks of 16: 64 FFMAs per 128-bit weight
    # load, 8 blocks of ≤ 128 registers per SM; fits filters up to 35 × 35
    "fast_float32": Config(block_x=8, block_y=8, rx=16, ry=4, kc=16, kh=16, kw=16, mode=Mode.REFLECT,
                           min_blocks=8),
    # the same, rows padded by 16 bytes every 128: what config=None runs in float32 (dispatch.LARGE_SKEW), gated
    "fast_skew_float32": Config(block_x=8, block_y=8, rx=16, ry=4, kc=16, kh=16, kw=16, mode=Mode.REFLECT,
                                min_blocks=8, skew=128),
    # float64 (and float32 past 35 × 35): 8 × 8 threads of 8 × 4 outputs (64 × 32), chunks of 8: lanes
    # 32 bytes apart (a 2-way conflict; 8 doubles, 4-way); fits float64 filters up to 25 × 25
    "default": Config(block_x=8, block_y=8, rx=4, ry=8, kc=8, kh=8, kw=8, mode=Mode.MIRROR, min_blocks=8,
                      min_blocks64=4),
    # the same threads with 6 × 4 outputs (48 × 32): float64 filters up to 31 × 31, float32 up to 55 × 55
    "narrow": Config(block_x=8, block_y=8, rx=4, ry=6, kc=8, kh=8, kw=8, mode=Mode.CONSTANT, min_blocks=8,
                     min_blocks64=4),
}


def make_accumulator(config: Config, itemsize: int = 4):
    """``accumulate(patch, w_s, acc, r0, c0)``: every tap of the filter (staged in ``w_s``) on the
    thread's RY × RX outputs from tile row ``r0``, column ``c0``, added to ``acc``.  With a :func:`skew`
    a chunk's window value d (column c0 + b + d, b the chunk's first filter column, in lanes' window
    k = (b + d) // RX) sits at the thread's base for k mod G (G = P / RX windows a period; computed
    once) plus V·(k // G) + b + d: constants per load.

    Two run-time loops over patch rows p (the edge rows, then the middle ones); in each row, the
    chunks of filter columns (:func:`chunks`; up to :data:`WRITTEN_CHUNKS` full ones written out, more
    in a run-time loop): the window
    values the chunk needs (``load4``), then for each output row oy filter row a = p − oy's
    weights (``load4``: broadcasts) and RX·cols FMAs.  In the edge rows each output row first
    tests ``a < KH`` (unsigned: a filter row "above" the patch row wraps around).

    Generated source (:mod:`simt_tiles.codegen`), one line per load and per FMA
    (``cuda.fma``), every name assigned once: Numba's SSA pass costs (names assigned more than
    once) × (statements) — with ``acc[k] += w * x`` lines, or scalar accumulators, a 15 × 15
    kernel spent 17 s in Numba, now a few."""
    RX, RY, KH = config.rx, config.ry, config.kh
    SWP, KWP = pitch(config, itemsize), 4 * cdiv(config.kw, 4)
    V, P = skew(config, itemsize)
    G = P // RX if V else 0  # lanes' windows a period
    kc, full, rest = chunks(config)
    head, rows = RY - 1, RY + KH - 1  # patch rows 0 .. RY - 2 miss the lower output rows' filter rows,
    tail0 = max(KH, head)  # rows tail0 .. rows - 1 the upper ones'
    edge, skip = head + rows - tail0, tail0 - head  # edge row e is patch row e, or e + skip
    # load4 needs 16-byte addresses: patch rows and weight rows are padded to 4 values; the
    # window starts at tx·RX + b0 and the weights at b0, b0 a multiple of kc (0 for one chunk)
    vec = RX % 4 == 0 and (full == 0 or kc % 4 == 0)
    src = codegen.Source()

    def chunk(n, cols, checked, b0, b):  # n: this chunk's names' suffix; b: b0's value if a constant
        win = RX + cols - 1
        x = [f"x{k}_{n}" for k in range(win)]
        # window value d: base g, offset o (patch[r, base + o], flat i{n}_{g} + o) — a skewed row's
        # base for the lanes' window k = d // RX mod G, else c0 + b0
        if V:
            at = [(((b + d) // RX) % G, V * ((b + d) // RX // G) + b + d) for d in range(win)]
            for g in sorted({g for g, _ in at}):
                src.line(f"i{n}_{g} = r{n[0]} * uint32({SWP}) + s{g}  # the lanes' window {g} mod {G}, flat")
            col = [f"s{g} + uint32({o})" for g, o in at]
        else:
            at = [(0, d) for d in range(win)]
            src.line(f"c{n} = c0 + {b0}", f"i{n}_0 = r{n[0]} * uint32({SWP}) + c{n}  # the window's first value, flat")
            col = [f"c{n} + uint32({d})" for d in range(win)]
        for q in range(0, win, 4):
            g, o = at[q]
            if vec and at[q:q + 4] == [(g, o + k) for k in range(4)]:  # 4 values in a row, 16-byte aligned
                src.line(f"{', '.join(x[q:q + 4])} = load4(patch, i{n}_{g} + uint32({o}))")
            else:
                src.line(*(f"{x[k]} = patch[r{n[0]}, {col[k]}]" for k in range(q, min(q + 4, win))))
        for oy in range(RY):
            m = f"{oy}_{n}"
            src.line(f"a{m} = p{n[0]} - uint32({oy})  # output row {oy}: filter row p - {oy}")
            with contextlib.ExitStack() as guard:
                if checked:
                    guard.enter_context(src.block(f"if a{m} < uint32({KH}):"))
                src.line(f"j{m} = a{m} * uint32({KWP}) + {b0}")
                w = [f"w{b}_{m}" for b in range(4 * cdiv(cols, 4))]
                for q in range(0, cols, 4):
                    if vec:  # a weights row is padded: the last group's spare values exist
                        src.line(f"{', '.join(w[q:q + 4])} = load4(w_s, j{m} + uint32({q}))")
                    else:
                        src.line(*(f"{w[k]} = w_s[a{m}, {b0} + uint32({k})]" for k in range(q, min(q + 4, cols))))
                for i in range(RX):  # output (oy, i): a chain of cols FMAs, read and written once
                    o = oy * RX + i
                    t = [f"acc[{o}]"] + [f"t{b}_{i}_{m}" for b in range(cols)]
                    src.line(*(f"{t[b + 1]} = cuda.fma({w[b]}, {x[i + b]}, {t[b]})" for b in range(cols)))
                    src.line(f"acc[{o}] = {t[cols]}")

    def row(s, checked):  # s: the loop's letter
        src.line(f"r{s} = r0 + p{s}")
        if 0 < full <= WRITTEN_CHUNKS:  # written out: a loop's addresses would cost registers (spills)
            for k in range(full):
                src.line(f"# chunk {k}: {kc} filter columns from {k * kc}")
                chunk(f"{s}{k}", kc, checked, f"uint32({k * kc})", k * kc)
        elif full:
            src.line(f"# the full chunks of {kc} filter columns")
            with src.block(f"for k{s} in range({full}):"):
                src.line(f"b{s} = uint32(k{s} * {kc})")
                chunk(f"{s}f", kc, checked, f"b{s}", None)
        if rest:
            src.line(f"# the last chunk: {rest} columns from {full * kc}")
            chunk(f"{s}r", rest, checked, f"uint32({full * kc})", full * kc)

    with src.block("def accumulate(patch, w_s, acc, r0, c0):"):
        if V:
            src.line(f"tx = c0 // uint32({RX})  # the lane's window; its bases by window mod {G}")
            src.line(*(f"s{g} = c0 + uint32({V}) * ((tx + uint32({g})) // uint32({G}))" for g in range(G)))
        if edge:
            src.line(f"# the first {head} and last {rows - tail0} patch rows: a test per output row")
            with src.block(f"for e in range({edge}):"):
                src.line(f"pe = uint32(e) if e < {head} else uint32(e + {skip})")
                row("e", checked=True)
        if KH > head:
            src.line("# the middle patch rows: every output row's filter row is there")
            with src.block(f"for m in range({head}, {KH}):"):
                src.line("pm = uint32(m)")
                row("m", checked=False)
    header = "from numba import cuda, uint32\nfrom simt_tiles.vector import load4"
    return inline(codegen.load_function("accumulate", src.text(), header=header))


def make_tap_adder(config: Config, itemsize: int = 4):
    """``add_tap(patch, acc, wv, r, c)``: one tap of weight ``wv`` on all RY × RX outputs, the
    patch read at rows ``r`` …, columns ``c`` … (the plain loop for blocks with NaN/inf; a :func:`skew`'s
    padding skipped by arithmetic).  Generated."""
    RX, RY = config.rx, config.ry
    V, P = skew(config, itemsize)
    src = codegen.Source()
    with src.block("def add_tap(patch, acc, wv, r, c):"):
        if V:
            src.line(*(f"c{i} = c + uint32({i})" for i in range(RX)))
            src.line(*(f"q{i} = c{i} + uint32({V}) * (c{i} // uint32({P}))" for i in range(RX)))
        cols = [f"q{i}" if V else f"c + uint32({i})" for i in range(RX)]
        for oy in range(RY):
            src.line(*(f"acc[{oy * RX + i}] += wv * patch[r + uint32({oy}), {cols[i]}]" for i in range(RX)))
    return inline(codegen.load_function("add_tap", src.text(), header="from numba import uint32"))


def make_kernel(config: Config, dtype, all_taps: bool = False, slices: bool = False):
    """The kernel for ``config`` and ``dtype``; ``all_taps``: count zero taps too (correlate1d):
    no scan, no plain loop; ``slices``: for a stack of slices on grid z (``_common.on_grid_z``)."""
    RX, RY, KH, KW = config.rx, config.ry, config.kh, config.kw
    TH, TW = config.tile()
    SH, SW = config.patch()
    ITEM = np.dtype(dtype).itemsize
    SKEW = skew(config, ITEM)
    SWP, KWP = pitch(config, ITEM), 4 * cdiv(KW, 4)  # row pitches: 16-byte rows
    BX, T = config.block_x, config.threads
    OUTS = RY * RX  # the thread's outputs
    KC, FULL, REST = chunks(config)
    DT = numba_dtype(dtype)
    ALL_TAPS = bool(all_taps)
    load_patch = make_patch_loader(config, skew=SKEW)
    patch_not_finite = make_patch_scan(T, SH, SW, dtype, SKEW)
    stage_weights = make_weight_stager(T, KH, KW, KWP, all_taps, dtype)
    store_outputs = make_output_store(config)  # 128-bit stores from registers, or staged rows (k07's)
    VEC_STORE = RX % 4 == 0  # a thread's outputs of a row are whole vectors
    accumulate = make_accumulator(config, ITEM)
    add_tap = make_tap_adder(config, ITEM)
    # Numba keys a disk-cache entry on the kernel's code and the constants it closes over: the
    # kernel reads the launch bounds (and every constant the generated code was made from)
    BOUNDS = jit_options(config, dtype)["launch_bounds"]
    SHAPE = (RX, RY, KH, KW, KC, FULL, REST, int(config.mode), *SKEW)

    def conv2d_k11_large_filter(image, weights, out, cval, anchor_h, anchor_w, out_aligned):
        # out_aligned: out's data starts 16-byte aligned (the binding asks vector.aligned)
        if BOUNDS[1] < 1 or SHAPE[0] < 1:  # never (see BOUNDS above)
            return
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        t = ty * uint32(BX) + tx
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SWP), DT, alignment=SMEM_ALIGN)  # read 16 bytes at a time
        w_s = cuda.shared.array((KH, KWP), DT, alignment=SMEM_ALIGN)
        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tx, ty)
        tiny = stage_weights(weights, w_s, t)  # thread t stages weights t, t + T, ... (the padding as 0)
        # RAW: the patch and the filter complete before anyone reads them; on the way, whether
        # the filter has a tap to skip
        zero_tap = cuda.syncthreads_or(tiny) != 0

        # a NaN/inf in this block's patch and a tap to skip: the plain loop that skips it
        checked = 0
        if not ALL_TAPS and zero_tap:  # uniform over the grid
            checked = cuda.syncthreads_or(patch_not_finite(patch, t))  # block-uniform

        acc = cuda.local.array(OUTS, DT)  # registers: indexed by constants only (generated code)
        for o in range(OUTS):
            acc[o] = DT(0)
        r0 = ty * uint32(RY)  # this thread's first output row / column within the tile
        c0 = tx * uint32(RX)
        if checked != 0:
            for a in range(KH):
                for b in range(KW):
                    wv = w_s[a, b]
                    if wv != 0:  # a skipped tap was staged as exactly 0
                        add_tap(patch, acc, wv, r0 + uint32(a), c0 + uint32(b))
        else:  # the run-time loops over patch rows (generated: make_accumulator)
            accumulate(patch, w_s, acc, r0, c0)

        # a whole tile in rows that start 16-byte aligned: a vector per 4 outputs from registers;
        # else a barrier (every thread has read the patch), the tile staged in it, rows stored
        vector = VEC_STORE and out_aligned and w % 4 == 0
        store_outputs(out, patch, acc, row0, col0, tx, ty, h, w, vector)  # (_staging)

    return on_grid_z(conv2d_k11_large_filter) if slices else conv2d_k11_large_filter


def jit_options(config: Config, dtype) -> dict:
    """Launch bounds of ``min_blocks`` blocks per SM (float64: ``min_blocks64``), and the disk cache."""
    blocks = config.min_blocks if np.dtype(dtype).itemsize == 4 else config.min_blocks64
    return {"launch_bounds": (config.threads, blocks), "cache": True}


def signature(dtype, all_taps: bool = False, slices: bool = False):
    """``void(image, weights, out, cval, anchor_h, anchor_w, out_aligned)``: k03's (``weights`` a
    strided 2-D device array) and whether ``out``'s data starts 16-byte aligned; image and out
    3-D with ``slices``."""
    t, a = numba_dtype(dtype), image_type(dtype, slices)
    return void(a, t[:, :], a, t, int64, int64, boolean)


def bind_aligned(rung, spec, dtype, call: FilterCall):
    """k03's binding (a NumPy filter uploaded, a convolve's flipped as a view, ``all_taps`` and
    the stack as compile-time parameters) and ``vector.aligned(out)``."""
    kernel, args = _weights_argument(rung, spec, dtype, call)
    return kernel, (*args, aligned(call.out))


#: the filter as a device array argument, and whether out is 16-byte aligned
WEIGHTS_AND_ALIGNMENT = Binding("weights argument, out aligned", False, bind_aligned)

#: variant=None's rung past 7 taps on an axis, so it takes a volume's slices in one launch too:
#: the gate builds both forms
RUNG = FilterRung("k11_large_filter", Config, PRESETS, make_kernel, geometry, signature, jit_options,
                  gate=Gate(({}, {"slices": True})), bind=WEIGHTS_AND_ALIGNMENT, slices=True)
