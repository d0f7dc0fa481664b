"""simt_tiles.reduce against NumPy: every axis form, keepdims, every operator, both dtypes, N-D,
NaN/±inf/ties/empty axes; sums and means within a bound from the arithmetic, the rest exact."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
from simt_tiles.bounds import gamma, unit_roundoff
from simt_tiles.kernels.reduce import REDUCE_OPS, RUNGS, dispatch
from simt_tiles.kernels.reduce._common import ReduceConfig
from simt_tiles.kernels.reduce.k02_axis_lanes import Config as LanesConfig
from simt_tiles.kernels.reduce.k03_flat_lanes import Config as FlatConfig
from simt_tiles.runtime import SIMULATOR

from .common import DTYPES, configs, edge_sizes
from .profiles import PROFILE

K01_CONFIGS = (st.builds(ReduceConfig, st.sampled_from([32, 64]), st.integers(1, 4), st.integers(1, 3),
                         st.sampled_from([32, 64])) if SIMULATOR else
               st.builds(ReduceConfig, st.sampled_from([32, 128, 256, 1024]), st.sampled_from([1, 7, 132, 1056]),
                         st.sampled_from([1, 3, 8]), st.sampled_from([64, 256, 512])))
#: k02's lanes, lane axis and warps per output are the dispatch's: threads and loads vary
K02_CONFIGS = st.builds(LanesConfig, threads=st.sampled_from([32, 64, 128] if SIMULATOR else [64, 256, 1024]),
                        loads=st.sampled_from([1, 2, 3] if SIMULATOR else [1, 4, 8]))


def sum_bound(x: np.ndarray, axis, mean=False):
    """(reference, bound): float64 accumulation (any order, any splits: γ_n(2⁻⁵³)·Σ|x|), one final
    rounding to x's dtype (u·|ref|); the mean's 1/count and its product add 2 float64 roundings."""
    xl = x.astype(np.longdouble)
    n = x.size if axis is None else math.prod(x.shape[a] for a in (axis if isinstance(axis, tuple) else (axis,)))
    ref = np.sum(xl, axis=axis)
    bound = (gamma(max(n, 1), 2.0**-53) + gamma(max(n, 1), unit_roundoff(np.longdouble))) * np.sum(np.abs(xl), axis=axis)
    if mean:
        ref, bound = ref / n, bound / n + 3 * 2.0**-53 * np.abs(ref / n)
    return ref, (bound + unit_roundoff(x.dtype) * np.abs(ref)) * (1 + 1e-6)


def assert_matches_numpy(x, op, axis, keepdims, got):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expect = getattr(np, op)(x, axis=axis, keepdims=keepdims)
    got = np.asarray(got)
    assert got.shape == np.shape(expect) and got.dtype == np.asarray(expect).dtype, (got.shape, got.dtype)
    if op in ("sum", "mean"):
        ref, bound = sum_bound(x, axis, mean=op == "mean")
        ref, bound = np.reshape(ref, got.shape), np.reshape(bound, got.shape)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expect))
        fin = np.isfinite(ref)
        np.testing.assert_array_equal(got[~fin & ~np.isnan(got)], np.asarray(expect)[~fin & ~np.isnan(got)])
        with np.errstate(invalid="ignore"):
            assert np.all(np.abs(got[fin].astype(np.longdouble) - ref[fin]) <= bound[fin])
    else:
        np.testing.assert_array_equal(got, expect)  # exact: NaN where NumPy has NaN, NumPy's index


def axis_forms(nd: int, arg: bool) -> list:
    forms = [None, *range(-nd, nd)]
    if not arg:
        forms += [(), *((a, b) for a in range(nd) for b in range(a + 1, nd))]
    return forms


@given(data=st.data())
def test_reduce_matches_numpy_on_every_axis_form(data):
    config = data.draw(configs(RUNGS["k02_axis_lanes"], K02_CONFIGS), "config")
    op = data.draw(st.sampled_from(REDUCE_OPS), "op")
    dtype = data.draw(st.sampled_from(DTYPES), "dtype")
    sizes = [0, 1, 2, 3, 5, 33] if SIMULATOR else [0, 1, 7, 33, 257, 1031]
    shape = tuple(data.draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=3), "shape"))
    if data.draw(st.booleans(), "a long axis (split across blocks)"):
        shape = (*shape[:-1], data.draw(st.sampled_from([300, 513] if SIMULATOR else [70001, 300007])))
    assume(math.prod(shape) <= 2**24)  # (33, 1031, 300007) float64 is 82 GB: 8 workers' host memory
    axis = data.draw(st.sampled_from(axis_forms(len(shape), op.startswith("arg"))), "axis")
    keepdims = data.draw(st.booleans(), "keepdims")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    if data.draw(st.booleans(), "small integers (ties)"):
        x = rng.integers(-3, 4, shape).astype(dtype)
    else:
        x = (rng.standard_normal(shape) * data.draw(st.sampled_from([1.0, 1e6]), "scale")).astype(dtype)
    for v in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=2), "specials"):
        if x.size:
            x.flat[rng.integers(x.size)] = v
    note(f"x={x!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            getattr(np, op)(x, axis=axis, keepdims=keepdims)
    except ValueError:
        with pytest.raises(ValueError, match="x: zero-size array"):
            simt_tiles.reduce(x, op, axis=axis, keepdims=keepdims, config=config)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty slice, as NumPy
        got = simt_tiles.reduce(x, op, axis=axis, keepdims=keepdims, config=config)
    assert_matches_numpy(x, op, axis, keepdims, got)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
@given(data=st.data())
def test_k01_matches_numpy(op, data):
    config = data.draw(configs(RUNGS["k01_warp_shuffle"], K01_CONFIGS), "config")
    axis = data.draw(st.sampled_from([None, -1]), "axis")
    sizes = edge_sizes(config.threads, config.threads * config.loads)
    shape = (data.draw(st.sampled_from([1, 2, 3] if SIMULATOR else [1, 5, 64])), data.draw(st.sampled_from(sizes)))
    if op != "sum" and shape[-1] == 0:
        return
    dtype = data.draw(st.sampled_from(DTYPES), "dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x = rng.standard_normal(shape).astype(dtype)
    if op != "sum" and data.draw(st.booleans(), "plant NaN"):
        x[rng.integers(shape[0]), rng.integers(shape[1])] = np.nan
    got = simt_tiles.reduce(x, op, axis=axis, variant="k01_warp_shuffle", config=config)
    assert_matches_numpy(x, op, axis, False, got)


def test_device_result_into_a_poisoned_out_and_keepdims():
    x = np.random.default_rng(0).standard_normal((3, 40, 5)).astype(np.float32)
    for op, dt in (("max", np.float32), ("argmin", np.int64), ("mean", np.float32)):
        out = cuda.to_device(np.full((3, 1, 5), np.nan if dt == np.float32 else -1, dt))
        assert simt_tiles.reduce(cuda.to_device(x), op, axis=1, keepdims=True, out=out) is out
        assert_matches_numpy(x, op, 1, True, out.copy_to_host())


def test_argmax_takes_the_first_index_and_the_first_nan():
    x = np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 9], [-np.inf] * 4, [0.0, -0.0, 0.0, -1]], np.float32)
    for op in ("argmax", "argmin"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(simt_tiles.reduce(x, op, axis=axis), getattr(np, op)(x, axis=axis))


def test_whole_array_result_kinds():
    x = np.arange(10, dtype=np.float32)
    r = simt_tiles.reduce(x)
    assert isinstance(r, np.float32) and r == 45
    assert isinstance(simt_tiles.reduce(x, "argmax"), np.int64) and simt_tiles.reduce(x, "argmax") == 9
    d = simt_tiles.reduce(cuda.to_device(x))
    assert d.shape == () and d.copy_to_host() == 45
    out = cuda.to_device(np.full((), np.nan, np.float32))
    assert simt_tiles.reduce(x, "max", out=out) is out and out.copy_to_host() == 9


def test_a_zero_d_array_reduces_to_its_value():
    """NumPy (and torch) reduce a 0-d array over no axes: its value (argmax 0); an axis is out of bounds."""
    x = np.array(-2.5, np.float32)
    for op in ("sum", "mean", "max", "min", "argmax", "argmin"):
        for kd in (False, True):
            got, expect = simt_tiles.reduce(x, op, keepdims=kd), getattr(np, op)(x, keepdims=kd)
            assert type(got) is type(expect) and got == expect, (op, kd, got)
    assert simt_tiles.reduce(np.float64(7), axis=()) == 7
    out = cuda.to_device(np.full((), np.nan, np.float32))
    assert simt_tiles.reduce(cuda.to_device(x), "max", out=out) is out and out.copy_to_host() == -2.5
    for op in ("sum", "max", "argmin"):  # NumPy's rule: an int 0 or -1 too, but for mean
        for axis in (0, -1):
            assert simt_tiles.reduce(x, op, axis=axis) == getattr(np, op)(x, axis=axis)
    for op, axis in (("sum", (0,)), ("sum", 1), ("mean", 0), ("mean", -1)):
        with pytest.raises(ValueError, match="^axis: .* out of bounds for an array of 0 dimensions"):
            simt_tiles.reduce(x, op, axis=axis)


def test_empty_axes_as_numpy():
    assert simt_tiles.reduce(np.zeros((0,), np.float32)) == 0
    np.testing.assert_array_equal(simt_tiles.reduce(np.zeros((3, 0), np.float32), axis=-1), np.zeros(3))
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(simt_tiles.reduce(np.zeros((0,), np.float32), "mean"))
    with pytest.raises(ValueError, match="zero-size array to reduction operation max which has no identity"):
        simt_tiles.reduce(np.zeros((0,), np.float32), "max")
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        simt_tiles.reduce(np.zeros((2, 0), np.float32), "argmax", axis=1)
    assert simt_tiles.reduce(np.zeros((0, 3), np.float32), "argmax", axis=1).shape == (0,)
    # an empty reduced axis with outputs left: reduced run by run, a pass met zero outputs (ZeroDivisionError);
    # every lanes rung and the default write the identity (mean: NaN) to each output
    x = np.ones((0, 128, 0), np.float32)
    for variant in (None, "k02_axis_lanes", "k03_flat_lanes"):
        np.testing.assert_array_equal(simt_tiles.reduce(x, axis=(0, 2), variant=variant), np.zeros(128))
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            assert np.isnan(simt_tiles.reduce(x, "mean", axis=(0, 2), keepdims=True, variant=variant)).all()


def test_the_mean_of_an_empty_slice_warns_on_every_call_with_plans():
    """NumPy's warning on each call, at the caller's line: the call makes no launch plan (a replay would skip the
    warning) and the recording's extra frame is counted (it named simt_tiles/devices.py)."""
    from simt_tiles import launch

    before = launch.set_enabled(True)
    launch.clear()
    try:
        e = cuda.device_array((3, 0), np.float32)
        for _ in range(3):
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                assert np.isnan(simt_tiles.reduce(e, "mean", axis=1).copy_to_host()).all()
            assert [(w.filename, str(w.message)) for w in got] == [(__file__, "Mean of empty slice")]
    finally:
        launch.set_enabled(before)


