"""k07 — softmax along an axis that is not the last: lines of stride ``inner``, read in place.

What changed versus k06
    ``softmax(x, axis=a)`` of a C-contiguous N-D array is, viewed as
    ``(outer, n, inner)`` (``n = x.shape[a]``), a softmax along the middle
    axis: ``outer · inner`` *lines* of n values ``inner`` apart.  A transpose
    to rows and back would move the data two more times; here the lines are
    read where they lie.  A warp takes ``W`` consecutive lines and ``G = 32/W``
    lanes per line (W = 32 when ``inner`` ≥ 32, else the power of two at most
    ``inner``, halved down to a 32-byte sector of lines while the lines are
    too few for the SMs): lane ``l`` reads line ``l % W`` at ``k = l // W, + G, …`` —
    for each k the W lines are consecutive in memory, so a warp's load is W·G
    = 32 consecutive values when ``W`` divides ``inner`` and never more than
    two runs otherwise.  The online pairs (k03) fold over the lane's k, then
    across the G lanes of a line with shuffles over offsets W … 16; the second
    pass writes.  No shared memory, no barrier.

Memory traffic: two reads and one write (the second read partly from L2).

Headline (H200, benchmarks/results/patterns_zoo_s25b_h200.json, impl "simt_tiles (variant=None)"): 1.12 TB/s on 256x1024x64 axis=1, 1.76× torch
"""

from __future__ import annotations

import dataclasses
import math

from numba import cuda, uint64, void

from ...runtime import Gate, Rung, cdiv, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync
from ._common import WarpRowConfig, compute_dtype, make_io, make_log_shift, make_pair_fold


@dataclasses.dataclass(frozen=True)
class Config(WarpRowConfig):
    """``threads`` per block; ``lines`` consecutive lines per warp (W, set per call by
    :meth:`for_problem`); ``loads`` values in flight per lane per step."""

    threads: int = 256
    lines: int = 32
    loads: int = 4
    #: fewer lines than this many warps per SM: fewer lines a warp (more lanes a line), down to a
    #: 32-byte sector of lines per load
    warps_per_sm: int = 16

    def smem_bytes(self, itemsize):
        return 0

    def rules(self):
        yield from super().rules()
        w = self.lines
        yield ("lines", 1 <= w <= 32 and w & (w - 1) == 0, "lines is a power of two in 1 … 32")

    def for_problem(self, outer: int, n: int, inner: int, itemsize: int = 4, sms: int = 132) -> "Config":
        """``lines``: the power of two at most ``inner`` (and 32), halved while the warps would not
        give every SM ``warps_per_sm`` and a warp's load per k still fills a 32-byte sector (W · itemsize,
        ``itemsize`` as stored: 16 lines of 16-bit values fill one)."""
        w = min(32, 1 << (max(inner, 1).bit_length() - 1))
        while w * itemsize > 32 and cdiv(outer * inner, w) < self.warps_per_sm * sms:
            w //= 2
        return dataclasses.replace(self, lines=w)


PRESETS = {"sim": Config(threads=32, lines=4, loads=2), "default": Config(threads=256, lines=32, loads=4)}


def make_kernel(config: Config, dtype, log: bool = False):
    T, W, U = config.threads, config.lines, config.loads
    G, NW = 32 // W, config.threads // 32
    # the lanes of one line; (32,) — no shuffle — for a line of one lane (Numba cannot loop over ())
    OFFS = tuple(o for o in (16, 8, 4, 2, 1) if o >= W) or (32,)
    DT = numba_dtype(compute_dtype(dtype))  # (16-bit inputs: float32 arithmetic, each output rounded once)
    up, down = make_io(dtype)
    NEG_INF = -math.inf
    LOG = log
    log_shift = make_log_shift(DT)
    fold, fold_values = make_pair_fold(DT)

    def softmax_k07_strided_axis(x, out):
        tid = cuda.threadIdx.x
        lane = tid % 32
        outer, n, inner = x.shape
        q = (cuda.blockIdx.x * NW + tid // 32) * W + lane % W  # this lane's line
        live = q < outer * inner
        o, i = uint64(q // inner), uint64(q % inner)
        j = lane // W  # its first k
        vals = cuda.local.array(U, DT)

        m, s = DT(NEG_INF), DT(0)
        for k0 in range(j, n, G * U):  # every lane runs the loop: all take part in the shuffles
            for u in range(U):
                k = k0 + u * G
                vals[u] = up(x[o, uint64(k), i]) if (live and k < n) else DT(NEG_INF)
            m, s = fold_values(m, s, vals, U)
        for off in OFFS:
            if off < 32:
                m, s = fold(m, s, shfl_xor_sync(FULL_MASK, m, off), shfl_xor_sync(FULL_MASK, s, off))
        if LOG:
            sh, ls = log_shift(m, s)
            a = DT(1)
        else:  # a line of −inf: every output NaN, as scipy's
            sh, a, ls = DT(0), (DT(1) / s if m != NEG_INF else DT(math.nan)), DT(0)
        if live:
            for k0 in range(j, n, G * U):
                for u in range(U):
                    k = k0 + u * G
                    vals[u] = up(x[o, uint64(k), i]) if k < n else DT(0)
                for u in range(U):
                    k = k0 + u * G
                    if k < n:
                        out[o, uint64(k), i] = down(((vals[u] - sh) - ls) if LOG else math.exp(vals[u] - m) * a)

    return softmax_k07_strided_axis


def signature(dtype, log=False):
    t = numba_dtype(dtype)[:, :, ::1]
    return void(t, t)


def geometry(config: Config, outer: int, n: int, inner: int):
    return (cdiv(outer * inner, config.lines * (config.threads // 32)),), config.block()


RUNG = Rung("k07_strided_axis", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(half=("default",), smem_exception="no shared memory"))
