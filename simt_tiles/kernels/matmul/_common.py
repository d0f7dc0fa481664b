"""What every matmul rung shares: the kernel signature, the call description and the
shape conventions.  C[M, N] = A[M, K] @ B[K, N], all row-major (C-contiguous).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from numba import void

from ...runtime import numba_dtype


def signature(dtype):
    """``void(A, B, C)`` with all three C-contiguous 2-D arrays of ``dtype``."""
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, t)


def flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one product (a multiply and an add per term)."""
    return 2 * m * n * k


class Call(NamedTuple):
    """One product on device arrays, as a rung's ``run(config, call)`` takes it."""

    a: Any  #: (M, K)
    b: Any  #: (K, N)
    c: Any  #: (M, N), written
    stream: Any = 0
    params: Any = None  #: the factory's compile-time parameters (k14: the precision), a dict

    @property
    def dtype(self):
        return self.a.dtype

    @property
    def problem(self) -> tuple[int, int, int]:
        """``(m, n, k)``: what the rungs' ``geometry`` takes."""
        return self.a.shape[0], self.b.shape[1], self.a.shape[1]

    @property
    def args(self) -> tuple:
        return self.a, self.b, self.c
