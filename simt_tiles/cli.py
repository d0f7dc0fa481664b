"""The ``simt-tiles`` command (also ``python -m simt_tiles``).

    simt-tiles demo            run every shipped kernel, check it, print a table
    simt-tiles compile-gate    compile every shipped config to sm_90 PTX + ptxas report
    simt-tiles bench GROUP     verify, then time on a GPU (matmul, patterns, softmax, ...)

Numba chooses between the GPU and its simulator when ``numba.cuda`` is first
imported, so this module picks the backend first and imports Numba after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

from . import _probe


def _parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().replace("x", ",").split(",")
    try:
        m, n, k = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected M,N,K (e.g. 4096,4096,4096); got {text!r}") from None
    if min(m, n, k) < 0:
        raise argparse.ArgumentTypeError(f"sizes must be >= 0; got {text!r}")
    return m, n, k


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="simt-tiles", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run, check (and on a GPU time) every shipped matmul rung")
    d.add_argument("--shape", type=_parse_shape, help="M,N,K (default: 19,23,17 in the simulator, 4096,4096,4096 on a GPU)")
    d.add_argument("--dtype", choices=["float32", "float64", "both"], default=None,
                   help="default: both in the simulator, float32 on a GPU")
    d.add_argument("--reps", type=int, default=20, help="timed runs per kernel on a GPU (median reported)")
    d.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    sub.add_parser("compile-gate", help="compile every shipped config to PTX (sm_90) and run ptxas -v; no GPU needed")
    b = sub.add_parser("bench", help="GPU benchmarks (refuses to run without a GPU); see simt-tiles bench --help",
                       add_help=False)
    b.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "compile-gate":
        # compile_ptx needs Numba's real CUDA target (no GPU is needed for it).
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
        from .compile_gate import main as gate_main

        return gate_main()
    if args.command == "bench":
        from .bench import main as bench_main

        return bench_main(args.rest)
    if args.command == "demo":
        _probe.select_backend()
        return demo(args)
    raise AssertionError(args.command)  # pragma: no cover


# ---------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------


def demo(args) -> int:
    import numpy as np

    from . import _table
    from .bounds import check_within
    from .kernels.matmul import MATMUL_VARIANTS, flops, matmul
    from .kernels.matmul.reference import matmul_reference
    from .runtime import SIMULATOR

    m, n, k = args.shape or ((19, 23, 17) if SIMULATOR else (4096, 4096, 4096))
    dtype_arg = args.dtype or ("both" if SIMULATOR else "float32")
    dtypes = ["float32", "float64"] if dtype_arg == "both" else [dtype_arg]
    preset = "sim" if SIMULATOR else "default"
    where = "Numba CUDA simulator (no GPU found): small sizes, 'sim' presets, no timings" if SIMULATOR else _gpu_name()
    print(f"simt-tiles demo on {where}; C = A @ B with M,N,K = {m},{n},{k}")

    cp = None if SIMULATOR else _try_cupy()
    rng = np.random.default_rng(2026)
    results = []
    for dtype in dtypes:
        a_h = rng.standard_normal((m, k)).astype(dtype)
        b_h = rng.standard_normal((k, n)).astype(dtype)
        if SIMULATOR:
            ref, bound = matmul_reference(a_h, b_h)
            xp, a, b = np, a_h, b_h
        else:
            xp = cp or np
            a, b = (cp.asarray(a_h), cp.asarray(b_h)) if cp else _to_numba(a_h, b_h)
            ref, bound = matmul_reference(a if cp else a_h, b if cp else b_h, xp=xp, precise=False)
        peers = [("cuBLAS (CuPy)", lambda out: cp.matmul(a, b, out=out))] if cp else []
        impls = [(v, lambda out, v=v: matmul(a, b, out=out, variant=v, config=preset)) for v in MATMUL_VARIANTS]
        for name, fn in impls + peers:
            out = _poisoned((m, n), dtype, cp)  # device buffer: an unwritten element stays NaN
            fn(out)
            chk = check_within(out if xp is cp else out.copy_to_host(), ref, bound, xp=xp)
            row = {"impl": name, "dtype": dtype, "shape": [m, n, k], "max_err": chk.max_err,
                   "err_over_bound": chk.worst_ratio, "passed": chk.passed,
                   "config": preset if name in MATMUL_VARIANTS else "library"}
            if not SIMULATOR and chk.passed:
                from .timing import summarize, time_cuda

                stats = summarize(time_cuda(lambda: fn(out), reps=args.reps))
                row.update(stats)
                row["tflops"] = flops(m, n, k) / (stats["median_ms"] * 1e-3) / 1e12
            results.append(row)

    _add_ratios(results)
    head = ["impl", "dtype", "M,N,K", "config", "max|err|", "err/bound", "check"]
    if not SIMULATOR:
        head += ["median ms", "TFLOP/s", "x cuBLAS"]
    body = []
    for r in results:
        line = [r["impl"], r["dtype"], ",".join(map(str, r["shape"])), r["config"],
                f"{r['max_err']:.3g}", f"{r['err_over_bound']:.3g}", "pass" if r["passed"] else "FAIL"]
        if not SIMULATOR:
            line += [_f(r.get("median_ms"), ".3f"), _f(r.get("tflops"), ".2f"), _f(r.get("vs_cublas"), ".2f")]
        body.append(line)
    print(_table.render(head, body))
    others = demo_other_ladders(SIMULATOR)
    print(f"\nthe other ladders ({'simulator, sim presets' if SIMULATOR else 'GPU, default presets'}; "
          "timings: simt-tiles bench)")
    print(_table.render(["call", "variant", "problem", "dtype", "err/bound", "check"],
                        [[r["impl"], r["variant"], r["problem"], r["dtype"], f"{r['err_over_bound']:.3g}",
                          "pass" if r["passed"] else "FAIL"] for r in others]))
    results += others
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_info(), "results": results}, fh, indent=2)
        print(f"wrote {args.json}")
    failed = [r["impl"] for r in results if not r["passed"]]
    print("all checks passed" if not failed else f"FAILED: {failed}")
    return 1 if failed else 0


def demo_other_ladders(simulator: bool) -> list[dict]:
    """Every rung of the other ladders once, on a ragged problem, against its reference and bound.

    Small shapes in the simulator (each simulated thread costs ~40 µs per operation), larger
    ones on a GPU; NumPy in, NumPy out, outputs checked element by element."""
    import numpy as np

    import simt_tiles as st

    from .bounds import check_within, gamma, unit_roundoff
    from .kernels.conv2d.reference import (
        correlate1d_reference,
        correlate2d_reference,
        correlate_separable_reference,
    )
    from .kernels.conv_nchw.reference import conv2d_nchw_reference
    from .kernels.softmax.reference import softmax_reference

    rng = np.random.default_rng(7)
    preset = "sim" if simulator else "default"
    rows = []

    def record(impl, variant, problem, dtype, chk):
        rows.append({"impl": impl, "variant": variant or "None", "problem": problem, "dtype": dtype,
                     "err_over_bound": chk.worst_ratio, "max_err": chk.max_err, "passed": chk.passed})

    s = 1 if simulator else 8  # size scale
    for dtype in ("float32", "float64"):
        x = rng.standard_normal((3, 37 * s)).astype(dtype)
        ref, bound = softmax_reference(x)
        for v in st.SOFTMAX_VARIANTS:
            record("softmax", v, f"{x.shape}", dtype, check_within(st.softmax(x, variant=v, config=preset), ref, bound))
        v1 = rng.standard_normal(1000 * s).astype(dtype)
        ref1 = np.sum(v1.astype(np.longdouble))
        b1 = unit_roundoff(dtype) * abs(ref1) + gamma(v1.size, 2.0**-53) * np.sum(np.abs(v1.astype(np.longdouble)))
        record("reduce sum", None, f"{v1.shape}", dtype,
               check_within(np.asarray([st.reduce(v1, config=preset)]), np.asarray([ref1]), np.asarray([b1])))
        a, b = rng.standard_normal(101 * s).astype(dtype), rng.standard_normal(101 * s).astype(dtype)
        for v in st.VECTOR_ADD_VARIANTS:
            record("vector_add", v, f"{a.shape}", dtype, check_within(st.vector_add(a, b, variant=v, config=preset),
                                                                      a + b, np.zeros(a.shape)))
        m = rng.standard_normal((9, 13 * s)).astype(dtype)
        bias = rng.standard_normal(13 * s).astype(dtype)
        record("bias_relu", None, f"{m.shape}", dtype, check_within(st.bias_relu(m, bias, config=preset),
                                                                    np.maximum(m + bias, 0), np.zeros(m.shape)))
        img = rng.standard_normal((11 * s, 13 * s)).astype(dtype)
        w = rng.standard_normal((3, 4)).astype(dtype)
        ref, bound = correlate2d_reference(img, w, "reflect")
        for v in st.CONV2D_VARIANTS:
            record("correlate2d reflect", v, f"{img.shape} * {w.shape}", dtype,
                   check_within(st.correlate2d(img, w, variant=v, config=preset), ref, bound))
        w1 = rng.standard_normal(5).astype(dtype)
        ref, bound = correlate1d_reference(img, w1, axis=0, mode="wrap")
        record("correlate1d wrap", None, f"{img.shape} * 5, axis 0", dtype,
               check_within(st.correlate1d(img, w1, axis=0, mode="wrap"), ref, bound))
        wy, wx = rng.standard_normal(3).astype(dtype), rng.standard_normal(5).astype(dtype)
        ref, bound = correlate_separable_reference(img, wy, wx, "constant", 0.5)
        record("correlate_separable constant", None, f"{img.shape} * 3x5", dtype,
               check_within(st.correlate_separable(img, wy, wx, mode="constant", cval=0.5), ref, bound))
        xn = rng.standard_normal((2, 3, 5, 7 * s)).astype(dtype)
        wn = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
        bn = rng.standard_normal(4).astype(dtype)
        ref, bound = conv2d_nchw_reference(xn, wn, bn, padding=1)
        for v in st.CONV_NCHW_VARIANTS:
            record("conv2d_nchw", v, f"{xn.shape} * {wn.shape} p1", dtype,
                   check_within(st.conv2d_nchw(xn, wn, bias=bn, padding=1, variant=v, config=preset), ref, bound))
    return rows


def _f(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _add_ratios(results: list[dict]) -> None:
    peer = {r["dtype"]: r.get("tflops") for r in results if r["impl"].startswith("cuBLAS")}
    for r in results:
        if r.get("tflops") and peer.get(r["dtype"]):
            r["vs_cublas"] = r["tflops"] / peer[r["dtype"]]


def _poisoned(shape, dtype, cp):
    """A device buffer full of NaN, so an element nobody writes fails the check."""
    import numpy as np

    if cp is not None:
        return cp.full(shape, np.nan, dtype=dtype)
    from numba import cuda

    return cuda.to_device(np.full(shape, np.nan, dtype=dtype))


def _to_numba(*arrays):
    from numba import cuda

    return tuple(cuda.to_device(x) for x in arrays)


def _try_cupy():
    try:
        import cupy

        return cupy
    except ImportError:
        return None


def _gpu_name() -> str:
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
    return f"{name} (cc {dev.compute_capability[0]}.{dev.compute_capability[1]})"


def machine_info() -> dict:
    """What ran: GPU, driver and versions (written into every JSON result)."""
    import numba
    import numpy as np

    from .runtime import SIMULATOR

    info = {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "simulator": SIMULATOR, "host": platform.node()}
    try:
        import numba_cuda

        info["numba_cuda"] = numba_cuda.__version__
    except ImportError:  # pragma: no cover
        pass
    if not SIMULATOR:
        from numba import cuda

        info["gpu"] = _gpu_name()
        info["driver_version"] = cuda.cudadrv.driver.driver.get_version()
        info["runtime_version"] = cuda.runtime.get_version()
        cp = _try_cupy()
        if cp is not None:
            info["cupy"] = cp.__version__
    return info
