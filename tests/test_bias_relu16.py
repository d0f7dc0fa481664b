"""bias_relu of float16 and bfloat16 inputs: read 16-bit, ``max(x + bias, 0)`` in float32, the result rounded
once to the input's dtype (to nearest even) — torch's ``relu(x + bias)`` on 16-bit tensors.

Exactly: x and bias are exact in float32, so the result is ``rn16(relu(fl32(x + b)))`` bit for bit (+0 for a
non-positive sum, NaN kept) — :func:`expect16`, whose rounding (:func:`rne16`) is written here, not the
library's.  torch rounds first and then takes the relu, ``relu(rn16(fl32(x + b)))``: the same value, since
rounding to nearest is monotone, maps 0 to 0 and a positive value to a non-negative one
(:func:`test_relu_commutes_with_rounding_to_nearest` checks it on every 16-bit value, their midpoints
and their neighbours; torch CPU itself is compared when installed).

The bound against the exact ``s = x + b`` (float64: exact for float16 inputs, within u64·|s| for bfloat16):
``|y − relu(s)| ≤ u32·|s| + u16·(1 + u32)·|s| + η16`` — float32's rounding of the sum (u32 = 2⁻²⁴; relu is
1-Lipschitz), then the store's (u16: 2⁻¹¹ float16, 2⁻⁸ bfloat16; η16 half the smallest subnormal, a result
that underflows: 2⁻²⁵, 2⁻¹³⁴); a sum past the 16-bit range is ±inf (overflow of the store), NaN where
``x + b`` is NaN (a NaN input, inf − inf).

bfloat16 in the simulator: as tests/test_softmax16.py, its uint16 bits in an ndarray subclass that
``dtype_name`` reports as "bfloat16" (no ml_dtypes here).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from numba import cuda

import simt_tiles
import simt_tiles.kernels.elementwise as elementwise_mod
from simt_tiles.kernels.elementwise import RUNGS

from .common import ETA16, HALF, U16, Bf16, configs, edge_sizes
from .common import bf16_names as bf16_names_of
from .profiles import examples
from .test_elementwise import TILE_CONFIGS

MAX16 = {"float16": 65504.0, "bfloat16": float(np.float32(3.3895313892515355e38))}
U32 = 2.0 ** -24


bf16_names = functools.partial(bf16_names_of, elementwise_mod)  # Bf16 arrays read as bfloat16 (tests/common.py)


def rne16(v, dt: str):
    """float32 values → the 16-bit dtype's stored values (float16, or bfloat16's uint16 bits), to nearest even;
    written apart from the library's rounding (simt_tiles.mma) so that a bug there cannot hide here."""
    v = np.asarray(v, np.float32)
    if dt == "float16":
        with np.errstate(over="ignore"):
            return v.astype(np.float16)  # NumPy's conversion: IEEE round to nearest even, overflow to ±inf
    u = v.view(np.uint32).astype(np.int64)
    hi, lo = u >> 16, u & 0xFFFF
    up = (lo > 0x8000) | ((lo == 0x8000) & (hi & 1 == 1))
    out = hi + up  # a carry into the exponent is right (to the next binade, or to ±inf)
    return np.where(np.isnan(v), 0x7FC0 | (hi & 0x8000), out).astype(np.uint16)


def value16(s, dt: str):
    """float32 values of stored 16-bit values (bfloat16: its bits)."""
    s = np.asarray(s)
    if dt == "float16":
        return s.astype(np.float32)
    return (s.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def relu(v):
    return np.where(np.isnan(v) | (v > 0), v, np.zeros_like(v))


def expect16(x32, b32, dt: str):
    """The exact expected result as float32 values: ``rn16(relu(fl32(x + b)))``."""
    with np.errstate(invalid="ignore", over="ignore"):
        return value16(rne16(relu(x32 + b32), dt), dt)


def draw16(rng, shape, dt: str, specials: bool):
    """``(stored, float32 values)``: normal values of assorted scales (sums that cancel, tiny sums that underflow
    float16, huge ones that overflow), with NaN, ±inf, ±0 and the largest finite value sprinkled in."""
    scale = rng.choice([1.0, 2.0 ** -20, 2.0 ** 12, MAX16[dt] / 2], size=shape)
    with np.errstate(over="ignore"):
        v = (rng.standard_normal(shape) * scale).astype(np.float32)
    if specials and v.size:
        pick = rng.random(shape) < 0.2
        v[pick] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, MAX16[dt], -MAX16[dt]], np.float32),
                             size=int(pick.sum()))
    stored = rne16(v, dt)
    return stored, value16(stored, dt)


