"""The fast launch path: a repeated call costs a dictionary lookup, the arrays' pointers and one
driver launch per kernel.

Every public function is wrapped by :func:`planned`.  The first call with a given *signature*
runs the function as written (checks, choice of rung and config, Numba's launch) while the
kernel launches it makes are recorded; the recording becomes a **launch plan**.  A later call
with the same signature replays the plan: it reads the arrays' device pointers, writes them into
the plan's prebuilt argument buffers (Numba's kernel ABI, :func:`flatten`) and launches each
compiled kernel with ``cuLaunchKernel`` on the plan's stream.

The signature is everything a call's checks and choices can depend on: the function; every
non-array argument (type and value; floats by their bits, so -0.0 is not 0.0, nor -NaN NaN, and NaNs of
one bit pattern share a key: variant, config, mode, cval, axis, ...; a tuple of ints, strings, bools or None by its
values and their types; a NumPy dtype or a class, ``output=np.uint8``, by itself); the
keyword names; for each device array its kind
(Numba, CuPy, PyTorch), dtype (byte order included), shape, strides, device, whether its address
is 16-byte aligned (the vectorised rungs choose by it) and, for torch, ``requires_grad``; the
launch stream (``stream=None``: the current stream of the framework of the function's *first
parameter*, however it was passed, as :func:`simt_tiles.interop.as_stream` reads it); for a plan
that holds workspaces, the calling host thread (below).  A call the
checks would reject never makes a plan, so it is rejected again the next time.  Aliasing is
checked on replay from the plan's cached byte extents (:func:`simt_tiles.interop.check_no_overlap`'s
rule).  A call with CuPy arrays launched on another stream than CuPy's current one (their
producer, which the checked path waits for with an event) never replays.  A replay on another
current device, or in a thread with no current CUDA context
(``cuLaunchKernel`` says so before launching anything), runs the checked path instead.

Inputs that share memory (``matmul(x, x)``, overlapping read-only views) replay like any other
call: a kernel argument that lies in several callers' arrays is tied to the first, and the plan
replays only while the others still put it at the same address (else the checked path runs and
records a plan for the new layout); only an ``out=`` overlapping an input is refused.

No plan is made (the call stays on the checked path every time) when a call has NumPy
arguments (they are copied anyway), when the slow path read device data to decide something (a constant-filter rung compiling in the filter's values), when
it had to order the launch after another stream with an event, or when a launch went to another
stream than the call's.  Buffers a recorded call allocated for itself (split-K partials, a
separable filter's intermediate) are held by the plan and reused by its replays, which run in
order on the plan's stream and in the recording thread: such a plan is per host thread, as the
workspaces are (:mod:`simt_tiles._per_stream`), because the thread's other plans use the same
buffers and one plan's lock serialises only its own replays (shared, two threads' launches
interleaved on one buffer: benchmarks/notes/faults.md); a plan without workspaces is every
thread's.  :func:`clear` keeps a captured plan's buffers allocated (a CUDA graph may use them).  A
result made by a replay (``out=None``) comes from the caller's framework as on the checked path
(torch: ``record_stream`` when launched on another stream than torch's current one).

Bounds (issue 36: a stream per request made a plan, and workspaces, per call): at most
:data:`MAX_PLANS` plans (past it the least recently used sixteenth is forgotten, and recording goes
on), and plans on at most ``SIMT_TILES_STREAM_KEYS`` stream groups per device (default 128; a
group is a stream, or a (stream, thread) pair for the plans holding workspaces, counted together;
the group whose latest use is oldest is forgotten, see :mod:`simt_tiles._per_stream`).  A
forgotten plan lets go of its buffers (safe while its launches are queued: Numba defers ``cuMemFree``, which waits for
the device) unless it was recorded or replayed on a capturing stream (``cuStreamIsCapturing``):
those are kept for good in ``_RETIRED``.

CUDA graphs: a call captured on a stream records (or replays) a plan; its first call on that
stream may allocate a workspace, which recording allows by relaxing the thread's capture mode.
With ``SIMT_TILES_FAST_LAUNCH=0`` nothing is relaxed or held: a workspace first needed inside a
global-mode capture (``torch.cuda.graph``'s default) fails the capture with a CUDA error (warm up
on the capture stream first), and a workspace later replaced (a larger problem on the same
stream) is freed while the graph still writes it.  Capture with plans on.

Out of GPU memory: numba-cuda's ``CudaAPIError`` (``CUDA_ERROR_OUT_OF_MEMORY``) from any allocation
a public function makes (its result, a device copy of a NumPy argument, a workspace) becomes an
:class:`OutOfMemoryError` (a ``MemoryError`` and still a ``CudaAPIError``) naming the function,
what it was allocating and the bytes asked.  The allocations come before the launches that write
the caller's arrays, so ``out=`` is untouched, and a call that raises records no plan.

In the simulator plans are off unless ``SIMT_TILES_FAST_LAUNCH=1`` (tests): a replay then
rebuilds the arrays from the recorded offsets and launches through the simulator, which checks
the plan's bookkeeping everywhere but the driver call.  On a GPU they are on unless
``SIMT_TILES_FAST_LAUNCH=0``.  :func:`clear` forgets every plan (e.g. after tuning changed
what ``config=None`` means, or after changing a rung's presets or a family's default).
"""

