"""Array interop: the result comes back in the caller's kind, without host copies for device arrays."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import simt_tiles

from .matmul_helpers import assert_matmul_ok, poisoned, random_operands


@pytest.fixture
def operands():
    return random_operands(np.random.default_rng(7), 6, 5, 9, np.float32)


def test_numpy_in_numpy_out(operands):
    a, b = operands
    c = simt_tiles.matmul(a, b)
    assert isinstance(c, np.ndarray) and c.shape == (6, 5) and c.dtype == np.float32
    assert_matmul_ok(a, b, c)


def test_numpy_out_is_filled_and_returned(operands):
    a, b = operands
    out = np.full((6, 5), np.nan, np.float32)
    assert simt_tiles.matmul(a, b, out=out) is out
    assert_matmul_ok(a, b, out)


def test_numba_device_in_device_out(operands):
    a, b = operands
    c = simt_tiles.matmul(cuda.to_device(a), cuda.to_device(b))
    assert cuda.is_cuda_array(c) if hasattr(cuda, "is_cuda_array") else hasattr(c, "copy_to_host")
    assert not isinstance(c, np.ndarray)
    assert_matmul_ok(a, b, c.copy_to_host())


def test_mixed_host_and_device_inputs(operands):
    a, b = operands
    c = simt_tiles.matmul(a, cuda.to_device(b))  # kind of the result follows a: NumPy
    assert isinstance(c, np.ndarray)
    assert_matmul_ok(a, b, c)


def test_numba_stream_and_device_out(operands):
    a, b = operands
    stream = cuda.stream()
    out = poisoned((6, 5), np.float32)
    got = simt_tiles.matmul(cuda.to_device(a, stream=stream), cuda.to_device(b, stream=stream),
                            out=out, stream=stream)
    stream.synchronize()
    assert got is out
    assert_matmul_ok(a, b, out.copy_to_host())


def test_numpy_result_with_stream_is_complete_on_return(operands):
    a, b = operands
    c = simt_tiles.matmul(a, b, stream=cuda.stream())
    assert_matmul_ok(a, b, c)


def test_inside_a_numba_pipeline(operands):
    """A user's own kernel consumes the device result directly (README example)."""
    a, b = operands
    c = simt_tiles.matmul(cuda.to_device(a), cuda.to_device(b))

    @cuda.jit
    def relu(x):
        i, j = cuda.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            x[i, j] = max(x[i, j], 0.0)

    relu[(1, 1), (8, 8)](c)
    np.testing.assert_allclose(c.copy_to_host(), np.maximum(simt_tiles.matmul(a, b), 0), rtol=0, atol=0)


# --- GPU only: CuPy, PyTorch, DLPack ------------------------------------------


@pytest.mark.gpu
def test_cupy_in_cupy_out(operands):
    cp = pytest.importorskip("cupy")
    a, b = operands
    c = simt_tiles.matmul(cp.asarray(a), cp.asarray(b))
    assert isinstance(c, cp.ndarray)
    assert_matmul_ok(a, b, cp.asnumpy(c))
    out = cp.full((6, 5), cp.nan, dtype=cp.float32)
    assert simt_tiles.matmul(cp.asarray(a), cp.asarray(b), out=out, stream=cp.cuda.get_current_stream()) is out
    assert_matmul_ok(a, b, cp.asnumpy(out))


