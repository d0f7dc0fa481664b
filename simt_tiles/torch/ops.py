"""The ``torch.library`` registrations: one custom op per public function, its fake, its autograd.

Each op ``torch.ops.simt_tiles.NAME`` is registered through :class:`torch.library.Library` as
:func:`torch.library.custom_op` would (the schema inferred from the annotations; functional: the
result is a new tensor) but without its per-call Python wrapper, with a fake implementation that checks the arguments and
gives the result's shape, dtype and device (what ``torch.compile`` and ``torch.export`` trace
with), and a backward built from the ops themselves, so gradients run this project's kernels:

===================  =========================================================================
op                   backward
===================  =========================================================================
matmul               dA = dC·Bᵀ, dB = Aᵀ·dC (two matmuls)
softmax              ``softmax_backward`` (kernels/softmax/backward.py): y·(dy − Σ y·dy)
log_softmax          ``softmax_backward(log=True)``: dy − exp(y)·Σ dy
bias_relu            dx = dy where y > 0 (a torch ``where``), dbias = reduce(dx, "sum", axis 0)
vector_add           da = db = dc
reduce               sum / mean: dy broadcast back over the reduced axes (torch ``expand``)
correlate2d          image: convolve2d of dy with the filter on the extended grid, folded back by
convolve2d           the mode's index map (torch ``index_add``); filter: the valid correlation of the
                     extended image with dy (conv2d_nchw on one channel: every value of dy counted,
                     where correlate2d would skip those of |dy| <= 2**-52)
correlate1d          correlate2d's, with the 1 × K (axis 1) or K × 1 (axis 0) filter (an N-D image:
                     its axis moved last, the other axes flattened into rows, along axis 1); the
                     image's, every tap counted as the forward counts them (conv2d_nchw)
correlate_separable  correlate2d's with the outer product W = wy·wxᵀ (the image's every tap counted);
                     then d wy = dW·wx, d wx = dWᵀ·wy
correlate            correlate2d's on every axis of a 1-D, 2-D or 3-D image (convolve of dy on the
convolve             extended grid folded back axis by axis; the extended image's valid correlation with dy)
conv2d_nchw          x: conv2d_nchw of dy with the flipped, transposed filter; w: conv2d_nchw with
                     the batch as channels (x and dy transposed); bias: reduce over N, H, W
===================  =========================================================================

Where a tensor lives
    CUDA tensors go to the kernels as they are (zero-copy through ``__cuda_array_interface__``,
    :mod:`simt_tiles.interop`), on torch's current stream; results are new tensors from torch's
    allocator.  CPU tensors run the same kernels in Numba's CUDA simulator when it was chosen
    (``NUMBA_ENABLE_CUDASIM=1`` before Numba is imported): slow, but the real kernels.  Without
    the simulator a CPU tensor raises ``ValueError`` naming the argument, in eager mode and
    while ``torch.compile`` traces (the fake implementations run the same checks).

Transposed operands
    ``MATMUL_TAKES_TRANSPOSED`` is True: ``simt_tiles.matmul`` reads the transpose of a C-contiguous
    tensor in place (issue 32), so the matmul backward and :class:`simt_tiles.torch.nn.Linear` pass
    views; set to False, :func:`transposed` makes contiguous copies instead.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch import Tensor

import simt_tiles as st
from simt_tiles.mma import round_to_odd32
from simt_tiles.kernels.softmax.backward import softmax_backward as _softmax_backward_kernel

__all__ = ["matmul", "softmax", "log_softmax", "softmax_backward", "bias_relu", "vector_add", "reduce",
           "correlate2d", "convolve2d", "correlate1d", "correlate_separable", "conv2d_nchw", "correlate", "convolve",
           "transposed", "MATMUL_TAKES_TRANSPOSED", "OPS"]

#: simt_tiles.matmul takes ``w.t()`` of a C-contiguous ``w`` in place (issue 32): the backward and Linear pass views
MATMUL_TAKES_TRANSPOSED = True

_FLOATS = (torch.float32, torch.float64)
#: what softmax, log_softmax, bias_relu and reduce take besides (read 16-bit, rounded once to the input's dtype)
_HALF = (torch.float16, torch.bfloat16)
_FLOATS16 = _FLOATS + _HALF
_MODES = ("reflect", "constant", "nearest", "mirror", "wrap")


def transposed(x: Tensor) -> Tensor:
    """``x.t()`` as the matmul takes it: a view once it reads transposed operands, a copy until then."""
    return x.t() if MATMUL_TAKES_TRANSPOSED else x.t().contiguous()


# ---------------------------------------------------------------------------
# Checks shared by the real and the fake implementations (errors name the argument)
# ---------------------------------------------------------------------------


@functools.cache
def _simulator() -> bool:
    return bool(st.SIMULATOR)


def _check(name: str, t, ndim: int | None = None, *, like: Tensor | None = None, like_name: str = "",
           half: bool = False) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor; got {type(t).__module__}.{type(t).__qualname__}")
    if t.dtype not in _FLOATS and not (half and t.dtype in _HALF):
        accepted = "torch.float32, torch.float64, torch.float16 or torch.bfloat16" if half else "torch.float32 or torch.float64"
        raise TypeError(f"{name}: expected dtype {accepted}; got {t.dtype}")
    if like is not None and t.dtype != like.dtype:
        raise TypeError(f"{name}: expected dtype {like.dtype} (the dtype of {like_name}); got {t.dtype}")
    if like is not None and t.device != like.device:
        raise ValueError(f"{name}: expected a tensor on {like.device} (the device of {like_name}); got {t.device}")
    kind = t.device.type
    if kind == "cpu" and not _simulator():
        raise ValueError(
            f"{name}: expected a CUDA tensor; got a tensor on cpu (simt_tiles runs CPU tensors only in "
            "Numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1 set before Numba is imported; else move it "
            "with .cuda())")
    if kind not in ("cuda", "cpu", "meta"):
        raise ValueError(f"{name}: expected a CUDA tensor; got a tensor on {t.device}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D tensor; got {t.dim()}-D with shape {tuple(t.shape)}")


def _sim_cpu(t: Tensor) -> bool:
    """A CPU tensor the simulator runs: the fast guards' other device (``t.is_cuda`` is read first; a guard that
    fails hands the arguments to the full check, which names what is wrong)."""
    return t.is_cpu and _simulator()


def _call(fn, *tensors, views: bool = False, **kw) -> Tensor:
    """``fn`` (a public simt_tiles function) on tensors: CUDA ones in place (made C-contiguous
    unless ``views``), CPU ones through NumPy into the simulator and back.  A CUDA tensor that requires grad
    is detached (torch gives such a tensor no ``__cuda_array_interface__``); any other goes as it is (a
    detached alias would read the same memory with the same signature: ``detach`` costs ~0.3 µs a tensor)."""
    if tensors[0].is_cuda:
        if views:
            return fn(*[t.detach() if t.requires_grad else t for t in tensors], **kw)
        return fn(*[(t.detach() if t.requires_grad else t).contiguous() for t in tensors], **kw)
    if tensors[0].dtype == torch.bfloat16:  # NumPy has no bfloat16: the float64 kernels on its exact values, the
        # result rounded once (float32 rounded to odd, then torch's nearest even); float16 runs the 16-bit kernels
        wide = _call(fn, *(t.double() for t in tensors), views=views, **kw)
        return torch.from_numpy(round_to_odd32(wide.numpy())).to(torch.bfloat16)
    out = fn(*(t.detach().numpy() for t in tensors), **kw)
    return torch.from_numpy(np.array(out, copy=True))


# ---------------------------------------------------------------------------
# Registration: torch.library's Library directly (custom_op's Python layer costs more per call)
# ---------------------------------------------------------------------------

_LIB = torch.library.Library("simt_tiles", "DEF")


def _custom_op(fn):
    """``torch.ops.simt_tiles.<fn.__name__>.default``: the schema inferred from ``fn``'s annotations
    (functional: no argument is mutated), ``fn`` its implementation for every backend.  What
    ``torch.library.custom_op`` registers, without its Python wrapper around each call (on the
    H200: 10.6 µs per call of an op whose kernel is ``empty_like`` against 15.8;
    ``benchmarks/results/torch_h200.md``)."""
    name = fn.__name__
    _LIB.define(name + torch.library.infer_schema(fn, mutates_args=()))
    _LIB.impl(name, fn, "CompositeExplicitAutograd")
    return getattr(torch.ops.simt_tiles, name).default


def _fake(op):
    """A decorator registering ``op``'s fake implementation (shapes for tracing; the same checks)."""
    def register(fake):
        torch.library.register_fake(op, fake, lib=_LIB)
        return fake
    return register


