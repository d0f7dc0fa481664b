"""The matmul ladder: C = A @ B, one numbered file per technique.

The file tree is the lesson — read the rungs in order:

=====================  ====================================================
``k01_naive``          one thread per output, straight from global memory
``k02_coalesced``      thread→element mapping that makes warps coalesce
``k03_smem_tiled``     shared-memory tiles, reused T times, masked edges
``k04_regblock_1d``    TM outputs per thread, B operand reused from a register
``k05_regblock_2d``    TM×TN outputs per thread as register outer products
``k06_transposed``     A transposed in smem: 128-bit reads, 8-way store conflicts
``k07_padded``         padded rows remove the conflicts (PAD = 4 keeps alignment)
``k08_swizzled``       XOR-swizzled columns remove them with no extra memory
``k09_double_buffered`` two smem stages: next tile's loads overlap this tile's math
``k10_warptiled``      warp tiles, strided lane slices, launch bounds
``k11_generated_split_k`` generated tile code, BK=16, 128-bit loads, split-K
``k12_async_copy``     cp.async for both operands (A transposed first)
``k13_mma_tf32``       tensor cores by hand: mma.sync TF32 fragments, cp.async stages
``k14_mma_bf16``       BF16/FP16 fragments by ldmatrix (precision opt-in, :mod:`.mma`)
=====================  ====================================================

``matmul`` checks its arguments and prepares ``out``; :mod:`.dispatch` chooses what runs
(the user's autotune cache, the table shipped for this GPU, then the split-K rows by size;
ragged rows; the padding) and the chosen rung launches it (``rung.run(config, call)``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ...interop import as_stream, device_operand, dtype_name, finish_result, framework_copy, numpy_scalar, prepare_out
from ...autotune import check_argument as check_autotune
from ...launch import planned
from ...registry import Family
from . import _cases, _strided, _tuning, dispatch, reference
from .mma import MMA_RUNGS, matmul_mma
from ._common import Call, flops
from .dispatch import BEST_VARIANT, RAGGED_ROWS, RUNGS, Shapes, choose, get_rung, shapes  # noqa: F401 - Shapes

#: variant names in ladder order (later rungs append)
MATMUL_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the family's registration (:mod:`simt_tiles.registry`)
FAMILY = Family("matmul", RUNGS, reference, (_tuning.TUNABLE,), _cases.demo, _cases.ALIASING, _cases.HAZARDS)

__all__ = ["matmul", "MATMUL_VARIANTS", "RUNGS", "BEST_VARIANT", "get_rung", "flops", "choose", "RAGGED_ROWS"]


@planned
def matmul(a, b, *, out=None, variant=None, config=None, stream=None, autotune=None, precision=None):
    """``np.matmul(a, b)`` for float32 or float64 arrays of the same dtype (FP32/FP64 arithmetic), or
    on the tensor cores with ``precision="tf32"`` (float32) or for bfloat16/float16 inputs (the same
    shapes: 1-D, batched and broadcast, one launch for a batch; :func:`.mma.matmul_mma`).

    a, b
        NumPy arrays (copied to the device; the result comes back as NumPy),
        Numba device arrays, or CUDA arrays from CuPy / PyTorch / any
        ``__cuda_array_interface__`` or DLPack producer (used in place; the
        result is of ``a``'s kind).  NumPy's rules: a 1-D ``a`` is a row and a
        1-D ``b`` a column (the added dimension is removed from the result);
        leading dimensions are batches and broadcast (ValueError naming ``b``
        when they or the inner dimensions do not match).  Each matrix may be
        row- or column-major with any leading dimension — ``x @ w.T``, torch's
        ``w.t()``, CuPy's ``.T``, a column slice of a wider matrix, a batch with
        stride 0 — and is read in place (no copy, one launch for the batch);
        other strides (negative, or neither stride 1) are first copied once
        into a C-order workspace.  M ≤ 16 or N ≤ 16 runs a GEMV kernel
        (:mod:`.k15_gemv`) where the layout allows, and up to 64 where the other
        operand is at most 8 MiB; a large ``a.T @ b`` and ``x @ w.T`` (1024 rows
        and more) on C-order storage run k12 (:mod:`._strided`: ``w`` then copied
        once into K × N).
    out
        Optional C-contiguous array of the result's shape and the inputs' dtype to
        write into; it is returned.  It must not overlap ``a`` or ``b`` in memory,
        transposed views included (ValueError naming ``out``); views of one buffer whose
        extents (first to last byte) do not meet are fine, interleaved ones (column blocks
        of one matrix) count as overlapping.
    variant
        A name from :data:`MATMUL_VARIANTS`; None picks :data:`BEST_VARIANT`,
        or, with ``config=None`` too, the fastest rung and split of K measured
        for this size and dtype (:func:`.dispatch.plan`).
    config
        A preset name (every rung has ``"sim"`` and ``"default"``) or the rung's
        config object; None means the tuned config for this GPU and size when the
        autotune cache or the shipped table has one (:mod:`simt_tiles.autotune`),
        else ``"sim"`` in the simulator, ``"default"`` on a GPU.
    stream
        None (the current stream of the inputs' framework: CuPy's or PyTorch's current
        stream; Numba's default stream for Numba and NumPy arrays), a Numba stream, or a
        CuPy/PyTorch stream.
        Device results are asynchronous on that stream, like any CUDA library.
    autotune
        True: with ``config=None``, a size that neither the cache nor the shipped table
        has is tuned now (seconds, once per GPU and size bucket) and stored; None: only
        when ``SIMT_TILES_AUTOTUNE=1``; False: never.
    precision
        None: float32/float64 inputs multiply in their own precision (the FP32 default never
        changes precision silently); bfloat16/float16 inputs (torch, CuPy, NumPy float16 or
        ``ml_dtypes.bfloat16``) run on the tensor cores with FP32 accumulation and return their
        own dtype (torch's rule). ``"tf32"``: float32 operands rounded to TF32 on the tensor cores
        (:func:`.mma.matmul_mma`, rungs k13/k14; ``variant`` may name one of them).  The tensor-core
        path takes the shapes above (a batch in one launch of the rung's batched form); its
        matrices are read in place when their rows are C-contiguous (any batch stride, 0 too),
        other layouts (transposed views) are first copied once into C order.
    """
    check_autotune(autotune)
    if precision is not None or (isinstance(variant, str) and variant in MMA_RUNGS) or _dtype16(a):
        return matmul_mma(a, b, precision=precision, out=out, variant=variant, config=config, stream=stream)
    get_rung(variant)  # a bad name fails before any copy
    stream = as_stream(stream, a)

    a_op = _unbroadcast(device_operand(a, "a", ndim=None, stream=stream, strided=True,
                                       accepted="float32, float64, bfloat16 or float16"), stream)
    if dtype_name(b) not in (str(a_op.dtype), ""):  # (before b's own check: a float16 b is a dtype, not a's)
        raise TypeError(f"b: expected dtype {a_op.dtype} (the dtype of a); got {dtype_name(b)}")
    b_op = _unbroadcast(device_operand(b, "b", ndim=None, stream=stream, strided=True), stream)
    sh = shapes(a_op.shape, a_op.strides, b_op.shape, b_op.strides)
    m, n, k = sh.m, sh.n, sh.k
    if a_op.ndim == 2 and b_op.ndim == 2 and a_op.c_contiguous() and b_op.c_contiguous() and not (
            variant is None and config is None and m <= dispatch.SKINNY and n > m and k):
        plan = dispatch.plan(variant, config, m, n, k, a_op.dtype, autotune)  # k11/k12's own sources
        c_op = prepare_out(out, a_op, (m, n), a_op.dtype, stream, inputs=(b_op,))
        if m and n:  # an empty C needs no launch (and a 0-block grid is invalid)
            plan.run(Call(a_op.dev, b_op.dev, c_op.dev, stream))
        return finish_result(c_op, stream)
    return _any_layout(a_op, b_op, sh, out, variant, config, stream, autotune)


def _unbroadcast(op, stream):
    """``op``, or the framework's C-contiguous copy of an operand with a zero stride inside its matrix
    (:func:`~simt_tiles.interop.framework_copy`), imported as the FP32 path's operands."""
    x = framework_copy(op, stream)
    return op if x is None else device_operand(x, op.name, ndim=None, stream=stream, strided=True)


def _any_layout(a_op, b_op, sh, out, variant, config, stream, autotune):
    """A transposed, strided, 1-D or batched product (:mod:`._strided`)."""
    dtype = a_op.dtype
    c_op = prepare_out(out, a_op, sh.out, dtype, stream, inputs=(b_op,))
    nb = math.prod(sh.batch)
    c2d = c_op.dev.reshape(nb * sh.m, sh.n)
    if not (nb and sh.m and sh.n):
        return numpy_scalar(finish_result(c_op, stream), out)
    if variant is None and config is None:  # the skinny class: a warp per output row (k15)
        a_kc = sh.k == 1 or sh.a[1][-1] == 1
        b_kc = sh.k == 1 or sh.b[1][-2] == 1
        b_nc = sh.n == 1 or sh.b[1][-1] == 1
        side = dispatch.gemv_rule(sh.m, sh.n, sh.k, nb, a_kc, b_kc, b_nc, np.dtype(dtype).itemsize)
        if side is not None and all(s >= 0 for s in sh.a[1] + sh.b[1]):
            _strided.gemv(side, a_op.dev, b_op.dev, sh, sh.a[1], sh.b[1], c2d, stream)
            return numpy_scalar(finish_result(c_op, stream), out)
    a_mat, a_str = _strided.matrix(a_op.dev, *sh.a, dtype, stream, "a_copy")
    b_mat, b_str = _strided.matrix(b_op.dev, *sh.b, dtype, stream, "b_copy")
    plan = dispatch.layout_plan(variant, config, sh.m, sh.n, sh.k, nb, dtype, a_mat.t + b_mat.t, autotune)
    if plan is not None:
        _strided.run(plan, a_mat, b_mat, sh, a_str, b_str, c2d, stream, nt_copy=dispatch.nt_copies_b(sh.m))
        return numpy_scalar(finish_result(c_op, stream), out)
    # a rung that reads C-order matrices only: each operand copied once, one product per batch
    plan = dispatch.plan(variant, config, sh.m, sh.n, sh.k, dtype, autotune)
    if sh.k == 0:  # C = 0: one launch over every batch's rows, no copy (a GPU's empty array has no data to index)
        plan.run(Call(cuda.device_array((nb * sh.m, 0), dtype, stream=stream),
                      cuda.device_array((0, sh.n), dtype, stream=stream), c2d, stream))
        return numpy_scalar(finish_result(c_op, stream), out)
    a_c = _strided.contiguous_copy(a_mat.dev, sh.a[0], a_str, dtype, stream, "a_copy")
    b_c = _strided.contiguous_copy(b_mat.dev, sh.b[0], b_str, dtype, stream, "b_copy")
    a_c = a_c.reshape(-1, sh.m, sh.k)
    b_c = b_c.reshape(-1, sh.k, sh.n)
    sa = _strided.batch_strides(sh.a[0], _strided._c_strides(sh.a[0]), sh.batch)
    sb = _strided.batch_strides(sh.b[0], _strided._c_strides(sh.b[0]), sh.batch)
    mk, kn = sh.m * sh.k, sh.k * sh.n
    for i, idx in enumerate(np.ndindex(*sh.batch)):
        ia = sum(j * s for j, s in zip(idx, sa)) // max(mk, 1)
        ib = sum(j * s for j, s in zip(idx, sb)) // max(kn, 1)
        plan.run(Call(a_c[ia], b_c[ib], c2d[i * sh.m:(i + 1) * sh.m], stream))
    return numpy_scalar(finish_result(c_op, stream), out)


def _dtype16(x) -> bool:
    """Whether ``x`` holds bfloat16 or float16 values (any array kind, by its dtype's name; either byte order)."""
    return dtype_name(x) in ("bfloat16", "float16")
