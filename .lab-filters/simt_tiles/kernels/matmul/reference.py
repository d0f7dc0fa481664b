"""The matmul reference: C = A @ B in long double (or float64 with CuPy) and its error bound.

A float32 dot product of length K, computed in any order with or without
FMA, satisfies |fl(a·b) − a·b| ≤ γ_K · Σ|a_i|·|b_i| (:mod:`simt_tiles.bounds`);
with the reference's own error the check is

    |C − ref| ≤ (γ_K(u) + γ_K(u_ref)) · (|A|·|B|) · (1 + 2·γ_K(u_ref)).
"""

from __future__ import annotations

import numpy as np

from ...bounds import gamma, ref_dtype, unit_roundoff

__all__ = ["matmul_reference"]


def matmul_reference(a: np.ndarray, b: np.ndarray, xp=np, precise: bool = True):
    """``(ref, bound)`` for C = A @ B with A, B of one float dtype.

    With ``xp=np`` and ``precise`` the reference is computed in ``long double``
    (slow: small problems); otherwise in float64 with ``xp`` (NumPy or CuPy).
    Returns arrays of the module used, in the reference's precision.
    """
    k = a.shape[1]
    if xp is np and precise:
        rdt = ref_dtype()
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
