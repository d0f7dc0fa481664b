"""The public API as callers use it without thinking: layouts, shapes, mistakes, special values.

Every public function is called the way a NumPy/SciPy user would call it — Fortran-ordered,
transposed, reversed, sliced, read-only or big-endian arrays; empty, 1, prime and skinny shapes;
misspelt strings, wrong ``out``/``axis``/``stream``; NaN, inf, overflow, -0.0, subnormals — and
must give the NumPy/SciPy answer (within the bound of its arithmetic, or exactly where the
operation is exact) or a TypeError/ValueError that names the argument.  Policies decided here:

* any NumPy layout and byte order works (a NumPy input is copied anyway); a non-C-contiguous
  *device* array is a ValueError (no hidden copy); a contiguous device view with an offset works;
* mixed dtypes, integer/float16/complex/bool dtypes, lists and scalars are TypeErrors (nothing is
  cast silently) — except that the scipy.ndimage filters take integer images, a filter of another
  dtype and an output of another dtype, as scipy does (``NDIMAGE``); shapes the function does not define (1-D softmax, 0-D matmul) are ValueErrors;
* ``out`` may be a NumPy input (like ``np.add(a, b, out=a)``): NumPy inputs are copied first.

Tiny shapes and the "sim" presets: the whole file runs in well under a minute in the simulator.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import pytest
import scipy.ndimage as ndi
import scipy.special
from numba import cuda

import simt_tiles as st
from simt_tiles.bounds import gamma, unit_roundoff
from simt_tiles.kernels.conv2d.reference import (
    correlate1d_reference,
    correlate2d_reference,
    correlate_nd_reference,
    correlate_separable_reference,
)
from simt_tiles.kernels.conv_nchw.reference import conv2d_nchw_reference
from simt_tiles.kernels.matmul.reference import matmul_reference
from simt_tiles.kernels.softmax.reference import softmax_reference
from tests.common import BOTH_OPS, SEMANTICS_CONFIG, poisoned

MODES = ("reflect", "constant", "nearest", "mirror", "wrap")

# the simulator runs kernel bodies as Python: inf - inf and overflowing adds warn as NumPy does
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


# ---------------------------------------------------------------------------
# The public functions: how to call each, on what, and the answer it must give
# ---------------------------------------------------------------------------


def _sum_reference(x, axis=None):
    """np.sum in long double; bound: the float64 accumulation (γ_n·Σ|x|) plus the final rounding."""
    xl = np.asarray(x, np.longdouble)
    ref = np.sum(xl, axis=axis)
    n = xl.size if axis is None else xl.shape[-1]
    bound = unit_roundoff(x.dtype) * np.abs(ref) + gamma(max(n, 1), 2.0**-53) * np.sum(np.abs(xl), axis=axis)
    return ref, bound


def _exact(value):
    return value, np.zeros(np.shape(value))


@dataclasses.dataclass(frozen=True)
class Api:
    """``call(*arrays, **kw)``; ``names`` of the array arguments; ``make(rng, dtype)`` the arrays;
    ``ref(*arrays)`` → ``(reference, bound)``; ``out_shape(*arrays)``."""

    call: Callable
    names: tuple[str, ...]
    make: Callable
    ref: Callable
    out_shape: Callable
    variants: tuple[str, ...] = ()


def _normal(rng, dtype, *shape):
    return rng.standard_normal(shape).astype(dtype)


APIS = {
    "matmul": Api(st.matmul, ("a", "b"), lambda r, d: (_normal(r, d, 5, 3), _normal(r, d, 3, 4)),
                  matmul_reference, lambda a, b: (a.shape[0], b.shape[1]), st.MATMUL_VARIANTS),
    "softmax": Api(st.softmax, ("x",), lambda r, d: (_normal(r, d, 3, 7),), softmax_reference,
                   lambda x: x.shape, st.SOFTMAX_VARIANTS),
    "reduce": Api(st.reduce, ("x",), lambda r, d: (_normal(r, d, 3, 5),), _sum_reference, lambda x: ()),
    "reduce_sum_rows": Api(lambda x, **kw: st.reduce(x, axis=-1, **kw), ("x",), lambda r, d: (_normal(r, d, 3, 5),),
                           lambda x: _sum_reference(x, axis=-1), lambda x: x.shape[:-1]),
    "reduce_max_rows": Api(lambda x, **kw: st.reduce(x, "max", axis=-1, **kw), ("x",),
                           lambda r, d: (_normal(r, d, 3, 5),), lambda x: _exact(np.max(x, axis=-1)),
                           lambda x: x.shape[:-1]),
    "vector_add": Api(st.vector_add, ("a", "b"), lambda r, d: (_normal(r, d, 7), _normal(r, d, 7)),
                      lambda a, b: _exact(a + b), lambda a, b: a.shape, st.VECTOR_ADD_VARIANTS),
    "bias_relu": Api(st.bias_relu, ("x", "bias"), lambda r, d: (_normal(r, d, 3, 5), _normal(r, d, 5)),
                     lambda x, b: _exact(np.maximum(x + b, 0)), lambda x, b: x.shape),
    "correlate2d": Api(lambda x, w, **kw: st.correlate2d(x, w, mode="wrap", **kw), ("image", "weights"),
                       lambda r, d: (_normal(r, d, 5, 6), _normal(r, d, 3, 2)),
                       lambda x, w: correlate2d_reference(x, w, "wrap"), lambda x, w: x.shape, st.CONV2D_VARIANTS),
    "convolve2d": Api(lambda x, w, **kw: st.convolve2d(x, w, mode="constant", cval=0.5, **kw), ("image", "weights"),
                      lambda r, d: (_normal(r, d, 5, 6), _normal(r, d, 2, 3)),
                      lambda x, w: correlate2d_reference(x, w, "constant", 0.5, convolve=True),
                      lambda x, w: x.shape, st.CONV2D_VARIANTS),
    "correlate1d": Api(lambda x, w, **kw: st.correlate1d(x, w, axis=0, mode="mirror", **kw), ("image", "weights"),
                       lambda r, d: (_normal(r, d, 5, 6), _normal(r, d, 4)),
                       lambda x, w: correlate1d_reference(x, w, 0, "mirror"), lambda x, w: x.shape,
                       st.CONV2D_VARIANTS),
    "correlate_separable": Api(lambda x, wy, wx, **kw: st.correlate_separable(x, wy, wx, mode="nearest", **kw),
                               ("image", "wy", "wx"),
                               lambda r, d: (_normal(r, d, 5, 6), _normal(r, d, 3), _normal(r, d, 2)),
                               lambda x, wy, wx: correlate_separable_reference(x, wy, wx, "nearest"),
                               lambda x, wy, wx: x.shape, st.SEPARABLE_VARIANTS),
    "correlate": Api(lambda x, w, **kw: st.correlate(x, w, mode="reflect", **kw), ("image", "weights"),
                     lambda r, d: (_normal(r, d, 3, 4, 5), _normal(r, d, 2, 3, 2)),
                     lambda x, w: correlate_nd_reference(x, w, "reflect"), lambda x, w: x.shape, st.VOLUME_VARIANTS),
    "convolve": Api(lambda x, w, **kw: st.convolve(x, w, mode="wrap", **kw), ("image", "weights"),
                    lambda r, d: (_normal(r, d, 3, 4, 5), _normal(r, d, 3, 2, 2)),
                    lambda x, w: correlate_nd_reference(x, w, "wrap", convolve=True), lambda x, w: x.shape,
                    st.VOLUME_VARIANTS),
    "conv2d_nchw": Api(lambda x, w, b, **kw: st.conv2d_nchw(x, w, bias=b, padding=1, **kw), ("x", "w", "bias"),
                       lambda r, d: (_normal(r, d, 1, 2, 3, 4), _normal(r, d, 2, 2, 2, 3), _normal(r, d, 2)),
                       lambda x, w, b: conv2d_nchw_reference(x, w, b, 1),
                       lambda x, w, b: (x.shape[0], w.shape[0], x.shape[2] + 1, x.shape[3]), st.CONV_NCHW_VARIANTS),
}
NAMES = tuple(APIS)
DTYPES = (np.float32, np.float64)


def inputs(name, dtype=np.float64, seed=0):
    return APIS[name].make(np.random.default_rng(seed), dtype)


@functools.cache
def expected(name, dtype=np.float64):
    """The call on C-contiguous NumPy inputs (checked against the reference below)."""
    out = APIS[name].call(*inputs(name, dtype))
    if isinstance(out, np.ndarray):
        out.flags.writeable = False  # shared between tests
    return out


def host(result):
    return result.copy_to_host() if hasattr(result, "copy_to_host") else np.asarray(result)


def assert_matches(got, ref, bound, dtype):
    """``got`` has the reference's shape and ``dtype``, NaN exactly where it has NaN, the same
    infinities, and every finite element within ``bound`` of it."""
    got = host(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == np.dtype(dtype), got.dtype
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg="NaN placement")
    inf = np.isinf(ref)
    np.testing.assert_array_equal(got[inf], ref[inf], err_msg="infinities")
    fin = ~(nan | inf)
    err = np.abs(got[fin].astype(np.longdouble) - ref[fin])
    bad = err > np.broadcast_to(bound, ref.shape)[fin]
    assert not bad.any(), f"{bad.sum()} elements outside the bound: err {err[bad][:4]}"


# ---------------------------------------------------------------------------
# Layouts: any NumPy layout gives exactly the C-contiguous answer
# ---------------------------------------------------------------------------


def _embedded(x, step):
    """``x``'s values in a view of a larger NaN-filled array: every axis strided by ``step``,
    starting one element in (a view with an offset)."""
    big = np.full(tuple(step * n + 1 for n in x.shape), np.nan, x.dtype)
    view = big[tuple(slice(1, None, step) for _ in x.shape)][tuple(slice(0, n) for n in x.shape)]
    view[...] = x
    return view


def _readonly(x):
    y = x.copy()
    y.flags.writeable = False
    return y


LAYOUTS = {
    "fortran": np.asfortranarray,
    "transposed_view": lambda x: np.ascontiguousarray(x.T).T,
    "negative_strides": lambda x: np.flip(np.flip(x).copy()),
    "strided_slice": lambda x: _embedded(x, 2),
    "offset_view": lambda x: _embedded(x, 1),
    "readonly": _readonly,
    "big_endian": lambda x: x.astype(x.dtype.newbyteorder(">")),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", NAMES)
def test_numpy_layouts_give_the_contiguous_answer(name, layout):
    api, dtype = APIS[name], (np.float32 if layout == "big_endian" else np.float64)
    arrays = inputs(name, dtype)
    expect = expected(name, dtype)
    views = [LAYOUTS[layout](x) for x in arrays]
    for v, x in zip(views, arrays):
        np.testing.assert_array_equal(v, x)  # same values, another layout
    got = api.call(*views)
    assert isinstance(got, (np.ndarray, np.generic)) and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_contiguous_answer_is_the_reference(name, dtype):
    api = APIS[name]
    arrays = inputs(name, dtype)
    assert_matches(api.call(*arrays), *api.ref(*arrays), dtype)


@pytest.mark.parametrize("name", NAMES)
def test_device_arrays(name):
    """C-contiguous Numba device arrays (and contiguous views with an offset) give the NumPy
    answer as a device array; a non-contiguous device view is a ValueError naming it."""
    api = APIS[name]
    arrays = inputs(name)
    expect = expected(name)
    got = api.call(*[cuda.to_device(x) for x in arrays])
    assert not isinstance(got, np.ndarray) and hasattr(got, "copy_to_host")  # a device array
    np.testing.assert_array_equal(got.copy_to_host(), expect)
    offset = [cuda.to_device(np.concatenate([x[:1], x]))[1:] for x in arrays]  # starts one row in
    np.testing.assert_array_equal(api.call(*offset).copy_to_host(), expect)
    first = arrays[0]
    # first's values, every other column (explicit slices: a GPU device array takes no Ellipsis)
    wide = cuda.to_device(np.repeat(first, 2, axis=-1))[(slice(None),) * (first.ndim - 1) + (slice(None, None, 2),)]
    if name == "matmul":  # matmul takes any strides (one copy where neither is 1: tests/test_matmul_layouts.py)
        np.testing.assert_array_equal(api.call(wide, *arrays[1:]).copy_to_host(), expect)
        return
    with pytest.raises(ValueError, match=rf"{api.names[0]}: expected a C-contiguous device array"):
        api.call(wide, *arrays[1:])


@pytest.mark.parametrize("name", NAMES)
def test_numpy_and_device_inputs_mix(name):
    """The first argument decides the result's kind."""
    api = APIS[name]
    arrays = inputs(name)
    expect = expected(name)
    got = api.call(arrays[0], *[cuda.to_device(x) for x in arrays[1:]])
    assert isinstance(got, (np.ndarray, np.generic))
    np.testing.assert_array_equal(got, expect)