try:  # what torch.library.register_autograd registers, built from its own pieces (see _autograd)
    from torch._library.autograd import Info as _Info, make_autograd_impl as _make_autograd_impl

    _AFTER_AUTOGRAD = torch._C._after_autograd_keyset
    _BelowAutograd = torch._C._AutoDispatchBelowAutograd
except (ImportError, AttributeError):  # pragma: no cover - another torch: register_autograd as it is
    _make_autograd_impl = None


def _autograd(op, backward, setup_context) -> None:
    """``op``'s backward formula and what its forward saves: :func:`torch.library.register_autograd`'s kernel
    for the Autograd key, in front of it a leaner one for calls that record no graph (grad mode off, or no
    input requiring grad): the same redispatch below autograd that torch's ``forward_no_grad`` makes, without
    its per-call ``Metadata`` object and two Python frames (the probe: ~1 µs of the layer's ~2.6).  A call that
    records a graph (or has keyword-only arguments, which no op here has) goes to torch's kernel unchanged."""
    if _make_autograd_impl is None:
        torch.library.register_autograd(op, backward, setup_context=setup_context, lib=_LIB)
        return
    try:
        full = _make_autograd_impl(op, _Info(backward, setup_context))
    except (TypeError, AttributeError):  # pragma: no cover - torch's private pieces changed shape
        torch.library.register_autograd(op, backward, setup_context=setup_context, lib=_LIB)
        return
    redispatch = op._handle.redispatch_boxed
    grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad

    def autograd_kernel(keyset, *args, **kwargs):
        if kwargs or (grad_enabled() and any_requires_grad(*args)):
            return full(keyset, *args, **kwargs)
        with _BelowAutograd():
            return redispatch(keyset & _AFTER_AUTOGRAD, *args)

    _LIB.impl(op._opname, autograd_kernel, "Autograd", with_keyset=True)


def _filled(inputs: tuple, defaults: tuple) -> tuple:
    """The op's arguments with the defaults of those after the first left out filled in."""
    return (*inputs, *defaults[len(inputs) - 1:])


def _axis_index(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis: {axis} is out of bounds for a tensor of {ndim} dimensions")
    return axis % ndim


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------


def _check_matmul(a, b):
    _check("a", a, 2)
    _check("b", b, 2, like=a, like_name="a")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b: expected shape ({a.shape[1]}, N) since a has shape {tuple(a.shape)} "
                         f"(inner dimensions must match); got {tuple(b.shape)}")


@_custom_op
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """C = A @ B (2-D, float32/float64): :func:`simt_tiles.matmul`."""
    # the fast guard: every condition of _check_matmul (the dispatcher has made both tensors); else the full
    # check, which raises naming the argument (or passes: a CPU tensor in the simulator)
    if not ((a.is_cuda or _sim_cpu(a)) and (b.is_cuda or _sim_cpu(b)) and a.dtype in _FLOATS and b.dtype == a.dtype
            and a.dim() == 2 and b.dim() == 2 and a.get_device() == b.get_device() and a.shape[1] == b.shape[0]):
        _check_matmul(a, b)
    return _call(st.matmul, a, b, views=MATMUL_TAKES_TRANSPOSED)


