"""What the reductions share: the operators, their identities, the config.

Sums accumulate in float64 whatever the input dtype.  On the H200 a
reduction is bound by memory bandwidth (one load per add), and float64 adds
cost nothing extra there; the float32 result is then one rounding of a
float64 sum, far inside the pairwise-summation bound γ_⌈log2 n⌉·Σ|x| that
the issue asks for (a float32 accumulator fed by a grid-stride loop would
add thousands of values in sequence, past that bound).  max / min propagate
NaN as NumPy does.

float16 and bfloat16 inputs (``simt_tiles.half_io``): each element read exactly (``up``: into float32, then the
accumulator's type); a float64 sum is rounded once to 16 bits (``make_store``: float32 rounded to odd, then to
nearest even; torch accumulates half sums in float32 and rounds once, so this is at least as accurate); max/min
compare in float32 (exact) and their partials stay 16-bit.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import cuda

from ...half_io import compute_dtype, make_io, make_store
from ...runtime import TileConfig, numba_dtype

#: the public operators; ``mean`` is a sum scaled by 1/count, argmax/argmin give int64 indices
OPS = ("sum", "mean", "max", "min", "argmax", "argmin")
SUM, MAX, MIN, ARGMAX, ARGMIN = 0, 1, 2, 3, 4  # compile-time op codes: the untaken branches are removed
_CODES = {"sum": SUM, "mean": SUM, "max": MAX, "min": MIN, "argmax": ARGMAX, "argmin": ARGMIN}


def op_code(op: str) -> int:
    if not isinstance(op, str):
        raise TypeError(f"op: expected a str, one of {OPS}; got {type(op).__name__} {op!r}")
    if op not in OPS:
        raise ValueError(f"op: expected one of {OPS}; got {op!r}")
    return _CODES[op]


def identity(code: int) -> float:
    return (0.0, -math.inf, math.inf, -math.inf, math.inf)[code]


def acc_dtype(code: int, dtype) -> np.dtype:
    """float64 accumulators for sums; max/min are exact in the input dtype."""
    return np.dtype(np.float64) if code == SUM else np.dtype(dtype)


@dataclasses.dataclass(frozen=True)
class ElementTypes:
    """A lane kernel's types and conversions (k02, k03): ``acc`` the accumulator (``acc_dt`` its dtype; max/min of
    16-bit inputs: float32), ``out`` the result's Numba type, ``up`` a stored element as the compute type, ``store``
    an accumulated value as a stored result (16-bit: rounded once; float32/float64: the value, ``out`` casts it)."""

    acc_dt: np.dtype
    acc: object
    out: object
    up: object
    store: object


def element_types(dtype, acc=None, out_dtype=None) -> ElementTypes:
    """:class:`ElementTypes` for inputs stored as ``dtype``, an accumulator ``acc`` (None: the compute dtype) and
    results stored as ``out_dtype`` (None: ``dtype``)."""
    acc_dt = np.dtype(acc) if acc is not None else compute_dtype(dtype)
    out_dt = out_dtype if out_dtype is not None else dtype
    return ElementTypes(acc_dt, numba_dtype(acc_dt), numba_dtype(out_dt), make_io(dtype)[0], make_store(out_dt, acc_dt))


def make_finish(op: int, divide: bool, store, out):
    """``finish(a, scale)``: a lane kernel's last value as the stored result — ``a`` (max/min), ``a·scale`` (sums;
    the mean's 1/count) or ``a / scale`` (``divide``: a 16-bit mean, ``scale`` the count: the quotient is rounded
    once in float64 before ``store`` rounds once to 16 bits, where a·(1/count) can land a float64 ulp off a 16-bit
    midpoint and send the tie the wrong way)."""

    @cuda.jit(device=True, inline="always")
    def finish(a, scale):
        if op != SUM:
            return out(store(a))
        if divide:
            return out(store(a / scale))
        return out(store(a * scale))

    return finish


@dataclasses.dataclass(frozen=True)
class ReduceConfig(TileConfig):
    """``threads`` per block (whole warps, a power of two); at most ``max_blocks`` blocks
    for a whole-array reduction (each folds a grid-stride slice, then one block folds
    the partials)."""

    threads: int = 256
    max_blocks: int = 1056  # 132 SMs × 8
    #: independent loads (and accumulators) per thread per step: bytes in flight to hide DRAM latency
    loads: int = 8
    #: threads per block of a last-axis reduction (one block per row)
    row_threads: int = 256

    def block(self):
        return (self.threads,)

    def for_rows(self) -> "ReduceConfig":
        """The config of a last-axis reduction: ``threads`` = ``row_threads``."""
        return dataclasses.replace(self, threads=self.row_threads)

    def smem_bytes(self, itemsize):
        return (self.threads // 32) * 8

    def rules(self):
        t = self.threads
        return (
            ("threads", t % 32 == 0, "threads % 32 == 0 (whole warps for the shuffles)"),
            ("threads", t & (t - 1) == 0, "threads is a power of two"),
            ("row_threads", self.row_threads % 32 == 0 and self.row_threads & (self.row_threads - 1) == 0,
             "row_threads is a power of two ≥ 32"),
        )
