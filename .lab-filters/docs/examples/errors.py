"""Bad input raises a TypeError or ValueError naming the argument, the expectation and what came."""
import numpy as np

import simt_tiles
from simt_tiles import ConfigError
from simt_tiles.kernels.matmul import k03_smem_tiled

a = np.ones((4, 3), np.float32)
try:
    simt_tiles.matmul(a, np.ones((5, 2), np.float32))     # inner dimensions differ
except ValueError as exc:
    print("ValueError:", exc)
try:
    simt_tiles.matmul(a.astype(np.int32), a.T)            # integers are not supported
except TypeError as exc:
    print("TypeError:", exc)
try:
    k03_smem_tiled.Config(tile=64)                        # 64 × 64 = 4096 threads per block
except ConfigError as exc:
    print("ConfigError:", exc)
