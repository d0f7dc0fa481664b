"""``np.matmul``'s reading of two operands (1-D promotion, broadcast batches), shared by the FP32
path (:func:`simt_tiles.kernels.matmul.matmul`, :mod:`._strided`) and the tensor-core path
(:func:`.mma.matmul_mma`): one rule, one place, importable by both without a cycle."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Shapes(NamedTuple):
    """The product's shapes, as :func:`shapes` reads them (:mod:`._strided` launches on them)."""

    m: int
    n: int
    k: int
    batch: tuple  #: the broadcast batch shape
    out: tuple  #: the result's shape (batch, then M and N unless they were added)
    a: tuple  #: (shape, strides in elements) of A as a batch of M×K matrices (1-D promoted)
    b: tuple  #: (shape, strides) of B as a batch of K×N matrices


def shapes(a_shape, a_strides, b_shape, b_strides) -> Shapes:
    """``np.matmul``'s reading of two operands (strides in elements); ValueError naming the argument."""
    a_shape, b_shape, a_strides, b_strides = (tuple(int(v) for v in t) for t in (a_shape, b_shape, a_strides, b_strides))
    a_vec, b_vec = len(a_shape) == 1, len(b_shape) == 1
    if a_vec:
        a_shape, a_strides = (1,) + a_shape, (0,) + a_strides
    if b_vec:
        b_shape, b_strides = b_shape + (1,), b_strides + (0,)
    (m, k), (kb, n) = a_shape[-2:], b_shape[-2:]
    if kb != k:
        want = f"({k},)" if b_vec else f"(..., {k}, N)"
        raise ValueError(f"b: expected shape {want} since a has shape {_orig(a_shape, a_vec)} (the inner "
                         f"dimensions must match, as in np.matmul); got {_orig(b_shape, b_vec, b=True)}")
    try:
        batch = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    except ValueError:
        raise ValueError(f"b: batch dimensions {b_shape[:-2]} do not broadcast with a's {a_shape[:-2]} "
                         f"(a has shape {_orig(a_shape, a_vec)}, b {_orig(b_shape, b_vec, b=True)})") from None
    out = batch + (() if a_vec else (m,)) + (() if b_vec else (n,))
    return Shapes(m, n, k, batch, out, (a_shape, a_strides), (b_shape, b_strides))


def _orig(shape, vec, b=False):
    return (shape[-1 - b],) if vec else shape
