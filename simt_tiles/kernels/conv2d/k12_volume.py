"""k12 — 3-D volumes: k02's halo tile walked down the z axis, a ring of KD+1 staged planes (2.5-D blocking).

What it teaches
    ``correlate``/``convolve`` of a D × H × W volume with a KD × KH × KW filter
    (scipy.ndimage's n-D semantics).  Staging the whole 3-D halo box
    (TZ + KD − 1)(TY + KH − 1)(TX + KW − 1) per block, as k02 stages a 2-D
    patch, wastes shared memory on planes that are used once.  Instead a block
    owns a TY × TX output tile of TZ consecutive planes and *walks* the input
    planes: each (TY + KH − 1) × (TX + KW − 1) halo plane is staged once, into
    slot ``i % (KD + 1)`` of a ring, and output plane ``o`` is computed as soon
    as its KD input planes are in the ring.  Each input plane is loaded once
    per block and used by up to KD output planes (2.5-D blocking).

    What thread (tx, ty) touches, for output plane o (KD = 3)::

        ring slots:  [ plane o ][ plane o+1 ][ plane o+2 ][ being filled: o+3 ]
        in each:      SH × SW patch, reads rows ty .. ty+KH−1, cols tx .. tx+KW−1
        writes:       out[z0 + o, row0 + ty, col0 + tx]

One barrier per plane: the spare slot
    A ring of exactly KD slots needs two barriers per plane: RAW (the plane is
    staged before anyone reads it) and WAR (nobody still reads the slot the
    next plane overwrites).  With KD + 1 slots, the slot written at step i + 1
    held plane i − KD, last read at step i − 1; step i's RAW barrier already
    separates the two.  One plane of shared memory buys one barrier per plane.

Boundary modes on three axes, by index mapping
    The in-plane mapping (rows and columns, ``extend``) is the same for every
    plane, so each thread maps its share of the patch *once* per block and keeps
    the 32-bit offsets in registers (``off``; constant mode marks "cval" with
    :data:`PAD`); per plane only z is mapped, once.  Offsets are unsigned 32-bit
    (no negative-index tax; a volume has fewer than 2**31 elements, the public
    function checks).  The filter comes as a device array (NumPy filters as a
    cached device copy): one compilation per filter *shape*, mode and dtype, never
    per value; each block stages it in shared memory beside the ring.

Memory traffic and the limit (unmeasured)
    Global loads per block: (TZ + KD − 1)·SH·SW for TZ·TY·TX outputs — 3×3×3 with
    the default 32 × 8 × 16 tile: 1.49 loads per output (the x/y halo: 1.33).
    Shared loads with one output per thread (``rx = 1``, the default): one per tap,
    KD·KH·KW LDS per output (plus the taps, 7 broadcast LDS.128): a 3 × 3 × 3 filter
    is shared-memory-bound before DRAM (benchmarks/notes/conv2d.md, "3-D volumes").

RX outputs per thread in x (``Config.rx``; k03's idea)
    With ``rx`` > 1 a thread computes RX adjacent outputs of its row: the block's
    tile is ``block_y × (rx·block_x)``, a staged row ``rx·block_x + KW − 1`` wide.
    Per output plane and filter row (a, r) the thread loads the WIN = RX + KW − 1
    staged values its RX outputs need into registers (``win``, indexed only by
    unrolled constants, as k03) and does RX·KW FMAs from them, each weight loaded
    once (a broadcast) for RX outputs.  Shared loads per output: KD·KH·(KW + RX −
    1)/RX image values + KD·KH·KW/RX taps — 3³: 27 + 7 (rx = 1: the taps as LDS.128),
    18 + 13.5 (rx = 2), 15 + 9 (rx = 3), 13.5 + 6.75 (rx = 4); FMAs stay 27.
    ``rx = 1`` is the same kernel as before ``rx`` existed (same PTX, both dtypes).

Shared-memory banks: which thread reads which column (a prediction, unmeasured)
    Staging keeps consecutive threads on consecutive columns (coalesced global loads).
    For the reads there were three choices.  Interleaved outputs (thread tx owns
    columns tx + j·block_x) are conflict-free but share no values between a thread's
    outputs: no register window, KD·KH·KW image loads per output as before.  A
    contiguous run (thread tx owns tx·rx … tx·rx + rx − 1: k03's mapping) keeps the
    window, but lane tx reads word tx·rx + q: a gcd(rx, 32)-way conflict for even rx
    (rx = 4 float32: 54 wavefronts per warp-output instead of 13.5 — worse than
    rx = 1), conflict-free for odd rx.  Chosen: the contiguous run, with each staged
    row stored in G = gcd(rx, 32) *phases* (the power of two in rx): logical column c
    goes to element (c mod G)·P + c div G of the row, P = cdiv(SW, G), row stride G·P
    (at most G − 1 padding elements).  Lane tx then reads element (q mod G)·P +
    tx·rx/G + q div G: a stride of rx/G words, odd, so conflict-free for every rx
    (float64: the 16-lane minimum of two wavefronts).  Odd rx has G = 1: the plain row,
    as rx = 1.  The cost is on the stores: consecutive lanes of the staging land P
    apart per phase — predicted store wavefronts per warp-output (float32, 3³, the
    32 × 8 × 16 tile, plane stores amortised over 16 output planes): 1.55 (rx = 1),
    2.95 (2), 1.45 (3), 5.77 (4; P ≡ 8 mod 32 would make it 2.3 at 23 % more shared
    memory, and float64 rx = 4 would no longer fit 48 KiB).  Shared wavefronts per
    warp-output, image reads + taps + stores: rx = 1 35.6, rx = 2 34.5 (the taps now
    scalar: no gain), rx = 3 25.5, rx = 4 26.0.  The issue count drops more: 220 SASS
    instructions per output at rx = 1 (the plane loop, staging included), 94 per filter
    plane for 4 outputs at rx = 4 (~70 per output before the staging; ``sass_mix.py
    conv2d k12_volume rx4 float32 --loop``).  Next step: the taps in
    registers (below), leaving rx = 4 at ~19 wavefronts.

Taps in registers (``Config.taps = REGISTERS``; presets rx1r, rx3r, rx4r, sim_rxr; rx4r ``config=None``'s first)
    k10's idea in 3-D: each thread loads all KD·KH·KW taps from the weights array into registers once per
    block (the same addresses across the warp: one request each, amortised over tile_z·rx outputs; nothing
    staged in shared memory) and the plane loop is generated code (``make_block_accumulator``): per
    (filter plane a, row r) the RX + KW − 1 window values are read once into named registers, then RX·KW
    FMAs with the taps as register operands, in the staged kernel's order (a, r, c, j): the same sums, bit
    for bit.  NVVM unrolls none of that reliably (rx4's plane loop stays a loop), so every index is a
    constant in the source.  Shared loads per output: the image's KD·KH·(KW + RX − 1)/RX (3³: 27 /
    18 / 15 / 13.5 for rx 1-4) and no taps (they were 7 LDS.128, 13.5, 9, 6.75).  scipy's skipped taps: the
    loaded taps say (uniformly for the grid) whether one has ``|w| <= 2**-52`` (or is NaN); then a second
    generated copy that tests each tap runs, else the copy with no test (no FSETP per tap: k10's rule).
    The price is registers (compile gate, sm_90, float32 / float64): rx4r 95 / 132 (rx4 72 / 92), rx3r 91
    / 124, rx1r 78 / 106, no spills — rx4r fits two 256-thread blocks per SM where rx4 fits three.  At
    most :data:`MAX_REGISTER_TAPS` (27) taps: a larger filter with the knob is a ConfigError naming
    ``config``; ``dispatch.VOLUME_REGISTER_TAPS_LADDER`` (``config=None``'s on a GPU) tries rx4r first and the staged
    presets after it.  Off (``SHARED``, every other preset) the PTX is unchanged.

RY outputs per thread in y (``Config.ry``; presets rx3y2, rx4y2, rx2y4, rx2y2, sim_ry; unmeasured)
    With ``ry`` > 1 a thread computes an RY × RX block of outputs, rows ty·RY … ty·RY + RY − 1 of a tile
    ``ry·block_y`` rows tall; a staged plane holds ``ry·block_y + KH − 1`` rows.  The plane loop is generated
    (``make_block_accumulator``, taps staged or in registers): per filter plane a and filter row r one tap
    load (a broadcast) serves RX·RY FMAs, and staged row i's window is read into registers once, just before
    filter row i − RY + 1 first needs it, and serves up to RY output rows (a window of RY rows slides down the
    KH + RY − 1 rows).  Shared loads per output: KD·(KH + RY − 1)·(KW + RX − 1)/(RX·RY) image values +
    KD·KH·KW/(RX·RY) taps — 7³: rx3 147 + 114.3, rx3y2 84 + 57.2, rx2y4 70 + 42.9; 5³: rx4 50 + 31.3, rx4y2 and
    rx2y4 30 + 15.6.  Each output's sum keeps k12's order (a, r, c): the same values, bit for bit, as ``ry = 1``.
    The presets keep the 8-row tiles of the ones above (the same ring: rx3y2, rx2y4 and rx2y2 fit 7³ float32 in
    48 KiB, rx4y2 does not, as rx4), with fewer threads a block (128, or 64 for rx2y4).  ``ry = 1`` compiles to
    the same PTX as before ``ry`` existed (every preset, both dtypes).  No ladder takes them until a GPU has
    timed them (benchmarks/notes/conv2d.md, "RY outputs per thread in y").

Filters whose ring does not fit 48 KiB: :data:`NAIVE` (below), k01's idea in 3-D — each
thread reads its window from global memory, the filter shape read at run time.

Headline: none yet — not measured on a GPU (an H200; the H100's numbers: benchmarks/notes/conv2d.md, "Session 38")
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math

from numba import cuda, int64, uint32, void

from ... import codegen
from ...runtime import Rung, TileConfig, cdiv, numba_dtype
from ._common import TINY_WEIGHT, Mode, mode_rule
from ._staging import inline, make_extend

#: an in-plane offset meaning "outside the volume: cval" (constant mode); real offsets are < 2**31
PAD = 0xFFFFFFFF

#: the most taps (KD·KH·KW) ``Config.taps = REGISTERS`` holds in registers: 3 × 3 × 3 (27 registers a
#: thread in float32, 54 in float64, beside rx4's 72 / 92); a larger filter with the knob on is a ConfigError
#: (``variant=None``'s ladder then takes the next preset)
MAX_REGISTER_TAPS = 27


class Taps(enum.IntEnum):
    """``Config.taps``: where a thread reads the filter's taps from."""

    SHARED = 1  #: staged in shared memory by each block, read as broadcasts (one per tap per RX outputs)
    REGISTERS = 2  #: loaded into registers once per block (the header's "Taps in registers")


