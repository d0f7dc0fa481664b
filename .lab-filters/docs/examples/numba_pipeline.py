"""From Numba: device arrays stay on the device; out= writes into your buffer."""
import numpy as np
from numba import cuda

import simt_tiles

a = cuda.to_device(np.ones((16, 8), np.float32))
b = cuda.to_device(np.ones((8, 4), np.float32))
out = cuda.device_array((16, 4), np.float32)
stream = cuda.stream()
simt_tiles.matmul(a, b, out=out, stream=stream)    # queued on your stream, returns out


@cuda.jit
def scale(x, s):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] *= s


scale[(1, 1), (16, 4), stream](out, 0.5)           # your kernel, same stream: ordered after it
stream.synchronize()
assert (out.copy_to_host() == 4.0).all()