# ---------------------------------------------------------------------------
# Wrong arrays: dtype, ndim, kind
# ---------------------------------------------------------------------------

BAD_DTYPES = (np.int32, np.int64, np.float16, np.complex64, np.complex128, np.bool_, np.longdouble, object)
#: scipy.ndimage's filters take integer images, filters of another dtype and any output dtype
#: (issue 33; tests/test_conv2d_ndimage.py): those are not mistakes for them
NDIMAGE = ("correlate2d", "convolve2d", "correlate1d", "correlate_separable", "correlate", "convolve")


@pytest.mark.parametrize("bad", BAD_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_unsupported_dtypes_are_type_errors(name, bad):
    api = APIS[name]
    if name in NDIMAGE and np.dtype(bad).kind in "iu":
        pytest.skip("an integer image or filter is scipy.ndimage's (tests/test_conv2d_ndimage.py)")
    arrays = list(inputs(name))
    for i, arg in enumerate(api.names):
        wrong = arrays.copy()
        wrong[i] = arrays[i].astype(bad)
        if name in NDIMAGE and i > 0 and bad in (np.float16, np.bool_):
            continue  # a NumPy float16 or bool filter is converted, as scipy (tests/test_conv2d_ndimage.py)
        if name == "matmul" and bad is np.float16:
            # float16 is matmul's tensor-core input: with one operand float16 the other is named
            with pytest.raises(TypeError, match=r"[ab]: expected dtype f"):
                api.call(*wrong)
            continue
        if name == "bias_relu" and bad is np.float16:
            # float16 is a bias_relu input (tests/test_bias_relu16.py): the other operand's dtype is named
            with pytest.raises(TypeError, match=r"bias: expected dtype float(16|64) \(the dtype of x\)"):
                api.call(*wrong)
            continue
        if (name == "softmax" or name.startswith("reduce")) and bad is np.float16:
            continue  # float16 is a softmax and reduce input (tests/test_softmax16.py, tests/test_reduce16.py)
        with pytest.raises(TypeError, match=rf"{arg}: expected dtype float"):
            api.call(*wrong)


@pytest.mark.parametrize("name", [n for n in NAMES if len(APIS[n].names) > 1])
def test_mixed_float32_float64_is_a_type_error(name):
    api = APIS[name]
    if name in NDIMAGE:
        pytest.skip("scipy.ndimage converts a filter of another dtype (tests/test_conv2d_ndimage.py)")
    arrays = inputs(name, np.float64)
    for i, arg in enumerate(api.names[1:], start=1):
        mixed = list(arrays)
        mixed[i] = arrays[i].astype(np.float32)
        with pytest.raises(TypeError, match=rf"{arg}: expected dtype float64 \(the dtype of "):
            api.call(*mixed)


@pytest.mark.parametrize("kind", ["list", "float", "numpy_scalar", "None", "str"])
@pytest.mark.parametrize("name", NAMES)
def test_non_arrays_are_type_errors(name, kind):
    api = APIS[name]
    arrays = list(inputs(name))
    for i, arg in enumerate(api.names):
        if arg == "bias" and kind == "None":
            continue  # conv2d_nchw's bias=None means no bias
        wrong = arrays.copy()
        wrong[i] = {"list": arrays[i].tolist(), "float": 1.0, "numpy_scalar": np.float64(1.0),
                    "None": None, "str": "x"}[kind]
        if kind == "numpy_scalar" and name.startswith("reduce"):
            continue  # not wrong: NumPy reduces a scalar (a 0-d array) to its value, and so does reduce
        with pytest.raises(TypeError, match=rf"{arg}: expected a NumPy array or a CUDA array"):
            api.call(*wrong)


def _reshaped(x, how):
    return {"0-d": np.asarray(x.flat[0]), "1-d": x.ravel(), "2-d": x.reshape(1, -1),
            "3-d": x[None], "5-d": x.reshape((1,) * 5 if x.size == 1 else (1, 1, 1, 1, -1))}[how]


@pytest.mark.parametrize("how", ["0-d", "1-d", "2-d", "3-d", "5-d"])
@pytest.mark.parametrize("name", NAMES)
def test_wrong_ndim_is_a_value_error(name, how):
    api = APIS[name]
    arrays = list(inputs(name))
    for i, arg in enumerate(api.names):
        wrong = arrays.copy()
        wrong[i] = _reshaped(arrays[i], how)
        if wrong[i].ndim == arrays[i].ndim or (name.startswith(("reduce", "softmax", "matmul")) and wrong[i].ndim >= 1) \
                or (name == "correlate1d" and arg == "image" and wrong[i].ndim >= 1) or name.startswith("reduce"):
            continue  # not wrong (reduce, softmax and matmul take any ndim from 1: np.matmul's rules; reduce a 0-d
            # array too, as NumPy; correlate1d any image from 1-D, as scipy's: tests/test_conv2d_volumes.py)
        if name in ("correlate", "convolve") and arg == "image" and 1 <= wrong[i].ndim <= 3:
            # a 1-D, 2-D or 3-D image is right: the filter of another ndim is what is wrong (scipy's rule)
            with pytest.raises(ValueError, match=r"weights: expected a \d-D array \(one axis per axis of image"):
                api.call(*wrong)
            continue
        with pytest.raises(ValueError, match=rf"{arg}: expected an? .*(\d-D array|at least 1 dimension)"):
            api.call(*wrong)


# ---------------------------------------------------------------------------
# Shapes: empty in every position, 1, primes, skinny, filters larger than the image
# ---------------------------------------------------------------------------

MATMUL_SHAPES = [(0, 4, 3), (3, 0, 4), (3, 4, 0), (0, 0, 0), (1, 1, 1), (1, 13, 1), (11, 1, 7), (1, 1, 17),
                 (7, 5, 3)]


@pytest.mark.parametrize("m, n, k", MATMUL_SHAPES, ids=lambda s: str(s))
def test_matmul_shapes(m, n, k):
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a, b = _normal(rng, np.float32, m, k), _normal(rng, np.float32, k, n)
    got = st.matmul(a, b, out=poisoned((m, n), np.float32))  # NaN: an element not written fails
    assert_matches(got, *matmul_reference(a, b), np.float32)
    if k == 0:
        np.testing.assert_array_equal(host(got), np.zeros((m, n)))  # an empty sum is 0, as np.matmul


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0), (1, 1), (1, 13), (13, 1), (2, 97)], ids=str)
def test_softmax_shapes(shape):
    x = _normal(np.random.default_rng(1), np.float32, *shape)
    got = st.softmax(x, out=poisoned(shape, np.float32)).copy_to_host()
    assert got.shape == shape and got.dtype == np.float32
    if x.size:
        assert_matches(got, *softmax_reference(x), np.float32)
        np.testing.assert_allclose(got, scipy.special.softmax(x.astype(np.float64), axis=-1), rtol=1e-5)


