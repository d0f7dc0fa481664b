"""Per-stream state stays bounded (issue 36: a stream per call grew GPU memory without bound).

* Workspaces (:mod:`simt_tiles._per_stream`): many distinct streams × split-K matmul, two-pass reduce
  → at most ``LIMIT`` (stream, thread) keys per cache, results right; a key evicted by another
  thread while its call uses the buffer → that call is still right, and the buffer is never handed
  out again.
* Launch plans (:mod:`simt_tiles.launch`): at most ``LIMIT`` stream groups per device; past
  ``MAX_PLANS`` the least recently used plans are forgotten (recording goes on); a captured plan's
  buffers are kept when it is forgotten, an uncaptured one's are let go of.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import weakref

import numpy as np
import pytest
from numba import cuda

import simt_tiles as st
from simt_tiles import _per_stream, launch


@pytest.fixture
def bound(monkeypatch):
    """A small bound and empty caches (before and after)."""
    monkeypatch.setattr(_per_stream, "LIMIT", 3)
    _per_stream.clear_all()
    yield 3
    _per_stream.clear_all()


@pytest.mark.parametrize("raw", ["0", "-5", "abc", "1.5"])
def test_the_stream_keys_variable_is_a_positive_integer(raw):
    """SIMT_TILES_STREAM_KEYS: a positive integer (0 and -5 meant 1 silently, under a message that asks for a
    positive integer when the value is not a number)."""
    assert _per_stream.stream_keys_limit({}) == 128
    assert _per_stream.stream_keys_limit({"SIMT_TILES_STREAM_KEYS": "7"}) == 7
    with pytest.raises(ValueError, match="SIMT_TILES_STREAM_KEYS=.*expected a positive integer"):
        _per_stream.stream_keys_limit({"SIMT_TILES_STREAM_KEYS": raw})


def _split_k(a, b, stream):
    from simt_tiles.kernels.matmul import get_rung  # deferred: the matmul family (the test's own case)

    rung = get_rung("k11_generated_split_k")
    return st.matmul(a, b, variant=rung.name, config=dataclasses.replace(rung.presets["sim"], splits=2),
                     stream=stream)


def _two_pass_length() -> int:
    from simt_tiles.kernels import reduce as red  # deferred: the reduce family (the test's own case)

    cfg = red.RUNGS["k01_warp_shuffle"].resolve_config(None)
    return max(200, cfg.threads * cfg.loads + 1)


def _caches():
    from simt_tiles.kernels import reduce as red  # deferred: the families whose caches are checked
    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    return k11._WORKSPACE, red._WORKSPACES


def test_workspaces_stay_bounded_over_many_streams(bound):
    rng = np.random.default_rng(0)
    a, b = rng.integers(-3, 4, (5, 41)).astype(np.float32), rng.integers(-3, 4, (41, 6)).astype(np.float32)
    x = (np.arange(_two_pass_length()) % 7).astype(np.float32)
    da, db, dx = cuda.to_device(a), cuda.to_device(b), cuda.to_device(x)
    mm, red = _caches()
    for _ in range(bound + 3):  # a new stream per call, as a server making one per request
        s = cuda.stream()
        np.testing.assert_array_equal(_split_k(da, db, s).copy_to_host(stream=s), a @ b)  # small integers: exact
        assert st.reduce(dx, stream=s).copy_to_host(stream=s)[()] == x.astype(np.float64).sum()
        assert mm.keys() <= bound and red.keys() <= bound
    assert mm.evicted >= 3 and red.evicted >= 3


def test_a_stream_workspace_evicted_by_another_thread_while_in_use(bound):
    """Thread A's reduce takes its partials, then (before its kernels run) another thread makes
    ``LIMIT`` new keys, evicting A's: A's result is still right, the next call gets a new buffer."""
    _, red = _caches()
    x = (np.arange(_two_pass_length()) % 5).astype(np.float32)
    dx, s = cuda.to_device(x), cuda.stream()
    taken, original = [], red.get

    def get(stream, sub, make):
        buf = original(stream, sub, make)
        if stream is s and not taken:
            taken.append(buf)

            def flood():  # other threads' streams (no kernels: the simulator runs one thread's at a time)
                streams = [cuda.stream() for _ in range(bound)]  # all alive: a freed one's id may come back
                for other in streams:
                    red.entries(other)

            t = threading.Thread(target=flood)
            t.start()
            t.join()
            assert red.keys() <= bound and red.evicted >= 1  # A's key is gone, its buffer still in A's hands
        return buf

    red.get = get  # (an instance attribute: the cache's own method underneath)
    try:
        results = []
        worker = threading.Thread(target=lambda: results.append(st.reduce(dx, stream=s).copy_to_host(stream=s)))
        worker.start()
        worker.join()
    finally:
        del red.get
    assert taken and results and results[0][()] == x.astype(np.float64).sum()
    again = []
    red.get = lambda stream, sub, make: again.append(original(stream, sub, make)) or again[-1]
    try:
        assert st.reduce(dx, stream=s).copy_to_host(stream=s)[()] == x.astype(np.float64).sum()
    finally:
        del red.get
    assert again and all(g is not taken[0] for g in again)  # an evicted buffer is never handed out again


@pytest.fixture
def handles(monkeypatch):
    """Plans for the simulator's streams: a stand-in handle (the stream's id; in the simulator
    ``launch.stream_handle`` knows none, so such calls stay on the checked path), and the launch's
    stream kept by the simulator's kernel (it drops it) for the recording.  Streams made through
    ``handles()`` are kept alive, so that no id comes back."""
    if not type(cuda.stream()).__module__.startswith("numba.cuda.simulator"):
        pytest.skip("a stand-in for the simulator's streams")
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    original, kept, configure = launch.stream_handle, [], FakeCUDAKernel.__getitem__
    monkeypatch.setattr(launch, "stream_handle", lambda s: id(s) if any(s is k for k in kept) else original(s))

    configured = set()

    def getitem(self, configuration):
        self = configure(self, configuration)
        self.stream = configuration[2] if len(configuration) > 2 else 0
        configured.add(self)
        return self

    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", getitem)

    def new():
        kept.append(cuda.stream())
        return kept[-1]

    yield new
    for kernel in configured:  # (the simulator's kernels are cached: no stand-in stream left behind)
        kernel.stream = 0


def _vadd_on(stream, n=7):
    a = cuda.to_device(np.arange(n, dtype=np.float32))
    out = st.vector_add(a, a, stream=stream)
    np.testing.assert_array_equal(out.copy_to_host(stream=stream), 2 * np.arange(n, dtype=np.float32))


def test_plan_stream_groups_stay_bounded(plans, bound, handles):
    for _ in range(3 * bound):
        _vadd_on(handles())
    assert len(launch._GROUPS) <= bound and len(launch._PLANS) <= bound
    assert launch.stats()["evicted"] >= 2 * bound
    s = handles()  # the most recent stream's plan stays: its next call replays it
    _vadd_on(s)
    hits = launch.stats()["hit"]
    _vadd_on(s)
    assert launch.stats()["hit"] == hits + 1



def test_a_plan_and_its_workspaces_are_the_recording_threads(plans, handles):
    """Two threads calling one signature on one stream each record a plan with buffers of their own.
    A plan holds its recording thread's workspace, which that thread's other signatures of the problem
    (``out=`` or not, a NumPy form on the checked path) use too: thread B replaying A's plan while A
    runs one of those interleaved their launches on one buffer (each plan's replays are serialised by
    its own lock, not across plans) — the H200 soak's wrong products. A thread's later call replays
    its own plan; a plan without workspaces is every thread's."""
    x = cuda.to_device((np.arange(_two_pass_length()) % 7).astype(np.float32))
    want = float((np.arange(_two_pass_length()) % 7).sum())
    s = handles()
    worker = threading.Thread(target=lambda: st.reduce(x, stream=s))
    worker.start()
    worker.join()
    assert launch.stats()["recorded"] == 1
    (theirs,) = launch._PLANS.values()
    assert st.reduce(x, stream=s).copy_to_host(stream=s)[()] == want  # this thread: its own plan
    assert launch.stats()["recorded"] == 2 and launch.stats()["hit"] == 0
    (mine,) = [p for p in launch._PLANS.values() if p is not theirs]
    assert theirs.held and mine.held and not {id(b) for b in theirs.held} & {id(b) for b in mine.held}
    assert st.reduce(x, stream=s).copy_to_host(stream=s)[()] == want
    assert launch.stats()["hit"] == 1
    worker = threading.Thread(target=lambda: _vadd_on(s))  # no workspace: one plan for every thread
    worker.start()
    worker.join()
    _vadd_on(s)
    assert launch.stats()["recorded"] == 3 and launch.stats()["hit"] == 2

