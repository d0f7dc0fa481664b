"""From CuPy (needs a GPU): no host copies; the result is a cupy.ndarray (default stream unless stream= is given)."""
import cupy as cp

import simt_tiles

a = cp.random.standard_normal((256, 128), dtype=cp.float32)
b = cp.random.standard_normal((128, 64), dtype=cp.float32)
c = simt_tiles.matmul(a, b)
assert isinstance(c, cp.ndarray)
assert cp.allclose(c, a @ b, rtol=1e-4, atol=1e-3)

x = cp.random.standard_normal((64, 1000), dtype=cp.float32)
y = simt_tiles.softmax(x)
assert cp.allclose(y.sum(axis=1), 1.0, atol=1e-5)
