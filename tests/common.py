"""Test machinery every ladder uses: the dtypes, sizes that break tiled code, poisoned outputs."""

from __future__ import annotations

import numpy as np
from numba import cuda

from simt_tiles.runtime import SIMULATOR

DTYPES = (np.float32, np.float64)
SMALL_PRIMES = (2, 3, 5, 7, 11, 13)
GPU_SIZES = (31, 97, 127, 257, 509, 1000, 1031)


def edge_sizes(*tiles: int) -> list[int]:
    """Sizes that break tiled code: 0, 1, around each tile size, around two tiles, primes."""
    sizes = {0, 1, *SMALL_PRIMES}
    for tile in tiles:
        sizes |= {tile - 1, tile, tile + 1, 2 * tile + 1}
        if not SIMULATOR:
            sizes |= {4 * tile - 1}
    if not SIMULATOR:
        sizes |= set(GPU_SIZES)
    return sorted(s for s in sizes if s >= 0)


def poisoned(shape, dtype):
    """A device array full of NaN: any element the kernel fails to write fails the check."""
    return cuda.to_device(np.full(shape, np.nan, dtype=dtype))
