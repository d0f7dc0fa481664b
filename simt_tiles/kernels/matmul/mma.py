"""Tensor-core matmul: ``matmul_mma(a, b, precision=...)`` on the mma.sync rungs (k13 TF32, k14 BF16/FP16).

check → choose → launch, as the FP32 ladder's ``matmul``:

* **precision** is explicit for float32 inputs (``"tf32"``: operands rounded to 10 mantissa
  bits, FP32 accumulation) — the FP32 default never changes precision silently, so
  ``precision=None`` on float32 is a ValueError pointing at ``simt_tiles.matmul``.  bfloat16 and
  float16 inputs imply ``"bf16"`` / ``"fp16"``; the result has the inputs' dtype (torch's rule),
  accumulated in FP32 and rounded once.
* **arrays**: float32 as :mod:`simt_tiles.interop` takes them; 16-bit from PyTorch
  (``torch.bfloat16``/``float16`` CUDA tensors), CuPy (``float16``), Numba device arrays
  (``float16``) and NumPy (``float16``, or ``ml_dtypes.bfloat16``), all C-contiguous.
* **any M, N, K**: the kernels copy 16-byte chunks, so a row of A or B that is not a multiple of
  16 bytes long (or an unaligned base) is first copied into a zero-padded workspace; edges of
  the block grid are the copies' zero-fill; C is stored element by element with bounds checks.
"""

from __future__ import annotations

import numpy as np

from ...interop import as_stream, check_no_overlap, device_operand, finish_result, prepare_out
# the 16-bit operands' recognition and their uint16 bits (shared with softmax's 16-bit path)
from ...interop import dtype_name as _dtype_name, finish16 as _finish16, operand16 as _operand16, out16 as _out16
from ...bounds import mma_error_factor, ref_dtype
from ...launch import planned
from ...registry import Family, numpy_case
from ...runtime import SIMULATOR, cdiv
from . import k13_mma_tf32, k14_mma_bf16, reference
from ._common import Call

__all__ = ["MMA_RUNGS", "matmul_mma", "PRECISIONS", "choose_config", "LARGE_TILES"]

MMA_RUNGS = {r.name: r for r in (k13_mma_tf32.RUNG, k14_mma_bf16.RUNG)}
PRECISIONS = ("tf32", "bf16", "fp16")
#: the rung each precision runs
RUNG_FOR = {"tf32": "k13_mma_tf32", "bf16": "k14_mma_bf16", "fp16": "k14_mma_bf16"}
#: ``config=None`` takes the "large" preset (128×256 TF32, 256×128 BF16/FP16) when the grid has at
#: least this many of its tiles, two per SM of the H200: measured faster at 512-2048 such tiles,
#: slower at 36 (1031×997×1013), where the "default" 128×128 tile fills more SMs (benchmarks/notes/mma.md)
LARGE_TILES = 2 * 132


def choose_config(rung, config, m: int, n: int, simulator: bool = SIMULATOR):
    """The caller's config, else "sim" in the simulator, else "large" on grids of ≥ LARGE_TILES of
    its tiles, else "default"."""
    if config is not None or simulator:
        return rung.resolve_config(config)
    large = rung.presets["large"]
    return large if cdiv(m, large.bm) * cdiv(n, large.bn) >= LARGE_TILES else rung.presets["default"]


def _precision_for(dtype_name: str, precision):
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS} or None; got {precision!r}")
    implied = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype_name)
    if dtype_name == "float32":
        if precision != "tf32":
            raise ValueError(
                f"precision: float32 inputs need precision='tf32' (tensor cores round the operands to "
                f"10 mantissa bits); for full float32 use simt_tiles.matmul; got {precision!r}")
        return "tf32"
    if implied is None:
        raise TypeError(f"a: expected float32 (with precision='tf32'), bfloat16 or float16; got {dtype_name}")
    if precision not in (None, implied):
        raise ValueError(f"precision: {dtype_name} inputs compute in {implied!r}; got {precision!r}")
    return implied


@planned  # repeated calls replay their launches, the padding copies included; on its arrays' device
def matmul_mma(a, b, *, precision=None, out=None, variant=None, config=None, stream=None):
    """C = A @ B on the tensor cores (``mma.sync``), FP32 accumulation.

    a, b
        2-D arrays of one dtype: float32 (needs ``precision="tf32"``), bfloat16 or float16;
        NumPy (copied; the result comes back as NumPy), Numba, CuPy or PyTorch CUDA arrays
        (used in place, C-contiguous; the result is of ``a``'s kind).
    precision
        ``"tf32"`` for float32; None or the implied ``"bf16"``/``"fp16"`` for 16-bit inputs.
    out
        Optional C-contiguous (M, N) array of the inputs' dtype, not overlapping them.
    variant, config
        A rung of :data:`MMA_RUNGS` (None: the precision's) and a preset name or its Config
        (None: :func:`choose_config`'s: ``"large"`` on large grids, else ``"default"``; the
        simulator's ``"sim"``).
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
        a_op = device_operand(a, "a", ndim=2, stream=stream)
        b_op = device_operand(b, "b", ndim=2, stream=stream)
    else:
        if getattr(a, "ndim", None) != 2 or getattr(b, "ndim", None) != 2:
            raise ValueError(f"a, b: expected 2-D arrays; got {getattr(a, 'ndim', None)}-D and {getattr(b, 'ndim', None)}-D")
        a_op, b_op = _operand16(a, "a", stream), _operand16(b, "b", stream)
    (m, k), (kb, n) = a_op.dev.shape, b_op.dev.shape
    if kb != k:
        raise ValueError(f"b: expected shape ({k}, N) since a has shape {(m, k)} "
                         f"(inner dimensions must match); got {(kb, n)}")
    cfg = choose_config(rung, config, m, n)
    if prec == "tf32":
        c_op = prepare_out(out, a_op, (m, n), np.float32, stream, inputs=(b_op,))
    else:
        c_op = _out16(out, a_op, (m, n), stream)
        check_no_overlap(c_op, (a_op, b_op))  # prepare_out's rule (the FP32 path): no out that is an input
    if m and n:
        rung.run(cfg, Call(a_op.dev, b_op.dev, c_op.dev, stream, {} if prec == "tf32" else {"precision": prec}))
    return finish_result(c_op, stream) if prec == "tf32" else _finish16(c_op, a_op, stream)


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
