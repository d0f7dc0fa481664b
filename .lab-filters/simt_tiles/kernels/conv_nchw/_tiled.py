"""k02's kernel body (the conv_nchw tiled rung), kept out of the rung file for its length.

The tiles, thread → output mapping, padded shared layouts (``_common.TiledConfig``),
staging offsets computed once, accumulation loop and output stores.  One channel
step (the numbers are k02's header's)::

    (1) global -> shared: CK input patches (padded rows) and the weights, transposed
    (2) barrier (RAW)
    (3) compute the step from shared memory and registers
    (4) barrier (WAR)

k03 (double buffered) writes the same pieces out in its own file, with the loads
of step c+1 issued before step c is computed, so that each rung's kernel reads
whole, top to bottom.

Reading order: the block and thread mapping, the arrays, the staging offsets
computed once, then the channel loop, then the stores of the outputs.
"""

from __future__ import annotations

from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, numba_dtype
from ..matmul._blocked import u32
from ._common import TiledConfig, weight_staging


def make_body(config: TiledConfig, dtype, name: str, *, double_buffer: bool = False):
    """k02's kernel for ``config`` and ``dtype``, named ``name``.  (k03 writes its
    own; ``double_buffer=True`` is refused rather than silently ignored.)"""
    if double_buffer or config.STAGES != 1:
        raise ValueError(f"double_buffer: expected False and a config of 1 shared stage (k02); got "
                         f"double_buffer={double_buffer!r}, {type(config).__qualname__} with "
                         f"STAGES={config.STAGES} (k03_double_buffered has its own kernel)")
    STAGES = 1
    TH, TW, CO, CK = config.tile_h, config.tile_w, config.co, config.ck
    RCO, RP, KH, KW = config.rco, config.rp, config.kh, config.kw
    SH, SW = config.halo()
    _, _, SWP = config.x_shape()  # padded patch row (bank-conflict-free window reads)
    R, COP = config.w_shape()  # R = CK*KH*KW reduction indices per step; padded channel row
    X_SIZE, W_SIZE = CK * SH * SWP, R * COP  # shared arrays are flat: offsets written out
    X_STAGES, W_STAGES = (STAGES, X_SIZE), (STAGES, W_SIZE)  # one stage: row 0 (k03 has two)
    THREADS = config.threads
    X_LOADS = config.x_loads
    ws = weight_staging(config)
    W_LOADS = ws.passes
    WIN = RP + KW - 1  # input values a thread needs per filter row
    ACC_SHAPE = (RCO, RP)
    VEC = RCO % 4 == 0  # the thread's weights start 16-byte aligned: 128-bit reads
    DT = numba_dtype(dtype)
    # Unsigned 32-bit constants: index arithmetic stays unsigned (numba widens
    # uint32 (+) uint32 to uint64; uint32(...) around a sum truncates it back).
    U = u32
    U_TH, U_PG, U_RP, U_RCO4, U_RCO = U(TH), U(config.pixel_groups), U(RP), U(RCO // 4), U(RCO)
    U_SW, U_SH, U_SWP, U_PADW, U_COP = U(SW), U(SH), U(SWP), U(SWP - SW), U(COP)
    U_X_ELEMS, U_R, U_KHW, U_CO, U_TW = U(CK * SH * SW), U(R), U(KH * KW), U(CO), U(TW)
    U_G, U_WT, U_ROW = U(ws.group), U(ws.threads), U(ws.group * CO)
    PER_ROW, STEP_O, U_STEP_K = ws.per_row, ws.step_o, U(ws.step_k)
    W_ROWS = ws.passes // ws.per_row  # groups of k a thread copies per step
    U_KW_COP, U_NEXT_PATCH = U(KW * COP), U((SH - KH) * SWP)
    U_STEP_K_COP = U(ws.step_k * COP)
    FAR = U(2**31)  # added to the offset of a halo element outside the image: never < x's size
    TWO, U_ZERO, U_ONE, U_KH, U_CK = U(2), U(0), U(1), U(KH), U(CK)

    def kernel(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad, kh_unused, kw_unused, has_bias):
        tid = uint32(cuda.threadIdx.x)
        upad = uint32(pad)
        hw = uint32(h * wd)
        k_len = uint32(c_in * KH * KW)  # K: the reduction length, one row of w per output channel

        # this block: output-channel group (fastest), pixel tile, image
        co_groups = uint32((c_out + CO - 1) // CO)
        tiles_w = uint32((ow_n + TW - 1) // TW)
        tiles = uint32(tiles_w * uint32((oh_n + TH - 1) // TH))
        bid = uint32(cuda.blockIdx.x)
        t = uint32(bid // co_groups)
        co0 = uint32(uint32(bid % co_groups) * U_CO)
        n = uint32(t // tiles)
        tile = uint32(t % tiles)
        row0 = uint32(uint32(tile // tiles_w) * U_TH)
        col0 = uint32(uint32(tile % tiles_w) * U_TW)

        # this thread's outputs: tile row r, columns cbase.., output channels wco.. of the block
        pg = uint32(tid % U_PG)
        cog = uint32(tid // U_PG)
        r = uint32(pg % U_TH)
        cbase = uint32(uint32(pg // U_TH) * U_RP)
        if VEC:
            wco = uint32(uint32(cog * U_RCO4) << TWO)  # visibly a multiple of 4: 128-bit reads
        else:
            wco = uint32(cog * U_RCO)

        x_s = cuda.shared.array(X_STAGES, DT, alignment=SMEM_ALIGN)  # all stages in one array: the
        w_s = cuda.shared.array(W_STAGES, DT, alignment=SMEM_ALIGN)  # simulator keys them by line
        acc = cuda.local.array(ACC_SHAPE, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        wr = cuda.local.array(RCO, DT)
        x_off = cuda.local.array(X_LOADS, uint32)
        for i in range(RCO):
            for p in range(RP):
                acc[i, p] = DT(0)

        # Staging offsets that do not change from one channel step to the next,
        # computed once.  Input element e = tid + p*THREADS of the step's patches is
        # channel ck, patch row prow - ck*SH, column e - prow*SW; its offset in x relative
        # to channel c0 is ck*H*W + ir*W + ic, or FAR where (ir, ic) lies in the zero padding
        # (and for the e >= CK*SH*SW of a last, partial pass).
        for p in range(X_LOADS):
            e = uint32(tid + p * THREADS)
            prow = uint32(e // U_SW)  # ck*SH + rr
            ck = uint32(prow // U_SH)
            ip = uint32(row0 + uint32(prow - ck * U_SH))  # row and column in the padded input
            jp = uint32(col0 + uint32(e - prow * U_SW))
            inside = ip >= upad and jp >= upad and uint32(ip - upad) < h and uint32(jp - upad) < wd
            if e < U_X_ELEMS and inside:
                x_off[p] = uint32(ck * hw + uint32(ip - upad) * uint32(wd) + uint32(jp - upad))
            else:
                x_off[p] = FAR
        # Weight element (k, o) of pass p: k = k0 + (p // PER_ROW)*STEP_K,
        # o = o0 + (p % PER_ROW)*STEP_O (see _common.WeightStaging).
        w_active = tid < U_WT
        k0 = uint32(tid % U_G)
        o0 = uint32(uint32(tid // U_G) % U_CO)
        if PER_ROW == 1:
            k0 = uint32(uint32(uint32(tid // U_ROW) * U_G) + k0)
        w_base = uint32(uint32(co0 + o0) * k_len + k0)  # offset of (k0, o0) in w at channel 0
        o_room = uint32(c_out - co0)  # output channels of this block that exist
        x_img = uint32(n * uint32(c_in) * hw)
        x_end = uint32(x_img + uint32(c_in) * hw)  # the image's end: channels >= C_in read 0

        x_thread = uint32(r * U_SWP + cbase)
        n_steps = (c_in + CK - 1) // CK
        for step in range(n_steps):
            c0 = uint32(step * CK)
            # (1) stage CK input patches (zero padding and channel tail applied here) ...
            x_step = uint32(x_img + c0 * hw)
            for p in range(X_LOADS):
                e = uint32(tid + p * THREADS)
                if e < U_X_ELEMS:
                    src = uint32(x_step + x_off[p])
                    v = DT(0)
                    if src < x_end:  # not zero padding, not a channel >= C_in
                        v = x[src]
                    x_s[U_ZERO, uint32(e + uint32(e // U_SW) * U_PADW)] = v  # padded rows
            # ... and the step's weights, transposed: w_s[k*COP + o]
            if w_active:
                kk = k0  # this thread's k in the step, pass by pass
                src = uint32(w_base + c0 * U_KHW)
                for q in range(W_ROWS):
                    if kk < U_R:
                        k_ok = uint32(c0 * U_KHW + kk) < k_len  # channel c0 + kk // (KH*KW) exists
                        dst = uint32(kk * U_COP + o0)
                        for j in range(PER_ROW):  # the output channels of one group of k
                            v = DT(0)
                            if k_ok and uint32(o0 + uint32(j * STEP_O)) < o_room:
                                v = w[uint32(src + uint32(j * STEP_O) * k_len)]
                            w_s[U_ZERO, uint32(dst + uint32(j * STEP_O))] = v
                    kk = uint32(kk + U_STEP_K)
                    src = uint32(src + U_STEP_K)
            # (2) RAW: every thread has stored its share before anyone reads
            cuda.syncthreads()
            # (3) accumulate the step: per filter row one window of inputs, per tap RCO weights
            xa = x_thread  # this thread's window start in x_s, filter row by filter row
            wa = wco  # its weights' row in w_s, tap by tap
            ck = U_ZERO
            while ck < U_CK:  # 32-bit counters: cheaper than range's 64-bit ones
                a = U_ZERO
                while a < U_KH:
                    for q in range(WIN):
                        win[q] = x_s[U_ZERO, xa + uint32(q)]  # no wrap-around: offsets fold into the loads
                    for b in range(KW):
                        for i in range(RCO):  # one address per warp: a broadcast
                            wr[i] = w_s[U_ZERO, wa + uint32(b * COP + i)]
                        for i in range(RCO):
                            for p in range(RP):
                                acc[i, p] += wr[i] * win[p + b]
                    xa = uint32(xa + U_SWP)
                    wa = uint32(wa + U_KW_COP)
                    a = uint32(a + U_ONE)
                xa = uint32(xa + U_NEXT_PATCH)
                ck = uint32(ck + U_ONE)
            # (4) WAR: nobody overwrites the tiles while another thread still reads them
            cuda.syncthreads()

        oh = uint32(row0 + r)
        if oh < oh_n:
            for i in range(RCO):
                co = uint32(co0 + wco + uint32(i))
                if co < c_out:
                    bv = DT(0)
                    if has_bias:
                        bv = bias[co]
                    dst = uint32(uint32(uint32(n * uint32(c_out) + co) * uint32(oh_n) + oh) * uint32(ow_n))
                    for p in range(RP):
                        ow = uint32(col0 + cbase + uint32(p))
                        if ow < ow_n:
                            out[uint32(dst + ow)] = acc[i, p] + bv if has_bias else acc[i, p]

    kernel.__name__ = kernel.__qualname__ = name
    return kernel
