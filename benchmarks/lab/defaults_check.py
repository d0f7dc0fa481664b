"""Every public function's default (no variant, no config) on the committed benchmark problems, timed
as `simt-tiles bench` times them, then compared with the committed results (issue 29's target: no
default slower than before by more than 2%).

    python3 benchmarks/lab/defaults_check.py --json out/defaults_h200.json [--reps 20]   # on the GPU
    python3 benchmarks/lab/defaults_check.py --compare out/defaults_h200.json          # anywhere

The problems and their old times are the committed rows (benchmarks/results): matmul's 8 sizes
(`matmul_h200.json`, row "default"), correlate2d at 8192² 3×3/5×5/7×7 constant/reflect with a CuPy
and a NumPy filter (`conv_default_h200.json`), softmax 16384 × 256…32768, reduce sum 2^28 and along
the rows of 16384², vector_add 2^28 (`patterns_h200.json`). conv2d_nchw's defaults are compared by
the `conv33` step (its layer zoo against `conv_issue33_h200.json`). Every output is checked first
(the γ bounds of `simt-tiles bench`). The comparison prints new/old per row and the same ratio
divided by the device copy's new/old (a drift of the machine, clocks or driver, moves both).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
#: committed file → the impl names of its default rows
OLD = {"matmul_h200.json": ("default",),
       "conv_default_h200.json": ("default, CuPy filter", "default, NumPy filter"),
       "patterns_h200.json": ("softmax (variant=None)", "simt_tiles.reduce", "k02_multi_element")}
COPY = ("copy", "268435456 float32", "device copy")
#: the row groups (--groups)
GROUPS = ("matmul", "filter2d", "softmax", "reduce", "elementwise")
#: matmul's drift anchor: cuBLAS FP32 at the same problem (one GEMM moves with clocks, not bandwidth)
ANCHOR = "cuBLAS"


def old_rows() -> dict:
    """committed file → (its device copy's median ms, {(group, problem, impl): median ms} of its default rows)."""
    out = {}
    for name, impls in OLD.items():
        rows = json.loads((RESULTS / name).read_text())["results"]
        copy = next((r["median_ms"] for r in rows if (r["group"], r["problem"], r["impl"]) == COPY), None)
        out[name] = copy, {(r["group"], r["problem"], r["impl"]): r["median_ms"]
                           for r in rows if (r["impl"] in impls or r["impl"] == ANCHOR) and r.get("median_ms")}
    return out


def _warm_matmul(shape) -> str:
    """One default matmul at ``shape`` in a worker process: its kernels into Numba's disk cache."""
    import cupy as cp

    import simt_tiles

    m, n, k = shape
    simt_tiles.matmul(cp.ones((m, k), cp.float32), cp.ones((k, n), cp.float32))
    cp.cuda.runtime.deviceSynchronize()
    return "x".join(map(str, shape))


def warm(jobs: int, groups=GROUPS) -> None:
    """matmul's defaults at the committed sizes compiled in parallel (the generated rungs take 20-50 s
    each cold; one process per size), conv2d's by ``simt-tiles warm correlate2d``."""
    import multiprocessing as mp
    import subprocess
    import time
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.perf_counter()
    conv = subprocess.Popen([sys.executable, "-m", "simt_tiles", "warm", "correlate2d", "-j", str(max(jobs // 2, 1))],
                            cwd=ROOT)
    sizes = [tuple(map(int, k[1].split("x"))) for _, rows in old_rows().values() for k in rows
             if k[0] == "matmul" and "matmul" in groups]
    with ProcessPoolExecutor(max(jobs // 2, 1), mp_context=mp.get_context("spawn")) as ex:
        print("warmed", *ex.map(_warm_matmul, sorted(set(sizes))), flush=True)  # (none: no matmul group)
    conv.wait()
    print(f"warm: {time.perf_counter() - t0:.0f} s", flush=True)


def measure(args) -> int:
    sys.path.insert(0, str(ROOT))
    if args.jobs:
        warm(args.jobs, args.groups)
    import numpy as np

    import simt_tiles
    from simt_tiles.bench import common
    from simt_tiles.bounds import BoundCheck, gamma, unit_roundoff
    from simt_tiles.kernels.softmax.reference import softmax_reference

    want = {k for _, rows in old_rows().values() for k in rows}
    u32, u64 = unit_roundoff(np.float32), unit_roundoff(np.float64)
    with common.session("defaults", args.reps, with_tile=False, budget_s=args.budget_s) as (h, cp, _):
        import cupyx.scipy.ndimage as cnd

        rng = cp.random.default_rng(5)
        common.copy_ceiling(h, cp)
        matmuls = [k for k in want if k[0] == "matmul" and k[2] != ANCHOR] if "matmul" in args.groups else []
        for (group, problem, impl) in matmuls:
            m, n, k = map(int, problem.split("x"))
            a, b = rng.standard_normal((m, k), dtype=cp.float32), rng.standard_normal((k, n), dtype=cp.float32)
            c = cp.full((m, n), cp.nan, cp.float32)
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
            bound = (gamma(k, u32) + gamma(k, u64)) * (cp.abs(a).astype(cp.float64) @ cp.abs(b).astype(cp.float64))
            for impl, fn in ((impl, lambda: simt_tiles.matmul(a, b, out=c)), (ANCHOR, lambda: cp.matmul(a, b, out=c))):
                c.fill(cp.nan)
                h.entry(group, problem, impl, fn, check=lambda: BoundCheck(c, ref, u32 * cp.abs(ref) + bound, xp=cp),
                        flops=2 * m * n * k, x=m * n * k, kind="simt" if impl != ANCHOR else "peer")
            a = b = c = ref = bound = None
            cp.get_default_memory_pool().free_all_blocks()
        x = rng.standard_normal((8192, 8192), dtype=cp.float32)
        x64, ax64, out = x.astype(cp.float64), cp.abs(x).astype(cp.float64), cp.empty_like(x)
        for size in (3, 5, 7) if "filter2d" in args.groups else ():
            w = cp.outer(rng.standard_normal(size, dtype=cp.float32), rng.standard_normal(size, dtype=cp.float32))
            g = gamma(size * size + 1, u32) + gamma(size * size + 1, u64)
            for mode in ("constant", "reflect"):
                ref = cnd.correlate(x64, w.astype(cp.float64), mode=mode)
                bound = cnd.correlate(ax64, cp.abs(w).astype(cp.float64), mode=mode) * g * (1 + 1e-6)
                for impl, wv in (("default, CuPy filter", w), ("default, NumPy filter", cp.asnumpy(w))):
                    out.fill(cp.nan)
                    h.entry("filter2d", f"8192² {size}x{size} {mode}", impl,
                            lambda wv=wv, mode=mode: simt_tiles.correlate2d(x, wv, mode=mode, out=out),
                            check=lambda ref=ref, bound=bound: BoundCheck(out, ref, bound, xp=cp),
                            nbytes=2 * x.nbytes, x=size)
        x = x64 = ax64 = out = ref = bound = None
        cp.get_default_memory_pool().free_all_blocks()
        for cols in (256, 1024, 4096, 16384, 32768) if "softmax" in args.groups else ():
            x = rng.standard_normal((16384, cols), dtype=cp.float32)
            out = cp.full_like(x, cp.nan)
            ref, bound = softmax_reference(x, xp=cp)
            h.entry("softmax", f"16384x{cols}", "softmax (variant=None)", lambda: simt_tiles.softmax(x, out=out),
                    check=lambda: BoundCheck(out, ref, bound, xp=cp), nbytes=2 * x.nbytes, x=cols)
        x = out = ref = bound = None
        if "reduce" in args.groups or "elementwise" in args.groups:
            n = 2**28
            v = rng.standard_normal(n, dtype=cp.float32)
        if "reduce" in args.groups:
            # float64 accumulation, one rounding (simt_tiles.reduce's contract): γ_n(u64)·Σ|x| + u32·|sum|
            s, sabs = float(v.astype(cp.float64).sum()), float(cp.abs(v).astype(cp.float64).sum())
            h.entry("reduce", "sum 2^28", "simt_tiles.reduce", lambda: simt_tiles.reduce(v),
                    check=lambda: abs(float(simt_tiles.reduce(v)) - s) <= u32 * abs(s) + 2 * gamma(n, u64) * sabs,
                    nbytes=v.nbytes, x=n)
            rows = v.reshape(16384, 16384)
            r64, rabs = rows.astype(cp.float64).sum(axis=1), cp.abs(rows).astype(cp.float64).sum(axis=1)
            ro = cp.full(16384, cp.nan, cp.float32)
            h.entry("reduce", "sum 16384x16384 axis=-1", "simt_tiles.reduce",
                    lambda: simt_tiles.reduce(rows, axis=-1, out=ro),
                    check=lambda: BoundCheck(ro, r64, u32 * cp.abs(r64) + 2 * gamma(16384, u64) * rabs, xp=cp),
                    nbytes=v.nbytes, x=16384)
        if "elementwise" in args.groups:
            a, b = v, rng.standard_normal(n, dtype=cp.float32)
            c, exact = cp.full_like(a, cp.nan), a + b
            h.entry("elementwise", "vector_add 2^28", "k02_multi_element", lambda: simt_tiles.vector_add(a, b, out=c),
                    check=lambda: bool(cp.array_equal(c, exact)), nbytes=3 * a.nbytes, x=n)
        rows_out = h.rows
    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps({"results": rows_out}, indent=1, default=float))
    print(f"wrote {args.json}")
    failed = [r for r in rows_out if not r["passed"]]
    for r in failed:
        print("FAILED", r["group"], r["problem"], r["impl"], r.get("error", ""))
    return compare(args.json, args.groups) or (1 if failed else 0)


def compare(path, groups=GROUPS) -> int:
    """new/old per default row; 1 when a row is slower than before by more than 2% after the drift."""
    new = {(r["group"], r["problem"], r["impl"]): r.get("median_ms")
           for r in json.loads(pathlib.Path(path).read_text())["results"]}
    worse, ratios = [], []
    print(f"{'problem':34} {'impl':24} {'old ms':>9} {'new ms':>9} {'new/old':>8} {'/ copy drift':>12}")
    for name, (copy_old, rows) in old_rows().items():
        drift = new[COPY] / copy_old if new.get(COPY) and copy_old else 1.0
        print(f"-- {name}: device copy new/old {drift:.3f}")
        for key, t_old in rows.items():
            if key[2] == ANCHOR or key[0] not in groups:
                continue
            anchor = (key[0], key[1], ANCHOR)
            if anchor in rows:  # matmul: cuBLAS at the same size
                drift = new[anchor] / rows[anchor] if new.get(anchor) else 1.0
            t_new = new.get(key)
            if t_new is None:
                print(f"{key[1]:34} {key[2]:24} {t_old:9.4f} {'missing':>9}")
                worse.append(key)
                continue
            r = t_new / t_old
            ratios.append(r / drift)
            flag = "  SLOWER" if r / drift > 1.02 else ""
            print(f"{key[1]:34} {key[2]:24} {t_old:9.4f} {t_new:9.4f} {r:8.3f} {r / drift:12.3f}{flag}")
            if flag:
                worse.append(key)
    if ratios:
        print(f"geomean new/old (drift removed): {statistics.geometric_mean(ratios):.3f} over {len(ratios)} rows; "
              f"{len(worse)} slower by > 2% or missing")
    return 1 if worse else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="measure (GPU) and write the rows here")
    p.add_argument("--compare", metavar="JSON", help="compare a measured file with the committed rows")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("-j", "--jobs", type=int, default=0, help="compile the defaults first with N processes")
    p.add_argument("--budget-s", type=float, default=1.0)
    p.add_argument("--groups", nargs="+", choices=GROUPS, default=list(GROUPS),
                   help="measure and compare only these groups' rows (default: all)")
    args = p.parse_args(argv)
    if args.compare:
        return compare(args.compare, args.groups)
    if not args.json:
        p.error("give --json (measure) or --compare")
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
