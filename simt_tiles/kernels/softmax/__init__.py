"""The softmax ladder: numerically stable softmax and log_softmax along any axis (scipy semantics).

=====================  ====================================================
``k01_smem_tree``      block per row; max, sum via shared-memory trees
``k02_warp_shuffle``   reductions in registers with warp shuffles
``k03_online``         one pass for (max, sum) together, one to write
``k04_register_row``   the row held in registers: one read, one write;
                       short rows several to a warp
``k05_split_row``      long rows: registers plus shared memory, two per SM
``k06_split_blocks``   a row across blocks: partial pairs, then finish
``k07_strided_axis``   an axis that is not the last, read in place
``k08_ticket_queue``    a row across blocks in one launch: a ticket queue
                       orders them, so writers wait only for running blocks
=====================  ====================================================

dtypes: float32 and float64 on every rung; float16 and bfloat16 on k04–k09 (every rung ``variant=None``
chooses): read 16-bit, every max, exp and sum in float32, each output rounded once to the input's dtype
(to nearest even) — torch's rule; bfloat16 travels as its ``uint16`` bits (``_common.make_io``).

``backward.py`` is the gradient of both (:func:`softmax_backward`, the autograd backward of
:mod:`simt_tiles.torch`), outside the forward ladder.

Check → choose → launch: the functions below check the arguments and prepare ``out``;
:mod:`.dispatch` chooses (one :class:`~.dispatch.Plan`) and launches.
"""

from __future__ import annotations

import math
import numbers

from ...interop import (HALF_FLOATS, as_stream, check_no_overlap, device_operand, dtype_name, finish16, finish_result,
                        operand16, out16, prepare_out)
from ...launch import planned
from ...registry import Family
from ...runtime import HALF_STORAGE
from . import _cases
from . import dispatch, reference
from .backward import softmax_backward
from .dispatch import RUNGS

SOFTMAX_VARIANTS: tuple[str, ...] = tuple(RUNGS)
#: the fewest bytes moved (one read, one write) for rows that fit its registers; the others are
#: chosen by :func:`dispatch.plan` (its docstring has the rules)
BEST_VARIANT = "k04_register_row"
LONG_ROW_VARIANTS = ("k05_split_row", "k06_split_blocks", "k08_ticket_queue")
#: the family's registration (:mod:`simt_tiles.registry`)
FAMILY = Family("softmax", RUNGS, reference, (), _cases.softmax_demo, _cases.SOFTMAX_ALIASING, _cases.SOFTMAX_HAZARDS)

__all__ = ["softmax", "log_softmax", "softmax_backward", "SOFTMAX_VARIANTS", "RUNGS", "BEST_VARIANT"]


@planned
def softmax(x, *, axis=-1, out=None, variant=None, config=None, stream=None):
    """``scipy.special.softmax(x, axis=axis)`` for a float32, float64, float16 or bfloat16 array of one or more
    dimensions (0-d: ValueError), on the GPU.

    x
        16-bit inputs (PyTorch ``float16``/``bfloat16`` CUDA tensors, CuPy and Numba ``float16``, NumPy
        ``float16`` or ``ml_dtypes.bfloat16``) are read as float32, computed in float32 and the result
        rounded to their dtype (to nearest even): ``torch.softmax``'s rule.
    axis
        An int (negative counts from the end), a tuple of adjacent axes, or None (the whole
        array, as scipy's default; here the default is the last axis).
    out
        Optional array of ``x``'s shape and dtype (TypeError otherwise); it must not overlap ``x``
        on the device (no in-place softmax; ValueError naming ``out``; a NumPy ``x`` is copied, so a
        NumPy ``out`` may be ``x``).
    variant
        None (the rules in ``softmax/dispatch.py`` choose a rung per shape) or a name from
        :data:`SOFTMAX_VARIANTS` (that rung, or a ValueError where it cannot take the axis or dtype).
    config
        A preset name, or a rung's config object.  With ``variant=None``, a lesson rung's config object
        names its rung; a config of one of the rungs the rules choose between (k04, k05, k06, k07, k08)
        is used when the rules pick that rung for the shape and otherwise does not apply — name the
        rung too (``variant=``) to run it whatever the shape.

    Inputs and results follow the same interop rules as :func:`simt_tiles.matmul`.
    """
    return _run(x, axis, out, variant, config, stream, log=False)


@planned
def log_softmax(x, *, axis=-1, out=None, variant=None, config=None, stream=None):
    """``scipy.special.log_softmax(x, axis=axis)``: as :func:`softmax`, with scipy's special
    values (a row holding +inf gives −inf and NaN at the +inf, a row of −inf NaN)."""
    return _run(x, axis, out, variant, config, stream, log=True)


#: the dtypes softmax and log_softmax take, as their errors name them
ACCEPTED = "float32, float64, float16 or bfloat16"


def _run(x, axis, out, variant, config, stream, *, log):
    stream = as_stream(stream, x)
    half = dtype_name(x)
    if half in HALF_FLOATS:  # the uint16 bits, viewed as the kernels take them (bfloat16: the bits)
        x_op = operand16(x, "x", stream, ndim=None)
        shape = tuple(x_op.dev.shape)
        shape3 = view3(shape, axis)
        out_op = out16(out, x_op, shape, stream)
        check_no_overlap(out_op, (x_op,))
        xd, od = x_op.dev.view(HALF_STORAGE[half]), out_op.dev.view(HALF_STORAGE[half])
    else:
        x_op = device_operand(x, "x", ndim=None, stream=stream, accepted=ACCEPTED)
        shape = tuple(x_op.dev.shape)
        shape3 = view3(shape, axis)
        out_op = prepare_out(out, x_op, shape, x_op.dev.dtype, stream)
        xd, od = x_op.dev, out_op.dev
    if math.prod(shape):
        p = dispatch.plan(shape3, xd.dtype, log=log, variant=variant, config=config)
        p.run(dispatch.Call(xd, od, stream))
    return finish16(out_op, x_op, stream) if half in HALF_FLOATS else finish_result(out_op, stream)


def view3(shape: tuple, axis) -> tuple:
    """``(outer, n, inner)``: ``shape`` around the softmax axis (or adjacent axes, or all)."""
    nd = len(shape)
    if axis is None:
        return (1, math.prod(shape), 1)
    axes = axis if isinstance(axis, tuple) else (axis,)
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral):
            raise TypeError(f"axis: expected None, an int or a tuple of ints; got {axis!r}")
        if not -nd <= a < nd:
            raise ValueError(f"axis: {a} is out of bounds for an array of {nd} dimensions (shape {shape})")
    norm = sorted(int(a) % nd for a in axes)
    if not norm or len(set(norm)) != len(norm) or norm[-1] - norm[0] != len(norm) - 1:
        raise ValueError(f"axis: expected one axis or a tuple of adjacent, distinct axes; got {axis!r}")
    lo, hi = norm[0], norm[-1] + 1
    return (math.prod(shape[:lo]), math.prod(shape[lo:hi]), math.prod(shape[hi:]))
