"""``correlate1d`` on N-D images (issue 33, part 5): 1-D lines, 3-D volumes and 4-D arrays along
any axis, with scipy.ndimage's semantics — checked against ``scipy.ndimage.correlate1d`` itself and
against the 2-D long-double reference (``correlate1d_reference``, its γ bound) applied line by line.

The N-D image is filtered as 2-D problems of the existing rungs (``_args.volume_view``): these
tests check every axis (negative too) of small volumes in every mode, odd and even filters, a
filter longer than the axis, origin, float32/float64 and integer images with ``output=``, NumPy and
Numba device inputs, NaN-poisoned ``out=``, empty dimensions, the argument errors, the launch count
the docstring promises and a launch plan's replay.  Tiny shapes: a few seconds in the simulator.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given, note, settings
from hypothesis import strategies as hs
from numba import cuda

import simt_tiles as st
from simt_tiles import device_copies, launch
from simt_tiles.kernels.conv2d import _args, _common, dispatch
from simt_tiles.kernels.conv2d.reference import correlate1d_reference

from .common import poisoned, transposed
from .profiles import examples

MODES = ("reflect", "constant", "nearest", "mirror", "wrap")


def nd_reference(x: np.ndarray, w: np.ndarray, axis: int, mode: str, cval: float = 0.0, origin: int = 0):
    """``(ref, bound)`` for scipy's ``correlate1d`` of an N-D ``x``: the axis moved last, the other
    axes flattened into rows, and :func:`correlate1d_reference` (2-D, along axis 1) on that."""
    moved = np.moveaxis(x, axis, -1)
    flat = np.ascontiguousarray(moved).reshape(-1, moved.shape[-1])
    ref, bound = correlate1d_reference(flat, w, 1, mode, cval, origin)
    back = lambda a: np.moveaxis(a.reshape(moved.shape), -1, axis)  # noqa: E731
    return back(ref), back(bound)


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def _check(got, x, w, axis, mode, cval=0.0, origin=0, what=""):
    """Within the reference's bound, and the reference is scipy's (within the same bound)."""
    got = _host(got)
    ref, bound = nd_reference(x, w, axis, mode, cval, origin)
    expect = ndi.correlate1d(x.astype(np.float64), w.astype(np.float64), axis=axis, mode=mode, cval=cval,
                             origin=origin)
    assert got.shape == x.shape, what
    assert np.all(np.abs(got - ref) <= bound), f"{what}: outside the reference's bound: got {got}, scipy {expect}"
    assert np.all(np.abs(expect - ref) <= bound), f"{what}: the reference is not scipy's"


# ---------------------------------------------------------------------------
# every mode, every axis (negative too), odd/even filters, longer than the axis, origin
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_volumes_every_axis_equal_scipy(mode):
    """3-D and 4-D float64: scipy's numbers on every axis (K 1, 2, 3, and 5 > the axis' length)."""
    rng = np.random.default_rng(33)
    for shape in ((2, 3, 4), (2, 1, 3, 2)):
        x = rng.standard_normal(shape)
        for axis in range(-len(shape), len(shape)):
            for k, origin in ((1, 0), (2, -1), (3, 1), (5, -2)):
                w = rng.standard_normal(k)
                got = st.correlate1d(x, w, axis=axis, mode=mode, cval=0.5, origin=origin)
                expect = ndi.correlate1d(x, w, axis=axis, mode=mode, cval=0.5, origin=origin)
                assert isinstance(got, np.ndarray) and got.shape == shape and got.dtype == np.float64
                np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12,
                                           err_msg=f"shape {shape} axis {axis} K={k} origin {origin}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_volume_device_in_poisoned_out(dtype):
    """Numba device image and filter, a NaN-filled out= of the image's shape: every element written,
    within the reference's bound; a 1-D image too."""
    rng = np.random.default_rng(5)
    for shape, axis, k in (((3, 2, 4), 1, 4), ((3, 2, 4), -3, 3), ((2, 3, 2), -1, 6), ((7,), 0, 3), ((7,), -1, 8)):
        x = rng.standard_normal(shape).astype(dtype)
        w = rng.standard_normal(k).astype(dtype)
        for mode in ("mirror", "constant"):
            out = poisoned(shape, dtype)
            got = st.correlate1d(cuda.to_device(x), cuda.to_device(w), axis=axis, mode=mode, cval=-1.5, out=out)
            assert got is out
            _check(out, x, w, axis, mode, -1.5, 0, f"{shape} axis {axis} {mode}")


