"""correlate1d, correlate_separable and the constant-filter rungs (k04, k05) of the conv2d ladder.

* The long-double references (simt_tiles.kernels.conv2d.reference) are checked against
  scipy.ndimage itself: ``correlate1d`` on both axes, and the separable filter
  against ``correlate`` with the outer product — and against scipy's chained
  ``correlate1d``, which differs in mode "constant" (shown, not hidden).
* ``correlate1d`` through every conv2d rung, ``correlate_separable`` through both
  variants, k04/k05 on 2-D filters: ragged shapes (1×1, smaller than the filter,
  primes, around a tile), filter lengths from 1 to longer than the axis (odd and
  even), every mode, both dtypes, NaN-poisoned outputs, bounds γ_n·Σ|w||x|
  (γ_{KH+KW} for the separable composition).
* k04/k05: the filter values end up as FMA immediates (PTX), one compilation per
  distinct filter (bounded cache), device weights, rows past the hand-unrolled ones.
"""

from __future__ import annotations

import math
import os
import textwrap

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from numba import cuda  # module level: the simulator swaps this global inside kernels

import simt_tiles
from simt_tiles.bounds import check_within
from simt_tiles.kernels.conv2d import (
    BEST_SEPARABLE_VARIANT,
    BEST_VARIANT,
    CONSTANT_FILTER_VARIANTS,
    CONV2D_VARIANTS,
    MODES,
    SEPARABLE_RUNGS,
    SEPARABLE_VARIANTS,
    _common,
    convolve2d,
    correlate1d,
    correlate2d,
    correlate_separable,
    k04_constant_filter,
    k05_register_tile_2d,
    k06_separable_fused,
)
from simt_tiles.kernels.conv2d._args import mode_of
from simt_tiles.kernels.conv2d._common import Mode, specialise
from simt_tiles.kernels.conv2d.reference import (
    correlate1d_reference,
    correlate2d_reference,
    correlate_separable_reference,
)
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import DTYPES, SEMANTICS_CONFIG, gpu_pool, kernel_cases, poisoned
from .gate_subprocess import run_real_target
from .profiles import PROFILE, examples
from .test_conv2d import _fits, config_strategy

#: examples per kernel property test (every simulated thread runs in Python: keep them tiny)
EXAMPLES = examples(40) if SIMULATOR else settings.default.max_examples  # GPU: the profile's
#: longest filter drawn
KMAX = 13 if SIMULATOR else 17  # GPU: each drawn filter compiles; longer ones: the gpu-marked tests


# --- strategies -------------------------------------------------------------------


def sides(tile: int):
    """Image sides that break tiled code: 1, small primes, around one and two tiles."""
    s = {1, 2, 3, 5, 7, tile - 1, tile, tile + 1, 2 * tile + 1}
    if not SIMULATOR:
        s |= {31, 97, 257}
    return st.sampled_from(sorted(v for v in s if v >= 1 and (v <= 11 or not SIMULATOR)))


def filter_length(n: int):
    """1…5 (odd and even), or longer than the axis n: n + 1, 2n + 1, 4n + 2 (reflect
    and mirror fold more than once)."""
    return st.one_of(st.integers(1, 5), st.sampled_from([n + 1, 2 * n + 1, 4 * n + 2])).map(
        lambda k: min(k, KMAX))


if SIMULATOR:
    K06_CONFIGS = st.builds(k06_separable_fused.Config, block_x=st.integers(1, 3),
                            block_y=st.integers(1, 3), rx=st.integers(1, 3), ry=st.integers(1, 3))
else:
    K06_CONFIGS = st.builds(k06_separable_fused.Config, block_x=st.sampled_from([8, 16, 32]),
                            block_y=st.sampled_from([1, 4, 8]), rx=st.integers(1, 5),
                            ry=st.integers(1, 4))


def preset(rung):
    return rung.presets["sim" if SIMULATOR else "default"]


def _ok(got, ref, bound, what):
    chk = check_within(got, ref, bound)
    assert chk.passed, f"{chk} for {what}"
    return chk


# --- the references are scipy.ndimage ------------------------------------------------


@settings(max_examples=examples(200))
@given(data=st.data())
def test_correlate1d_reference_matches_scipy(data):
    h, w = data.draw(st.integers(1, 9), "H"), data.draw(st.integers(1, 9), "W")
    axis = data.draw(st.sampled_from([0, 1, -1, -2]), "axis")
    k = data.draw(filter_length((h, w)[axis]), "K")
    mode = data.draw(st.sampled_from(MODES), "mode")
    cval = data.draw(st.sampled_from([0.0, 1.5, -2.25]), "cval")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    image, weights = rng.standard_normal((h, w)), rng.standard_normal(k)
    ref, bound = correlate1d_reference(image, weights, axis, mode, cval)
    sp = ndi.correlate1d(image, weights, axis=axis, mode=mode, cval=cval)
    assert check_within(sp, ref, bound).passed  # scipy's float64 error is within the bound


