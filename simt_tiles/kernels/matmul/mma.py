"""Tensor-core matmul: ``matmul_mma(a, b, precision=...)`` on the mma.sync rungs (k13 TF32, k14 BF16/FP16).

check → choose → launch, as the FP32 ladder's ``matmul``:

* **precision** is explicit for float32 inputs (``"tf32"``: operands rounded to 10 mantissa
  bits, FP32 accumulation) — the FP32 default never changes precision silently, so
  ``precision=None`` on float32 is a ValueError pointing at ``simt_tiles.matmul``.  bfloat16 and
  float16 inputs imply ``"bf16"`` / ``"fp16"``; the result has the inputs' dtype (torch's rule),
  accumulated in FP32 and rounded once.
* **arrays**: float32 as :mod:`simt_tiles.interop` takes them; 16-bit from PyTorch
  (``torch.bfloat16``/``float16`` CUDA tensors), CuPy (``float16``), Numba device arrays
  (``float16``) and NumPy (``float16``, or ``ml_dtypes.bfloat16``).
* **shapes**: ``np.matmul``'s, read by the FP32 path's :func:`.dispatch.shapes` (1-D operands
  promoted and the added dimension removed, batch dimensions broadcast).  A batch runs the
  rungs' batched form (``Config.batched`` 2: grid z is the batch, per-operand batch strides,
  0 for a broadcast operand) in one launch, batch dimensions collapsed as the FP32 path's
  (:func:`._strided.collapse`; those that do not collapse are a loop of launches), more than
  65535 batches in pieces of grid z; batches of C-contiguous matrices are read in place with
  any batch stride, other layouts (transposed views) first copied once into C order.
* **any M, N, K**: the kernels copy 16-byte chunks, so a row of A or B that is not a multiple of
  16 bytes long (or an unaligned base) is first copied into a zero-padded workspace; edges of
  the block grid are the copies' zero-fill; C is stored element by element with bounds checks.
"""

from __future__ import annotations

import math

import numpy as np

from ...interop import (as_stream, check_no_overlap, device_operand, device_view, finish_result, framework_copy,
                        numpy_scalar,
                        Operand, prepare_out)
# the 16-bit operands' recognition and their uint16 bits (shared with softmax's 16-bit path)
from ...interop import dtype_name as _dtype_name, finish16 as _finish16, operand16 as _operand16, out16 as _out16
from ...bounds import mma_error_factor, ref_dtype
from ...launch import planned
from ...registry import Family, numpy_case
from ...runtime import SIMULATOR, cdiv
from . import _strided, k13_mma_tf32, k14_mma_bf16, reference
from ._common import Call
from .dispatch import shapes

__all__ = ["MMA_RUNGS", "matmul_mma", "PRECISIONS", "choose_config", "LARGE_TILES"]

MMA_RUNGS = {r.name: r for r in (k13_mma_tf32.RUNG, k14_mma_bf16.RUNG)}
PRECISIONS = ("tf32", "bf16", "fp16")
#: the rung each precision runs
RUNG_FOR = {"tf32": "k13_mma_tf32", "bf16": "k14_mma_bf16", "fp16": "k14_mma_bf16"}
#: ``config=None`` takes the "large" preset (128×256 TF32, 256×128 BF16/FP16) when the grid has at
#: least this many of its tiles, two per SM of the H200: measured faster at 512-2048 such tiles,
#: slower at 36 (1031×997×1013), where the "default" 128×128 tile fills more SMs (benchmarks/notes/mma.md)
LARGE_TILES = 2 * 132


def choose_config(rung, config, m: int, n: int, simulator: bool = SIMULATOR, batches: int = 1):
    """The caller's config, else "sim" in the simulator, else "large" on grids of ≥ LARGE_TILES of
    its tiles, else "default".  A batch is its ``batches`` products' tiles together (the batched
    form's grid: batches × the tiles of one M × N), so 32 products of 512 × 512 count as the grid
    they launch, not as one 512 × 512.  A batch of products smaller than half the large tile on either
    side takes the default however many there are: 1000 products of 64 × 64 on 128 × 256 tiles would
    compute mostly padding, one block an SM (unmeasured; a single product keeps the measured rule)."""
    if config is not None or simulator:
        return rung.resolve_config(config)
    large = rung.presets["large"]
    tiles = batches * cdiv(m, large.bm) * cdiv(n, large.bn)
    small = batches > 1 and (2 * m < large.bm or 2 * n < large.bn)
    return large if tiles >= LARGE_TILES and not small else rung.presets["default"]


def _precision_for(dtype_name: str, precision):
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS} or None; got {precision!r}")
    implied = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype_name)
    if dtype_name == "float32":
        if precision != "tf32":
            raise ValueError(
                f"precision: float32 inputs need precision='tf32' (tensor cores round the operands to "
                f"10 mantissa bits); for full float32 leave variant None or name one of MATMUL_VARIANTS "
                f"(not a tensor-core rung); got {precision!r}")
        return "tf32"
    if implied is None:
        got = dtype_name or "an object without a dtype (a NumPy, CuPy, Numba or PyTorch array is expected)"
        raise TypeError(f"a: expected float32 (with precision='tf32'), bfloat16 or float16; got {got}")
    if precision not in (None, implied):
        raise ValueError(f"precision: {dtype_name} inputs compute in {implied!r}; got {precision!r}")
    return implied