from __future__ import annotations

import ctypes
import functools
import heapq
import inspect
import itertools
import struct
import threading

import numpy as np
from numba import cuda
from numba.cuda.cudadrv import driver as _driver

from . import _per_stream, devices
from ._options import env_flag
from ._recording import no_plan, state as _tls
from .interop import Layout, layout_of
from .runtime import SIMULATOR, TileConfig

__all__ = ["planned", "clear", "stats", "enabled", "set_enabled", "no_plan", "flatten", "ctype_args",
           "stream_handle", "array_signature", "OutOfMemoryError", "is_out_of_memory"]

_ENABLED = env_flag("SIMT_TILES_FAST_LAUNCH", default=not SIMULATOR)
#: plans by signature, at most this many: past it the least recently used sixteenth is forgotten
#: (a long-running process with changing shapes keeps planning)
MAX_PLANS = 4096
_PLANS: dict = {}
#: stream group (device, stream handle; (2, thread) for the per-thread default stream; (handle, thread)
#: for a plan holding workspaces, which is its recording thread's) → its plans'
#: keys: at most ``_per_stream.LIMIT`` groups per device (SIMT_TILES_STREAM_KEYS), the least
#: recently used group forgotten past it (a stream per request would make a plan per call, each
#: holding its workspaces)
_GROUPS: dict = {}
#: recording and forgetting plans (a replay only reads ``_PLANS`` and stamps its plan's ``used``)
_LOCK = threading.Lock()
#: recency stamps (``next`` on a count is atomic): a plan's ``used`` is its last record or replay
_TICK = itertools.count()
_COUNTS = {"hit": 0, "recorded": 0, "refused": 0, "evicted": 0}
_MISS = object()
_SCALARS = frozenset({int, float, str, bool, type(None)})
#: what a tuple argument may hold and still be part of a signature (floats not: -0.0 == 0.0)
_TUPLE_ITEMS = frozenset({int, str, bool, type(None)})


def enabled() -> bool:
    return _ENABLED


def set_enabled(on: bool) -> bool:
    """Turn plans on or off (the previous setting is returned); off forgets every plan."""
    global _ENABLED
    before, _ENABLED = _ENABLED, bool(on)
    if not on:
        clear()
    return before


#: buffers that captured or forgotten plans held (split-K partials, scratch), by id: a CUDA graph
#: captured from a plan's launches keeps using them, so they are never freed.  A plan is known to
#: be captured when it was recorded or replayed on a capturing stream (``_Plan.captured``): its
#: buffers are retired then.  A plan forgotten (evicted, or :func:`clear`) not captured just lets go of them
#: (safe against its queued launches: see :mod:`simt_tiles._per_stream`).
_RETIRED: dict = {}


def clear() -> None:
    """Forget every plan (the next call of each signature takes the checked path again) and
    reset :func:`stats`.  The buffers of plans captured in a graph stay allocated (retired when captured); the
    others are let go of, as an evicted plan's (autotune clears after each problem it stores: kept, they
    piled up)."""
    with _LOCK:
        gone = list(_PLANS.values())
        _PLANS.clear()
        _GROUPS.clear()
    for k in _COUNTS:
        _COUNTS[k] = 0
    del gone  # (outside the lock: a finalizer may flush Numba's pending cuMemFree)


def stats() -> dict:
    """``{"hit", "recorded", "refused", "evicted", "plans"}``: replays, plans made, recordings
    refused, plans forgotten by the bounds (:data:`MAX_PLANS`, stream groups), plans held."""
    return {**_COUNTS, "plans": len(_PLANS)}


