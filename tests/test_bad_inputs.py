"""Bad calls, fuzzed: every public function, every argument, one corruption (a table) or several
at once (hypothesis).

The house rule: bad input gets a TypeError/ValueError naming the argument (``name: expected X;
got Y``, or Python's own ``unexpected keyword argument 'name'``); no other exception escapes
(IndexError, KeyError, OverflowError, Numba's errors, NumPy's AxisError ...), and nothing is
silently wrong.  A corruption that NumPy/SciPy/torch define (a 5-D batch for matmul, an integer
image for the scipy.ndimage filters, a float32 ``out`` for them, a huge stride) must give their
answer instead.  What ``tests/test_callers.py`` already sweeps per function (NumPy layouts,
first-argument device views, stream kinds) is not repeated here; this file adds every *other*
argument — each array's dtype/ndim/kind/device layout, shape mismatches between arguments, ``out``
in every form, the integer and string parameters at NaN/inf/negative/huge values, unknown
keywords — and random combinations of them.

Small shapes: a rejected call launches nothing; the valid ones run the "sim" presets on a few
dozen elements.
"""

from __future__ import annotations

import dataclasses
import fractions
import re
from collections.abc import Callable

import numpy as np
import pytest
import scipy.ndimage as ndi
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
from simt_tiles.kernels.conv_nchw.reference import conv2d_nchw_reference

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

F = np.float64


# ---------------------------------------------------------------------------
# The functions: a valid call of each, its array arguments and its reference
# ---------------------------------------------------------------------------


def _ndimage(sp):
    def ref(arrays, kw):
        image, weights = arrays["image"], arrays["weights"]
        return sp(image, weights, mode=kw.get("mode", "reflect"), cval=kw.get("cval", 0.0),
                  origin=kw.get("origin", 0), output=kw.get("output"))
    return ref


def _correlate1d_ref(arrays, kw):
    return ndi.correlate1d(arrays["image"], arrays["weights"], axis=kw.get("axis", -1), mode=kw.get("mode", "reflect"),
                           cval=kw.get("cval", 0.0), origin=kw.get("origin", 0), output=kw.get("output"))


def _separable_ref(arrays, kw):
    image, wy, wx = arrays["image"], arrays["wy"], arrays["wx"]
    if wy.ndim != 1 or wx.ndim != 1:
        raise ValueError("wy, wx: 1-D")
    return ndi.correlate(image, np.outer(wy.astype(F), wx), mode=kw.get("mode", "reflect"), cval=kw.get("cval", 0.0),
                         origin=kw.get("origin", 0), output=kw.get("output") or image.dtype)


def _conv_ref(arrays, kw):
    x, w, b = arrays["x"], arrays["w"], arrays.get("bias")
    if w.ndim == 4 and 0 in w.shape[2:]:
        raise ValueError("w: torch refuses a 0-wide filter")
    ref, _ = conv2d_nchw_reference(x, w, b, kw.get("padding", 0), stride=kw.get("stride", 1),
                                   dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))
    return np.asarray(ref, x.dtype)


def _vector_add_ref(arrays, kw):
    a, b = arrays["a"], arrays["b"]
    if a.ndim != 1:
        raise ValueError("a: 1-D")
    return a + b


def _bias_relu_ref(arrays, kw):
    x, b = arrays["x"], arrays["bias"]
    if x.ndim != 2 or b.shape != x.shape[1:]:
        raise ValueError("shapes")
    return np.maximum(x + b, 0)


def _reduce_ref(arrays, kw):
    x, op = arrays["x"], kw.get("op", "sum")
    if x.dtype == np.float16 and op in ("sum", "mean"):  # reduce's 16-bit rule: float64 sums, one rounding
        return np.asarray(getattr(np, op)(x.astype(np.float64), axis=kw.get("axis"),
                                          keepdims=kw.get("keepdims", False))).astype(np.float16)
    return getattr(np, op)(x, axis=kw.get("axis"), keepdims=kw.get("keepdims", False))


def _softmax_backward_ref(arrays, kw):
    y, dy = arrays["y"], arrays["dy"]
    if y.shape != dy.shape or y.ndim < 1:
        raise ValueError("y, dy: one shape, at least 1-D")
    return y * (dy - np.sum(y * dy, axis=-1, keepdims=True))


def _softmax_ref(sp, arrays, kw):
    x = arrays["x"]
    if x.size == 0 and x.ndim >= 1:
        return x.copy()  # scipy's max of nothing raises; an empty softmax is empty (tests/test_callers.py)
    if x.dtype == np.float16:  # softmax's 16-bit rule: float32 arithmetic, one rounding (scipy's float16 rounds often)
        return sp(x.astype(np.float64), axis=kw.get("axis", -1)).astype(np.float16)
    return sp(x, axis=kw.get("axis", -1))


