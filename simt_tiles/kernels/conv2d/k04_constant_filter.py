"""k04 — the filter in constant memory: its values are compiled into the kernel.

What changed versus k03
    k03 stages the KH × KW weights in shared memory with the patch and reads
    ``w_s[a, b]`` once per tap (a broadcast load, reused RX times).  Here the
    filter is a NumPy array captured by the kernel's closure when the kernel
    is built, and ``cuda.const.array_like(W)`` places it in **constant memory**
    — the weights are part of the compiled kernel, like its code.  The taps'
    loops are unrolled, so every ``w_c[a, b]`` has a constant address: the
    compiler folds the value into the multiply-add itself (PTX
    ``fma.rn.f32 %f, %f, 0f3E124925, %f``: the weight is an immediate operand,
    no load at all; a weight of 1 becomes an add, a zero weight's tap vanishes —
    scipy skips it, see ``_common.TINY_WEIGHT``).  Per output that leaves
    KH·(RX + KW − 1)/RX shared loads for KH·KW multiply-adds (5 × 5, RX = 3:
    11.7 instead of k03's 20) and no weight staging, no weight registers.
    (The compile gate's PTX for the default 5 × 5 float32 kernel: 75 FMAs
    with immediate weights, no ``ld.const``, 35 ``ld.shared``.)
    Everything else — the patch plus halo in shared memory with the boundary
    mode applied while loading, RX outputs of a row per thread from a register
    window — is k03's.

Why the rows are unrolled by hand
    Folding needs a constant address for every ``w_c[a, b]``, so the loop over
    the filter rows must be fully unrolled.  Numba has no ``#pragma unroll``,
    and NVVM unrolls ``for a in range(KH)`` only while the body is small
    (5 × 5 taps with RX = 3 yes, 7 × 7 no — then every tap is an
    ``ld.const`` with a run-time address).  So the kernel calls an inner
    function ``filter_row(a)`` once per row, ``if KH > a: filter_row(a)`` for
    a = 0 … 8: Numba inlines each call with its constant ``a`` and drops the
    untaken ones (KH is a compile-time constant).  Rows from the tenth on run
    in an ordinary loop (weights loaded from constant memory, not folded).
    The window indices are unsigned (as matmul k06+): no negative-index
    checks, and each unrolled row's loads are constant offsets from one base.

The price: one compilation per filter
    A kernel now exists per distinct filter *value*, not per filter shape.
    The launcher (``_common.constant_filter_kernel``) keys a bounded cache
    (``_common.FILTER_KERNEL_CACHE`` = 64 kernels, least recently used
    dropped) on the filter's bytes, dtype and shape, the mode and the tiles.
    A new filter costs a Numba → NVVM → ptxas compile before its first
    launch (about a second; timings in benchmarks/notes/conv2d.md).  That is thousands of
    launches' worth of device time for an 8192² image, so these rungs pay
    off for a filter applied many times (a fixed blur, Sobel, a stencil in a
    time loop) and are wrong for a filter that changes every call (a learned
    or per-image kernel).  Weights given as a device array are copied to the
    host first (a synchronising copy of KH·KW values).  Numbered after k03
    but *opt-in*: ``variant=None`` keeps k03 (one compile per shape) until
    the H200 says the folding is worth the compiles.

Memory traffic (teaching number)
    Global: as k03, (TH + KH − 1)·(RX·TW + KW − 1) image loads per block for
    TH·RX·TW outputs and no weight loads.  Shared: KH·(RX + KW − 1)/RX loads
    per output, none for weights (k03: + KH·KW/RX).  The filter occupies
    KH·KW·itemsize bytes of the 64 KiB constant bank; the patch's 48 KiB of
    shared memory limits the filter size first.

Shared-memory banks
    As k03: lane tx reads ``patch[ty + a, tx·RX + q]``, RX words apart; an
    odd RX is conflict-free.

Headline (H200, benchmarks/results/conv_h200.json): 0.77 TB/s on 8192² 7x7 constant, 18% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import numba_dtype
from ._common import CONSTANT_FILTER, TINY_WEIGHT, FilterRung, Mode, RowTileConfig, constant_filter_signature, gate_filter
from ._common import geometry
from .k02_halo_tiled import make_patch_loader


@dataclasses.dataclass(frozen=True)
class Config(RowTileConfig):
    """A ``block_x × block_y`` block; each thread computes ``rx`` consecutive
    outputs of one row, so the output tile is ``block_y × (rx·block_x)`` (k03's:
    ``_common.RowTileConfig``).

    ``kh``, ``kw`` and ``mode`` are set by the launcher from the call; the
    presets' values (and :func:`~._common.gate_filter`'s values) are what the
    compile gate builds."""

    def smem_bytes(self, itemsize):
        rows, cols = self.patch()
        return rows * cols * itemsize  # the patch; no weights


# A call replaces kh, kw and mode (and brings its own filter values); the presets'
# values only choose what the compile gate builds.
PRESETS = {
    "sim": Config(block_x=2, block_y=3, rx=3, kh=3, kw=4, mode=Mode.NEAREST),
    "default": Config(block_x=32, block_y=8, rx=3, kh=5, kw=5, mode=Mode.REFLECT),
}


def make_kernel(config: Config, dtype, weights=None, all_taps=False):
    """The kernel for ``config``, ``dtype`` and the filter ``weights`` (a
    ``kh × kw`` NumPy array of ``dtype``; None: :func:`~._common.gate_filter`,
    for the compile gate).  The values are compiled in; so is the zero-tap rule
    (``all_taps``, see ``_common.TINY_WEIGHT``): a zero weight's taps vanish."""
    BX, RX, KH, KW = config.block_x, config.rx, config.kh, config.kw
    TH, TW = config.tile()
    SH, SW = TH + KH - 1, TW + KW - 1  # the patch: output tile plus halo (plain constants)
    WIN = RX + KW - 1  # image values one thread needs per filter row (register array length)
    THREADS = config.threads
    DT = numba_dtype(dtype)
    TINY = DT(TINY_WEIGHT)
    ALL_TAPS = bool(all_taps)
    load_patch = make_patch_loader(SH, SW, THREADS, config.mode)  # k02's cooperative halo load
    UNROLLED = 9  # filter rows unrolled by hand in the kernel (its `if KH > a` lines)
    W = gate_filter(KH, KW, dtype) if weights is None else weights  # frozen into the kernel
    if W.shape != (KH, KW) or W.dtype != dtype:
        raise ValueError(f"weights: expected a {KH}x{KW} {dtype} array; got {W.shape} {W.dtype}")

    def conv2d_k04_constant_filter(image, out, cval, anchor_h, anchor_w):
        w_c = cuda.const.array_like(W)  # the filter, in constant memory (values compiled in)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * BX + tx
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH  # the block's output tile starts here
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SW), DT)

        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tid)  # as k02
        # RAW hazard: no thread may read the patch before every thread has stored its
        # elements.  (Written once: no WAR hazard, no second barrier.)
        cuda.syncthreads()

        acc = cuda.local.array(RX, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        for i in range(RX):
            acc[i] = DT(0)
        ty_u = uint32(ty)  # unsigned: the unrolled rows' addresses become constant offsets
        c0 = uint32(tx) * uint32(RX)  # this thread's first output column within the tile

        def filter_row(a):
            # Filter row a: RX + KW - 1 shared loads serve RX * KW multiply-adds.  Called
            # with a constant a below, so every w_c[a, b] has a constant address.
            for q in range(WIN):
                win[q] = patch[ty_u + uint32(a), c0 + uint32(q)]
            for b in range(KW):
                wv = w_c[a, b]  # a constant: folded into the FMA as an immediate
                if ALL_TAPS or abs(wv) > TINY:  # folded too: a zero tap emits no code
                    for i in range(RX):
                        acc[i] += wv * win[i + b]

        # Unrolled by hand (see the docstring): each call is inlined with a constant a;
        # the conditions are compile-time constants, so the untaken calls are removed.
        # Rows from UNROLLED on run in a loop that loads their weights from constant memory.
        if KH > 0:
            filter_row(0)
        if KH > 1:
            filter_row(1)
        if KH > 2:
            filter_row(2)
        if KH > 3:
            filter_row(3)
        if KH > 4:
            filter_row(4)
        if KH > 5:
            filter_row(5)
        if KH > 6:
            filter_row(6)
        if KH > 7:
            filter_row(7)
        if KH > 8:
            filter_row(8)
        for a in range(UNROLLED, KH):
            filter_row(a)

        row = row0 + ty
        if row < h:
            for i in range(RX):
                col = col0 + c0 + i
                if col < w:
                    out[row, col] = acc[i]

    return conv2d_k04_constant_filter


#: ``Rung.kernel`` would build the gate's filter: launch through
#: ``_common.constant_filter_kernel`` (the public functions do).
RUNG = FilterRung("k04_constant_filter", Config, PRESETS, make_kernel, geometry, constant_filter_signature,
                  bind=CONSTANT_FILTER)
