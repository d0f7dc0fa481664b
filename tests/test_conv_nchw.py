"""The conv_nchw ladder against torch.nn.functional.conv2d semantics (stride 1, zero padding, bias).

* The NumPy reference (simt_tiles.kernels.conv_nchw.reference, long double) is
  checked against a brute-force loop over the definition and, where torch is
  installed, against torch's CPU conv2d.
* Every rung is checked against the reference: both dtypes, random valid
  launch configs, NaN-poisoned outputs, ragged shapes (N = 0, channels 1..5,
  images smaller than the filter with padding, odd and even filters), bias
  and no bias; error bound γ_n·(Σ|w||x| + |bias|), n = C_in·KH·KW (+1).
* The launcher's choices (smaller CK, k02 instead of k03, k01 fallback, the
  GPU preset rule) and every error message naming its argument.
"""

from __future__ import annotations

import numpy as np
import os

import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st
from numba import cuda  # module level: the simulator swaps this global inside kernels

import simt_tiles
from simt_tiles.bounds import check_within
from simt_tiles.kernels.conv_nchw import (
    BEST_VARIANT,
    CONV_NCHW_VARIANTS,
    DEPTHWISE_VARIANT,
    FALLBACK_VARIANT,
    RUNGS,
    conv2d_nchw,
    k01_direct,
    k02_smem_tiled,
    k03_double_buffered,
)
from simt_tiles.kernels.conv_nchw._common import (
    padded_co,
    padded_row,
    specialise,
    tiled_geometry,
    weight_staging,
)
from simt_tiles.kernels.conv_nchw.dispatch import _choose, auto_preset
from simt_tiles.kernels.conv_nchw.reference import (
    conv2d_nchw_bruteforce,
    conv2d_nchw_reference,
)
from simt_tiles.runtime import SIMULATOR, ConfigError, TileConfig

from .common import DTYPES, configs, poisoned
from .gate_subprocess import run_real_target
from .profiles import examples

#: examples per (rung, dtype) property test: the simulator runs every thread in
#: Python and pays ~10 ms per block, so few and tiny
EXAMPLES = examples(25) if SIMULATOR else settings.default.max_examples  # GPU: the profile's
#: simulator budget per example: blocks launched, and threads launched in all
MAX_BLOCKS, MAX_THREADS = (10, 80) if SIMULATOR else (10**9, 10**9)

TILED = ("k02_smem_tiled", "k03_double_buffered")
#: the rungs that take these tests' dense layers (groups 1): all but the depthwise one
#: (tests/test_conv_nchw_depthwise.py)
DENSE = tuple(v for v in CONV_NCHW_VARIANTS if v != DEPTHWISE_VARIANT)

#: the padding errors' message, up to the value received
BAD_PADDING = r"padding: expected an int >= 0 or a pair of them, 'same' or 'valid'; got "


# --- strategies --------------------------------------------------------------


@st.composite
def tiled_configs(draw, cls):
    """A valid k02/k03 config: tile_w a multiple of rp, co a multiple of rco."""
    if SIMULATOR:
        rp, rco = draw(st.integers(1, 3), "rp"), draw(st.integers(1, 3), "rco")
        kwargs = dict(tile_h=draw(st.integers(1, 3)), tile_w=rp * draw(st.integers(1, 3)), rp=rp,
                      rco=rco, co=rco * draw(st.integers(1, 2)), ck=draw(st.integers(1, 3)), min_blocks=1)
    else:
        rp, rco = draw(st.sampled_from([1, 4, 7])), draw(st.sampled_from([1, 2, 4, 8]))
        kwargs = dict(tile_h=draw(st.sampled_from([1, 4, 7, 8])), tile_w=rp * draw(st.sampled_from([1, 2, 4])),
                      rp=rp, rco=rco, co=rco * draw(st.sampled_from([1, 4, 8])),
                      ck=draw(st.sampled_from([1, 2, 4])), min_blocks=draw(st.sampled_from([1, 2])))
    try:
        return cls(**kwargs)
    except ConfigError:
        assume(False)


if SIMULATOR:
    _k01 = st.builds(k01_direct.Config, st.integers(1, 16))
else:
    _k01 = st.builds(k01_direct.Config, st.sampled_from([1, 32, 96, 256, 1024]))

