"""The ``simt-tiles`` command (also ``python -m simt_tiles``).

    simt-tiles demo            run every rung of every ladder once, check it, print a table
    simt-tiles compile-gate    compile every shipped config to sm_90 PTX, assemble it (nvJitLink) and report (no GPU needed)
    simt-tiles bench GROUP     verify, then time on a GPU (matmul, conv, patterns, softmax, ...)
    simt-tiles tune FUNCTION   check and time a function's candidate configs, cache the fastest (--show, --clear)
    simt-tiles tilecpp build   compile the CUDA Tile C++ counterparts (no GPU needed)

Each subcommand lives in its own module (:data:`SUBCOMMANDS`).  A module with
``add_arguments(parser)`` and ``run(args)`` gets its options parsed here (so ``--help``
works on any machine: no GPU is looked for until a command runs); a module with only
``main(argv)`` gets the rest of the command line.  Only the chosen subcommand's module
is imported, and Numba's backend (GPU or simulator) is chosen by that module when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

#: subcommand → (module, one line of help, environment set before the module is imported)
SUBCOMMANDS: dict[str, tuple[str, str, dict]] = {
    "demo": ("simt_tiles.demo", "run, check (and on a GPU time) every rung of every ladder once", {}),
    # compile_ptx needs Numba's real CUDA target (no GPU is needed for it)
    "compile-gate": ("simt_tiles.compile_gate",
                     "compile every shipped config to PTX (sm_90), assemble it with nvJitLink; no GPU needed",
                     {"NUMBA_ENABLE_CUDASIM": "0"}),
    "bench": ("simt_tiles.bench", "GPU benchmarks: verify, then time (refuses to run without a GPU)", {}),
    # listed only where their module exists
    "analyze": ("simt_tiles.analyze", "bank conflicts, coalescing and races of one rung, in the simulator",
                {"NUMBA_ENABLE_CUDASIM": "1"}),
    "exercise": ("simt_tiles.exercises", "graded course exercises, run in the simulator", {"NUMBA_ENABLE_CUDASIM": "1"}),
    "warm": ("simt_tiles.warm", "compile this GPU's default kernels into the disk cache, in parallel", {}),
    "tune": ("simt_tiles.autotune", "time a function's candidate configs on this GPU, cache the fastest", {}),
    "codegen": ("simt_tiles.codegen", "kernels written out as source files (the generated rungs)", {}),
    "tilecpp": ("simt_tiles.tilecpp._cli", "CUDA Tile C++ counterparts: build their cubins (no GPU needed), info", {}),
}


def available() -> dict[str, tuple[str, str, dict]]:
    """The subcommands whose module is part of this installation."""
    import importlib.util

    return {name: entry for name, entry in SUBCOMMANDS.items() if importlib.util.find_spec(entry[0]) is not None}


def _chosen(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; the options of the subcommand named in ``argv`` are filled in (that module is imported)."""
    p = argparse.ArgumentParser(prog="simt-tiles", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="simt-tiles COMMAND --help shows a command's options.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = _chosen(argv or [])
    for name, (module, text, env) in available().items():
        if name != chosen:
            sub.add_parser(name, help=text)
            continue
        os.environ.update(env)
        mod = importlib.import_module(module)
        if hasattr(mod, "add_arguments"):
            s = sub.add_parser(name, help=text, description=(mod.__doc__ or text).split("\n\n")[0])
            mod.add_arguments(s)
            s.set_defaults(_run=mod.run)
        else:  # main(argv) parses its own options, --help included
            s = sub.add_parser(name, help=text, add_help=False)
            s.set_defaults(_run=lambda args, mod=mod, name=name: _call_main(mod, name, args.rest), _passthrough=True)
    return p


def _call_main(mod, name: str, rest: list[str]) -> int:
    import inspect

    if inspect.signature(mod.main).parameters:
        return mod.main(rest)
    if rest in (["-h"], ["--help"]):
        print(f"usage: simt-tiles {name}\n\n{(mod.__doc__ or '').strip()}")
        return 0
    if rest:
        print(f"simt-tiles {name}: expected no arguments; got {rest}", file=sys.stderr)
        return 2
    return mod.main()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    before = dict(os.environ)
    try:
        parser = build_parser(argv)  # sets the chosen subcommand's environment (e.g. the simulator)
        args, rest = parser.parse_known_args(argv)
        if rest and not getattr(args, "_passthrough", False):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        args.rest = rest
        return int(args._run(args) or 0)
    finally:  # a caller in the same process (a test, a notebook) gets its environment back
        for key, value in (("NUMBA_ENABLE_CUDASIM", before.get("NUMBA_ENABLE_CUDASIM")),):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
