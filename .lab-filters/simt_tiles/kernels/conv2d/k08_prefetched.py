"""k08 — k07 with the next tile's patch loaded while this tile is computed: a block walks a column of tiles, prefetching into registers.

What changed versus k07
    k07 (7 × 7) is bounded by latency: its warps often stall waiting for
    global loads, then at the barrier (Nsight Compute figures in
    benchmarks/notes/conv2d.md).  Every block is a load phase (its warps wait for
    DRAM, then for each other) followed by a compute phase; fewer load
    instructions (k07) did not shorten the wait.  Here the wait overlaps
    work:

    * **A block computes ``tiles`` output tiles** stacked vertically (grid y
      divided by ``tiles``), one after another.
    * **Prefetch into registers.**  Right after the barrier that makes tile n's
      patch visible, each thread issues its global loads of tile n + 1's
      patch into a register array ``pre`` (128-bit loads, k07's aligned
      patch), then computes tile n (≈ 1200 FFMA a thread, 7 × 7) while they
      are in flight, and only after the next barrier writes them to shared
      memory.  One patch buffer: compute of tile n, barrier, store of n + 1's
      patch, barrier.
    * **Vectors numbered, not rows × columns.**  ``pre`` holds only real
      vectors (k07's row-per-warp mapping leaves two of 34 vectors a row to a
      second, mostly idle load whose registers would sit in ``pre`` too):
      vector v = t + k·threads is patch row v // VROW (a division by a
      constant: a multiply-high), and its address is one flat index of the
      image, ``(top + row)·w + left + column`` (``vector.load4`` on the 2-D
      array).  7 × 7 default: 1020 vectors, 4 per thread (256 threads), 16 registers.

    The cost is registers: ``pre`` plus k07's ≈ 48 means fewer blocks per SM.
    Tiles whose patch leaves the image (or any tile of an image whose rows or
    data are not 16-byte aligned) load synchronously with k05's scalar loader.

Memory traffic (teaching number)
    As k07: (TH + KH − 1)·(S + TW + KW − 1) loads (rounded to vectors) for TH·TW
    outputs; halo rows shared by vertically adjacent tiles are loaded by both
    (L2 hits).

Headline (H200, benchmarks/results/conv_h200.json): 2.99 TB/s on 8192² 7x7 constant, 70% of copy
"""

from __future__ import annotations

import dataclasses

from numba import boolean, cuda, uint32, uint64, void

from ...runtime import SMEM_ALIGN, cdiv, grid_for, numba_dtype
from ...vector import load4, store4
from . import k07_vectorized as k07
from ._common import CONSTANT_VECTOR, FilterRung, Mode
from ._staging import inline, make_output_store, make_patch_loader, make_vector_slots, make_window_accumulator

VEC = k07.VEC


@dataclasses.dataclass(frozen=True)
class Config(k07.Config):
    """k07's fields, and ``tiles``: output tiles one block computes, stacked vertically."""

    tiles: int = 4

    def rules(self):
        yield from super().rules()
        yield ("tiles", self.tiles >= 1, "tiles >= 1")


PRESETS = {
    "sim": Config(block_x=2, block_y=2, rx=4, ry=2, kh=3, kw=2, mode=Mode.REFLECT, tiles=2),
    # 32 × 8 threads of 3 × 4 outputs (k07's 24 × 128 tile): 4 prefetched vectors a thread, 64
    # registers without spills (ptxas) — 4 blocks, 32 warps per SM.  k07's 32 × 4 of 6 × 4 needs
    # 96 registers (8 vectors) without spills: 20 warps per SM
    "default": Config(block_x=32, block_y=8, rx=4, ry=3, kh=7, kw=7, mode=Mode.CONSTANT, min_blocks=4, tiles=4),
}


def geometry(config: Config, h: int, w: int):
    """Grid x over tile columns, grid y over groups of ``tiles`` tile rows."""
    th, tw = config.tile()
    return grid_for((w, h), (tw, th * config.tiles)), config.block()