@pytest.mark.parametrize("shape, axis", [((0,), None), ((1,), None), ((13,), None), ((3, 0), -1), ((0, 3), -1),
                                         ((2, 3, 5), -1), ((2, 3, 5), 2), ((1, 1), None), ((4, 1), 1)], ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reduce_shapes(shape, axis, op):
    x = _normal(np.random.default_rng(2), np.float64, *shape)
    f = getattr(np, op)
    if op != "sum" and (x.size == 0 if axis is None else (shape[-1] == 0 and x.size == 0 and shape[0])):
        with pytest.raises(ValueError, match=r"x: zero-size array to reduction operation"):
            st.reduce(x, op, axis=axis)
        with pytest.raises(ValueError):
            f(x, axis=axis)  # NumPy agrees
        return
    got = st.reduce(x, op, axis=axis)
    ref, bound = _sum_reference(x, axis) if op == "sum" else _exact(f(x, axis=axis))
    assert np.shape(got) == np.shape(ref)
    assert_matches(np.asarray(got), ref, bound, np.float64)


@pytest.mark.parametrize("n", [0, 1, 2, 31, 33, 127])
@pytest.mark.parametrize("variant", st.VECTOR_ADD_VARIANTS)
def test_vector_add_lengths(n, variant):
    a, b = inputs("vector_add", np.float32, seed=n)
    a, b = np.resize(a, n), np.resize(b, n)
    np.testing.assert_array_equal(st.vector_add(a, b, variant=variant, out=poisoned(n, np.float32)).copy_to_host(),
                                  a + b)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (1, 13), (13, 1)], ids=str)
