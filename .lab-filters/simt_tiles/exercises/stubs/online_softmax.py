"""Exercise online_softmax — max and sum in one pass over the row, merged across lanes.

Statement
    ``softmax_kernel[rows, 32](x, y)`` computes a softmax per row with one warp. Instead of
    one pass for the maximum and another for the sum of ``exp(x − max)`` (stable_softmax),
    each lane keeps a *state* ``(m, s)``: the maximum so far and the sum of ``exp(x − m)``
    so far; a new value or another lane's state is folded in by ``merge``. The stub's
    ``merge`` adds the sums without rescaling them to the new maximum — wrong as soon as the
    maximum changes. Fix ``merge``. The grader checks rows near +1000 (exp overflows), a
    rising row (the maximum changes at every element) and a −inf element, in both dtypes.

Hints
    1. With ``m = max(m1, m2)``, each part's sum is rescaled: ``s1 · exp(m1 − m)``.
    2. If m is −inf (two empty parts), ``exp(−inf − (−inf))`` is NaN: keep ``s1 + s2``.
    3. The butterfly (``shfl_xor_sync``) leaves the whole row's state in every lane.

Check: ``python -m simt_tiles.exercises check online_softmax online_softmax.py``
"""

import math

from numba import cuda

from simt_tiles.warp import FULL_MASK, shfl_xor_sync


@cuda.jit(device=True, inline="always")  # inlined before typing: no call, and no driver needed to compile
def merge(m1, s1, m2, s2):
    """The state (max, sum of exp(x - max)) of two parts of a row, from the states of the parts."""
    m = max(m1, m2)
    return m, s1 + s2  # TODO: rescale each sum from its own maximum to m


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
