"""Arrays in and out of the public functions: one operand model for both kernel sets.

An :class:`Operand` is an argument as a kernel sees it (``dev``) and as the
caller gave it (``original``, ``kind``), with its memory layout (shape, dtype,
strides, device address) read from the array interface when a check needs it.
Two sets of kernels take operands, under different rules — the only
differences, stated here once:

=====================  ================================  ================================
rule                   SIMT kernels (``simt_tiles.*``)   Tile kernels (``simt_tiles.tile``)
=====================  ================================  ================================
NumPy inputs           copied to the device; the result  refused (TypeError: move them
                       comes back as NumPy               first); correlate2d's small
                                                         ``weights`` excepted
device inputs          C-contiguous (no hidden copy);    any strides (cuTile reads them)
                       matmul: any strides
dtypes                 float32, float64                  float32
``dev``                a Numba device array (Numba's     the caller's array (``ct.launch``
                       launch takes it)                  takes it)
=====================  ================================  ================================

Common to both: ``out=`` has exactly the result's shape and dtype, is
C-contiguous, and must not overlap any input in memory (:func:`check_no_overlap`,
ValueError naming ``out``): a kernel that reads an input while another block
writes the same bytes gives a silently wrong result.  Disjoint views of one
buffer are fine; NumPy arguments never alias (they are copied).

SIMT side: :func:`device_operand` takes NumPy arrays, Numba device arrays, any
``__cuda_array_interface__`` object (CuPy, PyTorch) and CUDA DLPack producers;
:func:`prepare_out` checks ``out=`` or makes the result in the caller's kind,
:func:`finish_result` hands it back; :func:`as_stream` turns the caller's
stream into a Numba one (``None``: the current stream of the inputs' framework), and
:func:`check_device` refuses an array on another GPU than the current one (a safety net: the public
functions first make their arrays' device current, :mod:`simt_tiles.devices`).
The Tile side's checks and allocation are in :mod:`simt_tiles.tile._interop`.
Repeated calls skip all of this through :mod:`simt_tiles.launch`'s plans.

Numba is imported by the SIMT functions when first called, not by importing
this module (``simt_tiles.tile`` uses the operand model without Numba).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._recording import no_plan

#: dtypes every SIMT kernel claims; they are validated by the public functions
SUPPORTED_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
#: the 16-bit floats that the functions taking them accept (``matmul`` on the tensor cores, ``softmax``,
#: ``log_softmax``), by :func:`dtype_name`: they reach the kernels as their ``uint16`` bits
#: (:func:`operand16`), since NumPy has no bfloat16 without ml_dtypes and Numba no bfloat16 array type
HALF_FLOATS = ("bfloat16", "float16")

__all__ = [
    "SUPPORTED_FLOATS",
    "Layout",
    "Operand",
    "layout_of",
    "check_no_overlap",
    "check_dtype_ndim",
    "device_operand",
    "host_operand",
    "prepare_out",
    "finish_result",
    "as_stream",
    "current_stream_ptr",
    "check_device",
    "device_mismatch",
    "stream_key",
    "describe",
    "device_view",
    "HALF_FLOATS",
    "dtype_name",
    "operand16",
    "storage_view",
    "out16",
    "finish16",
]


# ---------------------------------------------------------------------------
# The operand model
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where an array lives: shape, dtype, strides in bytes, address of element 0."""

    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]
    ptr: int

    def span(self) -> tuple[int, int]:
        """``[first byte, last byte + 1)`` the array can touch (empty for a size-0 array)."""
        if 0 in self.shape:
            return (self.ptr, self.ptr)
        lo = hi = 0
        for n, s in zip(self.shape, self.strides):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        return (self.ptr + lo, self.ptr + hi + self.dtype.itemsize)


def _c_strides(shape, itemsize: int) -> tuple[int, ...]:
    strides, acc = [], itemsize
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def _torch_dtype_to_numpy(dt) -> np.dtype:
    try:
        return np.dtype(str(dt).replace("torch.", ""))
    except TypeError:
        return np.dtype("V")  # bfloat16 and friends: callers report them by name


