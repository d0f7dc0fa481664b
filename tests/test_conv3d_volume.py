"""``correlate``/``convolve`` (issue 33, item 5): scipy.ndimage's n-D filters on 1-D, 2-D and 3-D
images — 3-D volumes on the k12 rung (a ring of staged halo planes) and its global-memory fallback.

Checked against ``scipy.ndimage.correlate``/``convolve`` themselves and against the long-double
n-D reference (``correlate_nd_reference``: the kernels' index mapping on every axis), within its
γ_K bound (K = the filter's taps, +1 in mode "constant"): every mode, per-axis origins, even sizes,
filters larger than the volume, size-1 and empty axes, integer images and scipy's output rule,
NaN spreading along the non-zero taps only, NaN-poisoned ``out=`` (an unwritten output fails),
random small configs (several warps per block direction in the full profile), the race check on
the staged ring, CUDA's grid limits, the fallback and the argument errors.  Tiny shapes: the
simulator runs ~40 µs per thread-operation.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given, note
from hypothesis import strategies as hs
from numba import cuda

import simt_tiles as st
from simt_tiles import analyze
from simt_tiles.kernels.conv2d import _args, dispatch, k12_volume
from simt_tiles.kernels.conv2d.reference import correlate_nd_reference
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import assert_like_scipy, grid_limit, poisoned
from .profiles import PROFILE

MODES = ("reflect", "constant", "nearest", "mirror", "wrap")
FUNCTIONS = {"correlate": (st.correlate, ndi.correlate), "convolve": (st.convolve, ndi.convolve)}
full_only = pytest.mark.skipif(PROFILE == "ci", reason="ci profile: the full and gpu profiles run it")
simulator_only = pytest.mark.skipif(not SIMULATOR, reason="simt_tiles.analyze needs Numba's CUDA simulator")


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def check(got, x, w, fn="correlate", mode="reflect", cval=0.0, origin=0, what="", scipy=True):
    """Within the reference's bound; NaN/inf where scipy has them; and the reference is scipy's."""
    got = _host(got)
    ref, bound = correlate_nd_reference(x, w, mode, cval, convolve=fn == "convolve", origin=origin)
    assert got.shape == x.shape, what
    if scipy:  # (not where scipy's n-D "reflect" misreads: coordinates 4n or more before an axis, see conv2d)
        expect = FUNCTIONS[fn][1](x.astype(np.float64), w.astype(np.float64), mode=mode, cval=cval, origin=origin)
        assert_like_scipy(got.astype(np.float64), expect, ref, bound, what)
    else:
        assert np.all(np.abs(got - ref) <= bound), f"{what}: outside the reference's bound"


def rand(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------
# scipy's semantics, case by case
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_origins_and_even_sizes(fn, mode):
    """A ragged volume, an even-sided filter, a per-axis origin at both ends of its range."""
    rng = np.random.default_rng(1)
    x, w = rand(rng, (4, 5, 3)), rand(rng, (2, 3, 4))
    for origin in (0, (-1, 1, -2), (0, -1, 1)):
        out = poisoned(x.shape, x.dtype)
        got = FUNCTIONS[fn][0](x, w, mode=mode, cval=0.75, origin=origin, out=out)
        assert got is out
        check(got, x, w, fn, mode, 0.75, origin, f"{fn} {mode} origin {origin}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_filters_larger_than_the_volume_and_size_one_axes(fn, dtype):
    """Size-1 axes (mirror's n = 1 rule) and a filter wider than every axis, in every mode."""
    rng = np.random.default_rng(2)
    for shape, wshape in (((1, 3, 1), (3, 2, 3)), ((2, 1, 3), (4, 3, 5))):
        x, w = rand(rng, shape, dtype), rand(rng, wshape, dtype)
        for mode in MODES:
            got = FUNCTIONS[fn][0](x, w, mode=mode, cval=-0.5)
            assert got.dtype == dtype
            check(got, x, w, fn, mode, -0.5, 0, f"{fn} {shape} * {wshape} {mode}")


def test_scipy_conventions_for_convolve_on_size_one_axes():
    """scipy itself, not our reading of it: convolve's flip and even-size shift with mirrored origins,
    and mode "mirror" on a 1-long axis (the value repeated), on 1-D, 2-D and 3-D images."""
    rng = np.random.default_rng(3)
    for shape, wshape, origin in (((5,), (4,), -2), ((5,), (4,), 1), ((1, 4), (2, 3), (-1, 1)),
                                  ((1, 1, 4), (2, 2, 3), (0, -1, 1)), ((3, 1, 2), (3, 4, 2), (1, -2, -1))):
        x, w = rand(rng, shape), rand(rng, wshape)
        for mode in ("mirror", "reflect", "wrap"):
            for name, (ours, theirs) in FUNCTIONS.items():
                got = ours(x, w, mode=mode, origin=origin)
                np.testing.assert_allclose(got, theirs(x, w, mode=mode, origin=origin), rtol=1e-13, atol=1e-13,
                                           err_msg=f"{name} {shape} * {wshape} {mode} origin {origin}")


def test_empty_volumes():
    for shape in ((0, 3, 4), (2, 0, 4), (2, 3, 0)):
        x = np.zeros(shape)
        for fn, ref in FUNCTIONS.values():
            got = fn(x, np.ones((2, 2, 3)))
            assert got.shape == shape and got.dtype == x.dtype
            out = np.empty(shape, np.float32)
            assert fn(x, np.ones((1, 1, 1)), out=out) is out


def test_integer_images_and_scipy_output_rule():
    """uint8 and int32 volumes, integer filters: scipy's result exactly, in its output dtype (the
    image's, or ``output=``), values wrapped as scipy's C cast."""
    rng = np.random.default_rng(4)
    x8 = rng.integers(0, 256, (3, 4, 5)).astype(np.uint8)
    w = rng.integers(-3, 4, (3, 2, 3)).astype(np.int16)
    for mode in MODES:
        for output in (None, np.int16, np.float64):
            got = st.correlate(x8, w, mode=mode, cval=7, output=output)
            np.testing.assert_array_equal(got, ndi.correlate(x8, w, mode=mode, cval=7, output=output))
    x32 = rng.integers(-2**20, 2**20, (2, 3, 4)).astype(np.int32)
    np.testing.assert_array_equal(st.convolve(x32, w, mode="wrap"), ndi.convolve(x32, w, mode="wrap"))
    out = np.empty(x32.shape, np.float32)  # an output array of the float dtype: computed in float64 (int32's range)
    np.testing.assert_array_equal(st.correlate(x32, w, output=out), ndi.correlate(x32, w, output=np.float32))


@pytest.mark.parametrize("variant", dispatch.VOLUME_VARIANTS)
def test_nan_spreads_along_the_nonzero_taps_only(variant):
    """A 3-D Laplacian (zeros off its cross): a NaN and an inf reach only the taps scipy counts."""
    lap = np.zeros((3, 3, 3))
    lap[1, 1, :] = lap[1, :, 1] = lap[:, 1, 1] = 1
    lap[1, 1, 1] = -6
    lap[0, 0, 0] = 2.0**-53  # |w| <= 2**-52: skipped as scipy skips it
    x = np.random.default_rng(5).standard_normal((4, 5, 6))
    x[1, 2, 3], x[3, 0, 5] = np.nan, np.inf
    for fn in FUNCTIONS:
        for mode in ("constant", "reflect"):
            got = FUNCTIONS[fn][0](x, lap, mode=mode, variant=variant)
            check(got, x, lap, fn, mode, what=f"{fn} {mode} {variant}")


def test_one_and_two_dimensional_images_route_to_the_2d_rungs():
    """A 1-D image: correlate's zero-tap rule (not correlate1d's 0·NaN), origin as an int or [int];
    a 2-D image: exactly correlate2d / convolve2d."""
    rng = np.random.default_rng(6)
    x = rand(rng, 9)
    x[4] = np.nan
    w = np.array([0.5, 0.0, -1.0, 2.0])
    for fn in FUNCTIONS:
        for mode in MODES:
            for origin in (-2, 1, [0]):
                check(FUNCTIONS[fn][0](x, w, mode=mode, cval=1.5, origin=origin), x, w, fn, mode, 1.5,
                      origin if np.isscalar(origin) else origin[0], f"1-D {fn} {mode} {origin}")
    x2, w2 = rand(rng, (5, 6)), rand(rng, (3, 2))
    np.testing.assert_array_equal(st.correlate(x2, w2, mode="wrap", origin=(1, 0)),
                                  st.correlate2d(x2, w2, mode="wrap", origin=(1, 0)))
    np.testing.assert_array_equal(st.convolve(x2, w2, mode="mirror"), st.convolve2d(x2, w2, mode="mirror"))


def test_device_arrays_out_and_replay():
    """Numba device arrays in and ``out=`` (NaN-poisoned), called twice with new values (a launch plan)."""
    rng = np.random.default_rng(7)
    w = cuda.to_device(rand(rng, (3, 3, 2), np.float32))
    for i in range(2):
        x = rand(rng, (3, 4, 5), np.float32)
        out = poisoned(x.shape, np.float32)
        assert st.convolve(cuda.to_device(x), w, mode="nearest", out=out) is out
        check(out, x, w.copy_to_host(), "convolve", "nearest", what=f"device call {i}")


# ---------------------------------------------------------------------------
# The rungs: random configs and shapes, the fallback, the race check, the grid
# ---------------------------------------------------------------------------

#: sim tile 3 rows x 4 columns x 2 planes: sizes around it, primes, 0 and 1
SIDES = (0, 1, 2, 3, 4, 5, 7)


def _configs():
    # several warps per block direction are the full profile's (32 × 2 and 64 × 1 threads)
    bx = hs.sampled_from((1, 2, 3, 4, 5) if PROFILE == "ci" else (1, 3, 4, 32, 64))
    by = hs.sampled_from((1, 2, 3) if PROFILE == "ci" else (1, 2, 3))
    return hs.builds(lambda x, y, z: k12_volume.Config(block_x=x, block_y=y, tile_z=z), bx, by,
                     hs.integers(1, 4))


@given(cfg=_configs(), shape=hs.tuples(*[hs.sampled_from(SIDES)] * 3), wshape=hs.tuples(*[hs.integers(1, 4)] * 3),
       mode=hs.sampled_from(MODES), fn=hs.sampled_from(tuple(FUNCTIONS)), data=hs.data(),
       dtype=hs.sampled_from((np.float32, np.float64)), variant=hs.sampled_from(dispatch.VOLUME_VARIANTS))
def test_property_random_configs_shapes_modes_origins(cfg, shape, wshape, mode, fn, data, dtype, variant):
    if cfg.threads * max(1, shape[0] * shape[1] * shape[2]) > 4096:
        shape = (min(shape[0], 2), min(shape[1], 3), shape[2])  # the simulator's budget for wide blocks
    if variant == "k12_volume_naive":
        cfg = k12_volume.NaiveConfig(threads_x=cfg.threads)
    origin = tuple(data.draw(hs.integers(-(k // 2), (k - 1) // 2)) for k in wshape)
    rng = np.random.default_rng(abs(hash((shape, wshape))) % 2**32)
    x, w = rand(rng, shape, dtype), rand(rng, wshape, dtype)
    note(f"{cfg} {shape} * {wshape} {mode} origin {origin}")
    out = poisoned(shape, dtype)
    FUNCTIONS[fn][0](x, w, mode=mode, cval=0.25, origin=origin, out=out, variant=variant, config=cfg)
    # scipy's n-D reflect misreads only 4n or more before an axis: a filter of at most 4 taps never gets there
    check(out, x, w, fn, mode, 0.25, origin, f"{fn} {cfg}")


#: widths around the rx tiles (2 × 2 = 4, 2 × 3 = 6, 1 × 4 ...): 1, primes, and one past a tile
RX_WIDTHS = (1, 2, 5, 7, 11, 13)


def _rx_configs():
    # rx: even (2 and 4: rows staged in phases; 6: two phases of 3) and odd (3, 5: the plain row)
    return hs.builds(lambda x, y, z, r: k12_volume.Config(block_x=x, block_y=y, tile_z=z, rx=r),
                     hs.sampled_from((1, 2, 3)), hs.sampled_from((1, 2)), hs.integers(1, 3), hs.sampled_from((2, 3, 4, 5, 6)))


def _run_k12(cfg, shape, wshape, mode, fn, data, dtype):
    """One k12 call of a property test: random x and w (seeded by the problem), an origin drawn, a NaN-poisoned out;
    returns (x, w, origin, out)."""
    origin = tuple(data.draw(hs.integers(-(k // 2), (k - 1) // 2)) for k in wshape)
    rng = np.random.default_rng(abs(hash((shape, wshape, cfg.rx))) % 2**32)
    x, w = rand(rng, shape, dtype), rand(rng, wshape, dtype)
    note(f"{cfg} {shape} * {wshape} {mode} origin {origin}")
    out = poisoned(shape, dtype)
    FUNCTIONS[fn][0](x, w, mode=mode, cval=-0.5, origin=origin, out=out, variant="k12_volume", config=cfg)
    return x, w, origin, out


@given(cfg=_rx_configs(), width=hs.sampled_from(RX_WIDTHS), rows=hs.integers(1, 3), planes=hs.integers(1, 3),
       wshape=hs.tuples(*[hs.integers(1, 3)] * 2, hs.integers(1, 4)), mode=hs.sampled_from(MODES),
       fn=hs.sampled_from(tuple(FUNCTIONS)), data=hs.data(), dtype=hs.sampled_from((np.float32, np.float64)))
def test_property_rx_outputs_per_thread(cfg, width, rows, planes, wshape, mode, fn, data, dtype):
    """rx > 1 (each thread RX adjacent outputs from a register window of one staged row): ragged widths
    (not multiples of rx·block_x, 1, primes), every mode, both dtypes, origins, filters wider than the row."""
    x, w, origin, out = _run_k12(cfg, (planes, rows, width), wshape, mode, fn, data, dtype)
    check(out, x, w, fn, mode, -0.5, origin, f"{fn} {cfg}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
def test_rx_preset_every_mode_ragged_widths(mode, dtype):
    """The "sim_rx" preset (2 × 3 threads, rx = 2: a 3 × 4 tile in two phases) and rx = 3 (the plain row) on
    widths 1, 7 (prime) and 9 (a tile and one), in every mode, with a NaN that must spread only as scipy's."""
    rng = np.random.default_rng(12)
    for config in ("sim_rx", k12_volume.Config(block_x=2, block_y=2, tile_z=2, kd=2, kh=3, kw=3, rx=3)):
        for width in (1, 7, 9):
            x, w = rand(rng, (3, 2, width), dtype), rand(rng, (2, 2, 3), dtype)
            w[1, 0, 1] = 0.0  # a zero tap: a NaN behind it must not spread through it
            x[1, 1, width // 2] = np.nan
            got = st.correlate(x, w, mode=mode, cval=1.25, variant="k12_volume", config=config)
            check(got, x, w, "correlate", mode, 1.25, 0, f"{mode} {config} width {width}")


REGISTERS = k12_volume.REGISTERS

#: filters of at most 27 taps (k12_volume.MAX_REGISTER_TAPS): cubic, even sides, thin, wider than the row
REGISTER_FILTERS = ((3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 3, 4), (1, 5, 5), (4, 1, 6), (3, 1, 9), (1, 2, 13))


def _register_configs():
    # rx 1-4 (even: two or four phases; odd: the plain row); 17 × 2 threads: two warps (the full profile: 33 × 2)
    bx = hs.sampled_from((1, 2, 3, 17) if PROFILE == "ci" else (1, 2, 3, 17, 33))
    return hs.builds(lambda x, y, z, r: k12_volume.Config(block_x=x, block_y=y, tile_z=z, rx=r, taps=REGISTERS),
                     bx, hs.sampled_from((1, 2)), hs.integers(1, 3), hs.sampled_from((1, 2, 3, 4)))


@given(cfg=_register_configs(), width=hs.sampled_from(RX_WIDTHS), rows=hs.integers(1, 3), planes=hs.integers(1, 3),
       wshape=hs.sampled_from(REGISTER_FILTERS), mode=hs.sampled_from(MODES), fn=hs.sampled_from(tuple(FUNCTIONS)),
       data=hs.data(), dtype=hs.sampled_from((np.float32, np.float64)))
def test_property_taps_in_registers(cfg, width, rows, planes, wshape, mode, fn, data, dtype):
    """``taps=REGISTERS`` (each thread loads the taps into registers once, a generated window loop): random tiles
    of 1-4 outputs per thread (two warps among them), ragged widths, every mode, both dtypes, origins, even and
    thin filters wider than the volume — within the reference's bound, and the same values, bit for bit, as the
    same tiles with the taps in shared memory (the same sums in the same order)."""
    if cfg.threads > 32:
        rows, planes = 1, min(planes, 2)  # the simulator's budget for two warps
    x, w, origin, out = _run_k12(cfg, (planes, rows, width), wshape, mode, fn, data, dtype)
    check(out, x, w, fn, mode, -0.5, origin, f"{fn} {cfg}", scipy=max(wshape) <= 4)
    staged = FUNCTIONS[fn][0](x, w, mode=mode, cval=-0.5, origin=origin, variant="k12_volume",
                              config=dataclasses.replace(cfg, taps=k12_volume.SHARED))
    np.testing.assert_array_equal(out, staged, err_msg=f"{cfg}: registers and shared taps differ")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
def test_register_taps_preset_every_mode_zero_taps_and_nan(mode, dtype):
    """The "sim_rxr" preset (2 × 3 threads, rx = 2, taps in registers) on widths 1, 5 (prime) and 4 (one
    tile), in every mode: a filter with a zero tap (the copy that tests each tap: a NaN behind the zero tap
    must not spread through it) and one without (the copy that tests none: the NaN spreads as scipy's)."""
    rng = np.random.default_rng(13)
    for width in (1, 5, 4):
        for zero in (True, False):
            x, w = rand(rng, (3, 2, width), dtype), rand(rng, (2, 3, 2), dtype)
            if zero:
                w[1, 1, 1] = 0.0  # the tap that meets the NaN for output (1, 1, width // 2)
            x[1, 1, width // 2] = np.nan
            out = poisoned(x.shape, dtype)
            st.correlate(x, w, mode=mode, cval=1.25, out=out, variant="k12_volume", config="sim_rxr")
            check(out, x, w, "correlate", mode, 1.25, 0, f"{mode} sim_rxr width {width} zero tap {zero}")


@pytest.mark.parametrize("rx", [1, 4])
def test_register_taps_two_warps(rx):
    """17 × 2 threads (two warps, the second one 2 lanes) with the taps in registers, a width one past the tile
    and a prime, both functions, an origin on every axis."""
    cfg = k12_volume.Config(block_x=17, block_y=2, tile_z=2, rx=rx, taps=k12_volume.REGISTERS)
    rng = np.random.default_rng(14 + rx)
    x, w = rand(rng, (2, 3, 17 * rx + 1), np.float32), rand(rng, (3, 2, 4), np.float32)
    for fn, origin in (("correlate", (1, -1, 0)), ("convolve", (-1, 0, 1))):
        out = poisoned(x.shape, np.float32)
        FUNCTIONS[fn][0](x, w, mode="mirror", origin=origin, out=out, variant="k12_volume", config=cfg)
        check(out, x, w, fn, "mirror", 0.0, origin, f"{fn} {cfg}")


def test_register_taps_rule_and_candidate_ladder():
    """At most MAX_REGISTER_TAPS taps in registers: a larger filter is a ConfigError naming ``config`` (also
    for variant=None: no silent fallback to the global-memory rung); the taps are not staged (the ring alone
    in shared memory); the candidate ladder (not the default) takes rx4r at 3³ and the staged presets past it."""
    mode = _args.mode_of("reflect")
    cfg = k12_volume.PRESETS["rx4r"]
    assert cfg.smem_bytes(4) == 4 * 10 * 132 * 4 == k12_volume.PRESETS["rx4"].smem_bytes(4) - 27 * 4
    with pytest.raises(ConfigError, match="taps"):
        dataclasses.replace(cfg, kd=4)
    for variant in ("k12_volume", None):
        with pytest.raises(ConfigError, match=r"config: rx4r holds the taps in registers, at most 27; a 4x3x3 filter"):
            dispatch.plan_volume(variant, "rx4r", 4, 3, 3, mode, np.float32)
    with pytest.raises(ConfigError, match=r"config: sim_rxr holds the taps in registers, at most 27; a 2x2x7 filter"):
        st.correlate(np.zeros((2, 3, 4)), np.ones((2, 2, 7)), variant="k12_volume", config="sim_rxr")
    ladder = dispatch.VOLUME_REGISTER_TAPS_LADDER
    assert "rx4r" not in dispatch.VOLUME_RX_LADDER  # (the staged ladder; config=None on a GPU takes this one)
    picks = {k: dispatch.plan_volume(None, None, k, k, k, mode, np.float32, ladder=ladder).config for k in (3, 5, 7)}
    # rx3y2 first (session 41: faster than rx4r at 3³ and rx4 at 5³); its ring fits 7³
    assert [(p.rx, p.ry, p.taps) for p in picks.values()] == [(3, 2, k12_volume.SHARED)] * 3
    assert dispatch.plan_volume(None, None, 1, 5, 5, mode, np.float64, ladder=ladder[1:]).config.taps == REGISTERS


def test_rx_tile_geometry_and_shared_memory():
    """The tile is block_y × (rx·block_x); a staged row is rx·block_x + KW − 1 wide, split in gcd(rx, 32)
    phases of equal length (padded): the ring, the 48 KiB rule and the fallback see the wider plane."""
    cfg = k12_volume.PRESETS["rx4"]
    assert (cfg.tile_x(), cfg.staged_cols(), cfg.phases(), cfg.row_stride()) == (128, 130, 4, 132)
    assert cfg.smem_bytes(4) == (4 * 10 * 132 + 27) * 4
    assert k12_volume.PRESETS["rx3"].row_stride() == 98 and k12_volume.PRESETS["default"].row_stride() == 34
    assert k12_volume.geometry(cfg, 5, 9, 129)[0] == (2 * 2 * 1,)  # 129 columns: two 128-wide tiles
    assert k12_volume.geometry(cfg, 5, 9, 129)[2:] == (2, 2)
    assert dispatch.plan_volume(None, "rx4", 5, 5, 5, _args.mode_of("reflect"), np.float32).rung is k12_volume.RUNG
    assert dispatch.plan_volume(None, "rx4", 7, 7, 7, _args.mode_of("reflect"), np.float32).rung is k12_volume.NAIVE
    assert dispatch.plan_volume(None, "default", 7, 7, 7, _args.mode_of("reflect"), np.float32).rung is k12_volume.RUNG
    with pytest.raises(ConfigError, match=r"weights: a 7x7x7 float32 filter does not fit k12_volume"):
        dispatch.plan_volume("k12_volume", "rx4", 7, 7, 7, _args.mode_of("reflect"), np.float32)


def test_the_gpu_default_takes_the_most_outputs_per_thread_that_fit():
    """``config=None`` on a GPU (the ladder rx3y2, rx4, rx3, rx2, default): the first preset whose ring fits 48 KiB,
    for every filter shape from 1 to 11 a side (most never measured) and both dtypes; none fitting: the fallback,
    or the refusal naming ``weights`` for a named k12.  The measured points: 3³ and 5³ float32 rx3y2 (session 41;
    rx4 before), 7³ rx3 before rx3y2."""
    ladder = dispatch.VOLUME_RX_LADDER
    mode = _args.mode_of("reflect")
    for dtype in (np.float32, np.float64):
        for kd, kh, kw in [(k, k, k) for k in range(1, 12)] + [(1, 3, 11), (7, 1, 1), (3, 9, 2), (11, 2, 5)]:
            def ring_bytes(p):  # the ring of KD + 1 staged planes (rows in gcd(rx, 32) phases) and the taps
                g = math.gcd(p.rx, 32)
                row = g * -(-(p.rx * p.block_x + kw - 1) // g)
                return ((kd + 1) * (p.ry * p.block_y + kh - 1) * row + kd * kh * kw) * np.dtype(dtype).itemsize

            fits = [n for n in ladder if ring_bytes(k12_volume.PRESETS[n]) <= 48 * 1024]
            plan = dispatch.plan_volume(None, None, kd, kh, kw, mode, dtype, ladder=ladder)
            if fits:
                first = k12_volume.PRESETS[fits[0]]
                assert plan.rung is k12_volume.RUNG and (plan.config.rx, plan.config.ry) == (first.rx, first.ry), \
                    (kd, kh, kw)
                assert dispatch.plan_volume("k12_volume", None, kd, kh, kw, mode, dtype, ladder=ladder) == plan
            else:
                assert plan.rung is k12_volume.NAIVE, (kd, kh, kw, dtype)
                with pytest.raises(ConfigError, match="weights: a"):
                    dispatch.plan_volume("k12_volume", None, kd, kh, kw, mode, dtype, ladder=ladder)
    got = [dispatch.plan_volume(None, None, k, k, k, mode, np.float32, ladder=ladder).config for k in (3, 5, 7)]
    assert [(c.rx, c.ry) for c in got] == [(3, 2)] * 3
    # without a ladder: the simulator's own default there (sim), the GPU ladder's first fit on a GPU (rx3y2 at 3³)
    want = "sim" if SIMULATOR else "rx3y2"
    assert dispatch.plan_volume(None, None, 3, 3, 3, mode, np.float32).config == dispatch.plan_volume(
        None, want, 3, 3, 3, mode, np.float32).config


#: heights around the ry tiles (2 × 2 = 4, 1 × 3, 2 × 4 ...): 1, primes, a tile and one past it
RY_HEIGHTS = (1, 2, 3, 4, 5, 7, 9)


def _ry_configs():
    # ry 2-4 with rx 1-4 (even rx: phases), the taps staged or in registers; 17 × 2 threads: two warps
    bx = hs.sampled_from((1, 2, 3, 17) if PROFILE == "ci" else (1, 2, 3, 17, 33))
    return hs.builds(lambda x, y, z, r, q, t: k12_volume.Config(block_x=x, block_y=y, tile_z=z, rx=r, ry=q, taps=t),
                     bx, hs.sampled_from((1, 2)), hs.integers(1, 3), hs.sampled_from((1, 2, 3, 4)),
                     hs.sampled_from((2, 3, 4)), hs.sampled_from((k12_volume.SHARED, REGISTERS)))


@given(cfg=_ry_configs(), height=hs.sampled_from(RY_HEIGHTS), width=hs.sampled_from((1, 2, 5, 7)),
       planes=hs.integers(1, 3), wshape=hs.tuples(hs.integers(1, 3), hs.integers(1, 4), hs.integers(1, 4)),
       mode=hs.sampled_from(MODES), fn=hs.sampled_from(tuple(FUNCTIONS)), data=hs.data(),
       dtype=hs.sampled_from((np.float32, np.float64)))
def test_property_ry_outputs_per_thread_in_y(cfg, height, width, planes, wshape, mode, fn, data, dtype):
    """ry > 1 (each thread an RY × RX block of outputs, a sliding window of staged rows): ragged heights and
    widths (1, primes, a tile ± 1), every mode, both dtypes, origins, even filter sides and filters taller and
    wider than the volume, the taps staged or in registers, two warps — within the reference's bound, and the
    same values, bit for bit, as the same tiles with ry = 1 (the same sums in the same order)."""
    if cfg.threads > 32:
        planes, width = 1, min(width, 5)  # the simulator's budget for two warps
    shape = (planes, height, width)
    origin = tuple(data.draw(hs.integers(-(k // 2), (k - 1) // 2)) for k in wshape)
    rng = np.random.default_rng(abs(hash((shape, wshape, cfg.rx, cfg.ry))) % 2**32)
    x, w = rand(rng, shape, dtype), rand(rng, wshape, dtype)
    note(f"{cfg} {shape} * {wshape} {mode} origin {origin}")
    out = poisoned(shape, dtype)
    FUNCTIONS[fn][0](x, w, mode=mode, cval=-0.5, origin=origin, out=out, variant="k12_volume", config=cfg)
    check(out, x, w, fn, mode, -0.5, origin, f"{fn} {cfg}")
    one = FUNCTIONS[fn][0](x, w, mode=mode, cval=-0.5, origin=origin, variant="k12_volume",
                           config=dataclasses.replace(cfg, ry=1))
    np.testing.assert_array_equal(out, one, err_msg=f"{cfg}: ry = {cfg.ry} and ry = 1 differ")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
def test_ry_preset_every_mode_ragged_heights_and_nan(mode, dtype):
    """The "sim_ry" preset (2 × 2 threads, rx = ry = 2: a 4 × 4 tile in two phases) on heights 1, 5 (a tile
    and one) and 7 (prime), in every mode, NaN-poisoned ``out=``: a NaN behind a zero tap must not spread
    through it (the staged taps' per-tap test), and a filter taller than the volume with an even side."""
    rng = np.random.default_rng(15)
    for height in (1, 5, 7):
        x, w = rand(rng, (3, height, 6), dtype), rand(rng, (2, 3, 3), dtype)
        w[1, 1, 1] = 0.0  # the tap that meets the NaN for output (1, height // 2, 3)
        x[2, height // 2, 3] = np.nan
        for wt in (w, rand(rng, (3, height + 2, 2), dtype)):
            out = poisoned(x.shape, dtype)
            st.correlate(x, wt, mode=mode, cval=1.25, out=out, variant="k12_volume", config="sim_ry")
            check(out, x, wt, "correlate", mode, 1.25, 0, f"{mode} sim_ry height {height} filter {wt.shape}")


@pytest.mark.parametrize("taps", ["shared", "registers"])
def test_ry_two_warps(taps):
    """17 × 2 threads (two warps, the second 2 lanes) with rx = 2, ry = 3: a height one past the tile's 6 rows,
    a width one past its 34 columns, both functions, an origin on every axis."""
    cfg = k12_volume.Config(block_x=17, block_y=2, tile_z=2, rx=2, ry=3,
                            taps=REGISTERS if taps == "registers" else k12_volume.SHARED)
    rng = np.random.default_rng(16)
    x, w = rand(rng, (2, 7, 35), np.float32), rand(rng, (3, 2, 4), np.float32)
    for fn, origin in (("correlate", (1, -1, 0)), ("convolve", (-1, 0, 1))):
        out = poisoned(x.shape, np.float32)
        FUNCTIONS[fn][0](x, w, mode="nearest", origin=origin, out=out, variant="k12_volume", config=cfg)
        check(out, x, w, fn, "nearest", 0.0, origin, f"{fn} {cfg}")


def test_ry_tile_geometry_shared_memory_and_the_unchanged_ladders():
    """The tile is (ry·block_y) × (rx·block_x); a staged plane holds ry·block_y + KH − 1 rows, so the ring, the
    48 KiB rule and the fallback see the taller plane; the ry presets keep 8-row tiles (rx3y2, rx2y4 and rx2y2 fit
    7³ float32, rx4y2 does not, as rx4); no ladder takes them (they change only after a GPU measurement)."""
    mode = _args.mode_of("reflect")
    cfg = k12_volume.PRESETS["rx3y2"]
    assert (cfg.tile_y(), cfg.tile_x(), cfg.threads) == (8, 96, 128)
    spec = dispatch.plan_volume("k12_volume", "rx3y2", 7, 7, 7, mode, np.float32).config
    assert spec.plane() == (4 * 2 + 7 - 1) * (96 + 7 - 1)
    assert spec.smem_bytes(4) == (8 * 14 * 102 + 343) * 4 == dispatch.plan_volume(
        "k12_volume", "rx3", 7, 7, 7, mode, np.float32).config.smem_bytes(4)
    assert k12_volume.geometry(cfg, 5, 9, 97)[0] == (2 * 2 * 1,)  # 9 rows: two 8-row tiles; 97 columns: two
    assert k12_volume.geometry(cfg, 5, 9, 97)[2:] == (2, 2)
    for name in ("rx3y2", "rx2y4", "rx2y2"):
        assert dispatch.plan_volume(None, name, 7, 7, 7, mode, np.float32).rung is k12_volume.RUNG, name
    assert dispatch.plan_volume(None, "rx4y2", 7, 7, 7, mode, np.float32).rung is k12_volume.NAIVE
    assert dispatch.plan_volume(None, "rx4y2", 5, 5, 5, mode, np.float32).rung is k12_volume.RUNG
    with pytest.raises(ConfigError, match=r"weights: a 7x7x7 float32 filter does not fit k12_volume"):
        dispatch.plan_volume("k12_volume", "rx4y2", 7, 7, 7, mode, np.float32)
    with pytest.raises(ConfigError, match="ry"):
        k12_volume.Config(ry=0)
    for ladder in (dispatch.VOLUME_RX_LADDER, dispatch.VOLUME_REGISTER_TAPS_LADDER):
        assert ladder[0] == "rx3y2" and all(k12_volume.PRESETS[n].ry == 1 for n in ladder[1:])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_the_fallback_takes_filters_whose_ring_does_not_fit(dtype):
    """variant=None with the "default" preset (32 × 8 × 16): a 9 × 9 × 9 float64 filter's ring is 51 KiB,
    so the global-memory rung runs it; a named k12_volume refuses it naming weights."""
    plan = dispatch.plan_volume(None, "default", 9, 9, 9, _args.mode_of("reflect"), np.float64)
    assert plan.rung is k12_volume.NAIVE
    assert dispatch.plan_volume(None, "default", 9, 9, 9, _args.mode_of("reflect"), np.float32).rung is k12_volume.RUNG
    with pytest.raises(ConfigError, match=r"weights: a 9x9x9 float64 filter does not fit k12_volume"):
        dispatch.plan_volume("k12_volume", "default", 9, 9, 9, _args.mode_of("reflect"), np.float64)
    rng = np.random.default_rng(8)
    x, w = rand(rng, (2, 2, 1), dtype), rand(rng, (9, 9, 9), dtype) if dtype == np.float64 else rand(rng, (3, 1, 5), dtype)
    cfg = "default" if dtype == np.float64 else None
    for mode in ("mirror", "constant"):  # (radius 4 on a 1- or 2-long axis: scipy's reflect would misread)
        check(st.correlate(x, w, mode=mode, config=cfg, variant=None if cfg else "k12_volume_naive"), x, w,
              "correlate", mode, what=f"naive {mode}")


@simulator_only
@pytest.mark.parametrize("cfg", [k12_volume.Config(block_x=4, block_y=3, tile_z=3),
                                 k12_volume.Config(block_x=8, block_y=5, tile_z=3),
                                 k12_volume.Config(block_x=2, block_y=3, tile_z=3, rx=4),
                                 k12_volume.Config(block_x=2, block_y=3, tile_z=3, rx=2, taps=k12_volume.REGISTERS),
                                 k12_volume.Config(block_x=2, block_y=2, tile_z=3, rx=2, ry=2),
                                 pytest.param(k12_volume.Config(block_x=32, block_y=2, tile_z=2), marks=full_only)],
                         ids=["4x3x3", "8x5x3-two-warps", "2x3x3-rx4", "2x3x3-rx2-register-taps", "2x2x3-rx2-ry2",
                              "32x2x2"])
def test_the_ring_is_race_free(cfg):
    """Every thread stages its share of each plane before the barrier and reads the ring after it;
    the slot a plane overwrites was last read before the previous barrier (the spare slot).  Hazards
    inside a warp count too (``intra_warp="all"``: independent thread scheduling), and the 8 × 5
    block has two warps."""
    rng = np.random.default_rng(9)
    x, w = rand(rng, (5, cfg.tile_y() + 1, cfg.block_x + 1), np.float32), rand(rng, (3, 2, 3), np.float32)
    with analyze.racecheck(intra_warp="all"):
        got = st.correlate(x, w, mode="reflect", variant="k12_volume", config=cfg)
    check(got, x, w, what=f"racecheck {cfg}")


def _mutant(old: str, new: str):
    def edit(lines):
        hits = [i for i, line in enumerate(lines) if old in line]
        assert len(hits) == 1, (old, hits)
        lines[hits[0]] = lines[hits[0]].replace(old, new)
        return lines
    return analyze.mutant_rung(k12_volume.RUNG, analyze.mutant_module(k12_volume, edit))


@simulator_only
def test_the_race_check_sees_a_ring_without_its_spare_slot(monkeypatch):
    """A ring of KD slots (no spare) with one barrier per plane: a plane overwrites the slot others may
    still read — the race check must report it (a check that cannot fail proves nothing)."""
    rung = _mutant("NSLOT, THREADS, TAPS = config.plane(), KD + 1,", "NSLOT, THREADS, TAPS = config.plane(), KD,")
    monkeypatch.setitem(dispatch.VOLUME_RUNGS, "k12_volume", rung)
    rng = np.random.default_rng(10)
    x, w = rand(rng, (5, 3, 4), np.float32), rand(rng, (3, 2, 2), np.float32)
    with pytest.raises(analyze.RaceError, match="ring"):
        with analyze.racecheck(intra_warp="all"):
            st.correlate(x, w, variant="k12_volume", config=k12_volume.Config(block_x=4, block_y=3, tile_z=3))


def test_large_volumes_use_a_one_dimensional_grid(monkeypatch):
    """CUDA's grid y and z stop at 65535: more tiles than that along y or z must not reach them (here
    the simulator's limit is set to 1 block)."""
    grids = grid_limit(monkeypatch, 1, 1)
    rng = np.random.default_rng(11)
    x, w = rand(rng, (7, 8, 5), np.float32), rand(rng, (2, 3, 2), np.float32)
    check(st.correlate(x, w, mode="wrap"), x, w, mode="wrap", what="grid")
    assert grids and all(g[1:] == (1, 1) for g in grids), grids


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_errors_name_the_argument():
    x, w = np.zeros((2, 3, 4)), np.ones((1, 2, 3))
    cases = [
        (lambda: st.correlate(np.zeros((1, 2, 3, 4)), np.ones((1, 1, 1, 1))), ValueError,
         r"image: expected a 1-D, 2-D or 3-D array; got 4-D with shape \(1, 2, 3, 4\)"),
        (lambda: st.convolve(x, np.ones((2, 2))), ValueError,
         r"weights: expected a 3-D array \(one axis per axis of image, which is 3-D\); got 2-D with shape \(2, 2\)"),
        (lambda: st.correlate(np.zeros(4), np.ones((1, 1))), ValueError, r"weights: expected a 1-D array"),
        (lambda: st.correlate(np.zeros(()), np.ones(())), ValueError, r"image: expected a 1-D, 2-D or 3-D array; got 0-D"),
        (lambda: st.correlate(x, w, origin=(0, 1)), ValueError, r"origin: expected an int or 3 ints"),
        (lambda: st.correlate(x, w, origin=(0, 0, 2)), ValueError, r"origin: expected .*-1 \.\. 1 .*got \(0, 0, 2\)"),
        (lambda: st.correlate(x, w, origin=1.5), TypeError, r"origin: expected an int or a sequence of 3 ints"),
        (lambda: st.correlate(x, np.ones((1, 0, 2))), ValueError, r"weights: expected a non-empty 3-D array"),
        (lambda: st.correlate(x, w, mode="same"), ValueError, r"mode: expected one of"),
        (lambda: st.correlate(x, w, variant="k10_runtime_weights"), ValueError,
         r"variant: expected one of \('k12_volume', 'k12_volume_naive'\) or None; got 'k10_runtime_weights'"),
        (lambda: st.correlate(x, w, config=k12_volume.NaiveConfig()), TypeError, r"config: expected a preset name"),
        (lambda: st.correlate(x, w, cval="0"), TypeError, r"cval: expected a real number"),
        (lambda: st.convolve(x, w, out=np.zeros((2, 3, 5))), ValueError, r"out"),
        (lambda: st.correlate(x.astype(np.complex128), w), TypeError, r"image: expected dtype"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()


def test_more_than_2_to_the_31_elements_is_refused(monkeypatch):
    monkeypatch.setattr(_args, "MAX_VOLUME_ELEMENTS", 23)
    with pytest.raises(ValueError, match=r"image: 24 elements; the volume kernels index with 32-bit offsets, at most 23"):
        st.correlate(np.zeros((2, 3, 4)), np.ones((1, 1, 1)))


def test_the_tiles_config_is_validated_and_specialised():
    with pytest.raises(ConfigError, match="tile_z"):
        k12_volume.Config(tile_z=0)
    spec = dispatch.plan_volume(None, None, 2, 3, 4, _args.mode_of("wrap"), np.float32).config
    assert (spec.kd, spec.kh, spec.kw, spec.mode) == (2, 3, 4, _args.mode_of("wrap"))
    assert dataclasses.replace(spec, kd=1) != spec
