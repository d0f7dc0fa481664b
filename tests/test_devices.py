"""A call runs on its arrays' device (:mod:`simt_tiles.devices`).

Without a second GPU: the rule as pure functions on stand-in arrays (which device a call runs on,
the two-device error, per-device keys) and its wiring into the public functions, in the simulator
with the device readers and the guard replaced (fast: tiny arrays, no real device switch).  With two
GPUs (``gpus2``): every public function with its inputs on ``cuda:1`` while ``cuda:0`` is current.
"""

from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

from simt_tiles import devices


# --- stand-in arrays: only the attributes simt_tiles.devices reads -------------------------------

def _fake(module: str, **attrs):
    cls = type("Array", (), {"__module__": module, **attrs})
    return cls()


def torch_like(index, type_="cuda"):
    return _fake("torch", device=types.SimpleNamespace(type=type_, index=index))


def cupy_like(i):
    return _fake("cupy", device=types.SimpleNamespace(id=i))


def numba_like(i):
    ctx = types.SimpleNamespace(device=types.SimpleNamespace(id=i))
    return _fake("numba.cuda.cudadrv.devicearray", __cuda_ndarray__=True, gpu_data=types.SimpleNamespace(context=ctx))


def test_device_of_each_kind():
    assert devices.device_of(torch_like(1)) == ("torch", 1)
    assert devices.device_of(cupy_like(1)) == ("cupy", 1)
    assert devices.device_of(numba_like(1)) == ("numba", 1)
    assert devices.device_of(torch_like(None, "cpu")) is None  # a CPU tensor: the checked path says so
    assert devices.device_of(np.zeros(2)) is None
    assert devices.device_of(3.0) is None


def test_stream_device():
    assert devices.stream_device(types.SimpleNamespace(device=types.SimpleNamespace(index=1))) == 1  # torch
    assert devices.stream_device(types.SimpleNamespace(device_id=1)) == 1  # CuPy
    assert devices.stream_device(_fake("numba", context=types.SimpleNamespace(device=types.SimpleNamespace(id=1)))) == 1
    assert devices.stream_device(0) is None


def test_call_device_follows_the_arrays():
    assert devices.call_device([("a", 1), ("b", 1)], current=0) == 1
    assert devices.call_device([], current=0) == 0  # NumPy only: the current device
    assert devices.call_device([("a", 1)], current=0, stream_dev=1) == 1


def test_two_devices_name_both_arguments_and_devices():
    with pytest.raises(ValueError, match=r"^b: expected an array on GPU 1 \(where a is\); got one on GPU 0 "
                                         r"\(a on cuda:1, b on cuda:0"):
        devices.call_device([("a", 1), ("b", 0)], current=0)
    with pytest.raises(ValueError, match=r"^stream: expected a stream of GPU 1 \(the device of a\); got one of GPU 0"):
        devices.call_device([("a", 1)], current=0, stream_dev=0)


# --- the guard around a call ----------------------------------------------------------------------

@pytest.fixture
def two_gpus(monkeypatch):
    """Two GPUs with GPU 0 current; the guard records the device it would make current."""
    entered = []

    @contextlib.contextmanager
    def on(device, kind):
        entered.append((device, kind))
        yield

    monkeypatch.setattr(devices, "MULTI_GPU", True)
    monkeypatch.setattr(devices, "current", lambda: 0)
    monkeypatch.setattr(devices, "on", on)
    return entered


def test_following_runs_on_the_arrays_device(two_gpus):
    f = devices.following(lambda a, b, *, out=None, stream=None: "ran")
    assert f(torch_like(1), torch_like(1), out=torch_like(1)) == "ran"
    assert two_gpus == [(1, "torch")]
    assert f(numba_like(1), np.zeros(2)) == "ran"  # a NumPy argument goes where the device array is
    assert two_gpus[-1] == (1, "numba")
    f(cupy_like(0), cupy_like(0))  # already current: no guard
    assert len(two_gpus) == 2


def test_following_refuses_two_devices_before_running(two_gpus):
    ran = []
    f = devices.following(lambda x, bias, *, out=None: ran.append(1))
    with pytest.raises(ValueError, match=r"^out: expected an array on GPU 1 \(where x is\); got one on GPU 0"):
        f(torch_like(1), torch_like(1), out=torch_like(0))
    assert not ran and not two_gpus


def test_one_gpu_reads_nothing(monkeypatch):
    monkeypatch.setattr(devices, "MULTI_GPU", False)
    monkeypatch.setattr(devices, "device_of", lambda x: pytest.fail("read a device with one GPU"))
    assert devices.following(lambda a: a)(torch_like(1)) is not None


@pytest.mark.sim
@pytest.mark.parametrize("with_plans", [False, True])
def test_public_functions_are_guarded(two_gpus, monkeypatch, request, with_plans):
    """The wiring: a public function (and its launch plan's replay) runs inside the guard."""
    import simt_tiles as st
    from numba import cuda

    if with_plans:
        request.getfixturevalue("plans")
    a, b = cuda.to_device(np.arange(4, dtype=np.float32)), cuda.to_device(np.ones(4, np.float32))
    on1 = {id(a), id(b)}
    real = devices.device_of
    monkeypatch.setattr(devices, "device_of", lambda x: ("numba", 1) if id(x) in on1 else real(x))
    for _ in range(2):
        np.testing.assert_array_equal(st.vector_add(a, b).copy_to_host(), np.arange(1, 5, dtype=np.float32))
    assert two_gpus == [(1, "numba")] * 2
    on1.discard(id(b))
    monkeypatch.setattr(devices, "device_of", lambda x: ("numba", 1 if id(x) in on1 else 0) if id(x) in (id(a), id(b))
                        else real(x))
    with pytest.raises(ValueError, match=r"^b: expected an array on GPU 1 \(where a is\); got one on GPU 0"):
        st.vector_add(a, b)


