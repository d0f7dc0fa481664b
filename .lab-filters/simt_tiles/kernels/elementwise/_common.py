"""Config shared by the 1-D elementwise rungs."""

from __future__ import annotations

import dataclasses

from ...runtime import TileConfig


@dataclasses.dataclass(frozen=True)
class StreamConfig(TileConfig):
    """``threads`` per block, ``items`` elements per thread per grid step, at most
    ``max_blocks`` blocks (the grid strides over longer arrays)."""

    threads: int = 256
    items: int = 1
    max_blocks: int = 1056  # 132 SMs × 8 resident blocks of 256 threads

    def block(self):
        return (self.threads,)
