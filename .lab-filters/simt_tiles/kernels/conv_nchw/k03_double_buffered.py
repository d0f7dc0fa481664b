"""k03 — double buffering: the loads of channel step c+1 are in flight while step c is computed.

What changed versus k02
    Same tiles, thread mapping, padded shared layouts and staging offsets
    (``_common.TiledConfig``), but shared memory holds two stages of the input
    patches and the weights (one ``(2, size)`` array each: the simulator keys
    shared arrays by source line).  Each channel step is the classic SIMT
    software pipeline (the matmul ladder's k09)::

        prologue (step −1): (1) only
        (1) issue the global loads of step c+1 into registers   (in flight ...)
        (2) compute step c from shared stage c % 2                (... while this runs)
        (3) store the registers into shared stage (c+1) % 2
        barrier                                                   (one per step)

    In k02 every channel step starts with loads that the whole block then waits
    for at a barrier (~600–1000 cycles of L2/HBM latency); here they overlap
    the previous step's multiply-adds.  It pays most where few blocks share an
    SM and nothing else would fill the wait.

Hazards: one barrier per step instead of k02's two
    In step c threads read stage c % 2 and write stage (c+1) % 2, which nobody
    reads before the barrier that ends step c (RAW); the stage they write was
    last read in step c−1, which ended in a barrier (WAR).

Traffic and banks
    As k02 per channel (88 FMAs per global load, 11 per shared-load
    instruction with the default tiles and a 3 × 3 filter): double buffering
    moves no fewer bytes, it hides their latency.  Banks as k02 (padded rows).

Cost
    X_LOADS + W_LOADS prefetch registers per thread (default, 3 × 3 filter:
    3 + 10).  They stay registers only if LLVM fully unrolls the loops that
    index them, which stops at ~25 elements (7 × 7 with the default tiles: 29,
    in local memory), so ``variant=None`` uses k02 beyond :data:`PREFETCH_MAX`
    (and for long filter rows: :func:`prefetch_stays_in_registers`).
    The default halves CK (2 instead of k02's 4), so shared memory per block
    (13.6 KiB float32) and barriers per input channel stay k02's.

Headline (H200, benchmarks/results/conv_h200.json): 30.1 TFLOP/s on N32 C64 56x56 3x3 p1, 1.12× cuDNN
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, Rung, numba_dtype
from ..matmul._blocked import u32
from ._common import TiledConfig, signature, tiled_geometry, tiled_launch_bounds, weight_staging


@dataclasses.dataclass(frozen=True)
class Config(TiledConfig):
    """k02's tiling (:class:`~simt_tiles.kernels.conv_nchw._common.TiledConfig`), two shared stages."""

    STAGES = 2


# A call replaces kh and kw; the presets' values only choose what the compile gate
# builds (sim: an even filter height).  ck is half of k02's: same shared memory.
PRESETS = {
    "sim": Config(tile_h=2, tile_w=4, co=2, ck=2, rco=2, rp=2, kh=2, kw=3, min_blocks=1),
    "default": Config(tile_h=8, tile_w=14, co=64, ck=2, rco=8, rp=7, kh=3, kw=3, min_blocks=4),
    "small": Config(tile_h=7, tile_w=14, co=32, ck=4, rco=2, rp=7, kh=3, kw=3, min_blocks=2),
}


