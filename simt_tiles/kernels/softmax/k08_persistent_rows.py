"""k08 — one block per SM walks its rows: the next row's loads go out under this row's stores.

What changed versus k05
    k05's ``one_per_sm`` preset holds a vocabulary row (50257 float32
    values: 512 threads × (84 in registers + 14 in shared memory)) in one
    block per SM, so nothing overlaps its phases: the SM reads the row, stops
    reading while it folds the max and the sum, writes the row, and only
    then does the next block start to read.  Here the grid is one block per
    SM and each block walks rows ``b, b + G, b + 2G, …``.  Its write loop
    stores value k of row r and at once loads value k of row r + G into the
    register it just freed; the shared part's values go by ``cp.async``
    (:func:`simt_tiles.vector.copy1_async`: no register, no stall), each
    issued right after the value it replaces was read.  So the stores of
    one row and the loads of the next are in flight together, and only the
    fold (max, exp, sum: a few µs a row) leaves DRAM idle.

    No new barrier: each thread's shared values are its own column (as in
    k05), so ``wait_copies`` at the top of a row is all a thread waits for;
    the reductions' two partial arrays are reused row after row — the sum's
    barrier of row r separates the max's reads of row r from its writes of
    row r + G (and the next max's barrier the sum's).

Memory traffic: one read and one write of each row (as k05 and a copy).

Headline (H200, ``benchmarks/lab/softmax_vocab_probe.py``): see the topic notes (patterns_zoo.md, "Session 29")
"""

from __future__ import annotations

import dataclasses
import math

from numba import cuda, uint32, uint64

from ...runtime import Rung, numba_dtype
from ...vector import commit_copies, copy1_async, wait_copies
from . import k05_split_row
from ._common import make_plain_log, make_row_reductions, signature


@dataclasses.dataclass(frozen=True)
class Config(k05_split_row.Config):
    """k05's fields and fit (:meth:`for_problem`: registers first, then shared memory), one block an SM
    (``min_blocks``) for the whole grid."""

    threads: int = 512
    smem_budget: int = 200 * 1024
    min_blocks: int = 1

    def rules(self):
        yield from super().rules()
        yield ("min_blocks", self.min_blocks == 1, "min_blocks == 1 (the grid is one block per SM)")


PRESETS = {
    # the simulator's: past k05's sim preset (64 × 20) to 64 × (8 + 32) values, shared memory from 9 a thread
    "sim": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=8, smem_budget=8192, vpt_step=1),
    # k05 one_per_sm's: 512 × (84 + up to 100); the gate builds float64's largest fit (36 + 50)
    "default": Config(threads=512, vpt=86, reg_vpt=36),
}


def make_kernel(config: Config, dtype, log: bool = False):
    T, VR, VS = config.threads, config.reg_vpt, config.smem_vpt
    LOG = log
    NW = T // 32
    DT = numba_dtype(dtype)
    NEG_INF = -math.inf
    row_max, row_sum, mx = make_row_reductions(NW, DT)
    shift_of, log_sum = make_plain_log(DT)

    def softmax_k08_persistent_rows(x, out):
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        rows, n = x.shape[0], x.shape[1]
        tu, su = uint64(tid), uint32(tid)
        lim = uint32(n - tid) if n > tid else uint32(0)  # value i (column tu + i·T) exists iff i·T < lim
        ns = min(uint32(VS), (lim + uint32(T - 1)) // uint32(T))  # this thread's shared values that exist
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        spill = cuda.shared.array(0, DT)  # dynamic, VS × T: column tid is this thread's (no barrier)
        vals = cuda.local.array(VR, DT)  # registers: indexed by unrolled constants only
        step = cuda.gridDim.x
        r = cuda.blockIdx.x

        # the first row: values i < VS by cp.async into shared memory, VS + k into vals[k]
        if r < rows:
            for j in range(ns):
                copy1_async(spill, su + j * uint32(T), x, uint64(r) * uint64(n) + tu + uint64(j) * uint64(T))
            commit_copies()
            for k in range(VR):
                i = VS + k
                vals[k] = x[r, tu + uint64(i * T)] if uint32(i * T) < lim else DT(NEG_INF)
        while r < rows:  # the same count of rows for every thread of the block: the barriers are uniform
            wait_copies()  # this thread's shared values of row r have landed (only it reads them)
            m = DT(NEG_INF)
            for k in range(VR):
                m = mx(m, vals[k])
            for j in range(ns):
                m = mx(m, spill[su + j * uint32(T)])
            m = row_max(m, red_m, wid, lane, 0)
            sh = shift_of(m) if LOG else m
            s = DT(0)  # exp in place (softmax; log_softmax keeps the values), then the sum
            for k in range(VR):
                e = math.exp(vals[k] - sh)
                if not LOG:
                    vals[k] = e
                s += e
            for j in range(ns):
                e = math.exp(spill[su + j * uint32(T)] - sh)
                if not LOG:
                    spill[su + j * uint32(T)] = e
                s += e
            s = row_sum(s, red_s, wid, lane, 0)
            if LOG:
                a, ls = DT(1), log_sum(m, s)
            else:
                sh, a, ls = DT(0), DT(1) / s, DT(0)

            nxt = r + step
            more = nxt < rows
            src = uint64(nxt) * uint64(n) + tu
            for j in range(ns):  # the shared part: each value out, then row nxt's copied into its place
                out[r, tu + uint64(j) * uint64(T)] = (spill[su + j * uint32(T)] - sh) * a - ls
                if more:
                    copy1_async(spill, su + j * uint32(T), x, src + uint64(j) * uint64(T))
            commit_copies()
            if more:  # the registers: each value out, then row nxt's loaded into it
                for k in range(VR):
                    i = VS + k
                    inside = uint32(i * T) < lim
                    if inside:
                        out[r, tu + uint64(i * T)] = (vals[k] - sh) * a - ls
                    # (−inf past the row's end again: softmax's exps overwrote it)
                    vals[k] = x[nxt, tu + uint64(i * T)] if inside else DT(NEG_INF)
            else:  # the block's last row
                for k in range(VR):
                    i = VS + k
                    if uint32(i * T) < lim:
                        out[r, tu + uint64(i * T)] = (vals[k] - sh) * a - ls
            r = nxt

    return softmax_k08_persistent_rows


def geometry(config: Config, rows: int, cols: int, sms: int = 132):
    return (min(rows, sms),), config.block()


def jit_options(config: Config, dtype, **params) -> dict:
    return {"launch_bounds": (config.threads, 1)}


def dynamic_smem(config: Config, dtype, **params) -> int:
    return config.dynamic_smem_bytes(dtype.itemsize)


RUNG = Rung("k08_persistent_rows", Config, PRESETS, make_kernel, geometry, signature, jit_options,
            dynamic_smem=dynamic_smem)
