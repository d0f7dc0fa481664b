"""k06 — rows too long for one SM, or too few to fill the GPU: a row split across blocks.

What changed versus k05
    k04/k05 give a row one block and hold it on chip; two rows of 4,194,304
    values are then two blocks on a 132-SM GPU (0.17% of the copy), and a
    vocabulary row of 151,936 float32 (594 KiB) fits no SM at all.  Here a row
    is cut into ``S`` pieces of ``piece`` columns, one block each, and the
    online (max, sum) pair of k03 does the rest:

    * **partial** (launch 1): block (r, p) folds piece p of row r into one
      pair — ``U`` loads in flight per thread per step, their max first, then
      one rescale of the running sum: (U + 1) exps per U values, not 2U —
      and writes it to ``pm[r, p]``, ``ps[r, p]``;
    * **finish** (launch 2): block (r, p) folds the row's S pairs (the same
      order in every block: the result is deterministic) and writes its piece.

    With ``S = 1`` (many long rows) one launch does both, ``fused``: the
    block rereads its piece right after folding it, while it is likely still
    in L2.  Either way a piece is read twice and written once.

Memory traffic: two reads and one write (the second read partly from L2).

Headline (H200, benchmarks/results/patterns_zoo_h200.json): 2.20 TB/s on 4096x50257, 51.7% of copy
"""

from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np

from numba import cuda, int64, uint32, uint64, void

from ...runtime import ConfigError, Gate, Rung, cdiv, numba_dtype
from ...half_io import make_pairs
from ...vector import load1_keep, load1_last, load16_words, store16_words, store1_stream
from ...warp import FULL_MASK, shfl_xor_sync
from ._common import (WarpRowConfig, compute_dtype, held_itemsize, inline, make_io, make_log_shift,
                      make_pair_fold, pair_type)

