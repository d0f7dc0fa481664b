"""k09 — k08 without the registers: the next tile's patch copied global → shared asynchronously (cp.async) into a second buffer.

What changed versus k08
    k08 hid the patch loads' latency (long-scoreboard stalls 3.3 → 0.5 cycles
    per instruction, issue rate 0.70 → 0.86 for 7 × 7) but paid for the
    prefetch in registers: k07's 6 × 4 outputs per thread would need 96, so
    k08 took 3 × 4 outputs (64 registers) and executes 16% more instructions
    than k07.  Here the prefetch holds no registers:

    * **cp.async** (:func:`simt_tiles.vector.copy4_async`, SASS ``LDGSTS``,
      sm_80+): a 16-byte copy from global to shared memory that the thread
      issues and forgets — no destination register, no stall until
      ``wait_copies``.  It is a SIMT instruction (every thread copies its own
      vectors), not the Hopper tensor-memory accelerator.
    * **Two patch buffers.**  While tile n is computed from buffer n % 2, tile
      n + 1's copies land in buffer (n + 1) % 2.  One barrier per tile: after
      ``wait_copies`` (this thread's copies of tile n are in) the barrier makes
      all of them visible *and* guarantees everyone has finished reading
      buffer (n + 1) % 2 (tile n − 1) before copies into it are issued.
    * k07's 6 × 4 outputs per thread and 128-bit stores from registers; the
      patch's vectors numbered as in k08 (no idle lanes).

    Shared memory doubles (2 × 16.3 KB for 7 × 7): 6 blocks of 128 threads
    per SM fit in 227 KB — 24 warps, fewer than k08's 32; the registers
    (≈ 48) are no longer the limit.  float32 only for the copies (a copy is
    4 elements of 4 bytes): float64 gets one buffer filled by k05's scalar
    loader between barriers; edge tiles and misaligned arrays take that loader
    too (into the next buffer, synchronously).

Memory traffic (teaching number): as k07/k08.
The lesson, measured (benchmarks/notes/conv2d.md): the copies' latency is hidden as
planned, but the copy addressing and fewer warps per SM (shared memory) cost
more than that saves — k09 is slower than k08, and ``variant=None`` never picks
it.  Measure before assuming a prefetch pays.

Headline (H200, benchmarks/results/conv_7x7_s6_h200.json): 2.98 TB/s on 8192² 7x7 constant, 70% of copy
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda, uint32, uint64

from ...runtime import SMEM_ALIGN, cdiv, numba_dtype
from ...vector import commit_copies, copy4_async, wait_copies
from . import k07_vectorized as k07
from . import k08_prefetched as k08
from ._common import CONSTANT_VECTOR, FilterRung, Mode
from ._staging import inline, make_output_store, make_patch_loader, make_vector_slots, make_window_accumulator

VEC = k07.VEC


@dataclasses.dataclass(frozen=True)
class Config(k08.Config):
    """k08's fields (``tiles``: output tiles a block computes, stacked vertically)."""

    def smem_bytes(self, itemsize):
        return buffers(itemsize) * super().smem_bytes(itemsize)


def buffers(itemsize: int) -> int:
    """Patch buffers: two for float32 (cp.async copies 4 elements of 4 bytes); one for
    float64, loaded by k05's scalar loader between barriers as k07 does."""
    return 2 if itemsize == 4 else 1


PRESETS = {
    "sim": Config(block_x=2, block_y=2, rx=4, ry=2, kh=3, kw=2, mode=Mode.REFLECT, tiles=3),
    # k07's 32 × 4 threads of 6 × 4 outputs; 6 blocks per SM (shared memory), so up to 85 registers;
    # 2 tiles a block: the fewest that still prefetch, and faster than 4 (table above)
    "default": Config(block_x=32, block_y=4, rx=4, ry=6, kh=7, kw=7, mode=Mode.CONSTANT, min_blocks=6, tiles=2),
}

geometry = k08.geometry


