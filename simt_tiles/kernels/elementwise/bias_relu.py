"""bias_relu — y = max(x + bias, 0): elementwise with a broadcast operand, in 2-D tiles.

What it teaches
    A block of ``tile_n × tile_m`` threads covers a tile of the output; thread
    (tx, ty) owns elements (row0 + ty + j·tile_m, col0 + tx) for j <
    ``rows_per_thread`` (all its loads issued before its first store), so a warp reads consecutive
    columns of x (coalesced) and consecutive entries of ``bias`` (which every
    row of the tile re-reads: it stays in L1).  Edge tiles are masked: threads
    past the matrix do nothing.  The boundary waste — threads launched that
    do no work — is (grid area − M·N) / grid area; the benchmark records it
    per tile shape.

NaN: max(NaN, 0) is NaN, as ``numpy.maximum`` (the GPU's fmaxf would return 0).

16-bit (float16; bfloat16 as its ``uint16`` bits, :data:`simt_tiles.runtime.HALF_STORAGE`): x and bias
are read into float32 (exactly), ``max(x + bias, 0)`` is computed in float32 and rounded once to the
input's dtype on the store, to nearest even (:func:`simt_tiles.half_io.make_io`, softmax's conversions).
torch's ``relu(x + b)`` on 16-bit tensors rounds the float32 sum to 16 bits and then takes the relu; the
two orders agree bit for bit up to the sign of a zero (rounding to nearest is monotone and maps 0 to 0 and
positives to non-negatives: relu(round(v)) = round(relu(v)) for every v, NaN kept), and here a
non-positive sum stores +0 either way.  float32/float64: ``up``/``down`` are the value itself, the PTX
is what it was without them.

Memory traffic: read x, write y (2 streams) + N bias values per tile row.

Headline (H200, benchmarks/results/patterns_h200.json, impl "simt_tiles.bias_relu"): 4.07 TB/s on bias_relu 16384x16384, 95.5% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint64, void

from ...half_io import compute_dtype, make_io
from ...runtime import Gate, Rung, TileConfig, grid_for, numba_dtype


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    tile_n: int = 32  # threads along a row (x): a warp spans 32 consecutive columns
    tile_m: int = 8
    #: rows each thread computes, tile_m apart: its loads are all issued before the first store
    #: (more bytes in flight per thread); the block's tile is tile_n × (tile_m · rows_per_thread)
    rows_per_thread: int = 1

    def block(self):
        return (self.tile_n, self.tile_m)


#: CUDA's grid y limit: more tiles of rows (``tile_m · rows_per_thread`` rows each: 32 by default, so
#: past 2 097 120 rows) launch in pieces (:class:`RowsRung`)
MAX_GRID_Y = 65535

PRESETS = {"sim": Config(tile_n=4, tile_m=2, rows_per_thread=2), "default": Config(rows_per_thread=4)}


def make_kernel(config: Config, dtype):
    DT = numba_dtype(compute_dtype(dtype))  # the arithmetic's type: float32 for 16-bit inputs
    up, down = make_io(dtype)  # 16-bit: read as float32, each output rounded once (float32/64: the values)
    R = config.rows_per_thread
    TM = config.tile_m
    TILE_ROWS = TM * R

    def bias_relu(x, bias, y):
        m, n = x.shape
        # unsigned subscripts: signed ones get Numba's negative-index wraparound per access
        col = uint64(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        row0 = uint64(cuda.blockIdx.y * TILE_ROWS + cuda.threadIdx.y)
        um = uint64(m)
        if col < uint64(n):  # masked edge: threads past the last column do nothing
            b = up(bias[col])
            vals = cuda.local.array(R, DT)
            for j in range(R):  # all loads first
                row = row0 + uint64(j * TM)
                if row < um:
                    vals[j] = up(x[row, col])
            for j in range(R):
                row = row0 + uint64(j * TM)
                if row < um:
                    v = vals[j] + b
                    y[row, col] = down(v if (v != v or v > DT(0)) else DT(0))

    return bias_relu


def signature(dtype):
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[::1], t[:, ::1])


def geometry(config: Config, m: int, n: int):
    return grid_for((n, m), (config.tile_n, config.tile_m * config.rows_per_thread)), config.block()


def boundary_waste(config: Config, m: int, n: int) -> float:
    """Fraction of launched threads that fall outside the M×N output."""
    grid, block = geometry(config, m, n)
    launched = grid[0] * grid[1] * block[0] * block[1] * config.rows_per_thread  # element slots
    return 0.0 if launched == 0 else 1 - (m * n) / launched


@dataclasses.dataclass(frozen=True, eq=False)
class RowsRung(Rung):
    """bias_relu's rung: x's and y's rows in pieces of at most :data:`MAX_GRID_Y` tiles (grid y covers
    the tiles of rows; a launch past CUDA's limit fails), each piece C-contiguous row views."""

    def run(self, config, call) -> None:
        m, n = call.problem
        step = MAX_GRID_Y * config.tile_m * config.rows_per_thread
        if m <= step:  # one launch: no views (slicing a device array costs µs of host time)
            return super().run(config, call)
        for r0 in range(0, m, step):
            r1 = min(m, r0 + step)
            super().run(config, call._replace(x=call.x[r0:r1], out=call.out[r0:r1], problem=(r1 - r0, n)))


RUNG = RowsRung("bias_relu", Config, PRESETS, make_kernel, geometry, signature,
                gate=Gate(half=("default",)))  # float16 and bfloat16 too: the preset their users run