def test_split_sums_are_deterministic():
    # the smallest length this machine's plan splits (600 in the simulator; more SMs ask for a longer one)
    n = next(n for n in (600, 60_000, 6_000_000)
             if len(dispatch.plan((n,), (0,), "sum", 0, np.float32, variant="k02_axis_lanes").steps) == 2)
    x = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    a, b = (simt_tiles.reduce(x, variant="k02_axis_lanes") for _ in range(2))
    assert a.tobytes() == b.tobytes()


def test_bad_input():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"op: expected one of \('sum', 'mean', 'max', 'min', 'argmax', 'argmin'\); got 'prod'"):
        simt_tiles.reduce(x, "prod")
    with pytest.raises(ValueError, match=r"axis: 2 is out of bounds for an array of 2 dimensions"):
        simt_tiles.reduce(x, axis=2)
    with pytest.raises(ValueError, match=r"axis: repeated axis in \(0, -2\)"):
        simt_tiles.reduce(x, axis=(0, -2))
    with pytest.raises(TypeError, match=r"axis: argmax/argmin take None or one int"):
        simt_tiles.reduce(x, "argmax", axis=(0,))
    with pytest.raises(TypeError, match=r"axis: expected None, an int or a tuple of ints; got 0.5"):
        simt_tiles.reduce(x, axis=0.5)
    with pytest.raises(TypeError, match=r"keepdims: expected a bool; got 1"):
        simt_tiles.reduce(x, keepdims=1)
    with pytest.raises(TypeError, match="x: expected dtype float32, float64, float16 or bfloat16; got int32"):
        simt_tiles.reduce(np.ones(3, np.int32))
    with pytest.raises(ValueError, match=r"out: expected shape \(2,\); got \(3,\)"):
        simt_tiles.reduce(x, axis=-1, out=np.empty(3, np.float32))
    with pytest.raises(TypeError, match=r"out: expected dtype int64; got float32"):
        simt_tiles.reduce(x, "argmax", axis=-1, out=np.empty(2, np.float32))
    with pytest.raises(ValueError, match=r"variant: k01_warp_shuffle reduces the whole array or the last axis"):
        simt_tiles.reduce(x, axis=0, variant="k01_warp_shuffle")


