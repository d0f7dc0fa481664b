"""NumPy's matmul on the operands users bring: 1-D promotion, broadcast batches, any layout.

:func:`simt_tiles.kernels.matmul.shapes` reads both operands as ``np.matmul`` does (a 1-D ``a`` is a
row, a 1-D ``b`` a column, the added dimension removed from the result; the leading dimensions
broadcast) and checks them, naming the argument.  :func:`run` launches the product on its storage as
it lies:

* each matrix is row-major (``"n"``) or column-major (``"t"``: ``x.T``, ``w.t()``) with any
  leading dimension (a column slice of a wider matrix) — :func:`classify`; anything else
  (negative strides, both strides ≠ 1) is first copied once into a C-contiguous workspace;
* the batch dimensions collapse to one (batch count, stride per operand, 0 for a broadcast
  operand) where their strides allow (:func:`collapse`): one launch, grid z over the batches;
  dimensions that do not collapse are a loop of launches over the rest.

The kernel is :mod:`._layouts`' (k11's tile) with the config :func:`.dispatch.layout_plan`
chooses for the stacked problem (batches·M × N × K).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np
from numba import int64, uint32

from ...interop import device_view
from ...runtime import cdiv
from ...vector import aligned
from . import _layouts, dispatch, k15_gemv
from ._common import Call
from . import k11_generated_split_k as k11
from . import k12_async_copy as k12

#: most blocks a grid has along z
MAX_GRID_Z = 65535


def batch_strides(shape, strides, batch) -> tuple:
    """An operand's batch strides broadcast to ``batch`` (0 where it broadcasts)."""
    nd = len(shape) - 2
    pad = len(batch) - nd
    return tuple(0 if i < pad or shape[i - pad] == 1 else strides[i - pad] for i in range(len(batch)))


def collapse(batch, sa, sb) -> tuple[tuple, int, int, int]:
    """``(outer, nb, sa, sb)``: the innermost batch dimensions merged into one of ``nb`` batches with
    strides ``sa``, ``sb`` (C's are contiguous), and the ``outer`` ``(extent, a stride, b stride)``
    dimensions that do not merge (a loop of launches)."""
    dims = [(n, x, y) for n, x, y in zip(batch, sa, sb) if n != 1]
    nb, xa, xb = 1, 0, 0
    while dims:
        n, x, y = dims[-1]
        if nb > 1 and not (x == xa * nb and y == xb * nb):
            break
        if nb == 1:
            xa, xb = x, y
        nb *= n
        dims.pop()
    return tuple(dims), nb, xa, xb


def classify(rows: int, cols: int, sr: int, sc: int) -> tuple[str, int] | None:
    """``("n", ld)`` for a row-major matrix (``cols`` contiguous), ``("t", ld)`` for a column-major
    one, None for another layout (a copy).  A dimension of extent 1 takes any stride."""
    if sr < 0 or sc < 0:
        return None
    if cols == 1:
        sc = 1
    if rows == 1:
        sr = 0 if sc == 1 else 1
    if sc == 1:
        return "n", sr
    if sr == 1:
        return "t", sc
    return None


def reach(shape, strides) -> int:
    """Elements from element 0 to the last one ``strides`` (non-negative) can reach, plus one."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0


class Mat(NamedTuple):
    """One operand for the layout kernel: its array (any strides), layout and leading dimension."""

    dev: Any
    t: str  #: "n" or "t"
    ld: int


def matrix(dev, shape, strides, dtype, stream, name: str) -> tuple[Mat, tuple]:
    """``(Mat, strides)``: the operand ``dev`` (a batch of matrices, strides in elements) as the layout
    kernel reads it; a layout it cannot read is first copied once into a C-order workspace ``name``."""
    got = classify(shape[-2], shape[-1], strides[-2], strides[-1])
    if got is None or any(s < 0 for s in strides):
        dev = contiguous_copy(dev, shape, strides, dtype, stream, name)
        return Mat(dev, "n", shape[-1]), _c_strides(shape)
    return Mat(dev, *got), tuple(strides)


def _c_strides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _in_c_order(shape, strides) -> bool:
    """Whether ``strides`` (elements) lay ``shape`` out in C order; a dimension of extent 1 takes any stride.
    Not numba-cuda's ``is_c_contiguous``: that skips stride-0 dimensions, so it calls a broadcast view contiguous."""
    acc = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1 and s != acc:
            return False
        acc *= n
    return True


