"""k11's tile for the layouts users bring: either operand row- or column-major, any leading
dimension, a batch of products in one launch (``matmul(x, w.T)``, ``a.T @ dc``, attention's
64 × (512×64 @ 64×512)).

The smem tiles, the compute and the epilogue are k11's; only the loaders change.  Each operand
is one of two kinds, by the axis its storage is contiguous along:

* **k-contiguous** (A row-major, k11's A; B column-major, ``w.T``): a thread reads 4 k's of one
  row with a 128-bit load and stores them as 4 scalars down the k-major tile, XOR-swizzled by
  k's quarter (k11's A store, conflict-free); the compute reads that operand swizzled;
* **x-contiguous** (B row-major, k11's B; A column-major, ``a.T``): a thread reads 4
  consecutive m (or n) of one k row with a 128-bit load and stores them with one 128-bit store
  (unswizzled: k12's tile for A).

The operands come as **flat 1-D storage** (the bytes from element 0 to the last one the view can
reach) with ``lda``/``ldb`` and batch strides ``sa``/``sb`` as arguments (0: a broadcast batch).
Rows past M and columns past N are clamped to the last real one, as in k11, so the hot loop has
no masks; the vector build needs the contiguous axis's extent (x-contiguous), the leading
dimensions and the batch strides to be multiples of 4 and the storage 16-byte aligned, else the
scalar build runs (``vec=False``).  Grid z is ``split · batches + batch`` (C's row block
``z · M``: split-K partials stack after the batch as k11's do), from ``z0`` (grids over 65535).

The row-major × row-major layout (``"nn"``) of this generator is what strided or batched NN calls
run; contiguous 2-D NN calls keep k11's own source (pinned by tests/test_generated_sources.py).
"""

from __future__ import annotations

import numpy as np
from numba import int64, uint32, void

from ... import codegen
from ...runtime import Rung, numba_dtype
from . import k11_generated_split_k as k11

#: the layouts: A's then B's, "n" row-major (C order), "t" column-major (a transposed view)
LAYOUTS = ("nn", "nt", "tn", "tt")


