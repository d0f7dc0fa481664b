"""k05 — 2-D register blocking: each thread computes a TM×TN tile of C as outer products.

What changed versus k04
    Each thread now owns TM rows × TN columns.  Per K step (``kk``) it copies
    TM values of A and TN values of B from shared memory into registers and
    does the TM·TN outer-product multiply-adds from registers: TM + TN shared
    loads for TM·TN FMAs (8×8: 16 loads for 64 FMAs, a quarter of a load per
    FMA; k04: 1.1; k03: 2).  ``acc``, ``a_reg`` and ``b_reg`` are
    ``cuda.local.array`` of constant shape indexed only by unrolled constants,
    so they are registers (the compile gate checks: no stack frame, no
    spills); index arithmetic is unsigned 32-bit, as in k04.

Memory traffic (teaching number)
    BM=BN=128: 64 FMAs per element loaded from global memory (k04 at 64×64:
    32).  Registers per thread: TM·TN accumulators +
    TM + TN operands + addresses ≈ 104 of the 255 allowed, which leaves room
    for two blocks of 256 threads per SM.

Shared-memory banks
    ``b_s[kk, tc·TN + j]``: the TN words of a thread are consecutive, so the
    compiler reads them as two 128-bit loads, but 16 thread columns TN words
    apart share banks (4-way per scalar word in the analyzer).  ``a_s[tr·TM +
    i, kk]`` is read down a *column* of the A tile: TM scalar loads BK words
    apart, and the warp's two values of ``tr`` are 64 words apart, one bank:
    2-way conflicts.  k06 stores A transposed to make those reads wide and
    conflict-free, and meets store conflicts on the way.

Headline (H200, benchmarks/results/ladder_k03_k05_h200.json): 19.9 TFLOP/s at 4096x4096x4096, 0.389× cuBLAS
"""

from __future__ import annotations

from numba import cuda, uint32

from ...runtime import Rung, numba_dtype
from ._blocked import BlockedConfig, geometry, u32
from ._common import signature

Config = BlockedConfig

PRESETS = {"sim": Config(bm=4, bn=8, bk=4, tm=2, tn=2), "default": Config()}


def make_kernel(config: Config, dtype):
    BM, BN, BK, TM, TN = (u32(v) for v in (config.bm, config.bn, config.bk, config.tm, config.tn))
    THREADS, COLS = u32(config.threads), u32(config.bn // config.tn)  # COLS: threads along a row
    A_LOADS, B_LOADS = config.a_loads, config.b_loads
    TMI, TNI, BKI = config.tm, config.tn, config.bk  # plain ints: loop trip counts, unrolled
    SHAPE_A, SHAPE_B = (config.bm, config.bk), (config.bk, config.bn)  # shapes: plain constants
    DT = numba_dtype(dtype)

    def matmul_k05_regblock_2d(a, b, c):
        tid = uint32(cuda.threadIdx.x)
        m, k_len, n = uint32(a.shape[0]), uint32(a.shape[1]), uint32(b.shape[1])
        row0 = uint32(cuda.blockIdx.y) * BM
        col0 = uint32(cuda.blockIdx.x) * BN
        tr = tid // COLS  # this thread's TM×TN sub-tile: rows tr*TM + [0, TM),
        tc = tid % COLS  # columns tc*TN + [0, TN) of the block tile

        a_s = cuda.shared.array(SHAPE_A, DT)
        b_s = cuda.shared.array(SHAPE_B, DT)
        acc = cuda.local.array((TMI, TNI), DT)  # registers: constant shapes, constant indices
        a_reg = cuda.local.array(TMI, DT)
        b_reg = cuda.local.array(TNI, DT)
        for i in range(TMI):
            for j in range(TNI):
                acc[i, j] = DT(0)

        for k0 in range(uint32(0), k_len, BK):
            for p in range(A_LOADS):
                e = tid + uint32(p) * THREADS
                r, q = e // BK, e % BK
                a_s[r, q] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            for p in range(B_LOADS):
                e = tid + uint32(p) * THREADS
                r, q = e // BN, e % BN
                b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW: tiles complete before they are read
            for kk in range(BKI):
                for i in range(TMI):
                    a_reg[i] = a_s[tr * TM + uint32(i), kk]
                for j in range(TNI):
                    b_reg[j] = b_s[kk, tc * TN + uint32(j)]
                for i in range(TMI):  # the outer product, all from registers
                    for j in range(TNI):
                        acc[i, j] += a_reg[i] * b_reg[j]
            cuda.syncthreads()  # WAR: reads done before the next step overwrites the tiles

        for i in range(TMI):
            row = row0 + tr * TM + uint32(i)
            for j in range(TNI):
                col = col0 + tc * TN + uint32(j)
                if row < m and col < n:
                    c[row, col] = acc[i, j]

    return matmul_k05_regblock_2d


RUNG = Rung("k05_regblock_2d", Config, PRESETS, make_kernel, geometry, signature)
