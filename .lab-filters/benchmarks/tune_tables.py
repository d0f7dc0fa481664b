"""Tune the benchmark problems on this GPU, compare the tuned defaults with the hand-picked configs,
and (from the results) write the tuned table the package ships for this GPU.

    python benchmarks/tune_tables.py run [--out DIR] [--functions matmul conv2d_nchw conv2d]   # on the GPU
    python benchmarks/tune_tables.py table RESULTS.json       # anywhere: results -> simt_tiles/tuned/<gpu>.json

``run`` tunes (:func:`simt_tiles.autotune.tune`, into a fresh cache under DIR) matmul at
1000³, 1024³ and 2048³ (float32) and ``conv2d_nchw`` at the benchmark layers (N32 C64 56×56
and N8 C256 14×14, 3×3, padding 1), recording each tune's seconds and candidate table.  Then,
in the same process, it times with the bench harness (L2 flush before each call, median of
CUDA events) the public call with defaults — which now reads the tuned cache — beside every
hand-picked config: each tuned rung's presets and the split-K rule's choice (matmul), the
presets and the ``config=None`` rule (conv).  ``conv2d`` (with ``--functions ... conv2d``): 8192²
float32, 3×3/5×5/7×7, modes constant and reflect, NumPy and device filters, each tuned default
beside k10's default preset (the rule).  ``autotune_<gpu>.json`` holds it all.

``table`` keeps the shipped file's rules and replaces its entries of the run's functions with the
run's winners (keyed without the driver and versions: a shipped table is a measured default, not a
cache); other functions' entries stay.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MATMUL = [(1000, 1000, 1000), (1024, 1024, 1024), (2048, 2048, 2048)]
CONV = [(32, 64, 56, 56), (8, 256, 14, 14)]
CONV2D = [(8192, 8192, k, k, mode, "float32", weights) for k in (3, 5, 7) for mode in ("constant", "reflect")
          for weights in ("host", "device")]
FUNCTIONS = ("matmul", "conv2d_nchw", "conv2d")


def run(out_dir: str, functions=FUNCTIONS[:2]) -> int:
    os.environ.setdefault("SIMT_TILES_CACHE_DIR", os.path.join(out_dir, "cache"))
    import numpy as np

    from simt_tiles import autotune
    from simt_tiles.bench.harness import Harness
    from simt_tiles.machine import describe, slug

    autotune.clear()
    tunes, rows = [], []
    path = os.path.join(out_dir, f"autotune_{slug()}.json")

    def dump():  # after every step: a run cut short keeps what it measured
        data = {"machine": describe(), "tunes": tunes, "comparison": rows, "cache": autotune.entries()}
        with open(path, "w") as fh:
            json.dump(data, fh, indent=1, default=str)
        return data

    problems = [("matmul", (m, n, k, "float32")) for m, n, k in MATMUL]
    problems += [("conv2d_nchw", (n, c, h, w, c, 3, 3, 1, "float32")) for n, c, h, w in CONV]
    problems += [("conv2d", p) for p in CONV2D]
    problems = [(f, p) for f, p in problems if f in functions]
    before = autotune._flush_before()
    h = Harness(reps=30, warmup=5, budget_s=1.0, before=before)
    rng = np.random.default_rng(7)
    for function, problem in problems:  # each problem tuned, then compared: a cut run keeps whole ones
        res = autotune.tune(function, problem, verbose=True, budget_s=30.0)
        tunes.append({"function": function, "problem": list(problem), "seconds": res.seconds,
                      "choice": None if res.choice is None else
                      {"variant": res.choice[0], "config": dataclasses.asdict(res.choice[1])},
                      "bucket": autotune.bucket(problem), "candidates": res.rows})
        print(f"TUNE {function} {problem}: {res.seconds:.1f} s -> {res.choice}", flush=True)
        dump()
        if function == "matmul":
            compare_matmul(h, rng, rows, *problem[:3])
        elif function == "conv2d":
            compare_conv2d(h, rows, problem)
        else:
            compare_conv(h, rng, rows, *problem[:4])
        dump()
    print(summary(dump()))
    print(f"wrote {path}")
    return 0


def compare_matmul(h, rng, rows, m, n, k):
    """The public call with defaults (tuned) beside the hand-picked configs, one harness."""
    import numpy as np
    from numba import cuda

    import simt_tiles
    from simt_tiles import autotune
    from simt_tiles.bounds import check_within
    from simt_tiles.kernels import matmul
    from simt_tiles.kernels.matmul._common import Call

    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    from simt_tiles.kernels.matmul.reference import matmul_reference

    ref, bound = matmul_reference(a, b, precise=False)
    da, db, dc = cuda.to_device(a), cuda.to_device(b), cuda.device_array((m, n), np.float32)
    hand = [("split-K rule " + v, matmul.get_rung(v), c) for v, c in [_rule_choice(m, n, k)]]
    for v in autotune.tunable("matmul").variants("float32"):
        r = matmul.RUNGS[v]
        hand.append((f"{v} default", r, r.presets["default"]))
    entries = [("default (tuned)", lambda: simt_tiles.matmul(da, db, out=dc))]
    for name, r, c in hand:
        plan = matmul.dispatch.resolved(r, c, m, n, k)  # what a call with this config runs
        entries.append((name, functools.partial(plan.run, Call(da, db, dc, 0))))
    for name, fn in entries:
        dc.copy_to_device(np.full((m, n), np.nan, np.float32))
        rows.append(h.entry("matmul", f"{m}x{n}x{k}", name, fn, flops=2 * m * n * k,
                            check=lambda: check_within(dc.copy_to_host(), ref, bound)))


def compare_conv(h, rng, rows, nn, c, hh, ww):
    """``conv2d_nchw`` with defaults (tuned), the rule without the lookup, and every preset."""
    import numpy as np
    from numba import cuda

    from simt_tiles.bounds import check_within
    from simt_tiles.kernels import conv_nchw

    x = rng.standard_normal((nn, c, hh, ww)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    from simt_tiles.kernels.conv_nchw.reference import conv2d_nchw_reference

    ref, bound = conv2d_nchw_reference(x, w, bias, 1)
    dx, dw, db_ = cuda.to_device(x), cuda.to_device(w), cuda.to_device(bias)
    dout = cuda.device_array(ref.shape, np.float32)
    entries = [("default (tuned)", {})]
    entries += [("config=None rule, no autotune lookup", None)]
    for v in ("k02_smem_tiled", "k03_double_buffered"):
        for preset in ("default", "small"):
            entries.append((f"{v} {preset}", {"variant": v, "config": preset}))
    for name, kw in entries:
        if kw is None:  # what config=None did before tuning: bypass the cache for one call
            fn = _untuned_conv(conv_nchw, dx, dw, db_, dout)
        else:
            fn = (lambda kw=kw: conv_nchw.conv2d_nchw(dx, dw, bias=db_, padding=1, out=dout, **kw))
        dout.copy_to_device(np.full(ref.shape, np.nan, np.float32))
        rows.append(h.entry("conv2d_nchw", f"N{nn} C{c} {hh}x{ww} 3x3 p1", name, fn,
                            flops=2 * nn * c * hh * ww * c * 9,
                            check=lambda: check_within(dout.copy_to_host(), ref, bound)))


def compare_conv2d(h, rows, problem):
    """``correlate2d`` with defaults (tuned) beside k10's default preset (the rule), one harness."""
    import numpy as np

    import simt_tiles
    from simt_tiles import autotune
    from simt_tiles.kernels.conv2d import BEST_VARIANT, RUNGS, _tuning

    p = dict(zip(autotune.tunable("conv2d").fields, problem))
    case = _tuning.Case(p)
    w = case.w_op.original if p["weights"] == "host" else case.w_op.dev
    rung = RUNGS[BEST_VARIANT]
    entries = [("default (tuned)", lambda: simt_tiles.correlate2d(case.image, w, mode=p["mode"], out=case.out)),
               (f"{BEST_VARIANT} default (the rule)", case.launcher(rung, rung.presets["default"]))]
    for name, fn in entries:
        case.poison()
        rows.append(h.entry("conv2d", autotune.bucket(problem), name, fn, check=case.check,
                            nbytes=2 * p["h"] * p["w"] * np.dtype(p["dtype"]).itemsize,
                            flops=_tuning.Case.flops(p)))


