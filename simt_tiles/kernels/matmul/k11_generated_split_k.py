"""k11 — the tile written out: generated source, BK=16, 128-bit loads that stay put, split-K.

What changed versus k10
    k10's tile loop is right (4 LDS.128 per 64 FFMA); what surrounds it is not:
    8 masked scalar global loads per BK=8 tile, each with its own address and
    float64 compares (uint64 vs int64 in Numba), and BK=8 pays the per-tile
    overhead twice per 1024 FMAs.  k11:
    * **generates the kernel's source** (:mod:`simt_tiles.codegen`): every k-step
      written out, accumulators and fragments as scalar locals, the tile loop
      unrolled ×2 so the shared stage is a constant.  NVVM will not unroll a
      16-deep k-loop of 64 FMAs; written out, 86% of the loop is FFMA;
    * **shared addresses as one base register plus a constant**
      (``vector.load4_at`` / ``store_at``): the stage, the k-step and the
      fragment group are immediate offsets, where ``a_s[s, kk, U(am + U(r))]``
      costs an add and a shift per read: the loop is 90% FFMA;
    * **BK=16 with 128-bit global loads** on flat indices advanced once per tile,
      as side-effecting inline PTX (``vector.load4_global``): an ordinary load
      would be sunk by LLVM past the FFMAs, exposing its latency every tile;
    * **edges without masks in the hot loop**: rows past M and columns past N
      are *clamped* (they load real data into outputs nobody stores), so edge
      blocks run the fast path; only the K tail tile (and rows that are not
      16-byte aligned: a scalar path) pays for bounds checks — a block-uniform
      branch per tile.  Above a size (``Config.pad``, a shipped rule) ragged or
      unaligned A and B are first copied into zero-padded, aligned workspaces:
      two cheap copies buy the 128-bit path;
    * **uint32 indices throughout** (an int64 build for arrays ≥ 2³¹ elements);
    * **split-K** (``splits``): block z sums its own K range into a workspace,
      one small kernel adds the partials in a fixed order — deterministic, and
      enough blocks to fill 132 SMs at 1024³ (64 tiles of 128×128 alone fill 24%);
      smaller block tiles (presets ``64x64``, ``64x128``, ``128x64``) are the
      other way to more blocks.

Shared memory: A transposed, XOR-swizzled by k's quarter (bits 3-4 of m; BK=32: 3-5):
conflict-free for both the 4 scalar stores and the 128-bit reads; B as is.
Two stages, one barrier per tile (the argument of ``_pipelined``).

Rules: wm·wn = 32·tm·tn, tm and tn multiples of 4, bm % wm == bn % wn == 0,
bk ∈ {8, 16, 32} (float64 tiles hold the same bytes: bk/2 deep), bm % (2·bk) == 0
(the swizzle), equal vector loads per thread.

Traffic: k10's (M·N·K·(1/BM + 1/BN) elements from global memory), now in 16-byte
loads; shared reads per thread and k: TM + TN values (4 LDS.128) for TM·TN FFMAs.

Headline (H200, benchmarks/results/matmul_fast_h200.json): 47.5 TFLOP/s at 4096x4096x4096, 0.92× cuBLAS
"""

from __future__ import annotations

import dataclasses
import enum
import functools

import numpy as np
from numba import cuda, int64, uint32, void

from ... import codegen
from ..._per_stream import PerStream
from ...runtime import Gate, Rung, TileConfig, cdiv, jit, numba_dtype
from ...vector import aligned

#: arrays with fewer elements than this use the uint32 build (one register per index)
IDX32_LIMIT = 2**31


class Pad(enum.IntEnum):
    """``Config.pad``: whether ragged or unaligned A and B rows are first copied into zero-padded,
    16-byte aligned workspaces (the 128-bit path) or read with scalar loads."""

    RULE = 1  #: as the shipped rule says for the size (``matmul.dispatch`` resolves it to one of:)
    NEVER = 2  #: scalar loads
    ALWAYS = 3  #: padded copies (when the operands need them)


