"""The softmax reference (scipy.special.softmax along the last axis) and its error bound."""

from __future__ import annotations

import numpy as np

from ...bounds import gamma, ref_dtype, unit_roundoff

__all__ = ["softmax_reference"]


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
