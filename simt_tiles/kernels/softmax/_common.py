"""What the softmax rungs share: one block per row, the signature, the config.

Semantics are those of ``scipy.special.softmax`` along the last axis:
``exp(x - max) / sum(exp(x - max))`` with ``max`` propagating NaN.  Written
literally in IEEE arithmetic that formula gives scipy's special cases for
free: a NaN anywhere makes the row NaN; a +inf makes the row NaN
(inf − inf); a row of −inf is NaN (−inf − (−inf)); −inf entries of an
otherwise finite row give 0.

16-bit inputs (float16, bfloat16 as its ``uint16`` bits: :data:`simt_tiles.runtime.HALF_STORAGE`) are
read into float32, every max, exp, sum and pair is float32 (registers, shared memory, the split rows'
workspaces), and each output is rounded once to the input's dtype (to nearest even): torch's rule.
:func:`simt_tiles.half_io.make_io` gives the rungs their conversions (shared with bias_relu);
:func:`~simt_tiles.half_io.compute_dtype` the type of the arithmetic and
:func:`held_itemsize` the bytes of a value held on chip (what the configs' fits count).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from numba import cuda, void

from ...half_io import compute_dtype, inline, make_io  # noqa: F401  (the rungs import them from here)
from ...runtime import HALF_STORAGE, TileConfig, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync


def held_itemsize(itemsize: int) -> int:
    """Bytes of one value held in registers or shared memory for inputs of ``itemsize`` bytes: 16-bit
    values are held as float32 (so a 16-bit row fits where a float32 row of as many values fits)."""
    return max(itemsize, 4)


def is_half(dtype) -> bool:
    """Whether ``dtype`` (as a kernel takes it) is a 16-bit float: float16, or bfloat16's uint16 bits."""
    return np.dtype(dtype) in HALF_STORAGE.values()


@dataclasses.dataclass(frozen=True)
class RowConfig(TileConfig):
    """``threads`` threads per block; block b owns row b."""

    threads: int = 256

    def block(self):
        return (self.threads,)

    def smem_bytes(self, itemsize):
        return 2 * self.threads * held_itemsize(itemsize)

    def rules(self):
        t = self.threads
        return (("threads", t & (t - 1) == 0, "threads is a power of two (tree reduction)"),)


@dataclasses.dataclass(frozen=True)
class WarpRowConfig(RowConfig):
    """Like RowConfig, in whole warps (the warp-shuffle rungs)."""

    def rules(self):
        yield from super().rules()
        yield ("threads", self.threads % 32 == 0, "threads % 32 == 0 (whole warps for the shuffles)")


def signature(dtype, log=False):
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t)


def pair_type(dtype):
    """The Numba array type of the split rows' (max, sum) workspaces: the compute type's (k06, k08, k09)."""
    return numba_dtype(compute_dtype(dtype))[:, ::1]


def make_pair_fold(DT):
    """``fold(m, s, mo, so) -> (m', s')``: two online-softmax pairs (a max and the sum of
    exp(x − max)) as one (k03's rule; (−inf, 0) is the empty pair and stays so); and
    ``fold_values(m, s, vals, U)``: U values (all loaded first) folded in with one rescale —
    their max first, so (U + 1) exps per U values, not 2U (k06, k07)."""
    NEG_INF = -math.inf

    @inline
    def fold(m, s, mo, so):
        m2 = m if (m != m or m > mo) else mo
        if m2 != NEG_INF:
            s = (DT(0) if s == 0 else s * math.exp(m - m2)) + (DT(0) if so == 0 else so * math.exp(mo - m2))
        return m2, s

    @inline
    def fold_values(m, s, vals, U):
        mu = vals[0]
        for u in range(1, U):
            mu = mu if (mu != mu or mu > vals[u]) else vals[u]
        t = DT(0)
        if mu != NEG_INF:
            for u in range(U):
                t += math.exp(vals[u] - mu)
        return fold(m, s, mu, t)

    return fold, fold_values


