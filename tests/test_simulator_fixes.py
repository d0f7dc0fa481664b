"""The simulator's shared arrays: one per call site and block, however the threads interleave
(:func:`simt_tiles._numba_fixes.apply_simulator_shared_lock`)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from simt_tiles import _numba_fixes


def _race(array_method, monkeypatch) -> int:
    """16 threads ask one FakeCUDAShared for the array of one call site at once (``np.empty``
    slowed to widen the window); how many distinct arrays they got."""
    from numba.cuda.simulator import kernelapi

    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", array_method)
    real = np.empty

    def slow_empty(*args, **kwargs):
        time.sleep(0.002)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "empty", slow_empty)
    shared, start, got = kernelapi.FakeCUDAShared(0), threading.Barrier(16), []

    def thread():
        start.wait()
        got.append(shared.array((4, 4), np.float32))  # every thread: this one call site

    threads = [threading.Thread(target=thread) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len({id(a) for a in got})


def test_one_shared_array_per_call_site_under_contention(monkeypatch):
    pytest.importorskip("numba.cuda.simulator")
    assert _numba_fixes.apply_simulator_shared_lock() or pytest.skip("numba-cuda's simulator changed")
    assert _race(_numba_fixes._shared_array, monkeypatch) == 1


def test_the_unlocked_original_races(monkeypatch):
    """numba-cuda's own method, under the same contention, hands out several arrays (the bug)."""
    assert _numba_fixes.apply_simulator_shared_lock() or pytest.skip("numba-cuda's simulator changed")
    assert _race(_numba_fixes._SHARED_ORIGINAL[0], monkeypatch) > 1