ANY = frozenset(range(33))  #: every ndim from 0 (reduce: a 0-d array reduces to its value)


@dataclasses.dataclass(frozen=True)
class Spec:
    fn: Callable
    arrays: tuple  #: ((name, shape), ...) in call order; those in ``keywords`` are passed by name
    ref: Callable  #: ref(arrays: dict, kwargs: dict) -> the NumPy/SciPy answer (raises where it refuses)
    ndims: dict  #: name -> the ndims the function defines (None: any from 1; ANY: from 0, as NumPy's reductions)
    kwargs: tuple = ()  #: the valid call's other keywords
    keywords: frozenset = frozenset()
    ndimage: bool = False  #: scipy.ndimage's dtype rules (integer images, filters of another dtype, output dtype)
    dtype: type = F  #: the valid call's dtype
    #: other names an error about an array may give (matmul's tensor-core path: "precision")
    also: tuple = ()

    def call(self, arrays: dict, **kw):
        pos = [arrays[n] for n, _ in self.arrays if n not in self.keywords]
        kws = {n: arrays[n] for n, _ in self.arrays if n in self.keywords}
        return self.fn(*pos, **{**dict(self.kwargs), **kws, **kw})

    def names(self):
        return tuple(n for n, _ in self.arrays) + self.also


SPECS = {
    "matmul": Spec(simt_tiles.matmul, (("a", (3, 2)), ("b", (2, 4))), lambda a, kw: np.matmul(a["a"], a["b"]),
                   {"a": None, "b": None}),
    "correlate2d": Spec(simt_tiles.correlate2d, (("image", (4, 5)), ("weights", (2, 3))), _ndimage(ndi.correlate),
                        {"image": {2}, "weights": {2}}, ndimage=True),
    "convolve2d": Spec(simt_tiles.convolve2d, (("image", (4, 5)), ("weights", (3, 2))), _ndimage(ndi.convolve),
                       {"image": {2}, "weights": {2}}, ndimage=True),
    "correlate1d": Spec(simt_tiles.correlate1d, (("image", (4, 5)), ("weights", (3,))), _correlate1d_ref,
                        {"image": None, "weights": {1}}, ndimage=True),
    "correlate_separable": Spec(simt_tiles.correlate_separable, (("image", (4, 5)), ("wy", (2,)), ("wx", (3,))),
                                _separable_ref, {"image": {2}, "wy": {1}, "wx": {1}}, ndimage=True),
    "correlate": Spec(simt_tiles.correlate, (("image", (3, 4, 5)), ("weights", (2, 3, 2))), _ndimage(ndi.correlate),
                      {"image": {1, 2, 3}, "weights": {1, 2, 3}}, ndimage=True),
    "convolve": Spec(simt_tiles.convolve, (("image", (3, 4, 5)), ("weights", (3, 2, 2))), _ndimage(ndi.convolve),
                     {"image": {1, 2, 3}, "weights": {1, 2, 3}}, ndimage=True),
    "conv2d_nchw": Spec(simt_tiles.conv2d_nchw, (("x", (1, 2, 3, 4)), ("w", (2, 2, 2, 2)), ("bias", (2,))), _conv_ref,
                        {"x": {4}, "w": {4}, "bias": {1}}, (("padding", 1),), frozenset({"bias"})),
    "softmax": Spec(simt_tiles.softmax, (("x", (3, 4)),), lambda a, kw: _softmax_ref(scipy.special.softmax, a, kw),
                    {"x": None}),
    "log_softmax": Spec(simt_tiles.log_softmax, (("x", (3, 4)),),
                        lambda a, kw: _softmax_ref(scipy.special.log_softmax, a, kw), {"x": None}),
    "reduce": Spec(simt_tiles.reduce, (("x", (3, 4)),), _reduce_ref, {"x": ANY}),
    "softmax_backward": Spec(simt_tiles.softmax_backward, (("y", (3, 4)), ("dy", (3, 4))), _softmax_backward_ref,
                             {"y": None, "dy": None}),
    "vector_add": Spec(simt_tiles.vector_add, (("a", (5,)), ("b", (5,))), _vector_add_ref, {"a": {1}, "b": {1}}),
    "bias_relu": Spec(simt_tiles.bias_relu, (("x", (3, 4)), ("bias", (4,))), _bias_relu_ref, {"x": {2}, "bias": {1}}),
    # the other code paths of the same functions: the tensor cores, argmax and keepdims, an N-D
    # correlate1d, conv2d_nchw's strided (space-to-depth), depthwise and dilated layers
    "matmul_tf32": Spec(simt_tiles.matmul, (("a", (3, 2)), ("b", (2, 4))), lambda a, kw: np.matmul(a["a"], a["b"]),
                        {"a": None, "b": None}, (("precision", "tf32"),), dtype=np.float32, also=("precision",)),
    "matmul_f16": Spec(simt_tiles.matmul, (("a", (3, 2)), ("b", (2, 4))), lambda a, kw: np.matmul(a["a"], a["b"]),
                       {"a": None, "b": None}, dtype=np.float16, also=("precision",)),
    "reduce_argmax": Spec(simt_tiles.reduce, (("x", (3, 4)),), lambda a, kw: np.argmax(a["x"], axis=kw.get("axis", -1)),
                          {"x": ANY}, (("op", "argmax"), ("axis", -1))),
    "reduce_keepdims": Spec(simt_tiles.reduce, (("x", (3, 4)),), lambda a, kw: np.max(a["x"], axis=0, keepdims=True),
                            {"x": ANY}, (("op", "max"), ("axis", 0), ("keepdims", True))),
    "correlate1d_3d": Spec(simt_tiles.correlate1d, (("image", (2, 3, 4)), ("weights", (2,))),
                           lambda a, kw: _correlate1d_ref(a, {"axis": 1, **kw}), {"image": None, "weights": {1}},
                           (("axis", 1),), ndimage=True),
    "conv2d_nchw_s2": Spec(simt_tiles.conv2d_nchw, (("x", (1, 2, 4, 5)), ("w", (2, 2, 2, 2)), ("bias", (2,))),
                           lambda a, kw: _conv_ref(a, {"stride": 2, **kw}), {"x": {4}, "w": {4}, "bias": {1}},
                           (("stride", 2),), frozenset({"bias"})),
    "conv2d_nchw_dw": Spec(simt_tiles.conv2d_nchw, (("x", (1, 2, 3, 4)), ("w", (2, 1, 2, 2)), ("bias", (2,))),
                           lambda a, kw: _conv_ref(a, {"groups": 2, **kw}), {"x": {4}, "w": {4}, "bias": {1}},
                           (("groups", 2),), frozenset({"bias"})),
    "conv2d_nchw_dil": Spec(simt_tiles.conv2d_nchw, (("x", (1, 2, 4, 5)), ("w", (2, 2, 2, 2)), ("bias", (2,))),
                            lambda a, kw: _conv_ref(a, {"dilation": 2, "padding": (1, 0), **kw}),
                            {"x": {4}, "w": {4}, "bias": {1}}, (("dilation", 2), ("padding", (1, 0))), frozenset({"bias"})),
}
NAMES = tuple(SPECS)
#: the public function each spec calls
FUNCTION_OF = {name: spec.fn.__name__ for name, spec in SPECS.items()}

