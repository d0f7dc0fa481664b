"""k03 — k02's lanes over the flat memory: one offset advanced by a constant stride, full steps unchecked.

What changed versus k02
    The lesson: index the data as the flat memory it is — a 1-D offset advanced by a constant
    stride, full steps unchecked, one checked tail.  k02 subscripts a 3-D view ``x[o, k, i]``
    and tests ``k < k_hi`` before each of its ``LOADS`` loads: per element a multiply-add of
    the three subscripts, a compare and a branch around one load and one add.  Here the kernel
    takes the same ``(outer, n, inner)`` problem (the dispatch's lanes, warps per output,
    splits and passes are k02's) as a flat array and ``n``, ``inner``:

    * a lane's first element is at ``(o·n + k)·inner + i``, computed once; each of its loads is
      at ``off + u·STRIDE`` (``STRIDE = KS·inner`` elements, ``KS`` lanes along k; on rows,
      ``inner == 1``, a compile-time constant: immediate offsets, as in k01), and a step moves
      ``off`` by ``LOADS·STRIDE``;
    * the number of steps whose ``LOADS`` loads all lie in ``[k_lo, k_hi)`` is computed once
      (a division by a compile-time constant); those steps run without a test; the fewer than
      ``LOADS`` elements left go one at a time into the first accumulator (the checked tail).

    argmax/argmin: within one accumulator k only grows, so a later element replaces the kept
    one only if it is strictly better or the first NaN: ``not (v <= best) and best == best``
    (argmin: ``>=``) — two compares and two selects, no index compare.  The selected index is
    the step's base ``k0`` (the same register for every load of the step); accumulator u adds
    ``u·KS`` once at the end, and one that kept its identity (every element ±inf, the identity
    itself) takes its first element's index.  Across accumulators, lanes and warps the full
    NumPy rule (NaN first, then the value, then the smaller index), as k02; a second pass over
    (value, index) partials reads its indices and uses the full rule throughout.

Sums and means accumulate in float64 and round once (the mean's 1/count in the last pass),
max/min propagate NaN: k02's operators, identities and passes.  The fold after the loop
(accumulators, lane shuffles, the warps' meeting in shared memory, the store) is k02's, copied so
that each rung reads whole (k03 is the default wherever k01 is not; k02 stays as the lesson before it).

Memory traffic: every input element read once; Q values written (S·Q, then Q, when split).

Headline (H200, benchmarks/results/patterns_zoo_s25_h200.json, impl "simt_tiles (variant=None)"): 2.23 TB/s on sum 1048576x64 axis=-1, 1.99× torch
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda, int64, uint64, void

from ...half_io import compute_dtype
from ...runtime import Gate, Rung, TileConfig, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync
from ._common import ARGMAX, ARGMIN, MAX, SUM, element_types, identity, make_finish
from .k02_axis_lanes import ALONG_K, ALONG_OUTPUTS, BIG, GATE_PARAMS, geometry  # the same units as k02's


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """k02's fields (``threads``, ``lanes`` G per output, ``lane_axis``, ``wpo`` warps per output
    group, ``loads`` per lane per step); lanes/lane_axis/wpo are set per call by the dispatch.
    Its own type: a k03 config object names its rung."""

    threads: int = 256
    lanes: int = 32
    lane_axis: int = ALONG_K
    wpo: int = 1
    loads: int = 8
    #: blocks per SM ptxas must fit (``launch_bounds``; 1: one, and ptxas takes ~100 registers)
    min_blocks: int = 1
    #: the dispatch's passes over an inner axis (lanes along the outputs), and over rows split across a
    #: block's warps, take at least ``inner_min_threads // threads`` blocks per SM as their bound: 768
    #: threads, ≤ 85 registers (3 blocks of 256 in 80 registers, no spill for any op or dtype; 4096² axis 0
    #: −25%, 2 rows of 2^27 −5% on the H200)
    inner_min_threads: int = 768
    #: rows a warp each (or several rows a warp) take ``row_min_threads // threads`` blocks: 1024 threads,
    #: 64 registers (rows of 256 −11%, of 784 −18%; of 64 unchanged, where 3 blocks were 13% slower), except
    #: float64 argmax/argmin, which spill there and keep ``min_blocks`` (benchmarks/notes/patterns_zoo.md)
    row_min_threads: int = 1024
    #: a warp-a-row pass whose rows take more than one step of ``loads`` runs ``row_loads`` a step (H200:
    #: rows of 512 −15%, argmax of rows of 1000 −13%, of 1024 even; rows of one step keep ``loads``: 256
    #: at 4 was 13% slower); ``row_loads >= loads``: unchanged
    row_loads: int = 4

    def inner_blocks(self) -> int:
        """The launch bound's blocks per SM of a pass over an inner axis or over rows split across warps."""
        return max(self.min_blocks, self.inner_min_threads // self.threads)

    def row_blocks(self) -> int:
        """The launch bound's blocks per SM of a pass with a warp (or less) per row."""
        return max(self.min_blocks, self.row_min_threads // self.threads)

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


#: as k02's: the sim preset lanes along the outputs (a runtime stride), the default a block per
#: output group along rows (shared memory, a barrier; a constant stride)
PRESETS = {
    "sim": Config(threads=64, lanes=8, lane_axis=ALONG_OUTPUTS, wpo=1, loads=2, row_loads=1),
    "default": Config(threads=256, lanes=32, lane_axis=ALONG_K, wpo=8, loads=8),
}


def make_kernel(config: Config, dtype, op: int = SUM, acc=None, out_dtype=None, idx_in: bool = False,
                divide: bool = False):
    """Kernel ``(x, xi, out2, outi2, n, inner, chunk, scale)``: ``x`` the flat (outer, n, inner)
    array; out2[s, q] = op over k in [s·chunk, (s+1)·chunk) of x[(o·n + k)·inner + i]
    (q = o·inner + i), times ``scale`` (sums; the mean); arg ops write the index to outi2 (from
    the flat ``xi`` when ``idx_in``: a second pass)."""
    T, G, W, LOADS = config.threads, config.lanes, 32 // config.lanes, config.loads
    NW, WPO, KFAST = T // 32, config.wpo, config.lane_axis == ALONG_K
    PN = NW * W
    KS = G * WPO  # lanes along k: a lane's k advances by KS per load
    SPAN = KS * LOADS  # k per full step
    OFFS = tuple(o for o in (16, 8, 4, 2, 1) if (o < G if KFAST else o >= W)) or (32,)
    types = element_types(dtype, acc, out_dtype)  # 16-bit: read exactly, rounded once at the store
    ACC, OUT, up, store = types.acc, types.out, types.up, types.store
    OP, ARG, IDX_IN = op, op in (ARGMAX, ARGMIN), idx_in
    finish = make_finish(op, bool(divide), store, OUT)
    CHEAP = ARG and not idx_in  # the in-lane pair rule of monotone k (first pass)
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
    def later_wins(v, bv):  # a later k replaces the kept one: strictly better, or the first NaN
        if OP == ARGMAX:
            return (not (v <= bv)) & (bv == bv)
        return (not (v >= bv)) & (bv == bv)

    @cuda.jit(device=True, inline="always")
    def combine(a, b):  # the operator, NaN-propagating for max/min
        if OP == SUM:
            return a + b
        if OP == MAX:
            return a if (a != a or a > b) else b
        return a if (a != a or a < b) else b

    @cuda.jit(device=True, inline="always")
    def take(x, xi, at, accs, idxs, u, k0):  # element x[at] into accumulator u (k0: the step's first k)
        v = ACC(up(x[at]))
        if CHEAP:
            if later_wins(v, accs[u]):
                accs[u], idxs[u] = v, k0  # the step's base: + u·KS at the end
        elif ARG:
            kk = xi[at]
            if better(v, kk, accs[u], idxs[u]):
                accs[u], idxs[u] = v, kk
        else:
            accs[u] = combine(accs[u], v)

    def reduce_k03_flat_lanes(x, xi, out, outi, n, inner, chunk, scale):
        tid = cuda.threadIdx.x
        lane, wid = tid % 32, tid // 32
        S, Q = out.shape
        NG = (Q + W - 1) // W  # output groups
        unit = cuda.blockIdx.x if WPO > 1 else cuda.blockIdx.x * NW + wid
        og, s = unit % NG, unit // NG
        slot, j = (lane // G, lane % G) if KFAST else (lane % W, lane // W)
        q = og * W + slot
        live = q < Q and s < S
        k_lo = s * chunk
        k_hi = min(n, k_lo + chunk) if live else k_lo
        k_first = k_lo + (wid % WPO) * G + j  # this lane's first k; then every KS
        # the flat offset of (o, k_first, i), once; a constant stride from there
        if KFAST:  # rows: inner == 1, the stride a compile-time constant
            off = uint64(q * n + k_first)
            stride = uint64(KS)
        else:
            o, i = q // inner, q % inner
            off = uint64((o * n + k_first) * inner + i)
            stride = uint64(KS * inner)
        # steps whose LOADS loads all lie below k_hi: unchecked
        full_end = k_hi - (LOADS - 1) * KS
        steps = (full_end - k_first + SPAN - 1) // SPAN if full_end > k_first else 0
        accs = cuda.local.array(LOADS, ACC)
        idxs = cuda.local.array(LOADS, int64)
        for u in range(LOADS):
            accs[u] = ACC(IDENT)
            idxs[u] = BIG
        k0 = k_first
        for _ in range(steps):
            for u in range(LOADS):
                take(x, xi, off + uint64(u) * stride, accs, idxs, u, k0)
            off += uint64(LOADS) * stride
            k0 += SPAN
        # the checked tail: one step of at most LOADS - 1 elements, each into its own accumulator and
        # unrolled, so its loads are in flight together (a loop into accs[0] waited for each in turn:
        # up to LOADS - 1 DRAM round trips; rows of 1000 with 8 loads, 7 of them); behind one branch, so
        # rows of whole steps (128 = 16 lanes x 8) skip its LOADS - 1 checks
        if k0 < k_hi:
            for u in range(LOADS - 1):
                if k0 + u * KS < k_hi:
                    take(x, xi, off + uint64(u) * stride, accs, idxs, u, k0)
        if CHEAP:  # the bases to indices; an accumulator left at its identity: its first element
            for u in range(LOADS):
                if idxs[u] != BIG:
                    idxs[u] += u * KS
                elif steps > 0 or k_first + u * KS < k_hi:
                    idxs[u] = k_first + u * KS
        a, ai = accs[0], idxs[0]
        for u in range(1, LOADS):
            if ARG:
                if better(accs[u], idxs[u], a, ai):
                    a, ai = accs[u], idxs[u]
            else:
                a = combine(a, accs[u])
        for off_ in OFFS:  # the lanes of one output
            if off_ < 32:
                b = shfl_xor_sync(FULL_MASK, a, off_)
                if ARG:
                    bi = shfl_xor_sync(FULL_MASK, ai, off_)
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

    return reduce_k03_flat_lanes


def signature(dtype, op: int = SUM, acc=None, out_dtype=None, idx_in: bool = False, divide: bool = False):
    x_t = numba_dtype(dtype)[::1]
    o_t = numba_dtype(out_dtype if out_dtype is not None else dtype)[:, ::1]
    return void(x_t, int64[::1], o_t, int64[:, ::1], int64, int64, int64,
                numba_dtype(acc if acc is not None else compute_dtype(dtype)))


#: k02's kernel kinds (a sum into float64 partials, argmin's second pass) and the first pass of
#: argmax, where the cheaper in-lane pair rule lives
GATE_PARAMS = (*GATE_PARAMS, {"op": ARGMAX})

def jit_options(config: Config, dtype) -> dict:
    return {"launch_bounds": (config.threads, config.min_blocks) if config.min_blocks > 1 else (config.threads,)}


RUNG = Rung("k03_flat_lanes", Config, PRESETS, make_kernel, geometry, signature, jit_options,
            gate=Gate(GATE_PARAMS, half=("default",),  # float16 and bfloat16 too: the rung variant=None chooses
                      smem_exception="smem_bytes counts 8-byte partials and indices; max/min of float32 "
                                     "(and of 16-bit inputs) keep 4"))
