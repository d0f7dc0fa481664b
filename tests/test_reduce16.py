"""reduce of float16 and bfloat16 inputs: read 16-bit (exactly), sums and means accumulated in float64, the
result of the input's dtype rounded once to nearest even; max/min exact (NaN first), argmax/argmin int64.

The reference rounding (:func:`rn16`) is written here, apart from the library's: the exact value (a
``Fraction``) against the midpoints of neighbouring 16-bit values, ties to the even bit pattern, past the
largest finite value plus half an ulp ±inf (torch's overflow).

The bound of a sum (and the exact result where it is forced): the kernels add the inputs' exact float64
values in some order (lanes, warps, splits), so ``|ŝ − s| ≤ η = γ_{n−1}(2⁻⁵³)·Σ|x|`` (γ_{n+1} for a mean: its
1/count and product, ``/count``); one rounding to 16 bits adds at most half an ulp of the result:
``|y − s| ≤ u16·(|s| + η) + η + η16`` (u16 = 2⁻¹¹ float16, 2⁻⁸ bfloat16; η16 half the smallest subnormal, a
result that underflows).  Where every partial sum is exact in float64 (Σ|x| / the inputs' finest quantum
< 2⁵³: always for float16 rows under 2¹³ values) ``η = 0`` and ``y`` is ``rn16(s)`` bit for bit — for float16
the same as ``np.sum(x.astype(np.float64)).astype(np.float16)``.  A double rounding (float64 → float32 →
16 bits) misses that: ``1 + 2⁻¹¹ + 2⁻²⁴`` (:func:`test_the_sum_is_rounded_once`).

bfloat16 in the simulator: its uint16 bits in an ndarray subclass that ``dtype_name`` reports as "bfloat16"
(tests/common.py: no ml_dtypes here), as tests/test_softmax16.py.
"""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
import simt_tiles.kernels.reduce as reduce_mod
from simt_tiles.bounds import gamma
from simt_tiles.kernels.reduce import REDUCE_OPS, RUNGS, normalize_axes
from simt_tiles.mma import round_to_odd32

from .common import ETA16, HALF, U16, Bf16, configs
from .common import bf16_names as bf16_names_of
from .profiles import examples
from .test_reduce import K01_CONFIGS, K02_CONFIGS, axis_forms

bf16_names = functools.partial(bf16_names_of, reduce_mod)  # Bf16 arrays read as bfloat16 (tests/common.py)

#: the bits of +inf, and the first power of two past the largest finite value (where +inf sits on the grid)
INF_BITS = {"float16": 0x7C00, "bfloat16": 0x7F80}
TOP = {"float16": 2.0 ** 16, "bfloat16": 2.0 ** 128}


def value64(bits, dt: str):
    """float64 values of 16-bit bit patterns (uint16)."""
    bits = np.asarray(bits, np.uint16)
    if dt == "float16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@functools.cache
def _grid(dt: str):
    """The non-negative finite values in bit order (bits == index), then TOP (the place of +inf)."""
    g = value64(np.arange(INF_BITS[dt], dtype=np.uint32).astype(np.uint16), dt)
    return np.append(g, TOP[dt])


def rn16(v, dt: str) -> int:
    """The bits of the exact value ``v`` (a Fraction, a float, ±inf or NaN) rounded once to ``dt``, to nearest
    even; ±inf past the largest finite value plus half an ulp."""
    if isinstance(v, float) and math.isnan(v):
        return 0x7E00 if dt == "float16" else 0x7FC0
    sign = 0x8000 if v < 0 or (isinstance(v, float) and math.copysign(1.0, v) < 0) else 0  # (-0.0 too)
    a = -v if v < 0 else v
    if a == math.inf or a >= TOP[dt]:
        return sign | INF_BITS[dt]
    g = _grid(dt)
    i = int(np.searchsorted(g, float(a), side="right")) - 1  # g[i] <= a (float(a) only places it; exact below)
    while Fraction(g[i]) > a:
        i -= 1
    while Fraction(g[i + 1]) <= a:
        i += 1
    lo, hi = Fraction(g[i]), Fraction(g[i + 1])
    mid = (lo + hi) / 2
    k = i if a < mid else i + 1 if a > mid else (i if i % 2 == 0 else i + 1)
    return sign | k  # (k == INF_BITS: overflow to inf)