def test_bias_relu_shapes(shape):
    rng = np.random.default_rng(3)
    x, b = _normal(rng, np.float32, *shape), _normal(rng, np.float32, shape[1])
    got = st.bias_relu(x, b, out=poisoned(shape, np.float32)).copy_to_host()
    np.testing.assert_array_equal(got, np.maximum(x + b, 0))


CONV_SHAPES = [((1, 1), (1, 1)), ((1, 6), (3, 3)), ((7, 1), (2, 4)), ((4, 5), (2, 2)), ((2, 3), (7, 6)),
               ((0, 5), (3, 3)), ((5, 0), (1, 2))]


@pytest.mark.parametrize("image_shape, w_shape", CONV_SHAPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ops", BOTH_OPS)
def test_correlate_convolve_shapes_and_modes(ops, mode, image_shape, w_shape):
    """Even filters, 1×1, filters larger than the image, empty images; every mode, cval ≠ 0."""
    rng = np.random.default_rng(4)
    x, w = _normal(rng, np.float64, *image_shape), _normal(rng, np.float64, *w_shape)
    for convolve in ops:
        f, scipy_f = (st.convolve2d, ndi.convolve) if convolve else (st.correlate2d, ndi.correlate)
        got = f(x, w, mode=mode, cval=-1.5, out=poisoned(image_shape, np.float64)).copy_to_host()
        if x.size:
            assert_matches(got, *correlate2d_reference(x, w, mode, -1.5, convolve=convolve), np.float64)
            np.testing.assert_allclose(got, scipy_f(x, w, mode=mode, cval=-1.5), rtol=1e-12, atol=1e-12)
        else:
            assert got.shape == image_shape


@pytest.mark.parametrize("k", [1, 4, 9])
@pytest.mark.parametrize("axis", [0, 1, -1, -2, np.int64(0)], ids=lambda a: f"{type(a).__name__}{a}")
@pytest.mark.parametrize("mode", MODES)
def test_correlate1d_axes_and_lengths(mode, axis, k):
    rng = np.random.default_rng(5)
    x, w = _normal(rng, np.float64, 3, 5), _normal(rng, np.float64, k)
    got = st.correlate1d(x, w, axis=axis, mode=mode, cval=2.0, out=poisoned(x.shape, np.float64)).copy_to_host()
    assert_matches(got, *correlate1d_reference(x, w, int(axis), mode, 2.0), np.float64)
    np.testing.assert_allclose(got, ndi.correlate1d(x, w, axis=axis, mode=mode, cval=2.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1), (2, 9), (6, 1), (0, 3)], ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", st.SEPARABLE_VARIANTS)
def test_correlate_separable_shapes_and_modes(variant, mode, shape):
    rng = np.random.default_rng(6)
    x, wy, wx = _normal(rng, np.float64, *shape), _normal(rng, np.float64, 4), _normal(rng, np.float64, 3)
    got = st.correlate_separable(x, wy, wx, mode=mode, cval=0.5, variant=variant,
                                 out=poisoned(shape, np.float64)).copy_to_host()
    assert got.shape == shape
    if x.size:
        assert_matches(got, *correlate_separable_reference(x, wy, wx, mode, 0.5), np.float64)
        np.testing.assert_allclose(got, ndi.correlate(x, np.outer(wy, wx), mode=mode, cval=0.5), rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize(
    "x_shape, w_shape, padding",
    [((0, 3, 4, 5), (2, 3, 3, 3), 1), ((2, 3, 4, 5), (0, 3, 3, 3), 1), ((2, 0, 4, 5), (2, 0, 3, 3), 1),
     ((1, 2, 0, 3), (2, 2, 1, 1), 1), ((1, 1, 1, 1), (1, 1, 1, 1), 0), ((1, 2, 3, 4), (3, 2, 3, 4), 0),
     ((1, 2, 2, 3), (1, 2, 4, 5), 1), ((2, 1, 1, 7), (1, 1, 1, 2), 0)],
    ids=str,
)
def test_conv2d_nchw_shapes(x_shape, w_shape, padding):
    """Empty batch / channels / image, 1×1, a filter exactly the (padded) image, skinny images."""
    rng = np.random.default_rng(7)
    x, w, b = _normal(rng, np.float64, *x_shape), _normal(rng, np.float64, *w_shape), _normal(rng, np.float64,
                                                                                               w_shape[0])
    shape = (x_shape[0], w_shape[0], x_shape[2] + 2 * padding - w_shape[2] + 1, x_shape[3] + 2 * padding - w_shape[3] + 1)
    got = st.conv2d_nchw(x, w, bias=b, padding=padding, out=poisoned(shape, np.float64)).copy_to_host()
    assert_matches(got, *conv2d_nchw_reference(x, w, b, padding), np.float64)


def test_conv2d_nchw_filter_larger_than_the_padded_input():
    x, w = np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 2))
    with pytest.raises(ValueError, match=r"w: a 4x2 filter is larger than the padded input 3x3"):
        st.conv2d_nchw(x, w)