@planned  # repeated calls replay their launches, the padding copies included; on its arrays' device
def matmul_mma(a, b, *, precision=None, out=None, variant=None, config=None, stream=None):
    """C = A @ B on the tensor cores (``mma.sync``), FP32 accumulation.

    a, b
        Arrays of one dtype: float32 (needs ``precision="tf32"``), bfloat16 or float16; NumPy
        (copied; the result comes back as NumPy), Numba, CuPy or PyTorch CUDA arrays (used in
        place; the result is of ``a``'s kind).  ``np.matmul``'s shapes: a 1-D ``a`` is a row and a
        1-D ``b`` a column (the added dimension removed from the result), leading dimensions are
        batches and broadcast (ValueError naming ``b`` when they or the inner dimensions do not
        match); a batch is one launch (grid z; pieces past 65535).  Matrices with C-contiguous
        rows are read in place with any batch stride (0: a broadcast operand); others (a
        transposed view, ``x.mT``) are first copied once into C order.
    precision
        ``"tf32"`` for float32; None or the implied ``"bf16"``/``"fp16"`` for 16-bit inputs.
    out
        Optional C-contiguous array of the result's shape and dtype (float32 for TF32, else the
        inputs'), not overlapping them.
    variant, config
        A rung of :data:`MMA_RUNGS` (None: the precision's) and a preset name or its Config
        (None: :func:`choose_config`'s: ``"large"`` on large grids — a batch counts all its
        products' tiles — else ``"default"``; the simulator's ``"sim"``).  A batch runs the
        config's batched form (``batched`` 2) whatever its ``batched``.
    stream
        As :func:`simt_tiles.matmul`'s.
    """
    dname = _dtype_name(a)
    prec = _precision_for(dname, precision)
    if _dtype_name(b) != dname:
        raise TypeError(f"b: expected dtype {dname} (the dtype of a); got {_dtype_name(b)}")
    name = RUNG_FOR[prec] if variant is None else variant
    if not isinstance(name, str) or name not in MMA_RUNGS:
        raise ValueError(f"variant: expected one of {tuple(MMA_RUNGS)} or None; got {variant!r}")
    if name != RUNG_FOR[prec]:
        raise ValueError(f"variant: {name} does not compute {prec!r}; {RUNG_FOR[prec]} does")
    rung = MMA_RUNGS[name]
    if config is not None:
        rung.resolve_config(config)  # a bad preset fails before any copy
    stream = as_stream(stream, a)
    if prec == "tf32":
        a_op = device_operand(a, "a", ndim=None, stream=stream, strided=True)
        b_op = device_operand(b, "b", ndim=None, stream=stream, strided=True)
    else:
        a_op, b_op = (_operand16(x, nm, stream, ndim=None, contiguous=False) for x, nm in ((a, "a"), (b, "b")))
    a_op, b_op = (_unexpand(op, prec, stream) for op in (a_op, b_op))
    sh = shapes(a_op.shape, a_op.strides, b_op.shape, b_op.strides)  # the FP32 path's rules and errors
    m, n, k = sh.m, sh.n, sh.k
    nb = math.prod(sh.batch)
    cfg = choose_config(rung, config, m, n, batches=nb)
    if prec == "tf32":
        c_op = prepare_out(out, a_op, sh.out, np.float32, stream, inputs=(b_op,))
    else:
        c_op = _out16(out, a_op, sh.out, stream)
        check_no_overlap(c_op, (a_op, b_op))  # prepare_out's rule (the FP32 path): no out that is an input
    params = {} if prec == "tf32" else {"precision": prec}
    if a_op.ndim == 2 and b_op.ndim == 2 and a_op.c_contiguous() and b_op.c_contiguous():
        if m and n:  # one product on C-contiguous matrices: the 2-D kernel, as before
            rung.run(cfg, Call(a_op.dev, b_op.dev, c_op.dev, stream, params))
    elif nb and m and n:
        _batched(rung, cfg, a_op, b_op, sh, nb, c_op.dev.reshape(nb * m, n), stream, params)
    return numpy_scalar(finish_result(c_op, stream) if prec == "tf32" else _finish16(c_op, a_op, stream), out)


def _unexpand(op: Operand, prec: str, stream) -> Operand:
    """``op``, or the framework's C-contiguous copy of an operand with a zero stride inside its matrix
    (:func:`~simt_tiles.interop.framework_copy`, as the FP32 path's ``_unbroadcast``), imported again."""
    x = framework_copy(op, stream)
    if x is None:
        return op
    if prec == "tf32":
        return device_operand(x, op.name, ndim=None, stream=stream, strided=True)
    return _operand16(x, op.name, stream, ndim=None, contiguous=False)


