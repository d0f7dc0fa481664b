"""Exercise vectorized_loads — 128-bit loads and stores, with a scalar tail for the ragged end.

Statement
    ``axpy(alpha, x, y, out)`` computes ``out = alpha·x + y`` for 1-D arrays. The stub is
    correct and issues one 4-byte load per element; a GPU moves 16 bytes per lane in one
    instruction (``ld.global.v4.f32``), four times fewer requests. Let each thread handle a
    group of four elements with ``simt_tiles.vector.load4`` / ``store4`` (the caller promises
    16-byte alignment: element 4t of an array that starts aligned), and the last n % 4
    elements with scalar code. The grader checks n = 0, 1, 4, 7, 130, 259 in both dtypes, then
    counts global requests with the analyzer: more scalar requests than the reference fails.

Hints
    1. Thread t owns elements 4t .. 4t + 3; launch ``ceil(ceil(n / 4) / THREADS)`` blocks.
    2. ``x0, x1, x2, x3 = load4(x, 4 * t)`` when ``4t + 4 <= n``; otherwise the tail thread
       loops over ``range(4t, n)``.
    3. The simulator checks load4's promise: a misaligned or out-of-bounds group raises.

Check: ``python -m simt_tiles.exercises check vectorized_loads vectorized_loads.py``
"""

from numba import cuda

from simt_tiles.vector import load4, store4

THREADS = 64


@cuda.jit
def axpy_kernel(alpha, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:  # TODO: four elements per thread with load4 / store4, a scalar tail
        out[i] = alpha * x[i] + y[i]


def axpy(alpha, x, y, out):
    """out = alpha·x + y for 1-D arrays whose data start at a 16-byte boundary."""
    n = x.shape[0]
    if n:
        axpy_kernel[(n + THREADS - 1) // THREADS, THREADS](alpha, x, y, out)  # TODO: a thread per 4
    return out
