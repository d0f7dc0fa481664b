"""The conv2d ladder against scipy.ndimage.correlate / convolve semantics.

* The long-double NumPy reference (simt_tiles.kernels.conv2d.reference) is checked
  against scipy.ndimage itself over ragged shapes, every mode, odd and even
  filter sizes and filters larger than the image.
* Every rung is checked against that reference: both dtypes, random launch
  configs, NaN-poisoned outputs, error bound γ_n·Σ|w|·|x| (n = KH·KW).
* scipy's n-D path misreads some "reflect" coordinates far outside the image
  (see the conv2d package docstring); there the ladder follows scipy's 1-D
  path, and a test shows both.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from numba import cuda  # module level: the simulator swaps this global inside kernels

import simt_tiles
from simt_tiles.bounds import check_within
from simt_tiles.kernels.conv2d import (
    BEST_VARIANT,
    CONV2D_VARIANTS,
    FALLBACK_VARIANT,
    MODES,
    RUNGS,
    convolve2d,
    correlate2d,
    k01_naive,
    k02_halo_tiled,
    k03_register_blocked,
    k04_constant_filter,
    k05_register_tile_2d,
    k07_vectorized,
    k08_prefetched,
    k09_async_copy,
    k10_runtime_weights,
    k11_large_filter,
)
from simt_tiles.kernels.conv2d._args import mode_of
from simt_tiles.kernels.conv2d._common import Mode, anchors, extend_index, specialise
from simt_tiles.kernels.conv2d.reference import correlate2d_reference, extend_indices
from simt_tiles.runtime import SIMULATOR, ConfigError, TileConfig

from .common import BOTH_OPS, DTYPES, SEMANTICS_CONFIG, configs, kernel_cases, poisoned
from .gate_subprocess import run_real_target
from .profiles import PROFILE, examples

#: examples per property test (the simulator runs every thread in Python: keep shapes tiny); on the
#: GPU the hypothesis profile's — each example compiles a kernel with its filter unrolled (up to
#: 40 × 40 taps): 20 examples of one k07–k09 test outran a 250 s device call (session 6)
EXAMPLES = examples(50) if SIMULATOR else settings.default.max_examples
#: largest filter side drawn (the simulator runs H·W·KH·KW taps in Python)
KMAX = 13 if SIMULATOR else 17  # GPU: each drawn filter compiles (unrolled); 40-tap sides: test_larger_images_on_gpu
#: largest H·W·KH·KW drawn (the long-double reference costs that much too)
MAX_WORK = 5000 if SIMULATOR else 3_000_000


# --- strategies --------------------------------------------------------------

if SIMULATOR:
    CONFIG_STRATEGIES = {
        "k01_naive": st.builds(k01_naive.Config, block_x=st.integers(1, 6), block_y=st.integers(1, 6)),
        "k02_halo_tiled": st.builds(k02_halo_tiled.Config, tile_w=st.integers(1, 5), tile_h=st.integers(1, 5)),
        "k03_register_blocked": st.builds(k03_register_blocked.Config, block_x=st.integers(1, 4),
                                          block_y=st.integers(1, 3), rx=st.integers(1, 4)),
        "k04_constant_filter": st.builds(k04_constant_filter.Config, block_x=st.integers(1, 4),
                                         block_y=st.integers(1, 3), rx=st.integers(1, 4)),
        "k05_register_tile_2d": st.builds(k05_register_tile_2d.Config, block_x=st.integers(1, 3),
                                          block_y=st.integers(1, 3), rx=st.integers(1, 3),
                                          ry=st.integers(1, 3)),
        "k07_vectorized": st.builds(k07_vectorized.Config, block_x=st.integers(1, 2),
                                    block_y=st.integers(1, 3), rx=st.just(4), ry=st.integers(1, 2)),
        "k08_prefetched": st.builds(k08_prefetched.Config, block_x=st.integers(1, 2),
                                    block_y=st.integers(1, 2), rx=st.just(4), ry=st.integers(1, 2),
                                    tiles=st.integers(1, 3)),
        "k09_async_copy": st.builds(k09_async_copy.Config, block_x=st.integers(1, 2),
                                    block_y=st.integers(1, 2), rx=st.just(4), ry=st.integers(1, 2),
                                    tiles=st.integers(1, 3)),
        "k10_runtime_weights": st.builds(k10_runtime_weights.Config, block_x=st.integers(1, 3),
                                         block_y=st.integers(1, 3), rx=st.integers(1, 3),
                                         ry=st.integers(1, 3)),
        "k11_large_filter": st.builds(k11_large_filter.Config, block_x=st.integers(1, 3), block_y=st.integers(1, 3),
                                      rx=st.sampled_from([1, 2, 3, 4]), ry=st.integers(1, 3), kc=st.integers(1, 5)),
    }
else:
    CONFIG_STRATEGIES = {
        "k01_naive": st.builds(k01_naive.Config, block_x=st.sampled_from([1, 8, 16, 32, 64]),
                               block_y=st.sampled_from([1, 4, 8, 16])),
        "k02_halo_tiled": st.builds(k02_halo_tiled.Config, tile_w=st.sampled_from([8, 16, 32]),
                                    tile_h=st.sampled_from([1, 4, 8, 16])),
        "k03_register_blocked": st.builds(k03_register_blocked.Config, block_x=st.sampled_from([8, 16, 32]),
                                          block_y=st.sampled_from([1, 4, 8]), rx=st.integers(1, 5)),
        "k04_constant_filter": st.builds(k04_constant_filter.Config, block_x=st.sampled_from([8, 16, 32]),
                                         block_y=st.sampled_from([1, 4, 8]), rx=st.integers(1, 5)),
        "k05_register_tile_2d": st.builds(k05_register_tile_2d.Config, block_x=st.sampled_from([8, 16, 32]),
                                          block_y=st.sampled_from([1, 4, 8]), rx=st.integers(1, 5),
                                          ry=st.integers(1, 4)),
        "k07_vectorized": st.builds(k07_vectorized.Config, block_x=st.sampled_from([8, 16, 32]),
                                    block_y=st.sampled_from([1, 4, 8]), rx=st.sampled_from([4, 8]),
                                    ry=st.integers(1, 4), min_blocks=st.sampled_from([1, 8])),
        "k08_prefetched": st.builds(k08_prefetched.Config, block_x=st.sampled_from([8, 16, 32]),
                                    block_y=st.sampled_from([1, 4, 8]), rx=st.sampled_from([4, 8]),
                                    ry=st.integers(1, 4), min_blocks=st.sampled_from([1, 4]),
                                    tiles=st.integers(1, 5)),
        "k09_async_copy": st.builds(k09_async_copy.Config, block_x=st.sampled_from([8, 16, 32]),
                                    block_y=st.sampled_from([1, 4, 8]), rx=st.sampled_from([4, 8]),
                                    ry=st.integers(1, 4), min_blocks=st.sampled_from([1, 4]),
                                    tiles=st.integers(1, 5)),
        "k10_runtime_weights": st.builds(k10_runtime_weights.Config, block_x=st.sampled_from([8, 16, 32]),
                                         block_y=st.sampled_from([1, 4, 8]), rx=st.integers(1, 5),
                                         ry=st.integers(1, 4), min_blocks=st.sampled_from([1, 12])),
        "k11_large_filter": st.builds(k11_large_filter.Config, block_x=st.sampled_from([8, 16]),
                                      block_y=st.sampled_from([1, 4, 8]), rx=st.sampled_from([3, 4, 8]),
                                      ry=st.integers(1, 6), kc=st.sampled_from([5, 8, 16]),
                                      min_blocks=st.sampled_from([1, 4])),
    }


def config_strategy(variant: str):
    """The rung's preset for this backend, or a random valid config (its kh/kw/mode
    are left at their defaults: the launcher must replace them); on a GPU from a fixed pool."""
    return configs(RUNGS[variant], CONFIG_STRATEGIES[variant])


def output_tile(config) -> tuple[int, int]:
    """(rows, columns) of the output one block covers."""
    if hasattr(config, "tile"):  # k03 onwards: rx (and ry) outputs per thread
        return config.tile()
    bx, by = config.block()
    return by, bx


def _fits(dtype):
    """A :func:`kernel_cases` predicate: the config's shared memory holds the filter's halo."""
    def fits(config, kh, kw, mode):
        try:  # a halo over 48 KiB in float32 already fails the specialised config's own check
            spec = specialise(config, kh, kw, mode_of(mode))
        except ConfigError:
            return False
        return spec.smem_bytes(np.dtype(dtype).itemsize) <= spec.MAX_STATIC_SMEM
    return fits


def image_sides(tile: int) -> list[int]:
    """Sides that break tiled code: 1, small primes, around one and two tiles."""
    sides = {1, 2, 3, 5, 7, tile - 1, tile, tile + 1, 2 * tile + 1}
    if not SIMULATOR:
        sides |= {31, 97, 257}
    return sorted(s for s in sides if s >= 1 and (s <= 11 or not SIMULATOR))


def filter_side(n: int):
    """Small sides (odd and even), or larger than the image side n — up to
    4n + 2, far enough that reflect/mirror must fold more than once."""
    return st.one_of(st.integers(1, 5), st.sampled_from([n + 1, 2 * n + 1, 4 * n + 2])).map(
        lambda k: min(k, KMAX))


def scipy_nd_misreads(n: int, k: int, anchor: int) -> bool:
    """Whether scipy's n-D correlate may misread a "reflect" coordinate on an axis
    of length n with a filter of size k centred at ``anchor``: it maps p < −2n with
    p ≡ 0 (mod 2n) to index −1 (NI_InitFilterOffsets) and reads the element before
    the line; its 1-D path folds them.  (A sound over-approximation: a sweep of
    6000 random cases found no mismatch outside it.)"""
    lo, hi = -anchor, n - 1 + k - 1 - anchor
    return any(p < -2 * n and p % (2 * n) == 0 for p in range(lo, min(hi, -1) + 1))


def _scipy(image, weights, mode, cval, convolve):
    f = ndi.convolve if convolve else ndi.correlate
    return f(image.astype(np.float64), weights.astype(np.float64), mode=mode, cval=cval)


def _run(variant, image, weights, mode, cval, convolve, config=None):
    """The ladder's result, computed into a NaN-poisoned device buffer."""
    out = poisoned(image.shape, image.dtype)
    f = convolve2d if convolve else correlate2d
    got = f(image, weights, mode=mode, cval=cval, out=out, variant=variant, config=config)
    assert got is out
    return out.copy_to_host()