def _add(key, plan, group) -> list:
    """Keep ``plan`` (under ``_LOCK``), forgetting what the bounds say; the plans forgotten (let
    go of by the caller, outside the lock: a finalizer may flush Numba's pending cuMemFree)."""
    replaced = [_PLANS.pop(key)] if key in _PLANS else []  # (another thread recorded it meanwhile)
    _PLANS[key] = plan
    gone = []
    keys = _GROUPS.get(group)
    if keys is None:
        keys = _GROUPS[group] = set()
        mine = [g for g in _GROUPS if g[0] == group[0] and g != group]  # the device's other groups
        if len(mine) >= _per_stream.LIMIT:  # the least recently used: its latest plan is the oldest
            old = min(mine, key=lambda g: max(_PLANS[k].used for k in _GROUPS[g]))
            gone += [_PLANS.pop(k) for k in _GROUPS.pop(old)]
    keys.add(key)
    if len(_PLANS) > MAX_PLANS:
        for k in heapq.nsmallest(len(_PLANS) - MAX_PLANS + MAX_PLANS // 16, _PLANS, key=lambda k: _PLANS[k].used):
            gone.append(_PLANS.pop(k))
            g = _GROUPS[gone[-1].group]
            g.discard(k)
            if not g:
                del _GROUPS[gone[-1].group]
    _COUNTS["evicted"] += len(gone)
    return gone + replaced


def _capturing(handle: int) -> bool:
    """Whether stream ``handle`` is capturing a CUDA graph (never in the simulator; the legacy
    default stream cannot capture)."""
    if SIMULATOR or not handle:
        return False
    f = _c_function("cuStreamIsCapturing")
    if f is None:
        drv = _drv()
        err, status = drv.cuStreamIsCapturing(drv.CUstream(handle))
        return err == _SUCCESS and int(status) != 0
    status = ctypes.c_int()
    return f(ctypes.c_void_p(handle), ctypes.byref(status)) == 0 and status.value != 0  # ACTIVE or INVALIDATED


# ---------------------------------------------------------------------------
# Signatures: what a call's checks and choices depend on, read cheaply
# ---------------------------------------------------------------------------


def _torch_sig(x):
    ptr, cuda_ = x.data_ptr(), x.is_cuda
    dev = (x.get_device() if _MULTI_GPU else 0) if cuda_ else -1  # -1: a CPU tensor (the checked path)
    return ("torch", x.dtype, x.shape, x.stride(), dev, x.requires_grad, ptr & 15), ptr, dev


def _cupy_sig(x):
    ptr = x.data.ptr
    dev = x.device.id if _MULTI_GPU else 0
    return ("cupy", x.dtype, x.shape, x.strides, dev, ptr & 15), ptr, dev


def _numba_sig(x):
    # what ``device_ctypes_pointer.value`` reads (``c_size_t(int(gpu_data.device_pointer))``), without
    # the two properties and the ctypes object: 0.3 µs instead of 1.5 on the dev box, per array
    try:
        ptr = int(x.gpu_data.device_pointer)
    except (AttributeError, TypeError):  # no gpu_data (Numba then says 0), or a pointer of another kind
        ptr = x.device_ctypes_pointer.value or 0
    dev = x.gpu_data.context.device.id if _MULTI_GPU else 0
    return ("numba", x.dtype, x.shape, x.strides, dev, ptr & 15, _values_serial(x)), ptr, dev


def _sim_sig(x):
    ptr = x._ary.__array_interface__["data"][0]
    return ("numba", x.dtype, x.shape, x.strides, 0, ptr & 15, _values_serial(x)), ptr, 0


#: the attribute a private device copy whose values the host knows carries: ``(serial, host array)``
#: (:mod:`simt_tiles.device_copies`); a rung may then take those values as kernel parameters, so the
#: copy's serial is part of a plan's key (another filter's copy, same shape: another plan)
HOST_VALUES = "_simt_tiles_host_values"


def _values_serial(x):
    known = getattr(x, HOST_VALUES, None)
    return None if known is None else known[0]


#: more than one GPU visible: arrays' devices are read and compared with the current one on every
#: call; with one, every device array is on it (set when the first call is made, GPU only)
_MULTI_GPU = True


_SIGS: dict = {}


def _sig_function(t):
    """The signature reader for arrays of type ``t``, or None (not a fast-path array)."""
    try:
        return _SIGS[t]
    except KeyError:
        pass
    mod = t.__module__.split(".")[0]
    f = None
    if getattr(t, "__cuda_ndarray__", False):
        f = ("numba", _sim_sig if SIMULATOR else _numba_sig)
    elif mod == "cupy" and t.__name__ == "ndarray":
        f = ("cupy", _cupy_sig)
    elif mod == "torch":
        import torch

        if issubclass(t, torch.Tensor):
            f = ("torch", _torch_sig)
    _SIGS[t] = f
    return f


def array_signature(x):
    """``(kind, signature, pointer, device)`` of a fast-path array, or None."""
    f = _sig_function(type(x))
    if f is None:
        return None
    return (f[0], *f[1](x))


def _current_stream(kind: str, dev: int) -> int:
    """The handle of the current stream of ``kind``'s framework (0: the legacy default stream)."""
    return 0 if kind == "numba" else _CURRENT[kind](dev)


def _framework_streams() -> dict:
    """``kind → f(device) → current stream handle`` for the frameworks already imported."""
    import sys

    out = {}
    if "cupy" in sys.modules:
        get = sys.modules["cupy"].cuda.get_current_stream
        out["cupy"] = lambda dev: get().ptr
    if "torch" in sys.modules:
        raw = getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None)
        if raw is None:  # pragma: no cover - an older torch
            cur = sys.modules["torch"].cuda.current_stream
            out["torch"] = lambda dev: cur(dev).cuda_stream
        else:
            out["torch"] = raw
    return out


class _Current(dict):
    def __missing__(self, kind):
        found = _framework_streams()
        self.update(found)
        return found.get(kind)


_CURRENT = _Current()


def stream_handle(stream) -> int | None:
    """The CUDA handle of a caller's stream object (Numba, CuPy, PyTorch, cuda.core; 0 or None for
    the default stream), or None when it is not one of those."""
    if stream is None or (type(stream) is int and stream == 0):
        return 0
    for attr in ("ptr", "cuda_stream"):  # cupy.cuda.Stream, torch.cuda.Stream
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    h = getattr(stream, "handle", None)  # a Numba or cuda.core stream
    if h is None:
        return None
    try:
        return int(h.value if isinstance(h, ctypes.c_void_p) else h) or 0
    except (TypeError, ValueError):
        return None


