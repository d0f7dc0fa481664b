"""The matmul group's peers (``simt_tiles.bench.peers``): cuBLAS and torch in FP32 and TF32, and cuTile.

cuBLAS FP32 comes first: it is the baseline every matmul row is divided by.  Triton FP32
(``triton_peers.py``, when Triton is installed) is the other FP32 peer.  The TF32 rows are context (tensor cores, 10-bit mantissas), labelled ``tf32`` and checked against
the TF32 bound, never used as the baseline.
"""

from __future__ import annotations

import contextlib

from .. import tile
from . import triton_peers
from .peers import has, peer


def _tile_available() -> bool:
    try:
        return tile.available()
    except Exception:  # noqa: BLE001  (cuda.tile or its toolchain missing)
        return False


@peer("matmul", "cuBLAS", available=has("cupy"), context=False)
def cublas_fp32(a, b, c):
    import cupy as cp

    cp.matmul(a, b, out=c)


def _triton_matmul(precision="fp32"):
    """``simt_tiles.bench.triton_peers.triton_matmul(precision)``'s function, or None (no Triton)."""
    return triton_peers.triton_matmul(precision)[0]


@peer("matmul", "Triton FP32", available=lambda: has("triton")() and _triton_matmul() is not None, context=False)
def triton_fp32(a, b, c):
    """Triton's FP32 matmul (``tl.dot(..., input_precision="ieee")``: the same arithmetic as the rungs)."""
    _triton_matmul()(_torch(a), _torch(b), _torch(c))


@peer("matmul", "Triton TF32", available=lambda: has("triton")() and _triton_matmul("tf32") is not None,
      precision="tf32")
def triton_tf32(a, b, c):
    """Triton's matmul with ``input_precision="tf32"`` (tensor cores; context, never the baseline)."""
    _triton_matmul("tf32")(_torch(a), _torch(b), _torch(c))


_views: dict = {}


def _torch(x):
    """A zero-copy torch view of a CuPy array (cached: the same buffers are timed again and again)."""
    import torch

    key = (x.data.ptr, x.shape)
    if key not in _views:
        _views[key] = (x, torch.as_tensor(x, device="cuda"))  # keep x alive beside its view
    return _views[key][1]


@contextlib.contextmanager
def _torch_tf32(on: bool):
    import torch

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


@peer("matmul", "torch.matmul", available=has("torch"))
def torch_fp32(a, b, c):
    import torch

    with _torch_tf32(False):
        torch.matmul(_torch(a), _torch(b), out=_torch(c))


@peer("matmul", "torch.matmul TF32", available=has("torch"), precision="tf32")
def torch_tf32(a, b, c):
    import torch

    with _torch_tf32(True):
        torch.matmul(_torch(a), _torch(b), out=_torch(c))


def _cupy_tf32_switch() -> bool:
    try:
        from cupy._core import _routines_linalg as lin  # CuPy's switch behind CUPY_TF32

        return hasattr(lin, "set_compute_type")
    except ImportError:
        return False


@peer("matmul", "cuBLAS TF32", available=_cupy_tf32_switch, precision="tf32")
def cublas_tf32(a, b, c):
    import cupy as cp
    import numpy as np
    from cupy._core import _routines_linalg as lin

    lin.set_compute_type(np.float32, lin.COMPUTE_TYPE_TF32)
    try:
        cp.matmul(a, b, out=c)
    finally:
        lin.set_compute_type(np.float32, lin.COMPUTE_TYPE_DEFAULT)


@peer("matmul", "cuTile FP32", available=_tile_available, kind="tile")
def cutile_fp32(a, b, c):
    tile.matmul(a, b, precision="fp32", out=c)


@peer("matmul", "cuTile TF32", available=_tile_available, kind="tile", precision="tf32")
def cutile_tf32(a, b, c):
    tile.matmul(a, b, precision="tf32", out=c)
