"""One launch of each kernel worth profiling, at benchmark size: the workload for Nsight Compute.

    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        --kernel-name regex:'k05_register|k07_vector|k06_separable|k04_register_row' python3 benchmarks/lab/ncu_once.py

A compile does not launch: each case is profiled once.  Cases: conv2d k05, k07, k08, k09
(``--variants``, ``--filters``) and the separable path
on an 8192² float32 image with 3×3, 5×5 and 7×7 filters (mode constant), softmax
(variant=None: k04, k05 at 32768 columns) on 16384 × {4096, 16384, 32768} float32.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


CONV_VARIANTS = ("k05_register_tile_2d", "k07_vectorized", "k08_prefetched", "k09_async_copy")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--variants", nargs="*", default=list(CONV_VARIANTS), help="conv2d rungs (plus the separable path)")
    p.add_argument("--filters", nargs="*", type=int, default=[3, 5, 7])
    p.add_argument("--no-softmax", action="store_true")
    args = p.parse_args(argv)
    import cupy as cp

    import simt_tiles

    rng = cp.random.default_rng(3)
    x = rng.standard_normal((8192, 8192), dtype=cp.float32)
    out = cp.empty_like(x)
    for k in args.filters:
        wy, wx = rng.standard_normal(k, dtype=cp.float32), rng.standard_normal(k, dtype=cp.float32)
        w = cp.outer(wy, wx)
        for v in args.variants:
            simt_tiles.correlate2d(x, w, mode="constant", out=out, variant=v)
        simt_tiles.correlate_separable(x, wy, wx, mode="constant", out=out)
    for cols in () if args.no_softmax else (4096, 16384, 32768):
        s = rng.standard_normal((16384, cols), dtype=cp.float32)
        simt_tiles.softmax(s, out=cp.empty_like(s))
    cp.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
