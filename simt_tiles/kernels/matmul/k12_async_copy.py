"""k12 — both operands by cp.async: no prefetch registers, A transposed once up front.

What changed versus k11
    k11 prefetches each tile through registers: 16 floats per thread held across
    the whole tile's FMAs, inside a 128-register budget that the 64 accumulators
    and 16 fragments already fill.  ``cp.async`` (``vector.copy4_async``, SASS
    LDGSTS) copies global → shared without registers and without stalling the
    thread; ``wait_copies`` + the tile's barrier make it visible.  It copies
    16 bytes as they are, so the copy cannot transpose: k12 first writes Aᵀ
    (K × M, rows padded to a multiple of 4) with a small tiled transpose, and
    B into a padded copy when its rows are not 16-byte aligned.  Then every
    shape, K % 4 and N % 4 included, takes the 128-bit path; the K tail tile
    (tile 0, as in k11) goes through registers with bounds checks.
    Costs: one extra pass over A (and B when unaligned), and K·M floats of
    workspace.  float64 runs k11's kernel (a 16-byte copy is 2 doubles).

Shared memory: both operands k-major, unswizzled: the copies of a warp write
512 consecutive bytes, and the fragment reads are those of B in k11.

The lesson is a narrow win on this chip: with the transposition counted it is 1-2%
ahead of k11 from 2048³ up and behind on small problems (benchmarks/notes/matmul.md), so
``matmul(variant=None)`` takes it past 132 tiles of 128×128 (the tile and split of the wave model),
for small tiles up to 88 tiles, and for rows that are not a multiple of 4 long; k11 elsewhere.

Headline (H200, benchmarks/results/matmul_fast_h200.json): 48.3 TFLOP/s at 4096x4096x4096, 0.94× cuBLAS
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int64, uint32

from ... import codegen
from ...runtime import Gate, cdiv, jit
from ...vector import aligned
from . import k11_generated_split_k as k11
from .k11_generated_split_k import Config, emit_compute, emit_epilogue, geometry, split_plan, workspace

PRESETS = {
    "sim": Config(bm=32, bn=32, bk=16, wm=16, wn=32, tm=4, tn=4),
    "default": Config(),
    # the other tiles that matmul(variant=None) runs (tuned/h200.json, dispatch.TILES), so the compile gate
    # checks them: 64 threads of 8×4 up to 88 tiles of 128×128 (cuBLAS's 32×64 grid); 128 threads of 8×4
    # for ragged rows up to 48; 64×64, 128×64 and 64×128 wherever the wave model picks them past 132
    "64x64": k11.PRESETS["64x64"],
    "32x64": Config(bm=32, bn=64, wm=32, wn=32, tm=8, tn=4, min_blocks=6),
    "128x64": k11.PRESETS["128x64"],
    "64x128": k11.PRESETS["64x128"],
}


def generate(config: Config, dtype, idx32: bool = True) -> tuple[str, str, str]:
    """``(name, header, body)`` of the kernel ``name(at, b, c, k_chunk, flags)``: C = (Aᵀ)ᵀ B,
    Aᵀ of shape (K, ≥M) and B with rows a multiple of 4 (both 16-byte aligned)."""
    BM, BN, BK, TM, TN = config.bm, config.bn, config.depth(np.dtype(dtype).itemsize), config.tm, config.tn
    T = config.threads
    LN = config.wn // TN
    A_VEC, B_VEC = BM * BK // 4 // T, BK * BN // 4 // T
    RA, RB = T // (BM // 4), T // (BN // 4)  # k-rows of Aᵀ / of B covered by one pass
    X = "U" if idx32 else "I64"
    dt = np.dtype(dtype).name
    name = (f"matmul_k12_{BM}x{BN}x{BK}_w{config.wm}x{config.wn}_t{TM}x{TN}_{dt}_{'i32' if idx32 else 'i64'}"
            f"_lb{k11.launch_blocks(config, dtype)}")  # launch bounds: k11's note
    header = k11.module_header(dt, "commit_copies, copy4_async, load1_global, load4_at, store4, wait_copies")
    s = codegen.Source()
    with s.block(f"def {name}(at, b, c, k_chunk, flags):"):
        s.line(*k11.thread_lines(config),
               f"a_r = U(tid // U({BM // 4})); a_c = U(U(tid % U({BM // 4})) * U(4))",
               f"b_r = U(tid // U({BN // 4})); b_c = U(U(tid % U({BN // 4})) * U(4))",
               "# C (or the split-K workspace, gridDim.z slices) gives M and N; the operands' widths may be padded",
               f"m = {X}({X}(c.shape[0]) // {X}(cuda.gridDim.z)); n = {X}(c.shape[1])",
               f"k_len = {X}(at.shape[0]); ldm = {X}(at.shape[1]); ldb = {X}(b.shape[1])")
        k11.emit_k_range(s, X, BM, BN, BK)
        s.line("vec_c = flags != U(0)",
               "# a vector past the padded width is clamped whole (it feeds outputs never stored)",
               f"a_col = {X}(row0 + {X}(a_c))")
        with s.block(f"if a_col > {X}(ldm - {X}(4)):"):
            s.line(f"a_col = {X}(ldm - {X}(4))")
        s.line(f"b_col = {X}(col0 + {X}(b_c))")
        with s.block(f"if b_col > {X}(ldb - {X}(4)):"):
            s.line(f"b_col = {X}(ldb - {X}(4))")
        s.line(f"a_step = {X}({X}({BK}) * ldm); a_pass = {X}({X}({RA}) * ldm)",
               f"b_step = {X}({X}({BK}) * ldb); b_pass = {X}({X}({RB}) * ldb)",
               f"a_s = cuda.shared.array((2, {BK}, {BM}), DT, alignment=SMEM_ALIGN)",
               f"b_s = cuda.shared.array((2, {BK}, {BN}), DT, alignment=SMEM_ALIGN)")
        for i in range(TM):
            s.line("; ".join(f"c{i}_{j} = DT(0)" for j in range(TN)))
        for mi in range(TM // 4):
            s.line(f"am{mi} = U(m_base + U({mi * (config.wm // TM) * 4}))")
        for ni in range(TN // 4):
            s.line(f"bn{ni} = U(n_base + U({ni * LN * 4}))")

        def issue(stage):
            """cp.async of the tile at (a_idx, b_idx) into ``stage``: 16 bytes per copy, no registers."""
            for p in range(A_VEC):
                s.line(f"copy4_async(a_s, U(U({stage * BK * BM}) + U(U(a_r + U({p * RA})) * U({BM})) + a_c), "
                       f"at, {X}(a_idx + {X}({p}) * a_pass))")
            for p in range(B_VEC):
                s.line(f"copy4_async(b_s, U(U({stage * BK * BN}) + U(U(b_r + U({p * RB})) * U({BN})) + b_c), "
                       f"b, {X}(b_idx + {X}({p}) * b_pass))")
            s.line("commit_copies()")

        s.line("# --- prologue: the K tail (if any) is tile 0, through registers with bounds checks ---",
               f"rem = {X}({X}(k_end - k_begin) % {X}({BK}))")
        with s.block(f"if rem != {X}(0):"):
            s.line(f"kt = {X}(k_end - rem)")
            for op, rows, col, ld, src, dst, width in (("a", RA, "a_col", "ldm", "at", "a_s", BM),
                                                       ("b", RB, "b_col", "ldb", "b", "b_s", BN)):
                for p in range(A_VEC if op == "a" else B_VEC):
                    s.line(f"kr = {X}(kt + {X}({op}_r + U({p * rows})))")
                    vals = []
                    for q in range(4):
                        s.line(f"x{q} = load1_global({src}, {X}({X}(kr * {ld}) + {col} + {X}({q}))) "
                               f"if kr < k_end else DT(0)")
                        vals.append(f"x{q}")
                    s.line(f"store4({dst}, U(U(U({op}_r + U({p * rows})) * U({width})) + {op}_c), "
                           + ", ".join(vals) + ")")
            s.line("kt = k_begin")
            s.line(f"a_idx = {X}({X}(kt + {X}(a_r)) * ldm + a_col); b_idx = {X}({X}(kt + {X}(b_r)) * ldb + b_col)")
        with s.block("else:"):
            s.line("kt = k_begin")
            s.line(f"a_idx = {X}({X}(kt + {X}(a_r)) * ldm + a_col); b_idx = {X}({X}(kt + {X}(b_r)) * ldb + b_col)")
            with s.block(f"if n_tiles > {X}(0):"):
                issue(0)
                s.line(f"a_idx = {X}(a_idx + a_step); b_idx = {X}(b_idx + b_step)")
        s.line("wait_copies()", "cuda.syncthreads()", f"t = {X}(0)")
        s.line("# --- main loop, unrolled x2: copies of the next tile fly during this tile's FMAs ---")
        with s.block("while t < n_tiles:"):
            for half in (0, 1):
                s.line(f"has_next = {X}(t + {X}(1)) < n_tiles")
                with s.block("if has_next:"):
                    issue(1 - half)  # the stage read in the previous step, which ended in a barrier
                    s.line(f"a_idx = {X}(a_idx + a_step); b_idx = {X}(b_idx + b_step)")
                emit_compute(s, config, half, swizzled=False, depth=BK)
                with s.block("if has_next:"):
                    s.line("wait_copies()  # this thread's copies have landed ...")
                s.line("cuda.syncthreads()  # ... and everyone's; the stage just read may be overwritten",
                       f"t = {X}(t + {X}(1))")
                if half == 0:
                    with s.block("if t >= n_tiles:"):
                        s.line("break")
        emit_epilogue(s, config, X)
    return name, header, s.text()


def source(config: Config, dtype, idx32: bool = True) -> str:
    name, header, body = generate(config.compiled(), dtype, idx32)
    return header + "\n" + body


def make_kernel(config: Config, dtype, idx32: bool = True):
    if np.dtype(dtype) != np.float32:  # a 16-byte copy is 2 doubles: float64 runs k11's kernel
        return k11.make_kernel(config, dtype, idx32)
    name, header, body = generate(config.compiled(), dtype, idx32)
    return codegen.load_function(name, body, header)


def signature(dtype, idx32: bool = True):
    return k11.signature(dtype, idx32)


@jit
def transpose_pad(a, at, k_first):
    """at[k, m] = a[m, k], and 0 in the padding columns m ≥ M: 32×32 tiles through shared
    memory (rows of 33: the column reads hit 32 banks), coalesced reads and writes; one tile a
    block, K's tiles from ``k_first`` (a grid is at most 65535 blocks high: :func:`transpose_into`)."""
    tile = cuda.shared.array((32, 33), float32)
    m0 = cuda.blockIdx.x * 32
    k0 = k_first + cuda.blockIdx.y * 32
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    m_len, k_len = a.shape
    for j in range(0, 32, 8):
        r, col = m0 + ty + j, k0 + tx
        tile[ty + j, tx] = a[r, col] if r < m_len and col < k_len else float32(0)
    cuda.syncthreads()
    for j in range(0, 32, 8):
        r, col = k0 + ty + j, m0 + tx
        if r < k_len and col < at.shape[1]:
            at[r, col] = tile[tx, ty + j]


