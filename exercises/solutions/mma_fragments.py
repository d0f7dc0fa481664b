"""Reference solution of exercise mma_fragments (see simt_tiles/exercises/stubs/mma_fragments.py for the statement)."""

import numpy as np
from numba import cuda

from simt_tiles.mma import cvt_tf32, mma_tf32

BM, BN, BK = 16, 8, 8  # one m16n8k8 mma: the warp's 16×8 tile of C, and the K step


@cuda.jit(device=True, inline="always")
def a_element(lane, r):
    """(row, column) in the 16×8 A tile of lane ``lane``'s register a<r>."""
    g, t = lane >> 2, lane & 3
    if r == 0:
        return g, t  # a0
    if r == 1:
        return g + 8, t  # a1
    if r == 2:
        return g, t + 4  # a2
    return g + 8, t + 4  # a3


@cuda.jit(device=True, inline="always")
def b_element(lane, r):
    """(k, column) in the 8×8 B tile of lane ``lane``'s register b<r>."""
    g, t = lane >> 2, lane & 3
    if r == 0:
        return t, g  # b0
    return t + 4, g  # b1


@cuda.jit(device=True, inline="always")
def c_element(lane, r):
    """(row, column) in the 16×8 C tile of lane ``lane``'s accumulator c<r>."""
    g, t = lane >> 2, lane & 3
    if r == 0:
        return g, 2 * t  # c0
    if r == 1:
        return g, 2 * t + 1  # c1
    if r == 2:
        return g + 8, 2 * t  # c2
    return g + 8, 2 * t + 1  # c3


# ---- given: the loads, the K loop, the mma and the stores ----------------------------------

@cuda.jit(device=True, inline="always")
def load(x, row, col):
    """x[row, col] rounded to TF32, or 0 outside x: the ragged edges (every lane still reaches the mma)."""
    if row < x.shape[0] and col < x.shape[1]:
        return cvt_tf32(x[row, col])
    return np.float32(0)


@cuda.jit(device=True, inline="always")
def store(x, row, col, v):
    if row < x.shape[0] and col < x.shape[1]:
        x[row, col] = v


@cuda.jit(device=True, inline="always")
def load_a(a, lane, r, row0, k0):
    i, k = a_element(lane, r)
    return load(a, row0 + i, k0 + k)


@cuda.jit(device=True, inline="always")
def load_b(b, lane, r, k0, col0):
    k, j = b_element(lane, r)
    return load(b, k0 + k, col0 + j)


@cuda.jit(device=True, inline="always")
def store_c(c, lane, r, row0, col0, v):
    i, j = c_element(lane, r)
    store(c, row0 + i, col0 + j, v)


@cuda.jit
def mma_kernel(a, b, c):
    """C = A·B (float32 in, TF32 products, float32 sums): block (x, y) is one warp and the 16×8
    tile of C at (16y, 8x)."""
    lane = cuda.threadIdx.x
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
    c0 = c1 = c2 = c3 = np.float32(0)
    for k0 in range(0, a.shape[1], BK):
        c0, c1, c2, c3 = mma_tf32(load_a(a, lane, 0, row0, k0), load_a(a, lane, 1, row0, k0),
                                  load_a(a, lane, 2, row0, k0), load_a(a, lane, 3, row0, k0),
                                  load_b(b, lane, 0, k0, col0), load_b(b, lane, 1, k0, col0),
                                  c0, c1, c2, c3)
    store_c(c, lane, 0, row0, col0, c0)
    store_c(c, lane, 1, row0, col0, c1)
    store_c(c, lane, 2, row0, col0, c2)
    store_c(c, lane, 3, row0, col0, c3)
