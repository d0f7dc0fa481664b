"""The runtime layer: backend choice, jit option routing, geometry."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from numba import cuda

from simt_tiles import _probe
from simt_tiles.runtime import GPU_ONLY_JIT_OPTIONS, SIMULATOR, cdiv, grid_for, jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("n, d, q", [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2), (1023, 32, 32), (1025, 32, 33)])
def test_cdiv(n, d, q):
    assert cdiv(n, d) == q


def test_grid_for():
    assert grid_for((100, 7), (32, 8)) == (4, 1)
    assert grid_for((0, 7), (32, 8)) == (0, 1)


@pytest.mark.sim
def test_jit_drops_gpu_only_options_in_the_simulator():
    def k(x):
        x[0] = 1.0

    options = {name: None for name in GPU_ONLY_JIT_OPTIONS}
    options.update(lineinfo=True, max_registers=64, launch_bounds=(128,), link=None, opt=True)
    with pytest.raises((TypeError, NotImplementedError)):
        cuda.jit(**{"lineinfo": True})(k)  # the trap this helper exists for
    kernel = jit(k, **options)
    arr = cuda.to_device([0.0])
    kernel[1, 1](arr)
    assert arr.copy_to_host()[0] == 1.0


def test_simulator_flag_matches_numba():
    import numba

    assert SIMULATOR == bool(numba.config.ENABLE_CUDASIM)


def _run(code: str, env_value):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if env_value is not None:
        env["NUMBA_ENABLE_CUDASIM"] = env_value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_select_backend_respects_an_explicit_choice():
    code = "from simt_tiles import _probe; print(_probe.select_backend())"
    assert _run(code, "1").strip() == "True"
    assert _run(code, "0").strip() == "False"
    assert _run(code, None).strip() == str(not _probe.gpu_present())


def test_importing_the_package_does_not_import_numba():
    out = _run("import sys, simt_tiles; print('numba' in sys.modules)", None)
    assert out.strip() == "False"


# --- CUDA-array-interface imports: ordered after the producer's stream, never host-blocking ------


class _FakeCAI:
    def __init__(self, stream):
        self.__cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False), "version": 3,
                                         "stream": stream}


class _FakeStream:
    def __init__(self, handle):
        self.handle = handle


def _record_cuda_calls(monkeypatch):
    """Replace the driver calls _import_cai makes with recorders (no GPU needed)."""
    from simt_tiles import interop

    calls = []

    class Event:
        def record(self, stream):
            calls.append(("record", stream))

        def wait(self, stream):
            calls.append(("wait", stream))

    def as_cuda_array(x, sync=True):
        calls.append(("import", sync))
        return "view"

    monkeypatch.setattr(cuda, "as_cuda_array", as_cuda_array, raising=False)
    monkeypatch.setattr(cuda, "event", lambda timing=True: Event(), raising=False)
    monkeypatch.setattr(cuda, "external_stream", lambda ptr: ("external", ptr), raising=False)
    return interop._import_cai, calls


@pytest.mark.parametrize("producer, ours", [(None, 0), (1, 0), (2, 0), (0xABC, _FakeStream(0xABC))])
def test_cai_import_needs_no_wait(monkeypatch, producer, ours):
    import_cai, calls = _record_cuda_calls(monkeypatch)
    assert import_cai(_FakeCAI(producer), ours) == "view"
    assert calls == [("import", False)]  # never Numba's host-blocking synchronize()


@pytest.mark.parametrize("producer, ours", [(0xABC, 0), (1, _FakeStream(0xDEF)), (0xABC, _FakeStream(0xDEF))])
def test_cai_import_orders_by_an_event_on_other_streams(monkeypatch, producer, ours):
    import_cai, calls = _record_cuda_calls(monkeypatch)
    assert import_cai(_FakeCAI(producer), ours) == "view"
    assert calls == [("import", False), ("record", ("external", producer)), ("wait", ours)]


# --- rungs declare how a call binds to them ------------------------------------------------------


def test_every_conv2d_rung_declares_its_calling_convention():
    from simt_tiles.kernels import conv2d
    from simt_tiles.kernels.conv2d import _common

    for name, rung in {**conv2d.RUNGS, **conv2d.SEPARABLE_RUNGS}.items():
        assert isinstance(rung.bind, _common.Binding), name
    assert conv2d.CONSTANT_FILTER_VARIANTS == ("k04_constant_filter", "k05_register_tile_2d", "k07_vectorized",
                                               "k08_prefetched", "k09_async_copy")
    assert conv2d.VECTOR_VARIANTS == ("k07_vectorized", "k08_prefetched", "k09_async_copy")
    assert conv2d.SEPARABLE_RUNGS["k06_separable_fused"].bind is _common.SEPARABLE
    assert conv2d.RUNGS[conv2d.FALLBACK_VARIANT].bind is _common.WEIGHTS_ARGUMENT  # takes any filter


def test_rungs_of_other_families_need_no_binding():
    from simt_tiles import registry

    for ladder, rungs in registry.ladders().items():
        if ladder != "conv2d":
            assert all(getattr(r, "bind", None) is None for r in rungs.values()), ladder