def run(plan, a: Mat, b: Mat, sh, a_str, b_str, c2d, stream, nt_copy: bool = False) -> None:
    """Launch ``plan``'s config of the layout kernel over every batch (``sh``: the product's
    :class:`~simt_tiles.kernels.matmul.Shapes`): ``c2d`` is the result as
    (batches·M, N), C-contiguous; ``a_str``/``b_str`` the operands' strides in elements.  One
    product on k12's plan runs k12 itself where its storage allows: ``tn`` on A's storage, ``nt``
    with ``nt_copy`` (:func:`.dispatch.nt_copies_b`) after copying B into K × N."""
    cfg, dtype = plan.config, np.dtype(c2d.dtype)
    m, n, k = sh.m, sh.n, sh.k
    item = dtype.itemsize
    sa = batch_strides(sh.a[0], a_str, sh.batch)
    sb = batch_strides(sh.b[0], b_str, sh.batch)
    outer, nb, xa, xb = collapse(sh.batch, sa, sb)
    if not (m and n) or nb == 0 or any(d[0] == 0 for d in outer):
        return
    a_one = reach((m, k), a_str[-2:])  # one matrix's storage
    b_one = reach((k, n), b_str[-2:])
    layout = a.t + b.t
    if _tn_on_k12(plan, dtype, layout, nb, outer, a, b, m, n):
        # ``a.T @ b`` with a and b C-order: a's storage is k12's Aᵀ, so k12 runs without its transposition
        at = device_view(a.dev, (k, m), (m * item, item))
        bv = device_view(b.dev, (k, n), (n * item, item))
        plan.rung.run_transposed(cfg, at, bv, c2d, stream)
        return
    if nt_copy and _nt_on_k12(plan, dtype, layout, nb, outer, a, b, n, k):
        # ``x @ w.T`` with x and w C-order: w (N × K) copied once into k12's B (K × N), then k12 as for NN
        bt = k11.workspace((k, n), dtype, stream, "b_transposed")
        k12.transpose_into(device_view(b.dev, (n, k), (k * item, item)), bt, stream)
        plan.run(Call(device_view(a.dev, (m, k), (k * item, item)), bt, c2d, stream))  # (C's rows in pieces)
        return
    for o, idx in enumerate(np.ndindex(*(d[0] for d in outer))):
        oa = sum(i * d[1] for i, d in zip(idx, outer))
        ob = sum(i * d[2] for i, d in zip(idx, outer))
        fa = device_view(a.dev, (max(a_one + (nb - 1) * xa, 1),), (item,), oa * item)
        fb = device_view(b.dev, (max(b_one + (nb - 1) * xb, 1),), (item,), ob * item)
        c = c2d[o * nb * m:(o + 1) * nb * m]
        if nb == 1 and not outer and cfg.pad == k11.Pad.ALWAYS and not _vec(fa, fb, a, b, m, n, 0, 0):
            # ragged or unaligned: one copy each into padded C-order buffers, then k11's 128-bit path
            av = device_view(a.dev, (m, k), tuple(s * item for s in a_str[-2:]))
            bv = device_view(b.dev, (k, n), tuple(s * item for s in b_str[-2:]))
            ap, bp = k11.padded_operands(av, bv, dtype, stream)
            dispatch.RowsPlan(k11.RUNG, dataclasses.replace(cfg, pad=k11.Pad.NEVER)).run(Call(ap, bp, c, stream))
            continue
        _launch(cfg, dtype, layout, fa, fb, c, m, n, k, a.ld, b.ld, xa, xb, nb, stream)


def _tn_on_k12(plan, dtype, layout, nb, outer, a: Mat, b: Mat, m, n) -> bool:
    """Whether a ``tn`` product runs k12 itself (:func:`run`): its plan is k12's, one float32 product,
    A's storage exactly K × M (M a multiple of 4, 16-byte aligned: k12's Aᵀ as k12 would write it) and
    B C-order.  The layout kernel reads A column-major with 128-bit loads too, but k12's cp.async
    tile is the faster (4096³: k12 on NN with its transposition 2.85 ms, the layout kernel on tn 3.00)."""
    return (layout == "tn" and _one_k12_product(plan, dtype, nb, outer) and a.ld == m and m % 4 == 0
            and b.ld == n and aligned(a.dev) and cdiv(m, plan.config.bm) <= k11.MAX_GRID_Y)  # (k12 cuts no Aᵀ)


def _nt_on_k12(plan, dtype, layout, nb, outer, a: Mat, b: Mat, n, k) -> bool:
    """Whether an ``nt`` product may run k12 after copying B (:func:`run`): its plan is k12's, one float32
    product, A C-order, B's storage exactly N × K and N a multiple of 4 (k12's B needs no padding)."""
    return layout == "nt" and _one_k12_product(plan, dtype, nb, outer) and a.ld == k and b.ld == k and n % 4 == 0


def _one_k12_product(plan, dtype, nb, outer) -> bool:
    """A plan for k12 itself: k12's rung, float32, one product (no batch), its copies not forced."""
    return (plan.rung.name == "k12_async_copy" and dtype == np.float32 and nb == 1 and not outer
            and plan.config.pad != k11.Pad.ALWAYS)


def _vec(fa, fb, a: Mat, b: Mat, m, n, xa, xb) -> bool:
    """Whether the 128-bit build may read both operands (alignment, leading dimensions, batch
    strides, and the extent along an x-contiguous operand's vectors)."""
    return (aligned(fa) and aligned(fb) and a.ld % 4 == 0 and b.ld % 4 == 0 and xa % 4 == 0 and xb % 4 == 0
            and (a.t == "n" or m % 4 == 0) and (b.t == "t" or n % 4 == 0))


