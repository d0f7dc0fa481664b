"""k01 — direct: one thread per output element reads its (C_in/groups)·KH·KW window from global memory.

What it teaches
    The convolution layer in its plainest form — and, being plain, every parameter of torch's
    ``conv2d``: stride, dilation, groups (depthwise too) and a padding per axis, all read at run
    time (``_params.py`` states the operation).  Thread ``i`` of a 1-D grid owns out[n, o, r, s]
    for the ``i``-th element in memory order, so the 32 lanes of a warp own 32 consecutive pixels
    of one output row and read input values ``stride`` apart in one row per tap (coalesced for
    stride 1).  All lanes of a warp (same n, o) read the same weight: a broadcast.  Zero padding
    is a bounds test per tap: a tap outside the input multiplies a zero (no padded copy; w·0 is NaN
    for a non-finite weight, as in torch's dense convolution and the tiled rungs).

Memory traffic (teaching number)
    Two global loads (an input value and a weight) per multiply-add: 0.5 FMA per load, for
    N·C_out·OH·OW·(C_in/groups)·KH·KW multiply-adds.  Each input value is needed by KH·KW output
    pixels of each output channel of its group; here every use is a separate load, served (at
    best) by the L1/L2 caches.  k02 makes that reuse explicit: shared memory and registers.
    ``rco`` > 1 (a config field, not in the lesson's presets but in "channels4") gives a thread
    ``rco`` output channels of one group at one pixel: each input value loaded once is used
    ``rco`` times — what the layers the tiled rungs do not take (stride 2, groups) run with.

Filter shape
    Read from the arguments at run time: one compiled kernel per (block size, rco, dtype) serves
    every filter size, stride, dilation and grouping.  The launcher falls back to this rung when
    a filter's staging does not fit the tiled rungs' shared memory.

Headline (H200, benchmarks/results/conv_h200.json): 0.75 TFLOP/s on N32 C64 56x56 3x3 p1, 0.03× cuDNN
"""

from __future__ import annotations

import dataclasses

from numba import cuda, int64, uint32, void

from ...runtime import Rung, TileConfig, cdiv, numba_dtype


@dataclasses.dataclass(frozen=True)
class Config(TileConfig):
    """A 1-D block of ``block_x`` threads, each ``rco`` output channels (of one group) at one pixel."""

    block_x: int = 256
    rco: int = 1

    def block(self):
        return (self.block_x,)

    def rules(self):
        yield ("rco", 1 <= self.rco <= 16, "1 <= rco <= 16 (a thread's accumulators stay in registers)")


#: "channels4": the general layers' preset on a GPU (stride 2, groups) when a group has >= 4 output channels
PRESETS = {"sim": Config(8), "default": Config(256), "channels4": Config(128, rco=4)}


def signature(dtype):
    """``void(x, w, bias, out, n, c_in, h, w, c_out, oh, ow, pad_top, pad_left, kh, kw,
    stride_h, stride_w, dil_h, dil_w, groups, has_bias)``: flat arrays as the tiled rungs'
    (``_common.signature``), then torch's parameters at run time."""
    t = numba_dtype(dtype)
    return void(t[::1], t[::1], t[::1], t[::1], *([int64] * 17))


