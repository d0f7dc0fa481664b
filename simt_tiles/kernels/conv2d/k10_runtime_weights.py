"""k10 — k05's register tiles with the filter read at run time: one compilation per filter *shape*, kept on disk.

What changed versus k05
    k05 compiles the filter's *values* in (each weight an immediate operand
    of its FFMA): every new filter costs seconds of compilation, so it could
    not be the default.  k10 keeps k05's kernel — patch loader, RY × RX
    register tile, each patch row loaded once, staged coalesced stores — and
    takes the values at launch instead.  Where they live decides the cost:

    * **Kernel parameters** (a NumPy filter).  The KH·KW weights are passed
      as a tuple of scalars: each is a kernel parameter, and parameters sit
      in constant bank 0.  An FFMA can read one operand straight from a
      constant bank (``FFMA R1, R2, c[0x0][0x390], R1``), so a weight costs
      no load and no register: the same instruction count as k05.  No upload
      either — the values travel with the launch.
    * **A device array staged in shared memory** (a CuPy/PyTorch/Numba
      filter, whose values are on the GPU: kernel parameters would need a
      copy back that waits for the stream).  Threads 0 … KH·KW − 1 copy it
      beside the patch, under the patch's barrier; each thread then reads the
      weights into registers once (broadcasts) — one register per weight.
    * **Kernel parameters at constant indices.**  A tuple read at a computed
      index is a switch over all of its elements (and the loops around it
      stop unrolling); so the kernel first copies the tuple into a local
      array, one generated line per weight (``make_unpack``), and the window
      loop indexes that with unrolled constants, as k05 indexes its constant
      array.

    The filter *shape*, the mode, the dtype and which of the two the kernel
    takes stay compile-time, so a new filter of a known shape costs nothing,
    and ``cache=True`` keeps each compiled kernel on disk (Numba keys it on
    the kernel's code and the constants it closes over): a fresh process
    loads it instead of compiling.

Zero taps, at run time
    scipy skips every tap with ``|w| <= 2**-52`` (``_common.TINY_WEIGHT``):
    a NaN or inf in the image spreads only along the other taps.  k05 drops
    those taps from the code.  Here a skipped tap differs from an added one
    (``0·x``) only where x is not finite, so the kernel keeps k05's loop
    with the skipped weights set to exactly 0 (the launcher for kernel
    parameters, the staging threads for a device array) and no test per
    tap, and branches, uniformly for the block, to a copy of it that tests
    each weight only when the filter has such a tap *and* the block's patch
    holds a NaN or inf (each thread scans its share of the patch;
    ``syncthreads_or`` combines).  Finite data never pays for the test; a
    filter without zero taps not even for the scan.  (Two copies of the
    loop: twice k05's compile time, paid once per machine.)

Memory traffic and banks
    As k05 (global: 1.10–1.31 loads per output; shared: its window rows).
    The staged weights are read as broadcasts: one address per warp.

Registers: ptxas keeps weights in registers in both kernels, so ``min_blocks`` (the budget
it is held to) is set per filter by :func:`for_source` — more weights, fewer blocks per SM.

Headline (H200, benchmarks/results/conv_default_h200.json, impl "k10_runtime_weights (NumPy filter)"): 3.92 TB/s on 8192² 3x3 reflect, 92% of copy
"""

from __future__ import annotations

import dataclasses
import enum
import functools

import numpy as np
from numba import boolean, cuda, int64, types, uint32, void

from ... import codegen
from ...runtime import Gate, cdiv, numba_dtype
from . import k05_register_tile_2d as k05
from ._common import TINY_WEIGHT, Binding, FilterCall, FilterRung, Mode, geometry, image_type, on_grid_z
from ._staging import (
    inline,
    make_patch_loader,
    make_patch_scan,
    make_tile_store,
    make_weight_stager,
    make_window_accumulator,
)



class Source(enum.IntEnum):
    """``Config.source``: where the kernel reads the filter."""

    PARAMS = 1  #: a tuple of KH·KW kernel parameters (a NumPy filter)
    STAGED = 2  #: a (KH, KW) device array, staged in shared memory by each block


PARAMS, STAGED = Source.PARAMS, Source.STAGED


