"""scipy.ndimage parity beyond float 2-D (issue 33, part 5): ``origin=``, integer images, the
output-dtype rule (``output=``, ``out=`` of another dtype) and filters of another dtype, for
``correlate2d``, ``convolve2d``, ``correlate1d`` and ``correlate_separable`` — checked against
scipy.ndimage itself (and the long-double references with their γ bounds) in every mode.

Integer images with integer filters are exact in the compute dtype (small values), so the
result must equal scipy's bit for bit, wrap-around of out-of-range results included.  Float
filters on integer images: the result may truncate to the other side of an integer than scipy's
double sum only where the exact value lies within the rounding bound of that integer.

The planted bug (origin's sign not mirrored for convolve) is planted by
:func:`test_planted_convolve_origin_bug_is_caught` itself, which checks that the properties fail.
Tiny shapes, the simulator's "sim" presets: a few seconds under the ``ci`` profile.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given, note, settings
from hypothesis import strategies as hs
from numba import cuda

import simt_tiles as st
from simt_tiles import device_copies, launch
from simt_tiles.kernels.conv2d import _args, _common
from simt_tiles.kernels.conv2d.reference import correlate2d_reference

from .common import poisoned
from .gate_subprocess import run_real_target
from .profiles import PROFILE, examples

MODES = ("reflect", "constant", "nearest", "mirror", "wrap")
INTS = tuple(d.name for d in _args.INTEGER_DTYPES)


@hs.composite
def filter_case(draw, max_side=4, max_k=4):
    """(image shape, filter shape, origin) with origin anywhere in scipy's valid range."""
    shape = (draw(hs.integers(1, max_side + 3)), draw(hs.integers(1, max_side + 3)))
    kshape = (draw(hs.integers(1, max_k)), draw(hs.integers(1, max_k)))
    origin = tuple(draw(hs.integers(-(k // 2), (k - 1) // 2)) for k in kshape)
    return shape, kshape, origin


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


# ---------------------------------------------------------------------------
# origin= on float images: every mode, both operations, the reference and scipy
# ---------------------------------------------------------------------------


@settings(max_examples=examples(30))
@given(case=filter_case(), mode=hs.sampled_from(MODES), convolve=hs.booleans(),
       dtype=hs.sampled_from([np.float32, np.float64]), seed=hs.integers(0, 2**16))
def test_origin_matches_scipy(case, mode, convolve, dtype, seed):
    _origin_case(*case, mode, convolve, dtype, seed)


def _origin_case(shape, kshape, origin, mode, convolve, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(kshape).astype(dtype)
    f, g = (st.convolve2d, ndi.convolve) if convolve else (st.correlate2d, ndi.correlate)
    got = f(cuda.to_device(x), w, mode=mode, cval=0.5, origin=origin, out=poisoned(shape, dtype)).copy_to_host()
    ref, bound = correlate2d_reference(x, w, mode, 0.5, convolve=convolve, origin=origin)
    expect = g(x.astype(np.float64), w.astype(np.float64), mode=mode, cval=0.5, origin=origin)
    assert np.all(np.abs(got - ref) <= bound), f"outside the bound of the reference: got {got}, scipy {expect}"
    assert np.all(np.abs(expect - ref) <= bound), "the reference is not scipy's"


@settings(max_examples=examples(20))
@given(shape=hs.tuples(hs.integers(1, 7), hs.integers(1, 7)), k=hs.integers(1, 6), axis=hs.sampled_from([0, 1, -1]),
       mode=hs.sampled_from(MODES), data=hs.data())
def test_correlate1d_origin(shape, k, axis, mode, data):
    origin = data.draw(hs.integers(-(k // 2), (k - 1) // 2), label="origin")
    rng = np.random.default_rng(k)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(k)
    got = st.correlate1d(x, w, axis=axis, mode=mode, origin=origin, cval=-1.0)
    np.testing.assert_allclose(got, ndi.correlate1d(x, w, axis=axis, mode=mode, origin=origin, cval=-1.0),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", [None, "two_pass"])
@pytest.mark.parametrize("origin", [(1, -1), (-1, 0), 1])
def test_correlate_separable_origin(variant, origin):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 6))
    wy, wx = rng.standard_normal(3), rng.standard_normal(4)
    for mode in ("constant", "reflect"):
        got = st.correlate_separable(x, wy, wx, mode=mode, cval=2.0, origin=origin, variant=variant)
        np.testing.assert_allclose(got, ndi.correlate(x, np.outer(wy, wx), mode=mode, cval=2.0, origin=origin),
                                   rtol=1e-12, atol=1e-12)


def test_origin_on_other_rungs():
    """The shared-memory rungs take the shifted anchor (k03), and the vectorised one compiles it in (k07)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    for variant in ("k01_naive", "k03_register_blocked", "k07_vectorized"):
        for origin in ((1, -2), (-1, 1)):
            for f, g in ((st.correlate2d, ndi.correlate), (st.convolve2d, ndi.convolve)):
                got = f(x, w, mode="mirror", origin=origin, variant=variant, config="sim")
                ref, bound = correlate2d_reference(x, w, "mirror", convolve=f is st.convolve2d, origin=origin)
                assert np.all(np.abs(got - ref) <= bound), (variant, origin, f.__name__)
                np.testing.assert_allclose(got, g(x, w, mode="mirror", origin=origin), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("f, g", [(st.correlate2d, ndi.correlate), (st.convolve2d, ndi.convolve)],
                         ids=["correlate", "convolve"])
def test_origin_range_is_scipys(f, g):
    x = np.ones((4, 5), np.float32)
    for kshape in ((3, 4), (1, 2), (4, 1)):
        w = np.ones(kshape, np.float32)
        for o0 in range(-3, 4):
            for o1 in range(-3, 4):
                try:
                    g(x, w, origin=(o0, o1))
                except ValueError:
                    with pytest.raises(ValueError, match=r"origin: expected -\(weights.shape\[\d\] // 2\)"):
                        f(x, w, origin=(o0, o1))
                else:
                    f(x, w, origin=(o0, o1))
    with pytest.raises(ValueError, match=r"origin: expected -\(len\(weights\) // 2\) <= origin <= "):
        st.correlate1d(x, np.ones(3, np.float32), origin=2)
    with pytest.raises(ValueError, match=r"origin: expected -\(len\(wx\) // 2\) <= origin\[1\]"):
        st.correlate_separable(x, np.ones(3, np.float32), np.ones(2, np.float32), origin=(0, 1))


@pytest.mark.parametrize("origin, exc, pattern", [
    (1.0, TypeError, r"origin: expected an int or a sequence of 2 ints; got float 1.0"),
    (True, TypeError, r"origin: expected an int or a sequence of 2 ints; got bool True"),
    ((1,), ValueError, r"origin: expected an int or 2 ints"),
    ((0, 1, 0), ValueError, r"origin: expected an int or 2 ints"),
    ((0, 0.5), TypeError, r"origin: expected ints; got float 0.5"),
    ("1", TypeError, r"origin: expected an int or a sequence of 2 ints; got str"),
])
def test_bad_origin(origin, exc, pattern):
    with pytest.raises(exc, match=pattern):
        st.correlate2d(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32), origin=origin)


def test_bad_origin_1d():
    with pytest.raises(TypeError, match=r"origin: expected an int; got tuple"):
        st.correlate1d(np.ones((3, 3), np.float32), np.ones(3, np.float32), origin=(0, 1))


def test_scipy_forms_are_part_of_the_plan_key():
    """origin and output go to the planned call as the caller gave them, and their scipy forms key
    its launch plan: an int, a NumPy int and a pair; a dtype name, a NumPy type and a dtype — each
    call replays the second time.  The defaults (origin=0, output=None) are the call without them."""
    before = launch.set_enabled(True)
    launch.clear()
    try:
        x = np.arange(20, dtype=np.float32).reshape(4, 5) % 7
        w = np.arange(9, dtype=np.float32).reshape(3, 3)
        img, dev_w = cuda.to_device(x), cuda.to_device(w)
        forms = ({}, {"origin": 0, "output": None}, {"origin": np.int64(1)}, {"origin": (1, -1)},
                 {"output": "float64"}, {"output": np.float64}, {"output": np.dtype(np.float64)})
        for kw in forms:
            for _ in range(2):
                got = st.correlate2d(img, dev_w, mode="wrap", **kw).copy_to_host()
                np.testing.assert_allclose(got, ndi.correlate(x, w, mode="wrap", **kw), rtol=1e-6)
        assert launch.stats()["recorded"] == len(forms) - 1  # {} and the defaults: one plan
        assert launch.stats()["hit"] == len(forms) + 1
    finally:
        launch.set_enabled(before)
        launch.clear()


# ---------------------------------------------------------------------------
# integer images, the output dtype, filters of another dtype
# ---------------------------------------------------------------------------


def _int_image(rng, shape, dtype):
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)  # int64: values float64 holds exactly
    edges = np.array([lo, hi, 0, 1, -1 if lo < 0 else 2], np.int64)
    x = rng.integers(lo, hi, shape, dtype=np.int64, endpoint=True)
    pick = rng.random(shape) < 0.3
    x[pick] = rng.choice(edges, pick.sum())
    return x.astype(dtype)


@settings(max_examples=examples(40))
@given(case=filter_case(max_side=3, max_k=3), mode=hs.sampled_from(MODES), convolve=hs.booleans(),
       dtype=hs.sampled_from(INTS), device=hs.booleans(), seed=hs.integers(0, 2**16))
def test_integer_images_exact(case, mode, convolve, dtype, device, seed):
    """Integer filter values: exact sums, so scipy's result bit for bit (wrapped where it wraps)."""
    shape, kshape, origin = case
    rng = np.random.default_rng(seed)
    x = _int_image(rng, shape, dtype)
    w = rng.integers(-3, 4, kshape).astype(rng.choice([np.float32, np.float64, np.int16]))
    f, g = (st.convolve2d, ndi.convolve) if convolve else (st.correlate2d, ndi.correlate)
    got = f(cuda.to_device(x) if device else x, w, mode=mode, cval=3.0, origin=origin)
    expect = g(x, w, mode=mode, cval=3.0, origin=origin)
    got = _host(got)
    note(f"x {x}\nw {w}\ngot {got}\nscipy {expect}")
    assert got.dtype == expect.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expect)


@settings(max_examples=examples(20))
@given(shape=hs.tuples(hs.integers(1, 6), hs.integers(1, 6)), k=hs.integers(1, 5), mode=hs.sampled_from(MODES),
       dtype=hs.sampled_from(INTS), axis=hs.sampled_from([0, 1]), data=hs.data())
def test_integer_correlate1d_exact(shape, k, mode, dtype, axis, data):
    origin = data.draw(hs.integers(-(k // 2), (k - 1) // 2), label="origin")
    rng = np.random.default_rng(k * 7 + axis)
    x = _int_image(rng, shape, dtype)
    w = rng.integers(-2, 3, k).astype(np.float64)
    np.testing.assert_array_equal(st.correlate1d(x, w, axis=axis, mode=mode, origin=origin),
                                  ndi.correlate1d(x, w, axis=axis, mode=mode, origin=origin))


@pytest.mark.parametrize("variant", [None, "two_pass"])
@pytest.mark.parametrize("dtype", ["uint8", "int16"])
def test_integer_separable_exact(variant, dtype):
    """The separable intermediate is rounded to float32: exact for small integer sums."""
    rng = np.random.default_rng(2)
    x = _int_image(rng, (4, 5), dtype)
    wy, wx = rng.integers(-2, 3, 3).astype(np.float32), rng.integers(-2, 3, 2).astype(np.float64)
    for mode in ("constant", "wrap"):
        got = st.correlate_separable(x, wy, wx, mode=mode, cval=1.0, origin=(-1, 0), variant=variant)
        np.testing.assert_array_equal(got, ndi.correlate(x, np.outer(wy, wx), mode=mode, cval=1.0, origin=(-1, 0)))


@settings(max_examples=examples(20))
@given(case=filter_case(max_side=4, max_k=3), mode=hs.sampled_from(MODES),
       dtype=hs.sampled_from(["uint8", "uint16", "int16", "int32"]), seed=hs.integers(0, 2**16))
def test_float_filters_on_integer_images(case, mode, dtype, seed):
    """A smoothing filter (weights in [0, 1), Σ ≤ 1): no wrap-around; scipy's truncation wherever
    the exact value is not within the float rounding bound of an integer."""
    shape, kshape, origin = case
    rng = np.random.default_rng(seed)
    x = rng.integers(0, min(np.iinfo(dtype).max, 60000), shape, endpoint=True).astype(dtype)
    w = rng.random(kshape)
    w /= w.sum()
    got = st.correlate2d(x, w, mode=mode, origin=origin)
    expect = ndi.correlate(x, w, mode=mode, origin=origin)
    ref, bound = correlate2d_reference(x, w, mode, origin=origin)
    bound = bound + np.abs(ref) * 2.0**-23  # the filter rounded to float32 (the compute dtype for ≤ 16 bits)
    lo, hi = np.trunc(ref - bound), np.trunc(ref + bound)
    assert got.dtype == np.dtype(dtype)
    assert np.all((lo <= got) & (got <= hi))
    sure = lo == hi
    np.testing.assert_array_equal(got[sure], expect[sure])


@pytest.mark.parametrize("dtype", INTS)
def test_conversion_is_scipys(dtype):
    """Out-of-range, NaN, ±inf and fractional results become what scipy writes."""
    v = np.array([-50.0, 300.0, 1e10, -1e10, 2.7, -2.7, 255.9, -0.5, 2.0**31, -(2.0**31) - 0.5, 4e9, 1e19,
                  -1e19, 2.0**63, np.inf, -np.inf, np.nan])
    ref = _args.scipy_cast(v, dtype)
    # scipy: a 1 x 1 filter of weight 1 over the values (scipy skips no tap of weight 1)
    expect = ndi.correlate(v[None, :], np.ones((1, 1)), output=dtype)[0]
    np.testing.assert_array_equal(ref, expect)
    got = st.correlate2d(v[None, :], np.ones((1, 1)), output=dtype)[0]
    np.testing.assert_array_equal(got, expect)


def test_output_forms():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (4, 5)).astype(np.uint8)
    w = np.array([[1.0, -2.0, 0.5]])
    for output in (np.float32, "float64", np.dtype(np.int16), np.int32, ">f4", ">i2"):  # (scipy keeps big-endian)
        got = st.correlate2d(x, w, output=output, mode="nearest")
        expect = ndi.correlate(x, w, output=output, mode="nearest")
        assert got.dtype == expect.dtype and got.dtype.str == expect.dtype.str
        np.testing.assert_allclose(got, expect, rtol=1e-6)
    arr = np.zeros((4, 5), np.int16)
    assert st.correlate2d(x, w, output=arr) is arr
    np.testing.assert_array_equal(arr, ndi.correlate(x, w, output=np.int16))
    dev = cuda.device_array((4, 5), np.float64)
    assert st.convolve2d(cuda.to_device(x), w, out=dev, origin=(0, 1)) is dev
    np.testing.assert_allclose(dev.copy_to_host(), ndi.convolve(x, w, output=np.float64, origin=(0, 1)))
    for f, args in ((st.correlate, (x[:3, :3, None], w[:, :, None])), (st.correlate1d, (x, w[0])),
                    (st.correlate_separable, (x, w[0], w[0]))):
        assert f(*args, output=">f8").dtype.str == ">f8"
    # a float32 image with a float64 filter and result: computed in float64, as scipy
    xf = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(st.correlate2d(xf, w, output=np.float64), ndi.correlate(xf, w, output=np.float64),
                               rtol=1e-13, atol=1e-13)
    with pytest.raises(TypeError, match=r"^out: expected dtype int16 in native byte order; got >i2"):
        st.correlate2d(x, w, output=np.zeros((4, 5), ">i2"))  # (output=">i2", a dtype, gives that order)
    with pytest.raises(ValueError, match="output: give an output array as out= or output=, not both"):
        st.correlate2d(x, w, output=arr, out=arr)
    with pytest.raises(TypeError, match=r"output: expected dtype .*; got complex64 \(complex inputs"):
        st.correlate2d(x, w, output=np.complex64)
    with pytest.raises(TypeError, match=r"output: expected dtype .*; got uint64"):
        st.correlate2d(x, w, output="uint64")
    with pytest.raises(TypeError, match=r"image: expected dtype .*; got complex128"):
        st.correlate2d(x.astype(np.complex128), w)


def test_integer_device_calls_replay():
    """An integer device image records a launch plan (conversions included) that replays right."""
    before = launch.set_enabled(True)
    launch.clear()
    device_copies.clear()
    try:
        rng = np.random.default_rng(9)
        w = rng.integers(-2, 3, (3, 3)).astype(np.float32)
        for _ in range(3):  # (a reused NumPy filter's second call records its values as parameters)
            x = rng.integers(0, 256, (3, 4)).astype(np.uint8)
            got = st.correlate2d(cuda.to_device(x), w, origin=(1, -1), mode="wrap").copy_to_host()
            np.testing.assert_array_equal(got, ndi.correlate(x, w, origin=(1, -1), mode="wrap"))
        assert launch.stats()["hit"] >= 1
    finally:
        launch.set_enabled(before)
        device_copies.clear()


# ---------------------------------------------------------------------------
# the planted bug: convolve's origin not mirrored
# ---------------------------------------------------------------------------


def test_planted_convolve_origin_bug_is_caught(monkeypatch):
    right = _common.anchors

    def wrong(kh, kw, *, flipped, origin=(0, 0)):  # the bug: convolve shifts like correlate
        return right(kh, kw, flipped=flipped, origin=(-origin[0], -origin[1]) if flipped else origin)

    monkeypatch.setattr(_common, "anchors", wrong)  # every rung's call: FilterCall.anchor
    x = np.arange(30, dtype=np.float64).reshape(5, 6) % 7
    w = np.arange(9, dtype=np.float64).reshape(3, 3)
    got = st.convolve2d(x, w, origin=(1, 0), mode="wrap")
    assert not np.allclose(got, ndi.convolve(x, w, origin=(1, 0), mode="wrap"))
    failed = 0
    for mode in MODES:  # the property test's check fails with the bug planted (odd and even sizes)
        for kshape, origin in (((3, 3), (1, 0)), ((2, 4), (0, -2))):
            try:
                _origin_case((4, 5), kshape, origin, mode, True, np.float64, 1)
            except AssertionError:
                failed += 1
    assert failed == 2 * len(MODES)


@pytest.mark.skipif(PROFILE == "ci", reason="ci budget (a subprocess compiles for seconds): the full profile runs it")
def test_conversion_kernels_compile_for_the_gpu():
    """The elementwise conversions (not rungs, so not in the compile gate) build PTX for sm_90:
    every integer dtype from float32 and float64, and the widening of each into its compute dtype."""
    proc = run_real_target("""
        import numpy as np
        from numba import cuda
        from simt_tiles.kernels.conv2d import _args as m
        pairs = [(f, i) for f in m.FLOAT_DTYPES for i in m.INTEGER_DTYPES]
        pairs += [(i, m.compute_dtype(i, i)) for i in m.INTEGER_DTYPES] + [(m.FLOAT_DTYPES[1], m.FLOAT_DTYPES[0])]
        for src, dst in pairs:
            ptx, _ = cuda.compile_ptx(m.make_converter(src, dst), m.convert_signature(src, dst), cc=(9, 0))
            assert ".entry" in ptx, (src, dst)
        print(len(pairs), "built")
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_origin_forms_as_scipy():
    """A 0-d array origin is its value (scipy's); a 1-D image's origin of another length than 1 names its length."""
    rng = np.random.default_rng(6)
    x3, w3, x1, w1 = rng.random((3, 4, 5)), rng.random((3, 3, 3)), rng.random(7), rng.random(3)
    np.testing.assert_allclose(st.correlate(x3, w3, origin=np.array(1)), ndi.correlate(x3, w3, origin=1), atol=1e-12)
    np.testing.assert_allclose(st.correlate1d(x3, w1, origin=np.array(-1)), ndi.correlate1d(x3, w1, origin=-1),
                               atol=1e-12)
    np.testing.assert_allclose(st.correlate(x1, w1, origin=np.array([1])), ndi.correlate(x1, w1, origin=[1]),
                               atol=1e-12)
    with pytest.raises(ValueError, match=r"^origin: expected an int or a sequence of 1 int .*got \(0, 1\)"):
        st.correlate(x1, w1, origin=(0, 1))


def test_bool_and_float16_filters_as_scipy():
    """scipy takes a bool or float16 filter (any real dtype, as the docstrings say): converted, exactly."""
    rng = np.random.default_rng(4)
    x3, w3 = rng.random((3, 4, 5)).astype(np.float32), rng.random((3, 3, 3))
    x2 = rng.random((9, 8)).astype(np.float32)
    for w in (w3.astype(np.float16), w3 > 0.5, w3.astype(">f2")):
        want = w.astype(np.float32)
        np.testing.assert_allclose(st.correlate(x3, w), ndi.correlate(x3, want), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st.correlate2d(x2, w[0]), ndi.correlate(x2, want[0]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st.convolve(x2, w[1]), ndi.convolve(x2, want[1]), rtol=1e-5, atol=1e-6)
    w64 = (w3 * 8).astype(np.uint64)  # (scipy takes any real dtype: uint64 as its float)
    np.testing.assert_allclose(st.correlate(x3, w64), ndi.correlate(x3, w64.astype(np.float32)), rtol=1e-5, atol=1e-5)
    for w in (w3[0] > 0.5, w3[0].astype(np.float16)):  # a device one: refused, saying the NumPy one is converted
        with pytest.raises(TypeError, match=r"^weights: expected dtype .*; got a device (bool|float16) filter \(a "
                                            r"NumPy bool, float16 or uint64 filter is converted"):
            st.correlate2d(x2, cuda.to_device(w))
