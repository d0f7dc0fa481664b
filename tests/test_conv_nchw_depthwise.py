"""conv2d_nchw's depthwise rung, k04_depthwise: groups = C_in, C_out = M·C_in, stride 1 and 2 per axis.

* Property test against the family's reference (long double / float64) within its bound
  (γ_n(u) + γ_n(u_ref))·(Σ|w||x| + |bias|), n = KH·KW (+1 with a bias) (simt_tiles.bounds): ragged
  layers — N = 0, 1, 2; C_in 1..3; channel multiplier 1 and 2; H and W from 0 (where the padding
  leaves an output) past two "sim" tiles; filters 1..3 each way; stride 1 or 2 per axis; dilation 1
  and 2; every padding form (int, pair, "valid", "same" at stride 1) — both dtypes, the "sim" preset
  and random configs of the rung's valid space (rows a thread, loads in flight, phases included),
  NaN-poisoned ``out=``.
* Tile edges: output sides tile − 1, tile, tile + 1, 2·tile + 1 and primes for a config of several
  warps, both strides; and, for configs of the session-35 fields (RH rows a thread, loads in groups with a
  part-full last one, one or two phases), sides 1, tile ± 1, primes, strides 1 and 2 per axis, dilation,
  multiplier, both dtypes.
* Every config gives the "sim" preset's bits (the fields move work between threads, never the arithmetic).
* Blocks of several warps along x, along y and both, under the race check
  (:func:`simt_tiles.analyze.racecheck`: by barrier interval, not by the simulator's thread order);
  and the check itself fails on a mutant without the barrier.
* The analyzer's bank model: the default's window reads conflict-free at stride 1 (``padded_row``), and at
  stride 2 with two phases (2-way in the image's order).  The staging map covers the patch once.
* More output planes than grid y: z takes the rest.
* Routing (``dispatch.route``): variant=None takes k04 for groups = C_in >= 2 at stride 1 and 2 and
  keeps k01 for what k04 does not take; ``variant="k04_depthwise"`` on another layer is a ValueError
  naming the variant and the rule; config rules raise ConfigError naming the field.  The GPU rule
  (``dispatch.depthwise_config``): MobileNetV2's layers, its promises for any layer, and the bytes in flight
  it reads (``k04_depthwise.in_flight_bytes``) from the arithmetic.

A bug planted once, an off-by-one in the halo — ``Config.patch()`` one column short (no ``+ 1``: the
halo's last column never staged, the rows packed one word closer) — failed 12 of these tests:
test_layers_match_reference (both dtypes; shrunk to a 1 × 1 layer), test_several_warps_race_free (all
four configs), test_tile_edges (all four: wrong values, NaN, or a read past the shared array),
test_window_reads_are_conflict_free_at_stride_1 and test_variant_none_runs_it.

Session 35 planted each of these once (then removed it) and saw the tests named fail: a staging slot's row
from g + j instead of g·G + j in the stores (bit-for-bit, reference, the new-field edges, the race check of
8x4x2x2); the odd phase one column early, E = ⌊PW/2⌋ (16 tests: reference, edges, races, the stride-2 bank
test); an output row's input rows without the stride (bit-for-bit, reference, edges, a race); padded_row's
model ignoring the column phases (test_padded_row, through its even-width filters); in_flight_bytes without
the blocks per SM (test_in_flight_bytes, test_gpu_config_rule); the rule's one-wave test dropped
(test_gpu_config_rule, its properties); the taps of channel q % C_in (14: reference, edges, races); phases
ignored (the permutation, bank and in-flight tests); phase_offset's E = ⌊length/2⌋ (19); idle staging
threads not idle (24: races, edges, bank tests); grid z's planes counted with gridDim.z (test_planes_past_grid_y);
a staging map one row of runs short (15: the map test, races, edges, bank tests).

Session 39 (``planes``: several planes a block) planted each once (then removed it; ci profile, ``-x`` a worker,
so the counts are lower bounds): the last part-full group's guard dropped (its planes past the layer computed and
stored: test_planes_ragged and test_configs_agree_bit_for_bit, float64); every plane's threads in shared part 0
(test_layers_match_reference, test_configs_agree_bit_for_bit, float32); the group's first plane not scaled by
``planes`` (test_layers_match_reference: NaN left in ``out=``; test_planes_ragged).
"""

from __future__ import annotations

import dataclasses
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
                        rw=st.integers(1, 3), rh=st.integers(1, 3), in_flight=st.integers(1, 5),
                        phases=st.integers(1, 2), min_blocks=st.just(1), planes=st.sampled_from([1, 1, 2, 3]))
