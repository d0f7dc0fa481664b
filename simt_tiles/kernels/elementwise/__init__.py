"""Elementwise kernels: vector_add (two rungs) and bias_relu (2-D tiles, broadcast bias).

==============================  =============================================
``k01_grid_stride``             vector_add: a fixed grid strides over any length
``k02_multi_element``           vector_add: several elements per thread, loads first
``bias_relu``                   y = max(x + bias, 0) in masked 2-D tiles
==============================  =============================================

Check → choose → launch: the functions below check the arguments and prepare ``out``;
:mod:`.dispatch` chooses (one plan) and the plan's rung launches.
"""

from __future__ import annotations

from ...interop import as_stream, device_operand, finish_result, prepare_out
from ...launch import planned
from ...registry import Family
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
    memory: ValueError naming ``out`` (compute in place through a temporary)."""
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


@planned
def bias_relu(x, bias, *, out=None, config=None, stream=None):
    """y = max(x + bias, 0) for 2-D x (M, N) and 1-D bias (N,), float32/float64, NaN kept.

    ``out`` (optional, shape and dtype of ``x``) must not overlap ``x`` or ``bias`` in
    memory: ValueError naming ``out``."""
    plan = dispatch.bias_relu_plan(config)
    stream = as_stream(stream, x)
    x_op = device_operand(x, "x", ndim=2, stream=stream)
    b_op = device_operand(bias, "bias", ndim=1, stream=stream)
    m, n = x_op.dev.shape
    if b_op.dev.dtype != x_op.dev.dtype:
        raise TypeError(f"bias: expected dtype {x_op.dev.dtype} (the dtype of x); got {b_op.dev.dtype}")
    if b_op.dev.shape != (n,):
        raise ValueError(f"bias: expected shape ({n},) (x has {n} columns); got {b_op.dev.shape}")
    y_op = prepare_out(out, x_op, (m, n), x_op.dev.dtype, stream, inputs=(b_op,))
    if m and n:
        plan.run(Call(x_op.dev, b_op.dev, y_op.dev, (m, n), stream))
    return finish_result(y_op, stream)