def layout_of(x) -> Layout:
    """The :class:`Layout` of a PyTorch tensor, a ``__cuda_array_interface__`` object
    (Numba device arrays, CuPy), a NumPy array, or the simulator's device arrays."""
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "data_ptr"):
        dt = _torch_dtype_to_numpy(x.dtype)
        item = x.element_size()
        return Layout(tuple(x.shape), dt, tuple(s * item for s in x.stride()), int(x.data_ptr()))
    if _is_numba_device_array(x) and hasattr(x, "gpu_data"):
        # its own strides: numba-cuda's interface says ``strides: None`` (C order) for a broadcast array
        # (its ``is_contiguous`` skips stride-0 dimensions), so a (3, 2) view with strides (0, 0) would
        # read as six contiguous elements of a one-element buffer (wrong products on the H200)
        ptr = x.device_ctypes_pointer.value or 0
        return Layout(tuple(x.shape), np.dtype(x.dtype), tuple(int(s) for s in x.strides), int(ptr))
    iface = None
    try:
        iface = x.__cuda_array_interface__
    except Exception:  # noqa: BLE001 - AttributeError, or a producer refusing
        host = getattr(x, "_ary", x)  # the simulator's FakeCUDAArray wraps a NumPy array
        iface = getattr(host, "__array_interface__", None)
    if not isinstance(iface, dict):
        raise TypeError(f"expected an array with __cuda_array_interface__; got {describe(x)}")
    shape = tuple(int(n) for n in iface["shape"])
    dt = np.dtype(iface["typestr"])
    strides = iface.get("strides")
    strides = _c_strides(shape, dt.itemsize) if strides is None else tuple(int(s) for s in strides)
    return Layout(shape, dt, strides, int(iface["data"][0]))


@dataclasses.dataclass
class Operand:
    """An argument as the kernel sees it (``dev``) and as the caller gave it.

    ``kind`` is "numpy", "numba", "cupy", "torch" or "cai" (another
    ``__cuda_array_interface__`` producer).  ``device`` is the caller's device
    where the Tile side needs it (torch.device, CuPy device id), else None.
    The layout is read from ``dev`` on first use (never for NumPy operands,
    whose ``dev`` is a fresh copy)."""

    name: str
    dev: Any
    kind: str
    original: Any
    device: Any = None

    @functools.cached_property
    def layout(self) -> Layout:
        return layout_of(self.dev)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def dtype(self) -> np.dtype:
        return self.layout.dtype

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements."""
        return tuple(s // self.layout.dtype.itemsize for s in self.layout.strides)

    @property
    def ptr(self) -> int:
        return self.layout.ptr

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def c_contiguous(self) -> bool:
        if self.size == 0:
            return True  # NumPy's rule: an empty array is contiguous whatever its strides (CuPy gives 0)
        lay = self.layout
        expect = lay.dtype.itemsize
        for n, s in zip(reversed(lay.shape), reversed(lay.strides)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def span(self) -> tuple[int, int]:
        """``[first byte, last byte + 1)`` this operand can touch."""
        return self.layout.span()


def check_no_overlap(out: Operand, inputs: Iterable[Operand | None]) -> None:
    """ValueError naming ``out`` when its bytes overlap any input's.

    Byte ranges come from the arrays' device pointers and strides, so the same
    array and overlapping views are caught and disjoint views of one buffer pass.
    For strided (Tile) arrays the range is the hull, so interleaved views count
    as overlapping.  NumPy operands are copies and never alias."""
    if out.kind == "numpy":
        return
    lo, hi = out.span()
    if lo == hi:
        return
    for x in inputs:
        if x is None or x.kind == "numpy":
            continue
        xlo, xhi = x.span()
        if lo < xhi and xlo < hi:
            raise ValueError(
                f"out: overlaps {x.name} in memory (bytes [{lo:#x}, {hi:#x}) and [{xlo:#x}, {xhi:#x})); "
                f"expected an out= that shares no memory with the inputs (pass a separate array, "
                f"or out=None)"
            )


def describe(x) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


# ---------------------------------------------------------------------------
# SIMT side: into Numba device arrays and back
# ---------------------------------------------------------------------------


def _is_numba_device_array(x) -> bool:
    # Numba's device arrays (and the simulator's stand-ins) carry this marker.
    return bool(getattr(x, "__cuda_ndarray__", False))


def _has_cai(x) -> bool:
    try:
        return hasattr(x, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - e.g. a CPU tensor raising something other than AttributeError
        return False


def _kind_of_cai(x) -> str:
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        return "cupy"
    if mod == "torch":
        return "torch"
    return "cai"


def _is_cuda_dlpack(x) -> bool:
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None or not hasattr(x, "__dlpack__"):
        return False
    try:
        device_type, _ = dev()
    except Exception:  # noqa: BLE001  # pragma: no cover - a producer with a broken protocol
        return False
    return int(device_type) in (2, 13)  # kDLCUDA, kDLCUDAManaged


def check_dtype_ndim(name, dtype, got_ndim, shape, ndim, accepted: str = "float32 or float64") -> None:
    """TypeError/ValueError naming ``name`` unless ``ndim`` dimensions (None: at least
    one) of float32/float64 (``accepted``: what the error says the function takes)."""
    if ndim is None and got_ndim < 1:
        raise ValueError(f"{name}: expected an array of at least 1 dimension; got 0-D")
    if ndim is not None and got_ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array; got {got_ndim}-D with shape {tuple(shape)}")
    if np.dtype(dtype) not in SUPPORTED_FLOATS:
        raise TypeError(
            f"{name}: expected dtype {accepted}; got {np.dtype(dtype)}"
        )


def _native(x: np.ndarray) -> np.ndarray:
    """``x`` in the machine's byte order: a big-endian float64 NumPy array is a float64
    (it is copied to the device anyway); other dtypes are left for the dtype check."""
    if not x.dtype.isnative and x.dtype.newbyteorder("=") in SUPPORTED_FLOATS:
        return x.astype(x.dtype.newbyteorder("="))
    return x


def _check_unmasked(x: np.ndarray, name: str) -> None:
    """TypeError naming ``name`` for a ``numpy.ma.MaskedArray``: the kernels would read its data and
    silently ignore its mask (NumPy's own functions honour it)."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{name}: expected an array without a mask; got a numpy.ma.MaskedArray (its mask would "
                        f"be ignored: pass {name}.filled(value) or {name}.data)")


