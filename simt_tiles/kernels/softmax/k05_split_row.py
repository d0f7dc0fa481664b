"""k05 — a row too long for the registers: the rest of it in shared memory, still read once.

What changed versus k04
    k04 keeps a 32768-float row in registers: 512 threads × 64 values, 128
    registers per thread, so one block fills an SM's 65536 registers.  With
    one block per SM nothing overlaps its phases — while its threads reduce,
    no loads are in flight — and the H200 reached 80% of the copy (96% at
    16384 columns: 64 registers, two blocks per SM).  An SM also has 228 KiB
    of shared memory that k04 leaves unused, so here each thread keeps
    ``reg_vpt`` values in registers and ``smem_vpt`` more in shared memory: a
    private column of a ``smem_vpt × threads`` array (lane-consecutive words,
    no bank conflicts, and no barrier — no thread reads another's values).
    Sized so that *two* rows fit an SM: 32768 float32 columns, 256 threads,
    84 values in registers (128 registers: ``launch_bounds=(256, 2)``) and
    44 in shared memory (44 KiB per block).

    The array is *dynamic* shared memory, sized at launch (up to
    ``smem_budget``, 96 KiB), so more than the 48 KiB a block may declare
    statically is possible; the launcher opts the kernel in
    (``runtime.allow_dynamic_smem``: a driver attribute numba-cuda 0.30 does
    not expose).

    One block per row (rows this long fill a block).  The shared values take
    one extra shared store and load each way: exp is written back in place,
    so the write phase reads each once more.  The loads go through the
    registers in chunks (see the kernel), so a thread waits for DRAM
    cdiv(smem_vpt, reg_vpt) + 1 times (the default: twice), not once per
    shared value.

    ``Config.for_problem`` splits the ``cdiv(cols, threads)`` values (rounded
    up to a multiple of ``vpt_step``, so nearby lengths share a kernel)
    between shared memory (at most ``smem_budget`` bytes) and registers (at
    most ``max_vpt`` 32-bit registers, and what ptxas needs besides); longer
    rows raise ConfigError, and ``variant=None`` tries the ``one_per_sm``
    preset (one block per SM, 200 KiB: rows to 94208; also the faster for
    few rows of ≥ 96 KiB: dispatch.py says how few), then k06.

    ``vec`` (16-bit inputs; 1 in every preset ``variant=None`` takes; 8 in "half" and "half_one_per_sm"): a
    thread's values in runs of ``vec`` consecutive columns, each run one 4-, 8- or 16-byte load and store
    (:func:`make_vector_kernel`; k08's knob, k06's ``make_vector_rows``); arrays not 16-byte aligned run ``vec=1``
    (the plan's ``unaligned`` twin).

    ``spill_bits`` (16-bit inputs; 16 in "held16", 32 elsewhere): the shared part keeps each value's 16-bit
    bits, half the bytes, so a row of 50257 values (GPT-2's vocabulary) fits two blocks an SM, not one; softmax
    then takes exp of a shared value twice (the sum, the write) instead of storing it back.

Memory traffic: one read and one write of the row (as k04 and a copy).

Headline (H200, benchmarks/results/patterns_h200.json): 3.98 TB/s on 16384x32768, 93% of copy
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import cuda, uint32, uint64

from ...runtime import MAX_DYNAMIC_SMEM, ConfigError, Gate, Rung, cdiv, numba_dtype
from ...half_io import inline, make_pairs
from ...vector import store16_words
from ._common import (WarpRowConfig, compute_dtype, held_itemsize, make_io, make_plain_log, make_row_reductions,
                      signature)
from .k06_split_blocks import check_vec, make_vector_rows


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
    max_vpt: int = 96
    #: registers per thread the kernel needs besides the float32 row values (ptxas: 256 threads
    #: × 2 blocks leave 128, 84 values + 44 compile without spilling; 512 × 2 leave 64: 20 + 44
    #: do, 22 + 42 and 32 + 32 spill)
    reg_overhead: int = 44
    #: dynamic shared memory for row values per block (bytes; two blocks per SM: ≤ 113 KiB)
    smem_budget: int = 96 * 1024
    #: blocks per SM that ptxas must leave registers for (``launch_bounds``)
    min_blocks: int = 2
    #: values per thread are rounded up to a multiple of this (fewer distinct kernels)
    vpt_step: int = 4
    #: registers 16-bit inputs leave besides reg_overhead (their conversions: bfloat16 rows at 84 values in
    #: registers spilled 12 bytes, at 82 none; the float32 fits are unchanged)
    half_reg_overhead: int = 2
    #: 16-bit values a load and a store (1; 2, 4 or 8 for 16-bit inputs: one 4-, 8- or 16-byte access, a thread's
    #: values in runs of ``vec`` consecutive columns, :func:`make_vector_kernel`; ``vpt`` and ``reg_vpt`` multiples of
    #: it; the launcher runs ``vec=1`` where ``x`` or ``out`` is not 16-byte aligned)
    vec: int = 1
    #: bits a 16-bit input's shared value takes: 32 (as float32) or 16 (its own bits; exp taken again at the write);
    #: float32/float64 inputs hold their own dtype either way
    spill_bits: int = 32

    @property
    def smem_vpt(self) -> int:
        return self.vpt - self.reg_vpt

    def smem_bytes(self, itemsize):  # static: the reductions' partials
        return 2 * (self.threads // 32) * held_itemsize(itemsize)

    def spill_itemsize(self, itemsize) -> int:
        """Bytes of one shared value (16-bit values held as float32 unless ``spill_bits`` is 16)."""
        return 2 if self.spill_bits == 16 and itemsize == 2 else held_itemsize(itemsize)

    def dynamic_smem_bytes(self, itemsize):  # the row values' share
        return max(self.smem_vpt, 1) * self.threads * self.spill_itemsize(itemsize)

    def rules(self):
        # whole warps, any number of them (shuffles, then one barrier: no tree over the block)
        yield ("threads", self.threads % 32 == 0 and 0 < self.threads <= 1024, "threads a multiple of 32, at most 1024")
        yield ("reg_vpt", self.reg_vpt <= self.vpt <= 5 * self.reg_vpt,
               "reg_vpt <= vpt <= 5·reg_vpt (the rest in shared memory, loaded in ≤ 4 chunks of reg_vpt)")
        yield ("vpt_step", self.vpt_step >= 1, "vpt_step >= 1")
        yield ("smem_budget", self.smem_budget <= MAX_DYNAMIC_SMEM,
               f"smem_budget <= {MAX_DYNAMIC_SMEM} (dynamic shared memory per block)")
        yield ("vec", self.vec in (1, 2, 4, 8) and self.vpt % self.vec == 0 and self.reg_vpt % self.vec == 0,
               "vec is 1, 2, 4 or 8, and divides vpt and reg_vpt (whole runs of vec columns)")
        yield ("spill_bits", self.spill_bits in (16, 32) and not (self.spill_bits == 16 and self.vec > 1),
               "spill_bits is 32 or 16 (16: with vec 1)")

    def for_problem(self, rows: int, cols: int, itemsize: int = 4) -> "Config":
        """This config with ``reg_vpt``/``smem_vpt`` fitted to rows of ``cols`` values.

        ConfigError (naming ``x``) when the row does not fit both.  16-bit values are held as float32
        (registers and shared memory: :func:`held_itemsize`), so they fit as float32 rows do — but with
        ``spill_bits=16`` the shared ones take 2 bytes."""
        held = held_itemsize(itemsize)
        smem_cap = self.smem_budget // (self.threads * self.spill_itemsize(itemsize))
        # registers: max_vpt, and what min_blocks blocks of ``threads`` leave per thread after
        # the rest of the kernel's (reg_overhead; float64's exp needs 12 more)
        spare = (65536 // (self.threads * self.min_blocks) - self.reg_overhead - 12 * (held // 8)
                 - (self.half_reg_overhead if itemsize == 2 else 0))
        reg_cap = min(self.max_vpt, spare) * 4 // held
        exact, step = cdiv(cols, self.threads), self.vpt_step
        if self.vec > 1:  # whole runs of vec columns (a run's registers: in registers or shared memory whole)
            V = self.vec
            reg_cap, smem_cap, exact, step = reg_cap // V * V, smem_cap // V * V, V * cdiv(cols, V * self.threads), \
                math.lcm(step, V)
        # values per thread rounded up to vpt_step (nearby lengths share a kernel) unless only
        # the exact count fits; registers first, shared memory takes the rest
        for per_thread in (step * cdiv(exact, step), exact):
            reg_vpt = max(self.vec, min(reg_cap, per_thread))
            if per_thread - reg_vpt <= min(smem_cap, 4 * reg_vpt):
                return dataclasses.replace(self, vpt=max(per_thread, 1), reg_vpt=reg_vpt)
        raise ConfigError(
            f"x: rows of {cols} values of {itemsize} bytes do not fit k05_split_row "
            f"(threads {self.threads} × ({reg_cap} in registers + {min(smem_cap, 4 * reg_cap)} in shared "
            f"memory) = {self.threads * (reg_cap + min(smem_cap, 4 * reg_cap))}); "
            f"use variant='k03_online' or variant=None"
        )


PRESETS = {
    # few registers, so the simulator's rows reach shared memory (k04's sim preset takes ≤ 512)
    "sim": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=4, smem_budget=4096, min_blocks=1, vpt_step=1),
    # 32768 float32 columns: 84 values in registers + 44 in shared memory (44 KiB) per thread;
    # 93.5% of the copy on the H200 (512 threads × (20 + 44): 81.6%).  The gate builds float64's
    # largest fit (21504 columns: 36 + 48); float32's (46080: 84 + 96) is checked by
    # tests/test_compile_gate.py
    "default": Config(threads=256, vpt=84, reg_vpt=36),
    # rows past the default's two blocks per SM, to 94208 float32 columns (512 × (84 + 100)): one block per
    # SM, 200 KiB of shared memory (vocabulary rows: 50257 columns, 84 + 14 values a thread); the gate
    # builds float64's largest fit (44032: 36 + 50), tests/test_compile_gate.py float32's.  "sim_one_per_sm":
    # the simulator's twin, so tests take this path
    "one_per_sm": Config(threads=512, vpt=86, reg_vpt=36, smem_budget=200 * 1024, min_blocks=1),
    "sim_one_per_sm": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=8, smem_budget=8192, min_blocks=1, vpt_step=1),
    # 16-bit only (off by default: unmeasured, benchmarks/notes/patterns.md "k05's vec knob"): "default" and
    # "one_per_sm" reading 8 values a 16-byte load, runs of 8 columns; the largest 16-bit fits (45056 and 90112
    # columns: 80 values in registers + 96 in shared memory, no spill in the gate, log_softmax too).  "sim_half*":
    # the simulator's twins, two values a load
    "half": Config(threads=256, vpt=176, reg_vpt=80, vec=8),
    "half_one_per_sm": Config(threads=512, vpt=176, reg_vpt=80, smem_budget=200 * 1024, min_blocks=1, vec=8),
    "sim_half": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=4, smem_budget=4096, min_blocks=1, vpt_step=1, vec=2),
    "sim_half_one_per_sm": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=8, smem_budget=8192, min_blocks=1, vpt_step=1,
                                  vec=2),
    # 16-bit only: "default" with the shared values as their 16-bit bits (spill_bits 16), two blocks an SM to 70144
    # columns (82 values in registers + 192 in 96 KiB: its largest fit, what the gate builds; no spill, bfloat16 too,
    # as the chunks keep the loaded bits).  "sim_held16": the simulator's twin
    "held16": Config(threads=256, vpt=274, reg_vpt=82, spill_bits=16),
    "sim_held16": Config(threads=64, vpt=4, reg_vpt=2, max_vpt=4, smem_budget=2048, min_blocks=1, vpt_step=1,
                         spill_bits=16),
}
#: the preset :mod:`dispatch` tries for a row a preset does not fit: its one-block-per-SM twin
ONE_PER_SM = {"default": "one_per_sm", "sim": "sim_one_per_sm", "half": "half_one_per_sm",
              "sim_half": "sim_half_one_per_sm"}


def make_thread_folds(VR: int, T: int, log: bool, DT, mx, up16=None):
    """A thread's part of the row's two reductions, over its ``VR`` register values and its first ``ns`` shared ones
    (column ``su + j·T`` of ``spill``): ``local_max(m, vals, spill, su, ns)`` — ``m`` folded with them;
    ``exp_sum(s, vals, spill, su, ns, sh)`` — ``s`` plus their ``exp(v − sh)``, each stored back in place (softmax;
    log_softmax keeps the values).  ``up16`` (``spill_bits=16``: the shared values are 16-bit bits): each shared
    value read through it and kept (its exp is taken again at the write).  Both kernels (scalar and ``vec``) take
    these; inlined, so ``vals`` stays in registers."""
    LOG = log
    KEEP = LOG or up16 is not None  # shared values stay as they are
    if up16 is None:
        @inline
        def up16(v):
            return v

    @inline
    def local_max(m, vals, spill, su, ns):
        for i in range(VR):
            m = mx(m, vals[i])
        for j in range(ns):
            m = mx(m, up16(spill[su + j * uint32(T)]))
        return m

    @inline
    def exp_sum(s, vals, spill, su, ns, sh):
        for i in range(VR):
            e = math.exp(vals[i] - sh)
            if not LOG:
                vals[i] = e
            s += e
        for j in range(ns):
            e = math.exp(up16(spill[su + j * uint32(T)]) - sh)
            if not KEEP:
                spill[su + j * uint32(T)] = e
            s += e
        return s

    return local_max, exp_sum


def make_kernel(config: Config, dtype, log: bool = False):
    """``log=True``: scipy.special.log_softmax (the values stay, exp goes only to the sum); ``config.vec`` > 1:
    :func:`make_vector_kernel`."""
    check_vec(config.vec, np.dtype(dtype).itemsize)
    if config.vec > 1:
        return make_vector_kernel(config, dtype, log)
    T, VR, VS = config.threads, config.reg_vpt, config.smem_vpt
    LOG = log
    NCHUNK = cdiv(VS, VR)  # loads of the shared part: chunks of VR values
    NW = T // 32
    DT = numba_dtype(compute_dtype(dtype))
    up, down = make_io(dtype)  # 16-bit: read as float32, each output rounded once (float32/64: the values)
    H16 = config.spill_bits == 16 and np.dtype(dtype).itemsize == 2  # shared values as their 16-bit bits
    SDT = numba_dtype(dtype) if H16 else DT
    RAW = VR if H16 else 1  # (spill_bits=16: a chunk's values stay the bits they were loaded as)
    NEG_INF = -math.inf
    # shuffles, then one barrier across warps; the max is one FMNMX (NaN-blind) for log_softmax too: a NaN row
    # shows in the sum (_common.make_plain_log).  The NaN-propagating max cost log_softmax 2.6× softmax's
    # time (ptxas waited for each load: 72% of cycles on the long scoreboard; benchmarks/notes/patterns_zoo.md)
    row_max, row_sum, mx = make_row_reductions(NW, DT)
    local_max, exp_sum = make_thread_folds(VR, T, LOG, DT, mx, up if H16 else None)
    shift_of, log_sum = make_plain_log(DT)

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
        su = uint32(tid)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        spill = cuda.shared.array(0, SDT)  # dynamic, VS × T: column tid is this thread's (no barrier)
        vals = cuda.local.array(VR, DT)  # registers: indexed by unrolled constants only
        raw = cuda.local.array(RAW, SDT)  # (spill_bits=16: a chunk in flight as its bits)

        # One coalesced read.  Value i of the thread is column tu + i·T; values i < VS live
        # in shared memory, values VS + k in vals[k].  Loads go through the registers: the
        # shared part in chunks of VR values (all of a chunk's loads in flight, then its
        # stores to shared memory), then the register part — cdiv(VS, VR) + 1 DRAM round
        # trips per thread, not one per shared value (a loop over the shared part alone is
        # unrolled only 4 deep, so it would wait for VS/4 of them).
        def chunk(c):  # called with constants below: every j is a constant, the tail removed
            if H16:  # the bits as loaded (a value past the row is never read: ns bounds the reads)
                for k in range(VR):
                    j = c * VR + k
                    if j < VS and uint32(j * T) < lim:
                        raw[k] = x[ru, tu + uint64(j * T)]
                for k in range(VR):
                    j = c * VR + k
                    if j < VS and uint32(j * T) < lim:
                        spill[su + uint32(j * T)] = raw[k]
                return
            for k in range(VR):
                j = c * VR + k
                if j < VS:
                    vals[k] = up(x[ru, tu + uint64(j * T)]) if uint32(j * T) < lim else DT(NEG_INF)
            for k in range(VR):
                j = c * VR + k
                if j < VS:
                    spill[su + uint32(j * T)] = vals[k]

        # hand-unrolled (a loop over c stayed a loop, with run-time tests of j < VS)
        if NCHUNK > 0:
            chunk(0)
        if NCHUNK > 1:
            chunk(1)
        if NCHUNK > 2:
            chunk(2)
        if NCHUNK > 3:
            chunk(3)
        for k in range(VR):
            i = VS + k
            vals[k] = up(x[ru, tu + uint64(i * T)]) if uint32(i * T) < lim else DT(NEG_INF)

        # The shared part's loops run to the values that exist (a bound the compiler cannot
        # see: fully unrolled, their loads and exps were scheduled ahead and pushed the
        # registers past 64 into local memory) and need no per-value bounds check
        ns = min(uint32(VS), (lim + uint32(T - 1)) // uint32(T))
        m = row_max(local_max(DT(NEG_INF), vals, spill, su, ns), red_m, wid, lane, 0)

        sh = shift_of(m) if LOG else m  # (log_softmax: the largest float for a row whose max is not finite)
        # exp in place (registers and shared; log: beside), then their sum
        s = row_sum(exp_sum(DT(0), vals, spill, su, ns, sh), red_s, wid, lane, 0)

        # softmax: y = (e − 0) · (1/s) − 0; log_softmax: y = (x − sh) · 1 − ls (constants fold)
        if LOG:
            a, ls = DT(1), log_sum(m, s)
        else:
            sh, a, ls = DT(0), DT(1) / s, DT(0)
        for k in range(VR):  # one coalesced write
            i = VS + k
            if uint32(i * T) < lim:
                out[ru, tu + uint64(i * T)] = down((vals[k] - sh) * a - ls)
        for j in range(ns):
            if H16 and not LOG:  # the shared value's exp again (it kept its bits)
                y = math.exp(up(spill[su + j * uint32(T)]) - m) * a
            elif H16:
                y = (up(spill[su + j * uint32(T)]) - sh) - ls
            else:
                y = (spill[su + j * uint32(T)] - sh) * a - ls
            out[ru, tu + uint64(j) * uint64(T)] = down(y)

    return softmax_k05_split_row


def make_vector_kernel(config: Config, dtype, log: bool = False):
    """:func:`make_kernel` for 16-bit inputs read and written ``V = config.vec`` values an access (one 4-, 8- or
    16-byte ``ld``/``st.global``; k06's :func:`~.k06_split_blocks.make_vector_rows`, as k08's ``vec``).

    The layout changes: a thread's values come in *runs* of ``V`` consecutive columns, run ``r`` of thread ``t``
    at columns ``h + V·t + r·V·T`` to ``+ V`` (``h``: the row's columns before its first ``2V``-byte aligned one,
    from its byte offset, ``x`` 16-byte aligned — the launcher's promise; one value each on threads ``t < h``,
    held beside the runs).  Runs ``r < VS/V`` live in shared memory, value ``k`` of run ``r`` in the thread's
    column at ``(r·V + k)·T`` as before (a thread still reads only its own: no barrier, no bank conflicts), the
    others in registers; every run (shared ones too) is one wide load and one wide store, a partial last run one
    value at a time.  ``vpt`` and ``reg_vpt`` are multiples of ``V`` (:meth:`Config.for_problem`)."""
    T, VR, VS, V = config.threads, config.reg_vpt, config.smem_vpt, config.vec
    W, RR, RS = V // 2, config.reg_vpt // V, config.smem_vpt // V  # words a run; runs in registers, in shared memory
    NCHUNK = cdiv(VS, VR)
    NW = T // 32
    DT = numba_dtype(compute_dtype(dtype))
    up, down = make_io(dtype)
    _, pack = make_pairs(dtype)
    store = store16_words(W)
    head, load_vector = make_vector_rows(dtype, V)
    NEG_INF = -math.inf
    LOG = log
    row_max, row_sum, mx = make_row_reductions(NW, DT)
    local_max, exp_sum = make_thread_folds(VR, T, LOG, DT, mx)
    shift_of, log_sum = make_plain_log(DT)

    def softmax_k05_split_row_vec(x, out):
        tid = cuda.threadIdx.x
        lane = tid % 32
        wid = tid // 32
        n = x.shape[1]
        ru = uint64(cuda.blockIdx.x)  # one row per block
        h = head(x, ru)
        # run r is whole iff r·V·T + V ≤ lim, its value k exists iff r·V·T + k < lim (32-bit compares, constants)
        lim = uint32(n - h - V * tid) if n - h > V * tid else uint32(0)
        cu = uint64(h + V * tid)  # the column of the thread's first run
        su = uint32(tid)
        red_m = cuda.shared.array(NW, DT)
        red_s = cuda.shared.array(NW, DT)
        spill = cuda.shared.array(0, DT)  # dynamic, VS × T: column tid is this thread's (no barrier)
        vals = cuda.local.array(VR, DT)  # registers: indexed by unrolled constants only
        words = cuda.local.array(W, uint32)
        hv = up(x[ru, uint64(tid)]) if tid < h else DT(NEG_INF)  # the row's unaligned head: a value on t < h

        def run_in(r, j):  # vals[j:j + V] = run r (−inf where no column is)
            if uint32(r * V * T + V) <= lim:
                load_vector(x, ru, cu + uint64(r * V * T), vals, j, words)
            else:
                for k in range(V):
                    vals[j + k] = up(x[ru, cu + uint64(r * V * T + k)]) if uint32(r * V * T + k) < lim else DT(NEG_INF)

        def chunk(c):  # as make_kernel's: VR values (VR / V runs) in flight, then their stores to shared memory
            for q in range(RR):
                if c * RR + q < RS:
                    run_in(c * RR + q, q * V)
            for k in range(VR):
                i = c * VR + k
                if i < VS:
                    spill[su + uint32(i * T)] = vals[k]

        if NCHUNK > 0:
            chunk(0)
        if NCHUNK > 1:
            chunk(1)
        if NCHUNK > 2:
            chunk(2)
        if NCHUNK > 3:
            chunk(3)
        for q in range(RR):
            run_in(RS + q, q * V)

        nr = min(uint32(RS), (lim + uint32(V * T - 1)) // uint32(V * T))  # shared runs holding a column
        ns = nr * uint32(V)  # (a partial run's missing values are −inf there)
        m = row_max(local_max(mx(DT(NEG_INF), hv), vals, spill, su, ns), red_m, wid, lane, 0)

        sh = shift_of(m) if LOG else m
        e = math.exp(hv - sh)
        if not LOG:
            hv = e
        s = row_sum(exp_sum(e, vals, spill, su, ns, sh), red_s, wid, lane, 0)

        if LOG:
            a, ls = DT(1), log_sum(m, s)
        else:
            sh, a, ls = DT(0), DT(1) / s, DT(0)
        if tid < h:
            out[ru, uint64(tid)] = down((hv - sh) * a - ls)
        for q in range(RR):  # the register runs: V results rounded a pair at a time, one store
            r = RS + q
            if uint32(r * V * T + V) <= lim:
                for k in range(W):
                    words[k] = pack((vals[q * V + 2 * k] - sh) * a - ls, (vals[q * V + 2 * k + 1] - sh) * a - ls)
                store(out[ru], cu + uint64(r * V * T), words)
            else:
                for k in range(V):
                    if uint32(r * V * T + k) < lim:
                        out[ru, cu + uint64(r * V * T + k)] = down((vals[q * V + k] - sh) * a - ls)
        for r in range(nr):  # the shared runs
            b = su + r * uint32(V * T)  # value k of run r: spill[b + k·T]
            c = cu + uint64(r) * uint64(V * T)
            if r * uint32(V * T) + uint32(V) <= lim:
                for k in range(W):
                    words[k] = pack((spill[b + uint32(2 * k * T)] - sh) * a - ls,
                                    (spill[b + uint32((2 * k + 1) * T)] - sh) * a - ls)
                store(out[ru], c, words)
            else:
                for k in range(V):
                    if r * uint32(V * T) + uint32(k) < lim:
                        out[ru, c + uint64(k)] = down((spill[b + uint32(k * T)] - sh) * a - ls)

    return softmax_k05_split_row_vec


def geometry(config: Config, rows: int, cols: int):
    return (rows,), config.block()


def jit_options(config: Config, dtype, **params) -> dict:
    return {"launch_bounds": (config.threads, config.min_blocks)}


def dynamic_smem(config: Config, dtype, **params) -> int:
    return config.dynamic_smem_bytes(dtype.itemsize)


RUNG = Rung("k05_split_row", Config, PRESETS, make_kernel, geometry, signature, jit_options,
            dynamic_smem=dynamic_smem,
            # 16-bit's largest fits of "default" and "one_per_sm": tests/test_compile_gate.py
            gate=Gate(half=("default",), half_only=("half", "half_one_per_sm", "sim_half", "sim_half_one_per_sm",
                                                    "held16", "sim_held16")))
