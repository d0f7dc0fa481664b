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
#: how many 128×128 tiles C has.  Rows are ``(most tiles, splits, variant, preset)``, first
#: match wins (a three-field row means the ``"default"`` preset).  Two 128×128 blocks fit per
#: SM and the H200 has 132 SMs, so a grid of fewer than 264 blocks leaves slots idle: small
#: problems take smaller block tiles (the ``"64x64"`` preset: 4 times the blocks, up to 4 per
#: SM) and/or split K (deterministically: partials, then one sum kernel).  Measured on the
#: H200 (benchmarks/results/matmul_fast_h200.md, benchmarks/NOTES.md "Session 8").
FAST_TABLE = (
    (88, 1, "k11_vectorized_bk16", "64x64"),
    (132, 2, "k11_vectorized_bk16", "default"),
    (None, 1, "k11_vectorized_bk16", "default"),
)
#: float64 problems: no FP64 measurement of the generated rung yet
FLOAT64_VARIANT = "k10_warptiled"
#: fewest K elements per split: shorter chunks cost more in partial sums than they gain
MIN_SPLIT_K = 128


def fast_pick(m: int, n: int, k: int, dtype) -> tuple[str, str, int]:
    """``(variant, preset, splits)`` for ``matmul(variant=None, config=None)`` from :data:`FAST_TABLE`."""
    import numpy as np

    if np.dtype(dtype) != np.float32:
        return FLOAT64_VARIANT, "default", 1
    tiles = -(-m // 128) * -(-n // 128)
    for row in FAST_TABLE:
        most, splits, variant = row[:3]
        if most is None or tiles <= most:
            return variant, (row[3] if len(row) > 3 else "default"), max(1, min(splits, k // MIN_SPLIT_K))
    raise AssertionError("FAST_TABLE ends with a catch-all row")


def fast_choice(m: int, n: int, k: int, dtype) -> tuple[str, int]:
    """``(variant, splits)`` of :func:`fast_pick` (its preset left out)."""
    variant, _, splits = fast_pick(m, n, k, dtype)
    return variant, splits
