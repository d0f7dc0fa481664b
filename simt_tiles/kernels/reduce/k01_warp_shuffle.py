"""k01 — reductions with warp shuffles: per-thread fold, warp butterfly, one shared step.

One kernel body serves both shapes of the problem:

* last axis: block b folds row b of a 2-D view;
* whole array: the grid's blocks share the flat array, each folding its
  slice into ``partials[b]``; a second launch of the same kernel with one
  block folds the G partials (an array of at most T·``loads`` elements, which
  one block's first step covers, is one launch of one block into the result).

Which elements a thread reads: each warp takes ``32·loads`` consecutive
elements per step (lane + 32·u for u < ``loads``: each load instruction of the
warp is one coalesced 128-byte request, and the warp's ``loads`` requests are
adjacent), then jumps by the span of all the warps sharing the row.

Within a block: each thread folds its elements into ``loads`` independent
accumulators (``loads`` loads in flight per thread per step), then into one; the warp
combines with five ``shfl_xor_sync`` steps, lane 0 of each warp writes one
value to shared memory, one barrier, and thread 0 folds the T/32 values.

Memory traffic: every input element read once; one value written per row
(or per block, then once more).  The bandwidth target is ≥ 90% of a
device-to-device copy.

Headline (H200, benchmarks/results/patterns_h200.json, impl "simt_tiles.reduce"): 4.18 TB/s on sum 2^28, 98% of copy
"""

from __future__ import annotations

import numpy as np
from numba import cuda, uint64, void

from ...half_io import compute_dtype, make_io, make_store
from ...runtime import Gate, Rung, numba_dtype
from ...warp import FULL_MASK, shfl_xor_sync
from ._common import MAX, MIN, SUM, ReduceConfig, acc_dtype, identity

Config = ReduceConfig
PRESETS = {
    "sim": Config(threads=32, max_blocks=3, loads=2, row_threads=32),
    # whole arrays: 512 × 528 (4 blocks per SM); rows: a block of 256 per row (512 reached 86%
    # of the copy on 16384 rows of 16384, 256 100%: see the docstring)
    "default": Config(threads=512, max_blocks=528, row_threads=256),
    "rows": Config(threads=256, max_blocks=528),  # what "default" compiles for rows (for the gate)
}


def make_kernel(config: Config, dtype, op: int = SUM, out_dtype=None):
    """Kernel ``(x2d, out1d)``: ``out[b]`` = op over row b of ``x2d`` when ``x2d`` has as
    many rows as the grid has blocks; with a single row (a flat array viewed as
    (1, n)) the grid's blocks share it, grid-stride.  Accumulates in ``acc_dtype`` (max/min of 16-bit
    inputs: float32); 16-bit elements are read through ``up`` and stored rounded once (``half_io``)."""
    T = config.threads
    NW = T // 32
    ACC_DT = compute_dtype(acc_dtype(op, dtype))
    ACC = numba_dtype(ACC_DT)
    up, _ = make_io(dtype)  # 16-bit: the stored element as float32 (float32/float64: the value)
    store = make_store(out_dtype if out_dtype is not None else dtype, ACC_DT)  # 16-bit: rounded once (float32/float64: the value)
    IDENT = identity(op)
    OP = op
    LOADS = config.loads

    def reduce_k01_warp_shuffle(x, out):
        b = cuda.blockIdx.x
        g = cuda.gridDim.x
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        rows, n = x.shape
        # Each warp reads LOADS·32 consecutive elements per step (lane + 32·u), then jumps
        # by the span of all warps sharing the row: long contiguous runs per request burst.
        if rows == 1:  # whole array: the grid's warps share the one row
            row, start, span = 0, (b * NW + wid) * (32 * LOADS) + lane, g * T * LOADS
        else:  # one row per block
            row, start, span = b, wid * (32 * LOADS) + lane, T * LOADS
        part = cuda.shared.array(NW, ACC)

        def combine(a, b):
            # the operator, NaN-propagating for max/min; a closure inside the kernel
            # (Numba inlines it) because device functions would need a driver to compile
            if OP == SUM:
                return a + b
            if OP == MAX:
                return a if (a != a or a > b) else b
            return a if (a != a or a < b) else b

        # LOADS independent accumulators: LOADS loads in flight per thread per step
        # (one accumulator would serialise them behind its dependency chain)
        accs = cuda.local.array(LOADS, ACC)
        for u in range(LOADS):
            accs[u] = ACC(IDENT)
        # steps whose LOADS loads are all in range: no bounds checks between the loads
        full_end = n - (LOADS - 1) * 32
        k = (full_end - start + span - 1) // span if full_end > start else 0
        # unsigned subscripts: a signed one gets Numba's negative-index wraparound (a compare and
        # two selects per load); unsigned ones let LLVM address the LOADS loads as one base plus
        # constant offsets (instructions per step: ≈ 60 → ≈ 30 here)
        urow = uint64(row)
        for c0 in range(start, full_end, span):
            uc = uint64(c0)
            for u in range(LOADS):
                accs[u] = combine(accs[u], ACC(up(x[urow, uc + uint64(u * 32)])))
        # the tail: one step of fewer than LOADS loads, unrolled (constant indices keep accs in registers)
        # so they are in flight together; a loop into accs[0] waited for each (sum of 1000: 7 round trips)
        c0 = start + k * span
        for u in range(LOADS - 1):
            if c0 + u * 32 < n:
                accs[u] = combine(accs[u], ACC(up(x[urow, uint64(c0 + u * 32)])))
        acc = accs[0]
        for u in range(1, LOADS):
            acc = combine(acc, accs[u])
        for off in (16, 8, 4, 2, 1):  # butterfly across the warp
            o = shfl_xor_sync(FULL_MASK, acc, off)
            acc = combine(acc, o)
        if lane == 0:
            part[wid] = acc
        cuda.syncthreads()  # RAW: every warp's value written
        if tid == 0:
            acc = part[0]
            for w in range(1, NW):
                o = part[w]
                acc = combine(acc, o)
            out[b] = store(acc)

    return reduce_k01_warp_shuffle


def signature(dtype, op: int = SUM, out_dtype=None):
    out_t = numba_dtype(out_dtype if out_dtype is not None else dtype)
    return void(numba_dtype(dtype)[:, ::1], out_t[::1])


def geometry(config: Config, rows: int, cols: int):
    return (rows,), config.block()


#: the compile gate builds every (op, output dtype) kernel the launcher uses: sums write float64
#: partials in pass 1 and round them to the input dtype in pass 2
GATE_PARAMS = tuple(
    {"op": code, "out_dtype": out}
    for code in (SUM, MAX, MIN)
    for out in ((np.float64, np.float32) if code == SUM else (None,))
)

#: what simt_tiles.autotune may time (declared; reduce is not wired to the tuner yet): the default,
#: and whole-array blocks of 256 and 1024 threads keeping 4 × 132 SMs' worth of threads in flight
TUNING_SPACE = ("default", {"threads": 256, "max_blocks": 1056}, {"threads": 1024, "max_blocks": 264},
                {"row_threads": 512}, {"loads": 4})

RUNG = Rung("k01_warp_shuffle", Config, PRESETS, make_kernel, geometry, signature,
            gate=Gate(GATE_PARAMS, half=("default",),  # float16 and bfloat16 too: whole arrays' rung (variant=None)
                      smem_exception="smem_bytes counts 8-byte partials (sums accumulate in float64); max/min of "
                                     "float32 (and of 16-bit inputs) keep 4"),
            tuning_space=TUNING_SPACE)
