"""Softmax and log_softmax of float16 and bfloat16 inputs: read 16-bit, computed in float32, each output
rounded once to the input's dtype (to nearest even) — torch's rule.

The bound (:func:`bound16`): the kernels run the float32 arithmetic on the float32 values of the inputs
(exactly representable), so the float32 output ``y32`` is within the family's float32 bound ``b32`` of the
long-double reference (reference.py: ``softmax_reference`` / ``log_softmax_reference`` of the inputs as
float32).  The store rounds ``y32`` to 16 bits: ``|y16 − y32| ≤ u16·|y32| + η16`` with u16 the unit roundoff
(2⁻¹¹ float16, 2⁻⁸ bfloat16) and η16 half the smallest subnormal (outputs that underflow: 2⁻²⁵ float16,
2⁻¹³⁴ bfloat16).  So ``|y16 − ref| ≤ b32 + u16·(|ref| + b32) + η16``.  NaN and ±inf exactly where scipy has
them (the float32 path's special rows, computed on the float64 values); outputs past the 16-bit range
(a float16 log_softmax below −65520) are −inf, as torch's.

bfloat16 in the simulator: NumPy has no bfloat16 without ml_dtypes (not installed here) and torch CPU
tensors are not CUDA arrays, so the tests pass the uint16 bits in an ndarray subclass that the function's
dtype recognition (:func:`simt_tiles.interop.dtype_name`) reports as "bfloat16" (as tests/test_mma.py
does for matmul_mma); float16 is NumPy's and Numba's own.
"""

from __future__ import annotations

import functools
import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
import simt_tiles.kernels.softmax as softmax_mod
from simt_tiles import analyze
from simt_tiles._numba_fixes import blocks_can_run_at_once
from simt_tiles.kernels.softmax import RUNGS, dispatch
from simt_tiles.kernels.softmax.k06_split_blocks import Hints
from simt_tiles.kernels.softmax.reference import log_softmax_reference, softmax_reference
from simt_tiles.mma import bf16_bits, bits_to_f32
from simt_tiles.runtime import HALF_STORAGE, SIMULATOR

from .common import ETA16, HALF, U16, Bf16, configs, edge_sizes
from .common import bf16_names as bf16_names_of
from .profiles import PROFILE, examples
from .test_softmax import CONFIGS, RULES, assert_like_scipy_softmax

bf16_names = functools.partial(bf16_names_of, softmax_mod)  # Bf16 arrays read as bfloat16 (tests/common.py)


def to16(x32, dt: str):
    """``(stored, exact float32 values)``: float32 values rounded to ``dt`` (to nearest even)."""
    if dt == "float16":
        h = np.asarray(x32, np.float32).astype(np.float16)
        return h, h.astype(np.float32)
    bits = bf16_bits(x32)
    return bits, bits_to_f32(bits, "bf16")


def from16(y, dt: str):
    """The float32 values of a result stored as ``dt`` (bfloat16: its bits)."""
    y = np.asarray(y)
    return y.astype(np.float32) if dt == "float16" else bits_to_f32(y.view(np.uint16), "bf16")


def call16(x16, dt: str, *, log=False, out=None, **kw):
    """softmax/log_softmax of 16-bit ``x16`` (bfloat16: its bits); the result's float32 values."""
    f = simt_tiles.log_softmax if log else simt_tiles.softmax
    if dt == "float16":
        res = f(x16, out=out, **kw)
        if out is not None:
            assert res is out
            res = out.copy_to_host() if hasattr(out, "copy_to_host") else out
        return from16(res, dt)
    with bf16_names():
        res = f(np.ascontiguousarray(x16).view(Bf16), out=None if out is None else out.view(Bf16), **kw)
    return from16(np.asarray(res).view(np.uint16), dt)


def bound16(x32, dt: str, log: bool):
    """``(ref, bound)`` of a 16-bit result: the float32 bound plus the final rounding (module docstring)."""
    ref, b32 = (log_softmax_reference if log else softmax_reference)(np.asarray(x32, np.float32))
    with np.errstate(invalid="ignore"):
        return ref, b32 + U16[dt] * (np.abs(ref) + b32) + ETA16[dt]


def assert_softmax16_ok(x32, y, dt: str, log=False, axis=-1):
    """``y`` (float32 values of a 16-bit result) is (log_)softmax of ``x32`` along ``axis``: NaN and ±inf
    where scipy has them, the rest within :func:`bound16`."""
    x32, y = np.moveaxis(np.asarray(x32), axis, -1), np.moveaxis(np.asarray(y), axis, -1)
    ref, bound = bound16(x32, dt, log)
    assert_like_scipy_softmax(x32, y, ref, bound, log)