# ---------------------------------------------------------------------------
# Arguments: strings, axis, out, stream, keywords
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in NAMES if APIS[n].variants])
@pytest.mark.parametrize("variant", ["k03", "K03_SMEM_TILED", "", 3, ["two_pass"]])
def test_unknown_variant(name, variant):
    with pytest.raises(ValueError, match=r"variant: expected one of \("):
        APIS[name].call(*inputs(name), variant=variant)


@pytest.mark.parametrize("name", NAMES)
def test_unknown_or_foreign_config(name):
    arrays = inputs(name)
    with pytest.raises(ValueError, match=r"config: .* has no preset 'fast'; expected one of"):
        APIS[name].call(*arrays, config="fast")
    with pytest.raises(TypeError, match=r"config: expected a preset name or a .*Config"):
        APIS[name].call(*arrays, config=3)
    foreign = st.kernels.matmul.RUNGS["k01_naive"].presets["sim"] if name != "matmul" else \
        st.kernels.softmax.RUNGS["k01_smem_tree"].presets["sim"]
    with pytest.raises(TypeError, match=r"config: expected a preset name or a .*Config"):
        APIS[name].call(*arrays, config=foreign)


def _stable_id(v) -> str:
    """A parameter id that is the same in every process (pytest-xdist compares them): no addresses."""
    return getattr(v, "__name__", None) or (type(v).__name__ if type(v) is object else repr(v))


@pytest.mark.parametrize("stream", ["default", 1, True, 0.0, object(), "event", "array"], ids=_stable_id)
@pytest.mark.parametrize("name", NAMES)
def test_bad_stream(name, stream):
    """Not a stream, Numba's other objects too (an event or a device array was taken as one: an AttributeError
    after the launch, or none)."""
    stream = {"event": lambda: cuda.event(), "array": lambda: cuda.device_array(1)}.get(stream, lambda: stream)()
    with pytest.raises(TypeError, match=r"stream: expected None, a Numba stream"):
        APIS[name].call(*inputs(name), stream=stream)


