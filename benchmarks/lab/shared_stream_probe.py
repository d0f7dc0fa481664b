"""Probe (GPU): host threads sharing one stream, each calling two signatures of one problem whose
launch plans hold workspaces (matmul 281x148x228 float32 — the H200 soak's wrong products — with
and without ``out=``, and a two-pass reduce), each thread with its own inputs, every result checked
against its bound. Before workspace-holding plans were per host thread, both plans of a signature
pair held the *recording* thread's workspace: thread A replaying one while thread B replayed the
other (each under its own plan's lock) interleaved their launches on that one buffer. One plan
alone does not show it (a plan's replays are serialised by its lock: session 18's first form of
this probe, 54,816 calls on the old code, 0 wrong). Exit 1 on a wrong result.

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
    dc, ds = cuda.device_array((M, N), np.float32), cuda.device_array((), np.float32)
    try:
        while time.perf_counter() < stop:
            # the legacy default stream: every thread's; two signatures sharing one workspace key
            got = [st.matmul(da, db).copy_to_host(), st.matmul(da, db, out=dc).copy_to_host()]
            sums = [st.reduce(dx).copy_to_host()[()], st.reduce(dx, out=ds).copy_to_host()[()]]
            calls[0] += 4
            wrong[0] += sum(bool(np.any(np.abs(g.astype(np.float64) - ref) > bound)) for g in got)
            wrong[0] += sum(abs(v - xsum) > xbound for v in sums)
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
