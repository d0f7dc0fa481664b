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


def _pads(padding, pads) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from an int or (ph, pw) ``padding``, or ``pads`` itself."""
    if pads is not None:
        return tuple(int(p) for p in pads)
    ph, pw = (padding, padding) if np.isscalar(padding) else padding
    return ph, ph, pw, pw


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))


def conv2d_nchw_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, padding=0,
                          *, stride=1, dilation=1, groups: int = 1, pads=None, precise: bool | None = None):
    """``(ref, bound)`` for conv2d(x, w, bias, stride, padding, dilation, groups) (torch's), both of
    the output's shape (N, C_out, OH, OW), in long double (``precise``) or float64.

    ``padding`` an int or ``(ph, pw)`` (both sides of each axis); ``pads`` = (top, bottom, left,
    right) instead (torch's ``"same"`` with an odd total).  ``precise=None`` chooses long double up
    to :data:`PRECISE_MAX_WORK` multiply-adds.  The bound is for a result computed in ``x.dtype``,
    with n = (C_in / groups)·KH·KW (+1 with a bias) terms per output."""
    n, c_in, h, wd = x.shape
    c_out, w_cin, kh, kw = w.shape
    if c_in % groups or c_out % groups or w_cin * groups != c_in:
        raise ValueError(f"w: expected {c_in // groups} input channels for groups={groups}; got shape {w.shape}")
    top, bottom, left, right = _pads(padding, pads)
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + left + right - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"w: a {kh}x{kw} filter is larger than the padded input")
    cg, og = c_in // groups, c_out // groups
    work = n * c_out * oh * ow * cg * kh * kw
    if precise is None:
        precise = work <= PRECISE_MAX_WORK
    rdt = np.longdouble if precise else np.float64
    xp = np.zeros((n, c_in, h + top + bottom, wd + left + right), rdt)
    xp[:, :, top:top + h, left:left + wd] = x
    wr = np.asarray(w, dtype=rdt).reshape(groups, og, cg, kh, kw)
    ref = np.zeros((n, groups, og, oh, ow), rdt)
    absref = np.zeros((n, groups, og, oh, ow), rdt)
    for a in range(kh):
        for b in range(kw):
            r0, c0 = a * dh, b * dw  # tap (a, b) of every output: rows r0, r0 + sh, ...
            win = xp[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw]
            win = win.reshape(n, groups, cg, oh, ow)
            tap = wr[:, :, :, a, b]  # (groups, C_out/groups, C_in/groups)
            ref += np.einsum("ngchw,goc->ngohw", win, tap, optimize=True)
            absref += np.einsum("ngchw,goc->ngohw", np.abs(win), np.abs(tap), optimize=True)
    ref, absref = ref.reshape(n, c_out, oh, ow), absref.reshape(n, c_out, oh, ow)
    terms = cg * kh * kw
    if bias is not None:
        br = np.asarray(bias, dtype=rdt)[None, :, None, None]
        ref += br
        absref += np.abs(br)
        terms += 1
    u_ref = unit_roundoff(rdt)
    g_ref = gamma(max(terms, 1), u_ref)
    factor = (gamma(max(terms, 1), unit_roundoff(x.dtype)) + g_ref) * (1 + 2 * g_ref)
    return ref, absref * factor


def conv2d_nchw_bruteforce(x, w, bias=None, padding=0, *, stride=1, dilation=1, groups: int = 1,
                           pads=None) -> np.ndarray:
    """The definition, one output and one tap at a time (plain Python floats,
    float64 arithmetic): tiny problems only; the tests compare the vectorised
    reference with it."""
    n, c_in, h, wd = x.shape
    c_out, cg, kh, kw = w.shape
    top, bottom, left, right = _pads(padding, pads)
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + left + right - dw * (kw - 1) - 1) // sw + 1
    og = c_out // groups
    out = np.zeros((n, c_out, oh, ow))
    for i in range(n):
        for o in range(c_out):
            for r in range(oh):
                for s in range(ow):
                    total = 0.0 if bias is None else float(bias[o])
                    for c in range(cg):
                        ci = (o // og) * cg + c
                        for a in range(kh):
                            for b in range(kw):
                                ir, ic = r * sh + a * dh - top, s * sw + b * dw - left
                                if 0 <= ir < h and 0 <= ic < wd:
                                    total += float(w[o, c, a, b]) * float(x[i, ci, ir, ic])
                    out[i, o, r, s] = total
    return out
