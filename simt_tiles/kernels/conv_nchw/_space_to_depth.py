"""Stride 2 on the tiled path: space-to-depth turns a stride-2 layer into a stride-1 one.

With ``a = 2a' + p`` and ``b = 2b' + q`` (p, q ∈ {0, 1}) a stride-2 output reads::

    xp[c, 2i + a, 2j + b] = xs[4c + 2p + q, i + a', j + b']    with  xs[4c + 2p + q, u, v] = xp[c, 2u + p, 2v + q]

so ``conv(x, w, stride 2, padding)`` = ``conv(xs, ws, stride 1, padding 0)`` where ``xs`` (N, 4·C_in,
OH + KH' − 1, OW + KW' − 1) holds the zero-padded input's four phases as channels and ``ws``
(C_out, 4·C_in, KH', KW'), KH' = ⌈KH / 2⌉, the filter's taps ``w[o, c, 2a' + p, 2b' + q]`` (zero where
2a' + p ≥ KH).  An axis where the filter has extent 1 needs one phase (p = 0): a 1×1 stride-2 layer is
a subsample then a 1×1 layer of C_in channels.  The products are the layer's; the longer sums (16/9 of
a 3×3's multiply-adds, 64/49 of a 7×7's) add exact zeros besides them, and adding an exact zero rounds nothing, so the
result is within the layer's own γ bound of C_in·KH·KW terms — for finite inputs.  An odd filter's
padded taps (0 at 2a' + p = KH) multiply the input row just past an output's window: 0·inf or 0·NaN
would spread a non-finite value to outputs whose window does not hold it.  So the input copy marks a
non-finite value in a device flag, and for an odd filter a last kernel recomputes the layer directly
where the flag is set (every thread returns at once where not: ~2 µs).  Two copy kernels (the filter
once per call, then the input), the tuned stride-1 rungs (``dispatch.plan``), that check.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..._per_stream import PerStream
from ...runtime import cdiv, jit

#: threads per block of the two copy kernels
THREADS = 256

#: per (device, stream, host thread), bounded (:mod:`simt_tiles._per_stream`), then (shape, dtype, tag)
_BUFFERS = PerStream("space_to_depth")


def _buffer(shape, dtype, stream, tag: str):
    """A kept device array per (device, stream, host thread, shape, dtype, tag): the phases of one
    layer shape are rewritten by each call on that stream (in order); a launch plan holds the one
    its recording used."""
    return _BUFFERS.get(stream, (tuple(shape), np.dtype(dtype), tag),
                        lambda: cuda.device_array(shape, dtype, stream=stream))


def _unflatten(i, d1, d2, d3):
    """The 4 indices of flat index ``i`` in a C-order array of shape (·, d1, d2, d3)."""
    i3 = i % d3
    t = i // d3
    i2 = t % d2
    t = t // d2
    return t // d1, t % d1, i2, i3


unflatten = cuda.jit(device=True, inline="always")(_unflatten)


def _input_phases(x, xs, pad_top, pad_left, ph, pw, flag):
    """xs[n, (c·ph + p)·pw + q, u, v] = x[n, c, 2u + p − pad_top, 2v + q − pad_left] (0 outside x);
    ``ph``, ``pw``: the phases per axis (2, or 1 for a filter of extent 1 there); ``flag[0]`` set to 1
    where a value copied is NaN or ±inf (left as it is otherwise: :func:`_filter_phases` clears it)."""
    i = cuda.grid(1)
    n_img, cp, us, vs = xs.shape
    if i < n_img * cp * us * vs:
        n, cc, u, v = unflatten(i, cp, us, vs)
        per = ph * pw
        rem = cc % per
        r = 2 * u + rem // pw - pad_top
        s = 2 * v + rem % pw - pad_left
        if 0 <= r < x.shape[2] and 0 <= s < x.shape[3]:
            value = x[n, cc // per, r, s]
            xs[n, cc, u, v] = value
            if not math.isfinite(value):
                flag[0] = 1  # every writer writes 1: no race to lose
        else:
            xs[n, cc, u, v] = 0  # the zero padding, and rows/columns past it


def _filter_phases(w, ws, ph, pw, flag):
    """ws[o, (c·ph + p)·pw + q, a, b] = w[o, c, 2a + p, 2b + q] (0 past the filter); ``flag[0]`` cleared
    (launched before :func:`_input_phases` on the same stream)."""
    i = cuda.grid(1)
    if i == 0:
        flag[0] = 0
    c_out, cp, kh2, kw2 = ws.shape
    if i < c_out * cp * kh2 * kw2:
        o, cc, a, b = unflatten(i, cp, kh2, kw2)
        per = ph * pw
        rem = cc % per
        r = 2 * a + rem // pw
        s = 2 * b + rem % pw
        if r < w.shape[2] and s < w.shape[3]:
            ws[o, cc, a, b] = w[o, cc // per, r, s]
        else:
            ws[o, cc, a, b] = 0  # a tap past the filter


def _direct_where_flagged(x, w, bias, has_bias, out, flag, pad_top, pad_left, zero):
    """Where ``flag[0]`` is set, every output of the stride-2 layer again, directly: its KH × KW window of
    ``x`` (the padding's ``zero`` multiplied too, as the other paths do), plus ``bias`` where ``has_bias``.
    A grid-stride loop; where the flag is clear, every thread returns at once."""
    if flag[0] == 0:
        return
    n_img, c_out, oh, ow = out.shape
    c_in, h, wd = x.shape[1], x.shape[2], x.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        n, o, r, j = unflatten(i, c_out, oh, ow)
        acc = zero
        for c in range(c_in):
            for a in range(kh):
                y = 2 * r + a - pad_top
                for b in range(kw):
                    s = 2 * j + b - pad_left
                    inside = 0 <= y < h and 0 <= s < wd
                    acc += w[o, c, a, b] * (x[n, c, y, s] if inside else zero)
        if has_bias:
            acc += bias[o]
        out[n, o, r, j] = acc


input_phases = jit(_input_phases)
filter_phases = jit(_filter_phases)
direct_where_flagged = jit(_direct_where_flagged)

#: blocks of :func:`_direct_where_flagged` (a grid-stride loop: where the flag is clear, ~2 µs)
CHECK_BLOCKS = 264


def phase_counts(kh: int, kw: int) -> tuple[int, int]:
    """Phases per axis: 2, or 1 where the filter has extent 1 (a 1×1 stride-2 layer is a subsample)."""
    return min(2, kh), min(2, kw)


def phase_shapes(x_shape, w_shape, oh: int, ow: int):
    """``(xs shape, ws shape)`` for a stride-2 layer with output OH × OW."""
    n, c_in, _, _ = x_shape
    c_out, _, kh, kw = w_shape
    kh2, kw2 = cdiv(kh, 2), cdiv(kw, 2)
    ph, pw = phase_counts(kh, kw)
    return (n, ph * pw * c_in, oh + kh2 - 1, ow + kw2 - 1), (c_out, ph * pw * c_in, kh2, kw2)


def phases(x, w, oh: int, ow: int, pad_top: int, pad_left: int, stream):
    """``(xs, ws, flag)``: the input's and the filter's phases, in kept buffers, on ``stream``, and whether
    the input holds a NaN or ±inf (a 1-element device array, for :func:`fix_non_finite`)."""
    xs_shape, ws_shape = phase_shapes(x.shape, w.shape, oh, ow)
    ph, pw = phase_counts(*w.shape[2:])
    xs = _buffer(xs_shape, x.dtype, stream, "x")
    ws = _buffer(ws_shape, w.dtype, stream, "w")
    flag = _buffer((1,), np.int32, stream, "flag")
    filter_phases[cdiv(ws.size, THREADS), THREADS, stream](w, ws, ph, pw, flag)  # first: clears the flag
    input_phases[cdiv(xs.size, THREADS), THREADS, stream](x, xs, pad_top, pad_left, ph, pw, flag)
    return xs, ws, flag


def padded_taps(kh: int, kw: int) -> bool:
    """Whether the phases' filter has taps past the layer's (an odd extent of 3 or more on an axis)."""
    return any(k % 2 and k > 1 for k in (kh, kw))


def fix_non_finite(x, w, bias, out, flag, pad_top: int, pad_left: int, stream) -> None:
    """After the stride-1 layer: where ``flag`` says the input held a NaN or ±inf and the filter has
    padded taps (:func:`padded_taps`), the layer again, directly (:func:`_direct_where_flagged`)."""
    if out.size == 0 or not padded_taps(*w.shape[2:]):
        return
    b = bias if bias is not None else _buffer((1,), out.dtype, stream, "no bias")
    blocks = min(cdiv(out.size, THREADS), CHECK_BLOCKS)
    direct_where_flagged[blocks, THREADS, stream](x, w, b, bias is not None, out, flag, pad_top, pad_left,
                                                  out.dtype.type(0))