def make_kernel(config: Config, dtype):
    TH, TW, CO, CK = config.tile_h, config.tile_w, config.co, config.ck
    RCO, RP, KH, KW = config.rco, config.rp, config.kh, config.kw
    SH, SW = config.halo()
    _, _, SWP = config.x_shape()  # padded patch row (bank-conflict-free window reads)
    R, COP = config.w_shape()  # R = CK*KH*KW reduction indices per step; padded channel row
    X_SIZE, W_SIZE = CK * SH * SWP, R * COP  # shared arrays are flat: offsets written out
    X_STAGES, W_STAGES = (2, X_SIZE), (2, W_SIZE)  # two stages in one array each: the simulator
    THREADS = config.threads  # keys shared arrays by source line
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

    def conv_nchw_k03_double_buffered(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad,
                                      kh_unused, kw_unused, has_bias):
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

        x_s = cuda.shared.array(X_STAGES, DT, alignment=SMEM_ALIGN)  # [stage, patch offset]
        w_s = cuda.shared.array(W_STAGES, DT, alignment=SMEM_ALIGN)  # [stage, k*COP + o]
        acc = cuda.local.array(ACC_SHAPE, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        wr = cuda.local.array(RCO, DT)
        x_off = cuda.local.array(X_LOADS, uint32)
        x_pf = cuda.local.array(X_LOADS, DT)  # prefetch registers: the next step's elements
        w_pf = cuda.local.array(W_LOADS, DT)
        for i in range(RCO):
            for p in range(RP):
                acc[i, p] = DT(0)

        # Staging offsets that do not change from one channel step to the next,
        # computed once (as in k02).  Input element e = tid + p*THREADS of the step's
        # patches is channel ck, patch row prow - ck*SH, column e - prow*SW; its offset in
        # x relative to channel c0 is ck*H*W + ir*W + ic, or FAR where (ir, ic) lies in the
        # zero padding (and for the e >= CK*SH*SW of a last, partial pass).
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
        for step in range(-1, n_steps):  # step -1: the prologue, loads only
            nxt = step + 1
            # (1) issue the global loads of step + 1 into registers; they complete while (2) runs
            if nxt < n_steps:
                c0 = uint32(nxt * CK)
                x_step = uint32(x_img + c0 * hw)
                for p in range(X_LOADS):
                    src = uint32(x_step + x_off[p])
                    v = DT(0)
                    if src < x_end:  # not zero padding, not a channel >= C_in
                        v = x[src]
                    x_pf[p] = v
                if w_active:
                    kk = k0
                    src = uint32(w_base + c0 * U_KHW)
                    for q in range(W_ROWS):
                        k_ok = kk < U_R and uint32(c0 * U_KHW + kk) < k_len
                        for j in range(PER_ROW):
                            v = DT(0)
                            if k_ok and uint32(o0 + uint32(j * STEP_O)) < o_room:
                                v = w[uint32(src + uint32(j * STEP_O) * k_len)]
                            w_pf[q * PER_ROW + j] = v
                        kk = uint32(kk + U_STEP_K)
                        src = uint32(src + U_STEP_K)
            # (2) accumulate step `step` from its stage (step -1 has none): per filter row
            # one window of inputs, per tap RCO weights
            if step >= 0:
                stage = uint32(step & 1)
                xa = x_thread  # this thread's window start in x_s, filter row by filter row
                wa = wco  # its weights' row in w_s, tap by tap
                ck = U_ZERO
                while ck < U_CK:  # 32-bit counters: cheaper than range's 64-bit ones
                    a = U_ZERO
                    while a < U_KH:
                        for q in range(WIN):
                            win[q] = x_s[stage, xa + uint32(q)]  # no wrap-around: offsets fold into the loads
                        for b in range(KW):
                            for i in range(RCO):  # one address per warp: a broadcast
                                wr[i] = w_s[stage, wa + uint32(b * COP + i)]
                            for i in range(RCO):
                                for p in range(RP):
                                    acc[i, p] += wr[i] * win[p + b]
                        xa = uint32(xa + U_SWP)
                        wa = uint32(wa + U_KW_COP)
                        a = uint32(a + U_ONE)
                    xa = uint32(xa + U_NEXT_PATCH)
                    ck = uint32(ck + U_ONE)
            # (3) registers -> the other stage: inputs into padded rows, weights transposed
            if nxt < n_steps:
                stage = uint32(nxt & 1)
                for p in range(X_LOADS):
                    e = uint32(tid + p * THREADS)
                    if e < U_X_ELEMS:
                        x_s[stage, uint32(e + uint32(e // U_SW) * U_PADW)] = x_pf[p]
                if w_active:
                    kk = k0
                    dst = uint32(kk * U_COP + o0)
                    for q in range(W_ROWS):
                        if kk < U_R:
                            for j in range(PER_ROW):
                                w_s[stage, dst + uint32(j * STEP_O)] = w_pf[q * PER_ROW + j]
                        kk = uint32(kk + U_STEP_K)
                        dst = uint32(dst + U_STEP_K_COP)
            # RAW for stage (step+1) % 2 (written in (3), read next step) and WAR for
            # stage step % 2 (read in (2), overwritten in the next step's (3)): one barrier.
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

    return conv_nchw_k03_double_buffered


#: prefetch registers (input + weight elements per thread and step) above which
#: ``variant=None`` uses k02 instead: the prefetch arrays stay in registers only if
#: LLVM fully unrolls the loops that index them, and with ~25 elements it stops doing
#: so (ptxas then reports a stack frame: local memory).  An explicit k03 still runs.
PREFETCH_MAX = 24


def prefetch_registers(config: Config) -> int:
    """Elements one thread holds in registers between (1) and (3) of a step."""
    return config.x_loads + config.w_loads


#: multiply-adds a thread unrolls per filter row (KW · RCO · RP) at most beside the prefetch: with
#: the default tiles a 1 × 7 filter (392) left the prefetch and its offsets (14 words) in a 56 B
#: stack frame under CUDA 13.0's compiler (13.5's kept them in registers); 3 × 3 (168) did not
ROW_FMAS_MAX = 168


def prefetch_stays_in_registers(config: Config) -> bool:
    """Whether ``config``'s prefetch stays in registers: at most :data:`PREFETCH_MAX` elements,
    beside at most :data:`ROW_FMAS_MAX` unrolled multiply-adds per filter row."""
    return (prefetch_registers(config) <= PREFETCH_MAX
            and config.kw * config.rco * config.rp <= ROW_FMAS_MAX)


RUNG = Rung("k03_double_buffered", Config, PRESETS, make_kernel, tiled_geometry, signature,
            tiled_launch_bounds)
