"""``correlate`` on 3-D float32 volumes (k12_volume, the default) against ``cupyx.scipy.ndimage.correlate``.

Unmeasured so far (written without a GPU, issue 33 item 5): benchmarks/notes/conv2d.md, "3-D volumes",
predicts what it should print.  Per volume (256³ and 128 × 512 × 512) and filter (3³, 5³, 7³), mode
"reflect", a CuPy volume and a CuPy filter (the device-filter path; ``--numpy-filter``: a NumPy filter,
its cached device copy): every output is first checked against cupyx's float64 result within
γ_{K}·(|w| ⋆ |x|) (K taps; cupyx's own float64 error is far below it), then the kernel time (CUDA
events around one call after an L2 flush that ends with a read, median of ``--reps``, three warm-up
calls first) and the wall µs per call of ``--calls`` queued calls (host cost included), for
simt_tiles and for cupyx (its float32 kernel).  GB/s counts the compulsory bytes: the volume read once
and written once.

``--configs`` (default ``default,rx2,rx3,rx4,rx1r,rx3r,rx4r,rx3y2,rx4y2,rx2y4,rx2y2``): k12_volume's presets
timed in the same run, each a row beside cupyx's.  ``default`` is ``variant=None``'s own choice (the row
printed before the option existed); the others are ``config=<preset>`` (k12's RX outputs per thread in x;
``…r``: the same tiles with the taps in registers, ``Config.taps = REGISTERS``; ``…y2``/``…y4``: RY outputs
per thread in y, ``Config.ry``); a preset whose ring does not fit 48 KiB for a filter (rx4 and rx4y2 at
7³), or that holds the taps in registers past ``MAX_REGISTER_TAPS`` (the ``…r`` presets at 5³ and 7³),
prints a "skipped" line instead of timing something else.

    PYTHONPATH=$PWD python3 benchmarks/lab/volume_filter_probe.py [--json PATH] [--reps 20] [--calls 50]
        [--configs default,rx2,rx3,rx4,rx1r,rx3r,rx4r,rx3y2,rx4y2,rx2y4,rx2y2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=20, help="timed calls after a flush, per case (median)")
    ap.add_argument("--calls", type=int, default=50, help="queued calls of the wall-time loop")
    ap.add_argument("--numpy-filter", action="store_true", help="a NumPy filter (its cached device copy)")
    ap.add_argument("--configs", default="default,rx2,rx3,rx4,rx1r,rx3r,rx4r,rx3y2,rx4y2,rx2y4,rx2y2",
                    help="comma-separated k12_volume presets to time beside cupyx (default: %(default)s); "
                         "'default' is variant=None's choice")
    args = ap.parse_args()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    from simt_tiles.kernels.conv2d import k12_volume
    from simt_tiles.runtime import ConfigError

    bad = [c for c in configs if c not in k12_volume.PRESETS]
    if bad or not configs:
        ap.error(f"--configs: expected some of {sorted(k12_volume.PRESETS)}; got {args.configs!r}")
    import cupy as cp
    import cupyx.scipy.ndimage as cndi
    import numpy as np

    import simt_tiles as st
    from simt_tiles.bounds import gamma, unit_roundoff
    from simt_tiles.kernels.conv2d import dispatch

    flush_buf = cp.empty(2**27, dtype=cp.float32)  # 512 MiB: ten L2s; written, then read (the L2 ends clean)

    def flush():
        flush_buf.fill(0)
        flush_buf.sum()

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(args.reps):
            flush()
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b))
        return statistics.median(times)

    def loop_us(fn) -> float:
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(args.calls):
            fn()
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) / args.calls * 1e6

    rng = np.random.default_rng(33)
    rows = []
    for shape in ((256, 256, 256), (128, 512, 512)):
        host = rng.standard_normal(shape).astype(np.float32)
        x = cp.asarray(host)
        out = cp.empty_like(x)
        x64 = x.astype(cp.float64)
        for k in (3, 5, 7):
            wh = rng.standard_normal((k, k, k)).astype(np.float32)
            w = wh if args.numpy_filter else cp.asarray(wh)
            problem = f"{'x'.join(map(str, shape))} float32, {k}x{k}x{k} reflect"
            theirs = lambda wh=wh: cndi.correlate(x, cp.asarray(wh), mode="reflect")  # noqa: E731
            ref = cndi.correlate(x64, cp.asarray(wh, cp.float64), mode="reflect")
            bound = gamma(k**3, unit_roundoff(np.float32)) * cndi.correlate(cp.abs(x64), cp.abs(cp.asarray(wh, cp.float64)),
                                                                          mode="reflect")
            cases = []  # (impl, fn, ok, rung text)
            for name in configs:
                cfg = None if name == "default" else name
                try:
                    plan = dispatch.plan_volume(None, cfg, k, k, k, dispatch.Mode.REFLECT, np.float32)
                except ConfigError as exc:  # taps in registers past MAX_REGISTER_TAPS
                    print(f"{problem:32} k12_volume config={name}: skipped ({exc})", flush=True)
                    continue
                if cfg is not None and plan.rung is not k12_volume.RUNG:
                    print(f"{problem:32} k12_volume config={name}: skipped (its ring does not fit 48 KiB: "
                          f"variant=None would run {plan.rung.name})", flush=True)
                    continue
                ours = lambda w=w, cfg=cfg: st.correlate(x, w, mode="reflect", out=out, config=cfg)  # noqa: E731
                ours()
                ok = bool(cp.all(cp.abs(out.astype(cp.float64) - ref) <= bound))
                impl = "simt_tiles correlate (default)" if cfg is None else f"simt_tiles correlate config={name}"
                cases.append((impl, ours, ok, f"{plan.rung.name} {plan.config}"))
            peer_ok = bool(cp.all(cp.abs(theirs().astype(cp.float64) - ref) <= bound))
            del ref, bound
            for impl, fn, good, rung in (*cases, ("cupyx.scipy.ndimage.correlate", theirs, peer_ok, "")):
                ms = timed(fn)
                row = {"impl": impl, "problem": problem,
                       "ok": good, "kernel_ms": ms, "wall_us_per_call": loop_us(fn),
                       "gbs": 2 * x.nbytes / ms / 1e6, "tflops": 2 * x.size * k**3 / ms / 1e9,
                       "rung": rung,
                       "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
                rows.append(row)
                print(f"{row['problem']:32} {impl:36} {'ok' if good else 'WRONG'}  kernel {ms * 1e3:9.1f} us "
                      f"({row['gbs']:6.0f} GB/s, {row['tflops']:5.2f} TFLOP/s)  wall {row['wall_us_per_call']:9.1f} us/call",
                      flush=True)
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"command": f"python3 benchmarks/lab/{Path(__file__).name}",
                                               "rows": rows}, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
