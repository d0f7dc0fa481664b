"""The softmax / log_softmax backward kernel (kernels/softmax/backward.py) against its long-double
reference and γ bound: ragged shapes around a warp, any axis, both dtypes, both layouts of the
kernel (warp per row, thread per line), several warps per block, the output poisoned with NaN."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import simt_tiles
from simt_tiles.kernels.softmax.backward import RUNG, Config, backward_reference, softmax_backward
from simt_tiles.runtime import SIMULATOR

from .common import DTYPES, edge_sizes, poisoned
from .profiles import examples

SIZES = [s for s in edge_sizes(32) if s <= 70]


def _case(rng, shape, axis, log, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    y = (simt_tiles.log_softmax if log else simt_tiles.softmax)(x, axis=axis) if x.size else x
    return y, rng.standard_normal(shape).astype(dtype)


@settings(max_examples=examples(30))
@given(data=st.data())
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype, data):
    nd = data.draw(st.integers(1, 3), "ndim")
    shape = tuple(data.draw(st.lists(st.sampled_from(SIZES), min_size=nd, max_size=nd), "shape"))
    if np.prod(shape) > 600:
        shape = tuple(min(s, 3) for s in shape[:-1]) + shape[-1:]
    axis = data.draw(st.integers(-nd, nd - 1), "axis")
    log = data.draw(st.booleans(), "log")
    # several warps each way; on a GPU the preset only (each config compiles)
    threads = data.draw(st.sampled_from([32, 64, 96] if SIMULATOR else [256]), "threads")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    y, dy = _case(rng, shape, axis, log, dtype)
    note(f"shape={shape} axis={axis} log={log} threads={threads}")
    out = poisoned(shape, dtype)
    softmax_backward(y, dy, axis=axis, log=log, out=out, config=Config(threads=threads))
    got = out.copy_to_host()
    ref, bound = backward_reference(y, dy, axis=axis, log=log)
    err = np.abs(got.astype(ref.dtype) - ref)
    assert not np.isnan(got).any(), "an element was not written (NaN poison left)"
    assert (err <= bound).all(), f"max error {err.max():.3g}, bound there {bound.flat[np.argmax(err - bound)]:.3g}"


def test_check_catches_a_wrong_gradient():
    """The planted bug: a sum missing one term is outside the bound."""
    rng = np.random.default_rng(1)
    y, dy = _case(rng, (3, 33), -1, False, np.float32)
    ref, bound = backward_reference(y, dy, axis=-1)
    wrong = y * (dy - (y[:, 1:] * dy[:, 1:]).sum(-1, keepdims=True))
    assert not (np.abs(wrong - ref) <= bound).all()


def test_bad_input():
    y = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="dy: expected dtype float32"):
        softmax_backward(y, y.astype(np.float64))
    with pytest.raises(ValueError, match=r"dy: expected shape \(2, 3\)"):
        softmax_backward(y, np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="axis: 2 is out of bounds"):
        softmax_backward(y, y, axis=2)
    with pytest.raises(TypeError, match="log: expected a bool"):
        softmax_backward(y, y, log=1)
    with pytest.raises(TypeError, match="y: expected dtype float32 or float64"):
        softmax_backward(y.astype(np.int32), y)


def test_not_a_forward_rung():
    """Registered beside the forward ladder, never chosen by it."""
    from simt_tiles.kernels.softmax import RUNGS

    assert RUNG.name not in RUNGS
    assert softmax_backward(np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32)).shape == (0, 4)


def test_a_numpy_integer_axis_as_the_forward():
    y = np.random.default_rng(0).random((3, 5)).astype(np.float32)
    got = softmax_backward(y, y, axis=np.int64(0))
    np.testing.assert_array_equal(got, softmax_backward(y, y, axis=0))
    with pytest.raises(TypeError, match="^axis: expected an int"):
        softmax_backward(y, y, axis=np.bool_(True))
