"""The conv default's two weight paths once each, for Nsight Compute (issue: the device-filter default).

    ncu --clock-control none --section WarpStateStats --section SchedulerStats -k regex:k10 --csv \\
        python3 benchmarks/ncu_conv_once.py [--filters 5 7] [--side 8192]

For each filter size, ``correlate2d(image, w, mode="constant")`` with the defaults, the filter first
as a NumPy array (k10 PARAMS: the weights are kernel parameters) and then as a CuPy array (k10 STAGED:
each block stages them from device memory). Each call is made twice (the first compiles or loads the
kernel; a profiler filter ``--launch-skip`` is not needed: compare the last launch of each kind) and
checked against SciPy on a corner of the image.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--filters", nargs="+", type=int, default=[5, 7])
    p.add_argument("--side", type=int, default=8192)
    args = p.parse_args(argv)
    import cupy as cp
    import numpy as np
    from scipy import ndimage

    import simt_tiles

    rng = np.random.default_rng(0)
    host = rng.standard_normal((args.side, args.side), dtype=np.float32)
    image, out = cp.asarray(host), cp.empty((args.side, args.side), cp.float32)
    corner = host[:64, :64]
    bad = 0
    for k in args.filters:
        w = rng.standard_normal((k, k), dtype=np.float32)
        expect = ndimage.correlate(corner.astype(np.float64), w.astype(np.float64), mode="constant")[:48, :48]
        for kind, weights in (("numpy", w), ("cupy", cp.asarray(w))):
            for _ in range(2):
                out.fill(cp.nan)
                simt_tiles.correlate2d(image, weights, mode="constant", out=out)
            got = cp.asnumpy(out[:48, :48])
            ok = np.allclose(got, expect, rtol=1e-4, atol=1e-4 * k * k)
            bad += not ok
            print(f"{k}x{k} constant, {kind} filter: {'ok' if ok else 'WRONG'}", flush=True)
    cp.cuda.runtime.deviceSynchronize()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
