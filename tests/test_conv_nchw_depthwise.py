"""conv2d_nchw's depthwise rung, k04_depthwise: groups = C_in, C_out = M·C_in, stride 1 and 2 per axis.

* Property test against the family's reference (long double / float64) within its bound
  (γ_n(u) + γ_n(u_ref))·(Σ|w||x| + |bias|), n = KH·KW (+1 with a bias) (simt_tiles.bounds): ragged
  layers — N = 0, 1, 2; C_in 1..3; channel multiplier 1 and 2; H and W from 0 (where the padding
  leaves an output) past two "sim" tiles; filters 1..3 each way; stride 1 or 2 per axis; dilation 1
  and 2; every padding form (int, pair, "valid", "same" at stride 1) — both dtypes, the "sim" preset
  and random configs of the rung's valid space, NaN-poisoned ``out=``.
* Tile edges: output sides tile − 1, tile, tile + 1, 2·tile + 1 and primes for a config of several
  warps, both strides.
* Blocks of several warps along x, along y and both, under the race check
  (:func:`simt_tiles.analyze.racecheck`: by barrier interval, not by the simulator's thread order);
  and the check itself fails on a mutant without the barrier.
* The analyzer's bank model: the default's window reads conflict-free at stride 1 (``padded_row``).
* Routing (``dispatch.route``): variant=None takes k04 for groups = C_in >= 2 at stride 1 and 2 and
  keeps k01 for what k04 does not take; ``variant="k04_depthwise"`` on another layer is a ValueError
  naming the variant and the rule; config rules raise ConfigError naming the field.

A bug planted once, an off-by-one in the halo — ``Config.patch()`` one column short (no ``+ 1``: the
halo's last column never staged, the rows packed one word closer) — failed 12 of these tests:
test_layers_match_reference (both dtypes; shrunk to a 1 × 1 layer), test_several_warps_race_free (all
four configs), test_tile_edges (all four: wrong values, NaN, or a read past the shared array),
test_window_reads_are_conflict_free_at_stride_1 and test_variant_none_runs_it.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from simt_tiles import analyze
from simt_tiles.kernels.conv_nchw import DEPTHWISE_VARIANT, RUNGS, conv2d_nchw, dispatch, k04_depthwise
from simt_tiles.kernels.conv_nchw._params import geometry, padding_of
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import DTYPES, configs
from .profiles import examples

from .test_conv_nchw_general import _check as general_check
from .test_conv_nchw_general import _operands as general_operands

#: the race check and the bank model run on the simulator's recording of each thread's accesses
simulator_only = pytest.mark.skipif(not SIMULATOR, reason="simt_tiles.analyze needs Numba's CUDA simulator")
RUNG = RUNGS[DEPTHWISE_VARIANT]
EXAMPLES = examples(20) if SIMULATOR else settings.default.max_examples
#: simulator budget per example: threads launched in all (the simulator runs each in Python)
MAX_THREADS = 400 if SIMULATOR else 10**9

if SIMULATOR:
    _RANDOM = st.builds(k04_depthwise.Config, block_x=st.integers(1, 8), block_y=st.integers(1, 4),
                        rw=st.integers(1, 3), min_blocks=st.just(1))
else:
    _RANDOM = st.builds(k04_depthwise.Config, block_x=st.sampled_from([4, 8, 16, 32]),
                        block_y=st.sampled_from([1, 4, 8, 16]), rw=st.sampled_from([1, 2, 4]),
                        min_blocks=st.sampled_from([1, 4, 8]))


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _pads(padding, stride, dilation, kh, kw):
    """(top, bottom, left, right) as torch pads them."""
    g = geometry(1, 1, kh, kw, _pair(stride), padding_of(padding, _pair(stride)), _pair(dilation), 1)
    return g.pad_top, g.pad_bottom, g.pad_left, g.pad_right


def _out_hw(layer):
    (sh, sw), (dh, dw) = _pair(layer["stride"]), _pair(layer["dilation"])
    t, b, l, r = layer["pads"]
    return ((layer["h"] + t + b - dh * (layer["kh"] - 1) - 1) // sh + 1,
            (layer["w"] + l + r - dw * (layer["kw"] - 1) - 1) // sw + 1)


@st.composite
def layers(draw, hmax=9):
    """A depthwise layer: groups = C_in, C_out = mult·C_in, output >= 1×1."""
    c_in, mult = draw(st.integers(1, 3), "C_in"), draw(st.sampled_from([1, 2]), "multiplier")
    kh, kw = draw(st.integers(1, 3), "KH"), draw(st.integers(1, 3), "KW")
    stride = draw(st.one_of(st.sampled_from([1, 2]), st.tuples(st.sampled_from([1, 2]), st.sampled_from([1, 2]))),
                  "stride")
    dilation = draw(st.one_of(st.just(1), st.integers(1, 2), st.tuples(st.integers(1, 2), st.integers(1, 2))),
                    "dilation")
    choices = [st.integers(0, 2), st.tuples(st.integers(0, 2), st.integers(0, 2)), st.just("valid")]
    if _pair(stride) == (1, 1):
        choices.append(st.just("same"))
    padding = draw(st.one_of(*choices), "padding")
    pads = _pads(padding, stride, dilation, kh, kw)
    (dh, dw) = _pair(dilation)
    h = draw(st.integers(max(0, dh * (kh - 1) + 1 - pads[0] - pads[1]), hmax), "H")  # output >= 1 row
    w = draw(st.integers(max(0, dw * (kw - 1) + 1 - pads[2] - pads[3]), hmax), "W")
    n = draw(st.sampled_from([1, 2, 0, 1]), "N")
    return dict(n=n, c_in=c_in, c_out=mult * c_in, h=h, w=w, kh=kh, kw=kw, stride=stride, dilation=dilation,
                padding=padding, pads=pads)


def _depthwise(layer: dict) -> dict:
    return {**layer, "groups": layer["c_in"]}


def _operands(rng, layer, dtype, bias):
    """The general tests' operands of a depthwise layer (one filter channel per group)."""
    return general_operands(rng, _depthwise(layer), dtype, bias)