@pytest.mark.parametrize("name", NAMES)
def test_numba_stream(name):
    arrays = inputs(name)
    s = cuda.stream()
    np.testing.assert_array_equal(APIS[name].call(*arrays, stream=s), APIS[name].call(*arrays))


@pytest.mark.parametrize(
    "call",
    [lambda x: st.matmul(x, x, outt=None), lambda x: st.softmax(x, dim=-1), lambda x: st.reduce(x, axes=0),
     lambda x: st.reduce(x, "sum", None, None), lambda x: st.correlate2d(x, x, boundary="wrap"),
     lambda x: st.correlate2d(x, x, origins=0), lambda x: st.correlate2d(x, x, "wrap"),
     lambda x: st.conv2d_nchw(x, x, strides=1), lambda x: st.vector_add(x, x, x), lambda x: st.bias_relu(x)],
    ids=["matmul-outt", "softmax-dim", "reduce-axes", "reduce-positional-axis", "correlate2d-boundary",
         "correlate2d-origins", "correlate2d-positional-mode", "conv2d_nchw-strides", "vector_add-3-args",
         "bias_relu-no-bias"],
)
def test_keyword_typos_and_positional_mistakes_raise_type_error(call):
    with pytest.raises(TypeError, match=r"argument"):
        call(np.ones((2, 2)))


@pytest.mark.parametrize(
    "axis, exc", [(-3, ValueError), (2, ValueError), ((0, 0), ValueError), ((1, 2), ValueError),
                  (1.0, TypeError), (True, TypeError), ([1], TypeError)], ids=repr,
)
def test_softmax_axis(axis, exc):
    with pytest.raises(exc, match=r"axis: (expected|-?\d+ is out of bounds)"):
        st.softmax(np.ones((2, 3)), axis=axis)


@pytest.mark.parametrize("axis", [1, -1, np.int64(1), np.int32(-1)], ids=repr)
def test_softmax_integer_axes(axis):
    x = inputs("softmax")[0]
    np.testing.assert_array_equal(st.softmax(x, axis=axis), st.softmax(x))


@pytest.mark.parametrize(
    "axis, exc", [(-4, ValueError), (3, ValueError), ((0, 0), ValueError), ((0, 3), ValueError), (1.0, TypeError),
                  (True, TypeError), ("1", TypeError)], ids=repr,
)
def test_reduce_axis(axis, exc):
    with pytest.raises(exc, match=r"axis: (expected None|-?\d+ is out of bounds|repeated)"):
        st.reduce(np.ones((2, 3, 4)), axis=axis)


@pytest.mark.parametrize("op", ["add", "Sum", "average", "prod", None, ["sum"], np.sum], ids=_stable_id)
def test_reduce_unknown_op(op):
    """An unknown name is a ValueError, an op that is no str a TypeError (as NumPy's own argument errors)."""
    exc = ValueError if isinstance(op, str) else TypeError
    with pytest.raises(exc, match=r"op: expected (a str, )?one of \('sum', 'mean', 'max', 'min', 'argmax', 'argmin'\)"):
        st.reduce(np.ones(3), op)


@pytest.mark.parametrize("axis, exc", [(2, ValueError), (-3, ValueError), (1.0, TypeError), (None, TypeError),
                                       ("0", TypeError)], ids=repr)
def test_correlate1d_axis(axis, exc):
    with pytest.raises(exc, match=r"axis: expected"):
        st.correlate1d(np.ones((3, 3)), np.ones(2), axis=axis)


@pytest.mark.parametrize("mode", ["zero", "REFLECT", "grid-wrap", "grid-constant", "grid-mirror", "", None, 0],
                         ids=repr)
@pytest.mark.parametrize("fn", ["correlate2d", "convolve2d", "correlate1d", "correlate_separable"])
def test_unknown_mode(fn, mode):
    x = np.ones((3, 3))
    args = {"correlate_separable": (x, np.ones(2), np.ones(2)), "correlate1d": (x, np.ones(2))}.get(fn, (x, x))
    with pytest.raises(ValueError, match=r"mode: expected one of \('reflect', 'constant'"):
        getattr(st, fn)(*args, mode=mode)


@pytest.mark.parametrize("cval", ["1", None, 1j, [1.0], np.array([1.0])], ids=repr)
def test_bad_cval(cval):
    with pytest.raises(TypeError, match=r"cval: expected a real number"):
        st.correlate2d(np.ones((3, 3)), np.ones((2, 2)), mode="constant", cval=cval)


@pytest.mark.parametrize("padding, exc", [(-1, ValueError), (1.0, TypeError), ((1, 1, 1), TypeError),
                                          ("full", ValueError), (None, TypeError), (True, TypeError)], ids=repr)
def test_conv2d_nchw_bad_padding(padding, exc):
    x, w, b = inputs("conv2d_nchw")
    with pytest.raises(exc, match=r"padding: expected an int >= 0"):
        st.conv2d_nchw(x, w, bias=b, padding=padding)