@pytest.mark.gpu
def test_cupy_non_contiguous_copied_once_by_matmul():
    cp = pytest.importorskip("cupy")
    a = cp.arange(24, dtype=cp.float32).reshape(4, 6)[:, ::2]  # matmul: other strides, one copy
    got = simt_tiles.matmul(a, cp.ones((3, 2), cp.float32))
    np.testing.assert_array_equal(cp.asnumpy(got), cp.asnumpy(a) @ np.ones((3, 2), np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_in_torch_out(operands, dtype):
    torch = pytest.importorskip("torch")
    a, b = (x.astype(dtype) for x in operands)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = simt_tiles.matmul(ta, tb, stream=torch.cuda.current_stream())
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == getattr(torch, dtype)
    torch.cuda.synchronize()
    assert_matmul_ok(a, b, c.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["torch", "cupy"])
def test_an_integer_result_keeps_its_dtype_in_the_callers_kind(kind):
    """argmax/argmin give int64 in the caller's kind, new (out=None) and replayed: torch's result was once
    allocated float64 for any dtype but float32, so argmax of a torch tensor came back as int64 bits in a float64."""
    lib = pytest.importorskip(kind)
    x = np.random.default_rng(3).standard_normal((37, 101)).astype(np.float32)
    xd = torch_or_cupy(lib, kind, x)
    for op in ("argmax", "argmin"):
        for _ in range(3):  # the checked path, then the launch plan's replays
            got = simt_tiles.reduce(xd, op, axis=-1)
            assert type(got) is type(xd) and str(got.dtype).endswith("int64"), (type(got), got.dtype)
            host = got.cpu().numpy() if kind == "torch" else lib.asnumpy(got)
            np.testing.assert_array_equal(host, getattr(np, op)(x, axis=-1))


def torch_or_cupy(lib, kind, x):
    return lib.from_numpy(x).cuda() if kind == "torch" else lib.asarray(x)


@pytest.mark.gpu
def test_torch_cpu_tensor_names_the_device():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"a: expected a NumPy array or a CUDA array.*torch.Tensor on device cpu"):
        simt_tiles.matmul(torch.ones(2, 2), torch.ones(2, 2))


@pytest.mark.gpu
def test_dlpack_only_producer(operands):
    cp = pytest.importorskip("cupy")
    a, b = operands

    class OnlyDLPack:
        """Exposes DLPack but not __cuda_array_interface__ (as JAX arrays do)."""

        def __init__(self, x):
            self._x = x

        def __dlpack__(self, **kw):
            return self._x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self._x.__dlpack_device__()

    c = simt_tiles.matmul(OnlyDLPack(cp.asarray(a)), OnlyDLPack(cp.asarray(b)))
    assert isinstance(c, cp.ndarray)
    assert_matmul_ok(a, b, cp.asnumpy(c))


@pytest.mark.gpu
def test_ordered_after_the_producers_stream_without_blocking_the_host():
    """Data written on a non-blocking CuPy stream is read correctly by a launch on the default
    stream (the launch waits on an event), and the call does not wait for the GPU."""
    import time

    cp = pytest.importorskip("cupy")
    n = 2**26
    producer = cp.cuda.Stream(non_blocking=True)
    with producer:
        a = cp.zeros(n, cp.float32)
        b = cp.ones(n, cp.float32)
        simt_tiles.vector_add(a, b)  # compile outside the timed call
        producer.synchronize()
        for _ in range(100):  # ≈ 10 ms of queued work on the producer's stream
            a += 1
        t0 = time.perf_counter()
        c = simt_tiles.vector_add(a, b, stream=None)  # exports `producer` as the CAI stream
        host_s = time.perf_counter() - t0
    cp.cuda.Device().synchronize()
    assert bool((c == 101).all())
    assert host_s < 0.005, f"the call blocked the host for {host_s * 1e3:.1f} ms"


# --- the operand model: layouts and byte ranges (the aliasing check reads these) -----------------


class _CAI:
    """A bare ``__cuda_array_interface__`` producer at a made-up address."""

    def __init__(self, shape, strides=None, ptr=4096, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def _op(x, name="x"):
    from simt_tiles.interop import Operand

    return Operand(name, x, "cai", x)


def test_layout_of_contiguous_strided_reversed_and_empty():
    from simt_tiles.interop import layout_of

    lay = layout_of(_CAI((3, 5)))
    assert lay.strides == (20, 4) and lay.span() == (4096, 4096 + 60)
    assert layout_of(_CAI((3, 5), strides=(40, 8))).span() == (4096, 4096 + 2 * 40 + 4 * 8 + 4)
    assert layout_of(_CAI((4,), strides=(-4,), ptr=4096 + 12)).span() == (4096, 4096 + 16)  # x[::-1]
    assert layout_of(_CAI((0, 5))).span() == (4096, 4096)
    host = np.arange(10.0)
    lo, hi = layout_of(host[::-2]).span()
    assert hi - lo == 9 * 8 and lo == host.__array_interface__["data"][0] + 8


def test_layout_of_a_broadcast_numba_array_reads_its_own_strides():
    """numba-cuda's ``__cuda_array_interface__`` gives ``strides: None`` (C order) for a broadcast device
    array (its ``is_contiguous`` skips stride-0 dimensions): read through it, a (3, 2) view with strides
    (0, 0) is six contiguous floats of a one-float buffer — wrong products on the H200. The stand-in has
    that interface; the layout must be the array's own strides."""
    from simt_tiles.interop import layout_of

    class NumbaLike:  # a DeviceNDArray as layout_of sees one
        __cuda_ndarray__ = True
        gpu_data = object()
        device_ctypes_pointer = type("P", (), {"value": 4096})()
        dtype = np.dtype(np.float32)

        def __init__(self, shape, strides):
            self.shape, self.strides = shape, strides

        @property
        def __cuda_array_interface__(self):  # numba-cuda 0.30's rule
            return {"shape": self.shape, "strides": None, "typestr": "<f4", "data": (4096, False), "version": 3}

    for strides in ((0, 0), (0, 4)):
        lay = layout_of(NumbaLike((3, 2), strides))
        assert lay.strides == strides and lay.ptr == 4096
        assert lay.span() == (4096, 4096 + 4 + strides[1])


def test_check_no_overlap_by_byte_ranges():
    from simt_tiles.interop import check_no_overlap

    out = _op(_CAI((4,), ptr=4096), "out")
    check_no_overlap(out, [_op(_CAI((4,), ptr=4096 + 16), "a")])  # adjacent: fine
    check_no_overlap(out, [_op(_CAI((4,), ptr=4096 - 16), "a")])
    check_no_overlap(out, [_op(_CAI((0,), ptr=4096), "a"), None])  # empty arrays touch nothing
    with pytest.raises(ValueError, match="out: overlaps b in memory"):
        check_no_overlap(out, [_op(_CAI((4,), ptr=4096 + 16), "a"), _op(_CAI((4,), ptr=4096 + 12), "b")])
    with pytest.raises(ValueError, match="out: overlaps a in memory"):
        check_no_overlap(out, [_op(_CAI((4,), ptr=4096 - 12), "a")])
    # strided (Tile-side) arrays are compared by their hulls: interleaved views count as overlapping
    with pytest.raises(ValueError, match="out: overlaps a"):
        interleaved = _op(_CAI((4,), strides=(8,), ptr=4100), "a")
        check_no_overlap(_op(_CAI((4,), strides=(8,), ptr=4096), "out"), [interleaved])


@pytest.mark.skipif(not simt_tiles.SIMULATOR, reason="builds on the simulator's array type")
def test_a_broadcast_device_array_is_not_taken_for_c_contiguous():
    """A CuPy ``broadcast_to`` view reaches the kernels as a Numba device array with a stride of 0, and
    numba-cuda's ``is_c_contiguous`` says True for it (it skips stride-0 axes): the functions that need
    C order must refuse it by its strides, naming the argument (the matmul path copies it instead)."""
    base = np.arange(1, 9, dtype=np.float32)
    plain = cuda.to_device(np.lib.stride_tricks.as_strided(base, shape=(3, 8), strides=(0, 4)))

    class ClaimsContiguous(type(plain)):  # numba-cuda's answer for a broadcast array
        def is_c_contiguous(self):
            return True

    x = ClaimsContiguous(plain._ary, 0)
    with pytest.raises(ValueError, match=r"x: expected a C-contiguous device array.*strides \(0, 4\)"):
        simt_tiles.softmax(x)
    row = ClaimsContiguous(np.lib.stride_tricks.as_strided(base, shape=(1, 8), strides=(0, 4)), 0)
    np.testing.assert_array_equal(simt_tiles.softmax(row).copy_to_host(),  # a stride of 0 on an axis of
                                  simt_tiles.softmax(base[None, :]))     # extent 1 is C order: the same launch


def test_16_bit_operands_are_ordered_after_their_producers_stream(monkeypatch):
    """A 16-bit CuPy/CAI operand goes through ``_import_cai`` with the launch stream, as a float one does
    (an event on the producer's stream that the launch stream waits on, and no launch plan): before, it was
    imported with ``sync=False`` and nothing else, so with ``stream=`` another stream than the producer's the
    kernel could read data not yet written (planted: the direct import — this test fails)."""
    from simt_tiles import interop

    seen = []

    def fake_import(x, stream):
        seen.append((x, stream))
        return cuda.to_device(np.zeros((2, 3), np.float16))

    monkeypatch.setattr(interop, "_import_cai", fake_import)

    class Producer:  # a CuPy-like float16 array made on stream 7
        dtype = np.dtype(np.float16)
        ndim, shape = 2, (2, 3)
        __cuda_array_interface__ = {"shape": (2, 3), "strides": None, "typestr": "<f2", "data": (4096, False),
                                    "version": 3, "stream": 7}

    monkeypatch.setattr(interop, "check_device", lambda *a, **k: None)
    x = Producer()
    op = interop.operand16(x, "x", stream=0)
    assert seen == [(x, 0)] and op.dev.dtype == np.uint16 and op.kind == "numba"


def test_storage_view_of_a_0d_device_array_on_the_real_target():
    """A 16-bit result of shape () (reduce over every axis) viewed as its storage dtype: numba-cuda's own
    ``DeviceNDArray.view`` fails on 0-d arrays ("unhashable type: 'list'", seen on the H100: the simulator's arrays
    are NumPy's); ``interop.storage_view`` goes through shape (1,).  Real-target classes, no GPU needed."""
    from .gate_subprocess import run_real_target

    proc = run_real_target("""
        import numpy as np
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        from simt_tiles.interop import storage_view
        class Mem:
            device_ctypes_pointer = None
            def view(self, *a):
                return self
        a = DeviceNDArray(shape=(), strides=(), dtype=np.float16, gpu_data=Mem())
        try:
            a.view(np.uint16)
            print("numba's view works")
        except TypeError:
            print("numba's view fails")
        v = storage_view(a, np.uint16)
        print(v.shape, v.dtype, storage_view(DeviceNDArray(shape=(3,), strides=(2,), dtype=np.float16, gpu_data=Mem()),
                                             np.uint16).shape)
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "() uint16 (3,)", proc.stdout


def test_every_16bit_device_view_goes_through_storage_view():
    """The 0-d ``view`` failure above hid in five places (operands and results of every kind: torch, CuPy, Numba;
    a 16-bit ``reduce`` to a scalar through torch failed on the H100 after the first fix): in the interop layer a
    device array is viewed as 16-bit storage only through :func:`interop.storage_view` (NumPy host arrays may
    ``view`` themselves)."""
    import inspect
    import re

    from simt_tiles import interop

    bad = [line.strip() for line in inspect.getsource(interop).splitlines()
           if re.search(r"\.view\(np\.(u?int16|float16)\)", line) and "host.view" not in line
           and "def storage_view" not in line and "dev.view(dtype)" not in line]
    assert not bad, bad


def test_big_endian_float16_and_masked_arrays():
    """A '>f2' NumPy array is float16 (as '>f4' is float32): the same results, an '>f2' out= filled; a
    masked array is a TypeError naming the argument (its mask would be ignored)."""
    x = np.arange(6, dtype=">f2").reshape(2, 3)
    xn = x.astype(np.float16)
    assert simt_tiles.reduce(x, "sum") == simt_tiles.reduce(xn, "sum") == 15
    np.testing.assert_array_equal(simt_tiles.softmax(x), simt_tiles.softmax(xn))
    out = np.full((2, 3), np.nan, ">f2")
    assert simt_tiles.softmax(x, out=out) is out
    np.testing.assert_array_equal(out, simt_tiles.softmax(xn))
    np.testing.assert_array_equal(simt_tiles.matmul(x, x.T.copy()), simt_tiles.matmul(xn, xn.T.copy()))
    m = np.ma.masked_array(np.arange(12, dtype=np.float32).reshape(3, 4), mask=np.arange(12).reshape(3, 4) > 5)
    for call, name in ((lambda: simt_tiles.reduce(m, "sum"), "x"), (lambda: simt_tiles.softmax(m), "x"),
                       (lambda: simt_tiles.matmul(m, m.T), "a"), (lambda: simt_tiles.reduce(m.astype(np.float16)), "x"),
                       (lambda: simt_tiles.correlate2d(np.ones((5, 5), np.float32), m[:, :3]), "weights")):
        with pytest.raises(TypeError, match=f"^{name}: expected an array without a mask"):
            call()


def test_stream_zero_of_any_integer_type_and_not_a_bool():
    """``stream=0`` is the legacy default stream, a NumPy 0 too; ``False`` is not a stream (it was taken as 0)."""
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(simt_tiles.softmax(x, stream=np.int64(0)), simt_tiles.softmax(x))
    for bad in (False, np.bool_(False), 1):
        with pytest.raises(TypeError, match="^stream: expected None, a Numba stream"):
            simt_tiles.softmax(x, stream=bad)


def test_a_16_bit_result_into_a_numpy_out_of_a_torch_x():
    """finish16 with a torch x and a NumPy out= (out16 takes it: the dtype names agree) fills out in out's own
    dtype (it read the NumPy dtype off the torch tensor: an AttributeError after the kernel had run)."""
    torch = pytest.importorskip("torch")
    from simt_tiles.interop import Operand, finish16

    like = Operand("x", cuda.to_device(np.ones(3, np.uint16)), "torch", torch.ones(3, dtype=torch.float16))
    for dtype in (np.float16, np.dtype(">f2")):
        out = np.full(3, np.nan, dtype)
        op = Operand("out", cuda.to_device(np.full(3, 0x3C00, np.uint16)), "numpy", out)  # 1.0's bits
        assert finish16(op, like, 0) is out and out.dtype == dtype and (out == 1).all()
