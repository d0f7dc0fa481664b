"""Semantics callers rely on, checked against NumPy/SciPy themselves, per variant.

* **Zero taps** — scipy.ndimage's ``correlate``/``convolve`` skip every tap with
  ``|w| <= 2**-52`` (``ni_filters.c``: ``fabs(w) > DBL_EPSILON``), so a NaN or inf in
  the image (or a NaN ``cval``) spreads only along the other taps; ``correlate1d``
  counts every tap (0·NaN = NaN).  Every conv2d rung, both dtypes, correlate and
  convolve, a few modes: NaN and ±inf positions equal scipy's, finite values within
  the reference's bound (the reference follows the same rule, checked here too).
  ``correlate_separable`` has the semantics of ``correlate`` with ``outer(wy, wx)``.
* **Empty reductions** — ``reduce(x, "max"|"min", axis=...)`` raises ValueError
  whenever NumPy does (an empty reduced axis, even with an empty result), and
  returns what NumPy returns otherwise (shape, dtype, values, scalar or array).
* **Quiet simulator** — kernels given ±inf/NaN emit no RuntimeWarning (the
  simulator evaluates them on NumPy scalars; the GPU does not warn): every call
  here runs with warnings as errors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.ndimage as ndi
from numba import cuda  # module level: the simulator swaps this global inside kernels

from simt_tiles.kernels.conv2d import (
    CONV2D_VARIANTS,
    SEPARABLE_VARIANTS,
    convolve2d,
    correlate1d,
    correlate2d,
    correlate_separable,
)
from simt_tiles.kernels.conv2d.reference import (
    correlate1d_reference,
    correlate2d_reference,
    correlate_separable_reference,
)
from simt_tiles.kernels.reduce import REDUCE_OPS, reduce
from simt_tiles.kernels.softmax import SOFTMAX_VARIANTS, softmax

from .common import BOTH_OPS, DTYPES, SEMANTICS_CONFIG, assert_like_scipy

EPS = 2.0**-52  # DBL_EPSILON: scipy skips |w| <= EPS, counts anything larger
SENTINEL = -7.75e7  # the output's initial value: an element a kernel forgets to write shows up


def _image(dtype, shape=(7, 5)):
    """A ragged image with NaN, +inf and -inf where zero taps matter (inside and on the edge)."""
    x = (np.arange(np.prod(shape)).reshape(shape) % 7 - 3).astype(dtype) / 2
    x[3, 2] = np.nan
    x[1, 3] = np.inf
    x[shape[0] - 2, 0] = -np.inf
    return x


def _out(shape, dtype):
    return cuda.to_device(np.full(shape, SENTINEL, dtype))


def _quietly(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with NumPy's floating-point warnings as errors: the simulator
    evaluates kernel bodies on NumPy scalars, and users must not see kernel lines as
    ``RuntimeWarning: invalid value``.  (Only that category: on a GPU, Numba's own advice and
    compiler notes — tiny grids, NVVM messages — are not what this checks.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return fn(*args, **kwargs)


# ---- zero taps: correlate2d / convolve2d -----------------------------------------------

LAPLACIAN = [[0, 1, 0], [1, -4, 1], [0, 1, 0]]
#: (name, filter, mode, cval): each filter has zero taps (and taps of exactly 2**-52, skipped,
#: and 2**-51, counted) next to non-zero ones; a NaN cval spreads only along counted taps
FILTER_CASES = [
    ("laplacian-reflect", LAPLACIAN, "reflect", 0.0),
    ("tiny-constant-nan", [[EPS, 0.5, -0.0], [2 * EPS, 0.0, 1.5]], "constant", float("nan")),
    ("ring-wrap", [[1, 1, 1, 1], [1, 0, 0, 1], [1, 0, -0.0, 1], [1, 1, 1, 2]], "wrap", 0.0),
    ("column-mirror", [[1], [0], [0], [0], [-1]], "mirror", 0.0),
    ("identity-nearest", [[0, 1, 0]], "nearest", 0.0),
    ("corners-constant-inf", [[1, 0, 0], [0, 0, 0], [0, 0, 2]], "constant", float("inf")),
    # fabs(NaN) > DBL_EPSILON is false: scipy's correlate skips a NaN weight too
    ("nan-weight-reflect", [[1, float("nan"), 1], [0, 2, 0]], "reflect", 0.0),
]


@pytest.mark.parametrize("case", FILTER_CASES, ids=lambda c: c[0])
@pytest.mark.parametrize("ops", BOTH_OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
def test_zero_taps_do_not_spread_nan_or_inf(variant, dtype, ops, case):
    name, weights, mode, cval = case
    x = _image(dtype)
    w = np.array(weights, dtype)
    for convolve in ops:
        fn, sp = (convolve2d, ndi.convolve) if convolve else (correlate2d, ndi.correlate)
        out = _out(x.shape, dtype)
        _quietly(fn, cuda.to_device(x), cuda.to_device(w), mode=mode, cval=cval, out=out, variant=variant,
                 config=SEMANTICS_CONFIG)
        with np.errstate(invalid="ignore"):
            expect = sp(x, w, mode=mode, cval=cval)
            ref, bound = correlate2d_reference(x, w, mode, cval, convolve=convolve)
        assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"{variant} {name} {np.dtype(dtype)} {convolve=}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_default_variant_follows_the_rule_with_numpy_arrays(dtype):
    x, w = _image(dtype), np.array(LAPLACIAN, dtype)
    got = _quietly(correlate2d, x, w, mode="constant", cval=np.nan)
    with np.errstate(invalid="ignore"):
        expect = ndi.correlate(x, w, mode="constant", cval=np.nan)
        ref, bound = correlate2d_reference(x, w, "constant", np.nan)
    assert_like_scipy(got, expect, ref, bound, "variant=None")


def test_scipy_rule_is_dbl_epsilon():
    """The rule itself, on the installed scipy: 2**-52 skipped, the next double counted —
    in correlate and convolve; correlate1d counts a zero tap."""
    x = np.zeros((3, 3))
    x[1, 1] = np.nan
    for sp in (ndi.correlate, ndi.convolve):
        assert np.isnan(sp(x, np.array([[1.0, EPS, 1.0]]))).sum() == 2
        assert np.isnan(sp(x, np.array([[1.0, np.nextafter(EPS, 1), 1.0]]))).sum() == 3
    assert np.isnan(ndi.correlate1d(x, [1.0, 0.0, 1.0])).sum() == 3


# ---- zero taps: correlate1d counts every tap -----------------------------------------------

@pytest.mark.parametrize("case", [([1, 0, 2], "reflect", 0.0), ([0, 0, 1, 0], "constant", float("nan"))],
                         ids=["odd-reflect", "even-constant-nan"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", CONV2D_VARIANTS)
def test_correlate1d_counts_zero_taps(variant, dtype, axis, case):
    weights, mode, cval = case
    x = _image(dtype)
    w = np.array(weights, dtype)
    out = _out(x.shape, dtype)
    _quietly(correlate1d, cuda.to_device(x), cuda.to_device(w), axis=axis, mode=mode, cval=cval, out=out,
             variant=variant, config="sim")
    with np.errstate(invalid="ignore"):
        expect = ndi.correlate1d(x, w, axis=axis, mode=mode, cval=cval)
        ref, bound = correlate1d_reference(x, w, axis, mode, cval)
    assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"{variant} axis={axis} {weights}")


# ---- zero taps: correlate_separable = correlate with outer(wy, wx) -------------------------

@pytest.mark.parametrize("case", [([1, 0, -2], [0, 3, 0, 1], "constant", 2.0),
                                  ([0.5, 2.0**-60, 0.0, 1], [1, 0, 0.5], "reflect", 0.0),
                                  ([1, 0, 1], [0, 1, 0], "constant", float("nan"))],
                         ids=["zeros-constant", "tiny-reflect", "cross-constant-nan"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", [None, *SEPARABLE_VARIANTS])
def test_separable_zero_taps_follow_the_outer_product(variant, dtype, case):
    wy, wx, mode, cval = case
    x = _image(dtype)
    wy, wx = np.array(wy, dtype), np.array(wx, dtype)
    out = _out(x.shape, dtype)
    _quietly(correlate_separable, cuda.to_device(x), cuda.to_device(wy), cuda.to_device(wx), mode=mode,
             cval=cval, out=out, variant=variant)
    with np.errstate(invalid="ignore"):
        expect = ndi.correlate(x, np.outer(wy.astype(np.float64), wx), mode=mode, cval=cval).astype(dtype)
        ref, bound = correlate_separable_reference(x, wy, wx, mode, cval)
    assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"{variant} {case}")


# ---- empty reductions: exactly NumPy's behaviour ------------------------------------------

EMPTY_SHAPES = [(0,), (1,), (0, 0), (3, 0), (0, 3), (2, 0, 4), (2, 4, 0), (0, 2, 3)]


@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reductions_of_empty_arrays_match_numpy(shape, op, dtype):
    x = np.arange(np.prod(shape), dtype=dtype).reshape(shape) + 1
    for axis in (None, -1, len(shape) - 1):
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                expect = getattr(np, op)(x, axis=axis)
        except ValueError:
            with pytest.raises(ValueError, match="zero-size array"):
                reduce(x, op, axis=axis)
            continue
        if any(issubclass(w.category, RuntimeWarning) for w in seen):  # the mean of nothing: as NumPy
            with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
                got = reduce(x, op, axis=axis)
        else:
            got = _quietly(reduce, x, op, axis=axis)
        assert type(got) is type(expect), (axis, type(got), type(expect))
        assert np.shape(got) == np.shape(expect) and got.dtype == expect.dtype, (axis, got, expect)
        np.testing.assert_array_equal(got, expect)


# ---- quiet simulator: special values warn nowhere -----------------------------------------

SPECIAL_ROWS = np.array([[np.inf, 1, 2, 3], [-np.inf, -np.inf, 0, 1], [np.inf, -np.inf, 1, 0],
                         [np.nan, 1, 2, 3], [-np.inf] * 4, [np.inf] * 4, [3e38, 3e38, -1, 1]])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", SOFTMAX_VARIANTS)
def test_softmax_of_infinite_rows_is_quiet(variant, dtype):
    x = SPECIAL_ROWS.astype(dtype)
    y = _quietly(softmax, x, variant=variant, config="sim")
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        expect = e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expect))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reductions_of_infinities_are_quiet(op, dtype):
    x = SPECIAL_ROWS.astype(dtype)
    for axis in (None, -1):
        got = _quietly(reduce, x, op, axis=axis)
        with np.errstate(invalid="ignore", over="ignore"):
            expect = getattr(np, op)(x.astype(np.float64), axis=axis).astype(dtype)
        np.testing.assert_array_equal(got, expect)  # NaN == NaN here; ±inf exact
