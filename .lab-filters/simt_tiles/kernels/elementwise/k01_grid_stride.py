"""vector_add k01 — grid-stride loop: a fixed grid covers any length.

What it teaches
    The elementwise pattern with no tiles at all.  The grid has at most
    ``max_blocks`` blocks (enough to fill the GPU); thread g handles elements
    g, g + G·T, g + 2·G·T, ... so any length works — 0, less than one block,
    not a multiple of the block — with one bounds test per element and no
    tail special case.  Consecutive threads touch consecutive elements:
    every warp access is coalesced.

Memory traffic: 3 streams (read a, read b, write c) of n elements.

Headline (H200, benchmarks/results/patterns_h200.json): 3.64 TB/s on vector_add 2^28, 85% of copy
"""

from __future__ import annotations

from numba import cuda, void

from ...runtime import Rung, cdiv, numba_dtype
from ._common import StreamConfig

Config = StreamConfig
PRESETS = {"sim": Config(threads=8, max_blocks=2), "default": Config()}


def make_kernel(config: Config, dtype):
    def vector_add_k01_grid_stride(a, b, c):
        start = cuda.grid(1)
        step = cuda.gridsize(1)
        for i in range(start, c.shape[0], step):
            c[i] = a[i] + b[i]

    return vector_add_k01_grid_stride


def signature(dtype):
    t = numba_dtype(dtype)[::1]
    return void(t, t, t)


def geometry(config: Config, n: int):
    return (min(config.max_blocks, max(1, cdiv(n, config.threads * config.items))),), config.block()


RUNG = Rung("k01_grid_stride", Config, PRESETS, make_kernel, geometry, signature)
