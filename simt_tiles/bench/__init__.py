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
    all           matmul, conv and patterns, each into DIR/<group>_<device>.{json,md,png}

Every implementation is checked against its reference and bound before it is timed, with
one harness (``simt_tiles.bench.harness``) and one row schema; ``--out DIR`` names the
results after the device (``matmul_h200.json`` on an H200).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import _probe

PATTERN_GROUPS = ("softmax", "reduce", "elementwise", "bias_tiles")
#: group → (module of simt_tiles.bench, one line of help)
GROUP_MODULES = {
    "matmul": ("matmul", "the matmul ladder vs cuBLAS FP32 and the other registered peers"),
    "conv": ("conv", "2-D filtering and the NCHW layer vs copy / cupyx / cuDNN"),
    "patterns": ("patterns", "softmax, reduce, vector_add, bias_relu vs copy / torch / cupy"),
    **{g: ("patterns", f"patterns, {g} only") for g in PATTERN_GROUPS},
    "tile": ("tile_table", "the SIMT-vs-Tile table (every system per problem, lines of kernel code)"),
    "dispatch": ("dispatch", "host time per call of every public function (CuPy/PyTorch/Numba arrays) vs peers"),
    "soak": ("soak", "minutes of threads x streams x every public function, every result checked, memory sampled"),
}
GROUPS = (*GROUP_MODULES, "all")
NO_GPU = ("simt-tiles bench: no CUDA GPU found. Benchmarks report GPU timings only and never run in "
          "the simulator; use `simt-tiles demo` to check the kernels here.")


def _module(group: str):
    return importlib.import_module(f".{GROUP_MODULES[group][0]}", __name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``bench`` subcommand's groups (importing a group module imports no Numba)."""
    sub = p.add_subparsers(dest="group", metavar="GROUP", required=True)
    for group, (_, text) in GROUP_MODULES.items():
        mod = _module(group)
        g = sub.add_parser(group, help=text, description=mod.__doc__.split("\n\n")[0])
        if group in PATTERN_GROUPS:
            mod.add_arguments(g, only=group)
        else:
            mod.add_arguments(g)
    a = sub.add_parser("all", help="matmul, conv and patterns, each into DIR/<group>_<device>.{json,md,png}")
    a.add_argument("--out", metavar="DIR", help="where the results go (default: print only)")


def run(args) -> int:
    """Check for a GPU (only now: help works anywhere), then run the group(s)."""
    if _probe.select_backend():
        print(NO_GPU, file=sys.stderr)
        return 2
    if args.group != "all":
        return _module(args.group).run(args)
    status = 0
    for group in ("matmul", "conv", "patterns"):
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
