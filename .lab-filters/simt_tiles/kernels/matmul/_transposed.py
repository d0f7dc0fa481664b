"""The kernel body shared by k06 (transposed), k07 (padded) and k08 (swizzled).

It is k05 with one change: the A tile is stored *transposed* in shared memory,
``a_t[k, ·]`` holding column k of the A tile, so the TM values a thread needs
at step ``kk`` are consecutive words and can be read as 128-bit loads.  The
three rungs differ only in *where* logical element (k, m) of that tile lives:
each passes the row width of its shared array and whether column m of row k
is XOR-swizzled to ``m ^ ((k % 8) << 2)`` (a compile-time flag: the branch
not taken is removed by the compiler).  Index arithmetic is unsigned
(see ``_blocked.u32``) so the compiler can merge the consecutive reads.
"""

from __future__ import annotations

from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, numba_dtype
from ._blocked import BlockedConfig, u32


def make_transposed_kernel(config: BlockedConfig, dtype, width: int, swizzle: bool, name: str):
    BM, BN, BK, TM, TN = (u32(v) for v in (config.bm, config.bn, config.bk, config.tm, config.tn))
    THREADS = u32(config.threads)
    A_LOADS, B_LOADS = config.a_loads, config.b_loads
    COLS = u32(config.bn // config.tn)
    TMI, TNI, BKI = config.tm, config.tn, config.bk  # trip counts and steps (plain ints: unrolled)
    SHAPE_A = (config.bk, width)  # plain constants: shapes must not be expressions
    SHAPE_B = (config.bk, config.bn)
    DT = numba_dtype(dtype)
    SWIZZLE = bool(swizzle)
    SEVEN, TWO = u32(7), u32(2)
    GROUPS_OF_4 = config.tm % 4 == 0  # a thread's TM columns split into aligned groups of 4
    TM4 = u32(max(1, config.tm // 4))

    def kernel(a, b, c):
        tid = uint32(cuda.threadIdx.x)
        m, k_len = a.shape
        n = b.shape[1]
        row0 = uint32(cuda.blockIdx.y) * BM
        col0 = uint32(cuda.blockIdx.x) * BN
        tr = tid // COLS
        tc = tid % COLS

        a_t = cuda.shared.array(SHAPE_A, DT, alignment=SMEM_ALIGN)  # a_t[k, col(k, m)] = A[row0 + m, k0 + k]
        b_s = cuda.shared.array(SHAPE_B, DT, alignment=SMEM_ALIGN)
        acc = cuda.local.array((TMI, TNI), DT)
        a_reg = cuda.local.array(TMI, DT)
        b_reg = cuda.local.array(TNI, DT)
        for i in range(TMI):
            for j in range(TNI):
                acc[i, j] = DT(0)

        for k0 in range(0, k_len, BKI):
            k0 = uint32(k0)
            for p in range(A_LOADS):  # global: consecutive threads read consecutive k (coalesced)
                e = tid + uint32(p) * THREADS
                r = e // BK
                q = e % BK
                col = r ^ ((q & SEVEN) << TWO) if SWIZZLE else r
                a_t[q, col] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            for p in range(B_LOADS):
                e = tid + uint32(p) * THREADS
                r = e // BN
                q = e % BN
                b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW: tiles complete before they are read
            for kk in range(BKI):
                kk = uint32(kk)
                swz = (kk & SEVEN) << TWO if SWIZZLE else uint32(0)
                for i in range(TMI):  # TM consecutive words (aligned groups of 4 if swizzled)
                    if GROUPS_OF_4:
                        # m = 4·grp + r with r < 4, and the swizzle only touches grp, so
                        # ((grp ^ s) << 2) + r: the compiler sees 4 consecutive words -> 128-bit load
                        grp = (tr * TM4 + uint32(i // 4)) ^ (swz >> TWO)
                        a_reg[i] = a_t[kk, (grp << TWO) + uint32(i % 4)]
                    else:
                        a_reg[i] = a_t[kk, (tr * TM + uint32(i)) ^ swz]
                for j in range(TNI):
                    b_reg[j] = b_s[kk, tc * TN + uint32(j)]
                for i in range(TMI):
                    for j in range(TNI):
                        acc[i, j] += a_reg[i] * b_reg[j]
            cuda.syncthreads()  # WAR: reads done before the next step overwrites the tiles

        for i in range(TMI):
            row = row0 + tr * TM + uint32(i)
            for j in range(TNI):
                col = col0 + tc * TN + uint32(j)
                if row < m and col < n:
                    c[row, col] = acc[i, j]

    kernel.__name__ = kernel.__qualname__ = name
    return kernel