def _current_device() -> int:
    """The device of the calling thread's current CUDA context (-1: none; 0 with one GPU)."""
    if SIMULATOR or not _MULTI_GPU:
        return 0
    f = _c_function("cuCtxGetDevice")
    if f is None:
        err, dev = _drv().cuCtxGetDevice()
        return int(dev) if err == _SUCCESS else -1
    dev = ctypes.c_int()
    return dev.value if f(ctypes.byref(dev)) == 0 else -1


@functools.lru_cache(maxsize=None)
def _drv():
    from cuda.bindings import driver

    return driver


_SUCCESS = None if SIMULATOR else _drv().CUresult.CUDA_SUCCESS


@functools.lru_cache(maxsize=None)
def _setup() -> None:
    """Once, at the first call: how many GPUs this process sees."""
    global _MULTI_GPU
    _MULTI_GPU = not SIMULATOR and len(cuda.gpus) > 1


@functools.lru_cache(maxsize=None)
def _c_function(name: str):
    """A driver function through ctypes (fewer conversions per call than cuda.bindings' wrapper;
    no argtypes: callers pass ctypes objects, half the cost of converting Python ints), or None
    where the library cannot be opened by that name."""
    try:
        f = getattr(ctypes.CDLL("libcuda.so.1"), name)
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_int
    return f


def _c_launch():
    """``cuLaunchKernel`` through ctypes, or None (then cuda.bindings' wrapper)."""
    return _c_function("cuLaunchKernel")


# ---------------------------------------------------------------------------
# Out of GPU memory: one clear error for every public function
# ---------------------------------------------------------------------------

_CudaAPIError = _driver.CudaAPIError  # (the simulator's own class in the simulator)
#: CUresult CUDA_ERROR_OUT_OF_MEMORY
_CUDA_ERROR_OUT_OF_MEMORY = 2


class OutOfMemoryError(MemoryError, _CudaAPIError):
    """A public function could not allocate GPU memory: the message names the function, what it
    was allocating (the result, a device copy of a NumPy argument, a workspace), the bytes asked
    and what to do.  A ``MemoryError`` (as CuPy's) and still numba-cuda's ``CudaAPIError`` (code
    ``CUDA_ERROR_OUT_OF_MEMORY``, the original error is its ``__cause__``).  Raised before the
    call wrote anything the caller owns: ``out=`` is untouched, no launch plan was recorded, and
    the same call succeeds once memory is free (``tests/test_faults.py``)."""

    def __init__(self, message: str, function: str = "", what: str = "", nbytes: int | None = None):
        Exception.__init__(self, message)
        self.code, self.msg = _CUDA_ERROR_OUT_OF_MEMORY, message
        self.function, self.what, self.nbytes = function, what, nbytes

    def __str__(self) -> str:
        return self.msg

    def __reduce__(self):
        return type(self), (self.msg, self.function, self.what, self.nbytes)


def is_out_of_memory(exc) -> bool:
    """Whether ``exc`` is numba-cuda's error for a failed device allocation (CUDA_ERROR_OUT_OF_MEMORY)."""
    if not isinstance(exc, _CudaAPIError):
        return False
    code = getattr(exc, "code", None)
    if code is None and exc.args:
        code = exc.args[0]
    try:
        return int(code) == _CUDA_ERROR_OUT_OF_MEMORY
    except (TypeError, ValueError):
        return "OUT_OF_MEMORY" in str(exc)


#: project functions that allocate → what they allocate (``{}``: a local of that frame)
_ALLOCATING = {
    "device_operand": "a device copy of the NumPy argument {name!r}",
    "prepare_out": "the device buffer for a NumPy out=",
    "_allocate": "the result",
    "_weights_argument": "a device copy of the filter",
    "bind_runtime_weights": "a device copy of the filter",
    "workspace": "a workspace{label}",
    "replay": "the result (a replayed launch plan)",
    "run": "a scratch buffer of {__qualname__}",
}


def _allocation_of(tb) -> tuple[str, int | None]:
    """What the failed allocation was (from the innermost simt_tiles frame of the traceback) and
    its bytes (numba-cuda's ``memalloc(size)``, else ``device_array(shape, dtype)`` or
    ``to_device(obj)``), as well as a traceback can say."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    what, nbytes = "", None
    for f in reversed(frames):  # innermost first
        loc, name = f.f_locals, f.f_code.co_name
        module = f.f_globals.get("__name__", "")
        if nbytes is None and not module.startswith("simt_tiles"):
            for key in ("bytesize", "size"):
                if name == "memalloc" and isinstance(loc.get(key), int):
                    nbytes = loc[key]
            if nbytes is None and name == "device_array" and "shape" in loc:
                try:
                    shape = (loc["shape"],) if isinstance(loc["shape"], int) else loc["shape"]
                    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(loc.get("dtype", np.float64)).itemsize
                except (TypeError, ValueError):
                    pass
            if nbytes is None and name == "to_device" and hasattr(loc.get("obj"), "nbytes"):
                nbytes = int(loc["obj"].nbytes)
        if module.startswith("simt_tiles") and not what:
            text = _ALLOCATING.get(name)
            where = f"{module}.{getattr(f.f_code, 'co_qualname', name)}"
            if text is None:
                what = where
            else:
                label = next((loc[k] for k in ("name", "tag") if isinstance(loc.get(k), str) and loc[k]), "")
                fields = {"name": loc.get("name") if isinstance(loc.get("name"), str) else "",
                          "label": f" ({label})" if label else "",
                          "__qualname__": type(loc["self"]).__qualname__ if "self" in loc else where}
                what = f"{text.format(**fields)} in {module}"
            break
    return what or "a device buffer", nbytes


def _device_memory() -> str:
    if SIMULATOR:
        return ""
    try:
        free, total = cuda.current_context().get_memory_info()
    except Exception:  # noqa: BLE001 - a context in trouble: the message goes without it
        return ""
    return f"; the GPU has {free / 2**20:.0f} MiB free of {total / 2**20:.0f} MiB"


def out_of_memory(function: str, exc) -> OutOfMemoryError:
    """The :class:`OutOfMemoryError` for numba-cuda's out-of-memory ``exc`` in ``function``."""
    what, nbytes = _allocation_of(exc.__traceback__)
    size = "" if nbytes is None else f" ({nbytes} bytes{f', {nbytes / 2**20:.1f} MiB' if nbytes >= 2**20 else ''})"
    return OutOfMemoryError(
        f"simt_tiles.{function}: out of GPU memory allocating {what}{size}{_device_memory()}. Nothing was "
        "written to out= and no launch plan was kept: free device memory (delete arrays you no longer "
        "need; CuPy: cupy.get_default_memory_pool().free_all_blocks(); PyTorch: torch.cuda.empty_cache()) "
        "or make the problem smaller, then call again", function, what, nbytes)