else:
    _RANDOM = st.builds(k04_depthwise.Config, block_x=st.sampled_from([4, 8, 16, 32]),
                        block_y=st.sampled_from([1, 4, 8, 16]), rw=st.sampled_from([1, 2, 4]),
                        rh=st.sampled_from([1, 2]), in_flight=st.sampled_from([1, 3, 24]),
                        phases=st.sampled_from([1, 2]), min_blocks=st.sampled_from([1, 4, 8]),
                        planes=st.sampled_from([1, 2, 4]))


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


def _fits(cfg, layer, dtype) -> bool:
    """Whether ``cfg`` with the layer compiled in (``k04_depthwise.for_layer``) keeps its patch within the static
    shared memory of ``dtype`` (a random config is checked for float32 when made: float64 doubles the patch)."""
    try:
        lay = k04_depthwise.for_layer(cfg, layer["kh"], layer["kw"], _pair(layer["stride"]), _pair(layer["dilation"]))
        lay.check_smem(dtype)
    except ConfigError:
        return False
    return True


def _threads(cfg, layer) -> int:
    oh, ow = _out_hw(layer)
    return k04_depthwise.blocks(cfg, layer["n"], layer["c_out"], oh, ow) * cfg.threads


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=layers(), cfg=configs(RUNG, _RANDOM), bias=st.booleans(), seed=st.integers(0, 99))
def test_layers_match_reference(dtype, layer, cfg, bias, seed):
    note(f"config {cfg}")
    assume(_threads(cfg, layer) <= MAX_THREADS and _fits(cfg, layer, dtype))
    x, w, b = _operands(np.random.default_rng(seed), layer, dtype, bias)
    note(repr(_check(x, w, b, layer, config=cfg)))


#: blocks of several warps: along x (64 × 1), along y (8 × 8: a warp is 4 rows of 8), one row a warp
#: (32 × 2), both ways (64 × 2: 4 warps)
WARPS = [k04_depthwise.Config(block_x=64, block_y=1, rw=1, min_blocks=1),
         k04_depthwise.Config(block_x=8, block_y=8, rw=2, min_blocks=1),
         k04_depthwise.Config(block_x=32, block_y=2, rw=1, min_blocks=1),
         k04_depthwise.Config(block_x=64, block_y=2, rw=1, min_blocks=1),
         # one warp of two output rows a thread, its loads in groups of 3
         k04_depthwise.Config(block_x=8, block_y=4, rw=2, rh=2, in_flight=3, min_blocks=1)]