def host_operand(x: np.ndarray, name: str, *, ndim: int | None) -> Operand:
    """A NumPy argument kept on the host (e.g. a filter a kernel compiles in), checked."""
    _check_unmasked(x, name)
    host = _native(x)
    check_dtype_ndim(name, host.dtype, host.ndim, host.shape, ndim)
    return Operand(name, np.ascontiguousarray(host), "numpy", x)


def device_operand(x, name: str, *, ndim: int | None, stream=0, dtype=None, strided: bool = False,
                   accepted: str = "float32 or float64") -> Operand:
    """Turn a caller's array into a device array the kernels can take.

    * NumPy arrays are checked, made C-contiguous (and native byte order) and
      copied to the device.
    * ``__cuda_array_interface__`` objects (Numba, CuPy, PyTorch CUDA tensors)
      are used in place; they must be C-contiguous (no hidden copy is made).
    * CUDA DLPack producers without the interface go through CuPy, zero-copy.

    ``ndim=None`` accepts any number of dimensions from 1 up; ``dtype`` (an ``out=``'s
    expected dtype, e.g. argmax's int64) replaces the float32/float64 rule.  ``strided=True``
    (matmul's operands): device arrays keep any strides (the caller reads them), and a NumPy
    array whose last two axes are a transposed C order (``x.T``) is copied as it lies and
    comes back as the same transposed view.  ``accepted``: the dtypes a dtype error names (a function that
    also takes 16-bit floats through :func:`operand16` says so).
    Raises TypeError/ValueError naming ``name``, the expectation and what came.
    """
    from numba import cuda

    if isinstance(x, np.ndarray):
        _check_unmasked(x, name)
        host = _native(x)  # any layout and byte order: the copy below makes it C-contiguous
        check_dtype_ndim(name, host.dtype, host.ndim, host.shape, ndim, accepted)
        if strided and host.ndim >= 2 and not host.flags.c_contiguous:
            swapped = np.swapaxes(host, -1, -2)
            if swapped.flags.c_contiguous:  # a transposed view: the device copy keeps the layout
                dev = cuda.to_device(swapped, stream=stream)
                lay = layout_of(dev)
                st = list(lay.strides)
                st[-1], st[-2] = st[-2], st[-1]
                return Operand(name, device_view(dev, host.shape, st), "numpy", x)
        host = np.ascontiguousarray(host)
        return Operand(name, cuda.to_device(host, stream=stream), "numpy", x)
    _check_torch(x, name, dtype, accepted)
    if _is_numba_device_array(x):
        kind, dev = "numba", x
    elif _has_cai(x):
        kind, dev = _kind_of_cai(x), _import_cai(x, stream)
    elif _is_cuda_dlpack(x):
        try:
            import cupy
        except ImportError as exc:
            raise TypeError(
                f"{name}: a DLPack array ({describe(x)}) needs CuPy to be used "
                "without a copy; install cupy or pass a CuPy/PyTorch/Numba array"
            ) from exc
        kind = "cupy"
        x = cupy.from_dlpack(x)
        dev = _import_cai(x, stream)
    else:
        where = ""
        if hasattr(x, "device"):
            where = f" on device {x.device}"
        raise TypeError(
            f"{name}: expected a NumPy array or a CUDA array (Numba device array, "
            f"CuPy, PyTorch CUDA tensor, DLPack on CUDA); got {describe(x)}{where}"
        )
    check_device(name, x, kind)
    # an out= of a given dtype: its ndim here, its dtype exactly by the caller (prepare_out)
    check_dtype_ndim(name, dev.dtype if dtype is None else SUPPORTED_FLOATS[0], dev.ndim, dev.shape, ndim, accepted)
    if not strided and (not dev.is_c_contiguous() or _broadcast(dev)):
        raise ValueError(
            f"{name}: expected a C-contiguous device array; got shape {dev.shape} "
            f"with strides {dev.strides} (make a contiguous copy first, e.g. "
            "cupy.ascontiguousarray / tensor.contiguous())"
        )
    return Operand(name, dev, kind, x)