def test_sum_bound_can_fail():
    x = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    ref, bound = sum_bound(x, None)
    assert abs(np.float32(ref) - ref) <= bound
    assert not abs(np.float32(ref) + 4 * np.spacing(np.float32(ref)) - ref) <= bound


def test_workspaces_are_per_host_thread():
    """Two host threads' calls would interleave their kernels on a shared stream (and the
    per-thread default stream is one handle for many streams): each thread gets its own partials
    buffer; one thread reuses its own (reduce's and the split-K matmul's)."""
    import threading

    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    got = {}

    def grab(name):
        got[name] = (dispatch.workspace((64,), np.float64, 0, "t"), k11.workspace((4, 8), np.float32, 0))

    grab("main")
    assert dispatch.workspace((64,), np.float64, 0, "t") is got["main"][0]
    assert k11.workspace((4, 8), np.float32, 0) is got["main"][1]
    t = threading.Thread(target=grab, args=("other",))
    t.start()
    t.join()
    assert got["other"][0] is not got["main"][0] and got["other"][1] is not got["main"][1]


def _steps(shape, axes, op="sum", code=0):
    p = dispatch.plan(shape, axes, op, code, np.float32, config="default", sms=132, min_steps=4)
    if p.rung.name == "k01_warp_shuffle":
        return "k01"
    return [(s.view, s.config.lanes, s.config.wpo, s.splits) for s in p.steps]


