"""What the pipelined rungs (k09, k10) share that is not their lesson: the launch-bounds option.

Each rung's kernel is written out in full in its own file; only this jit
option, which caps registers so that two blocks fit on an SM, lives here.
"""

from __future__ import annotations

import numpy as np

from ._blocked import BlockedConfig


def launch_bounds_options(config: BlockedConfig, dtype, min_blocks: int = 2) -> dict:
    """``launch_bounds=(threads, blocks)``: ptxas keeps registers low enough for
    ``min_blocks`` blocks per SM (65536 / (threads · blocks) each: 128 at 256
    threads and 2 blocks).  Without it the fully unrolled k-loop of these
    kernels takes ~145 registers and only one block fits.  float64 needs twice
    the accumulator registers, so it asks for one block."""
    blocks = min_blocks if np.dtype(dtype).itemsize == 4 else 1
    return {"launch_bounds": (config.threads, blocks)}