# ---------------------------------------------------------------------------
# The decorator
# ---------------------------------------------------------------------------


def planned(fn):
    """Wrap a public function (or the planned helper ``_name`` a public ``name`` runs after its own
    argument work) with the fast launch path (see the module docstring)."""
    ident = f"{fn.__module__}.{fn.__qualname__}"
    #: the parameter whose framework's current stream ``stream=None`` means (``as_stream(stream,
    #: <first parameter>)`` in every public function), however the caller passes it
    primary = next(iter(inspect.signature(fn).parameters))

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            if not _ENABLED or getattr(_tls, "rec", None) is not None:
                return fn(*args, **kwargs)
            if _MULTI_GPU:
                _setup()
            key = [ident, len(args)]
            append = key.append
            arrays, ptrs = [], []
            dev0, cupy = None, False
            for v in (*args, *kwargs.values()) if kwargs else args:
                t = type(v)
                if t in _SCALARS:
                    append(t)
                    append(struct.pack("<d", v) if t is float else v)  # by its bits: -0.0 is not 0.0, nor -NaN NaN
                    continue
                f = _SIGS.get(t) or _sig_function(t)
                if f is not None:
                    sig, ptr, dev = f[1](v)
                    if dev0 is None:
                        dev0 = dev
                    elif dev != dev0:
                        return fn(*args, **kwargs)  # arrays on two devices: the checked path says so
                    append(sig)
                    if f[0] == "cupy":
                        cupy = True
                    arrays.append(v)
                    ptrs.append(ptr)
                elif isinstance(v, TileConfig):
                    append(t)
                    append(v)
                elif t is tuple and all(type(i) in _TUPLE_ITEMS for i in v):
                    append(t)  # axis=(0, 2), stride=(2, 2): the values, and their types (True == 1)
                    append(v)
                    append(tuple(map(type, v)))
                elif isinstance(v, np.generic):
                    append(t)
                    append(v.tobytes())  # the bits: -0.0 and NaN as for floats
                elif t is type or isinstance(v, np.dtype):
                    append(t)  # output=np.uint8, output=np.dtype("uint8"): a class or a dtype, by itself
                    append(v)
                elif "stream" in kwargs and v is kwargs["stream"]:
                    if stream_handle(v) is None:
                        return fn(*args, **kwargs)  # not a stream: the checked path says so
                else:  # NumPy arrays (copied anyway), anything unhashable
                    return fn(*args, **kwargs)
            if dev0 is None or dev0 < 0:  # no device array (or a CPU tensor): the checked path
                return fn(*args, **kwargs)
            if kwargs:
                key.extend(kwargs)  # keyword names, in the caller's order
            stream = kwargs.get("stream")
            lead = None
            if stream is None:  # the current stream of the primary array's framework
                f = _SIGS.get(type(args[0] if args else kwargs.get(primary)))
                if f is None:
                    return fn(*args, **kwargs)
                lead = f[0]
                handle = 0 if lead == "numba" else _CURRENT[lead](dev0)
            else:
                handle = stream_handle(stream)
            if cupy and lead != "cupy" and _CURRENT["cupy"](dev0) != handle:
                # a CuPy array's producer is CuPy's current stream: the checked path makes the launch
                # wait for it (an event) and makes no plan — so every such call takes that path
                return fn(*args, **kwargs)
            # the per-thread default stream (handle 2) is another stream in every thread: so is the plan
            append(handle if handle != 2 else (2, threading.get_ident()))
            key = tuple(key)
            plan = _PLANS.get(key)
            if plan is None:  # a plan holding workspaces is the recording thread's (_record)
                plan = _PLANS.get((key, threading.get_ident()))
            if plan is not None:
                plan.used = next(_TICK)
                if not plan.captured and _capturing(handle):  # (a cheap driver query, GPU only)
                    plan.capture()
                result = plan.replay(arrays, ptrs)
                if result is not _MISS:
                    _COUNTS["hit"] += 1
                    return result
            return _record(fn, key, args, kwargs, arrays, ptrs, dev0, handle, (dev0, key[-1]))
        except _CudaAPIError as exc:  # (a try costs nothing until it raises: Python 3.11+)
            if isinstance(exc, OutOfMemoryError) or not is_out_of_memory(exc):
                raise
            raise out_of_memory(public, exc) from exc

    # the name the caller knows: a planned helper ``_correlate2d`` runs for the public ``correlate2d``
    public = fn.__name__.lstrip("_")
    call.__wrapped_planned__ = fn
    return devices.following(call)  # on its arrays' device, plans included (simt_tiles.devices)


