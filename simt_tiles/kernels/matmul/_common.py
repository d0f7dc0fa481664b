"""What every matmul rung shares: the kernel signature and the launch-side
shape conventions.  C[M, N] = A[M, K] @ B[K, N], all row-major (C-contiguous).
"""

from __future__ import annotations

from numba import void

from ...runtime import numba_dtype


def signature(dtype):
    """``void(A, B, C)`` with all three C-contiguous 2-D arrays of ``dtype``."""
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, t)


def flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one product (a multiply and an add per term)."""
    return 2 * m * n * k


#: What ``matmul(variant=None, config=None)`` runs for a float32 problem, by shape class:
#: C's 128×128 tiles against the H200's 132 SMs (2 blocks fit per SM).  Rows are
#: ``(fewest tiles, splits, variant)``; the last row whose bound is reached wins.  Few tiles
#: leave SMs idle, so K is split (deterministically: partials, then one sum kernel).
#: Measured on the H200: benchmarks/results/matmul_fast_h200.md.
FAST_TABLE = (
    (0, 4, "k11_vectorized_bk16"),
    (132, 2, "k11_vectorized_bk16"),
    (264, 1, "k11_vectorized_bk16"),
)
#: float64 problems: no FP64 measurement of the generated rung yet
FLOAT64_VARIANT = "k10_warptiled"
#: fewest K elements per split: shorter chunks cost more in partial sums than they gain
MIN_SPLIT_K = 256


def fast_choice(m: int, n: int, k: int, dtype) -> tuple[str, int]:
    """``(variant, splits)`` for ``matmul(variant=None)`` from :data:`FAST_TABLE`."""
    import numpy as np

    if np.dtype(dtype) != np.float32:
        return FLOAT64_VARIANT, 1
    tiles = -(-m // 128) * -(-n // 128)
    splits, variant = 1, FAST_TABLE[0][2]
    for bound, s, v in FAST_TABLE:
        if tiles >= bound:
            splits, variant = s, v
    return variant, max(1, min(splits, k // MIN_SPLIT_K))
