"""What every matmul rung shares: the kernel signature and the launch-side
shape conventions.  C[M, N] = A[M, K] @ B[K, N], all row-major (C-contiguous).
"""

from __future__ import annotations

import functools

from numba import void

from ...runtime import numba_dtype


def signature(dtype):
    """``void(A, B, C)`` with all three C-contiguous 2-D arrays of ``dtype``."""
    t = numba_dtype(dtype)[:, ::1]
    return void(t, t, t)


def flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one product (a multiply and an add per term)."""
    return 2 * m * n * k


#: What ``matmul(variant=None, config=None)`` runs for a float32 problem that neither the
#: autotune cache nor the shipped table (:mod:`simt_tiles.autotune`) has, by shape class: how
#: many 128×128 tiles C has.  Two blocks fit per SM and the H200 has 132 SMs, so a grid of fewer
#: than 264 blocks leaves slots idle: K is then split (deterministically: partials, then one sum
#: kernel).  The rows ``(most tiles, splits, variant)``, first match wins, live in the shipped
#: table ``simt_tiles/tuned/h200.json`` (``rules.matmul_split_k``: one source of truth, with its
#: measurements) and apply on every GPU (:func:`fast_table`).


#: float64 problems: no FP64 measurement of the generated rung yet
FLOAT64_VARIANT = "k10_warptiled"
#: fewest K elements per split: shorter chunks cost more in partial sums than they gain
MIN_SPLIT_K = 128


def fast_choice(m: int, n: int, k: int, dtype) -> tuple[str, int]:
    """``(variant, splits)`` for ``matmul(variant=None)`` from :func:`fast_table`."""
    import numpy as np

    if np.dtype(dtype) != np.float32:
        return FLOAT64_VARIANT, 1
    tiles = -(-m // 128) * -(-n // 128)
    for most, splits, variant in fast_table():
        if most is None or tiles <= most:
            return variant, max(1, min(splits, k // MIN_SPLIT_K))
    raise AssertionError("the split-K rows end with a catch-all row")


@functools.lru_cache(maxsize=1)
def fast_table() -> tuple:
    """The split-K rows of the shipped H200 table (read once)."""
    from ...autotune import shipped_rules

    rule = shipped_rules("matmul_split_k")
    rows = tuple(tuple(r) for r in (rule or {}).get("rows", ()))
    if not rows or rows[-1][0] is not None:
        raise RuntimeError("simt_tiles/tuned/h200.json: rules.matmul_split_k must end with a catch-all row")
    return rows


#: when the shipped table has no ``rules.matmul_pad``: pad from this many multiply-adds (512³)
PAD_MIN_MNK = 2**27


@functools.lru_cache(maxsize=1)
def pad_rule() -> int | None:
    """Fewest M·N·K multiply-adds from which a ragged or unaligned problem is copied into padded,
    16-byte aligned buffers (k11's ``pad=PAD_RULE``): ``rules.matmul_pad.min_mnk`` of the shipped
    table (read once; ``null``: never), else :data:`PAD_MIN_MNK`.  Below it the copies' launches
    cost more than the scalar loads they save."""
    from ...autotune import shipped_rules

    rule = shipped_rules("matmul_pad") or {}
    value = rule.get("min_mnk", PAD_MIN_MNK)
    return None if value is None else int(value)
