"""The conv default with a device (CuPy/PyTorch/Numba) filter against the best rung, one GPU run.

    OUT=dir python benchmarks/lab/conv_device_filter_once.py [--filters 5 7] [--modes constant reflect] [-j 15]

For 8192² float32, each filter size and mode: compiles every k10 candidate of the autotuner's
space for a device filter (k10's STAGED source) into Numba's disk cache, in parallel; tunes the
problem (``simt_tiles.autotune.tune``, into a fresh cache under OUT); then times, with one
harness (L2 flush, median of CUDA events), the default call with the device filter (now the
tuned choice), the shipped device entry, the default call with a NumPy filter (kernel
parameters) and k05 (the filter's values compiled in).  ``--ry 12 16``: no tune; the space's
candidates of those tile heights beside the shipped entry (e.g. a tile height not in the space
yet, after adding it to ``_tuning.TILES``).  Writes ``OUT/conv_device_filter.json`` (tunes and
comparison rows) and prints each comparison as % of the fastest row.  Session 10's two runs:
``benchmarks/results/conv_device_filter*_h200.*`` (benchmarks/notes/conv2d.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def problems(filters, modes, size: int = 8192) -> list:
    return [(size, size, k, k, mode, "float32", "device") for mode in modes for k in filters]


def picked(rung, p, ry) -> list:
    """The device-filter candidates of the space for problem ``p`` (those of tile heights ``ry`` only,
    and the shipped device entry, where ``ry`` is given)."""
    from simt_tiles import autotune

    tunable = autotune.tunable("conv2d")
    cands = tunable.candidates(rung.name, dict(zip(tunable.fields, p)), "float32")
    if not ry:
        return cands
    shipped = autotune.lookup("conv2d", p, sources=("shipped",))
    return ([shipped[1]] if shipped is not None else []) + [c for c in cands if c.ry in ry]


def warm(probs, jobs: int, ry=()) -> None:
    """Every device-filter candidate and the NumPy filter's shipped choice, compiled in parallel."""
    from warm_kernel_cache import _compile_conv

    from simt_tiles import autotune
    from simt_tiles.kernels.conv2d import RUNGS

    rung = RUNGS["k10_runtime_weights"]
    todo = []
    for p in probs:
        todo += [(p[2], p[3], p[4], "device", "float32", dataclasses.asdict(c)) for c in picked(rung, p, ry)]
        host = autotune.lookup("conv2d", p[:-1] + ("host",), sources=("shipped",))
        if host is not None:
            todo.append((p[2], p[3], p[4], "host", "float32", dataclasses.asdict(host[1])))
    t0 = time.perf_counter()
    # spawn: this process has talked to the driver (the shipped table's GPU key)
    with ProcessPoolExecutor(max(1, min(jobs, len(todo))), mp_context=multiprocessing.get_context("spawn")) as pool:
        for fut in as_completed([pool.submit(_compile_conv, j) for j in todo]):
            name, seconds = fut.result()
            print(f"compiled {name} in {seconds:.1f} s", flush=True)
    print(f"warm: {len(todo)} kernels, {time.perf_counter() - t0:.0f} s", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filters", nargs="+", type=int, default=[5, 7])
    ap.add_argument("--modes", nargs="+", default=["constant", "reflect"])
    ap.add_argument("-j", "--jobs", type=int, default=15)
    ap.add_argument("--size", type=int, default=8192, help="the image side")
    ap.add_argument("--ry", nargs="*", type=int, default=[],
                    help="no tune: time the space's candidates of these tile heights beside the shipped entry")
    args = ap.parse_args(argv)
    out_dir = os.environ.get("OUT", ".")
    os.environ.setdefault("SIMT_TILES_CACHE_DIR", os.path.join(out_dir, "cache"))
    import simt_tiles
    from simt_tiles import autotune
    from simt_tiles.bench.harness import Harness
    from simt_tiles.kernels.conv2d import RUNGS, _tuning
    from simt_tiles.machine import describe

    autotune.clear()
    probs = problems(args.filters, args.modes, args.size)
    warm(probs, args.jobs, args.ry)
    h = Harness(reps=30, warmup=5, budget_s=1.0, before=autotune._flush_before())
    data = {"machine": describe(), "tunes": [], "comparison": []}
    path = os.path.join(out_dir, "conv_device_filter.json")
    k10, k05 = RUNGS["k10_runtime_weights"], RUNGS["k05_register_tile_2d"]
    for p in probs:
        shipped = autotune.lookup("conv2d", p, sources=("shipped",))
        pd = dict(zip(autotune.tunable("conv2d").fields, p))
        case = _tuning.Case(pd)
        host = _tuning.Case(dict(pd, weights="host"))
        if args.ry:  # candidates timed here, no tune
            choice = "none (no tune)"
            entries = [(f"k10 [{autotune._config_text(k10, c)}]", case, case.launcher(k10, c))
                       for c in picked(k10, p, args.ry)]
        else:
            res = autotune.tune("conv2d", p, verbose=True, budget_s=40.0)
            choice = res.choice
            data["tunes"].append({"function": "conv2d", "problem": list(p), "seconds": res.seconds,
                                  "choice": None if res.choice is None else
                                  {"variant": res.choice[0], "config": dataclasses.asdict(res.choice[1])},
                                  "bucket": autotune.bucket(p), "candidates": res.rows})
            entries = []
        if not args.ry:
            entries.append(("default, device filter (tuned)", case,
                            lambda c=case, m=p[4]: simt_tiles.correlate2d(c.image, c.w_op.dev, mode=m, out=c.out)))
        entries += [
            ("default, NumPy filter", host,
             lambda c=host, m=p[4]: simt_tiles.correlate2d(c.image, c.w_op.original, mode=m, out=c.out)),
            ("k05_register_tile_2d", case, case.launcher(k05, k05.presets["default"])),
        ]
        if shipped is not None and not args.ry:
            entries.insert(1, ("shipped device entry (before)", case, case.launcher(k10, shipped[1])))
        rows = []
        for name, c, fn in entries:
            c.poison()
            row = h.entry("conv2d", autotune.bucket(p), name, fn, check=c.check,
                          nbytes=2 * p[0] * p[1] * 4, flops=_tuning.Case.flops(pd))
            rows.append(row)
        data["comparison"] += rows
        best = min(r["median_ms"] for r in rows if r.get("median_ms") is not None)
        print(f"== {p[2]}x{p[3]} {p[4]}: tuned {choice}")
        for r in rows:
            ms = r.get("median_ms")
            print(f"   {r['impl']:<34} {'FAIL' if ms is None else f'{ms:.4f} ms  {100 * best / ms:5.1f}% of best'}"
                  f"  passed={r.get('passed')}", flush=True)
        with open(path, "w") as fh:
            json.dump(data, fh, indent=1, default=str)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
