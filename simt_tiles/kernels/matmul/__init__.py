"""The matmul ladder: C = A @ B, one numbered file per technique.

The file tree is the lesson — read the rungs in order:

=====================  ====================================================
``k01_naive``          one thread per output, straight from global memory
``k02_coalesced``      thread→element mapping that makes warps coalesce
``k03_smem_tiled``     shared-memory tiles, reused T times, masked edges
``k04_regblock_1d``    TM outputs per thread, B operand reused from a register
``k05_regblock_2d``    TM×TN outputs per thread as register outer products
``k06_transposed``     A transposed in smem: 128-bit reads, 8-way store conflicts
``k07_padded``         padded rows remove the conflicts (PAD = 4 keeps alignment)
``k08_swizzled``       XOR-swizzled columns remove them with no extra memory
``k09_double_buffered`` two smem stages: next tile's loads overlap this tile's math
``k10_warptiled``      warp tiles, strided lane slices, launch bounds
``k11_vectorized_bk16`` generated tile code, BK=16, 128-bit loads, split-K
``k12_async_copy``     cp.async for both operands (A transposed first)
=====================  ====================================================

``config=None`` asks :func:`simt_tiles.autotune.choose` first (the user's autotune
cache, then the table shipped for this GPU); without an answer ``variant=None`` picks
the rung, its tile and its split of K by size (``_common.fast_plan``), a named variant its preset.
"""

from __future__ import annotations

import dataclasses
import functools

from ... import autotune as _autotune
from ...interop import as_stream, device_operand, finish_result, prepare_out
from ...launch import planned
from ...runtime import SIMULATOR, Rung, pick_rung
from . import (
    k01_naive,
    k02_coalesced,
    k03_smem_tiled,
    k04_regblock_1d,
    k05_regblock_2d,
    k06_transposed,
    k07_padded,
    k08_swizzled,
    k09_double_buffered,
    k10_warptiled,
    k11_vectorized_bk16,
    k12_async_copy,
)
from ._common import fast_plan, flops

#: every rung, in ladder order
RUNGS: dict[str, Rung] = {
    r.name: r
    for r in (
        k01_naive.RUNG,
        k02_coalesced.RUNG,
        k03_smem_tiled.RUNG,
        k04_regblock_1d.RUNG,
        k05_regblock_2d.RUNG,
        k06_transposed.RUNG,
        k07_padded.RUNG,
        k08_swizzled.RUNG,
        k09_double_buffered.RUNG,
        k10_warptiled.RUNG,
        k11_vectorized_bk16.RUNG,
        k12_async_copy.RUNG,
    )
}

#: variant names in ladder order (later rungs append)
MATMUL_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the rung ``variant=None`` uses: the fastest one shipped (see benchmarks/NOTES.md)
BEST_VARIANT = "k11_vectorized_bk16"

__all__ = ["matmul", "MATMUL_VARIANTS", "RUNGS", "BEST_VARIANT", "get_rung", "flops", "choose"]


def get_rung(variant: str | None) -> Rung:
    """The rung named ``variant`` (None: :data:`BEST_VARIANT`)."""
    return pick_rung(RUNGS, variant, BEST_VARIANT)


def choose(variant, config, m: int, n: int, k: int, dtype, autotune=None):
    """``(rung, config)`` for one problem: the caller's config; else, with ``config=None``, the
    tuned choice for this GPU and size (:func:`simt_tiles.autotune.choose`: memoised, a dict
    lookup after the first call; ``autotune=True`` tunes a miss); else with ``variant=None``
    the split-K rule (:func:`._common.fast_plan`), with a variant its preset.  The default
    (``variant=None``) takes k12 for a k11 choice whose rows are ragged (:data:`RAGGED_ROWS`)."""
    if config is None:
        dtype = _autotune.dtype_name(dtype)
        hit = _autotune.choose("matmul", (m, n, k, dtype), variant, autotune)
        if hit is not None or variant is None:
            rung, cfg = (get_rung(hit[0]), hit[1]) if hit is not None else _split_k_choice(m, n, k, dtype)
            if variant is None and rung.name in RAGGED_ROWS and (k % 4 or n % 4) and dtype == "float32":
                rung = RUNGS[RAGGED_ROWS[rung.name]]  # a bucket or row holds aligned and ragged sizes
            return rung, cfg
    rung = get_rung(variant)
    return rung, rung.resolve_config(config)


