"""One launch of each kernel worth profiling, at benchmark size: the workload for Nsight Compute.

    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        --kernel-name regex:'k05_register|k07_vector|k06_separable|k04_register_row' python3 benchmarks/ncu_once.py

Each call is run twice (the first compiles); profile the second with ``--launch-skip``
or profile both (a compile does not launch).  Cases: conv2d k05, k07 and the separable path
on an 8192² float32 image with 3×3, 5×5 and 7×7 filters (mode constant), softmax
(variant=None: k04, k05 at 32768 columns) on 16384 × {4096, 16384, 32768} float32.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    import cupy as cp

    import simt_tiles

    rng = cp.random.default_rng(3)
    x = rng.standard_normal((8192, 8192), dtype=cp.float32)
    out = cp.empty_like(x)
    for k in (3, 5, 7):
        wy, wx = rng.standard_normal(k, dtype=cp.float32), rng.standard_normal(k, dtype=cp.float32)
        w = cp.outer(wy, wx)
        simt_tiles.correlate2d(x, w, mode="constant", out=out, variant="k05_register_tile_2d")
        simt_tiles.correlate2d(x, w, mode="constant", out=out, variant="k07_vectorized")
        simt_tiles.correlate_separable(x, wy, wx, mode="constant", out=out)
    for cols in (4096, 16384, 32768):
        s = rng.standard_normal((16384, cols), dtype=cp.float32)
        simt_tiles.softmax(s, out=cp.empty_like(s))
    cp.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
