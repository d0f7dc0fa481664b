"""simt_tiles.tile — the CUDA Tile (cuTile Python, ``cuda.tile``) counterparts.

simt_tiles is the hand-written SIMT baseline; this optional subpackage writes
the same operations in NVIDIA's tile model, where a kernel describes what one
*block* does with whole tiles and the compiler (``tileiras``) chooses threads,
shared memory, tensor-core instructions and pipelining:

=======================  =====================================================
:func:`matmul`           C = A @ B for float32 A, B: ``precision="fp32"``
                         (``ct.mma`` on float32 tiles) or ``"tf32"`` (operands
                         rounded with ``ct.astype(.., ct.tfloat32)``, float32
                         accumulators)
:func:`correlate2d`      ``scipy.ndimage.correlate`` of a 2-D image, origin 0,
                         modes "reflect" and "constant", filters up to 7×7
:func:`softmax`          softmax along the last axis of a 2-D array,
                         max-subtracted
:func:`reduce_sum`       the sum over the last axis: row sums of a 2-D array,
                         the whole sum of a 1-D array
=======================  =====================================================

All take and return float32 CUDA arrays — PyTorch CUDA tensors, CuPy arrays,
or any ``__cuda_array_interface__`` object such as Numba device arrays — and
return the caller's kind (other kinds get Numba device arrays).  Inputs may be
strided (cuTile reads strides); ``out=`` must be C-contiguous.  Results are
asynchronous like any CUDA library call, on ``stream`` (default: the current
stream of the input's library).  Every launcher exposes its tile sizes
(powers of two, cuTile's rule) with H200 defaults (:mod:`._defaults`).

``cuda.tile`` is imported lazily: importing this package never needs it, and
:func:`available` says whether it can be used.  A function called without it
raises :class:`CuTileUnavailableError` (an ImportError) saying what to
install.  Needs: the ``cuda-tile`` package, the CUDA 13.4 ``tileiras``
compiler (with its ``ptxas`` and ``libnvvm``) for sm_90, and a GPU with driver
r580 or later.  :mod:`._aot` compiles every kernel to an sm_90 cubin without
a GPU (``python -m simt_tiles.tile._aot``).

Ragged shapes: every launcher covers the array with whole tiles; loads past
an edge are padded (zeros for matmul and sums, −inf for softmax, the boundary
mode for correlate2d) and stores past an edge are dropped.
"""

from __future__ import annotations

import importlib
import math
import numbers

import numpy as np

from . import _defaults as D
from . import _interop as io
from ._defaults import MAX_FILTER

__all__ = [
    "INSTALL_HINT",
    "MAX_FILTER",
    "MODES",
    "PRECISIONS",
    "CuTileUnavailableError",
    "available",
    "correlate2d",
    "matmul",
    "reduce_sum",
    "require",
    "softmax",
    "version",
]

#: correlate2d's boundary modes (the others are in simt_tiles.correlate2d)
MODES = ("reflect", "constant")
#: matmul's precisions
PRECISIONS = ("fp32", "tf32")

INSTALL_HINT = (
    "simt_tiles.tile needs NVIDIA cuTile Python (import name cuda.tile, PyPI package cuda-tile) "
    "plus the CUDA 13.4 tileiras compiler (with its ptxas and libnvvm) for sm_90, and a GPU with "
    "driver r580+: `pip install cuda-tile` "
    "(or `pip install 'simt-tiles[tile]'`) and CUDA 13.4 tileiras "
    "(`pip install 'cuda-toolkit[tileiras,nvcc,nvvm]==13.4.*'` or a system CUDA 13.4 toolkit)."
)


class CuTileUnavailableError(ImportError):
    """cuda.tile (or its tileiras compiler) is not installed; the message says how to get it."""


_KERNELS = None  # the module simt_tiles.tile._kernels, once loaded


def available() -> bool:
    """True if ``cuda.tile`` can be imported (the compiler and GPU are checked at first launch)."""
    try:
        require()
    except CuTileUnavailableError:
        return False
    return True


def require():
    """Import ``cuda.tile`` and the kernels; raise :class:`CuTileUnavailableError` if missing."""
    global _KERNELS
    if _KERNELS is None:
        try:
            importlib.import_module("cuda.tile")
        except ImportError as exc:
            raise CuTileUnavailableError(f"cuda.tile is not importable ({exc}). {INSTALL_HINT}") from exc
        _KERNELS = importlib.import_module("._kernels", __name__)
    return _KERNELS


