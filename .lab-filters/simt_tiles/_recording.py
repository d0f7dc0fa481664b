"""Whether the calling thread's public call is being recorded into a launch plan
(:mod:`simt_tiles.launch`), and :func:`no_plan`, by which a checked path refuses one.

It sits below :mod:`simt_tiles.interop` and the kernel families (which call :func:`no_plan`)
and below :mod:`simt_tiles.launch` (which records): none of them imports another for it.
"""

from __future__ import annotations

import threading

__all__ = ["state", "no_plan"]

#: ``state.rec``: the recording of the call this thread is making (None: not recording)
state = threading.local()


def no_plan(reason: str) -> None:
    """Called by a checked path that decided something from device data, or synchronised with
    another stream: the call being recorded (if any) makes no plan."""
    rec = getattr(state, "rec", None)
    if rec is not None and rec.refused is None:
        rec.refused = reason
