"""The matmul family's cases: the demo's, the aliasing tests', and each rung's lesson hazard
(read through ``FAMILY``, :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import numpy as np

import simt_tiles as st

from ...bounds import check_within
from ...registry import AliasCase, numpy_case
from .reference import matmul_reference


def demo(rung: str, dtype, c):
    """``rung`` on a ragged product (``c.shape``): NumPy in the simulator; on a GPU device arrays
    (CuPy when there) into a NaN-poisoned output."""
    m, n, k = c.shape
    a_h, b_h = c.rng.standard_normal((m, k)).astype(dtype), c.rng.standard_normal((k, n)).astype(dtype)
    if c.simulator:
        ref, bound = matmul_reference(a_h, b_h)
        return numpy_case(f"{m}x{n}x{k}", lambda: st.matmul(a_h, b_h, variant=rung, config=c.preset), ref, bound)
    if c.cp is not None:  # device arrays in, a NaN-poisoned device buffer out
        xp, a, b = c.cp, c.cp.asarray(a_h), c.cp.asarray(b_h)
        out = c.cp.full((m, n), np.nan, dtype=dtype)
        host = lambda y: y  # noqa: E731
    else:
        from numba import cuda

        xp, a, b = np, cuda.to_device(a_h), cuda.to_device(b_h)
        out = cuda.to_device(np.full((m, n), np.nan, dtype=dtype))
        host = lambda y: y.copy_to_host()  # noqa: E731
    ref, bound = matmul_reference(a if xp is not np else a_h, b if xp is not np else b_h, xp=xp, precise=False)
    return (f"{m}x{n}x{k}", lambda: st.matmul(a, b, out=out, variant=rung, config=c.preset),
            lambda: check_within(host(out), ref, bound, xp=xp))


ALIASING = {"matmul": AliasCase(lambda a, b, out=None: st.matmul(a, b, out=out), ("a", "b"), ((5, 5), (5, 5)), (5, 5))}

#: the hazard each rung's lesson introduces (the docs' lesson pages, "The hazard it introduces")
HAZARDS = {
    "k01_naive": ("None yet: no shared memory, no barrier. The hazard is in the access pattern — adjacent "
                 "threads of a warp read A 4·K bytes apart, so each warp-wide load touches 32 sectors."),
    "k02_coalesced": ("None new; it removes k01's uncoalesced reads by swapping the thread→element map."),
    "k03_smem_tiled": ("Two barriers appear: RAW (read the tile only after every thread wrote it) and WAR "
                      "(overwrite it only after every thread read it). An early `return` for out-of-range threads "
                      "would deadlock the block at a barrier."),
    "k04_regblock_1d": ("A register array (the TM accumulators) must be indexed only by compile-time constants — "
                       "unrolled loops — or it lives in local memory (the compile gate fails on a stack frame)."),
    "k05_regblock_2d": ("Register pressure: TM·TN accumulators plus TM + TN operands and addresses (104 registers "
                       "at 8×8 in the compile gate); and the A tile is read down a column, BK words apart, so no "
                       "wide loads — what k06 sets out to fix."),
    "k06_transposed": ("An 8-way shared-memory bank conflict on every store of the transposed A tile."),
    "k07_padded": ("Removes k06's conflict at the price of extra shared memory; the pad must keep 128-bit "
                  "reads aligned (PAD = 4, not 1)."),
    "k08_swizzled": ("Removes k06's conflict with an XOR permutation: every read and write must use the same "
                    "swizzle, and BM % 32 == 0 keeps it inside a row."),
    "k09_double_buffered": ("One barrier per step instead of two: the WAR hazard is now covered by writing the *other* "
                           "buffer, so the buffer index arithmetic is the synchronisation."),
    "k10_warptiled": ("k09's single barrier per K step; lanes read strided slices, so the index maps decide both "
                     "banks and correctness."),
    "k11_generated_split_k": ("Rows and columns past the matrix are clamped, not masked: edge threads load real data into "
                           "outputs nobody stores, so only the final store may be guarded; split-K adds a second "
                           "kernel that sums the partials in a fixed order (deterministic)."),
    "k12_async_copy": ("`cp.async` copies land in shared memory behind the threads' backs: `wait_copies` plus the "
                      "tile's barrier before reading; the copies cannot transpose, so Aᵀ is written first (an "
                      "extra pass and K·M floats of workspace)."),
}