CONFIG_STRATEGIES = {
    "k01_direct": _k01,
    "k02_smem_tiled": tiled_configs(k02_smem_tiled.Config),
    "k03_double_buffered": tiled_configs(k03_double_buffered.Config),
}


def config_strategy(variant: str):
    """The rung's preset for this backend, or a random valid config (its kh/kw
    are left at their defaults: the launcher must replace them)."""
    return configs(RUNGS[variant], CONFIG_STRATEGIES[variant])  # on a GPU: the presets and a fixed pool


@st.composite
def layers(draw, kmax=4, cmax=5, hmax=9, nmax=2):
    """(N, C_in, C_out, H, W, KH, KW, padding): ragged sizes, inputs smaller than
    the filter where the padding allows it, odd and even filters."""
    kh, kw = draw(st.integers(1, kmax), "KH"), draw(st.integers(1, kmax), "KW")
    pad = draw(st.integers(0, 2), "padding")
    h = draw(st.integers(max(1, kh - 2 * pad), hmax), "H")  # output >= 1 row
    w = draw(st.integers(max(1, kw - 2 * pad), hmax), "W")
    n = draw(st.sampled_from([1, 2, 0, 1, 2][: 2 * nmax + 1]), "N")  # N = 0 (no launch) one time in 5
    c_in, c_out = draw(st.integers(1, cmax), "C_in"), draw(st.integers(1, cmax), "C_out")
    return n, c_in, c_out, h, w, kh, kw, pad


def launched(variant, config, n, c_out, oh, ow) -> tuple[int, int]:
    """(blocks, threads) a launch of ``variant`` with ``config`` makes."""
    (blocks,), block = RUNGS[variant].geometry(config, n, c_out, oh, ow)
    return blocks, blocks * int(np.prod(block))


def operands(rng, n, c_in, c_out, h, w, kh, kw, dtype, bias: bool):
    x = rng.standard_normal((n, c_in, h, w)).astype(dtype)
    wt = rng.standard_normal((c_out, c_in, kh, kw)).astype(dtype)
    b = rng.standard_normal(c_out).astype(dtype) if bias else None
    return x, wt, b


def run(variant, x, w, bias, padding, config=None):
    """The ladder's result, computed into a NaN-poisoned device buffer."""
    oh, ow = x.shape[2] + 2 * padding - w.shape[2] + 1, x.shape[3] + 2 * padding - w.shape[3] + 1
    out = poisoned((x.shape[0], w.shape[0], oh, ow), x.dtype)
    got = conv2d_nchw(x, w, bias=bias, padding=padding, out=out, variant=variant, config=config)
    assert got is out
    return out.copy_to_host()


def assert_ok(got, x, w, bias, padding):
    ref, bound = conv2d_nchw_reference(x, w, bias, padding)
    chk = check_within(got, ref, bound)
    assert chk.passed, (f"{chk} for x{x.shape} w{w.shape} bias={bias is not None} padding={padding} "
                        f"{x.dtype}")
    return chk


# --- the ladder's shape -----------------------------------------------------------


def test_variants_are_in_ladder_order_and_have_both_presets():
    assert CONV_NCHW_VARIANTS == ("k01_direct", "k02_smem_tiled", "k03_double_buffered", "k04_depthwise")
    assert BEST_VARIANT in DENSE and FALLBACK_VARIANT == "k01_direct" and DEPTHWISE_VARIANT == "k04_depthwise"
    for v in CONV_NCHW_VARIANTS:
        if v in DENSE:  # the depthwise rung's strategy is in tests/test_conv_nchw_depthwise.py
            assert v in CONFIG_STRATEGIES, f"{v}: add a config strategy in tests/test_conv_nchw.py"
        assert {"sim", "default"} <= set(RUNGS[v].presets)
        for cfg in RUNGS[v].presets.values():
            assert isinstance(cfg, RUNGS[v].config_type) and isinstance(cfg, TileConfig)
    for v in TILED:  # the GPU presets: 3x3 compiled in, float32 and float64 fit
        for name in ("default", "small"):
            cfg = RUNGS[v].presets[name]
            assert (cfg.kh, cfg.kw) == (3, 3)
            cfg.check_smem(np.float64)
    # same tiles, k03 half of k02's channels per step: the same shared memory
    for name in ("default", "small"):
        k02, k03 = k02_smem_tiled.PRESETS[name], k03_double_buffered.PRESETS[name]
        assert k03.ck * 2 == k02.ck and k03.smem_bytes(4) == k02.smem_bytes(4)
        assert k03_double_buffered.prefetch_registers(k03) <= k03_double_buffered.PREFETCH_MAX


