"""Device buffers kept per (device, stream, host thread), bounded.

A workspace (split-K partials, a reduction's intermediates, space-to-depth phases) is kept between
calls per stream and host thread: work on one stream runs in order, and two threads' kernels would
interleave on a shared stream.  A pipeline that makes a stream per request, or threads that come
and go, would make a new key per call: each :class:`PerStream` cache holds at most :data:`LIMIT`
(stream, thread) keys per device (``SIMT_TILES_STREAM_KEYS``, default 128: the issue's soak keeps
16 threads × 6 streams ≈ 96 live) and at most :data:`ENTRIES` entries per key (shapes, tags); past
that the least recently used key (or the key's entries) is dropped.

Dropping is safe against work still queued: the cache only lets go of its Python reference.  A
call that took the buffer holds its own until its launches are queued, a launch plan holds the
buffers its launches use (``launch._Plan.held``) while it lives, and once the last reference goes
Numba does not free at once: ``_alloc_finalizer`` queues ``cuMemFree`` in the context's pending
deallocations (flushed past ``CUDA_DEALLOCS_COUNT`` items or ``CUDA_DEALLOCS_RATIO`` of the memory,
or when an allocation fails), and ``cuMemFree`` waits for the device's work before the memory can
be handed out again (the implicit synchronisation that made CUDA add ``cudaFreeAsync``).  A
dropped buffer is never handed out by the cache again (the key's next call allocates anew).  An
event recorded on the evicted stream would not do: with a stream per call that stream is usually
destroyed by then.  (With an EMM plugin, ``numba.cuda.set_memory_manager``, the plugin's rules for
a dropped array apply, as for any Numba array its caller drops.)
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from numba import cuda

from .interop import stream_key
from .runtime import SIMULATOR

__all__ = ["PerStream", "LIMIT", "ENTRIES", "clear_all", "stream_keys_limit"]


def stream_keys_limit(env=os.environ) -> int:
    """``SIMT_TILES_STREAM_KEYS`` (default 128; a positive integer, else ValueError naming it): (stream,
    thread) keys kept per device."""
    raw = env.get("SIMT_TILES_STREAM_KEYS", "")
    try:
        limit = int(raw) if raw.strip() else 128
    except ValueError:
        limit = 0
    if limit < 1:  # (0 or -5 meant 1 silently: a cache that forgets every other stream's workspaces and plans)
        raise ValueError(f"SIMT_TILES_STREAM_KEYS={raw!r}: expected a positive integer "
                         "(the (stream, host thread) keys each cache keeps per device; default 128)")
    return limit


#: (stream, host thread) keys each cache keeps per device (read at every new key: tests patch it)
LIMIT = stream_keys_limit()
#: entries (shapes, names, dtypes) one key keeps; past it the key starts over
ENTRIES = 64
#: every cache made (``clear_all``: the soak's release, the fault tests)
CACHES: list = []


def _device() -> int:
    return 0 if SIMULATOR else cuda.get_current_device().id


class PerStream:
    """``entries(stream)``: the calling thread's dict for ``stream`` on the current device, made
    on first use; the device's least recently used key is dropped when a new one passes
    :data:`LIMIT`.  The dict is the thread's own (no lock needed for it)."""

    def __init__(self, name: str):
        self.name = name
        self._devices: dict = {}  # device → OrderedDict((stream key, thread) → dict), oldest first
        self._lock = threading.Lock()
        self.evicted = 0  # keys dropped (stats, tests)
        CACHES.append(self)

    def entries(self, stream) -> dict:
        key = (stream_key(stream), threading.get_ident())
        dropped = []
        with self._lock:
            lru = self._devices.get(_device())
            if lru is None:
                lru = self._devices[_device()] = OrderedDict()
            d = lru.get(key)
            if d is not None:
                lru.move_to_end(key)
                return d
            d = lru[key] = {}
            while len(lru) > LIMIT:
                dropped.append(lru.popitem(last=False))
            self.evicted += len(dropped)
        del dropped  # (outside the lock: a finalizer may flush Numba's deallocations, cuMemFree)
        return d

    def get(self, stream, sub, make):
        """The entry ``sub`` of the calling thread's key for ``stream``, ``make()`` if missing."""
        d = self.entries(stream)
        v = d.get(sub)
        if v is None:
            if len(d) >= ENTRIES:  # many shapes on one stream: start over rather than grow
                d.clear()
            v = d[sub] = make()
        return v

    def keys(self) -> int:
        """How many (stream, thread) keys are held, all devices together."""
        with self._lock:
            return sum(len(lru) for lru in self._devices.values())

    def __len__(self) -> int:
        """How many entries are held, all keys together."""
        with self._lock:
            return sum(len(d) for lru in self._devices.values() for d in lru.values())

    def clear(self) -> None:
        with self._lock:
            self._devices = {}


def clear_all() -> int:
    """Forget every cache's buffers (a launch plan keeps those it holds); the entries dropped."""
    n = 0
    for c in CACHES:
        n += len(c)
        c.clear()
    return n
