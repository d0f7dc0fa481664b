"""NumPy reference and error bound for 2-D correlation / convolution (no scipy needed).

The operation is scipy.ndimage.correlate / convolve on a 2-D image, with
scipy's ``origin`` (the conv2d ladder's docstring states it).  Each output is a dot
product of n = KH·KW terms — the filter against the window of the *extended*
image — so the classic bound applies (see :mod:`simt_tiles.bounds`)::

    |out − ref| ≤ (γ_n(u) + γ_n(u_ref)) · Σ|w|·|x| · (1 + 2·γ_n(u_ref))

with x the window values (|cval| where mode "constant" reads outside the
image).  In mode "constant" one more term counts in γ (n + 1): a kernel
rounds ``cval`` to the image's dtype once before using it, while the
reference uses it exactly, as scipy does.

Zero weights: scipy's ``correlate``/``convolve`` skip every tap with
``|w| <= DBL_EPSILON`` (2**-52), so a NaN or inf in the image spreads only
along the other taps; ``correlate1d`` counts every tap (0·NaN = NaN).  The
references do the same (``all_taps``), and :func:`correlate_separable_reference`
skips the taps of a tiny ``wy[a]`` or ``wx[b]`` — what a two-pass computation
can skip; scipy's correlate with ``outer(wy, wx)`` would also skip products
``|wy[a]·wx[b]| <= 2**-52`` of two larger factors (weights near 1e-8).

The reference is computed in long double (x86: 64-bit significand) from the
same index mapping the kernels use (:func:`extend_indices`, vectorised), and
``tests/test_conv2d.py`` checks it against scipy.ndimage itself.
"""

from __future__ import annotations

import numpy as np

from ...bounds import gamma, unit_roundoff

#: scipy.ndimage's footprint test (``ni_filters.c``): a tap counts if ``|w| > DBL_EPSILON``
TINY_WEIGHT = float(np.finfo(np.float64).eps)

__all__ = ["CONV_MODES", "extend_indices", "correlate2d_reference", "correlate1d_reference",
           "correlate_separable_reference", "correlate_nd_reference"]

#: the boundary modes, as scipy.ndimage names them
CONV_MODES = ("reflect", "constant", "nearest", "mirror", "wrap")