def _assert_ok(got, image, weights, mode, cval, convolve):
    ref, bound = correlate2d_reference(image, weights, mode, cval, convolve=convolve)
    chk = check_within(got, ref, bound)
    assert chk.passed, (f"{chk} for image{image.shape} weights{weights.shape} {image.dtype} "
                        f"mode={mode} cval={cval} convolve={convolve}")
    return chk


# --- the ladder's shape ---------------------------------------------------------


def test_variants_are_in_ladder_order_and_have_both_presets():
    assert CONV2D_VARIANTS == ("k01_naive", "k02_halo_tiled", "k03_register_blocked",
                               "k04_constant_filter", "k05_register_tile_2d", "k07_vectorized",
                               "k08_prefetched", "k09_async_copy", "k10_runtime_weights", "k11_large_filter")
    assert BEST_VARIANT in CONV2D_VARIANTS and FALLBACK_VARIANT == "k01_naive"
    for v in CONV2D_VARIANTS:
        assert v in CONFIG_STRATEGIES, f"{v}: add a config strategy in tests/test_conv2d.py"
        assert {"sim", "default"} <= set(RUNGS[v].presets)
        for cfg in RUNGS[v].presets.values():
            assert isinstance(cfg, RUNGS[v].config_type) and isinstance(cfg, TileConfig)