# --- per-device keys --------------------------------------------------------------------------------

def test_per_device_caches_per_device(monkeypatch):
    device = [0]
    monkeypatch.setattr(devices, "current", lambda: device[0])
    calls = []
    f = devices.per_device(lambda: calls.append(device[0]) or 100 + device[0])
    assert (f(), f()) == (100, 100)
    device[0] = 1
    assert (f(), f()) == (101, 101)
    assert calls == [0, 1]


def test_autotune_machine_and_choices_per_device(monkeypatch):
    from simt_tiles import autotune

    h200 = {"gpu": "NVIDIA H200", "cc": "9.0", "driver": "13.0", "numba_cuda": "x", "simt_tiles": "x"}
    monkeypatch.setattr(autotune, "_MACHINE", {0: h200})
    monkeypatch.setattr(autotune, "_MEMO", {})
    monkeypatch.setattr(devices, "current", lambda: 1)
    assert autotune.machine() is not h200  # GPU 1 is described by itself
    autotune.choose("matmul", (8, 8, 8, "float32"))
    assert all(key[-1] == 1 for key in autotune._MEMO)


def test_plans_are_keyed_by_device():
    """A launch plan's signature carries the array's device (with several GPUs) and a plan replays
    only on its device (tests/test_launch.py's test_no_replay_on_another_current_device)."""
    from simt_tiles import launch

    arr = numba_like(1)
    arr.gpu_data.device_pointer = 256
    arr.dtype, arr.shape, arr.strides = np.dtype(np.float32), (4,), (4,)
    before, launch._MULTI_GPU = launch._MULTI_GPU, True
    try:
        sig, ptr, dev = launch._numba_sig(arr)
    finally:
        launch._MULTI_GPU = before
    assert dev == 1 and 1 in sig


# --- two GPUs: every public function with inputs on cuda:1 while cuda:0 is current ------------------

def _cases(torch):
    """(name, call(device) -> result) for every public function, torch tensors on ``device``."""
    import simt_tiles as st

    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.rand(*shape, generator=g, dtype=torch.float32)

    m, v, img, w, w1 = r(8, 8), r(16), r(12, 10), r(3, 3), r(5)
    x4, wt = r(2, 3, 6, 6), r(4, 3, 3, 3)
    return [
        ("matmul", lambda d: st.matmul(m.to(d), m.to(d))),
        ("correlate2d", lambda d: st.correlate2d(img.to(d), w.to(d))),
        ("correlate2d numpy weights", lambda d: st.correlate2d(img.to(d), w.numpy())),
        ("convolve2d", lambda d: st.convolve2d(img.to(d), w.to(d))),
        ("correlate1d", lambda d: st.correlate1d(img.to(d), w1.to(d))),
        ("correlate_separable", lambda d: st.correlate_separable(img.to(d), w1.to(d), w1.to(d))),
        ("conv2d_nchw", lambda d: st.conv2d_nchw(x4.to(d), wt.to(d), padding=1)),
        ("softmax", lambda d: st.softmax(m.to(d))),
        ("log_softmax", lambda d: st.log_softmax(m.to(d))),
        ("reduce", lambda d: st.reduce(m.to(d), "sum", axis=1)),
        ("vector_add", lambda d: st.vector_add(v.to(d), v.to(d))),
        ("bias_relu", lambda d: st.bias_relu(m.to(d) - 0.5, m[0].to(d))),
        ("matmul out=", lambda d: st.matmul(m.to(d), m.to(d), out=torch.empty(8, 8, device=d))),
    ]


@pytest.mark.gpus2
def test_every_public_function_on_the_second_gpu():
    torch = pytest.importorskip("torch")
    for name, call in _cases(torch):
        torch.cuda.set_device(0)
        want = call("cuda:0")
        for _ in range(2):  # the checked path, then the launch plan's replay
            got = call("cuda:1")
            assert torch.cuda.current_device() == 0, name  # the caller's device is restored
            assert got.device == torch.device("cuda:1"), name
            torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=0, msg=name)


@pytest.mark.gpus2
def test_cupy_and_numba_arrays_on_the_second_gpu():
    cupy = pytest.importorskip("cupy")
    import simt_tiles as st
    from numba import cuda

    x = np.arange(16, dtype=np.float32)
    with cupy.cuda.Device(1):
        a = cupy.asarray(x)
    with cuda.gpus[1]:
        b = cuda.to_device(x)
    cupy.cuda.Device(0).use()
    got_c = st.vector_add(a, a)
    assert got_c.device.id == 1 and cupy.cuda.runtime.getDevice() == 0
    got_n = st.vector_add(b, b)
    assert got_n.gpu_data.context.device.id == 1 and cuda.get_current_device().id == 0
    np.testing.assert_array_equal(cupy.asnumpy(got_c), 2 * x)
    np.testing.assert_array_equal(got_n.copy_to_host(), 2 * x)


@pytest.mark.gpus2
def test_two_devices_are_refused_on_two_gpus():
    torch = pytest.importorskip("torch")
    import simt_tiles as st

    with pytest.raises(ValueError, match=r"^b: expected an array on GPU 1 \(where a is\); got one on GPU 0"):
        st.matmul(torch.ones(4, 4, device="cuda:1"), torch.ones(4, 4, device="cuda:0"))
