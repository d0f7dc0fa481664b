"""Build, verify, then time every matmul rung against cuBLAS FP32 — one run, one GPU.

    simt-tiles bench matmul [--sizes 4096 1000x1000x1000 ...] [--variants k03_smem_tiled ...]
                                      [--config k03_smem_tiled:tile=16 ...] [--reps 20]
                                      [--json results.json] [--md results.md]

Method (benchmarks/NOTES.md): each implementation is first checked against a
float64 cuBLAS reference with the γ_K·|A|·|B| bound on a NaN-poisoned output;
only then timed.  CUDA events around each launch, warm-up, median of the timed
runs; input sets are rotated so the bytes touched per size exceed the 50 MB
L2 even for small sizes.  cuBLAS FP32 (CuPy, TF32 off: CUPY_TF32 unset) is
measured in the same process and every rung is reported as a ratio to it.
Kernels are launched directly (no Python API checks inside the timed region).

Also measured, for context (``--no-extra-peers`` skips them): ``torch.matmul``
FP32 (``allow_tf32 = False``), cuBLAS and torch with TF32 tensor cores, and
the cuTile counterparts (``simt_tiles.tile.matmul``, FP32 and TF32) when
cuda.tile is importable.  Each row states its precision; TF32 rows are
checked against the TF32 bound (the FP32 bound plus 2·2⁻¹⁰·|A|·|B| for the
operands' conversion) and their error is shown beside their speed, so a TF32
rate is never read as an FP32 one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np

from .. import _probe

DEFAULT_SIZES = ["1024", "2048", "4096", "8192", "4096x1024x8192", "8192x8192x1024", "1000x1000x1000", "1031x997x1013"]
L2_BYTES = 50 * 2**20  # H200: 50 MiB of L2 (torch reports 60 MB); rotate sets to exceed it 3x


def parse_size(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.lower().split("x")]
    return tuple(parts * 3) if len(parts) == 1 else tuple(parts)  # type: ignore[return-value]


def parse_config(text: str):
    """``variant:field=value,field=value`` → (variant, config object)."""
    from simt_tiles.kernels.matmul import RUNGS

    variant, _, fields = text.partition(":")
    rung = RUNGS[variant]
    base = rung.presets["default"]
    kwargs = {k: int(v) for k, v in (f.split("=") for f in fields.split(",") if f)}
    return variant, dataclasses.replace(base, **kwargs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, help="N (square) or MxNxK")
    p.add_argument("--variants", nargs="+", default=None, help="default: every rung")
    p.add_argument("--config", nargs="*", default=[], help="extra configs, variant:field=value,...")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--budget-s", type=float, default=3.0, help="max timed seconds per entry (fewer reps for slow rungs)")
    p.add_argument("--no-extra-peers", action="store_true", help="only cuBLAS FP32 beside the rungs")
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    p.add_argument("--plot", default=None, help="PNG: TFLOP/s against size")
    args = p.parse_args(argv)

    if _probe.select_backend():
        print("bench_matmul: no CUDA GPU found; this benchmark reports GPU timings only (use `simt-tiles demo` "
              "for the simulator).", file=sys.stderr)
        return 2

    import cupy as cp
    from numba import cuda

    from simt_tiles.bounds import TF32_U, check_within, gamma, unit_roundoff
    from simt_tiles.cli import machine_info
    from simt_tiles.kernels.matmul import MATMUL_VARIANTS, RUNGS, flops
    from simt_tiles.kernels.matmul.reference import matmul_reference
    from simt_tiles.timing import summarize, time_cuda

    assert not os.environ.get("CUPY_TF32"), "CUPY_TF32 must be unset: cuBLAS FP32 is the peer"
    entries = [(v, RUNGS[v].presets["default"], "default") for v in (args.variants or MATMUL_VARIANTS)]
    tile = None
    if not args.no_extra_peers:
        from .common import load_tile

        tile = load_tile()
    entries += [(v, cfg, "custom") for v, cfg in map(parse_config, args.config)]

    results = []
    rng = cp.random.default_rng(2026)
    for size in map(parse_size, args.sizes):
        m, n, k = size
        set_bytes = 4 * (m * k + k * n + m * n)
        nsets = max(1, min(16, math.ceil(3 * L2_BYTES / set_bytes)))
        sets = [(rng.standard_normal((m, k), dtype=cp.float32), rng.standard_normal((k, n), dtype=cp.float32),
                 cp.empty((m, n), cp.float32)) for _ in range(nsets)]
        a0, b0, _ = sets[0]
        ref, bound = matmul_reference(a0, b0, xp=cp, precise=False)
        g = (gamma(k, unit_roundoff(np.float32)) + gamma(k, unit_roundoff(np.float64))) * (1 + 1e-6)
        bound_tf32 = bound * ((g + 2 * TF32_U) / g)  # bound = g·|A|·|B|: add the operands' TF32 rounding

        def record(name, cfg_text, launch, tag, precision="fp32"):
            c = sets[0][2]
            c.fill(cp.nan)
            try:
                launch(*sets[0])
                chk = check_within(c, ref, bound_tf32 if precision == "tf32" else bound, xp=cp)
            except Exception as exc:  # a peer that cannot run here is a row, not a crash
                print(f"  {name}: {type(exc).__name__}: {exc}", flush=True)
                results.append({"impl": name, "config": cfg_text, "kind": tag, "m": m, "n": n, "k": k,
                                "precision": precision, "passed": False, "err_over_bound": float("nan"),
                                "error": f"{type(exc).__name__}: {exc}"[:300]})
                return
            row = {"impl": name, "config": cfg_text, "kind": tag, "m": m, "n": n, "k": k, "dtype": "float32",
                   "precision": precision, "passed": chk.passed, "max_err": chk.max_err,
                   "err_over_bound": chk.worst_ratio}
            if chk.passed:
                t0 = time.perf_counter()
                launch(*sets[0])
                cuda.synchronize()
                one = time.perf_counter() - t0
                reps = max(5, min(args.reps, int(args.budget_s / max(one, 1e-6))))
                it = iter(range(10**9))
                times = time_cuda(lambda: launch(*sets[next(it) % nsets]), warmup=2, reps=reps)
                st = summarize(times)
                row.update(st, tflops=flops(m, n, k) / (st["median_ms"] * 1e-3) / 1e12)
            results.append(row)
            print(f"  {name:<18} {cfg_text:<28} {m}x{n}x{k}: {'ok ' if chk.passed else 'BAD'} "
                  f"err/bound={chk.worst_ratio:.3g} " + (f"{row['median_ms']:.3f} ms {row['tflops']:.2f} TFLOP/s"
                                                        if chk.passed else ""), flush=True)

        print(f"{m}x{n}x{k}: {nsets} rotating input sets", flush=True)
        record("cuBLAS", "cupy.matmul FP32", lambda a, b, c: cp.matmul(a, b, out=c), "peer")
        if not args.no_extra_peers:
            extra_peers(record, sets, cp, tile)
        for variant, cfg, tag in entries:
            rung = RUNGS[variant]
            kernel = rung.kernel(cfg, np.float32)
            grid, block = rung.geometry(cfg, m, n, k)
            devs = {id(x): cuda.as_cuda_array(x) for s in sets for x in s}

            def launch(a, b, c, kernel=kernel, grid=grid, block=block):
                kernel[grid, block](devs[id(a)], devs[id(b)], devs[id(c)])

            record(variant, _cfg_text(cfg), launch, tag)
        sets.clear()  # free the device buffers before the next size
        cp.get_default_memory_pool().free_all_blocks()

    _add_ratios(results)
    table = markdown_table(results)
    print(table)
    failed = [r for r in results if not r["passed"]]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_info(), "method": __doc__, "results": results}, fh, indent=2)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(table + "\n")
    if args.plot:
        from simt_tiles.report import plot_rates

        plot_rates({"machine": machine_info(), "results": results}, args.plot)
    return 1 if failed else 0




def extra_peers(record, sets, cp, tile) -> None:
    """torch.matmul FP32, cuBLAS/torch TF32 and the cuTile matmuls, on the same rotating input sets."""
    import torch

    views = {id(x): torch.as_tensor(x, device="cuda") for s in sets for x in s}  # zero-copy views

    def torch_mm(a, b, c):
        torch.matmul(views[id(a)], views[id(b)], out=views[id(c)])

    torch.backends.cuda.matmul.allow_tf32 = False
    record("torch.matmul", "torch FP32", torch_mm, "peer")
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        record("torch.matmul TF32", "torch allow_tf32", torch_mm, "peer", precision="tf32")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        from cupy._core import _routines_linalg as lin  # CuPy's switch behind CUPY_TF32

        lin.set_compute_type(np.float32, lin.COMPUTE_TYPE_TF32)
        try:
            record("cuBLAS TF32", "cupy.matmul TF32", lambda a, b, c: cp.matmul(a, b, out=c), "peer",
                   precision="tf32")
        finally:
            lin.set_compute_type(np.float32, lin.COMPUTE_TYPE_DEFAULT)
    except (ImportError, AttributeError) as exc:
        print(f"  cuBLAS TF32 skipped: CuPy has no compute-type switch here ({exc})", flush=True)
    if tile is not None:
        for prec in ("fp32", "tf32"):
            record(f"cuTile {prec.upper()}", f"simt_tiles.tile.matmul {prec}",
                   lambda a, b, c, prec=prec: tile.matmul(a, b, precision=prec, out=c), "tile", precision=prec)


def _cfg_text(cfg) -> str:
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))


def _add_ratios(results) -> None:
    peers = {(r["m"], r["n"], r["k"]): r.get("tflops") for r in results if r["impl"] == "cuBLAS"}
    for r in results:
        p = peers.get((r["m"], r["n"], r["k"]))
        if p and r.get("tflops"):
            r["vs_cublas"] = r["tflops"] / p


def markdown_table(results) -> str:
    from simt_tiles._table import markdown

    head = ["impl", "config", "precision", "M×N×K", "check (err/bound)", "median ms", "TFLOP/s", "× cuBLAS FP32"]
    rows = []
    for r in results:
        rows.append([r["impl"], r["config"], r.get("precision", "fp32"), f"{r['m']}×{r['n']}×{r['k']}",
                     f"{'pass' if r['passed'] else 'FAIL'} ({r['err_over_bound']:.2g})",
                     f"{r['median_ms']:.3f}" if "median_ms" in r else "-",
                     f"{r['tflops']:.2f}" if "tflops" in r else "-",
                     f"{r['vs_cublas']:.3f}" if "vs_cublas" in r else "-"])
    return markdown(head, rows)


if __name__ == "__main__":
    sys.exit(main())
