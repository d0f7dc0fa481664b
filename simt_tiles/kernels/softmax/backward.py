"""backward — the gradient of softmax and log_softmax, from the forward's output: one read of y and dy, one write.

What it teaches
    The backward of y = softmax(x) along an axis needs no x and no exp:
    ``dx = y · (dy − Σ_k y_k·dy_k)``; of y = log_softmax(x) it needs one exp per
    element: ``dx = dy − exp(y) · Σ_k dy_k``.  Each is a *row reduction then an
    elementwise pass* — the shape of the forward's k02 (reduce, then write) with
    two inputs.  The input is viewed as ``(outer, n, inner)`` around the axis
    (as the forward's dispatch does):

    * ``inner == 1`` (the last axis): a **warp per row**, its 32 lanes striding
      the row (coalesced), the sum folded with ``shfl_xor`` so every lane has
      it, then the lanes write their elements.  No shared memory, no barrier.
    * ``inner > 1``: a **thread per line** (lines are ``inner`` apart): thread q
      owns line (q // inner, q % inner), so consecutive threads read consecutive
      addresses at every step k — coalesced without a transpose.

Memory traffic: y and dy read twice (the second read mostly from L1/L2), dx written once.

This kernel is the autograd backward of :mod:`simt_tiles.torch`'s softmax and log_softmax; it is
not a rung of the forward ladder (``variant=`` of :func:`simt_tiles.softmax` never names it), and
its measurements are in benchmarks/notes/torch.md.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np
from numba import cuda, uint64, void

from ...bounds import gamma, ref_dtype, unit_roundoff
from ...interop import as_stream, device_operand, finish_result, prepare_out
from ...launch import planned
from ...runtime import Gate, Rung, TileConfig, cdiv, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync

__all__ = ["softmax_backward", "backward_reference", "RUNG", "Config"]


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """``threads`` per block (whole warps): ``threads / 32`` rows, or ``threads`` lines, per block."""

    threads: int = 256

    def block(self):
        return (self.threads,)

    def smem_bytes(self, itemsize):
        return 0

    def rules(self):
        return (("threads", self.threads % 32 == 0, "threads % 32 == 0 (a warp per row)"),)


PRESETS = {"sim": Config(threads=64), "default": Config(threads=256)}


def make_kernel(config: Config, dtype, log: bool = False, lines: bool = False):
    T = config.threads
    NW = T // 32
    DT = numba_dtype(dtype)
    LOG, LINES = log, lines

    def softmax_backward(y, dy, dx):
        outer, n, inner = y.shape
        tid = cuda.threadIdx.x
        if LINES:  # a thread per line: consecutive threads, consecutive addresses
            q = cuda.blockIdx.x * T + tid
            if q < outer * inner:
                o, i = uint64(q // inner), uint64(q % inner)
                s = DT(0)
                for k in range(n):
                    s += dy[o, uint64(k), i] if LOG else y[o, uint64(k), i] * dy[o, uint64(k), i]
                for k in range(n):
                    yk, gk = y[o, uint64(k), i], dy[o, uint64(k), i]
                    dx[o, uint64(k), i] = (gk - math.exp(yk) * s) if LOG else yk * (gk - s)
        else:  # a warp per row (inner == 1); the whole warp stays for the shuffles
            lane = tid % 32
            row = cuda.blockIdx.x * NW + tid // 32
            live = row < outer
            o = uint64(row if live else 0)
            s = DT(0)
            if live:
                for k in range(lane, n, 32):
                    s += dy[o, uint64(k), 0] if LOG else y[o, uint64(k), 0] * dy[o, uint64(k), 0]
            for off in (16, 8, 4, 2, 1):
                s += shfl_xor_sync(FULL_MASK, s, off)
            if live:
                for k in range(lane, n, 32):
                    yk, gk = y[o, uint64(k), 0], dy[o, uint64(k), 0]
                    dx[o, uint64(k), 0] = (gk - math.exp(yk) * s) if LOG else yk * (gk - s)

    return softmax_backward


def signature(dtype, log=False, lines=False):
    t = numba_dtype(dtype)[:, :, ::1]
    return void(t, t, t)


def geometry(config: Config, outer: int, n: int, inner: int):
    if inner > 1:
        return (cdiv(outer * inner, config.threads),), config.block()
    return (cdiv(outer, config.threads // 32),), config.block()


RUNG = Rung("softmax_backward", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(({"log": False, "lines": False}, {"log": True, "lines": True}),
                      smem_exception="no shared memory"))


@planned
def softmax_backward(y, dy, *, axis: int = -1, log: bool = False, out=None, config=None, stream=None):
    """The gradient ``dx`` of ``softmax(x, axis=axis)`` (``log=False``) or ``log_softmax``
    (``log=True``) given the forward's output ``y`` and the output gradient ``dy``.

    y, dy
        Arrays of one shape and dtype (float32/float64), same kinds as :func:`simt_tiles.softmax`. 16-bit
        arrays are a TypeError naming ``y``: convert them to float32 first (``simt_tiles.torch``'s autograd does).
    axis
        One int (negative counts from the end): the axis the forward normalised.
    out
        Optional array of ``y``'s shape and dtype, overlapping neither input.
    """
    if not isinstance(log, (bool, np.bool_)):
        raise TypeError(f"log: expected a bool; got {log!r}")
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis: expected an int; got {axis!r}")
    axis = int(axis)  # a NumPy integer too, as the forward
    cfg = RUNG.resolve_config(config)
    stream = as_stream(stream, y)
    y_op = device_operand(y, "y", ndim=None, stream=stream)
    g_op = device_operand(dy, "dy", ndim=None, stream=stream)
    if g_op.dev.dtype != y_op.dev.dtype:
        raise TypeError(f"dy: expected dtype {y_op.dev.dtype} (the dtype of y); got {g_op.dev.dtype}")
    shape = tuple(y_op.dev.shape)
    if tuple(g_op.dev.shape) != shape:
        raise ValueError(f"dy: expected shape {shape} (the shape of y); got {tuple(g_op.dev.shape)}")
    shape3 = _view3(shape, axis)
    out_op = prepare_out(out, y_op, shape, y_op.dev.dtype, stream, inputs=(g_op,))
    if math.prod(shape):
        grid, block = geometry(cfg, *shape3)
        RUNG.launch(cfg, y_op.dev.dtype, grid, block, stream, y_op.dev.reshape(shape3), g_op.dev.reshape(shape3),
                    out_op.dev.reshape(shape3), params={"log": bool(log), "lines": shape3[2] > 1})
    return finish_result(out_op, stream)


def _view3(shape: tuple, axis: int) -> tuple:
    """``(outer, n, inner)`` around ``axis`` (the forward's rule, for one axis)."""
    nd = len(shape)
    if not -nd <= axis < nd:
        raise ValueError(f"axis: {axis} is out of bounds for an array of {nd} dimensions (shape {shape})")
    a = axis % nd
    return (math.prod(shape[:a]), shape[a], math.prod(shape[a + 1:]))


def backward_reference(y, dy, *, axis: int = -1, log: bool = False):
    """``(ref, bound)``: the gradient in long double from the same ``y`` and ``dy``, and its bound.

    softmax: s = Σ y_k·dy_k carries γ_n·Σ|y_k·dy_k|; dy_i − s and the product add 2u of their
    results, so |dx_i − ref_i| ≤ γ_{n+2}·|y_i|·(|dy_i| + Σ_k|y_k·dy_k|).
    log_softmax: s = Σ dy_k carries γ_n·Σ|dy_k|; exp(y_i) ≤ 2 ulp (4u), then a product and a
    subtraction: |dx_i − ref_i| ≤ γ_{n+6}·(|dy_i| + e_i·Σ_k|dy_k|) with e_i = exp(y_i).
    The smallest normal number is added for results that underflow."""
    dt = np.asarray(y).dtype
    yr = np.asarray(y, dtype=ref_dtype())
    gr = np.asarray(dy, dtype=ref_dtype())
    n = yr.shape[axis] if yr.ndim else 1
    u = unit_roundoff(dt)
    if log:
        e = np.exp(yr)
        s = gr.sum(axis=axis, keepdims=True)
        ref = gr - e * s
        bound = gamma(n + 6, u) * (np.abs(gr) + e * np.abs(gr).sum(axis=axis, keepdims=True))
    else:
        s = (yr * gr).sum(axis=axis, keepdims=True)
        ref = yr * (gr - s)
        bound = gamma(n + 2, u) * np.abs(yr) * (np.abs(gr) + np.abs(yr * gr).sum(axis=axis, keepdims=True))
    return ref, bound + np.finfo(dt).smallest_normal