def test_integer_volumes_output():
    """uint8 volumes: scipy's result bit for bit (integer taps: exact sums), the output dtype by
    ``output=`` a dtype or an array, NumPy and device images."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    w = np.array([1.0, -2.0, 3.0, 1.0])
    for axis in (0, -2, 2):
        for mode in ("reflect", "wrap"):
            expect = ndi.correlate1d(x, w, axis=axis, mode=mode, origin=-1)
            got = st.correlate1d(x, w, axis=axis, mode=mode, origin=-1)  # uint8 out: scipy's wrap-around
            assert got.dtype == np.uint8
            np.testing.assert_array_equal(got, expect)
            expect16 = ndi.correlate1d(x, w, axis=axis, mode=mode, output=np.int16)
            dev = st.correlate1d(cuda.to_device(x), w, axis=axis, mode=mode, output=np.int16)
            assert dev.dtype == np.int16
            np.testing.assert_array_equal(dev.copy_to_host(), expect16)
            arr = np.full(x.shape, -7, np.int32)
            assert st.correlate1d(x, w, axis=axis, mode=mode, cval=2.0, output=arr) is arr
            np.testing.assert_array_equal(arr, ndi.correlate1d(x, w, axis=axis, mode=mode, cval=2.0, output=np.int32))
    out = cuda.to_device(np.full(x.shape, np.nan, np.float32))  # a float32 out of a uint8 volume
    st.correlate1d(cuda.to_device(x), w, axis=1, mode="nearest", out=out)
    np.testing.assert_array_equal(out.copy_to_host(), ndi.correlate1d(x, w, axis=1, mode="nearest",
                                                                      output=np.float32))


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 3), (2, 3, 0), (0,), (1, 0, 0, 2), (3, 2, 0, 2)])
def test_empty_dims(shape):
    """No launch, scipy's (empty) result, for every axis; an empty out= is returned."""
    x = np.zeros(shape, np.float32)
    w = np.ones(3, np.float32)
    for axis in range(-len(shape), len(shape)):
        got = st.correlate1d(x, w, axis=axis)
        assert got.shape == shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, ndi.correlate1d(x, w, axis=axis))
        out = poisoned(shape, np.float32)
        assert st.correlate1d(cuda.to_device(x), w, axis=axis, out=out) is out


# ---------------------------------------------------------------------------
# the property: random N-D shapes, axes, filters, origins, modes, dtypes, kinds
# ---------------------------------------------------------------------------


@settings(max_examples=examples(20))
@given(shape=hs.lists(hs.integers(1, 4), min_size=1, max_size=4).map(tuple), k=hs.integers(1, 6),
       mode=hs.sampled_from(MODES), dtype=hs.sampled_from([np.float32, np.float64]), device=hs.booleans(),
       data=hs.data())