def _broadcast(dev) -> bool:
    """Whether ``dev`` repeats elements (a stride of 0 on an axis longer than 1; an empty array never
    does): numba-cuda's ``is_c_contiguous`` skips such axes, so a CuPy ``broadcast_to`` view would pass
    for C-contiguous."""
    return 0 in dev.strides and 0 not in dev.shape and any(s == 0 and n > 1 for n, s in zip(dev.shape, dev.strides))


def framework_copy(op: "Operand", stream=0):
    """A PyTorch or CuPy operand whose matrix (its last two axes) has a zero stride over an axis longer than one
    (``x.expand(m, n)``; the ones tensor autograd passes as the gradient of ``y.sum()``): a C-contiguous copy
    its own framework makes (what torch.matmul does with expanded operands too); None for any other operand.
    Such operands once gave wrong products on the H200 (benchmarks/notes/matmul.md, "Zero strides": Numba's
    interface reports them C-contiguous).  The copy is the framework's kernel, which a launch plan cannot
    replay, so the call runs checked.  Zero *batch* strides stay: the matmul kernels read them in place.

    The copy runs on the call's ``stream`` (the framework's stream object for that handle), not the
    framework's current stream: the launch that reads it is then ordered after it, and the framework's
    caching allocator takes the copy's memory back on that stream, so no later allocation reuses it while
    the launch still reads it."""
    if op.kind not in ("torch", "cupy") or op.ndim < 2:
        return None
    if not any(s == 0 and n > 1 for s, n in zip(op.strides[-2:], op.shape[-2:])):
        return None
    no_plan("an operand with a zero stride is first copied by its framework")
    with framework_stream(op, stream_key(stream)):
        if op.kind == "torch":
            return op.original.contiguous()
        import cupy  # deferred: an optional dependency, present whenever a CuPy array came

        return cupy.ascontiguousarray(op.original)


def framework_stream(op: "Operand", handle: int):
    """The context in which ``op``'s framework (torch or CuPy) queues work on the CUDA stream ``handle``
    (0: the legacy default stream)."""
    if op.kind == "torch":
        import torch  # deferred: an optional dependency, present whenever a tensor came

        device = op.original.device
        return torch.cuda.stream(torch.cuda.ExternalStream(handle, device=device) if handle else
                                 torch.cuda.default_stream(device))
    import cupy

    return cupy.cuda.ExternalStream(handle) if handle else cupy.cuda.Stream.null


def device_view(dev, shape, strides, offset: int = 0):
    """A Numba device array (or simulator array) on ``dev``'s memory: ``shape``, ``strides`` in
    bytes, starting ``offset`` bytes past ``dev``'s element 0.  No check that the view stays in
    ``dev``'s allocation: the caller computes it from ``dev``'s own layout (matmul's flat storage,
    a batch's slice, a transposed upload)."""
    from numba import cuda

    shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
    host = getattr(dev, "_ary", None)
    if host is not None:  # the simulator: a NumPy view of the same buffer (``offset`` < 0 too: a reversed batch)
        view = np.asarray(_HostView(host, shape, strides, offset))
        return type(dev)(view, getattr(dev, "stream", 0))
    lay = layout_of(dev)
    desc = {"shape": shape, "strides": strides, "typestr": lay.dtype.str,
            "data": (lay.ptr + offset, False), "version": 3}
    return cuda.from_cuda_array_interface(desc, owner=dev, sync=False)


