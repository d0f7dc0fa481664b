"""Shared test machinery: shape and config strategies, poisoned outputs, the bound check."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from numba import cuda

from simt_tiles.kernels.matmul import RUNGS
from simt_tiles.kernels.matmul.k01_naive import Config as BlockConfig
from simt_tiles.kernels.matmul.k03_smem_tiled import Config as TileConfigK03
from simt_tiles.reference import check_within, matmul_reference
from simt_tiles.runtime import SIMULATOR

DTYPES = (np.float32, np.float64)
SMALL_PRIMES = (2, 3, 5, 7, 11, 13)
GPU_SIZES = (31, 97, 127, 257, 509, 1000, 1031)


def edge_sizes(tile: int) -> list[int]:
    """Sizes that break tiled code: 0, 1, around the tile, around two tiles, primes."""
    sizes = {0, 1, tile - 1, tile, tile + 1, 2 * tile + 1, *SMALL_PRIMES}
    if not SIMULATOR:
        sizes |= {*GPU_SIZES, 4 * tile - 1}
    return sorted(s for s in sizes if s >= 0)


# Launch configurations drawn at random per rung.  Every rung must have one
# (test_every_variant_has_a_config_strategy), so a new rung cannot go untested.
if SIMULATOR:
    _block = st.builds(BlockConfig, st.integers(1, 6), st.integers(1, 6))
    _tile = st.builds(TileConfigK03, st.integers(1, 5))
else:
    _block = st.builds(BlockConfig, st.sampled_from([1, 8, 16, 32, 64]), st.sampled_from([1, 4, 8, 16]))
    _tile = st.builds(TileConfigK03, st.sampled_from([8, 16, 24, 32]))

CONFIG_STRATEGIES = {
    "k01_naive": _block,
    "k02_coalesced": _block,
    "k03_smem_tiled": _tile,
}


def config_strategy(variant: str):
    """The rung's shipped preset for this backend, or a random valid config."""
    preset = RUNGS[variant].presets["sim" if SIMULATOR else "default"]
    return st.one_of(st.just(preset), CONFIG_STRATEGIES[variant])


def tile_extent(config) -> int:
    """The size (in elements) a config tiles by, for choosing edge sizes."""
    return max(config.block())


def poisoned(shape, dtype):
    """A device array full of NaN: any element the kernel fails to write fails the check."""
    return cuda.to_device(np.full(shape, np.nan, dtype=dtype))


def random_operands(rng, m, n, k, dtype):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    return a, b


def assert_matmul_ok(a, b, out_host):
    # long double reference for small problems; float64 BLAS (its own γ_K(2^-53)
    # error is part of the bound) where long double would take seconds
    precise = a.shape[0] * a.shape[1] * b.shape[1] <= 2_000_000
    ref, bound = matmul_reference(a, b, precise=precise)
    chk = check_within(out_host, ref, bound)
    assert chk.passed, f"{chk} for shapes a{a.shape} b{b.shape} dtype {a.dtype}"
    return chk