def call16(x16, b16, dt: str, *, out=None, **kw):
    """bias_relu of 16-bit operands (bfloat16: their bits); the result's float32 values."""
    if dt == "float16":
        res = simt_tiles.bias_relu(x16, b16, out=out, **kw)
        if out is not None:
            assert res is out
        res = res.copy_to_host() if hasattr(res, "copy_to_host") else res
        assert res.dtype == np.float16
        return value16(res, dt)
    with bf16_names():
        res = simt_tiles.bias_relu(np.ascontiguousarray(x16).view(Bf16), np.ascontiguousarray(b16).view(Bf16),
                                   out=out, **kw)
        if out is not None:
            assert res is out and isinstance(res, Bf16)
        assert res.dtype == np.uint16  # (the bits, viewed as x's own array's dtype: ml_dtypes' bfloat16 there)
    return value16(np.asarray(res).view(np.uint16), dt)


def assert_bias_relu16_ok(x32, b32, y, dt: str):
    """``y`` (float32 values of the 16-bit result) is :func:`expect16` bit for bit (±0 alike) and within the
    module docstring's bound of the float64 reference."""
    want = expect16(x32, b32, dt)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want), err_msg="NaN pattern")
    np.testing.assert_array_equal(y, want, err_msg="not rn16(relu(fl32(x + b)))")
    with np.errstate(invalid="ignore", over="ignore"):
        s = x32.astype(np.float64) + b32.astype(np.float64)
        ref = relu(s)
        bound = (U32 + U16[dt] * (1 + U32) + 2.0 ** -52) * np.abs(s) + ETA16[dt]
        finite = np.isfinite(ref) & np.isfinite(y)
        assert (np.abs(y[finite].astype(np.float64) - ref[finite]) <= bound[finite]).all(), "outside the bound"
        # the rest: NaN where x + b is, ±inf where it is or where the sum passes the 16-bit range
        np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
        over = np.isinf(y) & ~np.isinf(ref)
        assert (ref[over] >= MAX16[dt] * (1 - U32)).all() and (y[over] > 0).all()
        assert np.isinf(y[np.isinf(ref)]).all()


def torch_relu16(x32, b32, dt: str):
    """torch CPU's ``relu(x + b)`` on 16-bit tensors, as float32 values (None without torch)."""
    try:
        import torch
    except ImportError:
        return None
    t = getattr(torch, dt)
    return torch.relu(torch.from_numpy(x32).to(t) + torch.from_numpy(b32).to(t)).float().numpy()


@pytest.mark.parametrize("dt", HALF)
@given(data=st.data())
def test_bias_relu16_exact(dt, data):
    config = data.draw(configs(RUNGS["bias_relu"], TILE_CONFIGS), "config")
    m = data.draw(st.sampled_from(edge_sizes(config.tile_m * config.rows_per_thread)), "M")
    n = data.draw(st.sampled_from(edge_sizes(config.tile_n)), "N")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    specials = data.draw(st.booleans(), "specials")
    x16, x32 = draw16(rng, (m, n), dt, specials)
    b16, b32 = draw16(rng, (n,), dt, specials)
    if dt == "float16":  # a NaN-poisoned device out=: every element must be written
        out = cuda.to_device(np.full((m, n), np.nan, np.float16))
    else:  # a NaN-poisoned NumPy out= (the result copied into it)
        out = np.full((m, n), 0x7FC0, np.uint16).view(Bf16)
    y = call16(x16, b16, dt, out=out, config=config)
    note(f"x={x32!r} bias={b32!r} y={y!r}")
    assert_bias_relu16_ok(x32, b32, y, dt)
    t = torch_relu16(x32, b32, dt)
    if t is not None:  # torch's order (round, then relu): the same values
        np.testing.assert_array_equal(y, t, err_msg="differs from torch.relu(x + b)")