@pytest.mark.skipif("correlate2d" not in simt_tiles.__all__,
                    reason="not exported yet: add correlate2d/convolve2d/CONV2D_VARIANTS to simt_tiles._PUBLIC")
def test_public_names():
    assert simt_tiles.correlate2d is correlate2d and simt_tiles.convolve2d is convolve2d
    assert simt_tiles.CONV2D_VARIANTS == CONV2D_VARIANTS


def test_modes():
    assert MODES == ("reflect", "constant", "nearest", "mirror", "wrap")
    assert [str(m) for m in Mode] == list(MODES) and f"{Mode.WRAP}" == "wrap"
    assert all(mode_of(name) == Mode[name.upper()] for name in MODES)


def test_extend_index_twins_agree():
    """The plain-Python mapping (the kernels' statements) and the vectorised one."""
    p = np.arange(-45, 46)
    for n in range(1, 7):
        for mode in MODES:
            py = [extend_index(int(q), n, mode_of(mode)) for q in p]
            np.testing.assert_array_equal(py, extend_indices(p, n, mode), err_msg=f"{mode} n={n}")


# --- the reference is scipy.ndimage ----------------------------------------------


@settings(max_examples=examples(300))
@given(data=st.data())
def test_reference_matches_scipy(data):
    h, w = data.draw(st.integers(1, 9), "H"), data.draw(st.integers(1, 9), "W")
    kh, kw = data.draw(filter_side(h), "KH"), data.draw(filter_side(w), "KW")
    mode = data.draw(st.sampled_from(MODES), "mode")
    convolve = data.draw(st.booleans(), "convolve")
    cval = data.draw(st.sampled_from([0.0, 1.5, -2.25]), "cval")
    ah, aw = anchors(kh, kw, flipped=convolve)
    assume(not (mode == "reflect" and (scipy_nd_misreads(h, kh, ah) or scipy_nd_misreads(w, kw, aw))))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    image, weights = rng.standard_normal((h, w)), rng.standard_normal((kh, kw))
    ref, bound = correlate2d_reference(image, weights, mode, cval, convolve=convolve)
    sp = _scipy(image, weights, mode, cval, convolve)
    # scipy works in float64: its own error is γ_n(2^-53)·Σ|w||x|, within the float64 bound
    assert check_within(sp, ref, bound).passed


