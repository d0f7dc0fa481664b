"""k02 — coalesced: the same kernel as k01 with the thread→element mapping swapped.

What changed versus k01, and why it matters
    The grid's *x* index now walks the *columns* of C.  The 32 threads of a
    warp (consecutive ``threadIdx.x``) therefore own C[row, col .. col+31]:
    in each step of the K loop they read B[k, col .. col+31] — 32 consecutive
    addresses, one or a few 128-byte transactions instead of 32 — and
    A[row, k], one address the whole warp shares (a broadcast).  The final
    stores to C are consecutive as well.  Nothing else changed: same
    arithmetic, same number of loads, far fewer memory transactions.

Memory traffic (teaching number)
    Still 2·M·N·K element loads (no reuse yet: that is k03's lesson), but each
    warp-wide load of B now uses every byte of the sectors it fetches.

Headline (H200, benchmarks/results/matmul_h200.json): 1.33 TFLOP/s at 4096³, 0.026× cuBLAS
"""

from __future__ import annotations

from numba import cuda

from ...runtime import Rung, grid_for, numba_dtype
from ._common import signature
from .k01_naive import Config  # same knobs as k01: only the mapping differs

PRESETS = {"sim": Config(4, 4), "default": Config(32, 8)}


def make_kernel(config: Config, dtype):
    DT = numba_dtype(dtype)

    def matmul_k02_coalesced(a, b, c):
        col, row = cuda.grid(2)  # x → column: a warp walks *along* a row of C
        m, k_len = a.shape
        n = b.shape[1]
        if row < m and col < n:
            acc = DT(0)
            for k in range(k_len):
                acc += a[row, k] * b[k, col]  # a: broadcast; b: consecutive
            c[row, col] = acc

    return matmul_k02_coalesced


def geometry(config: Config, m: int, n: int, k: int):
    """Grid x covers the columns of C, grid y its rows."""
    return grid_for((n, m), config.block()), config.block()


RUNG = Rung("k02_coalesced", Config, PRESETS, make_kernel, geometry, signature)
