"""k01 — one block per row, shared-memory tree reductions: max, then sum, then write.

What it teaches
    The reduction-then-elementwise pattern.  Each thread folds a strided slice
    of the row (columns tid, tid+T, ...) into a partial max; the T partials
    meet in shared memory and are halved log2(T) times, a barrier after each
    halving; then the same for the sum of exp(x − max); then every thread
    writes its slice of exp(x − max) / sum.

Memory traffic (teaching number)
    The row is read three times (max, sum, write) and written once: 4 passes
    of bytes where the minimum is 2.  Rows of up to a few tens of KiB stay in
    L1/L2 between passes, so the DRAM traffic is closer to 2 passes.

Barriers: log2(T) + 1 per reduction (the partials written, then each halving)
and one WAR barrier before the second reuses ``red``: 2·log2(T) + 3 in all.

Headline (H200, benchmarks/results/patterns_h200.json): 1.63 TB/s on 16384x16384, 38% of copy
"""

from __future__ import annotations

import math

from numba import cuda

from ...runtime import Gate, Rung, numba_dtype
from ._common import RowConfig, geometry, signature

Config = RowConfig
PRESETS = {"sim": Config(threads=8), "default": Config(threads=256)}


def make_kernel(config: Config, dtype):
    T = config.threads
    DT = numba_dtype(dtype)
    NEG_INF = -math.inf

    def softmax_k01_smem_tree(x, out):
        r = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        n = x.shape[1]
        red = cuda.shared.array(T, DT)

        m = DT(NEG_INF)
        for c in range(tid, n, T):
            v = x[r, c]
            m = m if (m != m or m > v) else v  # NaN-propagating max
        red[tid] = m
        cuda.syncthreads()  # RAW: all partials written
        s = T // 2
        while s > 0:
            if tid < s:
                a, b = red[tid], red[tid + s]
                red[tid] = a if (a != a or a > b) else b
            cuda.syncthreads()  # RAW/WAR: this halving done before the next reads it
            s //= 2
        m = red[0]
        cuda.syncthreads()  # WAR: everyone has read red[0] before red is reused

        acc = DT(0)
        for c in range(tid, n, T):
            acc += math.exp(x[r, c] - m)
        red[tid] = acc
        cuda.syncthreads()
        s = T // 2
        while s > 0:
            if tid < s:
                red[tid] += red[tid + s]
            cuda.syncthreads()
            s //= 2
        total = red[0]

        for c in range(tid, n, T):
            out[r, c] = math.exp(x[r, c] - m) / total

    return softmax_k01_smem_tree


RUNG = Rung("k01_smem_tree", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(smem_exception="smem_bytes is the softmax family's bound, 2·threads words; "
                                     "the tree uses threads"))
