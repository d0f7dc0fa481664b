"""The conv2d family's cases: the demo's, the aliasing tests', and each rung's lesson hazard
(read through ``FAMILY``, :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import simt_tiles as st

from ...registry import AliasCase, numpy_case
from .reference import correlate2d_reference, correlate_nd_reference, correlate_separable_reference


def demo(rung: str, dtype, c):
    """``rung`` on a ragged image: a 3 × 4 filter in mode "reflect" (the separable kernel: 3 + 5 taps,
    mode "constant")."""
    img = c.rng.standard_normal((11 * c.scale, 13 * c.scale)).astype(dtype)
    if rung in st.SEPARABLE_VARIANTS:
        wy, wx = c.rng.standard_normal(3).astype(dtype), c.rng.standard_normal(5).astype(dtype)
        ref, bound = correlate_separable_reference(img, wy, wx, "constant", 0.5)
        return numpy_case(f"separable {img.shape} * 3x5 constant",
                          lambda: st.correlate_separable(img, wy, wx, mode="constant", cval=0.5, variant=rung),
                          ref, bound)
    if rung in st.VOLUME_VARIANTS:  # a ragged volume: a 3 × 2 × 3 filter in mode "mirror"
        vol = c.rng.standard_normal((5 * c.scale, 6 * c.scale, 7 * c.scale)).astype(dtype)
        w = c.rng.standard_normal((3, 2, 3)).astype(dtype)
        ref, bound = correlate_nd_reference(vol, w, "mirror")
        return numpy_case(f"{vol.shape} * {w.shape} mirror",
                          lambda: st.correlate(vol, w, mode="mirror", variant=rung, config=c.preset), ref, bound)
    w = c.rng.standard_normal((3, 4)).astype(dtype)
    ref, bound = correlate2d_reference(img, w, "reflect")
    return numpy_case(f"{img.shape} * {w.shape} reflect",
                      lambda: st.correlate2d(img, w, variant=rung, config=c.preset), ref, bound)


#: small, ragged shapes for the simulator
ALIASING = {
    "correlate2d": AliasCase(lambda x, w, out=None: st.correlate2d(x, w, out=out), ("image", "weights"),
                             ((5, 6), (3, 2)), (5, 6)),
    "convolve2d": AliasCase(lambda x, w, out=None: st.convolve2d(x, w, mode="wrap", out=out), ("image", "weights"),
                            ((5, 6), (2, 3)), (5, 6)),
    "correlate1d": AliasCase(lambda x, w, out=None: st.correlate1d(x, w, axis=0, out=out), ("image", "weights"),
                             ((5, 6), (3,)), (5, 6)),
    "correlate": AliasCase(lambda x, w, out=None: st.correlate(x, w, out=out), ("image", "weights"),
                           ((3, 4, 5), (2, 3, 2)), (3, 4, 5)),
    "convolve": AliasCase(lambda x, w, out=None: st.convolve(x, w, mode="constant", cval=0.5, out=out),
                          ("image", "weights"), ((3, 4, 5), (3, 2, 2)), (3, 4, 5)),
    "correlate_separable": AliasCase(lambda x, wy, wx, out=None: st.correlate_separable(x, wy, wx, out=out),
                                     ("image", "wy", "wx"), ((5, 6), (3,), (2,)), (5, 6)),
}

#: the hazard each rung's lesson introduces (the docs' lesson pages, "The hazard it introduces")
HAZARDS = {
    "k01_naive": ("None: boundary modes are handled by index mapping per tap; the hazard is KH·KW global "
                 "reads per output."),
    "k02_halo_tiled": ("One barrier between staging the tile + halo and reading it; every thread must help load "
                      "the halo even if its output is outside the image."),
    "k03_register_blocked": ("Lanes read the patch RX words apart: an even RX is a gcd(RX, 32)-way bank conflict (RX = "
                            "4: 4-way), an odd RX is conflict-free — hence RX = 3."),
    "k04_constant_filter": ("One compilation per distinct filter (values baked in): compile time and cache growth are "
                           "the cost."),
    "k05_register_tile_2d": ("Register pressure from an RY×RX tile of outputs; like k04, one kernel per filter."),
    "k07_vectorized": ("128-bit loads and stores need 16-byte aligned addresses: the launcher must check alignment "
                      "(simt_tiles.vector's promise) or fall back."),
    "k08_prefetched": ("Registers hold the next patch while this one computes: more live registers, and a WAR "
                      "barrier before the prefetched patch overwrites shared memory."),
    "k10_runtime_weights": ("A block-uniform branch chosen by `syncthreads_or` (a zero tap and a NaN/inf in the patch "
                           "take the tested loop); staged weights are read only after the patch's barrier; every "
                           "staged weight costs a register."),
    "k11_large_filter": ("Two loops over patch rows: the edge rows test a block-uniform `a < KH` per output "
                         "row (an unsigned wrap-around), the middle ones none — a row in the wrong loop adds a "
                         "filter row that is not there; `load4` needs 16-byte addresses (padded rows, RX and the "
                         "chunk width multiples of 4); a block with NaN/inf and a zero tap takes the plain loop."),
    "k09_async_copy": ("`cp.async` writes shared memory behind the threads' backs: after `wait_copies` one barrier "
                      "per tile both publishes the copies and guarantees that nobody still reads the buffer the "
                      "next copies overwrite. Shared memory doubles, so fewer warps fit an SM."),
    "k12_volume": ("A ring of KD + 1 staged planes: one barrier per plane is enough only because the slot a "
                   "plane overwrites was last read two steps before (a ring of KD slots needs a second, WAR "
                   "barrier); the barrier sits outside the `row < h` test, so threads past the edge still reach it."),
    "k12_volume_naive": ("None: every tap read from global memory with the boundary mapped per axis; the hazard "
                         "is KD·KH·KW global reads per output."),
    "k06_separable_fused": ("Three phases share shared memory: a barrier after staging the patch, one between the "
                           "column pass writing the intermediate `mid` and the row pass reading it, and two around the "
                           "staged output."),
}
