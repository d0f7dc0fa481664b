"""Compile the generated matmul rungs' shipped kernels and conv2d's default (k10) into Numba's disk cache, in parallel.

    python benchmarks/warm_kernel_cache.py [-j 8] [--variants k11_generated_split_k k12_async_copy]
                                           [--dtypes float32] [--tuning-sizes 1024 2048]
                                           [--configs RUNG:FIELD=V,...] [--no-conv] [--conv-tuning]

k11/k12 are generated as source files (``simt_tiles.codegen``) and compiled with ``cache=True``:
a cold compile takes tens of seconds per kernel, a cached one about a second.  A fresh GPU machine
(a CI runner, a test pass) warms the cache here, one process per kernel, before its first call.
The kernels: the ``"default"`` preset × float32/float64 × the vector and scalar load builds
(what ``simt_tiles.matmul`` launches); with ``--tuning-sizes``, also the float32 vector builds of
every tile the autotuner's space holds at those sizes (``kernels/matmul/_tuning.py``: one kernel
per tile, whatever its split of K).  ``SIMT_TILES_CACHE_DIR`` chooses the cache directory.

conv2d (unless ``--no-conv``): k10_runtime_weights, ``correlate2d``'s default up to 7 × 7, float32,
NumPy and device filters, for the filters ``bench conv`` times (3×3, 5×5, 7×7 × modes constant
and reflect) and the GPU tests' fixed ones (:data:`CONV_TEST_FILTERS`), each built by one real call
(the launcher's own path); with ``--conv-tuning`` also every candidate of the autotuner's space for
the bench filters at 8192² (``kernels/conv2d/_tuning.py``), so a first ``simt-tiles tune conv2d``
times instead of compiling.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (variant, dtype, compile-time params) of every kernel the default API can launch
KERNELS = {
    "k11_generated_split_k": [(dt, {"idx32": True, "vec": vec}) for dt in ("float32", "float64")
                            for vec in (True, False)],
    "k12_async_copy": [("float32", {"idx32": True})],  # float64 launches k11's kernel
}


#: conv2d filters (kh, kw, mode) that ``bench conv`` calls with defaults, and the GPU tests' fixed ones
CONV_BENCH_FILTERS = [(k, k, mode) for k in (3, 5, 7) for mode in ("constant", "reflect")]
CONV_TEST_FILTERS = [(3, 3, "reflect"), (3, 2, "reflect")]
MODES = ("reflect", "constant", "nearest", "mirror", "wrap")


def callers_jobs() -> list:
    """``(kh, kw, mode, weights, dtype, None, function)``: the default-path kernels (no config
    argument) that the GPU tests of ``tests/test_callers.py`` and ``tests/test_aliasing.py`` call with
    fixed filters, several tests each — built here once, in parallel, instead of by two workers at
    once.  ``function`` "correlate1d" builds correlate1d's own kernels (every tap counts there, as in
    scipy's correlate1d: a compile-time flag, so correlate2d's kernel for a K × 1 filter is another).
    ``CONV_SHAPES`` is read from the tests; the other filters are written out here."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests import test_callers as tc

    jobs = set()
    for name, (shape, mode) in {"correlate2d": ((3, 2), "wrap"), "convolve2d": ((2, 3), "constant"),
                                "correlate1d": ((4, 1), "mirror")}.items():
        assert name in tc.APIS, name
        fn = "correlate1d" if name == "correlate1d" else "correlate2d"  # convolve2d: correlate2d's kernel
        jobs |= {(*shape, mode, weights, dtype, None, fn) for weights in ("host", "device")
                 for dtype in ("float32", "float64")}
    for _, (kh, kw) in tc.CONV_SHAPES:  # test_correlate_convolve_shapes_and_modes: float64 NumPy filters
        jobs |= {(kh, kw, mode, "host", "float64", None, "correlate2d") for mode in MODES}
    # tests/test_aliasing.py's CASES (float32; NumPy and device filters)
    jobs |= {(kh, kw, mode, weights, "float32", None, fn) for kh, kw, mode, fn in
             ((3, 2, "reflect", "correlate2d"), (2, 3, "wrap", "correlate2d"), (3, 1, "reflect", "correlate1d"))
             for weights in ("host", "device")}
    for k in (1, 4, 9):  # test_correlate1d_axes_and_lengths (a 1 x 1 filter: one kernel for both axes)
        jobs |= {(kh, kw, mode, "host", "float64", None, "correlate1d") for mode in MODES
                 for kh, kw in ((k, 1), (1, k))}
    # a filter longer than BEST_MAX_SIZE takes k03, which has no disk cache: nothing to warm
    from simt_tiles.kernels.conv2d import BEST_MAX_SIZE

    jobs = {j for j in jobs if max(j[0], j[1]) <= BEST_MAX_SIZE}
    return sorted(jobs, key=lambda j: -j[0] * j[1])  # the longest compilations first


