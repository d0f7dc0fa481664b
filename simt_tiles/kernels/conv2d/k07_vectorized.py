"""k07 — k05 with 128-bit global memory access: vector loads into an aligned patch, vector stores from registers.

What changed versus k05
    k05's inner loop is nearly all FFMA (24 outputs × 49 taps = 1176 of the
    ≈ 1215 instructions between its barriers, 7 × 7), but around it a thread
    spends ≈ 205 instructions loading its 31 patch elements (an LDG and an STS
    each, plus addresses) and ≈ 130 staging and storing its 24 outputs: ≈ 15
    of every 65 instructions per output.  A 7 × 7 filter is issue-bound on
    the H200 (see k05), so those are the instructions to remove:

    * **Vector loads** (:func:`simt_tiles.vector.load4`): the patch is copied
      in 4-element vectors, one ``LDG.128`` and one ``STS.128`` per 4 elements.
      A vector must start at an image column that is a multiple of 4, so the
      patch's left halo is rounded *up* to a multiple of 4 columns
      (``HL = 4·⌈anchor_w / 4⌉``) and the patch's width to whole vectors; a
      thread's window then starts ``S = HL − anchor_w`` columns into its
      patch columns.  S must be a compile-time constant (the window's register
      indices depend on it), so this rung compiles the **anchor** in as well
      as the filter values (correlate and convolve differ for even sizes).
      Thread (tx, ty) copies vectors tx + j·BX of rows ty + k·BY, so a row's
      address is computed once and its vectors are constant offsets from it
      (7 × 7: 34 vectors a row, the 32 lanes of a warp take 32 and two lanes
      the last two — an idle-lane instruction per row is cheaper than
      addressing each vector: numbering the patch's vectors and dealing them
      out in turn cost ≈ 24 instructions a vector, 64-bit row arithmetic).
    * **Vector stores from registers**: a thread's RX = 4 outputs of a row are
      consecutive, so it writes them with one ``STG.128`` — a warp's store
      covers 512 contiguous bytes, every sector whole.  k05 staged its
      outputs through shared memory because scalar stores of every RX-th word
      waste sectors; with vector stores the staging (an STS and an LDS per
      output and a barrier) goes.
    * The window row is read from the aligned patch with ``LDS.128`` as in
      k05: ``4·⌈(S + RX + KW − 1)/4⌉`` values (7 × 7, S = 1: 12 values, 3 loads;
      k05: 10 values, also 3 loads).

    When a vector path cannot be used — an edge block (its patch leaves the
    image), a width that is not a multiple of 4 (rows would not start 16-byte
    aligned), or arrays whose data do not start 16-byte aligned (the launcher
    checks: ``vector.aligned``) — the block takes k05's paths: the scalar
    patch loader with the boundary mapping, and staged stores.

Memory traffic (teaching number)
    Global, as k05: (TH + KH − 1)·(TW + HL + HR) loads for TH·TW outputs
    (the halo rounded to whole vectors: 7 × 7 default, 30 × 136 for 24 × 128
    outputs, 1.33 per output, the extra columns L2 hits), one store per
    output.  Instructions per thread moving them (7 × 7 float32): 8 LDG.128 +
    8 STS.128 + ≈ 5 each to number and address them, 6 STG.128 — against
    k05's 31 LDG + 31 STS and 24 STS + 24 LDS + 24 STG.

Shared-memory banks
    ``STS.128`` of a warp: consecutive lanes write consecutive 16-byte
    vectors of a row (a row change mid-warp only moves to a new 16-byte
    boundary): 4 wavefronts per 512 bytes, the minimum.  Window loads: as k05.

Alignment promise (simt_tiles.vector)
    Vector addresses must be multiples of 16 bytes: the image's and out's data
    (checked by the launcher, passed as ``aligned``), row pitch w·itemsize
    (w % 4 == 0, checked in the kernel), a vector's column (a multiple of 4 by
    construction) and the patch (``alignment=16``, pitch a multiple of 4).  The
    simulator's ``load4``/``store4`` check every access.
The lesson, measured (benchmarks/notes/conv2d.md): k07 issues 7% fewer instructions
than k05 for 7 × 7 but is no faster — the kernel is bounded by the latency of
each block's patch load, not by instruction count.  Vector access is the right
move for a memory-bound kernel; what this one needs is overlap (k08).

Headline (H200, benchmarks/results/conv_h200.json): 2.87 TB/s on 8192² 7x7 constant, 67% of copy
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import boolean, cuda, uint32, uint64, void

from ...runtime import ConfigError, SMEM_ALIGN, cdiv, numba_dtype
from ...vector import load4, store4
from . import k05_register_tile_2d as k05
from ._common import CONSTANT_VECTOR, FilterRung, Mode, gate_filter, geometry
from ._staging import make_output_store, make_patch_loader, make_window_accumulator

VEC = 4  # elements per vector access (float32: 16 bytes; float64: two 16-byte halves)


@dataclasses.dataclass(frozen=True)
class Config(k05.Config):
    """k05's fields (``block_x × block_y`` threads of ``ry × rx`` outputs,
    ``kh``, ``kw``, ``mode``, ``min_blocks``); ``rx`` must be a multiple of 4
    (a thread's outputs of a row are whole vectors)."""

    def rules(self):
        yield from super().rules()
        yield ("rx", self.rx % VEC == 0, f"rx is a multiple of {VEC} (one vector store per 4 outputs)")

    def smem_bytes(self, itemsize):
        th, tw = self.tile()
        # the anchor is kw // 2 (correlate) or (kw - 1) // 2 (convolve): the wider patch
        pitch = max(patch_pitch(tw, self.kw, left_halo(a)[1]) for a in (self.kw // 2, (self.kw - 1) // 2))
        return (th + self.kh - 1) * pitch * itemsize


def left_halo(anchor_w: int) -> tuple[int, int]:
    """``(HL, S)``: the patch's left halo rounded up to whole vectors, and the
    columns between its start and the first column a window reads."""
    hl = VEC * cdiv(anchor_w, VEC)
    return hl, hl - anchor_w


def patch_pitch(tw: int, kw: int, s: int) -> int:
    """Row pitch of the patch: S + the tile + the filter's halo, in whole vectors."""
    return VEC * cdiv(s + tw + kw - 1, VEC)


PRESETS = {
    "sim": Config(block_x=2, block_y=2, rx=4, ry=2, kh=3, kw=2, mode=Mode.REFLECT),
    # k05's default shape (32 × 4 threads of 6 × 4 outputs, tile 24 × 128), ≤ 48 registers
    # (ptxas: 80 unbounded — all of a thread's 16 vector loads in flight — 48 without spills)
    "default": Config(block_x=32, block_y=4, rx=4, ry=6, kh=7, kw=7, mode=Mode.CONSTANT, min_blocks=10),
}


@dataclasses.dataclass(frozen=True)
class PatchLayout:
    """The compile-time constants of the aligned patch (k07, k08): the anchor ``(AH, AW)``,
    the left halo ``HL`` (whole vectors) and the window shift ``S``, the patch's rows ``SH``
    and pitch ``SWP``, its vectors per row ``VROW``, the register window ``WIN`` (whole
    vectors), and the filter ``W`` compiled in."""

    AH: int
    AW: int
    HL: int
    S: int
    SH: int
    SWP: int
    VROW: int
    WIN: int
    W: np.ndarray


def patch_layout(config: Config, dtype, weights=None, anchor=None) -> PatchLayout:
    """Check ``config.rx``, the ``anchor`` (None: centred) and the ``weights`` (None: the
    compile gate's filter) and lay out the patch for them."""
    if config.rx % VEC:
        raise ConfigError(f"config.rx: expected a multiple of {VEC}; got {config.rx}")
    KH, KW = config.kh, config.kw
    TH, TW = config.tile()
    AH, AW = (KH // 2, KW // 2) if anchor is None else (int(anchor[0]), int(anchor[1]))
    if not (0 <= AH < KH and 0 <= AW < KW):
        raise ValueError(f"anchor: expected (0..{KH - 1}, 0..{KW - 1}); got {anchor}")
    W = gate_filter(KH, KW, dtype) if weights is None else weights
    if W.shape != (KH, KW) or W.dtype != dtype:
        raise ValueError(f"weights: expected a {KH}x{KW} {dtype} array; got {W.shape} {W.dtype}")
    HL, S = left_halo(AW)
    SWP = patch_pitch(TW, KW, S)  # whole vectors (the loaders fill the first S + TW + KW - 1)
    return PatchLayout(AH=AH, AW=AW, HL=HL, S=S, SH=TH + KH - 1, SWP=SWP, VROW=SWP // VEC,
                       WIN=VEC * cdiv(S + config.rx + KW - 1, VEC), W=W)


def make_kernel(config: Config, dtype, weights=None, anchor=None, all_taps=False):
    """The kernel for ``config``, ``dtype``, the filter ``weights`` (a
    ``kh × kw`` NumPy array of ``dtype``) and its ``anchor`` ``(row, column)``,
    both compiled in; None: the compile gate's filter, centred."""
    lay = patch_layout(config, dtype, weights, anchor)
    RX, RY, KW = config.rx, config.ry, config.kw
    BX, BY = config.block_x, config.block_y
    TH, TW = config.tile()
    AH, HL, S, SH, SWP, VROW, WIN, W = lay.AH, lay.HL, lay.S, lay.SH, lay.SWP, lay.VROW, lay.WIN, lay.W
    VCOLS = cdiv(VROW, BX)  # vectors of a row one thread copies
    LROWS = cdiv(SH, BY)  # rows one thread copies
    OUTS = RY * RX
    DT = numba_dtype(dtype)
    load_patch = make_patch_loader(config, sw=S + TW + KW - 1)  # edge blocks (scalar, mapped)
    store_outputs = make_output_store(config)  # vectors from registers, or staged (edge blocks)
    accumulate = make_window_accumulator(config, shift=S, win=WIN, all_taps=all_taps)

    def conv2d_k07_vectorized(image, out, cval, aligned):
        w_c = cuda.const.array_like(W)
        tx = uint32(cuda.threadIdx.x)
        ty = uint32(cuda.threadIdx.y)
        h, w = image.shape
        row0 = cuda.blockIdx.y * TH
        col0 = cuda.blockIdx.x * TW
        top = row0 - AH  # the patch's first image row and (vector-aligned) column
        left = col0 - HL
        vector = aligned and w % VEC == 0  # rows start 16-byte aligned

        patch = cuda.shared.array((SH, SWP), DT, alignment=SMEM_ALIGN)

        # --- load the patch: whole vectors inside the image, else k05's loader -------
        if vector and top >= 0 and top + SH <= h and left >= 0 and left + SWP <= w:
            # Thread (tx, ty) copies vectors tx + j*BX of rows ty + k*BY: a row's address
            # once per row, its vectors at constant offsets from it (as k05's loader).
            first = uint64(left) + uint64(tx * uint32(VEC))
            for k in range(LROWS):
                r = ty + uint32(k * BY)
                if (k + 1) * BY <= SH or r < SH:
                    src = image[uint64(top) + uint64(r)]
                    dst = patch[r]
                    for j in range(VCOLS):
                        c = tx + uint32(j * BX)
                        if (j + 1) * BX <= VROW or c < VROW:
                            a, b, e, f = load4(src, first + uint64(j * BX * VEC))
                            store4(dst, c * uint32(VEC), a, b, e, f)
        else:
            load_patch(image, patch, cval, top, left, tx, ty)
        cuda.syncthreads()  # RAW: the patch is complete before anyone reads it

        # --- RY x RX outputs per thread: k05's loop, window shifted by S -------------
        acc = cuda.local.array(OUTS, DT)
        win = cuda.local.array(WIN, DT)
        for o in range(OUTS):
            acc[o] = DT(0)
        r0 = ty * uint32(RY)
        c0 = tx * uint32(RX)
        accumulate(patch, w_c, acc, win, r0, c0)

        # --- store: one vector per 4 outputs from registers, or k05's staged rows ----
        store_outputs(out, patch, acc, row0, col0, tx, ty, h, w, vector)  # (_staging)

    return conv2d_k07_vectorized


def signature(dtype):
    """``void(image, out, cval, aligned)``: no weights and no anchors (compiled
    in); ``aligned``: both arrays' data start 16-byte aligned."""
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[:, ::1], t, boolean)


def jit_options(config: Config, dtype) -> dict:
    """``launch_bounds``: ``min_blocks`` for float32 only — a float64 thread holds twice the
    words (the default's 48-register cap spills 2 KB of float64 accumulators; unbounded: 106)."""
    return {"launch_bounds": (config.threads, config.min_blocks if np.dtype(dtype).itemsize == 4 else 1)}

#: launch through ``_common.constant_filter_kernel`` with the anchor (the public functions do)
RUNG = FilterRung("k07_vectorized", Config, PRESETS, make_kernel, geometry, signature, jit_options, bind=CONSTANT_VECTOR)

