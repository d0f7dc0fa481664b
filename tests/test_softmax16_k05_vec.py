"""k05's ``vec`` knob: 16-bit rows held in registers and shared memory, read and written 2, 4 or 8 values an access.

With ``vec`` > 1 a thread's values come in runs of ``vec`` consecutive columns (run r of thread t from column
``h + vec·t + r·vec·threads``; ``h``: the row's unaligned head, one value on each thread ``t < h``), each run one
4-, 8- or 16-byte load and store, the shared-memory runs too.  What must hold: the family's 16-bit bound
(tests/test_softmax16.py's :func:`bound16`) over lengths that are multiples of nothing (a partial last run, rows
of odd length whose starts alternate), rows reaching shared memory, several warps, softmax and log_softmax,
NaN-poisoned outputs; arrays whose base is not 16-byte aligned run the ``vec=1`` twin (the simulator's wide
accesses check their alignment and would raise).  The presets ``variant=None`` takes keep ``vec=1`` (unmeasured:
benchmarks/notes/patterns.md, "k05's vec knob").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

import simt_tiles
from simt_tiles.kernels.softmax import RUNGS, dispatch
from simt_tiles.kernels.softmax.k05_split_row import Config as SplitConfig
from simt_tiles.runtime import HALF_STORAGE, SIMULATOR, ConfigError

from .common import HALF, edge_sizes, spy_launched_vecs
from .profiles import PROFILE, examples
from .test_softmax16 import SPECIAL16, assert_softmax16_ok, call16, check_random_rows, from16, inputs, poisoned16, to16
from .test_softmax16_vec import _offset_view

K05 = RUNGS["k05_split_row"]
SIM_VEC = ("sim_half", "sim_half_one_per_sm")


@st.composite
def vec_configs(draw):
    """A k05 config with ``vec`` 2, 4 or 8: one to three warps, one or two runs in registers, shared memory for
    zero to four register-fulls (``max_vpt`` caps the registers, so longer rows reach shared memory)."""
    vec = draw(st.sampled_from([2, 4, 8]), "vec")
    threads = draw(st.sampled_from([32, 64, 96] if SIMULATOR else [32, 256, 512]), "threads")
    reg = vec * draw(st.sampled_from([1, 2]), "runs in registers")
    smem = 4 * threads * vec * draw(st.sampled_from([0, 1, 4]), "runs in shared memory")
    return SplitConfig(threads=threads, vpt=reg, reg_vpt=reg, max_vpt=reg, smem_budget=max(smem, 4 * threads),
                       min_blocks=1, vpt_step=1, vec=vec)


def fitted_k05(dt, rows: int, cols: int, config):
    """``config`` fitted to the rows by the plan (hypothesis rejects a draw whose rows it does not hold)."""
    assume(cols > 0)
    try:
        fitted = dispatch.plan((rows, cols, 1), HALF_STORAGE[dt], variant="k05_split_row", config=config).config
    except ConfigError:
        assume(False)
    note(f"fitted={fitted}")
    return fitted


@pytest.fixture
def launched(monkeypatch):
    """The ``vec`` of every k05 config launched."""
    return spy_launched_vecs(monkeypatch, K05)


@settings(max_examples=examples(25))
@given(dt=st.sampled_from(HALF), data=st.data())
def test_vec_k05_matches_scipy(dt, data):
    """k05 with ``vec`` 2, 4 or 8 and a random config: rows of 1, 2, 3 and 5, lengths around a run, a block's
    runs, the registers' and shared memory's columns and primes, special values and rows of −inf, softmax and
    log_softmax, NaN-poisoned ``out``."""
    config = data.draw(st.one_of(st.sampled_from([K05.presets[p] for p in SIM_VEC]), vec_configs()), "config")
    V, T = config.vec, config.threads
    reg_cols = T * config.max_vpt
    rows = data.draw(st.sampled_from([1, 2, 3, 5]), "rows")
    cols = data.draw(st.sampled_from(edge_sizes(V, T * V, reg_cols, 2 * reg_cols + V)), "cols")
    fitted_k05(dt, rows, cols, config)
    check_random_rows(data, dt, rows, cols, variant="k05_split_row", config=config)


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("preset", SIM_VEC)
@pytest.mark.parametrize("cols", [1, 3, 67, 129, 300] + ([] if PROFILE == "ci" else [2, 7, 127, 131]))
def test_vec_rows_of_any_length_take_the_wide_path(cols, preset, dt, launched):
    """Rows of odd and short length (below one run, the block's runs ± 1 = 128 ± 1, into shared memory: 300) on
    an aligned base run the ``vec`` kernel — each row's unaligned head and last partial run one value at a time —
    and are right, softmax and log_softmax."""
    rng = np.random.default_rng(cols)
    x16, x32 = inputs(rng, (3, cols), dt, 5.0)
    for log in (False, True):
        y = call16(x16, dt, log=log, out=poisoned16((3, cols), dt), variant="k05_split_row", config=preset)
        assert_softmax16_ok(x32, y, dt, log)
    assert launched == [K05.presets[preset].vec] * 2


@pytest.mark.parametrize("dt", HALF)
def test_vec_special_rows(dt):
    """scipy's special rows (3 values: head, run and tail), log_softmax's float16 overflow to −inf, and 1/12
    rounded to nearest even as the scalar path."""
    x16, x32 = to16(SPECIAL16.astype(np.float32), dt)
    assert_softmax16_ok(x32, call16(x16, dt, variant="k05_split_row", config="sim_half"), dt)
    ly = call16(x16, dt, log=True, variant="k05_split_row", config="sim_half")
    assert_softmax16_ok(x32[:-1], ly[:-1], dt, log=True)
    assert ly[-1][0] == 0.0 and (ly[-1][1] == -np.inf if dt == "float16" else np.isfinite(ly[-1][1])), ly[-1]
    cfg = dataclasses.replace(K05.presets["sim_half"], vec=4, reg_vpt=4, vpt=4)
    twelfths = call16(to16(np.full((3, 12), 7.0, np.float32), dt)[0], dt, variant="k05_split_row", config=cfg)
    np.testing.assert_array_equal(twelfths, from16(to16(np.full((3, 12), 1 / 12, np.float32), dt)[0], dt))


@pytest.mark.parametrize("x_offset, out_offset, wide", [(0, 0, True), (1, 0, False), (0, 3, False), (8, 8, True)])
def test_vec_unaligned_base_runs_the_scalar_kernel(x_offset, out_offset, wide, launched):
    """float16 arrays starting 2 or 6 bytes past a 16-byte boundary (``x`` or ``out``) run ``vec=1`` and are
    right; 16-byte aligned ones run ``vec``.  Odd rows of 201 (into shared memory at "sim_half")."""
    x16, x32 = inputs(np.random.default_rng(x_offset + out_offset), (3, 201), "float16", 4.0)
    x = _offset_view(x16, x_offset)
    out = _offset_view(np.full((3, 201), np.nan, np.float16), out_offset)
    for log in (False, True):
        f = simt_tiles.log_softmax if log else simt_tiles.softmax
        assert f(x, out=out, variant="k05_split_row", config="sim_half") is out
        assert_softmax16_ok(x32, out.copy_to_host().astype(np.float32), "float16", log)
    assert launched == [2 if wide else 1] * 2


def test_vec_rules_and_fits():
    """``vec`` is 1, 2, 4 or 8 and divides ``vpt`` and ``reg_vpt``, 1 for float32/float64 (ConfigError naming
    config); every preset but the 16-bit ones keeps ``vec=1`` and ``variant=None`` never takes those; a fit holds
    whole runs (register and shared parts multiples of ``vec``), with the ``vec=1`` twin for unaligned arrays; the
    "half" presets are their largest 16-bit fits (45056 and 90112 columns), one more column does not fit."""
    half = ("half", "half_one_per_sm", *SIM_VEC)
    assert all(c.vec == 1 for n, c in K05.presets.items() if n not in half)
    assert all(K05.presets[n].vec > 1 for n in half) and set(half) <= set(K05.gate.half_only)
    for dtype, vec, ok in ((np.float32, 2, False), (np.float64, 4, False), (np.uint16, 8, True), (np.float32, 1, True)):
        cfg = dataclasses.replace(K05.presets["sim_half"], vec=vec, vpt=8, reg_vpt=8)
        if ok:
            p = dispatch.plan((2, 100, 1), dtype, variant="k05_split_row", config=cfg)
            assert p.config.vec == vec and (p.unaligned is None) == (vec == 1)
        else:
            with pytest.raises(ConfigError, match=rf"config: vec={vec} \(16-bit values a load\)"):
                dispatch.plan((2, 100, 1), dtype, variant="k05_split_row", config=cfg)
    for fields in ({"vec": 3, "vpt": 6, "reg_vpt": 6}, {"vec": 4, "vpt": 6, "reg_vpt": 4}, {"vec": 16, "vpt": 16}):
        with pytest.raises(ConfigError, match="vec is 1, 2, 4 or 8, and divides vpt and reg_vpt"):
            SplitConfig(**{"reg_vpt": 16, **fields})
    for storage in HALF_STORAGE.values():
        for n in (45056, 50257, 90112):  # variant=None (the GPU's presets): k05's scalar ones
            for config in ("default", None):
                p = dispatch.plan((256, n, 1), storage, config=config, sms=132)
                assert p.config.vec == 1 or p.rung is not K05
            assert dispatch.plan((256, n, 1), storage, config="default", sms=132).rung is K05
        for preset, most in (("half", 45056), ("half_one_per_sm", 90112)):
            want = K05.presets[preset]
            p = dispatch.plan((8, most, 1), storage, variant="k05_split_row", config=preset)
            assert (p.config.vpt, p.config.reg_vpt) == (want.vpt, want.reg_vpt)
            assert p.unaligned.config.vec == 1 and p.unaligned.unaligned is None
            with pytest.raises(ConfigError, match="x: rows of"):
                dispatch.plan((8, most + 1, 1), storage, variant="k05_split_row", config=preset)
        for n in (1, 7, 3000, 50257, 65024):
            c = dispatch.plan((8, n, 1), storage, variant="k05_split_row", config="half_one_per_sm").config
            assert c.vpt % 8 == 0 and c.reg_vpt % 8 == 0 and c.vpt * c.threads >= n
