"""On a GPU: the fast launch path against Numba's launch, CUDA-graph capture, current streams.

* every public function with CuPy, PyTorch and Numba arrays: the replayed plan gives the checked
  path's result bit for bit (``simt_tiles.bench.dispatch.check``, the bench's own gate);
* every public function with ``out=`` captured in a CuPy stream capture and in
  ``torch.cuda.graph``: inputs changed in place, the graph replayed, the result compared with
  the reference of the new inputs;
* ``stream=None`` is the caller's current stream: a side stream that writes the input late (it
  sleeps first) and reads the output early — the legacy default stream (the old behaviour,
  ``stream=0`` here) loses that race, the current stream wins it.

All skipped in the simulator (``gpu`` marker).
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from simt_tiles.bench import dispatch  # noqa: E402

CASES = {c.name: c for c in dispatch.CASES}


def _assert_close(got, case, ref):
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=case.rtol, atol=case.rtol * scale)


@pytest.mark.parametrize("kind", dispatch.KINDS)
@pytest.mark.parametrize("name", list(CASES))
def test_plan_matches_numba_launch(name, kind):
    assert dispatch.check(CASES[name], kind) == ""


def _new_inputs(case, dpos, dkw, kind, seed=7):
    """Write fresh values into the device inputs in place; the new host inputs and reference."""
    pos, kw = case.inputs(np.random.default_rng(seed))
    for d, h in (*zip(dpos, pos), *((dkw[k], kw[k]) for k in kw)):
        if kind == "torch":
            import torch

            d.copy_(torch.from_numpy(h))
        else:
            import cupy

            d[...] = cupy.asarray(h)
    return case.reference(*pos, **kw)


@pytest.mark.parametrize("name", list(CASES))
def test_cupy_graph_capture(name):
    import cupy

    case = CASES[name]
    call, out, _, (dpos, dkw) = dispatch.prepared(case, "cupy")
    call()  # compile outside the capture
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        call()
        graph = s.end_capture()
    ref = _new_inputs(case, dpos, dkw, "cupy")
    out[...] = np.nan
    cupy.cuda.Device().synchronize()
    graph.launch(stream=s)
    s.synchronize()
    _assert_close(dispatch.to_host(out), case, ref)


@pytest.mark.parametrize("name", list(CASES))
def test_torch_graph_capture(name):
    import torch

    case = CASES[name]
    call, out, _, (dpos, dkw) = dispatch.prepared(case, "torch")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as torch's documentation asks
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    ref = _new_inputs(case, dpos, dkw, "torch")
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _assert_close(dispatch.to_host(out), case, ref)


def _late_writer_race(stream_arg):
    """On a side stream: sleep, write ``a``, call vector_add, read the output — all without a
    host synchronisation.  Returns (result seen by the side stream, expected)."""
    import torch

    import simt_tiles

    n = 1 << 20
    a = torch.zeros(n, device="cuda")
    b = torch.ones(n, device="cuda")
    out = torch.full((n,), -1.0, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ≈ 0.1 s of GPU cycles on s before the write
        a.fill_(2.0)
        simt_tiles.vector_add(a, b, out=out, **stream_arg)
        seen = out.clone()  # the consumer, on s
    torch.cuda.synchronize()
    return seen.cpu().numpy(), np.full(n, 3.0, np.float32)


def test_torch_current_stream_wins_the_race():
    seen, expected = _late_writer_race({})
    np.testing.assert_array_equal(seen, expected)


def test_torch_legacy_default_stream_loses_the_race():
    """The old behaviour (launching on the legacy default stream) reads ``a`` before the side
    stream writes it: this is the hazard ``stream=None`` removes."""
    seen, expected = _late_writer_race({"stream": 0})
    assert not np.array_equal(seen, expected)


def test_cupy_current_stream_orders_the_consumer():
    import cupy

    import simt_tiles

    n = 1 << 20
    a, b = cupy.zeros(n, cupy.float32), cupy.ones(n, cupy.float32)
    out = cupy.full(n, -1.0, cupy.float32)
    big = cupy.ones((4096, 4096), cupy.float32)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(20):  # keep s busy for a while before the write
            big = big @ big * 1e-4
        a.fill(2.0)
        simt_tiles.vector_add(a, b, out=out)
        seen = out.copy()  # the consumer, on s
    s.synchronize()
    np.testing.assert_array_equal(seen.get(), np.full(n, 3.0, np.float32))


@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_result_allocated_by_the_callers_framework(kind):
    import simt_tiles

    a, b = (dispatch.to_kind(np.arange(5, dtype=np.float32), kind) for _ in range(2))
    for _ in range(3):  # the checked path, then replays: each call a new result of the caller's kind
        c = simt_tiles.vector_add(a, b)
        assert type(c) is type(a)
        np.testing.assert_array_equal(dispatch.to_host(c), 2 * np.arange(5, dtype=np.float32))
    assert simt_tiles.vector_add(a, b) is not simt_tiles.vector_add(a, b)


def test_replay_refuses_overlapping_out():
    import cupy

    import simt_tiles

    a, b, o = (cupy.ones(64, cupy.float32) for _ in range(3))
    simt_tiles.vector_add(a, b, out=o)
    simt_tiles.vector_add(a, b, out=o)  # a plan now exists for this signature
    with pytest.raises(ValueError, match="out"):
        simt_tiles.vector_add(a, b, out=a)


def test_host_time_per_call_is_small():
    """The plan's host path: far below the checked path (the 15 µs target is the bench's)."""
    case = CASES["vector_add 4096"]
    call, *_ = dispatch.prepared(case, "cupy")
    fast, _ = dispatch.per_call(call, 300)
    from simt_tiles import launch

    launch.set_enabled(False)
    try:
        slow, _ = dispatch.per_call(call, 100)
    finally:
        launch.set_enabled(True)
    print(f"vector_add (CuPy): {fast:.1f} µs per call with plans, {slow:.1f} µs on the checked path")
    assert fast < slow / 2


def test_gpu_time_is_measured_behind_the_sleeper():
    """``bench dispatch``'s GPU column: 50 calls queued behind a sleeping kernel run back to back,
    so a call's GPU time is below its host time for a small kernel (vector_add), and a known
    GPU-bound call (a 2048² copy, ~30 µs of DRAM traffic) reads at least its traffic's time."""
    import cupy

    case = CASES["vector_add 4096"]
    call, *_ = dispatch.prepared(case, "cupy")
    host, _ = dispatch.per_call(call, 300)
    gpu = dispatch.gpu_per_call(call, host)
    assert gpu is not None and 0 < gpu < host, (gpu, host)
    src, dst = cupy.ones((2048, 2048, 8), cupy.float32), cupy.empty((2048, 2048, 8), cupy.float32)

    def copy():  # 2 × 128 MiB: ≥ 50 µs at ≤ 5 TB/s
        cupy.copyto(dst, src)

    host, _ = dispatch.per_call(copy, 20)
    gpu = dispatch.gpu_per_call(copy, host)
    assert gpu is not None and gpu >= 2 * src.nbytes / 5e12 * 1e6, gpu