#: shape, axes → the passes ((outer, n, inner), lanes, warps per output group, splits) on the
#: H200's 132 SMs: the measured zoo problems (benchmarks/notes/patterns_zoo.md) and shapes between
RULES = {
    ((2**20, 64), (1,)): [((2**20, 64, 1), 8, 1, 1)],  # short rows: 4 to a warp
    ((2**20, 5), (1,)): [((2**20, 5, 1), 1, 1, 1)],
    # long rows: k01's block a row while there are 2 to 8 a SM (k01_rows_probe: 26% / 3% / 3% ahead at 2, 3.9
    # and 7.8 a SM), else k03 (3% / 9% / 5% / 2.1x ahead at 15.5, 62, 124, 993 a SM)
    ((264, 65536), (1,)): "k01", ((512, 262144), (1,)): "k01", ((1055, 4096), (1,)): "k01",
    ((1056, 4096), (1,)): [((1056, 4096, 1), 32, 8, 1)],  # 8 a SM: a block's warps a row
    # more rows: the warps a row that fill 64 a SM, unsplit (small_reduce_probe s28, µs before → after:
    # 2048x4096 21.4 → 15.9 at 4, 4096x4096 37.0 → 26.4 at 2, 8192x2048 45.8 → 26.1 at 1)
    ((1057, 4096), (1,)): [((1057, 4096, 1), 32, 4, 1)], ((2048, 4096), (1,)): [((2048, 4096, 1), 32, 4, 1)],
    ((2048, 65536), (1,)): [((2048, 65536, 1), 32, 4, 1)],
    ((4096, 4096), (1,)): [((4096, 4096, 1), 32, 2, 1)], ((4096, 1000), (1,)): [((4096, 1000, 1), 32, 2, 1)],
    ((4096, 50257), (1,)): [((4096, 50257, 1), 32, 2, 1)],
    ((8192, 2048), (1,)): [((8192, 2048, 1), 32, 1, 1)], ((8447, 2048), (1,)): [((8447, 2048, 1), 32, 1, 1)],
    ((16384, 16384), (1,)): [((16384, 16384, 1), 32, 1, 1)],  # a warp a row
    ((131072, 2048), (1,)): [((131072, 2048, 1), 32, 1, 1)],
    ((200, 50257), (1,)): [((200, 50257, 1), 32, 8, 6), ((1, 6, 200), 1, 1, 1)],  # fewer: split
    ((2**28,), (0,)): "k01", ((64, 1024, 256), (0, 1, 2)): "k01",  # whole arrays
    ((2, 2**27), (1,)): [((2, 2**27, 1), 32, 8, 528), ((1, 528, 2), 16, 8, 1)],
    ((4096, 4096), (0,)): [((1, 4096, 4096), 1, 8, 9), ((1, 9, 4096), 1, 8, 1)],
    ((2**22, 4), (0,)): [((1, 2**22, 4), 8, 8, 1024), ((1, 1024, 4), 8, 8, 1)],
    ((8, 16, 32), (0, 2)): [((128, 32, 1), 4, 1, 1), ((1, 8, 16), 2, 1, 1)],  # the last run first, then (0,)
    ((1000,), (0,), "mean"): [((1, 1000, 1), 32, 8, 1)],  # one pass: no split below 4 steps per lane
}