@pytest.mark.skipif("conv2d_nchw" not in simt_tiles.__all__,
                    reason="not exported yet: add conv2d_nchw/CONV_NCHW_VARIANTS to simt_tiles._PUBLIC")
def test_public_names():
    assert simt_tiles.conv2d_nchw is conv2d_nchw
    assert simt_tiles.CONV_NCHW_VARIANTS == CONV_NCHW_VARIANTS


def test_padded_layouts():
    """Patch rows: 4·odd words (8 consecutive rows start in 8 different 4-bank
    groups); weight rows: 8 (mod 16) words (4 rows × 8 channels: 32 banks)."""
    for sw in range(1, 80):
        p = padded_row(sw)
        assert sw <= p < sw + 8 and p % 8 == 4
        assert len({(r * p) % 32 for r in range(8)}) == 8
    for co in range(1, 200):
        p = padded_co(co)
        assert co <= p < co + 16 and p % 16 == 8
        assert len({(k * p + o) % 32 for k in range(4) for o in range(8)}) == 32


@settings(max_examples=examples(300))
@given(cfg=st.one_of(CONFIG_STRATEGIES["k02_smem_tiled"], CONFIG_STRATEGIES["k03_double_buffered"],
                     st.sampled_from([c for v in TILED for c in RUNGS[v].presets.values()])),
       kh=st.integers(1, 7), kw=st.integers(1, 7))
