"""vector_add k02 — several elements per thread, loads issued before any use.

What changed versus k01
    Each thread handles ``items`` elements per grid step, T apart (so each of
    its loads is still part of a coalesced warp access), and issues all
    2·items loads before the first add: more independent memory requests in
    flight per thread, fewer loop iterations, and index arithmetic in
    unsigned 32-bit (no negative-index checks; valid while n < 2³²).
    Numba cannot promise 16-byte alignment of an array argument, so the
    loads stay 32-bit; the many-loads-in-flight part of "vectorising" is what
    this rung shows.

Memory traffic: as k01, 3 streams of n elements.

Headline (H200, benchmarks/results/patterns_h200.json): 4.01 TB/s on vector_add 2^28, 94% of copy
"""

from __future__ import annotations

import numpy as np
from numba import cuda, uint32

from ...runtime import Rung, numba_dtype
from ._common import StreamConfig
from .k01_grid_stride import geometry, signature

Config = StreamConfig
PRESETS = {"sim": Config(threads=8, items=3, max_blocks=2), "default": Config(items=16)}


def make_kernel(config: Config, dtype):
    T = np.uint32(config.threads)
    ITEMS = config.items
    TILE = np.uint32(config.threads * config.items)  # elements per block per grid step
    DT = numba_dtype(dtype)

    def vector_add_k02_multi(a, b, c):
        n = c.shape[0]
        tid = uint32(cuda.threadIdx.x)
        step = uint32(cuda.gridDim.x) * TILE
        base = uint32(cuda.blockIdx.x) * TILE
        va = cuda.local.array(ITEMS, DT)
        vb = cuda.local.array(ITEMS, DT)
        while base < n:
            for j in range(ITEMS):  # all loads first: ITEMS independent requests in flight
                i = base + uint32(j) * T + tid
                if i < n:
                    va[j] = a[i]
                    vb[j] = b[i]
            for j in range(ITEMS):
                i = base + uint32(j) * T + tid
                if i < n:
                    c[i] = va[j] + vb[j]
            base += step

    return vector_add_k02_multi


RUNG = Rung("k02_multi_element", Config, PRESETS, make_kernel, geometry, signature)
