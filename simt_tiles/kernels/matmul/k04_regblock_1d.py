"""k04 — 1-D register blocking: each thread computes TM outputs of one column, from registers.

What changed versus k03
    Shared memory serves one wavefront per cycle per SM against four
    warp-wide FMAs.  k03 reads B once per multiply-add (and A as broadcast
    128-bit loads, 2 wavefronts per 4 FMAs): 1.5 wavefronts per FMA, a
    ceiling of 1/6 of the FMA peak.  Here a block computes a BM×BN tile of C
    with BM·BN/TM threads; each thread owns TM consecutive rows of one
    column.  Per K step it loads the B value once into a register and reuses
    it for TM multiply-adds: TM + 1 shared loads for TM FMAs, a ceiling of
    TM/(4·(TM + 1)) ≈ 0.22 of the peak.  Measured against the FFMA peak
    (55.9 TFLOP/s, benchmarks/results/fma_peak_h200.json): k03 0.13, k04 0.18.

Registers, and what the compiler needs to keep them
    ``acc = cuda.local.array(TM)`` has a constant size and is indexed only by
    the constants of unrolled ``range(TM)`` loops, so it becomes TM registers
    (the compile gate checks: no stack frame).  Index arithmetic is unsigned
    32-bit (``_blocked.u32``, the shape cast too): with Numba's signed int64
    indices every access also tests for a negative index, which turned the
    masked loads into one branch each and added 45% more instructions —
    that version measured only 6% over k03 (benchmarks/notes/matmul.md).

Memory traffic (teaching number)
    Global loads per block tile and K step: BM·BK + BK·BN elements for
    BM·BN·BK FMAs — BM=BN=64: 32 FMAs per element loaded (k03 at T=32: 16;
    each A element feeds BN FMAs, each B element BM).  Shared loads per FMA: (TM + 1)/TM ≈ 1.1 (k03: 2).

Shared-memory banks
    ``a_s[tr·TM + i, kk]``: one address per warp (lanes share ``tr`` when BN ≥
    32): a broadcast.  ``b_s[kk, tc]``: consecutive words.  No conflicts.

Headline (H200, benchmarks/results/ladder_k03_k05_h200.json): 9.96 TFLOP/s at 4096x4096x4096, 0.194× cuBLAS
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import Rung, numba_dtype
from ._blocked import BlockedConfig, geometry, u32
from ._common import signature


@dataclasses.dataclass(frozen=True)
class Config(BlockedConfig):
    """BlockedConfig with TN = 1 (one column per thread)."""

    bm: int = 64
    bn: int = 64
    bk: int = 8
    tm: int = 8
    tn: int = 1

    def rules(self):
        yield ("tn", self.tn == 1, "tn == 1 for the 1-D rung (k05 blocks in 2-D)")
        yield from super().rules()


PRESETS = {"sim": Config(bm=8, bn=4, bk=4, tm=2), "default": Config()}


def make_kernel(config: Config, dtype):
    BM, BN, BK, TM = (u32(v) for v in (config.bm, config.bn, config.bk, config.tm))
    THREADS, A_LOADS, B_LOADS = u32(config.threads), config.a_loads, config.b_loads
    TMI, BKI = config.tm, config.bk  # plain ints: loop trip counts, unrolled
    SHAPE_A, SHAPE_B = (config.bm, config.bk), (config.bk, config.bn)  # shapes: plain constants
    DT = numba_dtype(dtype)

    def matmul_k04_regblock_1d(a, b, c):
        tid = uint32(cuda.threadIdx.x)
        m, k_len, n = uint32(a.shape[0]), uint32(a.shape[1]), uint32(b.shape[1])
        row0 = uint32(cuda.blockIdx.y) * BM
        col0 = uint32(cuda.blockIdx.x) * BN
        tr = tid // BN  # this thread owns rows row0 + tr*TM + [0, TM) ...
        tc = tid % BN  # ... of column col0 + tc

        a_s = cuda.shared.array(SHAPE_A, DT)
        b_s = cuda.shared.array(SHAPE_B, DT)
        acc = cuda.local.array(TMI, DT)  # registers: constant size, indexed by unrolled constants
        for i in range(TMI):
            acc[i] = DT(0)

        for k0 in range(uint32(0), k_len, BK):
            for p in range(A_LOADS):  # consecutive threads: consecutive k of one row of A
                e = tid + uint32(p) * THREADS
                r, q = e // BK, e % BK
                a_s[r, q] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            for p in range(B_LOADS):  # consecutive threads: consecutive columns of B
                e = tid + uint32(p) * THREADS
                r, q = e // BN, e % BN
                b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW: tiles complete before they are read
            for kk in range(BKI):
                b_val = b_s[kk, tc]  # one shared load, reused TM times from a register
                for i in range(TMI):
                    acc[i] += a_s[tr * TM + uint32(i), kk] * b_val
            cuda.syncthreads()  # WAR: reads done before the next step overwrites the tiles

        col = col0 + tc
        for i in range(TMI):
            row = row0 + tr * TM + uint32(i)
            if row < m and col < n:
                c[row, col] = acc[i]

    return matmul_k04_regblock_1d


RUNG = Rung("k04_regblock_1d", Config, PRESETS, make_kernel, geometry, signature)