#: the default's rung for rows of A or B that are not a multiple of 4 long (K % 4, N % 4), by the
#: rung the table or the split-K rows chose: k11 reads such rows with scalar loads (1024×997×1024,
#: 64×64 tiles: 83 µs in the kernel alone), k12 copies them into padded rows and keeps its 16-byte
#: copies (benchmarks/NOTES.md, session 13).  Same config: k12 takes k11's.
RAGGED_ROWS = {"k11_vectorized_bk16": "k12_async_copy"}


@functools.lru_cache(maxsize=4096)  # a size called again skips the rule and the config's validation
def _split_k_choice(m: int, n: int, k: int, dtype: str):
    """The split-K row's choice: its variant with the row's tile (the variant's ``"default"`` preset
    and the row's fields) and split.  The simulator keeps its small ``"sim"`` tile, with the split."""
    variant, splits, fields = fast_plan(m, n, k, dtype)
    rung = get_rung(variant)
    cfg = rung.resolve_config(None)
    if fields and not SIMULATOR:
        cfg = dataclasses.replace(rung.presets["default"], **fields)  # validated by fast_table
    if splits > 1:
        cfg = dataclasses.replace(cfg, splits=splits)
    return rung, cfg


@planned
def matmul(a, b, *, out=None, variant=None, config=None, stream=None, autotune=None):
    """C = A @ B for 2-D float32 or float64 arrays of the same dtype.

    a, b
        NumPy arrays (copied to the device; the result comes back as NumPy),
        Numba device arrays, or CUDA arrays from CuPy / PyTorch / any
        ``__cuda_array_interface__`` or DLPack producer (used in place; the
        result is of ``a``'s kind).  Device arrays must be C-contiguous.
    out
        Optional C-contiguous array of shape (M, N) and the inputs' dtype to
        write into; it is returned.  It must not overlap ``a`` or ``b`` in memory
        (ValueError naming ``out``); disjoint views of one buffer are fine.
    variant
        A name from :data:`MATMUL_VARIANTS`; None picks :data:`BEST_VARIANT`,
        or, with ``config=None`` too, the fastest rung and split of K measured
        for this size and dtype (:func:`choose`).
    config
        A preset name (every rung has ``"sim"`` and ``"default"``) or the rung's
        config object; None means the tuned config for this GPU and size when the
        autotune cache or the shipped table has one (:mod:`simt_tiles.autotune`),
        else ``"sim"`` in the simulator, ``"default"`` on a GPU.
    stream
        None (the current stream of the inputs' framework: CuPy's or PyTorch's current
        stream; Numba's default stream for Numba and NumPy arrays), a Numba stream, or a
        CuPy/PyTorch stream.
        Device results are asynchronous on that stream, like any CUDA library.
    autotune
        True: with ``config=None``, a size that neither the cache nor the shipped table
        has is tuned now (seconds, once per GPU and size bucket) and stored; None: only
        when ``SIMT_TILES_AUTOTUNE=1``; False: never.
    """
    get_rung(variant)  # a bad name fails before any copy
    stream = as_stream(stream, a)

    a_op = device_operand(a, "a", ndim=2, stream=stream)
    b_op = device_operand(b, "b", ndim=2, stream=stream)
    (m, k), (kb, n) = a_op.dev.shape, b_op.dev.shape
    if b_op.dev.dtype != a_op.dev.dtype:
        raise TypeError(
            f"b: expected dtype {a_op.dev.dtype} (the dtype of a); got {b_op.dev.dtype}"
        )
    if kb != k:
        raise ValueError(
            f"b: expected shape ({k}, N) since a has shape {(m, k)} "
            f"(inner dimensions must match); got {(kb, n)}"
        )
    rung, cfg = choose(variant, config, m, n, k, a_op.dev.dtype, autotune)
    c_op = prepare_out(out, a_op, (m, n), a_op.dev.dtype, stream, inputs=(b_op,))

    if m and n:  # an empty C needs no launch (and a 0-block grid is invalid)
        grid, block = rung.geometry(cfg, m, n, k)
        rung.launch(cfg, a_op.dev.dtype, grid, block, stream, a_op.dev, b_op.dev, c_op.dev)
    return finish_result(c_op, stream)