@pytest.mark.parametrize("name", NAMES)
def test_bad_out(name):
    api = APIS[name]
    arrays = inputs(name)
    shape = api.out_shape(*arrays)
    expect = expected(name)
    with pytest.raises(ValueError, match=r"out: expected shape"):
        api.call(*arrays, out=np.empty(shape + (1,)))
    if name not in NDIMAGE:  # scipy.ndimage's output may have another dtype (test_conv2d_ndimage.py)
        with pytest.raises(TypeError, match=r"out: expected dtype float64; got float32"):
            api.call(*arrays, out=np.empty(shape, np.float32))
    with pytest.raises(TypeError, match=r"out: expected dtype float64 in native byte order; got >f8"):
        api.call(*arrays, out=np.empty(shape, ">f8"))
    with pytest.raises(TypeError, match=r"out: expected a NumPy array or a CUDA array"):
        api.call(*arrays, out=np.empty(shape).tolist())
    readonly = np.empty(shape)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match=r"out: expected a writeable C-contiguous NumPy array"):
        api.call(*arrays, out=readonly)
    if len(shape) >= 2:
        with pytest.raises(ValueError, match=r"out: expected a writeable C-contiguous NumPy array"):
            api.call(*arrays, out=np.empty(shape[::-1]).T)
        with pytest.raises(ValueError, match=r"out: expected a C-contiguous device array"):
            # a strided view (not .T: on a GPU, Numba's DeviceNDArray.T launches a transpose into a
            # new C-contiguous array)
            api.call(*arrays, out=cuda.device_array(shape[:-1] + (2 * shape[-1],))[(slice(None),) * (len(shape) - 1)
                                                                                  + (slice(None, None, 2),)])
    out = np.full(shape, np.nan)
    assert api.call(*arrays, out=out) is out
    np.testing.assert_array_equal(out, expect)
    dev = cuda.device_array(shape)
    assert api.call(*arrays, out=dev) is dev
    np.testing.assert_array_equal(dev.copy_to_host(), expect)


@pytest.mark.parametrize("name", [n for n in NAMES if APIS[n].out_shape(*inputs(n)) == inputs(n)[0].shape])
def test_out_may_be_a_numpy_input_but_not_a_device_input(name):
    """Like ``np.add(a, b, out=a)``: NumPy inputs are copied first.  A device out that is an
    input would be read while it is written: ValueError naming out."""
    api = APIS[name]
    arrays = inputs(name)
    expect = expected(name)
    first = arrays[0].copy()
    assert api.call(first, *arrays[1:], out=first) is first
    np.testing.assert_array_equal(first, expect)
    dev = cuda.to_device(arrays[0])
    with pytest.raises(ValueError, match=r"out: overlaps"):
        api.call(dev, *arrays[1:], out=dev)


def test_broadcast_and_zero_stride_numpy_inputs():
    """np.broadcast_to gives read-only zero-stride views: copied like any other layout."""
    b = inputs("vector_add")[1]
    np.testing.assert_array_equal(st.vector_add(np.broadcast_to(np.float64(2.5), b.shape), b), 2.5 + b)
    x, bias = inputs("bias_relu")
    rows = np.broadcast_to(x[:1], x.shape)
    np.testing.assert_array_equal(st.bias_relu(rows, bias), np.maximum(rows + bias, 0))


def test_same_array_twice():
    a = inputs("vector_add")[0]
    d = cuda.to_device(a)
    np.testing.assert_array_equal(st.vector_add(d, d).copy_to_host(), a + a)
    m = inputs("bias_relu")[0][:, :3]
    np.testing.assert_array_equal(st.matmul(m, m.T), st.matmul(m, np.ascontiguousarray(m.T)))


def test_reduce_out_and_result_kinds():
    x = inputs("reduce")[0]
    r = st.reduce(x)
    assert isinstance(r, np.float64) and r == st.reduce(x, out=np.empty(()))  # NumPy scalar, like np.sum
    dev = cuda.device_array(())
    assert st.reduce(cuda.to_device(x), out=dev) is dev
    assert dev.copy_to_host()[()] == r
    with pytest.raises(ValueError, match=r"out: expected shape \(\); got \(1,\)"):
        st.reduce(x, out=np.empty(1))
    v = x[0]
    for axis in (-1, 0):  # the only axis of a 1-D array: a scalar too, as np.sum(v, axis=0)
        r = st.reduce(v, axis=axis)
        assert isinstance(r, np.float64)
        assert_matches(np.asarray(r), *_sum_reference(v), np.float64)


# ---------------------------------------------------------------------------
# Special values: NaN/inf placement, overflow, -0.0, subnormals
# ---------------------------------------------------------------------------