def make_kernel(config: Config, dtype, weights=None, anchor=None, all_taps=False):
    """As :func:`k07_vectorized.make_kernel` (filter and anchor compiled in)."""
    lay = k07.patch_layout(config, dtype, weights, anchor)
    RX, RY, KW = config.rx, config.ry, config.kw
    BX, T, NT = config.block_x, config.threads, config.tiles
    TH, TW = config.tile()
    AH, HL, S, SH, SWP, VROW, WIN, W = lay.AH, lay.HL, lay.S, lay.SH, lay.SWP, lay.VROW, lay.WIN, lay.W
    NVEC = SH * VROW  # vectors per patch
    VL = cdiv(NVEC, T)  # vectors per thread (the last one predicated)
    PRE = VL * VEC  # prefetch registers per thread
    OUTS = RY * RX
    DT = numba_dtype(dtype)
    load_patch = make_patch_loader(config, sw=S + TW + KW - 1)
    store_outputs = make_output_store(config)
    accumulate = make_window_accumulator(config, shift=S, win=WIN, all_taps=all_taps)
    slot = make_vector_slots(T, NVEC, VROW, VEC)

    @inline
    def prefetch(image, pre, top, left, w, t):
        # this thread's vectors of the patch whose first element is image[top, left]
        base = uint64(top) * uint64(w) + uint64(left)
        for k in range(VL):
            live, r, c = slot(t, k)
            if live:
                a, b, e, f = load4(image, base + uint64(r) * uint64(w) + uint64(c))
                pre[k * VEC] = a
                pre[k * VEC + 1] = b
                pre[k * VEC + 2] = e
                pre[k * VEC + 3] = f

    @inline
    def deposit(patch, pre, t):
        # the prefetched vectors into the patch (same numbering as prefetch)
        for k in range(VL):
            live, r, c = slot(t, k)
            if live:
                store4(patch[r], c, pre[k * VEC], pre[k * VEC + 1], pre[k * VEC + 2], pre[k * VEC + 3])

    def conv2d_k08_prefetched(image, out, cval, aligned):
        w_c = cuda.const.array_like(W)
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        t = ty * uint32(BX) + tx
        h, w = image.shape
        col0 = cuda.blockIdx.x * TW
        left = col0 - HL
        # vector loads for this block's column of tiles: rows 16-byte aligned, columns inside
        cols_in = aligned and w % VEC == 0 and left >= 0 and left + SWP <= w
        first = cuda.blockIdx.y * NT  # the block's first tile row

        patch = cuda.shared.array((SH, SWP), DT, alignment=SMEM_ALIGN)
        pre = cuda.local.array(PRE, DT)  # registers: indexed by unrolled constants only
        acc = cuda.local.array(OUTS, DT)
        win = cuda.local.array(WIN, DT)
        r0 = ty * uint32(RY)
        c0 = tx * uint32(RX)

        top = first * TH - AH
        if cols_in and top >= 0 and top + SH <= h:
            prefetch(image, pre, top, left, w, t)  # tile 0: nothing to overlap it with
        for n in range(NT):
            row0 = (first + n) * TH
            if row0 < h:  # block-uniform
                top = row0 - AH
                if n > 0:
                    cuda.syncthreads()  # WAR: tile n - 1 is computed (and stored) before its patch goes
                if cols_in and top >= 0 and top + SH <= h:
                    deposit(patch, pre, t)  # loaded during tile n - 1 (or above)
                else:
                    load_patch(image, patch, cval, top, left, tx, ty)  # k05's loader: boundary mapping
                cuda.syncthreads()  # RAW: the patch is complete before anyone reads it

                # tile n + 1's loads are issued now and land while tile n is computed
                ntop = top + TH
                if n + 1 < NT and cols_in and ntop >= 0 and ntop + SH <= h:
                    prefetch(image, pre, ntop, left, w, t)

                for o in range(OUTS):
                    acc[o] = DT(0)
                accumulate(patch, w_c, acc, win, r0, c0)

                store_outputs(out, patch, acc, row0, col0, tx, ty, h, w, aligned and w % VEC == 0)

    return conv2d_k08_prefetched


def signature(dtype):
    """k07's: ``void(image, out, cval, aligned)``."""
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[:, ::1], t, boolean)


def jit_options(config: Config, dtype) -> dict:
    """k07's launch bounds, except in modes "nearest" and "mirror", whose boundary loader
    spills under them: those are unbounded (benchmarks/notes/conv2d.md, "Register rules")."""
    options = k07.jit_options(config, dtype)
    if int(config.mode) in (int(Mode.NEAREST), int(Mode.MIRROR)):
        options["launch_bounds"] = (config.threads,)
    return options

#: launch through ``_common.constant_filter_kernel`` with the anchor (the public functions do)
RUNG = FilterRung("k08_prefetched", Config, PRESETS, make_kernel, geometry, signature, jit_options, bind=CONSTANT_VECTOR)
