"""The fast launch path (:mod:`simt_tiles.launch`), the current-stream rule and device selection.

* Plans: a repeated call replays its plan (a hit) and gives the checked path's result, for every
  public function; any change of shape, dtype, strides, alignment, config, variant or array
  kind makes a new plan or none; calls a plan cannot express (aliased inputs, a filter compiled
  in, an overlapping ``out=``) stay on the checked path.  In the simulator the replay rebuilds
  the arrays from the plan's offsets and launches through the simulator.
* Numba's kernel ABI: :func:`simt_tiles.launch.flatten` equals Numba's own ``_prepare_args``
  for every rung's signature (a subprocess with Numba's real CUDA target; no GPU needed).
* ``stream=None`` and devices: the framework's current stream, and the error for an array on
  another GPU, with stand-ins for CuPy and PyTorch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest
from numba import cuda

import simt_tiles as st
from simt_tiles import interop, launch

from .test_aliasing import CASES, FUNCTIONS, _host_inputs


def _dev(hosts):
    return [cuda.to_device(h) for h in hosts]


def _count(key):
    return launch.stats()[key]


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_replay_gives_the_checked_paths_result(plans, fn):
    call, _, _, out_shape, _ = CASES[fn]
    out = cuda.device_array(out_shape, np.float32)
    call(*_dev(_host_inputs(fn, 0)), out=out)
    assert _count("recorded") == 1
    hosts = _host_inputs(fn, 1)
    call(*_dev(hosts), out=out)  # new arrays, new pointers: the plan's replay
    assert _count("hit") == 1
    got = out.copy_to_host()
    launch.set_enabled(False)
    np.testing.assert_array_equal(got, np.asarray(call(*hosts)))


def test_a_new_result_per_call(plans):
    a, b = _dev([np.arange(7, dtype=np.float32)] * 2)
    first, second = st.vector_add(a, b), st.vector_add(a, b)
    assert _count("hit") == 1 and first is not second
    np.testing.assert_array_equal(second.copy_to_host(), 2 * np.arange(7, dtype=np.float32))


def _vadd(n=9, dtype=np.float32, **kw):
    a, b = _dev([np.arange(n, dtype=dtype), np.ones(n, dtype)])
    return st.vector_add(a, b, out=cuda.device_array(n, dtype), **kw)


def test_plan_cache_hits_and_misses(plans):
    _vadd()
    _vadd()
    assert (_count("recorded"), _count("hit")) == (1, 1)
    for change in ({"n": 10}, {"dtype": np.float64}, {"variant": "k01_grid_stride"}, {"config": "sim"}):
        _vadd(**change)  # shape, dtype, variant, config (None and "sim" are not the same argument)
    assert (_count("recorded"), _count("hit")) == (5, 1)
    st.vector_add(np.ones(9, np.float32), np.ones(9, np.float32))  # another kind: NumPy, never a plan
    assert (_count("recorded"), _count("hit")) == (5, 1)


def test_strides_and_alignment_are_part_of_the_signature(plans):
    buf = cuda.to_device(np.arange(20, dtype=np.float32))
    b, out = _dev([np.ones(9, np.float32), np.zeros(9, np.float32)])
    st.vector_add(buf[:9], b, out=out)
    with pytest.raises(ValueError, match="C-contiguous"):  # same shape, other strides: not the plan
        st.vector_add(buf[::2][:9], b, out=out)
    st.vector_add(buf[1:10], b, out=out)  # 4 bytes off a 16-byte boundary: a plan of its own
    assert (_count("recorded"), _count("hit")) == (2, 0)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(1, 10, dtype=np.float32) + 1)


def test_aliased_inputs_make_a_plan_and_replay_correctly(plans):
    a, b, o = _dev([np.arange(9, dtype=np.float32), np.ones(9, np.float32), np.zeros(9, np.float32)])
    st.vector_add(a, a, out=o)
    assert (_count("refused"), _count("plans")) == (0, 1)  # tests/test_shared_inputs.py has more
    st.vector_add(a, b, out=o)  # not the shared plan: a new one
    st.vector_add(a, a, out=o)  # the plan of (a, b) fits (a, a) too
    assert _count("hit") == 1
    np.testing.assert_array_equal(o.copy_to_host(), 2 * np.arange(9, dtype=np.float32))


def test_replay_still_refuses_an_overlapping_out(plans):
    a, b, o = _dev([np.ones(9, np.float32)] * 3)
    st.vector_add(a, b, out=o)
    with pytest.raises(ValueError, match="out: overlaps a"):
        st.vector_add(a, b, out=a)
    with pytest.raises(ValueError, match="out: overlaps b"):
        st.vector_add(a, b, out=b[:])


def test_compiled_in_filter_makes_no_plan(plans):
    image = cuda.to_device(np.arange(30, dtype=np.float32).reshape(5, 6))
    for w in (np.ones((3, 3), np.float32), 2 * np.ones((3, 3), np.float32)):
        got = st.correlate2d(image, cuda.to_device(w), variant="k04_constant_filter")
        launch.set_enabled(False)
        np.testing.assert_array_equal(got.copy_to_host(), st.correlate2d(image.copy_to_host(), w))
        launch.set_enabled(True)
    assert _count("hit") == 0


def test_no_replay_on_another_current_device(plans, monkeypatch):
    _vadd()
    monkeypatch.setattr(launch, "_MULTI_GPU", True)  # (with one GPU the device is never read)
    monkeypatch.setattr(launch, "_current_device", lambda: 1)
    _vadd()  # the plan was made on device 0: the checked path runs (and decides)
    assert _count("hit") == 0


# --- Numba's kernel ABI ---------------------------------------------------------------------

_ABI_SCRIPT = r"""
import ctypes, numpy as np
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from numba.cuda.dispatcher import _Kernel
from numba.np.numpy_support import as_dtype
from numba import types
from simt_tiles import launch, registry
from simt_tiles.runtime import storage_dtype

