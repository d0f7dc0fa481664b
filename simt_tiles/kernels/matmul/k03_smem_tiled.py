"""k03 — shared-memory tiling: each block stages T×T tiles of A and B and reuses them T times.

What it teaches
    A block of T×T threads owns a T×T tile of C.  It walks K in steps of T:
    all T² threads cooperatively copy one T×T tile of A and one of B from
    global into shared memory (each thread one element of each, with a warp
    reading consecutive addresses: coalesced), wait at a barrier, then each
    thread does T multiply-adds from shared memory.  Every element fetched
    from global memory is used T times instead of once (T/2 FMAs per element loaded).

Ragged shapes
    Loads outside A or B store 0 into the tile (a "masked load"), so any M, N,
    K works, including K = 0 (the loop runs zero times and C gets zeros).
    Threads whose C element lies outside the matrix still load and reach both
    barriers — they only skip the final store.  An early ``return`` would
    leave the rest of the block waiting at a barrier that thread never reaches.

Memory traffic (teaching number)
    Global loads fall from 2·M·N·K (k01/k02) to 2·M·N·K / T elements.
    Shared memory: 2·T² elements per block (T=32, float32: 8 KiB).

Shared-memory banks
    Inner loop: ``As[ty, kk]`` is one address for the whole warp when T = 32
    (all 32 lanes share ``ty``): a broadcast.  ``Bs[kk, tx]`` is 32 consecutive
    words: 32 different banks.  No conflicts — the conflict lesson is k06.

Headline (H200, benchmarks/results/matmul_h200.json): 7.1 TFLOP/s at 4096³, 0.14× cuBLAS
"""

from __future__ import annotations

import dataclasses

from numba import cuda

from ...runtime import Rung, TileConfig, grid_for, numba_dtype
from ._common import signature


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """Square tiles: a ``tile × tile`` block computes a ``tile × tile`` tile of C."""

    tile: int = 32

    def block(self):
        return (self.tile, self.tile)

    def smem_bytes(self, itemsize):
        return 2 * self.tile * self.tile * itemsize


PRESETS = {"sim": Config(4), "default": Config(32)}


def make_kernel(config: Config, dtype):
    T = config.tile
    DT = numba_dtype(dtype)

    def matmul_k03_smem_tiled(a, b, c):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * T + ty
        col = cuda.blockIdx.x * T + tx
        m, k_len = a.shape
        n = b.shape[1]

        a_tile = cuda.shared.array((T, T), DT)
        b_tile = cuda.shared.array((T, T), DT)

        acc = DT(0)
        for k0 in range(0, k_len, T):
            # Cooperative masked loads; consecutive tx read consecutive addresses.
            ka = k0 + tx
            a_tile[ty, tx] = a[row, ka] if row < m and ka < k_len else DT(0)
            kb = k0 + ty
            b_tile[ty, tx] = b[kb, col] if kb < k_len and col < n else DT(0)
            # RAW hazard: no thread may read the tiles before every thread has written its element.
            cuda.syncthreads()
            for kk in range(T):
                acc += a_tile[ty, kk] * b_tile[kk, tx]
            # WAR hazard: no thread may overwrite the tiles (next k0) while another still reads them.
            cuda.syncthreads()

        if row < m and col < n:
            c[row, col] = acc

    return matmul_k03_smem_tiled


def geometry(config: Config, m: int, n: int, k: int):
    """One block per T×T tile of C; grid x over columns, y over rows."""
    return grid_for((n, m), config.block()), config.block()


RUNG = Rung("k03_smem_tiled", Config, PRESETS, make_kernel, geometry, signature)
