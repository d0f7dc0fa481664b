"""The error bounds every check uses (each family's reference is beside its ladder:
``simt_tiles/kernels/<family>/reference.py``).

A float32 dot product of length K, computed in any order with or without
FMA, satisfies (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1)

    |fl(a·b) − a·b| ≤ γ_K · Σ|a_i|·|b_i|,     γ_K = K·u / (1 − K·u),

with u = 2⁻²⁴ for float32 and 2⁻⁵³ for float64 (unit roundoff).  The
reference is itself computed in finite precision (u_ref), so the check is

    |C − ref| ≤ (γ_K(u) + γ_K(u_ref)) · (|A|·|B|) · (1 + 2·γ_K(u_ref))

where the last factor covers the rounding of |A|·|B| itself.  For K = 0 the
bound is 0: the kernel must write exact zeros.  NaN never passes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TF32_U", "unit_roundoff", "gamma", "ref_dtype", "check_within", "BoundCheck"]


#: relative error of converting a float32 operand to TF32 (10 stored mantissa bits) for the tensor
#: cores: 2⁻¹⁰ covers truncation as well as rounding to nearest (2⁻¹¹); libraries do not say which.
#: A TF32 product a'·b' then differs from a·b by ≤ (2·TF32_U + TF32_U²)·|a|·|b|.
TF32_U = 2.0**-10


def unit_roundoff(dtype) -> float:
    """u = 2^-(p) for a binary float with p-bit significand (eps / 2)."""
    return float(np.finfo(dtype).eps) / 2


def gamma(n: int, u: float) -> float:
    """Higham's γ_n = n·u / (1 − n·u)."""
    nu = n * u
    if nu >= 1:
        raise ValueError(f"gamma: n·u = {nu} >= 1; the bound is meaningless")
    return nu / (1 - nu)


def ref_dtype():
    """The dtype the long-double references compute in."""
    # x86 long double has a 64-bit significand; elsewhere it may be float64.
    return np.longdouble


class BoundCheck:
    """Result of comparing ``out`` with ``ref`` under an element-wise ``bound``."""

    def __init__(self, out, ref, bound, xp=np):
        out = out.astype(ref.dtype)  # compare in the reference's (higher) precision
        err = xp.abs(out - ref)
        # NaN in out (an unwritten, poisoned element) makes err NaN: never passes.
        ok = err <= bound
        self.passed = bool(ok.all())
        self.n_bad = int((~ok).sum())
        self.max_err = float(xp.nanmax(err)) if err.size else 0.0
        self.max_bound = float(bound.max()) if bound.size else 0.0
        self.has_nan = bool(xp.isnan(out).any())
        # the worst ratio err / bound: < 1 passes (0/0 counts as 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = xp.where(bound > 0, err / xp.where(bound > 0, bound, 1), xp.where(err == 0, 0.0, xp.inf))
        self.worst_ratio = float(xp.nanmax(ratio)) if ratio.size else 0.0
        if self.has_nan:
            self.worst_ratio = float("nan")

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return (
            f"BoundCheck(passed={self.passed}, bad={self.n_bad}, max_err={self.max_err:.3g}, "
            f"worst err/bound={self.worst_ratio:.3g}, nan={self.has_nan})"
        )


def check_within(out, ref, bound, xp=np) -> BoundCheck:
    return BoundCheck(out, ref, bound, xp)
