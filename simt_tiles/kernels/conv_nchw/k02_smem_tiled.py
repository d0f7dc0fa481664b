"""k02 — shared-memory tiling with register blocking: implicit GEMM in SIMT, one channel step at a time.

What changed versus k01
    A block owns a ``TH × TW`` tile of output pixels of one image for ``CO``
    output channels and walks the input channels ``CK`` at a time.  Per step:

    1. stage the CK input patches — each the tile plus a halo of KH − 1 rows
       and KW − 1 columns, ``(TH + KH − 1) × (TW + KW − 1)`` — and the
       ``CO × CK × KH × KW`` weights in shared memory.  Zero padding is
       applied while loading (a coordinate outside the input stores 0), as
       are the tails: channels ≥ C_in and output channels ≥ C_out store 0.
       Consecutive threads load consecutive columns of an input row
       (coalesced along W); weights are loaded in runs of 4 consecutive
       reduction indices (16 bytes) of 8 output channels per warp and stored
       transposed, ``w_s[k, o]``, so that a thread's channels are adjacent;
    2. barrier (RAW: nobody reads before everything is stored);
    3. accumulate from shared memory and registers;
    4. barrier (WAR: nobody overwrites a tile another thread still reads).

    Each thread owns RCO output channels × RP consecutive pixels of one tile
    row: RCO·RP accumulators.  Per (channel, filter row a) it reads the
    RP + KW − 1 input values its pixels need into a register window ``win``
    once, then for each filter column b reads its RCO weights (adjacent in
    ``w_s``: 128-bit loads when RCO is a multiple of 4, the same address for
    every lane of the warp — a broadcast) and runs RCO × RP multiply-adds
    from registers.  ``acc``, ``win`` and ``wr`` are ``cuda.local.array``s
    indexed only by unrolled constants, so they stay in registers (the compile
    gate checks there is no stack frame).

Memory traffic (teaching number)
    Global loads per block and channel step: CK·(TH + KH − 1)·(TW + KW − 1)
    input values + CO·CK·KH·KW weights for CO·TH·TW·CK·KH·KW multiply-adds.
    Default (TH × TW = 8 × 14, CO = 64, CK = 4), 3 × 3 filter: 640 + 2304 =
    2944 loads for 258 048 FMAs — 88 FMAs per global load (k01: 0.5).
    Shared loads per thread and (channel, filter row): RP + KW − 1 = 9 input
    values and KW·RCO = 24 weights (6 128-bit broadcasts) for KW·RCO·RP = 168
    FMAs: 11 FMAs per shared-load instruction, 5 per value.

Shared-memory banks
    Thread t takes pixel group ``g = t % PG`` (PG = TH·TW/RP) and output
    channel group ``t // PG``; pixel group g is tile row ``g % TH``, columns
    ``(g // TH)·RP …``.  So 8 consecutive lanes read 8 consecutive tile rows
    of one column group, and the patch's rows are padded to a stride of
    4·odd words (``_common.padded_row``): those reads hit distinct banks.  The
    weight rows are padded to 8 (mod 16) words so that the transposed stores
    are conflict-free too (``_common.padded_co``).

Staging cost
    Offsets are unsigned 32-bit (``_common``).  What does not change from one
    channel step to the next is computed once, before the channel loop: the
    offsets of the input elements a thread stages (``x_off``; a position in
    the zero padding gets 2**31, so the one test "offset < end of the image"
    rejects padding and missing channels alike) and of its first weight
    (``_common.WeightStaging``: later passes add constants).  A step's staging
    is then ~8 instructions per element.  SASS of the default preset, 3 × 3,
    float32: ~240 instructions of staging per step against 12 × 190 in the
    FMA loop (one per channel and filter row), 168 of every 190 FFMA.

Why 8 × 14 pixels, 64 channels, 7 pixels per thread (the "default" preset)
    ResNet's spatial sizes are multiples of 7 (56, 28, 14, 7): TW = 14 and
    TH = 8 cover 56 × 56 without idle pixels (14 × 14: 87.5 % of the
    rows).  RCO × RP = 8 × 7 = 56 accumulators per thread, 128 threads, ≤ 128
    registers (launch bounds ask for 4 blocks per SM: 16 warps; ptxas: 111).
    CK = 4: 13.6 KiB of shared memory (float32).  A layer with few output pixels
    (N = 8, C = 256, 14 × 14: 401 k outputs) gives too few such blocks to
    fill 132 SMs; the "small" preset (7 × 14 pixels, 32 channels, 2 × 7
    per thread) makes 4× more threads — ``conv2d_nchw`` picks it when the
    default would not fill the GPU (see ``__init__``).

The filter shape is compiled in: the patch shape, the window length
``RP + KW − 1`` and the unrolled loops need it.  The launcher sets ``kh``/``kw``
from the call (``_common.specialise``); a filter whose staging does not fit in
48 KiB gets a smaller CK (presets only), else k01 (``variant=None``).

Why the weights and not the inputs are the broadcast
    A warp holds pixel groups of at most 2–3 output-channel groups: the weight
    reads are (near-)broadcasts and the input windows are the per-lane reads.
    Per (channel, filter row) a thread reads KW·RCO weights but only RP + KW − 1
    inputs, so the many reads are the cheap ones (broadcast, 128-bit).

Measured (H200, 2026-11-29, `simt-tiles bench conv --only nchw`, float32, cuDNN FP32 with
TF32 off in the same run): N32 C64 56×56 3×3 p1: 0.284 ms = 26.0 TFLOP/s, **0.97× cuDNN**
(26.9); N8 C256 14×14: 0.263 ms = 7.0 TFLOP/s, 0.39× (the "small" tiles give only 128
blocks: too few to fill 132 SMs and hide latency).
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import SMEM_ALIGN, Rung, numba_dtype
from ..matmul._blocked import u32
from ._common import TiledConfig, signature, tiled_geometry, tiled_launch_bounds, weight_staging


@dataclasses.dataclass(frozen=True)
class Config(TiledConfig):
    """See :class:`~simt_tiles.kernels.conv_nchw._common.TiledConfig` (one shared-memory stage)."""


# A call replaces kh and kw; the presets' values only choose what the compile gate
# builds (sim: an even filter width).
PRESETS = {
    "sim": Config(tile_h=2, tile_w=4, co=2, ck=2, rco=2, rp=2, kh=3, kw=2, min_blocks=1),
    "default": Config(tile_h=8, tile_w=14, co=64, ck=4, rco=8, rp=7, kh=3, kw=3, min_blocks=4),
    "small": Config(tile_h=7, tile_w=14, co=32, ck=8, rco=2, rp=7, kh=3, kw=3, min_blocks=2),
}


def make_kernel(config: Config, dtype):
    TH, TW, CO, CK = config.tile_h, config.tile_w, config.co, config.ck
    RCO, RP, KH, KW = config.rco, config.rp, config.kh, config.kw
    SH, SW = config.halo()
    _, _, SWP = config.x_shape()  # padded patch row (bank-conflict-free window reads)
    R, COP = config.w_shape()  # R = CK*KH*KW reduction indices per step; padded channel row
    X_SIZE, W_SIZE = CK * SH * SWP, R * COP  # shared arrays are flat: offsets written out
    THREADS = config.threads
    X_LOADS = config.x_loads
    ws = weight_staging(config)
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
    FAR = U(2**31)  # added to the offset of a halo element outside the image: never < x's size
    TWO, U_ZERO, U_ONE, U_KH, U_CK = U(2), U(0), U(1), U(KH), U(CK)

    def conv_nchw_k02_smem_tiled(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad,
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

        x_s = cuda.shared.array(X_SIZE, DT, alignment=SMEM_ALIGN)
        w_s = cuda.shared.array(W_SIZE, DT, alignment=SMEM_ALIGN)
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
                    if src < x_end:
                        v = x[src]
                    x_s[uint32(e + uint32(e // U_SW) * U_PADW)] = v  # padded rows
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
                            w_s[uint32(dst + uint32(j * STEP_O))] = v
                    kk = uint32(kk + U_STEP_K)
                    src = uint32(src + U_STEP_K)
            # (2) RAW: every thread has stored its share before anyone reads
            cuda.syncthreads()
            # (3) accumulate: per filter row one window of inputs, per tap RCO weights
            xa = x_thread  # this thread's window start in x_s, filter row by filter row
            wa = wco  # its weights' row in w_s, tap by tap
            ck = U_ZERO
            while ck < U_CK:  # 32-bit counters: cheaper than range's 64-bit ones
                a = U_ZERO
                while a < U_KH:
                    for q in range(WIN):
                        win[q] = x_s[xa + uint32(q)]  # no wrap-around: offsets fold into the loads
                    for b in range(KW):
                        for i in range(RCO):  # one address per warp: a broadcast
                            wr[i] = w_s[wa + uint32(b * COP + i)]
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

    return conv_nchw_k02_smem_tiled


RUNG = Rung("k02_smem_tiled", Config, PRESETS, make_kernel, tiled_geometry, signature, tiled_launch_bounds)