def _compile_conv(job) -> tuple[str, float]:
    """One k10 kernel, built by a ``correlate2d`` (or ``correlate1d``) call with that config (the path
    a user's call takes)."""
    kh, kw, mode, weights, dtype, fields, *fn = job  # fn: "correlate2d" (the default) or "correlate1d"
    fn = fn[0] if fn else "correlate2d"
    import numpy as np
    from numba import cuda

    import simt_tiles
    from simt_tiles.kernels.conv2d import k10_runtime_weights as k10

    t0 = time.perf_counter()
    x = cuda.to_device(np.ones((40, 140) if fields is not None else (5, 6), dtype))  # the tests': small
    w = np.full((kh, kw) if fn == "correlate2d" else max(kh, kw), 0.5, dtype)
    w = cuda.to_device(w) if weights == "device" else w
    if fn == "correlate1d":  # a K x 1 filter: along axis 0; 1 x K: axis 1
        simt_tiles.correlate1d(x, w, axis=0 if kw == 1 else 1, mode=mode)
    elif fields is None:  # the default path, config chosen by the launcher (what the tests call)
        simt_tiles.correlate2d(x, w, mode=mode)
    else:
        cfg = k10.Config(**fields) if fields else k10.PRESETS["default"]
        simt_tiles.correlate2d(x, w, mode=mode, config=cfg)
    cuda.synchronize()
    return f"{fn} k10 {kh}x{kw} {mode} {weights} {dtype} {fields or 'default'}", time.perf_counter() - t0


def conv_jobs(tuning: bool) -> list:
    """``(kh, kw, mode, weights, "float32", fields, "correlate2d")`` of the k10 kernels to build
    (fields {}: the default)."""
    import dataclasses

    from simt_tiles.kernels.conv2d import RUNGS

    jobs = [(kh, kw, mode, weights, "float32", {}, "correlate2d")
            for kh, kw, mode in CONV_BENCH_FILTERS + CONV_TEST_FILTERS for weights in ("host", "device")]
    if tuning:
        from simt_tiles import autotune

        rung, tunable = RUNGS["k10_runtime_weights"], autotune.tunable("conv2d")
        for kh, kw, mode in CONV_BENCH_FILTERS:
            for weights in ("host", "device"):
                p = {"h": 8192, "w": 8192, "kh": kh, "kw": kw, "mode": mode, "weights": weights}
                jobs += [(kh, kw, mode, weights, "float32", dataclasses.asdict(c), "correlate2d")
                         for c in tunable.candidates(rung.name, p, "float32")[1:]]  # [0]: the default
    return jobs


def _compile(job) -> tuple[str, float]:
    if len(job) == 7:
        return _compile_conv(job)
    variant, dtype, params, fields = job
    import dataclasses

    import numpy as np

    from simt_tiles.kernels.matmul import RUNGS

    t0 = time.perf_counter()
    rung = RUNGS[variant]
    rung.kernel(dataclasses.replace(rung.presets["default"], **fields), np.dtype(dtype), **params)
    return f"{variant} {dtype} {params} {fields or 'default'}", time.perf_counter() - t0


