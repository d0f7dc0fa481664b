"""Which GPU a call runs on: its arrays' device, whatever the current one is.

The rule, for every public function (:func:`simt_tiles.launch.planned` wraps each with
:func:`following`, the one place it is applied):

* **the call runs on its arrays' device**: when every device array argument (``out=`` included)
  is on GPU ``d``, the call makes ``d`` current for its duration (a device guard, as torch runs an
  op on its tensors' device) and restores the caller's device afterwards.  Its kernels, the result
  it allocates, NumPy arguments' device copies, workspaces and launch plans are then all ``d``'s.
* **PyTorch** tensors: ``torch.cuda.device(d)`` (torch's own rule).  **Numba** device arrays: their
  context (``numba.cuda.gpus[d]``).  **CuPy** arrays: followed too, with ``cupy.cuda.Device(d)`` —
  *not* CuPy's own rule (CuPy launches on the current device and reads another device's array
  through peer access, or raises without it).  Why: one rule for every kind of array and for both
  kernel sets (``simt_tiles.tile`` already follows CuPy arrays); a kernel reading another GPU's
  memory over the interconnect is never what a caller wants from a library call; and the result
  is allocated where its inputs are.  Other ``__cuda_array_interface__`` producers and NumPy arrays
  have no device to follow: they run on the current device.
* **arrays on two devices**: ``ValueError`` naming both arguments and both devices.  A ``stream=``
  of another device than the arrays': ``ValueError`` naming ``stream``.

With one GPU (and in the simulator) :func:`following` adds one Python call and reads nothing.
With several, it reads each array argument's device (per type, a few attribute reads) and the
current device (``cuCtxGetDevice``) on every call; the guard is entered only when they differ.

What else is per device: Numba loads a compiled kernel's module per device (and builds its cubin
per compute capability) at launch, so :meth:`simt_tiles.runtime.Rung.kernel`'s cache needs no
device in its key; launch plans are keyed by the arrays' device and replay only on it; workspaces
are keyed by the current device; the SM count and the autotuner's machine description are read per
device (:func:`per_device`); streams are the arrays' device's (``stream=None``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect

__all__ = ["following", "call_device", "device_of", "stream_device", "current", "on", "on_device_of",
           "per_device", "multi_gpu"]

#: arguments that are never arrays (read nothing)
_PLAIN = frozenset({int, float, str, bool, type(None), tuple, list, dict})
#: set by :func:`multi_gpu` on its first call (tests set it)
MULTI_GPU: bool | None = None


def _simulator() -> bool:
    import numba

    return bool(numba.config.ENABLE_CUDASIM)


def multi_gpu() -> bool:
    """More than one GPU visible (False in the simulator): only then is anything read."""
    global MULTI_GPU
    if MULTI_GPU is None:
        if _simulator():
            MULTI_GPU = False
        else:
            from numba import cuda

            MULTI_GPU = len(cuda.gpus) > 1
    return MULTI_GPU


# ---------------------------------------------------------------------------
# Reading devices (pure: any object with the attributes will do, e.g. a test's stand-in)
# ---------------------------------------------------------------------------


def _kind(t) -> str:
    if getattr(t, "__cuda_ndarray__", False):
        return "numba"
    mod = t.__module__.split(".")[0]
    return mod if mod in ("torch", "cupy") else ""


_KINDS: dict = {}


def device_of(x) -> tuple[str, int] | None:
    """``(kind, GPU ordinal)`` of a device array whose device can be told (a PyTorch CUDA tensor, a
    CuPy array, a Numba device array), else None (NumPy, CPU tensors, scalars, other producers,
    the simulator's arrays)."""
    t = type(x)
    kind = _KINDS.get(t)
    if kind is None:
        kind = _KINDS[t] = _kind(t)
    if not kind:
        return None
    if kind == "torch":
        dev = getattr(x, "device", None)
        index = getattr(dev, "index", None)
        return None if index is None or getattr(dev, "type", "cuda") != "cuda" else ("torch", int(index))
    if kind == "cupy":
        dev = getattr(x, "device", None)
        return None if getattr(dev, "id", None) is None else ("cupy", int(dev.id))
    ctx = getattr(getattr(x, "gpu_data", None), "context", None)
    return None if ctx is None else ("numba", int(ctx.device.id))


def stream_device(stream) -> int | None:
    """The GPU of a caller's stream object, where it says (torch ``.device``, CuPy ``.device_id``,
    Numba ``.context``), else None (0, None, a raw handle)."""
    dev = getattr(stream, "device", None)  # torch.cuda.Stream
    if getattr(dev, "index", None) is not None:
        return int(dev.index)
    if isinstance(getattr(stream, "device_id", None), int):  # cupy.cuda.Stream
        return stream.device_id
    ctx = getattr(stream, "context", None)  # numba's Stream
    dev = getattr(ctx, "device", None)
    return None if getattr(dev, "id", None) is None else int(dev.id)


def call_device(found, current: int, stream_dev: int | None = None) -> int:
    """The GPU a call runs on: the one device of ``found`` (``(argument name, ordinal)`` pairs of
    the arrays whose device is known), else ``current``.  ValueError naming two arguments on
    different devices, or a ``stream`` of another device."""
    first = None
    for name, dev in found:
        if first is None:
            first = (name, dev)
        elif dev != first[1]:
            raise ValueError(
                f"{name}: expected an array on GPU {first[1]} (where {first[0]} is); got one on GPU {dev} "
                f"({first[0]} on cuda:{first[1]}, {name} on cuda:{dev}: simt_tiles runs a call on its arrays' "
                f"device, so they must share one: move one of them to the other's device)")
    device = current if first is None else first[1]
    if stream_dev is not None and stream_dev != device:
        whose = f"the device of {first[0]}" if first else "the current device"
        raise ValueError(f"stream: expected a stream of GPU {device} ({whose}); got one of GPU {stream_dev}")
    return device


# ---------------------------------------------------------------------------
# The current device and the guard
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _cu_ctx_get_device():
    try:
        f = ctypes.CDLL("libcuda.so.1").cuCtxGetDevice
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_int
    return f


def current() -> int:
    """The calling thread's current GPU (its current CUDA context's device; 0 in the simulator).
    A thread with no current context gets Numba's, which makes GPU 0 current (as a launch would)."""
    if _simulator():
        return 0
    f = _cu_ctx_get_device()
    if f is not None:
        dev = ctypes.c_int()
        if f(ctypes.byref(dev)) == 0:
            return dev.value
    from numba import cuda

    return int(cuda.get_current_device().id)


def on(device: int, kind: str):
    """A context manager making GPU ``device`` current, by ``kind``'s framework's own guard (each
    makes that GPU's primary context current, which the others then see)."""
    if kind == "torch":
        import torch

        return torch.cuda.device(device)
    if kind == "cupy":
        import cupy

        return cupy.cuda.Device(device)
    from numba import cuda

    return cuda.gpus[device]


def on_device_of(x):
    """A context manager making ``x``'s GPU current (nothing to do: a null context)."""
    if not multi_gpu():
        return contextlib.nullcontext()
    got = device_of(x)
    if got is None or got[1] == current():
        return contextlib.nullcontext()
    return on(got[1], got[0])


def following(fn):
    """``fn`` run on its arrays' device (the module docstring's rule): the one device guard of the
    public functions.  Argument names come from ``fn``'s signature (what the errors say)."""
    names = tuple(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not (MULTI_GPU if MULTI_GPU is not None else multi_gpu()):
            return fn(*args, **kwargs)
        found, kind = [], None
        for i, v in enumerate(args):
            if type(v) not in _PLAIN:
                got = device_of(v)
                if got is not None:
                    kind = kind or got[0]
                    found.append((names[i] if i < len(names) else f"argument {i}", got[1]))
        for name, v in kwargs.items():
            if type(v) not in _PLAIN and name != "stream":
                got = device_of(v)
                if got is not None:
                    kind = kind or got[0]
                    found.append((name, got[1]))
        stream = kwargs.get("stream")
        here = current()
        device = call_device(found, here, None if stream is None else stream_device(stream))
        if device == here:
            return fn(*args, **kwargs)
        with on(device, kind):
            return fn(*args, **kwargs)

    return call


def per_device(fn):
    """``functools.cache`` keyed by the current GPU too: a device's own SM count, tuned choice."""
    cached = functools.lru_cache(maxsize=None)(lambda device, *args: fn(*args))

    @functools.wraps(fn)
    def call(*args):
        return cached(current(), *args)

    call.cache_clear = cached.cache_clear
    return call