SHARED, REGISTERS = Taps.SHARED, Taps.REGISTERS


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A ``block_x × block_y`` block computes a ``(ry·block_y) × (rx·block_x)`` output tile of ``tile_z`` planes,
    an ``ry × rx`` block of adjacent outputs per thread and plane (the header's "RX outputs per thread" and "RY
    outputs per thread in y").
    ``kd``, ``kh``, ``kw`` and ``mode`` are set from the call."""

    block_x: int = 32
    block_y: int = 8
    tile_z: int = 16
    kd: int = 3
    kh: int = 3
    kw: int = 3
    mode: int = Mode.REFLECT
    rx: int = 1
    #: outputs per thread in y (the header's "RY outputs per thread in y"): a thread's RY rows ty·RY … ty·RY + RY − 1
    #: of the tile, which is then ``ry·block_y`` rows tall
    ry: int = 1
    #: :data:`SHARED` (staged beside the ring) or :data:`REGISTERS` (each thread holds the KD·KH·KW taps in
    #: registers, loaded once per block; none staged): the header's "Taps in registers"; REGISTERS takes at
    #: most :data:`MAX_REGISTER_TAPS` taps
    taps: int = Taps.SHARED

    def block(self):
        return (self.block_x, self.block_y)

    def tile_y(self) -> int:
        """Output rows of a block's tile: ``ry · block_y``."""
        return self.ry * self.block_y

    def tile_x(self) -> int:
        """Output columns of a block's tile: ``rx · block_x``."""
        return self.rx * self.block_x

    def staged_cols(self) -> int:
        """Columns of one staged halo row: ``rx · block_x + KW − 1``."""
        return self.tile_x() + self.kw - 1

    def phases(self) -> int:
        """How many phases a staged row is split into: the power of two in ``rx`` (``gcd(rx, 32)``;
        1 for odd ``rx``, the plain row).  The header's "Shared-memory banks" says why."""
        return math.gcd(self.rx, 32)

    def row_stride(self) -> int:
        """Shared elements per staged row: ``phases · cdiv(staged_cols, phases)`` (the plain row for odd rx)."""
        g = self.phases()
        return g * cdiv(self.staged_cols(), g)

    def plane(self) -> int:
        """Shared elements of one staged halo plane: (ry·block_y + KH − 1) · row_stride
        (rx = 1: (ry·block_y + KH − 1) · (TX + KW − 1))."""
        return (self.tile_y() + self.kh - 1) * self.row_stride()

    def smem_bytes(self, itemsize):
        taps = 0 if self.taps == REGISTERS else self.kd * self.kh * self.kw
        return ((self.kd + 1) * self.plane() + taps) * itemsize  # ring + filter (staged unless in registers)

    def rules(self):
        yield mode_rule(self)
        n = self.kd * self.kh * self.kw
        yield ("taps", self.taps == SHARED or (self.taps == REGISTERS and n <= MAX_REGISTER_TAPS),
               f"taps is {int(SHARED)} (shared memory) or {int(REGISTERS)} (registers: kd·kh·kw <= "
               f"{MAX_REGISTER_TAPS} taps; this filter has {n})")


PRESETS = {
    "sim": Config(block_x=4, block_y=3, tile_z=2, kd=3, kh=2, kw=3, mode=Mode.WRAP),
    # the simulator's tiles with rx > 1: an even rx (two phases) over a ragged width, 4 × 3 tile of 2 planes
    "sim_rx": Config(block_x=2, block_y=3, tile_z=2, kd=2, kh=3, kw=3, mode=Mode.CONSTANT, rx=2),
    "default": Config(),
    # RX outputs per thread in x (unmeasured: volume_filter_probe.py --configs times them beside the default)
    "rx2": Config(rx=2),
    "rx3": Config(rx=3),
    "rx4": Config(rx=4),
    # the same with the taps in registers (unmeasured: volume_filter_probe.py --configs times them beside rx2-rx4)
    "rx1r": Config(taps=REGISTERS),
    "rx3r": Config(rx=3, taps=REGISTERS),
    "rx4r": Config(rx=4, taps=REGISTERS),
    # the simulator's tiles with the taps in registers: two phases over a ragged width, an even filter side
    "sim_rxr": Config(block_x=2, block_y=3, tile_z=2, kd=2, kh=3, kw=2, mode=Mode.MIRROR, rx=2,
                      taps=REGISTERS),
    # RY outputs per thread in y, taps staged: a tile of 8 rows as the presets above (the same ring: rx3y2, rx2y4
    # and rx2y2 fit 7³ in 48 KiB), fewer threads a block; rx3y2 is config=None's first (dispatch.VOLUME_RX_LADDER:
    # H100 256³, 3³ 73.8 µs and 5³ 185 µs against 77.2 and 289 for rx4r/rx4)
    "rx3y2": Config(block_y=4, rx=3, ry=2),
    "rx4y2": Config(block_y=4, rx=4, ry=2),
    "rx2y4": Config(block_y=2, rx=2, ry=4),
    "rx2y2": Config(block_y=4, rx=2, ry=2),
    # the simulator's tiles with ry > 1: a 4 × 4 tile (2 × 2 threads, two phases) of 2 planes, an odd filter height
    "sim_ry": Config(block_x=2, block_y=2, tile_z=2, kd=2, kh=3, kw=3, mode=Mode.REFLECT, rx=2, ry=2),
}


def make_tap_loader(config: Config):
    """``load_taps(weights, wl, tiny) -> bool``: the KD·KH·KW taps of ``weights`` (any strided 3-D view)
    into the local array ``wl`` (flat, constant indices: registers), and whether one of them is a tap
    scipy skips (``not |w| > tiny``, NaN included).  Generated: one line per tap, so the indices are
    constants whether or not NVVM unrolls a loop."""
    KD, KH, KW = config.kd, config.kh, config.kw
    src = codegen.Source()
    with src.block("def load_taps(weights, wl, tiny):"):
        taps = [(a, r, c) for a in range(KD) for r in range(KH) for c in range(KW)]
        src.line(*(f"wl[{k}] = weights[{a}, {r}, {c}]" for k, (a, r, c) in enumerate(taps)))
        src.line("return not (" + " and ".join(f"abs(wl[{k}]) > tiny" for k in range(len(taps))) + ")")
    return inline(codegen.load_function("load_taps", src.text()))


def make_block_accumulator(config: Config, checked: bool):
    """``accumulate(ring, taps, accs, oz, at0, tiny)`` for ``ry`` > 1 or the taps in registers: output plane ``oz``'s RY × RX outputs of
    one thread (``accs[k·RX + j]``: row k, column j), added to ``accs``, from the taps (``Config.taps``:
    :data:`REGISTERS`, ``taps`` the flat local array ``wl``; :data:`SHARED`, the staged ``w_s[a, r, c]``) and
    the ring; ``at0``: the thread's first window element in a staged plane (row ty·RY, phase-split column
    tx·RX).  Per filter plane a and filter row r: one tap load (a broadcast, or a register) serves RX·RY FMAs;
    staged row i's RX + KW − 1 window values are read into named registers once, just before filter row
    r = i − RY + 1 first needs them, and serve up to RY output rows (rows r … r + RY − 1 live: a sliding window of
    RY rows).  Each output's sum is in k12's order (a, r, c): the same sums, bit for bit, as ``ry = 1``.
    ``checked``: each tap tested (``|w| > tiny``, scipy's skip).  Generated: every index a constant."""
    KD, KH, KW, RX, RY, G = config.kd, config.kh, config.kw, config.rx, config.ry, config.phases()
    RS, NSLOT = config.row_stride(), config.kd + 1
    P = RS // G
    WIN = RX + KW - 1
    src = codegen.Source()
    with src.block("def accumulate(ring, taps, accs, oz, at0, tiny):"):
        for a in range(KD):
            src.line(f"s{a} = (oz + uint32({a})) % uint32({NSLOT})  # the slot of input plane oz + {a}")
            loaded = 0  # staged rows read into registers so far (this filter plane)
            for r in range(KH):
                while loaded < r + RY:  # rows r … r + RY − 1: the window filter row r needs
                    i = loaded
                    # logical column tx·RX + q of staged row ty·RY + i: phase q % G, element tx·RX/G + q // G of it
                    src.line(*(f"x{a}_{i}_{q} = ring[s{a}, at0 + uint32({i * RS + (q % G) * P + q // G})]"
                               for q in range(WIN)))
                    loaded += 1
                for c in range(KW):
                    k = (a * KH + r) * KW + c
                    src.line(f"t = taps[{k}]" if config.taps == REGISTERS else f"t = taps[{a}, {r}, {c}]")
                    with contextlib.ExitStack() as guard:
                        if checked:
                            guard.enter_context(src.block("if abs(t) > tiny:"))
                        src.line(*(f"accs[{y * RX + j}] += t * x{a}_{r + y}_{j + c}"
                                   for y in range(RY) for j in range(RX)))
    return inline(codegen.load_function("accumulate", src.text(), header="from numba import uint32"))


def make_kernel(config: Config, dtype, all_taps=False):
    BX, BY, TZ, KD, KH, KW = config.block_x, config.block_y, config.tile_z, config.kd, config.kh, config.kw
    RX, G, RS = config.rx, config.phases(), config.row_stride()  # outputs per thread in x; row phases; row stride
    RY, TY, NACC = config.ry, config.tile_y(), config.ry * config.rx  # outputs in y; tile rows; outputs a thread
    TX, SW = config.tile_x(), config.staged_cols()
    P, RXG = RS // G, RX // G  # elements per phase of a staged row; a thread's step within a phase
    WIN = RX + KW - 1  # staged values of one row a thread needs for its RX outputs (register window)
    STAGED = (TY + KH - 1) * SW  # elements each plane stages (rx = 1 or odd rx: the plane itself)
    PLANE, NSLOT, THREADS, TAPS = config.plane(), KD + 1, config.threads, KD * KH * KW
    LOADS, W_LOADS = cdiv(STAGED, THREADS), cdiv(TAPS, THREADS)  # patch elements / taps each thread stages
    DT = numba_dtype(dtype)
    TINY, ALL_TAPS = DT(TINY_WEIGHT), bool(all_taps)
    CONSTANT = int(config.mode) == int(Mode.CONSTANT)
    extend = make_extend(config.mode)
    TR = config.taps == REGISTERS  # the taps in registers (the header's "Taps in registers")
    # an RY × RX block of outputs per thread (the header's "RY outputs per thread in y"), or the taps in registers
    # (RY 1): the generated accumulator's loop
    BLOCKED = RY > 1 or TR
    load_taps = make_tap_loader(config) if TR else None  # (None: never called, the branches on TR are pruned)
    if BLOCKED:
        add_all, add_checked = make_block_accumulator(config, False), make_block_accumulator(config, True)
    else:
        add_all = add_checked = None  # never called: the branches on BLOCKED are pruned

    def conv3d_k12_volume(image, weights, out, cval, d, h, w, anchor_d, anchor_h, anchor_w, blocks_x, blocks_y):
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        tid = ty * uint32(BX) + tx
        b = uint32(cuda.blockIdx.x)  # a 1-D grid (CUDA's y and z stop at 65535): block → (z, y, x) tile
        t = uint32(b // uint32(blocks_x))
        col0, row0 = (b - t * uint32(blocks_x)) * uint32(TX), (t % uint32(blocks_y)) * uint32(TY)
        z0 = uint32(t // uint32(blocks_y)) * uint32(TZ)
        hw = uint32(h * w)
        ring = cuda.shared.array((NSLOT, PLANE), DT)
        if TR:  # every thread loads every tap (the same addresses: one request a warp), once per block
            wl = cuda.local.array(TAPS, DT)  # registers: constant indices only (generated code)
            sparse = load_taps(weights, wl, TINY) and not ALL_TAPS  # uniform over the grid
        else:
            w_s = cuda.shared.array((KD, KH, KW), DT)
            for k in range(W_LOADS):  # the filter, beside the ring (read after the first plane's barrier)
                e = tid + uint32(k * THREADS)
                if e < uint32(TAPS):
                    a, rc = e // uint32(KH * KW), e % uint32(KH * KW)
                    w_s[a, rc // uint32(KW), rc % uint32(KW)] = weights[a, rc // uint32(KW), rc % uint32(KW)]
        # in-plane offsets of this thread's share of the patch, mapped once (the same in every plane); with
        # several phases also where each element goes in the ring row (column c → phase c % G, c // G in it)
        off = cuda.local.array(LOADS, uint32)
        pos = cuda.local.array(LOADS, uint32)
        for p in range(LOADS):
            e = tid + uint32(p * THREADS)
            r, c = e // uint32(SW), e % uint32(SW)
            gr = extend(int64(row0) + int64(r) - anchor_h, h)
            gc = extend(int64(col0) + int64(c) - anchor_w, w)
            off[p] = PAD if gr < 0 or gc < 0 else uint32(gr * w + gc)
            if G > 1:
                pos[p] = r * uint32(RS) + (c % uint32(G)) * uint32(P) + c // uint32(G)
        if BLOCKED:
            row, col = row0 + ty * uint32(RY), col0 + tx * uint32(RX)  # this thread's first output row and column
        elif RX == 1:
            row, col = row0 + ty, col0 + tx
        else:
            row, col = row0 + ty, col0 + tx * uint32(RX)  # this thread's first output column
        planes = min(TZ, d - int64(z0)) + KD - 1  # input planes this block walks (block-uniform)
        for i in range(planes):
            slot = uint32(i) % uint32(NSLOT)
            gz = extend(int64(z0) + i - anchor_d, d)  # z mapped once per plane
            base = uint32(max(gz, 0)) * hw
            for p in range(LOADS):
                e = tid + uint32(p * THREADS)
                if (p + 1) * THREADS <= STAGED or e < uint32(STAGED):
                    o = off[p]
                    at = pos[p] if G > 1 else e  # (odd rx: the plain row, e itself)
                    if CONSTANT:
                        ring[slot, at] = cval if gz < 0 or o == PAD else image[base + o]
                    else:
                        ring[slot, at] = image[base + o]
            cuda.syncthreads()  # RAW: plane i (and, the first time, the filter) staged; WAR: see the header
            if BLOCKED:
                if i >= KD - 1 and row < uint32(h) and col < uint32(w):  # output plane i − (KD − 1) is complete
                    oz = uint32(i - (KD - 1))
                    accs = cuda.local.array(NACC, DT)  # registers: row k's output j at k·RX + j
                    for j in range(NACC):
                        accs[j] = DT(0)
                    at0 = ty * uint32(RY * RS) + tx * uint32(RXG)  # staged row ty·RY, the phase-split column tx·RX
                    if TR:
                        if sparse:  # a tap scipy skips: the copy that tests each one
                            add_checked(ring, wl, accs, oz, at0, TINY)
                        else:
                            add_all(ring, wl, accs, oz, at0, TINY)
                    elif ALL_TAPS:
                        add_all(ring, w_s, accs, oz, at0, TINY)
                    else:  # staged taps: each tested, as the rx path does
                        add_checked(ring, w_s, accs, oz, at0, TINY)
                    for k in range(RY):
                        if row + uint32(k) < uint32(h):
                            at = (z0 + oz) * hw + (row + uint32(k)) * uint32(w) + col
                            for j in range(RX):
                                if col + uint32(j) < uint32(w):
                                    out[at + uint32(j)] = accs[k * RX + j]
            elif RX == 1:
                if i >= KD - 1 and row < uint32(h) and col < uint32(w):  # output plane i − (KD − 1) is complete
                    oz = uint32(i - (KD - 1))
                    acc = DT(0)
                    for a in range(KD):
                        s = (oz + uint32(a)) % uint32(NSLOT)  # the slot holding input plane oz + a
                        for r in range(KH):
                            for c in range(KW):
                                wv = w_s[a, r, c]  # one address for the block: a broadcast
                                if ALL_TAPS or abs(wv) > TINY:  # scipy skips |w| <= 2**-52 (NaN spreads as scipy's)
                                    acc += wv * ring[s, (ty + uint32(r)) * uint32(SW) + tx + uint32(c)]
                    out[(z0 + oz) * hw + row * uint32(w) + col] = acc
            elif i >= KD - 1 and row < uint32(h) and col < uint32(w):  # RX outputs, the first one inside
                oz = uint32(i - (KD - 1))
                accs = cuda.local.array(RX, DT)  # registers: indexed by unrolled constants only (as k03)
                win = cuda.local.array(WIN, DT)
                for j in range(RX):
                    accs[j] = DT(0)
                for a in range(KD):
                    s = (oz + uint32(a)) % uint32(NSLOT)
                    for r in range(KH):
                        # logical column tx·RX + q of the row: phase q % G, element tx·RX/G + q // G of it
                        at = (ty + uint32(r)) * uint32(RS) + tx * uint32(RXG)
                        for q in range(WIN):  # WIN shared loads serve RX·KW FMAs
                            win[q] = ring[s, at + uint32((q % G) * P + q // G)]
                        for c in range(KW):
                            wv = w_s[a, r, c]  # a broadcast, reused RX times
                            if ALL_TAPS or abs(wv) > TINY:
                                for j in range(RX):
                                    accs[j] += wv * win[j + c]
                at = (z0 + oz) * hw + row * uint32(w) + col
                for j in range(RX):
                    if col + uint32(j) < uint32(w):
                        out[at + uint32(j)] = accs[j]

    return conv3d_k12_volume


def signature(dtype):
    """``void(image, weights, out, cval, d, h, w, anchor_d, anchor_h, anchor_w, blocks_x, blocks_y)``:
    image and out flat C-contiguous views of the D × H × W volume; weights any strided 3-D view (the
    flipped filter of convolve has negative strides)."""
    t = numba_dtype(dtype)
    return void(t[::1], t[:, :, :], t[::1], t, *([int64] * 8))


def geometry(config: Config, d: int, h: int, w: int):
    """``((blocks,), block, blocks_x, blocks_y)``: one block per tile_z × (ry·block_y) × (rx·block_x) tile, on a
    1-D grid."""
    bx, by, bz = cdiv(w, config.tile_x()), cdiv(h, config.tile_y()), cdiv(d, config.tile_z)
    return (bx * by * bz,), config.block(), bx, by


# ---------------------------------------------------------------------------
# The fallback: k01 in 3-D (any filter size; its shape read at run time)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NaiveConfig(TileConfig):
    """``threads`` threads per block on a 1-D grid, one output each (x fastest: coalesced)."""

    threads_x: int = 128
    mode: int = Mode.REFLECT

    def block(self):
        return (self.threads_x,)

    def rules(self):
        yield mode_rule(self)


NAIVE_PRESETS = {"sim": NaiveConfig(8, mode=Mode.MIRROR), "default": NaiveConfig(128, mode=Mode.NEAREST)}


def make_naive(config: NaiveConfig, dtype, all_taps=False):
    DT = numba_dtype(dtype)
    TINY, ALL_TAPS = DT(TINY_WEIGHT), bool(all_taps)
    CONSTANT = int(config.mode) == int(Mode.CONSTANT)
    extend = make_extend(config.mode)

    def conv3d_k12_naive(image, weights, out, cval, d, h, w, anchor_d, anchor_h, anchor_w):
        i = uint32(cuda.grid(1))
        if i < uint32(d * h * w):
            x, t = i % uint32(w), i // uint32(w)
            y, z = t % uint32(h), t // uint32(h)
            kd, kh, kw = weights.shape
            acc = DT(0)
            for a in range(kd):
                gz = extend(int64(z) + a - anchor_d, d)
                for r in range(kh):
                    gr = extend(int64(y) + r - anchor_h, h)
                    for c in range(kw):
                        wv = weights[a, r, c]
                        if ALL_TAPS or abs(wv) > TINY:
                            gc = extend(int64(x) + c - anchor_w, w)
                            if CONSTANT and (gz < 0 or gr < 0 or gc < 0):
                                acc += wv * cval
                            else:
                                acc += wv * image[uint32((gz * h + gr) * w + gc)]
            out[i] = acc

    return conv3d_k12_naive


def naive_signature(dtype):
    t = numba_dtype(dtype)
    return void(t[::1], t[:, :, :], t[::1], t, *([int64] * 6))


def naive_geometry(config: NaiveConfig, d: int, h: int, w: int):
    return (cdiv(d * h * w, config.threads_x),), config.block()


@dataclasses.dataclass(frozen=True, eq=False)
class VolumeRung(Rung):
    """A 3-D rung: ``run(config, call)`` with a :class:`~._common.VolumeCall` (flat views, anchors)."""

    def run(self, config, call) -> None:
        d, h, w = call.image.shape
        n = d * h * w
        image, out = call.image.reshape(n), call.out.reshape(n)
        weights = call.weights.dev[::-1, ::-1, ::-1] if call.flipped else call.weights.dev
        grid, block, *blocks = self.geometry(config, d, h, w)
        kernel = self.kernel(config, call.dtype)
        kernel[grid, block, call.stream](image, weights, out, call.dtype.type(call.cval), d, h, w, *call.anchor,
                                         *blocks)


RUNG = VolumeRung("k12_volume", Config, PRESETS, make_kernel, geometry, signature)
#: the fallback of ``variant=None`` when the ring does not fit shared memory: spill-free is not asked of
#: it (run-time loops over the filter shape), as of k01
NAIVE = VolumeRung("k12_volume_naive", NaiveConfig, NAIVE_PRESETS, make_naive, naive_geometry, naive_signature)