@dataclasses.dataclass(frozen=True)
class Config(k05.Config):
    """k05's fields, and ``source``: :data:`PARAMS` — the filter comes as kernel parameters;
    :data:`STAGED` — as a device array each block stages in shared memory.  The launcher
    sets ``source`` (and, for STAGED, ``min_blocks``: :func:`staged_blocks`) from the filter."""

    source: Source = Source.PARAMS

    def rules(self):
        yield from super().rules()
        yield ("source", self.source in (PARAMS, STAGED),
               f"source is {PARAMS} (kernel parameters) or {STAGED} (a device array staged in shared memory)")

    def smem_bytes(self, itemsize):
        staged = self.kh * self.kw * itemsize if self.source == STAGED else 0
        return super().smem_bytes(itemsize) + staged


# A call replaces kh, kw, mode (and source, min_blocks: for_source); the presets choose tiles and
# what the compile gate builds — all 3 x 3 (the gate's signature has GATE_TAPS weight parameters)
PRESETS = {
    "sim": Config(block_x=2, block_y=2, rx=2, ry=3, kh=3, kw=3, mode=Mode.REFLECT),
    # k05's default: 32 × 4 threads of 6 × 4 outputs, 12 blocks per SM (≤ 40 registers)
    "default": Config(block_x=32, block_y=4, rx=4, ry=6, kh=3, kw=3, mode=Mode.CONSTANT, min_blocks=12),
    # the same with a device filter, staged in shared memory (its weights in registers too)
    "staged": Config(block_x=32, block_y=4, rx=4, ry=6, kh=3, kw=3, mode=Mode.REFLECT, min_blocks=10,
                     source=STAGED),
    # the default in mode "mirror", the most registers of the modes: its launch bounds are capped
    # (jit_options: 9 blocks, not 12) — a gate row for the cap
    "mirror": Config(block_x=32, block_y=4, rx=4, ry=6, kh=3, kw=3, mode=Mode.MIRROR, min_blocks=12),
}


#: registers a thread of k05's default tile needs (3 × 3, mode "constant"): its 12 blocks per SM
K05_REGISTERS = 40
#: registers the boundary code of a folding mode adds (a modulo per row and column): "wrap" 8,
#: "mirror" 24 (its fold: period 2n − 2, then a reflection) — the fewest without spills under the
#: H200's nvJitLink 13.0 (benchmarks/notes/conv2d.md, "Register rules")
MODE_REGISTERS = {int(Mode.MIRROR): 24, int(Mode.WRAP): 8}


