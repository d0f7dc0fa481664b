"""k01 — naive: each output reads its whole window from global memory; the boundary by index mapping.

What it teaches
    The 2-D filter as scipy.ndimage defines it, in the plainest form: thread
    (x, y) of the grid owns out[row, col] and runs over the KH × KW window
    itself, reading every image value and every weight from global memory.
    The grid's x index (consecutive within a warp) is mapped to the *column*,
    so the 32 lanes of a warp read 32 consecutive image values of one row —
    coalesced (the matmul ladder's k01 → k02 lesson, applied from the start).
    Every lane reads the same weight: a broadcast.

Boundary handling by index mapping
    A window that hangs over an edge reads the *extended* image.  Instead of
    padding the image in memory, each tap's coordinate p is mapped back into
    [0, n) by ``extend(p, n)`` (``_staging.make_extend``, inlined; reflect and mirror fold
    with a modulo, so filters many times larger than the image work; wrap is a
    modulo; nearest clamps; constant returns −1, "read cval").  The mode is a
    compile-time constant: the compiler keeps only its branch.  Rows are mapped
    once per filter row, columns once per tap; inside the image the mapping is
    one comparison.

Memory traffic (teaching number)
    H·W·KH·KW image loads + H·W·KH·KW weight loads from global memory for
    2·H·W·KH·KW flops: one flop per load, as in matmul k01.  Neighbouring
    outputs' windows overlap in all but one column, so the caches serve most
    of these loads — k02 makes that reuse explicit in shared memory.

Filter shape
    Read from ``weights.shape`` at run time: one compiled kernel per (block
    shape, mode, dtype) serves every filter size.  This is the rung the
    launcher falls back to when a filter's halo does not fit in shared memory.

Headline (H200, benchmarks/results/conv_h200.json): 0.07 TB/s on 8192² 7x7 constant, 1.6% of copy
"""

from __future__ import annotations

import dataclasses

from numba import cuda

from ...runtime import TileConfig, grid_for, numba_dtype
from ._common import SLICES_GATE, TINY_WEIGHT, WEIGHTS_ARGUMENT, FilterRung, Mode, mode_rule, on_grid_z, signature
from ._staging import make_extend


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A ``block_x × block_y`` block of threads, one output element each.

    ``mode`` is set by the launcher from the call's ``mode=`` (see _common)."""

    block_x: int = 32
    block_y: int = 8
    mode: int = Mode.REFLECT

    def block(self):
        return (self.block_x, self.block_y)

    def rules(self):
        yield mode_rule(self)


# A call replaces ``mode``; the presets' modes only choose what the compile gate
# builds, and are spread over the ladder so that it builds all five.
PRESETS = {
    "sim": Config(4, 4, mode=Mode.CONSTANT),
    "default": Config(32, 8, mode=Mode.NEAREST),
}


def make_kernel(config: Config, dtype, all_taps=False, slices=False):
    DT = numba_dtype(dtype)
    TINY = DT(TINY_WEIGHT)  # scipy skips taps with |w| <= 2**-52 (_common.TINY_WEIGHT)
    ALL_TAPS = bool(all_taps)  # correlate1d: every tap counts (0·NaN = NaN, as scipy)
    MODE = int(config.mode)
    CONSTANT = int(Mode.CONSTANT)

    extend = make_extend(config.mode)  # the boundary mapping, inlined (see _staging)

    def conv2d_k01_naive(image, weights, out, cval, anchor_h, anchor_w):
        col, row = cuda.grid(2)  # x → column: a warp reads consecutive image values
        h, w = image.shape
        kh, kw = weights.shape
        if row < h and col < w:
            acc = DT(0)
            for a in range(kh):
                r = extend(row + a - anchor_h, h)
                for b in range(kw):
                    wv = weights[a, b]  # the same for the whole warp: a uniform branch
                    if ALL_TAPS or abs(wv) > TINY:  # a zero tap reads nothing, adds nothing
                        c = extend(col + b - anchor_w, w)
                        if MODE == CONSTANT:
                            x = cval if r < 0 or c < 0 else image[r, c]
                        else:
                            x = image[r, c]
                        acc += wv * x
            out[row, col] = acc

    return on_grid_z(conv2d_k01_naive) if slices else conv2d_k01_naive  # slices: a volume's (_common)


def geometry(config: Config, h: int, w: int):
    """Grid x covers the columns of the output, grid y its rows."""
    return grid_for((w, h), config.block()), config.block()


# the fallback of variant=None, so it takes a volume's slices in one launch too: the gate builds both forms
RUNG = FilterRung("k01_naive", Config, PRESETS, make_kernel, geometry, signature, gate=SLICES_GATE,
                  bind=WEIGHTS_ARGUMENT, slices=True)
