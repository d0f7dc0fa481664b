"""Peers: the libraries every benchmark group measures beside the rungs, in the same process.

A peer is a name, a test of whether it can run here, and a function that computes the
group's operation into the caller's output::

    @peer("matmul", "torch.matmul", available=has("torch"))
    def _torch_fp32(a, b, c):            # the matmul group's calling convention (below)
        ...

Adding a peer is one decorated function; a module of peers is picked up when it is listed
in :data:`PEER_MODULES` (a module that is missing is skipped, so a module may be listed
before it exists).  ``context=False`` marks a primary peer (same arithmetic as the rungs),
which ``--no-extra-peers`` keeps.  The group's harness loop checks each peer against the same
reference and bound as the rungs before timing it, and writes the same row schema
(``simt_tiles.bench.harness``).

Calling conventions, per group:

``matmul``
    ``run(a, b, c)`` with CuPy float32 arrays (``a`` M×K, ``b`` K×N, ``c`` M×N, C-contiguous)
    writes ``a @ b`` into ``c``.  ``precision`` "tf32" rows are checked against the TF32 bound.
    The first peer registered for a group is the one every row's ``vs_peer`` is divided by
    (cuBLAS FP32 for matmul).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Callable

__all__ = ["PEER_MODULES", "Peer", "baseline", "has", "peer", "peers"]

#: modules holding ``@peer`` functions, imported by :func:`peers` (missing ones skipped)
PEER_MODULES = ("simt_tiles.bench.matmul_peers",)


@dataclasses.dataclass(frozen=True)
class Peer:
    """One library implementation of a group's operation."""

    group: str
    name: str
    run: Callable
    available: Callable[[], bool]
    kind: str = "peer"  # "peer" (a library) or "tile" (this project's cuTile counterparts)
    precision: str = "fp32"
    context: bool = True  # a context peer; False: a primary one, kept by --no-extra-peers


_REGISTRY: list[Peer] = []


def has(module: str) -> Callable[[], bool]:
    """``available=`` test: the module is importable (without importing it)."""
    return lambda: importlib.util.find_spec(module) is not None


def peer(group: str, name: str, *, available: Callable[[], bool] = lambda: True, kind: str = "peer",
         precision: str = "fp32", context: bool = True):
    """Register the decorated function as a peer of ``group`` called ``name``."""

    def register(fn):
        if any(p.group == group and p.name == name for p in _REGISTRY):
            raise ValueError(f"peer: {group!r} already has a peer called {name!r}")
        _REGISTRY.append(Peer(group, name, fn, available, kind, precision, context))
        return fn

    return register


def _load() -> None:
    for mod in PEER_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:  # the module exists but one of its imports does not: a real error
                raise


def peers(group: str, *, only_available: bool = True) -> list[Peer]:
    """The registered peers of ``group`` in registration order (those that can run here)."""
    _load()
    return [p for p in _REGISTRY if p.group == group and (not only_available or p.available())]


def baseline(group: str) -> str | None:
    """The name of the peer every row of ``group`` is compared with (the first one registered)."""
    _load()
    return next((p.name for p in _REGISTRY if p.group == group), None)