PAD_RULE, PAD_NEVER, PAD_ALWAYS = Pad.RULE, Pad.NEVER, Pad.ALWAYS  # the names before the enum
#: most blocks a grid has along y (CUDA's limit)
MAX_GRID_Y = 65535


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """BM×BN block, BK deep; warps of WM×WN, TM×TN outputs per thread; K split ``splits`` ways."""

    bm: int = 128
    bn: int = 128
    bk: int = 16
    wm: int = 64
    wn: int = 32
    tm: int = 8
    tn: int = 8
    min_blocks: int = 2  # launch_bounds' second number for float32 (float64: 1)
    splits: int = 1  # K ranges summed by a second kernel (a launch choice: not compiled in)
    pad: Pad = Pad.RULE  # ragged or unaligned A/B rows (a launch choice, :class:`Pad`)

    def block(self):
        return ((self.bm // self.wm) * (self.bn // self.wn) * 32,)

    def depth(self, itemsize: int) -> int:
        """K elements per tile for elements of ``itemsize`` bytes: ``bk`` for float32; float64
        tiles hold the same bytes (bk/2 deep), so two stages still fit in 48 KiB."""
        return self.bk * 4 // itemsize

    def smem_bytes(self, itemsize):
        return 2 * (self.bm + self.bn) * self.depth(itemsize) * itemsize

    def rules(self):
        t = max(1, (self.bm // self.wm) * (self.bn // self.wn) * 32)
        yield ("wm", self.wm * self.wn == 32 * self.tm * self.tn, "wm*wn == 32*tm*tn (32 lanes per warp)")
        yield ("wm", self.bm % self.wm == 0 and self.wm % self.tm == 0, "bm % wm == 0 and wm % tm == 0")
        yield ("wn", self.bn % self.wn == 0 and self.wn % self.tn == 0, "bn % wn == 0 and wn % tn == 0")
        yield ("tm", self.tm % 4 == 0, "tm % 4 == 0 (rows are read in aligned groups of 4)")
        yield ("tn", self.tn % 4 == 0, "tn % 4 == 0 (columns are read in aligned groups of 4)")
        yield ("pad", self.pad in tuple(Pad), "pad in (1, 2, 3) (Pad.RULE, Pad.NEVER, Pad.ALWAYS)")
        yield ("bk", self.bk in (8, 16, 32), "bk in (8, 16, 32) (vectors of 4 along k; float64 tiles bk/2)")
        yield ("bm", self.bm % (2 * self.bk) == 0, "bm % (2*bk) == 0 (the swizzle flips bits 3.. of m)")
        for itemsize in (4, 8):  # both dtypes' tile depths
            d = self.depth(itemsize)
            yield ("bk", (self.bm * d // 4) % t == 0 and t % max(1, d // 4) == 0 and self.bm * d // 4 >= t,
                   "bm*bk/4 (float64: bm*bk/8) a positive multiple of threads (equal A vectors per thread)")
            yield ("bn", (d * self.bn // 4) % t == 0 and t % (self.bn // 4) == 0 and d * self.bn // 4 >= t,
                   "bk*bn/4 (float64: bk*bn/8) a positive multiple of threads (equal B vectors per thread)")

    def compiled(self) -> "Config":
        """The config with the launch-only fields reset: one kernel for every ``splits`` and ``pad``."""
        return _compiled_config(self)


@functools.lru_cache(maxsize=None)
def _compiled_config(config: Config) -> Config:
    return dataclasses.replace(config, splits=1, pad=Pad.RULE)  # validated once, not at every launch


PRESETS = {
    "sim": Config(bm=32, bn=32, bk=16, wm=16, wn=32, tm=4, tn=4),
    "default": Config(),
    # smaller blocks for small problems (more blocks than 128×128 tiles give, without split-K's
    # second pass); 128 threads = 2×2 warps, launch bounds keep ≥ 12 warps per SM
    "64x64": Config(bm=64, bn=64, wm=32, wn=32, tm=8, tn=4, min_blocks=4),
    "64x128": Config(bm=64, bn=128, wm=32, wn=64, tm=8, tn=8, min_blocks=3),
    "128x64": Config(bm=128, bn=64, wm=64, wn=32, tm=8, tn=8, min_blocks=3),
}


def swizzle_span(depth: int) -> int:
    """Rows of m whose low bits A's swizzle flips: k's quarter (depth/4 of them) XOR-ed into bits 3..
    of m, so 8·depth/4 = 2·depth (bits 3-4 at depth 16, 3-5 at 32).  An offset that is a multiple of
    it leaves the swizzled bits alone; any other offset may carry into them."""
    return 2 * depth


def module_header(dt: str, vector_names: str) -> str:
    """The generated module's imports and ``DT`` (k11's and k12's)."""
    return ("from numba import cuda, float32, float64, uint32 as U, int64 as I64\n"
            "from simt_tiles.runtime import SMEM_ALIGN\n"
            f"from simt_tiles.vector import {vector_names}\n"
            f"DT = {dt}\n")


def thread_lines(config: Config) -> tuple[str, ...]:
    """Who a thread is (k11's and k12's first lines): its warp and lane, and where its slice of
    the warp tile starts (``m_base``, ``n_base``: groups of 4 rows / columns, lanes strided)."""
    LN, WARPS_N = config.wn // config.tn, config.bn // config.wn
    return ("tid = U(cuda.threadIdx.x)",
            "warp = U(tid >> U(5)); lane = U(tid & U(31))",
            f"m_base = U(U(warp // U({WARPS_N})) * U({config.wm}) + U(lane // U({LN})) * U(4))",
            f"n_base = U(U(warp % U({WARPS_N})) * U({config.wn}) + U(lane % U({LN})) * U(4))")


def generate(config: Config, dtype, idx32: bool = True, vec: bool = True) -> tuple[str, str, str]:
    """``(name, header, body)`` of the kernel ``name(a, b, c, k_chunk, flags)``; ``vec``: A's and
    B's rows are 16-byte aligned (128-bit loads), else scalar loads."""
    BM, BN, BK, TM, TN = config.bm, config.bn, config.depth(np.dtype(dtype).itemsize), config.tm, config.tn
    T = config.threads
    LM, LN = config.wm // TM, config.wn // TN
    Q = BK // 4  # vectors of 4 along k per row of the A tile
    A_VEC, B_VEC = BM * BK // 4 // T, BK * BN // 4 // T
    RA, RB = T // Q, T // (BN // 4)  # rows of A / of B covered by one pass of the block
    SPAN = swizzle_span(BK)
    X = "U" if idx32 else "I64"  # global (flat) index type; shared indices are always uint32
    dt = np.dtype(dtype).name
    # the launch bounds are in the name: Numba's disk cache is keyed by the source, not the jit
    # options, so two tiles that differ only in min_blocks must be two sources
    name = (f"matmul_k11_{BM}x{BN}x{BK}_w{config.wm}x{config.wn}_t{TM}x{TN}_{dt}_{'i32' if idx32 else 'i64'}"
            f"{'_v4' if vec else '_v1'}_lb{launch_blocks(config, dtype)}")
    header = module_header(dt, "load1_global, load4_at, load4_global, store4, store4_at, store_at")
    s = codegen.Source()
    with s.block(f"def {name}(a, b, c, k_chunk, flags):"):
        s.line("# --- who am I: warp tile, lane slice, loader slots (uint32) ---",
               *thread_lines(config),
               f"a_r = U(tid // U({Q})); a_kq = U(U(tid % U({Q})) * U(4)); a_sw = U(U(tid % U({Q})) << U(3))",
               f"b_r = U(tid // U({BN // 4})); b_c = U(U(tid % U({BN // 4})) * U(4))",
               "# --- the problem and this block's part of it (global index type) ---",
               "# C (or the split-K workspace) gives N; B's rows may be padded past it (ldb)",
               f"m = {X}(a.shape[0]); k_len = {X}(a.shape[1]); n = {X}(c.shape[1]); ldb = {X}(b.shape[1])")
        emit_k_range(s, X, BM, BN, BK)
        s.line("vec_c = flags != U(0)  # C's rows 16-byte aligned (host-checked)")
        s.line("# rows past M / columns past N are clamped: they feed only outputs never stored")
        for p in range(A_VEC):
            s.line(f"r = {X}(row0 + {X}(a_r + U({p * RA})))")
            with s.block("if r >= m:"):
                s.line(f"r = {X}(m - {X}(1))")
            s.line(f"a_base{p} = {X}({X}(r * k_len) + {X}(a_kq))")
        if vec:  # ldb % 4 == 0 here: a vector is wholly in or wholly past B's row; past it, clamp it
            s.line(f"b_col = {X}(col0 + {X}(b_c))")
            with s.block(f"if b_col > {X}(ldb - {X}(4)):"):
                s.line(f"b_col = {X}(ldb - {X}(4))")
        else:  # scalar loads: each column past N clamped alone (a group of 4 may straddle N)
            s.line(f"b_col = {X}(0)")
            for q in range(4):
                s.line(f"bcol{q} = {X}(col0 + {X}(b_c + U({q})))")
                with s.block(f"if bcol{q} >= ldb:"):
                    s.line(f"bcol{q} = {X}(ldb - {X}(1))")
        s.line(f"b_step = {X}({X}({BK}) * ldb); b_pass = {X}({X}({RB}) * ldb)",
               "kt = k_begin  # first k of the tile being loaded",
               f"b_idx = {X}(0)",
               f"a_s = cuda.shared.array(({2}, {BK}, {BM}), DT, alignment=SMEM_ALIGN)",
               f"b_s = cuda.shared.array(({2}, {BK}, {BN}), DT, alignment=SMEM_ALIGN)")
        for i in range(TM):
            s.line("; ".join(f"c{i}_{j} = DT(0)" for j in range(TN)))
        for p in range(A_VEC):
            s.line("; ".join(f"pa{p}_{q} = DT(0)" for q in range(4)))
        for p in range(B_VEC):
            s.line("; ".join(f"pb{p}_{q} = DT(0)" for q in range(4)))
        for mi in range(TM // 4):
            s.line(f"am{mi} = U(m_base + U({mi * LM * 4}))")
        s.line("# where this thread stores in a stage (the stage, k and pass are constant offsets)",
               f"sa = U(U(a_kq * U({BM})) + U(a_r ^ a_sw)); sb = U(U(b_r * U({BN})) + b_c)")
        for p in range(A_VEC):
            if (p * RA) % SPAN:  # a pass that is not a multiple of SPAN rows may carry into the swizzled bits
                s.line(f"sa{p} = U(U(a_kq * U({BM})) + U(U(a_r + U({p * RA})) ^ a_sw))")
        for ni in range(TN // 4):
            s.line(f"bn{ni} = U(n_base + U({ni * LN * 4}))")

        def load_full():
            """The full tile at kt into the prefetch registers: no bounds checks (clamped bases)."""
            if vec:
                for p in range(A_VEC):
                    s.line(f"pa{p}_0, pa{p}_1, pa{p}_2, pa{p}_3 = load4_global(a, {X}(a_base{p} + kt))")
                for p in range(B_VEC):
                    s.line(f"pb{p}_0, pb{p}_1, pb{p}_2, pb{p}_3 = load4_global(b, {X}(b_idx + {X}({p}) * b_pass))")
                return
            for p in range(A_VEC):
                s.line(f"i = {X}(a_base{p} + kt)")
                s.line("; ".join(f"pa{p}_{q} = load1_global(a, {X}(i + {X}({q})))" for q in range(4)))
            for p in range(B_VEC):
                s.line(f"i = {X}(b_idx + {X}({p}) * b_pass)")
                s.line("; ".join(f"pb{p}_{q} = load1_global(b, {X}(i + bcol{q}))" for q in range(4)))

        def load_tail():
            """The K tail tile at kt: every element checked against k_end."""
            for p in range(A_VEC):
                for q in range(4):
                    s.line(f"kq = {X}(kt + {X}(a_kq + U({q})))",
                           f"pa{p}_{q} = load1_global(a, {X}({X}(a_base{p} + kt) + {X}({q}))) "
                           f"if kq < k_end else DT(0)")
            for p in range(B_VEC):
                s.line(f"kr = {X}(kt + {X}(b_r + U({p * RB})))")
                for q in range(4):
                    s.line(f"col = {X}(col0 + {X}(b_c + U({q})))",
                           f"pb{p}_{q} = load1_global(b, {X}(kr * ldb + col)) "
                           f"if kr < k_end and col < ldb else DT(0)")

        def store(stage):
            """Prefetch registers → shared stage: A transposed and swizzled, B with one 128-bit store;
            one base index per operand, the stage, k and pass as immediate offsets (``store_at``)."""
            # a pass of RA rows, a multiple of SPAN, leaves the swizzled bits alone: a constant
            for p in range(A_VEC):
                base, off = ("sa", p * RA) if (p * RA) % SPAN == 0 else (f"sa{p}", 0)
                for q in range(4):
                    s.line(f"store_at(a_s, {base}, {stage * BK * BM + q * BM + off}, pa{p}_{q})")
            for p in range(B_VEC):
                s.line(f"store4_at(b_s, sb, {stage * BK * BN + p * RB * BN}, "
                       + ", ".join(f"pb{p}_{q}" for q in range(4)) + ")")

        def after_tail():
            s.line("kt = k_begin  # the next full tile")
            s.line(f"b_idx = {X}({X}(kt + {X}(b_r)) * ldb + b_col)  # B's flat index at (kt + b_r, b_col)")

        def first():
            s.line("kt = k_begin")
            s.line(f"b_idx = {X}({X}(kt + {X}(b_r)) * ldb + b_col)")
            load_full()
            advance()

        def advance():
            s.line(f"kt = {X}(kt + {X}({BK})); b_idx = {X}(b_idx + b_step)")

        emit_pipeline(s, X, BK, load_tail, after_tail, first, load_full, advance, store,
                      lambda half: emit_compute(s, config, half, swizzled=True, depth=BK))
        emit_epilogue(s, config, X)
    return name, header, s.text()


def emit_pipeline(s: codegen.Source, X: str, BK: int, load_tail, after_tail, first, load_full, advance, store,
                  compute) -> None:
    """The K loop through registers and two shared stages (k11's and :mod:`._layouts`'): the K tail
    (if any) is tile 0, so every tile in the loop is full; then the loop unrolled ×2 (stage 0,
    stage 1: constants), the next tile's loads in flight during this tile's FMAs.  The callbacks
    emit the loader's lines: ``load_tail()`` at ``kt``, ``after_tail()`` (indices at the first full
    tile), ``first()`` (no tail: load tile 0 and advance), ``load_full()``, ``advance()``,
    ``store(stage)``, ``compute(stage)``."""
    s.line("# --- prologue: the K tail (if any) is tile 0, so every tile in the loop is full ---",
           f"rem = {X}({X}(k_end - k_begin) % {X}({BK}))")
    with s.block(f"if rem != {X}(0):"):
        s.line(f"kt = {X}(k_end - rem)")
        load_tail()
        after_tail()
    with s.block(f"elif n_tiles > {X}(0):"):
        first()
    with s.block(f"if n_tiles > {X}(0):"):
        store(0)
    s.line("cuda.syncthreads()", f"t = {X}(0)")
    s.line("# --- main loop, unrolled x2: stage 0 then stage 1 (constants) ---")
    with s.block("while t < n_tiles:"):
        for half in (0, 1):
            s.line(f"has_next = {X}(t + {X}(1)) < n_tiles")
            with s.block("if has_next:"):
                load_full()  # in flight during the compute below
                advance()
            compute(half)
            with s.block("if has_next:"):
                store(1 - half)
            # RAW for the stage just stored, WAR for the one just read (the _pipelined argument)
            s.line("cuda.syncthreads()", f"t = {X}(t + {X}(1))")
            if half == 0:
                with s.block("if t >= n_tiles:"):
                    s.line("break")


def emit_k_range(s: codegen.Source, X: str, BM: int, BN: int, BK: int) -> None:
    """This block's tile origin and its slice of K (``blockIdx.z``: one split of ``k_chunk``),
    clamped to K, and its number of BK tiles (k12 writes the same lines)."""
    s.line(f"row0 = {X}({X}(cuda.blockIdx.y) * {X}({BM})); col0 = {X}({X}(cuda.blockIdx.x) * {X}({BN}))",
           f"z = {X}(cuda.blockIdx.z); k_begin = {X}(z * {X}(k_chunk)); c_row0 = {X}(z * m)",
           f"k_end = {X}(k_begin + {X}(k_chunk))")
    emit_k_clamp(s, X, BK)


def emit_k_clamp(s: codegen.Source, X: str, BK: int) -> None:
    """``[k_begin, k_end)`` clamped to K (a last split may start past it) and its number of BK tiles
    (k12 and the layout kernel write the same lines)."""
    with s.block("if k_end > k_len:"):
        s.line("k_end = k_len")
    with s.block("if k_begin > k_end:"):
        s.line("k_begin = k_end")
    s.line(f"n_tiles = {X}({X}(k_end - k_begin + {X}({BK - 1})) // {X}({BK}))")


def emit_compute(s: codegen.Source, config: Config, stage: int, swizzled: bool, depth: int,
                 b_swizzled: bool = False) -> None:
    """One tile from shared stage ``stage``: per k-step TM/4 + TN/4 128-bit fragment reads and
    TM·TN FMAs into the scalar accumulators.  A is k-major; ``swizzled``: its columns are XOR-ed
    by k's quarter (k11's register stores).  Each read is ``load4_at(tile, base, constant)``:
    the stage and k-step are an immediate offset on one base register per fragment group
    (per k-quarter for swizzled A), not an address computed per read.  ``b_swizzled``: B's tile is
    swizzled the same way (a column-major B stored by :mod:`._layouts`)."""
    TM, TN, BM, BN = config.tm, config.tn, config.bm, config.bn
    step = config.wm // TM * 4  # columns between a thread's groups of 4 rows of A
    # a multiple of the swizzle's span leaves the swizzled bits alone: (am0 + c) ^ sw == (am0 ^ sw) + c,
    # so one base per k-quarter serves every group (the others are immediate offsets)
    one_base = step % swizzle_span(depth) == 0
    for kk in range(depth):
        sw = ((kk >> 2) << 3) if swizzled else 0
        for mi in range(TM // 4):
            if sw and kk % 4 == 0 and (mi == 0 or not one_base):  # a new k-quarter: its column
                s.line(f"ab{mi} = U(am{mi} ^ U({sw}))")
            g, off = (0, mi * step) if one_base else (mi, 0)
            base = f"ab{g}" if sw else f"am{g}"
            s.line(", ".join(f"fa{mi * 4 + r}" for r in range(4))
                   + f" = load4_at(a_s, {base}, {(stage * depth + kk) * BM + off})")
        for ni in range(TN // 4):  # B is not swizzled: one base, the groups are offsets too
            if b_swizzled:
                b_step = config.wn // TN * 4
                b_one = b_step % swizzle_span(depth) == 0
                sw_b = (kk >> 2) << 3
                if sw_b and kk % 4 == 0 and (ni == 0 or not b_one):
                    s.line(f"bb{ni} = U(bn{ni} ^ U({sw_b}))")
                g, off = (0, ni * b_step) if b_one else (ni, 0)
                base = f"bb{g}" if sw_b else f"bn{g}"
                s.line(", ".join(f"fb{ni * 4 + c}" for c in range(4))
                       + f" = load4_at(b_s, {base}, {(stage * depth + kk) * BN + off})")
                continue
            s.line(", ".join(f"fb{ni * 4 + c}" for c in range(4))
                   + f" = load4_at(b_s, bn0, {(stage * depth + kk) * BN + ni * (config.wn // TN) * 4})")
        for i in range(TM):
            s.line("; ".join(f"c{i}_{j} += fa{i} * fb{j}" for j in range(TN)))


def emit_epilogue(s: codegen.Source, config: Config, X: str) -> None:
    """Accumulators → C rows ``c_row0 + row`` (the workspace slice of split z): 128-bit stores
    where C's rows are aligned (``vec_c``), else checked scalars; rows ≥ m, columns ≥ n skipped."""
    s.line("# --- epilogue: 128-bit stores where the row is aligned, else checked scalars ---")
    for mi in range(config.tm // 4):
        for r in range(4):
            i = mi * 4 + r
            s.line(f"row = {X}(row0 + {X}(am{mi} + U({r})))")
            with s.block("if row < m:"):
                s.line(f"crow = {X}({X}(c_row0 + row) * n)")
                for ni in range(config.tn // 4):
                    s.line(f"col = {X}(col0 + {X}(bn{ni}))")
                    with s.block("if vec_c and col < n:"):
                        s.line(f"store4(c, {X}(crow + col), "
                               + ", ".join(f"c{i}_{ni * 4 + q}" for q in range(4)) + ")")
                    with s.block("else:"):
                        for q in range(4):
                            with s.block(f"if {X}(col + {X}({q})) < n:"):
                                s.line(f"c[{X}(c_row0 + row), {X}(col + {X}({q}))] = c{i}_{ni * 4 + q}")


def source(config: Config, dtype, idx32: bool = True, vec: bool = True) -> str:
    """The generated module's full text (what ``python -m simt_tiles.codegen dump`` prints)."""
    name, header, body = generate(config.compiled(), dtype, idx32, vec)
    return header + "\n" + body


def make_kernel(config: Config, dtype, idx32: bool = True, vec: bool = True):
    name, header, body = generate(config.compiled(), dtype, idx32, vec)
    return codegen.load_function(name, body, header)


def signature(dtype, idx32: bool = True, vec: bool = True):
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, t, uint32 if idx32 else int64, uint32)


def launch_blocks(config: Config, dtype) -> int:
    """Blocks per SM the launch bounds ask for: ``min_blocks`` for float32, 1 for float64."""
    return config.min_blocks if np.dtype(dtype).itemsize == 4 else 1


def jit_options(config: Config, dtype) -> dict:
    return {"launch_bounds": (config.threads, launch_blocks(config, dtype)), "cache": True}


def split_plan(config: Config, k: int) -> tuple[int, int]:
    """``(splits, k_chunk)``: K cut into chunks of whole BK tiles; no empty chunk."""
    if k == 0:
        return 1, 0
    chunk = cdiv(cdiv(k, config.splits), config.bk) * config.bk
    return cdiv(k, chunk), chunk


def geometry(config: Config, m: int, n: int, k: int):
    """One block per BM×BN tile of C and K chunk: grid (N tiles, M tiles, splits)."""
    splits, _ = split_plan(config, k)
    return (cdiv(n, config.bn), cdiv(m, config.bm), splits), config.block()


@jit
def sum_splits(w, c, r0):
    """c = Σ_s w[s·M : (s+1)·M] — the split-K partials, added in a fixed order (deterministic): an
    element a thread on a 2-D grid, C's rows from ``r0`` (:func:`add_splits`; no integer division:
    the 1-D form's 64-bit ``i // n`` made 512² take 4.9 µs)."""
    col, r = cuda.grid(2)
    r += r0
    m, n = c.shape
    if r < m and col < n:
        acc = w[r, col]
        z = m
        while z < w.shape[0]:
            acc += w[z + r, col]
            z += m
        c[r, col] = acc


def add_splits(w, c, stream) -> None:
    """:func:`sum_splits` of the partials ``w`` ((s·M) × N) into ``c`` (M × N) on ``stream``: a launch
    per 65535 × 8 rows."""
    (m, n), step = c.shape, MAX_GRID_Y * 8
    for r0 in range(0, m if n else 0, step):
        sum_splits[(cdiv(n, 32), cdiv(min(m - r0, step), 8)), (32, 8), stream](w, c, r0)


#: split-K partials and copies per (device, stream, host thread), bounded (simt_tiles._per_stream)
_WORKSPACE = PerStream("matmul")


def workspace(shape, dtype, stream, name: str = "partials"):
    """A grow-only scratch array per (name, dtype) of each (device, stream, host thread): split-K
    partials, copies (two threads' calls would interleave on a shared stream; see reduce's workspace)."""
    mine = _WORKSPACE.entries(stream)
    key = (name, np.dtype(dtype).str)
    size = int(np.prod(shape))
    buf, views = mine.get(key, (None, {}))
    if buf is None or buf.size < size:
        buf, views = cuda.device_array(max(size, 1), dtype=dtype, stream=stream), {}
        mine[key] = buf, views
    if shape not in views:  # views are cached: slicing a device array costs tens of µs
        views[shape] = buf[:size].reshape(shape)
    return views[shape]


@jit
def pad_copy(src, dst, r0):
    """dst[:R, :C] = src (R × C), zeros elsewhere: one element per thread, coalesced rows; dst's
    rows from ``r0`` (a grid is at most 65535 blocks high: :func:`copy_padded`)."""
    col, r = cuda.grid(2)
    r += r0
    if r < dst.shape[0] and col < dst.shape[1]:
        if r < src.shape[0] and col < src.shape[1]:
            dst[r, col] = src[r, col]
        else:
            dst[r, col] = 0


def copy_padded(src, dst, stream) -> None:
    """:func:`pad_copy` of ``src`` into ``dst`` on ``stream``: a launch per 65535 × 8 rows (one below
    half a million; a loop inside the kernel cost 30-50%: notes/matmul.md)."""
    (rows, cols), step = dst.shape, MAX_GRID_Y * 8
    for r0 in range(0, rows if cols else 0, step):
        pad_copy[(cdiv(cols, 32), cdiv(min(rows - r0, step), 8)), (32, 8), stream](src, dst, r0)


def padded_operands(a, b, dtype, stream):
    """A (M × K) and B (K × N) copied into workspaces of M × K₄ and K₄ × N₄ (K₄, N₄: the next
    multiples of 4), zero-filled past K and N: 16-byte aligned rows for any shape or offset.
    The zeros add nothing to C; columns past N feed outputs that are never stored."""
    (m, k), n = a.shape, b.shape[1]
    kp, np_ = cdiv(k, 4) * 4, cdiv(n, 4) * 4
    ap = workspace((m, kp), dtype, stream, "a_padded")
    bp = workspace((kp, np_), dtype, stream, "b_padded")
    copy_padded(a, ap, stream)
    copy_padded(b, bp, stream)
    return ap, bp


class SplitKRung(Rung):
    """A rung whose launch may split K (partials in a workspace, then :func:`sum_splits`) and pad
    ragged or unaligned operands first, as its config says (``splits``, ``pad``: chosen by
    :mod:`.dispatch`)."""

    def source(self, config, dtype, idx32: bool = True, vec: bool = True) -> str:
        return source(config, dtype, idx32, vec)

    def kernel(self, config, dtype, **params):
        return super().kernel(config.compiled(), dtype, **params)

    def run(self, config, call) -> None:
        a, b, c, stream = call.a, call.b, call.c, call.stream
        dtype = a.dtype
        m, k = a.shape
        n = c.shape[1]  # the problem's N: B may be wider (zero-padded to N₄ by matmul's layout path)
        vec_ab = k % 4 == 0 and b.shape[1] % 4 == 0 and aligned(a) and aligned(b)
        if not vec_ab and m and n and k and config.pad == Pad.ALWAYS:
            a, b = padded_operands(a, b, dtype, stream)  # the 128-bit path on zero-padded copies
            k, vec_ab = a.shape[1], True
        ldb = b.shape[1]
        grid, block = geometry(config, m, n, k)
        splits = grid[2]
        _, chunk = split_plan(config, k)
        idx32 = max(m * k, k * ldb, splits * m * n) + 4 * config.bk * max(ldb, 1) < IDX32_LIMIT
        kernel = self.kernel(config, dtype, idx32=idx32, vec=vec_ab)
        target = c if splits == 1 else workspace((splits * m, n), dtype, stream)
        flags = uint32(n % 4 == 0 and aligned(target))  # C's rows 16-byte aligned
        kernel[grid, block, stream](a, b, target, (uint32 if idx32 else int64)(chunk), flags)
        if splits > 1:
            add_splits(target, c, stream)


# the small tiles are float32 tuning candidates (float64's default is k10): gated for float32 only
RUNG = SplitKRung("k11_generated_split_k", Config, PRESETS, make_kernel, geometry, signature, jit_options,
                  gate=Gate(float32_only=("64x64", "64x128", "128x64")))
