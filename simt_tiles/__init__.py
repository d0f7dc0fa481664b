"""simt_tiles — hand-tiled CUDA SIMT kernels written with Numba.

Every kernel is a factory taking its tile sizes, ships ``"sim"`` (tiny tiles,
for Numba's CUDA simulator) and ``"default"`` (the GPU) presets, and is
checked against a NumPy reference.

Numba picks the real GPU or its simulator once, when ``numba.cuda`` is first
imported, from ``NUMBA_ENABLE_CUDASIM``.  Importing this package does not
import Numba yet (the public names load on first use), so the command line
(``simt-tiles`` / ``python -m simt_tiles``) can choose the simulator when no
GPU is present.  In your own programs without a GPU, set
``NUMBA_ENABLE_CUDASIM=1`` before importing Numba or using simt_tiles.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (loaded on first access, PEP 562)
_PUBLIC = {
    "matmul": ".kernels.matmul",
    "MATMUL_VARIANTS": ".kernels.matmul",
    "softmax": ".kernels.softmax",
    "log_softmax": ".kernels.softmax",
    "SOFTMAX_VARIANTS": ".kernels.softmax",
    "reduce": ".kernels.reduce",
    "REDUCE_OPS": ".kernels.reduce",
    "vector_add": ".kernels.elementwise",
    "bias_relu": ".kernels.elementwise",
    "VECTOR_ADD_VARIANTS": ".kernels.elementwise",
    "correlate2d": ".kernels.conv2d",
    "convolve2d": ".kernels.conv2d",
    "CONV2D_VARIANTS": ".kernels.conv2d",
    "correlate1d": ".kernels.conv2d",
    "correlate_separable": ".kernels.conv2d",
    "SEPARABLE_VARIANTS": ".kernels.conv2d",
    "conv2d_nchw": ".kernels.conv_nchw",
    "CONV_NCHW_VARIANTS": ".kernels.conv_nchw",
    "SIMULATOR": ".runtime",
    "ConfigError": ".runtime",
    "warm": ".warm",
}

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str):
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'simt_tiles' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(__all__)


def _racecheck_from_environment() -> None:
    """``SIMT_TILES_RACECHECK=1`` with the simulator chosen: race-check every simulated launch
    (:func:`simt_tiles.analyze.enable_racecheck`); nothing otherwise (Numba is not imported)."""
    import os

    def on(name):
        return os.environ.get(name, "") not in ("", "0")

    if on("SIMT_TILES_RACECHECK") and on("NUMBA_ENABLE_CUDASIM"):
        from . import analyze

        analyze.enable_racecheck()


_racecheck_from_environment()