class Memory:
    def __init__(self, ptr): self.device_ctypes_pointer = ctypes.c_void_p(ptr)

class Stub:
    extensions = ()
    _prepare_args = _Kernel._prepare_args

def value(ty, i):
    if isinstance(ty, types.Array):
        dt = as_dtype(ty.dtype)
        shape = (3, 5, 7, 2)[: ty.ndim]
        strides = [dt.itemsize]
        for n in reversed(shape[1:]):
            strides.insert(0, strides[0] * n)
        if ty.layout != "C":
            strides = [2 * s for s in strides]
        return DeviceNDArray(shape, tuple(strides), dt, gpu_data=Memory(4096 * (i + 1)))
    if isinstance(ty, types.Integer):
        return 7 + i
    if isinstance(ty, types.Float):
        return 1.25 + i
    if ty == types.boolean:
        return True
    if isinstance(ty, types.BaseTuple):  # conv2d k10's weights as kernel parameters
        return tuple(value(t, i + k) for k, t in enumerate(ty))
    raise AssertionError(ty)

def same(x, y):
    return type(x) is type(y) and (x == y if isinstance(x, (int, bool)) else x.value == y.value)

checked = 0
for lad, rungs in registry.ladders().items():
    for name, rung in rungs.items():
        for dt in (*rung.gate.dtypes, *(("float16", "bfloat16") if rung.gate.half else ())):  # (16-bit softmax)
            for params in rung.gate.params:
                sig = rung.signature(storage_dtype(dt), **params)
                vals = [value(t, i) for i, t in enumerate(sig.args)]
                numba_flat = []
                for t, v in zip(sig.args, vals):
                    Stub()._prepare_args(t, v, 0, [], numba_flat)
                ours = launch.flatten(sig.args, vals)
                assert len(ours) == len(numba_flat) and all(map(same, ours, numba_flat)), (lad, name, dt, params)
                assert all(type(c) is type(v) if not isinstance(v, int) else True
                           for c, v in zip(launch.ctype_args(ours), ours))
                checked += 1