def make_kernel(config: Config, dtype):
    DT = numba_dtype(dtype)
    RCO = config.rco

    def conv_nchw_k01_direct(x, w, bias, out, n_img, c_in, h, wd, c_out, oh_n, ow_n, pad_h, pad_w, kh, kw,
                             stride_h, stride_w, dil_h, dil_w, groups, has_bias):
        cpg_in = uint32(uint32(c_in) // uint32(groups))  # input channels per group
        cpg_out = uint32(uint32(c_out) // uint32(groups))
        slots_g = uint32((cpg_out + uint32(RCO - 1)) // uint32(RCO))  # runs of RCO channels per group
        slots = uint32(slots_g * uint32(groups))
        i = cuda.grid(1)
        if i < n_img * slots * oh_n * ow_n:
            # Element i in memory order (for RCO = 1: of out): consecutive threads own consecutive
            # output columns.  Offsets in unsigned 32 bits (the launcher keeps every array below
            # 2**31 elements; a 64-bit division is a long subroutine).
            u = uint32(i)
            ow = uint32(u % uint32(ow_n))
            t = uint32(u // uint32(ow_n))
            oh = uint32(t % uint32(oh_n))
            t = uint32(t // uint32(oh_n))  # = n * slots + slot
            slot = uint32(t % slots)
            n = uint32(t // slots)
            g = uint32(slot // slots_g)
            o0 = uint32(g * cpg_out + uint32(slot - g * slots_g) * uint32(RCO))  # first output channel
            o_end = uint32(uint32(g + uint32(1)) * cpg_out)  # the group's end
            k_size = uint32(cpg_in * uint32(kh) * uint32(kw))  # one output channel's weights
            r0 = uint32(oh * uint32(stride_h))  # the window's corner in the padded input
            c0 = uint32(ow * uint32(stride_w))
            upad_h, upad_w = uint32(pad_h), uint32(pad_w)
            acc = cuda.local.array(RCO, DT)
            for r in range(RCO):
                acc[r] = DT(0)
            for c in range(cpg_in):
                ci = uint32(g * cpg_in + uint32(c))
                x_chan = uint32(uint32(n * uint32(c_in) + ci) * uint32(h))  # row 0 of channel ci
                w_row = uint32(uint32(o0 * cpg_in + uint32(c)) * uint32(kh))
                for a in range(kh):
                    ip = uint32(r0 + uint32(a) * uint32(dil_h))  # row in the zero-padded input
                    row_in = ip >= upad_h and uint32(ip - upad_h) < h
                    x_row = uint32(uint32(x_chan + uint32(ip - upad_h)) * uint32(wd))  # (read only if row_in)
                    w_tap = uint32(uint32(w_row + uint32(a)) * uint32(kw))
                    for b in range(kw):
                        jp = uint32(c0 + uint32(b) * uint32(dil_w))
                        v = DT(0)  # a padding tap adds w·0 (NaN for an inf weight, as the other rungs)
                        if row_in and jp >= upad_w and uint32(jp - upad_w) < wd:
                            v = x[uint32(x_row + uint32(jp - upad_w))]
                        for r in range(RCO):  # unrolled: RCO is a constant
                            if r == 0 or uint32(o0 + uint32(r)) < o_end:
                                acc[r] += w[uint32(w_tap + uint32(b) + uint32(r) * k_size)] * v
            for r in range(RCO):
                o = uint32(o0 + uint32(r))
                if r == 0 or o < o_end:
                    res = acc[r]
                    if has_bias:
                        res += bias[o]
                    out[uint32(uint32(uint32(n * uint32(c_out) + o) * uint32(oh_n) + oh) * uint32(ow_n) + ow)] = res

    return conv_nchw_k01_direct


def geometry(config: Config, n: int, c_out: int, oh: int, ow: int, groups: int = 1):
    """One thread per ``rco`` output channels of a group at one pixel, in memory order."""
    slots = cdiv(c_out // groups, config.rco) * groups
    return (cdiv(n * slots * oh * ow, config.block_x),), config.block()


def jit_options(config: Config, dtype) -> dict:
    """Launch bounds asking for 1024 threads per SM (half of an H200 SM's 2048).
    Given the block size alone, ptxas 13 squeezes this kernel into 32 registers
    (full occupancy) and spills a few values around its divisions; told this
    occupancy target, it uses ~50 registers and no local memory."""
    return {"launch_bounds": (config.threads, max(1, min(32, 1024 // config.threads)))}


@dataclasses.dataclass(frozen=True, eq=False)
class DirectRung(Rung):
    """k01 takes torch's parameters from the call (``Call.direct_args``), not the tiled rungs' arguments."""

    def run(self, config, call) -> None:
        grid, block = self.geometry(config, *call.problem, call.groups)
        self.launch(config, call.dtype, grid, block, call.stream, *call.direct_args)


RUNG = DirectRung("k01_direct", Config, PRESETS, make_kernel, geometry, signature, jit_options)