def _rows_c(shape, strides) -> bool:
    """Whether each matrix of an operand (its last two axes) has C-contiguous rows: column stride 1 and
    row stride the row length (an axis of extent 1 takes any stride)."""
    (rows, cols), (sr, sc) = shape[-2:], strides[-2:]
    return (cols == 1 or sc == 1) and (rows == 1 or sr == cols)


def _c_order(op: Operand, shape, strides, stream, name: str):
    """``op``'s storage read as ``shape``/``strides`` (elements), copied once into C order (``name``'s
    workspace) by :func:`._strided.contiguous_copy` (by the strides: a stride of 0 is copied value by value)."""
    return _strided.contiguous_copy(op.dev, shape, strides, op.dev.dtype, stream, name).reshape(*shape)


def _batched(rung, cfg, a_op: Operand, b_op: Operand, sh, nb: int, c2d, stream, params) -> None:
    """A batched, broadcast or 1-D product: the batch dimensions collapsed as the FP32 path's
    (:func:`._strided.collapse`: batches with one stride per operand, 0 where it broadcasts, in one
    launch of the batched form; dimensions that do not collapse are a loop of launches); an operand
    whose matrices are not C-contiguous rows (a transposed view) is first copied once into C order."""
    m, n, k = sh.m, sh.n, sh.k
    ops = []
    for op, (shape, strides), name in ((a_op, sh.a, "a_copy"), (b_op, sh.b, "b_copy")):
        if not _rows_c(shape, strides) or any(s < 0 for s in strides):
            # a batch axis of stride 0 is one matrix for all its batches: copied once (extent 1 broadcasts too)
            shape = tuple(1 if s == 0 and i < len(shape) - 2 else d for i, (d, s) in enumerate(zip(shape, strides)))
            dev = _c_order(op, shape, strides, stream, name)
            strides = _strided._c_strides(shape)
        else:
            dev = op.dev
        ops.append((dev, shape, strides))
    (da, a_shape, a_str), (db, b_shape, b_str) = ops
    sa = _strided.batch_strides(a_shape, a_str, sh.batch)
    sb = _strided.batch_strides(b_shape, b_str, sh.batch)
    outer, nbz, xa, xb = _strided.collapse(sh.batch, sa, sb)
    es = da.dtype.itemsize
    if nbz == 1 and not outer and cfg.batched == 1:  # one product (a 1-D or transposed operand): the 2-D kernel
        a2 = device_view(da, (m, k), (k * es, es), 0)
        b2 = device_view(db, (k, n), (n * es, es), 0)
        rung.run(cfg, Call(a2, b2, c2d, stream, params))
        return
    for o, idx in enumerate(np.ndindex(*(d[0] for d in outer))):
        oa = sum(i * d[1] for i, d in zip(idx, outer))
        ob = sum(i * d[2] for i, d in zip(idx, outer))
        a3 = device_view(da, (nbz if xa else 1, m, k), (xa * es, k * es, es), oa * es)
        b3 = device_view(db, (nbz if xb else 1, k, n), (xb * es, n * es, es), ob * es)
        c = c2d[o * nbz * m:(o + 1) * nbz * m]
        rung.run_batched(cfg, a3, xa, b3, xb, c, m, n, k, nbz, stream, params)


def _demo(rung: str, dtype, c):
    """The tensor-core rungs: k13 on float32 as TF32, k14 on float16 (their own input types, whatever
    the row's dtype), against a long-double reference with the TF32/FP16 bound."""
    m, n, k = c.shape
    prec, dt = ("tf32", "float32") if rung == "k13_mma_tf32" else ("fp16", "float16")
    a, b = c.rng.standard_normal((m, k)).astype(dt), c.rng.standard_normal((k, n)).astype(dt)
    rdt = ref_dtype()
    ref = a.astype(rdt) @ b.astype(rdt)
    f = mma_error_factor(k, prec, rounds_inputs=prec == "tf32", rounds_output=prec == "fp16")
    bound = (abs(a.astype(rdt)) @ abs(b.astype(rdt))) * (f + 2 * k * float(np.finfo(rdt).eps))
    return numpy_case(f"{m}x{n}x{k} {prec}", lambda: matmul_mma(a, b, precision=prec, config=c.preset), ref, bound)


MMA_HAZARDS = {
    "k13_mma_tf32": ("A warp collective: all 32 lanes must issue each `mma.sync` / `ldmatrix` (no divergence), "
                     "each lane holding exactly its fragment; S cp.async stages with one `wait_group S-2` + "
                     "barrier per tile (a stage is refilled only after every warp read it), and operands rounded "
                     "to TF32 (an opt-in precision)."),
    "k14_mma_bf16": ("`ldmatrix` takes each lane's row address and hands out other lanes' data: every address of "
                     "the warp must be valid and 16-byte aligned, and the XOR swizzle of the copies and of the "
                     "fragment reads must agree."),
}


#: the tensor-core ladder's registration (:mod:`simt_tiles.registry`); its public path is
#: ``simt_tiles.matmul(a, b, precision=...)`` (16-bit inputs, or ``precision="tf32"``), whose
#: aliasing case is matmul's
FAMILY = Family("matmul_mma", MMA_RUNGS, reference, (), _demo, {}, MMA_HAZARDS)