def _check(x, w, b, layer, variant=DEPTHWISE_VARIANT, config=None):
    """The general tests' check (poisoned ``out=``, the reference's bound) with groups = C_in."""
    return general_check(x, w, b, _depthwise(layer), variant, config)


def _threads(cfg, layer) -> int:
    oh, ow = _out_hw(layer)
    (blocks,), _ = RUNG.geometry(cfg, layer["n"], layer["c_out"], oh, ow, layer["c_in"])
    return blocks * cfg.threads


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=layers(), cfg=configs(RUNG, _RANDOM), bias=st.booleans(), seed=st.integers(0, 99))
def test_layers_match_reference(dtype, layer, cfg, bias, seed):
    note(f"config {cfg}")
    assume(_threads(cfg, layer) <= MAX_THREADS)
    x, w, b = _operands(np.random.default_rng(seed), layer, dtype, bias)
    note(repr(_check(x, w, b, layer, config=cfg)))


#: blocks of several warps: along x (64 × 1), along y (8 × 8: a warp is 4 rows of 8), one row a warp
#: (32 × 2), both ways (64 × 2: 4 warps)
WARPS = [k04_depthwise.Config(block_x=64, block_y=1, rw=1, min_blocks=1),
         k04_depthwise.Config(block_x=8, block_y=8, rw=2, min_blocks=1),
         k04_depthwise.Config(block_x=32, block_y=2, rw=1, min_blocks=1),
         k04_depthwise.Config(block_x=64, block_y=2, rw=1, min_blocks=1)]


@simulator_only
@pytest.mark.parametrize("cfg", WARPS, ids=lambda c: f"{c.block_x}x{c.block_y}x{c.rw}")
def test_several_warps_race_free(cfg):
    """Two tile rows and a ragged tile column (every thread's share of the patch, the halo at both
    edges), stride 1 and 2 with a multiplier of 2 and a bias, under the race check: the patch is
    written before the barrier and only read after it."""
    rng = np.random.default_rng(5)
    for stride, dtype in ((1, np.float32), ((2, 1), np.float64)):
        sh, sw = _pair(stride)
        layer = dict(n=1, c_in=1, c_out=2, h=sh * (cfg.tile_h + 1), w=sw * (cfg.tile_w + 3), kh=3, kw=3,
                     stride=stride, dilation=1, padding=1)
        layer["pads"] = _pads(1, stride, 1, 3, 3)
        with analyze.racecheck():
            _check(*_operands(rng, layer, dtype, bias=True), layer, config=cfg)