def make_log_shift(DT):
    """``log_shift(m, s) -> (shift, log_sum)`` for scipy.special.log_softmax, given a row's
    max ``m`` and ``s = Σ exp(x − m)``: the output is ``(x − shift) − log_sum``.  scipy
    replaces a non-finite max by 0, so a row holding +inf gives −inf (finite x) and NaN
    (the +inf), a row of −inf gives NaN, a NaN row NaN: the same as shift 0 and
    log_sum ``m``, which needs no sum relative to 0."""

    @inline
    def log_shift(m, s):
        if m - m == 0:
            return m, DT(math.log(s))
        return DT(0), m

    return log_shift


def make_plain_log(DT):
    """``shift_of(m)``, ``log_sum(m, s)``: log_softmax after a NaN-blind max ``m`` (one FMNMX, k04,
    k05).  The exps and the output use ``sh = shift_of(m)``: ``m``, or the largest finite value when
    ``m`` is not finite; with ``s = Σ exp(x − sh)`` the output is ``(x − sh) − log_sum(m, s)``.

    ``s`` is NaN exactly when the row holds a NaN the max missed: a finite ``m`` makes ``log s`` NaN;
    with ``m`` = ±inf, ``exp(x − sh)`` is at most 1 for finite x, 0 for −inf, +inf for +inf (no overflow, no
    inf − inf: shift 0, scipy's, overflowed exp for large x, which the simulator raises on), so ``s``
    is +inf or 0 unless a NaN is there.  ``log_sum`` is then ``m``, and the output
    is scipy's (−inf for finite x and NaN for +inf when ``m`` = +inf; NaN for a row of −inf).  So
    scipy's NaN rows need no flag, no barrier and no NaN-propagating max (which made ptxas wait
    for each load: benchmarks/notes/patterns_zoo.md)."""
    BIG = DT(np.finfo(np.dtype(str(DT))).max)

    @inline
    def shift_of(m):
        return m if m - m == 0 else BIG

    @inline
    def log_sum(m, s):
        if m - m == 0:
            return DT(math.log(s))
        return m if s == s else DT(math.nan)

    return shift_of, log_sum


def geometry(config: RowConfig, rows: int, cols: int):
    return (rows,), config.block()


def make_row_reductions(NWG: int, DT, G: int = 32):
    """``row_max(v, red, wid, lane, w0)``, ``row_sum(...)`` and the two-value ``mx``: the max / sum of ``v``
    over the ``NWG`` warps of a row (k04, k05), every lane of them gets it.

    Warp shuffles first; when a row spans several warps (``NWG > 1``, compile-time)
    lane 0 of each writes its partial to ``red[wid]`` (shared, one slot per warp of
    the block), one barrier, and every warp folds its row's NWG partials — the
    row's first warp is ``w0`` — with shuffles again: log depth, not NWG steps.
    Every thread of the block must call (the barrier); give max and sum separate
    ``red`` arrays, so the sum's writes cannot race the max's reads.  A row of ``G`` < 32
    lanes (several rows to a warp) shuffles over offsets below ``G`` only.  ``mx`` is one FMNMX
    and need not propagate NaN (a NaN makes its exp and so the sum NaN; log_softmax:
    :func:`make_plain_log`)."""
    NEG_INF = -math.inf
    OFFS = tuple(o for o in (16, 8, 4, 2, 1) if o < G)

    @inline
    def mx(a, b):
        return max(a, b)

    @inline
    def row_max(m, red, wid, lane, w0):
        # ``max`` is one FMNMX and need not propagate NaN: a NaN makes its exp, the sum
        # and so every output NaN, as scipy's
        for off in OFFS:
            m = mx(m, shfl_xor_sync(FULL_MASK, m, off))
        if NWG > 1:
            if lane == 0:
                red[wid] = m
            cuda.syncthreads()  # RAW: every warp's partial written
            m = red[w0 + lane] if lane < NWG else DT(NEG_INF)
            for off in (16, 8, 4, 2, 1):
                m = mx(m, shfl_xor_sync(FULL_MASK, m, off))
        return m

    @inline
    def row_sum(s, red, wid, lane, w0):
        for off in OFFS:
            s += shfl_xor_sync(FULL_MASK, s, off)
        if NWG > 1:
            if lane == 0:
                red[wid] = s
            cuda.syncthreads()  # RAW: every warp's partial written
            s = red[w0 + lane] if lane < NWG else DT(0)
            for off in (16, 8, 4, 2, 1):
                s += shfl_xor_sync(FULL_MASK, s, off)
        return s

    return row_max, row_sum, mx
