"""bias_relu — y = max(x + bias, 0): elementwise with a broadcast operand, in 2-D tiles.

What it teaches
    A block of ``tile_n × tile_m`` threads covers a tile of the output; thread
    (tx, ty) owns element (row0 + ty, col0 + tx), so a warp reads consecutive
    columns of x (coalesced) and consecutive entries of ``bias`` (which every
    row of the tile re-reads: it stays in L1).  Edge tiles are masked: threads
    past the matrix do nothing.  The boundary waste — threads launched that
    do no work — is (grid area − M·N) / grid area; the benchmark records it
    per tile shape.

NaN: max(NaN, 0) is NaN, as ``numpy.maximum`` (the GPU's fmaxf would return 0).

Memory traffic: read x, write y (2 streams) + N bias values per tile row.

Measured effect on the H200: not yet measured.
"""

from __future__ import annotations

import dataclasses

from numba import cuda, void

from ...runtime import Rung, TileConfig, grid_for, numba_dtype


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    tile_n: int = 32  # threads along a row (x): a warp spans 32 consecutive columns
    tile_m: int = 8

    def block(self):
        return (self.tile_n, self.tile_m)


PRESETS = {"sim": Config(tile_n=4, tile_m=2), "default": Config()}


def make_kernel(config: Config, dtype):
    DT = numba_dtype(dtype)

    def bias_relu(x, bias, y):
        col, row = cuda.grid(2)
        if row < x.shape[0] and col < x.shape[1]:
            v = x[row, col] + bias[col]
            y[row, col] = v if (v != v or v > DT(0)) else DT(0)

    return bias_relu


def signature(dtype):
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[::1], t[:, ::1])


def geometry(config: Config, m: int, n: int):
    return grid_for((n, m), config.block()), config.block()


def boundary_waste(config: Config, m: int, n: int) -> float:
    """Fraction of launched threads that fall outside the M×N output."""
    grid, block = geometry(config, m, n)
    launched = grid[0] * grid[1] * block[0] * block[1]
    return 0.0 if launched == 0 else 1 - (m * n) / launched


RUNG = Rung("bias_relu", Config, PRESETS, make_kernel, geometry, signature)