class _HostView:
    """The array interface of a view of NumPy array ``base``'s memory ``offset`` bytes (any sign) past its element
    0 (what ``as_strided`` builds, without its start at ``base``'s pointer); it keeps ``base`` alive."""

    def __init__(self, base: np.ndarray, shape, strides, offset: int):
        self.base = base
        self.__array_interface__ = {"shape": shape, "strides": strides, "typestr": base.dtype.str, "version": 3,
                                    "data": (base.__array_interface__["data"][0] + offset, False)}


def _check_torch(x, name: str, dtype=None, accepted: str = "float32 or float64") -> None:
    """A PyTorch CUDA tensor's dtype and autograd state, checked before its interfaces
    are read: torch refuses to export a bfloat16 tensor or one that requires grad with
    errors that do not name the argument (and the DLPack route would then blame CuPy)."""
    if type(x).__module__.split(".")[0] != "torch" or not getattr(x, "is_cuda", False):
        return
    if dtype is None and _torch_dtype_to_numpy(x.dtype) not in SUPPORTED_FLOATS:
        raise TypeError(f"{name}: expected dtype {accepted}; got {x.dtype}")
    _check_no_grad(x, name)


def _check_no_grad(x, name: str) -> None:
    """ValueError naming ``name`` for a tensor that requires grad (the float and 16-bit paths alike)."""
    if getattr(x, "requires_grad", False):
        raise ValueError(
            f"{name}: expected a tensor that does not require grad (simt_tiles computes no "
            f"gradients); got requires_grad=True (pass {name}.detach())"
        )


def _import_cai(x, stream):
    """A zero-copy Numba view of a ``__cuda_array_interface__`` array, ordered after
    the work its producer queued, without blocking the host.

    Numba's own import (``sync=True``) calls ``synchronize()`` on the producer's
    stream: the host waits for every queued kernel on each call (measured on
    the H200: the public calls then cost the GPU 100–500 µs of idle time).
    Here the launch stream waits instead: nothing to do when the producer's
    stream is the one we launch on or a default stream that the legacy
    default stream is ordered with; otherwise an event recorded on the
    producer's stream that our stream waits on (no host blocking)."""
    from numba import cuda

    dev = cuda.as_cuda_array(x, sync=False)
    producer = x.__cuda_array_interface__.get("stream")
    if producer is None:  # the producer promises the data is ready
        return dev
    ours = stream_key(stream) if stream else None  # None: the legacy default stream
    if producer == ours or (ours is None and producer in (1, 2)):  # 1: legacy, 2: per-thread default
        return dev
    no_plan("ordered after the producer's stream with an event")
    event = cuda.event(timing=False)
    event.record(cuda.external_stream(producer))
    event.wait(stream)
    return dev


def stream_key(stream) -> int:
    """The CUDA handle of a Numba stream as an int (0: the legacy default stream);
    in the simulator, the stream object's id."""
    if not stream:
        return 0
    handle = getattr(stream, "handle", None)  # a cuda-python CUstream (int() works) or a c_void_p
    try:
        return int(handle.value if hasattr(handle, "value") else handle)
    except (TypeError, ValueError):
        return id(stream)


def prepare_out(out, like: Operand, shape: tuple[int, ...], dtype, stream=0, *,
                inputs: Iterable[Operand | None] = ()) -> Operand:
    """The output operand: the caller's ``out=`` checked, or a new array of the
    caller's kind (the kind of ``like``).

    ``out`` must have exactly ``shape`` and ``dtype``, be C-contiguous (and
    writeable, for NumPy) and share no memory with ``like`` or any of ``inputs``
    (ValueError naming ``out``); nothing is broadcast or cast silently.
    """
    from numba import cuda

    dtype = np.dtype(dtype)
    if out is None:
        return _allocate(like, shape, dtype, stream)
    if isinstance(out, np.ndarray):
        _check_out_shape_dtype(out.shape, out.dtype, shape, dtype)
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(
                "out: expected a writeable C-contiguous NumPy array; got strides "
                f"{out.strides}, writeable={out.flags.writeable}"
            )
        return Operand("out", cuda.device_array(shape, dtype, stream=stream), "numpy", out)
    got = getattr(out, "shape", None)
    if isinstance(got, tuple) and len(got) != len(shape):  # the shape expected, not only its rank
        raise ValueError(f"out: expected shape {tuple(shape)}; got {tuple(got)}")
    op = device_operand(out, "out", ndim=len(shape), stream=stream, dtype=dtype)
    _check_out_shape_dtype(op.dev.shape, op.dev.dtype, shape, dtype)
    check_no_overlap(op, (like, *inputs))
    return op


