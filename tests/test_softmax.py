"""Softmax rungs against scipy.special.softmax: ragged shapes, special values, both dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
from hypothesis import assume, given, note
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
from simt_tiles.kernels.softmax import RUNGS, SOFTMAX_VARIANTS
from simt_tiles.kernels.softmax._common import RowConfig, WarpRowConfig
from simt_tiles.kernels.softmax.k04_register_row import Config as RegisterRowConfig
from simt_tiles.kernels.softmax.k05_split_row import Config as SplitRowConfig
from simt_tiles.kernels.softmax.reference import softmax_reference
from simt_tiles.runtime import SIMULATOR

from .common import DTYPES, configs, edge_sizes, poisoned

if SIMULATOR:
    CONFIGS = {
        "k01_smem_tree": st.builds(RowConfig, st.sampled_from([1, 2, 4, 8])),
        "k02_warp_shuffle": st.builds(WarpRowConfig, st.sampled_from([32, 64])),
        "k03_online": st.builds(WarpRowConfig, st.sampled_from([32, 64])),
        "k04_register_row": st.builds(RegisterRowConfig, threads=st.sampled_from([32, 64]),
                                      vpt_target=st.sampled_from([1, 2, 4]), max_vpt=st.just(64),
                                      min_threads=st.sampled_from([32, 64])),
        # registers first: 1–2 per thread, so the simulator's short rows reach shared memory
        "k05_split_row": st.builds(SplitRowConfig, threads=st.sampled_from([32, 64]), max_vpt=st.sampled_from([1, 2]),
                                   smem_budget=st.sampled_from([4096, 8192]), vpt_step=st.sampled_from([1, 2]),
                                   min_blocks=st.just(1)),
    }
else:
    CONFIGS = {v: st.builds(RUNGS[v].config_type, st.sampled_from([32, 64, 128, 256, 512, 1024]))
               for v in SOFTMAX_VARIANTS}
    CONFIGS["k04_register_row"] = st.builds(RegisterRowConfig, threads=st.sampled_from([32, 128, 256, 1024]),
                                            vpt_target=st.sampled_from([1, 4, 8, 16]), max_vpt=st.just(64),
                                            min_threads=st.sampled_from([32, 128]))
    # 16–32 registers of values, the rest in > 48 KiB of shared memory (the opt-in)
    CONFIGS["k05_split_row"] = st.builds(SplitRowConfig, threads=st.sampled_from([32, 128, 256, 1024]),
                                         max_vpt=st.sampled_from([16, 32]), smem_budget=st.sampled_from([65536, 98304]),
                                         vpt_step=st.sampled_from([1, 4]), min_blocks=st.just(1))


def assert_softmax_ok(x, y):
    ref, bound = softmax_reference(x)
    with np.errstate(invalid="ignore"):
        expect_nan = np.isnan(scipy.special.softmax(x.astype(np.float64), axis=-1))
    np.testing.assert_array_equal(np.isnan(y), expect_nan, err_msg="NaN pattern differs from scipy")
    ok = np.isnan(y) | (np.abs(y.astype(ref.dtype) - ref) <= bound)
    assert ok.all(), f"{(~ok).sum()} elements outside the bound; worst at {np.argwhere(~ok)[:3]}"


def test_every_variant_has_a_config_strategy_and_presets():
    assert set(CONFIGS) == set(SOFTMAX_VARIANTS)
    for v in SOFTMAX_VARIANTS:
        assert {"sim", "default"} <= set(RUNGS[v].presets)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", SOFTMAX_VARIANTS)
@given(data=st.data())
def test_softmax_matches_scipy(variant, dtype, data):
    config = data.draw(configs(RUNGS[variant], CONFIGS[variant]), "config")
    rows = data.draw(st.sampled_from([1, 2, 3, 5] if SIMULATOR else [1, 7, 64, 129]), "rows")
    cols = data.draw(st.sampled_from(edge_sizes(config.threads)), "cols")
    assume(cols > 0)
    seed = data.draw(st.integers(0, 2**32 - 1), "seed")
    scale = data.draw(st.sampled_from([1.0, 30.0, 300.0]), "scale")
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * scale).astype(dtype)
    specials = data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=3), "specials")
    for v in specials:  # plant special values at random places
        x[rng.integers(rows), rng.integers(cols)] = v
    if data.draw(st.booleans(), "a row of -inf"):
        x[rng.integers(rows), :] = -np.inf
    out = poisoned((rows, cols), dtype)
    assert simt_tiles.softmax(x, out=out, variant=variant, config=config) is out
    y = out.copy_to_host()
    note(f"x={x!r}\ny={y!r}")
    assert_softmax_ok(x, y)


@pytest.mark.parametrize("variant", SOFTMAX_VARIANTS)
def test_scipy_special_cases(variant):
    x = np.array([[1.0, 2.0, np.nan], [1.0, np.inf, 2.0], [-np.inf] * 3, [0.0, -np.inf, 0.0]], np.float32)
    y = simt_tiles.softmax(x, variant=variant)
    with np.errstate(invalid="ignore"):
        ref = scipy.special.softmax(x.astype(np.float64), axis=-1)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    np.testing.assert_allclose(y[3], [0.5, 0.0, 0.5], rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_empty(shape):
    y = simt_tiles.softmax(np.ones(shape, np.float32))
    assert y.shape == shape


def test_bad_input():
    with pytest.raises(ValueError, match=r"axis: expected -1 or 1 .*; got 0"):
        simt_tiles.softmax(np.ones((2, 2), np.float32), axis=0)
    with pytest.raises(ValueError, match=r"x: expected a 2-D array; got 1-D"):
        simt_tiles.softmax(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"x: expected dtype float32 or float64; got int64"):
        simt_tiles.softmax(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match=r"variant: expected one of \('k01_smem_tree'"):
        simt_tiles.softmax(np.ones((2, 2), np.float32), variant="nope")
    with pytest.raises(simt_tiles.ConfigError, match=r"threads % 32 == 0"):
        WarpRowConfig(16)
    with pytest.raises(simt_tiles.ConfigError, match=r"power of two"):
        RowConfig(12)


def test_check_catches_a_wrong_softmax():
    x = np.random.default_rng(0).standard_normal((3, 9)).astype(np.float32)
    y = scipy.special.softmax(x.astype(np.float64), axis=-1).astype(np.float32)
    assert_softmax_ok(x, y)
    y[1, 4] *= 1 + 1e-4  # far beyond a few ulp
    with pytest.raises(AssertionError):
        assert_softmax_ok(x, y)
    with pytest.raises(AssertionError, match="NaN pattern"):
        y[0, 0] = np.nan
        assert_softmax_ok(x, y)


def test_device_in_device_out():
    x = np.random.default_rng(1).standard_normal((4, 40)).astype(np.float32)
    y = simt_tiles.softmax(cuda.to_device(x))
    assert not isinstance(y, np.ndarray)
    assert_softmax_ok(x, y.copy_to_host())


def test_register_row_fits_the_row_or_says_why():
    from simt_tiles.runtime import ConfigError

    cfg = RegisterRowConfig(threads=512, vpt_target=16, max_vpt=64)
    assert (cfg.for_problem(9, 256).group, cfg.for_problem(9, 256).vpt) == (32, 8)
    assert (cfg.for_problem(9, 32768).group, cfg.for_problem(9, 32768).vpt) == (512, 64)
    assert (cfg.for_problem(9, 1000).group, cfg.for_problem(9, 1000).vpt) == (64, 16)
    assert cfg.for_problem(9, 16384, 8).vpt == 32
    # short rows: blocks of min_threads (128), long rows: the whole block
    assert [cfg.for_problem(9, c).threads for c in (256, 1000, 4096, 32768)] == [128, 128, 256, 512]
    with pytest.raises(ConfigError, match=r"x: rows of 32769 values of 4 bytes do not fit"):
        cfg.for_problem(1, 32769)
    with pytest.raises(ConfigError, match=r"x: rows of 16385 values of 8 bytes"):
        cfg.for_problem(1, 16385, 8)
    with pytest.raises(ConfigError, match=r"x: rows of 32769"):
        simt_tiles.softmax(np.ones((1, 32769), np.float32), variant="k04_register_row", config=cfg)
    # variant=None takes the long-row rung instead (one long row: cheap in the simulator)
    x = np.random.default_rng(3).standard_normal((1, 300)).astype(np.float32)
    small = RegisterRowConfig(threads=32, vpt_target=2, max_vpt=4)  # 32 × 4 = 128 < 300
    with pytest.raises(ConfigError):
        simt_tiles.softmax(x, variant="k04_register_row", config=small)
    assert_softmax_ok(x, simt_tiles.softmax(x, config=small))


def test_split_row_fits_the_row_or_says_why():
    from simt_tiles.kernels.softmax import _long_row_rung
    from simt_tiles.runtime import ConfigError

    cfg = SplitRowConfig()  # the default's fields: 256 threads, two blocks per SM
    split = lambda cols, itemsize=4: (lambda c: (c.reg_vpt, c.smem_vpt))(cfg.for_problem(9, cols, itemsize))  # noqa: E731
    assert split(32768) == (84, 44)  # registers first (84 + 44 overhead = 128), 44 KiB of shared memory
    assert split(16384, 8) == (36, 28)  # float64: 36 values (72 registers) + 28
    assert split(20000) == (80, 0)  # cdiv(20000, 256) = 79 → 80 per thread: registers only
    assert split(46080) == (84, 96)  # 96 KiB of shared memory: the budget
    with pytest.raises(ConfigError, match=r"x: rows of 46081 values of 4 bytes do not fit k05_split_row .*= 46080"):
        cfg.for_problem(1, 46081)
    with pytest.raises(ConfigError, match=r"x: rows of 21505 values of 8 bytes"):
        cfg.for_problem(1, 21505, 8)
    assert cfg.for_problem(9, 32768).dynamic_smem_bytes(4) == 44 * 256 * 4
    few = SplitRowConfig(threads=512).for_problem(9, 32768)  # 64 registers: 20 values, 3 chunks of shared
    assert (few.reg_vpt, few.smem_vpt) == (20, 44)
    # variant=None: k04 while the row fits its registers, then k05, then k03 (any length)
    assert _long_row_rung(None, 1, 32768, 4)[0].name == ("k05_split_row" if not SIMULATOR else "k03_online")
    sim = RUNGS["k05_split_row"].presets["sim"]  # 64 threads × (4 + 16) float32
    assert _long_row_rung("sim", 1, 1280, 4)[0].name == "k05_split_row"
    assert _long_row_rung("sim", 1, 1281, 4)[0].name == "k03_online"
    assert (sim.for_problem(1, 600).reg_vpt, sim.for_problem(1, 600).smem_vpt) == (4, 6)  # two chunks
    x = np.random.default_rng(4).standard_normal((1, 600)).astype(np.float32)  # k04 sim fits 512
    assert_softmax_ok(x, simt_tiles.softmax(x))
