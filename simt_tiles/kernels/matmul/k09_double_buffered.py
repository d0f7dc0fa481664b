"""k09 — double buffering: load tile t+1 from global memory while computing tile t.

What changed versus k08
    Shared memory holds two stages of each tile (one ``(2, BK, ·)`` array each:
    the simulator keys shared arrays by source line).  Each K step first
    *issues* the global loads of the next tile into registers, then computes
    the current tile from shared memory — the loads' latency (hundreds of
    cycles) is covered by BK·TM·TN multiply-adds — then stores the registers
    into the other stage.  One barrier per step instead of k08's two (the
    argument is in ``_pipelined.py``).  The thread→output mapping and the
    swizzled, 128-bit-read layout are k08's, in aligned groups of 4.

Cost
    Twice the shared memory (k08: 8 KiB; here 16 KiB at BM=BN=128, BK=8) and
    A_LOADS + B_LOADS prefetch registers per thread.  The k-step loop is now
    written so that LLVM unrolls it fully (``_pipelined.py``): 84% of the SASS
    instructions in the tile loop are FFMA (k08: 67% in its k-loop).  That
    costs registers — ~145 — so ``launch_bounds=(threads, 2)`` asks ptxas to
    fit in 128 and keep two blocks (16 warps) per SM.

Does it pay on the H200?  Measured (benchmarks/NOTES.md): the first version
    (loop not unrolled, 122 registers) ran 26.8 TFLOP/s at 4096³ vs 21.4 for
    k08 (+25%); unrolled *without* the register cap it fell to 23.5 (one block
    per SM: the latency hiding that double buffering buys was paid back in
    occupancy).  The shipped version has both.

Measured on the H200 (benchmarks/results/matmul_h200.json)
    29.1 TFLOP/s at 4096³, +33% over k08 (0.58× cuBLAS).
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._blocked import geometry
from ._common import signature
from ._pipelined import launch_bounds_options, make_pipelined_kernel
from .k08_swizzled import Config as SwizzledConfig


@dataclasses.dataclass(frozen=True)
class Config(SwizzledConfig):
    """k08's config; TM and TN in groups of 4 (one 128-bit read each); two stages."""

    def smem_bytes(self, itemsize):
        return 2 * super().smem_bytes(itemsize)

    def rules(self):
        yield ("tm", self.tm % 4 == 0, "tm % 4 == 0 (rows are read in aligned groups of 4)")
        yield ("tn", self.tn % 4 == 0, "tn % 4 == 0 (columns are read in aligned groups of 4)")
        yield from super().rules()


PRESETS = {"sim": Config(bm=32, bn=4, bk=4, tm=4, tn=4), "default": Config()}


def make_kernel(config: Config, dtype):
    return make_pipelined_kernel(config, dtype, "matmul_k09_double_buffered", warp_tiled=False)


RUNG = Rung("k09_double_buffered", Config, PRESETS, make_kernel, geometry, signature, launch_bounds_options)
