"""k15 — GEMV and skinny products: a warp per output row, K across the lanes, a shuffle reduce.

What changed versus k11
    A decode step's linear layer (``x @ w.T``, M = 1…16 tokens × 4096 × 4096) reads 64 MB of
    weights for 2·M·N·K flops: it is bound by memory, not by FMAs.  k11's 128×128 tile spends
    128/M of its work on rows that do not exist and reads B through 128 blocks' worth of tiles;
    split-K cannot fix that.  k15 reads each weight once:
    * the **big operand** (W: the N rows of ``w`` for M ≤ 16, or A's M rows for N ≤ 16, both
      contiguous along k) is read row by row, one warp per ``NW`` rows, each lane a 128-bit load
      of 4 k's per step (a warp reads 512 contiguous bytes), up to eight steps in flight;
    * the **small operand** (the ≤ 16 rows of x) is read by every warp at the same k: L1 hits;
    * each lane keeps MT × NW partial sums in registers; at the end ``shfl_xor`` folds the 32
      lanes (:mod:`simt_tiles.warp`: also in the simulator) and lane 0 stores them.
    No shared memory, no barrier.  C's element (s, w) is at ``s·cs + w·cw``: the same kernel
    writes C for M ≤ 16 (s = m) and, transposed, for N ≤ 16 (s = n, the big rows are A's).

Operands must be contiguous along k (row-major A, column-major B: the linear layer's
layout); :func:`.dispatch.gemv_rule` sends such shapes here (``matmul`` of a 1-D vector too).
Rules: MT ∈ {1, 2, 4, 8, 16}; ``unroll`` ∈ {1, 2, 4, 8} steps in flight; x's rows loaded ``xg`` at a
time beside their FMAs (5-8 rows: registers for two steps); ``g`` lanes a row of W (32: a warp; 16 at 9-16
rows: a warp holds two rows); ragged K takes a scalar tail; unaligned rows the scalar build.

Headline (H200, benchmarks/results/flush_probe_s33_h200.json): 19.2 µs at 1x4096x4096 ``nt`` (64 MiB of W,
3.50 TB/s: 82% of copy), 1.27× torch.matmul.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import float32, float64, int64, void  # noqa: F401 - float types named by the signature

from ... import codegen
from ...runtime import SIMULATOR, Rung, TileConfig, cdiv, numba_dtype
from ...vector import aligned

#: most rows of the small operand one block covers (the skinny class: M ≤ 16 or N ≤ 16)
MAX_SMALL = 16


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """MT rows of the small operand per block, NW big rows per warp, ``warps`` warps per block."""

    mt: int = 1
    nw: int = 4
    warps: int = 4
    unroll: int = 2
    #: x's rows loaded ``xg`` at a time just before their FMAs (≥ MT: all with W's loads); fewer rows
    #: at once free registers for more W rows a warp
    xg: int = MAX_SMALL
    #: lanes that share one row of W (its K across them, 4 k's a lane): 32 (a warp a row) or fewer, so
    #: a warp holds 32 / g rows at once and x's values a lane loads serve g-lane groups
    g: int = 32

    def block(self):
        return (self.warps * 32,)

    def smem_bytes(self, itemsize):
        return 0

    def rules(self):
        yield ("mt", self.mt in (1, 2, 4, 8, 16), "mt in (1, 2, 4, 8, 16)")
        yield ("nw", 1 <= self.nw <= 8, "1 <= nw <= 8")
        yield ("warps", 1 <= self.warps <= 16, "1 <= warps <= 16")
        yield ("unroll", self.unroll in (1, 2, 4, 8), "unroll in (1, 2, 4, 8)")
        yield ("xg", self.xg in (1, 2, 4, 8, 16), "xg in (1, 2, 4, 8, 16)")
        yield ("g", self.g in (4, 8, 16, 32), "g in (4, 8, 16, 32)")


def config_for(small: int) -> Config:
    """The tile for ``small`` (≤ 16) rows: the next power of two; fewer big rows per warp as MT
    grows (MT·NW partial sums per lane; the small rows' L1 reads grow with MT)."""
    mt = 1 << max(0, (small - 1).bit_length())
    cfg = PRESETS[f"mt{min(mt, MAX_SMALL)}"]
    return dataclasses.replace(cfg, warps=1) if SIMULATOR else cfg  # the simulator: one warp per block


PRESETS = {
    "sim": Config(mt=2, nw=2, warps=2),
    "default": Config(),
    # four steps in flight (K / 512 round trips a warp): 1-4 rows 2.4-5.5% ahead of two steps on the H100
    # (results/gemv_config_probe_s33_h100); mt2, not measured, between its neighbours
    "mt1": Config(mt=1, nw=1, unroll=4),
    "mt2": Config(mt=2, nw=2, unroll=4),
    "mt4": Config(mt=4, nw=4, unroll=4),
    # x's rows two at a time beside their FMAs, so two steps fit in flight: 5-8 rows 13% faster (…_s33c_h100)
    "mt8": Config(mt=8, nw=2, unroll=2, xg=2),
    # 16 lanes a row of W (a warp two rows, x's values a lane loads serve both) and four steps in flight:
    # 16 rows 8-20% faster over Llama-2-7B's three weights (results/gemv_config_probe_s34_h100)
    "mt16": Config(mt=16, nw=2, unroll=4, xg=2, g=16),
}


def generate(config: Config, dtype, vec: bool = True) -> tuple[str, str, str]:
    """``(name, header, body)`` of ``name(s, w, c, rows_s, rows_w, k_len, lds, ldw, cs, cw)``: flat
    operands (row r, k at ``r·ld + k``), C flat."""
    MT, NW, WARPS, UN = config.mt, config.nw, config.warps, config.unroll
    dt = np.dtype(dtype).name
    XG = min(config.xg, MT)
    G, STEP = config.g, 4 * config.g  # lanes a row of W, k's a step of them
    name = (f"matmul_k15_mt{MT}_nw{NW}_w{WARPS}_u{UN}{f'_xg{XG}' if XG < MT else ''}{f'_g{G}' if G < 32 else ''}"
            f"_{dt}{'_v4' if vec else '_v1'}")
    header = ("from numba import cuda, float32, float64, int64 as I\n"
              "from simt_tiles.vector import load1_global, load4_global\n"
              "from simt_tiles.warp import shfl_xor_sync\n"
              f"DT = {dt}\n")
    s = codegen.Source()
    with s.block(f"def {name}(s, w, c, rows_s, rows_w, k_len, lds, ldw, cs, cw):"):
        if G == 32:
            s.line("lane = I(cuda.threadIdx.x & 31); warp = I(cuda.threadIdx.x >> 5)",
                   f"w0 = I(I(I(cuda.blockIdx.x) * I({WARPS}) + warp) * I({NW})); s0 = I(I(cuda.blockIdx.y) * I({MT}))",
                   "# rows past the ends are clamped: their sums are never stored")
        else:
            s.line("lane = I(cuda.threadIdx.x & 31); warp = I(cuda.threadIdx.x >> 5)",
                   f"# {32 // G} groups of {G} lanes a warp, a group's {NW} rows of W each; lane: its place in the group",
                   f"sub = I(lane // I({G})); lane = I(lane % I({G}))",
                   f"w0 = I(I(I(I(cuda.blockIdx.x) * I({WARPS}) + warp) * I({32 // G}) + sub) * I({NW}))",
                   f"s0 = I(I(cuda.blockIdx.y) * I({MT}))",
                   "# rows past the ends are clamped: their sums are never stored")
        for x, n, rows, ld in (("s", MT, "rows_s", "lds"), ("w", NW, "rows_w", "ldw")):
            for i in range(n):
                s.line(f"r = I({x}0 + I({i}))")
                with s.block(f"if r >= {rows}:"):
                    s.line(f"r = I({rows} - I(1))")
                s.line(f"{x}b{i} = I(r * {ld})")
        for i in range(MT):
            s.line("; ".join(f"c{i}_{j} = DT(0)" for j in range(NW)))
        s.line("kk = I(lane * I(4))")

        def load(x, i, tag, at):
            regs = ", ".join(f"{x}{tag}{i}_{q}" for q in range(4))
            if vec:
                s.line(f"{regs} = load4_global({x}, I({x}b{i} + {at}))")
            else:
                s.line(f"i = I({x}b{i} + {at})",
                       "; ".join(f"{x}{tag}{i}_{q} = load1_global({x}, I(i + I({q})))" for q in range(4)))

        def step(tag, at):
            """Loads of one 4-wide k step at ``at`` into registers named by ``tag`` (x's in ``fmas``
            when they come in groups of ``XG`` < MT)."""
            for x, n in (("w", NW), ("s", MT if XG == MT else 0)):
                for i in range(n):
                    load(x, i, tag, at)

        def fmas(tag, at):
            for i in range(MT):
                if XG < MT and i % XG == 0:
                    for g in range(i, i + XG):
                        load("s", g, tag, at)
                for j in range(NW):
                    s.line("; ".join(f"c{i}_{j} += s{tag}{i}_{q} * w{tag}{j}_{q}" for q in range(4)))

        if UN > 1:
            tags = "abcdefgh"[:UN]
            s.line(f"# {dict(zip((2, 4, 8), ('two', 'four', 'eight')))[UN]} steps in flight: all loads first, then the FMAs")
            with s.block(f"while kk + I({STEP * (UN - 1) + 4}) <= k_len:"):
                ats = [f"I(kk + I({STEP * u}))" if u else "kk" for u in range(UN)]
                for tag, at in zip(tags, ats):
                    step(tag, at)
                for tag, at in zip(tags, ats):
                    fmas(tag, at)
                s.line(f"kk = I(kk + I({STEP * UN}))")
        with s.block("while kk + I(4) <= k_len:"):
            step("a", "kk")
            fmas("a", "kk")
            s.line(f"kk = I(kk + I({STEP}))")
        s.line("# K's last k_len % 4 elements: one lane, scalar")
        for q in range(4):
            with s.block(f"if kk + I({q}) < k_len:"):
                for j in range(NW):
                    s.line(f"x{j} = load1_global(w, I(wb{j} + kk + I({q})))")
                for i in range(MT):
                    s.line(f"y = load1_global(s, I(sb{i} + kk + I({q})))",
                           "; ".join(f"c{i}_{j} += y * x{j}" for j in range(NW)))
        s.line(f"# the {G} lanes' partial sums folded (butterfly), lane 0 stores")
        for i in range(MT):
            for j in range(NW):
                for off in [o for o in (16, 8, 4, 2, 1) if o < G]:
                    s.line(f"c{i}_{j} += shfl_xor_sync(0xFFFFFFFF, c{i}_{j}, {off})")
        with s.block("if lane == I(0):"):
            for i in range(MT):
                for j in range(NW):
                    with s.block(f"if s0 + I({i}) < rows_s and w0 + I({j}) < rows_w:"):
                        s.line(f"c[I(I(s0 + I({i})) * cs + I(w0 + I({j})) * cw)] = c{i}_{j}")
    return name, header, s.text()


#: B row-major (n contiguous, ``x @ W`` with W stored K×N): columns of B per block, k rows per pass
NC_COLS, NC_WARPS, NC_UNROLL = 16, 8, 8


def generate_rows(mt: int, dtype, vec: bool = True, warps: int = NC_WARPS) -> tuple[str, str, str]:
    """``(name, header, body)`` of ``name(a, b, c, m, n, k_len, sam, sak, ldb)`` for a row-major B:
    a block owns 16 columns of C, its 256 threads 64 k rows at a time (a lane: 4 columns of one
    row, one 128-bit load; eight rows in flight), A's ≤ 16 values per row broadcast from L1; the
    partial sums fold by shuffles over the lanes of a column group, then over the warps in shared
    memory.  ``a`` any strides (``sam``, ``sak``), C row-major (M × N)."""
    dt = np.dtype(dtype).name
    G = NC_COLS // 4  # lanes per row (column vectors)
    R = 32 // G * warps  # k rows per pass of the block
    name = f"matmul_k15rows_mt{mt}_w{warps}_{dt}{'_v4' if vec else '_v1'}"
    header = ("from numba import cuda, float32, float64, int64 as I\n"
              "from simt_tiles.runtime import SMEM_ALIGN\n"
              "from simt_tiles.vector import load1_global, load4_global\n"
              "from simt_tiles.warp import shfl_xor_sync\n"
              f"DT = {dt}\n")
    s = codegen.Source()
    with s.block(f"def {name}(a, b, c, m, n, k_len, sam, sak, ldb):"):
        s.line("tid = I(cuda.threadIdx.x); lane = I(tid & 31); warp = I(tid >> 5)",
               f"cv = I(lane % I({G})); kr = I(I(lane // I({G})) + warp * I({32 // G}))",
               f"col0 = I(I(cuda.blockIdx.x) * I({NC_COLS}) + cv * I(4))",
               "# columns past N are clamped: their sums are never stored")
        if vec:  # n % 4 == 0 here
            s.line("col = col0")
            with s.block("if col > n - I(4):"):
                s.line("col = I(n - I(4))")
        else:
            for q in range(4):
                s.line(f"col{q} = I(col0 + I({q}))")
                with s.block(f"if col{q} >= n:"):
                    s.line(f"col{q} = I(n - I(1))")
        for i in range(mt):
            s.line(f"r = I({i})")
            with s.block("if r >= m:"):
                s.line("r = I(m - I(1))")
            s.line(f"ab{i} = I(r * sam)")
            s.line("; ".join(f"c{i}_{q} = DT(0)" for q in range(4)))
        s.line("k = kr")

        def row(tag, at):
            if vec:
                s.line(", ".join(f"b{tag}_{q}" for q in range(4)) + f" = load4_global(b, I({at} * ldb + col))")
            else:
                s.line(f"i = I({at} * ldb)", "; ".join(f"b{tag}_{q} = load1_global(b, I(i + col{q}))" for q in range(4)))

        def fmas(tag, at):
            for i in range(mt):
                s.line(f"x = load1_global(a, I(ab{i} + {at} * sak))",
                       "; ".join(f"c{i}_{q} += x * b{tag}_{q}" for q in range(4)))

        s.line(f"# {NC_UNROLL} rows in flight per thread: all loads first, then the FMAs")
        with s.block(f"while k + I({(NC_UNROLL - 1) * R}) < k_len:"):
            for u in range(NC_UNROLL):
                row(u, f"I(k + I({u * R}))")
            for u in range(NC_UNROLL):
                fmas(u, f"I(k + I({u * R}))")
            s.line(f"k = I(k + I({NC_UNROLL * R}))")
        with s.block("while k < k_len:"):
            row(0, "k")
            fmas(0, "k")
            s.line(f"k = I(k + I({R}))")
        s.line("# fold the rows: lanes of one column group (shuffles), then the warps (shared memory)")
        for i in range(mt):
            for q in range(4):
                for off in [o for o in (16, 8, 4, 2, 1) if o >= G]:
                    s.line(f"c{i}_{q} += shfl_xor_sync(0xFFFFFFFF, c{i}_{q}, {off})")
        s.line(f"part = cuda.shared.array(({warps}, {mt}, {NC_COLS}), DT, alignment=SMEM_ALIGN)")
        with s.block(f"if lane < I({G}):"):
            for i in range(mt):
                for q in range(4):
                    s.line(f"part[warp, {i}, cv * I(4) + I({q})] = c{i}_{q}")
        s.line("cuda.syncthreads()")
        s.line("t = tid")
        with s.block(f"while t < I({mt * NC_COLS}):"):  # the block's MT × 16 sums, warps added in order
            s.line(f"i = I(t // I({NC_COLS})); j = I(t % I({NC_COLS}))",
                   "acc = part[0, i, j]")
            for w in range(1, warps):
                s.line(f"acc += part[{w}, i, j]")
            s.line(f"cc = I(I(cuda.blockIdx.x) * I({NC_COLS}) + j)")
            with s.block("if i < m and cc < n:"):
                s.line("c[I(i * n + cc)] = acc")
            s.line(f"t = I(t + I({warps * 32}))")
    return name, header, s.text()


def make_rows_kernel(config: Config, dtype, vec: bool = True):
    name, header, body = generate_rows(config.mt, dtype, vec, config.warps)
    return codegen.load_function(name, body, header)


def rows_signature(dtype, vec: bool = True):
    flat = numba_dtype(dtype)[::1]
    return void(flat, flat, flat, *([int64] * 6))


def rows_config(config: Config) -> Config:
    """The rows kernel's config for ``config``'s MT (one kernel per MT: the block shape is fixed)."""
    return dataclasses.replace(config, nw=1, unroll=1, warps=2 if SIMULATOR else NC_WARPS)


def launch_rows(config: Config, a, b, c, m, n, k, sam, sak, ldb, stream) -> None:
    """C (M × N, flat) = A · B for a row-major B (``ldb``), A of any strides, M ≤ config.mt."""
    vec = aligned(b) and ldb % 4 == 0 and n % 4 == 0
    config = rows_config(config)
    kernel = ROWS_RUNG.kernel(config, c.dtype, vec=vec)
    i = int64
    kernel[(cdiv(n, NC_COLS),), (config.warps * 32,), stream](a, b, c, i(m), i(n), i(k), i(sam), i(sak), i(ldb))


def source(config: Config, dtype, vec: bool = True, **_) -> str:
    name, header, body = generate(config, dtype, vec)
    return header + "\n" + body


def make_kernel(config: Config, dtype, vec: bool = True):
    name, header, body = generate(config, dtype, vec)
    return codegen.load_function(name, body, header)


def signature(dtype, vec: bool = True):
    flat = numba_dtype(dtype)[::1]
    return void(flat, flat, flat, *([int64] * 7))


def geometry(config: Config, rows_s: int, rows_w: int):
    return (cdiv(rows_w, config.warps * config.nw * (32 // config.g)), cdiv(rows_s, config.mt)), config.block()


def launch(config: Config, s, w, c, rows_s, rows_w, k, lds, ldw, cs, cw, stream) -> None:
    """One GEMV: ``s`` and ``w`` flat k-contiguous operands (leading dimensions ``lds``, ``ldw``),
    ``c`` flat (element (i, j) at ``i·cs + j·cw``)."""
    vec = aligned(s) and aligned(w) and lds % 4 == 0 and ldw % 4 == 0
    grid, block = geometry(config, rows_s, rows_w)
    kernel = RUNG.kernel(config, c.dtype, vec=vec)
    i = int64
    kernel[grid, block, stream](s, w, c, i(rows_s), i(rows_w), i(k), i(lds), i(ldw), i(cs), i(cw))


def jit_options(config: Config, dtype) -> dict:
    return {"launch_bounds": (config.threads, 1), "cache": True}


#: the skinny kernels as a rung object (not a ladder rung: it takes k-contiguous operands only, which
#: a C-order B is not); :mod:`._strided` launches it where :func:`.dispatch.gemv_rule` says
RUNG = Rung("k15_gemv", Config, PRESETS, make_kernel, geometry, signature, jit_options)

#: the row-major-B kernels (one per MT: the block shape is fixed)
ROWS_RUNG = Rung("k15_gemv/rows", Config, PRESETS, make_rows_kernel, geometry, rows_signature,
                 lambda config, dtype: {"launch_bounds": (config.warps * 32, 1), "cache": True})
