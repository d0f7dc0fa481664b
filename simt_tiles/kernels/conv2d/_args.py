"""The argument work of the conv2d functions: the caller's arguments checked and made the device
arrays a rung reads and writes, with scipy.ndimage's rules.

The public functions (``__init__.py``) read check → choose → launch; this module is the *check*:
:func:`filter2d` (``correlate2d``, ``convolve2d``, ``correlate1d``; ``correlate``/``convolve`` of a
1-D or 2-D image), :func:`filter3d` (``correlate``/``convolve`` of a 3-D volume, after
:func:`image_ndim` chose the path) and :func:`separable` (``correlate_separable``) return the call's :class:`Checked` arguments and its filter operands;
:mod:`.dispatch` then chooses, the rung launches.  In the order the checks run (a bad argument
fails before any upload): ``output`` and ``origin`` (their scipy forms), ``axis``, ``mode``,
``cval``, ``variant`` and ``config`` (:mod:`.dispatch`), the stream, the image, the filter, the
origin's range, ``out``.  One piece of argument work runs before the planned call instead: a NumPy
filter swapped for its cached device copy (:mod:`simt_tiles.device_copies`).

origin
    scipy's ``origin`` shifts the filter's anchor: ``correlate`` centres a ``KH × KW`` filter at
    ``(KH // 2 + origin[0], KW // 2 + origin[1])``; ``convolve`` flips the filter and mirrors the
    origin, so its anchor is ``((KH − 1) // 2 − origin[0], (KW − 1) // 2 − origin[1])``.  Valid
    values are ``-(size // 2) <= origin <= (size − 1) // 2`` on each axis (scipy's rule, the same
    for both; the anchor then lies inside the filter).  The rungs already take the anchor at run
    time (``_common.anchors``), so a new origin compiles nothing (k07–k09, which compile the
    anchor in, compile one kernel per filter *and* anchor, as they do per filter).

Integer images and the output dtype
    scipy computes in double and writes the input's dtype unless ``output`` names a dtype or an
    array; the double becomes an integer by a C cast (``(npy_uint8)tmp``), which on x86-64 is
    :func:`scipy_cast`: truncation toward zero, and out-of-range values wrapped the way the
    ``cvttsd2si`` instructions do (``uint8``: −50 → 206, 300 → 44, 1e10 → 0; ``int32``: 1e10 →
    −2**31).  Here the filter runs in a float dtype (:func:`compute_dtype`: float32 when image and
    output are at most 16-bit integers or float32, float64 else — int32's range, or a float64 side),
    the image and filter converted to it on the device by one elementwise kernel, and the result
    converted to the output dtype by another with :func:`scipy_cast`'s statements.  A result that
    lies within the float rounding bound of an integer can truncate to the other side of it than
    scipy's double sum did (the bound is γ_n·Σ|w|·|x|; integer filters on small images are exact).
    Complex images are not supported (TypeError).  ``correlate2d``/``convolve2d``/``correlate_separable``
    take 2-D images only (ValueError naming ``image``, pointing to ``correlate1d`` for volumes).

N-D images (``correlate1d`` only)
    scipy's ``correlate1d`` filters one axis of an image of any number of dimensions.  The
    C-contiguous image is viewed as ``(outer, L, inner)`` — L the axis' length, outer the product of
    the dimensions before it, inner of those after — and each piece is the 2-D problem the rungs
    already solve (:func:`volume_view`): ``(outer, L)`` along axis 1 when inner is 1 (the last axis,
    a 1-D image), else the ``outer`` slices ``(L, inner)`` along axis 0 (one when outer is 1; more,
    a stack the rung takes in one launch, ``_common.FilterRung.launches``).  A 2-D image is never
    reshaped: its call is what it was (axis 0 or 1 of the image itself).
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, NamedTuple

import numpy as np
from numba import cuda, void

from ...interop import (
    Operand,
    as_stream,
    device_operand,
    host_operand,
    prepare_out,
)
from ...device_copies import host_values
from ...runtime import jit, numba_dtype
from . import dispatch
from ._common import MODES, Mode

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: the integer image / output dtypes scipy.ndimage takes and these functions do too
#: (not uint64: scipy's conversion into it has a third branch, and its range no float holds)
INTEGER_DTYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                             np.int64))
SUPPORTED = FLOAT_DTYPES + INTEGER_DTYPES
_NAMES = "float32, float64 or an integer dtype (int8 ... int64, not uint64)"


# ---------------------------------------------------------------------------
# One call's arguments, checked
# ---------------------------------------------------------------------------


class Checked(NamedTuple):
    """A call's arguments, checked: what its choice and launch take (the filters come beside it)."""

    src: Any  #: the device image the filter reads, in the compute dtype
    dtype: np.dtype  #: the compute dtype (the image's, or :func:`compute_dtype`'s)
    out: Operand  #: the result the call returns (``interop.finish_result``)
    #: the device array the filter writes: ``out``'s, or a scratch array :func:`convert` copies into ``out``
    dst: Any
    mode: Mode
    origin: tuple  #: scipy's origin (rows, columns)
    stream: Any
    #: an N-D image's ``(batch, h, w)`` (:func:`volume_view`): ``batch`` 2-D problems of ``(h, w)`` on
    #: ``src``/``dst`` reshaped so; None for a 2-D image (``src`` itself is the problem)
    volume: tuple | None = None


