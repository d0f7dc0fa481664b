"""k05 — a row too long for the registers: the rest of it in shared memory, still read once.

What changed versus k04
    k04 keeps a 32768-float row in registers: 512 threads × 64 values, 128
    registers per thread, so one block fills an SM's 65536 registers.  With
    one block per SM nothing overlaps its phases — while its threads reduce,
    no loads are in flight — and the H200 reached 80% of the copy (96% at
    16384 columns, two blocks per SM).  An SM also has 228 KiB of shared
    memory that k04 leaves unused, so here each thread keeps ``reg_vpt``
    values in registers and ``smem_vpt`` more in shared memory: a private
    column of a ``(smem_vpt, threads)`` array (lane-consecutive words, no bank
    conflicts, and no barrier — no thread reads another's values).  Sized so
    that *two* rows fit an SM: 32768 float32 columns, 256 threads, 82 values in
    registers (≤ 128 registers per thread: ``launch_bounds=(256, 2)``) and
    46 in shared memory (46 KiB, under the 48 KiB of static shared memory a
    block may declare without the driver's opt-in).

    One block per row (rows this long fill a block).  The shared values take
    one extra shared store and load each way: exp is written back in place,
    so the write phase reads each once more.  The loads go through the
    registers in two batches (see the kernel), so a thread waits for DRAM
    twice, not once per shared value.

    ``Config.for_problem`` splits the ``cdiv(cols, threads)`` values (rounded
    up to a multiple of ``vpt_step``, so nearby lengths share a kernel)
    between shared memory (at most ``smem_budget`` bytes) and registers (at
    most ``max_vpt`` 32-bit registers, and what ptxas needs besides: float32
    rows up to 33280 columns, float64 up to 15104); longer rows raise
    ConfigError and ``variant=None`` uses k03.

Memory traffic: one read and one write of the row (as k04 and a copy).

Measured on the H200: see benchmarks/NOTES.md (session 4).
"""

from __future__ import annotations

import dataclasses
import math

from numba import cuda, uint32, uint64

from ...runtime import ConfigError, Rung, cdiv, numba_dtype
from ._common import WarpRowConfig, make_row_reductions, signature

#: the most static shared memory a block may declare (more needs the driver's opt-in)
STATIC_SMEM_LIMIT = 48 * 1024


