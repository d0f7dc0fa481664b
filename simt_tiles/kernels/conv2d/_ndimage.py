"""scipy.ndimage's semantics beyond a float image at origin 0: ``origin=``, integer images,
SciPy's output-dtype rule (``output=``) and a filter dtype other than the image's.

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
    Complex images and 3-D volumes are not supported (TypeError / ValueError).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
from numba import cuda, void

from ...interop import Operand, current_stream_ptr, stream_key
from ...runtime import jit, numba_dtype

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: the integer image / output dtypes scipy.ndimage takes and these functions do too
#: (not uint64: scipy's conversion into it has a third branch, and its range no float holds)
INTEGER_DTYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                             np.int64))
SUPPORTED = FLOAT_DTYPES + INTEGER_DTYPES
_NAMES = "float32, float64 or an integer dtype (int8 ... int64, not uint64)"


def parse_origin(origin, ndim: int) -> tuple[int, ...]:
    """``origin`` — an int, or a sequence of ``ndim`` ints (scipy's forms) — as ``ndim`` ints."""
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


def check_origin(origin: tuple[int, ...], shape: tuple[int, ...], what: str = "weights.shape") -> None:
    """scipy's rule: ``-(k // 2) <= origin[i] <= (k − 1) // 2`` for the filter's extent k on each
    axis; ValueError naming ``origin`` otherwise (the same rule for correlate and convolve)."""
    for i, (o, k) in enumerate(zip(origin, shape)):
        lo, hi = -(k // 2), (k - 1) // 2
        if not lo <= o <= hi:
            axis = f"[{i}]" if len(shape) > 1 else ""
            raise ValueError(f"origin: expected -({what}{axis} // 2) <= origin{axis} <= ({what}{axis} - 1) // 2, "
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


def torch_result(like, shape, dtype, stream):
    """A new PyTorch tensor of the integer ``dtype`` on ``like``'s device (interop's allocation
    makes float tensors), kept from reuse by torch's allocator until ``stream`` is past it."""
    import torch  # only a PyTorch caller gets here

    obj = torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name), device=like.original.device)
    ptr = stream_key(stream)
    if ptr != current_stream_ptr(obj):
        obj.record_stream(torch.cuda.ExternalStream(ptr, device=obj.device))
    return Operand("out", cuda.as_cuda_array(obj, sync=False), "torch", obj)
