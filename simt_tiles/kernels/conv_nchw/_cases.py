"""The conv_nchw family's cases: the demo's, the aliasing tests', and each rung's lesson hazard
(read through ``FAMILY``, :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import simt_tiles as st

from ...registry import AliasCase, numpy_case
from .dispatch import DEPTHWISE_VARIANT
from .reference import conv2d_nchw_reference


def demo(rung: str, dtype, c):
    """``rung`` on a small layer: 3 → 4 channels, a 3 × 3 filter, padding 1, a bias (the depthwise rung:
    3 → 6 channels, groups 3, stride 2)."""
    if rung == DEPTHWISE_VARIANT:
        return _depthwise_demo(rung, dtype, c)
    x = c.rng.standard_normal((2, 3, 5, 7 * c.scale)).astype(dtype)
    w = c.rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    b = c.rng.standard_normal(4).astype(dtype)
    ref, bound = conv2d_nchw_reference(x, w, b, padding=1)
    return numpy_case(f"{x.shape} * {w.shape} p1",
                      lambda: st.conv2d_nchw(x, w, bias=b, padding=1, variant=rung, config=c.preset), ref, bound)


def _depthwise_demo(rung: str, dtype, c):
    x = c.rng.standard_normal((2, 3, 7, 9 * c.scale)).astype(dtype)
    w = c.rng.standard_normal((6, 1, 3, 3)).astype(dtype)
    b = c.rng.standard_normal(6).astype(dtype)
    ref, bound = conv2d_nchw_reference(x, w, b, padding=1, stride=2, groups=3)
    return numpy_case(f"{x.shape} * {w.shape} s2 p1 groups 3",
                      lambda: st.conv2d_nchw(x, w, bias=b, stride=2, padding=1, groups=3, variant=rung,
                                             config=c.preset), ref, bound)


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
    "k04_depthwise": ("One barrier (RAW: the patch is staged before anyone reads it); the patch is never "
                      "overwritten — every output channel of the block's input channel reads the same one — so "
                      "there is no WAR hazard; threads with no output in the image still stage and reach the "
                      "barrier."),
}
