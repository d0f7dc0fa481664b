"""Warp-level intrinsics that also run — with real warp semantics — in Numba's CUDA simulator.

Numba's simulator has no ``shfl_*``, vote or ``syncwarp`` functions, so kernels
using them could only be tested on a GPU.  This module provides

    shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync,
    all_sync, any_sync, eq_sync, ballot_sync, syncwarp

with Numba's signatures (``shfl_down_sync(mask, value, delta)`` ...).

* **On a GPU** each name *is* ``numba.cuda``'s intrinsic (``warp.shfl_down_sync
  is cuda.shfl_down_sync``): kernels compile to the same ``shfl.sync`` PTX.
* **In the simulator** each is a Python implementation, and importing this
  module also installs them on the simulator's ``cuda`` module, so that users'
  kernels written with ``cuda.shfl_down_sync(...)`` run unchanged.

Semantics in the simulator
    Warps are formed from the block's *linear* thread index
    (``x + y·Dx + z·Dx·Dy``), 32 lanes each; the last warp of a block whose size
    is not a multiple of 32 is partial.  A call is a rendezvous: every lane in
    ``mask`` that exists in the warp must make the matching call (the n-th call
    with that mask; lanes named in ``mask`` that do not exist are ignored here,
    but on a GPU such a mask is undefined — on the H200 the votes of a 4-lane
    warp called with a full mask came out wrong — so pass the partial warp's
    own lanes, as ``tests/test_warp.py`` does); each deposits its value, all wait, then each reads its
    source lane.  Reading a lane that is outside ``mask`` or does not exist is
    undefined on the GPU: here it returns a poison value (NaN for floats, a
    sentinel for integers) so the bug shows.  ``shfl_up``/``shfl_down`` past the
    warp's ends return the caller's own value, as on the GPU.  A lane calling
    with a mask that excludes itself raises; so does a rendezvous that does not
    complete within :data:`TIMEOUT_S` seconds (a lane took another branch).
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numba import cuda

from .runtime import SIMULATOR

__all__ = [
    "shfl_sync",
    "shfl_up_sync",
    "shfl_down_sync",
    "shfl_xor_sync",
    "all_sync",
    "any_sync",
    "eq_sync",
    "ballot_sync",
    "syncwarp",
    "FULL_MASK",
    "WARP_SIZE",
    "install_simulator_intrinsics",
]

FULL_MASK = 0xFFFFFFFF
WARP_SIZE = 32
#: seconds a simulated warp collective waits for its lanes before reporting a deadlock
TIMEOUT_S = 60.0

_NAMES = ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
          "all_sync", "any_sync", "eq_sync", "ballot_sync", "syncwarp")


# ---------------------------------------------------------------------------
# The simulator's implementation
# ---------------------------------------------------------------------------

_lock = threading.Lock()


class _Rendezvous:
    """One warp collective call: the participating lanes' values and a barrier."""

    def __init__(self, parties: int):
        self.values: dict[int, object] = {}
        self.barrier = threading.Barrier(parties)
        self.left = parties


def _poison(value):
    if isinstance(value, (float, np.floating)):
        return type(value)(np.nan)
    if isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, np.unsignedinteger):
        return type(value)(np.iinfo(type(value)).max)
    if isinstance(value, np.signedinteger):
        return type(value)(np.iinfo(type(value)).min)
    if isinstance(value, int):
        return -(2**31)
    return value