@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
def test_scipy_nd_reflect_quirk_follows_the_1d_path(variant):
    """Image 1×2, filter 1×17 picking its first tap: out[0, 0] reads coordinate −8 =
    −4n.  Folding (period 2n = 4) maps it to index 0 and scipy's correlate1d
    agrees.  scipy 1.17's n-D correlate maps it to index −1 instead and reads
    whatever lies before the line (here memory before the array: garbage such
    as 1.6e-322), so it is not asserted on."""
    image = np.array([[10.0, 20.0]])
    weights = np.zeros((1, 17))
    weights[0, 0] = 1.0
    cval = -1.0
    got = _run(variant, image, weights, "reflect", cval, False, SEMANTICS_CONFIG)
    one_d = ndi.correlate1d(image, weights[0], axis=1, mode="reflect", cval=cval)
    np.testing.assert_array_equal(got, one_d)
    assert got[0, 0] == 10.0


@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
@pytest.mark.parametrize("ops", BOTH_OPS)
@pytest.mark.parametrize("mode", MODES)
def test_filters_much_larger_than_the_image_keep_folding(mode, ops, variant):
    """A 2×3 image under a 9×10 filter: reading up to 4 rows and 5 columns past the image,
    reflect and mirror fold at both ends of each axis (reflect: row −4 → −1 → 0, −2 → 1, −3 → 1,
    −4 → 0).  Rank-1 weights u·vᵀ make the 2-D filter two 1-D ones, so scipy's (correct)
    1-D path is the reference for every mode."""
    rng = np.random.default_rng(7)
    image = rng.standard_normal((2, 3))
    u, v = rng.standard_normal(9), rng.standard_normal(10)
    weights = np.outer(u, v)
    for convolve in ops:
        f1 = ndi.convolve1d if convolve else ndi.correlate1d
        expected = f1(f1(image, u, axis=0, mode=mode, cval=0.5), v, axis=1, mode=mode, cval=0.5)
        if mode == "constant":  # not separable: the second 1-D pass would pad with cval, not u·cval
            expected = None
        got = _run(variant, image, weights, mode, 0.5, convolve, SEMANTICS_CONFIG)
        _assert_ok(got, image, weights, mode, 0.5, convolve)
        if expected is not None:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"{variant} {convolve=}")


@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
@pytest.mark.parametrize("kh, kw", [(2, 2), (4, 1), (1, 6), (3, 4)])
def test_even_sizes_match_scipy(kh, kw, variant):
    """Even sizes: correlate centres at size//2, convolve (flipped) at (size−1)//2."""
    rng = np.random.default_rng(kh * 10 + kw)
    image = rng.standard_normal((5, 6))
    weights = rng.standard_normal((kh, kw))
    for convolve in (False, True):
        expected = _scipy(image, weights, "reflect", 0.0, convolve)
        got = _run(variant, image, weights, "reflect", 0.0, convolve, SEMANTICS_CONFIG)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"{variant} convolve={convolve}")