def filter2d(image, weights, *, mode, cval, origin, output, out, variant, config, stream, ndim=2, axis=None):
    """``(Checked, the filter operand)`` for ``correlate2d``/``convolve2d`` (``ndim`` 2: a 2-D
    filter on a 2-D image) and ``correlate1d`` (``ndim`` 1: a 1-D filter along ``axis`` of an image
    of any number of dimensions, as the 2-D problem of :func:`volume_view`)."""
    image_ndim = 2 if ndim == 2 else ndim_of(image)
    out, output, origin, mode, axis = _values(mode, cval, origin, output, out, ndim, axis, image_ndim)
    if variant is None:  # a bad variant or config fails before any upload
        dispatch.check_default_config(config)
    else:
        dispatch.get_rung(variant).resolve_config(config)
    stream = as_stream(stream, image)
    if ndim == 2:
        check_2d(image)
    img_op, src, out_dtype = image_operand(image, out, output, stream, ndim=2 if ndim == 2 else None)
    volume = None
    if ndim == 1:
        # the axis of the 2-D problem, and the origin on it (a 2-D image: the axis itself)
        axis = check_axis(axis, src.ndim)  # (checked before the upload unless the image's ndim was unknown)
        volume, axis = volume_view(tuple(src.shape), axis)
        origin = (origin[0], 0) if axis == 0 else (0, origin[0])
    # NumPy weights stay on the host for a rung that compiles them in or passes them as
    # kernel parameters (the default); the others get them uploaded
    w_op = weights_operand(weights, "weights", src.dtype, stream, axis=axis,
                           upload=not dispatch.keeps_host_weights(variant))
    if axis is None:
        check_origin(origin, w_op.dev.shape)
    else:
        check_origin(origin[axis:axis + 1], w_op.dev.shape[axis:axis + 1], "len(weights)")
    out_op, dst = out_operand(out, img_op, out_dtype, src.dtype, stream, (w_op,))
    return Checked(src, src.dtype, out_op, dst, mode, origin, stream, volume), w_op


#: the most elements a volume may have: k12 indexes it with unsigned 32-bit offsets
MAX_VOLUME_ELEMENTS = 2**31 - 1


