"""k13 — tensor cores from SIMT code: warp-level ``mma.sync`` m16n8k8 on TF32, a multi-stage cp.async pipeline.

What changed versus k12
    k12's tile loop is FFMA: 32 lanes × 1 multiply-add.  ``mma.sync`` (:mod:`simt_tiles.mma`,
    inline PTX) is one *warp* instruction that multiplies a 16×8 A fragment by an 8×8 B fragment
    into a 16×8 accumulator held across the warp's 32 lanes (4 floats each; the layout is in
    ``simt_tiles/mma.py``).  A warp owns a WM×WN tile = (WM/16)·(WN/8) such fragments; a k-step
    of 8 is (WM/16)·(WN/8) instructions.  Operands are TF32: ``cvt.rna`` rounds each float32 to
    10 mantissa bits as it is loaded (an explicit opt-in: ``precision="tf32"``).
    * **S-stage cp.async pipeline** in dynamic shared memory: tiles t+1 … t+S−1 are in flight
      while tile t is multiplied; one ``cp.async.wait_group S−2`` + barrier per tile.  Edges are
      the copy's zero-fill (``src-size`` 0), so edge blocks run the same code.
    * **fragments from shared memory**: an ``ldmatrix.x4`` of four 8×4-float blocks *is* the
      TF32 A fragment (the instruction moves 16-bit pairs; without ``.trans`` a float is just two
      of them), one instruction for 16×8; B's fragment is a transpose of 32-bit elements, which
      ldmatrix cannot do, so each lane reads its two B elements with 32-bit loads.
    * **XOR swizzle on 16-byte chunks**, conflict-free for the copies and the fragment reads:
      A (BM×BK, row-major) chunk c of row r is stored at c ^ (r mod 8), so the 8 rows an
      ldmatrix reads hit 8 bank groups; B (BK×BN) at c ^ 2·(k mod 4), so the 32 scalar reads of
      a B fragment (lane (g, t) reads row t, column g) hit 32 banks.
    * **byte addresses** in shared memory: one base register per fragment column, every
      stage/k-step/fragment an immediate; the tile loop is unrolled S times so the stage is a
      constant; fragments double-buffered in registers (k-step k+1 loads while k multiplies);
      ``frag`` 2 keeps three sets, loading k-step k+2's (ptxas sinks a load issued after the copies
      to just before its mma; two steps ahead it still has a step of mma to hide behind).
    * block tiles rasterised in groups of ``group`` rows (L2 reuse of B's columns).

Generated source (``python -m simt_tiles.codegen dump k13_mma_tf32``).  Rules: wm % 16, wn % 8,
bk % 8 (bk/8 · stages even), the copies an equal number per thread.

Headline (H200, benchmarks/results/mma_h200.json): 174.7 TFLOP/s at 4096³, 0.44× cuBLAS TF32
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from ... import codegen
from ...runtime import Gate, TileConfig, cdiv, jit, Rung
from ...interop import device_view
from ...vector import aligned
from . import k11_generated_split_k as k11
from .k11_generated_split_k import workspace

__all__ = ["Config", "PRESETS", "RUNG", "generate", "Pipeline"]


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """BM×BN block of warps WM×WN, BK deep, ``stages`` shared stages, rows rasterised by ``group``."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    wm: int = 64
    wn: int = 64
    stages: int = 3
    group: int = 8
    min_blocks: int = 1
    #: 1: operands rounded by cvt.rna (TF32 to nearest, ties away); 2: as the tensor cores read float32
    #: (truncated: u = 2⁻¹⁰); 3: rounded by one integer add of half a TF32 ulp to the bits, which the
    #: tensor cores then truncate — rna for every finite value and inf (cvt.rna is 2 SASS instructions), but a
    #: NaN whose top 10 mantissa bits are all ones (CUDA's own 0x7FFFFFFF from 0/0 or inf − inf among them)
    #: wraps to ±0: a knob for timing, in no preset; inputs that may hold NaN take 1
    rounding: int = 1
    #: the copies' guards (issue 30, session 36; benchmarks/notes/mma.md).  1: each copy's row and k
    #: tests in 64 bits, as generated first; 2: hoisted — per thread the rows of A it copies that lie
    #: inside C and the k left to B (32-bit, set once / once a tile), one compare with an immediate a
    #: copy, an out-of-range copy's source still the safe address of element 0; 3: as 2, and a copy of
    #: size 0 keeps its own (possibly out-of-range) source address, which it does not read (CUTLASS's
    #: zfill): no address select
    guards: int = 1
    #: where TF32 operands are rounded (issue 30, session 36 (b); benchmarks/notes/mma.md).  1: at fragment
    #: load, by every warp that reads the value (2 SASS instructions a value with cvt.rna); 2: once a block,
    #: in shared memory: after its own copies of a stage have landed (wait_group) and before the barrier
    #: that publishes the stage, each thread rounds the 16-byte chunks it copied (LDS.128, 4 roundings,
    #: STS.128), and the fragment loads take the bits as they are.  The same rounding (``rounding`` 1 or 3),
    #: so the same bits reach the tensor cores: results identical to 1
    round_in_smem: int = 1
    #: 2: the batched form (grid z is the batch): ``kernel(a, b, c, m, k_len, lda, ldb, sa, sb)`` with A and B
    #: as flat storage, block z's matrices from elements z·sa and z·sb (64-bit; 0: a broadcast operand) and
    #: C (batches·M, N), its rows from z·M; everything else the 2-D kernel's.  1 (the default): the 2-D kernel
    #: ``kernel(a, b, c)``, its source as before.  The launcher chooses it (a batch of products runs 2)
    batched: int = 1
    #: how many k-slices ahead a warp loads its fragments (issue 30, session 40; benchmarks/notes/mma.md).  1: the
    #: next slice's (two register sets), as generated first; 2: A's and B's two slices ahead inside a BK tile
    #: (three sets; at the tile's last slice, after the barrier, the next tile's first two), so no slice's loads
    #: sit right behind the copies (ptxas keeps an ldmatrix below a cp.async); 3: B's two ahead, A's one (a partial:
    #: one more set of B's registers only)
    frag: int = 1

    ES = 4  # bytes per element in shared memory
    KSTEP = 8  # k of one mma

    def block(self):
        return ((self.bm // self.wm) * (self.bn // self.wn) * 32,)

    @property
    def vec(self) -> int:
        return 16 // self.ES

    def stage_bytes(self) -> int:
        return (self.bm * self.bk + self.bk * self.bn) * self.ES

    def rules(self):
        t = (self.bm // self.wm) * (self.bn // self.wn) * 32 if self.bm % self.wm == 0 and self.bn % self.wn == 0 else 1
        wa, wb = self.bk * self.ES // 16, self.bn * self.ES // 16
        pow2 = lambda x: x >= 1 and x & (x - 1) == 0  # noqa: E731
        return (("bm", self.bm % self.wm == 0, "bm % wm == 0"),
                ("bn", self.bn % self.wn == 0, "bn % wn == 0"),
                ("wm", self.wm % 16 == 0, "wm % 16 == 0 (the mma's M)"),
                ("wn", self.wn % self.NSTEP == 0, f"wn % {self.NSTEP} == 0"),
                ("bk", self.bk % self.KSTEP == 0 and pow2(wa), f"bk % {self.KSTEP} == 0, a power-of-two number of 16-byte chunks"),
                ("bn", pow2(wb), "bn·itemsize/16 a power of two (the swizzle)"),
                ("rounding", self.rounding in (1, 2, 3), "rounding 1 (cvt.rna), 2 (truncation) or 3 (add)"),
                ("guards", self.guards in (1, 2, 3), "guards 1 (per copy), 2 (hoisted) or 3 (hoisted, no select)"),
                ("batched", self.batched in (1, 2), "batched 1 (one product) or 2 (grid z is the batch)"),
                ("round_in_smem", self.round_in_smem == 1 or (self.round_in_smem == 2 and self.ES == 4 and self.rounding != 2),
                 "round_in_smem 1 (at fragment load) or 2 (once a block in shared memory: TF32 with rounding 1 or 3)"),
                ("stages", self.stages >= 2 and (self.bk // self.KSTEP * self.stages) % 2 == 0,
                 "stages >= 2 and (bk/kstep)·stages even (register double buffering)"),
                ("frag", self.frag == 1 or (self.frag in (2, 3) and self.bk // self.KSTEP >= 2
                                            and (self.bk // self.KSTEP * self.stages) % 3 == 0),
                 "frag 1, or 2/3 (three register sets) with bk/kstep >= 2 and (bk/kstep)·stages a multiple of 3"),
                ("bk", (self.bm * wa) % t == 0 and (self.bk * wb) % t == 0 and t % wa == 0 and t % wb == 0,
                 "the 16-byte copies of A and B spread evenly over the threads"))

    NSTEP = 8  # n-granularity of one warp's fragment loads

    def dynamic_smem(self) -> int:
        return self.stages * self.stage_bytes()


PRESETS = {
    "sim": Config(bm=32, bn=32, bk=16, wm=16, wn=32, stages=2, group=2),
    # guards 3 (hoisted, size-0 copies keep their address; memcheck clean, mma_s36): 12% faster than guards 1 at
    # 4096³ and on 1031×997×1013 (H100, mma_s39 in session 41)
    "default": Config(guards=3),
    # matmul_mma(config=None) on grids of at least LARGE_TILES such tiles (benchmarks/notes/mma.md)
    # guards 2 (the copies' guards hoisted): 8-9% faster than guards 1 at 4096³ and 8192³ (H100, mma_s36)
    "large": Config(bm=128, bn=256, wm=64, wn=64, stages=3, guards=2),
    # the batched form of "large" (grid z is the batch; matmul_mma chooses it for a batch of products): gated
    # so its signature and registers are checked where the 2-D kernel's are (benchmarks/notes/mma.md)
    "large_batched": Config(bm=128, bn=256, wm=64, wn=64, stages=3, batched=2, guards=2),
}


class Pipeline:
    """The generator: the copy pipeline, the loop and the epilogue; the fragment loads and the mma
    are :meth:`setup`, :meth:`load` and :meth:`mma`, which k14 replaces for 16-bit operands."""

    MMA = "mma_tf32"

    def __init__(self, cfg: Config, precision: str = "tf32"):
        self.cfg, self.precision = cfg, precision
        c = cfg
        self.T = c.threads
        self.WA, self.WB = c.bk * c.ES // 16, c.bn * c.ES // 16  # 16-byte chunks per smem row
        self.ROWA, self.ROWB = c.bk * c.ES, c.bn * c.ES
        self.A_STAGE, self.STAGE = c.bm * self.ROWA, c.stage_bytes()
        self.MI, self.NI, self.KS = c.wm // 16, c.wn // 8, c.bk // c.KSTEP
        self.RA, self.RB = self.T // self.WA, self.T // self.WB  # rows one pass of copies covers
        self.da, self.db = {1: (1, 1), 2: (2, 2), 3: (1, 2)}[cfg.frag]  # k-slices ahead: A's, B's fragments

    # ---- swizzles: the chunk a row's chunk c goes to is c ^ f(row) ----
    def f_a(self, r: str) -> str:
        shift = {1: 0, 2: 2, 4: 1}.get(self.WA, 0)
        return f"U(U(U({r}) >> U({shift})) & U({min(self.WA, 8) - 1}))"

    def f_b(self, r: str) -> str:
        return f"U(U(U(U({r}) & U(3)) << U(1)) & U({self.WB - 1}))"

    def f_a_py(self, r: int) -> int:
        return (r >> {1: 0, 2: 2, 4: 1}.get(self.WA, 0)) & (min(self.WA, 8) - 1)

    def f_b_py(self, r: int) -> int:
        return ((r & 3) << 1) & (self.WB - 1)

    # ---- fragments (TF32): A by ldmatrix, B by scalar 32-bit reads; each rounded by cvt.rna ----
    def tf32(self, x: str, bits: bool = False) -> str:
        """Operand ``x`` for the mma: rounded by cvt.rna, or as it is (``bits``: a uint32 register); as it
        is too when shared memory holds it rounded already (``round_in_smem`` 2)."""
        r = 2 if self.cfg.round_in_smem == 2 else self.cfg.rounding
        return f"cvt_tf32({x})" if r == 1 else f"rna_add({x})" if r == 3 else (f"as_f32({x})" if bits else x)

    def setup(self, s):
        # A: ldmatrix.x4 of 8x4-float blocks *is* the TF32 A fragment (a 32-bit element is two b16):
        # lane L gives row L&7 (+8 for matrices 1, 3) of k-chunk 2kk (+1 for matrices 2, 3)
        s.line("mrow = U(r8 + U(U(j8 & U(1)) * U(8)))")
        for kk in range(self.KS):
            s.line(f"fa{kk} = SA(s0 + SA(U(U(wm0 + mrow) * U({self.ROWA})) + "
                   f"U(U(U(U({2 * kk}) + U(j8 >> U(1))) ^ {self.f_a('r8')}) * U(16))))")
        # B: lane (g, t) reads B[t][g]; the swizzle c ^ 2t repeats every 4 fragments (32 columns)
        self.nb = 4 if self.cfg.wn % 32 == 0 else self.NI
        for ni in range(min(self.nb, self.NI)):
            s.line(f"fb{ni} = SA(s0 + SA(U({self.A_STAGE}) + U(t4 * U({self.ROWB})) + "
                   f"U(U(U(U(wn0 >> U(2)) + U({2 * ni}) + U(g >> U(2))) ^ {self.f_b('t4')}) * U(16)) + "
                   f"U(U(g & U(3)) * U(4))))")

    def load(self, s, stage: int, kk: int, buf: int):
        self.load_a(s, stage, kk, buf)
        self.load_b(s, stage, kk, buf)

    def load_a(self, s, stage: int, kk: int, buf: int):
        base = stage * self.STAGE
        for mi in range(self.MI):
            s.line(", ".join(f"q{r}" for r in range(4)) + f" = ldsm_x4(fa{kk}, {base + mi * 16 * self.ROWA})")
            s.line("; ".join(f"a{buf}_{mi}_{r} = {self.tf32(f'q{r}', True)}" for r in range(4)))

    def load_b(self, s, stage: int, kk: int, buf: int):
        base = stage * self.STAGE
        for ni in range(self.NI):
            for r in range(2):
                off = base + (kk * 8 + 4 * r) * self.ROWB + (ni // self.nb) * self.nb * 32
                s.line(f"b{buf}_{ni}_{r} = {self.tf32(f'lds32(fb{ni % self.nb}, {off})')}")

    def round_stage(self, s, stage: int):
        """``round_in_smem`` 2: this thread's own chunks of ``stage`` (the destinations of its copies in
        :meth:`issue`), rounded in place; between its ``wait_group`` (they have landed, visible to it) and
        the barrier that publishes the stage (no other thread touches them: no barrier of its own).  A
        chunk of a tile not copied (past the last) holds an older tile's or zeros: its fragments are not used."""
        if self.cfg.round_in_smem != 2:
            return
        c = self.cfg
        a_passes, b_passes = c.bm * self.WA // self.T, c.bk * self.WB // self.T
        # rounding 1: cvt.rna's add without its mask of the low bits (the tensor cores ignore them; ptxas drops
        # that LOP3 itself where cvt.rna feeds an mma, and it cost a third instruction a value here)
        r = "rna_finite" if c.rounding == 1 else "rna_add"
        chunks = [("sa0", p * self.RA * self.ROWA) if self.same_a else (f"sa{p}", 0) for p in range(a_passes)]
        chunks += [("sb0", self.A_STAGE + p * self.RB * self.ROWB) if self.same_b else (f"sb{p}", self.A_STAGE)
                   for p in range(b_passes)]
        for dst, off in chunks:
            o = stage * self.STAGE + off
            s.line(f"u0, u1, u2, u3 = lds128({dst}, {o})",
                   f"sts128({dst}, {o}, {r}(u0), {r}(u1), {r}(u2), {r}(u3))")

    def mma(self, s, buf: int, bbuf: int | None = None):
        bbuf = buf if bbuf is None else bbuf
        for mi in range(self.MI):
            for ni in range(self.NI):
                acc = ", ".join(f"c{mi}_{ni}_{r}" for r in range(4))
                s.line(f"{acc} = {self.MMA}(" + ", ".join(f"a{buf}_{mi}_{r}" for r in range(4)) + ", "
                       + ", ".join(f"b{bbuf}_{ni}_{r}" for r in range(2)) + f", {acc})")

    def fragments(self, s, st: int, kk: int):
        """The fragment loads at k-slice ``kk`` of stage ``st`` (``st`` -1: the prologue, before slice 0): each
        operand's slice ``kk + d`` (``d`` its distance, ``frag``), from the next stage after the barrier at the
        tile's last slice (its first ``d`` slices), none past the tile before that.  Slice j of a trip goes to
        register set j mod (d + 1); the earlier slice first, A before B."""
        S, KS = self.cfg.stages, self.KS
        loads = []
        for op, d in (("a", self.da), ("b", self.db)):
            if kk == KS - 1 or st < 0:
                nst = (st + 1) % S
                loads += [(j, op, nst, ((st + 1) * KS + j) % (d + 1)) for j in range(d)]
            elif kk + d < KS:
                loads.append((kk + d, op, st, (st * KS + kk + d) % (d + 1)))
        for j, op, stage, buf in sorted(loads):
            (self.load_a if op == "a" else self.load_b)(s, stage, j, buf)

    # ---- the kernel ----
    def passes(self, rows_per_pass: int, count: int, f) -> bool:
        """Whether the swizzle of a thread's row is the same in every copy pass (one base register)."""
        return all(f(r0 + p * rows_per_pass) == f(r0) for r0 in range(64) for p in range(count))

    def issue(self, s, stage: int):
        if self.cfg.guards > 1:
            return self.issue_hoisted(s, stage)
        c, es = self.cfg, self.cfg.ES
        a_passes, b_passes = c.bm * self.WA // self.T, c.bk * self.WB // self.T
        with s.block("if ia < n_tiles:"):
            s.line(f"ka = I64(ia * I64({c.bk}) + I64(a_c * U({c.vec}))); a_kok = ka < lda",
                   f"kb = I64(ia * I64({c.bk}) + I64(b_r))")
            for p in range(a_passes):
                dst, off = (("sa0", p * self.RA * self.ROWA) if self.same_a else (f"sa{p}", 0))
                s.line(f"ok = a_kok & a_rok{p}",
                       f"cp_async16({dst}, {stage * self.STAGE + off}, GA(pa + GA({p * self.RA}) * ldab) if ok else a0p, "
                       "U(16) if ok else U(0))")
            for p in range(b_passes):
                dst, off = (("sb0", p * self.RB * self.ROWB) if self.same_b else (f"sb{p}", 0))
                s.line(f"ok = b_nok & (I64(kb + I64({p * self.RB})) < k_len)",
                       f"cp_async16({dst}, {stage * self.STAGE + self.A_STAGE + off}, "
                       f"GA(pb + GA({p * self.RB}) * ldbb) if ok else b0p, U(16) if ok else U(0))")
            s.line(f"pa = GA(pa + GA({c.bk * es})); pb = GA(pb + GA({c.bk}) * ldbb); ia = I64(ia + I64(1))")
        s.line("commit_group()")

    def setup_hoisted(self, s):
        """``guards`` 2, 3: the guards' per-thread parts, once, as int32.  ``a_left``: rows of C left from
        this thread's first A row (pass p copies a row inside C iff p·RA < a_left), clamped to [0, BM];
        ``a_kl``, ``b_kl``: k left to this thread's A chunk and B row, counted down by BK a tile (B's
        0 when its columns lie past C's); exact while K < GUARDS_MAX_K (the launcher's rule)."""
        c = self.cfg
        s.line(f"a_left = I32(min(max(I64(m - I64(row0 + I64(a_r))), I64(0)), I64({c.bm})))",
               f"a_kl = I32(min(I64(lda - I64(a_c * U({c.vec}))), I64(GUARDS_MAX_K)))",
               f"b_kl = I32(min(I64(k_len - I64(b_r)), I64(GUARDS_MAX_K))) if b_nok else I32(0)")

    def issue_hoisted(self, s, stage: int):
        """:meth:`issue` with the guards hoisted (``guards`` 2, 3): once a tile, A's rows left (0 from A's
        k end on) and B's k rows left (0 past B's columns) as int32; a copy's guard is one compare of
        that with its pass's immediate."""
        c, es = self.cfg, self.cfg.ES
        a_passes, b_passes = c.bm * self.WA // self.T, c.bk * self.WB // self.T
        with s.block("if ia < n_tiles:"):
            # a_left is carried (0 from A's k end on), not recomputed: with it constant, ptxas rematerialised
            # it from threadIdx and m every tile (~14 instructions) rather than keep the register
            s.line("a_left = a_left if a_kl > I32(0) else I32(0)",
                   f"b_on = min(b_kl, I32({c.bk}))",
                   f"a_kl = I32(a_kl - I32({c.bk})); b_kl = I32(b_kl - I32({c.bk}))")
            for p in range(a_passes):
                dst, off = (("sa0", p * self.RA * self.ROWA) if self.same_a else (f"sa{p}", 0))
                src = f"GA(pa + GA({p * self.RA}) * ldab)"
                src = src if c.guards == 3 else f"{src} if ok else a0p"
                s.line(f"ok = I32({p * self.RA}) < a_left",
                       f"cp_async16({dst}, {stage * self.STAGE + off}, {src}, U(16) if ok else U(0))")
            for p in range(b_passes):
                dst, off = (("sb0", p * self.RB * self.ROWB) if self.same_b else (f"sb{p}", 0))
                src = f"GA(pb + GA({p * self.RB}) * ldbb)"
                src = src if c.guards == 3 else f"{src} if ok else b0p"
                s.line(f"ok = I32({p * self.RB}) < b_on",
                       f"cp_async16({dst}, {stage * self.STAGE + self.A_STAGE + off}, {src}, U(16) if ok else U(0))")
            s.line(f"pa = GA(pa + GA({c.bk * es})); pb = GA(pb + GA({c.bk}) * ldbb); ia = I64(ia + I64(1))")
        s.line("commit_group()")

    def generate(self, name: str) -> tuple[str, str]:
        c, es, S = self.cfg, self.cfg.ES, self.cfg.stages
        a_passes, b_passes = c.bm * self.WA // self.T, c.bk * self.WB // self.T
        self.same_a = self.passes(self.RA, a_passes, self.f_a_py)
        self.same_b = self.passes(self.RB, b_passes, self.f_b_py)
        s = codegen.Source()
        z = c.batched == 2
        with s.block(f"def {name}(a, b, c, m, k_len, lda, ldb, sa, sb):" if z else f"def {name}(a, b, c):"):
            s.line("tid = U(cuda.threadIdx.x); warp = U(tid >> U(5)); lane = U(tid & U(31))",
                   "g = U(lane >> U(2)); t4 = U(lane & U(3)); j8 = U(lane >> U(3)); r8 = U(lane & U(7))",
                   f"wm0 = U(U(warp // U({c.bn // c.wn})) * U({c.wm})); wn0 = U(U(warp % U({c.bn // c.wn})) * U({c.wn}))",
                   *(("# the batched form: block z's product (m, k_len, lda, ldb: arguments; a, b flat storage)",
                      "n = I64(c.shape[1]); bz = I64(cuda.blockIdx.z); cz = I64(bz * m)") if z else
                     ("m = I64(c.shape[0]); n = I64(c.shape[1]); k_len = I64(b.shape[0])",
                      "lda = I64(a.shape[1]); ldb = I64(b.shape[1])")),
                   f"ldab = GA(GA(lda) * GA({es})); ldbb = GA(GA(ldb) * GA({es}))",
                   "# block tiles in groups of `group` rows of tiles: neighbours share B's columns in L2",
                   f"gm = I64(I64(m + I64({c.bm - 1})) // I64({c.bm})); gn = I64(I64(n + I64({c.bn - 1})) // I64({c.bn}))",
                   f"pid = I64(cuda.blockIdx.x); width = I64(I64({c.group}) * gn); first = I64(I64(pid // width) * I64({c.group}))",
                   f"gsz = I64(gm - first)")
            with s.block(f"if gsz > I64({c.group}):"):
                s.line(f"gsz = I64({c.group})")
            s.line("pm = I64(first + I64(pid % width) % gsz); pn = I64(I64(pid % width) // gsz)",
                   f"row0 = I64(pm * I64({c.bm})); col0 = I64(pn * I64({c.bn}))",
                   f"n_tiles = I64(I64(k_len + I64({c.bk - 1})) // I64({c.bk}))",
                   "sm = cuda.shared.array(0, U8)", "s0 = smem_base(sm)",
                   "a0p = gaddr(a, I64(bz * sa)); b0p = gaddr(b, I64(bz * sb))" if z else "a0p = gaddr(a, 0); b0p = gaddr(b, 0)",
                   f"a_r = U(tid // U({self.WA})); a_c = U(tid % U({self.WA}))",
                   f"b_r = U(tid // U({self.WB})); b_c = U(tid % U({self.WB}))")
            for p in range(a_passes):
                r = f"U(a_r + U({p * self.RA}))"
                if p == 0 or not self.same_a:
                    s.line(f"sa{p} = SA(s0 + SA(U({r} * U({self.ROWA})) + U(U(a_c ^ {self.f_a(r)}) * U(16))))")
                if c.guards == 1:
                    s.line(f"a_rok{p} = I64(row0 + I64({r})) < m")
            for p in range(b_passes):
                r = f"U(b_r + U({p * self.RB}))"
                if p == 0 or not self.same_b:
                    s.line(f"sb{p} = SA(s0 + SA(U({r} * U({self.ROWB})) + U(U(b_c ^ {self.f_b(r)}) * U(16))))")
            s.line(f"b_nok = I64(col0 + I64(b_c * U({c.vec}))) < ldb",
                   f"pa = GA(a0p + GA(I64(row0 + I64(a_r))) * ldab + GA(a_c * U(16)))",
                   f"pb = GA(b0p + GA(b_r) * ldbb + GA(I64(col0 + I64(b_c * U({c.vec})))) * GA({es}))",
                   "ia = I64(0)")
            if c.guards > 1:
                self.setup_hoisted(s)
            self.setup(s)
            for mi in range(self.MI):
                for ni in range(self.NI):
                    s.line("; ".join(f"c{mi}_{ni}_{r} = F32(0)" for r in range(4)))
            s.line("# the last tile prefetches fragments of the next stage (unused): with fewer tiles than",
                   "# stages that stage is never copied to, so zero every stage first (zero-fill copies)")
            with s.block(f"if n_tiles < I64({S}):"):
                s.line("zi = U(tid)")
                with s.block(f"while zi < U({S * self.STAGE // 16}):"):
                    s.line("cp_async16(SA(s0 + SA(zi * U(16))), 0, a0p, U(0))", f"zi = U(zi + U({self.T}))")
                s.line("commit_group()", "wait_group(0)", "cuda.syncthreads()")
            s.line(f"# --- prologue: tiles 0..{S - 2} in flight ---")
            for st in range(S - 1):
                self.issue(s, st)
            s.line(f"wait_group({S - 2})")
            self.round_stage(s, 0)
            s.line("cuda.syncthreads()")
            self.fragments(s, -1, 0)
            s.line("t = I64(0)")
            s.line(f"# --- main loop, unrolled x{S}: stage s of tile t is a constant ---")
            with s.block("while t < n_tiles:"):
                for st in range(S):
                    for kk in range(self.KS):
                        step = st * self.KS + kk
                        if kk == self.KS - 1:
                            s.line(f"wait_group({S - 2})  # the next tile has landed (this thread's copies) ...")
                            self.round_stage(s, (st + 1) % S)
                            s.line("cuda.syncthreads()  # ... everyone's; and this stage is free to refill")
                        self.fragments(s, st, kk)
                        # frag 2, 3: the copies after the slice's mma in the source (ptxas then keeps fewer registers)
                        if kk == 0 and self.cfg.frag == 1:
                            self.issue(s, (st + S - 1) % S)
                        self.mma(s, step % (self.da + 1), step % (self.db + 1))
                        if kk == 0 and self.cfg.frag > 1:
                            self.issue(s, (st + S - 1) % S)
                    s.line("t = I64(t + I64(1))")
                    if st < S - 1:
                        with s.block("if t >= n_tiles:"):
                            s.line("break")
            s.line("wait_group(0)")
            self.epilogue(s)
        return s.text()

    def store(self, value: str) -> str:
        return value

    def epilogue(self, s):
        s.line("er = I64(row0 + I64(wm0 + g)); ec = I64(col0 + I64(wn0 + U(t4 * U(2))))")
        z = self.cfg.batched == 2
        cr = "cr" if z else "rr"  # C's row: the batched form's rows of block z start at z·M
        for mi in range(self.MI):
            for h in range(2):
                s.line(f"rr = I64(er + I64({mi * 16 + 8 * h}))")
                with s.block("if rr < m:"):
                    if z:
                        s.line("cr = I64(cz + rr)")
                    for ni in range(self.NI):
                        s.line(f"cc = I64(ec + I64({ni * 8}))")
                        with s.block("if cc < n:"):
                            s.line(f"c[{cr}, cc] = {self.store(f'c{mi}_{ni}_{2 * h}')}")
                        with s.block("if I64(cc + I64(1)) < n:"):
                            s.line(f"c[{cr}, I64(cc + I64(1))] = {self.store(f'c{mi}_{ni}_{2 * h + 1}')}")


HEADER = ("from numba import cuda, float32 as F32, uint32 as U, uint8 as U8, int64 as I64\n"
          "from simt_tiles.mma import SA, GA, smem_base, gaddr, cp_async16, commit_group, wait_group, lds32, "
          "ldsm_x4, ldsm_x4_t, mma_tf32, mma_bf16, mma_f16, cvt_tf32, as_f32, rna_add, f32_to_bf16, f32_to_f16\n")


#: ``guards`` 2, 3 count k in int32: K below this (a launch with a larger K takes ``guards`` 1)
GUARDS_MAX_K = 2**30


def kernel_name(cfg: Config, precision: str) -> str:
    return (f"matmul_mma_{precision}_{cfg.bm}x{cfg.bn}x{cfg.bk}_w{cfg.wm}x{cfg.wn}_s{cfg.stages}"
            f"_g{cfg.group}_lb{cfg.min_blocks}_r{cfg.rounding}" + (f"_q{cfg.guards}" if cfg.guards > 1 else "")
            + (f"_m{cfg.round_in_smem}" if cfg.round_in_smem > 1 else "") + ("_z" if cfg.batched == 2 else "")
            + (f"_f{cfg.frag}" if cfg.frag > 1 else ""))


def generate(cfg: Config, precision: str = "tf32", pipeline=Pipeline) -> tuple[str, str, str]:
    name = kernel_name(cfg, precision)
    header = HEADER + (f"from numba import int32 as I32\nGUARDS_MAX_K = {GUARDS_MAX_K}\n" if cfg.guards > 1 else "")  # guards 1: the source as before
    header += "from simt_tiles.mma import lds128, sts128, rna_finite\n" if cfg.round_in_smem == 2 else ""  # round_in_smem 1: likewise
    return name, header, pipeline(cfg, precision).generate(name)


def source(config, dtype=None, precision: str = "tf32", **_) -> str:
    name, header, body = generate(config, precision)
    return header + "\n" + body


def make_kernel(config: Config, dtype, pipeline=Pipeline, precision: str = "tf32", batched: int = 1):
    """The kernel of ``config`` (``batched``: the compile-time parameter :meth:`MmaRung.config_params` adds for
    the batched form's signature; the source follows ``config.batched``)."""
    name, header, body = generate(config, precision, pipeline)
    return codegen.load_function(name, body, header)


def geometry(config: Config, m: int, n: int, k: int):
    return (cdiv(m, config.bm) * cdiv(n, config.bn),), config.block()


def signature(dtype, batched: int = 1, **_):
    from numba import float32, void

    return batched_signature(float32) if batched == 2 else void(float32[:, ::1], float32[:, ::1], float32[:, ::1])


def batched_signature(t):
    """The batched form's (``batched`` 2): A and B flat, C (batches·M, N), then m, k_len, lda, ldb, sa, sb."""
    from numba import int64, void

    return void(t[::1], t[::1], t[:, ::1], int64, int64, int64, int64, int64, int64)


def jit_options(config: Config, dtype) -> dict:
    return {"launch_bounds": (config.threads, config.min_blocks), "cache": True}


@jit
def pad_rows(src, dst):
    """dst[:, :w] = src, dst[:, w:] = 0 (rows of dst: a multiple of 16 bytes)."""
    col, r = cuda.grid(2)
    if r < dst.shape[0] and col < dst.shape[1]:
        dst[r, col] = src[r, col] if col < src.shape[1] else 0


@jit
def pad_batch(src, dst):
    """pad_rows per matrix of a batch (grid z: the matrix): dst[z, :, :w] = src[z], dst[z, :, w:] = 0."""
    col, r, z = cuda.grid(3)
    if r < dst.shape[1] and col < dst.shape[2] and z < dst.shape[0]:
        dst[z, r, col] = src[z, r, col] if col < src.shape[2] else 0


@jit
def fill_zero(c):
    col, r = cuda.grid(2)
    if r < c.shape[0] and col < c.shape[1]:
        c[r, col] = 0


def aligned_rows(x, stream, name: str):
    """``x`` itself when its rows are 16-byte multiples and it is aligned, else a zero-padded copy."""
    rows, w = x.shape
    vec = 16 // x.dtype.itemsize
    if w % vec == 0 and aligned(x):
        return x
    wp = cdiv(max(w, 1), vec) * vec
    dst = workspace((rows, wp), x.dtype, stream, f"mma_pad_{name}")
    for r0, r1 in row_pieces(rows):
        pad_rows[(cdiv(wp, 32), cdiv(r1 - r0, 8)), (32, 8), stream](_rows(x, r0, r1), _rows(dst, r0, r1))
    return dst


def batch_operand(x, stride: int, stream, name: str):
    """``(flat, ld, stride)``: ``x`` (count × rows × cols, each matrix's rows C-contiguous, batch stride
    ``stride`` elements; count 1 when it is one matrix for every batch) as the batched kernel reads it:
    its own storage where rows and batch stride are 16-byte multiples and it is aligned, else every
    matrix copied zero-padded (:func:`aligned_rows`' rule, per batch) into one workspace."""
    count, rows, cols = x.shape
    es = x.dtype.itemsize
    vec = 16 // es
    stride = stride if count > 1 else 0
    if cols % vec == 0 and stride % vec == 0 and aligned(x):
        return device_view(x, (max((count - 1) * stride + rows * cols, 1),), (es,)), cols, stride
    wp = cdiv(max(cols, 1), vec) * vec
    dst = workspace((count * rows, wp), x.dtype, stream, f"mma_pad_{name}")
    if stride == rows * cols or count == 1:  # one C-contiguous run of rows: one copy
        src = device_view(x, (count * rows, cols), (cols * es, es))
        for r0, r1 in row_pieces(count * rows):
            pad_rows[(cdiv(wp, 32), cdiv(r1 - r0, 8)), (32, 8), stream](_rows(src, r0, r1), _rows(dst, r0, r1))
    else:  # batches apart by another stride: one launch for up to MAX_GRID_Z matrices (grid z)
        dst3 = dst.reshape(count, rows, wp)
        for z0 in range(0, count, MAX_GRID_Z):
            nz = min(MAX_GRID_Z, count - z0)
            src = device_view(x, (nz, rows, cols), (stride * es, cols * es, es), z0 * stride * es)
            for r0, r1 in row_pieces(rows):
                pad_batch[(cdiv(wp, 32), cdiv(r1 - r0, 8), nz), (32, 8, 1), stream](
                    src[:, r0:r1], dst3[z0:z0 + nz, r0:r1])
    return dst.reshape(count * rows * wp), wp, rows * wp if count > 1 else 0


#: most blocks a grid has along z (CUDA's limit; :mod:`._strided` has its own): a batch past it launches in pieces
MAX_GRID_Z = 65535


def _rows(x, r0: int, r1: int):
    """``x[r0:r1]``, or ``x`` itself when that is all of it (slicing a device array costs µs of host time)."""
    return x if r0 == 0 and r1 == x.shape[0] else x[r0:r1]


def row_pieces(rows: int) -> list:
    """``(r0, r1)`` per launch of :func:`pad_rows` or :func:`fill_zero` (8 rows a block): at most
    ``k11.MAX_GRID_Y`` blocks along CUDA's grid y each (past 524 280 rows, one launch failed)."""
    step = k11.MAX_GRID_Y * 8
    return [(r0, min(rows, r0 + step)) for r0 in range(0, rows, step)]


class MmaRung(Rung):
    """A rung whose kernel takes (A, B, C) with A's and B's rows 16-byte aligned: :meth:`run` pads."""

    def source(self, config, dtype=None, **params) -> str:
        return source(config, dtype, **params)

    def resolve_config(self, config):
        """:meth:`Rung.resolve_config`, and a config of exactly this rung's type: k14's Config subclasses
        k13's, but its 2-byte k-steps would make misaligned copies of float32 rows (a TypeError instead)."""
        resolved = super().resolve_config(config)
        if type(resolved) is not self.config_type:
            raise TypeError(f"config: expected a preset name or a {self.config_type.__module__}."
                            f"{self.config_type.__qualname__} for {self.name}; got {config!r}")
        return resolved

    def run(self, config, call) -> None:
        """``call``: a :class:`~simt_tiles.kernels.matmul._common.Call` (16-bit operands as their uint16
        bits, ``params`` the precision); rows that are not 16-byte multiples copied padded; K = 0: C = 0."""
        (m, k), n = call.a.shape, call.b.shape[1]
        if k == 0:
            for r0, r1 in row_pieces(m):
                fill_zero[(cdiv(n, 32), cdiv(r1 - r0, 8)), (32, 8), call.stream](_rows(call.c, r0, r1))
            return
        if config.batched == 2:  # the batched form asked for (config) on one product: a batch of one
            a3, b3 = (device_view(x, (1,) + x.shape, (0,) + x.strides) for x in (call.a, call.b))
            return self.run_batched(config, a3, 0, b3, 0, call.c, m, n, k, 1, call.stream, call.params)
        a, b = aligned_rows(call.a, call.stream, "a"), aligned_rows(call.b, call.stream, "b")
        if config.guards > 1 and max(k, a.shape[1]) >= GUARDS_MAX_K:  # the int32 k counters' range
            config = dataclasses.replace(config, guards=1)
        grid, block = self.geometry(config, m, n, k)
        self.launch(config, np.float32, grid, block, call.stream, a, b, call.c, params=call.params)

    def config_params(self, config) -> dict:
        """The compile-time parameters ``config`` implies for the factory and signature (the compile gate
        adds them too): the batched form's signature; none for the 2-D kernel (its key as before)."""
        return {"batched": 2} if config.batched == 2 else {}

    def kernel(self, config, dtype, **params):
        return super().kernel(config, dtype, **params, **self.config_params(config))

    def run_batched(self, config, a, sa: int, b, sb: int, c, m: int, n: int, k: int, nb: int, stream,
                    params=None) -> None:
        """``nb`` products C[z] = A[z] @ B[z] in one launch of the batched form (grid z; pieces of
        :data:`MAX_GRID_Z`).  ``a``: (count, M, K) device view, rows C-contiguous, batch stride ``sa``
        elements (count 1 and any ``sa``: one matrix for every batch); ``b`` likewise (K, N); ``c``:
        (nb·M, N) C-contiguous.  Rows not 16-byte multiples are copied padded (:func:`batch_operand`);
        K = 0: C = 0."""
        if not (nb and m and n):
            return
        if k == 0:
            for r0, r1 in row_pieces(nb * m):
                fill_zero[(cdiv(n, 32), cdiv(r1 - r0, 8)), (32, 8), stream](_rows(c, r0, r1))
            return
        fa, lda, sa = batch_operand(a, sa, stream, "a")
        fb, ldb, sb = batch_operand(b, sb, stream, "b")
        config = dataclasses.replace(config, batched=2)
        if config.guards > 1 and max(k, lda) >= GUARDS_MAX_K:  # the int32 k counters' range
            config = dataclasses.replace(config, guards=1)
        (tiles,), block = self.geometry(config, m, n, k)
        for z0 in range(0, nb, MAX_GRID_Z):
            nz = min(MAX_GRID_Z, nb - z0)
            pa = fa if not (z0 and sa) else fa[z0 * sa:]
            pb = fb if not (z0 and sb) else fb[z0 * sb:]
            pc = c if nz == nb else c[z0 * m:(z0 + nz) * m]
            self.launch(config, np.float32, (tiles, 1, nz), block, stream, pa, pb, pc, m, k, lda, ldb, sa, sb,
                        params=params)


RUNG = MmaRung("k13_mma_tf32", Config, PRESETS, make_kernel, geometry, signature, jit_options,
               dynamic_smem=lambda config, dtype: config.dynamic_smem(), gate=Gate(dtypes=("float32",)))
