"""Inputs that share memory take the fast plan; only an ``out=`` overlapping an input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import simt_tiles as st

from .test_launch import _count


def test_the_same_array_twice_replays(plans):
    a, o = cuda.to_device(np.arange(9, dtype=np.float32)), cuda.device_array(9, np.float32)
    st.vector_add(a, a, out=o)
    assert (_count("recorded"), _count("refused")) == (1, 0)
    a2 = cuda.to_device(np.arange(9, dtype=np.float32) * 3)
    st.vector_add(a2, a2, out=o)  # new pointers, the same sharing: the plan
    assert _count("hit") == 1
    np.testing.assert_array_equal(o.copy_to_host(), 6 * np.arange(9, dtype=np.float32))


def test_a_plan_made_with_shared_inputs_is_not_replayed_on_distinct_ones(plans):
    a, b, o = (cuda.to_device(np.arange(9, dtype=np.float32)), cuda.to_device(np.ones(9, np.float32)),
               cuda.device_array(9, np.float32))
    st.vector_add(a, a, out=o)
    st.vector_add(a, b, out=o)  # same signature, b is no longer a: the checked path, a new plan
    assert _count("hit") == 0
    np.testing.assert_array_equal(o.copy_to_host(), np.arange(9, dtype=np.float32) + 1)
    st.vector_add(a, a, out=o)  # the plan of (a, b) fits (a, a) too
    assert _count("hit") == 1
    np.testing.assert_array_equal(o.copy_to_host(), 2 * np.arange(9, dtype=np.float32))


def test_overlapping_views_replay_with_their_offsets(plans):
    buf = cuda.to_device(np.arange(20, dtype=np.float32))
    o = cuda.device_array(8, np.float32)
    st.vector_add(buf[0:8], buf[4:12], out=o)  # 16 bytes apart: both aligned, overlapping
    buf2 = cuda.to_device(np.arange(20, dtype=np.float32) * 10)
    st.vector_add(buf2[0:8], buf2[4:12], out=o)
    assert _count("hit") == 1
    x = np.arange(20, dtype=np.float32) * 10
    np.testing.assert_array_equal(o.copy_to_host(), x[0:8] + x[4:12])


def test_out_overlapping_an_input_is_still_refused_on_replay(plans):
    a, o = cuda.to_device(np.ones(9, np.float32)), cuda.device_array(9, np.float32)
    st.vector_add(a, a, out=o)
    with pytest.raises(ValueError, match="out: overlaps"):
        st.vector_add(a, a, out=a)
