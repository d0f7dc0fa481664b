"""vector_add and bias_relu against NumPy: one IEEE rounding per element, so results must be exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
from simt_tiles.kernels.elementwise import RUNGS, VECTOR_ADD_VARIANTS
from simt_tiles.kernels.elementwise._common import StreamConfig
from simt_tiles.kernels.elementwise.bias_relu import Config as BiasReluConfig
from simt_tiles.kernels.elementwise.bias_relu import boundary_waste
from simt_tiles.runtime import SIMULATOR

from .common import DTYPES, configs, edge_sizes, grid_limit, poisoned

STREAM_CONFIGS = (
    st.builds(StreamConfig, st.sampled_from([1, 3, 8]), st.integers(1, 4), st.integers(1, 3)) if SIMULATOR
    else st.builds(StreamConfig, st.sampled_from([32, 256, 1024]), st.integers(1, 8), st.sampled_from([1, 132, 1056]))
)
TILE_CONFIGS = (st.builds(BiasReluConfig, st.integers(1, 5), st.integers(1, 3), st.integers(1, 3)) if SIMULATOR
                else st.builds(BiasReluConfig, st.sampled_from([8, 32, 64]), st.sampled_from([1, 4, 8, 16]),
                               st.sampled_from([1, 2, 4, 8])))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", VECTOR_ADD_VARIANTS)
@given(data=st.data())
def test_vector_add_exact(variant, dtype, data):
    config = data.draw(configs(RUNGS[variant], STREAM_CONFIGS), "config")
    n = data.draw(st.sampled_from(edge_sizes(config.threads, config.threads * config.items,
                                             config.threads * config.items * config.max_blocks)), "n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    out = poisoned((n,), dtype)
    assert simt_tiles.vector_add(a, b, out=out, variant=variant, config=config) is out
    np.testing.assert_array_equal(out.copy_to_host(), a + b)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@given(data=st.data())
def test_bias_relu_exact(dtype, data):
    config = data.draw(configs(RUNGS["bias_relu"], TILE_CONFIGS), "config")
    m = data.draw(st.sampled_from(edge_sizes(config.tile_m * config.rows_per_thread)), "M")
    n = data.draw(st.sampled_from(edge_sizes(config.tile_n)), "N")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x, bias = rng.standard_normal((m, n)).astype(dtype), rng.standard_normal(n).astype(dtype)
    if m and n and data.draw(st.booleans(), "NaN"):
        x[rng.integers(m), rng.integers(n)] = np.nan
    out = poisoned((m, n), dtype)
    simt_tiles.bias_relu(x, bias, out=out, config=config)
    np.testing.assert_array_equal(out.copy_to_host(), np.maximum(x + bias, 0))


def test_results_in_the_callers_kind():
    a = np.arange(5, dtype=np.float32)
    assert isinstance(simt_tiles.vector_add(a, a), np.ndarray)
    d = simt_tiles.vector_add(cuda.to_device(a), cuda.to_device(a))
    np.testing.assert_array_equal(d.copy_to_host(), 2 * a)
    assert simt_tiles.vector_add(np.zeros(0, np.float32), np.zeros(0, np.float32)).shape == (0,)


def test_bad_input():
    f = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"b: expected shape \(3,\) \(the shape of a\); got \(4,\)"):
        simt_tiles.vector_add(f, np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"b: expected dtype float32 \(the dtype of a\); got float64"):
        simt_tiles.vector_add(f, np.ones(3))
    with pytest.raises(ValueError, match=r"a: expected a 1-D array; got 2-D"):
        simt_tiles.vector_add(np.ones((1, 3), np.float32), f)
    with pytest.raises(ValueError, match=r"bias: expected shape \(2,\) \(x has 2 columns\); got \(3,\)"):
        simt_tiles.bias_relu(np.ones((4, 2), np.float32), f)
    with pytest.raises(TypeError, match=r"bias: expected dtype float32 \(the dtype of x\); got float64"):
        simt_tiles.bias_relu(np.ones((4, 3), np.float32), np.ones(3))


def test_boundary_waste():
    cfg = BiasReluConfig(32, 8)
    assert boundary_waste(cfg, 64, 64) == 0
    # grid (2, 2) of (32, 8) threads = 1024 launched for 9 x 33 = 297 outputs
    assert boundary_waste(cfg, 9, 33) == pytest.approx(1 - 297 / 1024)
    # 4 rows per thread: a (32, 8) block covers 32 x 32; grid (2, 1) → 2048 element slots
    assert boundary_waste(BiasReluConfig(32, 8, 4), 9, 33) == pytest.approx(1 - 297 / 2048)


def test_bias_relu_rows_past_the_grid_launch_in_pieces(monkeypatch):
    """More tiles of rows than CUDA's grid y takes (65535; here 2, the sim tile's 4 rows: 8 rows a
    launch): x's and y's rows launch in pieces (``bias_relu.RowsRung``), each exact."""
    import importlib

    module = importlib.import_module("simt_tiles.kernels.elementwise.bias_relu")  # (the package's name is the function)
    monkeypatch.setattr(module, "MAX_GRID_Y", 2)
    grids = grid_limit(monkeypatch, y=2)
    rng = np.random.default_rng(34)
    x, bias = rng.standard_normal((19, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    out = poisoned((19, 5), np.float32)
    simt_tiles.bias_relu(x, bias, out=out, config="sim")
    np.testing.assert_array_equal(out.copy_to_host(), np.maximum(x + bias, 0))
    assert [g[1] for g in grids] == [2, 2, 1]  # 19 rows: 8, 8 and 3