#: findings not fixed yet: test id (up to "[") substring -> why; their cases are strict xfails (a fix
#: that makes one pass must remove it here) and stay out of the random combinations
KNOWN: dict[str, str] = {
}


def known(test_id: str) -> list:
    why = [reason for key, reason in KNOWN.items() if key in test_id]
    return [pytest.mark.xfail(strict=True, reason=why[0])] if why else []


def test_every_public_function_is_fuzzed():
    public = {n for n in simt_tiles.__all__ if callable(getattr(simt_tiles, n)) and not isinstance(getattr(simt_tiles, n), type)}
    assert public - {"warm"} == set(FUNCTION_OF.values()), public ^ set(FUNCTION_OF.values())


def inputs(name, seed=0) -> dict:
    """Small integer values (exact sums, exact integer images; exact in float16 and TF32 too)."""
    rng = np.random.default_rng(seed)
    return {n: rng.integers(-3, 4, shape).astype(SPECS[name].dtype) for n, shape in SPECS[name].arrays}


# ---------------------------------------------------------------------------
# The two outcomes
# ---------------------------------------------------------------------------


def assert_rejected(thunk, names, what):
    """``thunk()`` raises TypeError/ValueError (builtins' or simt_tiles'), whose message names one of
    ``names``; anything else fails with what happened."""
    try:
        result = thunk()
    except (TypeError, ValueError) as exc:
        cls = type(exc)
        assert cls.__module__ == "builtins" or cls.__module__.startswith("simt_tiles"), \
            f"{what}: {cls.__module__}.{cls.__qualname__} escaped: {exc}"
        msg = str(exc)
        assert any(re.search(rf"(^|\W){re.escape(n)}\b", msg) for n in names), \
            f"{what}: {cls.__name__} names none of {names}: {msg}"
        return exc
    except Exception as exc:  # noqa: BLE001 - the finding itself
        pytest.fail(f"{what}: {type(exc).__module__}.{type(exc).__qualname__} escaped "
                    f"(expected TypeError/ValueError naming {names}): {exc}")
    pytest.fail(f"{what}: accepted (returned {type(result).__name__}); expected TypeError/ValueError naming {names}")


