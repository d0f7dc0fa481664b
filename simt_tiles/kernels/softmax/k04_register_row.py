"""k04 — the row lives in registers: read once, write once (the copy's traffic).

What changed versus k03
    k01–k03 read each row two or three times from global memory (once per
    reduction, once to write); for a 128 KiB row of 32768 floats the second
    read rarely hits L2, so they move 1.5–2× the bytes of a copy.  Here a
    *group* of G threads owns a row and each thread keeps its VPT values of
    the row in registers (``vals``, a local array indexed only by unrolled
    constants, so it stays in registers — the compile gate checks there is no
    stack frame).  max → sum of exp → write all run on the registers: one
    read and one write per element, as a device copy.

    The launcher fits G and VPT to the row (``Config.for_problem``): G is
    the power of two (``min_group`` … ``threads``) that gives each thread about
    ``vpt_target`` values, VPT the power of two that covers the row.  Short
    rows get a few lanes each, several rows to a warp, and a block packs
    ``threads / G`` rows (no barrier at all: the reductions are warp shuffles
    over offsets below G); long rows get the whole block and two barriers (one
    per cross-warp reduction).  A row longer than
    ``threads · max_vpt`` 32-bit values (default 512 · 32: 16384 float32,
    8192 float64) does not fit: ``variant=None`` then uses k05 (k03 beyond
    k05's reach).  Values per
    thread are also capped at 65536 / threads − 32 registers (1024 threads:
    32), what the SM's register file leaves per thread.

    Loads are coalesced: value i of thread t is column t + i·G, so for each i
    the G threads read G consecutive floats; the VPT loads of a thread are
    independent and all in flight before the first reduction step.

Memory traffic: one read and one write of the row (k03: two reads, one write).
Registers: VPT values + VPT exps share the same array (exp overwrites in place).

Headline (H200, benchmarks/results/patterns_h200.json): 4.11 TB/s on 16384x16384, 96% of copy
"""

from __future__ import annotations

import dataclasses
import math

from numba import cuda, uint32, uint64

