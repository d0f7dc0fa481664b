"""``simt-tiles bench``: verify-then-time benchmarks on a GPU (they refuse to fake numbers without one).

    simt-tiles bench matmul   [--sizes 4096 1000x1000x1000 ...] [--json P] [--md P] [--plot P]
                              the matmul ladder vs cuBLAS FP32 (+ torch, TF32 and cuTile for context)
    simt-tiles bench conv     [--size 8192] [--filters 3 5 7] [--only filter2d nchw] [--json P] ...
                              2-D filtering vs copy / cupyx / cuDNN; the NCHW layer vs cuDNN
    simt-tiles bench patterns [--only softmax reduce elementwise bias_tiles] [--cols ...] [--json P] ...
                              softmax, reduce, vector_add, bias_relu vs copy / torch / cupy
    simt-tiles bench softmax|reduce|elementwise|bias_tiles [options]   = patterns --only that group
    simt-tiles bench all [--out DIR]   matmul, conv, patterns; DIR/<group>_h200.{json,md,png}

Every group also measures the cuTile counterparts (``simt_tiles.tile``) when
cuda.tile is importable.  Also reachable as ``python benchmarks/bench_*.py``.
"""

from __future__ import annotations

import os
import sys

from .. import _probe

PATTERN_GROUPS = ("softmax", "reduce", "elementwise", "bias_tiles")
GROUPS = ("matmul", "conv", "patterns", *PATTERN_GROUPS, "all")
NO_GPU = ("simt-tiles bench: no CUDA GPU found. Benchmarks report GPU timings only and never run in "
          "the simulator; use `simt-tiles demo` to check the kernels here.")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    group, rest = argv[0], argv[1:]
    if group not in GROUPS:
        print(f"simt-tiles bench: expected one of {GROUPS}; got {group!r}", file=sys.stderr)
        return 2
    if group == "all":
        if rest[:1] == ["--out"] and len(rest) == 2:
            out = rest[1]
        elif rest:
            print(f"simt-tiles bench all: expected no options or --out DIR; got {rest}", file=sys.stderr)
            return 2
        else:
            out = None
    if _probe.select_backend():
        print(NO_GPU, file=sys.stderr)
        return 2
    from . import conv, matmul, patterns

    mains = {"matmul": matmul.main, "conv": conv.main, "patterns": patterns.main}
    if group in mains:
        return mains[group](rest)
    if group in PATTERN_GROUPS:
        return patterns.main(["--only", group, *rest])
    status = 0
    for name, fn in mains.items():
        args = []
        if out is not None:
            os.makedirs(out, exist_ok=True)
            stem = os.path.join(out, f"{name}_h200")
            args = ["--json", f"{stem}.json", "--md", f"{stem}.md", "--plot", f"{stem}.png"]
        status = fn(args) or status
    return status
