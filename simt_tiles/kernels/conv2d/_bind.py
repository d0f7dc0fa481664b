"""How a conv2d rung takes a call: the call descriptions, and each rung's binding.

The public functions check the arguments, :mod:`.dispatch` chooses the rung and its
config, and the rung launches: ``rung.run(spec, call)`` (:class:`FilterRung`) asks its
binding, ``bind(rung, spec, dtype, call)``, for the compiled kernel and its arguments.
Three calling conventions for 2-D filters here, k10's own in its file, one for the fused
separable kernel:

=========================  ==========================================================
:data:`WEIGHTS_ARGUMENT`   k01–k03: the filter is a device array argument, flipped as
                           a negative-stride view for convolve
:data:`CONSTANT_FILTER`    k04, k05: the filter's values are compiled into the kernel
                           (one compilation per filter); anchors are arguments
:data:`CONSTANT_VECTOR`    k07–k09: values and anchor compiled in; the kernel takes
                           whether image and out start 16-byte aligned
:data:`k10.RUNTIME_WEIGHTS`  k10: a NumPy filter as kernel parameters (its values stay on
                           the host), a device filter as a device array
:data:`SEPARABLE`          k06: two 1-D filters as device arrays
=========================  ==========================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from ..._recording import no_plan
from ...interop import Operand
from ...runtime import Rung
from ...vector import aligned
from ._common import anchors, constant_filter_kernel


@dataclasses.dataclass(frozen=True)
class FilterCall:
    """One 2-D filtering on device arrays (non-empty): what a binding needs."""

    image: Any  # (H, W) device array
    weights: Operand  # (KH, KW): a device array, or NumPy for a rung that compiles the values in
    out: Any  # (H, W) device array
    cval: float
    flipped: bool  # convolve: the filter flipped on both axes, scipy's anchor
    stream: Any
    #: count zero taps too (correlate1d, as scipy's; ``_common.TINY_WEIGHT``)
    all_taps: bool = False

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.image.dtype)

    @property
    def problem(self) -> tuple[int, int]:
        """``(h, w)``: what the rungs' ``geometry`` takes."""
        return tuple(self.image.shape)


@dataclasses.dataclass(frozen=True)
class SeparableCall:
    """One separable filtering: the column filter ``wy`` (KH × 1) and row filter ``wx`` (1 × KW)."""

    image: Any
    wy: Operand
    wx: Operand
    out: Any
    cval: float
    stream: Any

    dtype = FilterCall.dtype
    problem = FilterCall.problem


@dataclasses.dataclass(frozen=True)
class Binding:
    """A calling convention: ``bind(rung, spec, dtype, call) -> (kernel, args)``."""

    name: str
    #: the filter's values are compiled into the kernel: NumPy weights stay on the host
    compiles_filter: bool
    bind: Callable
    #: NumPy weights stay on the host (compiled in, or passed as kernel parameters)
    host_weights: bool = False

    def __call__(self, rung, spec, dtype, call):
        return self.bind(rung, spec, np.dtype(dtype), call)


def host_filter(w_op: Operand, flipped: bool, stream) -> np.ndarray:
    """The filter's values on the host, flipped for convolve (a constant-filter
    rung compiles them in).  Device weights are copied back: a synchronising
    copy of KH·KW values."""
    no_plan("the filter's values are compiled in")  # a plan would keep this filter's kernel
    if w_op.kind == "numpy":
        w = w_op.original
    else:
        w = w_op.dev.copy_to_host(stream=stream)
        if stream:
            stream.synchronize()
    return w[::-1, ::-1] if flipped else w


def _weights_argument(rung, spec, dtype, call: FilterCall):
    w = call.weights.dev
    if isinstance(w, np.ndarray):  # kept on the host for a constant-filter rung, then fell back
        w = cuda.to_device(w, stream=call.stream)
    kh, kw = w.shape
    anchor_h, anchor_w = anchors(kh, kw, flipped=call.flipped)
    kernel = rung.kernel(spec, dtype, all_taps=True) if call.all_taps else rung.kernel(spec, dtype)
    return kernel, (call.image, w[::-1, ::-1] if call.flipped else w, call.out, dtype.type(call.cval),
                    anchor_h, anchor_w)


def _constant_filter(rung, spec, dtype, call: FilterCall):
    kh, kw = call.weights.dev.shape
    anchor_h, anchor_w = anchors(kh, kw, flipped=call.flipped)
    kernel = constant_filter_kernel(rung, spec, dtype, host_filter(call.weights, call.flipped, call.stream),
                                    all_taps=call.all_taps)
    return kernel, (call.image, call.out, dtype.type(call.cval), anchor_h, anchor_w)


def _constant_vector(rung, spec, dtype, call: FilterCall):
    kh, kw = call.weights.dev.shape
    kernel = constant_filter_kernel(rung, spec, dtype, host_filter(call.weights, call.flipped, call.stream),
                                    anchors(kh, kw, flipped=call.flipped), all_taps=call.all_taps)
    return kernel, (call.image, call.out, dtype.type(call.cval), aligned(call.image) and aligned(call.out))


def _separable(rung, spec, dtype, call: SeparableCall):
    kh, kw = call.wy.dev.shape[0], call.wx.dev.shape[1]
    return rung.kernel(spec, dtype), (call.image, call.wy.dev[:, 0], call.wx.dev[0], call.out,
                                      dtype.type(call.cval), kh // 2, kw // 2)


WEIGHTS_ARGUMENT = Binding("weights argument", False, _weights_argument)
CONSTANT_FILTER = Binding("constant filter", True, _constant_filter)
CONSTANT_VECTOR = Binding("constant filter and anchor, aligned flag", True, _constant_vector)
SEPARABLE = Binding("two 1-D filters", False, _separable)


@dataclasses.dataclass(frozen=True, eq=False)
class FilterRung(Rung):
    """A conv2d rung: a :class:`~simt_tiles.runtime.Rung` that takes a :class:`FilterCall` (or a
    :class:`SeparableCall`) through its :class:`Binding` — the rungs differ in what the kernel
    is given for the filter."""

    bind: Binding | None = None

    def run(self, config, call) -> None:
        grid, block = self.geometry(config, *call.problem)
        kernel, args = self.bind(self, config, call.dtype, call)
        kernel[grid, block, call.stream](*args)
