"""k04 — depthwise: a block stages one channel's input patch with its halo once, the taps in registers.

What changed versus k01
    A depthwise layer (groups = C_in, C_out = M·C_in: output channel o reads input channel
    o // M alone, ``_params.py``) has no channel reduction: an output is KH·KW multiply-adds, so
    the layer moves bytes rather than doing FLOPs (3 × 3: 9 FMAs per 8 bytes read and written).
    k01 gives every output a thread that fetches its own KH·KW window through L1, so each input
    value is fetched by up to KH·KW threads.  Here a block of ``block_x × block_y`` threads owns
    a TH × TW tile of output pixels (TH = block_y, TW = block_x·RW) of one image and one input
    channel:

    1. the threads copy the tile's input patch — (TH − 1)·sh + (KH − 1)·dh + 1 rows by
       (TW − 1)·sw + (KW − 1)·dw + 1 columns, the halo included — from global into shared memory
       once, consecutive threads taking consecutive columns (coalesced); a position in the zero
       padding, or past the image, stores 0;
    2. each thread loads the KH·KW taps of its output channel into registers (one address for the
       whole block: broadcasts), issued before the barrier so that they fly with the patch;
    3. barrier (RAW: nobody reads the patch before every share of it is stored);
    4. each thread computes RW consecutive outputs of one output row: per filter row it reads the
       (RW − 1)·sw + (KW − 1)·dw + 1 input values its outputs need into registers (``win``), then
       does KW·RW multiply-adds from registers;
    5. a channel multiplier M > 1 repeats 4 for the M output channels of that input channel: the
       patch staged once serves them all (the taps of channel m + 1 load while channel m's outputs
       are stored).

    The patch is written once and then only read: one barrier, no WAR hazard.  Threads whose
    outputs lie past the image still stage their share and reach the barrier; they only skip the
    stores.

Memory traffic (teaching number)
    Global: each output written once; each input value read by the blocks whose patch holds it —
    the halo makes that (TH + 2)/TH · (TW + 2)/TW ≈ 1.2× for the default tile and a 3 × 3 filter
    at stride 1, the repeats mostly L2 hits — so the layer's floor is reading x and writing y
    once: N·C_in·H·W + N·C_out·OH·OW elements (k01: KH·KW loads per output, from L1 at best).
    Shared: per thread and filter row RW + KW − 1 loads for KW·RW FMAs at stride 1 (default 3 × 3:
    6 per 12).  Stores: a lane writes RW consecutive outputs, so one store instruction of a warp
    touches every RW-th word of its rows (the L2 merges the sectors; 128-bit stores are not used).

Shared-memory banks
    Thread (tx, ty) reads its window at word ty·sh·P + tx·RW·sw of the patch (P: the row length in
    shared memory).  With block_x = 8, RW = 4 (the default) a warp covers 4 rows of 8 lanes whose
    windows are 4 words apart, so the rows must start in different banks mod 4: :func:`padded_row`
    picks the smallest P ≥ the patch's width that spreads a warp's reads over the most banks —
    conflict-free at stride 1 (P odd), 2-way at stride 2 (windows 8 words apart: 8 lanes of a row
    cover only 4 of the 8-word bank groups), which leaves shared memory far from the limit in a
    kernel bound by DRAM.

Compile-time constants
    The filter shape, stride and dilation (``kh``, ``kw``, ``stride_h``, ``stride_w``, ``dil_h``,
    ``dil_w``: the patch's shape, the window length and the unrolled loops need them); the launcher
    replaces a config's values with the call's (:func:`for_layer`; the presets' values only choose
    what the compile gate builds).  The padding stays a run-time argument: it only shifts where
    the patch starts.  Rules: stride 1 or 2 per axis; at most :data:`TAPS_MAX` taps (they live in
    registers); the patch fits 48 KiB (a dilation stretches it).

Headline: none yet — not measured on a GPU (benchmarks/lab/conv_issue33.py's zoo will give it; the expected time of each layer is in benchmarks/notes/conv_nchw.md)
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda, uint32

from ...runtime import TileConfig, cdiv, numba_dtype
from ..matmul._blocked import u32
from .k01_direct import DirectRung, signature

#: the most taps (KH·KW) a thread holds in registers: 7 × 7, the largest depthwise filter of the common
#: CNNs (MobileNet/EfficientNet 3 × 3 and 5 × 5, ConvNeXt 7 × 7)
TAPS_MAX = 49
#: shared-memory banks (sm_90): 32 of 4 bytes
BANKS = 32


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A ``block_x × block_y`` block computes a ``block_y × (block_x·rw)`` tile of one output plane's
    pixels, each thread ``rw`` consecutive outputs of one row, for every output channel of one input
    channel.  ``kh``… ``dil_w`` are the layer's, set by the launcher (:func:`for_layer`).
    ``min_blocks``: blocks per SM the launch bounds ask room for (float32; see :func:`jit_options`)."""

    block_x: int = 8
    block_y: int = 16
    rw: int = 4
    kh: int = 3
    kw: int = 3
    stride_h: int = 1
    stride_w: int = 1
    dil_h: int = 1
    dil_w: int = 1
    min_blocks: int = 16

    def block(self):
        return (self.block_x, self.block_y)

    @property
    def tile_h(self) -> int:
        return self.block_y

    @property
    def tile_w(self) -> int:
        return self.block_x * self.rw

    def patch(self) -> tuple[int, int]:
        """(rows, columns) of the input one output tile reads: the tile, the stride, the halo."""
        return ((self.tile_h - 1) * self.stride_h + (self.kh - 1) * self.dil_h + 1,
                (self.tile_w - 1) * self.stride_w + (self.kw - 1) * self.dil_w + 1)

    @property
    def window(self) -> int:
        """Input values one thread reads per filter row: its RW outputs' taps, the gaps between included."""
        return (self.rw - 1) * self.stride_w + (self.kw - 1) * self.dil_w + 1

    @property
    def x_loads(self) -> int:
        """Patch elements each thread stages (at most)."""
        rows, cols = self.patch()
        return cdiv(rows * cols, self.threads)

    def smem_bytes(self, itemsize):
        return self.patch()[0] * padded_row(self) * itemsize

    def registers(self, itemsize) -> int:
        """Registers a thread needs without spilling, as estimated for the launch bounds
        (:func:`jit_options`; :func:`simt_tiles.runtime.fits` reads it too): the taps, the window
        entries its FMAs read, the accumulators and the patch elements it stages (ptxas issues those
        loads together), 12 more per such word for offsets, plus 12, in 8-register steps, and at
        least 64.  Fitted to what ptxas (CUDA 13.5, sm_90) compiled without local memory: the
        presets' 3 × 3 filters at stride 1 and 2, 5 × 5, 7 × 7, dilation 2 (:func:`jit_options`)."""
        words = max(1, itemsize // 4)
        needed = len({r * self.stride_w + b * self.dil_w for r in range(self.rw) for b in range(self.kw)})
        values = self.kh * self.kw + needed + self.rw + self.x_loads + 12
        return max(64, cdiv(words * values + 12, 8) * 8)

    def rules(self):
        yield ("stride_h", self.stride_h <= 2, "stride_h in (1, 2)")
        yield ("stride_w", self.stride_w <= 2, "stride_w in (1, 2)")
        yield ("kw", self.kh * self.kw <= TAPS_MAX, f"kh * kw <= {TAPS_MAX} (the taps stay in registers)")
        yield ("rw", self.rw <= 8, "rw <= 8 (a thread's outputs and window stay in registers)")


def padded_row(config: Config) -> int:
    """The patch's row length in shared memory: of the lengths P ≥ its width (P < width + 32), the
    smallest at which the first warp's first window reads — lane (tx, ty) at word
    ty·stride_h·P + tx·rw·stride_w — hit no bank more often than at any other (the fewest wavefronts)."""
    width = config.patch()[1]
    bx = config.block_x
    lanes = [(t % bx, t // bx) for t in range(min(32, config.threads))]

    def worst(p: int) -> int:
        hits: dict = {}
        for tx, ty in lanes:
            bank = (ty * config.stride_h * p + tx * config.rw * config.stride_w) % BANKS
            hits[bank] = hits.get(bank, 0) + 1
        return max(hits.values())

    return min(range(width, width + BANKS), key=lambda p: (worst(p), p))


# A call replaces kh ... dil_w; the presets' values only choose what the compile gate builds: sim an even
# filter height, a mixed stride and a dilation; small stride 2 (the layers it is for: 7 × 7 and 14 × 14 outputs).
PRESETS = {
    "sim": Config(block_x=2, block_y=2, rw=2, kh=2, kw=3, stride_h=2, stride_w=1, dil_h=1, dil_w=2, min_blocks=1),
    "default": Config(block_x=8, block_y=16, rw=4, min_blocks=16),
    "small": Config(block_x=4, block_y=8, rw=2, stride_h=2, stride_w=2, min_blocks=32),
}


def for_layer(config: Config, kh: int, kw: int, stride, dilation) -> Config:
    """``config`` with the layer's filter shape, stride and dilation compiled in (re-validated: a
    stride above 2, too many taps or a patch over 48 KiB raise ConfigError naming the field)."""
    return dataclasses.replace(config, kh=kh, kw=kw, stride_h=stride[0], stride_w=stride[1],
                               dil_h=dilation[0], dil_w=dilation[1])


def make_kernel(config: Config, dtype):
    BX, RW, KH, KW = config.block_x, config.rw, config.kh, config.kw
    STH, STW, DH, DW = config.stride_h, config.stride_w, config.dil_h, config.dil_w
    TH, TW = config.tile_h, config.tile_w
    PH, PW = config.patch()
    P = padded_row(config)
    X_SIZE = PH * P  # the patch, flat: rows P apart
    THREADS = config.threads
    X_LOADS = config.x_loads
    TAPS = KH * KW
    WIN = config.window
    DT = numba_dtype(dtype)
    # Unsigned 32-bit constants: index arithmetic stays unsigned (numba widens
    # uint32 (+) uint32 to uint64; uint32(...) around a sum truncates it back).
    U = u32
    U_BX, U_RW, U_TH, U_TW, U_PW, U_P = U(BX), U(RW), U(TH), U(TW), U(PW), U(P)
    U_PATCH, U_TAPS, U_STH, U_STW = U(PH * PW), U(TAPS), U(STH), U(STW)
    U_ROW0, U_COL0 = U(STH * P), U(RW * STW)  # a thread's window start: per ty, per tx
    U_ZERO, U_ONE = U(0), U(1)

    def conv_nchw_k04_depthwise(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad_h, pad_w,
                                kh_unused, kw_unused, sh_unused, sw_unused, dh_unused, dw_unused,
                                groups_unused, has_bias):
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        tid = uint32(ty * U_BX + tx)

        # this block: tile column (fastest: neighbours share halo columns in L2), tile row, input channel, image
        tiles_w = uint32((ow_n + TW - 1) // TW)
        tiles_h = uint32((oh_n + TH - 1) // TH)
        bid = uint32(cuda.blockIdx.x)
        t = uint32(bid // tiles_w)
        col0 = uint32(uint32(bid - t * tiles_w) * U_TW)  # the tile's first output column
        plane = uint32(t // tiles_h)  # n * C_in + c
        row0 = uint32(uint32(t - plane * tiles_h) * U_TH)
        n = uint32(plane // uint32(c_in))
        c = uint32(plane - n * uint32(c_in))
        mult = uint32(uint32(c_out) // uint32(c_in))  # output channels per input channel

        x_s = cuda.shared.array(X_SIZE, DT)  # the patch, halo included, rows P apart
        taps = cuda.local.array(TAPS, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        acc = cuda.local.array(RW, DT)

        # (1) stage the patch: element e is patch row e // PW, column e % PW; its row and column in the
        # zero-padded input are the tile's corner (row0·sh, col0·sw) plus those.  Coordinates stay
        # non-negative: compared with the padding before it is subtracted.
        upad_h, upad_w = uint32(pad_h), uint32(pad_w)
        uh, uw = uint32(h), uint32(wd)
        ip0 = uint32(row0 * U_STH)
        jp0 = uint32(col0 * U_STW)
        x_plane = uint32(plane * uint32(uh * uw))  # x[n, c, 0, 0]
        for p in range(X_LOADS):
            e = uint32(tid + uint32(p * THREADS))
            if e < U_PATCH:
                pr = uint32(e // U_PW)
                pc = uint32(e - pr * U_PW)
                ip = uint32(ip0 + pr)
                jp = uint32(jp0 + pc)
                v = DT(0)
                if ip >= upad_h and jp >= upad_w and uint32(ip - upad_h) < uh and uint32(jp - upad_w) < uw:
                    v = x[uint32(x_plane + uint32(uint32(ip - upad_h) * uw) + uint32(jp - upad_w))]
                x_s[uint32(pr * U_P + pc)] = v
        # (2) the first output channel's taps, in flight with the patch
        o = uint32(c * mult)  # output channels o .. o + mult - 1 read input channel c
        w_off = uint32(o * U_TAPS)
        for i in range(TAPS):
            taps[i] = w[uint32(w_off + uint32(i))]
        # (3) RAW: every share of the patch is stored before anyone reads it
        cuda.syncthreads()

        # (4) RW consecutive outputs of output row oh, per output channel of this input channel
        oh = uint32(row0 + ty)
        ow0 = uint32(col0 + tx * U_RW)
        row_ok = oh < uint32(oh_n)
        xa = uint32(ty * U_ROW0 + tx * U_COL0)  # this thread's window start in x_s, filter row 0
        dst_row = uint32(uint32(n * uint32(c_out) + o) * uint32(oh_n) + oh)  # out[n, o, oh, :] / OW
        m = U_ZERO
        while m < mult:  # (5) the patch serves every output channel of input channel c
            for r in range(RW):
                acc[r] = DT(0)
            for a in range(KH):
                row = uint32(xa + uint32(a * DH * P))
                for q in range(WIN):
                    win[q] = x_s[uint32(row + uint32(q))]
                for b in range(KW):
                    tap = taps[a * KW + b]
                    for r in range(RW):  # unrolled: every index a constant
                        acc[r] += tap * win[r * STW + b * DW]
            bv = DT(0)
            if has_bias:
                bv = bias[uint32(o + m)]
            m = uint32(m + U_ONE)
            if m < mult:  # the next channel's taps load while this one's outputs are stored
                w_off = uint32(w_off + U_TAPS)
                for i in range(TAPS):
                    taps[i] = w[uint32(w_off + uint32(i))]
            if row_ok:
                dst = uint32(dst_row * uint32(ow_n))
                for r in range(RW):
                    ow = uint32(ow0 + uint32(r))
                    if ow < uint32(ow_n):
                        out[uint32(dst + ow)] = acc[r] + bv if has_bias else acc[r]
            dst_row = uint32(dst_row + uint32(oh_n))  # the next output channel's row oh

    return conv_nchw_k04_depthwise


def geometry(config: Config, n: int, c_out: int, oh: int, ow: int, groups: int | None = None):
    """A 1-D grid: one block per output tile of each (image, input channel) plane, tile columns fastest
    (``groups``: C_in; None: C_out, a multiplier of 1)."""
    planes = n * (c_out if groups is None else groups)
    return (planes * cdiv(oh, config.tile_h) * cdiv(ow, config.tile_w),), config.block()


def jit_options(config: Config, dtype) -> dict:
    """Launch bounds of ``min_blocks`` blocks per SM, or as many as :meth:`Config.registers` leaves
    room for if fewer (a 3 × 3 float32 filter: 8 blocks of 128 threads, 64 registers; 7 × 7: 5;
    float64 3 × 3: 5).  A kernel bound by DRAM wants many blocks per SM — their patch loads are
    what is in flight — but not at the price of spilling to local memory, whose traffic is more
    DRAM traffic.  The compile gate builds the presets (spill-free); ptxas's choices are not monotonic
    in the bound, and a few other filters still spill a little under it (5 × 5 at stride 2: 80 B in
    float32), float64 7 × 7 under any bound (its taps and windows exceed 255 registers): correct, slower."""
    regs = config.registers(np.dtype(dtype).itemsize)
    blocks = max(1, min(config.min_blocks, 65536 // (config.threads * regs)))
    return {"launch_bounds": (config.threads, blocks)}


#: launched as k01 (``DirectRung``): the kernel takes torch's parameters from the call (``Call.direct_args``;
#: those compiled in are ignored there) and its grid the call's groups
RUNG = DirectRung("k04_depthwise", Config, PRESETS, make_kernel, geometry, signature, jit_options)
