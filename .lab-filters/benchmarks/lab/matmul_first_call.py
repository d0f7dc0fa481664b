"""First call of ``simt_tiles.matmul`` in a fresh process: import, compile (or load from disk), run.

    SIMT_TILES_CACHE_DIR=/tmp/fresh python benchmarks/lab/matmul_first_call.py 512 [variant] [preset | splits=N]

Run it twice with the same cache directory: the first run compiles the generated kernel and
Numba writes it to disk beside the generated source; the second loads it (cold vs warm cache).
Prints seconds from start of import to a checked result.
"""

import sys
import time

t0 = time.perf_counter()
import cupy as cp  # noqa: E402

import simt_tiles  # noqa: E402

t_import = time.perf_counter() - t0
args = [x for x in sys.argv[1:] if not x.startswith("--")]
dims = [int(x) for x in args[0].split("x")] if args else [512]
m, n, k = dims * 3 if len(dims) == 1 else dims
variant = args[1] if len(args) > 1 else None
config = args[2] if len(args) > 2 else None
if config and config.startswith("splits="):  # the rung's default preset, K split n ways
    import dataclasses

    from simt_tiles.kernels.matmul import RUNGS

    config = dataclasses.replace(RUNGS[variant].presets["default"], splits=int(config.split("=")[1]))
rng = cp.random.default_rng(1)
a = rng.standard_normal((m, k), dtype=cp.float32)
b = rng.standard_normal((k, n), dtype=cp.float32)
c = cp.full((m, n), cp.nan, dtype=cp.float32)
simt_tiles.matmul(a, b, out=c, variant=variant, config=config)
cp.cuda.Device().synchronize()
t_first = time.perf_counter() - t0
ref = a.astype(cp.float64) @ b.astype(cp.float64)
err = float(cp.max(cp.abs(c - ref)) / (float(cp.max(cp.abs(ref))) + 1e-30))
ok = bool(cp.all(cp.isfinite(c))) and err < 1e-5
print(f"first call {m}x{n}x{k} variant={variant} config={config}: import {t_import:.1f} s, "
      f"import+compile/load+run {t_first:.1f} s, rel.err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
sys.exit(0 if ok else 1)
