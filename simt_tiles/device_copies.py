"""Small NumPy arguments at µs cost: a device copy of an array's *current values*, cached by content.

Why
    The fast launch path (:mod:`simt_tiles.launch`) replays a recorded call only when every array
    argument is a device array: a NumPy argument sends the call down the checked path every time
    (~400 µs of host time for ``correlate2d(cupy_image, numpy_filter)`` against ~10 µs with the
    filter on the device).  A NumPy filter is what most users pass
    (``w = np.array([[1, 2, 1], ...]) / 16``), so a public function swaps it for a device copy
    (:func:`device_copy`) *before* its planned call, and the call replays like one with a device
    filter.  The swap is the one piece of argument work that runs before the planned call (it
    changes the plan's key), so it sits beside the launch path rather than in a family's argument
    module: a call then enters its family's checked path once (docs/design.md, "The one path of a
    call").  Used by the conv2d functions, which say which calls swap (not those for the rungs that
    compile the filter's values in).  A filter used again comes back as a copy that carries its
    values (:func:`host_values`; ``with_values``): the default rung takes them as kernel parameters,
    as it does a NumPy filter's (3-12% faster on the H200 than staging the copy,
    benchmarks/notes/conv2d.md), and a launch plan keys on that copy's serial
    (:data:`simt_tiles.launch.HOST_VALUES`), so a filter with other values never replays this one's
    parameters.  A filter seen once stays a plain copy (staged from memory): filters that change
    every call replay one plan, as before.

Correctness
    The key is the array's *bytes* (``tobytes()``: its values in C order), shape and dtype, with
    the device and the launch stream's handle: an array changed in place between two calls has
    other bytes, so it gets (or finds) another copy — never a stale one.  The copy is private (no
    caller can write it).  Each copy is uploaded on the stream of the call that first needs it
    (stream-ordered, no synchronisation) and used only by calls on that stream, so no kernel can
    read it before the upload lands.  :data:`MAX_ENTRIES` copies are kept, the least recently used
    dropped; a dropped copy is freed through Numba's deferred deallocation (``cuMemFree``, which
    waits for the device), so a queued kernel never reads freed memory (with Numba's own memory
    manager; an EMM plugin's pool is stream-ordered by that plugin).

What is swapped
    Only a NumPy array of a float dtype and the expected number of dimensions, non-empty, at most
    :data:`MAX_BYTES`, for a call whose leading array (``like``: the image) is a device array (a
    NumPy image takes the checked path anyway, and keeps its filter as it is: kernel parameters).
    Anything else is returned as it is, so the public function's own checks name the argument.

Cost of a hit: the array's bytes, the leading array's kind (per type, once), the current stream's
handle and a dictionary lookup without a lock: 1.7 µs in the simulator on the dev box.  On the H200
the whole ``correlate2d`` call measured 14.0–19.4 µs against 11.7–16.0 µs with a device filter
(benchmarks/notes/conv2d.md), before the per-type kind and the lock-free hit (not re-measured there).
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
from collections import OrderedDict

import numpy as np
from numba import cuda

from . import devices
from .interop import array_device, as_stream
from .launch import HOST_VALUES, array_signature, is_out_of_memory, stream_handle
from .runtime import SIMULATOR

#: device copies kept; the least recently used is dropped
MAX_ENTRIES = 64
#: larger NumPy arrays are not cached (the checked path uploads them per call)
MAX_BYTES = 1 << 20

#: the dtypes swapped: float32 and float64 in native byte order (``dtype.char``)
_FLOATS = "fd"
_CACHE: OrderedDict = OrderedDict()
_LOCK = threading.Lock()
#: each copy's serial (its values' name in a launch plan's key: :data:`simt_tiles.launch.HOST_VALUES`)
_SERIAL = itertools.count(1)
_STATS = {"hit": 0, "miss": 0}


def stats() -> dict:
    """``{"hit", "miss", "entries"}`` since the last :func:`clear`."""
    return {**_STATS, "entries": len(_CACHE)}


def clear() -> None:
    """Drop every cached copy and reset :func:`stats`."""
    with _LOCK:
        _CACHE.clear()
        for k in _STATS:
            _STATS[k] = 0


def _with_values(dev, data: bytes, array):
    """A view of the copy ``dev`` tagged with the values it holds (read-only, from the key's bytes)
    and a new serial (:data:`simt_tiles.launch.HOST_VALUES`)."""
    twin = dev[:]
    setattr(twin, HOST_VALUES, (next(_SERIAL), np.frombuffer(data, array.dtype).reshape(array.shape)))
    return twin


def host_values(array):
    """The values a cached copy holds (a read-only NumPy array), or None for any other array."""
    known = getattr(array, HOST_VALUES, None)
    return None if known is None else known[1]


def _current_handle(like, kind: str) -> int:
    """The handle of the stream ``stream=None`` means for ``like`` (interop.as_stream's rule)."""
    if SIMULATOR:
        return 0
    if kind == "cupy":
        return sys.modules["cupy"].cuda.get_current_stream().ptr
    if kind == "torch":
        raw = getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(like.device.index)
        return sys.modules["torch"].cuda.current_stream(like.device).cuda_stream
    return 0


#: array type -> its kind ("cupy", "torch", "numba"; "" for anything else), from the first instance seen
_KINDS: dict = {}


def _kind(like) -> str:
    t = type(like)
    kind = _KINDS.get(t)
    if kind is None:
        sig = array_signature(like)
        kind = _KINDS[t] = "" if sig is None else sig[0]
    if kind == "torch" and not like.is_cuda:
        return ""
    return kind


@functools.lru_cache(maxsize=None)
def _one_gpu() -> bool:
    """One GPU visible (or the simulator): every device array is on device 0."""
    return SIMULATOR or len(cuda.gpus) == 1


def device_copy(array, like, stream, ndim: int, with_values: bool = False):
    """``array`` as a cached device copy of its current values, or ``array`` itself (the module
    docstring says when).  ``like`` is the call's leading array (its kind and device, and the
    stream ``stream=None`` means); ``stream`` is the caller's argument.  ``with_values``: a copy
    asked for again (a filter that is reused) comes back as a twin that carries its values
    (:func:`host_values`), for a rung that takes them as kernel parameters; a filter seen once
    stays a plain copy, so ever-new filters keep replaying one plan."""
    if type(array) is not np.ndarray or array.ndim != ndim or array.dtype.char not in _FLOATS \
            or not array.dtype.isnative or array.size == 0 or array.nbytes > MAX_BYTES:
        return array
    kind = _kind(like)
    if not kind:
        return array
    handle = _current_handle(like, kind) if stream is None else stream_handle(stream)
    if handle is None:  # not a stream: the public function says so
        return array
    key = (handle, 0 if _one_gpu() else array_device(like, kind), array.dtype.char, array.shape,
           array.tobytes())
    dev = _CACHE.get(key)  # a hit takes no lock: get and move_to_end are atomic under the GIL
    if dev is not None:
        if with_values and getattr(dev, HOST_VALUES, None) is None:
            # reused: a twin (a view of the same memory) that carries the values; the plain copy a
            # caller may hold is never changed (its plan's key read it untagged)
            dev = _CACHE[key] = _with_values(dev, key[-1], array)
        try:
            _CACHE.move_to_end(key)
        except KeyError:  # another thread dropped it meanwhile: it is still a valid copy
            pass
        _STATS["hit"] += 1
        return dev
    host = np.frombuffer(key[-1], array.dtype).reshape(array.shape)  # the values keyed on
    # on the call's stream, asynchronously (0, the legacy stream, too: its stream object; a
    # synchronous copy would wait for the GPU's queued work)
    try:
        with devices.on_device_of(like):  # the copy lives on the call's device (its key says so)
            dev = cuda.to_device(host, stream=as_stream(stream, like) or cuda.default_stream())
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        # no room for a cached copy: the NumPy array goes on as it is, to the checked path, which
        # uploads it for this call (and, short of memory there too, raises OutOfMemoryError naming it)
        return array
    with _LOCK:
        _CACHE[key] = dev
        _STATS["miss"] += 1
        while len(_CACHE) > MAX_ENTRIES:
            _CACHE.popitem(last=False)
    return dev
