# session 32 diagnosis (temporary): matmul of (5, 0) @ (0, 4) views on a GPU
import sys, traceback
sys.path.insert(0, ".")
import numpy as np
from numba import cuda
import simt_tiles
from simt_tiles import launch
from tests.common import transposed
x = cuda.to_device(np.ones(1, np.float32))[0:0].reshape(5, 0)[:, :0]
w = transposed(cuda.to_device(np.ones(1, np.float32))[0:0].reshape(4, 0)[:, :0])
print("x", x.shape, x.strides, "w", w.shape, w.strides)
for plans in (False, True):
    launch.set_enabled(plans); launch.clear()
    for variant in (None, "k12_async_copy"):
        try:
            out = cuda.device_array((5, 4), np.float32)
            r = simt_tiles.matmul(x, w, out=out, variant=variant)
            print(plans, variant, "ok", r.copy_to_host().ravel()[:4])
        except Exception as e:
            print(plans, variant, "ERR", repr(e)); traceback.print_exc(limit=4)