def host(x):
    if hasattr(x, "copy_to_host") and any(st_ < 0 for st_ in x.strides):  # (a GPU's copy_to_host refuses those)
        flip = tuple(slice(None, None, -1) if st_ < 0 else slice(None) for st_ in x.strides)
        return x[flip].copy_to_host()[flip]
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def assert_like(got, expect, what):
    got, expect = host(got), np.asarray(expect)
    assert got.shape == expect.shape and got.dtype == expect.dtype, (what, got.shape, got.dtype, expect.shape, expect.dtype)
    if expect.dtype.kind == "f":
        tol = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2.0 ** -10}.get(expect.dtype, 1e-12)
        np.testing.assert_allclose(got, expect, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expect, err_msg=what)


def check(name, arrays, kw, names, what):
    """The call with ``arrays`` and ``kw``: the reference's answer where the reference defines one
    and the function's rules take it (``names`` None), else rejected naming one of ``names``."""
    spec = SPECS[name]
    if names is not None:
        return assert_rejected(lambda: spec.call(arrays, **kw), names, what)
    expect = spec.ref({n: host(v) for n, v in arrays.items() if v is not None}, {**dict(spec.kwargs), **kw})
    assert_like(spec.call(arrays, **kw), expect, what)


# ---------------------------------------------------------------------------
# The corruptions of one array argument
# ---------------------------------------------------------------------------

BAD_DTYPES = (np.int8, np.int32, np.int64, np.bool_, np.complex64, np.float16, object)


def _reshaped(x, how):
    if how == "0-d":
        return np.asarray(x.flat[0])
    if how == "1-d":
        return x.ravel()
    return x.reshape((1,) * (5 - x.ndim) + x.shape)  # "5-d": the same values, batch dimensions added


def _strided_device(x):
    """``x``'s values as every other element of a device array's last axis."""
    dev = cuda.to_device(np.repeat(x, 2, axis=-1))
    return dev[(slice(None),) * (x.ndim - 1) + (slice(None, None, 2),)]


def _reversed_device(x):
    """``x``'s values as a device view with negative strides on every axis."""
    dev = cuda.to_device(np.ascontiguousarray(x[(slice(None, None, -1),) * x.ndim]))
    return dev[(slice(None, None, -1),) * x.ndim]


def _takes_half(name):
    """softmax, log_softmax and reduce take float16 (and bfloat16): read 16-bit, computed in float32 (reduce's
    sums in float64), rounded once."""
    return FUNCTION_OF[name] in ("softmax", "log_softmax", "reduce")


