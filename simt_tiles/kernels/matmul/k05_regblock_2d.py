"""k05 — 2-D register blocking: each thread computes a TM×TN tile of C as outer products.

What changed versus k04
    Each thread now owns TM rows × TN columns.  Per K step (``kk``) it copies
    TM values of A and TN values of B from shared memory into registers and
    does the TM·TN outer-product multiply-adds from registers: TM + TN shared
    loads for TM·TN FMAs (8×8: 16 loads for 64 FMAs, a quarter of a load per
    FMA; k04: 1.1; k03: 2).  ``acc``, ``a_reg`` and ``b_reg`` are
    ``cuda.local.array`` indexed only by unrolled compile-time constants, so
    they are registers (the compile gate checks: no stack frame, no spills).

Memory traffic (teaching number)
    BM=BN=128: every element loaded from global memory is used 64 times per
    block (k04 at 64×64: 32).  Registers per thread: TM·TN accumulators +
    TM + TN operands ≈ 80 of the 255 allowed.

Shared-memory banks
    ``b_s[kk, tc·TN + j]``: 16 distinct thread columns × TN words, no conflict
    beyond the minimum wavefronts.  ``a_s[tr·TM + i, kk]`` is read down a
    *column* of the A tile: each thread's TM values are BK words apart, so
    they cannot be fetched as one wide load — k06 stores A transposed to fix
    that, and meets bank conflicts on the way.

Headline (H200, benchmarks/results/matmul_h200.json): 7.3 TFLOP/s at 4096³, 0.14× cuBLAS
"""

from __future__ import annotations

from numba import cuda

from ...runtime import Rung, numba_dtype
from ._blocked import BlockedConfig, geometry
from ._common import signature

Config = BlockedConfig

PRESETS = {"sim": Config(bm=4, bn=8, bk=4, tm=2, tn=2), "default": Config()}


def make_kernel(config: Config, dtype):
    BM, BN, BK, TM, TN = config.bm, config.bn, config.bk, config.tm, config.tn
    THREADS, A_LOADS, B_LOADS = config.threads, config.a_loads, config.b_loads
    COLS = BN // TN  # threads along a row of the block tile
    DT = numba_dtype(dtype)

    def matmul_k05_regblock_2d(a, b, c):
        tid = cuda.threadIdx.x
        m, k_len = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        tr = tid // COLS  # this thread's TM×TN sub-tile: rows tr*TM + [0, TM),
        tc = tid % COLS  # columns tc*TN + [0, TN) of the block tile

        a_s = cuda.shared.array((BM, BK), DT)
        b_s = cuda.shared.array((BK, BN), DT)
        acc = cuda.local.array((TM, TN), DT)
        a_reg = cuda.local.array(TM, DT)
        b_reg = cuda.local.array(TN, DT)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)

        for k0 in range(0, k_len, BK):
            for p in range(A_LOADS):
                e = tid + p * THREADS
                r = e // BK
                q = e % BK
                a_s[r, q] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            for p in range(B_LOADS):
                e = tid + p * THREADS
                r = e // BN
                q = e % BN
                b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW: tiles complete before they are read
            for kk in range(BK):
                for i in range(TM):
                    a_reg[i] = a_s[tr * TM + i, kk]
                for j in range(TN):
                    b_reg[j] = b_s[kk, tc * TN + j]
                for i in range(TM):  # the outer product, all from registers
                    for j in range(TN):
                        acc[i, j] += a_reg[i] * b_reg[j]
            cuda.syncthreads()  # WAR: reads done before the next step overwrites the tiles

        for i in range(TM):
            row = row0 + tr * TM + i
            for j in range(TN):
                col = col0 + tc * TN + j
                if row < m and col < n:
                    c[row, col] = acc[i, j]

    return matmul_k05_regblock_2d


RUNG = Rung("k05_regblock_2d", Config, PRESETS, make_kernel, geometry, signature)
