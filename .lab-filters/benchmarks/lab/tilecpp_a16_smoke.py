"""The smallest GPU check of the "_a16" instantiations (TMA / 16-byte loads): a few ops on
aligned operands against NumPy, then TF32 4096³ and softmax 16384×16384 timed both ways.
Prints one line per result as it goes (for a short device window)."""

import statistics
import sys

import cupy as cp
import numpy as np

from simt_tiles import tilecpp

rng = np.random.default_rng(1)


def t(fn, reps=10):
    fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return statistics.median(ts)


tilecpp.USE_ALIGNED = True
a, b = rng.standard_normal(1 << 20).astype(np.float32), rng.standard_normal(1 << 20).astype(np.float32)
print("vector_add_a16", np.array_equal(tilecpp.vector_add(a, b), a + b), flush=True)
x = rng.standard_normal((64, 4096)).astype(np.float32)
e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
print("softmax_long_a16 maxerr", float(np.abs(tilecpp.softmax(x) - e / e.sum(1, keepdims=True)).max()), flush=True)
A, B = rng.standard_normal((256, 512)).astype(np.float32), rng.standard_normal((512, 384)).astype(np.float32)
ref = A.astype(np.float64) @ B
for p in ("fp32", "tf32"):
    print(f"matmul_{p}_a16 max rel", float(np.abs(tilecpp.matmul(A, B, precision=p) - ref).max() / np.abs(ref).max()),
          flush=True)
print("sum_partials_a16", float(tilecpp.reduce_sum(a)), float(a.astype(np.float64).sum()), flush=True)
A, B = cp.random.standard_normal((4096, 4096), dtype=cp.float32), cp.random.standard_normal((4096, 4096), dtype=cp.float32)
C = cp.empty_like(A)
for al in (True, False):
    tilecpp.USE_ALIGNED = al
    ms = t(lambda: tilecpp.matmul(A, B, out=C, precision="tf32"))
    err = float(cp.abs(C - A @ B).max())
    print(f"tf32 4096^3 a16={al}: {ms:.3f} ms {2 * 4096**3 / ms / 1e9:.1f} TFLOP/s maxerr {err:.3g}", flush=True)
X = cp.random.standard_normal((16384, 16384), dtype=cp.float32)
Y = cp.empty_like(X)
for al in (True, False):
    tilecpp.USE_ALIGNED = al
    ms = t(lambda: tilecpp.softmax(X, out=Y))
    print(f"softmax 16384^2 a16={al}: {ms:.3f} ms {2 * X.nbytes / ms / 1e6:.0f} GB/s rowsum err "
          f"{float(cp.abs(Y.sum(1) - 1).max()):.2g}", flush=True)
sys.exit(0)