def transpose_into(a, at, stream) -> None:
    """:func:`transpose_pad` of ``a`` (R × K) into ``at`` (K × ≥R) on ``stream``: a launch per 65535
    tiles of K (one for any K under 2 M; a loop inside the kernel cost 13-33%: notes/matmul.md)."""
    k, step = a.shape[1], k11.MAX_GRID_Y * 32
    for k0 in range(0, k, step):
        transpose_pad[(cdiv(at.shape[1], 32), cdiv(min(k - k0, step), 32)), (32, 8), stream](a, at, k0)


class AsyncCopyRung(k11.SplitKRung):
    """k11's split-K launch, with Aᵀ (and padded B) made first; float64 goes to k11."""

    def source(self, config, dtype, idx32: bool = True, **_) -> str:
        return source(config, dtype, idx32)

    def run(self, config, call) -> None:
        a, b, c, stream = call.a, call.b, call.c, call.stream
        if a.dtype != np.float32:
            return k11.RUNG.run(config, call)
        m, k = a.shape
        mp = cdiv(m, 4) * 4
        at = workspace((k, mp), a.dtype, stream, "a_transposed")
        transpose_into(a, at, stream)
        self.run_transposed(config, at, b, c, stream)

    def run_transposed(self, config, at, b, c, stream) -> None:
        """C (M × N) = (Aᵀ)ᵀ B from Aᵀ as it lies (float32, K × M' with M' ≥ M a multiple of 4,
        C-contiguous, 16-byte aligned): ``a.T @ b`` on a C-order ``a`` skips the transposition."""
        dtype = at.dtype
        m, n = c.shape
        k, mp = at.shape
        np_ = cdiv(n, 4) * 4
        grid, block = geometry(config, m, n, k)
        splits, chunk = split_plan(config, k)
        if n % 4 or not aligned(b):
            bp = workspace((k, np_), dtype, stream, "b_padded")
            k11.copy_padded(b, bp, stream)
            b = bp
        idx32 = max(k * mp, k * np_, splits * m * n) + 4 * config.bk * max(mp, np_) < k11.IDX32_LIMIT
        kernel = self.kernel(config, dtype, idx32=idx32)
        target = c if splits == 1 else workspace((splits * m, n), dtype, stream)
        flags = uint32(n % 4 == 0 and aligned(target))
        kernel[grid, block, stream](at, b, target, (uint32 if idx32 else int64)(chunk), flags)
        if splits > 1:
            k11.add_splits(target, c, stream)


# float64 runs k11's kernel (make_kernel), which the gate builds under k11: gated for float32 only
RUNG = AsyncCopyRung("k12_async_copy", Config, PRESETS, make_kernel, geometry, signature, k11.jit_options,
                     gate=Gate(dtypes=("float32",)))
