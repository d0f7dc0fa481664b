"""k09 — double buffering: load tile t+1 from global memory while computing tile t.

What changed versus k08
    Shared memory holds two stages of each tile (one ``(2, BK, ·)`` array each:
    the simulator keys shared arrays by source line).  Each K step first
    *issues* the global loads of the next tile into registers (1), then
    computes the current tile from shared memory (2) — the loads' latency
    (hundreds of cycles) is covered by BK·TM·TN multiply-adds — then stores
    the registers into the other stage (3)::

        prologue (t = −1):  global → registers → shared stage 0;  barrier
        step t:             (1) global loads of tile t+1 → registers   (in flight ...)
                            (2) compute tile t from stage t % 2         (... while this runs)
                            (3) registers → stage (t+1) % 2;  barrier

    The thread→output mapping and the swizzled A layout are k08's; a thread's
    TM rows and TN columns are read as aligned groups of 4 (128-bit loads).

Hazards: one barrier per step instead of k08's two
    In step t threads read stage t % 2 and write stage (t+1) % 2, which nobody
    reads before the barrier that ends step t (RAW); the stage they write was
    last read in step t−1, which ended in a barrier (WAR).

Traffic and banks
    Global and shared traffic are k08's: double buffering moves no fewer bytes,
    it hides their latency.  Banks as in k08 (swizzled A stores, 128-bit reads).

Cost
    Twice the shared memory (16 KiB at BM=BN=128, BK=8, float32) and
    A_LOADS + B_LOADS prefetch registers per thread.  The k-step loop is fully
    unrolled (84% of the tile loop's SASS is FFMA); that wants ~145 registers,
    so ``launch_bounds=(threads, 2)`` (``_pipelined.py``) caps them at 128 to
    keep two blocks per SM.

Headline (H200, benchmarks/results/matmul_h200.json): 29.3 TFLOP/s at 4096³, 0.57× cuBLAS
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, Rung, numba_dtype
from ._blocked import geometry, u32
from ._common import signature
from ._pipelined import launch_bounds_options
from .k08_swizzled import Config as SwizzledConfig


@dataclasses.dataclass(frozen=True)
class Config(SwizzledConfig):
    """k08's config; TM and TN in groups of 4 (one 128-bit read each); two stages."""

    def smem_bytes(self, itemsize):
        return 2 * super().smem_bytes(itemsize)

    def rules(self):
        yield ("tm", self.tm % 4 == 0, "tm % 4 == 0 (rows are read in aligned groups of 4)")
        yield ("tn", self.tn % 4 == 0, "tn % 4 == 0 (columns are read in aligned groups of 4)")
        yield from super().rules()


PRESETS = {"sim": Config(bm=32, bn=4, bk=4, tm=4, tn=4), "default": Config()}


def make_kernel(config: Config, dtype):
    BM, BN, BK = u32(config.bm), u32(config.bn), u32(config.bk)
    BKI, TM, TN = config.bk, config.tm, config.tn
    THREADS = u32(config.threads)
    A_LOADS, B_LOADS = config.a_loads, config.b_loads
    MI, NI = TM // 4, TN // 4  # groups of 4 rows / columns per thread
    COLS = u32(config.bn // TN)  # threads per row of the (BM/TM)×(BN/TN) thread grid
    TM_U, TN_U = u32(TM), u32(TN)
    SHAPE_A = (2, config.bk, config.bm)  # two stages in one array: the simulator keys
    SHAPE_B = (2, config.bk, config.bn)  # shared arrays by source line
    SEVEN, TWO, FOUR = u32(7), u32(2), u32(4)
    KU = 1  # k-steps per iteration of the k loop (see (2))
    DT = numba_dtype(dtype)

    def matmul_k09_double_buffered(a, b, c):
        tid = uint32(cuda.threadIdx.x)
        m, k_len = a.shape
        n = b.shape[1]
        row0 = uint32(cuda.blockIdx.y) * BM
        col0 = uint32(cuda.blockIdx.x) * BN
        # thread (tid // COLS, tid % COLS) owns TM consecutive rows and TN consecutive columns
        m_base = (tid // COLS) * TM_U
        n_base = (tid % COLS) * TN_U
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
                            grp = (m_grp + uint32(mi)) ^ swz
                            for rr in range(4):
                                a_reg[u, mi * 4 + rr] = a_t[s, kk, (grp << TWO) + uint32(rr)]
                        for ni in range(NI):
                            col = (n_grp + uint32(ni)) << TWO
                            for cc in range(4):
                                b_reg[u, ni * 4 + cc] = b_s[s, kk, col + uint32(cc)]
                    for u in range(KU):  # ... then their TM·TN outer products
                        for i in range(TM):
                            for j in range(TN):
                                acc[i, j] += a_reg[u, i] * b_reg[u, j]
            # (3) registers -> the other stage (A transposed and swizzled, as in k08)
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
                row = row0 + m_base + uint32(mi) * FOUR + uint32(rr)
                for ni in range(NI):
                    for cc in range(4):
                        col = col0 + n_base + uint32(ni) * FOUR + uint32(cc)
                        if row < m and col < n:
                            c[row, col] = acc[mi * 4 + rr, ni * 4 + cc]

    return matmul_k09_double_buffered


RUNG = Rung("k09_double_buffered", Config, PRESETS, make_kernel, geometry, signature, launch_bounds_options)