def _exchange(name: str, mask, value):
    """Rendezvous of the lanes in ``mask``; returns (lane, active lanes mask, {lane: value})."""
    t = threading.current_thread()
    manager = getattr(t, "_manager", None)
    if manager is None:
        raise RuntimeError(f"{name}: called outside a simulated kernel")
    tid = t.thread_id
    lane, warp = tid % WARP_SIZE, tid // WARP_SIZE
    lanes_here = min(WARP_SIZE, math.prod(manager._block_dim) - warp * WARP_SIZE)
    mask = int(mask) & FULL_MASK
    active = mask & ((1 << lanes_here) - 1)
    if not (active >> lane) & 1:
        raise RuntimeError(
            f"{name}: lane {lane} of warp {warp} called with mask {mask:#010x}, which does not "
            "include it (undefined behaviour on the GPU)"
        )
    calls = t.__dict__.setdefault("_simt_warp_calls", {})
    n = calls.get(mask, 0)
    calls[mask] = n + 1
    key = (tuple(t.blockIdx), warp, mask, n)
    with _lock:
        state = manager.__dict__.setdefault("_simt_warp_state", {})
        rv = state.get(key)
        if rv is None:
            rv = state[key] = _Rendezvous(bin(active).count("1"))
    rv.values[lane] = value
    try:
        rv.barrier.wait(timeout=TIMEOUT_S)
    except threading.BrokenBarrierError:
        missing = sorted(set(i for i in range(WARP_SIZE) if (active >> i) & 1) - set(rv.values))
        raise RuntimeError(
            f"{name}: warp {warp} of block {tuple(t.blockIdx)} deadlocked: lanes {missing} of mask "
            f"{mask:#010x} never made call #{n} with this mask (divergent code?)"
        ) from None
    values = dict(rv.values)
    with _lock:
        rv.left -= 1
        if rv.left == 0:
            del state[key]
    return lane, active, values


def _read(values, active, src, own):
    if 0 <= src < WARP_SIZE and (active >> src) & 1:
        return values[src]
    return _poison(own)


def _sim_shfl_sync(mask, value, src_lane):
    lane, active, values = _exchange("shfl_sync", mask, value)
    return _read(values, active, int(src_lane) % WARP_SIZE, value)


def _sim_shfl_up_sync(mask, value, delta):
    lane, active, values = _exchange("shfl_up_sync", mask, value)
    src = lane - int(delta)
    return value if src < 0 else _read(values, active, src, value)


def _sim_shfl_down_sync(mask, value, delta):
    lane, active, values = _exchange("shfl_down_sync", mask, value)
    src = lane + int(delta)
    return value if src >= WARP_SIZE else _read(values, active, src, value)


def _sim_shfl_xor_sync(mask, value, lane_mask):
    lane, active, values = _exchange("shfl_xor_sync", mask, value)
    src = lane ^ int(lane_mask)
    return value if src >= WARP_SIZE else _read(values, active, src, value)


def _sim_all_sync(mask, predicate):
    _, _, values = _exchange("all_sync", mask, bool(predicate))
    return int(all(values.values()))


def _sim_any_sync(mask, predicate):
    _, _, values = _exchange("any_sync", mask, bool(predicate))
    return int(any(values.values()))


def _sim_eq_sync(mask, value):
    _, _, values = _exchange("eq_sync", mask, value)
    return int(len(set(values.values())) == 1)


def _sim_ballot_sync(mask, predicate):
    _, _, values = _exchange("ballot_sync", mask, bool(predicate))
    return np.uint32(sum(1 << lane for lane, p in values.items() if p))


def _sim_syncwarp(mask=FULL_MASK):
    _exchange("syncwarp", mask, None)


_SIMULATED = {
    "shfl_sync": _sim_shfl_sync,
    "shfl_up_sync": _sim_shfl_up_sync,
    "shfl_down_sync": _sim_shfl_down_sync,
    "shfl_xor_sync": _sim_shfl_xor_sync,
    "all_sync": _sim_all_sync,
    "any_sync": _sim_any_sync,
    "eq_sync": _sim_eq_sync,
    "ballot_sync": _sim_ballot_sync,
    "syncwarp": _sim_syncwarp,
}


def install_simulator_intrinsics() -> None:
    """Make ``cuda.shfl_down_sync`` & co. work inside simulated kernels (idempotent).

    Adds the functions to the simulator's fake ``cuda`` module class (what a
    kernel's ``cuda`` global is while it runs) and to the simulator's
    ``numba.cuda`` module.  Does nothing on a real GPU.
    """
    if not SIMULATOR:
        return
    from numba.cuda.simulator import kernelapi

    for name, fn in _SIMULATED.items():
        setattr(kernelapi.FakeCUDAModule, name, staticmethod(fn))
        setattr(cuda, name, fn)


if SIMULATOR:
    install_simulator_intrinsics()
    (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, all_sync, any_sync, eq_sync,
     ballot_sync, syncwarp) = (_SIMULATED[n] for n in _NAMES)
else:
    (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, all_sync, any_sync, eq_sync,
     ballot_sync, syncwarp) = (getattr(cuda, n) for n in _NAMES)