print("checked", checked)
"""


def test_flatten_matches_numbas_prepare_args_for_every_rung():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "SIMT_TILES_FAST_LAUNCH": "0"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", _ABI_SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert int(res.stdout.split()[-1]) >= 40  # every rung of every ladder, each gated dtype and parameter set


_POINTER_SCRIPT = r"""
import numpy as np
from numba.cuda.cudadrv import driver
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from simt_tiles import launch

launch._MULTI_GPU = False  # (the device is read only with several GPUs)
base = driver.MemoryPointer(context=None, pointer=driver.binding.CUdeviceptr(0x7F0000001000), size=256)
for gpu_data, shape, strides in ((base, (8, 8), (32, 4)), (base.view(72), (6, 7), (32, 4)),
                                 (base.view(4), (3,), (8,))):
    x = DeviceNDArray(shape, strides, np.float32, gpu_data=gpu_data)
    sig, ptr, dev = launch._numba_sig(x)
    assert ptr == x.device_ctypes_pointer.value == x.__cuda_array_interface__["data"][0], (ptr, shape)
    assert sig[5] == ptr & 15 and sig[6] is None and dev == 0  # (6: a cached copy's serial, launch.HOST_VALUES)
print("ok")
"""


def test_numba_pointer_read_is_numbas_own():
    """The plans read a Numba array's address as ``int(gpu_data.device_pointer)``: the value of
    ``device_ctypes_pointer`` and of ``__cuda_array_interface__`` (real Numba arrays and views on
    made-up memory; a subprocess with Numba's CUDA target, no GPU needed)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "SIMT_TILES_FAST_LAUNCH": "0"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", _POINTER_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.split()[-1] == "ok", res.stderr[-3000:]


def test_ctype_args_pack_as_cuda_core_does():
    import ctypes

    objs = launch.ctype_args([0, 2**40, True, ctypes.c_float(1.5), ctypes.c_uint32(7)])
    assert [type(o) for o in objs] == [ctypes.c_ssize_t, ctypes.c_ssize_t, ctypes.c_bool, ctypes.c_float,
                                       ctypes.c_uint32]
    assert [o.value for o in objs] == [0, 2**40, True, 1.5, 7]


# --- streams and devices, with stand-ins for CuPy and PyTorch ----------------------------------


def _fake_module(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def _fake_array(module: str, **attrs):
    cls = type("ndarray" if module == "cupy" else "Tensor", (), {"__module__": module,
                                                               "__cuda_array_interface__": {}, **attrs})
    return cls()


def test_current_stream_of_the_inputs_framework(monkeypatch):
    cuda_ns = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0xC0FFEE))
    _fake_module(monkeypatch, "cupy", cuda=cuda_ns)
    assert interop.current_stream_ptr(_fake_array("cupy")) == 0xC0FFEE
    seen = []
    torch_cuda = types.SimpleNamespace(current_stream=lambda dev: seen.append(dev) or
                                       types.SimpleNamespace(cuda_stream=0xBEEF))
    _fake_module(monkeypatch, "torch", cuda=torch_cuda)
    assert interop.current_stream_ptr(_fake_array("torch", is_cuda=True, device="cuda:1")) == 0xBEEF
    assert seen == ["cuda:1"]  # the tensor's own device's current stream
    assert interop.current_stream_ptr(cuda.device_array(3)) == 0  # Numba: its default stream
    assert interop.as_stream(None, cuda.device_array(3)) == 0


def test_stream_handles():
    assert launch.stream_handle(None) == 0 and launch.stream_handle(0) == 0
    assert launch.stream_handle(types.SimpleNamespace(ptr=17)) == 17  # cupy.cuda.Stream
    assert launch.stream_handle(types.SimpleNamespace(cuda_stream=18)) == 18  # torch.cuda.Stream
    assert launch.stream_handle(types.SimpleNamespace(handle=19)) == 19  # Numba / cuda.core
    assert launch.stream_handle("not a stream") is None


@pytest.mark.parametrize("kind, switch", [("cupy", "cupy.cuda.Device(1)"), ("torch", "torch.cuda.device(1)"),
                                          ("numba", "numba.cuda.gpus[1]")])