def image_ndim(image, weights) -> int:
    """The number of dimensions ``correlate``/``convolve`` filter ``image`` in: 1, 2 or 3 — 2 too
    when ``image`` is no array whose ndim can be read (the 2-D path's checks then name it).
    ValueError naming ``image`` for 4 or more dimensions, naming ``weights`` when its ndim is not
    the image's (scipy's rule: one filter axis per image axis)."""
    if shape_of(image) == ():
        raise ValueError("image: expected a 1-D, 2-D or 3-D array; got 0-D")
    nd = ndim_of(image)
    if nd is None:
        return 2
    if nd > 3:
        raise ValueError(f"image: expected a 1-D, 2-D or 3-D array; got {nd}-D with shape {shape_of(image)} "
                         "(filter more dimensions one axis at a time with simt_tiles.correlate1d)")
    wnd = ndim_of(weights)
    if wnd is not None and wnd != nd:
        raise ValueError(f"weights: expected a {nd}-D array (one axis per axis of image, which is {nd}-D); got "
                         f"{wnd}-D with shape {shape_of(weights)}")
    return nd


def origin_1d(origin):
    """A 1-D image's ``origin``: an int, or scipy's sequence of one int, as the int (else as given:
    :func:`parse_origin` names what is wrong)."""
    if isinstance(origin, (list, tuple)) and len(origin) == 1:
        return origin[0]
    if isinstance(origin, np.ndarray) and origin.shape in ((1,), ()):
        return origin.reshape(()).item()
    if isinstance(origin, (list, tuple, np.ndarray)):
        raise ValueError(f"origin: expected an int or a sequence of 1 int (one per axis of the image); got {origin!r}")
    return origin


def filter3d(image, weights, *, mode, cval, origin, output, out, variant, config, stream):
    """``(Checked, the filter operand)`` for ``correlate``/``convolve`` of a 3-D volume with a 3-D
    filter (k12), with the 2-D functions' rules (``output``, integer images, filter dtype, ``origin``
    per axis, ``out`` overlap) and at most :data:`MAX_VOLUME_ELEMENTS` elements."""
    out, output = split_output(output, out)
    origin = parse_origin(origin, 3)
    mode = mode_of(mode)
    check_cval(cval)
    dispatch.get_volume_rung(variant).resolve_config(config)  # a bad variant or config fails before any upload
    stream = as_stream(stream, image)
    shape = shape_of(image)
    if shape is not None and math.prod(shape) > MAX_VOLUME_ELEMENTS:
        raise ValueError(f"image: {math.prod(shape)} elements; the volume kernels index with 32-bit offsets, at "
                         f"most {MAX_VOLUME_ELEMENTS} (filter it in slabs along axis 0, each KD − 1 planes wider than its output)")
    img_op, src, out_dtype = image_operand(image, out, output, stream, ndim=3)
    w_op = weights_operand(weights, "weights", src.dtype, stream, ndim=3)
    check_origin(origin, w_op.dev.shape)
    out_op, dst = out_operand(out, img_op, out_dtype, src.dtype, stream, (w_op,))
    return Checked(src, src.dtype, out_op, dst, mode, origin, stream), w_op


#: most rows of one last-axis problem: CUDA's grid y limit, one row a block at the least (a volume with
#: more, e.g. 2048 × 2048 × 64 along its last axis, is filtered as a stack of its trailing slices)
MAX_ROWS = 65535


