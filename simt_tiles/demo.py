"""Run every rung of every ladder (simt_tiles.registry) once on a ragged problem and check it against
its reference and error bound; on a GPU also time the matmul rungs against cuBLAS FP32.

``simt-tiles demo`` uses the harness of ``simt_tiles.bench`` (the same row schema).

Without a GPU it runs in Numba's CUDA simulator with small problems and the ``"sim"`` presets.
Each ladder has one case function below: given a rung's name and a dtype it returns what to call
and how to check it; a ladder without one is reported as a failure, so a new ladder cannot be
left out silently.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import _probe, _table, registry
from ._options import output_file
from .bench.peers import baseline, peers
from .bounds import check_within
from .machine import describe


def _parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().replace("x", ",").split(",")
    try:
        m, n, k = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected M,N,K (e.g. 4096,4096,4096); got {text!r}") from None
    if min(m, n, k) < 0:
        raise argparse.ArgumentTypeError(f"sizes must be >= 0; got {text!r}")
    return m, n, k


def add_arguments(p: argparse.ArgumentParser) -> None:
    names = [lad.name for lad in registry.LADDERS]
    p.add_argument("--ladder", nargs="+", choices=names, default=None, metavar="LADDER",
                   help=f"only these ladders (default: all of {', '.join(names)})")
    p.add_argument("--shape", type=_parse_shape,
                   help="matmul M,N,K (default: 19,23,17 in the simulator, 4096,4096,4096 on a GPU)")
    p.add_argument("--dtype", choices=["float32", "float64", "both"], default=None,
                   help="default: both in the simulator, float32 on a GPU")
    p.add_argument("--reps", type=int, default=20, help="timed runs per matmul rung on a GPU (median reported)")
    p.add_argument("--json", metavar="PATH", type=output_file,
                   help="also write the rows and the machine description as JSON")


# ---------------------------------------------------------------------------
# one case per family (its FAMILY.demo): (problem label, fn, check); fn computes, check returns a BoundCheck
# ---------------------------------------------------------------------------


class _Ctx:
    """What the case functions share: the RNG, the preset, the size scale, CuPy (GPU only)."""

    def __init__(self, simulator: bool, shape, cp):
        import numpy as np

        self.np, self.rng, self.simulator, self.cp = np, np.random.default_rng(7), simulator, cp
        self.preset = "sim" if simulator else "default"
        self.scale = 1 if simulator else 8
        self.shape = shape


# ---------------------------------------------------------------------------


def run(args) -> int:
    simulator = _probe.select_backend()  # before anything imports numba.cuda
    # deferred: loads Numba (backend choice first)
    from .bench.harness import Harness

    info = describe()
    shape = args.shape or ((19, 23, 17) if simulator else (4096, 4096, 4096))
    dtypes = {"both": ["float32", "float64"], None: ["float32", "float64"] if simulator else ["float32"]}.get(
        args.dtype, [args.dtype])
    cp = None if simulator else _try_cupy()
    where = ("Numba CUDA simulator (no GPU found): small problems, 'sim' presets, no timings" if simulator
             else f"{info['gpu']} (cc {info.get('compute_capability', '?')}); matmul rungs timed")
    print(f"simt-tiles demo on {where}", flush=True)
    ctx = _Ctx(simulator, shape, cp)
    h = Harness(reps=args.reps, timed=not simulator, sync=_sync(), progress=_Dots())
    for lad in registry.LADDERS:
        if args.ladder and lad.name not in args.ladder:
            continue
        try:
            family, why = lad.family(), "no demo case (its FAMILY.demo)"
        except Exception as exc:  # noqa: BLE001 - a family that does not load is a failed row, not a crash
            family, why = None, f"the family does not load: {exc!r}"
        case = getattr(family, "demo", None)
        for dtype in dtypes:
            if case is None:
                h.rows.append({"group": lad.name, "problem": "-", "x": None, "impl": "(every rung)", "kind": "simt",
                               "precision": "-", "passed": False, "dtype": dtype, "error": f"{lad.name}: {why}"})
                continue
            for rung in family.rungs:
                timed = lad.name == "matmul" and not simulator
                try:
                    problem, fn, check = case(rung, dtype, ctx)
                except Exception as exc:  # building the inputs failed: a row, not a crash
                    problem, fn, check = "-", _raise(exc), (lambda: False)
                h.entry(lad.name, f"{problem}, {dtype}", rung, fn, check=check, timed=timed, dtype=dtype,
                        precision="fp32" if dtype == "float32" else "fp64", config=ctx.preset,
                        flops=2.0 * shape[0] * shape[1] * shape[2] if timed else None)
            if lad.name == "matmul" and not simulator and cp is not None:
                _cublas_row(h, ctx, dtype)
    print(flush=True)
    rows = h.finish(ceilings={}, peers={"matmul": "cuBLAS"})
    head = ["ladder", "rung", "problem", "err/bound", "check"] + (
        [] if simulator else ["median ms", "TFLOP/s", "× cuBLAS"])
    body = []
    for r in rows:
        line = [r["group"], r["impl"], r["problem"], _f(r.get("err_over_bound"), ".3g"),
                "pass" if r["passed"] else "FAIL " + r.get("error", "")[:60]]
        if not simulator:
            line += [_f(r.get("median_ms"), ".3f"), _f(r.get("tflops"), ".2f"), _f(r.get("vs_peer"), ".2f")]
        body.append(line)
    print(_table.render(head, body))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "title": "simt-tiles demo", "results": rows}, fh, indent=2)
        print(f"wrote {args.json}")
    failed = [f"{r['group']} {r['impl']} {r.get('dtype', '')}" for r in rows if not r["passed"]]
    print(f"all {len(rows)} checks passed" if not failed else f"FAILED: {failed}")
    return 1 if failed else 0


class _Dots:
    """Progress for the demo: one dot per finished entry (the table at the end says the rest)."""

    def step(self, text: str) -> None:
        pass

    def done(self, line: str) -> None:
        print(".", end="", flush=True)


def _cublas_row(h, ctx, dtype) -> None:
    """cuBLAS (the matmul group's baseline peer) on the same problem, timed beside the rungs."""
    # deferred: loads Numba (backend choice first)
    from .kernels.matmul.reference import matmul_reference

    base = next(p for p in peers("matmul") if p.name == baseline("matmul"))
    m, n, k = ctx.shape
    cp = ctx.cp
    a, b = cp.asarray(ctx.rng.standard_normal((m, k)).astype(dtype)), cp.asarray(
        ctx.rng.standard_normal((k, n)).astype(dtype))
    out = cp.full((m, n), cp.nan, dtype=dtype)
    ref, bound = matmul_reference(a, b, xp=cp, precise=False)
    h.entry("matmul", f"{m}x{n}x{k}, {dtype}", base.name, lambda: base.run(a, b, out),
            check=lambda: check_within(out, ref, bound, xp=cp), kind="peer", dtype=dtype,
            precision="fp32" if dtype == "float32" else "fp64", config="library", flops=2.0 * m * n * k)


def _raise(exc):
    def fn():
        raise exc

    return fn


def _sync():
    from numba import cuda

    return cuda.synchronize


def _f(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _try_cupy():
    try:
        import cupy

        return cupy
    except ImportError:
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="simt-tiles demo", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
