"""Softmax and log_softmax against scipy.special: every rung, ragged shapes, special values, both
dtypes, any axis of N-D inputs, and the dispatch rules at shapes no benchmark measured."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.special
from hypothesis import assume, given, note
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
from simt_tiles.kernels.softmax import RUNGS, SOFTMAX_VARIANTS, dispatch
from simt_tiles.kernels.softmax._common import RowConfig, WarpRowConfig
from simt_tiles.kernels.softmax.k04_register_row import Config as RegisterRowConfig
from simt_tiles.kernels.softmax.k05_split_row import Config as SplitRowConfig
from simt_tiles.kernels.softmax.k06_split_blocks import Config as SplitBlocksConfig
from simt_tiles.kernels.softmax.k07_strided_axis import Config as StridedConfig
from simt_tiles._numba_fixes import blocks_can_run_at_once
from simt_tiles.kernels.softmax.k06_split_blocks import Hints
from simt_tiles.kernels.softmax.k08_ticket_queue import Config as TicketConfig
from simt_tiles.kernels.softmax.k09_register_pieces import Config as PiecesConfig
from simt_tiles.kernels.softmax.reference import log_softmax_reference, softmax_reference
from simt_tiles.runtime import SIMULATOR, cdiv

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
        "k06_split_blocks": st.builds(SplitBlocksConfig, threads=st.sampled_from([32, 64]), loads=st.sampled_from([1, 2, 3])),
        "k07_strided_axis": st.builds(StridedConfig, threads=st.sampled_from([32, 64]), loads=st.sampled_from([1, 2])),
        # lag_kib 1: a row of the simulator's sizes trails by one or a few rows, 64: every P item first
        "k08_ticket_queue": st.builds(TicketConfig, threads=st.sampled_from([32, 64]), loads=st.sampled_from([1, 2, 3]),
                                      piece_steps=st.sampled_from([1, 2]), lag_kib=st.sampled_from([1, 64]),
                                      hints=st.sampled_from([1, 3, 5, 9, 15])),
        # 1-3 values a thread (float64 takes two registers): rows of the simulator's sizes in 1-8 pieces,
        # whose blocks run at once
        "k09_register_pieces": st.builds(PiecesConfig, threads=st.sampled_from([32, 64]), vpt=st.just(1),
                                         max_vpt=st.sampled_from([2, 4, 6]), vpt_step=st.just(1)),
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
    CONFIGS["k06_split_blocks"] = st.builds(SplitBlocksConfig, threads=st.sampled_from([32, 256, 1024]),
                                            loads=st.sampled_from([1, 4, 8]))
    CONFIGS["k07_strided_axis"] = st.builds(StridedConfig, threads=st.sampled_from([32, 256]), loads=st.sampled_from([1, 4]))
    CONFIGS["k08_ticket_queue"] = st.builds(TicketConfig, threads=st.sampled_from([32, 256, 512]),
                                            loads=st.sampled_from([1, 4, 8]), piece_steps=st.sampled_from([1, 4]),
                                            lag_kib=st.sampled_from([1, 16384]), hints=st.sampled_from([1, 3, 5, 9, 15]))
    CONFIGS["k09_register_pieces"] = st.builds(PiecesConfig, threads=st.sampled_from([128, 256, 512]), vpt=st.just(1),
                                               max_vpt=st.sampled_from([2, 8, 32]), vpt_step=st.sampled_from([1, 4]))


def assert_softmax_ok(x, y, log=False):
    """``y`` is (log_)softmax of ``x`` along the last axis: NaN and ±inf exactly where scipy has
    them, the rest within the arithmetic's bound (reference.py)."""
    ref, bound = (log_softmax_reference if log else softmax_reference)(x)
    assert_like_scipy_softmax(x, y, ref, bound, log)