def poisoned16(shape, dt: str):
    """A device array of NaN in ``dt`` (float16: Numba's float16; bfloat16: NaN bits, for :func:`call16`'s view)."""
    if dt == "float16":
        return cuda.to_device(np.full(shape, np.nan, np.float16))
    return np.full(shape, 0x7FC0, np.uint16)  # (NumPy: the bits; a Numba uint16 array is no user form)


def inputs(rng, shape, dt, scale=3.0, specials=(), minus_inf_row=None):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    for v in specials:
        x[tuple(rng.integers(s) for s in shape)] = v
    if minus_inf_row is not None:
        x[minus_inf_row] = -np.inf
    return to16(x, dt)


def random_rows(data, dt: str, rows: int, cols: int):
    """``(x16, x32, log)``: random rows (scale, special values, a row of −inf drawn from ``data``) and softmax or
    log_softmax (drawn)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    scale = data.draw(st.sampled_from([1.0, 30.0, 300.0]), "scale")
    specials = data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=2), "specials")
    row = int(rng.integers(rows)) if data.draw(st.booleans(), "a row of -inf") else None
    x16, x32 = inputs(rng, (rows, cols), dt, scale, specials, row)
    return x16, x32, data.draw(st.booleans(), "log_softmax")


def check_random_rows(data, dt: str, rows: int, cols: int, **kw) -> None:
    """A property test's call: :func:`random_rows` into a NaN-poisoned ``out``, ``kw`` (variant, config) passed
    on, checked within the bound."""
    x16, x32, log = random_rows(data, dt, rows, cols)
    y = call16(x16, dt, log=log, out=poisoned16((rows, cols), dt), **kw)
    note(f"x32={x32!r}\ny={y!r}")
    assert_softmax16_ok(x32, y, dt, log)


# ---------------------------------------------------------------------------
# every rung that takes 16-bit, random configs and shapes (hypothesis)
# ---------------------------------------------------------------------------


@settings(max_examples=examples(30))
@given(variant=st.sampled_from(dispatch.HALF_VARIANTS), dt=st.sampled_from(HALF), data=st.data())
def test_every_16bit_rung_matches_scipy(variant, dt, data):
    """Each rung that takes 16-bit, a random launch config (several warps among them), ragged rows (1, tile ± 1,
    primes), special values and rows of −inf; NaN-poisoned ``out`` (float16) or a fresh result (bfloat16)."""
    if variant == "k09_register_pieces" and not blocks_can_run_at_once():
        pytest.skip("k09's blocks wait for one another: a race check's recorder runs them one at a time")
    config = data.draw(configs(RUNGS[variant], CONFIGS[variant]), "config")
    if variant == "k08_ticket_queue":
        config = dataclasses.replace(config, hints=Hints.PLAIN)  # (16-bit: no L2 hints, tested below)
    inner = data.draw(st.sampled_from([2, 3, 5]), "inner") if variant == "k07_strided_axis" else 1
    rows = data.draw(st.sampled_from([1, 2, 3]), "rows")
    cols = data.draw(st.sampled_from(edge_sizes(config.threads)), "cols")
    assume(cols > 0)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    shape = (rows, cols, inner) if inner > 1 else (rows, cols)
    scale = data.draw(st.sampled_from([1.0, 30.0, 300.0]), "scale")
    specials = data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=2), "specials")
    row = int(rng.integers(rows)) if data.draw(st.booleans(), "a row of -inf") else None
    x16, x32 = inputs(rng, shape, dt, scale, specials, row)
    log = data.draw(st.booleans(), "log_softmax")
    axis = 1 if inner > 1 else -1
    out = poisoned16(shape, dt)
    try:
        y = call16(x16, dt, log=log, out=out, axis=axis, variant=variant, config=config)
    except simt_tiles.ConfigError as exc:  # k04: a row past this config's registers (as the float32 test)
        assert variant == "k04_register_row" and str(exc).startswith(f"x: rows of {cols} values of 2 bytes"), exc
        return
    note(f"x32={x32!r}\ny={y!r}")
    assert_softmax16_ok(x32, y, dt, log, axis)


# ---------------------------------------------------------------------------
# the default path: every rung variant=None chooses, named and not
# ---------------------------------------------------------------------------

#: (shape, axis) → the rung variant=None chooses in the simulator (its presets: k04 holds 512 values, k05 two
#: blocks a SM 1280, one a SM 2560)
DEFAULT_CASES = {((3, 77), -1): "k04_register_row", ((2, 600), -1): "k05_split_row",
                 ((2, 2000), -1): "k05_split_row", ((1, 2561), -1): "k08_ticket_queue",
                 ((2, 7, 5), 1): "k07_strided_axis"}


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("shape, axis", list(DEFAULT_CASES), ids=lambda v: str(v))
def test_default_path_and_its_rung_named(shape, axis, dt):
    """``softmax(x)`` chooses the float32 rung for each shape, and is right; so is log_softmax with the rung
    named (NaN-poisoned float16 ``out``); a NaN, an inf and a row of −inf planted where rows are left finite."""
    storage = HALF_STORAGE[dt]
    shape3 = softmax_mod.view3(shape, axis)
    # the simulator's presets give these rungs; a GPU's are its own (k04 holds thousands of values): there the
    # 16-bit row goes where a float32 row of as many values goes
    want = DEFAULT_CASES[(shape, axis)] if SIMULATOR else dispatch.plan(shape3, np.float32).rung.name
    plan = dispatch.plan(shape3, storage)
    assert plan.rung.name == want == dispatch.plan(shape3, np.float32).rung.name
    rng = np.random.default_rng(sum(shape))
    x32 = (rng.standard_normal(shape) * 4).astype(np.float32)
    if shape[0] > 1:  # a NaN and an inf in row 0 (a line of it for k07), the last row finite
        x32[(0,) * len(shape)], x32[(0, 1) + (0,) * (len(shape) - 2)] = np.nan, np.inf
    if shape[0] > 2:
        x32[1] = -np.inf
    x16, x32 = to16(x32, dt)
    assert_softmax16_ok(x32, call16(x16, dt, axis=axis), dt, False, axis)
    y = call16(x16, dt, log=True, out=poisoned16(shape, dt), axis=axis, variant=want, config=plan.config)
    assert_softmax16_ok(x32, y, dt, True, axis)


@pytest.mark.parametrize("dt", HALF)
def test_results_keep_the_kind_and_dtype(dt):
    """NumPy float16 in, NumPy float16 out; a Numba float16 device array in, one out (not its bits); the bits of
    a bfloat16 result come back in the caller's array type."""
    x16, x32 = inputs(np.random.default_rng(1), (3, 40), dt)
    if dt == "float16":
        y = simt_tiles.softmax(x16)
        assert isinstance(y, np.ndarray) and y.dtype == np.float16
        d = simt_tiles.softmax(cuda.to_device(x16))
        assert not isinstance(d, np.ndarray) and d.dtype == np.float16
        np.testing.assert_array_equal(d.copy_to_host(), y)
    else:
        with bf16_names():
            y = simt_tiles.softmax(x16.view(Bf16))
        assert isinstance(y, np.ndarray) and y.dtype == np.uint16
    assert_softmax16_ok(x32, from16(y, dt), dt)