@simulator_only
@pytest.mark.parametrize("cfg", WARPS, ids=lambda c: f"{c.block_x}x{c.block_y}x{c.rw}x{c.rh}")
def test_several_warps_race_free(cfg):
    """Two tile rows and a ragged tile column (every thread's share of the patch, the halo at both
    edges), stride 1 and 2 with a multiplier of 2 and a bias, under the race check: the patch is
    written before the barrier and only read after it."""
    rng = np.random.default_rng(5)
    for stride, dtype in ((1, np.float32), ((2, 1), np.float64), (2, np.float32)):
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
    The staging stores (runs of consecutive threads, consecutive patch columns) pay at most 3 where a warp's
    runs wrap into the next, padded row or its idle lanes store to their spare words — once per element,
    against RW + KW − 1 reads per row."""
    report = analyze.run(DEPTHWISE_VARIANT, ladder="conv_nchw", config="block_x=8,block_y=4,rw=4,min_blocks=1",
                         shape="1x1x4x32x1x3x3")
    sites = {s.op: s for s in report.sites if s.space == "shared" and s.array.startswith("x_s")}
    assert set(sites) == {"load", "store"}, sites
    assert sites["load"].per_request == pytest.approx(1.0), sites["load"]
    assert 1.0 <= sites["store"].per_request <= 3.0, sites["store"]
    assert not report.races and not report.uninitialized


def _worst_bank(cfg):
    """(P, the most lanes of the first warp whose first window read hits one bank): the model written out
    from the layout — lane (tx, ty) reads patch row ty·sh, column tx·rw·sw, at ``row_offset`` and
    ``column_offset``."""
    p = k04_depthwise.padded_row(cfg)
    hits = {}
    for t in range(min(32, cfg.threads)):
        tx, ty = t % cfg.block_x, t // cfg.block_x
        row = k04_depthwise.row_offset(cfg, ty * cfg.stride_h)
        col = k04_depthwise.column_offset(cfg, tx * cfg.rw * cfg.stride_w)
        bank = (row * p + col) % 32
        hits[bank] = hits.get(bank, 0) + 1
    return p, max(hits.values())


def test_padded_row():
    """Stride 1: conflict-free (an odd row length for 4 rows of 8 lanes, 4 words apart).  Stride 2:
    conflict-free with rows and columns in two phases (rows P apart, windows 4 words apart, as at stride 1);
    2-way, the least possible, in the image's order (``phases`` 1: 8 lanes of a row 8 words apart cover 4 of
    the 8-word groups, rows 2P apart start in 2 banks mod 4)."""
    default = k04_depthwise.PRESETS["default"]
    p, w = _worst_bank(default)
    assert p >= default.patch()[1] and p % 2 == 1 and w == 1
    s2 = k04_depthwise.for_layer(default, 3, 3, (2, 2), (1, 1))
    assert s2.split_h and s2.split_w and _worst_bank(s2)[1] == 1
    assert _worst_bank(dataclasses.replace(s2, phases=1))[1] == 2
    for kh in (1, 2, 3, 4, 5, 7):  # any filter (an even one: an even patch width), one or two rows a thread:
        for stride in ((1, 1), (2, 2), (1, 2)):  # conflict-free, within 32 words of the patch's width
            cfg = k04_depthwise.for_layer(dataclasses.replace(default, rh=2), kh, kh, stride, (1, 1))
            assert cfg.patch()[1] <= k04_depthwise.padded_row(cfg) < cfg.patch()[1] + 32 and _worst_bank(cfg)[1] == 1


def test_column_offset_is_a_permutation():
    """Two phases put each column of a patch row at its own word, within the row's first PW words
    (even columns, then odd), and each row at its own shared row; one phase, or stride 1, leaves the order."""
    for pw_cfg in (k04_depthwise.Config(block_x=3, rw=2, stride_w=2, min_blocks=1),  # odd width: 13
                   k04_depthwise.Config(block_x=4, rw=1, stride_w=2, kw=2, min_blocks=1)):  # even width: 8
        pw = pw_cfg.patch()[1]
        at = [k04_depthwise.column_offset(pw_cfg, c) for c in range(pw)]
        assert sorted(at) == list(range(pw)), at
        assert at[:2] == [0, (pw + 1) // 2] and at[2] == 1
        same = dataclasses.replace(pw_cfg, phases=1)
        assert [k04_depthwise.column_offset(same, c) for c in range(pw)] == list(range(pw))
    for rows_cfg in (k04_depthwise.Config(block_y=3, stride_h=2, min_blocks=1),  # odd height: 7
                     k04_depthwise.Config(block_y=2, rh=2, stride_h=2, kh=2, min_blocks=1)):  # even height: 8
        ph = rows_cfg.patch()[0]
        assert sorted(k04_depthwise.row_offset(rows_cfg, r) for r in range(ph)) == list(range(ph))
        assert k04_depthwise.row_offset(rows_cfg, 1) == (ph + 1) // 2
        assert k04_depthwise.row_offset(dataclasses.replace(rows_cfg, stride_h=1), 1) == 1


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
    assert bounds(k04_depthwise.PRESETS["tall"], np.float32) == (128, 8)  # 10 values in flight: 56 registers


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_mobilenet_layers_on_gpu(dtype):
    """MobileNetV2's depthwise layers (224² input) at batch 2, variant None (k04 with the GPU rule) and
    every preset (and the default with the BEFORE fields), within the bound of the float64 reference."""
    rng = np.random.default_rng(3)
    for c, hw, s in ((32, 112, 1), (96, 112, 2), (144, 56, 2), (576, 14, 2), (960, 7, 1)):
        layer = dict(n=2, c_in=c, c_out=c, h=hw, w=hw, kh=3, kw=3, stride=s, dilation=1, padding=1)
        layer["pads"] = _pads(1, s, 1, 3, 3)
        x, w, b = _operands(rng, layer, dtype, bias=True)
        for variant, config in ((None, None), (DEPTHWISE_VARIANT, "default"), (DEPTHWISE_VARIANT, "small"),
                                (DEPTHWISE_VARIANT, "tall"),
                                (DEPTHWISE_VARIANT, dataclasses.replace(k04_depthwise.PRESETS["default"],
                                                                        **k04_depthwise.BEFORE))):
            _check(x, w, b, layer, variant=variant, config=config)


# --- session 35: every load of a thread in flight, two phases at stride 2, RH output rows a thread ---


@simulator_only
@pytest.mark.parametrize("phases, wavefronts", [(2, 1.0), (1, 2.0)])
def test_window_reads_at_stride_2(phases, wavefronts):
    """The analyzer's bank model on one warp (8 × 4, rw 4) of a 3 × 3 stride-2 layer: with the patch's
    rows and columns in two phases every window read is one wavefront, as at stride 1; in the image's
    order two (lanes 8 words apart).  Recorded from the public call (``analyze.recording``)."""
    cfg = k04_depthwise.Config(block_x=8, block_y=4, rw=4, phases=phases, min_blocks=1)
    rng = np.random.default_rng(1)
    layer = dict(n=1, c_in=1, c_out=1, h=8, w=64, kh=3, kw=3, stride=2, dilation=1, padding=1)
    layer["pads"] = _pads(1, 2, 1, 3, 3)
    x, w, b = _operands(rng, layer, np.float32, bias=False)
    with analyze.recording() as report:
        _check(x, w, b, layer, config=cfg)
    sites = {s.op: s for s in report.sites if s.space == "shared" and s.array.startswith("x_s")}
    assert set(sites) == {"load", "store"}, sites
    assert sites["load"].per_request == pytest.approx(wavefronts), sites["load"]
    assert not report.races and not report.uninitialized


def _layer_for(oh, ow, kh, kw, stride, dilation, pads, extra):
    """The layer of input sides giving an oh × ow output (``extra``: rows/columns the stride drops)."""
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    h = sh * (oh - 1) + dh * (kh - 1) + 1 - 2 * pads[0] + extra[0]
    w = sw * (ow - 1) + dw * (kw - 1) + 1 - 2 * pads[1] + extra[1]
    return dict(h=h, w=w, kh=kh, kw=kw, stride=stride, dilation=dilation, padding=tuple(pads),
                pads=(pads[0], pads[0], pads[1], pads[1]))


#: the new fields at the simulator's sizes: two rows a thread, loads in groups of 3, two phases; three
#: rows, one load at a time (the staging before session 35), the image's column order; a warp along x
EDGES = [k04_depthwise.Config(block_x=4, block_y=4, rw=2, rh=2, in_flight=3, phases=2, min_blocks=1),
         k04_depthwise.Config(block_x=4, block_y=2, rw=3, rh=3, in_flight=1, phases=1, min_blocks=1),
         k04_depthwise.Config(block_x=8, block_y=2, rw=1, rh=2, in_flight=2, phases=2, min_blocks=1)]


@st.composite
def edge_layers(draw, cfg):
    """A depthwise layer whose output sides are 1, tile ± 1, the tile, 2·tile + 1 or a prime, at stride 1
    or 2 per axis, dilation 1 or 2, a 3 × 3, 1 × 3 or 2 × 5 filter, padding 0..2, multiplier 1 or 2."""
    def side(tile):
        return draw(st.sampled_from(sorted({1, max(1, tile - 1), tile, tile + 1, 2 * tile + 1, 2, 3, 5, 7, 11, 13})))

    oh, ow = side(cfg.tile_h), side(cfg.tile_w)
    stride = draw(st.sampled_from([1, 2, (2, 1), (1, 2)]), "stride")
    dilation = draw(st.sampled_from([1, 2, (1, 2)]), "dilation")
    kh, kw = draw(st.sampled_from([(3, 3), (1, 3), (2, 5)]), "filter")
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    # symmetric padding that leaves an input of at least one row and column
    ph = draw(st.integers(0, min(2, (sh * (oh - 1) + dh * (kh - 1)) // 2)), "pad_h")
    pw = draw(st.integers(0, min(2, (sw * (ow - 1) + dw * (kw - 1)) // 2)), "pad_w")
    extra = (draw(st.integers(0, sh - 1)), draw(st.integers(0, sw - 1)))
    layer = _layer_for(oh, ow, kh, kw, stride, dilation, (ph, pw), extra)
    c_in, mult = draw(st.integers(1, 2), "C_in"), draw(st.sampled_from([1, 2]), "multiplier")
    layer.update(n=1, c_in=c_in, c_out=mult * c_in)
    assert _out_hw(layer) == (oh, ow), layer
    return layer


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("cfg", EDGES, ids=lambda c: f"{c.block_x}x{c.block_y}x{c.rw}x{c.rh}f{c.in_flight}p{c.phases}")
@settings(max_examples=examples(6), deadline=None)
@given(data=st.data(), bias=st.booleans(), seed=st.integers(0, 99))
def test_new_fields_at_tile_edges(dtype, cfg, data, bias, seed):
    """RH rows a thread, the loads in groups (a last group part-full), two phases or one: output sides
    that are not tile multiples (1, tile ± 1, primes), strides 1 and 2 per axis, dilation, a multiplier,
    within the reference's bound (γ_n, n = KH·KW terms, + 1 with a bias)."""
    layer = data.draw(edge_layers(cfg))
    note(f"layer {layer}")
    assume(_threads(cfg, layer) <= 2 * MAX_THREADS)
    _check(*_operands(np.random.default_rng(seed), layer, dtype, bias), layer, config=cfg)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=layers(hmax=7), cfg=_RANDOM, bias=st.booleans(), seed=st.integers(0, 99))