def array_cases(name):
    """``(id, argument, the bad value (a function of the valid arrays), the names the error may
    give, or None: the reference's answer)``."""
    spec = SPECS[name]
    others = spec.names()
    for arg, shape in spec.arrays:
        alt = others  # a dtype mismatch may be blamed on the other operand ("b: expected the dtype of a")
        for dt in BAD_DTYPES + ((F,) if spec.dtype != F else ()):
            if np.dtype(dt) == np.dtype(spec.dtype):
                continue
            ok = spec.ndimage and np.dtype(dt).kind in "i"  # scipy.ndimage's integer images and filters
            ok = ok or (_takes_half(name) and dt is np.float16)  # softmax's 16-bit inputs (tests/test_softmax16.py)
            ok = ok or (spec.ndimage and arg in ("weights", "wx", "wy") and dt in (np.bool_, np.float16))  # as scipy
            yield f"{arg}-dtype-{np.dtype(dt).name}", arg, (lambda a, arg=arg, dt=dt: a[arg].astype(dt)), \
                None if ok else alt
        for dt in (np.int32, np.float16, np.complex64, np.bool_):  # the same, as Numba device arrays
            if np.dtype(dt) == np.dtype(spec.dtype):
                continue
            ok = spec.ndimage and np.dtype(dt).kind in "i"
            ok = ok or (_takes_half(name) and dt is np.float16)
            yield f"{arg}-device-dtype-{np.dtype(dt).name}", arg, \
                (lambda a, arg=arg, dt=dt: cuda.to_device(a[arg].astype(dt))), None if ok else alt
        for how in ("0-d", "1-d", "5-d"):
            nd = {"0-d": 0, "1-d": 1, "5-d": 5}[how]
            want = spec.ndims[arg]
            defined = nd >= 1 if want is None else nd in want
            if nd == len(shape):
                continue
            # defined: the reference decides (a matmul 1-D operand may still mismatch); else refused
            yield f"{arg}-{how}", arg, (lambda a, arg=arg, how=how: _reshaped(a[arg], how)), \
                "reference" if defined else (arg,)
        kinds = {"list": lambda x: x.tolist(), "tuple": lambda x: tuple(x.ravel()), "None": lambda x: None,
                 "str": lambda x: "x", "float": lambda x: 1.5, "numpy-scalar": lambda x: F(1.5),
                 "bytes": lambda x: x.tobytes()}
        for kind, make in kinds.items():
            if arg == "bias" and kind == "None" and FUNCTION_OF[name] == "conv2d_nchw":
                continue  # no bias
            scalar_ok = kind == "numpy-scalar" and spec.ndims[arg] == ANY  # (a NumPy scalar is a 0-d array)
            yield f"{arg}-{kind}", arg, (lambda a, arg=arg, make=make: make(a[arg])), \
                "reference" if scalar_ok else (arg,)
        if arg != others[0]:
            # one more element on the last axis than the others agree with: the reference decides
            grow = tuple(shape[:-1]) + (shape[-1] + 1,)
            yield f"{arg}-shape+1", arg, (lambda a, arg=arg, grow=grow: np.resize(a[arg], grow)), "reference"
        yield f"{arg}-empty", arg, (lambda a, arg=arg: a[arg][..., :0]), "reference"
        # device views: matmul reads any strides (the tensor-core path copies them into C order); the others
        # want C-contiguous device arrays
        for kind, make in (("device-strided", _strided_device), ("device-reversed", _reversed_device)):
            yield f"{arg}-{kind}", arg, (lambda a, arg=arg, make=make: make(a[arg])), \
                None if FUNCTION_OF[name] == "matmul" else (arg,)


def _outcome(name, arrays, expect):
    """``expect`` "reference": None where the reference gives an answer, else every array's name."""
    if expect != "reference":
        return expect
    try:
        SPECS[name].ref({n: host(v) for n, v in arrays.items() if v is not None}, dict(SPECS[name].kwargs))
    except (ValueError, TypeError, RuntimeError, IndexError):
        return SPECS[name].names()
    return None


ARRAY_CASES = [pytest.param(name, case, id=f"{name}-{case[0]}", marks=known(f"{name}-{case[0]}"))
               for name in NAMES for case in array_cases(name)]


@pytest.mark.parametrize("name, case", ARRAY_CASES)
def test_array_argument(name, case):
    label, arg, make, expect = case
    arrays = inputs(name)
    arrays[arg] = make(arrays)
    names = _outcome(name, arrays, expect)
    check(name, arrays, {}, names, f"{name} {label}")


# ---------------------------------------------------------------------------
# out=
# ---------------------------------------------------------------------------


def _out_like(name):
    return np.asarray(SPECS[name].ref(inputs(name), dict(SPECS[name].kwargs)))


def out_cases(name):
    spec = SPECS[name]
    shape, dtype = _out_like(name).shape, _out_like(name).dtype
    other = np.float32 if dtype == F else F  # a float dtype other than the result's

    def readonly(a):
        o = np.empty(shape)
        o.flags.writeable = False
        return o

    yield "shape+1", (lambda a: np.empty(shape + (1,))), ("out",)
    yield "0-d", (lambda a: np.empty(())), ("out",) if shape != () else None
    yield "other-float", (lambda a: np.empty(shape, other)), None if spec.ndimage else ("out",)
    yield "int32", (lambda a: np.empty(shape, np.int32)), None if spec.ndimage else ("out",)
    yield "complex64", (lambda a: np.empty(shape, np.complex64)), ("out",)
    yield "object", (lambda a: np.empty(shape, object)), ("out",)
    yield "list", (lambda a: np.empty(shape).tolist()), ("out",)
    yield "float", (lambda a: 0.0), ("out",)
    yield "str", (lambda a: "out"), ("out",)
    yield "readonly", readonly, ("out",)
    yield "device-shape+1", (lambda a: cuda.device_array(shape + (1,))), ("out",)
    yield "device-other-float", (lambda a: cuda.device_array(shape, other)), None if spec.ndimage else ("out",)
    yield "device-int32", (lambda a: cuda.device_array(shape, np.int32)), None if spec.ndimage else ("out",)
    yield "device-complex64", (lambda a: cuda.device_array(shape, np.complex64)), ("out",)
    if len(shape) >= 1 and shape[-1] > 1:
        yield "numpy-strided", (lambda a: np.empty(shape[:-1] + (2 * shape[-1],))[..., ::2]), ("out",)
        yield "numpy-reversed", (lambda a: np.empty(shape)[..., ::-1]), ("out",)
        yield "device-strided", (lambda a: _strided_device(np.empty(shape))), ("out",)
        yield "device-reversed", (lambda a: _reversed_device(np.empty(shape))), ("out",)
    for arg, arr_shape in spec.arrays:
        if tuple(arr_shape) == tuple(shape):
            # out is a device input (the inputs then device arrays too): read while written
            yield f"is-{arg}", "same", ("out",)


