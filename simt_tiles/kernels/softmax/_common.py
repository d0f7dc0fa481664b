"""What the softmax rungs share: one block per row, the signature, the config.

Semantics are those of ``scipy.special.softmax`` along the last axis:
``exp(x - max) / sum(exp(x - max))`` with ``max`` propagating NaN.  Written
literally in IEEE arithmetic that formula gives scipy's special cases for
free: a NaN anywhere makes the row NaN; a +inf makes the row NaN
(inf − inf); a row of −inf is NaN (−inf − (−inf)); −inf entries of an
otherwise finite row give 0.
"""

from __future__ import annotations

import dataclasses
import math

from numba import cuda, void

from ...runtime import TileConfig, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync

#: Numba inlines these at the call site, before typing (as conv2d's ``_staging``): the
#: GPU-free compile gate keeps working and the PTX is that of the statements written out
inline = cuda.jit(device=True, inline="always")


@dataclasses.dataclass(frozen=True)
class RowConfig(TileConfig):
    """``threads`` threads per block; block b owns row b."""

    threads: int = 256

    def block(self):
        return (self.threads,)

    def smem_bytes(self, itemsize):
        return 2 * self.threads * itemsize

    def rules(self):
        t = self.threads
        return (("threads", t & (t - 1) == 0, "threads is a power of two (tree reduction)"),)


@dataclasses.dataclass(frozen=True)
class WarpRowConfig(RowConfig):
    """Like RowConfig, in whole warps (the warp-shuffle rungs)."""

    def rules(self):
        yield from super().rules()
        yield ("threads", self.threads % 32 == 0, "threads % 32 == 0 (whole warps for the shuffles)")


def signature(dtype):
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t)


def geometry(config: RowConfig, rows: int, cols: int):
    return (rows,), config.block()


def max_nan(a, b):
    """max that propagates NaN like numpy.maximum (written inline in kernels as this expression)."""
    return a if (a != a or a > b) else b


def make_row_reductions(NWG: int, DT):
    """``row_max(v, red, wid, lane, w0)`` and ``row_sum(...)``: the max / sum of ``v``
    over the ``NWG`` warps of a row (k04, k05), every lane of them gets it.

    Warp shuffles first; when a row spans several warps (``NWG > 1``, compile-time)
    lane 0 of each writes its partial to ``red[wid]`` (shared, one slot per warp of
    the block), one barrier, and every warp folds its row's NWG partials — the
    row's first warp is ``w0`` — with shuffles again: log depth, not NWG steps.
    Every thread of the block must call (the barrier); give max and sum separate
    ``red`` arrays, so the sum's writes cannot race the max's reads."""
    NEG_INF = -math.inf

    @inline
    def row_max(m, red, wid, lane, w0):
        # ``max`` is one FMNMX and need not propagate NaN: a NaN makes its exp, the sum
        # and so every output NaN, as scipy's
        for off in (16, 8, 4, 2, 1):
            m = max(m, shfl_xor_sync(FULL_MASK, m, off))
        if NWG > 1:
            if lane == 0:
                red[wid] = m
            cuda.syncthreads()  # RAW: every warp's partial written
            m = red[w0 + lane] if lane < NWG else DT(NEG_INF)
            for off in (16, 8, 4, 2, 1):
                m = max(m, shfl_xor_sync(FULL_MASK, m, off))
        return m

    @inline
    def row_sum(s, red, wid, lane, w0):
        for off in (16, 8, 4, 2, 1):
            s += shfl_xor_sync(FULL_MASK, s, off)
        if NWG > 1:
            if lane == 0:
                red[wid] = s
            cuda.syncthreads()  # RAW: every warp's partial written
            s = red[w0 + lane] if lane < NWG else DT(0)
            for off in (16, 8, 4, 2, 1):
                s += shfl_xor_sync(FULL_MASK, s, off)
        return s

    return row_max, row_sum
