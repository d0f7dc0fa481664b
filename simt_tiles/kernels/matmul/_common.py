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
#: SM and the H200 has 132 SMs, so a grid of fewer than 264 blocks leaves slots idle: K is
#: then split (deterministically: partials, then one sum kernel) so that tiles × splits ≤ 264.
#: Measured on the H200 (benchmarks/results/matmul_fast_h200.md): 1000³ and 1024³ (64 tiles)
#: best with 4 splits (29.3 and 31.2 TFLOP/s, against 17.1 and 18.2 unsplit), 1031×997×1013
#: (72 tiles) with 3, 2048³ (256 tiles) unsplit (43.5; 2 splits: 40.4).  The smaller-tile
#: presets of k11 (``"64x64"``, ``"64x128"``, ``"128x64"``) are candidates for the small rows,
#: not yet measured (benchmarks/NOTES.md, session 8): a row names one only once it is.
FAST_TABLE = (
    (66, 4, "k11_vectorized_bk16", "default"),
    (88, 3, "k11_vectorized_bk16", "default"),
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