OUT_CASES = [pytest.param(name, case, id=f"{name}-out-{case[0]}", marks=known(f"{name}-out-{case[0]}"))
             for name in NAMES for case in out_cases(name)]


@pytest.mark.parametrize("name, case", OUT_CASES)
def test_out(name, case):
    label, make, names = case
    arrays = inputs(name)
    if make == "same":
        arg = label.removeprefix("is-")
        arrays = {n: cuda.to_device(v) for n, v in arrays.items()}
        check(name, arrays, {"out": arrays[arg]}, names, f"{name} out={label}")
        return
    out = make(arrays)
    if names is None:  # scipy.ndimage: an output array of another dtype
        spec = SPECS[name]
        expect = spec.ref(arrays, {**dict(spec.kwargs), "output": out.dtype})
        got = spec.call(arrays, out=out)
        assert got is out
        assert_like(out, expect, f"{name} out={label}")
        return
    check(name, arrays, {"out": out}, names, f"{name} out={label}")


# ---------------------------------------------------------------------------
# The other parameters: integers, strings, scalars, variants, keywords
# ---------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
HUGE = 10**20
#: values no integer parameter takes (bool: True == 1, but a flag is not a count)
NOT_INTS = (NAN, INF, -INF, 1.5, F(1.0), "1", b"1", None, True, [1], object())


def param_cases():
    """``(function, keyword, value, names the error may give or None: valid)``."""
    for fn in ("softmax", "log_softmax", "reduce"):
        for v in (*NOT_INTS, HUGE, -HUGE, 2, -3, (0, 0), (0, 5), ()):
            if v is None:
                yield fn, "axis", v, None  # all axes, as NumPy/scipy
                continue
            if fn == "reduce" and isinstance(v, tuple) and v == ():
                yield fn, "axis", v, None  # NumPy: no axis reduced, the array itself
                continue
            yield fn, "axis", v, ("axis",)
    for v in (*NOT_INTS, HUGE, -HUGE, 2, -3):
        yield "correlate1d", "axis", v, ("axis",)
    for v in (1, "yes", None, np.int64(1), 1.0):
        yield "reduce", "keepdims", v, ("keepdims",)
    for v in ("SUM", "sum ", b"sum", "", "nanmax", 0, None, ("sum",)):
        yield "reduce", "op", v, ("op",)
    for fn in ("correlate2d", "convolve2d", "correlate1d", "correlate_separable"):
        for v in ("", "REFLECT", None, 3, b"reflect", "grid-wrap", ("reflect",)):
            yield fn, "mode", v, ("mode",)
        for v in ("1", None, 1j, [1.0], np.array([1.0]), True, 10**400, -(10**400), np.complex64(1)):
            yield fn, "cval", v, ("cval",)
        for v in (NAN, INF, -2.5, np.float32(3), np.int64(-7), fractions.Fraction(1, 3)):
            yield fn, "cval", v, None  # any real: scipy's float(cval)
        origins = (HUGE, -HUGE, NAN, INF, 1.5, "0", None, True, b"0", np.float64(0))
        if fn != "correlate1d":
            origins += ((0, 0, 0), (0,), (0, 1.5), (0, None), (HUGE, 0), np.array([0, 0, 0]))
        else:
            origins += ((0,), [0])
        for v in origins:
            yield fn, "origin", v, ("origin",)
        for v in ("nope", np.complex64, np.uint64, np.float16, "float16", bool, object, 3, [1.0]):
            yield fn, "output", v, ("output",)
    for key, low in (("stride", 1), ("dilation", 1), ("padding", 0)):
        for v in (*NOT_INTS, low - 1, -HUGE, (1, 2, 3), (), [1, NAN], (1, -1), np.array([1, 1])):
            if (key == "padding" and isinstance(v, str)) or (isinstance(v, list) and v == [1]):
                continue  # [1]: a pair of one, as torch's
            yield "conv2d_nchw", key, v, (key,)
    for v in ("SAME", "full", ""):
        yield "conv2d_nchw", "padding", v, ("padding",)
    yield "conv2d_nchw", "stride", HUGE, ("stride",)  # past the kernels' 32-bit ints (torch: one pixel a row)
    yield "conv2d_nchw", "stride", 2**31 - 1, None  # the largest: one output pixel a row
    yield "conv2d_nchw", "dilation", HUGE, ("dilation",)  # the filter's extent: larger than the input
    yield "conv2d_nchw", "padding", HUGE, ("padding",)  # an output no kernel can index
    for v in (*NOT_INTS, 0, -1, 3, HUGE):
        yield "conv2d_nchw", "groups", v, ("groups",)
    for v in ("fp64", "TF32", "", 3):
        yield "matmul", "precision", v, ("precision", "a")
    for fn in ("matmul", "conv2d_nchw"):
        for v in ("no", "false", 2, [1], {}, np.float64(1)):
            yield fn, "autotune", v, ("autotune",)
    for v in ((0,), (0, 1), 1.0, True, 2):
        yield "reduce_argmax", "axis", v, ("axis",)
    for v in ("yes", 1, None):
        yield "reduce_keepdims", "keepdims", v, ("keepdims",)
    yield "conv2d_nchw_s2", "padding", "same", ("padding",)  # torch refuses it with a stride
    for v in ("tf32", "bf16", 3, "FP16"):
        yield "matmul_f16", "precision", v, ("precision",)
    yield "matmul_tf32", "autotune", "no", ("autotune",)
    for fn in NAMES:
        if fn != "bias_relu":
            for v in ("nope", "", 3, ["k01_naive"], {}, b"k01"):
                yield fn, "variant", v, ("variant",)
        for v in ("huge", "", 3, {}, [], ("sim",)):
            yield fn, "config", v, ("config",)
        for v in ("fast", 1, 1.5, object(), [0]):
            yield fn, "stream", v, ("stream",)
        yield fn, "outt", None, ("outt",)  # a misspelt keyword