def test_an_array_on_another_device_is_refused(monkeypatch, kind, switch):
    assert interop.device_mismatch("x", 0, 0, kind) is None
    assert interop.device_mismatch("x", None, 0, kind) is None  # unknown: Numba's launch decides
    import numba

    monkeypatch.setattr(numba.config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(interop, "array_device", lambda x, k: 1)
    monkeypatch.setattr(interop, "current_device", lambda k: 0)
    with pytest.raises(ValueError, match=r"^weights: expected an array on the current device \(GPU 0\); "
                                         r"got one on GPU 1 .*" + switch.replace("(", r"\(").replace(")", r"\)")
                                         .replace("[", r"\[").replace("]", r"\]")):
        interop.check_device("weights", object(), kind)


# --- holes found in review (session 8): each test fails on the code before its fix -------------


@pytest.mark.sim  # a FakeCUDAArray holds host memory: a GPU replay would launch on host pointers
def test_stream_none_follows_the_first_parameter_whatever_the_keyword_order(plans, monkeypatch):
    """``stream=None`` is the current stream of ``a``'s framework (``as_stream(stream, a)``): with
    the arrays passed by keyword in another order, the plan's key must still read ``a``'s."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class CupyLike(FakeCUDAArray):  # a Numba array to the checked path, a CuPy array to the plans
        pass

    current = {"cupy": 0}
    monkeypatch.setitem(launch._SIGS, CupyLike, ("cupy", launch._sim_sig))
    monkeypatch.setitem(launch._CURRENT, "cupy", lambda dev: current["cupy"])
    a = CupyLike(np.arange(9, dtype=np.float32))
    b, out = _dev([np.ones(9, np.float32), np.zeros(9, np.float32)])
    st.vector_add(b=b, a=a, out=out)
    st.vector_add(b=b, a=a, out=out)
    assert _count("hit") == 1
    current["cupy"] = 0x5EED  # the caller switched CuPy's current stream: not the plan of stream 0
    st.vector_add(b=b, a=a, out=out)
    assert _count("hit") == 1


def test_float_arguments_are_keyed_by_their_bits(plans):
    image = cuda.to_device(np.arange(30, dtype=np.float32).reshape(5, 6))
    w = cuda.to_device(np.ones((3, 3), np.float32))
    out = cuda.device_array((5, 6), np.float32)
    for cval in (0.0, -0.0):  # equal, but not the same kernel parameter: two plans
        st.correlate2d(image, w, mode="constant", cval=cval, out=out)
    assert (_count("recorded"), _count("hit")) == (2, 0)
    for cval in (float("nan"), float("nan")):  # two NaN objects (never ==): one plan, not one per call
        st.correlate2d(image, w, mode="constant", cval=cval, out=out)
    assert (_count("recorded"), _count("hit")) == (3, 1)
    st.correlate2d(image, w, mode="constant", cval=-float("nan"), out=out)  # another sign bit: another plan
    assert (_count("recorded"), _count("hit")) == (4, 1)
    got = out.copy_to_host()
    launch.set_enabled(False)  # the checked path's bits (the simulator keeps -NaN's sign; a GPU's FMA may not)
    fresh = st.correlate2d(image, w, mode="constant", cval=-float("nan")).copy_to_host()
    launch.set_enabled(True)
    assert np.array_equal(np.signbit(got), np.signbit(fresh))
    np.testing.assert_array_equal(np.isnan(out.copy_to_host()), np.isnan(
        st.correlate2d(image.copy_to_host(), w.copy_to_host(), mode="constant", cval=np.nan)))


def test_tuple_arguments_are_keyed_by_their_values_and_types(plans):
    """``axis=(0,)`` (the torch op's form of one axis) replays a plan; ``(0, 1)`` is another problem,
    and ``(True,)`` (== ``(1,)``) is not ``(1,)``: the checked path rejects it every time."""
    x = cuda.to_device(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for axis in ((0,), (0,), (0, 1), (1,)):
        got = st.reduce(x, "sum", axis=axis)
        np.testing.assert_array_equal(got.copy_to_host(), np.sum(x.copy_to_host(), axis=axis))
    assert (_count("recorded"), _count("hit")) == (3, 1)
    with pytest.raises(TypeError, match="axis"):
        st.reduce(x, "sum", axis=(True,))
    assert (_count("recorded"), _count("hit")) == (3, 1)


def test_softmax_backward_replays_a_plan(plans):
    from simt_tiles.kernels.softmax import softmax_backward

    y = cuda.to_device(np.full((4, 8), 1 / 8, np.float32))
    dy = cuda.to_device(np.arange(32, dtype=np.float32).reshape(4, 8))
    first, second = softmax_backward(y, dy), softmax_backward(y, dy)
    assert (_count("recorded"), _count("hit")) == (1, 1)
    np.testing.assert_array_equal(first.copy_to_host(), second.copy_to_host())


def test_byte_order_is_part_of_the_signature(plans):
    a, b, o = _dev([np.arange(9, dtype=np.float32), np.ones(9, np.float32), np.zeros(9, np.float32)])
    st.vector_add(a, b, out=o)
    big = cuda.to_device(np.arange(9, dtype=">f4"))
    with pytest.raises(TypeError, match="a: expected dtype float32 or float64"):
        st.vector_add(big, b, out=o)


def test_a_plan_holds_its_workspace(plans):
    """reduce's partials buffer is the module's until it is dropped; the plan keeps its own.
    (More elements than one block's first step of the default preset, so two passes.)"""
    from simt_tiles.kernels import reduce as red

    n = _two_pass_length(red)
    x = cuda.to_device(np.arange(n, dtype=np.float32) % 7)
    out = cuda.device_array((), np.float32)
    st.reduce(x, out=out)
    (plan,) = launch._PLANS.values()
    assert len(plan.launches) == 2 and plan.held  # pass 1 into the partials, pass 2 from them
    red._WORKSPACES.clear()
    y = np.arange(n, dtype=np.float32) % 5  # small integers: every partial sum exact in float32
    st.reduce(cuda.to_device(y), out=out)
    assert _count("hit") == 1
    assert out.copy_to_host()[()] == y.astype(np.float64).sum()


def _two_pass_length(red) -> int:
    """An array length that reduce sums in two passes: more than one block's first step of k01 (the
    rung of whole-array sums; threads × loads of its default config: "sim" in the simulator)."""
    cfg = red.RUNGS["k01_warp_shuffle"].resolve_config(None)
    return max(200, cfg.threads * cfg.loads + 1)


# --- the GPU replay path (GpuLaunch) with a stand-in driver call --------------------------------


class _Kernel:
    """What GpuLaunch reads of a Numba ``_Kernel``."""

    debug = cooperative = False
    extensions = ()

    def __init__(self, types):
        from numba import types as nt

        self.argument_types = [nt.float32[::1] if t == "array" else nt.int64 for t in types]
        self._codelibrary = type("Lib", (), {"get_cufunc": lambda s: type("F", (), {"handle": 0xF00})()})()


def _gpu_launch(monkeypatch, driver):
    """A GpuLaunch of ``k(x, y, 7)`` with x the caller's array 0, y array 1 at +16 bytes."""
    import ctypes

    monkeypatch.setattr(launch, "_c_launch", lambda: driver)
    lay = interop.Layout((4,), np.dtype(np.float32), (4,), 0)
    template = [("array", 0, 0, lay, None), ("array", 1, 16, lay, None), ("value", 7)]
    kernel = _Kernel(["array", "array", "int"])
    gl = launch.GpuLaunch(kernel, template, (2, 1, 1), (32, 1, 1), 0, 0xABC)
    assert gl.kernel is kernel  # the plan keeps the kernel (and its module) alive

    def params(args):  # the data pointers cuLaunchKernel sees: parameters 4 and 4 + 7
        arr = args[9]
        return [ctypes.c_ssize_t.from_address(arr[i]).value for i in (4, 11)]

    return gl, params


def test_gpu_launch_patches_pointers_and_passes_the_geometry(monkeypatch):
    seen = []

    def driver(*args):
        seen.append((args[0].value, [a.value for a in args[1:8]], args[8].value, params(args)))
        return 0

    gl, params = _gpu_launch(monkeypatch, driver)
    assert gl([None, None], [0x1000, 0x2000]) is None
    assert seen == [(0xF00, [2, 1, 1, 32, 1, 1, 0], 0xABC, [0x1000, 0x2010])]


def test_gpu_launch_without_a_context_falls_back_other_errors_raise(monkeypatch):
    codes = iter([201, 700])
    gl, _ = _gpu_launch(monkeypatch, lambda *a: next(codes))
    assert gl([None, None], [0x1000, 0x2000]) is launch._MISS  # the checked path sets the context up
    with pytest.raises(RuntimeError, match="cuLaunchKernel failed: CUresult 700"):
        gl([None, None], [0x1000, 0x2000])


def test_concurrent_replays_of_one_plan_launch_their_own_pointers(monkeypatch):
    """A plan's parameter buffer is shared: two threads replaying it must not launch with each
    other's pointers (the plan's lock; the driver call releases the GIL in real life)."""
    import threading
    import time

    wrong = []

    def driver(*args):
        before = params(args)
        time.sleep(0)  # let the other thread run between patching and the launch reading the buffer
        after = params(args)
        if before != after:
            wrong.append((before, after))
        return 0

    gl, params = _gpu_launch(monkeypatch, driver)
    plan = launch._Plan.__new__(launch._Plan)
    plan.lock, plan.launches, plan.result_arg, plan.extents, plan.device = threading.Lock(), [gl], 0, [16, 32], 0
    plan.others = ((1, 32),)

    def worker(base):
        for _ in range(300):
            plan.replay([None, None], [base, base + 0x100])

    threads = [threading.Thread(target=worker, args=(b,)) for b in (0x10000, 0x20000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_a_torch_result_made_by_a_replay_is_kept_for_the_launch_stream(monkeypatch):
    """out=None with torch on a stream that is not torch's current one: the checked path calls
    ``record_stream`` on the new tensor so the allocator does not reuse it early; so must a replay."""
    recorded = []

    class Tensor:
        __module__ = "torch"
        shape, dtype, device = (3,), "float32", types.SimpleNamespace(index=0)

        def record_stream(self, s):
            recorded.append(s)

    torch_cuda = types.SimpleNamespace(ExternalStream=lambda h, device: ("stream", h),
                                       default_stream=lambda d: ("stream", 0))
    _fake_module(monkeypatch, "torch", Tensor=Tensor, empty=lambda *a, **k: Tensor(), cuda=torch_cuda)
    monkeypatch.setitem(launch._SIGS, Tensor, ("torch", lambda x: (("torch",), 0x100, 0)))
    monkeypatch.setitem(launch._CURRENT, "torch", lambda dev: 0xC0)
    launch._recipe(Tensor(), 0xC0)()  # launched on torch's current stream: nothing to record
    assert recorded == []
    launch._recipe(Tensor(), 0x5E)()
    assert recorded == [("stream", 0x5E)]


@pytest.mark.sim  # (on a GPU the sim preset's generated kernel is a cold compile of tens of seconds;
#                   test_streams_graphs checks the split-K replay there against Numba's launch)
def test_split_k_replay_is_one_lookup_two_launches_no_allocation(plans, monkeypatch):
    """A split-K matmul (two kernels: partials, then their sum) replays from one plan: both
    launches, the partials buffer the plan holds, no allocation or workspace lookup per call."""
    import dataclasses

    from simt_tiles.kernels.matmul import get_rung
    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    rung = get_rung("k11_generated_split_k")
    cfg = dataclasses.replace(rung.presets["sim"], splits=2)
    rng = np.random.default_rng(3)
    hosts = [rng.standard_normal((5, 40)).astype(np.float32), rng.standard_normal((40, 6)).astype(np.float32)]
    out = cuda.device_array((5, 6), np.float32)
    st.matmul(*_dev(hosts), out=out, variant=rung.name, config=cfg)
    (plan,) = launch._PLANS.values()
    assert len(plan.launches) == 2 and len(plan.held) >= 1  # k11 into the partials, then sum_splits

    def refuse(*a, **k):
        raise AssertionError("allocated on replay")

    monkeypatch.setattr(cuda, "device_array", refuse)
    monkeypatch.setattr(k11, "workspace", refuse)
    hosts = [rng.standard_normal((5, 40)).astype(np.float32), rng.standard_normal((40, 6)).astype(np.float32)]
    a, b = _dev(hosts)
    st.matmul(a, b, out=out, variant=rung.name, config=cfg)
    assert _count("hit") == 1
    got = out.copy_to_host()
    ref = hosts[0].astype(np.float64) @ hosts[1]
    from simt_tiles.bounds import gamma, unit_roundoff

    u = unit_roundoff(np.float32)  # dot products of length 40 and the final rounding to float32
    bound = gamma(40, u) * (np.abs(hosts[0]).astype(np.float64) @ np.abs(hosts[1])) + u * np.abs(ref)
    assert np.all(np.abs(got - ref) <= bound)


def test_clear_keeps_the_buffers_of_captured_plans_alone(plans, monkeypatch):
    """A CUDA graph captured from a plan's launches keeps using its workspace: forgetting the plans
    (autotune storing a result, ``set_enabled(False)``) must not free it; a plan never captured lets go of its
    buffers (all were kept: autotune's clear after each problem stored piled them up)."""
    import gc
    import weakref

    from simt_tiles.kernels import reduce as red

    n = _two_pass_length(red)
    x, out = cuda.to_device(np.arange(n, dtype=np.float32)), cuda.device_array((), np.float32)
    refs = {}
    for captured in (True, False):
        st.reduce(x, out=out)
        (plan,) = launch._PLANS.values()
        with monkeypatch.context() as m:
            m.setattr(launch, "_capturing", lambda handle: captured)
            st.reduce(x, out=out)  # a replay (captured: inside a graph capture)
        refs[captured] = weakref.ref(plan.held[0])  # the partials (pass 1 writes them, pass 2 reads a view)
        del plan
        red._WORKSPACES.clear()
        launch.clear()
        gc.collect()
    assert refs[True]() is not None and refs[False]() is None
    launch._RETIRED.clear()


@pytest.mark.sim  # a FakeCUDAArray holds host memory: a GPU replay would launch on host pointers
def test_a_cupy_array_is_ordered_after_cupys_current_stream(plans, monkeypatch):
    """CuPy's ``__cuda_array_interface__`` names its current stream as the producer: launched on
    another stream (here the explicit ``stream=0``), the checked path makes the launch wait for it.
    A plan recorded while the two were the same must not replay once they differ."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class CupyLike(FakeCUDAArray):
        pass

    current = {"cupy": 0}
    monkeypatch.setitem(launch._SIGS, CupyLike, ("cupy", launch._sim_sig))
    monkeypatch.setitem(launch._CURRENT, "cupy", lambda dev: current["cupy"])
    a, b, out = (CupyLike(np.full(9, v, np.float32)) for v in (1, 2, 0))
    st.vector_add(a, b, out=out, stream=0)
    st.vector_add(a, b, out=out, stream=0)
    assert _count("hit") == 1
    current["cupy"] = 0x5EED  # the inputs were produced on another stream now
    st.vector_add(a, b, out=out, stream=0)
    assert _count("hit") == 1


@pytest.mark.skipif(not __import__("shutil").which("cc"), reason="needs a C compiler for the driver stand-in")
def test_host_overhead_benchmark_runs():
    """benchmarks/lab/host_overhead.py (the replay path built as on a GPU, every public function and
    array kind) records and replays a plan for every row."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "lab", "host_overhead.py"), "--calls", "20",
                          "--repeat", "1"], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "no plan" not in res.stdout and res.stdout.count("µs") == 45, res.stdout  # 15 calls × 3 kinds
