"""Host time of a repeated call (the launch-plan replay path) on any machine, no GPU needed.

    python benchmarks/lab/host_overhead.py [--calls 2000] [--repeat 5] [--json PATH]

Every public function is called on a tiny problem with stand-ins for CuPy arrays, PyTorch CUDA
tensors and Numba device arrays (Numba's simulator arrays that answer the attributes
:mod:`simt_tiles.launch` reads of the real ones: ``data.ptr``/``device.id``; ``data_ptr()``,
``stride()``, ``is_cuda``, ``requires_grad``; ``gpu_data.device_pointer``), ``out=`` given.  The first
call runs the checked path in the simulator and records the plan; its launches are built as
:class:`simt_tiles.launch.GpuLaunch` (the GPU path: Numba's kernel ABI, a prebuilt parameter buffer)
with ``cuLaunchKernel`` replaced by a C function that returns 0 (compiled here with ``cc``).  The
time per call (``timeit``, the best of ``--repeat`` loops of ``--calls``) is then the replay's pure
Python cost plus one foreign call per kernel: on a GPU host add the driver's own launch cost
(~2–4 µs per kernel) and the frameworks' real attribute reads (a little slower than the stand-ins').
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import timeit

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before Numba is imported
os.environ["SIMT_TILES_FAST_LAUNCH"] = "1"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numba
import numpy as np
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

import simt_tiles as st
from simt_tiles import launch

_STUB = "int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, " \
        "unsigned bz, unsigned shared, void *stream, void **params, void **extra) { return 0; }\n"


def stub_driver():
    """A ``cuLaunchKernel`` that does nothing (a real foreign call, as the GPU path makes)."""
    tmp = tempfile.mkdtemp()
    src, lib = os.path.join(tmp, "stub.c"), os.path.join(tmp, "stub.so")
    with open(src, "w") as f:
        f.write(_STUB)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    fn = ctypes.CDLL(lib).cuLaunchKernel
    fn.restype = ctypes.c_int
    return fn


# --- stand-ins for the frameworks' arrays ---------------------------------------------------------


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


class _Plain(FakeCUDAArray):
    """Shape, dtype and strides as plain attributes (the simulator's array forwards them through
    ``__getattr__``, far slower than any framework's)."""

    shape = None  # (shadows the simulator's property)

    def __init__(self, ary):
        super().__init__(ary)
        self.shape, self.dtype, self.strides = ary.shape, ary.dtype, ary.strides


class CupyLike(_Plain):
    """A CuPy array as the plans read it: ``data.ptr``, ``device.id``, dtype/shape/strides."""

    def __init__(self, ary):
        super().__init__(ary)
        self.data = _Ptr(ary.__array_interface__["data"][0])
        self.device = type("Device", (), {"id": 0})()


class TorchLike(_Plain):
    """A PyTorch CUDA tensor as the plans read it (dtype stays NumPy's: the key only hashes it)."""

    is_cuda, requires_grad = True, False

    def __init__(self, ary):
        super().__init__(ary)
        self._ptr = ary.__array_interface__["data"][0]
        self._stride = tuple(s // ary.itemsize for s in ary.strides)

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._stride

    def get_device(self):
        return 0


class _Memory:
    """Numba's ``MemoryPointer`` as the plans read it: ``device_pointer``, a cuda.bindings
    ``CUdeviceptr`` (its ``int()`` is the real conversion's cost)."""

    def __init__(self, ptr):
        from cuda.bindings import driver

        self.device_pointer = driver.CUdeviceptr(ptr)

    @property
    def device_ctypes_pointer(self):  # Numba's MemoryPointer: c_size_t(int(self.device_pointer))
        return ctypes.c_size_t(int(self.device_pointer))


class NumbaLike(_Plain):
    """A Numba device array as the plans read it: ``gpu_data.device_pointer``."""

    def __init__(self, ary):
        super().__init__(ary)
        self.gpu_data = _Memory(ary.__array_interface__["data"][0])

    @property
    def device_ctypes_pointer(self):
        return self.gpu_data.device_ctypes_pointer


KINDS = {"cupy": CupyLike, "torch": TorchLike, "numba": NumbaLike}


class _KernelLike:
    """What GpuLaunch reads of a compiled Numba kernel, for a simulator kernel."""

    debug = cooperative = False
    extensions = ()

    def __init__(self, types):
        self.argument_types = types
        self._codelibrary = type("Lib", (), {"get_cufunc": lambda s: type("F", (), {"handle": 0})()})()


def _numba_type(v):
    if isinstance(v, launch.Layout):
        return numba.types.Array(numba.from_dtype(v.dtype), len(v.shape), "A")
    return numba.typeof(v)


def bench_launch(kernel, template, grid, block, shared, stream):
    """A plan's launch built as on a GPU (GpuLaunch), the argument types as Numba's dispatcher
    types the recorded values."""
    types = [_numba_type(t[3] if t[0] == "array" else t[1]) for t in template]
    return launch.GpuLaunch(_KernelLike(types), template, grid, block, shared, stream)


def install(driver) -> None:
    launch._LAUNCH = bench_launch
    launch._c_launch = lambda: driver
    for kind, cls in KINDS.items():
        launch._SIGS[cls] = (kind, {"cupy": launch._cupy_sig, "torch": launch._torch_sig,
                                    "numba": launch._numba_sig}[kind])
    current = _Ptr(0)
    launch._CURRENT["cupy"] = lambda dev: current.ptr  # cupy.cuda.get_current_stream().ptr
    launch._CURRENT["torch"] = lambda dev: 0  # torch._C._cuda_getCurrentRawStream(dev)
    launch.set_enabled(True)


# --- the calls --------------------------------------------------------------------------------------


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


#: (name, function, positional inputs, keyword inputs, other keywords, output shape): tiny problems
CASES = (
    ("vector_add", "vector_add", lambda r: (_f32(r, 64), _f32(r, 64)), {}, {}, (64,)),
    ("bias_relu", "bias_relu", lambda r: (_f32(r, 8, 8), _f32(r, 8)), {}, {}, (8, 8)),
    ("softmax", "softmax", lambda r: (_f32(r, 4, 8),), {}, {}, (4, 8)),
    ("reduce sum", "reduce", lambda r: (_f32(r, 64),), {}, {}, ()),
    ("reduce max axis -1", "reduce", lambda r: (_f32(r, 4, 8),), {}, {"op": "max", "axis": -1}, (4,)),
    ("matmul", "matmul", lambda r: (_f32(r, 8, 8), _f32(r, 8, 8)), {}, {}, (8, 8)),
    ("matmul split-K", "matmul", lambda r: (_f32(r, 8, 40), _f32(r, 40, 8)), {},
     {"variant": "k11_generated_split_k", "config": "split2"}, (8, 8)),
    ("matmul tf32 ragged", "matmul", lambda r: (_f32(r, 5, 7), _f32(r, 7, 3)), {}, {"precision": "tf32"}, (5, 3)),
    ("correlate2d 3x3", "correlate2d", lambda r: (_f32(r, 8, 8), _f32(r, 3, 3)), {}, {}, (8, 8)),
    ("convolve2d 3x3", "convolve2d", lambda r: (_f32(r, 8, 8), _f32(r, 3, 3)), {}, {}, (8, 8)),
    ("correlate1d 5 axis 0", "correlate1d", lambda r: (_f32(r, 8, 8), _f32(r, 5)), {}, {"axis": 0}, (8, 8)),
    ("correlate_separable 3+3", "correlate_separable", lambda r: (_f32(r, 8, 8),),
     {"wy": lambda r: _f32(r, 3), "wx": lambda r: _f32(r, 3)}, {}, (8, 8)),
    ("correlate 3x3x3", "correlate", lambda r: (_f32(r, 4, 8, 8), _f32(r, 3, 3, 3)), {}, {}, (4, 8, 8)),
    ("convolve 3x3x3", "convolve", lambda r: (_f32(r, 4, 8, 8), _f32(r, 3, 3, 3)), {}, {}, (4, 8, 8)),
    ("conv2d_nchw 3x3 pad 1", "conv2d_nchw", lambda r: (_f32(r, 1, 2, 4, 4), _f32(r, 2, 2, 3, 3)),
     {"bias": lambda r: _f32(r, 2)}, {"padding": 1}, (1, 2, 4, 4)),
)


def prepared(case, kind):
    _, function, pos, kw, other, out_shape = case
    rng = np.random.default_rng(0)
    cls = KINDS[kind]
    args = tuple(cls(x) for x in pos(rng))
    kwargs = {k: cls(f(rng)) for k, f in kw.items()}
    out = cls(np.full(out_shape, np.nan, np.float32))
    if other.get("config") == "split2":  # k11's simulator preset with K in two splits: two kernels
        import dataclasses

        rung = st.kernels.matmul.get_rung(other["variant"])
        other = {**other, "config": dataclasses.replace(rung.presets["sim"], splits=2)}
    fn = getattr(st, function)
    return lambda: fn(*args, **kwargs, **other, out=out)


def measure(call, calls: int, repeat: int) -> float:
    """µs per call: the best of ``repeat`` loops of ``calls`` calls."""
    return min(timeit.repeat(call, number=calls, repeat=repeat)) / calls * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    driver = stub_driver()
    install(driver)
    rows = []
    for case in CASES:
        for kind in KINDS:
            call = prepared(case, kind)
            launch.clear()
            call()  # the checked path in the simulator: the plan is recorded
            call()
            if launch.stats()["hit"] != 1:
                print(f"{case[0]} ({kind}): no plan ({launch.stats()})", flush=True)
                continue
            kernels = len(next(iter(launch._PLANS.values())).launches)
            us = measure(call, args.calls, args.repeat)
            rows.append({"call": case[0], "kind": kind, "us": round(us, 2), "kernels": kernels})
            print(f"{case[0]:26s} {kind:6s} {kernels} kernel(s) {us:6.2f} µs", flush=True)
    stub_args = (ctypes.c_void_p(0), *(ctypes.c_uint(1),) * 7, ctypes.c_void_p(0), None, None)
    floor = {"stub cuLaunchKernel": round(measure(lambda: driver(*stub_args), args.calls, args.repeat), 3)}
    print(json.dumps(floor))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "floor": floor, "calls": args.calls, "repeat": args.repeat}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