@simulator_only
def test_the_race_check_sees_a_missing_barrier():
    """The same launch with the barrier dropped (a mutant of the rung's source): races reported."""
    path = pathlib.Path(k04_depthwise.__file__)
    lines = path.read_text().splitlines(keepends=True)
    sync = next(i for i, line in enumerate(lines) if line.strip() == "cuda.syncthreads()")

    def drop(src):
        src[sync] = src[sync].replace("cuda.syncthreads()", "pass")
        return src

    rung = analyze.mutant_rung(RUNG, analyze.mutant_module(k04_depthwise, drop))
    report = analyze.run(DEPTHWISE_VARIANT, ladder="conv_nchw", config="block_x=8,block_y=8,rw=1,min_blocks=1",
                         shape="1x1x9x8x1x3x3", rung=rung)
    assert report.races, "no race reported without the barrier"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("stride", [1, 2])
def test_tile_edges(dtype, stride):
    """Output sides around the tile of a config of two warps (8 × 8, rw 2: 8 rows by 16 columns):
    tile − 1, tile, tile + 1, 2·tile + 1 and primes, padding 1 (the halo on both sides)."""
    cfg = WARPS[1]
    rng = np.random.default_rng(stride)
    for oh, ow in ((cfg.tile_h - 1, cfg.tile_w + 1), (cfg.tile_h, cfg.tile_w), (cfg.tile_h + 1, 2 * cfg.tile_w + 1),
                   (7, 13), (1, 1), (2, 17)):
        # the input whose 3 × 3, padding 1 output is oh × ow
        layer = dict(n=1, c_in=2, c_out=2, h=stride * (oh - 1) + 1, w=stride * (ow - 1) + 1, kh=3, kw=3,
                     stride=stride, dilation=1, padding=1)
        layer["pads"] = _pads(1, stride, 1, 3, 3)
        assert _out_hw(layer) == (oh, ow)
        _check(*_operands(rng, layer, dtype, bias=False), layer, config=cfg)


@simulator_only
def test_window_reads_are_conflict_free_at_stride_1():
    """The analyzer's bank model (32 banks of 4 bytes) on one warp of the default layout (8 × 4, rw 4):
    the patch's rows padded by ``padded_row`` put every window read in distinct banks (1 wavefront).
    The staging stores (consecutive threads, consecutive patch elements) pay at most 2 where a warp's
    32 elements wrap into the next, padded row — once per element, against RW + KW − 1 reads per row."""
    report = analyze.run(DEPTHWISE_VARIANT, ladder="conv_nchw", config="block_x=8,block_y=4,rw=4,min_blocks=1",
                         shape="1x1x4x32x1x3x3")
    sites = {s.op: s for s in report.sites if s.space == "shared" and s.array.startswith("x_s")}
    assert set(sites) == {"load", "store"}, sites
    assert sites["load"].per_request == pytest.approx(1.0), sites["load"]
    assert 1.0 <= sites["store"].per_request <= 2.0, sites["store"]
    assert not report.races and not report.uninitialized


