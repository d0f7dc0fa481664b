"""k08 — a row split across blocks in ONE launch: a ticket queue orders the blocks, so some may wait for others.

What changed versus k06
    k06 splits a row into ``S`` pieces in two launches: the first folds each
    piece into a (max, sum) pair, the second folds the row's pairs and writes.
    A row of 1 × 94208 then costs two launches of a few blocks each, and a
    vocabulary row no block holds (128256 values) ran k06 fused: one block a
    row, folded, then reread.

    Here each piece is two *items* in one launch: **P** folds the piece and
    publishes its pair, **W** waits for the row's S pairs, then rereads the
    piece and writes it.  A block does one item, the one its **ticket** names:
    thread 0 takes ``atomic.add(tickets[rows], 1)``, and tickets run through

        P(row 0..D−1) | P(row D), W(row 0) | P(row D+1), W(row 1) | … | W(the last D rows)

    The wait is safe because of the ticket order (CUB's decoupled look-back
    argument): a W item waits only for P items with *smaller* tickets, taken by
    blocks that are running or done, and a P item never waits.  So no
    occupancy assumption is needed, and the simulator, which runs blocks one
    after another, never waits at all (its tests also run every block at
    once, ``_numba_fixes.concurrent_blocks``, so that W items do wait).  A P item publishes with a store, a fence and
    a count; a W item reads the count with an atomic, fences, and reads the
    pairs with atomics (at the L2: another SM wrote them during this launch,
    and a plain load could hit a stale line of this SM's L1).  Every W block of
    a row folds the S pairs in the same order: deterministic.  The counters are
    zeroed by a small launch before each k08 launch (:func:`reset`).

    tickets:  0 .. S·D−1      S·D ..                              2·S·rows−1
              P P P … P   |   P(D) W(0) | P(D+1) W(1) | …   |   W W … W

    The lag D (``lag_kib`` of rows) was meant to keep a row in the L2 between
    its P and W items.  It does not: about a thousand items are in flight, so
    the reread comes from DRAM (H100, Nsight Compute at 1024 × 128256: 1.04 GB
    read for a 525 MB input).  k08 wins where k06 paid a second launch and few
    blocks: few long rows, and rows past 94208 values (notes/patterns_zoo.md).

    ``vec`` (16-bit inputs; 8 in the "half" preset, which variant=None takes for 16-bit rows): ``vec`` values a
    load and a store, one 4-, 8- or 16-byte access instead of ``vec`` 2-byte ones (k06's ``make_vector_piece_ops``;
    a row's unaligned head and partial tail one value at a time); arrays not 16-byte aligned run ``vec=1`` (the
    plan's ``unaligned`` twin).

Memory traffic: two reads and one write, as k06 (the reread is from DRAM at vocabulary sizes).

Headline: none yet — not measured on a GPU (the H200 patterns zoo; H100 sweeps: notes/patterns_zoo.md, "Session 34")
"""

from __future__ import annotations

import dataclasses
import math

from numba import cuda, int32, int64, uint64, void

from ...runtime import Gate, Rung, cdiv, jit, numba_dtype
from ._common import WarpRowConfig, compute_dtype, held_itemsize, inline, pair_type
from .k06_split_blocks import Hints, make_piece_ops