def assert_like_scipy_softmax(x, y, ref, bound, log):
    """NaN and ±inf of ``y`` exactly where scipy's (log_)softmax of ``x`` (last axis) has them; elsewhere
    ``|y − ref| <= bound`` (the 16-bit tests pass their own bound)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        expect = (scipy.special.log_softmax if log else scipy.special.softmax)(x.astype(np.float64), axis=-1)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expect), err_msg="NaN pattern differs from scipy")
    inf = np.isinf(expect)
    np.testing.assert_array_equal(y[inf], expect[inf], err_msg="±inf differ from scipy")
    with np.errstate(invalid="ignore"):
        ok = np.isnan(y) | inf | (np.abs(y.astype(ref.dtype) - ref) <= bound)
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
    log = variant in dispatch.LOG_VARIANTS and data.draw(st.booleans(), "log_softmax")
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    out = poisoned((rows, cols), dtype)
    if variant == "k09_register_pieces" and SIMULATOR and not blocks_can_run_at_once():
        pytest.skip("k09's blocks wait for one another: a race check's recorder runs them one at a time")
    regs = min(config.max_vpt, 65536 // config.threads - 32) if variant == "k04_register_row" else 0
    if variant == "k04_register_row" and cols > config.threads * (regs * 4 // np.dtype(dtype).itemsize):
        # a row past the registers (GPU sizes such as 1031 on 32 threads of float64): refused, naming x, untouched out
        with pytest.raises(simt_tiles.ConfigError, match=rf"^x: rows of {cols} values of "):
            f(x, out=out, variant=variant, config=config)
        assert np.isnan(out.copy_to_host()).all()
        return
    assert f(x, out=out, variant=variant, config=config) is out
    y = out.copy_to_host()
    note(f"x={x!r}\ny={y!r}")
    assert_softmax_ok(x, y, log)


_BIG = float(np.finfo(np.float32).max)
SPECIAL = np.array([[1.0, 2.0, np.nan], [1.0, np.inf, 2.0], [-np.inf] * 3, [0.0, -np.inf, 0.0], [np.inf, -np.inf, 1.0],
                    [np.nan, np.inf, 1.0], [np.nan] * 3, [np.nan, -np.inf, 1.0], [_BIG, np.inf, -1.0], [_BIG, 0.0, 1.0]])


@pytest.mark.parametrize("variant", SOFTMAX_VARIANTS)
def test_scipy_special_cases(variant):
    if variant == "k09_register_pieces" and SIMULATOR and not blocks_can_run_at_once():
        pytest.skip("k09's blocks wait for one another: a race check's recorder runs them one at a time")
    x = SPECIAL.astype(np.float32)
    assert_softmax_ok(x, simt_tiles.softmax(x, variant=variant))
    np.testing.assert_allclose(simt_tiles.softmax(x, variant=variant)[3], [0.5, 0.0, 0.5], rtol=0, atol=0)
    if variant in dispatch.LOG_VARIANTS:  # +inf rows: −inf and NaN; −inf rows NaN (scipy's shift by 0)
        assert_softmax_ok(x, simt_tiles.log_softmax(x, variant=variant), log=True)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@given(data=st.data())
def test_any_axis_of_n_d_inputs_matches_scipy(log, data):
    """The default (dispatch) along every axis form: ints, negative ints, adjacent tuples, None."""
    shape = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3, 5, 33]), min_size=1, max_size=3), "shape"))
    nd = len(shape)
    forms = [None, *range(-nd, nd)] + [(a, a + 1) for a in range(nd - 1)]
    axis = data.draw(st.sampled_from(forms), "axis")
    dtype = data.draw(st.sampled_from(DTYPES), "dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    if data.draw(st.booleans(), "special"):
        x.flat[rng.integers(x.size)] = rng.choice([np.nan, np.inf, -np.inf])
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    y = f(x, axis=axis)
    assert y.shape == x.shape and y.dtype == x.dtype
    # the same softmax as rows: the axes moved last and merged
    axes = tuple(range(nd)) if axis is None else tuple(a % nd for a in (axis if isinstance(axis, tuple) else (axis,)))
    rest = [a for a in range(nd) if a not in axes]
    rows = lambda a: np.transpose(a, rest + list(axes)).reshape(-1, int(np.prod([shape[i] for i in axes])))  # noqa: E731
    assert_softmax_ok(rows(x), rows(y), log)


def test_any_axis_on_the_device_and_out():
    x = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32)
    out = poisoned(x.shape, np.float32)
    assert simt_tiles.log_softmax(cuda.to_device(x), axis=1, out=out) is out
    np.testing.assert_allclose(out.copy_to_host(), scipy.special.log_softmax(x, axis=1), rtol=0, atol=2e-6)


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_empty(shape):
    y = simt_tiles.softmax(np.ones(shape, np.float32))
    assert y.shape == shape


def test_bad_input():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"axis: 2 is out of bounds for an array of 2 dimensions"):
        simt_tiles.softmax(x, axis=2)
    with pytest.raises(TypeError, match=r"axis: expected None, an int or a tuple of ints; got 1.0"):
        simt_tiles.softmax(x, axis=1.0)
    with pytest.raises(ValueError, match=r"axis: expected one axis or a tuple of adjacent, distinct axes"):
        simt_tiles.softmax(np.ones((2, 2, 2), np.float32), axis=(0, 2))
    with pytest.raises(ValueError, match=r"x: expected an array of at least 1 dimension; got 0-D"):
        simt_tiles.softmax(np.array(1, np.float32))
    with pytest.raises(TypeError, match=r"x: expected dtype float32, float64, float16 or bfloat16; got int64"):
        simt_tiles.softmax(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match=r"variant: expected one of \('k01_smem_tree'"):
        simt_tiles.softmax(x, variant="nope")
    with pytest.raises(ValueError, match=r"variant: log_softmax runs on"):
        simt_tiles.log_softmax(x, variant="k01_smem_tree")
    with pytest.raises(ValueError, match=r"variant: 'k04_register_row' takes the last axis only"):
        simt_tiles.softmax(x, axis=0, variant="k04_register_row")
    with pytest.raises(simt_tiles.ConfigError, match=r"threads % 32 == 0"):
        WarpRowConfig(16)
    with pytest.raises(simt_tiles.ConfigError, match=r"power of two"):
        RowConfig(12)


def test_check_catches_a_wrong_softmax():
    x = np.random.default_rng(0).standard_normal((3, 9)).astype(np.float32)
    y = scipy.special.softmax(x.astype(np.float64), axis=-1).astype(np.float32)
    assert_softmax_ok(x, y)
    assert_softmax_ok(x, scipy.special.log_softmax(x.astype(np.float64), axis=-1).astype(np.float32), log=True)
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
    assert (cfg.for_problem(9, 127).group, cfg.for_problem(9, 127).vpt) == (8, 16)  # four rows to a warp
    assert (cfg.for_problem(9, 32).group, cfg.for_problem(9, 32).vpt) == (4, 8)  # eight
    assert (dataclasses.replace(cfg, min_group=32).for_problem(9, 32).vpt) == 1
    assert (cfg.for_problem(9, 32768).group, cfg.for_problem(9, 32768).vpt) == (512, 64)
    assert (cfg.for_problem(9, 1000).group, cfg.for_problem(9, 1000).vpt) == (64, 16)
    assert cfg.for_problem(9, 16384, 8).vpt == 32
    # short rows: blocks of min_threads (128), long rows: the whole block
    assert [cfg.for_problem(9, c).threads for c in (32, 256, 1000, 4096, 32768)] == [128, 128, 128, 256, 512]
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
    sim = RUNGS["k05_split_row"].presets["sim"]  # 64 threads × (4 + 16) float32
    assert (sim.for_problem(1, 600).reg_vpt, sim.for_problem(1, 600).smem_vpt) == (4, 6)  # two chunks
    x = np.random.default_rng(4).standard_normal((1, 600)).astype(np.float32)  # k04 sim fits 512
    assert_softmax_ok(x, simt_tiles.softmax(x))


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's presets (on the GPU: the RULES below)")
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_rows_past_two_blocks_per_sm_take_k05_one_per_sm(log):
    """Rows the two-blocks-per-SM k05 does not hold (here 2000 > the sim preset's 64 × 20) run k05's
    one-block-per-SM twin (64 × (8 + 32) values): chosen by variant=None, right, NaN-poisoned output; and
    when a twin config object is given."""
    rows, n = 4, 2000  # (4 rows fill the simulator's 2 SMs)
    p = dispatch.plan((rows, n, 1), np.float32, log=log)
    assert (p.rung.name, p.config.min_blocks, p.config.smem_vpt > 0) == ("k05_split_row", 1, True), p
    twin = RUNGS["k05_split_row"].presets["sim_one_per_sm"]
    assert twin.threads * (twin.max_vpt + 4 * twin.max_vpt) >= n > 64 * 20
    assert dispatch.plan((rows, n, 1), np.float32, log=log, config=twin).config.min_blocks == 1
    x = np.random.default_rng(11).standard_normal((rows, n)).astype(np.float32) * 8
    for kw in ({}, {"config": twin}):
        out = cuda.to_device(np.full((rows, n), np.nan, np.float32))
        (simt_tiles.log_softmax if log else simt_tiles.softmax)(x, out=out, **kw)
        assert_softmax_ok(x, out.copy_to_host(), log=log)


def _chosen(rows, n, inner=1, dtype=np.float32, log=False, sms=132):
    """(rung, pieces, k05's blocks per SM or None) with the default presets on ``sms`` SMs."""
    p = dispatch.plan((rows, n, inner), dtype, log=log, config="default", sms=sms)
    return p.rung.name, p.pieces, (p.config.min_blocks if p.rung.name == "k05_split_row" else None)


K04, ONE, TWO = ("k04_register_row", 1, None), ("k05_split_row", 1, 1), ("k05_split_row", 1, 2)


def k08_steps(rows, cols, most=2, step=4096, sms=132):
    """k08's block steps a piece: ``most`` (the preset's piece_steps), fewer (to one) while the rows' pieces
    are under 8 a SM — as few fewer as reach 8 a SM."""
    if rows * cdiv(cols, most * step) >= 8 * sms:
        return most
    return max(1, min(most, cdiv(cdiv(cols, cdiv(8 * sms, rows)), step)))


def K08(cols, rows=1024):  # the default preset: steps of 256 × 16 = 4096 values
    return "k08_ticket_queue", cdiv(cols, 4096 * k08_steps(rows, cols)), None


#: (rows, columns) → (rung, pieces, blocks per SM) with the H200's 132 SMs and the default presets: the
#: measured problems (benchmarks/notes/patterns_zoo.md, softmax_few_rows_probe) and shapes between them
RULES = {
    (16384, 32): K04, (16384, 256): K04, (1000, 3000): K04, (200, 16384): K04, (1, 100): K04, (64, 16384): K04,
    (16384, 32768): TWO, (4096, 32000): TWO, (100, 20000): TWO, (264, 20000): TWO,  # many rows, or under 128 KiB
    (133, 32767): TWO, (133, 32768): ONE, (792, 32768): ONE, (793, 32768): TWO, (1056, 46080): TWO,  # ≤ 6 rows a SM
    (300, 46080): ONE, (1, 32768): ONE, (131, 40000): ONE,  # one per SM, not two; not split
    (32, 32000): ONE, (132, 24576): ONE, (133, 24576): TWO, (1, 24575): TWO, (1, 20000): TWO,  # ≤ 1 a SM from 96 KiB
    (4096, 50257): ONE, (4096, 94208): ONE, (133, 46081): ONE, (200, 50257): ONE, (400, 50257): ONE,
    (500, 50257): ONE, (528, 50257): ONE, (34, 77824): ONE, (33, 73728): ONE, (50, 90112): ONE,
    (33, 77824): K08(77824, 33), (1, 73729): K08(73729, 1), (24, 90112): K08(90112, 24),  # few, long: split
    (1, 94208): K08(94208, 1), (4096, 94209): K08(94209), (4096, 151936): K08(151936),  # or no block holds it
    (2, 4194304): K08(2**22, 2), (1, 2**22): K08(2**22, 1), (7, 100000): K08(100000, 7), (64, 128256): K08(128256, 64),
}


@pytest.mark.parametrize("shape", list(RULES), ids=str)
def test_dispatch_rules_between_measured_points(shape):
    assert _chosen(*shape) == RULES[shape]


def test_k08_pieces_at_the_measured_points():
    """k08's pieces as measured (softmax_ticket_probe_s34c_h100): one step (4096 values) a piece for few rows,
    two (8192) from 64 rows of 128256; the rule between them is k08_steps."""
    assert [_chosen(r, n)[1] for r, n in ((1, 73729), (1, 94208), (7, 100000), (33, 77824))] == [19, 23, 25, 19]
    assert [_chosen(r, n)[1] for r, n in ((64, 128256), (1024, 128256), (4096, 94209))] == [16, 16, 12]


def test_k05_and_split_edges_follow_the_sm_count():
    """The edges are in rows a SM: 6 rows a SM for one block per SM over two, 4·rows ≤ SMs for the split (here
    on 114 and 2 SMs, where no shape was measured); float64 rows by their bytes (16384 values are 128 KiB)."""
    for sms in (114, 2):
        assert _chosen(6 * sms, 32768, sms=sms) == ONE and _chosen(6 * sms + 1, 32768, sms=sms) == TWO
        if sms // 4:
            assert _chosen(sms // 4, 80000, sms=sms)[0] == "k08_ticket_queue"
        assert _chosen(sms // 4 + 1, 80000, sms=sms) == ONE
        assert _chosen(sms, 24576, sms=sms) == ONE and _chosen(sms + 1, 24576, sms=sms) == TWO
    assert _chosen(200, 16384, dtype=np.float64) == ONE and _chosen(200, 16383, dtype=np.float64)[2] != 1
    assert _chosen(1, 36865, dtype=np.float64)[0] == "k08_ticket_queue" and _chosen(1, 36865, dtype=np.float32) == ONE


def test_log_softmax_takes_the_rungs_softmax_takes():
    """log_softmax follows softmax's rules (k05's log_softmax, once 0.6× k06's, now runs at softmax's speed)."""
    for shape in (*RULES, (4096, 46080), (16384, 32768)):
        assert _chosen(*shape, log=True) == _chosen(*shape), shape


def test_dispatch_plans_are_valid_everywhere():
    """Every plan of the rules over a sweep of shapes: a config that fits, pieces that cover the row."""
    for rows in (1, 2, 5, 131, 132, 1000, 2**20):
        for n in (1, 31, 32, 33, 255, 4097, 16383, 16385, 46080, 46081, 100003, 2**22 + 1):
            for dtype in DTYPES:
                p = dispatch.plan((rows, n, 1), dtype, config="default", sms=132)
                assert p.rung.name in SOFTMAX_VARIANTS
                assert p.rung.name != "k06_split_blocks"  # k08 splits rows now
                if p.rung.name == "k08_ticket_queue":  # pieces that cover the row, none empty; 2 items each
                    step = k08_steps(rows, n, p.config.piece_steps, p.config.step()) * p.config.step()
                    assert (p.pieces - 1) * step < n <= p.pieces * step and p.launches[0].grid == (2 * p.pieces * rows,)
                    assert 1 <= p.lag and (p.lag == 1 or p.lag * n * np.dtype(dtype).itemsize <= p.config.lag_kib * 1024)
    assert _chosen(4, 5, inner=7) == ("k07_strided_axis", 1, None)


def test_inner_axis_lines_fill_the_sms_down_to_a_sector():
    """k07's lines per warp W (for_problem): the power of two ≤ inner and 32, halved while the warps would
    not give each of the H200's 132 SMs ``warps_per_sm``, never below a 32-byte sector of lines a load.
    256 × 1024 × 64 (axis 1) had 512 warps on 132 SMs at W = 32; 64 × 1000 × 3136 keeps 32."""
    def lines(outer, n, inner, dtype=np.float32):
        return dispatch.plan((outer, n, inner), dtype, config="default", sms=132).config.lines

    assert lines(256, 1024, 64) == 8 and lines(256, 1024, 64, np.float64) == 4
    assert lines(1, 4096, 4096) == 8 and lines(64, 1000, 3136) == 32 and lines(8, 128, 4) == 4
    for outer in (1, 3, 64, 1000):
        for inner in (2, 7, 8, 9, 33, 64, 100, 4097):
            for dtype in DTYPES:
                cfg = dispatch.plan((outer, 17, inner), dtype, config="default", sms=132).config
                w, isz, top = cfg.lines, np.dtype(dtype).itemsize, min(32, 1 << (inner.bit_length() - 1))
                assert w & (w - 1) == 0 and w <= top
                assert w == top or (w * isz >= 32 and -(-outer * inner // w) < 2 * cfg.warps_per_sm * 132)
                if w * isz > 32:  # halving stopped: enough warps
                    assert w == top or -(-outer * inner // w) >= cfg.warps_per_sm * 132


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("inner", [33, 100])
def test_inner_axis_at_the_widest_line_groups(log, inner):
    """k07 with 32 and 16 lines a warp, lines crossing an ``outer`` boundary within a warp (the simulator's
    small shapes otherwise always drop to a 32-byte sector: ``warps_per_sm`` is set so the rule stops at W)."""
    rng = np.random.default_rng(inner)
    sms = dispatch.sm_count()
    outer = max(3, cdiv(32 * sms, inner))  # lines enough for W = 32 at one warp a SM (3 in the simulator, 128 / 43 on 132)
    x = (rng.standard_normal((outer, 5, inner)) * 3).astype(np.float32)
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    lines = outer * inner
    for threads, want in ((32, 32), (64, 32), (32, 16)):
        # W = 32 while cdiv(lines, 32) ≥ wps·sms; W = 16 with the fewest warps a SM past that (≤ cdiv(lines, 16))
        wps = 1 if want == 32 else -(-lines // 32) // sms + 1
        cfg = StridedConfig(threads=threads, loads=2, warps_per_sm=wps)
        assert dispatch.plan((outer, 5, inner), np.float32, variant="k07_strided_axis", config=cfg).config.lines == want
        assert_softmax_ok(np.moveaxis(x, 1, -1), np.moveaxis(f(x, axis=1, config=cfg), 1, -1), log)


@pytest.mark.parametrize("S, rows", [(1, 1), (1, 4), (3, 1), (3, 5), (4, 7)])
def test_k08_tickets_name_every_item_once_and_writes_after_their_pairs(S, rows):
    """The queue of k08's docstring, for every lag: each (row, piece) is one P and one W ticket, and a row's W
    tickets come after all its P tickets (so a W waits only for blocks that started before it); with lag D the
    first W (row 0's) follows row D's P items."""
    from simt_tiles.kernels.softmax.k08_ticket_queue import ticket_item

    for D in range(1, rows + 1):
        items = [ticket_item(t, S, rows, D) for t in range(2 * S * rows)]
        assert sorted(items) == sorted((r, p, w) for r in range(rows) for p in range(S) for w in (False, True))
        last_p = {r: max(t for t, (rr, _, w) in enumerate(items) if rr == r and not w) for r in range(rows)}
        first_w = {r: min(t for t, (rr, _, w) in enumerate(items) if rr == r and w) for r in range(rows)}
        assert all(last_p[r] < first_w[r] for r in range(rows))
        assert min(first_w.values()) == S * min(D + 1, rows)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_k08_counters_are_zeroed_before_every_launch(log):
    """k08's kept ticket workspace holds whatever the last call (or anything else) left: garbage counters
    (here planted) are zeroed by the launch before k08's, so repeated calls, other shapes and replays stay right."""
    from simt_tiles.kernels.reduce.dispatch import workspace

    rng = np.random.default_rng(8)
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    for rows, n in ((3, 100), (3, 100), (2, 257), (3, 100)):
        tickets = workspace((rows + 1,), np.int32, 0, tag="softmax tickets")
        tickets.copy_to_device(rng.integers(0, 1000, rows + 1).astype(np.int32))  # what a fault could leave
        x = (rng.standard_normal((rows, n)) * 5).astype(np.float32)
        out = poisoned((rows, n), np.float32)
        f(x, out=out, variant="k08_ticket_queue")
        assert_softmax_ok(x, out.copy_to_host(), log)
        # every ticket taken once, every row's S pieces counted once
        S = dispatch.plan((rows, n, 1), np.float32, variant="k08_ticket_queue").pieces
        assert tickets.copy_to_host().tolist() == [S] * rows + [2 * S * rows]


def test_k08_rows_of_minus_inf_pieces_and_specials_across_pieces():
    """Pieces of a row that are all −inf (their pair is the empty one), +inf and NaN in one piece only: the
    fold of the S pairs gives scipy's row (pieces of 32 values: 10 a row, on the GPU too)."""
    x = np.random.default_rng(9).standard_normal((4, 300)).astype(np.float32)
    x[0, :200] = -np.inf  # three whole pieces of −inf, then finite values
    x[1, 250] = np.inf
    x[2, 10] = np.nan
    x[3, :] = -np.inf
    for hints in (Hints.PLAIN, Hints.PLAIN | Hints.KEEP | Hints.LAST | Hints.STREAM):  # hints change no value
        cfg = TicketConfig(threads=32, loads=1, piece_steps=1, lag_kib=1, hints=hints)
        assert dispatch.plan(x.shape + (1,), np.float32, variant="k08_ticket_queue", config=cfg).pieces == 10
        # (the hinted loads once: log_softmax differs from softmax only in the last pass, not in the loads)
        for f, log in ((simt_tiles.softmax, False), (simt_tiles.log_softmax, True))[:2 if hints == Hints.PLAIN else 1]:
            assert_softmax_ok(x, f(x, variant="k08_ticket_queue", config=cfg), log)


def test_k08_plan_replays_zero_the_counters_too(plans):
    """A repeated k08 call replays its plan (on a GPU, every call after the first): the zeroing launch is part
    of it, so the replays take fresh tickets and new arrays of the same shape get new results."""
    rng = np.random.default_rng(12)
    for _ in range(3):
        x = (rng.standard_normal((3, 100)) * 4).astype(np.float32)
        out = poisoned((3, 100), np.float32)
        simt_tiles.softmax(cuda.to_device(x), out=out, variant="k08_ticket_queue")
        assert_softmax_ok(x, out.copy_to_host())
    assert plans.stats()["hit"] == 2


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's blocks run at once here; on a GPU they do anyway")
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_k08_blocks_running_at_once_wait_for_their_rows(log):
    """k08 with every block of the launch running at once (``_numba_fixes.concurrent_blocks``): tickets go
    in whatever order the blocks start, so W items do wait for their rows' P items (one at a time, as the
    simulator otherwise runs them, no block ever waits, and a wrong wait condition would pass)."""
    from simt_tiles import _numba_fixes

    if not _numba_fixes.blocks_can_run_at_once():  # a race check's recorder (pytest --racecheck) drives blocks
        pytest.skip("the simulator's block driver is not simt_tiles'")
    cfg = TicketConfig(threads=32, loads=1, piece_steps=1, lag_kib=1)  # pieces of 32: 4 a row, 16 blocks
    rng = np.random.default_rng(13)
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    with _numba_fixes.concurrent_blocks():  # (a wait on 1 pair instead of S: caught in 5 of 6 runs of 3 calls)
        for _ in range(4):
            x = (rng.standard_normal((2, 100)) * 6).astype(np.float32)
            out = poisoned((2, 100), np.float32)
            f(x, out=out, variant="k08_ticket_queue", config=cfg)
            assert_softmax_ok(x, out.copy_to_host(), log)


def _k09_or_skip():
    if SIMULATOR and not blocks_can_run_at_once():
        pytest.skip("k09's blocks wait for one another: a race check's recorder runs them one at a time")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_k09_pieces_exchange_pairs_across_specials(log):
    """k09 in several pieces a row (in the simulator 5 of 32 values; on a GPU the fill rule makes 5 of 32 too):
    pieces all −inf (the empty pair), +inf and NaN in one piece only, a row of −inf, repeated calls on new
    values (the counters zeroed each time, no stale pair right by chance): scipy's row from the S pairs."""
    _k09_or_skip()
    rng = np.random.default_rng(21)
    cfg = PiecesConfig(threads=32, vpt=1, max_vpt=1, vpt_step=1)
    pl = dispatch.plan((4, 150, 1), np.float32, variant="k09_register_pieces", config=cfg)
    assert pl.pieces >= 5 and (not SIMULATOR or (pl.pieces, pl.config.vpt, pl.launches[0].grid) == (5, 1, (20,)))
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    for _ in range(2):
        x = rng.standard_normal((4, 150)).astype(np.float32) * 5
        x[0, :96] = -np.inf  # three whole pieces of −inf (of 32), then finite values
        x[1, 140] = np.inf
        x[2, 10] = np.nan
        x[3, :] = -np.inf
        out = poisoned(x.shape, np.float32)
        f(x, out=out, variant="k09_register_pieces", config=cfg)
        assert_softmax_ok(x, out.copy_to_host(), log)


def test_k09_pieces_must_fit_the_gpu_at_once():
    """A row's pieces wait for one another, so they must be resident together: no more pieces than SMs (named
    ``x``): at most half the blocks resident at once (two float32 a SM, one float64); the default preset's pieces of
    14336 float32 (4096 float64)."""
    cfg = PiecesConfig(threads=32, vpt=1, max_vpt=2, vpt_step=1)
    assert dispatch.plan((1, 256, 1), np.float32, variant="k09_register_pieces", config=cfg, sms=4).pieces == 4
    with pytest.raises(simt_tiles.ConfigError, match=r"^x: rows of 257 values take 5 pieces"):
        dispatch.plan((1, 257, 1), np.float32, variant="k09_register_pieces", config=cfg, sms=4)
    with pytest.raises(simt_tiles.ConfigError, match=r"^config: max_vpt=1 registers hold no 8-byte value"):
        PiecesConfig(threads=32, vpt=1, max_vpt=1, vpt_step=1).for_problem(1, 10, 8)
    default = RUNGS["k09_register_pieces"].presets["default"]
    for n, itemsize, pieces, vpt in ((128256, 4, 9, 28), (151936, 4, 11, 28), (50257, 4, 4, 28), (128256, 8, 32, 8)):
        cfg = default.for_problem(1024, n, itemsize, 132)
        assert (cfg.pieces(n), cfg.vpt) == (pieces, vpt), n
        assert cfg.threads * cfg.vpt * (pieces - 1) < n <= cfg.threads * cfg.vpt * pieces  # no empty piece
    # few rows: smaller pieces until the launch has K09_FILL_PER_SM blocks a SM (8 × 151936: 25 pieces of 6144,
    # not 11 of 14336; 1 × 94208: 46 of 2048), never more pieces than SMs
    for rows, n, pieces in ((8, 151936, 25), (1, 94208, 46), (64, 128256, 9), (1, 1_000_000, 123)):
        assert dispatch.plan((rows, n, 1), np.float32, variant="k09_register_pieces", config="default",
                             sms=132).pieces == pieces, n
    # float64 one block a SM: at most 66 pieces of 4096 on 132 SMs (and the fill stops there too)
    assert dispatch.plan((1, 66 * 4096, 1), np.float64, variant="k09_register_pieces", config="default",
                         sms=132).pieces == 66
    with pytest.raises(simt_tiles.ConfigError, match=r"^x: rows of 274433 values take 68 pieces .* half of the 132"):
        dispatch.plan((1, 67 * 4096 + 1, 1), np.float64, variant="k09_register_pieces", config="default", sms=132)


@pytest.mark.skipif(SIMULATOR, reason="GPU sizes: rows of 9-123 pieces of the default preset")
@pytest.mark.parametrize("rows, n, dtype", [(1024, 128256, np.float32), (8, 151936, np.float32),
                                            (3, 1_000_000, np.float32), (2, 200_000, np.float64)])
def test_k09_default_preset_at_vocabulary_sizes(rows, n, dtype):
    """The default preset where pieces are many (S up to the bound) and blocks wait for real, both dtypes."""
    x = (np.random.default_rng(24).standard_normal((rows, n)) * 8).astype(dtype)
    x[0, 7] = np.inf if rows > 2 else x[0, 7]
    for f, log in ((simt_tiles.softmax, False), (simt_tiles.log_softmax, True)):
        out = poisoned(x.shape, dtype)
        f(x, out=out, variant="k09_register_pieces")
        assert_softmax_ok(x, out.copy_to_host(), log)


def test_k09_refuses_a_simulator_that_runs_blocks_one_at_a_time(monkeypatch):
    """Under a race check's recorder the simulator runs blocks one after another: k09's first block of a row in
    3 pieces would spin for ever, so the launch is refused (named) and ``out`` is left alone.  A row of one
    piece waits for nobody: it runs (so the race check covers k09's shared memory, tests/test_analyze.py)."""
    monkeypatch.setattr(dispatch, "blocks_can_run_at_once", lambda: False)
    monkeypatch.setattr(dispatch, "SIMULATOR", True)
    cfg = PiecesConfig(threads=32, vpt=1, max_vpt=4, vpt_step=1)
    one = np.random.default_rng(23).standard_normal((2, 100)).astype(np.float32)
    assert dispatch.plan(one.shape + (1,), np.float32, variant="k09_register_pieces", config=cfg).pieces == 1
    assert_softmax_ok(one, simt_tiles.softmax(one, variant="k09_register_pieces", config=cfg))
    x = np.ones((2, 300), np.float32)
    out = poisoned(x.shape, np.float32)
    with pytest.raises(simt_tiles.ConfigError, match="k09_register_pieces: its blocks wait for one another"):
        simt_tiles.softmax(x, out=out, variant="k09_register_pieces", config=cfg)
    assert np.isnan(out.copy_to_host()).all()


def test_k09_plan_replays_run_its_blocks_at_once(plans):
    """A replayed k09 plan (the simulator's SimLaunch) still runs the marked kernel's blocks at once and zeroes
    the counters first."""
    _k09_or_skip()
    rng = np.random.default_rng(22)
    cfg = PiecesConfig(threads=32, vpt=1, max_vpt=2, vpt_step=1)
    for _ in range(3):
        x = (rng.standard_normal((3, 200)) * 4).astype(np.float32)
        out = poisoned((3, 200), np.float32)
        simt_tiles.softmax(cuda.to_device(x), out=out, variant="k09_register_pieces", config=cfg)
        assert_softmax_ok(x, out.copy_to_host())
    assert plans.stats()["hit"] == 2
