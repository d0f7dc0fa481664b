"""conv2d k10_runtime_weights, the default rung: the filter read at run time.

* Property test: random tiny configs, ragged shapes, both dtypes, every mode, correlate /
  convolve / correlate1d, NumPy filters (kernel parameters) and device filters (staged in
  shared memory), zero and 2**-52 taps, NaN/±inf in the image and NaN ``cval``, NaN-poisoned
  outputs: NaN/±inf exactly where scipy has them, the rest within the reference's bound.
* A new filter *value* compiles nothing (the compiled-kernel cache does not grow); a new
  shape does.
* ``variant=None`` takes k10 up to 7 × 7 and keeps NumPy filters on the host.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from numba import cuda  # module level: the simulator swaps this global inside kernels

from simt_tiles import runtime
from simt_tiles.kernels.conv2d import (
    BEST_MAX_SIZE,
    BEST_VARIANT,
    LARGE_VARIANT,
    MODES,
    RUNGS,
    SHAPE_VARIANT,
    convolve2d,
    correlate1d,
    correlate2d,
    default_rung,
)
from simt_tiles.kernels.conv2d import (
    k10_runtime_weights as k10,
)
from simt_tiles.kernels.conv2d._common import Mode, specialise
from simt_tiles.kernels.conv2d.reference import (
    correlate1d_reference,
    correlate2d_reference,
)
from simt_tiles.runtime import SIMULATOR

from .common import DTYPES, assert_like_scipy, configs, kernel_cases, poisoned
from .profiles import examples

EPS = 2.0**-52  # scipy skips |w| <= EPS
EXAMPLES = examples(20) if SIMULATOR else settings.default.max_examples

if SIMULATOR:
    RANDOM = st.builds(k10.Config, block_x=st.integers(1, 3), block_y=st.integers(1, 3),
                       rx=st.integers(1, 3), ry=st.integers(1, 3))
else:
    RANDOM = st.builds(k10.Config, block_x=st.sampled_from([8, 32]), block_y=st.sampled_from([1, 4]),
                       rx=st.integers(1, 5), ry=st.integers(1, 6), min_blocks=st.sampled_from([1, 12]))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data())
def test_matches_scipy_with_zero_taps_and_nonfinite_values(dtype, data):
    if SIMULATOR:
        config = data.draw(configs(k10.RUNG, RANDOM), label="config")
        op = data.draw(st.sampled_from(["correlate", "convolve", "correlate1d"]), "op")
        axis = data.draw(st.sampled_from([0, 1]), "axis")
        kh = data.draw(st.integers(1, 5), "KH") if op != "correlate1d" or axis == 0 else 1
        kw = data.draw(st.integers(1, 5), "KW") if op != "correlate1d" or axis == 1 else 1
        mode = data.draw(st.sampled_from(MODES), "mode")
        on_device = data.draw(st.booleans(), "device filter")
    else:  # one kernel per mode (drawn once per run: kernel_cases); the examples vary the rest
        config, kh, kw, mode, on_device, _ = data.draw(st.sampled_from(kernel_cases(
            ("k10 zero taps", dtype), configs(k10.RUNG, RANDOM), sides=(1, 2, 3, 4, 5))), "kernel")
        ops = ["correlate", "convolve"] + (["correlate1d"] if 1 in (kh, kw) else [])
        op = data.draw(st.sampled_from(ops), "op")
        axis = 1 if kh == 1 else 0  # correlate1d's filter lies along the axis
    th, tw = config.tile()
    sides = sorted({1, 2, 3, 5, th - 1, th + 1, 2 * th + 1, tw + 1} - {0})
    h = data.draw(st.sampled_from([s for s in sides if s <= 11] or [1]), "H")
    w = data.draw(st.sampled_from([s for s in sides if s <= 11] or [1]), "W")
    assume(h * w * kh * kw <= 4000)
    cval = data.draw(st.sampled_from([0.0, 1.5, float("nan")]), "cval")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.standard_normal((h, w)).astype(dtype)
    for value in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=2), "non-finite"):
        x[rng.integers(h), rng.integers(w)] = value
    f = rng.standard_normal((kh, kw)).astype(dtype)
    kinds = rng.choice(4, size=f.shape, p=[0.6, 0.2, 0.1, 0.1])  # weight, 0, 2**-52 (skipped), 2**-51
    f = np.where(kinds == 1, 0, np.where(kinds == 2, EPS, np.where(kinds == 3, 2 * EPS, f))).astype(dtype)
    fw = cuda.to_device(f) if on_device else f
    out = poisoned(x.shape, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no NumPy warnings from simulated kernels
        if op == "correlate1d":
            correlate1d(x, fw.reshape(-1) if on_device else f.reshape(-1), axis=axis, mode=mode, cval=cval,
                        out=out, variant=BEST_VARIANT, config=config)
        else:
            fn = convolve2d if op == "convolve" else correlate2d
            fn(x, fw, mode=mode, cval=cval, out=out, variant=BEST_VARIANT, config=config)
    got = out.copy_to_host()
    with np.errstate(invalid="ignore"):
        if op == "correlate1d":
            k = f.reshape(-1)
            expect = ndi.correlate1d(x, k, axis=axis, mode=mode, cval=cval)
            ref, bound = correlate1d_reference(x, k, axis, mode, cval)
        else:
            expect = (ndi.convolve if op == "convolve" else ndi.correlate)(x, f, mode=mode, cval=cval)
            ref, bound = correlate2d_reference(x, f, mode, cval, convolve=op == "convolve")
    note(repr(assert_like_scipy(got, expect, ref, bound, f"{op} {mode} {np.dtype(dtype)}")))


def _compiles():
    return runtime._compiled.cache_info().misses


@pytest.mark.parametrize("on_device", [False, True], ids=["numpy-filter", "device-filter"])
def test_a_new_filter_value_compiles_nothing(on_device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 10)).astype(np.float32)
    put = cuda.to_device if on_device else (lambda a: a)
    first = rng.standard_normal((3, 3)).astype(np.float32)
    runtime._compiled.cache_clear()  # other tests may have built the shapes below
    correlate2d(x, put(first), mode="reflect")  # compiles the 3 x 3 reflect kernel
    before = _compiles()
    for _ in range(3):
        w = rng.standard_normal((3, 3)).astype(np.float32)
        got = correlate2d(x, put(w), mode="reflect")
        got = got if isinstance(got, np.ndarray) else got.copy_to_host()
        np.testing.assert_allclose(got, ndi.correlate(x.astype(np.float64), w.astype(np.float64),
                                                      mode="reflect"), rtol=1e-5, atol=1e-5)
    assert _compiles() == before, "a new filter value compiled a kernel"
    correlate2d(x, put(rng.standard_normal((3, 2)).astype(np.float32)), mode="reflect")
    assert _compiles() == before + 1, "a new filter shape must compile one kernel"


def test_default_rung_by_filter_size():
    assert BEST_VARIANT == "k10_runtime_weights" and BEST_MAX_SIZE == 7
    assert default_rung(7, 7) is RUNGS[BEST_VARIANT] and default_rung(1, 7) is RUNGS[BEST_VARIANT]
    # past 7 on an axis: k11 (tests/test_conv2d_large.py); k03 by its config object
    assert default_rung(8, 3) is RUNGS[LARGE_VARIANT] and default_rung(1, 9) is RUNGS[LARGE_VARIANT]
    assert default_rung(9, 9, RUNGS[SHAPE_VARIANT].presets["sim"]) is RUNGS[SHAPE_VARIANT]
    assert default_rung(9, 9, k10.PRESETS["sim"]) is RUNGS[BEST_VARIANT]  # its own config: any size


def test_variant_none_takes_the_config_of_each_rung_it_runs():
    """The public functions reach default_rung's rule: a k11 or k03 config object picks its rung at any size (the
    early check took k10's alone: TypeError), a preset name of any of the three is checked against the rung the
    size takes (named), and correlate_separable falls back to two passes from a fused preset k03 lacks."""
    import simt_tiles

    rng = np.random.default_rng(3)
    x, w9 = rng.standard_normal((5, 6)), rng.standard_normal((9, 9))
    for w, cfg in ((w9, RUNGS[LARGE_VARIANT].presets["sim"]), (w9[:3, :3], RUNGS[SHAPE_VARIANT].presets["sim"]),
                   (w9, "narrow")):
        np.testing.assert_allclose(simt_tiles.correlate2d(x, w, config=cfg), ndi.correlate(x, w), atol=1e-12)
    np.testing.assert_allclose(simt_tiles.correlate1d(x, w9[0], config=RUNGS[LARGE_VARIANT].presets["sim"]),
                               ndi.correlate1d(x, w9[0]), atol=1e-12)
    with pytest.raises(ValueError, match=r"^config: variant=None runs k11_large_filter for a 9x9 filter, which has "
                                         r"no preset 'staged'"):
        simt_tiles.correlate2d(x, w9, config="staged")
    w11 = np.full(11, 1 / 11, np.float32)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(simt_tiles.correlate_separable(x32, w11, w11, config="fast_float32"),
                               ndi.correlate(x32, np.outer(w11, w11)), atol=1e-6)
    with pytest.raises(ValueError, match=r"^config: k03_register_blocked has no preset 'fast_float32'"):
        simt_tiles.correlate_separable(x32, w11, w11, config="fast_float32", variant="two_pass")


def test_numpy_filter_is_not_uploaded(monkeypatch):
    """variant=None with a NumPy image passes a NumPy filter as kernel parameters: no copy to
    the device.  With a device image the filter's values are uploaded once, asynchronously on the
    call's stream (a synchronous copy on the default stream would wait for the GPU's queued
    work), and cached by content (simt_tiles/device_copies.py): a repeated filter is not uploaded."""
    from simt_tiles import device_copies

    device_copies.clear()
    image = np.arange(20, dtype=np.float32).reshape(4, 5)
    x = cuda.to_device(image)
    w = np.array([[0.0, 1.0], [2.0, -1.0]], np.float32)
    seen = []
    real = cuda.to_device

    def spy(a, stream=0, *args, **kw):
        seen.append((np.shape(a), stream != 0))
        return real(a, stream, *args, **kw)

    monkeypatch.setattr(cuda, "to_device", spy)
    expect = ndi.correlate(image, w, mode="wrap")
    np.testing.assert_allclose(correlate2d(image, w, mode="wrap"), expect, rtol=1e-6)
    assert seen == [(image.shape, False)], f"uploads {seen}"  # the image only
    seen.clear()
    for _ in range(2):
        np.testing.assert_allclose(correlate2d(x, w, mode="wrap").copy_to_host(), expect, rtol=1e-6)
    assert seen == [((2, 2), True)], f"uploads {seen}"  # once, on a stream object
    device_copies.clear()


def test_source_and_register_budget():
    cfg = specialise(k10.PRESETS["default"], 7, 7, Mode.REFLECT)
    p, s = k10.for_source(cfg, k10.PARAMS), k10.for_source(cfg, k10.STAGED)
    assert (p.source, s.source) == (k10.PARAMS, k10.STAGED)
    assert s.min_blocks < p.min_blocks <= cfg.min_blocks  # staged weights live in registers
    assert s.smem_bytes(4) == p.smem_bytes(4) + 49 * 4
    with pytest.raises(ValueError, match="taps: expected 49"):
        k10.make_kernel(p, np.float32, taps=9)


@pytest.mark.parametrize("on_device", [False, True], ids=["numpy-filter", "device-filter"])
@pytest.mark.parametrize("block", [(64, 1, 1, 2), (32, 2, 2, 1)], ids=["2-warps-x", "2-warps-y"])
def test_several_warps_with_zero_taps_and_nan(block, on_device):
    """Blocks of two warps (across x, across y): the scan's syncthreads_or, the checked loop
    and the staged filter under ``pytest --racecheck`` (a one-warp block hides cross-warp races:
    the race checker reports only write-write pairs inside a warp)."""
    bx, by, rx, ry = block
    config = k10.Config(block_x=bx, block_y=by, rx=rx, ry=ry)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 67)).astype(np.float32)
    x[2, 40], x[0, 3] = np.nan, np.inf
    f = np.array([[0, 1, 0], [1, -4, EPS], [0.5, 1, 0]], np.float32)
    out = poisoned(x.shape, np.float32)
    correlate2d(x, cuda.to_device(f) if on_device else f, mode="nearest", out=out, variant=BEST_VARIANT,
                config=config)
    with np.errstate(invalid="ignore"):
        expect = ndi.correlate(x, f, mode="nearest")
        ref, bound = correlate2d_reference(x, f, "nearest", 0.0)
    assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"{block} device={on_device}")