def test_configs_agree_bit_for_bit(dtype, layer, cfg, bias, seed):
    """The tile, the rows a thread, the loads in flight and the column phases change which thread computes
    an output and when its inputs arrive, never its arithmetic (KH·KW products added in filter order, then
    the bias): every config gives the "sim" preset's bits."""
    assume(_threads(cfg, layer) <= MAX_THREADS and _threads(RUNG.presets["sim"], layer) <= MAX_THREADS)
    assume(_fits(cfg, layer, dtype))
    note(f"config {cfg}")
    x, w, b = _operands(np.random.default_rng(seed), layer, dtype, bias)
    kw_ = dict(bias=b, stride=layer["stride"], padding=layer["padding"], dilation=layer["dilation"],
               groups=layer["c_in"], variant=DEPTHWISE_VARIANT)
    np.testing.assert_array_equal(conv2d_nchw(x, w, config=cfg, **kw_), conv2d_nchw(x, w, config="sim", **kw_))


def test_in_flight_bytes():
    """The lesson's number, from the arithmetic: blocks per SM (launch bounds) × the patch × the share of
    a thread's staging slots it loads before its first store."""
    default = k04_depthwise.PRESETS["default"]
    f32 = np.float32
    assert k04_depthwise.blocks_per_sm(default, f32) == 8  # 64 registers: 8 blocks of 128 threads
    assert k04_depthwise.in_flight_bytes(default, f32) == 8 * (18 * 34) * 4  # 3 × 3 stride 1: 19,584 B
    s2 = k04_depthwise.for_layer(default, 3, 3, (2, 2), (1, 1))
    assert s2.staging() == (33, 3, 2, 11) and s2.group == 22  # two runs of 33 columns, 11 rows of them
    assert k04_depthwise.blocks_per_sm(s2, f32) == 7  # 22 values in flight: 72 registers
    assert k04_depthwise.in_flight_bytes(s2, f32) == 7 * (33 * 65) * 4  # 60,060 B
    before = dataclasses.replace(s2, **k04_depthwise.BEFORE)
    assert before.group == 1 and not (before.split_h or before.split_w)
    assert k04_depthwise.in_flight_bytes(before, f32) == pytest.approx(8 * (33 * 65) * 4 / 22)  # 3 KB an SM
    tall = k04_depthwise.PRESETS["tall"]
    assert tall.tile_h == 32 and k04_depthwise.in_flight_bytes(tall, f32) == 8 * (34 * 34) * 4
    groups = dataclasses.replace(s2, in_flight=5)  # 22 slots in groups of 5
    assert groups.group == 5 and k04_depthwise.in_flight_bytes(groups, f32) == pytest.approx(
        k04_depthwise.blocks_per_sm(groups, f32) * (33 * 65) * 4 * 5 / 22)


