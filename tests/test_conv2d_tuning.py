"""conv2d joins the autotuner (``kernels/conv2d/_tuning.py``), without a GPU.

* k10's space is small, valid and the config the launcher runs, for every filter 1×1 … 7×7, mode,
  filter kind and dtype; only rungs that read the filter at run time are searched.
* A planted wrong candidate (the fastest) is checked, never timed, never chosen; a NaN row the
  check's sample would miss is still caught.
* ``variant=None`` takes the cached choice (then the shipped table, then the rule), and after a
  tune a new filter *value* compiles nothing.

Timings are faked (the simulator has none); the checks and launches are real.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
import scipy.ndimage as ndi
from numba import cuda  # module level: the simulator swaps this global inside kernels

from simt_tiles import autotune, cli, runtime
from simt_tiles.kernels import conv2d
from simt_tiles.kernels.conv2d import (
    RUNGS,
    _tuning,
    correlate2d,
    default_choice,
    default_rung,
)
from simt_tiles.kernels.conv2d import dispatch
from simt_tiles.kernels.conv2d import k10_runtime_weights as k10
from simt_tiles.kernels.conv2d._args import mode_of
from simt_tiles.kernels.conv2d._common import MODES, Mode
from simt_tiles.kernels.conv2d.reference import correlate2d_reference
from simt_tiles.runtime import fits

K10 = RUNGS["k10_runtime_weights"]
# the autotune tests' fixture (autouse: a fresh cache, an H200 as this machine, no shipped table)
from .test_autotune import H200, isolated  # noqa: E402, F401
PROBLEM = (7, 9, 3, 3, "reflect", "float32", "host")
# two small, correct configs (the simulator runs every thread in Python): tiles 6 × 4 and 2 × 6
SIM_A = dataclasses.replace(k10.PRESETS["sim"], min_blocks=1)
SIM_B = dataclasses.replace(SIM_A, block_x=3, rx=2, ry=1)




@pytest.fixture
def small_space(monkeypatch):
    """k10 tuned over SIM_A and SIM_B (in that order)."""
    monkeypatch.setitem(_tuning.TUNABLE.spaces, K10.name, (dataclasses.asdict(SIM_A), dataclasses.asdict(SIM_B)))


def tune(problem=PROBLEM, times=None, **kw):
    it = iter(itertools.count(1) if times is None else times)
    return autotune.tune("conv2d", problem, timer=lambda fn, warmup, reps, before: [next(it)] * reps,
                         sync=lambda: None, **kw)


def as_gpu(monkeypatch):
    """``autotune.choose`` answers as on a GPU (undo with :func:`memoised` before launching)."""
    monkeypatch.setattr(runtime, "SIMULATOR", False)
    autotune._MEMO.clear()


def memoised(monkeypatch, problem=PROBLEM):
    """Ask as on a GPU once (``choose`` memoises the answer), then back to the simulator for the
    launches (``runtime.jit`` reads SIMULATOR to leave out the launch bounds)."""
    choice = default_choice(*problem, None)
    monkeypatch.setattr(runtime, "SIMULATOR", True)
    return choice


# --- the space ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_space_is_valid_for_every_filter_mode_and_filter_kind(dtype):
    itemsize = np.dtype(dtype).itemsize
    for kh, kw, mode, weights in itertools.product(range(1, 8), range(1, 8), MODES, ("host", "device")):
        p = {"h": 8192, "w": 8192, "kh": kh, "kw": kw, "mode": mode, "weights": weights}
        source = _tuning.source_of(weights)
        cands = _tuning.TUNABLE.candidates(K10.name, p, dtype)
        where = f"{kh}x{kw} {mode} {weights} {dtype}"
        assert 1 <= len(cands) <= 10 and len(set(cands)) == len(cands), where
        first = k10.for_source(dataclasses.replace(K10.presets["default"], kh=kh, kw=kw, mode=mode_of(mode)),
                               source)
        assert (cands[0].tile(), cands[0].block()) == (first.tile(), first.block()), where  # the default first
        for c in cands:
            assert isinstance(c, k10.Config) and fits(c, dtype) is None, where
            assert (c.kh, c.kw, c.mode, c.source) == (kh, kw, mode_of(mode), source), where
            assert k10.for_source(c, source) == c, where  # what the launcher runs, unchanged
            blocks = k10.jit_options(c, dtype)["launch_bounds"][1]
            assert _tuning.registers(c, source, itemsize) <= min(255, 65536 // (c.threads * blocks)), where
            if itemsize == 4:
                assert blocks == c.min_blocks, where


def test_only_rungs_that_read_the_filter_at_run_time_are_searched():
    names = _tuning.variants("float32")
    assert names == ("k10_runtime_weights",) == _tuning.variants("float64")
    assert not any(RUNGS[n].bind.compiles_filter for n in names)
    assert RUNGS["k08_prefetched"].bind.compiles_filter and "k08_prefetched" not in names


def test_the_register_estimate_prunes_and_caps(monkeypatch):
    p = {"h": 64, "w": 64, "kh": 7, "kw": 7, "mode": "reflect", "weights": "device"}
    spec = dataclasses.replace(K10.presets["default"], kh=7, kw=7, mode=Mode.REFLECT)
    assert _tuning.registers(spec, k10.STAGED) == k10.registers(spec, k10.STAGED)  # the default tile: k10's rule
    big = dataclasses.replace(spec, ry=8)
    assert _tuning.registers(big, k10.STAGED) == k10.registers(spec, k10.STAGED) + 8  # 8 more accumulators
    assert all(c.min_blocks <= 65536 // (c.threads * _tuning.registers(c, k10.STAGED))
               for c in _tuning.TUNABLE.candidates(K10.name, p, "float32"))
    # 4 threads of 18 × 8 outputs: 152 words of accumulators and window, over 255 registers in float64
    greedy = {"default": dataclasses.replace(K10.presets["default"], block_x=4, block_y=1, rx=8, ry=18)}
    small = {**p, "kh": 3, "kw": 3}
    monkeypatch.setattr(_tuning, "TILES", ({},))  # that tile only
    assert list(_tuning.register_tile_space(greedy, small, "float64")) == []
    assert len({repr(c) for c in _tuning.register_tile_space(greedy, small, "float32")}) == 1  # 164: fits


def test_problems_parse_or_name_the_argument(capsys):
    t = autotune.tunable("conv2d")
    assert t.parse("8192x8192", {"filter": "7x7", "mode": "reflect"}) == (8192, 8192, 7, 7, "reflect", "float32",
                                                                         "host")
    assert t.parse("5x6", {"dtype": "float64", "weights": "device"}) == (5, 6, 3, 3, "reflect", "float64", "device")
    assert autotune.bucket(t.parse("8000x8192", {"filter": "7x7"})) == "8192x8192x7x7xreflectxfloat32xhost"
    for shape, opts, name in [("8192", {}, "--shape"), ("4x4", {"filter": "3"}, "--filter"),
                              ("4x4", {"mode": "clamp"}, "mode"), ("4x4", {"weights": "gpu"}, "weights")]:
        with pytest.raises(ValueError, match=name):
            t.parse(shape, opts)
    if runtime.SIMULATOR:  # parsed, then refused: the simulator has no timings (a GPU would tune)
        assert cli.main(["tune", "conv2d", "--shape", "64x64", "--filter", "7x7", "--mode", "wrap"]) == 2
        assert "GPU" in capsys.readouterr().err


# --- the check ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_rows_reference_is_the_reference_on_those_rows(mode):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    w[1, 1] = 2.0**-53  # skipped, as scipy skips it
    ref, bound = correlate2d_reference(x, w, mode)
    rows = np.array([0, 2, 5])
    got_ref, got_bound = _tuning.rows_reference(x, w, mode, rows)
    np.testing.assert_array_equal(got_ref, ref[rows])
    np.testing.assert_array_equal(got_bound, bound[rows])


def test_the_sample_covers_edges_and_every_tile_row():
    rows = _tuning.sample_rows(8192, 8192, 7, 7)
    assert len(rows) < 110 and {0, 7, 8184, 8191} <= set(rows.tolist())
    big = {"h": 8192, "w": 8192, "kh": 7, "kw": 7, "mode": "reflect", "weights": "host"}
    for th in {c.tile()[0] for c in _tuning.TUNABLE.candidates(K10.name, big, "float32")}:
        assert set((rows % th).tolist()) == set(range(th))  # every row position of every tile height
    assert len(_tuning.sample_rows(40, 30, 3, 3)) == 40  # small: every row


def test_a_nan_row_outside_the_sample_fails_the_check(monkeypatch):
    monkeypatch.setattr(_tuning, "FULL_CHECK", 0)
    monkeypatch.setattr(_tuning, "ROW_STRIDE", 1000)
    case = _tuning.Case({"h": 40, "w": 6, "kh": 3, "kw": 3, "mode": "wrap", "dtype": "float32", "weights": "host"})
    assert 20 not in case.rows
    full, _ = _tuning.rows_reference(case.x, case.wts, "wrap", np.arange(40))
    good = full.astype(np.float32)
    case.out.copy_to_device(good)
    assert case.check().passed
    bad = good.copy()
    bad[20, 3] = np.nan
    case.out.copy_to_device(bad)
    assert not case.check().passed
    bad = good.copy()
    bad[3, 4] *= 1 + 1e-3  # a sampled row, wrong far above γ_9
    case.out.copy_to_device(bad)
    assert not case.check().passed


# --- tuning and the default --------------------------------------------------------------------


def test_a_planted_wrong_candidate_is_excluded(small_space, monkeypatch):
    """SIM_B computes a wrong output — and is the fastest."""
    launcher = _tuning.Case.launcher

    def planted(self, rung, config):
        fn = launcher(self, rung, config)
        if config != SIM_B:
            return fn

        def wrong():
            fn()
            self.out[3, 4] = self.out[3, 4] * (1 + 1e-4)  # relative error far above γ_9

        return wrong

    monkeypatch.setattr(_tuning.Case, "launcher", planted)
    res = tune(times=[2.0, 1.0])
    assert res.choice == ("k10_runtime_weights", SIM_A)
    bad = [r for r in res.rows if not r["passed"]]
    assert len(bad) == 1 and "median_ms" not in bad[0] and bad[0]["status"] == "FAIL"  # checked, never timed
    assert autotune.lookup("conv2d", PROBLEM)[:2] == res.choice


def _launched(monkeypatch):
    """The (rung, config) each call's plan starts from (before the filter is compiled in)."""
    seen = []
    real = dispatch.default_choice

    def spy(*args, **kw):
        rung, cfg = real(*args, **kw)
        seen.append((rung.name, cfg))
        return rung, cfg

    monkeypatch.setattr(dispatch, "default_choice", spy)
    return seen


