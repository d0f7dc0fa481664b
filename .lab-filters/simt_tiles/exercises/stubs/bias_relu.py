"""Exercise bias_relu — y = max(x + bias, 0) over a 2-D tile shape you choose.

Statement
    ``x`` is an M × N matrix, ``bias`` a vector of N values added to every row. Choose a 2-D
    block ``TILE = (ROWS, COLS)`` and complete ``bias_relu_kernel``: one thread per element.
    The grader launches ``bias_relu_kernel[grid, (COLS, ROWS)](x, bias, y)`` with
    ``grid = (ceil(N / COLS), ceil(M / ROWS))`` for ragged shapes (1 × 1, 5 × 31, 9 × 65, ...),
    float32 and float64, and compares ``y`` with ``numpy.maximum(x + bias, 0)`` exactly —
    NaN in x must stay NaN.

Hints
    1. ``cuda.threadIdx.x`` varies fastest inside a warp: map it to the *column*, so the 32
       lanes of a warp read 32 consecutive addresses of a row (coalesced). That is why COLS
       should be a multiple of 32; ROWS · COLS may not exceed 1024 threads.
    2. Both edges are ragged: guard the row *and* the column.
    3. NaN must pass through: ``v if v > 0 else 0`` turns NaN into 0 (NaN > 0 is false);
       ``0 if v < 0 else v`` keeps it, as ``numpy.maximum`` does.

Check: ``python -m simt_tiles.exercises check bias_relu bias_relu.py``
"""

from numba import cuda

TILE = None  # TODO: (ROWS, COLS), e.g. a few rows of 32 columns


@cuda.jit
def bias_relu_kernel(x, bias, y):
    # TODO: row and column of this thread's element, both guards, y = max(x + bias, 0)
    pass