@pytest.mark.parametrize("key", list(RULES), ids=str)
def test_dispatch_rules_between_measured_points(key):
    assert _steps(*key) == RULES[key]


@pytest.mark.parametrize("shape", [(2, 2**27), (200, 50257), (3, 1_000_003), (1, 409_999), (7, 2**20 + 5), (2**24 + 3,)],
                         ids=str)
def test_split_rows_are_cut_on_128_byte_lines(shape):
    """A split row's pieces are whole multiples of SPLIT_ALIGN values (each starts where a line does, when
    the row does: 2 rows of 2^27 in 528 pieces of 254,201 values ran at 82% of the copy), and they cover
    the row exactly: S pieces, the last one non-empty."""
    p = dispatch.plan(shape, (len(shape) - 1,), "argmax", 3, np.float32, config="default", sms=132, min_steps=4)
    rows = [s for s in p.steps if s.view[2] == 1 and s.splits > 1]
    assert rows, [s.view for s in p.steps]
    for s in rows:
        assert s.chunk % dispatch.SPLIT_ALIGN == 0 and (s.splits - 1) * s.chunk < s.view[1] <= s.splits * s.chunk


# --- k03_flat_lanes: k02's plan over the flat memory (unchecked full steps, one checked tail) ---

#: k03's lanes, lane axis and warps per output are the dispatch's (k02's rule): threads and loads vary
K03_CONFIGS = st.builds(FlatConfig, threads=st.sampled_from([32, 64, 128] if SIMULATOR else [64, 256, 1024]),
                        loads=st.sampled_from([1, 2, 3] if SIMULATOR else [1, 4, 8]))


def _fill(data, rng, shape, dtype):
    """Normal values (two scales), small integers (ties) or mostly ±inf (the arg ops' identities), then NaN/±inf."""
    kind = data.draw(st.sampled_from(["normal", "ties", "infinities"]), "values")
    if kind == "ties":
        x = rng.integers(-3, 4, shape).astype(dtype)
    else:
        x = (rng.standard_normal(shape) * data.draw(st.sampled_from([1.0, 1e6]), "scale")).astype(dtype)
    if kind == "infinities":
        x[rng.random(shape) < 0.9] = data.draw(st.sampled_from([-np.inf, np.inf]), "infinity")
    for v in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=3), "specials"):
        if x.size:
            x.flat[rng.integers(x.size)] = v
    return x


