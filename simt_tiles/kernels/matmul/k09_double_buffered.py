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
    A_LOADS + B_LOADS prefetch registers per thread.

Does it pay on the H200?  See the measured effect in benchmarks/NOTES.md:
    with 2 blocks of 8 warps per SM the warp scheduler already hides much of
    the load latency by switching warps, so the gain is bounded by how often
    all resident warps wait at the same barrier.
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._blocked import geometry
from ._common import signature
from ._pipelined import make_pipelined_kernel
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


RUNG = Rung("k09_double_buffered", Config, PRESETS, make_kernel, geometry, signature)