def to16(v32, dt: str):
    """``(stored, float64 values)``: float32 values rounded to ``dt`` (rn16; NaN to the quiet NaN)."""
    v32 = np.asarray(v32, np.float32)
    bits = np.array([rn16(Fraction(float(v)) if np.isfinite(v) else float(v), dt) for v in v32.ravel()],
                    np.uint16).reshape(v32.shape)
    stored = bits.view(np.float16) if dt == "float16" else bits
    return stored, value64(bits, dt)


def bits_of(y, dt: str) -> np.ndarray:
    y = np.asarray(y)
    return y.view(np.uint16) if dt == "float16" else y.astype(np.uint16)


def call16(x16, dt: str, op, *, out=None, **kw):
    """reduce of 16-bit ``x16`` (bfloat16: its bits, as Bf16); returns the result as NumPy (values of x's dtype
    as stored: float16, or bfloat16's uint16 bits), and checks the kinds that come back."""
    arg = op.startswith("arg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty slice, as NumPy
        if dt == "float16":
            res = simt_tiles.reduce(x16, op, out=out, **kw)
        else:
            with bf16_names():
                res = simt_tiles.reduce(np.ascontiguousarray(x16).view(Bf16), op,
                                        out=out if out is None or arg else out.view(Bf16), **kw)
    if out is not None:
        res = out.copy_to_host() if hasattr(out, "copy_to_host") else out
    res = np.asarray(res)
    assert res.dtype == (np.int64 if arg else np.float16 if dt == "float16" else np.uint16), res.dtype
    return res


def assert_reduce16_ok(x64, dt: str, op: str, axis, keepdims: bool, got):
    """``got`` (x's 16-bit dtype as stored, or int64) is ``op`` of the exact values ``x64`` (module docstring)."""
    axes = normalize_axes(axis, x64.ndim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = getattr(np, op)(x64, axis=axis, keepdims=keepdims)  # float64: NaN/inf pattern, shapes, indices
    assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
    if op.startswith("arg"):
        np.testing.assert_array_equal(got, ref)
        return
    y = value64(bits_of(got, dt), dt)
    if op in ("max", "min"):  # exact: a 16-bit value (NaN where the slice has one)
        np.testing.assert_array_equal(y, ref)
        return
    moved = np.moveaxis(x64, axes, range(x64.ndim - len(axes), x64.ndim))  # the reduced axes last, in order
    n = math.prod(x64.shape[a] for a in axes)
    rows = moved.reshape(math.prod(moved.shape[:x64.ndim - len(axes)]), n)
    y, ref = y.reshape(-1), np.reshape(ref, -1)
    for r, row in enumerate(rows):
        what = f"{op} of row {r} {row!r}: got {y[r]!r} ({hex(int(bits_of(got, dt).reshape(-1)[r]))})"
        if not np.all(np.isfinite(row)) or not np.isfinite(ref[r]) and n == 0:
            np.testing.assert_array_equal(y[r], ref[r], err_msg=what)  # NaN / ±inf as float64 NumPy (mean of 0: NaN)
            continue
        s = sum((Fraction(float(v)) for v in row), Fraction(0))
        if op == "mean":
            s /= n
        mag = float(np.sum(np.abs(row)))
        nz = np.abs(row[row != 0])
        quantum = float(np.min(2.0 ** (np.floor(np.log2(nz)) - (10 if dt == "float16" else 7)))) if nz.size else 1.0
        # every partial sum exact in float64; a mean's sum / count then one float64 rounding that cannot land on a
        # 16-bit midpoint the exact quotient is not on (its distance from one is a multiple of quantum / count)
        exact = op in ("sum", "mean") and mag / quantum < 2.0 ** 53
        if exact:
            assert int(bits_of(got, dt).reshape(-1)[r]) == rn16(s, dt) or (s == 0 and y[r] == 0), what  # (±0 alike)
            if dt == "float16" and n < 2 ** 13:  # NumPy's float64 → float16 is one rounding too
                with np.errstate(over="ignore"):
                    assert y[r] == (np.sum(row) if op == "sum" else np.mean(row)).astype(np.float16), what
            continue
        eta = (gamma(max(n - 1, 1), 2.0 ** -53) if op == "sum" else gamma(n + 1, 2.0 ** -53) / n) * mag
        if np.isinf(y[r]):  # the rounding passed the 16-bit range: s within eta of the overflow threshold or past it
            ulp_top = TOP[dt] * (2.0 ** -11 if dt == "float16" else 2.0 ** -8)
            assert abs(float(s)) + eta >= TOP[dt] - ulp_top / 2 and np.sign(y[r]) == np.sign(float(s)), what
            continue
        bound = U16[dt] * (abs(float(s)) + eta) + eta + ETA16[dt]
        assert abs(Fraction(float(y[r])) - s) <= Fraction(bound) * (1 + Fraction(1, 10 ** 9)), what


def draw16(rng, shape, dt: str, specials: bool, ties: bool, near_ties: bool = False):
    """``(stored, float64 values)``: assorted scales (sums that cancel, underflow float16, overflow it), small
    integers (ties, exact sums), sums near the midpoints of 16-bit neighbours (2ᵏ, half its ulp 2ᵏ⁻ᵖ and ±a value
    far below float32's ulp of 2ᵏ: a double rounding goes the wrong way), and NaN, ±inf, ±0, the largest finite
    value sprinkled in."""
    max16 = 65504.0 if dt == "float16" else 3.3895313892515355e38
    if near_ties:
        k, p, d = int(rng.integers(0, 6)), (11 if dt == "float16" else 8), (13 if dt == "float16" else 32)
        v = rng.choice(np.array([1, -1], np.float32), size=shape) * \
            rng.choice(np.array([2.0 ** k, 2.0 ** (k - p), 2.0 ** (k - p - d)], np.float32), size=shape)
    elif ties:
        v = rng.integers(-3, 4, shape).astype(np.float32)
    else:
        scale = rng.choice([1.0, 2.0 ** -20, 2.0 ** 12, max16 / 2], size=shape)
        with np.errstate(over="ignore"):
            v = (rng.standard_normal(shape) * scale).astype(np.float32)
    if specials and v.size:
        pick = rng.random(shape) < 0.2
        v[pick] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, max16, -max16], np.float32),
                             size=int(pick.sum()))
    return to16(v, dt)