# --- every rung against the reference ------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_conv2d_matches_reference(variant, dtype, data):
    if SIMULATOR:
        config = data.draw(config_strategy(variant), label="config")
        th, tw = output_tile(config)
        h = data.draw(st.sampled_from(image_sides(th)), "H")
        w = data.draw(st.sampled_from(image_sides(tw)), "W")
        kh, kw = data.draw(filter_side(h), "KH"), data.draw(filter_side(w), "KW")
        mode = data.draw(st.sampled_from(MODES), "mode")
        convolve = data.draw(st.booleans(), "convolve")
        wseed = None
    else:  # one kernel per mode (drawn once per run: kernel_cases); the examples vary the image
        config, kh, kw, mode, convolve, wseed = data.draw(st.sampled_from(
            kernel_cases(("conv2d", variant, dtype), config_strategy(variant), _fits(dtype))), "kernel")
        th, tw = output_tile(config)
        h = data.draw(st.sampled_from(image_sides(th)), "H")
        w = data.draw(st.sampled_from(image_sides(tw)), "W")
    assume(h * w * kh * kw <= MAX_WORK)
    cval = data.draw(st.sampled_from([0.0, 1.5, -0.1]), "cval")  # -0.1: rounded to float32
    spec = specialise(config, kh, kw, mode_of(mode))
    assume(spec.smem_bytes(np.dtype(dtype).itemsize) <= spec.MAX_STATIC_SMEM)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    image = rng.standard_normal((h, w)).astype(dtype)
    weights = np.random.default_rng(wseed if wseed is not None else rng).standard_normal((kh, kw)).astype(dtype)
    got = _run(variant, image, weights, mode, cval, convolve, config=config)
    assert got.dtype == dtype
    note(repr(_assert_ok(got, image, weights, mode, cval, convolve)))


#: (image, filter): a common filter, an even one, one taller than the image (reflect folds it)
LARGE_CASES = [((257, 1031), (7, 7)), ((1000, 97), (4, 6)), ((31, 5), (40, 3))]
LARGE_RUNGS = (*CONV2D_VARIANTS, None)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", LARGE_RUNGS)
@pytest.mark.parametrize("mode", MODES)
def test_larger_images_on_gpu(mode, variant):
    """Every rung (and the default) in every mode on a large image, each (rung, mode) with one of
    :data:`LARGE_CASES` in turn: every rung meets each filter, every mode each filter — 50
    compilations, not 150 (each compiles seconds), on as many workers as are free."""
    (h, w), (kh, kw) = LARGE_CASES[(LARGE_RUNGS.index(variant) + MODES.index(mode)) % len(LARGE_CASES)]
    rng = np.random.default_rng(11)
    image = rng.standard_normal((h, w)).astype(np.float32)
    weights = rng.standard_normal((kh, kw)).astype(np.float32)
    ref, bound = correlate2d_reference(image, weights, mode, 0.25, convolve=True)
    try:
        got = _run(variant, image, weights, mode, 0.25, True)
    except ConfigError as exc:  # a named rung's preset may not hold a 40-row halo: said, not wrong
        assert variant is not None and "does not fit" in str(exc), exc
        return
    chk = check_within(got, ref, bound)
    assert chk.passed, f"{chk} {variant} image{image.shape} weights{weights.shape}"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
def test_cupy_and_torch_in_same_kind_out(variant):
    """CUDA arrays are used in place; convolve2d's flipped filter is a negative-stride view of them.
    One test per rung, CuPy then PyTorch in it: the second library's call reuses the kernel."""
    rng = np.random.default_rng(3)
    image = rng.standard_normal((70, 45)).astype(np.float32)
    weights = rng.standard_normal((6, 5)).astype(np.float32)
    libs = 0
    for lib in ("cupy", "torch"):
        try:
            xp = __import__(lib)
        except ImportError:
            continue
        libs += 1
        if lib == "cupy":
            img_d, w_d = xp.asarray(image), xp.asarray(weights)
            back = xp.asnumpy
        else:
            img_d, w_d = xp.from_numpy(image).cuda(), xp.from_numpy(weights).cuda()
            back = lambda t: t.cpu().numpy()  # noqa: E731
        got = convolve2d(img_d, w_d, mode="mirror", variant=variant, config=SEMANTICS_CONFIG)
        assert type(got) is type(img_d), lib
        _assert_ok(back(got), image, weights, "mirror", 0.0, True)
        np.testing.assert_array_equal(back(w_d), weights)
    if not libs:
        pytest.skip("neither cupy nor torch is installed")