@dataclasses.dataclass(frozen=True)
class Config(WarpRowConfig):
    """``threads`` per block, ``loads`` loads in flight per thread per step, pieces of ``piece_steps``
    block steps; the W items of a row trail its P items by ``lag_kib`` KiB of rows (at least one row);
    ``hints``: the L2 eviction hints of the piece's accesses (k06's ``Hints``); ``vec``: values a load and a
    store (1; 2, 4 or 8 for 16-bit inputs: one 4-, 8- or 16-byte access, k06's ``make_vector_piece_ops``;
    the launcher runs ``vec=1`` where ``x`` or ``out`` is not 16-byte aligned)."""

    threads: int = 256
    loads: int = 16
    piece_steps: int = 2
    lag_kib: int = 16384
    hints: int = Hints.PLAIN
    vec: int = 1

    def smem_bytes(self, itemsize):
        return 2 * (self.threads // 32) * held_itemsize(itemsize) + 8

    def step(self) -> int:
        """Columns a block covers per step (pieces are multiples of it)."""
        return self.threads * self.loads * self.vec

    def pieces(self, cols: int, rows: int = 0, fill: int = 0) -> int:
        """``S``: pieces of at most ``piece_steps`` steps a row; fewer steps a piece (down to one) while
        ``rows · S`` P items are under ``fill`` (few rows: more, smaller pieces in flight)."""
        steps = self.piece_steps
        if rows and rows * cdiv(cols, steps * self.step()) < fill:
            steps = max(1, min(steps, cdiv(cdiv(cols, cdiv(fill, rows)), self.step())))
        return cdiv(cols, steps * self.step())

    def lag_rows(self, cols: int, itemsize: int) -> int:
        """``D``: rows whose P items run before the first W item (≥ 1); ``itemsize`` as stored (bytes in the L2)."""
        return max(1, self.lag_kib * 1024 // max(1, cols * itemsize))


PRESETS = {"sim": Config(threads=32, loads=2, piece_steps=1, lag_kib=1),
           # 256 threads × 16 loads, pieces of 8192 values: of 10 knob sets the fastest at 1024 × 128256, 64 × 128256,
           # 8 × 151936 and 4096 × 94209, second at 2 × 4194304 (H100, softmax_ticket_probe_s34b)
           "default": Config(threads=256, loads=16, piece_steps=2, lag_kib=16384),
           # 16-bit rows (variant=None): 8 values a 16-byte load, 4 loads in flight, pieces of 16384 values; of 7
           # vec knob sets the fastest at 1024 × 128256 / 128257 and 4 × 1048576, 1.66× "default" (H100,
           # softmax16_vec_probe)
           "half": Config(threads=256, loads=4, vec=8, piece_steps=2, lag_kib=16384),
           # the simulator's 16-bit default: "sim" with two values a load
           "sim_half": Config(threads=32, loads=2, vec=2, piece_steps=1, lag_kib=1)}


def ticket_item(t, S, rows, D):
    """``(row, piece, write)`` of ticket ``t`` (the queue of the module docstring; ``D`` ≤ ``rows``)."""
    a = S * D
    if t < a:
        return t // S, t % S, False
    b = a + 2 * S * (rows - D)
    if t < b:
        j, q = (t - a) // (2 * S), (t - a) % (2 * S)
        if q < S:
            return D + j, q, False
        return j, q - S, True
    u = t - b
    return rows - D + u // S, u % S, True


_ticket_item = inline(ticket_item)


def make_row_exchange(T, DT, fold, fold_block):
    """A row's pieces learn each other's (max, sum) pair through global memory (k09 takes these too):
    ``take_ticket(tickets, rows, tid, slot)`` — the block's ticket (thread 0 takes it, a barrier shares
    it through ``slot``); ``publish(pm, ps, tickets, r, p, m, s, tid)`` — thread 0 stores piece p's pair, fences, and counts
    it in ``tickets[r]``; ``gather(pm, ps, tickets, r, S, tid, red_m, red_s)`` — thread 0 spins until
    the row's S pairs are counted, fences (acquire), and the block folds them, in the same order in
    every block (deterministic); every thread gets the row's pair."""
    NEG_INF = -math.inf

    @inline
    def take_ticket(tickets, rows, tid, slot):
        if tid == 0:
            slot[0] = cuda.atomic.add(tickets, rows, 1)  # the queue's counter sits past the rows' counters
        cuda.syncthreads()  # RAW: the ticket
        return slot[0]

    @inline
    def publish(pm, ps, tickets, r, p, m, s, tid):
        if tid == 0:
            ru = uint64(r)
            pm[ru, p] = m
            ps[ru, p] = s
            cuda.threadfence()  # the pair reaches the L2 before the count that announces it
            cuda.atomic.add(tickets, r, 1)

    @inline
    def gather(pm, ps, tickets, r, S, tid, red_m, red_s):
        if tid == 0:
            while cuda.atomic.add(tickets, r, 0) < S:
                pass
            cuda.threadfence()  # acquire: the pairs the count announced, before any of the block's reads
        cuda.syncthreads()  # the wait is over for the whole block
        ru = uint64(r)
        m, s = DT(NEG_INF), DT(0)  # the empty pair
        # atomics read at the L2, not a stale L1 line (a float32 add of 0 turns −0 into +0 and flushes a
        # subnormal max to 0: no output changes); the same order in every block
        for q in range(tid, S, T):
            m, s = fold(m, s, cuda.atomic.add(pm, (ru, q), DT(0)), cuda.atomic.add(ps, (ru, q), DT(0)))
        return fold_block(m, s, red_m, red_s, tid)

    return take_ticket, publish, gather


def make_kernel(config: Config, dtype, log: bool = False):
    T, U, NW = config.threads, config.loads, config.threads // 32
    UV, STEP = U * config.vec, config.step()  # values a thread holds a step; columns a block step
    DT = numba_dtype(compute_dtype(dtype))  # (16-bit inputs: float32 pairs, pm and ps float32)
    fold, fold_piece, fold_block, write_piece = make_piece_ops(config, dtype, log, config.hints, config.vec)
    take_ticket, publish, gather = make_row_exchange(T, DT, fold, fold_block)

    def softmax_k08_ticket_queue(x, out, pm, ps, tickets, lag):
        tid = cuda.threadIdx.x
        rows, n = x.shape[0], x.shape[1]
        S = pm.shape[1]
        slot = cuda.shared.array(1, int64)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        vals = cuda.local.array(UV, DT)
        r, p, write = _ticket_item(take_ticket(tickets, rows, tid, slot), S, rows, min(lag, rows))
        piece = ((n + S - 1) // S + STEP - 1) // STEP * STEP  # as k06 and the launcher
        c0 = p * piece
        c1 = min(n, c0 + piece)
        ru = uint64(r)

        if not write:  # P: fold the piece, publish its pair, count it
            m, s = fold_piece(x, ru, c0, c1, tid, vals)
            m, s = fold_block(m, s, red_m, red_s, tid)
            publish(pm, ps, tickets, r, p, m, s, tid)
            return
        # W: the row's S pairs were taken by smaller tickets: running or done
        m, s = gather(pm, ps, tickets, r, S, tid, red_m, red_s)
        write_piece(x, out, ru, c0, c1, tid, vals, m, s)

    return softmax_k08_ticket_queue


@jit
def zero_counters(tickets):
    """``tickets[:] = 0``: the queue and the rows' counters, launched before every k08 launch on its stream
    (so a plan replays it and a CUDA graph captures it: the kept workspace needs no state between calls)."""
    i = cuda.grid(1)
    if i < tickets.shape[0]:
        tickets[i] = 0


def reset(tickets, stream) -> None:
    """Launch :func:`zero_counters` over ``tickets`` on ``stream``."""
    zero_counters[cdiv(tickets.shape[0], 256), 256, stream](tickets)


def signature(dtype, log=False):
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, pair_type(dtype), pair_type(dtype), int32[::1], int64)


def geometry(config: Config, rows: int, cols: int, pieces: int | None = None):
    return (2 * (pieces or config.pieces(cols)) * rows,), config.block()


RUNG = Rung("k08_ticket_queue", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(half=("default",), half_only=("half", "sim_half"),
                      smem_exception="as k06's (the family's bound, 2·threads words), and the ticket's slot"))
