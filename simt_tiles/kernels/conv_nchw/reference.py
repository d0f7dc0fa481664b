"""NumPy reference and error bound for the NCHW convolution layer (no torch needed).

The operation is ``torch.nn.functional.conv2d(x, w, bias, stride=1,
padding=p)`` (the conv_nchw ladder's docstring states it).  Each output is a
sum of n = C_in·KH·KW products, plus the bias (n + 1 terms), so the classic
dot-product bound applies (see :mod:`simt_tiles.bounds`), in any order of
summation::

    |out − ref| ≤ (γ_n(u) + γ_n(u_ref)) · (Σ|w|·|x| + |bias|) · (1 + 2·γ_n(u_ref))

with n = C_in·KH·KW + 1 when there is a bias.  Zero-padding taps contribute
exact zeros (to the sum and to Σ|w|·|x|).

The reference is computed in long double (x86: 64-bit significand) for
problems up to ``PRECISE_MAX_WORK`` multiply-adds, in float64 beyond (its own
γ_n(2^-53) is then part of the bound, as in :func:`~simt_tiles.kernels.matmul.reference.matmul_reference`).
``tests/test_conv_nchw.py`` checks it against a brute-force loop and, where
installed, against torch.
"""

from __future__ import annotations

import numpy as np

from ...bounds import gamma, unit_roundoff

__all__ = ["conv2d_nchw_reference", "conv2d_nchw_bruteforce", "PRECISE_MAX_WORK"]

#: largest number of multiply-adds the reference does in long double (which has
#: no BLAS: ~10 M/s); larger problems are computed in float64
PRECISE_MAX_WORK = 20_000_000


def conv2d_nchw_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, padding: int = 0,
                          *, precise: bool | None = None):
    """``(ref, bound)`` for conv2d(x, w, bias, stride 1, padding), both of the
    output's shape (N, C_out, OH, OW), in long double (``precise``) or float64.

    ``precise=None`` chooses long double up to :data:`PRECISE_MAX_WORK`
    multiply-adds.  The bound is for a result computed in ``x.dtype``."""
    n, c_in, h, wd = x.shape
    c_out, w_cin, kh, kw = w.shape
    if w_cin != c_in:
        raise ValueError(f"w: expected {c_in} input channels; got shape {w.shape}")
    oh, ow = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"w: a {kh}x{kw} filter is larger than the padded input")
    work = n * c_out * oh * ow * c_in * kh * kw
    if precise is None:
        precise = work <= PRECISE_MAX_WORK
    rdt = np.longdouble if precise else np.float64
    xp = np.zeros((n, c_in, h + 2 * padding, wd + 2 * padding), rdt)
    xp[:, :, padding:padding + h, padding:padding + wd] = x
    wr = np.asarray(w, dtype=rdt)
    ref = np.zeros((n, c_out, oh, ow), rdt)
    absref = np.zeros((n, c_out, oh, ow), rdt)
    for a in range(kh):
        for b in range(kw):
            win = xp[:, :, a:a + oh, b:b + ow]  # (N, C_in, OH, OW): tap (a, b) of every output
            tap = wr[:, :, a, b]  # (C_out, C_in)
            ref += np.einsum("nchw,oc->nohw", win, tap, optimize=True)
            absref += np.einsum("nchw,oc->nohw", np.abs(win), np.abs(tap), optimize=True)
    terms = c_in * kh * kw
    if bias is not None:
        br = np.asarray(bias, dtype=rdt)[None, :, None, None]
        ref += br
        absref += np.abs(br)
        terms += 1
    u_ref = unit_roundoff(rdt)
    g_ref = gamma(max(terms, 1), u_ref)
    factor = (gamma(max(terms, 1), unit_roundoff(x.dtype)) + g_ref) * (1 + 2 * g_ref)
    return ref, absref * factor


def conv2d_nchw_bruteforce(x, w, bias=None, padding: int = 0) -> np.ndarray:
    """The definition, one output and one tap at a time (plain Python floats,
    float64 arithmetic): tiny problems only; the tests compare the vectorised
    reference with it."""
    n, c_in, h, wd = x.shape
    c_out, _, kh, kw = w.shape
    oh, ow = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    out = np.zeros((n, c_out, oh, ow))
    for i in range(n):
        for o in range(c_out):
            for r in range(oh):
                for s in range(ow):
                    total = 0.0 if bias is None else float(bias[o])
                    for c in range(c_in):
                        for a in range(kh):
                            for b in range(kw):
                                ir, ic = r + a - padding, s + b - padding
                                if 0 <= ir < h and 0 <= ic < wd:
                                    total += float(w[o, c, a, b]) * float(x[i, c, ir, ic])
                    out[i, o, r, s] = total
    return out
