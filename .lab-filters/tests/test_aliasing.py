"""``out=`` that shares memory with an input: a ValueError naming ``out``, for every public function.

A kernel whose output overlaps an input reads values another block already
overwrote: a silently wrong result.  Every public function refuses it, from
the device pointers and strides of the arrays — the same array, a view that
overlaps by one element or more — and still accepts views of one buffer that
are disjoint, down to the adjacent one.  NumPy arguments are copied to the
device, so a NumPy ``out`` may be an input (in place), as before.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

from simt_tiles import registry


#: function → (call(*inputs, out=...), input names, input shapes, output shape, the input ``out``
#: may be (same shape), or None): every family's aliasing cases (``FAMILY.aliasing``)
CASES = {fn: (c.call, c.names, c.shapes, c.out_shape, c.same) for fn, c in registry.aliasing_cases().items()}
FUNCTIONS = tuple(CASES)
OVERLAP_CASES = [(f, i) for f in FUNCTIONS for i in range(len(CASES[f][1]))]


def _host_inputs(fn, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in CASES[fn][2]]


def _expected(fn):
    """The result with every array separate (NumPy in, NumPy out)."""
    call = CASES[fn][0]
    return np.asarray(call(*_host_inputs(fn)))


def _views_of_one_buffer(host: np.ndarray, out_shape, offset: int):
    """A device buffer holding ``host`` at element 0 and an ``out`` view of ``out_shape``
    starting at element ``offset`` (overlapping ``host`` when ``offset < host.size``)."""
    n_out = math.prod(out_shape)
    buf = cuda.to_device(np.full(max(host.size, offset + n_out), np.nan, np.float32))
    x = buf[: host.size].reshape(host.shape)
    x.copy_to_device(host)
    return x, buf[offset: offset + n_out].reshape(out_shape)


@pytest.mark.parametrize("fn, which", OVERLAP_CASES)
@pytest.mark.parametrize("where", ["start", "one element"])
def test_out_overlapping_an_input_raises(fn, which, where):
    call, names, _, out_shape, _ = CASES[fn]
    args = [cuda.to_device(h) for h in _host_inputs(fn)]
    host = _host_inputs(fn)[which]
    offset = 1 if where == "start" else host.size - 1  # out starts inside the input, or on its last element
    args[which], out = _views_of_one_buffer(host, out_shape, offset)
    with pytest.raises(ValueError, match=f"out: overlaps {names[which]} in memory"):
        call(*args, out=out)


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_out_is_an_input_raises(fn):
    call, names, _, out_shape, same = CASES[fn]
    args = [cuda.to_device(h) for h in _host_inputs(fn)]
    if same is None:  # reduce: out is x's first row (out cannot have x's shape)
        same, out = 0, args[0][0]
    else:
        out = args[same]
    assert tuple(out.shape) == tuple(out_shape)
    with pytest.raises(ValueError, match=f"out: overlaps {names[same]} in memory"):
        call(*args, out=out)


@pytest.mark.parametrize("fn, which", OVERLAP_CASES)
def test_disjoint_views_of_one_buffer_are_accepted(fn, which):
    call, _, _, out_shape, _ = CASES[fn]
    args = [cuda.to_device(h) for h in _host_inputs(fn)]
    host = _host_inputs(fn)[which]
    args[which], out = _views_of_one_buffer(host, out_shape, host.size)  # out right after the input
    result = call(*args, out=out)
    assert result is out
    np.testing.assert_array_equal(out.copy_to_host(), _expected(fn))
    np.testing.assert_array_equal(args[which].copy_to_host(), host)  # the input is untouched


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_numpy_out_may_be_an_input(fn):
    """NumPy arguments are copied to the device: in place is fine, as before."""
    call, _, _, out_shape, same = CASES[fn]
    args = _host_inputs(fn)
    if same is None:
        out = np.empty(out_shape, np.float32)
    else:
        out = args[same]
    result = call(*args, out=out)
    assert result is out
    np.testing.assert_array_equal(out, _expected(fn))
