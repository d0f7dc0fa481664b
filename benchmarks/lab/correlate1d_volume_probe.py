"""``correlate1d`` on a 256³ float32 volume along axes 0, 1 and 2: the middle axis in one launch (session 34).

Before session 34 a middle axis was ``outer`` launches of one plan (256 here: ~2.5 ms of host time
against ~0.03 ms of kernel, notes/conv2d.md); now it is one launch of k10's stack, slice z on grid z.
Per axis: the launches its plan holds, the kernel time (CUDA events around one call after an L2
flush that ends with a read, median of ``--reps``) and the wall µs per call of ``--calls`` queued
calls (host cost included).  ``--ab`` adds each middle axis launched slice by slice, as before (k10
told it takes no slices, plans cleared): the A/B on one machine.  Outputs checked against scipy's
float64 ``correlate1d`` within γ_{K+1}·Σ|w|·|x|.

    PYTHONPATH=$PWD python3 benchmarks/lab/correlate1d_volume_probe.py [--ab] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--side", type=int, default=256, help="the volume's side (default 256)")
    ap.add_argument("--taps", type=int, default=5, help="the filter's length (default 5)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls after a flush, per case (median)")
    ap.add_argument("--calls", type=int, default=50, help="queued calls of the wall-time loop")
    ap.add_argument("--ab", action="store_true", help="also the middle axes launched slice by slice")
    args = ap.parse_args()
    import numpy as np
    import scipy.ndimage as ndi
    import torch
    from _matmul_probe import finish, flusher
    from small_reduce_probe import loop_us, timed

    import simt_tiles as st
    from simt_tiles import launch
    from simt_tiles.bounds import gamma, unit_roundoff
    from simt_tiles.kernels.conv2d import dispatch

    flush = flusher()
    n, k = args.side, args.taps
    rng = np.random.default_rng(34)
    host = rng.standard_normal((n, n, n)).astype(np.float32)
    w = rng.standard_normal(k).astype(np.float32)  # a NumPy filter: the default's kernel parameters
    x = torch.from_numpy(host).cuda()
    out = torch.empty_like(x)
    best = dispatch.RUNGS[dispatch.BEST_VARIANT]
    takes_slices = best.slices
    cases = [(0, "2-D"), (1, "stack"), (2, "2-D")] + ([(1, "per slice")] if args.ab else [])
    rows = []
    for axis, form in cases:
        object.__setattr__(best, "slices", form != "per slice")  # (a frozen dataclass: the A/B's switch)
        launch.clear()
        try:
            call = lambda a=axis: st.correlate1d(x, w, axis=a, mode="reflect", out=out)  # noqa: E731
            call()
            torch.cuda.synchronize()
            ref = ndi.correlate1d(host.astype(np.float64), w.astype(np.float64), axis=axis, mode="reflect")
            bound = gamma(k + 1, unit_roundoff(np.float32)) * ndi.correlate1d(
                np.abs(host).astype(np.float64), np.abs(w).astype(np.float64), axis=axis, mode="reflect")
            ok = bool(np.all(np.abs(out.cpu().numpy().astype(np.float64) - ref) <= bound))
            call()  # the reused filter's own plan (kernel parameters), as every later call
            torch.cuda.synchronize()
            launches = max((len(p.launches) for p in launch._PLANS.values()), default=0)
            kernel_ms = timed(call, flush, reps=args.reps)
            wall_us = loop_us(call, calls=args.calls)
        finally:
            object.__setattr__(best, "slices", takes_slices)
        row = {"axis": axis, "form": form, "ok": ok,
               "launches": launches, "kernel_ms": kernel_ms, "wall_us_per_call": wall_us,
               "gbs": 2 * x.nbytes / kernel_ms / 1e6}
        rows.append(row)
        print(f"axis {axis} {row['form']:9} {'ok' if ok else 'WRONG'}  launches {launches:4d}  kernel "
              f"{kernel_ms * 1e3:8.1f} us ({row['gbs']:6.0f} GB/s)  wall {wall_us:8.1f} us/call", flush=True)
    for r in rows:
        r["device"] = torch.cuda.get_device_name()
        r["problem"] = f"{n}x{n}x{n} float32, {k} taps, reflect, NumPy filter, out="
    return finish(args.json, __file__, rows)


if __name__ == "__main__":
    sys.exit(main())
