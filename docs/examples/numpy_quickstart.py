"""From NumPy: arrays are copied to the device and the result comes back as a NumPy array."""
import numpy as np

import simt_tiles
from simt_tiles.bounds import check_within
from simt_tiles.kernels.matmul.reference import matmul_reference

rng = np.random.default_rng(0)
a = rng.standard_normal((30, 20)).astype(np.float32)
b = rng.standard_normal((20, 10)).astype(np.float32)

c = simt_tiles.matmul(a, b)                        # the top rung, its preset for this machine
c3 = simt_tiles.matmul(a, b, variant="k03_smem_tiled")   # any rung by name
ref, bound = matmul_reference(a, b)                # long-double reference and its γ_K·|A|·|B| bound
assert check_within(c, ref, bound) and check_within(c3, ref, bound)

x = rng.standard_normal((5, 37))
y = simt_tiles.softmax(x)                          # scipy.special.softmax(x, axis=-1)
assert np.allclose(y.sum(axis=-1), 1.0)

image = rng.standard_normal((19, 23)).astype(np.float32)
smooth = simt_tiles.correlate2d(image, np.full((3, 3), 1 / 9, np.float32), mode="reflect")
assert smooth.shape == image.shape

volume = rng.standard_normal((6, 7, 8)).astype(np.float32)   # a 3-D volume, filtered one axis at a time
blurred = volume
for axis in range(volume.ndim):                              # as scipy.ndimage's separable filters do
    blurred = simt_tiles.correlate1d(blurred, np.array([0.25, 0.5, 0.25], np.float32), axis=axis, mode="nearest")
assert blurred.shape == volume.shape and abs(blurred.mean() - volume.mean()) < 0.1

laplacian = np.zeros((3, 3, 3), np.float32)                  # a 3-D stencil in one call: scipy.ndimage.correlate's
laplacian[1, 1, :] = laplacian[1, :, 1] = laplacian[:, 1, 1] = 1
laplacian[1, 1, 1] = -6
edges = simt_tiles.correlate(volume, laplacian, mode="nearest")
assert edges.shape == volume.shape

print("rungs:", simt_tiles.MATMUL_VARIANTS)
