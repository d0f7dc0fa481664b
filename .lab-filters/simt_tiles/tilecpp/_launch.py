"""Loading the cubins and launching tile kernels (``cuda.core``), with the argument packing
spelled out so that it can be checked on a CPU.

**The launch rule.** A tile kernel is launched with a block of one thread: the CUDA Tile
C++ API reference launches its examples as ``kernel<<<grid, 1>>>`` (``ct::bid``'s example),
so do NVIDIA's CUDA Tile samples and cuTile Python's launcher (block (1, 1, 1)); the grid
counts *tile blocks*, and the threads of each are the compiler's business (the cubin records
them: :attr:`simt_tiles.tilecpp._cubin.KernelInfo.reqntid`, 128 for every kernel here).  A
launch with the function's ``max_threads_per_block`` fails (CUDA_ERROR_INVALID_VALUE).

**Arguments.** Each kernel's C signature is written once, in :data:`SIGNATURES`: ``"ptr"``
(a device address, 8 bytes), ``"i32"`` (int) or ``"f32"`` (float).  :func:`pack` turns
Python values into NumPy scalars of exactly those types (what ``cuda.core.launch`` copies
into the parameter buffer); :func:`param_buffer` lays them out as the C ABI does (natural
alignment) — the bytes the tests compare with the layout the compiler wrote into the cubin.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import numpy as np

from . import _cubin

__all__ = ["ALIGNED_VARIANTS", "BLOCK", "SIGNATURES", "launch", "pack", "param_buffer", "param_layout"]

#: the block every tile kernel is launched with (see the module's docstring)
BLOCK = (1, 1, 1)

_PTR, _I32, _F32 = "ptr", "i32", "f32"
_TYPES = {_PTR: np.dtype(np.uint64), _I32: np.dtype(np.int32), _F32: np.dtype(np.float32)}

#: kernel name -> (source stem, parameter types), as in the ``extern "C"`` declarations
SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "vector_add": ("vector_add", (_PTR, _PTR, _PTR, _I32)),
    "bias_relu": ("bias_relu", (_PTR, _PTR, _PTR, _I32, _I32)),
    "softmax_short": ("softmax", (_PTR, _PTR, _I32, _I32)),
    "softmax_mid": ("softmax", (_PTR, _PTR, _I32, _I32)),
    "softmax_long": ("softmax", (_PTR, _PTR, _I32, _I32)),
    "sum_rows_f32": ("reduce_sum", (_PTR, _PTR, _I32, _I32)),
    "sum_rows_f64": ("reduce_sum", (_PTR, _PTR, _I32, _I32)),
    "sum_partials": ("reduce_sum", (_PTR, _PTR, _I32)),
    "matmul_fp32": ("matmul", (_PTR, _PTR, _PTR, _I32, _I32, _I32)),
    "matmul_tf32": ("matmul", (_PTR, _PTR, _PTR, _I32, _I32, _I32)),
    "correlate2d": ("correlate2d", (_PTR, _PTR, _PTR, _I32, _I32, _I32, _I32, _I32, _F32)),
}

#: the kernels that also come as "<name>_a16": the same code told (src/aligned.cuh) that its
#: pointers are 16-byte aligned and its row lengths multiples of 4 (vector loads, the TMA)
ALIGNED_VARIANTS = ("vector_add", "bias_relu", "softmax_short", "softmax_mid", "softmax_long", "sum_rows_f32",
                    "sum_partials", "matmul_fp32", "matmul_tf32")
SIGNATURES.update({f"{name}_a16": SIGNATURES[name] for name in ALIGNED_VARIANTS})

_INT32 = np.iinfo(np.int32)


def pack(kernel: str, *values) -> list[np.generic]:
    """The arguments of ``kernel`` as NumPy scalars of its C parameter types.

    ValueError when the count is wrong or an int does not fit its type (no silent wrap)."""
    _, types = SIGNATURES[kernel]
    if len(values) != len(types):
        raise ValueError(f"{kernel}: expected {len(types)} arguments {types}; got {len(values)}")
    out = []
    for i, (t, v) in enumerate(zip(types, values)):
        if t == _PTR:
            if not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 2**64:
                raise ValueError(f"{kernel}: argument {i} is a device address; got {v!r}")
        elif t == _I32 and not _INT32.min <= int(v) <= _INT32.max:
            raise ValueError(f"{kernel}: argument {i} must fit a 32-bit int; got {v!r}")
        out.append(_TYPES[t].type(v))
    return out


def param_layout(kernel: str) -> list[tuple[int, int]]:
    """(offset, size) of each parameter under the C ABI's natural alignment."""
    layout, offset = [], 0
    for t in SIGNATURES[kernel][1]:
        size = _TYPES[t].itemsize
        offset = -(-offset // size) * size
        layout.append((offset, size))
        offset += size
    return layout


def param_buffer(kernel: str, *values) -> bytes:
    """The kernel's parameter bytes for ``values`` (little-endian, naturally aligned)."""
    layout = param_layout(kernel)
    buf = bytearray(layout[-1][0] + layout[-1][1] if layout else 0)
    for (offset, _size), v in zip(layout, pack(kernel, *values)):
        struct.pack_into("<" + v.dtype.char, buf, offset, v)
    return bytes(buf)


def _core():
    """``cuda.core``'s namespace (``cuda.core.experimental`` before cuda-core 0.5)."""
    try:
        from cuda import core

        core.ObjectCode  # noqa: B018 - older releases keep the API in .experimental
    except (ImportError, AttributeError):
        import cuda.core.experimental as core
    return core


class _LegacyDefaultStream:
    """The legacy default stream (handle 0), by the ``__cuda_stream__`` protocol."""

    def __cuda_stream__(self):
        return (0, 0)


@functools.cache
def _module(path: str):
    """The loaded cubin at ``path`` (``cuda.core`` ObjectCode), on the current device."""
    core = _core()
    core.Device().set_current()  # the primary context, the one Numba, CuPy and PyTorch use
    return core.ObjectCode.from_cubin(Path(path).read_bytes())


@functools.cache
def _kernel(path: str, name: str):
    kernel = _module(path).get_kernel(name)
    _allow_large_shared_memory(kernel)
    return kernel


def _check(result, what: str):
    err, *rest = result
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if rest else None


def _allow_large_shared_memory(kernel) -> None:
    """Let the kernel have the device's opt-in shared memory, as cuTile Python's launcher
    does for every tile kernel (tileiras sizes the block's shared memory itself: 105 KiB for
    the TF32 matmul, more than the 48 KiB a kernel gets without opting in)."""
    from cuda.bindings import driver

    dev = driver.CUdevice(_core().Device().device_id)
    optin = _check(driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev), "cuDeviceGetAttribute")
    static = _check(driver.cuKernelGetAttribute(
        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel.handle, dev), "cuKernelGetAttribute")
    if optin > static:
        _check(driver.cuKernelSetAttribute(
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static,
            kernel.handle, dev), "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")


def launch(cubin: Path, kernel: str, grid: tuple[int, ...], *values, block=BLOCK) -> None:
    """Launch ``kernel`` of ``cubin`` on the legacy default stream (the stream Numba's,
    CuPy's and PyTorch's default work is ordered with)."""
    core = _core()
    args = pack(kernel, *values)
    stream = getattr(core, "LEGACY_DEFAULT_STREAM", None) or _LegacyDefaultStream()
    core.launch(stream, core.LaunchConfig(grid=tuple(grid), block=block), _kernel(str(cubin), kernel), *args)


def cubin_kernels(cubin: Path) -> dict[str, _cubin.KernelInfo]:
    """The kernels of a built cubin (no GPU needed)."""
    return _cubin.kernels(Path(cubin).read_bytes())