def version() -> str | None:
    """cuda.tile's version, or None without it."""
    try:
        return importlib.import_module("cuda.tile").__version__
    except ImportError:
        return None


# ---------------------------------------------------------------------------
# shared launcher pieces
# ---------------------------------------------------------------------------


def _tile_size(name: str, value, default: int) -> int:
    value = default if value is None else value
    if not D.is_pow2(value):
        raise ValueError(f"{name}: expected a power of two >= 1 (cuTile tile dimensions are powers of two); "
                         f"got {value!r}")
    return value


def _launch(stream, grid, kernel, args, like) -> None:
    import cuda.tile as ct

    if math.prod(grid) == 0:
        return
    try:
        with io.device_context(like):
            ct.launch(stream, grid, kernel, args)
    except FileNotFoundError as exc:  # cuda.tile found no tileiras
        if "tileiras" in str(exc):
            raise CuTileUnavailableError(f"{exc}. {INSTALL_HINT}") from exc
        raise


def _fill(out: io.Operand, value: float, stream, like) -> None:
    """out[...] = value, through a 2-D view (cuTile's fill kernel)."""
    K = require()
    assert out.ndim == 2, out.shape
    rows, cols = out.shape
    bm, bn = min(32, D.next_pow2(rows)), min(128, D.next_pow2(cols))
    grid = (math.ceil(rows / bm) * math.ceil(cols / bn),)
    _launch(stream, grid, K.fill2d, (out.dev, float(value), bm, bn), like)


def _result(out, new: io.Operand | None):
    return out if new is None else new.dev


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------


def matmul(a, b, *, precision="fp32", out=None, block_m=None, block_n=None, block_k=None, group_m=None,
           stream=None):
    """C = A @ B for float32 A (M×K) and B (K×N), on the GPU with cuTile.

    precision
        ``"fp32"``: ``ct.mma`` on float32 tiles (tileiras 13.4 lowers it to
        FMUL + FADD for sm_90: the classic float32 dot-product error bound
        γ_K·|A|·|B| holds).  ``"tf32"``: both operand tiles are rounded to
        tf32 (``ct.astype(t, ct.tfloat32)``, round to nearest even, unit
        roundoff 2⁻¹¹) and multiplied on the tensor cores (wgmma) with float32
        accumulators.
    block_m, block_n, block_k
        The output tile (BM×BN) and K step (BK); powers of two.  Defaults
        per precision in :data:`simt_tiles.tile._defaults.MATMUL_TILES`.
    group_m
        Tile-rows per group in the block order (L2 reuse); a positive int.
    out
        Optional M×N float32 C-contiguous array, not overlapping A or B.

    K = 0 gives zeros; M = 0 or N = 0 an empty result.
    """
    K = require()
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}; got {precision!r}")
    bm0, bn0, bk0, g0 = D.matmul_tiles(precision)
    bm = _tile_size("block_m", block_m, bm0)
    bn = _tile_size("block_n", block_n, bn0)
    bk = _tile_size("block_k", block_k, bk0)
    g = g0 if group_m is None else group_m
    if not isinstance(g, int) or isinstance(g, bool) or g < 1:
        raise ValueError(f"group_m: expected a positive int; got {g!r}")
    A = io.operand(a, "a", ndims=(2,))
    B = io.operand(b, "b", ndims=(2,))
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"a @ b: a is {A.shape[0]}×{A.shape[1]} and b is {B.shape[0]}×{B.shape[1]}; "
                         f"expected a.shape[1] == b.shape[0]")
    io.same_device(A, B)
    m, k = A.shape
    n = B.shape[1]
    s = io.default_stream(A, stream)
    C = io.check_out(out, (m, n), [A, B]) if out is not None else None
    new = None
    if C is None:
        C = new = io.empty(A, (m, n), np.float32, s)
    if m and n:
        if k == 0:
            _fill(C, 0.0, s, A)
        else:
            grid = (math.ceil(m / bm) * math.ceil(n / bn),)
            _launch(s, grid, K.matmul, (A.dev, B.dev, C.dev, bm, bn, bk, g, precision == "tf32"), A)
    return _result(out, new)


