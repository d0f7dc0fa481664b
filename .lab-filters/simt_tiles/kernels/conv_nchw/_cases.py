"""The conv_nchw family's cases: the demo's, the aliasing tests', and each rung's lesson hazard
(read through ``FAMILY``, :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import simt_tiles as st

from ...registry import AliasCase, numpy_case
from .reference import conv2d_nchw_reference


def demo(rung: str, dtype, c):
    """``rung`` on a small layer: 3 → 4 channels, a 3 × 3 filter, padding 1, a bias."""
    x = c.rng.standard_normal((2, 3, 5, 7 * c.scale)).astype(dtype)
    w = c.rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    b = c.rng.standard_normal(4).astype(dtype)
    ref, bound = conv2d_nchw_reference(x, w, b, padding=1)
    return numpy_case(f"{x.shape} * {w.shape} p1",
                      lambda: st.conv2d_nchw(x, w, bias=b, padding=1, variant=rung, config=c.preset), ref, bound)


def _layer(x, w, b, out=None):
    return st.conv2d_nchw(x, w, bias=b, padding=1, out=out)


ALIASING = {"conv2d_nchw": AliasCase(_layer, ("x", "w", "bias"), ((1, 2, 4, 3), (2, 2, 3, 3), (2,)), (1, 2, 4, 3))}

#: the hazard each rung's lesson introduces (the docs' lesson pages, "The hazard it introduces")
HAZARDS = {
    "k01_direct": ("None: a thread per output, KH·KW·C global reads each."),
    "k02_smem_tiled": ("Two barriers per channel step (RAW after staging, WAR before the next step overwrites); "
                      "zero padding and the channel tails are stored as zeros while loading, so no thread reads "
                      "garbage."),
    "k03_double_buffered": ("One barrier per step: the WAR hazard is covered by alternating buffers."),
}