@dataclasses.dataclass(frozen=True)
class Config(WarpRowConfig):
    """One row per block of ``threads``; ``vpt`` values per thread, the first
    ``reg_vpt`` in registers, the other ``smem_vpt = vpt − reg_vpt`` in shared
    memory (set per call by :meth:`for_problem`; the presets' values are what
    the compile gate builds)."""

    threads: int = 256
    vpt: int = 4
    reg_vpt: int = 4
    #: most 32-bit registers of row values per thread (a float64 value takes two)
    max_vpt: int = 84
    #: shared memory for row values per block (bytes)
    smem_budget: int = 46 * 1024
    #: blocks per SM that ptxas must leave registers for (``launch_bounds``)
    min_blocks: int = 2
    #: values per thread are rounded up to a multiple of this (fewer distinct kernels)
    vpt_step: int = 4

    @property
    def smem_vpt(self) -> int:
        return self.vpt - self.reg_vpt

    def smem_bytes(self, itemsize):
        return (max(self.smem_vpt, 1) * self.threads + 2 * (self.threads // 32)) * itemsize

    def rules(self):
        yield from super().rules()
        yield ("reg_vpt", self.reg_vpt <= self.vpt <= 2 * self.reg_vpt,
               "reg_vpt <= vpt <= 2·reg_vpt (the rest, at most reg_vpt, in shared memory: see the loads)")
        yield ("vpt_step", self.vpt_step >= 1, "vpt_step >= 1")
        yield ("smem_budget", self.smem_budget + 256 <= STATIC_SMEM_LIMIT,
               f"smem_budget + 256 <= {STATIC_SMEM_LIMIT} (static shared memory per block)")

    def for_problem(self, rows: int, cols: int, itemsize: int = 4) -> "Config":
        """This config with ``reg_vpt``/``smem_vpt`` fitted to rows of ``cols`` values.

        ConfigError (naming ``x``) when the row does not fit both."""
        smem_cap = self.smem_budget // (self.threads * itemsize)
        # registers: max_vpt, and no more than min_blocks blocks of ``threads`` leave per thread
        # after the rest of the kernel's (ptxas, 256 threads × 2 blocks = 128 registers: float32
        # 84 values + 44 without spilling, float64 36 values (72 registers) + 56)
        spare = 65536 // (self.threads * self.min_blocks) - 32 - 12 * (itemsize // 4)
        reg_cap = min(self.max_vpt, spare) * 4 // itemsize
        exact = cdiv(cols, self.threads)
        # values per thread rounded up to vpt_step (nearby lengths share a kernel) unless only
        # the exact count fits; shared memory takes what the registers cannot, and at most
        # as many as the registers (the loads stage it through them)
        for per_thread in (self.vpt_step * cdiv(exact, self.vpt_step), exact):
            reg_vpt = max(per_thread - smem_cap, cdiv(per_thread, 2), 1)
            if reg_vpt <= reg_cap:
                return dataclasses.replace(self, vpt=max(per_thread, 1), reg_vpt=reg_vpt)
        raise ConfigError(
            f"x: rows of {cols} values of {itemsize} bytes do not fit k05_split_row "
            f"(threads {self.threads} × ({reg_cap} in registers + {min(smem_cap, reg_cap)} in shared "
            f"memory) = {self.threads * (reg_cap + min(smem_cap, reg_cap))}); "
            f"use variant='k03_online' or variant=None"
        )


PRESETS = {
    # steps of 1, so the simulator's short rows already put values in shared memory
    "sim": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=8, smem_budget=1024, min_blocks=1, vpt_step=1),
    # 32768 float32 columns: 82 values in registers + 46 in shared memory per thread.  The gate
    # builds float64's largest fit (15104 columns: 36 + 23); float32's (84 + 46) is checked by
    # tests/test_compile_gate.py
    "default": Config(threads=256, vpt=59, reg_vpt=36),
}


def make_kernel(config: Config, dtype):
    T, VR, VS = config.threads, config.reg_vpt, config.smem_vpt
    SROWS = max(VS, 1)  # a plain constant shape (a zero-row array is not declarable)
    NW = T // 32
    DT = numba_dtype(dtype)
    NEG_INF = -math.inf
    row_max, row_sum = make_row_reductions(NW, DT)  # shuffles, then one barrier across warps

    def softmax_k05_split_row(x, out):
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        n = x.shape[1]
        ru = uint64(cuda.blockIdx.x)  # one row per block
        tu = uint64(tid)  # unsigned subscripts: no negative-index tax (see k04)
        # value i (column tu + i·T) exists iff i·T < lim: one 32-bit compare with a constant
        # per access (``c < n`` on the 64-bit column costs an add and two compares)
        lim = uint32(n - tid) if n > tid else uint32(0)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        spill = cuda.shared.array((SROWS, T), DT)  # column tid is this thread's: no barrier
        vals = cuda.local.array(VR, DT)  # registers: indexed by unrolled constants only

        # One coalesced read, in two batches of loads through the registers.  Value i of
        # the thread is column tu + i·T; values i < VS live in shared memory, the others
        # in ``vals``: vals[k] holds value VR + k for k < VS, value k otherwise.  Batch 1
        # loads values 0 … VR−1 (all VR loads in flight), the first VS go on to shared
        # memory, and batch 2 loads values VR … VR+VS−1 into the freed registers: two
        # DRAM round trips per thread (the shared part loaded by itself, in a loop the
        # compiler unrolls only 4 deep, would wait for VS/4 of them).
        for i in range(VR):
            vals[i] = x[ru, tu + uint64(i * T)] if uint32(i * T) < lim else DT(NEG_INF)
        for j in range(VS):
            spill[j, tid] = vals[j]
        for k in range(VS):
            vals[k] = x[ru, tu + uint64((VR + k) * T)] if uint32((VR + k) * T) < lim else DT(NEG_INF)

        m = DT(NEG_INF)
        for i in range(VR):
            m = max(m, vals[i])
        for j in range(VS):
            m = max(m, spill[j, tid])
        m = row_max(m, red_m, wid, lane, 0)

        s = DT(0)  # exp in place (registers and shared), then their sum
        for i in range(VR):
            e = math.exp(vals[i] - m)
            vals[i] = e
            s += e
        for j in range(VS):
            e = math.exp(spill[j, tid] - m)
            spill[j, tid] = e
            s += e
        s = row_sum(s, red_s, wid, lane, 0)

        inv = DT(1) / s
        for k in range(VR):  # one coalesced write (the same value → column map)
            i = VR + k if k < VS else k
            if uint32(i * T) < lim:
                out[ru, tu + uint64(i * T)] = vals[k] * inv
        for j in range(VS):
            if uint32(j * T) < lim:
                out[ru, tu + uint64(j * T)] = spill[j, tid] * inv

    return softmax_k05_split_row


def geometry(config: Config, rows: int, cols: int):
    return (rows,), config.block()


def jit_options(config: Config, dtype) -> dict:
    return {"launch_bounds": (config.threads, config.min_blocks)}


RUNG = Rung("k05_split_row", Config, PRESETS, make_kernel, geometry, signature, jit_options)