# ---------------------------------------------------------------------------
# correlate2d
# ---------------------------------------------------------------------------


def correlate2d(image, weights, mode="reflect", cval=0.0, *, out=None, tile_h=None, tile_w=None,
                fast_interior=True, stream=None):
    """``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval)`` for a
    2-D float32 image, origin 0, with cuTile.

    ``out[i, j] = Σ_a Σ_b weights[a, b] · ext(image)[i + a − KH//2, j + b − KW//2]``

    image
        2-D float32 CUDA array, any size (ragged edges are handled).
    weights
        2-D float32, 1×1 up to :data:`MAX_FILTER` × :data:`MAX_FILTER` (7×7;
        even sizes too).  A CUDA array, or a NumPy array (copied for you).
        Larger filters: use :func:`simt_tiles.correlate2d` (any size).
    mode
        ``"reflect"`` (d c b a | a b c d | d c b a; the image may be smaller
        than the filter) or ``"constant"`` (``cval`` outside the image).  The
        other scipy modes are in :func:`simt_tiles.correlate2d`.
    cval
        The value outside the image for ``"constant"``, rounded to float32 once.
    tile_h, tile_w
        Output tile per block (powers of two; default 32×64).
    fast_interior
        Blocks whose halo lies inside the image read each shifted tile with a
        rectangular ``ct.load``; border blocks always gather through the
        boundary mapping.  False: every block gathers (for testing).
    """
    K = require()
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES} (scipy.ndimage names; the other modes are in "
                         f"simt_tiles.correlate2d); got {mode!r}")
    if not isinstance(cval, numbers.Real) or isinstance(cval, bool):
        raise TypeError(f"cval: expected a real number; got {cval!r}")
    th = _tile_size("tile_h", tile_h, D.CORRELATE_TILE[0])
    tw = _tile_size("tile_w", tile_w, D.CORRELATE_TILE[1])
    X = io.operand(image, "image", ndims=(2,))
    s = io.default_stream(X, stream)
    host_weights = isinstance(weights, np.ndarray)
    if host_weights:  # small: copied to the device for the caller
        if weights.ndim != 2:
            raise ValueError(f"weights: expected a 2-D array; got {weights.ndim}-D with shape {weights.shape}")
        if weights.dtype != np.float32:
            raise TypeError(f"weights: expected dtype float32; got {weights.dtype}")
        kh, kw = weights.shape
    else:
        W = io.operand(weights, "weights", ndims=(2,))
        kh, kw = W.shape
    if not (1 <= kh <= MAX_FILTER and 1 <= kw <= MAX_FILTER):
        raise ValueError(f"weights: expected a filter from 1×1 to {MAX_FILTER}×{MAX_FILTER}; got "
                         f"{kh}×{kw} (simt_tiles.correlate2d takes any size)")
    if host_weights:
        W = io.as_kind(weights, X, "weights", s)
    io.same_device(X, W)
    h, w = X.shape
    O = io.check_out(out, (h, w), [X, W]) if out is not None else None
    new = None
    if O is None:
        O = new = io.empty(X, (h, w), np.float32, s)
    grid = (math.ceil(h / th) * math.ceil(w / tw),)
    code = K.MODE_REFLECT if mode == "reflect" else K.MODE_CONSTANT
    _launch(s, grid, K.correlate2d,
            (X.dev, W.dev, O.dev, float(cval), th, tw, kh, kw, code, bool(fast_interior)), X)
    return _result(out, new)


# ---------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------