@functools.lru_cache(maxsize=1024)  # per call: a filter shape seen before skips the validation
def for_source(config: Config, source: int) -> Config:
    """``config`` for a filter read from ``source``, its ``min_blocks`` (the register budget
    ptxas is held to) capped to what the filter's weights need: k05's 40 registers a thread,
    plus one per staged weight (held in registers), or, for kernel parameters, two per three
    weights beyond 3 × 3 (ptxas keeps many of them in registers); more in modes "mirror" and
    "wrap" (:data:`MODE_REGISTERS`) — :func:`registers`."""
    blocks = max(1, min(config.min_blocks, 65536 // (config.threads * registers(config, source))))
    return dataclasses.replace(config, source=source, min_blocks=blocks)


def registers(config: Config, source: int) -> int:
    """Registers a thread of the default tile needs for ``config``'s filter read from ``source``
    (float32): :func:`for_source`'s rule (the autotuner's space adds the tile's own, ``_tuning``)."""
    taps = config.kh * config.kw
    regs = K05_REGISTERS + (taps if source == STAGED else (0 if taps <= 9 else 2 * taps // 3))
    return regs + MODE_REGISTERS.get(int(config.mode), 0)


def make_unpack(kh: int, kw: int):
    """``unpack(wt, wl)``: the tuple ``wt`` of KH·KW weights into the (KH, KW) local array
    ``wl``, one line per weight (generated source, :mod:`simt_tiles.codegen`): a tuple read at
    a constant index is a kernel parameter, at a computed one a switch over all of them."""
    src = codegen.Source()
    with src.block("def unpack(wt, wl):"):
        for a in range(kh):
            src.line("; ".join(f"wl[{a}, {b}] = wt[{a * kw + b}]" for b in range(kw)))
    return inline(codegen.load_function("unpack", src.text()))


def make_kernel(config: Config, dtype, all_taps: bool = False, taps: int = 9, slices: bool = False):
    """The kernel for ``config`` and ``dtype``.  ``taps``: the length of the weights tuple
    (KH·KW for :data:`PARAMS`; the staged kernel ignores it).  ``all_taps``: count zero taps
    too (``correlate1d``): no scan, one loop.  ``slices``: for a stack of slices on grid z
    (a volume's middle axis, ``_common.on_grid_z``)."""
    RX, RY, KH, KW = config.rx, config.ry, config.kh, config.kw
    FROM_ARRAY = config.source == STAGED
    if not FROM_ARRAY and taps != KH * KW:
        raise ValueError(f"taps: expected {KH * KW} (a {KH}x{KW} filter); got {taps}")
    TH, TW = config.tile()
    SH, SW = TH + KH - 1, TW + KW - 1  # the patch (plain constants)
    SWP = 4 * cdiv(SW, 4)
    WIN, OUTS = RX + KW - 1, RY * RX
    BX, T = config.block_x, config.threads
    WSH = (KH, KW) if FROM_ARRAY else (1, 1)  # the staged filter's shared array (plain constants)
    DT = numba_dtype(dtype)
    ALL_TAPS = bool(all_taps)
    load_patch = make_patch_loader(config)
    patch_not_finite = make_patch_scan(T, SH, SW, dtype)
    stage_weights = make_weight_stager(T, KH, KW, KW, all_taps, dtype)
    store_tile = make_tile_store(config)
    add_all = make_window_accumulator(config, all_taps=True)  # k05's loop, no test per tap
    add_counted = make_window_accumulator(config, all_taps=False)  # a test per tap (uniform)
    unpack = make_unpack(KH, KW)
    # Numba keys a disk-cache entry on the kernel's code and the constants it closes over,
    # not on its jit options: the kernel reads the launch bounds so that they are in the key
    BOUNDS = jit_options(config, dtype)["launch_bounds"]

    def conv2d_k10_runtime_weights(image, wt, wa, out, cval, anchor_h, anchor_w, sparse):
        # the filter: wt, KH*KW kernel parameters (PARAMS; sparse: the host found a tap
        # with |w| <= 2**-52), or wa, a (KH, KW) device array of any strides (STAGED)
        if BOUNDS[1] < 1:  # never (see BOUNDS above)
            return
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        t = ty * uint32(BX) + tx
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH
        col0 = cuda.blockIdx.x * TW

        patch = cuda.shared.array((SH, SWP), DT)
        w_s = cuda.shared.array(WSH, DT)
        load_patch(image, patch, cval, row0 - anchor_h, col0 - anchor_w, tx, ty)
        tiny = 0
        if FROM_ARRAY:  # thread t stages taps t, t + T, ...
            tiny = stage_weights(wa, w_s, t)
        # RAW: the patch (and the staged filter) complete before anyone reads them; the
        # staged kernel learns on the way whether the filter has a tap to skip
        zero_tap = cuda.syncthreads_or(tiny) != 0
        if not FROM_ARRAY:
            zero_tap = sparse

        # a NaN/inf in this block's patch and a tap to skip: the loop that tests each weight
        checked = 0
        if not ALL_TAPS and zero_tap:  # uniform over the grid
            checked = cuda.syncthreads_or(patch_not_finite(patch, t))  # block-uniform

        acc = cuda.local.array(OUTS, DT)  # registers: indexed by unrolled constants only
        win = cuda.local.array(WIN, DT)
        wl = cuda.local.array((KH, KW), DT)  # the filter (constant indices: registers)
        if FROM_ARRAY:
            for a in range(KH):
                for b in range(KW):
                    wl[a, b] = w_s[a, b]
        else:
            unpack(wt, wl)  # kernel parameters: the compiler reads them from constant bank 0
        for o in range(OUTS):
            acc[o] = DT(0)
        r0 = ty * uint32(RY)
        c0 = tx * uint32(RX)
        if checked != 0:
            add_counted(patch, wl, acc, win, r0, c0)
        else:
            add_all(patch, wl, acc, win, r0, c0)

        cuda.syncthreads()  # WAR: every thread has read the patch before it is overwritten
        store_tile(out, patch, acc, row0, col0, tx, ty, h, w)  # stage, barrier, store rows

    return on_grid_z(conv2d_k10_runtime_weights) if slices else conv2d_k10_runtime_weights


def signature(dtype, all_taps: bool = False, taps: int = 9, slices: bool = False):
    """``void(image, wt, wa, out, cval, anchor_h, anchor_w, sparse)``: ``wt`` a tuple of
    ``taps`` weights (kernel parameters), ``wa`` a strided 2-D weights array — each kernel
    reads one and is given a placeholder for the other (the binding); image and out 3-D with
    ``slices``."""
    t, a = numba_dtype(dtype), image_type(dtype, slices)
    return void(a, types.UniTuple(t, taps), t[:, :], a, t, int64, int64, boolean)


#: blocks per SM at most in modes "mirror" and "wrap" (float32, the default tile's 128 threads): their
#: boundary code needs :data:`MODE_REGISTERS` more than k05's 40 (3 × 3, kernel parameters) — mirror 8
#: blocks (64 registers), wrap 10 (48)
WRAPPING_BLOCKS = {mode: 65536 // (128 * (K05_REGISTERS + extra)) for mode, extra in MODE_REGISTERS.items()}


def jit_options(config: Config, dtype) -> dict:
    """k05's launch bounds (float32; float64 holds twice the words), fewer blocks for "mirror"
    and "wrap" (:data:`WRAPPING_BLOCKS`), and the disk cache."""
    blocks = config.min_blocks if np.dtype(dtype).itemsize == 4 else 1
    blocks = min(blocks, WRAPPING_BLOCKS.get(int(config.mode), blocks))
    return {"launch_bounds": (config.threads, blocks), "cache": True}


#: the compile gate builds each preset with the presets' 3 x 3 filter as 9 parameters, for one image
#: and for a stack of slices (variant=None's rung: a volume's middle axis in one launch)
GATE_TAPS = 9
GATE_PARAMS = ({"taps": GATE_TAPS}, {"taps": GATE_TAPS, "slices": True})

#: the most weights k10 takes as kernel parameters (bytes): a larger NumPy filter is uploaded
#: and read as a device array (the parameter space is 4 KiB on older drivers)
MAX_PARAM_BYTES = 1024


def bind_runtime_weights(rung, spec, dtype, call: FilterCall):
    """The kernel and arguments for one call: a NumPy filter (up to :data:`MAX_PARAM_BYTES`) as
    kernel parameters (:data:`PARAMS`), anything else as a device array (:data:`STAGED`)."""
    w = call.weights.dev
    kh, kw = w.shape
    anchor_h, anchor_w = call.anchor
    if call.flipped:
        w = w[::-1, ::-1]
    if isinstance(w, np.ndarray) and w.nbytes > MAX_PARAM_BYTES:
        w = cuda.to_device(np.ascontiguousarray(w), stream=call.stream)
    spec = for_source(spec, PARAMS if isinstance(w, np.ndarray) else STAGED)
    if isinstance(w, np.ndarray):  # the values travel with the launch: kernel parameters
        counted = call.all_taps | (np.abs(w) > TINY_WEIGHT)  # scipy skips |w| <= 2**-52 (and NaN)
        values = tuple(np.where(counted, w, 0).ravel().tolist())  # a 0 adds nothing to finite values
        sparse = not bool(np.all(counted))  # the kernel checks its blocks for NaN/inf
        kernel = rung.kernel(spec, dtype, all_taps=call.all_taps, taps=kh * kw, **call.stacked)
        unread = call.image[0] if call.stacked else call.image  # wa's placeholder: any 2-D array
        return kernel, (call.image, values, unread, call.out, dtype.type(call.cval), anchor_h, anchor_w, sparse)
    # on the device: each block stages it in shared memory and finds zero taps itself
    kernel = rung.kernel(spec, dtype, all_taps=call.all_taps, taps=1, **call.stacked)
    return kernel, (call.image, (dtype.type(0),), w, call.out, dtype.type(call.cval), anchor_h, anchor_w,
                    False)


#: k10's calling convention: NumPy weights stay on the host (they travel as kernel parameters)
RUNTIME_WEIGHTS = Binding("weights at run time", False, bind_runtime_weights, host_weights=True)

RUNG = FilterRung("k10_runtime_weights", Config, PRESETS, make_kernel, geometry, signature, jit_options,
                  gate=Gate(GATE_PARAMS), bind=RUNTIME_WEIGHTS, slices=True)