def _launch(cfg, dtype, layout, fa, fb, c, m, n, k, lda, ldb, xa, xb, nb, stream) -> None:
    """The layout kernel over ``nb`` products of M rows; M past CUDA's grid y (``k11.MAX_GRID_Y`` tiles
    of ``bm``: 8 388 480 rows at 128) runs product by product, each in pieces of rows: A's and C's rows
    from ``r0`` (views from the piece's first element), B the product's own."""
    rows = k11.MAX_GRID_Y * cfg.bm
    if m <= rows:
        return _launch_grid(cfg, dtype, layout, fa, fb, c, m, n, k, lda, ldb, xa, xb, nb, stream)
    step_a = lda if layout[0] == "n" else 1  # elements from one row of A to the next
    for z in range(nb):
        for r0 in range(0, m, rows):
            mp = min(rows, m - r0)
            _launch_grid(cfg, dtype, layout, fa[z * xa + r0 * step_a:], fb[z * xb:], c[z * m + r0:z * m + r0 + mp],
                         mp, n, k, lda, ldb, 0, 0, 1, stream)


def _launch_grid(cfg, dtype, layout, fa, fb, c, m, n, k, lda, ldb, xa, xb, nb, stream) -> None:
    splits, chunk = k11.split_plan(cfg, k)
    if splits * nb > MAX_GRID_Z:
        splits, chunk = 1, k
    vec = _vec(fa, fb, Mat(None, layout[0], lda), Mat(None, layout[1], ldb), m, n, xa, xb)
    total = splits * nb
    idx32 = max(fa.shape[0], fb.shape[0], total * m * n) + 4 * cfg.bk * max(lda, ldb, 1) < k11.IDX32_LIMIT
    kernel = _layouts.RUNG.kernel(cfg.compiled(), dtype, idx32=idx32, vec=vec, layout=layout)
    target = c if splits == 1 else k11.workspace((total * m, n), dtype, stream)
    flags = uint32(n % 4 == 0 and aligned(target))
    x = uint32 if idx32 else int64
    for z0 in range(0, total, MAX_GRID_Z):
        grid = (cdiv(n, cfg.bn), cdiv(m, cfg.bm), min(MAX_GRID_Z, total - z0))
        kernel[grid, cfg.block(), stream](fa, fb, target, x(chunk), flags, x(m), x(n), x(k), x(lda), x(ldb),
                                          x(xa), x(xb), uint32(nb), uint32(z0))
    if splits > 1:
        k11.add_splits(target, c, stream)


def contiguous_copy(dev, shape, strides, dtype, stream, name: str):
    """``dev`` (strides in elements, any sign) copied into a C-contiguous workspace of ``shape``."""
    item = np.dtype(dtype).itemsize
    if _in_c_order(shape, strides):
        return dev.reshape(*shape)  # already in C order (a 1-D operand: its promoted shape)
    rows = math.prod(shape[:-1])
    dst = k11.workspace((rows, shape[-1]), dtype, stream, name)
    if rows and shape[-1]:  # one launch per leading index: a 2-D strided view each
        for i, idx in enumerate(np.ndindex(*shape[:-2])):
            off = sum(j * s for j, s in zip(idx, strides[:-2])) * item
            v = device_view(dev, shape[-2:], tuple(s * item for s in strides[-2:]), off)
            r0 = i * shape[-2]
            k11.copy_padded(v, dst[r0:r0 + shape[-2]], stream)
    return dst.reshape(*shape) if len(shape) != 2 else dst


def gemv(side: str, a, b, sh, a_str, b_str, c2d, stream) -> None:
    """:mod:`.k15_gemv` for ``side`` (:func:`.dispatch.gemv_rule`): the small operand's rows against
    the big one's, both read along k in place; C written directly (M ≤ 16) or transposed (N ≤ 16)."""
    item = np.dtype(c2d.dtype).itemsize
    m, n, k = sh.m, sh.n, sh.k
    lda = a_str[-2] if m > 1 else 0  # a row's start; a dimension of 1 takes any stride
    ldb = b_str[-1] if n > 1 else 0  # B[k, j] at j·ldb + k: column j of B is a row of w
    fa = device_view(a, (max(reach((m, k), a_str[-2:]), 1),), (item,))
    fb = device_view(b, (max(reach((k, n), b_str[-2:]), 1),), (item,))
    fc = c2d.reshape(m * n)
    if side == "rows":  # B row-major: A any (non-negative) strides
        k15_gemv.launch_rows(k15_gemv.config_for(m), fa, fb, fc, m, n, k, a_str[-2] if m > 1 else 0,
                             a_str[-1] if k > 1 else 0, b_str[-2] if k > 1 else 0, stream)
    elif side == "m":
        cfg = k15_gemv.config_for(m)
        k15_gemv.launch(cfg, fa, fb, fc, m, n, k, lda, ldb, n, 1, stream)
    else:
        cfg = k15_gemv.config_for(n)
        k15_gemv.launch(cfg, fb, fa, fc, n, m, k, ldb, lda, 1, n, stream)
