"""Reductions: sum, max, min over the whole array or along the last axis.

=====================  ====================================================
``k01_warp_shuffle``   per-thread fold, warp butterfly, one shared step;
                       whole arrays in two launches (blocks, then partials),
                       one when a block's first step covers the array
=====================  ====================================================
"""

from __future__ import annotations

import math
import numbers
import threading

import numpy as np
from numba import cuda

from ...interop import as_stream, device_operand, finish_result, prepare_out, stream_key
from ...launch import planned
from ...registry import Family
from ...runtime import SIMULATOR, Rung
from .. import _patterns_cases as _cases
from . import k01_warp_shuffle
from ._common import OPS, SUM, acc_dtype, op_code

RUNG = k01_warp_shuffle.RUNG
RUNGS: dict[str, Rung] = {RUNG.name: RUNG}
REDUCE_OPS = OPS
#: the family's registration (:mod:`simt_tiles.registry`)
FAMILY = Family("reduce", RUNGS, None, (), _cases.reduce_demo, _cases.REDUCE_ALIASING, _cases.REDUCE_HAZARDS)

__all__ = ["reduce", "REDUCE_OPS", "RUNGS"]


#: per (device, stream, host thread, dtype, length): the partials buffer of whole-array
#: reductions, kept between calls.  A fresh cuda.device_array per call costs a cudaMalloc and,
#: later, a cudaFree that synchronises the device.  Work on one stream runs in order, so calls
#: sharing a stream can share its buffer — from one host thread: two threads' calls interleave
#: their kernels on a shared stream, and the per-thread default stream is one handle for many
#: streams.
_WORKSPACES: dict = {}


def _workspace(n: int, dtype, stream):
    key = (0 if SIMULATOR else cuda.get_current_device().id, stream_key(stream), threading.get_ident(),
           np.dtype(dtype), n)
    buf = _WORKSPACES.get(key)
    if buf is None:
        if len(_WORKSPACES) > 64:  # many streams come and go: start over rather than grow
            _WORKSPACES.clear()
        buf = _WORKSPACES[key] = cuda.device_array(n, dtype, stream=stream)
    return buf


@planned
def reduce(x, op="sum", *, axis=None, out=None, config=None, stream=None):
    """``numpy.sum/max/min(x, axis=axis)`` for float32/float64 arrays, on the GPU.

    axis
        None (the whole array; the result has shape ()) or the last axis
        (-1 or ``x.ndim - 1``; the result has shape ``x.shape[:-1]``).
    out
        Optional array of the result's shape and ``x``'s dtype; it must not
        overlap ``x`` in memory (ValueError naming ``out``).
    Sums accumulate in float64 (see ``_common``); max/min propagate NaN like
    NumPy, and like NumPy raise ValueError whenever the reduced axis is empty —
    even when the result would be empty too (``max`` of a (0, 0) array along
    -1); an empty *other* axis gives an empty result.  NumPy callers get a
    NumPy scalar where NumPy does: for a result of shape () (``axis=None``, or
    the last axis of a 1-D array).
    """
    code = op_code(op)
    cfg = RUNG.resolve_config(config)
    stream = as_stream(stream, x)
    x_op = device_operand(x, "x", ndim=None, stream=stream)
    dev, dt = x_op.dev, x_op.dev.dtype
    shape = tuple(dev.shape)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, numbers.Integral)):
        raise TypeError(f"axis: expected None or an int; got {type(axis).__name__} {axis!r}")
    if axis is not None and axis not in (-1, len(shape) - 1):
        raise ValueError(
            f"axis: expected None or the last axis (-1 or {len(shape) - 1}) of a {len(shape)}-D array; got {axis!r}"
        )
    T = cfg.threads
    if axis is None:
        n = math.prod(shape)
        if n == 0 and code != SUM:
            raise ValueError(f"x: zero-size array to reduction operation {op} which has no identity")
        out_op = prepare_out(out, x_op, (), dt, stream)
        if n <= T * cfg.loads:
            # one block's first step covers the array: one launch writes the result (a second
            # pass would cost a launch, a workspace and, on the host, a few µs per call)
            RUNG.kernel(cfg, dt, op=code, out_dtype=dt)[1, T, stream](dev.reshape(1, n), out_op.dev.reshape(1))
        else:
            acc = acc_dtype(code, dt)
            blocks = min(cfg.max_blocks, -(-n // T))
            partials = _workspace(blocks, acc, stream)
            # pass 1: every block folds its grid-stride slice; pass 2: one block folds the partials
            first = RUNG.kernel(cfg, dt, op=code, out_dtype=acc)
            first[blocks, T, stream](dev.reshape(1, n), partials)
            second = RUNG.kernel(cfg, acc, op=code, out_dtype=dt)
            second[1, T, stream](partials.reshape(1, blocks), out_op.dev.reshape(1))
    else:
        rows, cols = math.prod(shape[:-1]), shape[-1]
        if cols == 0 and code != SUM:  # NumPy raises even if the result is empty (rows == 0)
            raise ValueError(f"x: zero-size array to reduction operation {op} which has no identity")
        out_op = prepare_out(out, x_op, shape[:-1], dt, stream)
        if rows:
            rcfg = cfg.for_rows()
            kernel = RUNG.kernel(rcfg, dt, op=code, out_dtype=dt)
            kernel[rows, rcfg.threads, stream](dev.reshape(rows, cols), out_op.dev.reshape(rows))
    result = finish_result(out_op, stream)
    scalar = axis is None or len(shape) == 1  # a result of shape (): NumPy gives a scalar
    if scalar and isinstance(result, np.ndarray) and out is None:
        return result[()]
    return result