def tuning_jobs(variants, sizes) -> list:
    """``(variant, "float32", vector build, fields)`` of every distinct tile in the tuning spaces."""
    import dataclasses

    from simt_tiles import autotune
    from simt_tiles.kernels.matmul import RUNGS

    jobs = []
    for v in variants:
        base = RUNGS[v].presets["default"]
        for n in sizes:
            for cfg in autotune.tunable("matmul").candidates(v, {"m": n, "n": n, "k": n}, "float32"):
                fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
                          if f.name != "splits" and getattr(cfg, f.name) != getattr(base, f.name)}
                params = {"idx32": True, "vec": True} if v == "k11_generated_split_k" else {"idx32": True}
                if fields and (v, "float32", params, fields) not in jobs:
                    jobs.append((v, "float32", params, fields))
    return jobs


def preset_jobs(names, dtypes=("float32",)) -> list:
    """k11's kernels of the presets ``names`` in ``dtypes`` (both load builds: ragged sizes take the scalar one)."""
    import dataclasses

    from simt_tiles.kernels.matmul import RUNGS

    presets = RUNGS["k11_generated_split_k"].presets
    base = presets["default"]
    return [("k11_generated_split_k", dt, {"idx32": True, "vec": vec},
             {f.name: getattr(presets[name], f.name) for f in dataclasses.fields(base)
              if getattr(presets[name], f.name) != getattr(base, f.name)})
            for name in names for dt in dtypes for vec in (True, False)]


def config_jobs(texts) -> list:
    """float32 vector builds of ``--config``-style rows (``RUNG:FIELD=V,...``, as ``bench matmul``
    takes them), launch-only fields (``splits``, ``pad``) left out: one kernel per tile."""
    import dataclasses

    from simt_tiles.bench.matmul import parse_config
    from simt_tiles.kernels.matmul import RUNGS

    jobs = []
    for text in texts:
        variant, cfg = parse_config(text)
        base, compiled = RUNGS[variant].presets["default"], cfg.compiled()
        fields = {f.name: getattr(compiled, f.name) for f in dataclasses.fields(compiled)
                  if getattr(compiled, f.name) != getattr(base, f.name)}
        params = {"idx32": True, "vec": True} if variant == "k11_generated_split_k" else {"idx32": True}
        if (variant, "float32", params, fields) not in jobs:
            jobs.append((variant, "float32", params, fields))
    return jobs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--variants", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    p.add_argument("--tuning-sizes", nargs="*", type=int, default=[],
                   help="also the autotuner's tiles for these square sizes (float32)")
    p.add_argument("--presets", nargs="*", default=[],
                   help="also these k11 presets (in --dtypes), vector and scalar builds (e.g. 64x64)")
    p.add_argument("--configs", nargs="*", default=[], metavar="RUNG:FIELD=V,...",
                   help="also these configs' float32 vector builds (bench matmul's --config rows)")
    p.add_argument("--no-conv", action="store_true", help="leave out conv2d's k10 kernels")
    p.add_argument("--conv-tests", action="store_true",
                   help="also the default-path k10 kernels the GPU tests call with fixed filters")
    p.add_argument("--conv-tuning", action="store_true",
                   help="also every k10 candidate the autotuner times for the bench filters at 8192^2")
    args = p.parse_args(argv)
    jobs = [(v, dt, params, {}) for v in args.variants for dt, params in KERNELS[v] if dt in args.dtypes]
    jobs += tuning_jobs(args.variants, args.tuning_sizes)
    jobs += preset_jobs(args.presets, args.dtypes)
    jobs += [j for j in config_jobs(args.configs) if j not in jobs]
    if not args.no_conv:
        jobs += conv_jobs(args.conv_tuning)
        if args.conv_tests:  # read in a child: this process forks the compilers, so it imports no Numba
            with ProcessPoolExecutor(1) as one:
                callers = one.submit(callers_jobs).result()
            # the generated matmul kernels first (45-50 s each cold: the longest), then the callers'
            # (largest filters first), then the rest: no long compilation starts last
            jobs = [j for j in jobs if len(j) == 4] + callers + [j for j in jobs if len(j) == 7]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max(1, min(args.jobs, len(jobs)))) as pool:
        for fut in as_completed([pool.submit(_compile, j) for j in jobs]):
            name, seconds = fut.result()
            print(f"compiled {name} in {seconds:.1f} s", flush=True)
    print(f"{len(jobs)} kernels in the disk cache ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
