"""One device call for the conv default path (k10): warm its disk cache, first-call latency, sanitizer workload.

    python benchmarks/lab/conv_default_once.py warm [--jobs 14]      # compile k10's kernels in parallel (disk cache)
    python benchmarks/lab/conv_default_once.py first-call numpy|cupy  # a fresh process's first call, 8192² 3×3 reflect
    python benchmarks/lab/conv_default_once.py sanitize               # ragged shapes, every mode, both filter kinds

``warm`` builds what ``bench conv`` and ``sanitize`` then load from the disk cache (k10's kernels
are ``cache=True``): each (filter shape, mode, dtype, filter kind, tiles) once, in a process pool.
``first-call`` prints the seconds of ``import simt_tiles`` and of the first and second
``correlate2d(x, w)`` (synchronised): run it with an empty ``NUMBA_CACHE_DIR`` and
``SIMT_TILES_CACHE_DIR`` for a cold cache, after ``warm`` for a warm one.
"""

from __future__ import annotations

import sys
import time

SHAPES = ((97, 401), (61, 404), (4, 6), (1, 1), (33, 130))


def _one(task):
    import numpy as np
    from numba import cuda

    import simt_tiles
    from simt_tiles.kernels.conv2d import k10_runtime_weights as k10

    k, mode, kind, shape, dtype = task
    x = cuda.to_device(np.ones((40, 140), dtype))
    w = np.full((k, k), 0.5, dtype)
    cfg = None if shape is None else k10.Config(**dict(zip(("block_x", "block_y", "rx", "ry", "min_blocks"), shape)))
    t0 = time.perf_counter()
    simt_tiles.correlate2d(x, cuda.to_device(w) if kind == "device" else w, mode=mode, config=cfg)
    cuda.synchronize()
    return f"{k}x{k} {mode} {kind} {shape} {np.dtype(dtype).name}: {time.perf_counter() - t0:.1f} s"


def warm(jobs: int) -> None:
    import multiprocessing as mp

    tasks = []
    for k in (3, 5, 7):
        for mode in ("constant", "reflect"):
            tasks += [(k, mode, kind, None, "float32") for kind in ("numpy", "device")]
        tasks += [(k, "constant", "numpy", (32, 4, 4, 6, 1), "float32")]
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(jobs) as pool:
        for line in pool.imap_unordered(_one, tasks):
            print("warm", line, flush=True)
    print(f"warm: {len(tasks)} kernels in {time.perf_counter() - t0:.1f} s", flush=True)


def first_call(kind: str) -> None:
    t0 = time.perf_counter()
    import numpy as np
    from numba import cuda

    import simt_tiles

    t1 = time.perf_counter()
    x = cuda.to_device(np.random.default_rng(1).standard_normal((8192, 8192), dtype=np.float32))
    out = cuda.device_array_like(x)
    w = np.random.default_rng(2).standard_normal((3, 3)).astype(np.float32)
    w = cuda.to_device(w) if kind == "cupy" else w  # a device filter (CuPy's path is the same)
    cuda.synchronize()
    times = []
    for _ in range(3):
        t2 = time.perf_counter()
        simt_tiles.correlate2d(x, w, mode="reflect", out=out)
        cuda.synchronize()
        times.append(time.perf_counter() - t2)
        w = np.asarray(w.copy_to_host() if kind == "cupy" else w) * 1.5  # a new filter value each call
        w = cuda.to_device(w) if kind == "cupy" else w
    print(f"first-call {kind}: import {t1 - t0:.2f} s, calls " + ", ".join(f"{t:.3f}" for t in times) + " s",
          flush=True)


def sanitize() -> None:
    import numpy as np
    import scipy.ndimage as ndi
    from numba import cuda

    import simt_tiles

    rng = np.random.default_rng(7)
    bad = 0
    cases = [(s, k, mode, kind, "float32") for s in SHAPES for k in (3, 5)
             for mode in ("constant", "reflect") for kind in ("numpy", "device")]
    for (h, w), k, mode, kind, dtype in cases:
        x = rng.standard_normal((h, w)).astype(dtype)
        f = rng.standard_normal((k, k)).astype(dtype)
        if (h, w) == (97, 401):  # zero taps and a NaN: the checked loop in the NaN's blocks
            f[0, :] = 0
            x[50, 200] = np.nan
        out = cuda.to_device(np.full((h, w), np.nan, dtype))
        simt_tiles.correlate2d(cuda.to_device(x), cuda.to_device(f) if kind == "device" else f, mode=mode,
                               out=out)
        got = out.copy_to_host()
        ref = ndi.correlate(x.astype(np.float64), f.astype(np.float64), mode=mode)
        ok = np.array_equal(np.isnan(got), np.isnan(ref)) and np.allclose(
            got[~np.isnan(ref)], ref[~np.isnan(ref)], rtol=1e-4, atol=1e-4)
        bad += not ok
        if not ok:
            print(f"sanitize MISMATCH {(h, w)} {k}x{k} {mode} {kind} {dtype}", flush=True)
    print(f"sanitize: {len(cases)} cases, {bad} mismatches", flush=True)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "warm":
        warm(int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 14)
    elif cmd == "first-call":
        first_call(sys.argv[2])
    elif cmd == "sanitize":
        sanitize()
    else:
        sys.exit(f"unknown command {cmd!r}")
