"""What the 2-D register-tile rungs (k05, k06, and k07–k09 built on k05) share on the host: config and launch geometry.

A ``block_x × block_y`` block computes an output tile of ``(ry·block_y) ×
(rx·block_x)``: each thread ``ry × rx`` outputs, ``rx`` consecutive columns
of ``ry`` consecutive rows.  ``kh``, ``kw`` and ``mode`` are compile-time
constants set by the launcher from the call (``_common.specialise``); a
preset's values only choose what the compile gate builds.

The two kernels also share device code — the patch loader (interior fast
path, edge path with the boundary mapping) and the staged, coalesced tile
store: :mod:`._staging`.
"""

from __future__ import annotations

import dataclasses

from ...runtime import TileConfig, grid_for
from ._common import Mode, mode_rule


@dataclasses.dataclass(frozen=True)
class RegisterTileConfig(TileConfig):
    """A ``block_x × block_y`` block; each thread computes ``ry × rx`` outputs.

    Subclasses give ``smem_bytes`` (what the rung stages) and may change the
    defaults."""

    block_x: int = 32
    block_y: int = 8
    rx: int = 3
    ry: int = 4
    kh: int = 7
    kw: int = 7
    mode: int = Mode.REFLECT

    def block(self):
        return (self.block_x, self.block_y)

    def tile(self) -> tuple[int, int]:
        """Output tile (rows, columns) of one block."""
        return (self.ry * self.block_y, self.rx * self.block_x)

    def rules(self):
        yield mode_rule(self)


def geometry(config: RegisterTileConfig, h: int, w: int):
    """One block per (ry·block_y) × (rx·block_x) output tile; grid x over columns."""
    th, tw = config.tile()
    return grid_for((w, h), (tw, th)), config.block()
