"""k02 — any axis, any row length: a few lanes per output, lanes laid out along the memory.

What changed versus k01
    k01 gives each row a block: a million rows of 64 values are a million
    blocks whose 256 threads mostly idle (2.6% of the copy).  Here the input
    is viewed as ``(outer, n, inner)`` around the reduced axis and a warp
    serves ``W`` outputs with ``G = 32 / W`` lanes each, mapped so that the
    warp's 32 loads are consecutive in memory:

    * rows (``inner == 1``, ``KFAST``): lane l takes row ``l // G`` at
      ``k = l % G, + G, …`` — G chosen from n, so short rows share a warp;
    * an inner axis (``inner > 1``): lane l takes output ``l % W`` at
      ``k = l // W, + G, …`` — the W outputs are W neighbours in memory.

    ``LOADS`` independent loads per lane per step (bytes in flight), then
    shuffles over the lanes of an output.  With ``WPO = NW`` the block's warps
    share one group of outputs (long rows: a block per row) and meet in
    shared memory.  Few outputs and long axes are **split**: ``S`` units per
    output group each fold ``chunk`` values of k into ``partials[s, q]``; a
    second launch of the same kernel folds the (1, S, Q) partials along S in
    a fixed order (deterministic).

    argmax/argmin carry (value, index) pairs: within a lane k only grows, so
    a strictly better value wins; across lanes the NumPy rule — NaN first,
    then the value, then the smaller index on ties.

Memory traffic: every input element read once; Q values written (S·Q, then Q, when split).

Headline (H200, benchmarks/results/patterns_zoo_h200.json, impl "simt_tiles (variant=None)"): 2.00 TB/s on sum 1048576x64 axis=-1, 1.79× torch
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda, int64, uint64, void

from ...half_io import compute_dtype
from ...runtime import Gate, Rung, TileConfig, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync
from ._common import ARGMAX, ARGMIN, MAX, SUM, element_types, identity, make_finish

BIG = np.iinfo(np.int64).max  # the index of "no element yet"
ALONG_K, ALONG_OUTPUTS = 1, 2  # Config.lane_axis: lanes along the reduced axis (rows), or the outputs


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """``threads`` per block; ``lanes`` (G) per output; ``lane_axis``: consecutive lanes along
    k (ALONG_K: rows) or along the outputs (ALONG_OUTPUTS: an inner axis); ``wpo``: warps per output group (1, or all of the
    block's); ``loads`` per lane per step.  lanes/lane_axis/wpo are set per call by the dispatch."""

    threads: int = 256
    lanes: int = 32
    lane_axis: int = ALONG_K
    wpo: int = 1
    loads: int = 8

    def block(self):
        return (self.threads,)

    def smem_bytes(self, itemsize):
        return 0 if self.wpo == 1 else (self.threads // 32) * (32 // self.lanes) * 16

    def outputs_per_unit(self) -> int:
        return 32 // self.lanes

    def rules(self):
        t, g = self.threads, self.lanes
        yield ("threads", t % 32 == 0 and t & (t - 1) == 0, "threads is a power of two ≥ 32")
        yield ("lanes", 1 <= g <= 32 and g & (g - 1) == 0, "lanes is a power of two in 1 … 32")
        yield ("lane_axis", self.lane_axis in (ALONG_K, ALONG_OUTPUTS), "lane_axis is ALONG_K (1) or ALONG_OUTPUTS (2)")
        yield ("wpo", self.wpo in (1, t // 32), "wpo is 1 or threads // 32")
        yield ("loads", self.loads >= 1, "loads >= 1")


#: the dispatch sets lanes/lane_axis/wpo per call from threads and loads; the presets' values are
#: what the compile gate builds: the sim preset lanes along the outputs, the default a block per
#: output group (shared memory, a barrier)
PRESETS = {
    "sim": Config(threads=64, lanes=8, lane_axis=ALONG_OUTPUTS, wpo=1, loads=2),
    "default": Config(threads=256, lanes=32, lane_axis=ALONG_K, wpo=8, loads=8),
}


def make_kernel(config: Config, dtype, op: int = SUM, acc=None, out_dtype=None, idx_in: bool = False,
                divide: bool = False):
    """Kernel ``(x3, xi3, out2, outi2, chunk, scale)``: out2[s, q] = op over k in
    [s·chunk, (s+1)·chunk) of x3[o, k, i] (q = o·inner + i), times ``scale`` (sums; the mean);
    arg ops write the index to outi2 (from xi3 when ``idx_in``: a second pass)."""
    T, G, W, LOADS = config.threads, config.lanes, 32 // config.lanes, config.loads
    NW, WPO, KFAST = T // 32, config.wpo, config.lane_axis == ALONG_K
    PN = NW * W
    # the lanes of one output; (32,) — no shuffle — when it has one lane (Numba cannot loop over ())
    OFFS = tuple(o for o in (16, 8, 4, 2, 1) if (o < G if KFAST else o >= W)) or (32,)
    types = element_types(dtype, acc, out_dtype)  # 16-bit: read exactly, rounded once at the store
    ACC, OUT, up, store = types.acc, types.out, types.up, types.store
    OP, ARG, IDX_IN = op, op in (ARGMAX, ARGMIN), idx_in
    finish = make_finish(op, bool(divide), store, OUT)
    IDENT = identity(op)

    @cuda.jit(device=True, inline="always")
    def better(v, i, bv, bi):  # (v, i) replaces (bv, bi)? NaN first, then the value, then the index
        if bv != bv:
            return v != v and i < bi
        if v != v:
            return True
        if OP == ARGMAX:
            return v > bv or (v == bv and i < bi)
        return v < bv or (v == bv and i < bi)

    @cuda.jit(device=True, inline="always")
    def combine(a, b):  # the operator, NaN-propagating for max/min
        if OP == SUM:
            return a + b
        if OP == MAX:
            return a if (a != a or a > b) else b
        return a if (a != a or a < b) else b

    def reduce_k02_axis_lanes(x, xi, out, outi, chunk, scale):
        tid = cuda.threadIdx.x
        lane, wid = tid % 32, tid // 32
        outer, n, inner = x.shape
        S, Q = out.shape
        NG = (Q + W - 1) // W  # output groups
        unit = cuda.blockIdx.x if WPO > 1 else cuda.blockIdx.x * NW + wid
        og, s = unit % NG, unit // NG
        slot, j = (lane // G, lane % G) if KFAST else (lane % W, lane // W)
        q = og * W + slot
        live = q < Q and s < S
        o, i = uint64(q // inner), uint64(q % inner)
        ks = (wid % WPO) * G + j  # this lane's first k in the chunk; then every KS
        KS = G * WPO
        k_lo = s * chunk
        k_hi = min(n, k_lo + chunk) if live else k_lo
        accs = cuda.local.array(LOADS, ACC)
        idxs = cuda.local.array(LOADS, int64)
        for u in range(LOADS):
            accs[u] = ACC(IDENT)
            idxs[u] = BIG
        for k0 in range(k_lo + ks, k_hi, KS * LOADS):
            for u in range(LOADS):
                k = k0 + u * KS
                if k < k_hi:
                    v = ACC(up(x[o, uint64(k), i]))
                    if ARG:
                        kk = xi[o, uint64(k), i] if IDX_IN else int64(k)
                        if better(v, kk, accs[u], idxs[u]):
                            accs[u], idxs[u] = v, kk
                    else:
                        accs[u] = combine(accs[u], v)
        a, ai = accs[0], idxs[0]
        for u in range(1, LOADS):
            if ARG:
                if better(accs[u], idxs[u], a, ai):
                    a, ai = accs[u], idxs[u]
            else:
                a = combine(a, accs[u])
        for off in OFFS:  # the lanes of one output
            if off < 32:
                b = shfl_xor_sync(FULL_MASK, a, off)
                if ARG:
                    bi = shfl_xor_sync(FULL_MASK, ai, off)
                    if better(b, bi, a, ai):
                        a, ai = b, bi
                else:
                    a = combine(a, b)
        if WPO > 1:  # the block's warps share the outputs: meet in shared memory
            part = cuda.shared.array(PN, ACC)  # [warp · W + slot]
            parti = cuda.shared.array(PN, int64)
            if j == 0:
                part[wid * W + slot] = a
                parti[wid * W + slot] = ai
            cuda.syncthreads()  # RAW: every warp's values written
            if wid == 0 and j == 0:
                for w in range(1, NW):  # in warp order: the same result every run
                    b, bi = part[w * W + slot], parti[w * W + slot]
                    if ARG:
                        if better(b, bi, a, ai):
                            a, ai = b, bi
                    else:
                        a = combine(a, b)
        if live and j == 0 and wid % WPO == 0:
            if ARG:  # the value too: a second pass folds (value, index) partials
                outi[s, q] = ai
            out[s, q] = finish(a, scale)  # (sums times scale, a 16-bit mean divided by it: _common.make_finish)

    return reduce_k02_axis_lanes


def signature(dtype, op: int = SUM, acc=None, out_dtype=None, idx_in: bool = False, divide: bool = False):
    x_t = numba_dtype(dtype)[:, :, ::1]
    o_t = numba_dtype(out_dtype if out_dtype is not None else dtype)[:, ::1]
    return void(x_t, int64[:, :, ::1], o_t, int64[:, ::1], int64, numba_dtype(acc if acc is not None else compute_dtype(dtype)))


def geometry(config: Config, outputs: int, splits: int = 1):
    groups = -(-outputs // config.outputs_per_unit())
    per_block = 1 if config.wpo > 1 else config.threads // 32
    return (-(-(groups * splits) // per_block),), config.block()


#: the kernel kinds the gate builds (CI time: two of the dozen the dispatch can launch): a sum into
#: float64 partials (the operator path) and argmin's second pass over (value, index) partials
#: (the pair path, indices read)
GATE_PARAMS = ({"op": SUM, "acc": np.float64, "out_dtype": np.float64}, {"op": ARGMIN, "idx_in": True})

RUNG = Rung("k02_axis_lanes", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(GATE_PARAMS, smem_exception="smem_bytes counts 8-byte partials and indices; "
                                                  "max/min of float32 keep 4"))