def _check_out_shape_dtype(got_shape, got_dtype, shape, dtype) -> None:
    if tuple(got_shape) != tuple(shape):
        raise ValueError(f"out: expected shape {tuple(shape)}; got {tuple(got_shape)}")
    if np.dtype(got_dtype) != np.dtype(dtype):
        order = " in native byte order" if np.dtype(got_dtype).newbyteorder("=") == np.dtype(dtype) else ""
        raise TypeError(f"out: expected dtype {np.dtype(dtype)}{order}; got {np.dtype(got_dtype)}")


def _allocate(like: Operand, shape, dtype, stream) -> Operand:
    from numba import cuda

    if like.kind == "cupy":
        import cupy

        obj = cupy.empty(shape, dtype=dtype)
        return Operand("out", cuda.as_cuda_array(obj, sync=False), "cupy", obj)  # new: nothing to wait for
    if like.kind == "torch":
        import torch

        tdtype = getattr(torch, dtype.name)  # float32, float64, int64 (argmax), uint8 ... (torch's names are NumPy's)
        obj = torch.empty(shape, dtype=tdtype, device=like.original.device)
        ptr = stream_key(stream)
        if ptr != current_stream_ptr(obj):  # torch's allocator must not reuse it before we are done
            obj.record_stream(torch.cuda.ExternalStream(ptr, device=obj.device))
        return Operand("out", cuda.as_cuda_array(obj, sync=False), "torch", obj)
    dev = cuda.device_array(shape, dtype=dtype, stream=stream)
    if like.kind == "numpy":
        return Operand("out", dev, "numpy", None)  # host copy made by finish_result
    return Operand("out", dev, "numba", dev)


def finish_result(out: Operand, stream=0):
    """Hand the result back in the caller's kind (NumPy callers get a host array;
    the copy is complete when this returns)."""
    if out.kind != "numpy":
        return out.original
    if out.original is None:
        host = out.dev.copy_to_host(stream=stream)
    else:
        host = out.dev.copy_to_host(out.original, stream=stream)
    if stream:
        stream.synchronize()
    return host


def numpy_scalar(result, out):
    """A NumPy caller's 0-d result as NumPy's scalar (``np.matmul(v, v)``, ``np.sum(x)``); else ``result``."""
    if out is None and isinstance(result, np.ndarray) and result.shape == ():
        return result[()]
    return result


def byte_order(result, output):
    """A NumPy result in the byte order ``output`` names when it names a dtype, as scipy's (``output=">f4"``:
    big-endian); the kernels write native order."""
    if isinstance(result, np.ndarray) and isinstance(output, (str, type, np.dtype)) \
            and not np.dtype(output).isnative:
        return result.astype(np.dtype(output))
    return result


def as_stream(stream, like=None):
    """A Numba stream (or 0 for the legacy default stream) from what the caller passed.

    ``stream=None`` is the current stream of the framework of ``like`` (the call's first
    array): CuPy's ``cupy.cuda.get_current_stream()``, PyTorch's
    ``torch.cuda.current_stream(like.device)``; Numba's default stream for Numba and NumPy
    arrays.  Otherwise a Numba stream, or a CuPy / PyTorch / cuda.core stream object
    (wrapped with ``cuda.external_stream``, GPU only).
    """
    import numba
    from numba import cuda

    if stream is None:
        ptr = 0 if numba.config.ENABLE_CUDASIM else current_stream_ptr(like)  # the simulator: one stream
        return cuda.external_stream(ptr) if ptr else 0
    if isinstance(stream, numbers.Integral) and not isinstance(stream, (bool, np.bool_)) and stream == 0:
        return 0  # the legacy default stream (a NumPy 0 too; False is not a stream)
    if isinstance(stream, _numba_stream_type()):  # (not any object of Numba's: an event or an array is no stream)
        return stream
    if not numba.config.ENABLE_CUDASIM:
        for attr in ("ptr", "cuda_stream"):  # cupy.cuda.Stream, torch.cuda.Stream
            ptr = getattr(stream, attr, None)
            if isinstance(ptr, int):
                return cuda.external_stream(ptr) if ptr else 0
    raise TypeError(
        f"stream: expected None, a Numba stream, or a CuPy/PyTorch stream; got {describe(stream)}"
    )


def _numba_stream_type() -> type:
    """Numba's stream class: the driver's, or the simulator's."""
    import numba

    if numba.config.ENABLE_CUDASIM:
        from numba.cuda.simulator.api import stream

        return stream
    from numba.cuda.cudadrv.driver import Stream

    return Stream