def _case_id(c):
    fn, key, v, _ = c
    text = v.__name__ if isinstance(v, type) else type(v).__name__ if type(v) is object else repr(v)
    return f"{fn}-{key}={text[:20]}"


PARAM_CASES = [pytest.param(*c, id=_case_id(c), marks=known(_case_id(c))) for c in param_cases()]


@pytest.mark.parametrize("name, key, value, names", PARAM_CASES)
def test_parameter(name, key, value, names):
    arrays = inputs(name)
    kw = {key: value}
    if key in ("cval", "origin") and names is None:
        kw["mode"] = "constant"
    check(name, arrays, kw, names, f"{name}({key}={value!r})")


# ---------------------------------------------------------------------------
# Several corruptions at once (hypothesis): the error names one of them
# ---------------------------------------------------------------------------

#: function -> [(label, where ("array" or "kw"), key, make(valid arrays) -> the bad value, names)]:
#: only corruptions the function refuses
REJECTS = {}
for _name in NAMES:
    pool = []
    for label, arg, make, expect in array_cases(_name):
        if isinstance(expect, tuple) and not known(f"{_name}-{label}"):
            pool.append((label, "array", arg, make, expect))
    for label, make, names in out_cases(_name):
        if names is not None and make != "same" and not known(f"{_name}-out-{label}"):
            pool.append((f"out-{label}", "kw", "out", make, names))
    for fn, key, value, names in param_cases():
        if fn == _name and names is not None and not known(_case_id((fn, key, value, names))):
            pool.append((f"{key}={value!r}"[:40], "kw", key, lambda a, value=value: value, names))
    REJECTS[_name] = pool


@given(data=st.data())
def test_several_bad_arguments_at_once(data):
    name = data.draw(st.sampled_from(NAMES), label="function")
    pool = REJECTS[name]
    picks = data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=3, unique=True), label="picks")
    valid = inputs(name)
    arrays, kw, names, labels = dict(valid), {}, set(), []
    for i in picks:
        label, where, key, make, n = pool[i]
        (arrays if where == "array" else kw)[key] = make(valid)
        names.update(n)
        labels.append(label)
    # a dtype mismatch may be blamed on the operand it mismatches
    names.update(SPECS[name].names())
    assert_rejected(lambda: SPECS[name].call(arrays, **kw), tuple(names), f"{name} {labels}")