from ...runtime import ConfigError, Gate, Rung, cdiv, numba_dtype
from ._common import (WarpRowConfig, compute_dtype, held_itemsize, make_io, make_plain_log, make_row_reductions,
                      signature)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class Config(WarpRowConfig):
    """A block of ``threads``; a row per ``group`` threads, ``vpt`` values per thread.

    ``group`` and ``vpt`` are compile-time constants chosen for each call from
    the row length (:meth:`for_problem`); the presets' values are what the
    compile gate builds."""

    threads: int = 256
    group: int = 32
    vpt: int = 1
    vpt_target: int = 16
    #: most 32-bit registers of row values per thread (a float64 value takes two)
    max_vpt: int = 64
    #: short rows (``group`` < this) get blocks of ``min_threads``, not ``threads``: fewer rows
    #: per block, finer scheduling at the grid's tail (+4% at 256 and 1024 columns on the H200)
    min_threads: int = 128
    #: rows shorter than ``subwarp_below`` columns get groups of ``min_group`` … 16 lanes (several
    #: rows to a warp); longer rows at least a warp.  H200: 2^20 × 32 at 69.9% of the copy against
    #: 38.7% with a warp per row; at 128 and 256 columns a warp per row was 5% and 2% faster
    min_group: int = 4
    subwarp_below: int = 128

    def smem_bytes(self, itemsize):
        return 2 * (self.threads // 32) * held_itemsize(itemsize)

    def rules(self):
        yield from super().rules()
        g = self.group
        yield ("group", g >= 2 and g & (g - 1) == 0 and (g <= 32 or g % 32 == 0),
               "group is a power of two ≥ 2 (a row within a warp, or whole warps)")
        yield ("min_group", 2 <= self.min_group <= 32 and self.min_group & (self.min_group - 1) == 0,
               "min_group is a power of two in 2 … 32")
        yield ("group", self.threads % g == 0, "threads % group == 0 (whole rows per block)")
        yield ("vpt", self.vpt <= self.max_vpt, "vpt <= max_vpt (registers per thread)")
        mt = self.min_threads
        yield ("min_threads", mt % 32 == 0 and mt & (mt - 1) == 0, "min_threads is a power of two ≥ 32")

    def for_problem(self, rows: int, cols: int, itemsize: int = 4) -> "Config":
        """This config with ``group``/``vpt`` fitted to rows of ``cols`` values of ``itemsize`` bytes.

        ConfigError (naming ``x``) when a row needs more than ``threads · max_vpt`` registers.  16-bit
        values are held as float32 (:func:`held_itemsize`): a 16-bit row fits where a float32 row does."""
        # values per thread: max_vpt 32-bit registers, and no more than the SM's 65536 registers
        # shared by ``threads`` threads leave after ≈ 32 for addresses and sums (1024 threads: 32)
        limit = min(self.max_vpt, 65536 // self.threads - 32) * 4 // held_itemsize(itemsize)
        least = self.min_group if cols < self.subwarp_below else 32
        group = min(self.threads, max(least, _pow2_at_least(cdiv(cols, self.vpt_target))))
        vpt = _pow2_at_least(cdiv(cols, group))
        if vpt > limit:
            raise ConfigError(
                f"x: rows of {cols} values of {itemsize} bytes do not fit k04_register_row's registers "
                f"(threads {self.threads} × {limit} values = {self.threads * limit}); "
                f"use variant='k03_online' or variant=None"
            )
        threads = max(group, 32, min(self.min_threads, self.threads))
        return dataclasses.replace(self, threads=threads, group=group, vpt=vpt)


PRESETS = {
    "sim": Config(threads=64, group=32, vpt=2, vpt_target=2, max_vpt=8, min_threads=64),
    # 512 threads: rows up to 16384 float32 (8192 float64) fit, 63 registers per thread, two
    # blocks per SM; longer rows go to k05 (the default's 32768 columns, one block per SM: 80% of
    # the copy).  group/vpt are what the compile gate builds; max_vpt=64 (32768 float32) is
    # checked by tests/test_compile_gate.py
    "default": Config(threads=512, group=512, vpt=32, vpt_target=16, max_vpt=32),
}


def make_kernel(config: Config, dtype, log: bool = False):
    """``log=True``: scipy.special.log_softmax (the values stay, exp goes only to the sum)."""
    T, G, VPT = config.threads, config.group, config.vpt
    ROWS = T // G  # rows per block
    NWG = max(1, G // 32)  # warps per row
    NW = T // 32
    DT = numba_dtype(compute_dtype(dtype))
    up, down = make_io(dtype)  # 16-bit: read as float32, each output rounded once (float32/64: the values)
    NEG_INF = -math.inf
    LOG = log
    # shuffles, then one barrier across warps; the max is one FMNMX, log_softmax's too (_common)
    row_max, row_sum, mx = make_row_reductions(NWG, DT, G)
    shift_of, log_sum = make_plain_log(DT)

    def softmax_k04_register_row(x, out):
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        w0 = wid - wid % NWG  # this row's first warp
        rows, n = x.shape
        r = cuda.blockIdx.x * ROWS + tid // G
        live = r < rows  # groups past the last row still reach every barrier
        # unsigned indices: Numba adds a negative-index wraparound to every signed
        # subscript; unsigned 64-bit ones let LLVM fold ``t + i·G`` into one base
        # address plus constant offsets (≈ 25 fewer instructions per element)
        ru = uint64(r)
        tu = uint64(tid % G)  # this thread's place in its row group
        # value i (column tu + i·G) exists iff i·G < lim: one 32-bit compare with a constant
        # per access (``c < n`` on the 64-bit column costs an add and two compares); rows
        # past the last have lim 0
        t = tid % G
        lim = uint32(n - t) if (live and n > t) else uint32(0)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        vals = cuda.local.array(VPT, DT)

        # one coalesced read of the row into registers; -inf pads the tail (and zeros fill
        # the rows of groups past the last row, which only take part in the barriers)
        pad = DT(NEG_INF) if live else DT(0)
        for i in range(VPT):
            vals[i] = up(x[ru, tu + uint64(i * G)]) if uint32(i * G) < lim else pad

        m = DT(NEG_INF)
        for i in range(VPT):
            m = mx(m, vals[i])
        m = row_max(m, red_m, wid, lane, w0)  # shuffles; across the row's warps (NWG > 1)

        sh = shift_of(m) if LOG else m  # (log_softmax: the largest float for a row whose max is not finite)
        s = DT(0)  # exp in place (log: beside), then their sum (padding: exp(-inf - m) = 0)
        for i in range(VPT):
            e = math.exp(vals[i] - sh)
            if not LOG:
                vals[i] = e
            s += e
        s = row_sum(s, red_s, wid, lane, w0)  # a second array: no WAR hazard with red_m readers

        if LOG:
            ls = log_sum(m, s)
            for i in range(VPT):
                if uint32(i * G) < lim:
                    out[ru, tu + uint64(i * G)] = down((vals[i] - sh) - ls)
        else:
            inv = DT(1) / s  # one division per row; each output is then one multiply
            for i in range(VPT):  # one coalesced write
                if uint32(i * G) < lim:
                    out[ru, tu + uint64(i * G)] = down(vals[i] * inv)

    return softmax_k04_register_row


def geometry(config: Config, rows: int, cols: int):
    return (cdiv(rows, config.threads // config.group),), config.block()


RUNG = Rung("k04_register_row", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(half=("default",),  # float16 and bfloat16 too: the rung variant=None chooses first
                      smem_exception="a group of one warp (the sim preset) reduces by shuffles alone: "
                                     "ptxas drops the partials"))
