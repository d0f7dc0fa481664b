"""Probe (GPU): host threads sharing one stream, each calling one signature whose launch plan holds
workspaces (matmul 281x148x228 float32 — the H200 soak's wrong products — and a two-pass reduce),
each thread with its own inputs, every result checked against its bound. Before launch plans were
per host thread for such calls, two threads replaying one plan interleaved their launches on the
plan's workspace. Exit 1 on a wrong result.

    python3 benchmarks/lab/shared_stream_probe.py [--threads 16] [--seconds 20]
"""
import argparse
import os
import sys
import threading
import time

import numpy as np
from numba import cuda

sys.path.insert(0, os.getcwd())
import simt_tiles as st  # noqa: E402
from simt_tiles import launch  # noqa: E402
from simt_tiles.kernels.matmul.reference import matmul_reference  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--threads", type=int, default=16)
p.add_argument("--seconds", type=float, default=20.0)
p.add_argument("--tiny", action="store_true", help="small problems (a smoke run in the simulator)")
opts = p.parse_args()

# (the soak's "281x148x228" is M x N x K)
M, K, N, R = (5, 7, 3, 300) if opts.tiny else (281, 228, 148, 1 << 20)
calls, wrong, errors = [0], [0], []


def worker(seed: int, stop: float) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    x = rng.standard_normal(R).astype(np.float32)
    ref, bound = matmul_reference(a, b)
    xsum, xbound = float(x.astype(np.float64).sum()), 2 * R * 2.0**-24 * float(np.abs(x).sum())
    da, db, dx = cuda.to_device(a), cuda.to_device(b), cuda.to_device(x)
    try:
        while time.perf_counter() < stop:
            got = st.matmul(da, db).copy_to_host()  # the legacy default stream: every thread's
            s = st.reduce(dx).copy_to_host()[()]
            calls[0] += 2
            if np.any(np.abs(got.astype(np.float64) - ref) > bound) or abs(s - xsum) > xbound:
                wrong[0] += 1
    except Exception as exc:  # noqa: BLE001 — reported below
        errors.append(repr(exc))


for seed in range(opts.threads):  # warm-up: compile, record this thread's plans
    worker(seed, time.perf_counter() + (0 if opts.tiny else 0.5))
stop = time.perf_counter() + opts.seconds
threads = [threading.Thread(target=worker, args=(seed, stop)) for seed in range(opts.threads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"shared-stream probe: {opts.threads} threads x {opts.seconds:.0f} s on the default stream: "
      f"{calls[0]} calls, {wrong[0]} wrong, {len(errors)} errors {errors[:2]}; plans {launch.stats()}")
sys.exit(1 if wrong[0] or errors else 0)
