"""Exercise mma_fragments — which elements of A, B and C each lane of a warp holds for one mma.sync.

Statement
    A tensor-core ``mma.sync.m16n8k8`` (TF32 inputs, float32 accumulators) is ONE instruction
    for the whole warp: D (16×8) = A (16×8) · B (8×8) + C (16×8). No lane holds a row or a
    column: each holds 4 elements of A (registers a0..a3), 2 of B (b0, b1) and 4 of C/D (c0..c3),
    scattered by a fixed layout (the PTX ISA's "matrix fragments for mma.m16n8k8"). Give every
    lane the wrong elements and the instruction still runs — it just multiplies other matrices.

    ``mma_kernel`` computes C = A·B (M×N, any M, N, K) with one warp per 16×8 tile of C and a
    K loop in steps of 8, calling ``simt_tiles.mma.mma_tf32`` (inline PTX on a GPU; in the
    simulator an emulation that multiplies exactly what the 32 lanes hand it, with the real
    layout). The loads outside A or B give 0 and the stores outside C are skipped (given), so
    ragged shapes work once the maps are right. Write the three maps: ``a_element(lane, r)``,
    ``b_element(lane, r)`` and ``c_element(lane, r)`` return the (row, column) in the tile of
    register r of lane ``lane``. The stub guesses "row-major runs", which is wrong. The grader
    calls your maps for all 32 lanes, then runs two exact probes (B = I makes C = A; A = [I; I]
    makes C = [B; B]), then ragged shapes (1×1×1, 17×9×13, K = 0, ...) against a long-double
    reference within the TF32 error bound (``simt_tiles.bounds.mma_error_factor``).

The fragment map (from the PTX ISA; ``simt_tiles.pictures.fragment_figure()`` draws it in colour)
    The number in each cell is the lane that holds that element; the register is on the right.

        A 16×8    k:  0  1  2  3    4  5  6  7
        A row  0      0  1  2  3    0  1  2  3    a0 | a2
        A row  1      4  5  6  7    4  5  6  7    a0 | a2
        A row  2      8  9 10 11    8  9 10 11    a0 | a2
            ⋮
        A row  7     28 29 30 31   28 29 30 31    a0 | a2
        A row  8      0  1  2  3    0  1  2  3    a1 | a3
        A row  9      4  5  6  7    4  5  6  7    a1 | a3
            ⋮
        A row 15     28 29 30 31   28 29 30 31    a1 | a3

        B 8×8     n:  0  1  2  3  4  5  6  7
        B k    0      0  4  8 12 16 20 24 28      b0
        B k    1      1  5  9 13 17 21 25 29      b0
        B k    2      2  6 10 14 18 22 26 30      b0
        B k    3      3  7 11 15 19 23 27 31      b0
        B k    4      0  4  8 12 16 20 24 28      b1
            ⋮
        B k    7      3  7 11 15 19 23 27 31      b1

        C 16×8    n:  0  1  2  3  4  5  6  7
        C row  0      0  0  1  1  2  2  3  3      c0 c1 (even n: c0, odd n: c1)
        C row  1      4  4  5  5  6  6  7  7      c0 c1
            ⋮
        C row  7     28 28 29 29 30 30 31 31      c0 c1
        C row  8      0  0  1  1  2  2  3  3      c2 c3
            ⋮
        C row 15     28 28 29 29 30 30 31 31      c2 c3

Hints
    1. Split the lane: ``g, t = lane >> 2, lane & 3`` — its group of four (0..7) and its place in
       the group (0..3). Each map is a line per register in g and t.
    2. A: the group picks the row (and row + 8), the place picks the column (and column + 4):
       a0 and a1 differ in the ROW, a0 and a2 in the COLUMN. Swapping a1 and a2 is the classic bug.
    3. B is held "column-major": the group picks the column n, the place picks k (and k + 4).
    4. C: the group picks the row (and row + 8), the place a PAIR of adjacent columns 2t, 2t + 1.
    5. Every lane must reach every ``mma_tf32`` call (it is a warp rendezvous): guard the loads and
       the stores (given here), never the mma.
    6. The score line shows the price of fragments loaded straight from global memory: on 16×8×16,
       80 sectors for 1.5 KB of A and B (48 would do) — an A register is 8 rows × 16 bytes, half
       of each 32-byte sector — and 32 for C's 512 bytes (c0 is every other float of 8 rows).
       k13 copies whole tiles to shared memory and reads A's fragment there with one ``ldmatrix``.

Check: ``python -m simt_tiles.exercises check mma_fragments mma_fragments.py``
"""

import numpy as np
from numba import cuda

from simt_tiles.mma import cvt_tf32, mma_tf32

BM, BN, BK = 16, 8, 8  # one m16n8k8 mma: the warp's 16×8 tile of C, and the K step


@cuda.jit(device=True, inline="always")
def a_element(lane, r):
    """(row, column) in the 16×8 A tile of lane ``lane``'s register a<r>."""
    return lane // 2, 4 * (lane % 2) + r  # TODO: a guess (row-major runs of 4); the layout is in the picture


@cuda.jit(device=True, inline="always")
def b_element(lane, r):
    """(k, column) in the 8×8 B tile of lane ``lane``'s register b<r>."""
    return lane // 4, 2 * (lane % 4) + r  # TODO: a guess (row-major runs of 2)


@cuda.jit(device=True, inline="always")
def c_element(lane, r):
    """(row, column) in the 16×8 C tile of lane ``lane``'s accumulator c<r>."""
    return lane // 2, 4 * (lane % 2) + r  # TODO: a guess (row-major runs of 4)


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