@_fake(matmul)
def _(a, b):
    _check_matmul(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, dc):
    a, b = ctx.saved_tensors
    da = matmul(dc, transposed(b)) if ctx.needs_input_grad[0] else None
    db = matmul(transposed(a), dc) if ctx.needs_input_grad[1] else None
    return da, db


_autograd(matmul, _matmul_backward, _matmul_setup)


# ---------------------------------------------------------------------------
# softmax, log_softmax and their backward
# ---------------------------------------------------------------------------


def _check_softmax(x, axis):
    _check("x", x, half=True)
    if x.dim() < 1:
        raise ValueError("x: expected a tensor of at least 1 dimension; got 0-D")
    _axis_index(axis, x.dim())


@_custom_op
def softmax_backward(y: Tensor, dy: Tensor, axis: int, log: bool) -> Tensor:
    """The gradient of softmax (``log`` False) or log_softmax from their output ``y``."""
    if not ((y.is_cuda or _sim_cpu(y)) and (dy.is_cuda or _sim_cpu(dy)) and y.dtype in _FLOATS
            and dy.dtype == y.dtype and dy.get_device() == y.get_device()):
        _check("y", y)
        _check("dy", dy, like=y, like_name="y")
    return _call(_softmax_backward_kernel, y, dy, axis=axis, log=log)


@_fake(softmax_backward)
def _(y, dy, axis, log):
    _check("y", y)
    _check("dy", dy, like=y, like_name="y")
    if dy.shape != y.shape:
        raise ValueError(f"dy: expected shape {tuple(y.shape)} (the shape of y); got {tuple(dy.shape)}")
    return torch.empty_like(y, memory_format=torch.contiguous_format)


@_custom_op
def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """:func:`simt_tiles.softmax` along one axis."""
    n = x.dim()
    if not ((x.is_cuda or _sim_cpu(x)) and x.dtype in _FLOATS16 and -n <= axis < n):  # (then n >= 1)
        _check_softmax(x, axis)
    return _call(st.softmax, x, axis=axis)


@_custom_op
def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """:func:`simt_tiles.log_softmax` along one axis."""
    n = x.dim()
    if not ((x.is_cuda or _sim_cpu(x)) and x.dtype in _FLOATS16 and -n <= axis < n):
        _check_softmax(x, axis)
    return _call(st.log_softmax, x, axis=axis)


def _softmax_fake(x, axis=-1):
    _check_softmax(x, axis)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _softmax_setup(ctx, inputs, output):
    ctx.axis = _filled(inputs, (-1,))[1]
    ctx.save_for_backward(output)


def _backward16(y, dy, axis, log):
    """The gradient of a 16-bit softmax: the float32/float64 kernel on float32 copies, rounded to ``y``'s dtype
    (torch's half backward also computes in float32); float32/float64 as they are."""
    if y.dtype in _HALF:
        return softmax_backward(y.float(), dy.float(), axis, log).to(y.dtype)
    return softmax_backward(y, dy, axis, log)


def _softmax_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return _backward16(y, dy, ctx.axis, False), None


def _log_softmax_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return _backward16(y, dy, ctx.axis, True), None


def _softmax_backward_setup(ctx, inputs, output):
    y, dy, ctx.axis, ctx.log = inputs
    ctx.save_for_backward(y, dy)


def _softmax_backward_backward(ctx, g):
    """The gradient of ``softmax_backward`` itself (softmax's second derivative), in torch ops: softmax's
    dx = y·(dy − Σy·dy) gives dy's gradient y·(g − Σg·y) and y's g·(dy − Σy·dy) − (Σg·y)·dy; log_softmax's
    dx = dy − e^y·Σdy gives g − Σg·e^y and −g·e^y·Σdy (without it, torch took the second derivative as 0)."""
    y, dy = ctx.saved_tensors
    a = ctx.axis
    if ctx.log:
        e = y.exp()
        return -g * e * dy.sum(a, keepdim=True), g - (g * e).sum(a, keepdim=True), None, None
    gy = (g * y).sum(a, keepdim=True)
    return g * (dy - (y * dy).sum(a, keepdim=True)) - gy * dy, y * (g - gy), None, None


_fake(softmax)(_softmax_fake)
_fake(log_softmax)(_softmax_fake)
_autograd(softmax, _softmax_backward, _softmax_setup)
_autograd(log_softmax, _log_softmax_backward, _softmax_setup)
_autograd(softmax_backward, _softmax_backward_backward, _softmax_backward_setup)


# ---------------------------------------------------------------------------
# bias_relu, vector_add
# ---------------------------------------------------------------------------


def _check_bias_relu(x, bias):
    _check("x", x, 2, half=True)
    _check("bias", bias, 1, like=x, like_name="x", half=True)
    if bias.shape[0] != x.shape[1]:
        raise ValueError(f"bias: expected shape ({x.shape[1]},) (x has {x.shape[1]} columns); "
                         f"got {tuple(bias.shape)}")


@_custom_op
def bias_relu(x: Tensor, bias: Tensor) -> Tensor:
    """y = max(x + bias, 0) for x (M, N), bias (N,), float32/float64/float16/bfloat16: :func:`simt_tiles.bias_relu`."""
    if not ((x.is_cuda or _sim_cpu(x)) and (bias.is_cuda or _sim_cpu(bias)) and x.dtype in _FLOATS16
            and bias.dtype == x.dtype and x.dim() == 2 and bias.dim() == 1 and bias.get_device() == x.get_device()
            and bias.shape[0] == x.shape[1]):
        _check_bias_relu(x, bias)
    return _call(st.bias_relu, x, bias)


@_fake(bias_relu)
def _(x, bias):
    _check_bias_relu(x, bias)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _bias_relu_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _bias_relu_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    dx = torch.where(y > 0, dy, torch.zeros((), dtype=dy.dtype, device=dy.device))
    if not ctx.needs_input_grad[1]:
        return dx, None
    return dx, reduce(dx, "sum", [0], False)  # (16-bit: summed in float64, rounded once to dx's dtype)


_autograd(bias_relu, _bias_relu_backward, _bias_relu_setup)


