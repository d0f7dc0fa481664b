"""Issue 33, every filter size fast by default: ``correlate2d`` past 7 × 7 (k11) beside k03 (the old default), cupyx.

    PYTHONPATH=$PWD python3 benchmarks/lab/large_filter_probe.py [--json FILE] [--reps 12] [--quick]

Cases: a CuPy image 8192² float32 with 9×9, 11×11, 15×15, 21×21, 31×31 and 13×5 filters, and 4096² float64 with
15×15, mode "reflect"; the default with the filter as a NumPy array (it keeps a cached device copy) and as a CuPy
array; k03 by name; float32 also k11 by name with another tile (:data:`ALT`; ``--no-alt`` leaves it out); cupyx.

1. **Compile** the k11 kernels first, in parallel (one spawned worker process per kernel, Numba's disk cache:
   ``simt_tiles.warm.run_job`` for the float32 defaults, the same call for the others); k03 (about a second a
   kernel) and cupyx compile on their first call here;
   the seconds are printed and kept in the JSON.
2. **Ceilings, measured in this run**: the device copy of 2^28 float32 (read + write), and the FMA rate of
   ``fma_peak.py``'s kernel (eight independent FFMA chains per thread) and of its float64 twin here.  A
   filter's floor is the larger of its bytes at the copy rate (8192²·2·itemsize) and its 2·KH·KW·H·W FLOP at the
   dtype's FMA rate; "% of ceiling" is that floor over the measured time.
3. **Check first**, every implementation: NaN-poisoned output, then five 96 × 96 crops (the four corners,
   where the boundary folds, and the centre) against the long-double reference
   (``reference.correlate2d_reference`` on the crop padded by "reflect") within its γ_n·Σ|w|·|x| bound.
4. **Time**: CUDA events around one call after an L2 flush (``bench.common``'s: the flush keeps the GPU busy
   longer than the call's host path, so the events bracket GPU time), median of ``--reps``; and the wall time per
   call of a loop of back-to-back calls ended by a synchronisation.

Prints a markdown table and writes ``--json``.  Budget: ≤ 150 s on an H100/H200 with a cold kernel cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

LAB = Path(__file__).resolve().parent
sys.path.insert(0, str(LAB.parents[1]))  # the checkout
sys.path.insert(0, str(LAB))  # fma_peak

#: (dtype, side, KH, KW)
CASES = [("float32", 8192, k, k) for k in (9, 11, 15, 21, 31)] + [("float32", 8192, 13, 5), ("float64", 4096, 15, 15)]
QUICK = [("float32", 8192, 9, 9), ("float32", 8192, 31, 31), ("float64", 4096, 15, 15)]
MODE = "reflect"
CROP = 96
#: float32: k11 with another tile beside the default's ``fast_float32`` (4 × 16 outputs a thread, window loads
#: 4-way bank-conflicted, ~2/3 of shared memory's wavefronts busy): 16 × 4 threads of 8 × 8 outputs, 2-way, ~40 %
#: busy, but 7 edge rows each side instead of 3 (k11's header) — which of the two costs more, measured
ALT = dict(block_x=16, block_y=4, rx=8, ry=8, kc=16, min_blocks=8)
#: ``--skew``: the default's preset with its patch rows padded by 16 bytes every 128 (``k11.skew``: conflict-free
#: window loads, 12.5 % more shared memory a block)
SKEW = 128


def _warm_job(job) -> tuple[str, float]:
    """One kernel into Numba's disk cache, in a spawned worker: the default's (float32 through
    ``simt_tiles.warm``), or k11 with :data:`ALT`."""
    dtype, kh, kw, which = job
    t0 = time.perf_counter()
    if which in ("alt", "skew"):
        from numba import cuda

        import simt_tiles

        simt_tiles.correlate2d(cuda.to_device(np.ones((40, 140), dtype)), cuda.to_device(np.full((kh, kw), 0.5, dtype)),
                               mode=MODE, variant="k11_large_filter", config=_config(which, dtype, kh, kw))
        cuda.synchronize()
    elif dtype == "float32":
        from simt_tiles.warm import run_job

        run_job(("correlate2d", kh, kw, MODE, "device"))
    else:  # warm.run_job builds float32 only: the same call in float64
        from numba import cuda

        import simt_tiles

        simt_tiles.correlate2d(cuda.to_device(np.ones((40, 140), dtype)),
                               cuda.to_device(np.full((kh, kw), 0.5, dtype)), mode=MODE)
        cuda.synchronize()
    return f"{which} {dtype} {kh}x{kw}", time.perf_counter() - t0


def _config(which: str, dtype, kh: int, kw: int):
    """k11's config for ``which``: :data:`ALT`, or the default's preset with :data:`SKEW`."""
    from simt_tiles.kernels.conv2d import dispatch
    from simt_tiles.kernels.conv2d import k11_large_filter as k11
    from simt_tiles.kernels.conv2d._args import mode_of

    if which == "alt":
        return k11.Config(**ALT)
    plan = dispatch.plan_filter(None, None, 8192, 8192, kh, kw, mode_of(MODE), np.dtype(dtype), "device")
    return dataclasses.replace(plan.config, skew=SKEW)


def warm(cases, jobs: int, alt: bool, skew: bool = False) -> dict:
    todo = sorted({(d, kh, kw, "default") for d, _, kh, kw in cases}
                  | ({(d, kh, kw, "alt") for d, _, kh, kw in cases if d == "float32"} if alt else set())
                  | ({(d, kh, kw, "skew") for d, _, kh, kw in cases} if skew else set()))
    t0 = time.perf_counter()
    out = {}
    with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=multiprocessing.get_context("spawn")) as pool:
        for what, sec in pool.map(_warm_job, todo):
            out[what] = sec
            print(f"  compiled {what}: {sec:.1f} s", flush=True)
    out["wall"] = time.perf_counter() - t0
    return out


def fma_rate(dtype: str) -> float:
    """FLOP/s of independent FMA chains (``fma_peak.py``'s kernel for float32, its twin for float64)."""
    from numba import cuda, float64, int32

    import fma_peak
    from simt_tiles.timing import time_cuda

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    blocks, trips = sms * 8, (256 if dtype == "float32" else 64)
    if dtype == "float32":
        kernel, a, b, out = fma_peak.ffma_chains, np.float32(0.999), np.float32(1e-3), cuda.device_array(
            blocks * fma_peak.THREADS, np.float32)
    else:
        kernel, a, b, out = _dfma_chains(), float64(0.999), float64(1e-3), cuda.device_array(
            blocks * fma_peak.THREADS, np.float64)

    def run():
        kernel[blocks, fma_peak.THREADS](out, int32(trips), a, b)

    run()
    cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:  # the clock ramps up from idle
        for _ in range(20):
            run()
        cuda.synchronize()
    ms = statistics.median(time_cuda(run, warmup=2, reps=20))
    fmas = blocks * fma_peak.THREADS * trips * fma_peak.UNROLL * fma_peak.CHAINS
    return 2 * fmas / (ms * 1e-3)


def _dfma_chains():
    """``fma_peak``'s FMA chains in float64 (DFMA), the same loop."""
    from numba import cuda, float64

    import fma_peak

    return cuda.jit("void(float64[::1], int32, float64, float64)")(fma_peak.make_fma_chains(float64))


def copy_rate(cp, flush) -> float:
    from simt_tiles.timing import time_cuda

    n = 2**28
    src, dst = cp.random.default_rng(1).standard_normal(n, dtype=cp.float32), cp.empty(n, cp.float32)
    ms = statistics.median(time_cuda(lambda: cp.copyto(dst, src), warmup=3, reps=15, before=flush))
    return 2 * src.nbytes / (ms * 1e-3)


def flusher(cp):
    """``bench.common``'s L2 flush: overwrite ten L2s (at least 512 MiB) FLUSH_REPEAT times, then read it."""
    from simt_tiles.bench.common import FLUSH_REPEAT, flush_bytes
    from simt_tiles.machine import l2_bytes

    buf = cp.empty(flush_bytes(l2_bytes()) // 4, cp.float32)

    def before():
        for _ in range(FLUSH_REPEAT):
            buf.fill(0)
        buf.sum()

    return before


def crops(h: int, w: int):
    c = CROP
    return [(0, 0), (0, w - c), (h - c, 0), (h - c, w - c), (h // 2 - c // 2, w // 2 - c // 2)]


def references(x_pad, wts, h: int, w: int) -> list:
    """``(r0, c0, ref, bound)`` of each of :func:`crops`: the long-double reference of the crop's window of
    ``x_pad`` (the host image padded by the mode), its "valid" part — once per case, for every implementation."""
    from simt_tiles.kernels.conv2d.reference import correlate2d_reference

    kh, kw = wts.shape
    ah, aw = kh // 2, kw // 2
    out = []
    for r0, c0 in crops(h, w):
        region = x_pad[r0:r0 + CROP + kh - 1, c0:c0 + CROP + kw - 1]  # every tap of the crop's outputs
        ref, bound = correlate2d_reference(region, wts, "constant")  # the "valid" part reads no constant
        out.append((r0, c0, ref[ah:ah + CROP, aw:aw + CROP], bound[ah:ah + CROP, aw:aw + CROP]))
    return out


def check(got, refs) -> tuple[bool, float]:
    """``got`` (the device result) on the crops of ``refs`` (:func:`references`) within their bounds;
    ``(passed, worst error / bound)``."""
    from simt_tiles.bounds import check_within

    ok, worst = True, 0.0
    for r0, c0, ref, bound in refs:
        chk = check_within(got[r0:r0 + CROP, c0:c0 + CROP].get(), ref, bound)
        ok &= bool(chk.passed)
        worst = max(worst, chk.worst_ratio) if not math.isnan(chk.worst_ratio) else math.nan
    return ok, worst


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--reps", type=int, default=12)
    p.add_argument("--loop", type=int, default=10, help="calls in the wall-time loop")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="compile workers")
    p.add_argument("--quick", action="store_true", help="9x9 and 31x31 float32, 15x15 float64 only")
    p.add_argument("--no-peer", action="store_true", help="leave cupyx out")
    p.add_argument("--no-alt", action="store_true", help="leave k11 with the other tile (ALT) out")
    p.add_argument("--skew", action="store_true", help="also the default's tile with padded patch rows (SKEW)")
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    cases = QUICK if args.quick else CASES

    print("compiling the default's kernels (spawned workers, Numba's disk cache)", flush=True)
    compile_s = warm(cases, args.jobs, not args.no_alt, args.skew)

    import cupy as cp
    from cupyx.scipy import ndimage as cnd

    import simt_tiles
    from simt_tiles.kernels.conv2d import LARGE_VARIANT, SHAPE_VARIANT, dispatch
    from simt_tiles.kernels.conv2d import k11_large_filter as k11
    from simt_tiles.kernels.conv2d._args import mode_of
    from simt_tiles.timing import time_cuda

    flush = flusher(cp)
    copy_bps = copy_rate(cp, flush)
    fma = {d: fma_rate(d) for d in sorted({c[0] for c in cases})}
    print(f"copy {copy_bps / 1e12:.2f} TB/s; FMA " + ", ".join(f"{d} {v / 1e12:.1f} TFLOP/s" for d, v in fma.items()),
          flush=True)

    rows, errors = [], []
    rng = np.random.default_rng(33)
    for dtype, side, kh, kw in cases:
        dt = np.dtype(dtype)
        x_host = rng.standard_normal((side, side), dtype=dt)
        x_pad = np.pad(x_host, ((kh // 2, kh - 1 - kh // 2), (kw // 2, kw - 1 - kw // 2)), mode="symmetric")
        img = cp.asarray(x_host)
        out = cp.empty_like(img)
        w_np = (rng.standard_normal((kh, kw)) / (kh * kw)).astype(dt)
        w_cp = cp.asarray(w_np)
        refs = references(x_pad, w_np, side, side)
        x_pad = None
        plan = dispatch.plan_filter(None, None, side, side, kh, kw, mode_of(MODE), dt, "device")
        rung_cfg = f"{plan.rung.name} {plan.config.tile()} tile"
        floor_copy = 2 * side * side * dt.itemsize / copy_bps
        floor_fma = 2 * side * side * kh * kw / fma[dtype]
        floor = max(floor_copy, floor_fma)
        impls = {
            "default, NumPy filter": lambda: simt_tiles.correlate2d(img, w_np, mode=MODE, out=out),
            "default, CuPy filter": lambda: simt_tiles.correlate2d(img, w_cp, mode=MODE, out=out),
            "k03 (old default), CuPy filter": lambda: simt_tiles.correlate2d(img, w_cp, mode=MODE, out=out,
                                                                             variant=SHAPE_VARIANT),
        }
        if dtype == "float32" and not args.no_alt:
            impls["k11, 8x8 outputs (ALT), CuPy filter"] = lambda: simt_tiles.correlate2d(
                img, w_cp, mode=MODE, out=out, variant=LARGE_VARIANT, config=k11.Config(**ALT))
        if args.skew and plan.rung.name == LARGE_VARIANT:
            skewed = _config("skew", dtype, kh, kw)
            impls[f"k11, default tile, rows skewed ({SKEW} B), CuPy filter"] = lambda: simt_tiles.correlate2d(
                img, w_cp, mode=MODE, out=out, variant=LARGE_VARIANT, config=skewed)
        if not args.no_peer:
            impls["cupyx.scipy.ndimage"] = lambda: cnd.correlate(img, w_cp, mode=MODE, output=out)
        for name, fn in impls.items():
            row = dict(dtype=dtype, size=side, filter=f"{kh}x{kw}", mode=MODE, impl=name,
                       rung=rung_cfg if name.startswith("default") else name,
                       floor_ms=floor * 1e3, bound_by="FMA" if floor_fma >= floor_copy else "copy")
            try:
                t0 = time.perf_counter()
                out.fill(cp.nan)
                fn()
                cp.cuda.Device().synchronize()
                row["first_call_s"] = time.perf_counter() - t0
                row["ok"], row["err_over_bound"] = check(out, refs)
                times = time_cuda(fn, warmup=2, reps=args.reps, before=flush)
                row["median_ms"] = statistics.median(times)
                row["iqr_ms"] = (statistics.quantiles(times, n=4)[2] - statistics.quantiles(times, n=4)[0]
                                 if len(times) > 1 else 0.0)
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                for _ in range(args.loop):
                    fn()
                cp.cuda.Device().synchronize()
                row["wall_us"] = (time.perf_counter() - t0) / args.loop * 1e6
                row["pct_ceiling"] = 100 * floor * 1e3 / row["median_ms"]
                row["tflops"] = 2 * side * side * kh * kw / (row["median_ms"] * 1e-3) / 1e12
            except Exception as exc:  # one implementation's failure is reported, the others still run
                row["ok"] = False
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                errors.append(f"{dtype} {side}² {kh}x{kw} {name}: {row['error']}")
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
        impls = img = out = w_cp = None
        cp.get_default_memory_pool().free_all_blocks()

    lines = [f"copy {copy_bps / 1e12:.2f} TB/s, FMA " + ", ".join(f"{d} {v / 1e12:.1f} TFLOP/s" for d, v in fma.items())
             + f"; compile (parallel) {compile_s['wall']:.1f} s", "",
             "| dtype | image | filter | impl | ms (median) | IQR ms | wall µs/call | TFLOP/s | floor ms (bound) "
             "| % of ceiling | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "median_ms" not in r:
            lines.append(f"| {r['dtype']} | {r['size']}² | {r['filter']} | {r['impl']} | — | — | — | — | "
                         f"{r['floor_ms']:.3f} ({r['bound_by']}) | — | {r.get('error', 'FAIL')} |")
            continue
        lines.append(f"| {r['dtype']} | {r['size']}² | {r['filter']} | {r['impl']} | {r['median_ms']:.3f} | "
                     f"{r['iqr_ms']:.3f} | {r['wall_us']:.0f} | {r['tflops']:.1f} | "
                     f"{r['floor_ms']:.3f} ({r['bound_by']}) | "
                     f"{r['pct_ceiling']:.1f}% | {'pass' if r['ok'] else 'FAIL'} ({r['err_over_bound']:.2g}) |")
    print("\n".join(lines))
    total = time.perf_counter() - t_start
    print(f"total {total:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": "python3 benchmarks/lab/large_filter_probe.py" + (" --quick" if args.quick else ""),
            "copy_tbps": copy_bps / 1e12, "fma_tflops": {d: v / 1e12 for d, v in fma.items()},
            "compile_s": compile_s, "total_s": total, "rows": rows, "errors": errors}, indent=1))
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
