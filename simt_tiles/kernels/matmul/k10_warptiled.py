"""k10 — warp tiling (the top rung): each warp owns a WM×WN tile, its lanes a strided slice of it.

What changed versus k09
    Only which outputs a thread owns; the pipeline, layouts and barrier are
    k09's.  The block is split into warp tiles (2×4 warps of 64×32 by
    default).  Inside a warp's WM×WN tile the 32 lanes form an LM×LN grid
    (8×4 for 64×32 with TM=TN=8) and lane (lm, ln) owns TM/4 × TN/4 groups of
    4×4 outputs spaced LM·4 rows and LN·4 columns apart — rather than k09's
    one contiguous TM×TN block.  It is the warp tiling of SGEMM_CUDA's
    ``10_kernel_warptiling.cuh``, where a lane owns WMITER × WNITER sub-tiles
    spaced WSUBM rows and WSUBN columns apart (here: groups of 4 × 4).

Banks: why it pays
    For each 128-bit shared read a warp touches LN (B) or LM (A) distinct
    16-byte groups — at most 8, 128 bytes, one wavefront — where k09's mapping
    touches 16 groups of B (two wavefronts).  Each warp's footprint in the
    tiles is compact, so its reads stay in a few rows of each bank.

Traffic
    Global loads per block and K step: BM·BK + BK·BN elements, as in k08/k09
    (M·N·K·(1/BM + 1/BN) in all); shared reads per thread and k: TM + TN
    values (4 128-bit loads) for TM·TN multiply-adds.

Hazards: k09's — one barrier per K step covers RAW on the stage just written
    and WAR on the stage just read.

Other tricks, all plain Numba
    * unsigned 32-bit index arithmetic (``_blocked.u32``): no negative-index
      checks, narrower integer ops, and provably consecutive addresses;
    * 16-byte-aligned shared arrays (``runtime.SMEM_ALIGN``) so groups of 4
      floats are read with ``ld.shared.v4.f32``;
    * double buffering, the fully unrolled k-loop, ``launch_bounds=(threads, 2)``
      and the swizzled layout from k09/k08.

Rules: wm·wn = 32·tm·tn (a warp is 32 lanes), tm, tn multiples of 4,
bm % wm == 0, bn % wn == 0, bm % 32 == 0 (the swizzle).

Headline (H200, benchmarks/results/matmul_h200.json): 31.4 TFLOP/s at 4096³, 0.61× cuBLAS
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, Rung, numba_dtype
from ._blocked import BlockedConfig, geometry, u32
from ._common import signature
from ._pipelined import launch_bounds_options


@dataclasses.dataclass(frozen=True)
class Config(BlockedConfig):
    """BM×BN block, BK deep; warps of WM×WN; TM×TN outputs per thread."""

    bm: int = 128
    bn: int = 128
    bk: int = 8
    wm: int = 64
    wn: int = 32
    tm: int = 8
    tn: int = 8
    #: the second launch_bounds number for float32: blocks per SM that ptxas must
    #: leave registers for (float64 always asks for 1)
    min_blocks: int = 2

    def block(self):
        return ((self.bm // self.wm) * (self.bn // self.wn) * 32,)

    def smem_bytes(self, itemsize):
        return 2 * (self.bm * self.bk + self.bk * self.bn) * itemsize

    def rules(self):
        yield ("wm", self.wm * self.wn == 32 * self.tm * self.tn, "wm*wn == 32*tm*tn (32 lanes per warp)")
        yield ("wm", self.bm % self.wm == 0 and self.wm % self.tm == 0, "bm % wm == 0 and wm % tm == 0")
        yield ("wn", self.bn % self.wn == 0 and self.wn % self.tn == 0, "bn % wn == 0 and wn % tn == 0")
        yield ("tm", self.tm % 4 == 0, "tm % 4 == 0 (rows are read in aligned groups of 4)")
        yield ("tn", self.tn % 4 == 0, "tn % 4 == 0 (columns are read in aligned groups of 4)")
        yield ("bm", self.bm % 32 == 0, "bm % 32 == 0 (the swizzle permutes bits 2-4 of the column)")
        t = max(1, (self.bm // self.wm) * (self.bn // self.wn) * 32)
        yield ("bk", (self.bm * self.bk) % t == 0, "bm*bk % threads == 0 (equal A loads per thread)")
        yield ("bn", (self.bk * self.bn) % t == 0, "bk*bn % threads == 0 (equal B loads per thread)")


PRESETS = {
    "sim": Config(bm=32, bn=32, bk=4, wm=32, wn=32, tm=8, tn=4),
    "default": Config(),
}


def jit_options(config: Config, dtype) -> dict:
    return launch_bounds_options(config, dtype, config.min_blocks)


def make_kernel(config: Config, dtype):
    BM, BN, BK = u32(config.bm), u32(config.bn), u32(config.bk)
    BKI, TM, TN = config.bk, config.tm, config.tn
    THREADS = u32(config.threads)
    A_LOADS, B_LOADS = config.a_loads, config.b_loads
    MI, NI = TM // 4, TN // 4  # groups of 4 rows / columns per thread
    # warp w owns a WM×WN tile; its 32 lanes form an LM×LN grid, lane (lm, ln) owning
    # rows lm·4 + mi·(LM·4) + r and columns ln·4 + ni·(LN·4) + c of it (r, c < 4)
    WM, WN = config.wm, config.wn
    LM, LN = WM // TM, WN // TN
    WARPS_N = u32(config.bn // WN)
    WM_U, WN_U, LN_U = u32(WM), u32(WN), u32(LN)
    LM_U = u32(LM)
    M_STRIDE, N_STRIDE = u32(LM * 4), u32(LN * 4)  # between a lane's groups of 4 rows / columns
    SHAPE_A = (2, config.bk, config.bm)  # two stages in one array: the simulator keys
    SHAPE_B = (2, config.bk, config.bn)  # shared arrays by source line
    SEVEN, TWO = u32(7), u32(2)
    KU = 1  # k-steps per iteration of the k loop (see (2))
    DT = numba_dtype(dtype)

    def matmul_k10_warptiled(a, b, c):
        tid = uint32(cuda.threadIdx.x)
        m, k_len = a.shape
        n = b.shape[1]
        row0 = uint32(cuda.blockIdx.y) * BM
        col0 = uint32(cuda.blockIdx.x) * BN
        # the lesson: warp -> its WM×WN tile of the block, lane -> its place in the warp's LM×LN grid
        warp = tid >> uint32(5)
        lane = tid & uint32(31)
        m_base = (warp // WARPS_N) * WM_U + (lane // LN_U) * uint32(4)
        n_base = (warp % WARPS_N) * WN_U + (lane % LN_U) * uint32(4)
        m_grp = m_base >> TWO  # its first group of 4 rows / of 4 columns: the compiler
        n_grp = n_base >> TWO  # then sees 16-byte aligned groups -> 128-bit reads

        a_t = cuda.shared.array(SHAPE_A, DT, alignment=SMEM_ALIGN)
        b_s = cuda.shared.array(SHAPE_B, DT, alignment=SMEM_ALIGN)
        a_pf = cuda.local.array(A_LOADS, DT)  # prefetch registers: the next tile
        b_pf = cuda.local.array(B_LOADS, DT)
        acc = cuda.local.array((TM, TN), DT)
        a_reg = cuda.local.array((KU, TM), DT)  # fragments: KU k-steps of this thread's
        b_reg = cuda.local.array((KU, TN), DT)  # rows of A and columns of B
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)

        n_tiles = (k_len + BKI - 1) // BKI
        for t in range(-1, n_tiles):  # t = -1: the prologue, loads only
            # (1) global loads of tile t+1 into registers; they complete while (2) runs
            if t + 1 < n_tiles:
                k0 = uint32(t + 1) * BK
                for p in range(A_LOADS):
                    e = tid + uint32(p) * THREADS
                    r = e // BK
                    q = e % BK
                    a_pf[p] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
                for p in range(B_LOADS):
                    e = tid + uint32(p) * THREADS
                    r = e // BN
                    q = e % BN
                    b_pf[p] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            # (2) compute tile t from its stage.  Numba has no "#pragma unroll"; written in this
            # form (2-D fragments, two loops over u) LLVM unrolls the k loop fully (1192 SASS
            # instructions, 512 FFMA); as one plain loop over k it does not (704, 64 FFMA).
            if t >= 0:
                s = uint32(t) & uint32(1)
                for k2 in range(BKI // KU):
                    for u in range(KU):  # read the fragments of KU k-steps ...
                        kk = uint32(k2 * KU + u)
                        swz = kk & SEVEN  # k08's swizzle, on groups of 4 columns
                        for mi in range(MI):
                            grp = (m_grp + uint32(mi) * LM_U) ^ swz  # groups LM·4 rows apart
                            for rr in range(4):
                                a_reg[u, mi * 4 + rr] = a_t[s, kk, (grp << TWO) + uint32(rr)]
                        for ni in range(NI):
                            col = (n_grp + uint32(ni) * LN_U) << TWO  # LN·4 columns apart
                            for cc in range(4):
                                b_reg[u, ni * 4 + cc] = b_s[s, kk, col + uint32(cc)]
                    for u in range(KU):  # ... then their TM·TN outer products
                        for i in range(TM):
                            for j in range(TN):
                                acc[i, j] += a_reg[u, i] * b_reg[u, j]
            # (3) registers -> the other stage (A transposed and swizzled, as in k08/k09)
            if t + 1 < n_tiles:
                s_next = uint32(t + 1) & uint32(1)
                for p in range(A_LOADS):
                    e = tid + uint32(p) * THREADS
                    r = e // BK
                    q = e % BK
                    a_t[s_next, q, r ^ ((q & SEVEN) << TWO)] = a_pf[p]
                for p in range(B_LOADS):
                    e = tid + uint32(p) * THREADS
                    b_s[s_next, e // BN, e % BN] = b_pf[p]
            # RAW for stage t+1 (written in (3), read next step) and WAR for stage t
            # (read in (2), overwritten in step t+1's (3), after this barrier).
            cuda.syncthreads()

        for mi in range(MI):
            for rr in range(4):
                row = row0 + m_base + uint32(mi) * M_STRIDE + uint32(rr)
                for ni in range(NI):
                    for cc in range(4):
                        col = col0 + n_base + uint32(ni) * N_STRIDE + uint32(cc)
                        if row < m and col < n:
                            c[row, col] = acc[mi * 4 + rr, ni * 4 + cc]

    return matmul_k10_warptiled


#: what the autotuner times (simt_tiles.autotune): the default and a 128×64 block of 4 warps
TUNING_SPACE = ("default", {"bn": 64, "min_blocks": 4})

RUNG = Rung("k10_warptiled", Config, PRESETS, make_kernel, geometry, signature, jit_options,
            tuning_space=TUNING_SPACE)