SPECIAL16 = np.array([[1.0, 2.0, np.nan], [1.0, np.inf, 2.0], [-np.inf] * 3, [0.0, -np.inf, 0.0], [np.inf, -np.inf, 1.0],
                      [np.nan, np.inf, 1.0], [np.nan] * 3, [np.nan, -np.inf, 1.0], [60000.0, -60000.0, 0.0]])


#: k09's blocks all at once cost the simulator ~10 s here: its special rows run in the full profile (the property
#: test draws k09 in every profile)
NOT_IN_CI = pytest.mark.skipif(PROFILE == "ci", reason="ci profile: the full and gpu profiles run it")


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("variant", [pytest.param(v, marks=NOT_IN_CI if v == "k09_register_pieces" else ())
                                     for v in dispatch.HALF_VARIANTS])
def test_special_rows_as_float32_and_torch(variant, dt):
    """scipy's special rows: NaN and ±inf exactly where scipy (and so the float32 path) has them; a float16
    log_softmax below −65520 is −inf (torch's overflow), the same row in bfloat16 finite.  And a row of equal
    values: 1/3 rounded to nearest."""
    if variant == "k09_register_pieces" and not blocks_can_run_at_once():
        pytest.skip("k09's blocks wait for one another: a race check's recorder runs them one at a time")
    x16, x32 = to16(SPECIAL16.astype(np.float32), dt)
    assert_softmax16_ok(x32, call16(x16, dt, variant=variant), dt)
    if variant in dispatch.LOG_VARIANTS:
        ly = call16(x16, dt, log=True, variant=variant)
        assert_softmax16_ok(x32[:-1], ly[:-1], dt, log=True)
        last = ly[-1]  # (0, −120000, −60000): float16's −inf, bfloat16's finite
        assert last[0] == 0.0 and (last[1] == -np.inf if dt == "float16" else np.isfinite(last[1])), last
    thirds = call16(to16(np.full((1, 3), 7.0, np.float32), dt)[0], dt, variant=variant)
    np.testing.assert_array_equal(thirds, from16(to16(np.full((1, 3), 1 / 3, np.float32), dt)[0], dt))


