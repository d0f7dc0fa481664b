"""conv2d_nchw with torch's parameters: stride, padding (int, pair, "same", "valid"), dilation, groups.

* The reference (reference.conv2d_nchw_reference with stride/dilation/groups/pads) against the
  brute-force definition, and on the GPU against torch.nn.functional.conv2d.
* Property test: ragged layers (N = 0, 1, 2; channels per group 1..3; groups 1..3 and depthwise;
  filters 1..3 each way; strides 1..3, dilations 1..2 per axis; every padding form), both dtypes,
  the "sim" preset and random k01 configs (rco 1..4 channels a thread), NaN-poisoned outputs,
  the γ bound of (C_in/groups)·KH·KW (+1) terms (simt_tiles.bounds).
* Routing by rule: stride 1, dilation 1, groups 1, one padding on every side keep the tiled fast
  path (dispatch.plan, unchanged); stride 2 with dilation 1 and one group takes it through
  space-to-depth (dispatch.SpaceToDepth; property test of its own); every other layer takes
  dispatch.plan_general (k01).
* Errors name the argument: groups not dividing the channels, w's channels, "same" with a stride
  (refused, as torch), bad stride/dilation/padding, a tiled variant for a strided layer, an output
  smaller than one pixel.

A bug planted once: k01 ignoring the row dilation (``a`` instead of ``a·dil_h``) failed
test_layers_match_reference[float32] (ci profile) and test_depthwise_and_dilated (both dtypes).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from simt_tiles.bounds import check_within
from simt_tiles.kernels.conv_nchw import RUNGS, conv2d_nchw, dispatch, k01_direct
from simt_tiles.kernels.conv_nchw._params import geometry, padding_of
from simt_tiles.kernels.conv_nchw.reference import conv2d_nchw_bruteforce, conv2d_nchw_reference
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import DTYPES, configs, poisoned
from .profiles import PROFILE, examples

#: the padding errors' message, up to the value received
PADDING = "padding: expected an int >= 0 or a pair of them, 'same' or 'valid'; got "

EXAMPLES = examples(20) if SIMULATOR else settings.default.max_examples

if SIMULATOR:
    _RANDOM = st.builds(k01_direct.Config, block_x=st.integers(1, 16), rco=st.integers(1, 4))
else:
    _RANDOM = st.builds(k01_direct.Config, block_x=st.sampled_from([32, 128, 256]), rco=st.sampled_from([1, 2, 4]))


def _pads(padding, stride, dilation, kh, kw):
    """(top, bottom, left, right) as torch pads (the reference's ``pads``)."""
    g = geometry(1, 1, kh, kw, stride, padding_of(padding, stride), dilation, 1)
    return g.pad_top, g.pad_bottom, g.pad_left, g.pad_right


@st.composite
def layers(draw):
    groups = draw(st.integers(1, 3), "groups")
    cg_in, cg_out = draw(st.integers(1, 3), "C_in/groups"), draw(st.integers(1, 3), "C_out/groups")
    kh, kw = draw(st.integers(1, 3), "KH"), draw(st.integers(1, 3), "KW")
    stride = draw(st.one_of(st.integers(1, 3), st.tuples(st.integers(1, 3), st.integers(1, 3))), "stride")
    dilation = draw(st.one_of(st.integers(1, 2), st.tuples(st.integers(1, 2), st.integers(1, 2))), "dilation")
    choices = [st.integers(0, 2), st.tuples(st.integers(0, 2), st.integers(0, 2)), st.just("valid")]
    if stride in (1, (1, 1)):
        choices.append(st.just("same"))
    padding = draw(st.one_of(*choices), "padding")
    pads = _pads(padding, (stride, stride) if isinstance(stride, int) else stride,
                 (dilation, dilation) if isinstance(dilation, int) else dilation, kh, kw)
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[1]), 7), "H")  # output >= 1 row
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - pads[2] - pads[3]), 7), "W")
    n = draw(st.sampled_from([1, 2, 0, 1]), "N")
    return dict(n=n, c_in=groups * cg_in, c_out=groups * cg_out, h=h, w=w, kh=kh, kw=kw, stride=stride,
                dilation=dilation, padding=padding, groups=groups, pads=pads)