def volume_view(shape: tuple[int, ...], axis: int):
    """``(volume, axis2)``: an image of ``shape`` filtered along ``axis`` (in ``[0, ndim)``) as 2-D
    problems.  A 2-D image: ``(None, axis)``, the image itself.  Else, with the C-contiguous image
    seen as ``(outer, L, inner)``: ``((1, outer, L), 1)`` when inner is 1 (the last axis; a 1-D image
    is ``(1, L)``; past :data:`MAX_ROWS` rows, a stack of the trailing dimensions' slices that fit),
    else ``((outer, L, inner), 0)`` — ``outer`` slices ``(L, inner)`` filtered down their columns.
    ``volume`` is ``(batch, h, w)``: ``batch`` problems of shape ``(h, w)``."""
    if len(shape) == 2:
        return None, axis
    outer, length, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    if inner == 1:
        if outer <= MAX_ROWS:
            return (1, outer, length), 1
        # more rows than a grid's y extent takes: slices of the trailing dimensions before the axis that
        # fit (rows filtered along axis 1 are independent, so any cut of them is exact), slice z on grid z
        rows = 1
        for d in reversed(shape[:axis]):
            if rows * d > MAX_ROWS:
                break
            rows *= d
        if rows > 1:
            return (outer // rows, rows, length), 1
        return (1, outer, length), 1
    return (outer, length, inner), 0


def separable(image, wy, wx, *, mode, cval, origin, output, out, variant, config, stream):
    """``(Checked, wy's operand (KH × 1), wx's (1 × KW))`` for ``correlate_separable``."""
    out, output, origin, mode, _ = _values(mode, cval, origin, output, out, 2)
    dispatch.separable_rung(variant).resolve_config(config)  # a bad variant or config fails before any copy
    stream = as_stream(stream, image)
    check_2d(image)
    img_op, src, out_dtype = image_operand(image, out, output, stream)
    wy_op = weights_operand(wy, "wy", src.dtype, stream, axis=0)  # KH x 1
    wx_op = weights_operand(wx, "wx", src.dtype, stream, axis=1)  # 1 x KW
    check_origin(origin, (wy_op.dev.shape[0], wx_op.dev.shape[1]), ("len(wy)", "len(wx)"))
    out_op, dst = out_operand(out, img_op, out_dtype, src.dtype, stream, (wy_op, wx_op))
    return Checked(src, src.dtype, out_op, dst, mode, origin, stream), wy_op, wx_op


def _values(mode, cval, origin, output, out, ndim, axis=None, image_ndim=2):
    """``(out, output as a dtype name or None, origin, Mode, axis)``: the arguments that are values,
    checked first (``output=`` an array becomes ``out``).  ``ndim`` 2 (a 2-D filter): origin
    (rows, columns), axis None.  ``ndim`` 1: origin ``(o,)`` and ``axis`` in ``[0, image_ndim)``
    (``image_ndim`` None, an image whose ndim is read only from its operand: the axis' type only,
    its range checked once the operand is made)."""
    out, output = split_output(output, out)
    if ndim == 2:
        origin = parse_origin(origin, 2)
    else:
        origin = parse_origin(origin, 1)
        axis = check_axis(axis, image_ndim)
    mode = mode_of(mode)
    check_cval(cval)
    return out, output, origin, mode, axis


# ---------------------------------------------------------------------------
# The checks, one argument each
# ---------------------------------------------------------------------------


def mode_of(mode) -> Mode:
    """The :class:`~._common.Mode` named ``mode`` (or ``mode`` itself, a Mode); ValueError naming
    the argument otherwise."""
    if isinstance(mode, Mode):
        return mode
    if isinstance(mode, str) and mode in MODES:
        return Mode[mode.upper()]
    raise ValueError(f"mode: expected one of {MODES}; got {mode!r}")


def check_cval(cval) -> None:
    if isinstance(cval, bool) or not isinstance(cval, numbers.Real):
        raise TypeError(f"cval: expected a real number; got {type(cval).__name__} {cval!r}")
    try:
        float(cval)  # the kernels take it as a float (an int past float64's range: OverflowError)
    except OverflowError:
        raise ValueError(f"cval: expected a real number within float64's range (|cval| <= 1.798e308); got "
                         f"{type(cval).__name__} out of that range") from None


def check_axis(axis, ndim: int | None = 2) -> int:
    """``axis`` of an ``ndim``-D image as ``0 .. ndim − 1`` (negative counted from the end, as
    NumPy); TypeError/ValueError naming it otherwise.  ``ndim`` None: the type only (``axis`` as
    given)."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis: expected an int; got {type(axis).__name__} {axis!r}")
    if ndim is None:
        return int(axis)
    if ndim == 2 and not -2 <= axis <= 1:
        raise ValueError(f"axis: expected -2, -1, 0 or 1 for a 2-D image; got {axis}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis: expected an int in [{-ndim}, {ndim - 1}] for a {ndim}-D image; got {axis}")
    return int(axis) % ndim


def shape_of(x) -> tuple[int, ...] | None:
    """``x``'s shape read without touching its data (NumPy, Numba, CuPy, PyTorch, any
    ``__cuda_array_interface__``), or None (not an array — a NumPy scalar neither —, or a shape this
    cannot read: the operand's own checks then speak)."""
    if not (isinstance(x, np.ndarray) or is_array(x)):
        return None
    shape = getattr(x, "shape", None)
    if shape is None and hasattr(x, "__cuda_array_interface__"):
        try:
            shape = x.__cuda_array_interface__["shape"]
        except Exception:  # noqa: BLE001 - a producer with a broken interface: its operand says so
            return None
    try:
        return tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        return None


def ndim_of(x) -> int | None:
    """``x``'s number of dimensions (:func:`shape_of`), or None; at least 1 (a 0-D array is left to
    the operand's check, which names it)."""
    shape = shape_of(x)
    return None if shape is None or len(shape) == 0 else len(shape)


def check_2d(image) -> None:
    """ValueError naming ``image`` when it is an array of other than 2 dimensions (the 2-D filters;
    ``correlate1d`` takes volumes), before any upload."""
    shape = shape_of(image)
    if shape is not None and len(shape) != 2:
        hint = (" (2-D filters only: simt_tiles.correlate / convolve take 1-D, 2-D and 3-D images; filter more "
                "dimensions one axis at a time with simt_tiles.correlate1d)"
                if len(shape) > 2 else "")
        raise ValueError(f"image: expected a 2-D array; got {len(shape)}-D with shape {shape}{hint}")


def parse_origin(origin, ndim: int) -> tuple[int, ...]:
    """``origin`` — an int, or a sequence of ``ndim`` ints (scipy's forms) — as ``ndim`` ints."""
    if isinstance(origin, np.ndarray) and origin.ndim == 0:  # (a 0-d array is its value, as scipy takes it)
        origin = origin.item()
    if isinstance(origin, numbers.Integral) and not isinstance(origin, bool):
        return (int(origin),) * ndim
    if ndim == 1 or isinstance(origin, (bool, str, bytes, numbers.Number)):
        want = "an int" if ndim == 1 else f"an int or a sequence of {ndim} ints"
        raise TypeError(f"origin: expected {want}; got {type(origin).__name__} {origin!r}")
    try:
        values = tuple(origin)
    except TypeError:
        raise TypeError(f"origin: expected an int or a sequence of {ndim} ints; got "
                        f"{type(origin).__name__} {origin!r}") from None
    if len(values) != ndim:
        raise ValueError(f"origin: expected an int or {ndim} ints (one per axis of the image); got {origin!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"origin: expected ints; got {type(v).__name__} {v!r} in {origin!r}")
    return tuple(int(v) for v in values)


def check_origin(origin: tuple[int, ...], shape: tuple[int, ...], what="weights.shape") -> None:
    """scipy's rule: ``-(k // 2) <= origin[i] <= (k − 1) // 2`` for the filter's extent k on each
    axis; ValueError naming ``origin`` otherwise (the same rule for correlate and convolve).  ``what``:
    the extents' name (indexed per axis), or a tuple of one name an axis (``correlate_separable``'s)."""
    for i, (o, k) in enumerate(zip(origin, shape)):
        lo, hi = -(k // 2), (k - 1) // 2
        if not lo <= o <= hi:
            axis = f"[{i}]" if len(shape) > 1 else ""
            extent = what[i] if isinstance(what, tuple) else f"{what}{axis}"
            raise ValueError(f"origin: expected -({extent} // 2) <= origin{axis} <= ({extent} - 1) // 2, "
                             f"i.e. {lo} .. {hi} for a filter of shape {tuple(shape)}; got "
                             f"{origin[0] if len(origin) == 1 else tuple(origin)}")


def array_dtype(x) -> np.dtype | None:
    """``x``'s dtype as NumPy's (PyTorch's mapped), or None when it has none NumPy knows."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    if type(x).__module__.split(".")[0] == "torch":
        dt = str(dt).removeprefix("torch.")
    try:
        return np.dtype(dt)
    except TypeError:
        return None


def is_plain(x) -> bool:
    """Whether ``x`` is what the float path takes as it is: a float32/float64 array, or no array
    at all (rejected there with its own message)."""
    dt = array_dtype(x)
    return dt is None or dt.newbyteorder("=") in FLOAT_DTYPES


def is_array(x) -> bool:
    """A device array of some kind (what ``interop.device_operand`` takes in place)."""
    return bool(getattr(x, "__cuda_ndarray__", False)) or hasattr(x, "__cuda_array_interface__") \
        or hasattr(x, "__dlpack__")


def check_dtype(name: str, dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.newbyteorder("=") not in SUPPORTED:
        extra = " (complex inputs are not supported)" if dtype.kind == "c" else ""
        raise TypeError(f"{name}: expected dtype {_NAMES}; got {dtype}{extra}")
    return dtype.newbyteorder("=")


def split_output(output, out):
    """scipy's ``output`` (a dtype, or an array) beside this API's ``out``: ``(out, dtype name)``."""
    if output is None:
        return out, None
    if isinstance(output, (str, type, np.dtype)):
        try:
            dtype = np.dtype(output)
        except TypeError:
            raise TypeError(f"output: expected a dtype or an array; got {output!r}") from None
        return out, check_dtype("output", dtype).name
    if not (isinstance(output, np.ndarray) or is_array(output)):
        raise TypeError(f"output: expected a dtype or an array; got {type(output).__name__} {output!r}")
    if out is not None:
        raise ValueError("output: give an output array as out= or output=, not both")
    return output, None


def compute_dtype(image_dtype: np.dtype, out_dtype: np.dtype) -> np.dtype:
    """The float dtype the filter runs in: float64 if the image or the output is float64 or an
    integer wider than 16 bits (float32 would not hold it exactly), else float32."""
    wide = any((d.kind == "f" and d.itemsize == 8) or (d.kind in "iu" and d.itemsize > 2)
               for d in (np.dtype(image_dtype), np.dtype(out_dtype)))
    return np.dtype(np.float64 if wide else np.float32)


# ---------------------------------------------------------------------------
# The arrays: image, filter and out as device arrays of the compute dtype
# ---------------------------------------------------------------------------


def image_operand(image, out, output, stream, ndim: int | None = 2):
    """``(image operand, the device image the filter reads, output dtype)``.  A float32/float64
    image with its own dtype out is used as it is; any other (an integer image, another output
    dtype) is converted to the compute dtype — a NumPy one on the host before the upload, a device
    one by the elementwise kernel (:func:`converted`)."""
    if output is not None:
        out_dtype = np.dtype(output)
    elif out is not None and array_dtype(out) is not None:
        out_dtype = check_dtype("out", array_dtype(out))
    else:
        out_dtype = None
    if is_plain(image):
        img_op = device_operand(image, "image", ndim=ndim, stream=stream)
        in_dtype = np.dtype(img_op.dev.dtype)
        dtype = in_dtype if out_dtype is None else compute_dtype(in_dtype, out_dtype)
        if dtype == in_dtype:
            return img_op, img_op.dev, in_dtype if out_dtype is None else out_dtype
        return img_op, converted(img_op.dev, dtype, stream), out_dtype
    in_dtype = check_dtype("image", array_dtype(image))
    out_dtype = in_dtype if out_dtype is None else out_dtype
    dtype = compute_dtype(in_dtype, out_dtype)
    if isinstance(image, np.ndarray):
        img_op = device_operand(image.astype(dtype), "image", ndim=ndim, stream=stream)
        return Operand("image", img_op.dev, "numpy", image), img_op.dev, out_dtype
    img_op = device_operand(image, "image", ndim=ndim, stream=stream, dtype=in_dtype)
    return img_op, converted(img_op.dev, dtype, stream), out_dtype


def out_operand(out, img_op, out_dtype, dtype, stream, inputs):
    """``(out operand, the array the filter writes)``: ``out`` itself when it has the compute
    dtype, else a scratch array that :func:`convert` then writes into ``out``; of the image's shape."""
    shape = tuple(img_op.dev.shape)
    out_op = prepare_out(out, img_op, shape, out_dtype, stream, inputs=inputs)
    if out_dtype == dtype:
        return out_op, out_op.dev
    return out_op, cuda.device_array(shape, dtype, stream=stream)


def weights_operand(weights, name, dtype, stream, *, axis=None, upload=True, ndim=None) -> Operand:
    """The filter as a device operand of the compute ``dtype``: 2-D for
    ``axis=None``, else 1-D, returned as the 2-D view K × 1 (axis 0) or 1 × K
    (axis 1); ``ndim=3``: 3-D, as it is (a volume's filter).  A filter of another real dtype is
    converted (NumPy on the host, a device one by :func:`convert`), as scipy allows.  Errors name
    ``name``."""
    ndim = ndim or (2 if axis is None else 1)
    known = None if upload else host_values(weights)
    if known is not None:
        # a reused NumPy filter's cached device copy (device_copies; the plan keys on the copy): its
        # values, kept on the host as the NumPy filter's would be (kernel parameters)
        weights = known
    if isinstance(weights, np.ndarray) and (weights.dtype.kind == "b" or weights.dtype.newbyteorder("=") in (
            np.float16, np.uint64)):  # a NumPy bool, float16 or uint64 filter, as scipy takes (uint64 as its float)
        weights = weights.astype(dtype)
    wdt = array_dtype(weights)
    if wdt is not None and wdt.newbyteorder("=") != dtype and (isinstance(weights, np.ndarray)
                                                               or is_array(weights)):
        if wdt.kind == "b" or wdt in (np.float16, np.uint64):  # (a device one: the converter takes _NAMES alone)
            raise TypeError(f"{name}: expected dtype {_NAMES}; got a device {wdt} filter (a NumPy bool, float16 or "
                            f"uint64 filter is converted; convert a device one first)")
        wdt = check_dtype(name, wdt)
        if isinstance(weights, np.ndarray):
            weights = weights.astype(dtype)
        else:
            op = device_operand(weights, name, ndim=ndim, stream=stream, dtype=wdt)
            if 0 not in op.dev.shape:
                weights = converted(op.dev, dtype, stream)
    if not upload and isinstance(weights, np.ndarray):
        # a constant-filter rung compiles the values in: NumPy weights stay on the host
        # (an upload on the default stream would wait for the GPU's queued work)
        op = host_operand(weights, name, ndim=ndim)
    else:
        op = device_operand(weights, name, ndim=ndim, stream=stream)
    if op.dev.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {dtype} (the dtype of image); got {op.dev.dtype}")
    shape = tuple(op.dev.shape)
    if 0 in shape:
        if ndim == 3:
            raise ValueError(f"{name}: expected a non-empty 3-D array (at least 1x1x1); got shape {shape}")
        if axis is None:
            raise ValueError(f"{name}: expected a non-empty 2-D array (at least 1x1); got shape {shape}")
        raise ValueError(f"{name}: expected a non-empty 1-D array; got shape {shape}")
    if axis is None:
        return op
    k = shape[0]
    as2d = (k, 1) if axis == 0 else (1, k)
    original = op.original.reshape(as2d) if op.kind == "numpy" else op.original
    return Operand(name, op.dev.reshape(as2d), op.kind, original)


# ---------------------------------------------------------------------------
# scipy's float-to-integer conversion, and the elementwise kernels
# ---------------------------------------------------------------------------


def scipy_cast(values: np.ndarray, dtype) -> np.ndarray:
    """What scipy.ndimage writes for the double results ``values`` into an array of ``dtype``
    (its C cast on x86-64; NumPy reference of :func:`convert`'s kernel)."""
    dtype = np.dtype(dtype)
    v = np.asarray(values, np.float64)
    if dtype.kind == "f":
        return v.astype(dtype)
    bits = dtype.itemsize * 8
    t = np.trunc(np.where(np.isnan(v), 0.0, v))
    if bits <= 32 and dtype.kind == "i" or bits <= 16:
        # cvttsd2si into 32 bits: out of range (or NaN) gives 0x80000000, whose low 8/16 bits are 0
        ok = ~np.isnan(v) & (t >= -2.0 ** 31) & (t < 2.0 ** 31)
        r = np.where(ok, t, -2.0 ** 31).astype(np.int64)
    else:  # uint32, int64: 64-bit conversion; out of range (or NaN) gives 0x8000000000000000
        ok = ~np.isnan(v) & (t >= -2.0 ** 63) & (t < 2.0 ** 63)
        r = np.where(ok, np.where(ok, t, 0.0).astype(np.int64), np.iinfo(np.int64).min)
    if bits < 64:  # the low bits, as C's narrowing
        r = r & ((1 << bits) - 1)
        if dtype.kind == "i":
            r = np.where(r >= 1 << (bits - 1), r - (1 << bits), r)
    return r.astype(dtype)


def _cast_statements(dtype: np.dtype):
    """The device function for :func:`scipy_cast`'s rule into ``dtype`` (statements as there)."""
    bits = dtype.itemsize * 8
    narrow32 = bits <= 32 and dtype.kind == "i" or bits <= 16
    lo, hi = (-2.0 ** 31, 2.0 ** 31) if narrow32 else (-2.0 ** 63, 2.0 ** 63)
    sentinel = -(2 ** 31) if narrow32 else -(2 ** 63)
    mask = (1 << bits) - 1
    half = 1 << (bits - 1)
    signed = dtype.kind == "i"

    @cuda.jit(device=True, inline="always")
    def cast(v):
        r = sentinel
        if v == v:  # not NaN
            if lo <= v < hi:
                r = int(v)  # truncates toward zero
        if bits < 64:
            r &= mask
            if signed and r >= half:
                r -= 1 << bits
        return r

    return cast


def convert_signature(src: np.dtype, dst: np.dtype):
    return void(numba_dtype(src)[::1], numba_dtype(dst)[::1])


@functools.lru_cache(maxsize=None)
def _converter(src: np.dtype, dst: np.dtype):
    """The compiled :func:`make_converter` kernel for ``src`` → ``dst``."""
    return jit(make_converter(src, dst), func_or_sig=convert_signature(src, dst))


def make_converter(src: np.dtype, dst: np.dtype):
    """The elementwise kernel ``b[i] = convert(a[i])`` for flat C-contiguous arrays (the Python
    function: :func:`_converter` compiles it)."""
    cast = None if np.dtype(dst).kind == "f" else _cast_statements(np.dtype(dst))

    def convert(a, b):
        i = cuda.grid(1)
        if i < a.shape[0]:
            if cast is None:
                b[i] = a[i]  # to a float: rounded to nearest
            else:
                b[i] = cast(a[i])

    return convert


def convert(src, dst, stream) -> None:
    """``dst[...] = src`` on the device (same shape, C-contiguous): a float or integer into a float by
    rounding, a float into an integer by :func:`scipy_cast`'s rule."""
    n = src.size
    if n == 0:
        return
    kernel = _converter(np.dtype(src.dtype), np.dtype(dst.dtype))
    threads = 256
    kernel[(n + threads - 1) // threads, threads, stream](src.reshape(n), dst.reshape(n))


def converted(dev, dtype, stream):
    """A new device array of ``dtype`` holding ``dev``'s values (:func:`convert`)."""
    new = cuda.device_array(dev.shape, dtype, stream=stream)
    convert(dev, new, stream)
    return new
