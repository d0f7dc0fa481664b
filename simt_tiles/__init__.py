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

from . import registry
from ._options import env_flag, numba_flag
from ._version import __version__

#: public name -> module that defines it (loaded on first access, PEP 562): each family's line of
#: :data:`simt_tiles.registry.LADDERS` names its own, the runtime adds two, the launch path one
_PUBLIC = {**registry.public_names(), "SIMULATOR": "simt_tiles.runtime", "ConfigError": "simt_tiles.runtime",
           "warm": "simt_tiles.warm", "OutOfMemoryError": "simt_tiles.launch"}

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str):
    try:
        module = _PUBLIC.get(name) or registry.public_names()[name]  # a family registered since
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

    if env_flag("SIMT_TILES_RACECHECK") and numba_flag(os.environ.get("NUMBA_ENABLE_CUDASIM")):
        from . import analyze  # deferred: only when asked for (`import simt_tiles` loads no NumPy)

        analyze.enable_racecheck()


_racecheck_from_environment()