def _rule_choice(m, n, k):
    from simt_tiles.kernels.matmul import dispatch, get_rung

    v, splits, fields = dispatch.fast_plan(m, n, k, "float32")  # fields: the row's tile, if it names one
    cfg = get_rung(v).presets["default"]
    return v, dataclasses.replace(cfg, **fields, splits=splits)


def _untuned_conv(conv_nchw, dx, dw, db_, dout):
    """The ``config=None`` rule without the autotune lookup (what defaults did before tuning)."""

    def fn():
        choose = conv_nchw._autotune.choose
        conv_nchw._autotune.choose = lambda *a, **k: None
        try:
            conv_nchw.conv2d_nchw(dx, dw, bias=db_, padding=1, out=dout)
        finally:
            conv_nchw._autotune.choose = choose

    return fn


def summary(data) -> str:
    lines = ["tunes:"]
    for t in data["tunes"]:
        c = t["choice"] or {}
        lines.append(f"  {t['function']:<12} {'x'.join(map(str, t['problem'])):<32} {t['seconds']:6.1f} s "
                     f"{len(t['candidates']):3d} cands -> {c.get('variant')} "
                     + ",".join(f"{k}={v}" for k, v in (c.get("config") or {}).items()))
    lines.append("comparison (median ms, TFLOP/s):")
    for r in data["comparison"]:
        if r.get("median_ms") is None:
            lines.append(f"  {r['group']:<12} {r['problem']:<22} {r['impl']:<44} FAIL {r.get('error', '')}")
        else:
            lines.append(f"  {r['group']:<12} {r['problem']:<22} {r['impl']:<44} {r['median_ms']:8.4f} "
                         f"{r['tflops']:6.2f}  iqr {r['iqr_ms']:.4f}")
    return "\n".join(lines)


