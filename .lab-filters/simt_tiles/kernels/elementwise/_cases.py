"""The elementwise family's cases: the demo's, the aliasing tests', and each rung's lesson hazard
(read through ``FAMILY``, :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import numpy as np

import simt_tiles as st

from ...registry import AliasCase, numpy_case


def demo(rung: str, dtype, c):
    """``vector_add`` with ``rung`` on a ragged vector; ``bias_relu`` on a ragged 2-D array (exact)."""
    if rung == "bias_relu":
        x = c.rng.standard_normal((9, 13 * c.scale)).astype(dtype)
        bias = c.rng.standard_normal(13 * c.scale).astype(dtype)
        return numpy_case(f"bias_relu {x.shape}", lambda: st.bias_relu(x, bias, config=c.preset),
                          np.maximum(x + bias, 0), np.zeros(x.shape))
    a, b = c.rng.standard_normal(101 * c.scale).astype(dtype), c.rng.standard_normal(101 * c.scale).astype(dtype)
    return numpy_case(f"vector_add {a.shape}", lambda: st.vector_add(a, b, variant=rung, config=c.preset), a + b,
                      np.zeros(a.shape))


ALIASING = {
    "vector_add": AliasCase(lambda a, b, out=None: st.vector_add(a, b, out=out), ("a", "b"), ((9,), (9,)), (9,), 1),
    "bias_relu": AliasCase(lambda x, b, out=None: st.bias_relu(x, b, out=out), ("x", "bias"), ((3, 5), (5,)),
                           (3, 5)),
}

#: the hazard each rung's lesson introduces (the docs' lesson pages, "The hazard it introduces")
HAZARDS = {
    "k01_grid_stride": ("The ragged last block: every access guarded by `i < n` (n = 0 and n = 1 included)."),
    "k02_multi_element": ("Unsigned 32-bit index arithmetic: valid only while n < 2³²; the ragged-edge guard moves "
                         "inside the per-thread loop."),
    "bias_relu": ("A 2-D tile whose rows and columns both end raggedly: two guards; NaN must pass through "
                 "max(x + b, 0)."),
}