def extend_indices(p: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Image indices that coordinates ``p`` of the extended line read (length
    ``n`` ≥ 1); −1 where mode "constant" reads ``cval``.

    reflect (d c b a | a b c d | d c b a) and mirror (d c b | a b c d | c b a)
    fold with a modulo, so coordinates any distance from the image work.
    """
    p = np.asarray(p, dtype=np.int64)
    inside = (p >= 0) & (p < n)
    if mode == "reflect":
        q = p % (2 * n)
        mapped = np.where(q >= n, 2 * n - 1 - q, q)
    elif mode == "mirror":
        if n == 1:
            mapped = np.zeros_like(p)
        else:
            q = p % (2 * n - 2)
            mapped = np.where(q >= n, 2 * n - 2 - q, q)
    elif mode == "nearest":
        mapped = np.clip(p, 0, n - 1)
    elif mode == "wrap":
        mapped = p % n
    elif mode == "constant":
        mapped = np.full_like(p, -1)
    else:
        raise ValueError(f"mode: expected one of {CONV_MODES}; got {mode!r}")
    return np.where(inside, p, mapped)


def correlate2d_reference(image: np.ndarray, weights: np.ndarray, mode: str = "reflect",
                          cval: float = 0.0, *, convolve: bool = False, all_taps: bool = False,
                          origin=(0, 0)):
    """``(ref, bound)`` for scipy.ndimage.correlate (or ``convolve``) of a 2-D
    image with scipy's ``origin`` (rows, columns), both long double arrays of the
    image's shape.  Taps with ``|w| <= 2**-52`` are skipped, as scipy does, unless
    ``all_taps``.  An integer image is read exactly (long double holds 64 bits)."""
    rdt = np.longdouble
    w = np.asarray(weights, dtype=rdt)
    kh, kw = w.shape
    oh, ow = origin
    if convolve:  # the flipped filter, centred at (size - 1) // 2 (scipy's shift for even sizes), origin mirrored
        w = w[::-1, ::-1]
        ah, aw = (kh - 1) // 2 - oh, (kw - 1) // 2 - ow
    else:
        ah, aw = kh // 2 + oh, kw // 2 + ow
    keep = np.ones(w.shape, bool) if all_taps else abs(w) > TINY_WEIGHT
    ref, absref = _window_sums(image, w, ah, aw, mode, cval, keep)
    n = kh * kw + (1 if mode == "constant" else 0)
    u_ref = unit_roundoff(rdt)
    g_ref = gamma(n, u_ref)
    factor = (gamma(n, unit_roundoff(_float_of(image.dtype))) + g_ref) * (1 + 2 * g_ref)
    return ref, absref * factor


def _float_of(dtype) -> np.dtype:
    """The dtype the kernels compute in for an image of ``dtype`` (``_args.compute_dtype``'s
    rule for the default output): itself for floats, float32 up to 16-bit integers, else float64."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype
    return np.dtype(np.float32 if dtype.itemsize <= 2 else np.float64)


def correlate1d_reference(image: np.ndarray, weights: np.ndarray, axis: int = -1,
                          mode: str = "reflect", cval: float = 0.0, origin: int = 0):
    """``(ref, bound)`` for scipy.ndimage.correlate1d of a 2-D image along
    ``axis``, origin 0: the 2-D correlation with the K × 1 (axis 0) or 1 × K
    (axis 1) filter — K terms per output, so γ_K (γ_{K+1} in mode "constant").
    Every tap counts, zero weights too, as in scipy's correlate1d."""
    w = np.asarray(weights)
    k = w.shape[0]
    along0 = axis % 2 == 0
    return correlate2d_reference(image, w.reshape((k, 1) if along0 else (1, k)), mode, cval,
                                 all_taps=True, origin=(origin, 0) if along0 else (0, origin))


def correlate_separable_reference(image: np.ndarray, wy: np.ndarray, wx: np.ndarray,
                                  mode: str = "reflect", cval: float = 0.0, origin=(0, 0)):
    """``(ref, bound)`` for scipy.ndimage.correlate with the outer product
    ``wy[:, None] · wx[None, :]``, computed as a column pass (KH terms) then a
    row pass (KW terms) with the intermediate rounded to the image's dtype.

    Kernel error: t = Σ_a wy_a·x_a has |fl(t) − t| ≤ γ_KH·Σ|wy||x|; the row pass
    adds γ_KW·Σ|wx|·|fl(t)| with |fl(t)| ≤ (1 + γ_KH)·Σ|wy||x|, so in all
    (γ_KH + γ_KW + γ_KH·γ_KW)·Σ|wy_a||wx_b||x| ≤ γ_{KH+KW}·Σ|wy_a||wx_b||x|.
    Mode "constant" adds one term (cval rounded to the dtype; the two-pass
    path's row padding fl(cval·Σ wy) stays within γ_2·|cval|·Σ|wy|, inside it).
    The reference itself: long double products wy_a·wx_b (exact for float32
    inputs) and sums of KH·KW terms — γ_{KH·KW+1}(u_ref).
    """
    rdt = np.longdouble
    wy_r, wx_r = np.asarray(wy, dtype=rdt), np.asarray(wx, dtype=rdt)
    kh, kw = wy_r.shape[0], wx_r.shape[0]
    w = wy_r[:, None] * wx_r[None, :]
    keep = (abs(wy_r) > TINY_WEIGHT)[:, None] & (abs(wx_r) > TINY_WEIGHT)[None, :]
    ref, absref = _window_sums(image, w, kh // 2 + origin[0], kw // 2 + origin[1], mode, cval, keep)
    extra = 1 if mode == "constant" else 0
    g_ref = gamma(kh * kw + 1 + extra, unit_roundoff(rdt))
    factor = (gamma(kh + kw + extra, unit_roundoff(_float_of(image.dtype))) + g_ref) * (1 + 2 * g_ref)
    return ref, absref * factor


def _window_sums(image: np.ndarray, w: np.ndarray, ah: int, aw: int, mode: str, cval: float,
                 keep: np.ndarray):
    """``(Σ w·x, Σ |w|·|x|)`` over each output's window of the extended image, in
    long double, over the taps where ``keep`` is True; ``w`` is the (long double)
    filter, ``(ah, aw)`` its anchor."""
    rdt = np.longdouble
    img = np.asarray(image, dtype=rdt)
    h, wd = img.shape
    kh, kw = w.shape
    ref = np.zeros((h, wd), rdt)
    absref = np.zeros((h, wd), rdt)
    if h and wd:
        cv = rdt(cval)
        for a in range(kh):
            rows = extend_indices(np.arange(h) + a - ah, h, mode)
            for b in range(kw):
                if not keep[a, b]:
                    continue
                cols = extend_indices(np.arange(wd) + b - aw, wd, mode)
                x = img[np.ix_(np.maximum(rows, 0), np.maximum(cols, 0))]
                outside = (rows < 0)[:, None] | (cols < 0)[None, :]
                x = np.where(outside, cv, x)
                ref += w[a, b] * x
                absref += abs(w[a, b]) * np.abs(x)
    return ref, absref


def correlate_nd_reference(image: np.ndarray, weights: np.ndarray, mode: str = "reflect", cval: float = 0.0, *,
                           convolve: bool = False, origin=0):
    """``(ref, bound)`` for scipy.ndimage.correlate (or ``convolve``) of an image of any number of
    dimensions with a filter of as many, scipy's ``origin`` an int or one per axis: long double, the
    kernels' index mapping (:func:`extend_indices`) on every axis, taps with ``|w| <= 2**-52`` skipped.
    The bound as :func:`correlate2d_reference`'s with n = the filter's number of taps (+1 in mode
    "constant")."""
    rdt = np.longdouble
    img = np.asarray(image, dtype=rdt)
    w = np.asarray(weights, dtype=rdt)
    nd = img.ndim
    origin = (origin,) * nd if np.isscalar(origin) else tuple(origin)
    if convolve:
        w = w[(slice(None, None, -1),) * nd]
        anchor = [(k - 1) // 2 - o for k, o in zip(w.shape, origin)]
    else:
        anchor = [k // 2 + o for k, o in zip(w.shape, origin)]
    ref = np.zeros(img.shape, rdt)
    absref = np.zeros(img.shape, rdt)
    if img.size:
        cv = rdt(cval)
        for tap in np.ndindex(*w.shape):
            if not abs(w[tap]) > TINY_WEIGHT:
                continue
            idx = [extend_indices(np.arange(n) + t - a, n, mode) for n, t, a in zip(img.shape, tap, anchor)]
            x = img[np.ix_(*[np.maximum(i, 0) for i in idx])]
            outside = np.zeros(img.shape, bool)
            for axis, i in enumerate(idx):
                outside |= (i < 0).reshape([-1 if k == axis else 1 for k in range(nd)])
            x = np.where(outside, cv, x)
            ref += w[tap] * x
            absref += abs(w[tap]) * np.abs(x)
    n = int(np.prod(w.shape)) + (1 if mode == "constant" else 0)
    u_ref = unit_roundoff(rdt)
    g_ref = gamma(n, u_ref)
    factor = (gamma(n, unit_roundoff(_float_of(image.dtype))) + g_ref) * (1 + 2 * g_ref)
    return ref, absref * factor