F32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize("variant", st.MATMUL_VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_matmul_special_values(dtype, variant):
    a = np.array([[np.nan, 1, 0], [np.inf, 1, 1], [1, 1, 1], [F32_MAX, F32_MAX, 0], [1e-40, 0, 0]], dtype)
    b = np.array([[1, 0], [0, 1], [0, 0]], dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = a.astype(np.longdouble) @ b.astype(np.longdouble)  # row 1: inf·0 = NaN, as np.matmul
        np_ref = a @ b
    np.testing.assert_array_equal(np.isnan(ref), np.isnan(np_ref))
    got = st.matmul(a, b, variant=variant)
    with np.errstate(invalid="ignore"):
        ref = np.where(np.abs(ref) > np.finfo(dtype).max, np.inf * np.sign(ref), ref)  # overflow: ±inf
    assert_matches(got, ref,
                   gamma(3, unit_roundoff(dtype)) * np.abs(np.asarray(ref, np.float64)), dtype)
    assert got[4, 0] == dtype(1e-40)  # a subnormal float32 survives a product with 1
    zeros, nan_b = np.zeros((2, 3), dtype), np.array([[1, np.nan], [np.inf, 1], [1, 1]], dtype)
    np.testing.assert_array_equal(st.matmul(zeros, nan_b, variant=variant), np.full((2, 2), np.nan))  # 0·NaN, 0·inf


@pytest.mark.parametrize("variant", st.SOFTMAX_VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_softmax_special_values(dtype, variant):
    big = float(np.finfo(dtype).max)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    x = np.array([[big, big / 2, -big, 0], [np.inf, 1, 2, 3], [-np.inf] * 4, [-np.inf, 0, 1, -np.inf],
                  [np.nan, 0, 1, 2], [tiny, -tiny, 0, -0.0], [1000, 1000, 1000, 1000]], dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        expect = scipy.special.softmax(x.astype(np.float64), axis=-1)
    got = st.softmax(x, variant=variant)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expect))  # inf or NaN in a row, all -inf: NaN row
    ok = ~np.isnan(expect)
    np.testing.assert_allclose(got[ok], expect[ok], rtol=8 * unit_roundoff(dtype) * 4, atol=0)
    assert not np.isinf(got).any()  # no overflow from huge logits


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("where", [0, 4, 9])
def test_reduce_nan_anywhere(op, where, dtype):
    x = np.arange(10, dtype=dtype)
    x[where] = np.nan
    assert np.isnan(st.reduce(x, op))
    assert np.isnan(st.reduce(x.reshape(1, 10), op, axis=-1)).all()


@pytest.mark.parametrize(
    "values, op, expect",
    [([1e38] * 10, "sum", np.inf), ([F32_MAX, F32_MAX, -F32_MAX], "sum", F32_MAX),  # float64 accumulator
     ([np.inf, -np.inf], "sum", np.nan), ([np.inf, 1], "sum", np.inf), ([-0.0, -0.0], "sum", 0.0),
     ([1e-45, 1e-45], "sum", 3e-45), ([-np.inf, -np.inf], "max", -np.inf), ([np.inf, -np.inf], "min", -np.inf),
     ([-0.0, 0.0], "max", 0.0), ([0.0, -0.0], "min", 0.0), ([1e-45, 0.0], "max", 1e-45)],
    ids=str,
)
def test_reduce_special_values_float32(values, op, expect):
    x = np.array(values, np.float32)
    got = st.reduce(x, op)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.float32(expect))


def test_vector_add_and_bias_relu_special_values():
    a = np.array([np.inf, -0.0, np.nan, F32_MAX, 1e-45, -np.inf], np.float32)
    b = np.array([-np.inf, -0.0, 1, F32_MAX, 1e-45, 1], np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        expect = a + b
    got = st.vector_add(a, b)
    np.testing.assert_array_equal(got, expect)
    num = ~np.isnan(expect)  # a NaN's sign is the hardware's (x86: inf - inf is -NaN; a GPU: +NaN)
    np.testing.assert_array_equal(np.signbit(got)[num], np.signbit(expect)[num])  # -0.0 + -0.0 = -0.0
    x = np.array([[np.nan, -0.0, -np.inf, np.inf, -1e-45, 1e-45]], np.float32)
    bias = np.zeros(6, np.float32)
    np.testing.assert_array_equal(st.bias_relu(x, bias), np.maximum(x + bias, 0))  # NaN kept, like np.maximum


@pytest.mark.parametrize("variant", st.CONV2D_VARIANTS)
@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
def test_conv_nan_and_inf_placement(mode, variant):
    """A NaN pixel poisons exactly the outputs whose window holds it (weights all non-zero);
    cval NaN poisons the border in mode "constant"; inf meets weights of both signs: NaN."""
    x = np.arange(30, dtype=np.float64).reshape(5, 6)
    x[2, 3] = np.nan
    x[0, 0] = np.inf
    w = np.array([[1.0, -2.0], [0.5, 3.0], [-1.0, 1.5]])
    for cval in (0.0, np.nan) if mode == "constant" else (0.0,):
        with np.errstate(invalid="ignore"):
            expect = ndi.correlate(x, w, mode=mode, cval=cval)
            expect_cv = ndi.convolve(x, w, mode=mode, cval=cval)
        got = st.correlate2d(x, w, mode=mode, cval=cval, variant=variant, config=SEMANTICS_CONFIG)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expect))
        got = st.convolve2d(x, w, mode=mode, cval=cval, variant=variant, config=SEMANTICS_CONFIG)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expect_cv))


def test_conv_nchw_nan_placement():
    x = np.ones((1, 2, 4, 5))
    x[0, 1, 2, 2] = np.nan
    w = np.full((2, 2, 2, 3), 0.5)
    got = st.conv2d_nchw(x, w, padding=1)
    ref, _ = conv2d_nchw_reference(x, w, None, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(np.asarray(ref, np.float64)))


# ---------------------------------------------------------------------------
# PyTorch tensors as interop reads them (no torch here: a stand-in with torch's module name)
# ---------------------------------------------------------------------------


class _TorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


def _fake_tensor(dtype: str, requires_grad: bool):
    """What interop sees of a CUDA tensor that torch refuses to export: bfloat16 has no
    ``__cuda_array_interface__`` typestr, a tensor that requires grad raises RuntimeError."""

    def refuse(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

    cls = type("Tensor", (), {"__module__": "torch", "__cuda_array_interface__": property(refuse),
                              "__dlpack__": lambda self, **kw: refuse(self),
                              "__dlpack_device__": lambda self: (2, 0)})
    t = cls()
    t.dtype, t.requires_grad, t.is_cuda, t.device = _TorchDtype(dtype), requires_grad, True, "cuda:0"
    return t


@pytest.mark.parametrize("dtype, requires_grad, exc, pattern", [
    ("bfloat16", False, TypeError, r"a: expected dtype float32 or float64; got torch.bfloat16"),
    ("float16", False, TypeError, r"a: expected dtype float32 or float64; got torch.float16"),
    ("float32", True, ValueError, r"x: expected a tensor that does not require grad.*x.detach\(\)"),
    ("bfloat16", True, ValueError, r"x: expected a tensor that does not require grad.*x.detach\(\)"),  # 16-bit path
])
def test_torch_tensors_torch_refuses_to_export(dtype, requires_grad, exc, pattern):
    # (softmax and reduce take 16-bit tensors, through interop.operand16: a float32/float64 function, vector_add,
    # refuses them here)
    t = _fake_tensor(dtype, requires_grad)
    with pytest.raises(exc, match=pattern):
        st.softmax(t) if requires_grad else st.vector_add(t, t)
