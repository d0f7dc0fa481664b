"""Reductions with NumPy semantics: sum, mean, max, min, argmax, argmin over any axes.

=====================  ====================================================
``k01_warp_shuffle``   per-thread fold, warp butterfly, one shared step;
                       whole arrays in two launches (blocks, then partials)
``k02_axis_lanes``     any axis: a few lanes per output along the memory,
                       short rows many to a warp, long axes split
``k03_flat_lanes``     k02's plan over the flat memory: one offset, a constant
                       stride, unchecked full steps, one checked tail
                       (the default wherever k01 is not)
=====================  ====================================================

dtypes: float32 and float64; float16 and bfloat16 on every rung (read 16-bit; sums and means accumulate in
float64, max/min/argmax/argmin compare in float32, exactly; a result of the input's dtype rounded once, to nearest
even — torch's rule; bfloat16 travels as its ``uint16`` bits: ``simt_tiles.half_io``, softmax's conversions).

Check → choose → launch: :func:`reduce` checks the arguments and prepares ``out``;
:mod:`.dispatch` chooses (one :class:`~.dispatch.Plan`) and launches.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ...interop import (HALF_FLOATS, as_stream, check_no_overlap, device_operand, dtype_name, finish16, finish_result,
                        numpy_scalar, operand16, out16, prepare_out, storage_view)
from ... import _recording
from ...launch import planned
from ...registry import Family
from ...runtime import HALF_STORAGE
from . import _cases
from . import dispatch
from ._common import ARGMAX, ARGMIN, OPS, SUM, op_code
from .dispatch import _WORKSPACES, RUNGS  # noqa: F401  (the workspaces: tests clear them)

REDUCE_OPS = OPS
REDUCE_VARIANTS: tuple[str, ...] = tuple(RUNGS)
BEST_VARIANT = dispatch.DEFAULT_LANES
RUNG = RUNGS[BEST_VARIANT]
#: the family's registration (:mod:`simt_tiles.registry`)
FAMILY = Family("reduce", RUNGS, None, (), _cases.reduce_demo, _cases.REDUCE_ALIASING, _cases.REDUCE_HAZARDS)

__all__ = ["reduce", "REDUCE_OPS", "REDUCE_VARIANTS", "RUNGS", "BEST_VARIANT"]


#: the dtypes reduce takes, as its errors name them
ACCEPTED = "float32, float64, float16 or bfloat16"


@planned
def reduce(x, op="sum", *, axis=None, keepdims=False, out=None, variant=None, config=None, stream=None):
    """``numpy.<op>(x, axis=axis, keepdims=keepdims)`` for float32, float64, float16 or bfloat16 arrays, on the GPU.

    x
        16-bit inputs (PyTorch ``float16``/``bfloat16`` CUDA tensors, CuPy and Numba ``float16``, NumPy
        ``float16`` or ``ml_dtypes.bfloat16``) are read exactly; sums and means accumulate in float64 and the
        result, of ``x``'s dtype, is rounded once to nearest even (past the 16-bit range: ±inf), as
        ``np.sum(x.astype(np.float64)).astype(np.float16)``; max/min/argmax/argmin are exact.
    op
        ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` (results of ``x``'s dtype) or
        ``"argmax"``, ``"argmin"`` (int64; the first index of the extreme, a NaN first).
    axis
        None (every axis), an int, or a tuple of distinct ints (not for argmax/argmin, as
        NumPy); negative ints count from the end.
    out
        Optional array of the result's shape and dtype (TypeError naming ``out`` otherwise); it must not
        overlap a device ``x`` (ValueError naming ``out``; NumPy inputs are copies).

    Sums and means accumulate in float64 and round once; max/min propagate NaN; an empty
    reduced axis gives 0 (sum), NaN with a RuntimeWarning (mean) and ValueError (the others,
    also when the result is empty too), as NumPy.  NumPy callers get a NumPy scalar where
    NumPy does (a result of shape ()); a 0-d ``x`` reduces to its value (axis None or ``()``).
    """
    code = op_code(op)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims: expected a bool; got {keepdims!r}")
    if getattr(x, "ndim", None) == 0 and hasattr(x, "reshape"):  # NumPy/torch reduce a 0-d array to its value
        # (NumPy's rule: None or (), and an int 0 or -1 but for mean; anything else names axis)
        if not (op != "mean" and isinstance(axis, numbers.Integral) and not isinstance(axis, (bool, np.bool_))
                and axis in (0, -1)):
            normalize_axes(axis, 0, arg=code in (ARGMAX, ARGMIN))
        return reduce(x.reshape(1), op, axis=0, out=out, variant=variant, config=config, stream=stream)
    stream = as_stream(stream, x)
    half = dtype_name(x)
    if half in HALF_FLOATS:  # the uint16 bits, viewed as the kernels take them (bfloat16: the bits)
        x_op = operand16(x, "x", stream, ndim=None)
    else:
        x_op = device_operand(x, "x", ndim=None, stream=stream, accepted=ACCEPTED)
    shape = tuple(x_op.dev.shape)
    axes = normalize_axes(axis, len(shape), arg=code in (ARGMAX, ARGMIN))
    count = math.prod(shape[a] for a in axes)
    if count == 0 and code != SUM:
        what = (f"zero-size array: attempt to get {op} of an empty sequence" if op.startswith("arg") else
                f"zero-size array to reduction operation {op} which has no identity")
        raise ValueError(f"x: {what} (shape {shape}, axis {axis!r})")
    kept = tuple(1 if a in axes else d for a, d in enumerate(shape))
    result_shape = kept if keepdims else tuple(d for a, d in enumerate(shape) if a not in axes)
    arg = code in (ARGMAX, ARGMIN)
    if half in HALF_FLOATS and not arg:  # a result of x's 16-bit dtype, as its bits
        out_op = out16(out, x_op, result_shape, stream)
        check_no_overlap(out_op, (x_op,))
    else:
        out_op = prepare_out(out, x_op, result_shape, np.dtype(np.int64) if arg else x_op.dev.dtype, stream)
    xd, od = x_op.dev, out_op.dev
    if half in HALF_FLOATS:
        xd, od = storage_view(xd, HALF_STORAGE[half]), od if arg else storage_view(od, HALF_STORAGE[half])
    if count == 0 and op == "mean":  # every call warns, as NumPy: no plan replays it silently
        recording = getattr(_recording.state, "rec", None) is not None  # launch._record: one frame more
        _recording.no_plan("the mean of an empty slice warns")
        # (the device guard, planned's wrapper, ours)
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=5 if recording else 4)
    if math.prod(result_shape):
        p = dispatch.plan(shape, axes, op, code, xd.dtype, variant=variant, config=config)
        p.run(dispatch.Call(xd, od, stream))
    result = finish16(out_op, x_op, stream) if half in HALF_FLOATS and not arg else finish_result(out_op, stream)
    return numpy_scalar(result, out)  # (NumPy gives a scalar)


def normalize_axes(axis, ndim: int, *, arg: bool = False) -> tuple:
    """Sorted distinct non-negative axes (None: all); TypeError/ValueError naming ``axis``."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple) and arg:
        raise TypeError(f"axis: argmax/argmin take None or one int, as NumPy; got {axis!r}")
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral):
            raise TypeError(f"axis: expected None, an int or a tuple of ints; got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"axis: {a} is out of bounds for an array of {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"axis: repeated axis in {axis!r}")
    return tuple(sorted(out))