def scipy_nd_misreads(n: int, k: int, anchor: int) -> bool:
    """scipy's n-D correlate misreads "reflect" coordinates p < −2n with p ≡ 0 (mod 2n)
    (see the conv2d package docstring); its 1-D path does not."""
    lo, hi = -anchor, n - 1 + k - 1 - anchor
    return any(p < -2 * n and p % (2 * n) == 0 for p in range(lo, min(hi, -1) + 1))


@settings(max_examples=examples(200))
@given(data=st.data())
def test_separable_reference_matches_scipy_correlate_of_the_outer_product(data):
    """In every mode: scipy.ndimage.correlate(x, outer(wy, wx)).  And scipy's chained
    correlate1d equals it too — except in mode "constant", where the chain's second
    pass pads with cval instead of cval·Σwy (equal when cval·(1 − Σwy) = 0)."""
    h, w = data.draw(st.integers(1, 9), "H"), data.draw(st.integers(1, 9), "W")
    kh, kw = data.draw(filter_length(h), "KH"), data.draw(filter_length(w), "KW")
    mode = data.draw(st.sampled_from(MODES), "mode")
    cval = data.draw(st.sampled_from([0.0, 1.5, -2.25]), "cval")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    image, wy, wx = rng.standard_normal((h, w)), rng.standard_normal(kh), rng.standard_normal(kw)
    ref, bound = correlate_separable_reference(image, wy, wx, mode, cval)
    # scipy filters with the float64 outer product (each weight rounded once): its 2-D
    # reference, which differs from the exact separable one by that rounding (≤ u·Σ|w||x|)
    outer = np.outer(wy, wx)
    ref2d, bound2d = correlate2d_reference(image, outer, mode, cval)
    assert check_within(ref2d, ref, bound)
    if not (mode == "reflect" and (scipy_nd_misreads(h, kh, kh // 2) or scipy_nd_misreads(w, kw, kw // 2))):
        assert check_within(ndi.correlate(image, outer, mode=mode, cval=cval), ref2d, bound2d)
    chained = ndi.correlate1d(ndi.correlate1d(image, wy, axis=0, mode=mode, cval=cval), wx, axis=1,
                              mode=mode, cval=cval * (math.fsum(wy) if mode == "constant" else 1.0))
    assert check_within(chained, ref, bound)
    if mode != "constant" or cval == 0:
        plain = ndi.correlate1d(ndi.correlate1d(image, wy, axis=0, mode=mode, cval=cval), wx, axis=1,
                                mode=mode, cval=cval)
        assert check_within(plain, ref, bound)


def test_chained_correlate1d_differs_in_constant_mode():
    """Why correlate_separable does not simply chain scipy's correlate1d in mode
    "constant": the intermediate outside the image is cval·Σwy, not cval."""
    image = np.arange(6.0).reshape(2, 3)
    wy, wx = np.array([1.0, 2.0, 1.0]), np.array([1.0, 0.0, -1.0])  # Σwy = 4 (a Sobel pair)
    cval = 1.0
    two_d = ndi.correlate(image, np.outer(wy, wx), mode="constant", cval=cval)
    chained = ndi.correlate1d(ndi.correlate1d(image, wy, axis=0, mode="constant", cval=cval), wx,
                              axis=1, mode="constant", cval=cval)
    assert not np.allclose(chained, two_d)
    for variant in SEPARABLE_VARIANTS:
        got = correlate_separable(image, wy, wx, mode="constant", cval=cval, variant=variant)
        np.testing.assert_allclose(got, two_d, rtol=1e-12, atol=1e-12, err_msg=variant)


# --- correlate1d through every conv2d rung ------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_correlate1d_matches_reference(dtype, data):
    if SIMULATOR:
        variant = data.draw(st.sampled_from([None, *CONV2D_VARIANTS]), "variant")
        h, w = data.draw(sides(4), "H"), data.draw(sides(6), "W")
        axis = data.draw(st.sampled_from([0, 1, -1, -2]), "axis")
        k = data.draw(filter_length((h, w)[axis]), "K")
        mode = data.draw(st.sampled_from(MODES), "mode")
    else:  # one kernel per mode (rung, length, axis), drawn once per run: kernel_cases
        variant, k, _, mode, along_rows, _ = data.draw(st.sampled_from(kernel_cases(
            ("correlate1d", dtype), st.sampled_from([None, *CONV2D_VARIANTS]))), "kernel")
        axis = data.draw(st.sampled_from([0, -2] if along_rows else [1, -1]), "axis")
        h, w = data.draw(sides(4), "H"), data.draw(sides(6), "W")
    cval = data.draw(st.sampled_from([0.0, 1.5, -0.1]), "cval")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    image = rng.standard_normal((h, w)).astype(dtype)
    weights = rng.standard_normal(k).astype(dtype)
    out = poisoned((h, w), dtype)
    got = correlate1d(image, weights, axis=axis, mode=mode, cval=cval, out=out, variant=variant)
    assert got is out
    ref, bound = correlate1d_reference(image, weights, axis, mode, cval)
    note(repr(_ok(out.copy_to_host(), ref, bound, f"{variant} image{image.shape} K={k} axis={axis} {mode}")))


@pytest.mark.parametrize("mode", MODES)
def test_correlate1d_equals_scipy(mode):
    """Even length, longer than the axis, both axes: scipy's own numbers."""
    rng = np.random.default_rng(12)
    image = rng.standard_normal((3, 5))
    for axis, k in [(1, 4), (0, 8), (-1, 11), (-2, 2)]:
        weights = rng.standard_normal(k)
        got = correlate1d(image, weights, axis=axis, mode=mode, cval=0.5)
        np.testing.assert_allclose(got, ndi.correlate1d(image, weights, axis=axis, mode=mode, cval=0.5),
                                   rtol=1e-12, atol=1e-12, err_msg=f"axis={axis} K={k}")


# --- correlate_separable: both variants ------------------------------------------------


def separable_config(variant: str):
    if variant == "two_pass":
        return st.just(None)
    return st.one_of(st.just(None), K06_CONFIGS if SIMULATOR else  # GPU: a fixed pool, each compiled once
                     st.sampled_from(gpu_pool(k06_separable_fused.RUNG, K06_CONFIGS)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", SEPARABLE_VARIANTS)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_correlate_separable_matches_reference(variant, dtype, data):
    if SIMULATOR:
        config = data.draw(separable_config(variant), "config")
        th, tw = (config or preset(k06_separable_fused.RUNG)).tile()
        h, w = data.draw(sides(th), "H"), data.draw(sides(tw), "W")
        kh, kw = data.draw(filter_length(h), "KH"), data.draw(filter_length(w), "KW")
        mode = data.draw(st.sampled_from(MODES), "mode")
    else:  # one kernel per mode, drawn once per run (kernel_cases); the examples vary the image
        config, kh, kw, mode, _, _ = data.draw(st.sampled_from(kernel_cases(
            ("separable", variant, dtype), separable_config(variant),
            lambda c, kh, kw, mode: c is None or _fits(dtype)(c, kh, kw, mode))), "kernel")
        th, tw = (config or preset(k06_separable_fused.RUNG)).tile()
        h, w = data.draw(sides(th), "H"), data.draw(sides(tw), "W")
    assume(h * w * (kh + kw) <= 1500 or not SIMULATOR)
    cval = data.draw(st.sampled_from([0.0, 1.5, -0.1]), "cval")
    if config is not None:
        spec = specialise(config, kh, kw, mode_of(mode))
        assume(spec.smem_bytes(np.dtype(dtype).itemsize) <= spec.MAX_STATIC_SMEM)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    image = rng.standard_normal((h, w)).astype(dtype)
    wy, wx = rng.standard_normal(kh).astype(dtype), rng.standard_normal(kw).astype(dtype)
    out = poisoned((h, w), dtype)
    got = correlate_separable(image, wy, wx, mode=mode, cval=cval, out=out, variant=variant, config=config)
    assert got is out
    ref, bound = correlate_separable_reference(image, wy, wx, mode, cval)
    note(repr(_ok(out.copy_to_host(), ref, bound, f"{variant} image{image.shape} KH={kh} KW={kw} {mode}")))


@pytest.mark.parametrize("variant", SEPARABLE_VARIANTS)
@pytest.mark.parametrize("mode", MODES)
def test_separable_is_correlate2d_of_the_outer_product(mode, variant):
    """Each variant against correlate2d with the outer product (k03), every mode."""
    rng = np.random.default_rng(8)
    image = rng.standard_normal((6, 7))
    wy, wx = rng.standard_normal(4), rng.standard_normal(3)
    full = correlate2d(image, np.outer(wy, wx), mode=mode, cval=-0.75)
    got = correlate_separable(image, wy, wx, mode=mode, cval=-0.75, variant=variant)
    np.testing.assert_allclose(got, full, rtol=1e-12, atol=1e-12, err_msg=f"{variant} {mode}")


def test_separable_default_and_fallback():
    """variant=None is the fused kernel; filters too long for its shared memory fall
    back to the two-pass path; naming the fused kernel raises instead."""
    assert BEST_SEPARABLE_VARIANT == "k06_separable_fused" and SEPARABLE_VARIANTS[0] == "two_pass"
    image = np.array([[1.0, -2.0]], np.float32)
    rng = np.random.default_rng(3)
    k = 120  # a 120 + 120-tap patch does not fit 48 KiB with any tile
    wy, wx = rng.standard_normal(k).astype(np.float32), rng.standard_normal(k).astype(np.float32)
    with pytest.raises(ConfigError):
        specialise(preset(k06_separable_fused.RUNG), k, k, Mode.REFLECT).check_smem(np.float32)
    got = correlate_separable(image, wy, wx, mode="wrap")
    ref, bound = correlate_separable_reference(image, wy, wx, "wrap")
    _ok(got, ref, bound, "fallback")
    with pytest.raises(ConfigError, match=r"wy, wx: 120- and 120-tap float32 filters do not fit k06"):
        correlate_separable(image, wy, wx, variant="k06_separable_fused")


def test_device_weights_and_streams():
    rng = np.random.default_rng(6)
    image = rng.standard_normal((5, 6)).astype(np.float32)
    wy, wx = rng.standard_normal(3).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    stream = cuda.stream()
    for variant in SEPARABLE_VARIANTS:  # device wy with mode constant: two_pass reads Σwy back
        got = correlate_separable(cuda.to_device(image), cuda.to_device(wy), cuda.to_device(wx),
                                  mode="constant", cval=2.0, variant=variant, stream=stream)
        stream.synchronize()
        assert not isinstance(got, np.ndarray)
        ref, bound = correlate_separable_reference(image, wy, wx, "constant", 2.0)
        _ok(got.copy_to_host(), ref, bound, variant)
    got = correlate1d(cuda.to_device(image), cuda.to_device(wy), axis=0, mode="nearest")
    ref, bound = correlate1d_reference(image, wy, 0, "nearest")
    _ok(got.copy_to_host(), ref, bound, "correlate1d device")


def test_empty_images():
    for shape in [(0, 4), (3, 0)]:
        img = np.ones(shape, np.float32)
        assert correlate1d(img, np.ones(3, np.float32), axis=0).shape == shape
        for variant in SEPARABLE_VARIANTS:
            got = correlate_separable(img, np.ones(2, np.float32), np.ones(3, np.float32), variant=variant)
            assert got.shape == shape and got.dtype == np.float32


# --- k04 / k05: the filter compiled in ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", CONSTANT_FILTER_VARIANTS)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_constant_filter_rungs_match_reference(variant, dtype, data):
    if SIMULATOR:
        config = data.draw(config_strategy(variant), "config")  # test_conv2d's strategies
        th, tw = config.tile()
        h, w = data.draw(sides(th), "H"), data.draw(sides(tw), "W")
        kh, kw = data.draw(filter_length(h), "KH"), data.draw(filter_length(w), "KW")
        mode = data.draw(st.sampled_from(MODES), "mode")
        convolve = data.draw(st.booleans(), "convolve")
        wseed = None
    else:  # the weights are compiled in: one filter per mode, drawn once per run (kernel_cases)
        config, kh, kw, mode, convolve, wseed = data.draw(st.sampled_from(kernel_cases(
            ("constant filter", variant, dtype), config_strategy(variant), _fits(dtype))), "kernel")
        th, tw = config.tile()
        h, w = data.draw(sides(th), "H"), data.draw(sides(tw), "W")
    assume(h * w * kh * kw <= 3000 or not SIMULATOR)
    cval = data.draw(st.sampled_from([0.0, 1.5, -0.1]), "cval")
    spec = specialise(config, kh, kw, mode_of(mode))
    assume(spec.smem_bytes(np.dtype(dtype).itemsize) <= spec.MAX_STATIC_SMEM)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    image = rng.standard_normal((h, w)).astype(dtype)
    weights = np.random.default_rng(wseed if wseed is not None else rng).standard_normal((kh, kw)).astype(dtype)
    out = poisoned((h, w), dtype)
    f = convolve2d if convolve else correlate2d
    assert f(image, weights, mode=mode, cval=cval, out=out, variant=variant, config=config) is out
    ref, bound = correlate2d_reference(image, weights, mode, cval, convolve=convolve)
    note(repr(_ok(out.copy_to_host(), ref, bound, f"{variant} image{image.shape} weights{weights.shape}")))


def interior_blocks(config, h, w, kh, kw):
    """Blocks of k05/k06 whose patch lies inside the image (their loader's fast path)."""
    th, tw = config.tile()
    return sum(r * th - kh // 2 >= 0 and r * th - kh // 2 + th + kh - 1 <= h
               and c * tw - kw // 2 >= 0 and c * tw - kw // 2 + tw + kw - 1 <= w
               for r in range(-(-h // th)) for c in range(-(-w // tw)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", MODES)
def test_interior_and_edge_blocks(mode, dtype):
    """k05 and k06 load interior blocks without boundary mapping and edge blocks with
    it: an image several tiles wide exercises both (the property tests' tiny images
    are mostly edge)."""
    rng = np.random.default_rng(17)
    h, w = (20, 23) if SIMULATOR else (300, 1000)
    image = rng.standard_normal((h, w)).astype(dtype)
    wy, wx = rng.standard_normal(3).astype(dtype), rng.standard_normal(4).astype(dtype)
    cfg5 = preset(k05_register_tile_2d.RUNG)
    assert interior_blocks(cfg5, h, w, 3, 4) >= 2
    weights = np.outer(wy, wx)
    ref, bound = correlate2d_reference(image, weights, mode, 0.5)
    _ok(correlate2d(image, weights, mode=mode, cval=0.5, variant="k05_register_tile_2d"), ref, bound, "k05")
    assert interior_blocks(preset(k06_separable_fused.RUNG), h, w, 3, 4) >= 2
    ref, bound = correlate_separable_reference(image, wy, wx, mode, 0.5)
    _ok(correlate_separable(image, wy, wx, mode=mode, cval=0.5), ref, bound, "k06")


@pytest.mark.parametrize("variant", CONSTANT_FILTER_VARIANTS)
def test_rows_past_the_hand_unrolled_ones(variant):
    """k04 unrolls 9 filter rows by hand, k05 12 patch rows: longer filters take the
    loop for the rest (weights loaded from constant memory, not folded)."""
    rng = np.random.default_rng(1)
    image = rng.standard_normal((4, 3))
    weights = rng.standard_normal((19, 2))  # k04: 19 > 9 rows; k05 (sim ry=3): 21 > 12 patch rows
    for convolve in (False, True):
        got = (convolve2d if convolve else correlate2d)(image, weights, mode="mirror", variant=variant)
        ref, bound = correlate2d_reference(image, weights, "mirror", convolve=convolve)
        _ok(got, ref, bound, f"{variant} convolve={convolve}")


@pytest.mark.parametrize("variant", CONSTANT_FILTER_VARIANTS)
def test_one_kernel_per_distinct_filter(variant):
    """The filter's bytes are the cache key: the same values again reuse the kernel
    (also from a device array, or a non-contiguous view), new values compile another.  (The
    small "sim" tile on a GPU too: the cache's behaviour does not depend on the tile.)"""
    cache = _common._filter_kernel
    rng = np.random.default_rng(2)
    image = rng.standard_normal((3, 4)).astype(np.float32)
    weights = rng.standard_normal((2, 3)).astype(np.float32)
    correlate2d(image, weights, variant=variant, config=SEMANTICS_CONFIG)
    before = cache.cache_info()
    correlate2d(image, weights.copy(), variant=variant, config=SEMANTICS_CONFIG)
    correlate2d(image, cuda.to_device(weights), variant=variant, config=SEMANTICS_CONFIG)  # copied back to the host
    strided = np.zeros((2, 6), np.float32)
    strided[:, ::2] = weights
    correlate2d(image, strided[:, ::2], variant=variant, config=SEMANTICS_CONFIG)
    after = cache.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (3, 0)
    correlate2d(image, weights + np.float32(1), variant=variant, config=SEMANTICS_CONFIG)
    assert cache.cache_info().misses == after.misses + 1
    assert cache.cache_info().maxsize == _common.FILTER_KERNEL_CACHE


def test_separable_float32_preset_chain():
    """On a GPU, float32 without a config tries the larger float32 tile first and keeps the
    default when the filters do not fit it (beyond 9 + 9 taps); float64, a given config, and
    the simulator use the resolved config alone."""
    from simt_tiles.kernels.conv2d import (
        SEPARABLE_FLOAT32_PRESET,
        _first_fitting,
        separable_configs,
    )

    rung = SEPARABLE_RUNGS["k06_separable_fused"]
    default, fast = rung.presets["default"], rung.presets[SEPARABLE_FLOAT32_PRESET]
    assert separable_configs(rung, default, None, np.float32, simulator=False) == [fast, default]
    assert separable_configs(rung, default, None, np.float64, simulator=False) == [default]
    assert separable_configs(rung, default, "default", np.float32, simulator=False) == [default]
    assert separable_configs(rung, default, None, np.float32, simulator=True) == [default]
    chain = [fast, default]
    assert _first_fitting(chain, 7, 7, Mode.REFLECT, np.float32).tile() == fast.tile()
    assert _first_fitting(chain, 11, 11, Mode.REFLECT, np.float32).tile() == default.tile()
    with pytest.raises(ConfigError):
        fast_only = specialise(fast, 7, 7, Mode.REFLECT)
        fast_only.check_smem(np.float64)


def test_constant_filter_rungs_are_opt_in():
    assert BEST_VARIANT == "k10_runtime_weights"  # filter values at run time: no compile per filter
    assert set(CONSTANT_FILTER_VARIANTS) <= set(CONV2D_VARIANTS)
    assert CONV2D_VARIANTS[3:5] == ("k04_constant_filter", "k05_register_tile_2d")


def test_public_names():
    assert simt_tiles.correlate1d is correlate1d
    assert simt_tiles.correlate_separable is correlate_separable
    assert simt_tiles.SEPARABLE_VARIANTS == SEPARABLE_VARIANTS
    assert {"correlate1d", "correlate_separable", "SEPARABLE_VARIANTS"} <= set(simt_tiles.__all__)


# --- bad input ---------------------------------------------------------------------------

f32 = np.float32


def _ones(*shape, dtype=f32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(weights=_ones(3, 3)), ValueError, r"weights: expected a 1-D array; got 2-D with shape \(3, 3\)"),
        (dict(weights=np.float32(1)), TypeError, r"weights: expected a NumPy array or a CUDA array"),
        (dict(weights=_ones(3, dtype=np.complex64)), TypeError,
         r"weights: expected dtype float32, float64 or an integer dtype .*; got complex64"),
        (dict(weights=_ones(0)), ValueError, r"weights: expected a non-empty 1-D array; got shape \(0,\)"),
        (dict(axis=2), ValueError, r"axis: expected -2, -1, 0 or 1 for a 2-D image; got 2"),
        (dict(axis=-3), ValueError, r"axis: expected -2, -1, 0 or 1 for a 2-D image; got -3"),
        (dict(axis=1.0), TypeError, r"axis: expected an int; got float 1.0"),
        (dict(axis=True), TypeError, r"axis: expected an int; got bool True"),
        (dict(image=np.zeros((), np.float32)), ValueError,
         r"image: expected an array of at least 1 dimension; got 0-D"),  # (1-D and N-D: test_conv2d_volumes.py)
        (dict(mode="grid-wrap"), ValueError, r"mode: expected one of .*; got 'grid-wrap'"),
        (dict(cval=None), TypeError, r"cval: expected a real number; got NoneType None"),
        (dict(variant="k06_separable_fused"), ValueError, r"variant: expected one of \('k01_naive'"),
        (dict(out=np.empty((3, 4), np.float16)), TypeError, r"out: expected dtype float32, float64 or an integer .*; got float16"),
    ],
)
def test_correlate1d_bad_input(kwargs, exc, pattern):
    args = dict(image=_ones(3, 4), weights=_ones(3))
    args.update(kwargs)
    with pytest.raises(exc, match=pattern):
        correlate1d(**args)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(wy=_ones(2, 2)), ValueError, r"wy: expected a 1-D array; got 2-D with shape \(2, 2\)"),
        (dict(wx=_ones(3, dtype=np.complex64)), TypeError,
         r"wx: expected dtype float32, float64 or an integer dtype .*; got complex64"),
        (dict(wy=_ones(0)), ValueError, r"wy: expected a non-empty 1-D array; got shape \(0,\)"),
        (dict(wx=_ones(0)), ValueError, r"wx: expected a non-empty 1-D array; got shape \(0,\)"),
        (dict(variant="k03_register_blocked"), ValueError,
         r"variant: expected one of \('two_pass', 'k06_separable_fused'\) or None; got 'k03_register_blocked'"),
        (dict(config=k04_constant_filter.Config()), TypeError,
         r"config: expected a preset name or a .*k06_separable_fused.Config"),
        (dict(variant="two_pass", config=k06_separable_fused.Config()), TypeError,
         r"config: expected a preset name or a .*k03_register_blocked.Config"),
        (dict(config="huge"), ValueError, r"config: k06_separable_fused has no preset 'huge'"),
        (dict(mode="reflekt"), ValueError, r"mode: expected one of"),
        (dict(image=_ones(2, 3, dtype=np.uint64)), TypeError, r"image: expected dtype float32, float64 or an integer dtype .*; got uint64"),
    ],
)
def test_correlate_separable_bad_input(kwargs, exc, pattern):
    args = dict(image=_ones(3, 4), wy=_ones(3), wx=_ones(2))
    args.update(kwargs)
    with pytest.raises(exc, match=pattern):
        correlate_separable(**args)


def test_bad_configs():
    with pytest.raises(ConfigError, match=r"Config.ry = 0: expected a positive int"):
        k05_register_tile_2d.Config(ry=0)
    with pytest.raises(ConfigError, match=r"static shared memory for float32"):
        k06_separable_fused.Config(kh=150, kw=150)
    with pytest.raises(ValueError, match=r"weights: expected a 3x3 float32 array"):
        k04_constant_filter.make_kernel(specialise(k04_constant_filter.Config(), 3, 3, Mode.WRAP), np.dtype(np.float32),
                                        np.ones((2, 3), np.float32))


# --- the GPU compile gate -----------------------------------------------------------------

#: scripts/test ran the gate before pytest (test_compile_gate checks its log) and kept its PTX there:
#: the rows it built (each preset in its own mode; k04's and k05's default float32) are not built again
GATE_DIR = os.environ.get("SIMT_TILES_GATE_CUBINS") if os.environ.get("SIMT_TILES_GATE_LOG") else None
FOLDED = ("k04_constant_filter", "k05_register_tile_2d")

GATE = """
    import re, sys, tempfile
    from pathlib import Path
    import numpy as np
    from simt_tiles import compile_gate as g
    from simt_tiles.kernels.conv2d import RUNGS, SEPARABLE_RUNGS
    from simt_tiles.kernels.conv2d._common import Mode, specialise
    gate = sys.argv[1] if len(sys.argv) > 1 else None
    asm = g.find_assembler()
    r = SEPARABLE_RUNGS["k06_separable_fused"]
    rows = g.compile_configs([(r, f"{name}-{mode}", specialise(cfg, cfg.kh, cfg.kw, mode), np.float32)
                              for name, cfg in r.presets.items() for mode in Mode
                              if not gate or mode != cfg.mode or g.quick_skips("conv2d", name)], "conv2d", asm)
    with tempfile.TemporaryDirectory() as tmp:
        # k04 and k05 default presets: every tap's weight is an FMA immediate
        k05 = RUNGS["k05_register_tile_2d"].presets["default"]  # KH·KW taps for each of RY·RX outputs
        for v, taps in [("k04_constant_filter", 25 * 3),
                        ("k05_register_tile_2d", k05.kh * k05.kw * k05.ry * k05.rx)]:
            ptx_file = Path(gate or tmp) / f"{v}-default-float32.ptx"
            if not ptx_file.exists():
                ptx_file = Path(tmp) / ptx_file.name
                rows.append(g.compile_one(RUNGS[v], "default", np.float32, asm, Path(tmp), "conv2d"))
            ptx = ptx_file.read_text()
            imm = len(re.findall(r"fma\\.rn\\.f32\\s+%f\\d+, %f\\d+, 0f[0-9A-F]{8}, (%f\\d+|0f0{8});", ptx))
            print(v, "immediate-weight FMAs:", imm, "ld.const:", ptx.count("ld.const"))
            assert imm == taps and "ld.const" not in ptx, (v, imm)
    print(g.format_table(rows))
    sys.exit(0 if all(row.ok for row in rows) else 1)
"""


@pytest.mark.long
@pytest.mark.skipif(os.environ.get("SIMT_TILES_HYPOTHESIS_PROFILE") == "ci",
                    reason="~20 s of compiles on 2 cores: the full profile (scripts/test --full) and the GPU pass run it")
def test_fused_kernel_compiles_every_mode_and_weights_fold():
    gate = GATE_DIR if GATE_DIR and os.path.isdir(GATE_DIR) else None
    reused = [v for v in FOLDED if gate and os.path.exists(os.path.join(gate, f"{v}-default-float32.ptx"))]
    proc = run_real_target(args=["-c", textwrap.dedent(GATE), *([gate] if gate else [])])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from simt_tiles.compile_gate import quick_skips

    names = SEPARABLE_RUNGS["k06_separable_fused"].presets  # sim, default, fast_float32
    # every preset in every mode, less the gate's own row of each preset it built (the quick gate: not "sim")
    built = sum(len(MODES) - (1 if gate and not quick_skips("conv2d", n) else 0) for n in names) \
        + len(FOLDED) - len(reused)
    assert proc.stdout.count("  ok  ") == built, proc.stdout
    assert all(f"{v} immediate-weight FMAs:" in proc.stdout for v in FOLDED), proc.stdout


def test_compile_gate_builds_the_new_rungs():
    from simt_tiles.compile_gate import ladders

    conv = ladders()["conv2d"]
    assert {"k04_constant_filter", "k05_register_tile_2d", "k06_separable_fused"} <= set(conv)
    assert SEPARABLE_RUNGS["k06_separable_fused"] is conv["k06_separable_fused"]


# --- larger problems on a GPU --------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_larger_images_on_gpu(mode):
    """The separable and constant-filter rungs at ~1000² images (several tiles each way, ragged). Each
    mode compiles every rung that takes the filter's values in (70-110 s a mode on the H200 pass's
    cores): the gpu profile builds the rungs with variant=None beyond reflect and constant, the
    full profile all of them."""
    rng = np.random.default_rng(21)
    every = PROFILE == "full" or mode in ("reflect", "constant")
    # one filter for both images: the rungs that compile its values in compile once per mode
    wy, wx = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    for (h, w) in [(1000, 1000), (1031, 997)]:
        image = rng.standard_normal((h, w)).astype(np.float32)
        ref, bound = correlate_separable_reference(image, wy, wx, mode, 0.5)
        for variant in (*SEPARABLE_VARIANTS, None) if every else (None,):
            got = correlate_separable(image, wy, wx, mode=mode, cval=0.5, variant=variant)
            _ok(got, ref, bound, f"{variant} {image.shape}")
        for axis, wt in [(0, wy), (1, wx)]:
            ref1, bound1 = correlate1d_reference(image, wt, axis, mode, 0.5)
            _ok(correlate1d(image, wt, axis=axis, mode=mode, cval=0.5), ref1, bound1, f"axis {axis}")
        weights = np.outer(wy, wx).astype(np.float32)
        ref2, bound2 = correlate2d_reference(image, weights, mode, 0.5)
        for variant in CONSTANT_FILTER_VARIANTS if every else ():
            _ok(correlate2d(image, weights, mode=mode, cval=0.5, variant=variant), ref2, bound2, variant)
        _ok(correlate2d(image, weights, mode=mode, cval=0.5), ref2, bound2, "variant=None")


@pytest.mark.gpu
def test_scipy_agrees_on_gpu_sizes():
    rng = np.random.default_rng(22)
    image = rng.standard_normal((1000, 1000))
    w7 = rng.standard_normal(7)
    for mode in MODES:
        np.testing.assert_allclose(correlate1d(image, w7, axis=0, mode=mode),
                                   ndi.correlate1d(image, w7, axis=0, mode=mode), rtol=0, atol=1e-12)
        expected = ndi.correlate(image, np.outer(w7, w7[::-1]), mode=mode)
        np.testing.assert_allclose(correlate_separable(image, w7, w7[::-1].copy(), mode=mode), expected,
                                   rtol=0, atol=1e-11)


def test_two_pass_with_no_counted_wy_tap_and_a_nan_cval_is_zero_as_scipy():
    """wy all zero: no tap of the 2-D filter counts, so scipy gives 0 everywhere whatever cval; the two-pass
    composition's row pass used cval·Σwy = NaN·0 for its outside columns (NaN borders)."""
    img = np.random.default_rng(10).standard_normal((5, 6))
    wy, wx = np.zeros(3), np.array([0.3, -1.0, 2.0])
    for cval in (np.nan, np.inf):
        got = simt_tiles.correlate_separable(img, wy, wx, mode="constant", cval=cval, variant="two_pass")
        np.testing.assert_array_equal(got, ndi.correlate(img, np.outer(wy, wx), mode="constant", cval=cval))


@pytest.mark.parametrize("variant", [None, "two_pass"])
def test_an_infinite_cval_with_wy_of_both_signs_is_scipys(variant):
    """cval ±inf and wy of both signs: the 2-D filter's corner windows add inf − inf = NaN; the two-pass
    composition's row pass padded with cval·Σwy (±inf) and gave ±inf there."""
    img = np.arange(30.0).reshape(5, 6)
    for wy, wx in (([1.0, -1.0, 0.5], [1.0, 2.0, 1.0]), ([2.0, 0.0, -1.0], [1.0, 0.0, 1.0])):
        for cval in (np.inf, -np.inf):
            got = simt_tiles.correlate_separable(img, np.array(wy), np.array(wx), mode="constant", cval=cval,
                                                 variant=variant)
            np.testing.assert_array_equal(got, ndi.correlate(img, np.outer(wy, wx), mode="constant", cval=cval))


def test_origin_error_names_each_filter():
    x = np.ones((5, 5), np.float32)
    with pytest.raises(ValueError, match=r"^origin: expected -\(len\(wy\) // 2\) <= origin\[0\] <= \(len\(wy\) - 1\)"):
        simt_tiles.correlate_separable(x, np.ones(2), np.ones(3), origin=(1, 0))
    with pytest.raises(ValueError, match=r"^origin: expected -\(len\(wx\) // 2\) <= origin\[1\]"):
        simt_tiles.correlate_separable(x, np.ones(3), np.ones(2), origin=(0, 1))