def softmax(x, *, out=None, block_rows=None, block_cols=None, single_pass_max=None, stream=None):
    """``scipy.special.softmax(x, axis=-1)`` for a 2-D float32 array, with cuTile.

    Numerically stable: each row's maximum is subtracted before ``exp``.
    Rows of up to ``single_pass_max`` columns (default 8192) are read once:
    ``block_rows`` rows per block as one tile padded to a power of two (−inf
    padding; default: 8192 elements per block, at most 64 rows).  Longer rows
    take two passes (online max/sum, then write) over tiles of
    ``block_rows`` (default 1) × ``block_cols`` (default 4096) columns.
    NaN in a row makes the row NaN; a row of −inf gives NaN, as scipy.
    """
    K = require()
    X = io.operand(x, "x", ndims=(2,))
    limit = _tile_size("single_pass_max", single_pass_max, D.SOFTMAX_SINGLE_PASS_MAX)
    m, n = X.shape
    s = io.default_stream(X, stream)
    Y = io.check_out(out, (m, n), [X]) if out is not None else None
    new = None
    if Y is None:
        Y = new = io.empty(X, (m, n), np.float32, s)
    padded = D.next_pow2(n)
    if padded <= limit:
        bm = _tile_size("block_rows", block_rows, min(D.softmax_rows(padded), D.next_pow2(m)))
        _tile_size("block_cols", block_cols, 1)  # validated; the single-tile path uses the padded row
        kernel, bn = K.softmax_tile, padded
    else:
        bm = _tile_size("block_rows", block_rows, D.SOFTMAX_ONLINE_ROWS)
        bn = _tile_size("block_cols", block_cols, D.SOFTMAX_ONLINE_COLS)
        kernel = K.softmax_online
    if m and n:
        _launch(s, (math.ceil(m / bm),), kernel, (X.dev, Y.dev, bm, bn), X)
    return _result(out, new)


# ---------------------------------------------------------------------------
# reduce_sum
# ---------------------------------------------------------------------------


def reduce_sum(x, *, out=None, accumulate="float64", block_rows=None, block_cols=None, split=None,
               stream=None):
    """The sum over the last axis of a float32 array, with cuTile:
    ``numpy.sum(x, axis=-1)`` — row sums (shape (M,)) of a 2-D array, the
    whole sum (shape ()) of a 1-D array.  Results are float32.

    accumulate
        ``"float64"`` (default; like :func:`simt_tiles.reduce`: float64
        partial sums, one final rounding) or ``"float32"``.
    block_rows, block_cols
        The (rows × columns) tile a block adds per step (powers of two;
        default 4 × 1024, rows 1 for a 1-D array).
    split
        Blocks sharing one row tile's columns.  >1 writes partial sums that a
        second launch folds (two launches, deterministic; no atomics).
        Default: enough blocks to fill the H200 (about 4 per SM).
    Empty rows sum to 0.
    """
    K = require()
    if accumulate not in ("float64", "float32"):
        raise ValueError(f"accumulate: expected 'float64' or 'float32'; got {accumulate!r}")
    X = io.operand(x, "x", ndims=(1, 2))
    s = io.default_stream(X, stream)
    one_d = X.ndim == 1
    res_shape = () if one_d else (X.shape[0],)
    R = io.check_out(out, res_shape, [X]) if out is not None else None
    new = None
    if R is None:
        R = new = io.empty(X, res_shape, np.float32, s)
    X2 = io.reshaped(X, (1, X.shape[0])) if one_d else X
    m, n = X2.shape
    R2 = io.reshaped(R, (m, 1), "out")
    bm = _tile_size("block_rows", block_rows, 1 if m == 1 else min(D.SUM_TILE[0], D.next_pow2(m)))
    bn = _tile_size("block_cols", block_cols, min(D.SUM_TILE[1], D.next_pow2(n)))
    row_tiles, col_tiles = math.ceil(m / bm), math.ceil(n / bn)
    if split is None:
        split = max(1, min(col_tiles, math.ceil(D.SUM_TARGET_BLOCKS / max(row_tiles, 1))))
    elif not isinstance(split, int) or isinstance(split, bool) or not 1 <= split <= 65535:
        raise ValueError(f"split: expected an int from 1 to 65535 (the grid's y limit); got {split!r}")
    acc64 = accumulate == "float64"
    if m == 0:
        pass
    elif n == 0:
        _fill(R2, 0.0, s, X)
    elif split == 1:
        _launch(s, (row_tiles, 1), K.sum_rows, (X2.dev, R2.dev, bm, bn, acc64), X)
    else:
        partials = io.empty(X, (m, split), np.float64 if acc64 else np.float32, s, name="partials")
        _launch(s, (row_tiles, split), K.sum_rows, (X2.dev, partials.dev, bm, bn, acc64), X)
        bn2 = min(bn, D.next_pow2(split))
        _launch(s, (row_tiles, 1), K.sum_rows, (partials.dev, R2.dev, bm, bn2, acc64), X)
    return _result(out, new)
