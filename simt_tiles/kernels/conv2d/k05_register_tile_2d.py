"""k05 — 2-D register tiles: each thread computes RY × RX outputs, and each loaded window row serves up to KH output rows.

What changed versus k04
    * **RY × RX outputs per thread, a loaded row reused vertically.**  In k04
      a thread loads RX + KW − 1 patch values per *filter* row, KH times per
      output row.  Output rows y … y + RY − 1 of one thread read patch rows
      y … y + RY + KH − 2, and patch row p contributes to output row
      oy = p − a through filter row a.  So the thread now walks the
      RY + KH − 1 patch rows once: it loads each into the register window
      ``win`` and adds it, with every filter row a that applies (0 ≤ p − a
      < RY), to the accumulators of output row p − a.  Shared loads per
      output: (RY + KH − 1)·(RX + KW − 1)/(RY·RX) — 7 × 7, RY = 4, RX = 3:
      7.5 (k04: 21, k03: 37); multiply-adds per output stay KH·KW = 49, each
      with its weight folded in (the filter is in constant memory, as k04).
      The patch rows are unrolled by hand as k04's filter rows are (the first
      12: with RY = 4, filters up to 9 rows fold completely; NVVM stops
      unrolling long before RY·RX·KH·KW = 588 multiply-adds), so every
      accumulator index and every weight address is a constant.
    * **A loader without divisions.**  k02–k04 give thread ``tid`` patch
      elements ``tid + p·threads`` and split each into (row, column) with a
      division and map *both* coordinates through the boundary mode in
      64-bit signed arithmetic: about 100 SASS instructions per element for
      k03's default (mode nearest) — ten times the multiply-adds of a 3 × 3
      filter.  Here thread (tx, ty) copies columns tx + j·BX of rows
      ty + k·BY: its columns are the same in every row, so their boundary
      mapping is computed once (a register array ``src_col``), each row's once
      per row.  A block whose patch lies inside the image (almost all of a
      large one) skips the mapping: with unsigned 64-bit indices its loads
      are one row address plus constant offsets.  Consecutive tx still read
      consecutive columns: coalesced.
    * **Stores staged through shared memory.**  Thread tx owns columns
      tx·RX … tx·RX + RX − 1, so one store instruction of a warp writes
      every RX-th word: RX times the sectors of a dense row.  After a barrier
      the accumulators go to shared memory (over the patch, which is no
      longer needed), and after a second barrier the block writes its tile
      row by row, consecutive lanes on consecutive columns.
    * **Unsigned 32-bit index arithmetic** (as matmul k06+): no negative-index
      checks, constant offsets in the unrolled loads.

Memory traffic (teaching number)
    Global: (TH + KH − 1)·(TW + KW − 1) loads for TH·TW outputs with
    TH = RY·BY, TW = RX·BX (default 24 × 128, 7 × 7: 1.31 loads per output,
    1.10 for 3 × 3), one dense store per output.  Shared, 7 × 7: 12 window
    rows of 10 words per 24 outputs (5 words, 1.5 load instructions with
    128-bit loads, per output) plus one store and one load to stage the
    result.

Shared-memory banks
    Window loads: lane tx reads ``patch[ty·RY + p, tx·RX + q]``, RX words
    apart — with scalar loads odd RX is conflict-free.  With RX = 4 (the
    default) and the patch's row pitch padded to a multiple of 4 words, the
    window row starts 16-byte aligned and LLVM's load-store vectorizer reads
    it with LDS.128/LDS.64: a warp's 128-bit loads cover 512 contiguous
    bytes, the minimum of 4 wavefronts, and a 7×7 window row is 3 loads, not
    10.  The staging stores write ``patch[ty·RY + oy, tx·RX + i]``: the same
    pattern.  With block_x = 32 a warp is one row of threads, so the row
    pitch never splits a warp's accesses.

Like k04, one kernel per distinct filter (compiled on first use, cached) —
opt-in, see k04's docstring for the compile cost.

Headline (H200, benchmarks/results/conv_h200.json): 2.84 TB/s on 8192² 7x7 constant, 67% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import cdiv, numba_dtype
from ._common import CONSTANT_FILTER, FilterRung, Mode, constant_filter_signature, gate_filter
from ._common import RegisterTileConfig, geometry
from ._staging import make_patch_loader, make_tile_store, make_window_accumulator


@dataclasses.dataclass(frozen=True)
class Config(RegisterTileConfig):
    """A ``block_x × block_y`` block; each thread computes ``ry × rx``
    outputs (``rx`` consecutive columns of ``ry`` consecutive rows), so the
    output tile is ``(ry·block_y) × (rx·block_x)``.  The fields (``block_x``,
    ``block_y``, ``rx``, ``ry``, ``kh``, ``kw``, ``mode``), ``tile()`` and the
    launch geometry are k06's too: ``_common.RegisterTileConfig``.

    ``kh``, ``kw`` and ``mode`` are set by the launcher from the call."""

    #: blocks per SM ptxas must leave registers for (``launch_bounds``): 12 blocks of 128
    #: threads is ≤ 42 registers.  Without it the reflect-mode kernel (boundary code) took 48
    #: registers where constant mode took 40 — 10 blocks per SM instead of 12, and 5×5
    #: reflect ran at 78% of the copy against 88% for constant
    min_blocks: int = 1

    def smem_bytes(self, itemsize):
        rows, cols = self.patch()
        return rows * 4 * cdiv(cols, 4) * itemsize  # the patch (rows padded to 16 B)


# A call replaces kh, kw and mode (and brings its own filter values); the presets'
# values only choose what the compile gate builds.
PRESETS = {
    "sim": Config(block_x=2, block_y=2, rx=2, ry=3, kh=3, kw=2, mode=Mode.REFLECT),
    # 32 × 4 threads of 6 × 4 outputs (tile 24 × 128): 4 columns per thread and 16-byte patch rows,
    # so each window row is read with 128-bit shared loads; 5×5 88% of the copy on the H200 against
    # 83% for 6 × 5 outputs (7×7 63% both; benchmarks/notes/conv2d.md); see the docstring
    "default": Config(block_x=32, block_y=4, rx=4, ry=6, kh=7, kw=7, mode=Mode.CONSTANT),
}


def make_kernel(config: Config, dtype, weights=None, all_taps=False):
    """The kernel for ``config``, ``dtype`` and the filter ``weights`` (a
    ``kh × kw`` NumPy array of ``dtype``; None: :func:`~._common.gate_filter`,
    for the compile gate).  The values are compiled in."""
    RX, RY, KH, KW = config.rx, config.ry, config.kh, config.kw
    TH, TW = config.tile()
    SH, SW = TH + KH - 1, TW + KW - 1  # the patch: output tile plus halo (plain constants)
    SWP = 4 * cdiv(SW, 4)  # its row pitch: 16-byte rows, so even RX gets vector shared loads
    WIN = RX + KW - 1  # values one thread needs per patch row (register array length)
    OUTS = RY * RX  # accumulators per thread
    DT = numba_dtype(dtype)
    load_patch = make_patch_loader(config)  # inlined (see _staging)
    store_tile = make_tile_store(config)
    accumulate = make_window_accumulator(config, all_taps=all_taps)  # skips zero taps (_common)
    W = gate_filter(KH, KW, dtype) if weights is None else weights  # frozen into the kernel
    if W.shape != (KH, KW) or W.dtype != dtype:
        raise ValueError(f"weights: expected a {KH}x{KW} {dtype} array; got {W.shape} {W.dtype}")

    def conv2d_k05_register_tile_2d(image, out, cval, anchor_h, anchor_w):
        w_c = cuda.const.array_like(W)  # the filter, in constant memory (values compiled in)
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH  # the block's output tile starts here
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SWP), DT)

        # --- load the patch (_staging.make_patch_loader) -----------------------------
        # Thread (tx, ty) copies columns tx + j*BX of rows ty + k*BY; a block whose patch
        # lies inside the image skips the boundary mapping.
        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tx, ty)
        cuda.syncthreads()  # RAW: the patch is complete before anyone reads it

        # --- RY x RX outputs per thread, each patch row loaded once -----------------
        acc = cuda.local.array(OUTS, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        for o in range(OUTS):
            acc[o] = DT(0)
        r0 = ty * uint32(RY)  # this thread's first output row / column within the tile
        c0 = tx * uint32(RX)

        # patch row p (all RY + KH - 1 of them, unrolled): loaded once into win, added
        # to output row oy through filter row p - oy wherever that is a row (_staging)
        accumulate(patch, w_c, acc, win, r0, c0)

        # --- stage the results in shared memory, then store whole rows ----------------
        cuda.syncthreads()  # WAR: every thread has read the patch before it is overwritten
        store_tile(out, patch, acc, row0, col0, tx, ty, h, w)  # stage, barrier, store rows

    return conv2d_k05_register_tile_2d


#: ``Rung.kernel`` would build the gate's filter: launch through
#: ``_common.constant_filter_kernel`` (the public functions do).
def jit_options(config: Config, dtype) -> dict:
    return {"launch_bounds": (config.threads, config.min_blocks)}


RUNG = FilterRung("k05_register_tile_2d", Config, PRESETS, make_kernel, geometry, constant_filter_signature,
                  jit_options, bind=CONSTANT_FILTER)
