"""k01 — direct: one thread per output element reads its C_in·KH·KW window from global memory.

What it teaches
    The convolution layer in its plainest form.  Thread ``i`` of a 1-D grid
    owns out[n, o, r, s] for the ``i``-th element in memory order, so the 32
    lanes of a warp own 32 consecutive pixels of one output row and read 32
    consecutive input values of one row per tap — coalesced.  All lanes of a
    warp (same n, o) read the same weight: a broadcast.  Zero padding is a
    bounds test per tap: a tap outside the input contributes nothing (no
    padded copy of the input is made).

Memory traffic (teaching number)
    Two global loads (an input value and a weight) per multiply-add: 0.5 FMA
    per load, for N·C_out·OH·OW·C_in·KH·KW multiply-adds.  Each input value
    is needed by KH·KW output pixels of each of the C_out output channels;
    here every one of those uses is a separate load, served (at best) by the
    L1/L2 caches.  k02 makes that reuse explicit: shared memory and registers.

Filter shape
    Read from the arguments at run time: one compiled kernel per (block
    size, dtype) serves every filter size.  The launcher falls back to this
    rung when a filter's staging does not fit the tiled rungs' shared memory.

Headline (H200, benchmarks/results/conv_h200.json): 0.75 TFLOP/s on N32 C64 56x56 3x3 p1, 0.03× cuDNN
"""

from __future__ import annotations

import dataclasses

from numba import cuda, uint32

from ...runtime import Rung, TileConfig, cdiv, numba_dtype
from ._common import signature


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A 1-D block of ``threads`` threads, one output element each."""

    block_x: int = 256

    def block(self):
        return (self.block_x,)


PRESETS = {"sim": Config(8), "default": Config(256)}


def make_kernel(config: Config, dtype):
    DT = numba_dtype(dtype)

    def conv_nchw_k01_direct(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad, kh, kw,
                             has_bias):
        i = cuda.grid(1)
        if i < n_img * c_out * oh_n * ow_n:
            # Element i of out in memory order: consecutive threads own consecutive
            # output columns.  Offsets in unsigned 32 bits (the launcher keeps every
            # array below 2**31 elements; a 64-bit division is a long subroutine).
            u = uint32(i)
            ow = uint32(u % uint32(ow_n))
            t = uint32(u // uint32(ow_n))
            oh = uint32(t % uint32(oh_n))
            t = uint32(t // uint32(oh_n))  # = n * C_out + co
            co = uint32(t % uint32(c_out))
            n = uint32(t // uint32(c_out))
            upad = uint32(pad)
            acc = DT(0)
            for c in range(c_in):
                x_chan = uint32(uint32(n * uint32(c_in) + uint32(c)) * uint32(h))  # row 0 of channel c
                w_row = uint32(uint32(co * uint32(c_in) + uint32(c)) * uint32(kh))
                for a in range(kh):
                    ip = uint32(oh + uint32(a))  # row in the zero-padded input
                    if ip >= upad and uint32(ip - upad) < h:  # a padding row adds nothing
                        x_row = uint32(uint32(x_chan + uint32(ip - upad)) * uint32(wd))
                        w_tap = uint32(uint32(w_row + uint32(a)) * uint32(kw))
                        for b in range(kw):
                            jp = uint32(ow + uint32(b))
                            if jp >= upad and uint32(jp - upad) < wd:
                                acc += w[uint32(w_tap + uint32(b))] * x[uint32(x_row + uint32(jp - upad))]
            if has_bias:
                acc += bias[co]
            out[u] = acc

    return conv_nchw_k01_direct


def geometry(config: Config, n: int, c_out: int, oh: int, ow: int):
    """One thread per output element, in memory order."""
    return (cdiv(n * c_out * oh * ow, config.block_x),), config.block()


def jit_options(config: Config, dtype) -> dict:
    """Launch bounds asking for 1024 threads per SM (half of an H200 SM's 2048).
    Given the block size alone, ptxas 13 squeezes this kernel into 32 registers
    (full occupancy) and spills a few values around its divisions; told this
    occupancy target, it uses ~50 registers and no local memory."""
    return {"launch_bounds": (config.threads, max(1, min(32, 1024 // config.threads)))}


RUNG = Rung("k01_direct", Config, PRESETS, make_kernel, geometry, signature, jit_options)
