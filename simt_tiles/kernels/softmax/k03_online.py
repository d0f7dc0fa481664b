"""k03 — online softmax: one pass computes the max and the sum together; one more writes.

What changed versus k02
    Each thread keeps a running pair (m, s): the max so far and the sum of
    exp(x − m) so far.  A new value v updates it as
        m' = max(m, v);  s' = s·exp(m − m') + exp(v − m')
    and two pairs combine the same way, so the warp butterfly and the
    cross-warp step reduce pairs.  The row is read twice (k02: three times):
    for long rows that no longer fit in cache this is a third less traffic.

Special values, kept identical to scipy
    The empty state is (−inf, 0).  Combining two states whose max is −inf must
    stay (−inf, 0) — the formula would give exp(−inf − (−inf)) = NaN — and a
    row whose final max is −inf is all −inf: scipy returns NaN there, so the
    kernel does too.  NaN and +inf propagate through the formula as in scipy.

Memory traffic: two reads of the row and one write.

Headline (H200, benchmarks/results/patterns_h200.json): 1.89 TB/s on 16384x32768, 44% of copy
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
    NW = T // 32
    DT = numba_dtype(dtype)
    NEG_INF = -math.inf

    def softmax_k03_online(x, out):
        r = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        n = x.shape[1]
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)

        m = DT(NEG_INF)
        s = DT(0)
        for c in range(tid, n, T):  # the single pass over the row
            v = x[r, c]
            m2 = m if (m != m or m > v) else v
            if m2 != NEG_INF:  # (−inf, 0) absorbs −inf values
                s = s * math.exp(m - m2) + math.exp(v - m2)
            m = m2
        for off in (16, 8, 4, 2, 1):  # combine (m, s) pairs across the warp
            mo = shfl_xor_sync(FULL_MASK, m, off)
            so = shfl_xor_sync(FULL_MASK, s, off)
            m2 = m if (m != m or m > mo) else mo
            if m2 != NEG_INF:
                s = s * math.exp(m - m2) + so * math.exp(mo - m2)
            m = m2
        if lane == 0:
            red_m[wid] = m
            red_s[wid] = s
        cuda.syncthreads()  # RAW: every warp's pair written
        m = red_m[0]
        s = red_s[0]
        for w in range(1, NW):
            mo = red_m[w]
            so = red_s[w]
            m2 = m if (m != m or m > mo) else mo
            if m2 != NEG_INF:
                s = s * math.exp(m - m2) + so * math.exp(mo - m2)
            m = m2
        if m == NEG_INF:  # all −inf: scipy gives NaN (−inf − (−inf))
            s = DT(math.nan)

        for c in range(tid, n, T):
            out[r, c] = math.exp(x[r, c] - m) / s

    return softmax_k03_online


RUNG = Rung("k03_online", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(smem_exception="smem_bytes is the softmax family's bound, 2·threads words; "
                                     "two per-warp arrays use 2·threads/32"))
