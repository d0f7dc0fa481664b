"""What the register-blocked rungs (k04 onwards) share: their configuration and launch geometry.

A block of ``threads`` threads computes a BM×BN tile of C, walking K in steps of
BK; each thread owns a TM×TN sub-tile of that (TN = 1 for the 1-D rung).  The
A tile (BM×BK) and the B tile (BK×BN) are loaded cooperatively: element ``e``
of a tile goes to thread ``e % threads`` in pass ``e // threads``, so every
thread loads the same number of elements and consecutive threads load
consecutive elements of a row (coalesced).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...runtime import TileConfig, grid_for


@dataclasses.dataclass(frozen=True)
class BlockedConfig(TileConfig):
    """BM×BN block tile, BK-deep K steps, TM×TN outputs per thread."""

    bm: int = 128
    bn: int = 128
    bk: int = 8
    tm: int = 8
    tn: int = 8

    def block(self):
        return ((self.bm // self.tm) * (self.bn // self.tn),)

    def smem_bytes(self, itemsize):
        return (self.bm * self.bk + self.bk * self.bn) * itemsize

    def rules(self):
        t = max(1, (self.bm // self.tm) * (self.bn // self.tn))
        return (
            ("tm", self.bm % self.tm == 0, "bm % tm == 0 (threads tile the block's rows)"),
            ("tn", self.bn % self.tn == 0, "bn % tn == 0 (threads tile the block's columns)"),
            ("bk", (self.bm * self.bk) % t == 0,
             "bm*bk % threads == 0 (every thread loads the same number of A elements)"),
            ("bn", (self.bk * self.bn) % t == 0,
             "bk*bn % threads == 0 (every thread loads the same number of B elements)"),
        )

    @property
    def a_loads(self) -> int:
        """A elements each thread loads per K step."""
        return self.bm * self.bk // self.threads

    @property
    def b_loads(self) -> int:
        return self.bk * self.bn // self.threads


def geometry(config: BlockedConfig, m: int, n: int, k: int):
    """One block per BM×BN tile of C: grid x over column tiles, y over row tiles."""
    return grid_for((n, m), (config.bn, config.bm)), config.block()


def u32(value: int):
    """A compile-time unsigned 32-bit constant for index arithmetic.

    Numba types Python ints as int64, and signed indices make every array
    access check for negative (wrap-around) indices.  Index arithmetic kept in
    uint32 needs no such check, is half as wide, and lets LLVM prove that
    consecutive shared-memory reads may be merged into one 128-bit load.
    """
    return np.uint32(value)