def table(results: str) -> int:
    """Replace the shipped table's entries with the run's winners."""
    from simt_tiles import autotune
    from simt_tiles.machine import slug_from_name

    with open(results) as fh:
        data = json.load(fh)
    gpu = data["machine"]["gpu"]
    path = autotune.SHIPPED_DIR / f"{slug_from_name(gpu)}.json"
    shipped = json.loads(path.read_text()) if path.exists() else {
        "format": autotune.SHIPPED_FORMAT, "gpu": gpu, "compute_capability": data["machine"]["compute_capability"],
        "rules": {}}
    by_key: dict = {}
    for t in data["tunes"]:
        if t["choice"] is not None:
            dtype = autotune._dtype_of(autotune.tunable(t["function"]), tuple(t["problem"]))
            by_key.setdefault("|".join([t["function"], "*", dtype, t["bucket"]]), []).append(t)
    run_functions = {t["function"] for t in data["tunes"]}
    entries = {k: v for k, v in shipped.get("entries", {}).items() if k.split("|")[0] not in run_functions}
    entries.update({key: _bucket_choice(ts) for key, ts in by_key.items()})
    shipped["entries"] = entries
    m = data["machine"]
    shipped["measured"] = {k: m.get(k) for k in ("gpu", "compute_capability", "driver_version", "numba_cuda",
                                                 "simt_tiles")}
    shipped["source"] = (f"{shipped.get('source', '').split(';')[0]}; entries: benchmarks/tune_tables.py run "
                         f"(benchmarks/results/{os.path.basename(results)})")
    path.write_text(json.dumps(shipped, indent=1) + "\n")
    print(f"wrote {len(entries)} entries to {path}")
    return 0


def _bucket_choice(tunes: list) -> dict:
    """The entry for one bucket: its tune's winner, or where several problems of the run share
    the bucket (1000³ and 1024³), the candidate whose worst time relative to each problem's
    fastest is least (timed at every one of them)."""
    if len(tunes) == 1:
        t = tunes[0]
        return {"choice": t["choice"], "problems": [t["problem"]], "worst_vs_best": 1.0,
                "tune_seconds": round(t["seconds"], 1)}
    times = [{r["impl"]: r["median_ms"] for r in t["candidates"] if r.get("median_ms") is not None} for t in tunes]
    common = set.intersection(*(set(x) for x in times))
    worst = {impl: max(x[impl] / min(x.values()) for x in times) for impl in common}
    impl = min(worst, key=worst.get)
    return {"choice": _choice_of(tunes[0]["function"], impl), "problems": [t["problem"] for t in tunes],
            "worst_vs_best": round(worst[impl], 4), "tune_seconds": max(round(t["seconds"], 1) for t in tunes)}


def _choice_of(function: str, impl: str) -> dict:
    """``{"variant", "config"}`` from a tune row's name: ``"variant [field=v,...]"`` (fields that
    differ from the rung's default preset, or ``default``)."""
    from simt_tiles import autotune

    variant, _, text = impl.partition(" [")
    fields = {k: int(v) for k, v in (f.split("=") for f in text.rstrip("]").split(",") if "=" in f)}
    rung = autotune._rungs(autotune.tunable(function).ladder)[variant]
    return {"variant": variant, "config": dataclasses.asdict(dataclasses.replace(rung.presets["default"], **fields))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default=".")
    r.add_argument("--functions", nargs="+", default=list(FUNCTIONS[:2]), choices=FUNCTIONS)
    t = sub.add_parser("table")
    t.add_argument("results")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rc = run(args.out, args.functions) if args.cmd == "run" else table(args.results)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