#: MobileNetV2 (torchvision, 224²): (C, H, K, stride) of depthwise layers, and what the rule picks at N = 1 and 32
#: on 132 SMs, float32: the preset, rows a thread
RULE_CASES = [
    ((32, 112, 3, 1), ("default", 1), ("default", 2)),  # features.1.conv.0.0: N = 1 keeps a full wave of rows
    ((96, 112, 3, 2), ("default", 1), ("default", 1)),  # features.2.conv.1.0: stride 2 has 67 KB in flight
    ((144, 56, 3, 2), ("default", 1), ("default", 1)),  # features.4.conv.1.0
    ((576, 14, 3, 2), ("small", 1), ("small", 1)),  # features.14.conv.1.0: a 7 × 7 plane; two planes a block at 32
    ((144, 56, 3, 1), ("default", 1), ("default", 2)),  # features.3.conv.1.0
    ((960, 7, 3, 1), ("small", 1), ("small", 1)),  # features.15.conv.1.0: two rows would idle 62 % of the plane
]


@pytest.mark.parametrize("layer, at1, at32", RULE_CASES, ids=lambda v: str(v))
def test_gpu_config_rule(layer, at1, at32):
    c, hw, k, s = layer
    o = (hw + 2 * (k // 2) - k) // s + 1
    for n, (preset, rh) in ((1, at1), (32, at32)):
        cfg = dispatch.depthwise_config((n, c, o, o), k, k, (s, s), (1, 1), np.dtype(np.float32), 132)
        base = k04_depthwise.PRESETS[preset]
        assert (cfg.block_x, cfg.block_y, cfg.rw, cfg.rh) == (base.block_x, base.block_y, base.rw, rh), (n, cfg)
        assert (cfg.kh, cfg.kw, cfg.stride_h, cfg.stride_w) == (k, k, s, s) and cfg.group == cfg.x_loads
        # two planes a block: a stride-2 one-warp tile whose grid fills a block-limited wave (only features.14 at 32)
        assert cfg.planes == (2 if (c, n) == (576, 32) else 1), (n, cfg)
        assert cfg.min_blocks == base.min_blocks // cfg.planes


@settings(max_examples=examples(60), deadline=None)
@given(n=st.one_of(st.just(1), st.integers(1, 64)), c=st.one_of(st.integers(2, 40), st.integers(2, 1024)),
       o=st.integers(1, 130), k=st.sampled_from([1, 3, 5, 7]),
       s=st.sampled_from([1, 2]), d=st.sampled_from([1, 2]), dtype=st.sampled_from(DTYPES),
       sms=st.sampled_from([1, 132]))
def test_gpu_config_rule_properties(n, c, o, k, s, d, dtype, sms):
    """What the rule promises, for any layer: one row a thread unless more rows raised the bytes in flight
    while one row was short of the target; a taller tile covers 3/4 of the plane and fills a wave."""
    dtype = np.dtype(dtype)
    cfg = dispatch.depthwise_config((n, c, o, o), k, k, (s, s), (d, d), dtype, sms)
    target = k04_depthwise.IN_FLIGHT_TARGET
    if cfg.planes > 1:  # stride 2, one warp a plane, a grid past the SMs' block limit: two planes a block
        single = dataclasses.replace(cfg, planes=1, min_blocks=cfg.min_blocks * 2)
        assert cfg.planes == 2 and s == 2 and cfg.block_x * cfg.block_y == 32
        assert k04_depthwise.blocks(single, n, c, o, o) >= sms * dispatch.SM_BLOCK_LIMIT
        cfg.check_smem(dtype)
        cfg = single
    one = dataclasses.replace(cfg, rh=1)
    assert cfg.rh in dispatch.DEPTHWISE_ROWS and one == k04_depthwise.for_layer(
        k04_depthwise.PRESETS[dispatch.depthwise_preset(o, o)], k, k, (s, s), (d, d))
    if cfg.rh > 1:
        lower = dataclasses.replace(cfg, rh=dispatch.DEPTHWISE_ROWS[dispatch.DEPTHWISE_ROWS.index(cfg.rh) - 1])
        assert k04_depthwise.in_flight_bytes(lower, dtype) < target
        assert k04_depthwise.in_flight_bytes(cfg, dtype) > k04_depthwise.in_flight_bytes(lower, dtype)
        assert dispatch.plane_used(cfg, o, o) >= dispatch.DEPTHWISE_MIN_USED
        assert k04_depthwise.blocks(cfg, n, c, o, o) >= sms * k04_depthwise.blocks_per_sm(cfg, dtype)
        cfg.check_smem(dtype)


@settings(max_examples=examples(100), deadline=None)
@given(cfg=_RANDOM, k=st.integers(1, 7), s=st.sampled_from([(1, 1), (2, 2), (1, 2)]), d=st.integers(1, 2))
def test_staging_map_covers_the_patch_once(cfg, k, s, d):
    """Every patch element is one slot of one thread (rows sr + i·SR, columns sc + k·SC of the threads
    below SR·SC); runs no longer than the block, at least 8 columns unless the block allows only shorter."""
    try:
        cfg = k04_depthwise.for_layer(cfg, k, k, s, (d, d))
    except ConfigError:
        assume(False)
    rows, cols = cfg.patch()
    m = cfg.staging()
    threads = cfg.block_x * cfg.block_y  # one plane's threads (``planes`` > 1: each stages its own patch)
    assert m.sc <= threads and m.sr == threads // m.sc and m.slots == cfg.x_loads
    assert m.sc >= min(8, -(-cols // -(-cols // threads)))
    seen = [(sr + i * m.sr, sc + kk * m.sc) for t in range(m.sr * m.sc) for sr, sc in [divmod(t, m.sc)]
            for i in range(m.rch) for kk in range(m.cch)]
    inside = [e for e in seen if e[0] < rows and e[1] < cols]
    assert len(inside) == len(set(inside)) == rows * cols


def test_planes_past_grid_y(monkeypatch):
    """More output planes than grid y holds: z takes the rest, and the last z's blocks past the planes
    return (a limit of 2 planes a z here, 5 planes: 3 z's)."""
    monkeypatch.setattr(k04_depthwise, "MAX_GRID_YZ", 2)
    cfg = k04_depthwise.Config(block_x=4, block_y=2, rw=2, min_blocks=1)
    layer = dict(n=1, c_in=5, c_out=5, h=5, w=9, kh=3, kw=3, stride=(2, 1), dilation=1, padding=1)
    layer["pads"] = _pads(1, (2, 1), 1, 3, 3)
    (tiles, y, z), _ = RUNG.geometry(cfg, 1, 5, *_out_hw(layer))
    assert _out_hw(layer) == (3, 9) and (tiles, y, z) == (2 * 2, 2, 3)  # 2 × 8 tiles
    _check(*_operands(np.random.default_rng(4), layer, np.float64, bias=True), layer, config=cfg)


# --- issue 33: several planes a block (``planes``: block z) -------------------------------------


@st.composite
def plane_layers(draw):
    """A depthwise layer whose N·C_out planes are ragged for ``planes`` 2..4: 1, primes, not multiples —
    stride 1 or 2 per axis, dilation 1 or 2, padding 0..2, 3 × 3 or 2 × 3, small planes (1..9 outputs a side)."""
    n, c_in = draw(st.sampled_from([(1, 1), (1, 3), (1, 5), (1, 7), (2, 3), (3, 1), (1, 2)]), "N, C_in")
    mult = draw(st.sampled_from([1, 1, 2]), "multiplier")
    stride = draw(st.sampled_from([1, 2, (2, 1)]), "stride")
    dilation = draw(st.sampled_from([1, 2, (1, 2)]), "dilation")
    kh, kw = draw(st.sampled_from([(3, 3), (2, 3)]), "filter")
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    oh, ow = draw(st.integers(1, 5), "OH"), draw(st.integers(1, 9), "OW")
    ph = draw(st.integers(0, min(2, (sh * (oh - 1) + dh * (kh - 1)) // 2)), "pad_h")
    pw = draw(st.integers(0, min(2, (sw * (ow - 1) + dw * (kw - 1)) // 2)), "pad_w")
    layer = _layer_for(oh, ow, kh, kw, stride, dilation, (ph, pw), (0, 0))
    layer.update(n=n, c_in=c_in, c_out=mult * c_in)
    assert _out_hw(layer) == (oh, ow), layer
    return layer


#: several planes a block: one warp of two planes (4 × 4 threads), two planes of one warp each (8 × 4),
#: three planes of 2 × 4 (a warp spans planes), four of "small"'s shape at the simulator's size (4 × 2)
PLANES = [k04_depthwise.Config(block_x=4, block_y=4, rw=2, planes=2, min_blocks=1),
          k04_depthwise.Config(block_x=8, block_y=4, rw=1, planes=2, min_blocks=1),
          k04_depthwise.Config(block_x=2, block_y=4, rw=2, rh=2, in_flight=3, planes=3, min_blocks=1),
          k04_depthwise.Config(block_x=4, block_y=2, rw=2, planes=4, phases=1, min_blocks=1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("cfg", PLANES, ids=lambda c: f"{c.block_x}x{c.block_y}x{c.rw}x{c.rh}p{c.planes}")
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data(), bias=st.booleans(), seed=st.integers(0, 99))
def test_planes_ragged(dtype, cfg, data, bias, seed):
    """``planes`` > 1 over N·C_out of 1, primes and non-multiples (the last group part-full: its planes past
    the layer computed as the last one, their stores skipped), strides, dilation, padding, a multiplier:
    NaN-poisoned ``out=`` within the reference's bound, and the bits of ``planes`` = 1."""
    layer = data.draw(plane_layers())
    note(f"layer {layer}")
    assume(_threads(cfg, layer) <= 3 * MAX_THREADS)
    x, w, b = _operands(np.random.default_rng(seed), layer, dtype, bias)
    _check(x, w, b, layer, config=cfg)
    kw_ = dict(bias=b, stride=layer["stride"], padding=layer["padding"], dilation=layer["dilation"],
               groups=layer["c_in"], variant=DEPTHWISE_VARIANT)
    one = dataclasses.replace(cfg, planes=1)
    np.testing.assert_array_equal(conv2d_nchw(x, w, config=cfg, **kw_), conv2d_nchw(x, w, config=one, **kw_))


@simulator_only
def test_planes_race_free():
    """Three planes a block over 5 planes (a part-full last group) of a stride-2 layer with a bias, under the
    race check: each plane's threads write their own part of the patch before the barrier."""
    cfg = k04_depthwise.Config(block_x=4, block_y=2, rw=2, planes=3, min_blocks=1)
    layer = dict(n=1, c_in=5, c_out=5, h=2 * cfg.tile_h + 1, w=2 * cfg.tile_w + 3, kh=3, kw=3, stride=2,
                 dilation=1, padding=1)
    layer["pads"] = _pads(1, 2, 1, 3, 3)
    with analyze.racecheck():
        _check(*_operands(np.random.default_rng(6), layer, np.float32, bias=True), layer, config=cfg)


def test_planes_past_grid_y_in_groups(monkeypatch):
    """Groups of planes past grid y: z takes the rest (a limit of 2 groups a z; 7 planes in groups of 2: 4
    groups, 2 z's, the last group half past the layer)."""
    monkeypatch.setattr(k04_depthwise, "MAX_GRID_YZ", 2)
    cfg = k04_depthwise.Config(block_x=4, block_y=2, rw=2, planes=2, min_blocks=1)
    layer = dict(n=1, c_in=7, c_out=7, h=5, w=9, kh=3, kw=3, stride=(2, 1), dilation=1, padding=1)
    layer["pads"] = _pads(1, (2, 1), 1, 3, 3)
    (tiles, y, z), block = RUNG.geometry(cfg, 1, 7, *_out_hw(layer))
    assert (tiles, y, z) == (4, 2, 2) and block == (4, 2, 2)
    _check(*_operands(np.random.default_rng(7), layer, np.float64, bias=True), layer, config=cfg)
    (_, y, z), _ = RUNG.geometry(cfg, 1, 8, 3, 9)  # 8 planes: 4 groups exactly
    assert (y, z) == (2, 2)


def test_planes_arithmetic():
    """The block, its shared memory (``planes`` parts), the blocks a layer launches, the launch bounds and the
    bytes in flight an SM: features.14 at batch 32 (18,432 one-warp blocks) in groups of 2 and 4."""
    small = k04_depthwise.PRESETS["small"]
    f32 = np.float32
    assert small.block() == (4, 8) and small.planes == 1
    for planes, name in ((2, "small_p2"), (4, "small_p4")):
        cfg = k04_depthwise.PRESETS[name]
        assert cfg == dataclasses.replace(small, planes=planes, min_blocks=32 // planes)
        assert cfg.block() == (4, 8, planes) and cfg.threads == 32 * planes and cfg.plane_threads == 32
        assert cfg.staging() == small.staging() and cfg.registers(4) == small.registers(4)
        assert cfg.smem_bytes(4) == planes * small.smem_bytes(4) and cfg.smem_bytes(8) == planes * small.smem_bytes(8)
        assert k04_depthwise.blocks(cfg, 32, 576, 7, 7) == 18432 // planes
        assert k04_depthwise.blocks(cfg, 1, 7, 7, 7) == -(-7 // planes)
        assert k04_depthwise.jit_options(cfg, f32)["launch_bounds"] == (32 * planes, 32 // planes)
        assert k04_depthwise.in_flight_bytes(cfg, f32) == pytest.approx(k04_depthwise.in_flight_bytes(small, f32))
    assert k04_depthwise.blocks(small, 32, 576, 7, 7) == 18432
    with pytest.raises(ConfigError, match=r"Config.planes = 65 breaks the rule: planes <= 64"):
        k04_depthwise.Config(block_x=1, block_y=1, planes=65)
    with pytest.raises(ConfigError, match=r"block \(32, 32, 2\) has 2048 threads"):
        k04_depthwise.Config(block_x=32, block_y=32, rw=1, planes=2)
    with pytest.raises(ConfigError, match=r"needs \d+ bytes of static shared memory"):
        k04_depthwise.Config(block_x=32, block_y=4, rw=8, planes=8)  # 8 patches of 6 × 258: 54 KB
