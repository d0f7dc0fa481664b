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

from numba import void

from ...runtime import TileConfig, numba_dtype


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
