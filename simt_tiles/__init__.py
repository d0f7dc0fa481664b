"""simt_tiles — hand-tiled CUDA SIMT kernels written with Numba.

Every kernel is a factory taking its tile sizes, ships ``"sim"`` (tiny tiles,
for Numba's CUDA simulator) and ``"default"`` (the GPU) presets, and is
checked against a NumPy reference.  Set ``NUMBA_ENABLE_CUDASIM=1`` before
importing to run in the simulator on a machine without a GPU.
"""

from .matmul import BEST_VARIANT, MATMUL_VARIANTS, matmul
from .runtime import SIMULATOR, ConfigError

__version__ = "0.1.0"

__all__ = ["matmul", "MATMUL_VARIANTS", "BEST_VARIANT", "SIMULATOR", "ConfigError", "__version__"]
