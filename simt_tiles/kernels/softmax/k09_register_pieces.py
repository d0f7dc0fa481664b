"""k09 — a row too long for one block, held in registers across several: read once, write once.

What changed versus k08
    k08 splits a vocabulary row (128256 float32) into pieces and reads every
    piece twice: once to fold it into a (max, sum) pair, again to write it
    after the row's pairs are known, and the second read comes from DRAM
    (notes/patterns_zoo.md, "Session 35": 1% of it hits the L2).  Three
    DRAM passes where a copy makes two.

    Here a block keeps its piece in registers between the two: k04's row in
    registers, cut into ``S`` pieces of ``threads × vpt`` values (512 × 28:
    14336 float32, the most that compiles in the 64 registers of two blocks
    per SM; float64 one block per SM).  A block

    1. takes a ticket ``t`` (``atomic.add`` on a counter): piece ``t % S`` of
       row ``t // S``;
    2. reads its piece into registers (coalesced: value i of thread j is
       column ``c0 + j + i·threads``) and folds it into a pair;
    3. publishes the pair and counts it (k08's ``make_row_exchange``);
    4. waits until the row's S pairs are counted, folds them (the same order
       in every block: deterministic), and writes its piece from the
       registers.

    The wait in step 4 is for pieces with larger tickets too, so unlike k08
    it needs blocks that are running.  The tickets give that with little:
    they are taken in order, so a row's missing piece always has the next
    ticket, and once a row is partly taken every running block holds a piece
    of that row or of an earlier one (all taken, so they finish).  The
    launch makes progress whenever ``S`` blocks can be resident at once;
    ``for_problem`` allows ``S`` up to half the blocks that fit at once (two
    float32 blocks a SM, one float64), so two k09 launches on two streams
    both progress.
    The simulator, which runs blocks one after another, runs this kernel's
    blocks at once (``_numba_fixes.blocks_wait``).

Memory traffic: one read and one write of each row (a copy's), plus S pairs a row.

Headline: none yet — not measured on a GPU (benchmarks/lab/softmax_ticket_probe.py --k09 will give it)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from numba import cuda, int32, int64, uint32, uint64, void

from ..._numba_fixes import blocks_wait
from ...runtime import ConfigError, Gate, Rung, cdiv, numba_dtype
from ._common import WarpRowConfig, compute_dtype, held_itemsize, make_io, make_log_shift, make_pair_fold, pair_type
from .k06_split_blocks import make_block_fold
from .k08_ticket_queue import make_row_exchange


@dataclasses.dataclass(frozen=True)
class Config(WarpRowConfig):
    """``threads`` per block, ``vpt`` values per thread in registers (a piece is ``threads · vpt`` values;
    fitted per call by :meth:`for_problem`, up to ``max_vpt`` 32-bit registers, in steps of ``vpt_step``)."""

    threads: int = 512
    vpt: int = 28
    max_vpt: int = 28
    vpt_step: int = 4
    #: most float64 values per thread (float64's exp needs registers of its own: at 512 threads, 8 values
    #: compile in 102 registers, 12 spill at 128)
    max_vpt_wide: int = 8
    #: blocks per SM that ptxas must leave registers for (``launch_bounds``): two, so that one block's
    #: loads overlap the other's wait and write
    min_blocks: int = 2

    def smem_bytes(self, itemsize):
        return 2 * (self.threads // 32) * held_itemsize(itemsize) + 8

    def rules(self):
        yield from super().rules()
        yield ("vpt", self.vpt <= self.max_vpt, "vpt <= max_vpt (registers per thread)")

    def pieces(self, cols: int) -> int:
        """``S``: pieces of ``threads · vpt`` values a row."""
        return cdiv(cols, self.threads * self.vpt)

    def for_problem(self, rows: int, cols: int, itemsize: int = 4, sms: int | None = 1, fill: int = 0) -> "Config":
        """``vpt`` for rows of ``cols`` values: the fewest pieces that fit the registers, shared evenly —
        more (smaller) pieces while ``rows · S`` is under ``fill`` blocks.  A row's pieces must be resident
        at once, so ``S`` is at most half the blocks that fit on ``sms`` SMs (two float32 blocks a SM, one
        float64: :func:`jit_options`), which lets two k09 launches on two streams both progress; ConfigError
        (naming ``x``) past it.  ``sms`` None: no bound (the simulator runs these blocks all at once).
        16-bit values are held as float32 (:func:`held_itemsize`)."""
        itemsize = held_itemsize(itemsize)
        limit = self.max_vpt * 4 // itemsize if itemsize <= 4 else min(self.max_vpt * 4 // itemsize, self.max_vpt_wide)
        if limit < 1:
            raise ConfigError(f"config: max_vpt={self.max_vpt} registers hold no {itemsize}-byte value")
        step = min(self.vpt_step, limit)
        S = cdiv(cols, self.threads * limit)
        cap = None if sms is None else sms * (self.min_blocks if itemsize <= 4 else 1) // 2
        if cap is not None and S > cap:
            raise ConfigError(f"x: rows of {cols} values take {S} pieces of {self.threads * limit} on "
                              f"k09_register_pieces, more than half of the {2 * cap} blocks resident at once on "
                              f"{sms} SMs; use variant=None")
        if rows * S < fill:  # few rows: smaller pieces, more blocks in flight
            S = max(S, min(cdiv(fill, rows), cap or fill, cdiv(cols, self.threads * step)))
        vpt = min(limit, cdiv(cdiv(cdiv(cols, S), self.threads), step) * step)
        return dataclasses.replace(self, vpt=vpt)


PRESETS = {"sim": Config(threads=64, vpt=2, max_vpt=4, vpt_step=1),  # two warps: the race check sees red_m's reuse
           # 512 threads × 28 values: 14336 float32 a piece, the most that compiles without spilling in 64
           # registers (two blocks per SM; 32 values spill 24 bytes)
           "default": Config(threads=512, vpt=28, max_vpt=28, vpt_step=4),
           # what float64 rows are fitted to (max_vpt_wide values a thread): the gate's float64 build
           "wide": Config(threads=512, vpt=8, max_vpt=28, vpt_step=4)}


def make_kernel(config: Config, dtype, log: bool = False):
    T, VPT, NW = config.threads, config.vpt, config.threads // 32
    PIECE = T * VPT
    DT = numba_dtype(compute_dtype(dtype))  # (16-bit inputs: float32 values, pairs, pm and ps)
    up, down = make_io(dtype)
    NEG_INF = -math.inf
    LOG = log
    fold, fold_values = make_pair_fold(DT)
    fold_block = make_block_fold(NW, fold)
    take_ticket, publish, gather = make_row_exchange(T, DT, fold, fold_block)
    log_shift = make_log_shift(DT)

    def softmax_k09_register_pieces(x, out, pm, ps, tickets):
        tid = cuda.threadIdx.x
        rows, n = x.shape[0], x.shape[1]
        S = pm.shape[1]
        slot = cuda.shared.array(1, int64)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        vals = cuda.local.array(VPT, DT)
        t = take_ticket(tickets, rows, tid, slot)
        r, p = t // S, t % S
        ru = uint64(r)
        c0 = uint64(p * PIECE + tid)  # this thread's first column; value i is column c0 + i·T
        left = n - p * PIECE - tid
        lim = uint32(left) if left > 0 else uint32(0)  # value i exists iff i·T < lim

        for i in range(VPT):  # the one read of the piece, into registers
            vals[i] = up(x[ru, c0 + uint64(i * T)]) if uint32(i * T) < lim else DT(NEG_INF)
        m, s = fold_values(DT(NEG_INF), DT(0), vals, VPT)
        m, s = fold_block(m, s, red_m, red_s, tid)
        publish(pm, ps, tickets, r, p, m, s, tid)
        m, s = gather(pm, ps, tickets, r, S, tid, red_m, red_s)  # its barrier orders red_m's reuse (WAR)

        if LOG:
            sh, ls = log_shift(m, s)
            a = DT(1)
        else:  # a row of −inf: m = −inf, s = 0, every output NaN as scipy's
            sh, a, ls = DT(0), (DT(1) / s if m != NEG_INF else DT(math.nan)), DT(0)
        for i in range(VPT):  # the one write, from the registers
            if uint32(i * T) < lim:
                v = vals[i]
                out[ru, c0 + uint64(i * T)] = down(((v - sh) - ls) if LOG else math.exp(v - m) * a)

    return blocks_wait(softmax_k09_register_pieces, waits=lambda args: args[2].shape[1] > 1)  # pm: S columns


def signature(dtype, log=False):
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, pair_type(dtype), pair_type(dtype), int32[::1])


def geometry(config: Config, rows: int, cols: int):
    return (config.pieces(cols) * rows,), config.block()


def jit_options(config: Config, dtype, **params) -> dict:
    # float64: its exp alone needs more than 64 registers (spills at 8 values a thread): one block per SM
    return {"launch_bounds": (config.threads, config.min_blocks if np.dtype(dtype).itemsize <= 4 else 1)}


RUNG = Rung("k09_register_pieces", Config, PRESETS, make_kernel, geometry, signature, jit_options,
            gate=Gate(float32_only=("default",),  # 28 float64 values a thread: for_problem fits float64 to "wide"
                      smem_exception="as k08's (the family's bound, 2·threads words), and the ticket's slot"))