def layout_rules(config, layout: str):
    """Reasons ``config`` cannot run ``layout`` (empty: it can), besides k11's own rules."""
    T = config.threads
    why = []
    if layout[0] == "t" and T % (config.bm // 4):
        why.append("a column-major A needs threads % (bm/4) == 0")
    if layout[1] == "t" and config.bn % (2 * config.bk):
        why.append("a column-major B needs bn % (2*bk) == 0 (its swizzle)")
    return why


class _Operand:
    """How one operand's loader is written: name, tile width, extent and origin variables."""

    def __init__(self, name, kcont, width, ext, x0, ld, off, vecs, T, depth):
        self.n, self.kc, self.W, self.ext, self.x0, self.ld, self.off, self.V = (
            name, kcont, width, ext, x0, ld, off, vecs)
        self.Q = depth // 4
        # rows (x for k-contiguous, k for x-contiguous) one pass of the block covers
        self.R = T // self.Q if kcont else T // (width // 4)


def generate(config, dtype, idx32: bool, vec: bool, layout: str) -> tuple[str, str, str]:
    """``(name, header, body)`` of ``name(a, b, c, k_chunk, flags, m, n, k_len, lda, ldb, sa, sb,
    nb, z0)``: a and b flat storage, c (z·M + row, N) C-contiguous."""
    BM, BN, BK, TM, TN = config.bm, config.bn, config.depth(np.dtype(dtype).itemsize), config.tm, config.tn
    T = config.threads
    X = "U" if idx32 else "I64"
    dt = np.dtype(dtype).name
    A = _Operand("a", layout[0] == "n", BM, "m", "row0", "lda", "a_off", BM * BK // 4 // T, T, BK)
    B = _Operand("b", layout[1] == "t", BN, "n", "col0", "ldb", "b_off", BK * BN // 4 // T, T, BK)
    SPAN = k11.swizzle_span(BK)
    name = (f"matmul_k11{layout}_{BM}x{BN}x{BK}_w{config.wm}x{config.wn}_t{TM}x{TN}_{dt}"
            f"_{'i32' if idx32 else 'i64'}{'_v4' if vec else '_v1'}_lb{k11.launch_blocks(config, dtype)}")
    header = k11.module_header(dt, "load1_global, load4_at, load4_global, store4, store4_at, store_at")
    s = codegen.Source()
    with s.block(f"def {name}(a, b, c, k_chunk, flags, m, n, k_len, lda, ldb, sa, sb, nb, z0):"):
        s.line(*k11.thread_lines(config))
        for o in (A, B):
            if o.kc:  # o_r: the row (m or n) this thread loads; o_q: its 4 k's; o_sw: its swizzle
                s.line(f"{o.n}_r = U(tid // U({o.Q})); {o.n}_q = U(U(tid % U({o.Q})) * U(4)); "
                       f"{o.n}_sw = U(U(tid % U({o.Q})) << U(3))")
            else:  # o_r: the k row this thread loads; o_q: its 4 columns
                s.line(f"{o.n}_r = U(tid // U({o.W // 4})); {o.n}_q = U(U(tid % U({o.W // 4})) * U(4))")
        s.line("# --- this block's batch, split and tile (global index type) ---",
               f"zz = {X}({X}(cuda.blockIdx.z) + {X}(z0)); batch = {X}(zz % {X}(nb)); split = {X}(zz // {X}(nb))",
               f"row0 = {X}({X}(cuda.blockIdx.y) * {X}({BM})); col0 = {X}({X}(cuda.blockIdx.x) * {X}({BN}))",
               f"k_begin = {X}(split * {X}(k_chunk)); c_row0 = {X}(zz * {X}(m))",
               f"k_end = {X}(k_begin + {X}(k_chunk))",
               f"a_off = {X}(batch * {X}(sa)); b_off = {X}(batch * {X}(sb))")
        k11.emit_k_clamp(s, X, BK)
        s.line("vec_c = flags != U(0)",
               "# rows past M / columns past N are clamped: they feed only outputs never stored")
        for o in (A, B):
            if o.kc:
                for p in range(o.V):
                    s.line(f"r = {X}({o.x0} + {X}({o.n}_r + U({p * o.R})))")
                    with s.block(f"if r >= {o.ext}:"):
                        s.line(f"r = {X}({o.ext} - {X}(1))")
                    s.line(f"{o.n}_base{p} = {X}({X}({o.off} + r * {o.ld}) + {X}({o.n}_q))")
            else:
                s.line(f"{o.n}_step = {X}({X}({BK}) * {o.ld}); {o.n}_pass = {X}({X}({o.R}) * {o.ld})",
                       f"{o.n}_idx = {X}(0)")
                if vec:  # the extent is a multiple of 4 here: a vector is wholly in or wholly past it
                    s.line(f"{o.n}_col = {X}({o.x0} + {X}({o.n}_q))")
                    with s.block(f"if {o.n}_col > {X}({o.ext} - {X}(4)):"):
                        s.line(f"{o.n}_col = {X}({o.ext} - {X}(4))")
                else:
                    s.line(f"{o.n}_col = {X}(0)")
                    for q in range(4):
                        s.line(f"{o.n}col{q} = {X}({o.x0} + {X}({o.n}_q + U({q})))")
                        with s.block(f"if {o.n}col{q} >= {o.ext}:"):
                            s.line(f"{o.n}col{q} = {X}({o.ext} - {X}(1))")
        s.line("kt = k_begin  # first k of the tile being loaded",
               f"a_s = cuda.shared.array((2, {BK}, {BM}), DT, alignment=SMEM_ALIGN)",
               f"b_s = cuda.shared.array((2, {BK}, {BN}), DT, alignment=SMEM_ALIGN)")
        for i in range(TM):
            s.line("; ".join(f"c{i}_{j} = DT(0)" for j in range(TN)))
        for o in (A, B):
            for p in range(o.V):
                s.line("; ".join(f"p{o.n}{p}_{q} = DT(0)" for q in range(4)))
        for mi in range(TM // 4):
            s.line(f"am{mi} = U(m_base + U({mi * (config.wm // TM) * 4}))")
        for ni in range(TN // 4):
            s.line(f"bn{ni} = U(n_base + U({ni * (config.wn // TN) * 4}))")
        s.line("# where this thread stores in a stage (the stage, k and pass are constant offsets)")
        for o in (A, B):
            if o.kc:
                s.line(f"s{o.n} = U(U({o.n}_q * U({o.W})) + U({o.n}_r ^ {o.n}_sw))")
                for p in range(o.V):
                    if (p * o.R) % SPAN:
                        s.line(f"s{o.n}{p} = U(U({o.n}_q * U({o.W})) + U(U({o.n}_r + U({p * o.R})) ^ {o.n}_sw))")
            else:
                s.line(f"s{o.n} = U(U({o.n}_r * U({o.W})) + {o.n}_q)")

        def init_idx():
            for o in (A, B):
                if not o.kc:
                    s.line(f"{o.n}_idx = {X}({X}({o.off} + {X}(kt + {X}({o.n}_r)) * {o.ld}) + {o.n}_col)")

        def advance():
            s.line(f"kt = {X}(kt + {X}({BK}))")
            for o in (A, B):
                if not o.kc:
                    s.line(f"{o.n}_idx = {X}({o.n}_idx + {o.n}_step)")

        def load_full():
            """The full tile at kt into the prefetch registers: no bounds checks (clamped bases)."""
            for o in (A, B):
                for p in range(o.V):
                    i = f"{X}({o.n}_base{p} + kt)" if o.kc else f"{X}({o.n}_idx + {X}({p}) * {o.n}_pass)"
                    regs = [f"p{o.n}{p}_{q}" for q in range(4)]
                    if vec:
                        s.line(", ".join(regs) + f" = load4_global({o.n}, {i})")
                        continue
                    s.line(f"i = {i}")
                    cols = [f"{X}(i + {X}({q}))" if o.kc else f"{X}(i + {o.n}col{q})" for q in range(4)]
                    s.line("; ".join(f"{r} = load1_global({o.n}, {c})" for r, c in zip(regs, cols)))

        def load_tail():
            """The K tail tile at kt: every element checked against k_end (and the extent)."""
            for o in (A, B):
                for p in range(o.V):
                    if o.kc:
                        for q in range(4):
                            s.line(f"kq = {X}(kt + {X}({o.n}_q + U({q})))",
                                   f"p{o.n}{p}_{q} = load1_global({o.n}, {X}({X}({o.n}_base{p} + kt) + {X}({q}))) "
                                   f"if kq < k_end else DT(0)")
                        continue
                    s.line(f"kr = {X}(kt + {X}({o.n}_r + U({p * o.R})))")
                    for q in range(4):
                        s.line(f"col = {X}({o.x0} + {X}({o.n}_q + U({q})))",
                               f"p{o.n}{p}_{q} = load1_global({o.n}, {X}({X}({o.off} + kr * {o.ld}) + col)) "
                               f"if kr < k_end and col < {o.ext} else DT(0)")

        def store(stage):
            """Prefetch registers → shared stage (k-major): k-contiguous operands as 4 swizzled scalars,
            x-contiguous ones as one 128-bit store."""
            for o in (A, B):
                for p in range(o.V):
                    regs = [f"p{o.n}{p}_{q}" for q in range(4)]
                    if o.kc:
                        base, off = (f"s{o.n}", p * o.R) if (p * o.R) % SPAN == 0 else (f"s{o.n}{p}", 0)
                        for q in range(4):
                            s.line(f"store_at({o.n}_s, {base}, {stage * BK * o.W + q * o.W + off}, {regs[q]})")
                    else:
                        s.line(f"store4_at({o.n}_s, s{o.n}, {stage * BK * o.W + p * o.R * o.W}, " + ", ".join(regs) + ")")

        def after_tail():
            s.line("kt = k_begin  # the next full tile")
            init_idx()

        def first():
            init_idx()
            load_full()
            advance()

        k11.emit_pipeline(s, X, BK, load_tail, after_tail, first, load_full, advance, store,
                          lambda half: k11.emit_compute(s, config, half, swizzled=A.kc, depth=BK, b_swizzled=B.kc))
        k11.emit_epilogue(s, config, X)
    return name, header, s.text()


def source(config, dtype, idx32: bool = True, vec: bool = True, layout: str = "nn") -> str:
    name, header, body = generate(config.compiled(), dtype, idx32, vec, layout)
    return header + "\n" + body


def make_kernel(config, dtype, idx32: bool = True, vec: bool = True, layout: str = "nn"):
    name, header, body = generate(config.compiled(), dtype, idx32, vec, layout)
    return codegen.load_function(name, body, header)


def signature(dtype, idx32: bool = True, vec: bool = True, layout: str = "nn"):
    flat, c = numba_dtype(dtype)[::1], numba_dtype(dtype)[:, ::1]
    x = uint32 if idx32 else int64
    return void(flat, flat, c, x, uint32, x, x, x, x, x, x, x, uint32, uint32)


#: the layout kernels as a rung object (not a ladder rung: k11's configs and presets, compiled per
#: ``idx32``, ``vec`` and ``layout``); :mod:`._strided` launches it
RUNG = Rung("k11_generated_split_k/layouts", k11.Config, k11.PRESETS, make_kernel, k11.geometry, signature,
            k11.jit_options)
