"""Reference solution of exercise vectorized_loads (see simt_tiles/exercises/stubs/vectorized_loads.py for the statement)."""

from numba import cuda

from simt_tiles.vector import load4, store4

THREADS = 64


@cuda.jit
def axpy_kernel(alpha, x, y, out):
    n = x.shape[0]
    t = cuda.grid(1)
    i = 4 * t
    if i + 4 <= n:  # a full group of 4: one 128-bit load of each input, one 128-bit store
        x0, x1, x2, x3 = load4(x, i)
        y0, y1, y2, y3 = load4(y, i)
        store4(out, i, alpha * x0 + y0, alpha * x1 + y1, alpha * x2 + y2, alpha * x3 + y3)
    elif i < n:  # the ragged tail (n % 4 elements): scalar, by the one thread past the last group
        for j in range(i, n):
            out[j] = alpha * x[j] + y[j]


def axpy(alpha, x, y, out):
    """out = alpha·x + y for 1-D arrays whose data start at a 16-byte boundary."""
    n = x.shape[0]
    if n:
        threads4 = (n + 3) // 4
        axpy_kernel[(threads4 + THREADS - 1) // THREADS, THREADS](alpha, x, y, out)
    return out