@given(data=st.data())
def test_bad_arguments_after_a_recorded_plan(data):
    """The launch plans' fast path (on by default on a GPU): device arrays, one valid call recorded,
    then the same arrays with bad arguments — refused as on the checked path, never replayed."""
    from simt_tiles import launch

    name = data.draw(st.sampled_from([n for n in NAMES if not n.startswith("matmul_")]), label="function")
    pool = REJECTS[name]
    picks = data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=2, unique=True), label="picks")
    valid = {n: cuda.to_device(v) for n, v in inputs(name).items()}
    before = launch.set_enabled(True)
    launch.clear()
    try:
        SPECS[name].call(valid)  # recorded
        SPECS[name].call(valid)  # replayed
        arrays, kw, names, labels = dict(valid), {}, set(SPECS[name].names()), []
        for i in picks:
            label, where, key, make, n = pool[i]
            (arrays if where == "array" else kw)[key] = make(inputs(name))
            names.update(n)
            labels.append(label)
        assert_rejected(lambda: SPECS[name].call(arrays, **kw), tuple(names), f"{name} {labels} (plans on)")
    finally:
        launch.set_enabled(before)
        launch.clear()


@given(stride=st.integers(-2, 3) | st.sampled_from([2**31 - 1, 2**31, 2**32 + 1, 2**63, -(2**63)]),
       padding=st.integers(-1, 2) | st.sampled_from([2**32 + 1, 2**63]), dilation=st.integers(0, 2) | st.just(2**40),
       groups=st.sampled_from([0, 1, 2, 3, -1]))
def test_conv2d_nchw_integer_parameters(stride, padding, dilation, groups):
    """Any int: torch's answer where torch defines one, else an error naming a parameter (or w,
    when the filter outgrows the input)."""
    arrays = inputs("conv2d_nchw")
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    valid = 1 <= stride < 2**31 and 0 <= padding < 2**31 and dilation >= 1 and groups in (1, 2)
    if valid:  # the output's extent: (H + 2p - d (KH - 1) - 1) // s + 1 >= 1, a 2x2 filter on 3x4
        valid = min(3, 4) + 2 * padding - dilation - 1 >= 0
    if not valid:
        assert_rejected(lambda: SPECS["conv2d_nchw"].call(arrays, **kw), ("stride", "padding", "dilation", "groups", "w"),
                        f"conv2d_nchw {kw}")
        return
    if groups == 2:
        arrays["w"] = arrays["w"][:, :1].copy()
    check("conv2d_nchw", arrays, kw, None, f"conv2d_nchw {kw}")


# ---------------------------------------------------------------------------
# warm
# ---------------------------------------------------------------------------


WARM_CASES = [({"functions": "matmul"}, ("functions",)), ({"functions": ["nope"]}, ("functions",)),
              ({"functions": 3}, ("functions",)), ({"functions": [], "jobs": 0}, ("jobs",)),
              ({"functions": [], "jobs": -1}, ("jobs",)), ({"functions": [], "jobs": 1.5}, ("jobs",)),
              ({"functions": [], "jobs": "2"}, ("jobs",)), ({"functions": [], "nope": 1}, ("nope",))]


def _warm_id(kw):
    return "warm-" + ",".join(f"{k}={v!r}" for k, v in kw.items() if not (k == "functions" and v == []))


@pytest.mark.parametrize("kw, names", [pytest.param(kw, n, id=_warm_id(kw), marks=known(_warm_id(kw)))
                                       for kw, n in WARM_CASES])
def test_warm_arguments(kw, names):
    assert_rejected(lambda: simt_tiles.warm(progress=False, **kw), names, f"warm({kw})")


def test_warm_a_string_is_not_split_into_letters():
    exc = assert_rejected(lambda: simt_tiles.warm("matmul", progress=False), ("functions",), "warm('matmul')")
    assert "got 'm'" not in str(exc), str(exc)  # the name the caller gave, not its first letter


@pytest.mark.parametrize("which", ["a", "b"])
def test_tensor_core_out_overlapping_an_input(which):
    """float16 operands (matmul's tensor-core path): an out= that is an input is refused as on the
    FP32 path (tests/test_aliasing.py), not raced over."""
    a, b = cuda.to_device(np.arange(9, dtype=np.float16).reshape(3, 3)), cuda.to_device(np.eye(3, dtype=np.float16))
    out = {"a": a, "b": b}[which]
    exc = assert_rejected(lambda: simt_tiles.matmul(a, b, out=out), ("out",), f"matmul(f16, out={which})")
    assert f"out: overlaps {which} in memory" in str(exc), str(exc)
