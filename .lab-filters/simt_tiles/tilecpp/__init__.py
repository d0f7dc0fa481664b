"""simt_tiles.tilecpp — the CUDA Tile C++ counterparts of the SIMT kernels.

The same operations written in CUDA Tile C++ (``cuda_tile.h``, ``__tile_global__``, CUDA
13.3+): a kernel says what one block does with whole tiles and ``tileiras`` picks the threads,
shared memory and tensor-core instructions.  The sources are short on purpose (:data:`SOURCES`:
compare their lines with the SIMT ladders'):

=======================  ===========================================================
:func:`matmul`           C = A @ B, ``precision="fp32"`` (float32 products, no tensor
                         cores) or ``"tf32"`` (operand tiles rounded to tf32, wgmma)
:func:`correlate2d`      ``scipy.ndimage.correlate`` of a 2-D image, origin 0, any
                         filter size, every scipy mode (:data:`MODES`)
:func:`softmax`          softmax along the rows of a 2-D array (max-subtracted)
:func:`reduce_sum`       the whole sum, or the sums along the last axis (float64
                         accumulation, one rounding)
:func:`vector_add`       c = a + b (1-D)
:func:`bias_relu`        y = max(x + bias, 0) (NaN kept)
=======================  ===========================================================

Arrays: float32 only; NumPy arrays (copied to the device, the result comes back as NumPy),
Numba device arrays, CuPy arrays, PyTorch CUDA tensors or any ``__cuda_array_interface__``
/ DLPack producer — the operand model of :mod:`simt_tiles.interop`, as the SIMT functions
(device arrays C-contiguous; ``out=`` of the result's shape and dtype, sharing no memory with
the inputs).  Work is queued on the legacy default stream, asynchronous for device arrays.

Running needs an NVIDIA GPU (sm_90 cubins: Hopper) with driver r580+, ``cuda.core`` (installed
with ``numba-cuda[cu13]``) and the cubins: ``simt-tiles tilecpp build`` compiles them on any
machine with the CUDA 13.3+ toolchain (``pip install 'simt-tiles[tilecpp]'`` and g++ 10+);
a first call builds them when the toolchain is there.  :func:`available` says whether
everything is in place, and why not.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

import numpy as np

from .. import interop as io
from . import _build, _launch
from ._build import INSTALL_HINT, ToolchainError

__all__ = [
    "INSTALL_HINT",
    "MODES",
    "PRECISIONS",
    "SHARED_HEADERS",
    "SOURCES",
    "TilecppUnavailableError",
    "available",
    "bias_relu",
    "build",
    "correlate2d",
    "matmul",
    "reduce_sum",
    "softmax",
    "vector_add",
]

#: operation -> its CUDA Tile C++ source
SOURCES: dict[str, Path] = {
    op: _build.SRC_DIR / f"{stem}.cu"
    for op, stem in (("matmul", "matmul"), ("correlate2d", "correlate2d"), ("softmax", "softmax"),
                     ("reduce_sum", "reduce_sum"), ("vector_add", "vector_add"), ("bias_relu", "bias_relu"))
}
#: the header every source includes (src/aligned.cuh: the 16-byte alignment promises of the
#: "_a16" instantiations); count it once when comparing lines of kernel code
SHARED_HEADERS: tuple[Path, ...] = tuple(sorted(_build.SRC_DIR.glob("*.cuh")))
#: correlate2d's boundary modes (scipy.ndimage's names); their codes in correlate2d.cu
MODES = ("reflect", "constant", "nearest", "mirror", "wrap")
PRECISIONS = ("fp32", "tf32")

_INT32_MAX = 2**31 - 1
_SUM_BLOCKS = 4 * 132  # sum_partials' grid: 4 blocks per SM of an H200
_TILE = {"softmax_short": 16, "softmax_mid": 4, "softmax_long": 1, "sum_rows": 4, "vector_add": 4096, "bias_relu": (16, 256),
         "matmul_fp32": (64, 64), "matmul_tf32": (128, 128), "correlate2d": (32, 64)}  # as in the sources


class TilecppUnavailableError(RuntimeError):
    """The cubins cannot be had (no toolchain to build them) or cannot run here (no GPU)."""


def build(force: bool = False, verbose: bool = False) -> Path:
    """Compile the sources into the cache folder (only what changed, unless ``force``) and
    return it.  Needs the toolchain, not a GPU; :class:`ToolchainError` says what to install."""
    return _build.build(force=force, verbose=verbose)


def _cubin_dir() -> Path:
    found = _build.built_dir()
    if found is not None:
        return found
    try:
        return _build.build()
    except ToolchainError as exc:
        raise TilecppUnavailableError(f"no built cubins and cannot build them: {exc}") from exc


def available() -> tuple[bool, str]:
    """``(True, "")`` when the counterparts can run here, else ``(False, why)``."""
    try:
        import cuda.core  # noqa: F401
        from cuda.bindings import driver
    except ImportError as exc:
        return False, f"cuda.core is not importable ({exc}): pip install 'numba-cuda[cu13]'"
    if _build.built_dir() is None:
        try:
            _build.toolchain()
        except ToolchainError as exc:
            return False, f"no built cubins, and {exc}"
    try:
        err, = driver.cuInit(0)
    except Exception as exc:  # noqa: BLE001 - cuda.pathfinder finds no libcuda: no driver installed
        return False, f"no NVIDIA driver ({type(exc).__name__}: {exc})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return False, f"no usable CUDA driver or GPU (cuInit: {err.name})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return False, "no CUDA GPU"
    err, major = driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, driver.CUdevice(0))
    if major != 9:
        return False, f"the cubins are built for sm_90 (Hopper); this GPU is compute capability {major}.x"
    return True, ""


# ---------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------


def _float32(op: io.Operand) -> io.Operand:
    if op.dtype != np.float32:
        raise TypeError(f"{op.name}: expected dtype float32 (the Tile C++ counterparts are float32); got {op.dtype}")
    return op


def _operand(x, name: str, ndim: int | None) -> io.Operand:
    op = _float32(io.device_operand(x, name, ndim=ndim))
    if op.size > _INT32_MAX:
        raise ValueError(f"{name}: expected fewer than 2**31 elements (the kernels index with int); got {op.size}")
    return op


#: launch the "_a16" instantiations where the operands allow.  Off by default until a GPU pass
#: has checked them: they read through TMA descriptors that tileiras hoists into the parameter
#: bank (the cubin's bank is larger than the parameters), and only a run shows whether a
#: cuda.core launch gets them filled.  ``benchmarks/lab/tilecpp_gpu.py`` checks and times both.
USE_ALIGNED = False


def _variant(kernel: str, ptrs, lengths) -> str:
    """``kernel``, or its ``_a16`` instantiation when every pointer is 16-byte aligned and every
    row length a multiple of 4 floats (what its ``ct::assume_*`` promise tileiras)."""
    if USE_ALIGNED and all(p % 16 == 0 for p in ptrs) and all(n % 4 == 0 for n in lengths):
        return f"{kernel}_a16"
    return kernel


def _launch_op(kernel: str, grid, *args) -> None:
    stem = _launch.SIGNATURES[kernel][0]
    _launch.launch(_build.cubin_path(_cubin_dir(), stem), kernel, tuple(int(g) for g in grid), *args)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _finish(out: io.Operand):
    result = io.finish_result(out)
    if isinstance(result, np.ndarray) and result.shape == ():
        return result[()]  # a NumPy scalar, as NumPy's sum
    return result


# ---------------------------------------------------------------------------
# the operations
# ---------------------------------------------------------------------------


def matmul(a, b, *, out=None, precision="fp32"):
    """C = A @ B for 2-D float32 A (M, K) and B (K, N).

    precision
        ``"fp32"``: float32 products and sums (the dot-product bound γ_K·|A|·|B| holds);
        ``"tf32"``: both operand tiles rounded to tf32 (10-bit mantissa) and multiplied on
        the tensor cores, float32 accumulation.
    K = 0 gives zeros.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}; got {precision!r}")
    A, B = _operand(a, "a", 2), _operand(b, "b", 2)
    (m, k), (kb, n) = A.shape, B.shape
    if kb != k:
        raise ValueError(f"b: expected {k} rows (a is {m}×{k}); got {kb}×{n}")
    C = io.prepare_out(out, A, (m, n), np.float32, inputs=(B,))
    if m and n:
        bm, bn = _TILE[f"matmul_{precision}"]
        kernel = _variant(f"matmul_{precision}", (A.ptr, B.ptr, C.ptr), (n, k))
        _launch_op(kernel, (_cdiv(m, bm) * _cdiv(n, bn),), A.ptr, B.ptr, C.ptr, m, n, k)
    return _finish(C)