def test_plan_lru_at_a_small_cap_keeps_the_most_recent_plans(plans, monkeypatch):
    monkeypatch.setattr(launch, "MAX_PLANS", 4)
    for n in range(3, 10):  # 7 signatures on one stream: past the cap, recording goes on
        _vadd_on(0, n)
    assert launch.stats()["recorded"] == 7 and len(launch._PLANS) <= 4
    hits = launch.stats()["hit"]
    _vadd_on(0, 9)  # the most recent: replayed
    _vadd_on(0, 8)
    assert launch.stats()["hit"] == hits + 2
    _vadd_on(0, 3)  # the oldest: forgotten, recorded again, right
    assert launch.stats()["recorded"] == 8 and len(launch._PLANS) <= 4


def test_an_evicted_plan_keeps_its_workspace_only_when_captured(plans, bound, handles, monkeypatch):
    """A plan replayed on a capturing stream (a stand-in for cuStreamIsCapturing) retires its
    buffers for good; a plan never captured lets go of them when a newer stream evicts it."""
    x = cuda.to_device((np.arange(_two_pass_length()) % 7).astype(np.float32))
    refs = {}
    for captured in (True, False):
        launch.clear()
        s = handles()
        st.reduce(x, stream=s)
        (plan,) = launch._PLANS.values()
        with monkeypatch.context() as m:
            m.setattr(launch, "_capturing", lambda handle: captured)
            st.reduce(x, stream=s)  # a replay (captured: inside a graph capture)
        assert plan.captured is captured and plan.held
        refs[captured] = weakref.ref(plan.held[0])
        del plan
        for _ in range(bound):  # newer streams evict the plan's group
            _vadd_on(handles())
        assert len(launch._GROUPS) <= bound
        _per_stream.clear_all()
        gc.collect()
    assert refs[True]() is not None  # kept: a graph may still write it
    assert refs[False]() is None  # let go of (Numba then defers its cuMemFree)
    launch._RETIRED.clear()