# --- launcher behaviour ----------------------------------------------------------------


def test_row_tile_rungs_share_the_tile_and_keep_what_they_stage():
    """k03 and k04 take their fields, tile, patch, block, rules and geometry from
    ``_common.RowTileConfig`` (no copy in either file) and keep their own shared memory, the
    lesson: k03 stages the patch and the weights, k04 (constant-memory filter) the patch alone."""
    from simt_tiles.kernels.conv2d import _common

    for rung in (k03_register_blocked.RUNG, k04_constant_filter.RUNG):
        assert issubclass(rung.config_type, _common.RowTileConfig) and rung.geometry is _common.geometry
        assert not {"block", "tile", "patch", "rules"} & set(vars(rung.config_type)), rung.name
        assert [f.name for f in dataclasses.fields(rung.config_type)] == ["block_x", "block_y", "rx", "kh", "kw",
                                                                          "mode"]
    for c in (k03_register_blocked.Config(block_x=4, block_y=3, rx=5, kh=2, kw=7),
              k04_constant_filter.Config(block_x=4, block_y=3, rx=5, kh=2, kw=7)):
        assert c.block() == (4, 3) and c.tile() == (3, 20) and c.patch() == (4, 26)
        assert _common.geometry(c, 10, 41) == ((3, 4), (4, 3))
        with pytest.raises(ConfigError, match="mode"):
            type(c)(mode=99)
    assert k03_register_blocked.Config(block_x=4, block_y=3, rx=5, kh=2, kw=7).smem_bytes(4) == (4 * 26 + 14) * 4
    assert k04_constant_filter.Config(block_x=4, block_y=3, rx=5, kh=2, kw=7).smem_bytes(8) == 4 * 26 * 8


def test_config_fields_are_replaced_by_the_call():
    """A config compiled for a 5×5 reflect filter is specialised for the call's 2×3 wrap."""
    rng = np.random.default_rng(5)
    image = rng.standard_normal((6, 5)).astype(np.float32)
    weights = rng.standard_normal((2, 3)).astype(np.float32)
    cfg = k02_halo_tiled.Config(tile_w=3, tile_h=2, kh=5, kw=5, mode=Mode.REFLECT)
    got = _run("k02_halo_tiled", image, weights, "wrap", 0.0, False, config=cfg)
    _assert_ok(got, image, weights, "wrap", 0.0, False)


def test_variant_none_falls_back_when_the_halo_does_not_fit():
    """A 110×110 float32 filter's patch needs > 48 KiB with the best rungs' presets:
    variant=None computes it with k01 instead; an explicit rung or config raises."""
    image = np.array([[1.0, -2.0]], np.float32)
    weights = np.random.default_rng(2).standard_normal((110, 110)).astype(np.float32)
    with pytest.raises(ConfigError):
        specialise(RUNGS[BEST_VARIANT].resolve_config(None), 110, 110, Mode.REFLECT)
    got = _run(None, image, weights, "mirror", 0.0, False)
    _assert_ok(got, image, weights, "mirror", 0.0, False)
    with pytest.raises(ConfigError, match=r"weights: a 110x110 float32 filter does not fit k03_register_blocked"):
        correlate2d(image, weights, variant="k03_register_blocked")
    with pytest.raises(ConfigError, match=r"weights: a 110x110 float32 filter does not fit k10_runtime_weights"):
        correlate2d(image, weights, config=k10_runtime_weights.Config(block_x=2, block_y=2, rx=1, ry=1))


def test_float64_shared_memory_is_checked_per_call():
    """76×76 fits a 4×4 k02 tile in float32 (47 KiB) but not in float64."""
    cfg = k02_halo_tiled.Config(tile_w=4, tile_h=4)
    specialise(cfg, 76, 76, Mode.REFLECT)  # float32: valid
    weights = np.ones((76, 76), np.float64)
    with pytest.raises(ConfigError, match=r"weights: a 76x76 float64 filter does not fit k02_halo_tiled.*float64"):
        correlate2d(np.ones((2, 2)), weights, variant="k02_halo_tiled", config=cfg)


