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


# ---------------------------------------------------------------------------
# Tensor-core products (simt_tiles.mma, matmul k13/k14): rounded operands, FP32 accumulation
# ---------------------------------------------------------------------------

#: unit roundoff of an operand rounded to nearest for the tensor cores: TF32 keeps 10 stored
#: mantissa bits (cvt.rna: u = 2⁻¹¹), bfloat16 7 (u = 2⁻⁸), float16 10 (u = 2⁻¹¹)
MMA_INPUT_U = {"tf32": 2.0**-11, "bf16": 2.0**-8, "fp16": 2.0**-11}
#: the FP32 accumulation inside and across mma instructions: its rounding is not specified
#: (measurements show truncation in the tensor cores' adders), so 2⁻²³ per addition: a directed
#: rounding's error, twice round-to-nearest's
MMA_ACC_U = 2.0**-23

__all__ += ["MMA_INPUT_U", "MMA_ACC_U", "mma_error_factor"]


def mma_error_factor(k: int, precision: str, *, rounds_inputs: bool = True, rounds_output: bool = False,
                     truncates: bool = False) -> float:
    """The factor f with |C − A·B| ≤ f · (|A|·|B|) element-wise for a tensor-core product.

    Each operand rounded to ``precision`` (u = MMA_INPUT_U: a'·b' = a·b·(1+δ), |δ| ≤ 2u + u²;
    ``rounds_inputs=False`` where A and B already are of that type, e.g. bfloat16 inputs;
    ``truncates``: float32 given to the tensor cores unrounded, which keep its top bits: 2u), then a
    dot product of length K accumulated in FP32 in any order: γ_K(MMA_ACC_U)·|a'|·|b'| with
    |a'|·|b'| ≤ (1 + u)²·|a|·|b| (Higham §3.1).  ``rounds_output``: C is then rounded once to the
    operands' 16-bit type (relative u of that type, on |C| ≤ (1 + f)·|A|·|B|).  The reference's
    own error (float64 or long double) is the caller's to add, as in ``matmul_reference``.

    A relative bound: it holds away from the formats' ends.  Where a rounding leaves the normal range it does not
    — a product or result below the smallest normal of its type (a 16-bit result rounded to 0 or a subnormal: add
    half its smallest subnormal, 2⁻²⁵ for float16, 2⁻¹³⁴ for bfloat16; a float32 subnormal operand, whose low bits
    TF32 drops) or past the largest (an operand near FLT_MAX that TF32's rounding takes to inf; a result past the
    16-bit range: ±inf).  The tests add those absolute terms (``tests/common.py``'s ``ETA16``)."""
    if precision not in MMA_INPUT_U:
        raise ValueError(f"precision: expected one of {tuple(MMA_INPUT_U)}; got {precision!r}")
    u = MMA_INPUT_U[precision] * (2 if truncates else 1) if rounds_inputs else 0.0
    f = (2 * u + u * u) + gamma(max(k, 1), MMA_ACC_U) * (1 + u) ** 2
    if rounds_output:
        f = f + MMA_INPUT_U[precision] * (1 + f)
    return f
