"""``simt-tiles bench``: verify-then-time benchmarks on a GPU (they refuse to fake numbers without one).

    simt-tiles bench matmul   [bench-matmul options]   the matmul ladder vs cuBLAS FP32
    simt-tiles bench patterns [bench-patterns options] softmax, reduce, vector_add, bias_relu vs copy/torch/cupy
    simt-tiles bench softmax|reduce|elementwise|bias_tiles   = patterns --only that group
    simt-tiles bench all                                      matmul, then patterns

Also reachable as ``python benchmarks/bench_matmul.py`` / ``bench_patterns.py``.
"""

from __future__ import annotations

import sys

from .. import _probe

GROUPS = ("matmul", "patterns", "softmax", "reduce", "elementwise", "bias_tiles", "all")
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
    if _probe.select_backend():
        print(NO_GPU, file=sys.stderr)
        return 2
    from . import matmul, patterns

    if group == "matmul":
        return matmul.main(rest)
    if group == "patterns":
        return patterns.main(rest)
    if group == "all":
        return matmul.main(rest) or patterns.main([])
    return patterns.main(["--only", "copy", group, *rest])