@pytest.mark.parametrize("dt", HALF)
def test_relu_commutes_with_rounding_to_nearest(dt):
    """``rn16(relu(v)) == relu(rn16(v))`` (±0 alike, NaN kept) for every 16-bit value, the float32 values either
    side of every midpoint between neighbours, the midpoints themselves (ties), and random float32s."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    vals = value16(bits.view(np.float16) if dt == "float16" else bits, dt)
    vals = np.sort(vals[np.isfinite(vals)]).astype(np.float64)
    mid = ((vals[:-1] + vals[1:]) / 2).astype(np.float32)  # exact in float32 (one more bit than 16-bit)
    near = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))])
    rng = np.random.default_rng(0)
    v = np.concatenate([vals.astype(np.float32), near, rng.standard_normal(10_000).astype(np.float32),
                        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)])
    with np.errstate(over="ignore", invalid="ignore"):
        a = value16(rne16(relu(v), dt), dt)  # this kernel's order
        b = relu(value16(rne16(v, dt), dt))  # torch's
    np.testing.assert_array_equal(a, b)
    t = torch_relu16(v, np.zeros_like(v), dt)
    if t is not None:
        np.testing.assert_array_equal(a, t)


@pytest.mark.parametrize("dt", HALF)
def test_bias_relu16_results_and_empty(dt):
    """No ``out=``: a new array of x's dtype (NumPy callers' float16; bfloat16's bits in a Numba device array
    stay bits); empty shapes give empty results."""
    rng = np.random.default_rng(3)
    x16, x32 = draw16(rng, (5, 7), dt, True)
    b16, b32 = draw16(rng, (7,), dt, True)
    assert_bias_relu16_ok(x32, b32, call16(x16, b16, dt), dt)
    if dt == "float16":
        d = simt_tiles.bias_relu(cuda.to_device(x16), cuda.to_device(b16))
        assert d.dtype == np.float16
        assert_bias_relu16_ok(x32, b32, value16(d.copy_to_host(), dt), dt)
    for shape in ((0, 7), (5, 0), (0, 0)):
        xe, _ = draw16(rng, shape, dt, False)
        be, _ = draw16(rng, shape[1:], dt, False)
        assert call16(xe, be, dt).shape == shape


def test_bias_relu16_errors_name_the_argument():
    h = np.ones((4, 3), np.float16)
    hb = np.ones(3, np.float16)
    with pytest.raises(TypeError, match=r"bias: expected dtype float16 \(the dtype of x\); got float32"):
        simt_tiles.bias_relu(h, hb.astype(np.float32))
    with pytest.raises(TypeError, match=r"bias: expected dtype float32 \(the dtype of x\); got float16"):
        simt_tiles.bias_relu(h.astype(np.float32), hb)
    with bf16_names():
        with pytest.raises(TypeError, match=r"bias: expected dtype bfloat16 \(the dtype of x\); got float16"):
            simt_tiles.bias_relu(h.view(np.uint16).view(Bf16), hb)
        with pytest.raises(TypeError, match=r"bias: expected dtype float16 \(the dtype of x\); got bfloat16"):
            simt_tiles.bias_relu(h, hb.view(np.uint16).view(Bf16))
        with pytest.raises(TypeError, match=r"out: expected dtype bfloat16 \(the dtype of x\); got float16"):
            simt_tiles.bias_relu(h.view(np.uint16).view(Bf16), hb.view(np.uint16).view(Bf16), out=h.copy())
    with pytest.raises(TypeError, match=r"bias: expected dtype float16 \(the dtype of x\); got builtins.list"):
        simt_tiles.bias_relu(h, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"out: expected dtype float16 \(the dtype of x\); got float32"):
        simt_tiles.bias_relu(h, hb, out=np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"out: expected shape \(4, 3\); got \(3, 4\)"):
        simt_tiles.bias_relu(h, hb, out=np.zeros((3, 4), np.float16))
    with pytest.raises(ValueError, match=r"x: expected a 2-D array; got 1-D"):
        simt_tiles.bias_relu(hb, hb)
    with pytest.raises(ValueError, match=r"bias: expected a 1-D array; got 2-D"):
        simt_tiles.bias_relu(h, h)
    with pytest.raises(ValueError, match=r"bias: expected shape \(3,\) \(x has 3 columns\); got \(2,\)"):
        simt_tiles.bias_relu(h, hb[:2])
    dx = cuda.to_device(h)
    with pytest.raises(ValueError, match=r"out"):
        simt_tiles.bias_relu(dx, cuda.to_device(hb), out=dx)  # in place: out overlaps x