def test_weight_staging_covers_each_weight_once(cfg, kh, kw):
    """The kernels' weight-staging passes (thread → first (k, o), then constant
    steps, see _common.WeightStaging) write every (k, o) of the step exactly
    once and nothing outside it — for any valid config and filter, as Python."""
    try:
        cfg = specialise(cfg, kh, kw)
    except ConfigError:
        assume(False)
    ws = weight_staging(cfg)
    r, co = cfg.ck * kh * kw, cfg.co
    assert ws.threads <= cfg.threads and ws.passes == cfg.w_loads
    written = []
    for tid in range(ws.threads):
        k0, o0 = tid % ws.group, (tid // ws.group) % co
        if ws.per_row == 1:
            k0 += (tid // (ws.group * co)) * ws.group
        for q in range(ws.passes // ws.per_row):
            for j in range(ws.per_row):
                k, o = k0 + q * ws.step_k, o0 + j * ws.step_o
                assert o < co
                if k < r:
                    written.append((k, o))
    assert sorted(written) == [(k, o) for k in range(r) for o in range(co)]


# --- the reference ----------------------------------------------------------------------


@settings(max_examples=examples(60))
@given(layer=layers(kmax=4, cmax=3, hmax=6), dtype=st.sampled_from(DTYPES), bias=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_reference_matches_the_definition(layer, dtype, bias, seed):
    n, c_in, c_out, h, w, kh, kw, pad = layer
    x, wt, b = operands(np.random.default_rng(seed), n, c_in, c_out, h, w, kh, kw, dtype, bias)
    ref, bound = conv2d_nchw_reference(x, wt, b, pad)
    brute = conv2d_nchw_bruteforce(x, wt, b, pad)  # float64 arithmetic: within the bound
    assert ref.shape == brute.shape == (n, c_out, h + 2 * pad - kh + 1, w + 2 * pad - kw + 1)
    assert check_within(brute, ref, bound).passed
    # the float64 path of the reference (used for large problems) agrees too
    ref64, bound64 = conv2d_nchw_reference(x, wt, b, pad, precise=False)
    assert ref64.dtype == np.float64 and check_within(ref64, ref, bound).passed
    assert np.all(bound64 >= bound * (1 - 1e-12))  # its own rounding widens the bound


def test_reference_matches_torch_cpu():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    for n, c_in, c_out, h, w, kh, kw, pad in [(2, 3, 4, 5, 6, 3, 3, 1), (1, 2, 3, 2, 3, 4, 2, 2),
                                              (0, 1, 2, 3, 3, 1, 1, 0)]:
        for bias in (False, True):
            x, wt, b = operands(rng, n, c_in, c_out, h, w, kh, kw, np.float64, bias)
            ref, bound = conv2d_nchw_reference(x, wt, b, pad)
            got = F.conv2d(torch.from_numpy(x), torch.from_numpy(wt), None if b is None else torch.from_numpy(b),
                           stride=1, padding=pad).numpy()
            assert check_within(got, ref, bound).passed


# --- every rung against the reference -------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", DENSE)
@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_conv_nchw_matches_reference(variant, dtype, data):
    n, c_in, c_out, h, w, kh, kw, pad = data.draw(layers(), "layer")
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    config = data.draw(config_strategy(variant), label="config")
    try:
        spec = specialise(config, kh, kw)
        spec.check_smem(dtype)
    except ConfigError:  # a random config too large for this filter: the launcher raises (tested below)
        assume(False)
    blocks, threads = launched(variant, spec, n, c_out, oh, ow)
    assume(blocks <= MAX_BLOCKS and threads <= MAX_THREADS)
    event(f"blocks: {min(blocks, 4)}{'+' if blocks >= 4 else ''}")
    bias = data.draw(st.booleans(), "bias")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x, wt, b = operands(rng, n, c_in, c_out, h, w, kh, kw, dtype, bias)
    got = run(variant, x, wt, b, pad, config=config)
    assert got.dtype == dtype
    note(repr(assert_ok(got, x, wt, b, pad)))


@pytest.mark.parametrize("variant", [*DENSE, None])
def test_one_layer_every_path(variant):
    """A fixed layer through every rung and variant=None: several channel steps
    with a tail (C_in = 5, CK = 2), C_out not a multiple of the block's,
    an even filter wider than the image, padding 2."""
    rng = np.random.default_rng(3)
    x, wt, b = operands(rng, 1, 5, 3, 3, 2, 2, 4, np.float32, True)
    got = run(variant, x, wt, b, 2)
    assert got.shape == (1, 3, 6, 3)
    assert_ok(got, x, wt, b, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [*DENSE, None])
def test_larger_layers_on_gpu(variant):
    rng = np.random.default_rng(11)
    layers_ = [(2, 64, 64, 56, 56, 3, 3, 1), (8, 256, 256, 14, 14, 3, 3, 1), (3, 17, 33, 15, 14, 3, 3, 1),
               (1, 3, 64, 224, 224, 7, 7, 3), (2, 32, 48, 28, 28, 1, 1, 0), (2, 16, 24, 30, 31, 5, 5, 2),
               (1, 8, 8, 9, 40, 2, 6, 0)]
    for n, c_in, c_out, h, w, kh, kw, pad in layers_:
        for dtype in DTYPES:
            x, wt, b = operands(rng, n, c_in, c_out, h, w, kh, kw, dtype, True)
            ref, bound = conv2d_nchw_reference(x, wt, b, pad)
            configs = [None] if variant in (None, "k01_direct") else [None, "default", "small"]
            for config in configs:
                try:
                    got = run(variant, x, wt, b, pad, config=config)
                except simt_tiles.ConfigError as exc:  # a named rung's staging may not fit (float64 7x7)
                    assert variant is not None and "does not fit" in str(exc), exc
                    continue
                chk = check_within(got, ref, bound)
                assert chk.passed, f"{chk} {variant} {config} layer {(n, c_in, c_out, h, w, kh, kw, pad)} {dtype}"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [*DENSE, None])
def test_matches_torch_cudnn_on_gpu(variant):
    """torch.nn.functional.conv2d on the GPU (cuDNN, TF32 off): both within the
    reference's bound, and torch tensors in → torch tensor out."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    F = torch.nn.functional
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        gen = torch.Generator(device="cuda").manual_seed(5)
        for (n, c, hw), tdtype in [((32, 64, 56), torch.float32), ((8, 256, 14), torch.float32),
                                   ((4, 32, 20), torch.float64)]:
            x = torch.randn((n, c, hw, hw), device="cuda", generator=gen, dtype=tdtype)
            w = torch.randn((c, c, 3, 3), device="cuda", generator=gen, dtype=tdtype) / (9 * c) ** 0.5
            b = torch.randn(c, device="cuda", generator=gen, dtype=tdtype)
            want = F.conv2d(x, w, b, padding=1)
            got = conv2d_nchw(x, w, bias=b, padding=1, variant=variant)
            assert isinstance(got, torch.Tensor) and got.device == x.device and got.dtype == tdtype
            ref, bound = conv2d_nchw_reference(x.cpu().numpy(), w.cpu().numpy(), b.cpu().numpy(), 1)
            assert check_within(got.cpu().numpy(), ref, bound).passed, variant
            assert check_within(want.cpu().numpy(), ref, bound).passed, "cuDNN"
    finally:
        torch.backends.cudnn.allow_tf32 = old


@pytest.mark.gpu
def test_cupy_in_cupy_out():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(2)
    x, wt, b = operands(rng, 2, 8, 16, 20, 21, 3, 3, np.float32, True)
    got = conv2d_nchw(cp.asarray(x), cp.asarray(wt), bias=cp.asarray(b), padding=1)
    assert isinstance(got, cp.ndarray)
    assert_ok(cp.asnumpy(got), x, wt, b, 1)


# --- launcher behaviour -------------------------------------------------------------------


def test_config_filter_shape_is_replaced_by_the_call():
    """A config compiled for 3x3 is specialised for the call's 2x4 filter."""
    rng = np.random.default_rng(5)
    x, wt, b = operands(rng, 1, 3, 2, 4, 5, 2, 4, np.float64, False)
    cfg = k02_smem_tiled.Config(tile_h=2, tile_w=3, co=2, ck=2, rco=1, rp=3, kh=3, kw=3, min_blocks=1)
    got = run("k02_smem_tiled", x, wt, b, 1, config=cfg)
    assert_ok(got, x, wt, b, 1)


def test_presets_get_a_smaller_ck_when_the_filter_does_not_fit():
    """A 24x24 float32 filter: k03's sim preset (CK = 2) needs 85 KiB; with CK = 1
    it fits (42 KiB), so a preset runs k03 — an explicit config object raises."""
    cfg = k03_double_buffered.PRESETS["sim"]
    with pytest.raises(ConfigError):
        specialise(cfg, 24, 24)
    rung, spec = _choose(RUNGS["k03_double_buffered"], "k03_double_buffered", "sim", (1, 1, 1, 1), 24, 24,
                         np.float32)
    assert rung.name == "k03_double_buffered" and spec.ck == 1 and (spec.kh, spec.kw) == (24, 24)
    rng = np.random.default_rng(8)
    x, wt, b = operands(rng, 1, 2, 1, 1, 2, 24, 24, np.float32, True)
    got = run("k03_double_buffered", x, wt, b, 12, config="sim")
    assert_ok(got, x, wt, b, 12)
    with pytest.raises(ConfigError, match=r"w: a 24x24 float32 filter's staging does not fit k03_double_buffered"):
        conv2d_nchw(x, wt, padding=12, variant="k03_double_buffered", config=cfg)


def test_variant_none_falls_back_to_k01_when_nothing_fits():
    """A 40x40 float32 filter does not fit the tiled presets even with CK = 1:
    variant=None computes it with k01; an explicit tiled variant raises."""
    rng = np.random.default_rng(2)
    x, wt, b = operands(rng, 1, 1, 1, 1, 1, 40, 40, np.float32, False)
    rung, _ = _choose(RUNGS[BEST_VARIANT], None, None, (1, 1, 2, 2), 40, 40, np.float32)
    assert rung.name == FALLBACK_VARIANT
    got = run(None, x, wt, None, 20)
    assert got.shape == (1, 1, 2, 2)
    assert_ok(got, x, wt, None, 20)
    for v in TILED:
        with pytest.raises(ConfigError, match=rf"w: a 40x40 float32 filter's staging does not fit {v}"):
            conv2d_nchw(x, wt, padding=20, variant=v)


def test_float64_shared_memory_is_checked_per_call():
    """k02 with CO = 8, CK = 3 fits a 20x20 filter in float32 (42 KiB) but not
    in float64: an explicit config raises, naming w and float64."""
    cfg = k02_smem_tiled.Config(tile_h=1, tile_w=1, co=8, ck=3, rco=8, rp=1, min_blocks=1)
    assert specialise(cfg, 20, 20).smem_bytes(4) == 43200  # float32: valid
    x, wt = np.ones((1, 3, 20, 20)), np.ones((8, 3, 20, 20))
    with pytest.raises(ConfigError,
                       match=r"w: a 20x20 float64 filter's staging does not fit k02_smem_tiled.*float64"):
        conv2d_nchw(x, wt, variant="k02_smem_tiled", config=cfg)


def test_variant_none_uses_k02_when_k03_prefetch_would_not_stay_in_registers():
    pick = lambda kh, kw, preset: _choose(RUNGS[BEST_VARIANT], None, preset, (1, 1, 1, 1), kh, kw,  # noqa: E731
                                          np.float32)
    presets = ["sim"] if SIMULATOR else ["default", "small"]
    for preset in presets:
        assert pick(3, 3, preset)[0].name == "k03_double_buffered"
        rung, spec = pick(7, 7, preset)
        assert rung.name == "k02_smem_tiled" and (spec.kh, spec.kw) == (7, 7)
    # an explicit k03 keeps k03
    assert _choose(RUNGS["k03_double_buffered"], "k03_double_buffered", presets[0], (1, 1, 1, 1), 7, 7,
                   np.float32)[0].name == "k03_double_buffered"


def test_auto_preset_fills_the_gpu():
    """config=None on a GPU: the default tiles unless their grid has fewer than
    min_blocks blocks per SM (then "small"); the two benchmark layers on 132 SMs."""
    for v in TILED:
        rung = RUNGS[v]
        default = rung.presets["default"]
        assert tiled_geometry(default, 32, 64, 56, 56)[0] == (32 * 7 * 4,)  # 8x14 tiles: no idle pixel
        assert auto_preset(rung, (32, 64, 56, 56), 132) == "default"
        assert auto_preset(rung, (8, 256, 14, 14), 132) == "small"
        assert tiled_geometry(rung.presets["small"], 8, 256, 14, 14)[0] == (8 * 2 * 8,)
        assert auto_preset(rung, (8, 256, 14, 14), 10) == "default"
    assert auto_preset(RUNGS["k01_direct"], (8, 256, 14, 14), 132) == "default"


def test_numpy_in_numpy_out_and_empty_outputs():
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(1, 2, 3, 4)
    w = np.zeros((2, 2, 1, 1))
    w[0, 1, 0, 0] = 1.0  # output channel 0 copies input channel 1; channel 1 is the bias
    got = conv2d_nchw(x, w, bias=np.array([0.0, -2.5]))
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == (1, 2, 3, 4)
    np.testing.assert_array_equal(got[0, 0], x[0, 1])
    np.testing.assert_array_equal(got[0, 1], np.full((3, 4), -2.5))
    # N = 0 and C_out = 0: empty results, no launch
    empty = conv2d_nchw(np.ones((0, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32), padding=1)
    assert empty.shape == (0, 4, 5, 5) and empty.dtype == np.float32
    assert conv2d_nchw(np.ones((2, 3, 5, 5)), np.ones((0, 3, 2, 2))).shape == (2, 0, 4, 4)
    # no input values at all (C_in = 0, or H = 0 with padding): every output is its bias
    b = np.array([1.5, -2.0], np.float32)
    for xs, ws, pad in [((1, 0, 2, 3), (2, 0, 1, 2), 0), ((1, 1, 0, 2), (2, 1, 1, 1), 1)]:
        out = np.full((1, 2, 2, 2 if pad == 0 else 4), np.nan, np.float32)
        got = conv2d_nchw(np.ones(xs, np.float32), np.ones(ws, np.float32), bias=b, padding=pad, out=out)
        assert got is out
        np.testing.assert_array_equal(out, np.broadcast_to(b[None, :, None, None], out.shape))


def test_device_arrays_in_device_array_out():
    rng = np.random.default_rng(9)
    x, wt, b = operands(rng, 2, 3, 2, 4, 5, 3, 2, np.float32, True)
    x_d, w_d, b_d = cuda.to_device(x), cuda.to_device(wt), cuda.to_device(b)
    stream = cuda.stream()
    out = conv2d_nchw(x_d, w_d, bias=b_d, padding=1, stream=stream)
    stream.synchronize()
    assert not isinstance(out, np.ndarray) and out.shape == (2, 2, 4, 6) and out.dtype == np.float32
    assert_ok(out.copy_to_host(), x, wt, b, 1)
    np.testing.assert_array_equal(w_d.copy_to_host(), wt)  # the flat views did not copy or change w


# --- the check itself must be able to fail ----------------------------------------------------


def test_harness_catches_wrong_kernels():
    """Launches of k01 with a wrong padding, without the bias, or on a grid one
    block short are all caught by the bound check (NaN poison or values)."""
    rng = np.random.default_rng(4)
    x, wt, b = operands(rng, 1, 2, 2, 3, 3, 2, 2, np.float32, True)
    rung, cfg = RUNGS["k01_direct"], k01_direct.Config(8)
    xf, wf, bf = (cuda.to_device(a.ravel()) for a in (x, wt, b))

    def launch(pad_arg, has_bias, blocks=None):
        out = poisoned((1, 2, 4, 4), np.float32)
        grid, block = rung.geometry(cfg, 1, 2, 4, 4)
        rung.kernel(cfg, np.float32)[blocks or grid, block](xf, wf, bf, out.reshape(32), 1, 2, 3, 3, 2, 4, 4,
                                                            pad_arg, pad_arg, 2, 2, 1, 1, 1, 1, 1, has_bias)
        return out.copy_to_host()

    def passes(got):
        ref, bound = conv2d_nchw_reference(x, wt, b, 1)
        return check_within(got, ref, bound).passed

    assert passes(launch(1, 1))  # the right launch passes
    assert not passes(launch(0, 1))  # padding 0 read as 1: shifted windows
    assert not passes(launch(1, 0))  # bias dropped
    assert not passes(launch(1, 1, blocks=(3,)))  # 24 of 32 outputs written: NaN left


# --- bad input ------------------------------------------------------------------------------

f32 = np.float32


def _ones(*shape, dtype=f32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(x=_ones(3, 4, 4)), ValueError, r"x: expected a 4-D array; got 3-D with shape \(3, 4, 4\)"),
        (dict(x=_ones(1, 3, 4, 4, dtype=np.int32)), TypeError, r"x: expected dtype float32 or float64; got int32"),
        (dict(x=[[[[1.0]]]]), TypeError, r"x: expected a NumPy array or a CUDA array.*got builtins.list"),
        (dict(w=_ones(2, 3, 3)), ValueError, r"w: expected a 4-D array; got 3-D"),
        (dict(w=_ones(2, 3, 3, 3, dtype=np.float64)), TypeError,
         r"w: expected dtype float32 \(the dtype of x\); got float64"),
        (dict(w=_ones(2, 4, 3, 3)), ValueError,
         r"w: expected 3 input channels \(w.shape\[1\] == x.shape\[1\] = C_in\); got w of shape \(2, 4, 3, 3\)"),
        (dict(w=_ones(2, 3, 0, 3)), ValueError,
         r"w: expected a filter of at least 1x1 .*got shape \(2, 3, 0, 3\)"),
        (dict(w=_ones(2, 3, 5, 5), padding=0), ValueError,
         r"w: a 5x5 filter is larger than the padded input 4x4 \(x's 4x4 plus padding=0 on each side\): "
         r"the output would be 0x0"),
        (dict(w=_ones(2, 3, 8, 8)), ValueError,
         r"w: a 8x8 filter is larger than the padded input 6x6 .*would be -1x-1"),
        (dict(w=_ones(2, 3, 7, 1), padding=1), ValueError, r"w: a 7x1 filter is larger than the padded input 6x6"),
        (dict(x=_ones(1, 3, 0, 4), w=_ones(2, 3, 1, 1), padding=0), ValueError,
         r"^x: expected H, W >= 1 \(or padding that leaves a window\); got shape \(1, 3, 0, 4\)"),
        (dict(bias=_ones(3)), ValueError, r"bias: expected shape \(2,\) \(C_out = w.shape\[0\]\); got \(3,\)"),
        (dict(bias=_ones(2, 1)), ValueError, r"bias: expected a 1-D array; got 2-D"),
        (dict(bias=_ones(2, dtype=np.float64)), TypeError, r"bias: expected dtype float32 \(the dtype of x\)"),
        (dict(padding=-1), ValueError, BAD_PADDING + r"-1"),
        (dict(padding=1.0), TypeError, BAD_PADDING + r"1.0"),
        (dict(padding=True), TypeError, BAD_PADDING + r"True"),
        (dict(padding=(1, 1, 1)), TypeError, BAD_PADDING + r"\(1, 1, 1\)"),
        (dict(out=np.empty((1, 2, 4, 4), np.float64)), TypeError, r"out: expected dtype float32; got float64"),
        (dict(out=np.empty((1, 2, 2, 2), f32)), ValueError,
         r"out: expected shape \(1, 2, 4, 4\); got \(1, 2, 2, 2\)"),
        (dict(out=cuda.device_array((1, 3, 4, 4), f32)), ValueError, r"out: expected shape \(1, 2, 4, 4\)"),
        (dict(variant="k99"), ValueError, r"variant: expected one of \('k01_direct', 'k02_smem_tiled'"),
        (dict(variant="k01_direct", config="small"), ValueError,
         r"config: k01_direct has no preset 'small'; expected one of \['channels4', 'default', 'sim'\]"),
        (dict(variant="k02_smem_tiled", config=k03_double_buffered.PRESETS["sim"]), TypeError,
         r"config: expected a preset name or a .*k02_smem_tiled.Config"),
        (dict(stream="s"), TypeError, r"stream: expected None, a Numba stream"),
    ],
)
def test_bad_input(kwargs, exc, pattern):
    args = dict(x=_ones(1, 3, 4, 4), w=_ones(2, 3, 3, 3), padding=1)
    args.update(kwargs)
    with pytest.raises(exc, match=pattern):
        conv2d_nchw(args.pop("x"), args.pop("w"), **args)


def test_strided_device_arrays_are_refused():
    x = cuda.to_device(np.ones((1, 2, 4, 6), f32))[:, :, :, ::2]
    with pytest.raises(ValueError, match=r"x: expected a C-contiguous device array"):
        conv2d_nchw(x, _ones(1, 2, 1, 1))


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: k02_smem_tiled.Config(tile_w=14, rp=4), r"Config.rp = 4 breaks the rule: tile_w % rp == 0"),
        (lambda: k03_double_buffered.Config(co=64, rco=3), r"Config.rco = 3 breaks the rule: co % rco == 0"),
        (lambda: k02_smem_tiled.Config(ck=0), r"Config.ck = 0: expected a positive int"),
        (lambda: k02_smem_tiled.Config(tile_h=33, tile_w=32, rp=1, co=8, rco=8), r"has 1056 threads"),
        (lambda: k03_double_buffered.Config(kh=9, kw=9), r"static shared memory for float32"),
        (lambda: k01_direct.Config(2048), r"has 2048 threads"),
    ],
)
def test_bad_configs(make, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make()


def test_outputs_beyond_32_bit_offsets_are_refused():
    """The kernels index with 32-bit offsets: 2**31 elements or more is an error
    naming the array (checked before the output is allocated)."""
    x = cuda.device_array((1, 1, 1, 1), f32)
    w = np.ones((2**16, 1, 1, 1), f32)  # padding 91: out is (1, 65536, 183, 183)
    with pytest.raises(ValueError, match=r"out: 2194735104 elements; the kernels index with 32-bit offsets"):
        conv2d_nchw(x, w, padding=91)


# --- the GPU compile gate for the filters the launcher sends to each rung ---------------------


@pytest.mark.long
@pytest.mark.skipif(os.environ.get("SIMT_TILES_HYPOTHESIS_PROFILE") == "ci",
                    reason="~20 s of compiles on 2 cores: the full profile (scripts/test --full) and the GPU pass run it")
def test_variant_none_kernels_compile_spill_free_for_common_filters():
    """The compile gate builds the presets (3x3 and the sim shapes); this builds
    what ``variant=None`` runs for 1x1, 5x5, 7x7, 1x7 and 7x1 filters with the GPU
    presets (float32): PTX for sm_90 + ptxas, no local memory (1x7 on the default tiles: k02,
    whose prefetch-free loop kept it in registers where k03's left a stack frame)."""
    proc = run_real_target("""
        import sys
        import numpy as np
        from simt_tiles import compile_gate as g
        from simt_tiles.kernels.conv_nchw import BEST_VARIANT, RUNGS
        from simt_tiles.kernels.conv_nchw.dispatch import _choose
        items = []
        for preset in ("default", "small"):
            for kh, kw in ((1, 1), (5, 5), (7, 7), (1, 7), (7, 1)):
                r, spec = _choose(RUNGS[BEST_VARIANT], None, preset, (1, 1, 1, 1), kh, kw, np.float32)
                items.append((r, f"{preset}-{kh}x{kw}", spec, np.float32))
        rows = g.compile_configs(items, "conv_nchw")
        print(g.format_table(rows))
        sys.exit(0 if all(row.ok for row in rows) else 1)
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("  ok  ") == 10, proc.stdout
