"""Compile the generated matmul rungs' shipped kernels into Numba's disk cache, in parallel.

    python benchmarks/warm_kernel_cache.py [-j 8] [--variants k11_vectorized_bk16 k12_async_copy]
                                           [--dtypes float32] [--tuning-sizes 1024 2048]

k11/k12 are generated as source files (``simt_tiles.codegen``) and compiled with ``cache=True``:
a cold compile takes tens of seconds per kernel, a cached one about a second.  A fresh GPU machine
(a CI runner, a test pass) warms the cache here, one process per kernel, before its first call.
The kernels: the ``"default"`` preset × float32/float64 × the vector and scalar load builds
(what ``simt_tiles.matmul`` launches); with ``--tuning-sizes``, also the float32 vector builds of
every tile the autotuner's space holds at those sizes (``kernels/matmul/_tuning.py``: one kernel
per tile, whatever its split of K).  ``SIMT_TILES_CACHE_DIR`` chooses the cache directory.
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
    "k11_vectorized_bk16": [(dt, {"idx32": True, "vec": vec}) for dt in ("float32", "float64")
                            for vec in (True, False)],
    "k12_async_copy": [("float32", {"idx32": True})],  # float64 launches k11's kernel
}


def _compile(job) -> tuple[str, float]:
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

    from simt_tiles.kernels.matmul import RUNGS

    jobs = []
    for v in variants:
        base = RUNGS[v].presets["default"]
        for n in sizes:
            for cfg in RUNGS[v].candidates({"m": n, "n": n, "k": n}, "float32"):
                fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
                          if f.name != "splits" and getattr(cfg, f.name) != getattr(base, f.name)}
                params = {"idx32": True, "vec": True} if v == "k11_vectorized_bk16" else {"idx32": True}
                if fields and (v, "float32", params, fields) not in jobs:
                    jobs.append((v, "float32", params, fields))
    return jobs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--variants", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    p.add_argument("--tuning-sizes", nargs="*", type=int, default=[],
                   help="also the autotuner's tiles for these square sizes (float32)")
    args = p.parse_args(argv)
    jobs = [(v, dt, params, {}) for v in args.variants for dt, params in KERNELS[v] if dt in args.dtypes]
    jobs += tuning_jobs(args.variants, args.tuning_sizes)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max(1, min(args.jobs, len(jobs)))) as pool:
        for fut in as_completed([pool.submit(_compile, j) for j in jobs]):
            name, seconds = fut.result()
            print(f"compiled {name} in {seconds:.1f} s", flush=True)
    print(f"{len(jobs)} kernels in the disk cache ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
