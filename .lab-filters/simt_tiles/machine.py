"""What a result was measured on: the GPU (or the simulator), its L2 and SMs, the software versions.

Every benchmark JSON and the demo's JSON carry :func:`describe`'s dict as ``"machine"``;
result files are named from :func:`slug` (``matmul_h200.json`` on an H200,
``matmul_sim.json`` in the simulator), and the benchmarks size their L2 flush and
rotating input sets from :func:`l2_bytes`, read from the device.

Numba must already have chosen its backend (``simt_tiles._probe.select_backend``)
before these functions are called; importing this module imports nothing heavy.
"""

from __future__ import annotations

import platform
import re

from ._version import __version__

__all__ = ["describe", "device_name", "l2_bytes", "slug", "slug_from_name"]

#: words in a GPU's name that say nothing about which GPU it is
_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "quadro", "graphics"}


def _simulator() -> bool:
    import numba

    return bool(numba.config.ENABLE_CUDASIM)


def _device():
    from numba import cuda

    return cuda.get_current_device()


def device_name() -> str:
    """The GPU's marketing name (``"NVIDIA H200"``), or ``"Numba CUDA simulator"``."""
    if _simulator():
        return "Numba CUDA simulator"
    name = _device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def slug_from_name(name: str) -> str:
    """A short lower-case file-name part: ``"NVIDIA H200"`` → ``"h200"``,
    ``"NVIDIA GeForce RTX 4090"`` → ``"rtx-4090"``, the simulator → ``"sim"``."""
    if name == "Numba CUDA simulator":
        return "sim"
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in _VENDOR_WORDS]
    return "-".join(words) or "gpu"


def slug() -> str:
    """:func:`slug_from_name` of this machine's device (``"sim"`` in the simulator)."""
    return slug_from_name(device_name())


def l2_bytes() -> int | None:
    """The device's L2 cache in bytes, read from the driver (None in the simulator)."""
    return None if _simulator() else int(_device().L2_CACHE_SIZE)


def describe() -> dict:
    """GPU, compute capability, SMs, L2, driver and CUDA versions, and the Python packages' versions."""
    import numba
    import numpy as np

    info = {"gpu": device_name(), "slug": slug(), "simulator": _simulator(), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__, "simt_tiles": __version__, "host": platform.node()}
    try:
        from importlib.metadata import version

        info["numba_cuda"] = version("numba-cuda")
    except Exception:  # pragma: no cover  (not installed as a distribution)
        pass
    if not info["simulator"]:
        from numba import cuda

        dev = _device()
        info["compute_capability"] = ".".join(map(str, dev.compute_capability))
        info["sms"] = int(dev.MULTIPROCESSOR_COUNT)
        info["l2_bytes"] = l2_bytes()
        info["driver_version"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
        info["cuda_runtime_version"] = ".".join(map(str, cuda.runtime.get_version()))
        for mod in ("cupy", "torch"):
            try:
                info[mod] = __import__(mod).__version__
            except ImportError:
                pass
    return info
