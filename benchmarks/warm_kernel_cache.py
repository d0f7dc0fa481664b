"""Compile the generated matmul rungs' shipped kernels into Numba's disk cache, in parallel.

    python benchmarks/warm_kernel_cache.py [-j 8] [--variants k11_vectorized_bk16 k12_async_copy]

k11/k12 are generated as source files (``simt_tiles.codegen``) and compiled with ``cache=True``:
a cold compile takes tens of seconds per kernel, a cached one about a second.  A fresh GPU machine
(a CI runner, a test pass) warms the cache here, one process per kernel, before its first call.
The kernels: the ``"default"`` preset × float32/float64 × the vector and scalar load builds, and
the small-tile float32 presets (what ``simt_tiles.matmul`` launches).  ``SIMT_TILES_CACHE_DIR`` chooses the cache directory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (variant, dtype, compile-time params[, preset]) of every kernel the default API can launch
KERNELS = {
    "k11_vectorized_bk16": [(dt, {"idx32": True, "vec": vec}) for dt in ("float32", "float64")
                            for vec in (True, False)]
    # the smaller tiles FAST_TABLE picks for small float32 problems
    + [("float32", {"idx32": True, "vec": vec}, preset) for preset in ("64x64", "64x128", "128x64")
       for vec in (True, False)],
    "k12_async_copy": [("float32", {"idx32": True})],  # float64 launches k11's kernel
}


def _compile(job) -> tuple[str, float]:
    variant, dtype, params, *preset = job
    preset = preset[0] if preset else "default"
    import numpy as np

    from simt_tiles.kernels.matmul import RUNGS

    t0 = time.perf_counter()
    rung = RUNGS[variant]
    rung.kernel(rung.presets[preset], np.dtype(dtype), **params)
    return f"{variant} {preset} {dtype} {params}", time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--variants", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    args = p.parse_args(argv)
    jobs = [(v, *kernel) for v in args.variants for kernel in KERNELS[v]]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max(1, min(args.jobs, len(jobs)))) as pool:
        for fut in as_completed([pool.submit(_compile, j) for j in jobs]):
            name, seconds = fut.result()
            print(f"compiled {name} in {seconds:.1f} s", flush=True)
    print(f"{len(jobs)} kernels in the disk cache ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
