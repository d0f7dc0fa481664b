"""The one registry of families: the compile gate, the demo, the bench, the autotuner, the docs and
the tests read it.

A family is a package under :mod:`simt_tiles.kernels` that exports ``FAMILY``, a :class:`Family`:
its rungs, its reference, the :class:`~simt_tiles.autotune.Tunable` of each tunable function, its
demo case, its aliasing cases and the hazard each rung's lesson introduces.  The registry holds one
:class:`Ladder` line per family — its name, its package, the public names ``simt_tiles`` exports
from it, the functions it can tune and its bench group — so that ``import simt_tiles`` and
``simt-tiles --help`` know them without importing the family (which loads Numba).  Adding a family is its folder and one
line of :data:`LADDERS` (or :func:`register`); adding a rung is one entry in its family's ``RUNGS``
(docs/design.md, "Adding a rung, a family, a peer").
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping  # (loaded at interpreter start: no import cost)

__all__ = ["Family", "AliasCase", "Ladder", "LADDERS", "ladder", "ladders", "families", "register",
           "aliasing_cases", "public_names", "bench_groups", "tunable_functions", "numpy_case"]


@dataclasses.dataclass(frozen=True)
class AliasCase:
    """One public function's call for the aliasing tests (``out=`` overlapping an input)."""

    call: Callable  #: ``call(*inputs, out=None)``
    names: tuple  #: the inputs' argument names, as the error names them
    shapes: tuple  #: the inputs' shapes
    out_shape: tuple
    #: the input ``out`` may be made from when it is the same array (None: none has out's shape)
    same: int | None = 0


@dataclasses.dataclass(frozen=True)
class Family:
    """What a family registers, in one place (its package's ``FAMILY``)."""

    name: str
    #: every kernel the compile gate builds and the demo runs, name → Rung, in ladder order
    rungs: Mapping[str, object]
    #: the NumPy/SciPy reference of its functions, with their error bounds (a module or callable)
    reference: object = None
    #: the :class:`simt_tiles.autotune.Tunable` of each function it can tune
    tunables: tuple = ()
    #: the demo's case: ``demo(rung name, dtype, ctx) -> (problem text, fn, check)`` (:func:`numpy_case`)
    demo: Callable | None = None
    #: public function name → :class:`AliasCase`
    aliasing: Mapping[str, AliasCase] = dataclasses.field(default_factory=dict)
    #: rung name → the hazard its lesson introduces (the docs' lesson pages)
    hazards: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Ladder:
    """One registry line: a family's name, its package, the names ``simt_tiles`` exports from it
    (loaded on first use), the functions :mod:`simt_tiles.autotune` can tune and the
    ``simt-tiles bench`` group that times it."""

    name: str
    module: str
    public: tuple[str, ...] = ()
    tunables: tuple[str, ...] = ()
    #: the bench group timing this family ("" for none; families may share one): the module
    #: ``simt_tiles.bench.<bench>``, or ``<module>.bench`` for a family outside this package
    bench: str = ""

    def family(self) -> Family:
        """The package's ``FAMILY`` (imports the family); a package that has not registered one yet
        is its ``RUNGS`` alone (the demo then reports its missing case)."""
        mod = importlib.import_module(self.module)
        return getattr(mod, "FAMILY", None) or Family(self.name, mod.RUNGS)

    def rungs(self) -> dict:
        """Every rung of this ladder, by name, in ladder order (imports the family)."""
        return dict(self.family().rungs)


LADDERS: tuple[Ladder, ...] = (
    Ladder("matmul", "simt_tiles.kernels.matmul", ("matmul", "MATMUL_VARIANTS"), ("matmul",), bench="matmul"),
    Ladder("matmul_mma", "simt_tiles.kernels.matmul.mma"),
    Ladder("conv2d", "simt_tiles.kernels.conv2d",
           ("correlate2d", "convolve2d", "CONV2D_VARIANTS", "correlate1d", "correlate_separable",
            "SEPARABLE_VARIANTS", "correlate", "convolve", "VOLUME_VARIANTS"), ("conv2d",), bench="conv"),
    Ladder("conv_nchw", "simt_tiles.kernels.conv_nchw", ("conv2d_nchw", "CONV_NCHW_VARIANTS"), ("conv2d_nchw",),
           bench="conv"),
    Ladder("softmax", "simt_tiles.kernels.softmax", ("softmax", "log_softmax", "softmax_backward", "SOFTMAX_VARIANTS"),
           bench="patterns"),
    Ladder("reduce", "simt_tiles.kernels.reduce", ("reduce", "REDUCE_OPS"), bench="patterns"),
    Ladder("elementwise", "simt_tiles.kernels.elementwise", ("vector_add", "bias_relu", "VECTOR_ADD_VARIANTS"),
           bench="patterns"),
)


def register(line: Ladder) -> None:
    """Add a family's line at run time (a family outside this package; the tests' toy family)."""
    global LADDERS
    if any(lad.name == line.name for lad in LADDERS):
        raise ValueError(f"ladder: {line.name!r} is registered already")
    LADDERS = (*LADDERS, line)


def ladder(name: str) -> Ladder:
    """The ladder called ``name``; ValueError names the choices."""
    for lad in LADDERS:
        if lad.name == name:
            return lad
    raise ValueError(f"ladder: expected one of {[lad.name for lad in LADDERS]}; got {name!r}")


def ladders() -> dict[str, dict]:
    """Every ladder's rungs: ``{ladder name: {rung name: Rung}}``."""
    return {lad.name: lad.rungs() for lad in LADDERS}


def families() -> dict[str, Family]:
    """Every family, by name (imports them all)."""
    return {lad.name: lad.family() for lad in LADDERS}


def aliasing_cases() -> dict[str, AliasCase]:
    """Every family's :class:`AliasCase`, by public function (imports the families)."""
    return {fn: case for family in families().values() for fn, case in family.aliasing.items()}


def public_names() -> dict[str, str]:
    """``{public name: the package defining it}`` over every line (no family is imported)."""
    return {name: lad.module for lad in LADDERS for name in lad.public}


def bench_groups() -> dict[str, str]:
    """``{bench group: its module}`` of the families, in registry order (no family is imported)."""
    groups = {}
    for lad in LADDERS:
        if lad.bench:
            inside = lad.module.startswith(f"{__package__}.")
            groups.setdefault(lad.bench, f"{__package__}.bench.{lad.bench}" if inside else f"{lad.module}.bench")
    return groups


def tunable_functions() -> dict[str, Ladder]:
    """``{function name: its ladder}`` for every tunable function (no family is imported)."""
    return {fn: lad for lad in LADDERS for fn in lad.tunables}


def numpy_case(problem: str, call: Callable, ref, bound):
    """A demo case of a NumPy-in, NumPy-out ``call``: ``(problem, fn, check)``, ``fn`` keeping the
    result for ``check`` (the element-wise bound check of :func:`simt_tiles.bounds.check_within`)."""
    from .bounds import check_within  # deferred: NumPy (`import simt_tiles` reads these lines, loads no NumPy)

    got = {}
    return problem, lambda: got.__setitem__("out", call()), lambda: check_within(got["out"], ref, bound)
