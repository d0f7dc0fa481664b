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
