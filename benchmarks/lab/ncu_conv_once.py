"""The conv default's two weight paths once each, for Nsight Compute (issue: the device-filter default).

    ncu --clock-control none --section WarpStateStats --section SchedulerStats -k regex:k10 --csv \\
        python3 benchmarks/lab/ncu_conv_once.py [--filters 5 7] [--side 8192]

For each filter size, ``correlate2d(image, w, mode="constant")`` with the defaults on Numba device
arrays, the filter first as a NumPy array (k10 PARAMS: the weights are kernel parameters) and then as a
device array (k10 STAGED: each block stages them from device memory; a CuPy filter takes the same
path; past 7 × 7 both are k11; ``--skew B`` adds k11 with its patch rows padded every B bytes).
Each call is made twice (the first compiles or loads the kernel: compare the last launch of
each kind) and checked against SciPy on a corner of the image.  Runs in the simulator too, at a
small ``--side``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--filters", nargs="+", type=int, default=[5, 7])
    p.add_argument("--side", type=int, default=8192)
    p.add_argument("--skew", type=int, default=0, help="also k11's default tile with Config.skew = SKEW bytes")
    args = p.parse_args(argv)
    import numpy as np
    from numba import cuda
    from scipy import ndimage

    import simt_tiles

    rng = np.random.default_rng(0)
    host = rng.standard_normal((args.side, args.side), dtype=np.float32)
    image, out = cuda.to_device(host), cuda.device_array((args.side, args.side), np.float32)
    c = min(64, args.side)
    corner = host[:c, :c]
    bad = 0
    for k in args.filters:
        w = rng.standard_normal((k, k), dtype=np.float32)
        e = max(1, c - 16)  # away from the corner's own cut edges (filters up to 31 wide)
        expect = ndimage.correlate(corner.astype(np.float64), w.astype(np.float64), mode="constant")[:e, :e]
        calls = {"numpy": ({}, w), "device": ({}, cuda.to_device(w))}
        if args.skew:
            import dataclasses

            from simt_tiles.kernels.conv2d import LARGE_VARIANT, dispatch
            from simt_tiles.kernels.conv2d._args import mode_of

            plan = dispatch.plan_filter(None, None, args.side, args.side, k, k, mode_of("constant"),
                                        np.dtype(np.float32), "device")
            skewed = dict(variant=LARGE_VARIANT, config=dataclasses.replace(plan.config, skew=args.skew))
            calls[f"skew {args.skew}"] = (skewed, cuda.to_device(w))
        for kind, (options, weights) in calls.items():
            for _ in range(2):
                out.copy_to_device(np.full(out.shape, np.nan, np.float32))
                simt_tiles.correlate2d(image, weights, mode="constant", out=out, **options)
            got = out.copy_to_host()[:e, :e]
            ok = np.allclose(got, expect, rtol=1e-4, atol=1e-4 * k * k)
            bad += not ok
            print(f"{k}x{k} constant, {kind} filter: {'ok' if ok else 'WRONG'}", flush=True)
    cuda.synchronize()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
