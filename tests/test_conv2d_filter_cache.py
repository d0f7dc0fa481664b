"""NumPy filters swapped for a device copy cached by content (simt_tiles/device_copies.py).

* A NumPy filter changed *in place* between two calls (the same array object) gives the new
  result every time — with launch plans on, so the second call replays the plan — for
  correlate2d, convolve2d, correlate1d and correlate_separable; NaN-poisoned outputs.
* Repeated calls with one filter hit the cache and replay one plan (no checked path).
* The cache is bounded (least recently used dropped) and stays correct past its bound.
* What is not swapped: a NumPy image, a rung that compiles the filter's values in, a filter of
  another dtype (the public function's error names it, as before).

A bug planted once: keying the cache on ``id(weights)`` instead of the bytes made
test_mutated_in_place fail (the stale filter's result came back).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from simt_tiles import device_copies, launch
from simt_tiles.kernels.conv2d import (
    CONSTANT_FILTER_VARIANTS,
    convolve2d,
    correlate1d,
    correlate2d,
    correlate_separable,
)
from simt_tiles.kernels.conv2d.reference import correlate2d_reference

from .common import DTYPES, poisoned


@pytest.fixture
def plans_on():
    """Launch plans on (the simulator has them off), and an empty filter cache."""
    before = launch.set_enabled(True)
    launch.clear()  # plans (and counts) of earlier tests in this process
    device_copies.clear()
    yield
    launch.set_enabled(before)
    device_copies.clear()


def _check(got, image, w2d, mode="reflect", convolve=False):
    ref, bound = correlate2d_reference(image, w2d, mode=mode, convolve=convolve)
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - ref), bound + np.finfo(np.float64).tiny)


CALLS = {
    "correlate2d": (lambda img, w, out: correlate2d(img, w, out=out), (3, 3), lambda w: w),
    "convolve2d": (lambda img, w, out: convolve2d(img, w, out=out), (2, 3), lambda w: w),
    "correlate1d": (lambda img, w, out: correlate1d(img, w, axis=0, out=out), (4,), lambda w: w[:, None]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_mutated_in_place(plans_on, name, dtype):
    call, wshape, as_correlation = CALLS[name]
    rng = np.random.default_rng(3)
    image = rng.standard_normal((5, 4)).astype(dtype)
    img = cuda.to_device(image)
    w = rng.standard_normal(wshape).astype(dtype)
    results, first = [], w.copy()
    for step in range(4):
        out = cuda.to_device(poisoned(image.shape, dtype))
        got = call(img, w, out).copy_to_host()
        _check(got, image, as_correlation(w), convolve=name == "convolve2d")
        results.append(got)
        w[(step,) * w.ndim if step < min(w.shape) else (0,) * w.ndim] += 1.5  # in place, same object
    assert all(not np.array_equal(a, b) for a, b in zip(results, results[1:]))
    assert device_copies.stats() == {"hit": 0, "miss": 4, "entries": 4}
    # the first values again, written in place: found, not uploaded; reused, they are recorded once as
    # kernel parameters (their own plan), then that plan replays
    w[...] = first
    before = launch.stats()
    for _ in range(2):
        got = call(img, w, cuda.to_device(poisoned(image.shape, dtype))).copy_to_host()
        np.testing.assert_array_equal(got, results[0])
    assert device_copies.stats() == {"hit": 2, "miss": 4, "entries": 4}
    after = launch.stats()
    assert after["recorded"] == before["recorded"] + 1 and after["hit"] == before["hit"] + 1


def test_separable_mutated_in_place(plans_on):
    rng = np.random.default_rng(5)
    image = rng.standard_normal((6, 5)).astype(np.float32)
    img = cuda.to_device(image)
    wy, wx = rng.standard_normal(3).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    for _ in range(3):
        got = correlate_separable(img, wy, wx, out=cuda.to_device(poisoned(image.shape, np.float32)))
        ref, bound = correlate2d_reference(image, np.outer(wy, wx))
        assert np.all(np.abs(got.copy_to_host() - ref) <= 2 * bound + 1e-6)
        wx[1] -= 0.75
        wy[:] = wy[::-1]


def test_repeated_calls_hit(plans_on):
    rng = np.random.default_rng(1)
    image = rng.standard_normal((4, 4)).astype(np.float32)
    img, out = cuda.to_device(image), cuda.device_array((4, 4), np.float32)
    w = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.float32) / 16
    before = launch.stats()
    for _ in range(5):
        correlate2d(img, w, out=out)
    after = launch.stats()
    assert device_copies.stats() == {"hit": 4, "miss": 1, "entries": 1}
    # the first call staged, the second (reused) recorded with the values as parameters, then replays
    assert after["recorded"] == before["recorded"] + 2 and after["hit"] == before["hit"] + 3
    _check(out.copy_to_host(), image, w)
    # an equal filter in another array object is the same entry
    correlate2d(img, w.copy(), out=out)
    assert device_copies.stats()["entries"] == 1


def test_bounded(plans_on, monkeypatch):
    monkeypatch.setattr(device_copies, "MAX_ENTRIES", 3)
    rng = np.random.default_rng(2)
    image = rng.standard_normal((3, 5)).astype(np.float64)
    img = cuda.to_device(image)
    filters = [rng.standard_normal((2, 2)) for _ in range(5)]
    for w in filters + filters[:2]:  # the first two were dropped: uploaded again
        got = correlate2d(img, w, out=cuda.to_device(poisoned(image.shape, np.float64)))
        _check(got.copy_to_host(), image, w)
        assert device_copies.stats()["entries"] <= 3
    assert device_copies.stats()["miss"] == 7


def test_no_room_for_a_cached_copy_leaves_the_filter_to_the_checked_path(plans_on, monkeypatch):
    """The cache's upload out of GPU memory: the NumPy filter goes on as it is (the checked path
    uploads it for the call), the result is right and nothing is cached."""
    rng = np.random.default_rng(6)
    image = rng.standard_normal((4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)

    def no_room(obj, stream=0, **kw):
        raise launch._CudaAPIError(2, "Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")

    # the cache module's own view of numba.cuda: its upload fails, nothing else does
    monkeypatch.setattr(device_copies, "cuda", type("NoRoom", (), {"to_device": staticmethod(no_room),
                                                                   "default_stream": staticmethod(cuda.default_stream),
                                                                   "gpus": cuda.gpus}))
    got = correlate2d(cuda.to_device(image), w, out=cuda.to_device(poisoned(image.shape, np.float32)))
    _check(got.copy_to_host(), image, w)
    assert device_copies.stats() == {"hit": 0, "miss": 0, "entries": 0}
    assert launch.is_out_of_memory(launch._CudaAPIError(2, "x")) and not launch.is_out_of_memory(ValueError("x"))


def test_not_swapped(plans_on):
    rng = np.random.default_rng(4)
    image = rng.standard_normal((3, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    _check(correlate2d(image, w), image, w)  # a NumPy image: the filter stays as it is
    img = cuda.to_device(image)
    _check(correlate2d(img, w, variant=CONSTANT_FILTER_VARIANTS[0], config="sim").copy_to_host(), image, w)
    assert device_copies.stats()["entries"] == 0
    # a filter of another dtype is scipy's too: converted to the image's (a TypeError until issue 33)
    _check(correlate2d(img, w.astype(np.float64)).copy_to_host(), image, w)
    with pytest.raises(ValueError, match="weights"):
        correlate2d(img, np.zeros((0, 3), np.float32))
    assert device_copies.device_copy(w.astype(">f4"), img, None, 2).dtype == np.dtype(">f4")


def test_a_reused_filter_travels_as_kernel_parameters_keyed_by_its_copy(plans_on, monkeypatch):
    """The default rung (k10) takes a *reused* NumPy filter's values as kernel parameters, as it takes
    a NumPy filter's (the copy staged in shared memory measured 3-12% slower on the H200): its second
    call gets a copy that carries them, and the plan keys on that copy's serial, so two filters of
    one shape and dtype each replay their own values. A filter's first call is staged from its plain
    copy (one plan every new filter replays)."""
    from simt_tiles.kernels.conv2d import k10_runtime_weights as k10

    seen, for_source = [], k10.for_source

    def spy(spec, source):
        seen.append(source)
        return for_source(spec, source)

    monkeypatch.setattr(k10, "for_source", spy)
    rng = np.random.default_rng(2)
    image = rng.standard_normal((5, 6)).astype(np.float32)
    img = cuda.to_device(image)
    filters = [rng.standard_normal((3, 3)).astype(np.float32) for _ in range(2)]
    for _ in range(3):  # first calls (staged), second calls (parameters recorded), third: replays
        for w in filters:
            out = poisoned((5, 6), np.float32)
            correlate2d(img, w, out=out)
            _check(out.copy_to_host(), image, w)
    # recordings: the staged plan (the second filter's first call replays it), then one per reused filter
    assert seen == [k10.STAGED, k10.PARAMS, k10.PARAMS]
    assert launch.stats()["recorded"] == 3 and launch.stats()["hit"] == 3


def test_ever_new_filters_replay_one_plan(plans_on):
    """Filters that change every call (a random blur per sample) are each seen once: their plain
    copies replay one staged plan (no checked path per filter)."""
    rng = np.random.default_rng(3)
    image = rng.standard_normal((5, 6)).astype(np.float32)
    img = cuda.to_device(image)
    for _ in range(5):
        w = rng.standard_normal((3, 3)).astype(np.float32)
        out = poisoned((5, 6), np.float32)
        correlate2d(img, w, out=out)
        _check(out.copy_to_host(), image, w)
    assert launch.stats()["recorded"] == 1 and launch.stats()["hit"] == 4


def test_a_filter_the_default_does_not_take_as_parameters_stays_a_plain_copy(plans_on):
    """Past k10's 7 taps a side the default is another rung, which reads the filter from memory: the
    reused copy carries no values (no upload per recording, one plan)."""
    rng = np.random.default_rng(4)
    image = rng.standard_normal((12, 11)).astype(np.float32)
    img, w = cuda.to_device(image), rng.standard_normal((9, 9)).astype(np.float32)
    for _ in range(3):
        out = poisoned((12, 11), np.float32)
        correlate2d(img, w, out=out)
        _check(out.copy_to_host(), image, w)
    assert launch.stats()["recorded"] == 1 and launch.stats()["hit"] == 2
    assert all(device_copies.host_values(c) is None for c in device_copies._CACHE.values())
