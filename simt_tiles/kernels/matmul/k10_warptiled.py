"""k10 — warp tiling (the top rung): each warp owns a WM×WN tile, its lanes a strided 8×8 slice.

What changed versus k09
    The block is split into warp tiles.  Inside a warp's WM×WN tile the 32
    lanes form an LM×LN grid (8×4 for 64×32 with TM=TN=8) and lane (lm, ln)
    owns TM/4 × TN/4 groups of 4×4 outputs spaced LM·4 rows and LN·4 columns
    apart — rather than one contiguous 8×8 block.  Why it pays:
    * shared-memory reads: for each 128-bit read a warp touches LN (B) or
      LM (A) distinct 16-byte groups — at most 8, 128 B, one wavefront — where
      k09's mapping touches 16 groups of B (two wavefronts).  Measured with
      Nsight Compute at 1024³: 6.3 M shared-load wavefronts instead of 10.5 M;
    * each warp's footprint in the tiles is compact, so its reads stay in a
      few rows of each bank.

Other tricks, all plain Numba
    * unsigned 32-bit index arithmetic (``_blocked.u32``): no negative-index
      checks, narrower integer ops, and provably consecutive addresses;
    * 16-byte-aligned shared arrays (``runtime.SMEM_ALIGN``) so groups of 4
      floats are read with ``ld.shared.v4.f32``;
    * double buffering, the fully unrolled k-loop, ``launch_bounds=(threads, 2)``
      and the swizzled layout from k09/k08.

Rules: wm·wn = 32·tm·tn (a warp is 32 lanes), tm, tn multiples of 4,
bm % wm == 0, bn % wn == 0, bm % 32 == 0 (the swizzle).

Measured on the H200 (benchmarks/results/matmul_h200.json)
    31.2 TFLOP/s at 4096³, +7% over k09: 0.62× cuBLAS FP32 (target 0.85×:
    not reached — benchmarks/NOTES.md says what limits it); 0.53× geometric
    mean over the size list.
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._blocked import BlockedConfig, geometry
from ._common import signature
from ._pipelined import launch_bounds_options, make_pipelined_kernel


@dataclasses.dataclass(frozen=True)
class Config(BlockedConfig):
    """BM×BN block, BK deep; warps of WM×WN; TM×TN outputs per thread."""

    bm: int = 128
    bn: int = 128
    bk: int = 8
    wm: int = 64
    wn: int = 32
    tm: int = 8
    tn: int = 8
    #: the second launch_bounds number for float32: blocks per SM that ptxas must
    #: leave registers for (float64 always asks for 1)
    min_blocks: int = 2

    def block(self):
        return ((self.bm // self.wm) * (self.bn // self.wn) * 32,)

    def smem_bytes(self, itemsize):
        return 2 * (self.bm * self.bk + self.bk * self.bn) * itemsize

    def rules(self):
        yield ("wm", self.wm * self.wn == 32 * self.tm * self.tn, "wm*wn == 32*tm*tn (32 lanes per warp)")
        yield ("wm", self.bm % self.wm == 0 and self.wm % self.tm == 0, "bm % wm == 0 and wm % tm == 0")
        yield ("wn", self.bn % self.wn == 0 and self.wn % self.tn == 0, "bn % wn == 0 and wn % tn == 0")
        yield ("tm", self.tm % 4 == 0, "tm % 4 == 0 (rows are read in aligned groups of 4)")
        yield ("tn", self.tn % 4 == 0, "tn % 4 == 0 (columns are read in aligned groups of 4)")
        yield ("bm", self.bm % 32 == 0, "bm % 32 == 0 (the swizzle permutes bits 2-4 of the column)")
        t = max(1, (self.bm // self.wm) * (self.bn // self.wn) * 32)
        yield ("bk", (self.bm * self.bk) % t == 0, "bm*bk % threads == 0 (equal A loads per thread)")
        yield ("bn", (self.bk * self.bn) % t == 0, "bk*bn % threads == 0 (equal B loads per thread)")


PRESETS = {
    "sim": Config(bm=32, bn=32, bk=4, wm=32, wn=32, tm=8, tn=4),
    "default": Config(),
}


def jit_options(config: Config, dtype) -> dict:
    return launch_bounds_options(config, dtype, config.min_blocks)


def make_kernel(config: Config, dtype):
    return make_pipelined_kernel(config, dtype, "matmul_k10_warptiled", warp_tiled=True)


RUNG = Rung("k10_warptiled", Config, PRESETS, make_kernel, geometry, signature, jit_options)