@given(data=st.data())
def test_k03_matches_numpy_on_every_axis_form(data):
    """Every op × axis form × keepdims × dtype on N-D shapes whose reduced lengths sit around the
    rung's steps (a lane's LOADS, G·LOADS for the lanes rows get, the block's span), NaN/±inf, a
    NaN-poisoned ``out=`` or none; several warps."""
    config = data.draw(configs(RUNGS["k03_flat_lanes"], K03_CONFIGS), "config")
    op = data.draw(st.sampled_from(REDUCE_OPS), "op")
    dtype = data.draw(st.sampled_from(DTYPES), "dtype")
    small = [0, 1, 2, 3, 5, 7] if SIMULATOR else [0, 1, 7, 33, 257]
    shape = data.draw(st.lists(st.sampled_from(small), min_size=1, max_size=3), "shape")
    if data.draw(st.booleans(), "an axis around a step"):
        nw, ld = config.threads // 32, config.loads
        long = edge_sizes(ld, 4 * ld, 32 * ld, 32 * nw * ld)
        long = [n for n in long if n <= (800 if SIMULATOR else 300_007)] + ([] if SIMULATOR else [70001])
        shape.insert(data.draw(st.integers(0, len(shape)), "where"), data.draw(st.sampled_from(long), "length"))
    shape = tuple(shape)
    assume(math.prod(shape) <= (1600 if SIMULATOR else 2**22))
    axis = data.draw(st.sampled_from(axis_forms(len(shape), op.startswith("arg"))), "axis")
    keepdims = data.draw(st.booleans(), "keepdims")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x = _fill(data, rng, shape, dtype)
    note(f"x={x!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expect = np.asarray(getattr(np, op)(x, axis=axis, keepdims=keepdims))
    except ValueError:
        with pytest.raises(ValueError, match="x: zero-size array"):
            simt_tiles.reduce(x, op, axis=axis, keepdims=keepdims, variant="k03_flat_lanes", config=config)
        return
    out = None
    if data.draw(st.booleans(), "out= (NaN-poisoned)"):
        out = cuda.to_device(np.full(expect.shape, -1 if expect.dtype == np.int64 else np.nan, expect.dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty slice, as NumPy
        got = simt_tiles.reduce(x, op, axis=axis, keepdims=keepdims, out=out, variant="k03_flat_lanes", config=config)
    if out is not None:
        assert got is out
        got = out.copy_to_host()
    assert_matches_numpy(x, op, axis, keepdims, got)


#: reduced lengths at k03's step boundaries for FlatConfig(threads=64, loads=3) (the sim's two SMs):
#: rows get G = 1…32 lanes (one step of G·3), past 96 a block of 2 warps (span 192) and splits of
#: 192; columns of 3 (W = 2 outputs a warp, G = 16) one step of 48, then spans of 96 and splits
K03_ROW_LENGTHS = (1, 2, 3, 5, 6, 7, 11, 12, 13, 23, 24, 47, 48, 95, 96, 97, 191, 192, 193, 383, 384, 385)
K03_COLUMN_LENGTHS = (1, 2, 3, 47, 48, 49, 95, 96, 97, 191, 192, 193, 289, 290, 385)


@pytest.mark.parametrize("axis", [-1, 0], ids=["rows", "columns"])
def test_k03_every_element_at_its_step_boundaries(axis):
    """A permutation (every element distinct, integer sums exact): the full steps and the tail must
    take each element once — one step too many, or a tail skipped, changes every op."""
    config = FlatConfig(threads=64, loads=3)
    lengths = K03_ROW_LENGTHS if axis == -1 else K03_COLUMN_LENGTHS
    for t, n in enumerate(lengths):
        shape = (2, n) if axis == -1 else (n, 3)
        rng = np.random.default_rng(n)
        x = rng.permutation(math.prod(shape)).reshape(shape).astype(np.float32)
        op = ("sum", "argmax", "max", "argmin", "mean", "min")[(t + (axis == 0)) % 6]
        if op == "argmax":
            x[(Ellipsis, -1) if axis == -1 else (-1, Ellipsis)] = x.size  # the extreme in the last element
        got = simt_tiles.reduce(x, op, axis=axis, variant="k03_flat_lanes", config=config)
        assert_matches_numpy(x, op, axis, False, got)


def test_k03_arg_ops_of_infinities_nan_and_ties():
    """The cheaper in-lane rule keeps ±inf (the identity) unreplaced: an accumulator left at it
    takes its first element's index; NaN first, the first of several; ties the first index."""
    config = FlatConfig(threads=64, loads=3)
    for n in (7, 385):
        x = np.full((5, n), -np.inf, np.float32)
        x[1, n // 2:] = np.nan
        x[2, -1] = np.inf
        x[3] = 7.0
        x[4, ::2] = np.inf
        for a in (1, 0):
            xa = np.ascontiguousarray(x if a == 1 else x.T)
            for op in ("argmax", "argmin"):
                for xs in (xa,) if PROFILE == "ci" else (xa, -xa):  # ci budget: the negated rows 18 s
                    np.testing.assert_array_equal(
                        simt_tiles.reduce(xs, op, axis=a, variant="k03_flat_lanes", config=config),
                        getattr(np, op)(xs, axis=a), err_msg=f"{op} n={n} axis={a}")
    # lanes of several steps (one load a step, one warp, outputs enough not to split much): a NaN
    # must stay the kept one of its accumulator while later elements, NaN or not, go by
    one = FlatConfig(threads=32, loads=1)
    rng = np.random.default_rng(3)
    for shape, a in (((96, 32), 0), ((16, 100), 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        lines = np.moveaxis(x, a, -1)  # a view: writes land in x
        lines[1, [5, 37, 69]] = np.nan  # one accumulator, several steps apart
        lines[2, 3:] = np.nan
        lines[3, 10] = np.nan
        lines[3, 50:] = 9.0  # ties after the NaN
        lines[4, :] = 9.0  # all tied
        for op in ("argmax", "argmin"):
            np.testing.assert_array_equal(simt_tiles.reduce(x, op, axis=a, variant="k03_flat_lanes", config=one),
                                          getattr(np, op)(x, axis=a), err_msg=f"{op} {shape} axis={a}")


def test_k03_runs_k02s_plan_and_is_the_default_lanes_rung():
    for key in RULES:
        shape, axes, *op = key
        op = op[0] if op else "sum"
        auto = dispatch.plan(shape, axes, op, 0, np.float32, config="default", sms=132, min_steps=4)
        assert auto.rung.name in ("k01_warp_shuffle", "k03_flat_lanes"), key  # (k02 only when asked)
        flat = dispatch.plan(shape, axes, op, 0, np.float32, variant="k03_flat_lanes", config="default",
                             sms=132, min_steps=4)
        lanes = dispatch.plan(shape, axes, op, 0, np.float32, variant="k02_axis_lanes", config="default",
                              sms=132, min_steps=4)
        assert flat.rung.name == "k03_flat_lanes"
        strip = lambda p: [(s.view, s.config.lanes, s.config.lane_axis, s.config.wpo, s.splits, s.chunk,  # noqa: E731
                            s.params, s.grid, s.block) for s in p.steps]
        assert strip(flat) == strip(lanes), key
    # a k03 config object names its rung
    assert dispatch.plan((4, 40), (1,), "sum", 0, np.float32, config=FlatConfig()).rung.name == "k03_flat_lanes"
    with pytest.raises(TypeError, match="config: expected a preset name or a .*k02_axis_lanes.Config"):
        dispatch.plan((4, 40), (1,), "sum", 0, np.float32, variant="k02_axis_lanes", config=FlatConfig())


def test_k03_split_sums_are_deterministic():
    n = next(n for n in (600, 60_000, 6_000_000)
             if len(dispatch.plan((n,), (0,), "sum", 0, np.float32, variant="k03_flat_lanes").steps) == 2)
    x = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    a, b = (simt_tiles.reduce(x, variant="k03_flat_lanes") for _ in range(2))
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("cfg", [LanesConfig(threads=32, loads=1), FlatConfig(threads=32, loads=1)], ids=["k02", "k03"])
def test_a_split_pass_over_partials_shrinks(cfg):
    """One lane a column, one warp, one load, one step a piece (the simulator's min_steps): the pass
    over (1, S, Q) partials used to split into S pieces again, for ever; each pass now at least halves."""
    p = dispatch.plan((96, 32), (0,), "argmax", 3, np.float32, config=cfg, sms=2, min_steps=1)
    assert [s.view[1] for s in p.steps] == [96, 16, 8, 4, 2]


@pytest.mark.parametrize("cfg", [LanesConfig(threads=128, loads=2), FlatConfig(threads=128, loads=2)], ids=["k02", "k03"])
@pytest.mark.parametrize("op", ["sum", "argmax"] + ([] if PROFILE == "ci" else ["max", "mean"]))  # ci: 19 s less
def test_rows_over_fewer_warps_than_a_block(cfg, op):
    """Rows too few for a warp each and too many for a block's warps each: 2 warps a row in blocks of 2 (a third
    of the WARPS_PER_SM·SMs warp slots as rows: 42 in the simulator's 2 SMs), unsplit, every op against NumPy."""
    shape = (dispatch.WARPS_PER_SM * dispatch.sm_count() // 3, 301)
    p = dispatch.plan(shape, (1,), op, 0, np.float32, config=cfg)
    assert [(s.config.wpo, s.config.threads, s.splits, s.block) for s in p.steps] == [(2, 64, 1, (64,))]
    x = _poisoned_rows(shape)
    assert_matches_numpy(x, op, -1, False, simt_tiles.reduce(x, op, axis=-1, config=cfg))


def _poisoned_rows(shape):
    rng = np.random.default_rng(40)
    x = rng.standard_normal(shape).astype(np.float32)
    x[3, -1], x[7, 0], x[11, shape[1] // 2] = np.nan, np.inf, -np.inf  # a row's last, first and a middle value
    x[20] = 2.0  # ties: argmax takes the first
    return x