def test_random_volumes_within_the_bound(shape, k, mode, dtype, device, data):
    axis = data.draw(hs.integers(-len(shape), len(shape) - 1), label="axis")
    origin = data.draw(hs.integers(-(k // 2), (k - 1) // 2), label="origin")
    rng = np.random.default_rng(data.draw(hs.integers(0, 2**16), label="seed"))
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(k).astype(dtype)
    out = poisoned(shape, dtype) if device else None
    got = st.correlate1d(cuda.to_device(x) if device else x, w, axis=axis, mode=mode, cval=0.25, origin=origin,
                         out=out)
    note(f"x {x}\nw {w}\ngot {_host(got)}")
    _check(got, x, w, axis, mode, 0.25, origin, f"{shape} axis {axis} K={k}")


# ---------------------------------------------------------------------------
# the view, the launches, the plan
# ---------------------------------------------------------------------------


def test_volume_view():
    assert _args.volume_view((3, 4), 0) == (None, 0)  # a 2-D image: itself, as before
    assert _args.volume_view((3, 4), 1) == (None, 1)
    assert _args.volume_view((5,), 0) == ((1, 1, 5), 1)
    assert _args.volume_view((2, 3, 4), 0) == ((1, 2, 12), 0)
    assert _args.volume_view((2, 3, 4), 1) == ((2, 3, 4), 0)
    assert _args.volume_view((2, 3, 4), 2) == ((1, 6, 4), 1)
    assert _args.volume_view((2, 3, 4, 5), 1) == ((2, 3, 20), 0)
    assert _args.volume_view((2, 3, 1, 1), 1) == ((1, 2, 3), 1)


def kernel_name(kernel) -> str:
    """The Python name of a launched kernel: its function's (the simulator's kernel, a GPU kernel compiled in
    this process) or, for a GPU kernel Numba rebuilt from its disk cache (no function kept), the
    ``conv2d_*`` identifier in its mangled entry name (each identifier there follows its length; not yet
    run on a GPU with a disk-cached kernel: session 34's GPU pass found the missing ``py_func``)."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    if fn is not None:
        return fn.__name__
    entry = kernel.entry_name
    names = [entry[m.end():m.end() + int(m.group())] for m in re.finditer(r"\d+", entry)]
    # the name, without a unique suffix Numba may append ("_241…"): k-number, then words
    return next(re.match(r"conv2d_[a-z0-9]+(?:_[a-z]+)*", n).group() for n in names if n.startswith("conv2d_"))


def kernel_launches(monkeypatch) -> list:
    """The kernel launches made from now on, as ``(kernel name, grid (x, y, z), image shape)``: the
    launch hook :mod:`simt_tiles.launch` puts on every kernel call (device functions, called in the
    simulator through the same class, have no grid)."""
    seen = []

    def record(kernel, args, grid, block, stream, shared):
        if grid is not None:
            seen.append((kernel_name(kernel), launch._dim3(grid), tuple(args[0].shape)))

    monkeypatch.setattr(launch, "_on_launch", record)
    return seen


def test_launches_per_axis(monkeypatch):
    """One launch per axis (the docstring): the first and the last axis one 2-D problem, a middle
    axis its ``outer`` slices on grid z; a rung that takes no slices launches once per slice."""
    seen = kernel_launches(monkeypatch)
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    k10, stacked = "conv2d_k10_runtime_weights", "conv2d_k10_runtime_weights_slices"
    # (kernel, grid z: the slices, the image as launched); x and y follow the preset's tile
    for axis, launches in ((0, [(k10, 1, (2, 60))]), (1, [(stacked, 2, (2, 3, 20))]),
                           (2, [(stacked, 6, (6, 4, 5))]), (-1, [(k10, 1, (24, 5))])):
        seen.clear()
        st.correlate1d(x, np.ones(2, np.float32), axis=axis, mode="wrap")
        assert [(name, grid[2], shape) for name, grid, shape in seen] == launches, axis
    seen.clear()
    st.correlate1d(x[0], np.ones(2, np.float32), axis=0, variant="k02_halo_tiled", mode="wrap")
    assert [(name, grid[2], shape) for name, grid, shape in seen] == [("conv2d_k02_halo_tiled", 1, (3, 20))]
    seen.clear()
    st.correlate1d(x, np.ones(2, np.float32), axis=2, variant="k02_halo_tiled", mode="wrap")
    assert [(name, grid[2], shape) for name, grid, shape in seen] == [("conv2d_k02_halo_tiled", 1, (4, 5))] * 6


# ---------------------------------------------------------------------------
# a middle axis in one launch: the slices on grid z (session 34)
# ---------------------------------------------------------------------------

# (shape, axis, K, origin, variant, dtype): outer prime or not a multiple of the tiles, size-1 axes
MIDDLE = [
    ((5, 7, 3), 1, 3, 1, None, np.float32),  # outer 5, k10 kernel parameters
    ((7, 2, 3, 5), 1, 4, -2, None, np.float64),  # 4-D, outer 7, inner 15
    ((3, 5, 2, 2), -2, 2, 0, None, np.float32),  # 4-D, outer 15, inner 2
    ((11, 1, 3), 1, 5, 2, None, np.float64),  # an axis of length 1 (every tap reflected)
    ((3, 4, 1, 2), 1, 1, 0, None, np.float32),  # a size-1 axis after it
    ((2, 13, 3), 1, 9, -4, None, np.float64),  # K 9: variant=None's rung past 7 taps (k03)
    ((3, 5, 7), 1, 3, 0, "k01_naive", np.float32),  # the fallback rung
]


@pytest.mark.parametrize("shape, axis, k, origin, variant, dtype", MIDDLE,
                         ids=[f"{'x'.join(map(str, c[0]))}-axis{c[1]}-K{c[2]}" for c in MIDDLE])
def test_middle_axis_is_one_launch_equal_to_scipy(monkeypatch, shape, axis, k, origin, variant, dtype):
    """NumPy in, then device image and filter (k10 stages it) into a NaN-filled out=: scipy's
    numbers (within the reference's bound), one launch of the rung's stack each."""
    seen = kernel_launches(monkeypatch)
    rng = np.random.default_rng(sum(shape) + k)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(k).astype(dtype)
    mode = MODES[(sum(shape) + k) % len(MODES)]
    outer = int(np.prod(shape[:axis % len(shape)]))
    _check(st.correlate1d(x, w, axis=axis, mode=mode, cval=0.75, origin=origin, variant=variant),
           x, w, axis, mode, 0.75, origin, f"{mode} numpy")
    out = poisoned(shape, dtype)
    st.correlate1d(cuda.to_device(x), cuda.to_device(w), axis=axis, mode=mode, cval=0.75, origin=origin,
                   variant=variant, out=out)
    _check(out, x, w, axis, mode, 0.75, origin, f"{mode} device")
    assert [(name.endswith("_slices"), grid[2]) for name, grid, _ in seen] == [(True, outer)] * 2


def test_integer_volume_middle_axis():
    """A uint8 volume's middle axis (its conversions around the one filter launch): scipy's result
    bit for bit, as uint8 and with ``output=np.int16``."""
    rng = np.random.default_rng(34)
    x = rng.integers(0, 256, (5, 3, 2, 3)).astype(np.uint8)
    w = np.array([2.0, -1.0, 3.0])
    for axis, mode in ((1, "mirror"), (2, "constant")):
        np.testing.assert_array_equal(st.correlate1d(x, w, axis=axis, mode=mode, cval=7.0),
                                      ndi.correlate1d(x, w, axis=axis, mode=mode, cval=7.0))
        got = st.correlate1d(cuda.to_device(x), w, axis=axis, mode=mode, output=np.int16)
        np.testing.assert_array_equal(got.copy_to_host(), ndi.correlate1d(x, w, axis=axis, mode=mode,
                                                                          output=np.int16))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_more_slices_than_grid_z_launch_in_pieces(monkeypatch, dtype):
    """Past CUDA's 65535 slices on grid z (here a cap of 2): pieces of at most the cap, each on its
    own slices (5 = 2 + 2 + 1), a NumPy filter (parameters) and a device one (staged)."""
    monkeypatch.setattr(_common, "MAX_GRID_Z", 2)
    seen = kernel_launches(monkeypatch)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 3, 4)).astype(dtype)
    w = rng.standard_normal(3).astype(dtype)
    for weights in (w, cuda.to_device(w)):
        seen.clear()
        out = poisoned(x.shape, dtype)
        st.correlate1d(cuda.to_device(x), weights, axis=1, mode="wrap", origin=-1, out=out)
        _check(out, x, w, 1, "wrap", 0.0, -1)
        assert [(grid[2], shape) for _, grid, shape in seen] == [(2, (2, 3, 4)), (2, (2, 3, 4)), (1, (1, 3, 4))]


@pytest.mark.parametrize("shape, view", [((3, 4, 7), (3, 4, 7)), ((2, 3, 2, 9), (6, 2, 9)), ((5, 2, 6), (5, 2, 6)),
                                         ((3, 5, 7), (1, 15, 7))], ids=str)
def test_last_axis_past_the_grid_rows_is_a_stack_of_slices(monkeypatch, shape, view):
    """More rows than grid y takes (CUDA's 65535; here a cap of 4), filtered along the last axis: the
    trailing slices that fit, on grid z (rows along axis 1 are independent, so the cut is exact); when no
    trailing dimension fits (5 > 4), the one 2-D problem as before."""
    assert _args.volume_view((2048, 2048, 64), 2) == ((2048, 2048, 64), 1)  # the real cap: 2048 rows a slice
    monkeypatch.setattr(_args, "MAX_ROWS", 4)
    seen = kernel_launches(monkeypatch)
    assert _args.volume_view(shape, len(shape) - 1) == (view, 1)
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    for mode in ("reflect", "wrap"):
        seen.clear()
        out = poisoned(shape, np.float32)
        st.correlate1d(cuda.to_device(x), w, axis=-1, mode=mode, origin=1, out=out)
        _check(out, x, w, len(shape) - 1, mode, 0.0, 1)
        stacked = view[0] > 1
        assert [(name.endswith("_slices"), grid[2], s) for name, grid, s in seen] == [
            (stacked, view[0] if stacked else 1, view if stacked else view[1:])]


def test_a_2d_problem_past_the_grid_rows_is_refused_naming_the_image(monkeypatch):
    """A 2-D problem of more row tiles than CUDA's grid y (65535; here 2) fails before any launch with a
    ValueError naming ``image`` and the way out (the driver's own error said neither); ``out`` untouched."""
    monkeypatch.setattr(_common, "MAX_GRID_Y", 2)
    x = np.random.default_rng(3).standard_normal((100, 8)).astype(np.float32)
    for call in (lambda out: st.correlate2d(x, np.ones((3, 3), np.float32), out=out),
                 lambda out: st.correlate1d(x, np.ones(3, np.float32), axis=-1, out=out)):
        out = poisoned(x.shape, np.float32)
        with pytest.raises(ValueError, match=r"^image: 100 rows are \d+ tiles of .* CUDA's grid y, past its 2; "):
            call(out)
        assert np.isnan(out.copy_to_host()).all()


def test_middle_axis_plan_replays_on_the_same_arrays(monkeypatch):
    """The same device arrays again (out re-poisoned in place): the recorded plan of the stack's
    launches — one, or three pieces under a cap of 2 — replays and writes every element again."""
    before = launch.set_enabled(True)
    launch.clear()
    device_copies.clear()
    try:
        rng = np.random.default_rng(12)
        x = rng.standard_normal((5, 4, 3)).astype(np.float32)
        w = np.array([0.25, -1.0, 2.0, 0.5], np.float32)
        xd, wd, out = cuda.to_device(x), cuda.to_device(w), poisoned(x.shape, np.float32)
        for cap in (65535, 2):
            monkeypatch.setattr(_common, "MAX_GRID_Z", cap)
            launch.clear()
            hits = launch.stats()["hit"]
            for _ in range(3):
                out.copy_to_device(np.full(x.shape, np.nan, np.float32))
                assert st.correlate1d(xd, wd, axis=1, mode="reflect", origin=-1, out=out) is out
                _check(out, x, w, 1, "reflect", 0.0, -1, f"cap {cap}")
            assert launch.stats()["hit"] == hits + 2, cap
            (plan,) = launch._PLANS.values()
            assert len(plan.launches) == (1 if cap > 5 else 3)
    finally:
        launch.set_enabled(before)
        launch.clear()
        device_copies.clear()


def test_rungs_that_take_slices_gate_them():
    """A rung that takes a stack (``FilterRung.slices``) builds it in the compile gate, and only
    those: every variant=None choice for a volume's middle axis is one (k10, k03, k01)."""
    for name, rung in dispatch.RUNGS.items():
        gated = any(p.get("slices") for p in rung.gate.params)
        assert gated == rung.slices, name
    assert {dispatch.BEST_VARIANT, dispatch.SHAPE_VARIANT, dispatch.FALLBACK_VARIANT} <= \
        {n for n, r in dispatch.RUNGS.items() if r.slices}


@pytest.mark.parametrize("variant", [n for n, r in dispatch.RUNGS.items() if r.slices])
def test_stack_arguments_fit_the_stack_signature(variant):
    """What a stack's binding passes has the dimensions its compiled signature declares (the simulator
    does not check them; a GPU launch, or a plan's flattened arguments, would go wrong), for a NumPy
    filter (k10: kernel parameters) and a device one; both kinds of slices call."""
    from numba import types

    rung = dispatch.RUNGS[variant]
    x = cuda.to_device(np.zeros((3, 5, 4), np.float32))
    for w in (np.ones((3, 1), np.float32), cuda.to_device(np.ones((3, 1), np.float32))):
        kind = "numpy" if isinstance(w, np.ndarray) else "numba"
        call = _common.FilterCall(x, _common.Operand("weights", w, kind, w), x, 0.0, False, 0, all_taps=True)
        spec = _common.specialise(rung.resolve_config("sim"), 3, 1, _common.Mode.REFLECT)
        _, args = rung.bind(rung, spec, np.float32, call)
        sig = rung.signature(np.float32, slices=True)
        assert [len(a.shape) for a, t in zip(args, sig.args) if isinstance(t, types.Array)] == \
            [t.ndim for t in sig.args if isinstance(t, types.Array)], (variant, kind)


def test_planted_piece_offset_bug_is_caught(monkeypatch):
    """Each piece writing the first slices of out (a wrong z offset): the checks above fail."""
    def wrong(self, most):  # each piece's out starts at slice 0
        return [dataclasses.replace(self, image=self.image[z:z + most], out=self.out[:min(most, self.slices - z)])
                for z in range(0, self.slices, most)]

    monkeypatch.setattr(_common.FilterCall, "pieces", wrong)
    with pytest.raises(AssertionError):
        test_more_slices_than_grid_z_launch_in_pieces(monkeypatch, np.float32)


def test_volume_device_calls_replay():
    """A 3-D device call (float, and uint8 with its conversions) records a plan of one launch per
    slice that replays on new arrays."""
    before = launch.set_enabled(True)
    launch.clear()
    device_copies.clear()
    try:
        rng = np.random.default_rng(4)
        w = cuda.to_device(np.array([0.5, -1.0, 2.0], np.float32))
        for dtype in (np.float32, np.uint8):
            hits = launch.stats()["hit"]
            for _ in range(3):
                x = (rng.standard_normal((3, 4, 2)) * 40).astype(dtype)
                got = st.correlate1d(cuda.to_device(x), w, axis=-2, mode="reflect", origin=1).copy_to_host()
                expect = ndi.correlate1d(x, w.copy_to_host(), axis=-2, mode="reflect", origin=1)
                if dtype is np.uint8:
                    np.testing.assert_array_equal(got, expect)
                else:
                    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)
            assert launch.stats()["hit"] >= hits + 2, dtype
    finally:
        launch.set_enabled(before)
        device_copies.clear()


# ---------------------------------------------------------------------------
# errors name the argument
# ---------------------------------------------------------------------------


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(axis=3), ValueError, r"axis: expected an int in \[-3, 2\] for a 3-D image; got 3"),
        (dict(axis=-4), ValueError, r"axis: expected an int in \[-3, 2\] for a 3-D image; got -4"),
        (dict(image=_ones(4), axis=1), ValueError, r"axis: expected an int in \[-1, 0\] for a 1-D image; got 1"),
        (dict(image=_ones(2, 2, 2, 2), axis=4), ValueError,
         r"axis: expected an int in \[-4, 3\] for a 4-D image; got 4"),
        (dict(axis=1.0), TypeError, r"axis: expected an int; got float 1.0"),
        (dict(image=np.array(1, np.float32)), ValueError, r"image: expected an array of at least 1 dimension; got 0-D"),
        (dict(out=np.empty((2, 3), np.float32)), ValueError, r"out: expected shape \(2, 3, 4\); got \(2, 3\)"),
    ],
)
def test_bad_volume_arguments(kwargs, exc, pattern):
    args = dict(image=_ones(2, 3, 4), weights=_ones(3))
    args.update(kwargs)
    with pytest.raises(exc, match=pattern):
        st.correlate1d(**args)


def test_non_contiguous_device_volume():
    """As for a 2-D device array: a C-contiguous copy is the caller's to make."""
    with pytest.raises(ValueError, match=r"image: expected a C-contiguous device array"):
        st.correlate1d(transposed(cuda.to_device(_ones(2, 4, 3)), (0, 2, 1)), _ones(3), axis=1)


@pytest.mark.parametrize("f, args", [(st.correlate2d, (_ones(3, 3),)), (st.convolve2d, (_ones(3, 3),)),
                                     (st.correlate_separable, (_ones(3), _ones(3)))])
def test_2d_filters_point_volumes_to_correlate1d(f, args):
    with pytest.raises(ValueError, match=r"image: expected a 2-D array; got 3-D with shape \(2, 3, 4\) "
                                         r"\(.*simt_tiles\.correlate1d\)"):
        f(_ones(2, 3, 4), *args)
    with pytest.raises(ValueError, match=r"image: expected a 2-D array; got 3-D"):
        f(cuda.to_device(_ones(2, 3, 4)), *args)


# ---------------------------------------------------------------------------
# the planted bug: the volume's axis mapped wrong
# ---------------------------------------------------------------------------


def test_planted_axis_mapping_bug_is_caught(monkeypatch):
    """The middle axis filtered as if it were the last (inner taken as 1): the checks above fail."""
    right = _args.volume_view

    def wrong(shape, axis):
        volume, a = right(shape, axis)
        if volume is None or a == 1:
            return volume, a
        n, h, w = volume
        return (1, n * h, w), 1  # the bug: (outer·L, inner) filtered along its rows

    monkeypatch.setattr(_args, "volume_view", wrong)
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    w = np.array([1.0, 2.0, -1.0])
    with pytest.raises(AssertionError):
        _check(st.correlate1d(x, w, axis=1, mode="wrap"), x, w, 1, "wrap")
    with pytest.raises(AssertionError):
        test_volumes_every_axis_equal_scipy("reflect")