def test_store_rounds_to_nearest_even():
    """The store rounds once, to nearest even: softmax of (0, log 3) in bfloat16 is (0.25, 0.75) exactly and
    of two equal values 0.5; outputs just past a halfway point (a float32 1/3 → bfloat16 0x3EAB, truncation
    would give 0x3EAA)."""
    x16, _ = to16(np.zeros((1, 3), np.float32), "bfloat16")
    y = call16(x16, "bfloat16")
    np.testing.assert_array_equal(bf16_bits(y), [[0x3EAB] * 3])  # 1/3 = 0x3EAAAAAB → 0x3EAB, not 0x3EAA
    h, _ = to16(np.zeros((1, 3), np.float32), "float16")
    np.testing.assert_array_equal(call16(h, "float16").astype(np.float16), np.float16(1 / 3) * np.ones((1, 3)))


# ---------------------------------------------------------------------------
# the dispatch rule for 2-byte elements
# ---------------------------------------------------------------------------


def _choice(p):
    """What a plan chose: the rung, the pieces, k05's blocks per SM."""
    return p.rung.name, p.pieces, (p.config.min_blocks if p.rung.name == "k05_split_row" else None)


#: k05 leaves 16-bit rows two registers of its values (``half_reg_overhead``: the conversions): its two-blocks-a-SM
#: preset holds 256 × (82 + 96) = 45568 of them (float32 46080), one a SM 512 × (82 + 100) = 93184 (94208)
K05_TWO16, K05_ONE16 = 45568, 93184


def _k05_band(n):
    return K05_TWO16 < n <= 46080 or K05_ONE16 < n <= 94208


@pytest.mark.parametrize("shape", list(RULES), ids=str)
def test_16bit_rows_take_float32s_plan(shape):
    """The rungs hold 16-bit values as float32, so each row (and each row between the measured points) goes
    where a float32 row of as many values goes — the same rung, pieces, blocks per SM — but for k05's two
    registers (rows in :func:`_k05_band`: the next preset, or the split); k08's lag (rows of L2 bytes) counts
    2-byte values."""
    rows, n = shape
    p32 = dispatch.plan((rows, n, 1), np.float32, config="default", sms=132)
    for storage in HALF_STORAGE.values():
        p16 = dispatch.plan((rows, n, 1), storage, config="default", sms=132)
        if not _k05_band(n):
            assert _choice(p16) == _choice(p32)
        if p16.rung.name == "k08_ticket_queue":
            assert p16.lag == p16.config.lag_rows(n, 2)  # (float32: lag_rows(n, 4), half as many rows)
        if p16.rung.name == "k05_split_row":
            assert p16.config.reg_vpt <= 82 and p16.config.threads * p16.config.vpt >= n


@pytest.mark.parametrize("n", [16384, 16385, 32767, 32768, K05_TWO16, K05_TWO16 + 1, 46080, 46081, 73728, 73729,
                               K05_ONE16, K05_ONE16 + 1, 94208, 94209])
@pytest.mark.parametrize("rows", [1, 33, 133, 793])
def test_16bit_thresholds_between_measured_points(rows, n):
    """At the register, shared-memory and split edges (float32 values held): the 16-bit plan is float32's; a
    rule in stored bytes would send (1, 32768) to k04 (twice the registers) and (133, 32768) to two per SM.
    In k05's bands the 16-bit row takes what a float32 row one preset longer takes: two a SM → one a SM,
    one a SM → split (k08)."""
    p32 = dispatch.plan((rows, n, 1), np.float32, config="default", sms=132)
    p16 = dispatch.plan((rows, n, 1), HALF_STORAGE["bfloat16"], config="default", sms=132)
    if not _k05_band(n):
        assert _choice(p16) == _choice(p32)
    elif n <= 46080:  # two a SM does not hold it: one a SM (float32: two a SM unless few rows)
        assert _choice(p16) == ("k05_split_row", 1, 1), _choice(p32)
    else:  # one a SM does not hold it: split, as float32 rows past 94208
        assert p16.rung.name == "k08_ticket_queue", _choice(p32)


