"""k03's occupancy (issue 34): ptxas gives the lanes rung ~100 registers (two blocks of 256 per SM) where
the dispatch's splits assume eight.  Times each zoo reduce problem k03 runs, and three the zoo does not
have, under launch bounds (``min_blocks``), loads per step and the split rule's blocks per SM; outputs checked
against torch (float64) first; CUDA events around loops of 10 calls (launches queued back to back: a
call's host time does not enter), warm-up, median of 15 loops.  (Session 25's first run timed one call per
event pair: the ~20 µs host call entered every time, ±18% between identical runs.)

    python3 benchmarks/lab/reduce_occupancy_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: (label, shape, op, axis): the patterns zoo's k03 rows, then three it lacks (a BERT-base batch's
#: hidden states summed over tokens, a ResNet feature map's channel means, an ImageNet classifier's argmax)
PROBLEMS = [
    ("zoo", (1048576, 64), "sum", -1),
    ("zoo", (4096, 4096), "sum", 0),
    ("zoo", (4194304, 4), "sum", 0),
    ("zoo", (4096, 50257), "argmax", -1),
    ("zoo", (64, 1024, 256), "sum", (0, 2)),
    ("zoo", (2, 134217728), "sum", -1),
    ("zoo", (16384, 16384), "mean", 1),
    ("new", (64, 512, 768), "sum", 1),
    ("new", (256, 512, 28, 28), "mean", (2, 3)),
    ("new", (65536, 1000), "argmax", -1),
    ("new", (131072, 512), "sum", -1),
    ("new", (16, 4096, 1024), "mean", 2),
    ("new", (262144, 128), "max", -1),
    ("new", (65536, 300), "argmax", -1),
    ("new", (65536, 640), "sum", -1),
    ("new", (32768, 1500), "mean", -1),
    ("new", (16384, 3000), "argmax", -1),
]
#: (label, min_blocks for every pass (None: the default config, its per-pass bounds; "now": no bound, as
#: before session 25), loads, BLOCKS_PER_SM for the splits)
VARIANTS = [("default", None, 8, 8), ("default rows l8", "rows l8", 8, 8), ("now", 1, 8, 8), ("lb3", 3, 8, 8),
            ("lb4", 4, 8, 8), ("lb3 l4", 3, 4, 8), ("default again", None, 8, 8)]


def gpu_ms(run, loops: int = 15, calls: int = 10) -> float:
    """Median GPU ms per call of ``run`` over ``loops`` event pairs around ``calls`` queued calls."""
    import torch

    times = []
    for _ in range(loops):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import dataclasses

    import torch

    import simt_tiles
    from simt_tiles import launch
    from simt_tiles.kernels.reduce import dispatch

    base = dispatch.RUNGS["k03_flat_lanes"].presets["default"]
    rows, bad = [], 0
    for where, shape, op, axis in PROBLEMS:
        torch.manual_seed(0)
        x = torch.randn(*shape, device="cuda")
        dims = axis if isinstance(axis, tuple) else (axis,)
        xd = x.double()
        want = {"sum": lambda: xd.sum(dims), "mean": lambda: xd.mean(dims), "max": lambda: x.amax(dims),
                "argmax": lambda: x.argmax(dims[0])}[op]()
        bound = None if op in ("argmax", "max") else 4 * 2.0 ** -24 * (x.abs().double().sum(dims) / (1 if op == "sum" else
                                                               x.numel() / want.numel()))
        gbytes = x.numel() * 4 / 1e9
        for label, mb, loads, bps in VARIANTS:
            if mb is None or mb == "rows l8":  # the default; the default with session 26's first rule (8 loads a step)
                cfg = None if mb is None else dataclasses.replace(base, row_loads=base.loads)
            else:
                cfg = dataclasses.replace(base, min_blocks=mb, inner_min_threads=mb * base.threads,
                                          row_min_threads=mb * base.threads, loads=loads, row_loads=loads)
            dispatch.BLOCKS_PER_SM = bps
            launch.clear()
            run = lambda: simt_tiles.reduce(x, op, axis=axis, config=cfg)  # noqa: E731
            got = run()
            if op in ("argmax", "max"):
                ok = bool((got == want).all())
                if not ok and op == "argmax":
                    wrong = (got != want).nonzero().flatten()
                    r = int(wrong[0])
                    gi, wi = int(got[r].item()), int(want[r].item())
                    print(f"  argmax: {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}; "
                          f"{wrong.numel()} of {want.numel()} differ; row {r}: got {gi} (x = {x[r, gi].item()}), "
                          f"want {wi} (x = {x[r, wi].item()})", flush=True)
            else:
                ok = bool(((got.double() - want).abs() <= bound).all())
            bad += not ok
            for _ in range(3):
                run()
            ms = gpu_ms(run)
            rows.append({"where": where, "shape": list(shape), "op": op, "axis": axis, "variant": label,
                         "min_blocks": mb, "loads": loads, "blocks_per_sm": bps, "ms": ms, "GB/s": gbytes / ms * 1e3,
                         "ok": ok})
            print(f"{where} {op} {'x'.join(map(str, shape))} axis={axis} {label:11s} {ms:7.4f} ms "
                  f"{gbytes / ms * 1e3:7.0f} GB/s {'ok' if ok else 'WRONG'}", flush=True)
        dispatch.BLOCKS_PER_SM = 8
        tf = {"sum": lambda: x.sum(dims), "mean": lambda: x.mean(dims), "max": lambda: x.amax(dims),
              "argmax": lambda: x.argmax(dims[0])}[op]
        for _ in range(3):
            tf()
        ms = gpu_ms(tf)
        rows.append({"where": where, "shape": list(shape), "op": op, "axis": axis, "variant": "torch", "ms": ms,
                     "GB/s": gbytes / ms * 1e3, "ok": True})
        print(f"{where} {op} {'x'.join(map(str, shape))} axis={axis} {'torch':11s} {ms:7.4f} ms "
              f"{gbytes / ms * 1e3:7.0f} GB/s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/reduce_occupancy_probe.py",
                                               "rows": rows}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