def _check_vector_add(a, b):
    _check("a", a, 1)
    _check("b", b, 1, like=a, like_name="a")
    if b.shape != a.shape:
        raise ValueError(f"b: expected shape {tuple(a.shape)} (the shape of a); got {tuple(b.shape)}")


@_custom_op
def vector_add(a: Tensor, b: Tensor) -> Tensor:
    """c = a + b, 1-D: :func:`simt_tiles.vector_add`."""
    if not ((a.is_cuda or _sim_cpu(a)) and (b.is_cuda or _sim_cpu(b)) and a.dtype in _FLOATS and b.dtype == a.dtype
            and a.dim() == 1 and b.dim() == 1 and b.get_device() == a.get_device() and b.shape[0] == a.shape[0]):
        _check_vector_add(a, b)
    return _call(st.vector_add, a, b)


@_fake(vector_add)
def _(a, b):
    _check_vector_add(a, b)
    return torch.empty_like(a, memory_format=torch.contiguous_format)


def _vector_add_backward(ctx, dc):
    return dc, dc


_autograd(vector_add, _vector_add_backward, lambda ctx, inputs, output: None)


# ---------------------------------------------------------------------------
# reduce (sum, mean)
# ---------------------------------------------------------------------------


def _reduce_axes(x, op, axis) -> tuple:
    _check("x", x, half=True)
    if op not in ("sum", "mean"):
        raise ValueError(f"op: expected 'sum' or 'mean' (the differentiable reductions; "
                         f"simt_tiles.reduce has max/min/argmax/argmin); got {op!r}")
    if axis is None:
        return tuple(range(x.dim()))
    axes = sorted(_axis_index(a, x.dim()) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axis: expected distinct axes; got {list(axis)}")
    return tuple(axes)


#: (x's dimensions, the axis argument as a tuple or None) → the sorted axes :func:`_reduce_axes` gave (valid)
_AXES: dict = {}


@_custom_op
def reduce(x: Tensor, op: str = "sum", axis: list[int] | None = None, keepdims: bool = False) -> Tensor:
    """``numpy.sum``/``numpy.mean`` of ``x`` over ``axis`` (None: all), float32/float64/float16/bfloat16 (16-bit:
    summed in float64, the result rounded once to x's dtype): :func:`simt_tiles.reduce`."""
    axes = None
    if (x.is_cuda or _sim_cpu(x)) and x.dtype in _FLOATS16 and (op == "sum" or op == "mean"):
        key = (x.dim(), None if axis is None else tuple(axis))
        axes = _AXES.get(key)
    if axes is None:
        axes = _reduce_axes(x, op, axis)  # (raises naming the argument)
        if len(_AXES) < 1024:
            _AXES[(x.dim(), None if axis is None else tuple(axis))] = axes
    return _call(st.reduce, x, op=op, axis=axes, keepdims=keepdims)


@_fake(reduce)
def _(x, op="sum", axis=None, keepdims=False):
    axes = _reduce_axes(x, op, axis)
    shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keepdims else \
        [d for a, d in enumerate(x.shape) if a not in axes]
    return x.new_empty(shape)


def _reduce_setup(ctx, inputs, output):
    x, op, axis, keepdims = _filled(inputs, ("sum", None, False))
    ctx.axes = _reduce_axes(x, op, axis)
    ctx.mean = op == "mean"
    ctx.shape = tuple(x.shape)


def _reduce_backward(ctx, dy):
    kept = tuple(1 if a in ctx.axes else d for a, d in enumerate(ctx.shape))
    g = dy.reshape(kept)
    if ctx.mean:
        g = g / math.prod(ctx.shape[a] for a in ctx.axes)
    return g.expand(ctx.shape), None, None, None


_autograd(reduce, _reduce_backward, _reduce_setup)


# ---------------------------------------------------------------------------
# correlate2d, convolve2d
# ---------------------------------------------------------------------------


def _filter_fits(image, weights, mode, n: int) -> bool:
    """The filters' fast guard: every condition of :func:`_check_filter` (``n`` 2) or :func:`_check_filter_nd`
    (``n`` the image's dimensions), read from cheap tensor attributes; False sends the call to the full check."""
    return ((image.is_cuda or _sim_cpu(image)) and (weights.is_cuda or _sim_cpu(weights)) and image.dtype in _FLOATS
            and weights.dtype == image.dtype and 1 <= n <= 3 and image.dim() == n and weights.dim() == n
            and weights.get_device() == image.get_device() and weights.numel() > 0 and mode in _MODES)


def _check_filter(image, weights, mode):
    _check("image", image, 2)
    _check("weights", weights, 2, like=image, like_name="image")
    if 0 in weights.shape:
        raise ValueError(f"weights: expected a non-empty 2-D array (at least 1x1); got shape {tuple(weights.shape)}")
    if mode not in _MODES:
        raise ValueError(f"mode: expected one of {_MODES}; got {mode!r}")


@_custom_op
def correlate2d(image: Tensor, weights: Tensor, mode: str = "reflect", cval: float = 0.0) -> Tensor:
    """``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval)``: :func:`simt_tiles.correlate2d`."""
    if not _filter_fits(image, weights, mode, 2):
        _check_filter(image, weights, mode)
    return _call(st.correlate2d, image, weights, mode=mode, cval=cval)


@_custom_op
def convolve2d(image: Tensor, weights: Tensor, mode: str = "reflect", cval: float = 0.0) -> Tensor:
    """``scipy.ndimage.convolve(image, weights, mode=mode, cval=cval)``: :func:`simt_tiles.convolve2d`."""
    if not _filter_fits(image, weights, mode, 2):
        _check_filter(image, weights, mode)
    return _call(st.convolve2d, image, weights, mode=mode, cval=cval)


def _filter_fake(image, weights, mode="reflect", cval=0.0):
    _check_filter(image, weights, mode)
    return torch.empty_like(image, memory_format=torch.contiguous_format)


_fake(correlate2d)(_filter_fake)
_fake(convolve2d)(_filter_fake)

#: scipy.ndimage's modes as numpy.pad's (the index map of the extended grid)
_NUMPY_PAD = {"reflect": "symmetric", "mirror": "reflect", "nearest": "edge", "wrap": "wrap"}


def _index_map(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Row (or column) of the input each row of the extended grid reads; −1 outside (mode constant)."""
    if mode == "constant":
        return np.pad(np.arange(n), (before, after), constant_values=-1)
    if mode == "mirror" and n == 1:
        return np.zeros(n + before + after, dtype=np.int64)  # scipy: a 1-wide mirror repeats the value
    return np.pad(np.arange(n), (before, after), mode=_NUMPY_PAD[mode])


def _extend(x: Tensor, rows: np.ndarray, cols: np.ndarray, cval: float) -> Tensor:
    """The image on the extended grid: x read through the index maps (cval where they are −1)."""
    r = torch.as_tensor(np.maximum(rows, 0), device=x.device)
    c = torch.as_tensor(np.maximum(cols, 0), device=x.device)
    xe = x.index_select(0, r).index_select(1, c)
    if (rows < 0).any() or (cols < 0).any():
        inside = torch.as_tensor((rows >= 0)[:, None] & (cols >= 0)[None, :], device=x.device)
        xe = torch.where(inside, xe, torch.full((), cval, dtype=x.dtype, device=x.device))
    return xe


def _fold(ge: Tensor, rows: np.ndarray, cols: np.ndarray, shape) -> Tensor:
    """The adjoint of :func:`_extend`: each extended cell's gradient added to the input cell it read."""
    keep_r, keep_c = np.nonzero(rows >= 0)[0], np.nonzero(cols >= 0)[0]
    dev = ge.device
    ge = ge.index_select(0, torch.as_tensor(keep_r, device=dev)).index_select(1, torch.as_tensor(keep_c, device=dev))
    g = ge.new_zeros((shape[0], ge.shape[1])).index_add(0, torch.as_tensor(rows[keep_r], device=dev), ge)
    return g.new_zeros(tuple(shape)).index_add(1, torch.as_tensor(cols[keep_c], device=dev), g)


def _valid_correlation(x: Tensor, f: Tensor) -> Tensor:
    """``Σ_t f[t]·x[i + t]`` at every ``i`` where ``f`` fits in ``x`` (1-D or 2-D), every tap counted (0·NaN = NaN,
    as torch's conv2d): :func:`conv2d_nchw` on one channel.  Not the ndimage filters: they skip the taps of
    ``|w| <= 2**-52``, as scipy does, so with ``dy`` as the filter a gradient of tiny values came back zero."""
    lead = (1, 1) + (1,) * (2 - x.dim())
    out = conv2d_nchw(x.reshape(lead + tuple(x.shape)).contiguous(), f.reshape(lead + tuple(f.shape)).contiguous())
    return out.reshape(tuple(int(n) - int(k) + 1 for n, k in zip(x.shape, f.shape)))


def _filter_grads(ctx, image, dy, weff: Tensor, ca: int, cb: int, need_filter: bool, every_tap: bool = False):
    """(d image, d weff) of ``out = valid_correlation(extend(image), weff)`` with the filter's
    centre at (ca, cb), ``ctx.mode`` / ``ctx.cval`` the extension: the image gradient is the full
    convolution of dy with weff on the extended grid, folded back (``every_tap``: every weight counted, for
    forwards that count them; else those of ``|w| <= 2**-52`` skipped, as the forward skips them); the filter
    gradient (where ``need_filter``) the valid correlation of the extended image with dy, every value of dy
    counted."""
    # the index maps are NumPy constants: symbolic sizes (dynamic shapes) are specialised here
    h, w = (int(n) for n in image.shape)
    kh, kw = (int(n) for n in weff.shape)
    if image.numel() == 0:  # (an empty image: nothing to extend; as _filter_grads_nd)
        return (torch.zeros_like(image) if ctx.needs_input_grad[0] else None,
                torch.zeros_like(weff) if need_filter else None)
    rows = _index_map(h, ca, kh - 1 - ca, ctx.mode)
    cols = _index_map(w, cb, kw - 1 - cb, ctx.mode)
    dimage = dweff = None
    if ctx.needs_input_grad[0]:
        if every_tap:  # the full convolution: dy padded by K − 1, the flipped filter's valid correlation
            ge = _valid_correlation(torch.nn.functional.pad(dy, (kw - 1, kw - 1, kh - 1, kh - 1)), weff.flip(0, 1))
        else:  # dy placed so convolve2d's centre ((K − 1)//2) lines up: rows K//2 before, K − 1 − K//2 after
            dyp = torch.nn.functional.pad(dy, (kw // 2, kw - 1 - kw // 2, kh // 2, kh - 1 - kh // 2))
            ge = convolve2d(dyp, weff, "constant", 0.0)
        if ctx.mode == "constant":
            dimage = ge[ca:ca + h, cb:cb + w]
        else:
            dimage = _fold(ge, rows, cols, (h, w))
    if need_filter:
        dweff = _valid_correlation(_extend(image, rows, cols, ctx.cval), dy)
    return dimage, dweff


def _filter_setup(ctx, inputs, output):
    image, weights, mode, cval = _filled(inputs, (None, "reflect", 0.0))
    ctx.mode, ctx.cval = mode, float(cval)
    ctx.save_for_backward(image, weights)


def _correlate_backward(ctx, dy):
    image, weights = ctx.saved_tensors
    kh, kw = (int(n) for n in weights.shape)
    di, dw = _filter_grads(ctx, image, dy, weights, kh // 2, kw // 2, ctx.needs_input_grad[1])
    return di, dw, None, None


def _convolve_backward(ctx, dy):
    image, weights = ctx.saved_tensors
    kh, kw = (int(n) for n in weights.shape)
    di, dwf = _filter_grads(ctx, image, dy, weights.flip(0, 1), (kh - 1) // 2, (kw - 1) // 2,
                            ctx.needs_input_grad[1])
    return di, (None if dwf is None else dwf.flip(0, 1)), None, None


_autograd(correlate2d, _correlate_backward, _filter_setup)
_autograd(convolve2d, _convolve_backward, _filter_setup)


# ---------------------------------------------------------------------------
# correlate, convolve: scipy.ndimage's n-D filters (1-D, 2-D, 3-D images)
# ---------------------------------------------------------------------------


def _check_filter_nd(image, weights, mode):
    _check("image", image)
    if not 1 <= image.dim() <= 3:
        raise ValueError(f"image: expected a 1-D, 2-D or 3-D tensor; got {image.dim()}-D")
    _check("weights", weights, image.dim(), like=image, like_name="image")
    if 0 in weights.shape:
        raise ValueError(f"weights: expected at least one value on every axis; got shape {tuple(weights.shape)}")
    if mode not in _MODES:
        raise ValueError(f"mode: expected one of {_MODES}; got {mode!r}")


@_custom_op
def correlate(image: Tensor, weights: Tensor, mode: str = "reflect", cval: float = 0.0) -> Tensor:
    """``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval)`` for 1-D, 2-D and 3-D images:
    :func:`simt_tiles.correlate`."""
    if not _filter_fits(image, weights, mode, image.dim()):
        _check_filter_nd(image, weights, mode)
    return _call(st.correlate, image, weights, mode=mode, cval=cval)


@_custom_op
def convolve(image: Tensor, weights: Tensor, mode: str = "reflect", cval: float = 0.0) -> Tensor:
    """``scipy.ndimage.convolve(image, weights, mode=mode, cval=cval)`` for 1-D, 2-D and 3-D images:
    :func:`simt_tiles.convolve`."""
    if not _filter_fits(image, weights, mode, image.dim()):
        _check_filter_nd(image, weights, mode)
    return _call(st.convolve, image, weights, mode=mode, cval=cval)


def _filter_nd_fake(image, weights, mode="reflect", cval=0.0):
    _check_filter_nd(image, weights, mode)
    return torch.empty_like(image, memory_format=torch.contiguous_format)


_fake(correlate)(_filter_nd_fake)
_fake(convolve)(_filter_nd_fake)


def _extend_nd(x: Tensor, maps: list, cval: float) -> Tensor:
    """:func:`_extend` on every axis of an N-D image."""
    xe = x
    for axis, m in enumerate(maps):
        xe = xe.index_select(axis, torch.as_tensor(np.maximum(m, 0), device=x.device))
    if any((m < 0).any() for m in maps):
        inside = np.ones((), bool)
        for axis, m in enumerate(maps):
            inside = inside & (m >= 0).reshape([-1 if k == axis else 1 for k in range(len(maps))])
        xe = torch.where(torch.as_tensor(inside, device=x.device), xe,
                         torch.full((), cval, dtype=x.dtype, device=x.device))
    return xe


def _fold_nd(ge: Tensor, maps: list, shape) -> Tensor:
    """:func:`_fold` on every axis: each extended cell's gradient added to the input cell it read."""
    g = ge
    for axis, m in enumerate(maps):
        keep = np.nonzero(m >= 0)[0]
        g = g.index_select(axis, torch.as_tensor(keep, device=ge.device))
        size = list(g.shape)
        size[axis] = shape[axis]
        g = g.new_zeros(size).index_add(axis, torch.as_tensor(m[keep], device=ge.device), g)
    return g


def _filter_grads_nd(ctx, image, dy, weff: Tensor, anchor, need_filter: bool):
    """:func:`_filter_grads` for 1-D, 2-D and 3-D images (the filter's anchor per axis)."""
    shape = tuple(int(n) for n in image.shape)
    ks = tuple(int(k) for k in weff.shape)
    dimage = dweff = None
    if image.numel() == 0:
        return (torch.zeros_like(image) if ctx.needs_input_grad[0] else None,
                torch.zeros_like(weff) if need_filter else None)
    maps = [_index_map(n, a, k - 1 - a, ctx.mode) for n, a, k in zip(shape, anchor, ks)]
    if ctx.needs_input_grad[0]:
        pads = [p for k in reversed(ks) for p in (k // 2, k - 1 - k // 2)]  # convolve's centre (K − 1)//2 lines up
        ge = convolve(torch.nn.functional.pad(dy, pads), weff, "constant", 0.0)
        if ctx.mode == "constant":
            dimage = ge[tuple(slice(a, a + n) for a, n in zip(anchor, shape))]
        else:
            dimage = _fold_nd(ge, maps, shape)
    if need_filter:
        xe = _extend_nd(image, maps, ctx.cval)
        if len(shape) <= 2:  # the valid correlation with dy as the filter, every tap counted
            dweff = _valid_correlation(xe, dy)
        else:  # a volume: dy as a filter fits no ring (the naive rung, (n+k-1)^3 * n^3 taps): one dot a tap
            dweff = torch.stack([(xe[tuple(slice(j, j + n) for j, n in zip(t, shape))] * dy).sum()
                                 for t in np.ndindex(*ks)]).reshape(ks)
    return dimage, dweff


def _correlate_nd_backward(ctx, dy):
    image, weights = ctx.saved_tensors
    di, dw = _filter_grads_nd(ctx, image, dy, weights, [int(k) // 2 for k in weights.shape], ctx.needs_input_grad[1])
    return di, dw, None, None


def _convolve_nd_backward(ctx, dy):
    image, weights = ctx.saved_tensors
    axes = tuple(range(weights.dim()))
    di, dwf = _filter_grads_nd(ctx, image, dy, weights.flip(axes), [(int(k) - 1) // 2 for k in weights.shape],
                               ctx.needs_input_grad[1])
    return di, (None if dwf is None else dwf.flip(axes)), None, None


_autograd(correlate, _correlate_nd_backward, _filter_setup)
_autograd(convolve, _convolve_nd_backward, _filter_setup)


# ---------------------------------------------------------------------------
# correlate1d, correlate_separable: correlate2d with a 1 × K, K × 1 or outer-product filter
# ---------------------------------------------------------------------------


def _check_taps(name: str, w, image) -> None:
    _check(name, w, 1, like=image, like_name="image")
    if w.shape[0] == 0:
        raise ValueError(f"{name}: expected at least one value; got an empty 1-D tensor")


def _check_filter1d(image, weights, axis, mode):
    _check("image", image)
    if image.dim() < 1:
        raise ValueError("image: expected a tensor of at least 1 dimension; got 0-D")
    _check_taps("weights", weights, image)
    n = image.dim()
    if isinstance(axis, bool) or not -n <= axis < n:
        if n == 2:
            raise ValueError(f"axis: expected -2, -1, 0 or 1 (image is 2-D); got {axis!r}")
        raise ValueError(f"axis: expected an int in [{-n}, {n - 1}] (image is {n}-D); got {axis!r}")
    if mode not in _MODES:
        raise ValueError(f"mode: expected one of {_MODES}; got {mode!r}")


@_custom_op
def correlate1d(image: Tensor, weights: Tensor, axis: int = -1, mode: str = "reflect", cval: float = 0.0) -> Tensor:
    """``scipy.ndimage.correlate1d(image, weights, axis=axis, mode=mode, cval=cval)``: :func:`simt_tiles.correlate1d`."""
    n = image.dim()
    if not ((image.is_cuda or _sim_cpu(image)) and (weights.is_cuda or _sim_cpu(weights)) and image.dtype in _FLOATS
            and weights.dtype == image.dtype and weights.dim() == 1 and weights.get_device() == image.get_device()
            and weights.shape[0] and type(axis) is int and -n <= axis < n and mode in _MODES):  # (then n >= 1)
        _check_filter1d(image, weights, axis, mode)
    return _call(st.correlate1d, image, weights, axis=axis, mode=mode, cval=cval)


@_fake(correlate1d)
def _(image, weights, axis=-1, mode="reflect", cval=0.0):
    _check_filter1d(image, weights, axis, mode)
    return torch.empty_like(image, memory_format=torch.contiguous_format)


def _correlate1d_setup(ctx, inputs, output):
    image, weights, axis, mode, cval = _filled(inputs, (None, -1, "reflect", 0.0))
    ctx.rows, ctx.mode, ctx.cval = axis % 2 == 0, mode, float(cval)  # rows: along axis 0 (a K × 1 filter)
    ctx.axis = axis % image.dim()  # (an N-D image: the axis moved last, see the backward)
    ctx.save_for_backward(image, weights)


def _correlate1d_backward(ctx, dy):
    """correlate2d's gradients with the K × 1 (axis 0) or 1 × K (axis 1) filter, centred at K // 2.
    An image of other than 2 dimensions: its axis moved last and the rest flattened, ``(M, L)``
    along axis 1 (each row an independent line, as the forward's), and the image gradient moved back."""
    image, weights = ctx.saved_tensors
    k = int(weights.shape[0])
    if image.dim() != 2:
        moved = image.movedim(ctx.axis, -1)
        length = int(moved.shape[-1])
        if image.numel() == 0:
            di = torch.zeros_like(image) if ctx.needs_input_grad[0] else None
            dw = torch.zeros_like(weights) if ctx.needs_input_grad[1] else None
            return di, dw, None, None, None
        x2 = moved.reshape(-1, length).contiguous()
        dy2 = dy.movedim(ctx.axis, -1).reshape(-1, length).contiguous()
        di, dw = _filter_grads(ctx, x2, dy2, weights.reshape(1, k), 0, k // 2, ctx.needs_input_grad[1], True)
        if di is not None:
            di = di.reshape(moved.shape).movedim(-1, ctx.axis)
        return di, (None if dw is None else dw.reshape(k)), None, None, None
    weff = weights.reshape((k, 1) if ctx.rows else (1, k))
    di, dw = _filter_grads(ctx, image, dy, weff, k // 2 if ctx.rows else 0, 0 if ctx.rows else k // 2,
                           ctx.needs_input_grad[1], True)  # the forward counts every tap
    return di, (None if dw is None else dw.reshape(k)), None, None, None


_autograd(correlate1d, _correlate1d_backward, _correlate1d_setup)


def _check_separable(image, wy, wx, mode):
    _check("image", image, 2)
    _check_taps("wy", wy, image)
    _check_taps("wx", wx, image)
    if mode not in _MODES:
        raise ValueError(f"mode: expected one of {_MODES}; got {mode!r}")


@_custom_op
def correlate_separable(image: Tensor, wy: Tensor, wx: Tensor, mode: str = "reflect", cval: float = 0.0) -> Tensor:
    """``scipy.ndimage.correlate(image, outer(wy, wx), mode=mode, cval=cval)`` by a column and a row pass:
    :func:`simt_tiles.correlate_separable` (its intermediate rounded to the image's dtype)."""
    if not ((image.is_cuda or _sim_cpu(image)) and (wy.is_cuda or _sim_cpu(wy)) and (wx.is_cuda or _sim_cpu(wx))
            and image.dtype in _FLOATS and wy.dtype == image.dtype and wx.dtype == image.dtype and image.dim() == 2
            and wy.dim() == 1 and wx.dim() == 1 and wy.get_device() == image.get_device()
            and wx.get_device() == image.get_device() and wy.shape[0] and wx.shape[0] and mode in _MODES):
        _check_separable(image, wy, wx, mode)
    return _call(st.correlate_separable, image, wy, wx, mode=mode, cval=cval)


@_fake(correlate_separable)
def _(image, wy, wx, mode="reflect", cval=0.0):
    _check_separable(image, wy, wx, mode)
    return torch.empty_like(image, memory_format=torch.contiguous_format)


def _separable_setup(ctx, inputs, output):
    image, wy, wx, mode, cval = _filled(inputs, (None, None, "reflect", 0.0))
    ctx.mode, ctx.cval = mode, float(cval)
    ctx.save_for_backward(image, wy, wx)


def _separable_backward(ctx, dy):
    """The gradients of the 2-D correlation with the outer product W = wy·wxᵀ (the forward's rounding of its
    intermediate aside): d image as correlate2d's (a full KH × KW convolution, not two passes), and from
    dW: d wy = dW·wx, d wx = dWᵀ·wy."""
    image, wy, wx = ctx.saved_tensors
    kh, kw = int(wy.shape[0]), int(wx.shape[0])
    di, dw = _filter_grads(ctx, image, dy, torch.outer(wy, wx), kh // 2, kw // 2,
                           ctx.needs_input_grad[1] or ctx.needs_input_grad[2], True)
    dwy = dw @ wx if ctx.needs_input_grad[1] else None
    dwx = dw.t() @ wy if ctx.needs_input_grad[2] else None
    return di, dwy, dwx, None, None


_autograd(correlate_separable, _separable_backward, _separable_setup)


# ---------------------------------------------------------------------------
# conv2d_nchw
# ---------------------------------------------------------------------------


def _conv_out_hw(x, w, padding):
    _check("x", x, 4)
    _check("w", w, 4, like=x, like_name="x")
    if isinstance(padding, bool) or not isinstance(padding, (int, torch.SymInt)) or padding < 0:
        raise ValueError(f"padding: expected an int >= 0; got {padding!r}")  # (a SymInt: the backward's K − 1 − p)
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w: expected {x.shape[1]} input channels (w.shape[1] == x.shape[1] = C_in); "
                         f"got w of shape {tuple(w.shape)} for x of shape {tuple(x.shape)}")
    oh = x.shape[2] + 2 * padding - w.shape[2] + 1
    ow = x.shape[3] + 2 * padding - w.shape[3] + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"w: a {w.shape[2]}x{w.shape[3]} filter is larger than the padded input "
                         f"(x's {x.shape[2]}x{x.shape[3]} plus padding={padding} on each side)")
    return oh, ow


def _conv_shapes_fit(xs, ws, padding) -> bool:
    """The fast guard's shape part of :func:`_conv_out_hw`: C_in agrees, the output is at least 1 × 1."""
    return ws[1] == xs[1] and xs[2] + 2 * padding >= ws[2] and xs[3] + 2 * padding >= ws[3]


def _check_bias(bias, w, x):
    if bias is not None:
        _check("bias", bias, 1, like=x, like_name="x")
        if bias.shape[0] != w.shape[0]:
            raise ValueError(f"bias: expected shape ({w.shape[0]},) (C_out = w.shape[0]); got {tuple(bias.shape)}")


@_custom_op
def conv2d_nchw(x: Tensor, w: Tensor, bias: Tensor | None = None, padding: int = 0) -> Tensor:
    """``torch.nn.functional.conv2d(x, w, bias, padding=padding)`` (stride 1): :func:`simt_tiles.conv2d_nchw`."""
    if not ((x.is_cuda or _sim_cpu(x)) and (w.is_cuda or _sim_cpu(w)) and x.dtype in _FLOATS and w.dtype == x.dtype
            and x.dim() == 4 and w.dim() == 4 and w.get_device() == x.get_device() and type(padding) is int
            and padding >= 0 and _conv_shapes_fit(x.shape, w.shape, padding)
            and (bias is None or ((bias.is_cuda or _sim_cpu(bias)) and bias.dtype == x.dtype and bias.dim() == 1
                                  and bias.get_device() == x.get_device() and bias.shape[0] == w.shape[0]))):
        _conv_out_hw(x, w, padding)
        _check_bias(bias, w, x)
    if bias is None:
        return _call(st.conv2d_nchw, x, w, padding=padding)
    return _call(lambda x, w, b: st.conv2d_nchw(x, w, bias=b, padding=padding), x, w, bias)


@_fake(conv2d_nchw)
def _(x, w, bias=None, padding=0):
    oh, ow = _conv_out_hw(x, w, padding)
    _check_bias(bias, w, x)
    return x.new_empty((x.shape[0], w.shape[0], oh, ow))


def _conv_setup(ctx, inputs, output):
    x, w, _, padding = _filled(inputs, (None, None, 0))
    ctx.padding = padding
    ctx.save_for_backward(x, w)


def _conv_backward(ctx, dy):
    x, w = ctx.saved_tensors
    p = ctx.padding
    kh, kw = w.shape[2], w.shape[3]
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        wt = w.flip(2, 3).transpose(0, 1).contiguous()  # (C_in, C_out, KH, KW)
        if kh == kw and p <= kh - 1:
            dx = conv2d_nchw(dy, wt, None, kh - 1 - p)
        else:  # unequal paddings per axis (or a crop): pad dy itself, then a valid convolution
            qh, qw = kh - 1 - p, kw - 1 - p
            dx = conv2d_nchw(torch.nn.functional.pad(dy, (qw, qw, qh, qh)).contiguous(), wt, None, 0)
    if ctx.needs_input_grad[1]:
        # dw[o, c] = Σ_n dy[n, o] ⋆ xp[n, c]: the batch as the channels of a convolution
        xt = x.transpose(0, 1).contiguous()  # (C_in, N, H, W)
        dyt = dy.transpose(0, 1).contiguous()  # (C_out, N, OH, OW): the "filter"
        dw = conv2d_nchw(xt, dyt, None, p).transpose(0, 1)  # (C_in, C_out, KH, KW) -> (C_out, C_in, ...)
    if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
        db = reduce(dy, "sum", [0, 2, 3], False)
    return dx, dw, db, None


_autograd(conv2d_nchw, _conv_backward, _conv_setup)

#: every op, by name (the tests and the benchmark iterate over it)
OPS = {"matmul": matmul, "softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
       "bias_relu": bias_relu, "vector_add": vector_add, "reduce": reduce, "correlate2d": correlate2d,
       "convolve2d": convolve2d, "correlate1d": correlate1d, "correlate_separable": correlate_separable,
       "conv2d_nchw": conv2d_nchw, "correlate": correlate, "convolve": convolve}
