"""The one registry of ladders: the compile gate, the demo, the tests and the bench read it.

A ladder is a family package under :mod:`simt_tiles.kernels` that exports its rungs
(``RUNGS``: name → :class:`~simt_tiles.runtime.Rung`, in ladder order).  Adding a
family means one :class:`Ladder` line here; adding a rung means one entry in its
family's ``RUNGS`` (docs/design.md, "Adding a rung, a family, a peer").
"""

from __future__ import annotations

import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class Ladder:
    """A family of rungs: its name, its package and the ``RUNGS``-style dicts it exports."""

    name: str
    module: str
    rung_dicts: tuple[str, ...] = ("RUNGS",)

    def rungs(self) -> dict:
        """Every rung of this ladder, by name, in ladder order (imports the family)."""
        mod = importlib.import_module(self.module)
        out: dict = {}
        for attr in self.rung_dicts:
            out.update(getattr(mod, attr))
        return out


LADDERS: tuple[Ladder, ...] = (
    Ladder("matmul", "simt_tiles.kernels.matmul"),
    Ladder("matmul_mma", "simt_tiles.kernels.matmul.mma", ("MMA_RUNGS",)),
    Ladder("conv2d", "simt_tiles.kernels.conv2d", ("RUNGS", "SEPARABLE_RUNGS")),
    Ladder("conv_nchw", "simt_tiles.kernels.conv_nchw"),
    Ladder("softmax", "simt_tiles.kernels.softmax"),
    Ladder("reduce", "simt_tiles.kernels.reduce"),
    Ladder("elementwise", "simt_tiles.kernels.elementwise"),
)


def ladder(name: str) -> Ladder:
    """The ladder called ``name``; ValueError names the choices."""
    for lad in LADDERS:
        if lad.name == name:
            return lad
    raise ValueError(f"ladder: expected one of {[lad.name for lad in LADDERS]}; got {name!r}")


def ladders() -> dict[str, dict]:
    """Every ladder's rungs: ``{ladder name: {rung name: Rung}}``."""
    return {lad.name: lad.rungs() for lad in LADDERS}
