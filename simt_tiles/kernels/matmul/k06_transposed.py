"""k06 — A transposed in shared memory: wide conflict-free reads, but 8-way conflicting stores.

What changed versus k05
    The A tile is stored transposed, ``a_t[k, m]``, so the TM values of A a
    thread needs at step kk are TM *consecutive* words: the compiler turns
    them into 128-bit shared loads (``ld.shared.v4.f32``), as k05's B reads
    already are (k05's A reads, BK words apart, cannot be merged and are
    2-way conflicted).  Global reads of A stay coalesced along k; the
    transpose happens on the way into shared memory.

The bank-conflict lesson (the hazard this rung *creates*)
    Shared memory has 32 banks of 4 bytes; word address w sits in bank w % 32.
    With BK = 8, the 32 lanes of a warp load A elements e = lane + 32·p, i.e.
    row r = e // 8 (4 rows per warp) and k q = e % 8.  Lane (r, q) stores to
    ``a_t[q, r]`` = word q·BM + r.  BM = 128 is a multiple of 32, so the bank
    is r % 32 alone: the 8 lanes with the same r and q = 0..7 all hit one bank
    — an 8-way conflict, 8 serialized wavefronts per store instruction.
    Example, warp 0, p = 0: lanes 0–7 → bank 0, lanes 8–15 → bank 1,
    lanes 16–23 → bank 2, lanes 24–31 → bank 3.
    The reads ``a_t[kk, tr·TM + i]`` are broadcasts/consecutive: conflict-free.
    k07 (padding) and k08 (swizzling) remove the store conflicts.

Headline (H200, benchmarks/results/matmul_h200.json): 21.5 TFLOP/s at 4096³, 0.42× cuBLAS
"""

from __future__ import annotations

from ...runtime import Rung
from ._blocked import BlockedConfig, geometry
from ._common import signature
from ._transposed import make_transposed_kernel

Config = BlockedConfig

PRESETS = {"sim": Config(bm=4, bn=8, bk=4, tm=2, tn=2), "default": Config()}


def make_kernel(config: Config, dtype):
    # logical column m of a_t is physical column m; rows are BM words wide
    return make_transposed_kernel(config, dtype, config.bm, False, "matmul_k06_transposed")


RUNG = Rung("k06_transposed", Config, PRESETS, make_kernel, geometry, signature)
