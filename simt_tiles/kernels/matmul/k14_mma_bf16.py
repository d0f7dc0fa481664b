"""k14 — 16-bit operands: ``mma.sync`` m16n8k16 on BF16 or FP16, fragments by ``ldmatrix``.

What changed versus k13
    Half the bytes per element, twice the k per instruction (16), and twice the tensor-core
    rate of TF32.  k13 reads B's fragments with one 32-bit load per element and rounds every
    operand with ``cvt.rna`` (two SASS instructions each); 16-bit operands need no rounding,
    and ``ldmatrix`` (:func:`simt_tiles.mma.ldsm_x4`) reads both operands: one instruction per
    A fragment (16×16) and one per *pair* of B fragments — ``.trans`` turns the row-major K×N
    tile of B into the column-major fragment the mma wants (16-bit elements can be transposed;
    TF32's cannot), so B needs no transposed copy.
    * the swizzle moves whole 16-byte rows: A (BK = 32 halves, 4 chunks a row) chunk c of
      row r at c ^ ((r >> 1) mod 4), B at c ^ (k mod 8): the 8 row addresses of each 8×8
      matrix fall in 8 different 16-byte bank groups, so every ldmatrix is conflict-free;
    * data are the raw ``uint16`` bits (NumPy has no bfloat16), packed two to a register;
      C is written in the inputs' type, rounded once from the FP32 accumulators.

The pipeline, the copies, the edges and the epilogue are k13's (``k13_mma_tf32.Pipeline``).

Headline (H200, benchmarks/results/mma_s27_h200.json, impl "k14_mma_bf16:large,bk=64,stages=3"): 377.2 TFLOP/s at 4096³, 0.51× cuBLAS BF16
"""

from __future__ import annotations

import dataclasses

from ...runtime import Gate
from . import k13_mma_tf32 as k13


@dataclasses.dataclass(frozen=True)
class Config(k13.Config):
    """k13's config for 2-byte elements: BK counts halves, a k-step is 16."""

    bk: int = 32
    stages: int = 4

    ES = 2
    KSTEP = 16
    NSTEP = 16  # one ldmatrix.x4.trans covers two 8-column B fragments


PRESETS = {
    "sim": Config(bm=32, bn=32, bk=32, wm=16, wn=32, stages=2, group=2),
    # guards 3 (hoisted, size-0 copies keep their address; memcheck clean): 6-13% faster than guards 1 at
    # 4096³-8192³, 15% on 1031×997×1013 (H100, mma_s36)
    "default": Config(guards=3),
    # matmul_mma(config=None) on grids of at least LARGE_TILES such tiles; BK = 64: half the barriers a tile
    # (benchmarks/notes/mma.md, session 27: +3-4% at 4096³ and 8192³ over BK = 32 with 4 stages)
    "large": Config(bm=256, bn=128, bk=64, wm=64, wn=64, stages=3, guards=2),  # guards 2: 4-11% (H100, mma_s36)
    # the batched form of "large" (grid z is the batch; matmul_mma chooses it for a batch of products): gated
    # so its signature and registers are checked where the 2-D kernel's are (benchmarks/notes/mma.md)
    "large_batched": Config(bm=256, bn=128, bk=64, wm=64, wn=64, stages=3, batched=2, guards=2),
}


class Pipeline16(k13.Pipeline):
    """k13's pipeline with ldmatrix fragment loads and the m16n8k16 mma."""

    def __init__(self, cfg, precision: str = "bf16"):
        super().__init__(cfg, precision)
        self.MMA = "mma_bf16" if precision == "bf16" else "mma_f16"

    def f_b(self, r: str) -> str:
        return f"U(U({r}) & U({min(self.WB, 8) - 1}))"

    def f_b_py(self, r: int) -> int:
        return r & (min(self.WB, 8) - 1)

    def setup(self, s):
        # lane L gives row L&7 of matrix L>>3: A's matrices (rows +8, k +8) = (j&1, j>>1), B's (k +8, n +8)
        s.line("mrow = U(r8 + U(U(j8 & U(1)) * U(8)))")
        for kk in range(self.KS):
            s.line(f"fa{kk} = SA(s0 + SA(U(U(wm0 + mrow) * U({self.ROWA})) + "
                   f"U(U(U(U({2 * kk}) + U(j8 >> U(1))) ^ {self.f_a('r8')}) * U(16))))")
        for np2 in range(self.NI // 2):
            s.line(f"fb{np2} = SA(s0 + SA(U({self.A_STAGE}) + U(mrow * U({self.ROWB})) + "
                   f"U(U(U(U(wn0 >> U(3)) + U({2 * np2}) + U(j8 >> U(1))) ^ {self.f_b('r8')}) * U(16))))")

    def load_a(self, s, stage: int, kk: int, buf: int):
        base = stage * self.STAGE
        for mi in range(self.MI):
            s.line(", ".join(f"a{buf}_{mi}_{r}" for r in range(4))
                   + f" = ldsm_x4(fa{kk}, {base + mi * 16 * self.ROWA})")

    def load_b(self, s, stage: int, kk: int, buf: int):
        base = stage * self.STAGE
        for np2 in range(self.NI // 2):
            s.line(f"b{buf}_{2 * np2}_0, b{buf}_{2 * np2}_1, b{buf}_{2 * np2 + 1}_0, b{buf}_{2 * np2 + 1}_1"
                   f" = ldsm_x4_t(fb{np2}, {base + kk * 16 * self.ROWB})")

    def store(self, value: str) -> str:
        return f"{'f32_to_bf16' if self.precision == 'bf16' else 'f32_to_f16'}({value})"


def make_kernel(config: Config, dtype, precision: str = "bf16", batched: int = 1):
    return k13.make_kernel(config, dtype, Pipeline16, precision)


def source(config, dtype=None, precision: str = "bf16", **_) -> str:
    name, header, body = k13.generate(config, precision, Pipeline16)
    return header + "\n" + body


def signature(dtype, precision: str = "bf16", batched: int = 1):
    from numba import uint16, void

    return k13.batched_signature(uint16) if batched == 2 else void(uint16[:, ::1], uint16[:, ::1], uint16[:, ::1])


class Mma16Rung(k13.MmaRung):
    def source(self, config, dtype=None, precision: str = "bf16", **_) -> str:
        return source(config, dtype, precision)


# the kernel's dtype is the precision (the gate's params): built once under the gate's "float32" row
RUNG = Mma16Rung("k14_mma_bf16", Config, PRESETS, make_kernel, k13.geometry, signature, k13.jit_options,
                 dynamic_smem=lambda config, dtype: config.dynamic_smem(),
                 gate=Gate(({"precision": "bf16"}, {"precision": "fp16"}), dtypes=("float32",)))
