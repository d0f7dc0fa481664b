"""NumPy references and the error bounds the checks use.

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

__all__ = ["TF32_U", "unit_roundoff", "gamma", "matmul_reference", "check_within", "BoundCheck"]


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


def _ref_dtype():
    # x86 long double has a 64-bit significand; elsewhere it may be float64.
    return np.longdouble


def matmul_reference(a: np.ndarray, b: np.ndarray, xp=np, precise: bool = True):
    """``(ref, bound)`` for C = A @ B with A, B of one float dtype.

    With ``xp=np`` and ``precise`` the reference is computed in ``long double``
    (slow: small problems); otherwise in float64 with ``xp`` (NumPy or CuPy).
    Returns arrays of the module used, in the reference's precision.
    """
    k = a.shape[1]
    if xp is np and precise:
        rdt = _ref_dtype()
        a_r, b_r = np.asarray(a, dtype=rdt), np.asarray(b, dtype=rdt)
        u_ref = unit_roundoff(rdt)
    else:
        a_r, b_r = a.astype(xp.float64), b.astype(xp.float64)
        u_ref = unit_roundoff(np.float64)
    ref = a_r @ b_r
    absprod = xp.abs(a_r) @ xp.abs(b_r)
    g_ref = gamma(k, u_ref)
    factor = (gamma(k, unit_roundoff(a.dtype)) + g_ref) * (1 + 2 * g_ref)
    # ref stays in its own precision: rounding a long-double reference to float64
    # would add up to 2^-53·|ref|, as large as a float64 kernel's whole allowance
    return ref, absprod * factor


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


def softmax_reference(x, xp=np):
    """``(ref, bound)`` for softmax along the last axis, as scipy.special.softmax.

    The reference is computed in long double from the same inputs.  The bound
    per element, relative to the reference:
      * exp: ≤ 2 ulp (CUDA's expf/exp, ≤ 4u), of an argument x − m that was
        itself rounded (|x − m|·u);
      * the row sum of n terms: γ_n, plus the terms' own exp errors (≤ 4u);
      * the scaling: u for a division, 2u for a reciprocal then a product (k04);
    So |y − ref| ≤ ((|x − m| + 10)·u + 2·γ_n(u))·ref + η, with η the smallest
    normal number of the dtype (outputs that underflow).  NaN positions must
    match scipy exactly and are checked separately.

    With ``xp`` another array module (CuPy) the reference is computed there in
    float64 (for benchmark-sized inputs) and its own error, the same terms
    with u = 2⁻⁵³, is added to the bound.
    """
    if xp is np:
        rdt, u_ref = _ref_dtype(), unit_roundoff(_ref_dtype())
    else:
        rdt, u_ref = xp.float64, unit_roundoff(np.float64)
    xr = xp.asarray(x, dtype=rdt)
    n = x.shape[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        m = xp.max(xr, axis=-1, keepdims=True)  # propagates NaN like scipy's amax
        e = xp.exp(xr - m)
        ref = e / xp.sum(e, axis=-1, keepdims=True)
        u = unit_roundoff(x.dtype)
        rel = (xp.abs(xr - m) + 10) * (u + u_ref) + 2 * (gamma(max(n, 1), u) + gamma(max(n, 1), u_ref))
        # ref = 0 (an x of −inf) with rel = inf would give NaN: such outputs must be exactly 0 ± η
        bound = xp.where(ref != 0, rel * xp.abs(ref), 0) + np.finfo(x.dtype).smallest_normal
    return ref, bound