class _Recording:
    def __init__(self):
        self.launches = []  # (kernel, args, grid, block, stream handle, dynamic shared bytes)
        self.refused = None


def _record(fn, key, args, kwargs, arrays, ptrs, dev, handle, group):
    rec = _tls.rec = _Recording()
    try:
        with _relaxed_capture(handle) as capture:
            result = fn(*args, **kwargs)
    finally:
        _tls.rec = None
    if rec.refused is None:
        try:
            plan = _Plan(rec, arrays, ptrs, result, handle, dev)
        except _Refuse as exc:
            rec.refused = str(exc)
        else:
            if plan.held:  # its workspaces are this thread's (_per_stream), which its other calls use too:
                # the plan is this thread's (the module docstring: Buffers)
                key, group = (key, threading.get_ident()), (dev, (group[1], threading.get_ident()))
            plan.group = group
            if capture.active:
                plan.capture()
            with _LOCK:
                gone = _add(key, plan, group)
            del gone  # (outside the lock)
            _COUNTS["recorded"] += 1
    if rec.refused is not None:
        _COUNTS["refused"] += 1
    return result


class _relaxed_capture:
    """While the calling thread captures a CUDA graph, the checked path's allocations (split-K
    partials and other scratch buffers, made once per stream and kept) are allowed: the thread's
    capture mode is relaxed around the call (what PyTorch's allocator does for its own)."""

    def __init__(self, handle: int):
        self.stream, self.old, self.active = handle, None, False

    def __enter__(self):
        if SIMULATOR:
            return self
        drv = _drv()
        err, status = drv.cuStreamIsCapturing(drv.CUstream(self.stream))
        if err == _SUCCESS and status == drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE:
            self.active = True
            err, self.old = drv.cuThreadExchangeStreamCaptureMode(
                drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            _drv().cuThreadExchangeStreamCaptureMode(self.old)


# ---------------------------------------------------------------------------
# Recording Numba's launches
# ---------------------------------------------------------------------------


def _on_launch(kernel, args, grid, block, stream, shared):
    rec = getattr(_tls, "rec", None)
    if rec is not None:
        h = stream_handle(stream)
        rec.launches.append((kernel, tuple(args), _dim3(grid), _dim3(block), h, int(shared or 0)))


def _dim3(d):
    d = (d,) if isinstance(d, int) else tuple(int(v) for v in d)
    return d + (1,) * (3 - len(d))


def _install_hook():
    """Record Numba's launches (once per process): ``_Kernel.launch`` on a GPU, the simulator's
    kernel call in the simulator; nothing is recorded unless a call is being recorded."""
    if SIMULATOR:
        from numba.cuda.simulator.kernel import FakeCUDAKernel as cls
    else:
        from numba.cuda.dispatcher import _Kernel as cls
    if getattr(cls, "_simt_tiles_recorded", False):
        return
    if SIMULATOR:
        original = cls.__call__

        def __call__(self, *args):
            _on_launch(self, args, self.grid_dim, self.block_dim, self.stream, self.dynshared_size)
            return original(self, *args)

        cls.__call__ = __call__
    else:
        original = cls.launch

        def launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
            _on_launch(self, args, griddim, blockdim, stream, sharedmem)
            return original(self, args, griddim, blockdim, stream, sharedmem)

        cls.launch = launch
    cls._simt_tiles_recorded = True


_install_hook()


# ---------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------


class _Refuse(Exception):
    pass


def _ptr_of(x) -> int:
    return layout_of(x).ptr


def _sources(ptr, spans) -> list:
    """Which of ``spans`` (``[lo, hi)`` per source) hold ``ptr``: their indices, in order."""
    return [i for i, (lo, hi) in enumerate(spans) if lo <= ptr < hi or ptr == lo]


class _Plan:
    """A recorded call: its launches with every array argument tied to a caller's array (by
    position, plus a byte offset), to the new result, or to a buffer the plan holds."""

    same = ()  # (see __init__) none unless recorded with inputs sharing memory
    #: recorded or replayed on a capturing stream: a CUDA graph may use ``held`` (retired then)
    captured = False
    group = None  # (device, stream) its stream group (``_GROUPS``)

    def __init__(self, rec, arrays, ptrs, result, handle, dev):
        if not rec.launches:
            raise _Refuse("no launch")
        self.used = next(_TICK)
        self.key_stream = handle
        self.device = dev
        self.lock = threading.Lock()
        spans = [layout_of(a).span() for a in arrays]
        for (lo, hi), p in zip(spans, ptrs):
            if lo != p:
                raise _Refuse("negative strides")
        #: the caller's arrays as operands for the aliasing check on replay (out is an argument)
        self.extents = [hi - lo for lo, hi in spans]
        self.result_arg = next((i for i, a in enumerate(arrays) if a is result), None)
        self.others = tuple((i, e) for i, e in enumerate(self.extents) if i != self.result_arg)
        self.recipe = None
        if self.result_arg is None:
            self.recipe = _recipe(result, handle)
            spans = [*spans, layout_of(result).span()]
        self.launches = []
        self.held = []  # the buffers the recorded call made for itself (workspaces)
        #: ((i, off_i), (j, off_j)): an argument found in two callers' arrays (inputs sharing
        #: memory) is tied to i; a replay needs ptrs[i] + off_i == ptrs[j] + off_j
        self.same = set()
        for kernel, args, grid, block, stream, shared in rec.launches:
            if stream != self.key_stream:
                raise _Refuse("a launch on another stream")
            template = []
            for v in args:
                if _is_device_array(v):
                    lay = layout_of(v)
                    hits = _sources(lay.ptr, spans)
                    end = lay.span()[1]  # tied to the first array holding all of it (else the first)
                    hits.sort(key=lambda i: spans[i][1] < end)
                    src = hits[0] if hits else None
                    off = 0 if src is None else lay.ptr - spans[src][0]
                    self.same.update(((src, off), (j, lay.ptr - spans[j][0])) for j in hits[1:])
                    template.append(("array", src, off, lay, v if src is None else None))
                    if src is None:
                        self.held.append(v)
                elif isinstance(v, np.ndarray):
                    raise _Refuse("a host array argument")
                else:
                    template.append(("value", v))
            self.launches.append(_LAUNCH(kernel, template, grid, block, shared, self.key_stream))

    def capture(self) -> None:
        """A CUDA graph may now use the buffers this plan holds: they are kept for good (before the
        plan's launches are captured, so that a plan forgotten meanwhile cannot free them)."""
        self.captured = True
        for buf in self.held:
            _RETIRED[id(buf)] = buf

    def replay(self, arrays, ptrs):
        if _MULTI_GPU and _current_device() != self.device:
            return _MISS
        out = self.result_arg
        for (i, a), (j, b) in self.same:  # recorded with inputs sharing memory: still so?
            if ptrs[i] + a != ptrs[j] + b:
                return _MISS  # another layout: the checked path records a plan for it
        if out is not None:  # out=: the aliasing check, from the cached extents
            lo = ptrs[out]
            hi = lo + self.extents[out]
            if hi > lo:
                for i, extent in self.others:
                    p = ptrs[i]
                    if lo < p + extent and p < hi:
                        return _MISS  # the checked path raises, naming out
            result = arrays[out]
        else:
            result = self.recipe()
            arrays = [*arrays, result]
            ptrs = [*ptrs, _ptr_of(result) if SIMULATOR else array_signature(result)[2]]
        with self.lock:
            for launch in self.launches:
                if launch(arrays, ptrs) is _MISS:
                    return _MISS  # (only ever the first launch: the checked path runs instead)
        return result


def _is_device_array(v) -> bool:
    return bool(getattr(v, "__cuda_ndarray__", False)) or hasattr(v, "__cuda_array_interface__")


def _recipe(result, stream: int):
    """A function making a new result like ``result`` (the kind ``out=None`` gives)."""
    sig = array_signature(result)
    if sig is None:
        raise _Refuse(f"a result of type {type(result).__name__}")
    kind = sig[0]
    shape, dtype = tuple(result.shape), result.dtype
    if kind == "cupy":
        import cupy

        return functools.partial(cupy.empty, shape, dtype)
    if kind == "torch":
        import torch

        empty = functools.partial(torch.empty, shape, dtype=dtype, device=result.device)
        dev = result.device.index or 0
        ours = torch.cuda.ExternalStream(stream, device=result.device) if stream else None

        def torch_result():
            # as the checked path: torch's allocator made it on torch's current stream; launched on
            # another, the tensor must not be reused before that stream is past our kernels
            obj = empty()
            if stream != _CURRENT["torch"](dev):
                obj.record_stream(ours if ours is not None else torch.cuda.default_stream(result.device))
            return obj

        return torch_result
    return functools.partial(cuda.device_array, shape, dtype)


# ---------------------------------------------------------------------------
# Numba's kernel ABI
# ---------------------------------------------------------------------------


def flatten(types, values, slots=None) -> list:
    """The kernel parameters Numba passes for ``values`` of Numba ``types`` (what
    ``numba.cuda.dispatcher._Kernel._prepare_args`` makes, in order): an array is
    ``meminfo, parent, nitems, itemsize, data, *shape, *strides`` (Python ints), an integer or
    float the ctypes value of its type, a boolean itself; tuples are flattened.  ``slots``, if
    given, receives the index of each array's ``data`` parameter."""
    from numba import types as nt

    out: list = []

    def add(ty, v):
        if isinstance(ty, nt.Array):
            if slots is not None:
                slots.append(len(out) + 4)
            lay = v if isinstance(v, Layout) else layout_of(v)
            out.extend((0, 0, int(np.prod(lay.shape, dtype=np.int64)), lay.dtype.itemsize, lay.ptr,
                        *lay.shape, *lay.strides))
        elif isinstance(ty, nt.Integer):
            out.append(getattr(ctypes, f"c_{ty}")(v))
        elif ty == nt.float64:
            out.append(ctypes.c_double(v))
        elif ty == nt.float32:
            out.append(ctypes.c_float(v))
        elif ty == nt.boolean:
            out.append(v)
        elif isinstance(ty, nt.BaseTuple):
            for t, x in zip(ty, v):
                add(t, x)
        else:
            raise _Refuse(f"a parameter of type {ty}")

    for ty, v in zip(types, values):
        add(ty, v)
    return out


def ctype_args(flat) -> list:
    """``flatten``'s parameters as ctypes objects, as cuda.core's launch packs them: a Python int
    is an ``intptr_t``, a bool a C ``bool``, a ctypes value itself."""
    objs = []
    for v in flat:
        if isinstance(v, bool):
            objs.append(ctypes.c_bool(v))
        elif isinstance(v, int):
            objs.append(ctypes.c_ssize_t(v))
        else:
            objs.append(type(v)(v.value))
    return objs


#: cuLaunchKernel's CUDA_ERROR_INVALID_CONTEXT: a thread with no current context (a new thread
#: whose framework has not made one current yet) — the checked path sets it up
_INVALID_CONTEXT = 201


class GpuLaunch:
    """One kernel of a plan: its function handle, geometry, stream and a prebuilt parameter buffer
    whose ``data`` pointers are rewritten per call; launched with the driver's ``cuLaunchKernel``
    (ctypes, every argument a prebuilt ctypes object: no conversion per call)."""

    def __init__(self, kernel, template, grid, block, shared, stream: int):
        if kernel.debug or kernel.cooperative or kernel.extensions:
            raise _Refuse("a debug, cooperative or extended kernel")
        handle = int(kernel._codelibrary.get_cufunc().handle)  # a CUkernel, launched as a CUfunction
        self.build(kernel.argument_types, template, handle, grid, block, shared, stream)
        self.kernel = kernel  # its module stays loaded while the plan lives

    def build(self, types, template, handle: int, grid, block, shared: int, stream: int) -> None:
        values = [t[3] if t[0] == "array" else t[1] for t in template]
        slots: list = []
        self.objs = ctype_args(flatten(types, values, slots))
        self.keep = [t[4] for t in template if t[0] == "array" and t[4] is not None]  # buffers it holds
        arrays = [t for t in template if t[0] == "array"]
        self.patch = tuple((self.objs[s], t[1], t[2]) for s, t in zip(slots, arrays) if t[1] is not None)
        self.params = (ctypes.c_void_p * len(self.objs))(*(ctypes.addressof(o) for o in self.objs))
        self.c_launch = _c_launch()
        if self.c_launch is not None:
            u = ctypes.c_uint
            self.args = (ctypes.c_void_p(handle), *map(u, grid), *map(u, block), u(shared),
                         ctypes.c_void_p(stream), self.params, None)
        else:
            drv = _drv()
            self.bindings_launch = drv.cuLaunchKernel
            self.args = (drv.CUfunction(handle), *grid, *block, shared, drv.CUstream(stream),
                         ctypes.addressof(self.params), 0)

    def __call__(self, arrays, ptrs):
        for obj, src, off in self.patch:
            obj.value = ptrs[src] + off
        if self.c_launch is not None:
            err = self.c_launch(*self.args)
            if not err:
                return None
        else:
            err, = self.bindings_launch(*self.args)
            if err == _SUCCESS:
                return None
            err = int(err)
        if err == _INVALID_CONTEXT:
            return _MISS
        raise RuntimeError(f"cuLaunchKernel failed: CUresult {err!r} (simt_tiles' fast launch path; "
                           "SIMT_TILES_FAST_LAUNCH=0 turns it off)")


class SimLaunch:
    """One kernel of a plan in the simulator: the arrays rebuilt as views of the caller's."""

    def __init__(self, kernel, template, grid, block, shared, stream):
        self.kernel, self.template, self.dims = kernel, template, (grid, block, 0, shared)

    def __call__(self, arrays, ptrs):
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        args = []
        for t in self.template:
            if t[0] == "value":
                args.append(t[1])
            elif t[1] is None:
                args.append(t[4])
            else:
                lay, base = t[3], arrays[t[1]]._ary
                if not base.flags.c_contiguous:  # a strided caller's array (matmul's views): its bytes as they lie
                    lo, hi = layout_of(arrays[t[1]]).span()
                    base = np.lib.stride_tricks.as_strided(base, ((hi - lo) // base.itemsize,), (base.itemsize,))
                flat = base.reshape(-1).view(np.uint8)
                view = np.ndarray(lay.shape, lay.dtype, buffer=flat, offset=t[2], strides=lay.strides)
                args.append(FakeCUDAArray(view))
        self.kernel[self.dims](*args)


#: how a plan launches a recorded kernel (benchmarks/lab/host_overhead.py puts GpuLaunch here with a
#: stand-in driver call, to time the GPU replay path without a GPU)
_LAUNCH = SimLaunch if SIMULATOR else GpuLaunch
