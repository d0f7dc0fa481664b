"""k02 — warp-shuffle reductions: registers within a warp, shared memory only between warps.

What changed versus k01
    Each reduction first runs inside every warp with five ``shfl_xor_sync``
    steps (a butterfly: every lane ends with the warp's result, no shared
    memory, no barrier).  Lane 0 of each warp then writes one value to shared
    memory, one barrier, and every thread folds the T/32 warp results itself.
    Barriers: one per reduction, 2 in all (k01: 2·log2(T) + 3).

    ``simt_tiles.warp`` supplies the shuffles: the numba intrinsics on the
    GPU, and a rendezvous with real warp semantics in the simulator, so this
    rung runs in the same hypothesis tests as k01.

Memory traffic: as k01 (three reads of the row, one write).
On the H200 it is no faster than k01: the barriers were not the cost, the
three passes over the row are (k03, k04).

Headline (H200, benchmarks/results/patterns_h200.json): 1.46 TB/s on 16384x16384, 34% of copy
"""

from __future__ import annotations

import math

from numba import cuda

from ...runtime import Gate, Rung, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync
from ._common import WarpRowConfig, geometry, signature

Config = WarpRowConfig
PRESETS = {"sim": Config(threads=64), "default": Config(threads=256)}


def make_kernel(config: Config, dtype):
    T = config.threads
    NW = T // 32  # warps per block
    DT = numba_dtype(dtype)
    NEG_INF = -math.inf

    def softmax_k02_warp_shuffle(x, out):
        r = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        n = x.shape[1]
        red_max = cuda.shared.array(NW, DT)
        red_sum = cuda.shared.array(NW, DT)

        m = DT(NEG_INF)
        for c in range(tid, n, T):
            v = x[r, c]
            m = m if (m != m or m > v) else v
        for off in (16, 8, 4, 2, 1):  # butterfly: every lane gets the warp's max
            o = shfl_xor_sync(FULL_MASK, m, off)
            m = m if (m != m or m > o) else o
        if lane == 0:
            red_max[wid] = m
        cuda.syncthreads()  # RAW: every warp's max written
        m = red_max[0]
        for w in range(1, NW):
            o = red_max[w]
            m = m if (m != m or m > o) else o

        acc = DT(0)
        for c in range(tid, n, T):
            acc += math.exp(x[r, c] - m)
        for off in (16, 8, 4, 2, 1):
            acc += shfl_xor_sync(FULL_MASK, acc, off)
        if lane == 0:
            red_sum[wid] = acc
        cuda.syncthreads()  # RAW: every warp's sum written (separate array: no WAR on red_max)
        total = DT(0)
        for w in range(NW):
            total += red_sum[w]

        for c in range(tid, n, T):
            out[r, c] = math.exp(x[r, c] - m) / total

    return softmax_k02_warp_shuffle


RUNG = Rung("k02_warp_shuffle", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(smem_exception="smem_bytes is the softmax family's bound, 2·threads words; "
                                     "two per-warp arrays use 2·threads/32"))