def test_device_arrays_in_device_array_out():
    rng = np.random.default_rng(9)
    image = rng.standard_normal((4, 5)).astype(np.float32)
    weights = rng.standard_normal((3, 2)).astype(np.float32)
    w_dev = cuda.to_device(weights)
    stream = cuda.stream()
    out = convolve2d(cuda.to_device(image), w_dev, mode="nearest", stream=stream)
    stream.synchronize()
    assert not isinstance(out, np.ndarray) and out.shape == (4, 5) and out.dtype == np.float32
    _assert_ok(out.copy_to_host(), image, weights, "nearest", 0.0, True)
    # the flipped filter is a view: the caller's weights are untouched
    np.testing.assert_array_equal(w_dev.copy_to_host(), weights)


def test_numpy_in_numpy_out_and_empty_image():
    image = np.arange(12, dtype=np.float64).reshape(3, 4)
    got = correlate2d(image, np.ones((1, 1)))
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    np.testing.assert_array_equal(got, image)
    for shape in [(0, 4), (3, 0)]:
        empty = correlate2d(np.ones(shape, np.float32), np.ones((3, 3), np.float32))
        assert empty.shape == shape and empty.dtype == np.float32


# --- the check itself must be able to fail ------------------------------------------------


def test_harness_catches_wrong_kernels():
    rng = np.random.default_rng(4)
    image = rng.standard_normal((5, 4)).astype(np.float32)
    weights = rng.standard_normal((4, 2)).astype(np.float32)
    rung = RUNGS["k01_naive"]
    cfg = k01_naive.Config(4, 4)  # 4x4 blocks: the 5x4 image needs two blocks
    grid, block = rung.geometry(cfg, 5, 4)
    img_d, w_d = cuda.to_device(image), cuda.to_device(weights)

    def launch(mode, anchor, flip):
        out = poisoned((5, 4), np.float32)
        kernel = rung.kernel(specialise(cfg, 4, 2, mode), np.float32)
        kernel[grid, block](img_d, w_d[::-1, ::-1] if flip else w_d, out, np.float32(0), *anchor)
        return out.copy_to_host()

    def passes(got, mode, convolve):
        ref, bound = correlate2d_reference(image, weights, mode, convolve=convolve)
        return check_within(got, ref, bound).passed

    assert passes(launch(Mode.REFLECT, (2, 1), False), "reflect", False)  # the right launch passes
    assert not passes(launch(Mode.MIRROR, (2, 1), False), "reflect", False)  # mirror is not reflect
    # convolve of an even-sized filter centred at size//2 (no scipy shift): caught
    assert passes(launch(Mode.REFLECT, (1, 0), True), "reflect", True)
    assert not passes(launch(Mode.REFLECT, (2, 1), True), "reflect", True)
    # a grid one block too small leaves NaN poison behind: caught
    out = poisoned((5, 4), np.float32)
    rung.kernel(specialise(cfg, 4, 2, Mode.REFLECT), np.float32)[(1, 1), block](
        img_d, w_d, out, np.float32(0), 2, 1)
    assert not passes(out.copy_to_host(), "reflect", False)


# --- bad input ------------------------------------------------------------------------------

f32 = np.float32


