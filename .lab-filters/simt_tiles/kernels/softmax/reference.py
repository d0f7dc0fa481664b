"""The softmax and log_softmax references (scipy.special, along the last axis) and their error bounds."""

from __future__ import annotations

import numpy as np

from ...bounds import gamma, ref_dtype, unit_roundoff

__all__ = ["softmax_reference", "log_softmax_reference"]


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
        rdt, u_ref = ref_dtype(), unit_roundoff(ref_dtype())
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


def log_softmax_reference(x, xp=np):
    """``(ref, bound)`` for log_softmax along the last axis, as scipy.special.log_softmax.

    y = (x − m) − log s with s = Σ exp(x − m) (m the row's max; scipy's shift 0 for a
    non-finite max is an exact special case, compared exactly).  Error terms, in units of u:
      * x − m: one rounding, u·|x − m|;
      * log s: s carries γ_n from the sum plus each term's exp error (≤ 4u of its own
        argument's rounding, u·|x_i − m|), weighted by p_i = e_i / s: a relative error
        δ = γ_n + u·(4 + Σ p_i·|x_i − m|) of s is an absolute error δ of log s, plus 2u·|log s|
        (CUDA's log: ≤ 2 ulp);
      * the final subtraction: u·|y|.
    The reference's own error (u_ref) is added the same way.  Outputs that are ±inf or NaN in
    the reference must be so exactly (checked by the caller)."""
    if xp is np:
        rdt, u_ref = ref_dtype(), unit_roundoff(ref_dtype())
    else:
        rdt, u_ref = xp.float64, unit_roundoff(np.float64)
    xr = xp.asarray(x, dtype=rdt)
    n = max(x.shape[-1], 1)
    u = unit_roundoff(x.dtype)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = xp.max(xr, axis=-1, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)  # scipy's shift
        d = xr - m
        e = xp.exp(d)
        s = xp.sum(e, axis=-1, keepdims=True)
        ls = xp.log(s)
        ref = d - ls
        p = e / s
        spread = xp.sum(xp.where(p > 0, p * xp.abs(d), 0), axis=-1, keepdims=True)
        bound = sum(uu * (xp.abs(d) + xp.abs(ref) + 2 * xp.abs(ls) + 4 + spread) + gamma(n, uu) for uu in (u, u_ref))
    return ref, xp.where(xp.isfinite(ref), bound, 0)
