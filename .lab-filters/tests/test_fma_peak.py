"""benchmarks/lab/fma_peak.py's kernel computes what it says (simulator): eight FMA chains per thread."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
from numba import cuda, float32, int32

from simt_tiles.bounds import unit_roundoff

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location("fma_peak", os.path.join(ROOT, "benchmarks", "lab", "fma_peak.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_chains_match_numpy():
    fp = _load()
    blocks, threads, trips = 2, 3, 2
    a, b = np.float32(0.999), np.float32(1e-3)
    out = cuda.device_array(blocks * threads, np.float32)
    out[:] = np.nan  # poisoned: every thread must write its sum
    fp.ffma_chains[blocks, threads](out, int32(trips), float32(a), float32(b))
    steps = trips * fp.UNROLL
    t = np.arange(blocks * threads, dtype=np.float64)
    x = t[:, None] + np.arange(fp.CHAINS)  # the chains start at t, t + 1, …, t + 7
    for _ in range(steps):
        x = x * float(a) + float(b)
    want = x.sum(axis=1)
    # each step rounds at most twice (fused: once) with |a| < 1, so each chain is off by at most
    # 2·steps·u·max|x|; the float32 sum of 8 chains adds γ_7·Σ|x|
    u = unit_roundoff(np.float32)
    bound = 2 * steps * u * np.abs(x).max(axis=1) * fp.CHAINS + 7 * u * np.abs(x).sum(axis=1) * 1.01
    got = out.copy_to_host().astype(np.float64)
    assert np.all(np.abs(got - want) <= bound), (got, want, bound)