def _ones(*shape, dtype=f32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(image=_ones(3)), ValueError, r"image: expected a 2-D array; got 1-D with shape \(3,\)"),
        (dict(image=_ones(2, 3, 4)), ValueError, r"image: expected a 2-D array; got 3-D"),
        (dict(image=_ones(3, 4, dtype=np.complex64)), TypeError, r"image: expected dtype float32, float64 or an integer dtype .*; got complex64"),
        (dict(image=[[1.0, 2.0]]), TypeError, r"image: expected a NumPy array or a CUDA array.*got builtins.list"),
        (dict(weights=_ones(3)), ValueError, r"weights: expected a 2-D array; got 1-D"),
        (dict(weights=_ones(2, 2, dtype=np.complex128)), TypeError,
         r"weights: expected dtype float32, float64 or an integer dtype .*; got complex128"),
        (dict(weights=_ones(0, 3)), ValueError,
         r"weights: expected a non-empty 2-D array \(at least 1x1\); got shape \(0, 3\)"),
        (dict(mode="reflekt"), ValueError,
         r"mode: expected one of \('reflect', 'constant', 'nearest', 'mirror', 'wrap'\); got 'reflekt'"),
        (dict(mode="grid-wrap"), ValueError, r"mode: expected one of .*; got 'grid-wrap'"),
        (dict(mode=1), ValueError, r"mode: expected one of .*; got 1"),
        (dict(cval="0"), TypeError, r"cval: expected a real number; got str '0'"),
        (dict(out=np.empty((4, 3), f32)), ValueError, r"out: expected shape \(3, 4\); got \(4, 3\)"),
        (dict(out=np.empty((3, 4), np.bool_)), TypeError, r"out: expected dtype float32, float64 or an integer .*; got bool"),
        (dict(out=cuda.device_array((3, 5), f32)), ValueError, r"out: expected shape \(3, 4\); got \(3, 5\)"),
        (dict(variant="k99"), ValueError, r"variant: expected one of \('k01_naive', 'k02_halo_tiled'"),
        (dict(variant="k02_halo_tiled", config="huge"), ValueError,
         r"config: k02_halo_tiled has no preset 'huge'; expected one of \['default', 'sim'\]"),
        (dict(variant="k02_halo_tiled", config=k01_naive.Config()), TypeError,
         r"config: expected a preset name or a .*k02_halo_tiled.Config"),
        (dict(stream="s"), TypeError, r"stream: expected None, a Numba stream"),
    ],
)
def test_bad_input(kwargs, exc, pattern):
    args = dict(image=_ones(3, 4), weights=_ones(3, 3))
    args.update(kwargs)
    for f in (correlate2d, convolve2d):
        with pytest.raises(exc, match=pattern):
            f(**args)


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: k01_naive.Config(mode=0), r"Config.mode = 0: expected a positive int"),
        (lambda: k01_naive.Config(mode=6), r"Config.mode = 6 breaks the rule: mode is one of 1 \(reflect\)"),
        (lambda: k02_halo_tiled.Config(kh=0), r"Config.kh = 0: expected a positive int"),
        (lambda: k02_halo_tiled.Config(tile_w=64, tile_h=32), r"has 2048 threads"),
        (lambda: k03_register_blocked.Config(kh=200, kw=200), r"static shared memory for float32"),
    ],
)
def test_bad_configs(make, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make()


# --- the GPU compile gate for every mode, not only the presets' ------------------------------


@pytest.mark.long
@pytest.mark.skipif(os.environ.get("SIMT_TILES_HYPOTHESIS_PROFILE") == "ci",
                    reason="160 s on 2 cores: the full profile (scripts/test --full) and the GPU pass run it")
def test_every_mode_of_every_rung_compiles_spill_free():
    """The compile gate builds the presets (each mode in some rung, both dtypes);
    this builds every mode of every rung with the presets' tiles and filter
    shapes (float32), PTX for sm_90 + ptxas.  The CI profile (10 minutes on 2 cores)
    builds the GPU presets (not "sim", whose tiles exist for the simulator) in the
    modes of distinct code and the most registers — constant (the cval predicate),
    mirror and wrap (the modulo folds; reflect is mirror's fold with other constants,
    nearest a clamp) — less each preset's own mode (a gate row); every other profile
    (``scripts/test --full``, the GPU) builds every mode of every preset."""
    ci = PROFILE == "ci"
    ci_modes = (Mode.CONSTANT, Mode.MIRROR, Mode.WRAP)
    proc = run_real_target(f"""
        import sys
        import numpy as np
        from simt_tiles import compile_gate as g
        from simt_tiles.kernels.conv2d import RUNGS
        from simt_tiles.kernels.conv2d._common import Mode, specialise
        rows = g.compile_configs([(r, f"{{name}}-{{mode}}", specialise(cfg, getattr(cfg, "kh", 3), getattr(cfg, "kw", 3), mode),
                                   np.float32)
                                  for r in RUNGS.values() for name, cfg in r.presets.items()
                                  if not {ci!r} or name != "sim"
                                  for mode in Mode if not {ci!r} or (mode in {tuple(int(m) for m in ci_modes)!r}
                                                                  and mode != getattr(cfg, "mode", None))],
                                 "conv2d")
        print(g.format_table(rows))
        sys.exit(0 if all(row.ok for row in rows) else 1)
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = sum(1 for r in RUNGS.values() for name, cfg in r.presets.items() if not ci or name != "sim"
                for mode in Mode if not ci or (mode in ci_modes and mode != getattr(cfg, "mode", None)))
    assert proc.stdout.count("  ok  ") == built, proc.stdout
