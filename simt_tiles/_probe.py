"""Find out whether a CUDA GPU is usable *without importing Numba*.

Numba decides between the real CUDA target and its simulator once, when
``numba.cuda`` is first imported, from the environment variable
``NUMBA_ENABLE_CUDASIM``.  Entry points that want "the GPU if there is one, the
simulator otherwise" (the CLI, the test suite) must therefore decide before
that import.  This module asks the driver directly through ``ctypes``.
"""

from __future__ import annotations

import ctypes
import os

from ._options import numba_flag

__all__ = ["gpu_present", "select_backend"]


def gpu_present() -> bool:
    """True when libcuda loads, initialises and reports at least one device."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return False
    try:
        if lib.cuInit(0) != 0:
            return False
        count = ctypes.c_int(0)
        return lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except AttributeError:
        return False


def select_backend() -> bool:
    """Turn the simulator on when no GPU is present and the user has not chosen.

    Must run before ``numba.cuda`` is imported.  Returns True when the
    simulator will be used.  An explicit ``NUMBA_ENABLE_CUDASIM`` wins — unless
    ``numba.cuda`` is already imported: then the target it loaded is the answer
    (the variable may have changed since; it no longer decides anything).
    """
    import sys

    if "numba.cuda" in sys.modules:
        import numba

        return bool(numba.config.ENABLE_CUDASIM)
    chosen = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if chosen is None:
        chosen = "0" if gpu_present() else "1"
        os.environ["NUMBA_ENABLE_CUDASIM"] = chosen
    return numba_flag(chosen)  # as numba.config reads it ("false", "00": the GPU target)
