"""Every matmul rung against a long-double NumPy reference, on ragged shapes.

Shapes come from the edge sizes of the drawn config's tile (0, 1, tile−1,
tile, tile+1, 2·tile+1, primes); both dtypes; random launch configs; outputs
poisoned with NaN; error bound γ_K(u)·|A|·|B| (simt_tiles.bounds).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st
from numba import cuda  # module level: the simulator swaps this global inside kernels

import simt_tiles
from simt_tiles.bounds import check_within
from simt_tiles.kernels.matmul import BEST_VARIANT, MATMUL_VARIANTS, RUNGS
from simt_tiles.kernels.matmul.reference import matmul_reference
from simt_tiles.runtime import Rung, numba_dtype

from .matmul_helpers import (
    CONFIG_STRATEGIES,
    DTYPES,
    WarpConfig,
    assert_matmul_ok,
    config_strategy,
    edge_sizes,
    poisoned,
    random_operands,
    tile_extents,
)


def test_variants_are_in_ladder_order():
    assert MATMUL_VARIANTS[:3] == ("k01_naive", "k02_coalesced", "k03_smem_tiled")
    assert simt_tiles.MATMUL_VARIANTS == MATMUL_VARIANTS
    assert BEST_VARIANT in MATMUL_VARIANTS
    assert not hasattr(simt_tiles, "BEST_VARIANT")  # each family has its own


def test_every_variant_has_a_config_strategy_and_both_presets():
    for v in MATMUL_VARIANTS:
        assert v in CONFIG_STRATEGIES, f"{v}: add a config strategy in tests/matmul_helpers.py"
        assert {"sim", "default"} <= set(RUNGS[v].presets)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", MATMUL_VARIANTS)
@given(data=st.data())
def test_matmul_matches_reference(variant, dtype, data):
    config = data.draw(config_strategy(variant), label="config")
    # configs are validated for float32; float64 doubles the shared memory
    assume(config.smem_bytes(np.dtype(dtype).itemsize) <= config.MAX_STATIC_SMEM)
    sizes = st.sampled_from(edge_sizes(*tile_extents(config)))
    m, n, k = data.draw(sizes, "M"), data.draw(sizes, "N"), data.draw(sizes, "K")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    a, b = random_operands(np.random.default_rng(seed), m, n, k, dtype)
    out = poisoned((m, n), dtype)
    got = simt_tiles.matmul(a, b, out=out, variant=variant, config=config)
    assert got is out
    chk = assert_matmul_ok(a, b, out.copy_to_host())
    note(repr(chk))


#: k10 block shapes with more than one warp row and more than one warp column: a warp's offset in
#: the block (warp // WARPS_N rows of WM, warp % WARPS_N columns of WN) is only exercised there
K10_WARP_GRIDS = {
    "2x1_warps": WarpConfig(bm=64, bn=16, bk=4, wm=32, wn=16, tm=4, tn=4),   # 64 threads
    "1x2_warps": WarpConfig(bm=32, bn=32, bk=4, wm=32, wn=16, tm=4, tn=4),   # 64 threads
    "2x2_warps": WarpConfig(bm=64, bn=32, bk=4, wm=32, wn=16, tm=4, tn=4),   # 128 threads
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("grid", K10_WARP_GRIDS)
def test_k10_every_warp_of_a_warp_grid_lands_on_its_tile(grid, dtype):
    """One ragged problem over two blocks each way: every warp row and column of the block writes
    its own WM×WN tile (a wrong warp offset leaves NaN or overwrites a neighbour's)."""
    config = K10_WARP_GRIDS[grid]
    m, n, k = config.bm + 5, config.bn + 3, 2 * config.bk + 1
    a, b = random_operands(np.random.default_rng(1), m, n, k, dtype)
    out = poisoned((m, n), dtype)
    simt_tiles.matmul(a, b, out=out, variant="k10_warptiled", config=config)
    assert_matmul_ok(a, b, out.copy_to_host())


@pytest.mark.parametrize("variant", MATMUL_VARIANTS)
def test_k_zero_writes_exact_zeros(variant):
    a = np.ones((3, 0), np.float32)
    b = np.ones((0, 5), np.float32)
    out = poisoned((3, 5), np.float32)
    simt_tiles.matmul(a, b, out=out, variant=variant)
    np.testing.assert_array_equal(out.copy_to_host(), np.zeros((3, 5), np.float32))


@pytest.mark.parametrize("shape", [(0, 4, 3), (4, 0, 3), (0, 0, 0)])
def test_empty_output(shape):
    m, n, k = shape
    c = simt_tiles.matmul(np.ones((m, k), np.float32), np.ones((k, n), np.float32))
    assert c.shape == (m, n) and c.dtype == np.float32


# --- the check itself must be able to fail ---------------------------------


def _off_by_one_factory(config, dtype):
    """k02 with the last term of every dot product dropped: must be caught."""
    DT = numba_dtype(dtype)

    def broken(a, b, c):
        col, row = cuda.grid(2)
        if row < c.shape[0] and col < c.shape[1]:
            acc = DT(0)
            for k in range(a.shape[1] - 1):
                acc += a[row, k] * b[k, col]
            c[row, col] = acc

    return broken


def _skip_last_column_factory(config, dtype):
    """k02 that never writes the last column: the NaN poison must expose it."""
    DT = numba_dtype(dtype)

    def broken(a, b, c):
        col, row = cuda.grid(2)
        if row < c.shape[0] and col < c.shape[1] - 1:
            acc = DT(0)
            for k in range(a.shape[1]):
                acc += a[row, k] * b[k, col]
            c[row, col] = acc

    return broken


@pytest.mark.parametrize("factory", [_off_by_one_factory, _skip_last_column_factory])
def test_harness_catches_broken_kernels(factory):
    good = RUNGS["k02_coalesced"]
    rung = Rung("broken", good.config_type, good.presets, factory, good.geometry, good.signature)
    cfg = rung.resolve_config(None)
    a, b = random_operands(np.random.default_rng(1), 5, 6, 7, np.float32)
    out = poisoned((5, 6), np.float32)
    grid, block = rung.geometry(cfg, 5, 6, 7)
    rung.kernel(cfg, np.float32)[grid, block](cuda.to_device(a), cuda.to_device(b), out)
    ref, bound = matmul_reference(a, b)
    assert not check_within(out.copy_to_host(), ref, bound).passed


def test_bound_is_tight_enough_to_catch_one_ulp_scale_errors():
    rng = np.random.default_rng(3)
    a, b = random_operands(rng, 4, 4, 64, np.float32)
    ref, bound = matmul_reference(a, b)
    exact = ref.copy()
    assert check_within(exact, ref, bound).passed
    exact[2, 3] += 2 * bound[2, 3]
    assert not check_within(exact, ref, bound).passed
    nan = ref.copy()
    nan[0, 0] = np.nan
    assert not check_within(nan, ref, bound).passed


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_k_one_is_a_single_rounding(dtype):
    """K = 1: C = fl(a·b), one rounding — the tightest case of the bound.

    Found on the H200: a float64 kernel failed here when the long-double
    reference was rounded to float64 before the comparison (an extra 2^-53·|ref|).
    """
    rng = np.random.default_rng(19)
    a, b = random_operands(rng, 13, 11, 1, dtype)
    correctly_rounded = a[:, :1] * b[:1, :]  # IEEE multiply in dtype: exactly fl(a·b)
    ref, bound = matmul_reference(a, b)
    assert check_within(correctly_rounded, ref, bound).passed
    # the old harness: reference rounded to float64 first (double rounding) must fail here
    if dtype == np.float64:
        assert not check_within(correctly_rounded, ref.astype(np.float64), bound).passed
