"""k08 — XOR swizzle: permute the columns of the transposed A tile per row; no padding at all.

What changed versus k06
    Logical element (k, m) of the transposed A tile is stored at column
    ``m ^ ((k % 8) << 2)`` of row k: bits 2–4 of the column index are XOR-ed
    with k.  XOR with a fixed value is a permutation of 0..BM−1 (BM a multiple
    of 32), so every element still has its own slot and no memory is wasted.

Banks, for the warp of the k06 example
    Lane (r, q), r ∈ {0..3}, q ∈ {0..7}, stores to word q·BM + (r ^ 4q); BM is
    a multiple of 32 so the bank is (r ^ 4q) % 32 = 4q + r (r < 4 only touches
    bits 0–1, 4q only bits 2–4): all 32 banks, once each — conflict-free,
    like PAD = 4 in k07 but with no extra words.
    Reads: thread reads m = tr·TM + i, i = 0..TM−1, at row kk.  XOR-ing bits
    2–4 keeps each aligned group of 4 columns together and in order
    ((m0 + i) ^ s = (m0 ^ s) + i for i < 4 when m0 is a multiple of 4), so
    the 128-bit reads of k06 survive.

Rule: BM % 32 == 0 (the XOR of bits 2–4 must stay inside the row).

Headline (H200, benchmarks/results/matmul_h200.json): 22.1 TFLOP/s at 4096³, 0.43× cuBLAS
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._blocked import BlockedConfig, geometry
from ._common import signature
from ._transposed import make_transposed_kernel


@dataclasses.dataclass(frozen=True)
class Config(BlockedConfig):
    def rules(self):
        yield ("bm", self.bm % 32 == 0, "bm % 32 == 0 (the swizzle permutes bits 2-4 of the column)")
        yield from super().rules()


PRESETS = {"sim": Config(bm=32, bn=4, bk=4, tm=4, tn=2), "default": Config()}


def make_kernel(config: Config, dtype):
    # column m of row k lives at m ^ ((k % 8) << 2); rows stay BM words wide
    return make_transposed_kernel(config, dtype, config.bm, True, "matmul_k08_swizzled")


RUNG = Rung("k08_swizzled", Config, PRESETS, make_kernel, geometry, signature)
