"""Launch every matmul rung once per shape and check it: the workload for the GPU tools.

    compute-sanitizer --tool memcheck  python3 benchmarks/lab/run_rungs_once.py --shapes 131x67x45 1x1x1 ...
    compute-sanitizer --tool racecheck python3 benchmarks/lab/run_rungs_once.py ...
    ncu --clock-control none --metrics <bank-conflict metrics> python3 benchmarks/lab/run_rungs_once.py --shapes 1024

Kernels are compiled and run once before the measured launch (``--warm``) so
that profilers see one launch per (rung, config, shape).  Exits non-zero if
any result breaks the error bound.
"""

from __future__ import annotations

import argparse
import sys

import _once  # noqa: E402  (the checkout on sys.path)

import numpy as np  # noqa: E402

from simt_tiles import _probe  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=["131x67x45", "1x1x1", "33x129x17", "257x255x9"])
    p.add_argument("--variants", nargs="+", default=None)
    p.add_argument("--config", nargs="*", default=[], help="extra configs, variant:field=value,...")
    p.add_argument("--dtype", default="float32")
    args = p.parse_args(argv)
    _probe.select_backend()

    from numba import cuda

    from simt_tiles.bench.matmul import parse_config, parse_size
    from simt_tiles.bounds import check_within
    from simt_tiles.kernels.matmul import MATMUL_VARIANTS, RUNGS
    from simt_tiles.kernels.matmul.reference import matmul_reference

    entries = [(v, RUNGS[v].presets["default"]) for v in (args.variants or MATMUL_VARIANTS)]
    entries += [parse_config(c) for c in args.config]
    rng = np.random.default_rng(0)
    tally = _once.Tally("run_rungs_once")
    for shape in map(parse_size, args.shapes):
        m, n, k = shape
        a = rng.standard_normal((m, k)).astype(args.dtype)
        b = rng.standard_normal((k, n)).astype(args.dtype)
        ref, bound = matmul_reference(a, b, precise=False)
        da, db = cuda.to_device(a), cuda.to_device(b)
        for variant, cfg in entries:
            rung = RUNGS[variant]
            kernel = rung.kernel(cfg, args.dtype)
            grid, block = rung.geometry(cfg, m, n, k)
            out = cuda.to_device(np.full((m, n), np.nan, args.dtype))
            kernel[grid, block](da, db, out)
            chk = check_within(out.copy_to_host(), ref, bound)
            tally.check(f"{variant:<20} {m}x{n}x{k}", chk.passed, repr(chk))
    return tally.exit_code()


if __name__ == "__main__":
    sys.exit(main())
