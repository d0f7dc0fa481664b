"""Stride 2 on the tiled path: space-to-depth turns a stride-2 layer into a stride-1 one.

With ``a = 2a' + p`` and ``b = 2b' + q`` (p, q ∈ {0, 1}) a stride-2 output reads::

    xp[c, 2i + a, 2j + b] = xs[4c + 2p + q, i + a', j + b']    with  xs[4c + 2p + q, u, v] = xp[c, 2u + p, 2v + q]

so ``conv(x, w, stride 2, padding)`` = ``conv(xs, ws, stride 1, padding 0)`` where ``xs`` (N, 4·C_in,
OH + KH' − 1, OW + KW' − 1) holds the zero-padded input's four phases as channels and ``ws``
(C_out, 4·C_in, KH', KW'), KH' = ⌈KH / 2⌉, the filter's taps ``w[o, c, 2a' + p, 2b' + q]`` (zero where
2a' + p ≥ KH).  An axis where the filter has extent 1 needs one phase (p = 0): a 1×1 stride-2 layer is
a subsample then a 1×1 layer of C_in channels.  The products are the layer's; the longer sums (16/9 of
a 3×3's multiply-adds, 64/49 of a 7×7's) add exact zeros besides them, and adding an exact zero rounds nothing, so the
result is within the layer's own γ bound of C_in·KH·KW terms — for finite inputs: a zero tap times an
infinite input value is NaN where torch has ±inf.  Two copy kernels (the input once, the filter once
per call) then the tuned stride-1 rungs (``dispatch.plan``).
"""

from __future__ import annotations

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


def _input_phases(x, xs, pad_top, pad_left, ph, pw):
    """xs[n, (c·ph + p)·pw + q, u, v] = x[n, c, 2u + p − pad_top, 2v + q − pad_left] (0 outside x);
    ``ph``, ``pw``: the phases per axis (2, or 1 for a filter of extent 1 there)."""
    i = cuda.grid(1)
    n_img, cp, us, vs = xs.shape
    if i < n_img * cp * us * vs:
        v = i % vs
        t = i // vs
        u = t % us
        t = t // us
        cc = t % cp
        n = t // cp
        per = ph * pw
        rem = cc % per
        r = 2 * u + rem // pw - pad_top
        s = 2 * v + rem % pw - pad_left
        if 0 <= r < x.shape[2] and 0 <= s < x.shape[3]:
            xs[n, cc, u, v] = x[n, cc // per, r, s]
        else:
            xs[n, cc, u, v] = 0  # the zero padding, and rows/columns past it


def _filter_phases(w, ws, ph, pw):
    """ws[o, (c·ph + p)·pw + q, a, b] = w[o, c, 2a + p, 2b + q] (0 past the filter)."""
    i = cuda.grid(1)
    c_out, cp, kh2, kw2 = ws.shape
    if i < c_out * cp * kh2 * kw2:
        b = i % kw2
        t = i // kw2
        a = t % kh2
        t = t // kh2
        cc = t % cp
        o = t // cp
        per = ph * pw
        rem = cc % per
        r = 2 * a + rem // pw
        s = 2 * b + rem % pw
        if r < w.shape[2] and s < w.shape[3]:
            ws[o, cc, a, b] = w[o, cc // per, r, s]
        else:
            ws[o, cc, a, b] = 0  # a tap past the filter


input_phases = jit(_input_phases)
filter_phases = jit(_filter_phases)


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
    """``(xs, ws)``: the input's and the filter's phases, in kept buffers, on ``stream``."""
    xs_shape, ws_shape = phase_shapes(x.shape, w.shape, oh, ow)
    ph, pw = phase_counts(*w.shape[2:])
    xs = _buffer(xs_shape, x.dtype, stream, "x")
    ws = _buffer(ws_shape, w.dtype, stream, "w")
    input_phases[cdiv(xs.size, THREADS), THREADS, stream](x, xs, pad_top, pad_left, ph, pw)
    filter_phases[cdiv(ws.size, THREADS), THREADS, stream](w, ws, ph, pw)
    return xs, ws