def current_stream_ptr(like) -> int:
    """The handle of the current stream of ``like``'s framework: CuPy's current stream, PyTorch's
    current stream on the tensor's device; 0 (Numba's default stream) for anything else."""
    mod = type(like).__module__.split(".")[0]
    if mod == "cupy" and _has_cai(like):
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    if mod == "torch" and getattr(like, "is_cuda", False):
        import torch

        return int(torch.cuda.current_stream(like.device).cuda_stream)
    return 0


# ---------------------------------------------------------------------------
# Devices: every array on the current device, or a clear error
# ---------------------------------------------------------------------------


def array_device(x, kind: str):
    """The GPU ordinal ``x`` lives on (None where it cannot be told cheaply)."""
    if kind == "cupy":
        return int(x.device.id)
    if kind == "torch":
        return x.device.index
    if kind == "numba":
        ctx = getattr(getattr(x, "gpu_data", None), "context", None)
        return None if ctx is None else int(ctx.device.id)
    return None


def current_device(kind: str) -> int:
    """The current device as ``kind``'s framework sees it (the one a launch now goes to)."""
    if kind == "cupy":
        import cupy

        return int(cupy.cuda.runtime.getDevice())
    if kind == "torch":
        import torch

        return int(torch.cuda.current_device())
    from numba import cuda

    return int(cuda.get_current_device().id)


_SWITCH = {
    "cupy": "with cupy.cuda.Device({d}):",
    "torch": "with torch.cuda.device({d}):",
}


def device_mismatch(name: str, got, current: int, kind: str) -> str | None:
    """The error message when an array on device ``got`` is passed while ``current`` is the
    current device (None when they agree or ``got`` is unknown)."""
    if got is None or got == current:
        return None
    switch = _SWITCH.get(kind, "with numba.cuda.gpus[{d}]:").format(d=got)
    return (f"{name}: expected an array on the current device (GPU {current}); got one on GPU {got} "
            f"(simt_tiles launches on the current device: call it inside `{switch}`, or move the array)")


def check_device(name: str, x, kind: str) -> None:
    """ValueError naming ``name`` unless ``x`` is on the current device (GPU only)."""
    import numba

    if numba.config.ENABLE_CUDASIM or kind == "numpy":
        return
    msg = device_mismatch(name, array_device(x, kind), current_device(kind), kind)
    if msg:
        raise ValueError(msg)


# ---------------------------------------------------------------------------
# 16-bit floats: bfloat16 and float16 of any array kind, as their uint16 bits
# ---------------------------------------------------------------------------


def dtype_name(x) -> str:
    """'float32', 'bfloat16', 'float16', ... of any array kind: NumPy (``ml_dtypes.bfloat16`` is
    'bfloat16'), CuPy, Numba, PyTorch (torch's names without 'torch.'); a NumPy dtype in either byte order
    ('>f2': 'float16')."""
    dt = getattr(x, "dtype", "")
    if isinstance(dt, np.dtype) and not dt.isnative:
        dt = dt.newbyteorder("=")
    return str(dt).replace("torch.", "")


def operand16(x, name: str, stream, *, ndim: int | None = -1, contiguous: bool = True) -> Operand:
    """A bfloat16/float16 array (:func:`dtype_name` in :data:`HALF_FLOATS`) as a ``uint16`` Numba device
    array of its bits: NumPy copied (any layout), device arrays (PyTorch CUDA tensors, CuPy, Numba) used
    in place, C-contiguous (``contiguous``), else with their own strides (the tensor-core matmul reads
    them).  ``ndim``: the dimensions required (None: at least one; -1: not checked, the caller did)."""
    from numba import cuda

    got = getattr(x, "ndim", None)
    if ndim is None and got is not None and got < 1:
        raise ValueError(f"{name}: expected an array of at least 1 dimension; got 0-D")
    if ndim is not None and ndim >= 0 and got is not None and got != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array; got {got}-D with shape {tuple(x.shape)}")
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        _check_unmasked(x, name)
        host = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))  # native order: its bits as uint16
        return Operand(name, cuda.to_device(host.view(np.uint16), stream=stream), "numpy", x)
    if mod == "torch":
        import torch

        if not x.is_cuda:
            raise TypeError(f"{name}: expected a CUDA tensor; got one on {x.device}")
        _check_no_grad(x, name)
        if contiguous and not x.is_contiguous():
            raise ValueError(f"{name}: expected a C-contiguous tensor; got strides {tuple(x.stride())}")
        check_device(name, x, "torch")
        # ordered after the producer's stream as the float path's operands (_import_cai: its int16 view's
        # interface names the tensor's stream; torch exports no bfloat16)
        return Operand(name, storage_view(_import_cai(x.view(torch.int16), stream), np.uint16), "torch", x)
    numba_array = _is_numba_device_array(x)  # (the simulator's arrays too)
    if mod == "cupy" or numba_array or _has_cai(x):
        kind = "cupy" if mod == "cupy" else "numba"
        check_device(name, x, kind)
        dev = x if numba_array else _import_cai(x, stream)  # ordered after the producer's stream
        if contiguous and (not dev.is_c_contiguous() or _broadcast(dev)):
            raise ValueError(f"{name}: expected a C-contiguous array; got strides {dev.strides}")
        return Operand(name, storage_view(dev, np.uint16), kind, x)
    raise TypeError(f"{name}: expected a NumPy, CuPy, Numba or PyTorch array; got {describe(x)}")