def make_kernel(config: Config, dtype, weights=None, anchor=None, all_taps=False):
    """As :func:`k07_vectorized.make_kernel` (filter and anchor compiled in)."""
    lay = k07.patch_layout(config, dtype, weights, anchor)
    RX, RY, KW = config.rx, config.ry, config.kw
    BX, T, NT = config.block_x, config.threads, config.tiles
    TH, TW = config.tile()
    AH, HL, S, SH, SWP, VROW, WIN, W = lay.AH, lay.HL, lay.S, lay.SH, lay.SWP, lay.VROW, lay.WIN, lay.W
    NVEC = SH * VROW
    VL = cdiv(NVEC, T)
    OUTS = RY * RX
    DT = numba_dtype(dtype)
    NB = buffers(np.dtype(dtype).itemsize)
    ASYNC = NB == 2  # a 16-byte copy is 4 elements of 4 bytes
    load_patch = make_patch_loader(config, sw=S + TW + KW - 1)
    store_outputs = make_output_store(config)
    accumulate = make_window_accumulator(config, shift=S, win=WIN, all_taps=all_taps)
    slot = make_vector_slots(T, NVEC, VROW, VEC)

    @inline
    def copy_patch(image, patch, top, left, w, t):
        # this thread's vectors of the patch at image[top, left], issued, not awaited
        base = uint64(top) * uint64(w) + uint64(left)
        for k in range(VL):
            live, r, c = slot(t, k)
            if live:
                copy4_async(patch[r], c, image, base + uint64(r) * uint64(w) + uint64(c))
        commit_copies()

    def conv2d_k09_async_copy(image, out, cval, aligned):
        w_c = cuda.const.array_like(W)
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        t = ty * uint32(BX) + tx
        h, w = image.shape
        col0 = cuda.blockIdx.x * TW
        left = col0 - HL
        cols_in = ASYNC and aligned and w % VEC == 0 and left >= 0 and left + SWP <= w
        first = cuda.blockIdx.y * NT

        patches = cuda.shared.array((NB, SH, SWP), DT, alignment=SMEM_ALIGN)
        acc = cuda.local.array(OUTS, DT)
        win = cuda.local.array(WIN, DT)
        r0 = ty * uint32(RY)
        c0 = tx * uint32(RX)

        # tile 0 into buffer 0: copies in flight, or the scalar loader (edge tiles)
        top = first * TH - AH
        if NB == 2:
            if cols_in and top >= 0 and top + SH <= h:
                copy_patch(image, patches[0], top, left, w, t)
            else:
                load_patch(image, patches[0], cval, top, left, tx, ty)
        for n in range(NT):
            row0 = (first + n) * TH
            if row0 < h:  # block-uniform
                cur = n % NB
                if NB == 2:
                    wait_copies()  # this thread's copies of tile n have landed
                    cuda.syncthreads()  # RAW: tile n's patch is complete; WAR: tile n - 1 is done with the other buffer

                    # tile n + 1 into the other buffer, while tile n is computed
                    ntop = row0 + TH - AH
                    if n + 1 < NT and row0 + TH < h:
                        if cols_in and ntop >= 0 and ntop + SH <= h:
                            copy_patch(image, patches[1 - cur], ntop, left, w, t)
                        else:
                            load_patch(image, patches[1 - cur], cval, ntop, left, tx, ty)
                else:  # one buffer (float64): load, barrier, compute, as k07
                    if n > 0:
                        cuda.syncthreads()  # WAR: tile n - 1 is done with the buffer
                    load_patch(image, patches[0], cval, row0 - AH, left, tx, ty)
                    cuda.syncthreads()  # RAW

                patch = patches[cur]
                for o in range(OUTS):
                    acc[o] = DT(0)
                accumulate(patch, w_c, acc, win, r0, c0)

                store_outputs(out, patch, acc, row0, col0, tx, ty, h, w, aligned and w % VEC == 0)

    return conv2d_k09_async_copy


signature = k08.signature  # k07's: void(image, out, cval, aligned)
jit_options = k08.jit_options  # no min_blocks in modes nearest / mirror (their loader's registers)

#: launch through ``_common.constant_filter_kernel`` with the anchor (the public functions do)
RUNG = FilterRung("k09_async_copy", Config, PRESETS, make_kernel, geometry, signature, jit_options, bind=CONSTANT_VECTOR)
