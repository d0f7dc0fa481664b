"""k03 — double buffering: the loads of channel step c+1 are in flight while step c is computed.

What changed versus k02
    Same tiles, thread mapping and shared layouts (``_common.TiledConfig``),
    but shared memory holds two stages of the input patches and the weights
    (one flat array each: the simulator keys shared arrays by source line).
    Each channel step is the classic SIMT software pipeline (the matmul
    ladder's k09, ``matmul/_pipelined.py``):

        (1) issue the global loads of step c+1 into registers   (in flight ...)
        (2) compute step c from shared stage c % 2                (... while this runs)
        (3) store the registers into shared stage (c+1) % 2
        barrier                                                   (one per step)

    One barrier per step is enough: in step c threads read stage c % 2 and
    write stage (c+1) % 2, which nobody reads before the barrier that ends
    step c; and the stage they write was last read in step c−1, which ended
    in a barrier.  A prologue (step −1) loads stage 0 and computes nothing.

    The code is k02's (``_tiled.py``) with ``double_buffer=True``: the
    ``DOUBLE_BUFFER`` branches of the channel loop — (1) and (3), the prefetch
    registers ``x_pf``/``w_pf`` and the start at step −1 — are what k03
    changes; k02's staging (its ``else`` branch) is left out.

Cost
    X_LOADS + W_LOADS prefetch registers per thread (default, 3 × 3 filter:
    3 + 10) and twice the shared memory per channel.  They are register
    arrays, so the loops that fill and drain them must be fully unrolled;
    LLVM stops unrolling at ~25 elements (a 7 × 7 filter with the default
    tiles: 29, in local memory), so ``variant=None`` uses k02 beyond
    :data:`PREFETCH_MAX`.  The default halves CK
    (2 instead of k02's 4), so the shared memory per block (13.6 KiB float32)
    and the barriers per input channel (one per 2 channels) are k02's: the
    two rungs differ only in *when* the loads are issued.

Memory traffic (teaching number)
    The same as k02 per channel (88 FMAs per global load, 11 per shared-load
    instruction with the default tiles and a 3 × 3 filter): double buffering
    moves no fewer bytes, it hides their latency.

Hypothesis (to be measured): should it pay on an H200?
    In k02 every channel step starts with loads that the block then waits
    for at a barrier: ~600–1000 cycles (L2 / HBM latency) in which its warps
    issue nothing.  Whether that costs time depends on whether *other* blocks
    fill the gap.
    * 56 × 56 layer ("default" tiles): 4 blocks of 4 warps per SM (118
      registers, 13.6 KiB), so each warp scheduler holds 4 warps of 4
      different blocks.  A k02 step is ~2000 FMA instructions per warp, i.e.
      a block's step lasts ~8–9 k cycles against a ~1 k-cycle stall, and
      blocks drift out of phase: the other blocks mostly cover the stall.
      Expected gain of k03: small, 0–10 %.
    * N = 8, C = 256, 14 × 14 ("small" tiles): 128 blocks for 132 SMs, one
      block (7 warps, < 2 per scheduler) per SM — nothing else to run while it
      waits.  A k02 step (CK = 8) is ~1000 FMA instructions per warp, ~2 k
      cycles with < 2 warps per scheduler, plus the exposed ~1 k-cycle stall:
      here k03 should pay most, up to +30 %.
    Against it: the 13 prefetch registers (with the 56 accumulators: 118
    of the 128 that 4 blocks per SM allow) and twice as many steps, each
    with its loop and staging overhead (CK = 2).

Measured (H200, 2026-11-29, same run as k02): N32 C64 56×56: 0.246 ms = 30.1 TFLOP/s,
**1.12× cuDNN FP32** and 1.15× k02 (predicted 0–10%: more than expected); N8 C256 14×14:
0.115 ms = 16.1 TFLOP/s, **0.90× cuDNN** and 2.3× k02 (predicted up to 30%: with one block
per SM nothing else hides k02's load waits, so prefetching the next channel step pays
most there).  cuDNN with TF32 tensor cores is 2.6–3.0× faster (71 / 54 TFLOP/s) — a
different precision.
"""

from __future__ import annotations

import dataclasses

from ...runtime import Rung
from ._common import TiledConfig, signature, tiled_geometry, tiled_launch_bounds
from ._tiled import make_body


@dataclasses.dataclass(frozen=True)
class Config(TiledConfig):
    """k02's tiling (:class:`~simt_tiles.kernels.conv_nchw._common.TiledConfig`), two shared stages."""

    STAGES = 2


# A call replaces kh and kw; the presets' values only choose what the compile gate
# builds (sim: an even filter height).  ck is half of k02's: same shared memory.
PRESETS = {
    "sim": Config(tile_h=2, tile_w=4, co=2, ck=2, rco=2, rp=2, kh=2, kw=3, min_blocks=1),
    "default": Config(tile_h=8, tile_w=14, co=64, ck=2, rco=8, rp=7, kh=3, kw=3, min_blocks=4),
    "small": Config(tile_h=7, tile_w=14, co=32, ck=4, rco=2, rp=7, kh=3, kw=3, min_blocks=2),
}


def make_kernel(config: Config, dtype):
    return make_body(config, dtype, "conv_nchw_k03_double_buffered", double_buffer=True)


#: prefetch registers (input + weight elements per thread and step) above which
#: ``variant=None`` uses k02 instead: the prefetch arrays stay in registers only if
#: LLVM fully unrolls the loops that index them, and with ~25 elements it stops doing
#: so (ptxas then reports a stack frame: local memory).  An explicit k03 still runs.
PREFETCH_MAX = 24


def prefetch_registers(config: Config) -> int:
    """Elements one thread holds in registers between (1) and (3) of a step."""
    return config.x_loads + config.w_loads


RUNG = Rung("k03_double_buffered", Config, PRESETS, make_kernel, tiled_geometry, signature,
            tiled_launch_bounds)
