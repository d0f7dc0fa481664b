"""k07 — padding: widen each row of the transposed A tile so its stores spread over the banks.

What changed versus k06
    ``a_t`` rows are BM + PAD words wide instead of BM (the padded width is a
    precomputed constant, never ``BM + PAD`` written inside the kernel).
    Lane (r, q) of the k06 example now stores to word q·(BM + PAD) + r, bank
    (q·PAD + r) % 32.

Which pad
    A warp's 32 lanes cover r ∈ {0..3} (rows of A) × q ∈ {0..7} (k).
    * PAD = 1, the textbook "one extra column": bank (q + r) % 32 takes only
      11 values; bank 3 is hit by (r, q) = (0,3), (1,2), (2,1), (3,0): the
      8-way conflict drops to 4-way, not to zero.  It also breaks the 16-byte
      alignment of each row, so k06's 128-bit reads fall back to 32-bit.
    * PAD = 4 (one 16-byte access width): bank 4q + r covers 0..31 exactly
      once — conflict-free — and every row stays 16-byte aligned, so the wide
      reads survive.  Cost: BK·PAD extra words (8 × 4 × 4 B = 128 B a block).
    ``pad`` is a config field; the default is 4, the "sim" preset uses 1 and
    the benchmark measures both (benchmarks/notes/matmul.md).

Headline (H200, benchmarks/results/matmul_h200.json): 22.4 TFLOP/s at 4096³, 0.44× cuBLAS
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._blocked import BlockedConfig, geometry
from ._common import signature
from ._transposed import make_transposed_kernel


@dataclasses.dataclass(frozen=True)
class Config(BlockedConfig):
    """BlockedConfig plus the row padding of the transposed A tile (in elements)."""

    pad: int = 4

    def smem_bytes(self, itemsize):
        return super().smem_bytes(itemsize) + self.bk * self.pad * itemsize


PRESETS = {"sim": Config(bm=4, bn=8, bk=4, tm=2, tn=2, pad=1), "default": Config()}


def make_kernel(config: Config, dtype):
    width = config.bm + config.pad  # the padded width: a plain constant for the shape
    return make_transposed_kernel(config, dtype, width, False, "matmul_k07_padded")


RUNG = Rung("k07_padded", Config, PRESETS, make_kernel, geometry, signature)
