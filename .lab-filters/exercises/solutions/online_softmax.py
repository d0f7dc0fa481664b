"""Reference solution of exercise online_softmax (see simt_tiles/exercises/stubs/online_softmax.py for the statement)."""

import math

from numba import cuda

from simt_tiles.warp import FULL_MASK, shfl_xor_sync


@cuda.jit(device=True, inline="always")  # inlined before typing: no call, and no driver needed to compile
def merge(m1, s1, m2, s2):
    """The state (max, sum of exp(x - max)) of two parts of a row, from the states of the parts."""
    m = max(m1, m2)
    if m == -math.inf:  # both parts empty or all -inf: exp(-inf - (-inf)) would be NaN
        return m, s1 + s2
    return m, s1 * math.exp(m1 - m) + s2 * math.exp(m2 - m)


@cuda.jit
def softmax_kernel(x, y):
    row = cuda.blockIdx.x  # one warp (block of 32) per row
    lane = cuda.threadIdx.x
    n = x.shape[1]
    m, s = -math.inf, 0.0
    for j in range(lane, n, 32):  # ONE pass over the row for max and sum together
        m, s = merge(m, s, x[row, j], 1.0)
    offset = 16
    while offset > 0:  # butterfly: every lane ends with the whole row's state
        m, s = merge(m, s, shfl_xor_sync(FULL_MASK, m, offset), shfl_xor_sync(FULL_MASK, s, offset))
        offset //= 2
    for j in range(lane, n, 32):
        y[row, j] = math.exp(x[row, j] - m) / s
