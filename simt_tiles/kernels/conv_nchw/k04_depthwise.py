"""k04 — depthwise: a block stages its plane's input patch, all of a thread's loads in flight before its stores.

What changed versus k01
    A depthwise layer (groups = C_in, C_out = M·C_in: output channel o reads input channel
    o // M alone, ``_params.py``) has no channel reduction: an output is KH·KW multiply-adds, so
    the layer moves bytes rather than doing FLOPs (3 × 3: 9 FMAs per 8 bytes read and written).
    k01 gives every output a thread that fetches its own KH·KW window through L1, so each input
    value is fetched by up to KH·KW threads.  Here a block of ``block_x × block_y`` threads owns
    a TH × TW tile of output pixels (TH = block_y·RH, TW = block_x·RW) of one output plane (image
    n, channel o):

    1. the threads copy the tile's input patch — (TH − 1)·sh + (KH − 1)·dh + 1 rows by
       (TW − 1)·sw + (KW − 1)·dw + 1 columns of input channel o // M, the halo included — from
       global into shared memory once (:func:`staging`): runs of ``sc`` consecutive threads take
       ``sc`` consecutive columns of a patch row (coalesced), threads / sc rows at a time, so a
       thread's column offsets and tests are computed once and a row's once per row; a position
       in the zero padding, or past the image, stores 0.  A thread **issues the loads of all its
       slots into registers before it stores any** (up to ``in_flight`` of them);
    2. each thread loads the KH·KW taps of channel o into registers (one address for the whole
       block: broadcasts), issued before the barrier so that they fly with the patch;
    3. barrier (RAW: nobody reads the patch before every share of it is stored);
    4. each thread computes RH rows, ``block_y`` apart, of RW consecutive outputs: per output row
       and filter row it reads the (RW − 1)·sw + (KW − 1)·dw + 1 input values its outputs need into
       registers (``win``), then does KW·RW multiply-adds from registers.

    A channel multiplier M > 1 gives each of the M output planes of an input channel its own
    blocks (neighbours in the grid's y): they stage the same patch, the repeats L2 hits.  The patch
    is written once and then only read: one barrier, no WAR hazard.  Threads whose outputs lie
    past the image still stage their share and reach the barrier; they only skip the stores.  A
    staging slot past the patch stores to its thread's spare word after it: no branch around the
    store (a branch costs each store a dozen instructions more, SASS of CUDA 13.5).

The lesson: a kernel bound by DRAM runs at the bytes it has in flight (Little's law)
    HBM answers a load after ~0.6–1 µs under load, so a GPU reading at 4.8 TB/s (H200) has
    ~4–5 MB of loads outstanding: ~32–36 KB per SM of its 132.  Before session 35 a thread stored
    each staged value before it loaded the next (``in_flight`` = 1: the compiler does not move a
    load above the shared store of the previous one; SASS: LDG, wait, STS, 17 times at stride 2).
    One 4-byte load a thread outstanding: 8 blocks of 128 threads an SM keep 4 KB in flight, under
    1 TB/s whatever the stride, and the stride-2 patch (4× the input of a stride-1 one per output)
    took 4× the round trips — 17 a thread against 5 (the H200 measured ~1 TB/s at both strides:
    the stride-2 layers 0.48× torch's kernel, stride 1 1.04×).  Issuing a thread's loads before its
    first store keeps the patch in flight: per SM, blocks per SM × the patch (:func:`in_flight_bytes`:
    60 KB for the default 3 × 3 at stride 2, 7 blocks; 19 KB at stride 1 with RH = 1, 36 KB with
    RH = 2, which the GPU rule (``dispatch.depthwise_config``) takes: it asks for
    :data:`IN_FLIGHT_TARGET`).

    Then the instructions: at 4 TB/s an H200 has 1.05·10¹² warp instructions a second for
    2·10¹¹ stride-2 outputs (20 bytes of x and y each), ~170 a lane per output, and for 5·10¹¹
    stride-1 ones (8 bytes), ~67.  Staging one element had cost ~45 (a division, four compares
    and three branches around its load and its store); the runs, predicated loads and branch-free
    stores bring it to ~18, and a 2-D grid (tile, plane) removes two of the block's four
    divisions: 680 instructions a warp at stride 2 (4 outputs a lane, 170 each), 616 at stride 1
    with RH = 2 (8 outputs, 77 each), against 1,224 and 544 (4 outputs) before.

Memory traffic (teaching number)
    Global: each output written once; each input value read by the blocks whose patch holds it —
    the halo makes that (TH + 2)/TH · (TW + 2)/TW ≈ 1.13× for a 32 × 32 tile and a 3 × 3 filter
    at stride 1 (1.05× at stride 2: 33 × 65 for 32 × 64 inputs), the repeats mostly L2 hits — so
    the layer's floor is reading x and writing y once: N·C_in·H·W + N·C_out·OH·OW elements (k01:
    KH·KW loads per output, from L1 at best).  Shared: per thread, output row and filter row
    (RW − 1)·sw + KW loads for KW·RW FMAs (default 3 × 3: 6 per 12 at stride 1, 9 per 12 at
    stride 2).  Stores: a lane writes RW consecutive outputs, so one store instruction of a warp
    touches every RW-th word of its rows (the L2 merges the sectors; 128-bit stores are not used).
    A multiplier M > 1 reads each input patch M times, from L2 after the first.

Shared-memory banks
    Thread (tx, ty) reads its window at word ty·sh·P + tx·RW·sw of the patch (P: the row length in
    shared memory).  With block_x = 8, RW = 4 (the default) a warp covers 4 rows of 8 lanes whose
    windows are 4 words apart, so the rows must start in different banks mod 4: :func:`padded_row`
    picks the smallest P ≥ the patch's width that spreads a warp's reads over the most banks.  At
    stride 1 that is conflict-free (P odd).  At stride 2 both fail: lanes 8 words apart cover only
    4 of the 8-word bank groups, and rows 2P apart start in only 2 banks mod 4 — 2-way conflicts
    whatever P.  So a stride-2 axis of the patch is stored in two phases (``phases`` = 2): its even
    rows (columns) first, then its odd ones — index 2j + φ at φ·E + j, E = ⌈length / 2⌉
    (:func:`phase_offset`).  A thread's window starts at an even row and column, so it sits at row
    ty, word tx·RW of a phase: P and 4 words apart, as at stride 1 — conflict-free again.

Several planes a block (``planes``; issue 33, session 40 — not measured on a GPU)
    A 7 × 7 or 14 × 14 plane takes "small"'s 8 × 8 tile: a block of one warp.  An SM holds at most 32
    blocks, so one-warp blocks cap it at 32 of its 64 warps however few registers they use.  ``planes`` > 1
    gives a block the same tile of ``planes`` consecutive output planes (n, o), one per block z: each z
    stages its own plane's patch in its own part of shared memory (``planes`` parts), the taps of its own
    channel; one barrier for all.  The grid's plane axis counts groups of ``planes``; in the last group a
    plane past the layer is computed as the layer's last one (its threads reach the barrier) and its stores
    skipped.  ``planes`` = 1 compiles to the same PTX as before the field existed.  Presets ``small_p2`` and
    ``small_p4``; ``config=None`` does not take them (benchmarks/notes/conv_nchw.md, session 40).

Compile-time constants
    The filter shape, stride and dilation (``kh``, ``kw``, ``stride_h``, ``stride_w``, ``dil_h``,
    ``dil_w``: the patch's shape, the window length and the unrolled loops need them); the launcher
    replaces a config's values with the call's (:func:`for_layer`; the presets' values only choose
    what the compile gate builds).  The padding stays a run-time argument: it only shifts where
    the patch starts.  Rules: stride 1 or 2 per axis; at most :data:`TAPS_MAX` taps (they live in
    registers); the patch fits 48 KiB (a dilation stretches it).  ``in_flight`` = 1 and
    ``phases`` = 1 (:data:`BEFORE`) give the staging order and the layout of this rung before
    session 35 (kept to measure the lesson: ``benchmarks/lab/depthwise_probe.py``).

Headline: none yet — not measured on a GPU (benchmarks/lab/depthwise_probe.py and benchmarks/lab/conv_issue33.py's zoo will give it; the expected time of each layer is in benchmarks/notes/conv_nchw.md)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
from numba import cuda, uint32, uint64

from ...runtime import TileConfig, cdiv, numba_dtype
from ..matmul._blocked import u32
from ._im2col import MAX_GRID_YZ
from .k01_direct import DirectRung, signature

#: the most taps (KH·KW) a thread holds in registers: 7 × 7, the largest depthwise filter of the common
#: CNNs (MobileNet/EfficientNet 3 × 3 and 5 × 5, ConvNeXt 7 × 7)
TAPS_MAX = 49
#: shared-memory banks (sm_90): 32 of 4 bytes
BANKS = 32
#: the most patch values a thread holds in registers between its loads and its shared stores: LLVM
#: unrolls the loop that indexes them fully (registers) only up to ~25 elements (k03's PREFETCH_MAX);
#: a thread with more stages them in groups of ``in_flight``
IN_FLIGHT_MAX = 24
#: bytes of loads in flight per SM that the GPU preset rule (``dispatch.depthwise_config``) asks for:
#: Little's law, 4.8 TB/s (H200) × ~0.9 µs of loaded DRAM latency over 132 SMs ≈ 32 KB
IN_FLIGHT_TARGET = 32 * 1024


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A ``block_x × block_y`` block computes a ``(block_y·rh) × (block_x·rw)`` tile of one output
    plane's pixels, each thread ``rh`` rows (``block_y`` apart) of ``rw`` consecutive outputs.
    ``kh``… ``dil_w`` are the layer's, set by the launcher (:func:`for_layer`).  ``in_flight``: the
    patch values a thread loads before it stores any (1: each load waits for the previous one's
    store).  ``phases``: 2 stores the rows and the columns of a stride-2 axis as two phases, even
    ones first (1: in the image's order).  ``min_blocks``: blocks per SM the launch bounds ask room
    for (float32; see :func:`jit_options`).  ``planes``: output planes a block computes the same tile of,
    ``planes`` consecutive (n, o) planes, one per block z (threadIdx.z): each z stages its plane's patch in
    its own part of shared memory (``planes`` × the patch) as a block of one plane does (1: a block per
    plane and tile; more: fewer, larger blocks for tiles of one warp — issue 33's small planes)."""

    block_x: int = 8
    block_y: int = 16
    rw: int = 4
    rh: int = 1
    kh: int = 3
    kw: int = 3
    stride_h: int = 1
    stride_w: int = 1
    dil_h: int = 1
    dil_w: int = 1
    in_flight: int = IN_FLIGHT_MAX
    phases: int = 2
    min_blocks: int = 16
    planes: int = 1

    def block(self):
        return (self.block_x, self.block_y) if self.planes == 1 else (self.block_x, self.block_y, self.planes)

    @property
    def plane_threads(self) -> int:
        """Threads of one plane's share of the block (block_x × block_y): they stage its patch."""
        return self.block_x * self.block_y

    @property
    def tile_h(self) -> int:
        return self.block_y * self.rh

    @property
    def tile_w(self) -> int:
        return self.block_x * self.rw

    def patch(self) -> tuple[int, int]:
        """(rows, columns) of the input one output tile reads: the tile, the stride, the halo."""
        return ((self.tile_h - 1) * self.stride_h + (self.kh - 1) * self.dil_h + 1,
                (self.tile_w - 1) * self.stride_w + (self.kw - 1) * self.dil_w + 1)

    @property
    def split_h(self) -> bool:
        """Whether the patch's rows are stored as two phases (stride 2 along H, ``phases`` 2)."""
        return self.stride_h == 2 and self.phases == 2

    @property
    def split_w(self) -> bool:
        """Whether the patch's columns are stored as two phases (stride 2 along W, ``phases`` 2)."""
        return self.stride_w == 2 and self.phases == 2

    @property
    def window(self) -> int:
        """Input values one thread reads per filter row: its RW outputs' taps, the gaps between included."""
        return (self.rw - 1) * self.stride_w + (self.kw - 1) * self.dil_w + 1

    def staging(self) -> "Staging":
        """How the block's threads copy the patch (:class:`Staging`)."""
        return staging(self)

    @property
    def x_loads(self) -> int:
        """Patch elements each thread stages: its slots (:meth:`staging`), some idle at the edges."""
        return self.staging().slots

    @property
    def group(self) -> int:
        """Patch elements a thread has in flight at once: loaded into registers, then stored."""
        return min(self.in_flight, self.x_loads)

    def plane_words(self) -> int:
        """Shared words of one plane's part: the patch, rows :func:`padded_row` apart, and a spare word a
        thread of the plane (an idle slot's store)."""
        return self.patch()[0] * padded_row(self) + self.plane_threads

    def smem_bytes(self, itemsize):
        """``planes`` parts (:meth:`plane_words`), one after another."""
        return self.planes * self.plane_words() * itemsize

    def registers(self, itemsize) -> int:
        """Registers a thread needs without spilling, as estimated for the launch bounds
        (:func:`jit_options`; :func:`simt_tiles.runtime.fits` reads it too): the taps, the patch values
        it has in flight, the window entries its FMAs read (per output row: ptxas overlaps the rows), the
        accumulators, 12 more per such word for offsets, plus 12, in 8-register steps, and at least 64.
        At least what ptxas (CUDA 13.5, sm_90) compiled with no bound: 3 × 3 at stride 1 and 2 with
        RH 1 and 2 (39–72 registers in float32), 5 × 5 (55–80), 7 × 7 (79; 94 with RH 2), dilation 2,
        float64 (60–160); each compiled spill-free under the bound this estimate sets."""
        words = max(1, itemsize // 4)
        needed = len({r * self.stride_w + b * self.dil_w for r in range(self.rw) for b in range(self.kw)})
        values = self.kh * self.kw + self.group + self.rh * needed + self.rw + 12
        return max(64, cdiv(words * values + 12, 8) * 8)

    def rules(self):
        yield ("stride_h", self.stride_h <= 2, "stride_h in (1, 2)")
        yield ("stride_w", self.stride_w <= 2, "stride_w in (1, 2)")
        yield ("kw", self.kh * self.kw <= TAPS_MAX, f"kh * kw <= {TAPS_MAX} (the taps stay in registers)")
        yield ("rw", self.rw <= 8, "rw <= 8 (a thread's outputs and window stay in registers)")
        yield ("rh", self.rw * self.rh <= 16, "rw * rh <= 16 (a thread's accumulators stay in registers)")
        yield ("in_flight", self.in_flight <= IN_FLIGHT_MAX,
               f"in_flight <= {IN_FLIGHT_MAX} (the values in flight stay in registers)")
        yield ("phases", self.phases <= 2, "phases in (1, 2)")
        yield ("planes", self.planes <= 64, "planes <= 64 (CUDA's limit on a block's z)")


class Staging(NamedTuple):
    """The staging map: runs of ``sc`` consecutive threads copy ``sc`` consecutive columns of a patch row,
    ``sr`` = threads // sc rows at once; thread t copies columns t % sc + k·sc (k < ``cch``) of rows
    t // sc + i·sr (i < ``rch``): ``slots`` = cch·rch elements, a slot past the patch idle."""

    sc: int
    sr: int
    cch: int
    rch: int

    @property
    def slots(self) -> int:
        return self.cch * self.rch


def staging(config: Config) -> Staging:
    """The staging map of the fewest slots plus column runs a thread (a run costs about a slot: its
    offsets, computed once, and three registers), runs of ``sc`` = ⌈PW / cch⌉ ≤ threads columns, at
    least 8 (a 32-byte sector of float32) unless the threads allow only shorter ones.  3 × 3 filter, 128
    threads: at stride 1 (an 18 × 34 patch, 4.8 elements a thread) one run of 34 columns, 3 rows at
    once, 6 slots; at stride 2 (33 × 65, 16.8 a thread) two runs of 33, 22 slots."""
    rows, cols = config.patch()
    threads = config.plane_threads  # (a block of several planes: each plane's threads stage its patch)
    shortest = min(8, cdiv(cols, cdiv(cols, threads)))  # (the longest runs the threads allow, if shorter)
    best = None
    for cch in range(cdiv(cols, threads), cols + 1):
        sc = cdiv(cols, cch)
        if sc > threads or sc < shortest:
            continue
        cand = Staging(sc, threads // sc, cch, cdiv(rows, threads // sc))
        if best is None or cand.slots + cand.cch < best.slots + best.cch:
            best = cand
    return best


def phase_offset(split: bool, length: int, c: int) -> int:
    """Where index ``c`` of a patch axis of ``length`` sits in shared memory: ``c``, or with two phases
    (``split``: stride 2 on that axis) even indices first — 2j at j, 2j + 1 at E + j, E = ⌈length / 2⌉."""
    return (c & 1) * ((length + 1) // 2) + (c >> 1) if split else c


def column_offset(config: Config, c: int) -> int:
    """Where column ``c`` of a patch row sits in its row (:func:`phase_offset` along W)."""
    return phase_offset(config.split_w, config.patch()[1], c)


def row_offset(config: Config, r: int) -> int:
    """Which shared row holds patch row ``r`` (:func:`phase_offset` along H)."""
    return phase_offset(config.split_h, config.patch()[0], r)


def padded_row(config: Config) -> int:
    """The patch's row length in shared memory: of the lengths P ≥ its width (P < width + 32), the
    smallest at which the first warp's first window reads — lane (tx, ty) at word
    ty·stride_h·P + tx·rw·stride_w, with two phases ty·P and tx·rw — hit no bank more often than
    at any other (the fewest wavefronts)."""
    width = config.patch()[1]
    bx = config.block_x
    row_step = 1 if config.split_h else config.stride_h
    col_step = config.rw if config.split_w else config.rw * config.stride_w
    lanes = [(t % bx, t // bx) for t in range(min(32, config.plane_threads))]

    def worst(p: int) -> int:
        hits: dict = {}
        for tx, ty in lanes:
            bank = (ty * row_step * p + tx * col_step) % BANKS
            hits[bank] = hits.get(bank, 0) + 1
        return max(hits.values())

    return min(range(width, width + BANKS), key=lambda p: (worst(p), p))


# A call replaces kh ... dil_w; the presets' values only choose what the compile gate builds: sim an even
# filter height, a mixed stride, a dilation and two output rows a thread; small stride 2 (the layers it is
# for: 7 × 7 and 14 × 14 outputs); tall two output rows a thread at stride 1 (the rule's choice there).
PRESETS = {
    "sim": Config(block_x=2, block_y=2, rw=2, rh=2, kh=2, kw=3, stride_h=2, stride_w=1, dil_h=1, dil_w=2,
                  min_blocks=1),
    "default": Config(block_x=8, block_y=16, rw=4, min_blocks=16),
    "tall": Config(block_x=8, block_y=16, rw=4, rh=2, min_blocks=16),
    "small": Config(block_x=4, block_y=8, rw=2, stride_h=2, stride_w=2, min_blocks=32),
    # "small" on 2 and 4 consecutive planes a block (issue 33: one-warp blocks cap an SM at 32 blocks, 32 warps);
    # not chosen by config=None until a GPU measures them (benchmarks/lab/depthwise_probe.py --planes)
    "small_p2": Config(block_x=4, block_y=8, rw=2, stride_h=2, stride_w=2, min_blocks=16, planes=2),
    "small_p4": Config(block_x=4, block_y=8, rw=2, stride_h=2, stride_w=2, min_blocks=8, planes=4),
}

#: the fields that give a preset this rung's staging order and shared layout before session 35 (one load
#: in flight a thread, the image's row and column order): ``dataclasses.replace(PRESETS["default"], **BEFORE)``
#: (the rest — the staging runs, the 2-D grid — stays this session's)
BEFORE = {"in_flight": 1, "phases": 1}


def for_layer(config: Config, kh: int, kw: int, stride, dilation) -> Config:
    """``config`` with the layer's filter shape, stride and dilation compiled in (re-validated: a
    stride above 2, too many taps or a patch over 48 KiB raise ConfigError naming the field)."""
    return dataclasses.replace(config, kh=kh, kw=kw, stride_h=stride[0], stride_w=stride[1],
                               dil_h=dilation[0], dil_w=dilation[1])


def make_kernel(config: Config, dtype):
    BX, BY, RW, RH, KH, KW = config.block_x, config.block_y, config.rw, config.rh, config.kh, config.kw
    STH, STW, DH, DW = config.stride_h, config.stride_w, config.dil_h, config.dil_w
    TH, TW = config.tile_h, config.tile_w
    PH, PW = config.patch()
    P = padded_row(config)
    PLANES = config.planes
    X_WORDS = config.plane_words()  # one plane's part: the patch, flat, rows P apart; then a spare word a thread
    X_SIZE = PLANES * X_WORDS
    X_LOADS = config.x_loads
    G = config.group  # patch values a thread has in flight
    GROUPS = cdiv(X_LOADS, G)
    SC, SR, CCH, RCH = config.staging()
    SPLIT_H, SPLIT_W = config.split_h, config.split_w
    EH, EW = (PH + 1) // 2, (PW + 1) // 2  # with two phases: where the odd rows, columns start
    TAPS = KH * KW
    WIN = config.window
    # a thread's window starts at patch row (ty + i·BY)·sh + a·dh, column tx·RW·sw + v: even at stride 2,
    # so with two phases at row ty + ROW_AT, column tx·RW + COL_AT (constants) — else ty·sh + …, tx·RW·sw + …
    ROW_AT = tuple(row_offset(config, i * BY * STH + a * DH) for i in range(RH) for a in range(KH))
    COL_AT = tuple(column_offset(config, v) for v in range(WIN))
    DT = numba_dtype(dtype)
    # Unsigned 32-bit constants: index arithmetic stays unsigned (numba widens
    # uint32 (+) uint32 to uint64; uint32(...) around a sum truncates it back).
    U = u32
    U_BX, U_TH, U_TW, U_PW, U_P = U(BX), U(TH), U(TW), U(PW), U(P)
    U_PH, U_TAPS, U_STH, U_STW, U_EH, U_EW = U(PH), U(TAPS), U(STH), U(STW), U(EH), U(EW)
    U_SC, U_SR, U_SPARE, U_TW1 = U(SC), U(SR), U(PH * P), U(TW - 1)
    U_ROW0 = U(P if SPLIT_H else STH * P)  # a thread's window start: per ty
    U_COL0 = U(RW if SPLIT_W else RW * STW)  # per tx
    U_ZERO, U_ONE = U(0), U(1)
    U_PLANES, U_XW = U(PLANES), U(X_WORDS)

    def conv_nchw_k04_depthwise(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad_h, pad_w,
                                kh_unused, kw_unused, sh_unused, sw_unused, dh_unused, dw_unused,
                                groups_unused, has_bias):
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        tid = uint32(ty * U_BX + tx)

        # this block: grid x the tile in its output plane (tile columns fastest: neighbours share halo
        # columns in L2), grid y and z the output plane n·C_out + o — with PLANES > 1 the group of PLANES
        # planes, threadIdx.z the plane in it and its part of x_s (xb); a plane past the layer (the last
        # group's) is computed as the layer's last one, its stores skipped (its threads reach the barrier)
        q = uint32(uint32(cuda.blockIdx.y) + uint32(cuda.blockIdx.z) * uint32(cuda.gridDim.y))
        xb = U_ZERO
        live = True
        if PLANES > 1:
            q = uint32(q * U_PLANES)
            if q >= uint32(n_img) * uint32(c_out):  # the last z's groups past the layer
                return
            tz = uint32(cuda.threadIdx.z)
            xb = uint32(tz * U_XW)
            q = uint32(q + tz)
            live = q < uint32(n_img) * uint32(c_out)
            if not live:
                q = uint32(uint32(n_img) * uint32(c_out) - U_ONE)
        elif q >= uint32(n_img) * uint32(c_out):  # the last z's planes past the layer
            return
        tiles_w = uint32(uint32(uint32(ow_n) + U_TW1) // U_TW)
        tile = uint32(cuda.blockIdx.x)
        tr = uint32(tile // tiles_w)
        row0 = uint32(tr * U_TH)  # the tile's first output row and column
        col0 = uint32(uint32(tile - tr * tiles_w) * U_TW)
        o = uint32(q % uint32(c_out))  # the output channel
        plane = q  # its input plane n·C_in + o // M: q // M (no division for M = 1, the common layer)
        if c_out != c_in:
            plane = uint32(q // uint32(uint32(c_out) // uint32(c_in)))

        x_s = cuda.shared.array(X_SIZE, DT)  # the patch, halo included, rows P apart
        staged = cuda.local.array(G, DT)  # registers: indexed by unrolled constants only
        col_x = cuda.local.array(CCH, uint32)  # per column run: x column, its test, shared column
        col_ok = cuda.local.array(CCH, uint32)
        col_s = cuda.local.array(CCH, uint32)
        taps = cuda.local.array(TAPS, DT)
        win = cuda.local.array(WIN, DT)
        acc = cuda.local.array(RW, DT)

        # (1) stage the patch (:func:`staging`): thread tid copies columns sc + k·SC of rows sr + i·SR.  A
        # patch row (column) is the tile's corner row0·sh (col0·sw) plus its index in the zero-padded
        # input: inside x from the padding to the padding plus H (W), subtracted only there (unsigned).
        # The columns' x offsets, shared offsets and tests are the same for every row: computed once.  A
        # thread issues G loads before the first of their G shared stores: G values in flight, not one.
        upad_h, upad_w = uint32(pad_h), uint32(pad_w)
        h_end, w_end = uint32(upad_h + uint32(h)), uint32(upad_w + uint32(wd))  # where x ends, padded
        ip0 = uint32(row0 * U_STH)
        jp0 = uint32(col0 * U_STW)
        x_plane = uint32(plane * uint32(uint32(h) * uint32(wd)))  # x[n, c, 0, 0]
        sc = uint32(tid % U_SC)
        sr = uint32(tid // U_SC)
        for k in range(CCH):  # (threads past SR·SC rows of runs: idle, as if past the patch's columns)
            pc = uint32(sc + uint32(k * SC))
            jp = uint32(jp0 + pc)
            ok = (sr < U_SR) & (pc < U_PW) & (jp >= upad_w) & (jp < w_end)
            col_ok[k] = U_ONE if ok else U_ZERO
            col_x[k] = uint32(jp - upad_w) if ok else U_ZERO
            if SPLIT_W:  # even columns first, then odd ones
                pc = uint32(uint32(pc & U_ONE) * U_EW + uint32(pc >> U_ONE))
            col_s[k] = pc
        for g in range(GROUPS):
            for j in range(G):  # loads: in flight together (slot g·G + j: row run // CCH, column run % CCH)
                pr = uint32(sr + uint32((g * G + j) // CCH * SR))
                ip = uint32(ip0 + pr)  # the row in the zero-padded input
                ok = (col_ok[(g * G + j) % CCH] != U_ZERO) & (pr < U_PH) & (ip >= upad_h) & (ip < h_end)
                src = uint32(x_plane + uint32(uint32(max(ip, upad_h) - upad_h) * uint32(wd)))  # (any row if not ok)
                v = DT(0)
                if ok:
                    v = x[uint32(src + col_x[(g * G + j) % CCH])]
                staged[j] = v
            for j in range(G):  # stores: each waits for its load
                pr = uint32(sr + uint32((g * G + j) // CCH * SR))
                ok = (sr < U_SR) & (pr < U_PH) & (uint32(sc + uint32((g * G + j) % CCH * SC)) < U_PW)
                if SPLIT_H:  # even rows first, then odd ones
                    pr = uint32(uint32(pr & U_ONE) * U_EH + uint32(pr >> U_ONE))
                # an idle slot (past the patch) stores to its thread's spare word: no branch around the store
                x_s[uint32(xb + (uint32(pr * U_P + col_s[(g * G + j) % CCH]) if ok else uint32(U_SPARE + tid)))] = \
                    staged[j]
        # (2) output channel o's taps, in flight with the patch
        w_off = uint64(o * U_TAPS)  # 64-bit: the taps' addresses are one register plus constants
        for k in range(TAPS):
            taps[k] = w[uint64(w_off + uint64(k))]
        bv = DT(0)
        if has_bias:
            bv = bias[o]
        # (3) RAW: every share of the patch is stored before anyone reads it
        cuda.syncthreads()

        # (4) RH rows (block_y apart) of RW consecutive outputs, a row at a time
        ow0 = uint32(col0 + tx * uint32(RW))
        xa = uint32(xb + uint32(ty * U_ROW0 + tx * U_COL0))  # this thread's window start in x_s, filter row 0
        for i in range(RH):
            for r in range(RW):
                acc[r] = DT(0)
            for a in range(KH):
                row = uint32(xa + uint32(ROW_AT[i * KH + a] * P))
                for v in range(WIN):
                    win[v] = x_s[uint32(row + uint32(COL_AT[v]))]
                for b in range(KW):
                    tap = taps[a * KW + b]
                    for r in range(RW):  # unrolled: every index a constant
                        acc[r] += tap * win[r * STW + b * DW]
            oh = uint32(row0 + ty + uint32(i * BY))
            if live and oh < uint32(oh_n):
                dst = uint32(uint32(q * uint32(oh_n) + oh) * uint32(ow_n))  # out[n, o, oh, 0]
                for r in range(RW):
                    ow = uint32(ow0 + uint32(r))
                    if ow < uint32(ow_n):
                        out[uint32(dst + ow)] = acc[r] + bv if has_bias else acc[r]

    return conv_nchw_k04_depthwise


def geometry(config: Config, n: int, c_out: int, oh: int, ow: int, groups: int | None = None):
    """Grid x: the tiles of an output plane, columns fastest; y and z: the N·C_out output planes, y at most
    ``MAX_GRID_YZ`` (CUDA's limit; the last z's blocks past the planes return at once) — with ``planes`` > 1
    the ⌈N·C_out / planes⌉ groups of planes.  ``groups`` (C_in) does not change it: the M output planes of
    one input channel get their own blocks (or threads)."""
    planes = cdiv(n * c_out, config.planes)
    y = max(1, min(planes, MAX_GRID_YZ))
    return (cdiv(oh, config.tile_h) * cdiv(ow, config.tile_w), y, cdiv(planes, y)), config.block()


def blocks(config: Config, n: int, c_out: int, oh: int, ow: int) -> int:
    """Blocks a layer launches with work: one per output tile of each group of ``planes`` of the N·C_out
    output planes."""
    return cdiv(n * c_out, config.planes) * cdiv(oh, config.tile_h) * cdiv(ow, config.tile_w)


def blocks_per_sm(config: Config, dtype) -> int:
    """Blocks an SM holds under :func:`jit_options`' launch bounds: ``min_blocks``, or as many as
    :meth:`Config.registers` leaves room for if fewer (65,536 registers an SM)."""
    regs = config.registers(np.dtype(dtype).itemsize)
    return max(1, min(config.min_blocks, 65536 // (config.threads * regs)))


def in_flight_bytes(config: Config, dtype) -> float:
    """Bytes of patch loads an SM has in flight while its blocks stage (the lesson's number): blocks per
    SM × the patches of a block (``planes``) × the share of a thread's slots it loads before its first store
    (``group`` / slots)."""
    rows, cols = config.patch()
    patches = blocks_per_sm(config, dtype) * config.planes
    return patches * rows * cols * np.dtype(dtype).itemsize * config.group / config.x_loads


def jit_options(config: Config, dtype) -> dict:
    """Launch bounds of ``min_blocks`` blocks per SM, or as many as :meth:`Config.registers` leaves
    room for if fewer (a 3 × 3 float32 filter: 8 blocks of 128 threads, 64 registers; 7 × 7: 5;
    float64 3 × 3: 5).  A kernel bound by DRAM wants many blocks per SM — their patch loads are
    what is in flight — but not at the price of spilling to local memory, whose traffic is more
    DRAM traffic.  The compile gate builds the presets (spill-free); ptxas's choices are not monotonic
    in the bound, and a few other filters may still spill a little under it (float64 7 × 7 under any
    bound: its taps and windows exceed 255 registers): correct, slower."""
    return {"launch_bounds": (config.threads, blocks_per_sm(config, dtype))}


#: launched as k01 (``DirectRung``): the kernel takes torch's parameters from the call (``Call.direct_args``;
#: those compiled in are ignored there) and its grid the call's groups
RUNG = DirectRung("k04_depthwise", Config, PRESETS, make_kernel, geometry, signature, jit_options)