FUSED, PARTIAL, FINISH = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class Config(WarpRowConfig):
    """``threads`` per block, ``loads`` values in flight per thread per step."""

    threads: int = 512
    loads: int = 8

    def smem_bytes(self, itemsize):
        return 2 * (self.threads // 32) * held_itemsize(itemsize)

    def step(self) -> int:
        """Columns a block covers per step (pieces are multiples of it)."""
        return self.threads * self.loads


PRESETS = {"sim": Config(threads=32, loads=2), "default": Config(threads=512, loads=8)}


class Hints(enum.IntFlag):
    """L2 eviction hints of a piece's accesses (k08's ``hints``, PLAIN and any of the others; k06 takes none):
    KEEP the first read evicted last; LAST the reread as a last use and STREAM the write streaming (both evicted
    first).  Values never change."""

    PLAIN = 1
    KEEP = 2
    LAST = 4
    STREAM = 8


def check_hints(hints: int, itemsize: int) -> None:
    """ConfigError (naming ``config``) for L2 eviction hints on 16-bit inputs: the hinted accesses
    (:mod:`simt_tiles.vector`) are float32/float64 loads and stores."""
    if itemsize == 2 and hints != Hints.PLAIN:
        raise ConfigError(f"config: hints={int(hints)} (L2 eviction hints) take float32 or float64 inputs; "
                          f"16-bit inputs take hints={int(Hints.PLAIN)} (PLAIN)")


def make_block_fold(NW, fold):
    """``fold_block(m, s, red_m, red_s, tid)``: the (max, sum) pair of a block of ``NW`` warps, every
    thread gets it (shuffles, then one barrier and the warps' pairs in shared memory, in a fixed order:
    deterministic; k08 and k09 take it too)."""

    @inline
    def fold_block(m, s, red_m, red_s, tid):
        lane, wid = tid % 32, tid // 32
        for off in (16, 8, 4, 2, 1):  # pairs across the warp, then across the block's warps
            m, s = fold(m, s, shfl_xor_sync(FULL_MASK, m, off), shfl_xor_sync(FULL_MASK, s, off))
        if lane == 0:
            red_m[wid] = m
            red_s[wid] = s
        cuda.syncthreads()  # RAW: every warp's pair written
        m, s = red_m[0], red_s[0]
        for w in range(1, NW):
            m, s = fold(m, s, red_m[w], red_s[w])
        return m, s

    return fold_block


def check_vec(vec: int, itemsize: int) -> None:
    """ConfigError (naming ``config``) for ``vec`` (16-bit values a load, k08's knob) other than 1, 2, 4 or 8,
    or other than 1 on float32/float64 inputs."""
    if vec not in (1, 2, 4, 8) or (vec > 1 and itemsize != 2):
        raise ConfigError(f"config: vec={vec} (16-bit values a load) must be 1, 2, 4 or 8, and 1 for "
                          f"{itemsize}-byte inputs (only 2-byte inputs are read several a load)")


def make_piece_ops(config: Config, dtype, log: bool, hints: int = Hints.PLAIN, vec: int = 1):
    """A piece's three steps, inlined (k08 takes them too): ``fold_piece`` — this thread's (max,
    sum) pair over columns ``[c0, c1)`` of row ``ru``, U loads in flight per step; ``fold_block``
    — the block's pair (:func:`make_block_fold`); ``write_piece`` — reread the piece and write
    (log_)softmax given the row's pair.  ``dtype``: the inputs' as stored (16-bit: float32 pairs and
    arithmetic, :func:`make_io`); ``hints``: the L2 eviction hints above (values unchanged; float32 and
    float64 only, :mod:`simt_tiles.vector`'s hinted accesses); ``vec`` > 1 (16-bit only): ``vec`` values a
    load and a store (:func:`make_vector_piece_ops`; the caller promises 16-byte aligned ``x`` and ``out``)."""
    check_vec(vec, np.dtype(dtype).itemsize)
    if vec > 1:
        return make_vector_piece_ops(config, dtype, log, vec)
    T, U, NW = config.threads, config.loads, config.threads // 32
    DT = numba_dtype(compute_dtype(dtype))
    up, down = make_io(dtype)
    check_hints(hints, np.dtype(dtype).itemsize)
    NEG_INF = -math.inf
    LOG = log
    KEEP_FIRST, LAST_REREAD, STREAM_WRITE = (bool(hints & h) for h in (Hints.KEEP, Hints.LAST, Hints.STREAM))
    log_shift = make_log_shift(DT)
    fold, fold_values = make_pair_fold(DT)  # (max, sum) pairs; U values with one rescale

    @inline
    def fold_piece(x, ru, c0, c1, tid, vals):
        m, s = DT(NEG_INF), DT(0)
        xr = x[ru]  # the row (C-contiguous): the hinted loads index it
        for b in range(c0 + tid, c1, T * U):
            for u in range(U):  # U loads in flight, then one rescale
                c = b + u * T
                if c >= c1:
                    vals[u] = DT(NEG_INF)
                elif KEEP_FIRST:
                    vals[u] = load1_keep(xr, c)
                else:
                    vals[u] = up(x[ru, uint64(c)])
            m, s = fold_values(m, s, vals, U)
        return m, s

    fold_block = make_block_fold(NW, fold)

    @inline
    def write_piece(x, out, ru, c0, c1, tid, vals, m, s):
        if LOG:
            sh, ls = log_shift(m, s)
            a = DT(1)
        else:  # a row of −inf: m = −inf, s = 0, every output NaN as scipy's
            sh, a, ls = DT(0), (DT(1) / s if m != NEG_INF else DT(math.nan)), DT(0)
        xr, outr = x[ru], out[ru]
        for b in range(c0 + tid, c1, T * U):  # the second read (U loads in flight), the write
            for u in range(U):
                c = b + u * T
                if c >= c1:
                    vals[u] = DT(0)
                elif LAST_REREAD:
                    vals[u] = load1_last(xr, c)
                else:
                    vals[u] = up(x[ru, uint64(c)])
            for u in range(U):
                c = b + u * T
                if c < c1:
                    v = ((vals[u] - sh) - ls) if LOG else math.exp(vals[u] - m) * a
                    if STREAM_WRITE:
                        store1_stream(outr, c, v)
                    else:
                        out[ru, uint64(c)] = down(v)

    return fold, fold_piece, fold_block, write_piece


def make_vector_rows(dtype, vec: int):
    """What a row read ``V = vec`` 16-bit values a load needs (k08's :func:`make_vector_piece_ops`, k05's ``vec``):
    ``head(x, ru)`` — ``h``, the columns of row ``ru`` before its first ``2V``-byte aligned one (``x``'s base 16-byte
    aligned; at most the row's length: rows of odd length alternate); ``load_vector(x, ru, c, vals, j, words)`` —
    ``vals[j:j + V]`` = columns ``c .. c + V − 1`` of row ``ru`` as float32, exactly: one 4-, 8- or 16-byte load
    (:func:`simt_tiles.vector.load16_words`; ``c`` past ``h`` by a multiple of ``V``) into ``words`` (a local
    ``uint32`` array of ``V / 2``), unpacked a pair at a time (:func:`simt_tiles.half_io.make_pairs`)."""
    V = vec
    W = V // 2  # 32-bit words a load
    unpack, _ = make_pairs(dtype)
    load = load16_words(W)

    @inline
    def head(x, ru):
        off = (ru * uint64(x.strides[0])) & uint64(2 * V - 1)  # the row's byte offset, mod 2V
        return min(int64(((uint64(2 * V) - off) & uint64(2 * V - 1)) >> uint64(1)), x.shape[1])

    @inline
    def load_vector(x, ru, c, vals, j, words):
        load(x[ru], c, words)
        for k in range(W):
            vals[j + 2 * k], vals[j + 2 * k + 1] = unpack(words[k])

    return head, load_vector


def make_vector_piece_ops(config: Config, dtype, log: bool, vec: int):
    """:func:`make_piece_ops` for 16-bit inputs read ``V = vec`` values a load (one 4-, 8- or 16-byte
    ``ld.global``, :func:`simt_tiles.vector.load16_words`) and written ``V`` a store: a step of a thread is
    ``U`` such loads (``2·U·V`` bytes in flight, where the scalar path has ``2·U``), so a block step covers
    ``T·U·V`` columns (k08's ``Config.step``).  Thread t's load u of a step covers ``V`` consecutive columns
    from ``b + V·(t + u·T)``.

    Alignment: ``x`` and ``out`` start 16-byte aligned (the caller's promise: the launcher checks it and
    runs the scalar kernel otherwise) and share their strides; a row's first ``h < V`` columns, before its first
    ``2V``-byte aligned one (``h`` from the row's byte offset: rows of odd length alternate), are read and
    written one at a time by piece 0's threads ``t < h``, and piece p covers columns ``[c0 + h, c1 + h)``
    (clipped to the row) in whole vectors; a last partial vector (the row's end) one value at a time."""
    T, U, NW, V = config.threads, config.loads, config.threads // 32, vec
    W = V // 2  # 32-bit words a load
    DT = numba_dtype(compute_dtype(dtype))
    up, down = make_io(dtype)
    _, pack = make_pairs(dtype)
    store = store16_words(W)
    NEG_INF = -math.inf
    LOG = log
    log_shift = make_log_shift(DT)
    fold, fold_values = make_pair_fold(DT)

    head, load_vector = make_vector_rows(dtype, V)

    @inline
    def load_step(x, ru, c, a1, vals, j, words, missing):
        """``vals[j:j + V]`` = columns ``c .. c + V − 1`` of row ``ru`` (``missing`` past ``a1``)."""
        if c + V <= a1:
            load_vector(x, ru, c, vals, j, words)
        else:  # the row's last partial vector: one at a time
            for k in range(V):
                vals[j + k] = up(x[ru, uint64(c + k)]) if c + k < a1 else missing

    @inline
    def fold_piece(x, ru, c0, c1, tid, vals):
        words = cuda.local.array(W, uint32)
        m, s = DT(NEG_INF), DT(0)
        h = head(x, ru)
        if c0 == 0 and tid < h:  # the row's unaligned head: one value, as the pair (v, exp(v − v))
            m = up(x[ru, uint64(tid)])
            s = DT(0) if m == NEG_INF else math.exp(m - m)
        a0, a1 = c0 + h, min(c1 + h, x.shape[1])
        for b in range(a0 + V * tid, a1, V * T * U):
            for u in range(U):  # U loads of V values in flight, then one rescale
                load_step(x, ru, b + u * V * T, a1, vals, u * V, words, DT(NEG_INF))
            m, s = fold_values(m, s, vals, U * V)
        return m, s

    fold_block = make_block_fold(NW, fold)

    @inline
    def result(v, m, sh, a, ls):  # as the scalar path's write: (v − sh) − ls, or exp(v − m)·a
        return ((v - sh) - ls) if LOG else math.exp(v - m) * a

    @inline
    def write_piece(x, out, ru, c0, c1, tid, vals, m, s):
        words = cuda.local.array(W, uint32)
        if LOG:
            sh, ls = log_shift(m, s)
            a = DT(1)
        else:  # a row of −inf: m = −inf, s = 0, every output NaN as scipy's
            sh, a, ls = DT(0), (DT(1) / s if m != NEG_INF else DT(math.nan)), DT(0)
        h = head(x, ru)
        if c0 == 0 and tid < h:
            out[ru, uint64(tid)] = down(result(up(x[ru, uint64(tid)]), m, sh, a, ls))
        a0, a1 = c0 + h, min(c1 + h, x.shape[1])
        for b in range(a0 + V * tid, a1, V * T * U):  # the second read (U loads in flight), the write
            for u in range(U):
                load_step(x, ru, b + u * V * T, a1, vals, u * V, words, DT(0))
            for u in range(U):
                c = b + u * V * T
                j = u * V
                if c + V <= a1:  # V results rounded a pair at a time, one store
                    for k in range(W):
                        lo, hi = vals[j + 2 * k], vals[j + 2 * k + 1]
                        words[k] = pack(result(lo, m, sh, a, ls), result(hi, m, sh, a, ls))
                    store(out[ru], c, words)
                else:  # (no exp of a missing value: exp(0 − m) may overflow, which the simulator raises on)
                    for k in range(V):
                        if c + k < a1:
                            out[ru, uint64(c + k)] = down(result(vals[j + k], m, sh, a, ls))

    return fold, fold_piece, fold_block, write_piece


def make_kernel(config: Config, dtype, log: bool = False, phase: int = FUSED):
    T, U, NW = config.threads, config.loads, config.threads // 32
    DT = numba_dtype(compute_dtype(dtype))  # (16-bit inputs: float32 pairs, pm and ps float32)
    NEG_INF = -math.inf
    PHASE = phase
    fold, fold_piece, fold_block, write_piece = make_piece_ops(config, dtype, log)

    def softmax_k06_split_blocks(x, out, pm, ps):
        tid = cuda.threadIdx.x
        n = x.shape[1]
        S = pm.shape[1]  # pieces per row (1 when fused)
        r = cuda.blockIdx.x // S
        p = cuda.blockIdx.x % S
        piece = ((n + S - 1) // S + T * U - 1) // (T * U) * (T * U)  # as the launcher's
        c0 = p * piece
        c1 = min(n, c0 + piece)
        ru = uint64(r)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        vals = cuda.local.array(U, DT)

        if PHASE == FINISH:  # the row's S pairs, in the same order in every block
            m, s = DT(NEG_INF), DT(0)
            for q in range(tid, S, T):
                m, s = fold(m, s, pm[ru, q], ps[ru, q])
        else:
            m, s = fold_piece(x, ru, c0, c1, tid, vals)
        m, s = fold_block(m, s, red_m, red_s, tid)
        if PHASE == PARTIAL:
            if tid == 0:
                pm[ru, p] = m
                ps[ru, p] = s
            return
        write_piece(x, out, ru, c0, c1, tid, vals, m, s)

    return softmax_k06_split_blocks


def signature(dtype, log=False, phase=FUSED):
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, pair_type(dtype), pair_type(dtype))


def piece_columns(config: Config, cols: int, pieces: int) -> int:
    """Columns per piece: ``cols / pieces`` rounded up to whole steps (the kernel computes the same)."""
    return cdiv(cdiv(cols, pieces), config.step()) * config.step()


def geometry(config: Config, rows: int, cols: int, pieces: int = 1):
    return (rows * pieces,), config.block()


#: the fused kernel holds every code path but the partials' store (CI time: two of three phases)
GATE_PARAMS = ({"phase": FUSED}, {"phase": FINISH})

RUNG = Rung("k06_split_blocks", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(GATE_PARAMS, smem_exception="smem_bytes is the softmax family's bound, 2·threads words; "
                                                  "two per-warp arrays use 2·threads/32"))
