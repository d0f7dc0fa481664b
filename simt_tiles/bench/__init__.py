"""Verify, then time, on a GPU: simt-tiles bench GROUP (never in the simulator: no fake numbers).

Groups (``simt-tiles bench GROUP --help`` lists each one's options):

    matmul        the matmul ladder vs cuBLAS FP32 (+ the other peers of simt_tiles.bench.peers)
    conv          2-D filtering vs copy / cupyx / cuDNN; the NCHW layer vs cuDNN
    patterns      softmax, reduce, vector_add, bias_relu vs copy / torch / cupy
    softmax, reduce, elementwise, bias_tiles     one part of patterns
    tile          the SIMT-vs-Tile table: best rung, default call, cuTile, Tile C++, Triton,
                  cuda.compute and the library on each problem, with lines of kernel code
    dispatch      host time per call of every public function, beside CuPy/PyTorch and a bare Numba launch
    soak          --minutes N --threads T --streams S: every public function under load, every result checked
    all           the families' groups (matmul, conv and patterns), each into DIR/<group>_<device>.{json,md,png}

The families' groups come from the registry (each ``registry.Ladder`` names its ``bench`` group), the
others from :data:`OTHER_GROUPS`; a group module has ``HELP``, ``add_arguments`` and ``run``.

Every implementation is checked against its reference and bound before it is timed, with
one harness (``simt_tiles.bench.harness``) and one row schema; ``--out DIR`` names the
results after the device (``matmul_h200.json`` on an H200).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import _probe, registry

#: the groups that time no one family: group → module of simt_tiles.bench (the families' groups
#: come from their registry lines, :func:`simt_tiles.registry.bench_groups`)
OTHER_GROUPS = {"tile": "tile_table", "dispatch": "dispatch", "soak": "soak"}
NO_GPU = ("simt-tiles bench: no CUDA GPU found. Benchmarks report GPU timings only and never run in "
          "the simulator; use `simt-tiles demo` to check the kernels here.")


def groups() -> dict[str, tuple[str, str | None]]:
    """Every group, in ``--help`` order: group → (its module, the part of it the group runs, None for
    all). The families' groups come first, each followed by its module's ``SUBGROUPS``; the
    ``all`` group is not listed (it runs the families' groups)."""
    found = {}
    for group, module in registry.bench_groups().items():
        found[group] = (module, None)
        for part in getattr(importlib.import_module(module), "SUBGROUPS", ()):  # imports no Numba
            found[part] = (module, part)
    return {**found, **{group: (f"{__name__}.{module}", None) for group, module in OTHER_GROUPS.items()}}


def _module(group: str):
    return importlib.import_module(groups()[group][0])


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``bench`` subcommand's groups (importing a group module imports no Numba)."""
    sub = p.add_subparsers(dest="group", metavar="GROUP", required=True)
    for group, (module, part) in groups().items():
        mod = importlib.import_module(module)
        text = mod.HELP if part is None else f"{module.rsplit('.', 1)[-1]}, {part} only"
        g = sub.add_parser(group, help=text, description=mod.__doc__.split("\n\n")[0])
        mod.add_arguments(g) if part is None else mod.add_arguments(g, only=part)
    families = ", ".join(registry.bench_groups())
    a = sub.add_parser("all", help=f"{families}: each into DIR/<group>_<device>.{{json,md,png}}")
    a.add_argument("--out", metavar="DIR", help="where the results go (default: print only)")


def run(args) -> int:
    """Check for a GPU (only now: help works anywhere), then run the group(s)."""
    if _probe.select_backend():
        print(NO_GPU, file=sys.stderr)
        return 2
    if args.group != "all":
        return _module(args.group).run(args)
    status = 0
    for group in registry.bench_groups():
        p = argparse.ArgumentParser()
        _module(group).add_arguments(p)
        sub_args = p.parse_args(["--out", args.out] if args.out else [])
        status = _module(group).run(sub_args) or status
    return status


def main(argv: list[str] | None = None) -> int:
    """``simt-tiles bench ...`` without the rest of the command line."""
    p = argparse.ArgumentParser(prog="simt-tiles bench", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        args = p.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    return run(args)