def test_padded_row():
    """Stride 1: conflict-free (an odd row length for 4 rows of 8 lanes, 4 words apart); stride 2: 2-way,
    the least possible (8 lanes of a row 8 words apart cover 4 of the 8-word groups)."""
    def worst(cfg):
        p = k04_depthwise.padded_row(cfg)
        hits = {}
        for t in range(min(32, cfg.threads)):
            tx, ty = t % cfg.block_x, t // cfg.block_x
            bank = (ty * cfg.stride_h * p + tx * cfg.rw * cfg.stride_w) % 32
            hits[bank] = hits.get(bank, 0) + 1
        return p, max(hits.values())

    default = k04_depthwise.PRESETS["default"]
    p, w = worst(default)
    assert p >= default.patch()[1] and p % 2 == 1 and w == 1
    s2 = k04_depthwise.for_layer(default, 3, 3, (2, 2), (1, 1))
    assert worst(s2)[1] == 2
    for kh in (1, 3, 5, 7):  # any filter: within 32 words of the patch's width
        cfg = k04_depthwise.for_layer(default, kh, kh, (1, 1), (1, 1))
        assert cfg.patch()[1] <= k04_depthwise.padded_row(cfg) < cfg.patch()[1] + 32 and worst(cfg)[1] == 1


# --- the rule: which layers take k04 ------------------------------------------------------------


def _route(c_in, c_out, groups, stride=1, dilation=1, k=3, variant=None, config=None, padding=1, hw=56):
    geom = geometry(hw, hw, k, k, _pair(stride), padding_of(padding, _pair(stride)), _pair(dilation), groups)
    return dispatch.route(variant, config, geom, c_in, c_out, k, k)


def test_variant_none_takes_k04_for_the_depthwise_layers_it_supports():
    for c, m, s in ((32, 1, 1), (96, 1, 2), (144, 1, 2), (576, 1, 2), (8, 2, 1), (2, 3, (1, 2))):
        assert _route(c, m * c, c, stride=s) == "depthwise", (c, m, s)
    assert _route(32, 32, 32, dilation=2) == "depthwise"
    assert _route(32, 32, 32, k=7, padding=3) == "depthwise"
    # k01 for what k04 does not take: stride 3, more taps than TAPS_MAX, a patch over shared memory
    assert _route(32, 32, 32, stride=3) == "general"
    assert _route(4, 4, 4, k=9, padding=4) == "general"
    assert _route(4, 4, 4, dilation=200, hw=500) == "general"
    # not depthwise: groups 1 (one channel too: the tiled rungs), grouped, a config or variant named
    assert _route(1, 1, 1) == "tiled" and _route(1, 8, 1, stride=2) == "space_to_depth"
    assert _route(8, 8, 2) == "general" and _route(8, 8, 8, config="default") == "general"
    assert _route(8, 8, 8, variant="k01_direct") == "general"
    assert _route(1, 2, 1, variant=DEPTHWISE_VARIANT) == "depthwise"  # one channel: depthwise when asked


def test_variant_none_runs_it(monkeypatch):
    seen = []
    real = dispatch.plan_depthwise
    monkeypatch.setattr(dispatch, "plan_depthwise", lambda *a, **k: seen.append(a) or real(*a, **k))
    rng = np.random.default_rng(2)
    layer = dict(n=2, c_in=3, c_out=6, h=7, w=6, kh=3, kw=3, stride=2, dilation=1, padding=1)
    layer["pads"] = _pads(1, 2, 1, 3, 3)
    _check(*_operands(rng, layer, np.float32, bias=True), layer, variant=None)
    assert len(seen) == 1


