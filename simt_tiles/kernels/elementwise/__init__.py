"""Elementwise kernels: vector_add (two rungs) and bias_relu (2-D tiles, broadcast bias).

==============================  =============================================
``k01_grid_stride``             vector_add: a fixed grid strides over any length
``k02_multi_element``           vector_add: several elements per thread, loads first
``bias_relu``                   y = max(x + bias, 0) in masked 2-D tiles
==============================  =============================================

dtypes: float32 and float64; bias_relu also float16 and bfloat16 (read 16-bit, computed in float32, rounded
once to the input's dtype: ``simt_tiles.half_io.make_io``, softmax's conversions).

Check → choose → launch: the functions below check the arguments and prepare ``out``;
:mod:`.dispatch` chooses (one plan) and the plan's rung launches.
"""

from __future__ import annotations

from ...interop import (HALF_FLOATS, as_stream, check_no_overlap, device_operand, dtype_name, finish16, finish_result,
                        operand16, out16, prepare_out)
from ...launch import planned
from ...registry import Family
from ...runtime import HALF_STORAGE
from . import _cases, dispatch
from .dispatch import BEST_VARIANT, RUNGS, VECTOR_ADD_RUNGS, Call

VECTOR_ADD_VARIANTS = tuple(VECTOR_ADD_RUNGS)
#: the family's registration (:mod:`simt_tiles.registry`); the references are NumPy expressions
FAMILY = Family("elementwise", RUNGS, None, (), _cases.demo, _cases.ALIASING, _cases.HAZARDS)

__all__ = ["vector_add", "bias_relu", "VECTOR_ADD_VARIANTS", "RUNGS", "BEST_VARIANT"]


@planned
def vector_add(a, b, *, out=None, variant=None, config=None, stream=None):
    """c = a + b for 1-D float32/float64 arrays of one length and dtype (any length, 0 too).

    ``out`` (optional, shape and dtype of ``a``) must not overlap ``a`` or ``b`` in
    device memory: ValueError naming ``out`` (compute in place through a temporary; NumPy inputs are copies,
    so a NumPy ``out`` may be one of them)."""
    plan = dispatch.vector_add_plan(variant, config)
    stream = as_stream(stream, a)
    a_op = device_operand(a, "a", ndim=1, stream=stream)
    b_op = device_operand(b, "b", ndim=1, stream=stream)
    if b_op.dev.dtype != a_op.dev.dtype:
        raise TypeError(f"b: expected dtype {a_op.dev.dtype} (the dtype of a); got {b_op.dev.dtype}")
    if b_op.dev.shape != a_op.dev.shape:
        raise ValueError(f"b: expected shape {a_op.dev.shape} (the shape of a); got {b_op.dev.shape}")
    n = a_op.dev.shape[0]
    c_op = prepare_out(out, a_op, (n,), a_op.dev.dtype, stream, inputs=(b_op,))
    if n:
        plan.run(Call(a_op.dev, b_op.dev, c_op.dev, (n,), stream))
    return finish_result(c_op, stream)


def _dtype_of(a) -> str:
    """``a``'s dtype as an error names it (not an array: its type)."""
    return dtype_name(a) or f"{type(a).__module__}.{type(a).__qualname__} (not an array)"


#: the dtypes bias_relu takes, as its errors name them
BIAS_RELU_ACCEPTED = "float32, float64, float16 or bfloat16"


@planned
def bias_relu(x, bias, *, out=None, config=None, stream=None):
    """y = max(x + bias, 0) for 2-D x (M, N) and 1-D bias (N,) of one dtype: float32, float64, float16 or
    bfloat16; NaN kept.

    16-bit inputs (PyTorch ``float16``/``bfloat16`` CUDA tensors, CuPy and Numba ``float16``, NumPy
    ``float16`` or ``ml_dtypes.bfloat16``) are read as float32, ``max(x + bias, 0)`` computed in float32 and
    rounded once to their dtype (to nearest even): torch's ``relu(x + bias)``, bit for bit (up to the sign
    of a zero).

    ``out`` (optional, shape and dtype of ``x``) must not overlap ``x`` or ``bias`` in
    device memory: ValueError naming ``out`` (NumPy inputs are copies: a NumPy ``out`` may be one of them)."""
    plan = dispatch.bias_relu_plan(config)
    stream = as_stream(stream, x)
    half = dtype_name(x)
    if half in HALF_FLOATS:  # the uint16 bits, viewed as the kernel takes them (bfloat16: the bits)
        x_op = operand16(x, "x", stream, ndim=2)
        if dtype_name(bias) != half:
            raise TypeError(f"bias: expected dtype {half} (the dtype of x); got {_dtype_of(bias)}")
        b_op = operand16(bias, "bias", stream, ndim=1)
    else:
        x_op = device_operand(x, "x", ndim=2, stream=stream, accepted=BIAS_RELU_ACCEPTED)
        if dtype_name(bias) in HALF_FLOATS:
            raise TypeError(f"bias: expected dtype {x_op.dev.dtype} (the dtype of x); got {dtype_name(bias)}")
        b_op = device_operand(bias, "bias", ndim=1, stream=stream)
        if b_op.dev.dtype != x_op.dev.dtype:
            raise TypeError(f"bias: expected dtype {x_op.dev.dtype} (the dtype of x); got {b_op.dev.dtype}")
    m, n = x_op.dev.shape
    if b_op.dev.shape != (n,):
        raise ValueError(f"bias: expected shape ({n},) (x has {n} columns); got {b_op.dev.shape}")
    if half in HALF_FLOATS:
        y_op = out16(out, x_op, (m, n), stream)
        check_no_overlap(y_op, (x_op, b_op))
        xd, bd, yd = (op.dev.view(HALF_STORAGE[half]) for op in (x_op, b_op, y_op))
    else:
        y_op = prepare_out(out, x_op, (m, n), x_op.dev.dtype, stream, inputs=(b_op,))
        xd, bd, yd = x_op.dev, b_op.dev, y_op.dev
    if m and n:
        plan.run(Call(xd, bd, yd, (m, n), stream))
    return finish16(y_op, x_op, stream) if half in HALF_FLOATS else finish_result(y_op, stream)
