"""simt-tiles tilecpp — the CUDA Tile C++ counterparts: build their cubins (no GPU needed), or
say where they are and whether they can run here.

    simt-tiles tilecpp build [--force] [--verbose]   compile src/*.cu into the cache folder
    simt-tiles tilecpp info                          the toolchain, the cubins, available()
"""

from __future__ import annotations

import sys

from . import _build, available, build


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="compile the .cu sources to sm_90 cubins (needs the CUDA 13.3+ toolchain)")
    b.add_argument("--force", action="store_true", help="recompile every source, even an up-to-date one")
    b.add_argument("--verbose", "-v", action="store_true", help="print each nvcc command and cubin")
    sub.add_parser("info", help="the toolchain, the cubins' folder, and whether the kernels can run here")


def run(args) -> int:
    if args.action == "build":
        try:
            path = build(force=args.force, verbose=args.verbose)
        except _build.ToolchainError as exc:
            print(f"simt-tiles tilecpp build: {exc}", file=sys.stderr)
            return 1
        print(path)
        return 0
    try:
        print(f"toolchain: {_build.toolchain()}")
    except _build.ToolchainError as exc:
        print(f"toolchain: none ({exc})")
    print(f"cubins: {_build.built_dir() or 'not built'}")
    ok, why = available()
    print(f"available: {ok}{'' if ok else f' ({why})'}")
    return 0
