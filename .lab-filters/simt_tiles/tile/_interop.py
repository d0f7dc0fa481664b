"""CUDA arrays in and out of the cuTile launchers (no cuda.tile import here).

cuTile's ``ct.launch`` takes any object with ``__cuda_array_interface__`` or
DLPack (CuPy arrays, PyTorch CUDA tensors, Numba device arrays) and passes
its shape *and strides* to the kernel, so strided inputs are used in place.
This module reads an argument's shape, dtype, strides and address without
launching anything, allocates results of the caller's kind (PyTorch → PyTorch,
CuPy → CuPy, anything else → Numba device arrays), and picks the stream.

The operand model and the rules, and how they differ from the SIMT
kernels' (NumPy refused, strides accepted, float32 only), are
:mod:`simt_tiles.interop`'s; each broken rule raises TypeError/ValueError
naming the argument.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..interop import Operand, check_no_overlap, describe

FLOAT32 = np.dtype(np.float32)

__all__ = ["Operand", "operand", "same_device", "check_out", "device_context", "empty", "reshaped", "as_kind",
           "default_stream"]


def operand(x, name: str, *, ndims: tuple[int, ...], dtype=FLOAT32) -> Operand:
    """Check ``x`` (a CUDA array of ``ndims`` dimensions and ``dtype``) and describe it
    (the Tile side's rules: see :mod:`simt_tiles.interop`).  ``dev`` is what
    ``ct.launch`` takes: the caller's array (a detached tensor for PyTorch)."""
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        raise TypeError(
            f"{name}: expected a CUDA array (PyTorch CUDA tensor, CuPy array, Numba device array); "
            "got a NumPy array — simt_tiles.tile does not copy host arrays; move it first, e.g. "
            "cupy.asarray(x) or torch.as_tensor(x, device='cuda')"
        )
    if mod == "torch" and hasattr(x, "is_cuda"):
        if not x.is_cuda:
            raise TypeError(f"{name}: expected a CUDA tensor; got a PyTorch tensor on {x.device} (use .cuda())")
        t = x.detach()
        op = Operand(name, t, "torch", x, t.device)
        shown = str(t.dtype).replace("torch.", "")
    else:
        try:
            cai = x.__cuda_array_interface__
        except Exception:  # noqa: BLE001 - AttributeError, or a producer refusing
            cai = None
        if not isinstance(cai, dict):
            where = f" on {x.device}" if hasattr(x, "device") else ""
            raise TypeError(
                f"{name}: expected a CUDA array (PyTorch CUDA tensor, CuPy array, Numba device array, "
                f"or any __cuda_array_interface__ object); got {describe(x)}{where}"
            )
        kind = {"cupy": "cupy", "numba": "numba"}.get(mod, "cai")
        op = Operand(name, x, kind, x, x.device.id if kind == "cupy" else None)
        shown = op.dtype.name
    if op.ndim not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name}: expected a {want} array; got {op.ndim}-D with shape {op.shape}")
    if op.dtype != np.dtype(dtype):
        raise TypeError(
            f"{name}: expected dtype {np.dtype(dtype).name}; got {shown} "
            "(simt_tiles.tile kernels are float32 only; the Numba kernels in simt_tiles also take float64)"
        )
    return op


def same_device(*ops: Operand) -> None:
    """All torch/CuPy operands on one device (cuTile launches on the current one)."""
    seen = {}
    for op in ops:
        if op.kind == "torch":
            key = ("cuda", op.device.index)
        elif op.kind == "cupy":
            key = ("cuda", op.device)
        else:
            continue
        seen.setdefault(key, op.name)
    if len({k[1] for k in seen}) > 1:
        raise ValueError(f"{', '.join(seen.values())}: expected arrays on one GPU; got devices "
                         f"{sorted(k[1] for k in seen)}")


def check_out(out, shape: tuple, inputs: list[Operand]) -> Operand:
    """The caller's ``out=``: exact shape, float32, C-contiguous, no overlap with an input."""
    shape = tuple(shape)
    op = operand(out, "out", ndims=tuple(range(33)))
    if op.shape != shape:
        raise ValueError(f"out: expected shape {shape}; got {op.shape}")
    if not op.c_contiguous():
        raise ValueError(f"out: expected a C-contiguous array; got shape {op.shape} with strides "
                         f"{op.strides} (elements)")
    check_no_overlap(op, inputs)
    return op


# ---------------------------------------------------------------------------
# allocation, views, streams
# ---------------------------------------------------------------------------


def device_context(like: Operand):
    """Make ``like``'s GPU current while allocating and launching."""
    if like.kind == "torch" and like.device.index is not None:
        import torch

        return torch.cuda.device(like.device)
    if like.kind == "cupy":
        import cupy

        return cupy.cuda.Device(like.device)
    return contextlib.nullcontext()


def _stream_context(like: Operand, stream):
    """Allocate on the launch stream so the caching allocators order reuse after our kernels."""
    if like.kind == "torch":
        import torch

        if isinstance(stream, torch.cuda.Stream):
            return torch.cuda.stream(stream)
    if like.kind == "cupy":
        import cupy

        if isinstance(stream, cupy.cuda.Stream):
            return stream
    return contextlib.nullcontext()


def empty(like: Operand, shape: tuple, dtype, stream, name: str = "out") -> Operand:
    """A new array of ``like``'s kind (Numba device array for other kinds)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    with _stream_context(like, stream):
        if like.kind == "torch":
            import torch

            obj = torch.empty(shape, dtype=getattr(torch, dtype.name), device=like.device)
            return operand(obj, name, ndims=(len(shape),), dtype=dtype)
        if like.kind == "cupy":
            import cupy

            obj = cupy.empty(shape, dtype=dtype)
            return operand(obj, name, ndims=(len(shape),), dtype=dtype)
    from numba import cuda

    obj = cuda.device_array(shape, dtype=dtype)
    return operand(obj, name, ndims=(len(shape),), dtype=dtype)


def reshaped(op: Operand, shape: tuple, name: str | None = None) -> Operand:
    """A view (or, for a strided input, possibly a copy) of ``op`` with ``shape``."""
    return operand(op.dev.reshape(shape), name or op.name, ndims=(len(shape),), dtype=op.dtype)


def as_kind(x: np.ndarray, like: Operand, name: str, stream) -> Operand:
    """Copy a small host array to the device as ``like``'s kind (correlate2d's weights)."""
    x = np.ascontiguousarray(x)
    with _stream_context(like, stream):
        if like.kind == "torch":
            import torch

            obj = torch.as_tensor(x, device=like.device)
        elif like.kind == "cupy":
            import cupy

            obj = cupy.asarray(x)
        else:
            from numba import cuda

            obj = cuda.to_device(x)
    return operand(obj, name, ndims=(x.ndim,), dtype=x.dtype)


def default_stream(like: Operand, stream):
    """The stream to launch on: the caller's, else the current stream of ``like``'s library."""
    if stream is not None:
        return stream
    if like.kind == "torch":
        import torch

        return torch.cuda.current_stream(like.device)
    if like.kind == "cupy":
        import cupy

        return cupy.cuda.get_current_stream()
    try:
        import cupy

        return cupy.cuda.get_current_stream()
    except ImportError:
        from numba import cuda

        return cuda.default_stream()