@pytest.mark.parametrize("inner, outer, want32, want16", [(32, 1, 8, 16), (32, 10000, 32, 32), (4, 3, 4, 4)])
def test_inner_axis_sector_counts_stored_bytes(inner, outer, want32, want16):
    """k07's lines a warp halve down to a 32-byte sector of the loads: 8 float32 lines, 16 of 16-bit."""
    for dt, want in ((np.float32, want32), (HALF_STORAGE["float16"], want16)):
        assert dispatch.plan((outer, 100, inner), dt, config="default", sms=132).config.lines == want


# ---------------------------------------------------------------------------
# errors, the race check
# ---------------------------------------------------------------------------


def test_bad_16bit_input():
    h = np.ones((2, 3), np.float16)
    with pytest.raises(TypeError, match=r"out: expected dtype float16 \(the dtype of x\); got float32"):
        simt_tiles.softmax(h, out=np.empty((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"out: expected dtype float16 \(the dtype of x\); got float32"):
        simt_tiles.log_softmax(cuda.to_device(h), out=cuda.device_array((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"out: expected dtype float32; got float16"):
        simt_tiles.softmax(h.astype(np.float32), out=np.empty((2, 3), np.float16))
    with pytest.raises(ValueError, match=r"out: expected shape \(2, 3\); got \(3, 2\)"):
        simt_tiles.softmax(h, out=np.empty((3, 2), np.float16))
    with pytest.raises(ValueError, match=r"x: expected an array of at least 1 dimension; got 0-D"):
        simt_tiles.softmax(np.float16(1.0) * np.ones((), np.float16))
    with pytest.raises(TypeError, match=r"x: expected dtype float32, float64, float16 or bfloat16; got int64"):
        simt_tiles.softmax(np.ones((2, 2), np.int64))
    for v in ("k01_smem_tree", "k02_warp_shuffle", "k03_online"):
        with pytest.raises(TypeError, match=rf"variant: '{v}' takes float32 or float64; got float16"):
            simt_tiles.softmax(h, variant=v)
    with bf16_names(), pytest.raises(TypeError, match=r"variant: 'k01_smem_tree' takes float32 or float64; got bfloat16"):
        simt_tiles.softmax(h.view(np.uint16).view(Bf16), variant="k01_smem_tree")
    with pytest.raises(TypeError, match=r"variant: 'k02_warp_shuffle' takes float32 or float64; got float16"):
        simt_tiles.softmax(h, config=RUNGS["k02_warp_shuffle"].presets["sim"])  # a lesson's config names it
    hinted = dataclasses.replace(RUNGS["k08_ticket_queue"].presets["sim"], hints=Hints.PLAIN | Hints.KEEP)
    with pytest.raises(simt_tiles.ConfigError, match=r"config: hints=3 \(L2 eviction hints\) take float32 or float64"):
        simt_tiles.softmax(h, variant="k08_ticket_queue", config=hinted)
    with pytest.raises(ValueError, match=r"out: overlaps x"):
        d = cuda.to_device(h)
        simt_tiles.softmax(d, out=d)


def test_empty_16bit():
    for shape in ((0, 3), (3, 0), (0,)):
        y = simt_tiles.softmax(np.ones(shape, np.float16))
        assert y.shape == shape and y.dtype == np.float16


@pytest.mark.sim  # simt_tiles.analyze runs in the simulator
@pytest.mark.parametrize("variant, shape, dt", [("k05_split_row", (2, 600), "bfloat16"),
                                                ("k04_register_row", (3, 77), "float16"),
                                                ("k08_ticket_queue", (2, 300), "bfloat16")])
def test_16bit_rungs_pass_the_race_check(variant, shape, dt):
    """The shared memory of the 16-bit kernels (float32 partials, k05's float32 row values, k08's pairs) under
    the race check: no two accesses of one barrier interval conflict."""
    x16, x32 = inputs(np.random.default_rng(5), shape, dt)
    with analyze.racecheck():
        y = call16(x16, dt, variant=variant)
    assert_softmax16_ok(x32, y, dt)
