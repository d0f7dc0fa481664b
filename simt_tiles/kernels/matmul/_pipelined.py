"""The kernel body shared by k09 (double buffered) and k10 (warp tiled).

Both keep k08's shared-memory layout (A transposed and XOR-swizzled, B as is,
both 16-byte aligned so reads are 128-bit) and add a two-stage pipeline:

    prologue:  global → registers → shared stage 0;  barrier
    step t:    issue the global loads of tile t+1 into registers   (in flight ...)
               compute tile t from shared stage t % 2                (... while this runs)
               store the registers into shared stage (t+1) % 2
               barrier                                               (one per step)

One barrier per step is enough: at step t threads read stage t % 2 and write
stage (t+1) % 2, which nobody reads until after the barrier that ends step t;
and the stage they write was last read in step t−1, which ended in a barrier.

The two rungs differ only in which outputs a thread owns.  A thread's rows are
``m_base + mi·M_STRIDE + r`` (mi < TM/4, r < 4) and its columns
``n_base + ni·N_STRIDE + c`` (ni < TN/4, c < 4): aligned groups of 4, read from
shared memory with one 128-bit load each.  ``warp_tiled`` picks the mapping.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, numba_dtype
from ._blocked import BlockedConfig, u32


def launch_bounds_options(config: BlockedConfig, dtype, min_blocks: int = 2) -> dict:
    """``launch_bounds=(threads, blocks)``: ptxas keeps registers low enough for
    ``min_blocks`` blocks per SM (65536 / (threads · blocks) each: 128 at 256
    threads and 2 blocks).  Without it the fully unrolled k-loop of these
    kernels takes ~145 registers and only one block fits.  float64 needs twice
    the accumulator registers, so it asks for one block."""
    blocks = min_blocks if np.dtype(dtype).itemsize == 4 else 1
    return {"launch_bounds": (config.threads, blocks)}


def make_pipelined_kernel(config: BlockedConfig, dtype, name: str, *, warp_tiled: bool, k_unroll: int = 1):
    BM, BN, BK = u32(config.bm), u32(config.bn), u32(config.bk)
    THREADS = u32(config.threads)
    A_LOADS, B_LOADS = config.a_loads, config.b_loads
    BKI = config.bk
    MI, NI = config.tm // 4, config.tn // 4  # groups of 4 rows / columns per thread
    SHAPE_A = (2, config.bk, config.bm)  # two stages in one array: the simulator keys
    SHAPE_B = (2, config.bk, config.bn)  # shared arrays by source line
    SHAPE_ACC = (config.tm, config.tn)
    KU = k_unroll if config.bk % k_unroll == 0 else 1  # k-steps unrolled per loop iteration
    SHAPE_AREG, SHAPE_BREG = (KU, config.tm), (KU, config.tn)
    TM, TN = config.tm, config.tn
    SEVEN, TWO = u32(7), u32(2)
    WARP_TILED = bool(warp_tiled)
    DT = numba_dtype(dtype)
    if warp_tiled:
        # warp w owns a WM×WN tile; its 32 lanes form a LM×LN grid, lane (lm, ln)
        # owning rows lm·4 + mi·(LM·4) + r and columns ln·4 + ni·(LN·4) + c of it.
        WM, WN = config.wm, config.wn
        LM, LN = WM // TM, WN // TN
        WARPS_N = u32(config.bn // WN)
        WM_U, WN_U, LN_U = u32(WM), u32(WN), u32(LN)
        M_STRIDE, N_STRIDE = u32(LM * 4), u32(LN * 4)
        COLS = TM_U = TN_U = u32(1)  # unused here (the kernel's other branch is removed)
    else:
        # thread (tr, tc) of a (BM/TM)×(BN/TN) grid owns TM consecutive rows, TN columns
        COLS = u32(config.bn // config.tn)
        TM_U, TN_U = u32(TM), u32(TN)
        M_STRIDE, N_STRIDE = u32(4), u32(4)
        WARPS_N = WM_U = WN_U = LN_U = u32(1)  # unused here
    M_STRIDE4, N_STRIDE4 = M_STRIDE >> 2, N_STRIDE >> 2

    def kernel(a, b, c):
        tid = uint32(cuda.threadIdx.x)
        m, k_len = a.shape
        n = b.shape[1]
        row0 = uint32(cuda.blockIdx.y) * BM
        col0 = uint32(cuda.blockIdx.x) * BN
        if WARP_TILED:
            warp = tid >> uint32(5)
            lane = tid & uint32(31)
            m_base = (warp // WARPS_N) * WM_U + (lane // LN_U) * uint32(4)
            n_base = (warp % WARPS_N) * WN_U + (lane % LN_U) * uint32(4)
        else:
            m_base = (tid // COLS) * TM_U
            n_base = (tid % COLS) * TN_U

        m_grp = m_base >> TWO  # this thread's first group of 4 rows / of 4 columns: the
        n_grp = n_base >> TWO  # compiler then sees 16-byte aligned groups -> 128-bit reads

        a_t = cuda.shared.array(SHAPE_A, DT, alignment=SMEM_ALIGN)
        b_s = cuda.shared.array(SHAPE_B, DT, alignment=SMEM_ALIGN)
        a_pf = cuda.local.array(A_LOADS, DT)  # prefetch registers: the next tile
        b_pf = cuda.local.array(B_LOADS, DT)
        acc = cuda.local.array(SHAPE_ACC, DT)
        a_reg = cuda.local.array(SHAPE_AREG, DT)
        b_reg = cuda.local.array(SHAPE_BREG, DT)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)

        n_tiles = (k_len + BKI - 1) // BKI
        for t in range(-1, n_tiles):
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
            # (2) compute tile t from its shared stage
            if t >= 0:
                s = uint32(t) & uint32(1)
                for k2 in range(BKI // KU):  # KU k-steps per iteration: Numba has no
                    for u in range(KU):  # "#pragma unroll", so unroll by hand (KU small)
                        kk = uint32(k2 * KU + u)
                        swz = kk & SEVEN  # k08's swizzle, on groups of 4 columns
                        for mi in range(MI):
                            grp = (m_grp + uint32(mi) * M_STRIDE4) ^ swz
                            for rr in range(4):
                                a_reg[u, mi * 4 + rr] = a_t[s, kk, (grp << TWO) + uint32(rr)]
                        for ni in range(NI):
                            col = (n_grp + uint32(ni) * N_STRIDE4) << TWO
                            for cc in range(4):
                                b_reg[u, ni * 4 + cc] = b_s[s, kk, col + uint32(cc)]
                    for u in range(KU):
                        for i in range(TM):
                            for j in range(TN):
                                acc[i, j] += a_reg[u, i] * b_reg[u, j]
            # (3) registers → the other shared stage, then the step's single barrier
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
            # RAW for stage t+1 (written above, read next step) and WAR for stage t
            # (read above, overwritten in step t+1's (3)... after this barrier).
            cuda.syncthreads()

        for mi in range(MI):
            for rr in range(4):
                row = row0 + m_base + uint32(mi) * M_STRIDE + uint32(rr)
                for ni in range(NI):
                    for cc in range(4):
                        col = col0 + n_base + uint32(ni) * N_STRIDE + uint32(cc)
                        if row < m and col < n:
                            c[row, col] = acc[mi * 4 + rr, ni * 4 + cc]

    kernel.__name__ = kernel.__qualname__ = name
    return kernel