def storage_view(dev, dtype):
    """``dev.view(dtype)``, a dtype of the same itemsize (16-bit results as their storage dtype), 0-d arrays too:
    numba-cuda's ``view`` keeps a 0-d array's strides as a list, on which its own constructor then fails
    ("unhashable type: 'list'", on the GPU only: the simulator's arrays are NumPy's)."""
    if dev.ndim == 0:
        return dev.reshape(1).view(dtype).reshape(())
    return dev.view(dtype)


def out16(out, like: Operand, shape, stream) -> Operand:
    """The result of a 16-bit call (:func:`operand16`'s ``like``): the caller's ``out=`` (the shape —
    ValueError — and the dtype of ``like``'s array — TypeError — exactly), or a new array of ``like``'s
    kind and dtype; as ``uint16`` bits.  The caller checks that it overlaps no input."""
    from numba import cuda

    src = like.original
    if out is not None:
        if getattr(out, "shape", None) is None or not hasattr(out, "dtype"):
            raise TypeError(f"out: expected a NumPy, CuPy, Numba or PyTorch array; got {describe(out)}")
        if tuple(out.shape) != tuple(shape):
            raise ValueError(f"out: expected shape {tuple(shape)}; got {tuple(out.shape)}")
        if dtype_name(out) != dtype_name(src):
            raise TypeError(f"out: expected dtype {dtype_name(src)} (the dtype of {like.name}); got {dtype_name(out)}")
        if isinstance(out, np.ndarray):
            if not (out.flags.c_contiguous and out.flags.writeable):
                raise ValueError(f"out: expected a writeable C-contiguous NumPy array; got strides {out.strides}, "
                                 f"writeable={out.flags.writeable}")
            return Operand("out", cuda.device_array(shape, np.uint16, stream=stream), "numpy", out)
        return operand16(out, "out", stream)
    if like.kind == "torch":  # new arrays: nothing to wait for (as _allocate's)
        import torch

        obj = torch.empty(shape, dtype=src.dtype, device=src.device)
        ptr = stream_key(stream)
        if ptr != current_stream_ptr(obj):  # torch's allocator must not reuse it before we are done
            obj.record_stream(torch.cuda.ExternalStream(ptr, device=obj.device))
        dev = cuda.as_cuda_array(obj.view(torch.int16), sync=False)
        return Operand("out", storage_view(dev, np.uint16), "torch", obj)
    if like.kind == "cupy":
        import cupy

        obj = cupy.empty(shape, dtype=src.dtype)
        return Operand("out", storage_view(cuda.as_cuda_array(obj, sync=False), np.uint16), "cupy", obj)
    if like.kind == "numpy":
        return Operand("out", cuda.device_array(shape, np.uint16, stream=stream), "numpy", None)
    dev = cuda.device_array(shape, src.dtype, stream=stream)  # a Numba float16 result, not its bits
    return Operand("out", storage_view(dev, np.uint16), like.kind, dev)


def finish16(op: Operand, like: Operand, stream):
    """:func:`finish_result` for :func:`out16`'s result: NumPy callers get their dtype back (the bits viewed
    as ``like``'s dtype), the others their array."""
    if op.kind != "numpy":
        return op.original
    host = op.dev.copy_to_host(stream=stream)
    if stream:
        stream.synchronize()
    if op.original is not None:  # a NumPy out= (of a device x too: a torch x's dtype is no NumPy dtype)
        op.original[...] = host.view(op.original.dtype.newbyteorder("="))  # (native bits; a '>f2' out converts)
        return op.original
    return host.view(like.original.dtype.newbyteorder("="))  # the bits are native order (operand16)