def _operands(rng, layer, dtype, bias):
    x = rng.standard_normal((layer["n"], layer["c_in"], layer["h"], layer["w"])).astype(dtype)
    w = rng.standard_normal((layer["c_out"], layer["c_in"] // layer["groups"], layer["kh"], layer["kw"])).astype(dtype)
    b = rng.standard_normal(layer["c_out"]).astype(dtype) if bias else None
    return x, w, b


def _check(x, w, b, layer, variant=None, config=None):
    ref, bound = conv2d_nchw_reference(x, w, b, stride=layer["stride"], dilation=layer["dilation"],
                                       groups=layer["groups"], pads=layer["pads"])
    out = poisoned(ref.shape, x.dtype)
    got = conv2d_nchw(x, w, bias=b, stride=layer["stride"], padding=layer["padding"], dilation=layer["dilation"],
                      groups=layer["groups"], out=out, variant=variant, config=config)
    assert got is out
    chk = check_within(out.copy_to_host(), ref, bound)
    assert chk.passed, f"{chk} for {layer} {x.dtype} {config}"
    return chk


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=layers(), cfg=configs(RUNGS["k01_direct"], _RANDOM), bias=st.booleans(), seed=st.integers(0, 99))
def test_layers_match_reference(dtype, layer, cfg, bias, seed):
    note(f"config {cfg}")
    x, w, b = _operands(np.random.default_rng(seed), layer, dtype, bias)
    general = not _is_fast(layer)
    # a general layer takes k01 with the drawn config; a fast one the tiled rungs' rule (config None)
    _check(x, w, b, layer, variant="k01_direct" if general else None, config=cfg if general else None)


@st.composite
def stride2_layers(draw):
    """Layers the space-to-depth rule takes: stride 2, dilation 1, one group; odd and even filters and
    sizes, every padding form but "same"."""
    kh, kw = draw(st.integers(1, 4), "KH"), draw(st.integers(1, 4), "KW")
    padding = draw(st.one_of(st.integers(0, 2), st.tuples(st.integers(0, 2), st.integers(0, 2)), st.just("valid")),
                   "padding")
    pads = _pads(padding, (2, 2), (1, 1), kh, kw)
    h = draw(st.integers(max(1, kh - pads[0] - pads[1]), 8), "H")
    w = draw(st.integers(max(1, kw - pads[2] - pads[3]), 8), "W")
    return dict(n=draw(st.sampled_from([1, 2, 0]), "N"), c_in=draw(st.integers(1, 3), "C_in"),
                c_out=draw(st.integers(1, 3), "C_out"), h=h, w=w, kh=kh, kw=kw, stride=draw(st.sampled_from([2, (2, 2)])),
                dilation=1, padding=padding, groups=1, pads=pads)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=stride2_layers(), bias=st.booleans(), seed=st.integers(0, 99))
def test_stride2_space_to_depth(dtype, layer, bias, seed):
    """variant=None: the input's and filter's phases, then the tiled stride-1 rungs (dispatch.SpaceToDepth),
    within the layer's own bound (the extra terms are exact zeros)."""
    _check(*_operands(np.random.default_rng(seed), layer, dtype, bias), layer)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=stride2_layers(), bias=st.booleans(), seed=st.integers(0, 99),
       special=st.sampled_from([np.nan, np.inf, -np.inf]))