@pytest.mark.parametrize("groups, c_in, c_out, kw_, why", [
    (1, 4, 4, {}, r"groups=1 with C_in=4, C_out=4 is not depthwise"),
    (2, 4, 4, {}, r"groups=2 with C_in=4, C_out=4 is not depthwise"),
    (4, 4, 4, dict(stride=3), r"stride_h = 3 breaks the rule: stride_h in \(1, 2\)"),
    (4, 4, 4, dict(stride=(1, 3)), r"stride_w = 3 breaks the rule: stride_w in \(1, 2\)"),
])
def test_named_variant_on_another_layer_is_a_value_error(groups, c_in, c_out, kw_, why):
    x = np.ones((0, c_in, 6, 6), np.float32)  # N = 0: refused all the same (the rule is checked first)
    w = np.ones((c_out, c_in // groups, 3, 3), np.float32)
    pattern = r"variant: k04_depthwise takes depthwise layers \(groups == C_in, C_out a multiple of C_in\) .*" + why
    with pytest.raises(ValueError, match=pattern):
        conv2d_nchw(x, w, groups=groups, padding=1, variant=DEPTHWISE_VARIANT, **kw_)


def test_config_rules_name_the_field():
    Config = k04_depthwise.Config
    for make, pattern in [
        (lambda: Config(stride_h=3), r"Config.stride_h = 3 breaks the rule: stride_h in \(1, 2\)"),
        (lambda: Config(kh=7, kw=8), r"Config.kw = 8 breaks the rule: kh \* kw <= 49"),
        (lambda: Config(rw=9), r"Config.rw = 9 breaks the rule: rw <= 8"),
        (lambda: Config(rw=0), r"Config.rw = 0: expected a positive int"),
        (lambda: Config(block_x=64, block_y=32), r"block \(64, 32\) has 2048 threads"),
        (lambda: Config(block_x=32, block_y=32, rw=8, dil_h=8, dil_w=8), r"needs \d+ bytes of static shared memory"),
    ]:
        with pytest.raises(ConfigError, match=pattern):
            make()
    x, w = np.ones((1, 2, 40, 40), np.float64), np.ones((2, 1, 3, 3), np.float64)
    big = Config(block_x=32, block_y=32, rw=8, min_blocks=1)  # fits at dilation 1, not 6 in float64
    with pytest.raises(ConfigError, match="static shared memory"):
        conv2d_nchw(x, w, groups=2, dilation=6, padding=6, variant=DEPTHWISE_VARIANT, config=big)
    with pytest.raises(TypeError, match=r"config: expected a preset name or a .*k04_depthwise.Config"):
        conv2d_nchw(x, w, groups=2, variant=DEPTHWISE_VARIANT, config=RUNGS["k01_direct"].presets["sim"])
    with pytest.raises(ValueError, match=r"config: k04_depthwise has no preset 'channels4'"):
        conv2d_nchw(x, w, groups=2, variant=DEPTHWISE_VARIANT, config="channels4")


def test_gpu_preset_rule():
    """config=None on a GPU: "default" (16 × 32 tiles) unless it would leave more than half of the
    plane idle and "small" (8 × 8) less: MobileNetV2's 14 × 14 and 7 × 7 planes."""
    for (oh, ow), preset in (((112, 112), "default"), ((56, 56), "default"), ((28, 28), "default"),
                             ((14, 14), "small"), ((7, 7), "small"), ((1, 1), "small"), ((1, 500), "small"), ((20, 500), "default")):
        assert dispatch.depthwise_preset(oh, ow) == preset, (oh, ow)


def test_launch_bounds_follow_the_registers():
    """8 blocks of 128 threads for the default 3 × 3 float32 (64 registers), fewer for float64 and
    larger filters; never above the preset's min_blocks."""
    default = k04_depthwise.PRESETS["default"]
    bounds = lambda cfg, dt: k04_depthwise.jit_options(cfg, dt)["launch_bounds"]  # noqa: E731
    assert bounds(default, np.float32) == (128, 8)
    assert bounds(default, np.float64)[1] < 8
    seven = k04_depthwise.for_layer(default, 7, 7, (1, 1), (1, 1))
    assert bounds(seven, np.float32)[1] < 8
    assert bounds(k04_depthwise.PRESETS["small"], np.float32) == (32, 32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_mobilenet_layers_on_gpu(dtype):
    """MobileNetV2's depthwise layers (224² input) at batch 2, variant None (k04 with the GPU preset
    rule) and every preset, within the bound of the float64 reference."""
    rng = np.random.default_rng(3)
    for c, hw, s in ((32, 112, 1), (96, 112, 2), (144, 56, 2), (576, 14, 2), (960, 7, 1)):
        layer = dict(n=2, c_in=c, c_out=c, h=hw, w=hw, kh=3, kw=3, stride=s, dilation=1, padding=1)
        layer["pads"] = _pads(1, s, 1, 3, 3)
        x, w, b = _operands(rng, layer, dtype, bias=True)
        for variant, config in ((None, None), (DEPTHWISE_VARIANT, "default"), (DEPTHWISE_VARIANT, "small")):
            _check(x, w, b, layer, variant=variant, config=config)