# ---------------------------------------------------------------------------
# properties: every op, axis form, keepdims; variant=None, k02, k01; shapes around the tiles
# ---------------------------------------------------------------------------

SIZES = [0, 1, 2, 3, 5, 31, 33]  # empty, 1, primes, a warp ± 1 (the sim presets' lanes and tiles)


@settings(max_examples=examples(60))
@given(dt=st.sampled_from(HALF), data=st.data())
def test_reduce16_matches_the_exact_reference(dt, data):
    """variant=None or k02 (random configs), any op and axis form, keepdims, N-D shapes of edge sizes, long axes
    (split); a NaN-poisoned device ``out=`` (float16) or a poisoned NumPy one (bfloat16's bits)."""
    variant = data.draw(st.sampled_from([None, "k02_axis_lanes"]), "variant")
    config = data.draw(configs(RUNGS["k02_axis_lanes"], K02_CONFIGS), "config") if variant else "sim"
    op = data.draw(st.sampled_from(REDUCE_OPS), "op")
    shape = tuple(data.draw(st.lists(st.sampled_from(SIZES), min_size=1, max_size=3), "shape"))
    if data.draw(st.booleans(), "a long axis (split across blocks)"):
        shape = (*shape[:-1], data.draw(st.sampled_from([97, 130]), "long"))
    while math.prod(shape) > 1200 and len(shape) > 1:  # the simulator's time: a few thousand thread steps
        shape = shape[1:]
    axis = data.draw(st.sampled_from(axis_forms(len(shape), op.startswith("arg"))), "axis")
    keepdims = data.draw(st.booleans(), "keepdims")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x16, x64 = draw16(rng, shape, dt, data.draw(st.booleans(), "specials"), data.draw(st.booleans(), "ties"),
                      data.draw(st.booleans(), "near ties"))
    note(f"x={x64!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            want_shape = np.shape(getattr(np, op)(x64, axis=axis, keepdims=keepdims))
        except ValueError:
            with pytest.raises(ValueError, match="x: zero-size array"):
                call16(x16, dt, op, axis=axis, keepdims=keepdims, variant=variant, config=config)
            return
    out = None
    if data.draw(st.booleans(), "out="):
        if op.startswith("arg"):
            out = cuda.to_device(np.full(want_shape, -7, np.int64))
        elif dt == "float16":
            out = cuda.to_device(np.full(want_shape, np.nan, np.float16))
        else:
            out = np.full(want_shape, 0x7FC0, np.uint16)
    got = call16(x16, dt, op, out=out, axis=axis, keepdims=keepdims, variant=variant, config=config)
    assert_reduce16_ok(x64, dt, op, axis, keepdims, got)


@settings(max_examples=examples(30))
@given(dt=st.sampled_from(HALF), op=st.sampled_from(["sum", "max", "min"]), data=st.data())
def test_k01_16bit(dt, op, data):
    """k01 (random configs): whole arrays (one block, or blocks then partials) and rows, around its tiles."""
    config = data.draw(configs(RUNGS["k01_warp_shuffle"], K01_CONFIGS), "config")
    t = config.threads
    shape = (data.draw(st.sampled_from([1, 2])), data.draw(st.sampled_from([1, t - 1, t + 1, 2 * t * config.loads + 1])))
    axis = data.draw(st.sampled_from([None, -1]), "axis")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    x16, x64 = draw16(rng, shape, dt, data.draw(st.booleans(), "specials"), data.draw(st.booleans(), "ties"),
                      data.draw(st.booleans(), "near ties"))
    note(f"x={x64!r}")
    got = call16(x16, dt, op, axis=axis, variant="k01_warp_shuffle", config=config)
    assert_reduce16_ok(x64, dt, op, axis, False, got)


@settings(max_examples=examples(30))
@given(dt=st.sampled_from(HALF), variant=st.sampled_from([None, "k01_warp_shuffle", "k02_axis_lanes", "k03_flat_lanes"]),
       data=st.data())
def test_sums_next_to_a_midpoint_round_once(dt, variant, data):
    """Rows whose sum is a midpoint of 16-bit neighbours plus or minus half a float32 ulp (2ᵏ + 2ᵏ⁻ᵖ ± 2ᵏ⁻²⁴, the
    rest cancelling pairs and zeros, shuffled): float32 first makes each a tie (to even: the wrong side half of
    the time); one rounding is exact here (float64 sums of these are exact)."""
    rows = data.draw(st.sampled_from([1, 2, 5]), "rows")
    n = data.draw(st.sampled_from([3, 5, 31, 33, 97]), "n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    p = 11 if dt == "float16" else 8
    x = np.zeros((rows, n), np.float32)
    for r in range(rows):
        k, sign = int(rng.integers(0, 6)), rng.choice([1.0, -1.0])
        mags = [2.0 ** k, 2.0 ** (k - p), 2.0 ** (k - 24)]
        vals = [sign * mags[0], sign * mags[1], rng.choice([1.0, -1.0]) * mags[2]]
        while len(vals) + 2 <= n:
            m = mags[int(rng.integers(0, 3))] if rng.random() < 0.7 else 0.0
            vals += [m, -m]
        vals += [0.0] * (n - len(vals))
        x[r] = rng.permutation(np.array(vals, np.float32))
    x16, x64 = to16(x, dt)
    assert np.array_equal(x64, x)  # every value exact in 16 bits
    axis = -1 if rows > 1 or variant == "k01_warp_shuffle" else data.draw(st.sampled_from([None, -1]), "axis")
    note(f"x={x64!r}")
    assert_reduce16_ok(x64, dt, "sum", axis, False, call16(x16, dt, "sum", axis=axis, variant=variant, config="sim"))


# ---------------------------------------------------------------------------
# the single rounding, overflow, NaN, empty axes, kinds, errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("variant", [None, "k01_warp_shuffle", "k02_axis_lanes", "k03_flat_lanes"])
def test_the_sum_is_rounded_once(dt, variant):
    """1 + 2⁻ᵖ + tiny (2⁻ᵖ half the 16-bit ulp of 1): a float32 rounding first makes it the tie 1 + 2⁻ᵖ, which goes
    to 1.0 (even); one rounding gives the next value up.  Also tiny below the tie (down), and the mean."""
    p, tiny = (11, 2.0 ** -24) if dt == "float16" else (8, 2.0 ** -40)
    for sign, want in ((1, 1 + 2.0 ** (1 - p)), (-1, 1.0)):
        x16, x64 = to16(np.array([1.0, 2.0 ** -p, sign * tiny], np.float32), dt)
        assert x64[2] == sign * tiny
        got = call16(x16, dt, "sum", variant=variant, config="sim")
        assert value64(bits_of(got, dt), dt) == want, (sign, got)
    x16, _ = to16(np.array([[3.0, 3 * 2.0 ** -p, 3 * tiny]], np.float32), dt)  # mean = the first case
    got = call16(x16, dt, "mean", axis=1, variant=None if variant == "k01_warp_shuffle" else variant, config="sim")
    assert value64(bits_of(got, dt), dt)[0] == 1 + 2.0 ** (1 - p)


@pytest.mark.parametrize("variant", [None, "k02_axis_lanes", "k03_flat_lanes"])
def test_a_mean_on_a_midpoint_is_rounded_once(variant):
    """49 × a and 49 × b, a and b neighbouring float16 values: the mean is their midpoint exactly, which goes to the
    even one (b here).  The sum times a float64 1/98 lands a float64 ulp below it, and the tie went to a (found by a
    review); the sum divided by 98 is the midpoint itself."""
    a, b = np.float16(1.3916015625), np.float16(1.392578125)
    assert np.nextafter(a, np.float16(2)) == b and int(b.view(np.uint16)) % 2 == 0
    x = np.array([[a] * 49 + [b] * 49], np.float16)
    assert float(np.sum(x.astype(np.float64)) * (1.0 / 98)) != (float(a) + float(b)) / 2  # the trap is real
    got = call16(x, "float16", "mean", axis=1, variant=variant, config="sim" if variant else None)
    assert got[0] == b == np.mean(x.astype(np.float64)).astype(np.float16)


@pytest.mark.gpu
def test_the_gpu_round_to_odd_is_the_reference():
    """``mma.f64_to_f32_odd`` (inline PTX on the GPU; :func:`round_to_odd32` itself in the simulator) bit for bit
    against ``round_to_odd32``: signs, ±0, float32 subnormals and values below them, past float32's range, ±inf,
    exact and inexact values; NaN stays NaN."""
    from simt_tiles.mma import f64_to_f32_odd

    @cuda.jit
    def apply(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = f64_to_f32_odd(x[i])

    rng = np.random.default_rng(11)
    special = [0.0, -0.0, 1.0, -1.0, 1 + 2.0 ** -30, -(1 + 2.0 ** -30), 1e-40, -1e-40, 1e-46, -1e-46, 2.0 ** -149,
               3 * 2.0 ** -151, 3.5e38, -3.5e38, 1e300, np.inf, -np.inf, np.nan, float(np.finfo(np.float32).max)]
    x = np.concatenate([special, rng.standard_normal(4000) * 10.0 ** rng.integers(-45, 40, 4000)]).astype(np.float64)
    y = np.full(x.size, np.nan, np.float32)
    apply[(x.size + 127) // 128, 128](x, y)
    want = round_to_odd32(x)
    nan = np.isnan(x)
    assert np.isnan(y[nan]).all()
    assert np.array_equal(y[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_round_to_odd_makes_one_rounding():
    """mma.round_to_odd32 (the simulator's f64_to_f32_odd) then a rounding to nearest even in 16 bits is rn16 of
    the float64: on the 16-bit midpoints and their float64 neighbours, random values, ±inf, NaN, huge values."""
    rng = np.random.default_rng(7)
    for dt in HALF:
        g = _grid(dt)[:-1]
        mids = (g[:-1] + g[1:]) / 2
        picks = rng.choice(mids, 300)
        v = np.concatenate([picks, np.nextafter(picks, np.inf), np.nextafter(picks, -np.inf),
                            rng.standard_normal(200) * rng.choice([1e-6, 1.0, 1e4, 1e30], 200),
                            [0.0, 65519.99, 65520.0, 65520.01, 3.4e38, 1e300, -1e300, np.inf, -np.inf]])
        v = np.concatenate([v, -v])
        r = round_to_odd32(v)
        with np.errstate(over="ignore"):
            got = r.astype(np.float16).view(np.uint16) if dt == "float16" else \
                np.asarray(simt_tiles.mma.bf16_bits(r), np.uint16)
        want = np.array([rn16(Fraction(float(a)) if np.isfinite(a) and a else float(a), dt) for a in v], np.uint16)
        np.testing.assert_array_equal(got, want)
    assert np.isnan(round_to_odd32(np.nan))


@pytest.mark.parametrize("dt", HALF)
def test_overflow_nan_and_empty(dt):
    """Sums past the 16-bit range are ±inf (torch); NaN propagates through max/min/sum; argmax takes the first
    NaN; empty axes: sum 0, mean NaN (NumPy's warning), the others ValueError naming x."""
    big = 65504.0 if dt == "float16" else 3.3895313892515355e38
    x16, x64 = to16(np.array([[big, big, 0.0], [big, -big, big / 4], [-big, -big, 0.0]], np.float32), dt)
    for op in ("sum", "mean", "max", "min", "argmax"):
        assert_reduce16_ok(x64, dt, op, 1, False, call16(x16, dt, op, axis=1, config="sim"))
    s = value64(bits_of(call16(x16, dt, "sum", axis=1, config="sim"), dt), dt)
    assert s[0] == np.inf and s[2] == -np.inf and s[1] == big / 4
    x16, x64 = to16(np.array([[1.0, np.nan, 2.0], [np.nan, 5.0, np.inf]], np.float32), dt)
    for op in ("sum", "max", "min", "argmax", "argmin"):
        for axis in (None, 0, 1):
            assert_reduce16_ok(x64, dt, op, axis, False, call16(x16, dt, op, axis=axis, config="sim"))
    e16, _ = to16(np.zeros((3, 0), np.float32), dt)
    assert bits_of(call16(e16, dt, "sum", axis=1), dt).tolist() == [0, 0, 0]
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        if dt == "float16":
            m = simt_tiles.reduce(e16, "mean", axis=1)
        else:
            with bf16_names():
                m = simt_tiles.reduce(e16.view(Bf16), "mean", axis=1)
    assert np.isnan(value64(bits_of(m, dt), dt)).all()
    with pytest.raises(ValueError, match="x: zero-size array"):
        call16(e16, dt, "max", axis=1)


def test_result_kinds():
    """NumPy float16 in: a NumPy float16 scalar for a whole array, arrays otherwise; Numba float16 device arrays in:
    float16 device arrays out (int64 for argmax)."""
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    s = simt_tiles.reduce(x)
    assert isinstance(s, np.float16) and s == 66
    d = simt_tiles.reduce(cuda.to_device(x), "max", axis=0)
    assert d.dtype == np.float16 and d.copy_to_host().tolist() == [8, 9, 10, 11]
    a = simt_tiles.reduce(cuda.to_device(x), "argmax", axis=1)
    assert a.dtype == np.int64 and a.copy_to_host().tolist() == [3, 3, 3]
    k = simt_tiles.reduce(x, "sum", axis=(0, 1), keepdims=True)
    assert k.shape == (1, 1) and k.dtype == np.float16 and k[0, 0] == 66


def test_reduce16_errors_name_the_argument():
    h = np.ones((4, 3), np.float16)
    with pytest.raises(TypeError, match=r"out: expected dtype float16 \(the dtype of x\); got float32"):
        simt_tiles.reduce(h, "sum", axis=0, out=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"out: expected shape \(3,\); got \(4,\)"):
        simt_tiles.reduce(h, "sum", axis=0, out=np.zeros(4, np.float16))
    with pytest.raises(TypeError, match=r"out"):
        simt_tiles.reduce(h, "argmax", axis=0, out=np.zeros(3, np.float16))  # argmax: int64
    with bf16_names():
        with pytest.raises(TypeError, match=r"out: expected dtype bfloat16 \(the dtype of x\); got float16"):
            simt_tiles.reduce(h.view(np.uint16).view(Bf16), "max", axis=1, out=np.zeros(4, np.float16))
    zero_d = simt_tiles.reduce(np.float16(1.5) * np.ones((), np.float16))  # a 0-d array: its value, as NumPy
    assert type(zero_d) is np.float16 and zero_d == 1.5
    dx = cuda.to_device(np.ones(8, np.float16))
    with pytest.raises(ValueError, match=r"out: overlaps x"):
        simt_tiles.reduce(dx.reshape(2, 4), "sum", axis=0, out=dx[:4])  # out is x's first row