def test_stride2_non_finite_input_stays_in_its_windows(dtype, layer, bias, seed, special):
    """variant=None with a NaN or ±inf in the input: non-finite exactly where the reference is (an odd filter's
    padded taps read the row past a window: 0·inf spread NaN to its neighbours' outputs before the check);
    the finite outputs within their bound."""
    rng = np.random.default_rng(seed)
    x, w, b = _operands(rng, layer, dtype, bias)
    assume(x.size > 0)
    x[tuple(int(rng.integers(0, d)) for d in x.shape)] = special
    ref, bound = conv2d_nchw_reference(x, w, b, stride=layer["stride"], dilation=layer["dilation"],
                                       groups=layer["groups"], pads=layer["pads"])
    got = conv2d_nchw(x, w, bias=b, stride=layer["stride"], padding=layer["padding"], out=poisoned(ref.shape, dtype))
    got, ref = got.copy_to_host(), np.asarray(ref, np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
    assert np.array_equal(got[np.isinf(ref)], ref[np.isinf(ref)]), (got, ref)
    finite = np.isfinite(ref)
    assert check_within(got[finite], ref[finite], np.asarray(bound)[finite]).passed


@pytest.mark.parametrize("variant, layer", [
    ("k01_direct", dict(stride=1, dilation=1, groups=1)), (None, dict(stride=3, dilation=1, groups=1)),
    (None, dict(stride=1, dilation=2, groups=1)), ("k02_smem_tiled", dict(stride=1, dilation=1, groups=1)),
    (None, dict(stride=2, dilation=1, groups=1)), ("k04_depthwise", dict(stride=1, dilation=1, groups=2))])
def test_a_non_finite_weight_meets_the_padding_as_the_reference(variant, layer):
    """An inf weight on a tap that falls in the zero padding: w·0 = NaN there, on every path (k01 skipped padded
    taps, so the default gave finite values at stride 3 and dilation where the reference and k02 give NaN)."""
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((2, 2 // layer["groups"], 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf
    ref, _ = conv2d_nchw_reference(x, w, padding=layer["dilation"], **layer)
    got = conv2d_nchw(x, w, padding=layer["dilation"], variant=variant, **layer)
    assert np.isnan(ref).any() and np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
    assert np.array_equal(got[np.isinf(ref)], np.asarray(ref)[np.isinf(ref)])


def _is_fast(layer) -> bool:
    s = layer["stride"] if isinstance(layer["stride"], tuple) else (layer["stride"],) * 2
    d = layer["dilation"] if isinstance(layer["dilation"], tuple) else (layer["dilation"],) * 2
    return s == (1, 1) and d == (1, 1) and layer["groups"] == 1 and len(set(layer["pads"])) == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_depthwise_and_dilated(dtype):
    """MobileNetV2's depthwise 3×3 stride 2 (groups = C), a channel multiplier of 2, dilation 2
    with "same" padding (odd total: the extra row after, as torch), ResNet's 1×1 stride 2."""
    rng = np.random.default_rng(7)
    cases = [
        dict(n=2, c_in=4, c_out=4, h=7, w=6, kh=3, kw=3, stride=2, dilation=1, padding=1, groups=4),
        dict(n=1, c_in=3, c_out=6, h=5, w=5, kh=3, kw=3, stride=1, dilation=1, padding=1, groups=3),
        dict(n=1, c_in=2, c_out=3, h=6, w=5, kh=2, kw=3, stride=1, dilation=2, padding="same", groups=1),
        dict(n=1, c_in=5, c_out=4, h=5, w=6, kh=1, kw=1, stride=2, dilation=1, padding=0, groups=1),
    ]
    for layer in cases:
        s, d = (layer["stride"],) * 2, (layer["dilation"],) * 2
        layer["pads"] = _pads(layer["padding"], s, d, layer["kh"], layer["kw"])
        _check(*_operands(rng, layer, dtype, bias=True), layer)


def test_reference_against_bruteforce():
    rng = np.random.default_rng(3)
    for stride, dilation, groups, pads in [((2, 1), (1, 2), 2, (1, 0, 0, 2)), ((3, 2), 1, 1, (0, 1, 2, 0)),
                                            (1, (2, 2), 4, (2, 2, 1, 1))]:
        x = rng.standard_normal((2, 4, 6, 7))
        w = rng.standard_normal((4, 4 // groups, 2, 3))
        b = rng.standard_normal(4)
        ref, _ = conv2d_nchw_reference(x, w, b, stride=stride, dilation=dilation, groups=groups, pads=pads)
        np.testing.assert_allclose(ref.astype(np.float64),
                                   conv2d_nchw_bruteforce(x, w, b, stride=stride, dilation=dilation, groups=groups,
                                                          pads=pads), rtol=1e-12, atol=1e-12)


def test_routing_by_rule(monkeypatch):
    """float64 (no im2col rule): the tiled path (dispatch.plan) for stride 1 / dilation 1 / groups 1 / one
    padding, exactly as before; the depthwise rung (dispatch.plan_depthwise) for groups = C_in >= 2 with
    variant and config None (tests/test_conv_nchw_depthwise.py has its rule); dispatch.plan_general for
    anything else.  float32: test_im2col_rule."""
    seen = []
    real_plan, real_general, real_dw = dispatch.plan, dispatch.plan_general, dispatch.plan_depthwise
    monkeypatch.setattr(dispatch, "plan", lambda *a, **k: seen.append("tiled") or real_plan(*a, **k))
    monkeypatch.setattr(dispatch, "plan_general", lambda *a, **k: seen.append("general") or real_general(*a, **k))
    monkeypatch.setattr(dispatch, "plan_depthwise", lambda *a, **k: seen.append("depthwise") or real_dw(*a, **k))
    x = np.ones((1, 2, 5, 5), np.float64)
    w = np.ones((2, 2, 3, 3), np.float64)
    for kw_ in (dict(padding=1), dict(padding=(1, 1)), dict(padding="same"), dict(padding="valid"),
                dict(stride=(1, 1), dilation=1, groups=1)):
        conv2d_nchw(x, w, **kw_)
    assert seen == ["tiled"] * 5
    seen.clear()
    for kw_ in (dict(stride=(2, 1)), dict(dilation=(1, 2)), dict(groups=2, padding=0, variant="k01_direct"),
                dict(padding=(1, 0)), dict(padding="same", dilation=2), dict(stride=2, variant="k01_direct"),
                dict(groups=2, stride=3, padding=1)):
        conv2d_nchw(x, w if kw_.get("groups") != 2 else w[:, :1].copy(), **kw_)
    assert seen == ["general"] * 7
    seen.clear()
    conv2d_nchw(x, w[:, :1].copy(), groups=2, padding=0)  # groups = C_in: depthwise
    assert seen == ["depthwise"]
    seen.clear()
    conv2d_nchw(x, w, stride=2, padding=1)  # space-to-depth onto the tiled path
    assert seen == ["tiled"]
    rule = dispatch.plan_general(None, None, 64, 1, (2, 2), (1, 1))
    assert rule.rung is RUNGS["k01_direct"]
    if not SIMULATOR:
        assert rule.config.rco == 4 and dispatch.plan_general(None, None, 32, 32, (2, 2), (1, 1)).config.rco == 1


def test_im2col_rule(monkeypatch):
    """variant and config None, float32, one group, at least IM2COL_MIN_MACS multiply-adds: im2col for every
    stride/dilation/padding the tiled rungs do not take, and for stride-1 planes of at most IM2COL_MAX_PLANE
    pixels unless the tuned table has the layer; smaller layers, larger planes, float64, groups, a named
    variant or a config keep their paths.  Then end to end: a float32 call runs _im2col.run, a float64 one
    does not."""
    from simt_tiles import autotune
    from simt_tiles.kernels.conv_nchw import _im2col, _params

    def route(h, k=3, stride=1, pad=1, dilation=1, groups=1, c_in=64, dtype=np.float32, n=256, **kw):
        geom = _params.geometry(h, h, k, k, (stride, stride), (pad, pad), (dilation, dilation), groups)
        return dispatch.route(kw.get("variant"), kw.get("config"), geom, c_in, 16, k, k, x_shape=(n, c_in, h, h),
                              dtype=dtype)

    # the floor: N·C_out·OH·OW·C_in·KH·KW multiply-adds (here n·16·9·9·64·9 at a 9 × 9 plane)
    macs = 16 * 9 * 9 * 64 * 9
    floor = dispatch.IM2COL_MIN_MACS
    assert route(9, n=-(-floor // macs)) == "im2col" and route(9, n=floor // macs - (floor % macs == 0)) == "tiled"
    assert route(9, n=1, stride=2) == "space_to_depth" and route(9, n=1, dilation=2, pad=2) == "general"

    side = int(dispatch.IM2COL_MAX_PLANE ** 0.5)  # (400 = 20²)
    assert route(side) == "im2col" and route(side + 1) == "tiled"  # stride 1, the plane's limit
    assert route(7, k=1, pad=0) == "im2col" and route(56) == "tiled"  # a 1x1 layer on a 7x7 plane; 56x56
    assert route(224, k=7, stride=2, pad=3) == "im2col" and route(56, dilation=2, pad=2) == "im2col"  # any plane
    assert route(56, pad=0) == "tiled" and route(9, stride=2, dtype=np.float64) == "space_to_depth"
    assert route(9, dtype=np.float64) == "tiled" and route(9, dilation=2, pad=2, dtype=np.float64) == "general"
    assert route(9, groups=2, stride=2) == "general" and route(9, groups=8, c_in=8) == "depthwise"
    assert route(9, variant="k02_smem_tiled") == "tiled" and route(9, config="sim") == "tiled"
    assert dispatch.route(None, None, _params.geometry(9, 9, 3, 3, (1, 1), (1, 1), (1, 1), 1), 8, 16, 3, 3) \
        == "tiled"  # (no x_shape/dtype: the rule is not asked)
    geom9 = _params.geometry(9, 9, 3, 3, (1, 1), (1, 1), (1, 1), 1)
    assert dispatch.route(None, None, geom9, 64, 16, 3, 3, dtype=np.float32) == "tiled"  # (no x_shape: not asked)
    asked = []
    monkeypatch.setattr(autotune, "choose", lambda *a: asked.append(a[3]) or ("k03_double_buffered", "default"))
    assert route(9) == "tiled" and route(9, stride=2) == "im2col"  # a tuned layer (the table tunes stride 1 only)
    assert asked == [False]  # a lookup: never a tune inside the rule, SIMT_TILES_AUTOTUNE or not
    monkeypatch.undo()
    monkeypatch.setattr(_im2col, "MAX_COLS", 64 * 9 * 25 - 1)  # one image's cols (C_in·9 × 25 or 81 pixels) past it
    assert route(9) == "tiled" and route(9, stride=2, pad=1) == "space_to_depth"
    monkeypatch.undo()
    monkeypatch.setattr(dispatch, "IM2COL_MIN_MACS", 0)  # (the simulator's layers are tiny)
    seen = []
    real = _im2col.run
    monkeypatch.setattr(_im2col, "run", lambda *a, **k: seen.append(1) or real(*a, **k))
    rng = np.random.default_rng(2)
    for dtype, runs in ((np.float32, [1]), (np.float64, [])):
        seen.clear()
        x, w = rng.standard_normal((2, 3, 6, 7)).astype(dtype), rng.standard_normal((4, 3, 3, 3)).astype(dtype)
        ref, bound = conv2d_nchw_reference(x, w, padding=1)
        assert check_within(np.asarray(conv2d_nchw(x, w, padding=1)), ref, bound).passed
        assert seen == runs, dtype


def test_errors_name_the_argument():
    x = np.ones((1, 4, 6, 6), np.float32)
    w = np.ones((4, 2, 3, 3), np.float32)
    with pytest.raises(ValueError, match="groups: expected a divisor of C_in = 4 and C_out = 4.*got 3"):
        conv2d_nchw(x, np.ones((4, 1, 3, 3), np.float32), groups=3)
    with pytest.raises(ValueError, match=r"w: expected 2 input channels \(w.shape\[1\] == x.shape\[1\] / groups"):
        conv2d_nchw(x, np.ones((4, 4, 3, 3), np.float32), groups=2)
    with pytest.raises(ValueError, match="padding: 'same' is not supported for strided convolutions"):
        conv2d_nchw(x, w, groups=2, stride=2, padding="same")
    with pytest.raises(ValueError, match=PADDING + "'full'"):
        conv2d_nchw(x, w, groups=2, padding="full")
    with pytest.raises(ValueError, match="stride: expected an int >= 1 or a pair of them; got 0"):
        conv2d_nchw(x, w, groups=2, stride=0)
    with pytest.raises(TypeError, match="dilation: expected an int >= 1 or a pair of them; got 1.5"):
        conv2d_nchw(x, w, groups=2, dilation=1.5)
    with pytest.raises(TypeError, match=r"stride: expected an int >= 1 or a pair of them; got \(1, 2, 3\)"):
        conv2d_nchw(x, w, groups=2, stride=(1, 2, 3))
    with pytest.raises(ValueError, match=PADDING + "-1"):
        conv2d_nchw(x, w, groups=2, padding=-1)
    with pytest.raises(TypeError, match="groups: expected an int >= 1; got bool True"):
        conv2d_nchw(x, w, groups=True)
    with pytest.raises(ValueError, match="groups: expected an int >= 1; got 0"):
        conv2d_nchw(x, w, groups=0)
    with pytest.raises(ValueError, match="variant: k03_double_buffered takes stride 1"):
        conv2d_nchw(x, w, groups=2, variant="k03_double_buffered")
    with pytest.raises(ValueError, match=r"w: a 3x3 filter \(dilation 4x4\) is larger than the padded input"):
        conv2d_nchw(x, w, groups=2, dilation=4)
    with pytest.raises((ValueError, TypeError, ConfigError), match="config"):
        conv2d_nchw(x, w, groups=2, config="small")  # k01 has no "small"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_against_torch_on_gpu(dtype):
    """torch.nn.functional.conv2d (cuDNN, TF32 off) on ResNet-18 / MobileNetV2 layer shapes at batch 2,
    both within the bound of the float64 reference; results as torch tensors."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(11)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    for (c_in, c_out, h, k, s, p, d, g) in [(3, 64, 64, 7, 2, 3, 1, 1),  # resnet18 conv1 (224² scaled down)
                                            (64, 128, 28, 3, 2, 1, 1, 1),  # resnet18 layer2.0.conv1
                                            (64, 128, 28, 1, 2, 0, 1, 1),  # resnet18 layer2.0.downsample
                                            (96, 96, 28, 3, 2, 1, 1, 96),  # mobilenet_v2 features.4 depthwise
                                            (32, 32, 16, 3, 1, "same", 2, 4)]:
        x = rng.standard_normal((2, c_in, h, h)).astype(dtype)
        w = rng.standard_normal((c_out, c_in // g, k, k)).astype(dtype)
        b = rng.standard_normal(c_out).astype(dtype)
        xt, wt, bt = (torch.from_numpy(a).cuda() for a in (x, w, b))
        got = conv2d_nchw(xt, wt, bias=bt, stride=s, padding=p, dilation=d, groups=g)
        assert isinstance(got, torch.Tensor) and got.dtype == tdt
        expect = F.conv2d(xt, wt, bt, stride=s, padding=p, dilation=d, groups=g)
        assert got.shape == expect.shape
        pads = _pads(p, (s, s), (d, d), k, k)
        ref, bound = conv2d_nchw_reference(x, w, b, stride=s, dilation=d, groups=g, pads=pads, precise=False)
        for name, val in (("simt_tiles", got), ("torch", expect)):
            chk = check_within(val.cpu().numpy(), ref, 2 * bound)  # 2x: torch's own order of summation
            assert chk.passed, f"{name}: {chk} for layer {(c_in, c_out, h, k, s, p, d, g)}"


def test_space_to_depth_replays_its_plan():
    """With launch plans on, a stride-2 layer's three launches (the phases, the tiled layer) replay:
    the kept phase buffers are rewritten by each call, so new input values give new results."""
    from numba import cuda

    from simt_tiles import launch

    before = launch.set_enabled(True)
    launch.clear()
    try:
        rng = np.random.default_rng(1)
        w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
        xd, wd = cuda.to_device(np.zeros((1, 3, 7, 6), np.float32)), cuda.to_device(w)
        for _ in range(3):
            x = rng.standard_normal((1, 3, 7, 6)).astype(np.float32)
            xd.copy_to_device(x)
            got = conv2d_nchw(xd, wd, stride=2, padding=1).copy_to_host()
            ref, bound = conv2d_nchw_reference(x, w, stride=2, padding=1)
            assert check_within(got, ref, bound).passed
        assert launch.stats()["recorded"] == 1 and launch.stats()["hit"] == 2
    finally:
        launch.set_enabled(before)


# --- variant="im2col_gemm": im2col, then a batched matmul (_im2col.py) ------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(layer=layers(), bias=st.booleans(), seed=st.integers(0, 99))
def test_im2col_gemm_matches_reference(dtype, layer, bias, seed):
    """Every one-group layer of the drawn ones (strides, dilations, every padding form, 1×1 layers that
    skip the im2col, N = 0), within the layer's γ bound: the matmul's sums are the layer's, reordered."""
    layer = {**layer, "groups": 1}  # (the channel counts stay valid for one group)
    _check(*_operands(np.random.default_rng(seed), layer, dtype, bias), layer, variant=dispatch.IM2COL_VARIANT)


@pytest.mark.parametrize("k", [3, 1])
def test_im2col_gemm_with_no_input_channels_is_the_bias(k):
    """C_in = 0: an empty sum, so out = bias (the copy kernel divided by its rows' count, 0: ZeroDivisionError
    in the simulator, an undefined quotient on a GPU); the 1×1 layer skips the copy."""
    x, w, b = np.zeros((2, 0, 4, 5), np.float32), np.zeros((3, 0, k, k), np.float32), np.arange(1, 4, dtype=np.float32)
    out = np.full((2, 3, 4 - k + 1, 5 - k + 1), np.nan, np.float32)
    conv2d_nchw(x, w, bias=b, variant=dispatch.IM2COL_VARIANT, out=out)
    np.testing.assert_array_equal(out, np.broadcast_to(b[:, None, None], out.shape))


def test_im2col_gemm_chunks_and_replays(monkeypatch, plans):
    """Images in chunks when ``cols`` would pass MAX_COLS (here: one image a chunk, three chunks), and
    with launch plans on the im2col copies and the matmuls replay on new input values."""
    from numba import cuda

    from simt_tiles.kernels.conv_nchw import _im2col

    monkeypatch.setattr(_im2col, "MAX_COLS", 18 * 24)  # one image's cols (K = 2·3·3, P = 4·6) fits, not two
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((4, 2, 3, 3)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    xd, wd, bd = cuda.to_device(np.zeros((3, 2, 9, 11), np.float32)), cuda.to_device(w), cuda.to_device(b)
    for _ in range(3):
        x = rng.standard_normal((3, 2, 9, 11)).astype(np.float32)
        xd.copy_to_device(x)
        got = conv2d_nchw(xd, wd, bias=bd, stride=2, padding=(0, 1), variant="im2col_gemm").copy_to_host()
        ref, bound = conv2d_nchw_reference(x, w, b, stride=2, padding=(0, 1))
        assert check_within(got, ref, bound).passed
    assert plans.stats()["recorded"] == 1 and plans.stats()["hit"] == 2, plans.stats()


@pytest.mark.parametrize("cap", [18 * 7 + 3] + ([] if PROFILE == "ci" else [18 * 5]),  # ci budget: the ragged one
                         ids=lambda cap: "7_pixels_ragged" if cap % 18 else "5_pixels")
def test_im2col_gemm_pieces_of_one_image(monkeypatch, plans, cap):
    """An image whose cols alone pass MAX_COLS goes in pieces of its output pixels (K = 18: 5 or 7 pixels a
    piece, the last one shorter for 7), each matmul's result placed into out; bias, stride, dilation,
    padding; with plans on, the pieces replay on new input values."""
    from numba import cuda

    from simt_tiles.kernels.conv_nchw import _im2col

    monkeypatch.setattr(_im2col, "MAX_COLS", cap)
    rng = np.random.default_rng(cap)
    w, b = rng.standard_normal((3, 2, 3, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    kw = dict(stride=(1, 2), dilation=(2, 1), padding=(1, 2))
    xd, wd, bd = cuda.to_device(np.zeros((2, 2, 7, 9), np.float32)), cuda.to_device(w), cuda.to_device(b)
    out = cuda.to_device(np.full((2, 3, 5, 6), np.nan, np.float32))  # P = 30: 6 or 5 pieces an image
    for _ in range(2):  # recorded, then replayed on new values
        x = rng.standard_normal((2, 2, 7, 9)).astype(np.float32)
        xd.copy_to_device(x)
        got = conv2d_nchw(xd, wd, bias=bd, out=out, variant="im2col_gemm", **kw).copy_to_host()
        ref, bound = conv2d_nchw_reference(x, w, b, **kw)
        assert ref.shape == got.shape and check_within(got, ref, bound).passed
    assert plans.stats()["recorded"] == 1 and plans.stats()["hit"] == 1, plans.stats()


@pytest.mark.parametrize("limit", [1, 2, 3], ids=lambda n: f"grid_yz_{n}")
def test_im2col_copy_strides_past_the_grid_limit(monkeypatch, limit):
    """More filter rows (C_in·KH) and images than the grid's y and z hold (CUDA's 65535; here 1, 2 or 3: a block
    steps by a filter row, a channel, or both, with KH = 2): each block strides over the rest, and the layer is
    still right (dilation 2, stride (1, 2), padding)."""
    from simt_tiles.kernels.conv_nchw import _im2col

    monkeypatch.setattr(_im2col, "MAX_GRID_YZ", limit)
    rng = np.random.default_rng(5)
    n = 2 + limit  # (a shape per case: a launch plan recorded by one case is never replayed by the other)
    x, w = rng.standard_normal((n, 3, 8, 9)).astype(np.float32), rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    got = conv2d_nchw(x, w, stride=(1, 2), padding=(1, 2), dilation=2, variant="im2col_gemm")
    ref, bound = conv2d_nchw_reference(x, w, stride=(1, 2), padding=(1, 2), dilation=2)
    assert check_within(np.asarray(got), ref, bound).passed


def test_im2col_gemm_errors_name_the_argument():
    x, w = np.ones((1, 4, 5, 5), np.float32), np.ones((4, 2, 3, 3), np.float32)
    with pytest.raises(ValueError, match="variant: im2col_gemm takes layers of one group; got groups=2"):
        conv2d_nchw(x, w, groups=2, variant="im2col_gemm")
    with pytest.raises(ValueError, match="config: im2col_gemm has no config"):
        conv2d_nchw(x, np.ones((4, 4, 3, 3), np.float32), variant="im2col_gemm", config="sim")


def test_a_bad_variant_names_im2col_among_the_choices():
    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    for bad in ("nope", ["k01_direct"], 3):
        with pytest.raises(ValueError, match=r"^variant: expected one of \(.*'im2col_gemm'\) or None; got"):
            conv2d_nchw(x, w, variant=bad)