def test_the_default_takes_the_cached_choice_then_the_shipped_one_then_the_rule(monkeypatch):
    x = np.random.default_rng(2).standard_normal(PROBLEM[:2]).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((3, 3)).astype(np.float32)
    rule = default_rung(3, 3)
    assert default_choice(*PROBLEM, None) == (rule, rule.resolve_config(None))  # simulator: no lookup
    as_gpu(monkeypatch)
    assert default_choice(*PROBLEM, None)[1] == rule.resolve_config(None)  # nothing cached or shipped
    autotune.SHIPPED_DIR.mkdir(parents=True)
    key = autotune._short_key("conv2d", None, "float32", autotune.bucket(PROBLEM))
    (autotune.SHIPPED_DIR / "h200.json").write_text(json.dumps({
        "format": autotune.SHIPPED_FORMAT, "gpu": "NVIDIA H200", "compute_capability": "9.0", "rules": {},
        "entries": {key: {"choice": {"variant": K10.name, "config": dataclasses.asdict(SIM_B)}}}}))
    autotune._forget()
    assert default_choice(*PROBLEM, None) == (K10, SIM_B)
    autotune.store("conv2d", PROBLEM, None, (K10.name, SIM_A), median_ms=1.0)  # forgets what it memoised
    assert default_choice(*PROBLEM, None) == (K10, SIM_A)
    assert default_choice(*PROBLEM, "sim")[1] == K10.presets["sim"]  # a preset asked for: no lookup
    assert default_choice(*PROBLEM[:-1], "device", None)[1] == K10.presets["default"]  # another problem
    assert memoised(monkeypatch) == (K10, SIM_A)
    seen = _launched(monkeypatch)
    got = correlate2d(x, w, mode="reflect")
    assert seen == [(K10.name, SIM_A)]
    np.testing.assert_allclose(got, ndi.correlate(x.astype(np.float64), w.astype(np.float64), mode="reflect"),
                               rtol=1e-5, atol=1e-5)


def test_after_tuning_a_new_filter_value_compiles_nothing(small_space, monkeypatch):
    res = tune(times=[1.0, 2.0])
    assert res.choice == ("k10_runtime_weights", SIM_A)
    as_gpu(monkeypatch)
    assert memoised(monkeypatch) == (K10, SIM_A)
    seen = _launched(monkeypatch)
    before = runtime._compiled.cache_info().misses
    rng = np.random.default_rng(4)
    # a NumPy image keeps the NumPy filter on the host ("host", the tuned problem; with a device image
    # it would take its cached device copy: the "device" problem, simt_tiles/device_copies.py)
    x = rng.standard_normal(PROBLEM[:2]).astype(np.float32)
    for _ in range(2):
        w = rng.standard_normal((3, 3)).astype(np.float32)
        got = correlate2d(x, w, mode="reflect")
        np.testing.assert_allclose(got, ndi.correlate(x.astype(np.float64), w.astype(np.float64),
                                                      mode="reflect"), rtol=1e-5, atol=1e-5)
    assert runtime._compiled.cache_info().misses == before, "a new filter value compiled a kernel"
    assert [c for _, c in seen] == [SIM_A, SIM_A]  # the tuned config, whose kernel the tune built