def correlate2d(image, weights, *, mode="reflect", cval=0.0, out=None):
    """``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval)`` for a 2-D float32
    image, origin 0: ``out[i, j] = Σ_a Σ_b w[a, b]·ext(image)[i + a − KH//2, j + b − KW//2]``.

    weights
        2-D float32, any size from 1×1 (larger than the image too); taps with
        ``|w| <= 2**-52`` are skipped, as scipy does.
    mode
        Any of :data:`MODES`.  Each block gathers its shifted tiles through index tiles folded
        by the mode — Tile C++ expresses all five; only "constant" with ``cval`` 0 could
        also use the rectangular (TMA) loads, whose padding is 0, −0, ±inf or NaN.
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}; got {mode!r}")
    if not isinstance(cval, numbers.Real) or isinstance(cval, bool):
        raise TypeError(f"cval: expected a real number; got {cval!r}")
    X, W = _operand(image, "image", 2), _operand(weights, "weights", 2)
    (h, wd), (kh, kw) = X.shape, W.shape
    if kh < 1 or kw < 1:
        raise ValueError(f"weights: expected at least 1×1; got {kh}×{kw}")
    if 2 * (h + kh) > _INT32_MAX or 2 * (wd + kw) > _INT32_MAX:
        raise ValueError(f"image: expected extents whose folded coordinates fit an int; got {h}×{wd}")
    O = io.prepare_out(out, X, (h, wd), np.float32, inputs=(W,))
    th, tw = _TILE["correlate2d"]
    if h and wd:
        if _cdiv(h, th) > 65535:
            raise ValueError(f"image: expected at most {65535 * th} rows (the grid's y limit); got {h}")
        _launch_op("correlate2d", (_cdiv(wd, tw), _cdiv(h, th)), X.ptr, W.ptr, O.ptr, h, wd, kh, kw,
                   MODES.index(mode), float(np.float32(cval)))
    return _finish(O)


def softmax(x, *, out=None):
    """``scipy.special.softmax(x, axis=-1)`` for a 2-D float32 array: each row's maximum is
    subtracted before ``exp``.  A block takes 16 rows of up to 128 columns, 4 rows of up to
    1024, or one longer row in 4096-column tiles: an online max and sum, then a second pass."""
    X = _operand(x, "x", 2)
    m, n = X.shape
    Y = io.prepare_out(out, X, (m, n), np.float32)
    if m and n:
        kernel = "softmax_short" if n <= 128 else "softmax_mid" if n <= 1024 else "softmax_long"
        grid = (_cdiv(m, _TILE[kernel]),)
        _launch_op(_variant(kernel, (X.ptr, Y.ptr), (n,)), grid, X.ptr, Y.ptr, m, n)
    return _finish(Y)


def reduce_sum(x, *, axis=None, out=None):
    """``numpy.sum(x, axis=axis)`` for a float32 array (result float32): ``axis=None`` the
    whole sum (shape ()), ``axis=-1`` the sums along the last axis.  float64 accumulation,
    one rounding to float32; empty sums are 0."""
    X = _operand(x, "x", None)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, numbers.Integral)):
        raise TypeError(f"axis: expected None or an int; got {axis!r}")
    if axis is not None and axis not in (-1, X.ndim - 1):
        raise ValueError(f"axis: expected None or the last axis (-1 or {X.ndim - 1}); got {axis!r}")
    if axis is None:
        R = io.prepare_out(out, X, (), np.float32)
        n = X.size
        blocks = min(_cdiv(n, _TILE["vector_add"]), _SUM_BLOCKS)  # 4096-element tiles, as vector_add's
        partials = None
        if blocks:
            from numba import cuda

            partials = cuda.device_array(blocks, np.float64)
            _launch_op(_variant("sum_partials", (X.ptr,), (n,)), (blocks,), X.ptr, io.layout_of(partials).ptr, n)
        _launch_op("sum_rows_f64", (1,), io.layout_of(partials).ptr if blocks else 0, R.ptr, 1, blocks)
        return _finish(R)
    rows, n = math.prod(X.shape[:-1]), X.shape[-1]
    R = io.prepare_out(out, X, X.shape[:-1], np.float32)
    if rows:
        _launch_op(_variant("sum_rows_f32", (X.ptr,), (n,)), (_cdiv(rows, _TILE["sum_rows"]),), X.ptr, R.ptr, rows, n)
    return _finish(R)


def vector_add(a, b, *, out=None):
    """c = a + b for 1-D float32 arrays of one length (0 too)."""
    A, B = _operand(a, "a", 1), _operand(b, "b", 1)
    if B.shape != A.shape:
        raise ValueError(f"b: expected shape {A.shape} (the shape of a); got {B.shape}")
    C = io.prepare_out(out, A, A.shape, np.float32, inputs=(B,))
    if A.size:
        kernel = _variant("vector_add", (A.ptr, B.ptr, C.ptr), (A.size,))
        _launch_op(kernel, (_cdiv(A.size, _TILE["vector_add"]),), A.ptr, B.ptr, C.ptr, A.size)
    return _finish(C)


def bias_relu(x, bias, *, out=None):
    """y = max(x + bias, 0) for float32 x (M, N) and bias (N,); NaN stays NaN."""
    X, Bv = _operand(x, "x", 2), _operand(bias, "bias", 1)
    m, n = X.shape
    if Bv.shape != (n,):
        raise ValueError(f"bias: expected shape ({n},) (x has {n} columns); got {Bv.shape}")
    Y = io.prepare_out(out, X, (m, n), np.float32, inputs=(Bv,))
    if m and n:
        bm, bn = _TILE["bias_relu"]
        kernel = _variant("bias_relu", (X.ptr, Bv.ptr, Y.ptr), (n,))
        _launch_op(kernel, (_cdiv(m, bm) * _cdiv(n, bn),), X.ptr, Bv.ptr, Y.ptr, m, n)
    return _finish(Y)
