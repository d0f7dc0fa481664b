"""k01 — naive: one thread per output element, operands read straight from global memory.

What it teaches
    The simplest correct kernel: thread (x, y) of the grid owns C[row, col] and
    runs the whole K loop itself.  Here the grid's *x* index (the fast-varying
    one: the 32 threads of a warp have consecutive ``threadIdx.x``) is mapped
    to the *row*.  So in one load instruction the 32 threads of a warp read
    A[row .. row+31, k]: 32 addresses K elements apart, 32 separate memory
    sectors.  B[k, col] is the same address for the whole warp (a broadcast),
    and the store C[row .. row+31, col] is again 32 sectors.  k02 fixes this.

Memory traffic (teaching number)
    Every output element reads a row of A and a column of B: 2·M·N·K element
    loads from global memory for 2·M·N·K flops — an arithmetic intensity of
    one flop per load, and (here) one 32-byte sector fetched per 4-byte load.

Headline (H200, benchmarks/results/matmul_h200.json): 0.50 TFLOP/s at 4096³, 0.01× cuBLAS
"""

from __future__ import annotations

import dataclasses

from numba import cuda

from ...runtime import Rung, TileConfig, grid_for, numba_dtype
from ._common import signature


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A ``block_x × block_y`` block of threads, one output element each."""

    block_x: int = 32
    block_y: int = 8

    def block(self):
        return (self.block_x, self.block_y)


PRESETS = {"sim": Config(4, 4), "default": Config(32, 8)}


def make_kernel(config: Config, dtype):
    DT = numba_dtype(dtype)

    def matmul_k01_naive(a, b, c):
        row, col = cuda.grid(2)  # x → row: a warp walks *down* a column of C
        m, k_len = a.shape
        n = b.shape[1]
        if row < m and col < n:
            acc = DT(0)
            for k in range(k_len):
                acc += a[row, k] * b[k, col]
            c[row, col] = acc

    return matmul_k01_naive


def geometry(config: Config, m: int, n: int, k: int):
    """Grid x covers the rows of C, grid y its columns."""
    return grid_for((m, n), config.block()), config.block()


RUNG = Rung("k01_naive", Config, PRESETS, make_kernel, geometry, signature)
