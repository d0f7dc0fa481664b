"""Load for minutes: threads × streams × every public function × random shapes and call forms,
every result checked against its reference, memory and latency measured, a verdict per target.

    simt-tiles bench soak --minutes 5 --threads 16 --streams 4 [--problems 3] [--seed 0] [--out DIR | --json PATH]

Each of ``--threads`` host threads draws, call after call, a problem (a public function of the
registry, a random shape and dtype, a random boundary mode / axis / op / padding where the function
has one; a pool of ``--problems`` per function made at the start with its long-double reference and
error bound, :mod:`simt_tiles.bounds`) and a call form:

* ``numpy``: NumPy in, NumPy out;
* ``device``: Numba device arrays in (fresh copies), a new result, on one of ``--streams`` shared
  Numba streams or the default stream;
* ``out``: the same into a NaN-poisoned ``out=``;
* ``shared``: inputs that share memory (``vector_add(a, a)``, ``matmul(a, a)``, a bias that is a
  row of ``x``) for the functions that have such a call;
* ``cupy``: CuPy arrays on CuPy's current stream (where CuPy is installed);
* ``graph``: a call with ``out=`` captured into a CUDA graph on the thread's own CuPy stream (made
  once per thread; after a warm-up call there, as torch's documentation asks), the inputs then
  overwritten in place with new values of the same shapes, the graph replayed and the result
  checked against the new values' reference (where CuPy is installed; never in the simulator).

**Phases.**

1. *Warm-up (coverage)*: every thread runs every problem in every form once, and the forms that
   take a stream (``device``, ``out``) once on each stream (the default one included): every kernel
   is compiled (or loaded from the disk cache) and loaded, every launch plan recorded, and every
   per-(thread, stream, dtype) workspace grown to its largest size before anything is measured.
   Each thread starts at its own problem, so a warm-up cut short by ``--wall-limit-s`` (a slow
   sanitizer) has still called every function.
2. *Settle*: the random calls of the soak for ``--settle-s`` seconds (default 10 % of the
   minutes, at least 5 s and at most 30 s): the frameworks' memory pools reach their working size.
3. *Measured*: ``--minutes`` of random calls.  Its first memory sample is the **baseline** ("after
   warm-up"); the memory targets compare every later sample and the end with it, the latency
   target uses only this phase's calls.

Wrong results and errors count in every phase.  Memory (GPU: ``total − free`` from
``cuMemGetInfo`` after ``gc`` and Numba's pending frees; host RSS) is sampled with the workers
paused between calls (no call in flight, none timed across a pause) at the start, at the baseline,
every ``--sample-s`` seconds and at the end.  Host latency of each public call (the call alone, not
the copies and checks around it; asynchronous for device forms; the graph form: the replay's
launch) is kept per problem and form (its wall time, and the thread's CPU time as a diagnostic: a
call slow in wall time but not in CPU time waited — for the GIL, a lock, the driver) in log-spaced
bins 2 % wide, allocated before the start (constant memory).

**Why a call is slow** (``stalls`` in the JSON, ``- INFO: why slow`` lines in the summary): each
measured call is also logged (start, seconds, CPU seconds; a preallocated ring per worker), and so are
the events that could hold another thread's call (a preallocated ring, no lock): Numba's
pending-free flushes (``_PendingDeallocs.clear`` of the memory manager — ``cuMemFree``, which waits
for the device — and of the context — streams, events, modules: start, end, frees, bytes), Numba
allocations slower than 100 µs, Python's collections of generations 1 and 2, and the late wake-ups
of a GIL probe (a thread sleeping ``--gil-probe-ms`` that needs the GIL to go on: a late one is the
GIL held elsewhere).  :func:`attribute` reports, for the calls over :data:`SLOW_FACTOR` × their
median, the fraction that overlapped each kind beside the fraction expected by chance and that of
all calls, and for the :data:`TOP_SLOW` slowest by ratio the events that overlapped each (which
thread, how long, inside which of that thread's calls) and how many other threads were in a call.
The hooks wrap the harness's view of Numba (instance attributes, undone at the end), not the
library; the verdict is unchanged by them.

**Targets** (issue 36; each in the JSON's ``targets`` with its measured value, its limit and
pass/fail, and as a PASS/FAIL line of the summary; the exit status is 1 when one fails):
no wrong result; no error; no hung thread; the measured phase ran its minutes; every public
function called; GPU memory and host RSS within 5 % of the baseline at every later sample and at
the end; no measured call over 100× the median of its problem and form (the worst ratio and the
call are named).  ``--ignore latency,memory`` turns those two into information (memcheck's run:
its kernels are 10–100× slower).  ``scale`` says whether the settings meet the issue's (≥ 5 min,
≥ 16 threads, ≥ 4 streams).  ``--wall-limit-s`` bounds the whole run: the measured phase is cut
short to end in time (the minutes target then fails, saying so) and a JSON written at every sample
(``"complete": false``) survives a kill.  ``--release`` frees every cache simt_tiles, Numba and
CuPy keep and, after the outputs are written, destroys the CUDA context and exits without the
interpreter's teardown (what compute-sanitizer's ``--leak-check full`` needs to report leaks; the
teardown's finalizers would call into the dead context); ``--fill I/N`` only runs the warm-up's calls of every N-th problem from
the I-th, in one thread (N processes fill the disk caches in parallel before a soak).

:func:`soak` runs in the simulator too (``tests/test_faults.py``: a few seconds, tiny shapes; the
calls take turns there); :func:`summarise` is a pure function of the collected counts (unit-tested
on synthetic runs); the command line, like every bench group, runs only on a GPU.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import functools
import gc
import math
import os
import random
import sys
import threading
import time
import traceback
import types
import zlib
from collections import Counter
from collections.abc import Callable

import numpy as np

import simt_tiles as st
from ..bounds import check_within
from ..machine import describe
from .common import add_output_arguments, write_outputs

__all__ = ["soak", "fill", "summarise", "Problem", "problems", "FORMS", "add_arguments", "run"]

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "minutes of threads x streams x every public function, every result checked, memory sampled"

FORMS = ("numpy", "device", "out", "shared", "cupy", "graph")
#: the forms that take a stream argument: the warm-up runs them on every stream
STREAM_FORMS = ("device", "out")
#: issue 36's targets
MEMORY_TOLERANCE = 0.05
LATENCY_FACTOR = 100.0
#: the scale issue 36 asks of the soak
ISSUE_SCALE = {"minutes": 5.0, "threads": 16, "streams": 4}
#: examples kept per worker (the counts are exact)
EXAMPLES = 20
#: phases
WARM_UP, SETTLE, MEASURED = 0, 1, 2
PHASES = ("warm_up", "settle", "measured")


@dataclasses.dataclass
class Problem:
    """One call of one public function: host inputs, keyword arguments, the reference and its
    element-wise bound (an exact comparison where the bound is 0)."""

    function: str
    label: str
    inputs: tuple
    kwargs: dict
    ref: np.ndarray
    bound: np.ndarray
    #: ``() -> (device inputs of one buffer, ref, bound)`` for a call whose inputs share memory, or None
    shared: Callable | None = None
    #: ``build(values rng) -> (inputs, kwargs, ref, bound, shared)``: this problem with new values
    build: Callable | None = dataclasses.field(default=None, repr=False)
    _twin: "Problem | None" = dataclasses.field(default=None, repr=False)
    _twin_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def twin(self) -> "Problem":
        """The same call (shapes, parameters) with other values, made once."""
        with self._twin_lock:
            if self._twin is None:
                self._twin = Problem(self.function, self.label + " (twin)", *self.build(np.random.default_rng(
                    zlib.crc32(self.label.encode()))))
        return self._twin


def _ld(x):
    return np.asarray(x, dtype=np.longdouble)


def _u(dtype) -> float:
    return float(np.finfo(dtype).eps) / 2


def _elementwise(ref, dtype):
    """One rounding of the exact result."""
    return ref, _u(dtype) * np.abs(ref)


def problems(rng: random.Random, per_function: int, small: bool) -> list[Problem]:
    """``per_function`` random problems of every public function (tiny shapes when ``small``); each
    can make its :meth:`Problem.twin` (the same call, new values)."""
    # deferred: the references import their families (Numba): the command line's parser stays light
    from ..bounds import gamma, unit_roundoff
    from ..kernels.conv2d.reference import correlate1d_reference, correlate2d_reference, \
        correlate_nd_reference, correlate_separable_reference
    from ..kernels.conv_nchw.reference import conv2d_nchw_reference
    from ..kernels.matmul.reference import matmul_reference
    from ..kernels.softmax.backward import backward_reference
    from ..kernels.softmax.reference import log_softmax_reference, softmax_reference

    big = 12 if small else 300
    modes = ("reflect", "constant", "nearest", "mirror", "wrap")

    def dim(lo=1, hi=big):
        return rng.randint(lo, hi)

    def builders(dt):
        """``(function, label, build(values rng) -> (inputs, kwargs, ref, bound, shared))`` for one
        draw of every function's shapes and parameters."""
        u = unit_roundoff(dt)

        def arr(nrng, *shape):
            return nrng.standard_normal(shape).astype(dt)

        def dev(x):
            from numba import cuda

            return cuda.to_device(x)

        n = dim(1, 64 if small else 20000)

        def vector_add(r):
            a, b = arr(r, n), arr(r, n)
            return (a, b), {}, *_elementwise(_ld(a) + _ld(b), dt), \
                lambda: ((lambda d: (d, d))(dev(a)), *_elementwise(2 * _ld(a), dt))

        yield "vector_add", f"{n} {dt}", vector_add
        m, k = dim(), dim()

        def bias_relu(r):
            x, bias = arr(r, m, k), arr(r, k)
            return (x, bias), {}, *_elementwise(np.maximum(_ld(x) + _ld(bias), 0), dt), \
                lambda: ((lambda d: (d, d[0]))(dev(x)), *_elementwise(np.maximum(_ld(x) + _ld(x[0]), 0), dt))

        yield "bias_relu", f"{m}x{k} {dt}", bias_relu
        sm, sn = dim(), dim()
        for name, reference in (("softmax", softmax_reference), ("log_softmax", log_softmax_reference)):
            def softmax(r, reference=reference):
                x = arr(r, sm, sn) * 4
                return (x,), {}, *reference(x), None

            yield name, f"{sm}x{sn} {dt}", softmax
        log_bw = rng.random() < 0.5

        def softmax_backward(r):
            x = arr(r, sm, sn) * 4
            y = (log_softmax_reference if log_bw else softmax_reference)(x)[0].astype(dt)  # a forward's output
            dy = arr(r, sm, sn)
            return (y, dy), {"log": log_bw}, *backward_reference(y, dy, log=log_bw), None

        yield "softmax_backward", f"{sm}x{sn} {'log ' if log_bw else ''}{dt}", softmax_backward
        op, axis, rm, rn = rng.choice(("sum", "mean", "max")), rng.choice((None, -1, 0)), dim(), dim()

        def reduce(r):
            x = arr(r, rm, rn)
            ref = getattr(np, op)(_ld(x), axis=axis)
            count = x.size if axis is None else x.shape[axis]
            scale = np.sum(np.abs(_ld(x)), axis=axis) / (count if op == "mean" else 1)
            # sums and means accumulate in float64 and round once; max is exact
            bound = (u * np.abs(ref) + 2 * gamma(max(count, 1), 2.0**-53) * scale) if op != "max" else 0 * ref
            return (x,), {"op": op, "axis": axis}, np.asarray(ref), np.asarray(bound), None

        yield "reduce", f"{op} axis {axis} {rm}x{rn} {dt}", reduce
        mm, mn, mk = dim(), dim(), dim()

        def matmul(r):
            a, b = arr(r, mm, mk), arr(r, mk, mn)

            def shared():
                sq = arr(r, mm, mm)
                return (lambda d: (d, d))(dev(sq)), *matmul_reference(sq, sq)

            return (a, b), {}, *matmul_reference(a, b), shared

        yield "matmul", f"{mm}x{mn}x{mk} {dt}", matmul
        h, w, mode = dim(), dim(), rng.choice(modes)
        kh, kw = rng.randint(1, min(7, h)), rng.randint(1, min(7, w))
        for name, flip in (("correlate2d", False), ("convolve2d", True)):
            def filter2d(r, flip=flip):
                image, wts = arr(r, h, w), arr(r, kh, kw)
                return (image, wts), {"mode": mode}, *correlate2d_reference(image, wts, mode, convolve=flip), None

            yield name, f"{h}x{w} {kh}x{kw} {mode} {dt}", filter2d
        axis1, k1 = rng.choice((0, 1)), rng.randint(1, 9)

        def correlate1d(r):
            image, w1 = arr(r, h, w), arr(r, k1)
            return (image, w1), {"axis": axis1, "mode": mode}, *correlate1d_reference(image, w1, axis1, mode), None

        yield "correlate1d", f"{h}x{w} {k1} axis {axis1} {mode} {dt}", correlate1d
        ky, kx = rng.randint(1, 7), rng.randint(1, 7)

        def separable(r):
            image, wy, wx = arr(r, h, w), arr(r, ky), arr(r, kx)
            return (image, wy, wx), {"mode": mode}, *correlate_separable_reference(image, wy, wx, mode), None

        yield "correlate_separable", f"{h}x{w} {ky}+{kx} {mode} {dt}", separable
        vd, vh, vw = (rng.randint(1, 6 if small else 64) for _ in range(3))
        vk = tuple(rng.randint(1, 3 if small else 5) for _ in range(3))
        for name, flip in (("correlate", False), ("convolve", True)):  # 3-D volumes (k12)
            def volume(r, flip=flip):
                image, wts = arr(r, vd, vh, vw), arr(r, *vk)
                return (image, wts), {"mode": mode}, *correlate_nd_reference(image, wts, mode, convolve=flip), None

            yield name, f"{vd}x{vh}x{vw} {'x'.join(map(str, vk))} {mode} {dt}", volume
        nb, c, co = rng.randint(1, 3), rng.randint(1, 4 if small else 16), rng.randint(1, 4 if small else 16)
        hh, ww = dim(3, 10 if small else 40), dim(3, 10 if small else 40)
        kk = rng.choice((1, 3)) if small else rng.choice((1, 3, 5))
        pad = rng.randint(0, kk // 2)

        def conv(r):
            xs, ws, bs = arr(r, nb, c, hh, ww), arr(r, co, c, kk, kk), arr(r, co)
            return (xs, ws), {"bias": bs, "padding": pad}, *conv2d_nchw_reference(xs, ws, bs, pad), None

        yield "conv2d_nchw", f"({nb}, {c}, {hh}, {ww}) ({co}, {c}, {kk}, {kk}) pad {pad} {dt}", conv

    out: list[Problem] = []
    for _ in range(per_function):
        for function, label, build in builders(np.dtype(rng.choice((np.float32, np.float64)))):
            out.append(Problem(function, f"{function} {label}", *build(np.random.default_rng(rng.randrange(2**32))),
                               build=build))
    return out




# ---------------------------------------------------------------------------
# Latency bins, memory
# ---------------------------------------------------------------------------

class Latencies:
    """Seconds in log-spaced bins, 2 % wide, from 1 µs to 100 s: median, p99 and maximum in constant
    memory (the bins are allocated when it is made); the slowest call's description kept."""

    LO, STEP = 1e-6, math.log(1.02)
    BINS = int(math.log(1e8) / math.log(1.02)) + 2

    def __init__(self):
        self.counts = np.zeros(self.BINS, np.int32)
        self.max = self.max_clean = 0.0
        self.max_where = self.max_clean_where = ""

    def add(self, seconds: float, where: Callable | str = "", clean: bool = True) -> None:
        """``clean``: the call overlapped no full garbage collection."""
        i = 0 if seconds <= self.LO else min(self.BINS - 1, int(math.log(seconds / self.LO) / self.STEP) + 1)
        self.counts[i] += 1
        if seconds > self.max:
            self.max = seconds
            self.max_where = where() if callable(where) else where
        if clean and seconds > self.max_clean:
            self.max_clean = seconds
            self.max_clean_where = where() if callable(where) else where

    def merge(self, other: "Latencies") -> None:
        self.counts += other.counts
        if other.max > self.max:
            self.max, self.max_where = other.max, other.max_where
        if other.max_clean > self.max_clean:
            self.max_clean, self.max_clean_where = other.max_clean, other.max_clean_where

    def _value(self, i: int) -> float:
        return self.LO * math.exp(self.STEP * max(i - 0.5, 0))

    def summary(self) -> dict:
        """``{"calls"}``, and where there were calls the median, p99 and maximum (µs), the maximum
        over the median, the calls over :data:`LATENCY_FACTOR` × the median, the slowest call."""
        n = int(self.counts.sum())
        if not n:
            return {"calls": 0}
        cum = np.cumsum(self.counts)
        # (a bin's middle: within 1 % of the call's time; never above the slowest call)
        med = min(self.max, self._value(int(np.searchsorted(cum, (n + 1) // 2))))
        p99 = min(self.max, self._value(int(np.searchsorted(cum, math.ceil(0.99 * n)))))
        values = self.LO * np.exp(self.STEP * np.maximum(np.arange(self.BINS) - 0.5, 0))
        over = int(self.counts[values > LATENCY_FACTOR * med].sum())
        return {"calls": n, "median_us": round(med * 1e6, 2), "p99_us": round(p99 * 1e6, 2),
                "max_us": round(self.max * 1e6, 2), "max_over_median": round(self.max / med, 1) if med > 0 else 1.0,
                "over_limit": over, "slowest": self.max_where,
                "max_no_gc_over_median": round(self.max_clean / med, 1) if med > 0 else 1.0,
                "slowest_no_gc": self.max_clean_where}


class _FullCollections:
    """Python's full (generation 2) garbage collections, whichever thread runs them: it holds the GIL
    throughout, so every call in flight then waits.  ``count`` changes at each start and stop (a call
    that sees it change, or ``active``, overlapped one); the pauses' seconds are kept (the last 1000)."""

    def __init__(self):
        self.count, self.active, self.started = 0, False, 0.0
        self.pauses: list = []
        self.installed = False
        self.started_any = 0.0

    def __call__(self, phase, info):
        gen = info.get("generation")
        if gen is None or gen < 1:
            return
        # (generations 1 and 2 into the soak's event log: one collection at a time, whichever thread)
        if phase == "start":
            self.started_any = time.perf_counter()
        elif EVENTS is not None:
            EVENTS.add(K_GC_FULL if gen == 2 else K_GC_GEN1, self.started_any, time.perf_counter(),
                       int(info.get("collected", 0) or 0))
        if gen != 2:
            return
        self.count += 1
        if phase == "start":
            self.active, self.started = True, time.perf_counter()
        else:
            self.active = False
            self.pauses.append(time.perf_counter() - self.started)
            del self.pauses[:-1000]

    def install(self):
        if not self.installed:
            gc.callbacks.append(self)
            self.installed = True

    def remove(self):
        if self.installed:
            gc.callbacks.remove(self)
            self.installed = False


# ---------------------------------------------------------------------------
# Stalls: what could hold another thread's call (issue 36's slow graph replay)
# ---------------------------------------------------------------------------

#: a call over this many times its median is "slow" for the attribution (the target's limit is LATENCY_FACTOR)
SLOW_FACTOR = 20.0
#: the slowest calls (by their ratio to the median of their problem and form) described one by one
TOP_SLOW = 10
#: measured calls logged per worker (a ring: the latest kept), events logged (a ring too)
CALL_LOG = 1 << 15
EVENT_LOG = 1 << 19
#: a Numba allocation (``cuMemAlloc``) slower than this is logged
SLOW_ALLOC_S = 100e-6
#: the GIL probe: a thread that sleeps GIL_PROBE_S and logs a wake-up later than GIL_WAIT_S (it needs
#: the GIL to run: a late wake-up is the GIL held elsewhere, or no core free)
GIL_PROBE_S, GIL_WAIT_S = 1e-3, 1e-3
#: event kinds: Numba's pending-free flushes (the memory manager's queue: cuMemFree, cuMemFreeHost; the
#: context's: streams, events, modules), a slow cuMemAlloc, Python's collections of generations 2 and 1,
#: the GIL probe's late wake-ups
EVENT_KINDS = ("numba_free_flush", "numba_ctx_flush", "numba_alloc_slow", "gc_full", "gc_gen1", "gil_wait")
K_FREE_FLUSH, K_CTX_FLUSH, K_ALLOC, K_GC_FULL, K_GC_GEN1, K_GIL = range(len(EVENT_KINDS))
#: event threads that are no worker
MAIN_THREAD, PROBE_THREAD, OTHER_THREAD = -1, -2, -3

_TLS = threading.local()


def _thread_index() -> int:
    """The worker's index (set in :meth:`Worker.run`), or MAIN_THREAD / PROBE_THREAD / OTHER_THREAD."""
    i = getattr(_TLS, "index", None)
    if i is not None:
        return i
    return MAIN_THREAD if threading.current_thread() is threading.main_thread() else OTHER_THREAD


class EventLog:
    """Events ``(kind, thread, start, end, n, bytes)`` in preallocated arrays (a ring; constant memory, the
    pages written when it is made).  :meth:`add` takes no lock (a slot from an ``itertools.count``, atomic
    under the GIL): it is called from finalizers and garbage-collector callbacks, which may run inside
    another :meth:`add` of the same thread."""

    def __init__(self, capacity: int = EVENT_LOG):
        import itertools

        self.capacity = capacity
        self.t0 = np.full(capacity, np.nan)
        self.t1 = np.full(capacity, np.nan)
        self.kind = np.full(capacity, -1, np.int8)
        self.thread = np.full(capacity, OTHER_THREAD, np.int16)
        self.n = np.full(capacity, 0, np.int64)
        self.nbytes = np.full(capacity, 0, np.int64)
        self._slots = itertools.count()

    def add(self, kind: int, t0: float, t1: float, n: int = 0, nbytes: int = 0, thread: int | None = None) -> None:
        i = next(self._slots) % self.capacity
        self.kind[i] = -1  # (incomplete until the kind is written last)
        self.t0[i], self.t1[i], self.n[i], self.nbytes[i] = t0, t1, n, nbytes
        self.thread[i] = _thread_index() if thread is None else thread
        self.kind[i] = kind

    def snapshot(self) -> dict:
        """The complete events (arrays; ``kind`` as names) and how many the ring overwrote."""
        added = next(self._slots)  # (one slot spent: it stays incomplete, kind -1)
        ok = self.kind >= 0
        return {"t0": self.t0[ok].copy(), "t1": self.t1[ok].copy(),
                "kind": np.asarray(EVENT_KINDS, dtype=object)[self.kind[ok]], "thread": self.thread[ok].copy(),
                "n": self.n[ok].copy(), "nbytes": self.nbytes[ok].copy(), "dropped": max(0, added - self.capacity)}


#: the soak's event log while it runs (the GC callback, the hooks and the probe write there), else None
EVENTS: EventLog | None = None


class CallLog:
    """A worker's measured calls ``(start, seconds, CPU seconds, key)``: preallocated (a ring), one writer."""

    def __init__(self, capacity: int = CALL_LOG):
        self.capacity, self.n = capacity, 0
        self.t0 = np.full(capacity, np.nan)
        self.dt = np.full(capacity, np.nan)
        self.cpu = np.full(capacity, np.nan)
        self.key = np.full(capacity, 0, np.int32)

    def add(self, t0: float, seconds: float, cpu_seconds: float, key: int) -> None:
        i = self.n % self.capacity
        self.t0[i], self.dt[i], self.cpu[i], self.key[i] = t0, seconds, cpu_seconds, key
        self.n += 1


def _hook_flushes(dealloc, kind: int, log: EventLog):
    """Wrap a Numba ``_PendingDeallocs``'s ``clear`` (an instance attribute: ``add_item``'s
    ``self.clear()`` finds it) to log each flush that frees something: start, end, the number of frees,
    their bytes.  Returns the undo, or None (already hooked, or no such object)."""
    if not callable(getattr(dealloc, "clear", None)) or "clear" in getattr(dealloc, "__dict__", {"clear": 0}):
        return None
    orig = dealloc.clear

    def clear():
        n = len(dealloc)
        if not n or getattr(dealloc, "is_disabled", False):
            return orig()
        nbytes = int(getattr(dealloc, "_size", 0) or 0)
        t0 = time.perf_counter()
        try:
            return orig()
        finally:
            log.add(kind, t0, time.perf_counter(), n, nbytes)

    dealloc.clear = clear

    def undo():
        if vars(dealloc).get("clear") is clear:
            del dealloc.clear

    return undo


def _hook_alloc(manager, log: EventLog, slow_s: float = SLOW_ALLOC_S):
    """Wrap a Numba memory manager's ``memalloc`` (``Context.memalloc`` calls it) to log the allocations
    slower than ``slow_s``.  Returns the undo, or None."""
    if not callable(getattr(manager, "memalloc", None)) or "memalloc" in getattr(manager, "__dict__", {"memalloc": 0}):
        return None
    orig = manager.memalloc

    def memalloc(size):
        t0 = time.perf_counter()
        try:
            return orig(size)
        finally:
            t1 = time.perf_counter()
            if t1 - t0 > slow_s:
                log.add(K_ALLOC, t0, t1, 1, int(size))

    manager.memalloc = memalloc

    def undo():
        if vars(manager).get("memalloc") is memalloc:
            del manager.memalloc

    return undo


def install_stall_hooks(ctx, log: EventLog) -> tuple[list, list]:
    """The hooks on the current Numba context (a GPU's; the simulator's has no queues): ``(names
    installed, undos)``."""
    mm = getattr(ctx, "memory_manager", None)
    names, undos = [], []
    for name, undo in (("numba_free_flush", _hook_flushes(getattr(mm, "deallocations", None), K_FREE_FLUSH, log)),
                       ("numba_ctx_flush", _hook_flushes(getattr(ctx, "deallocations", None), K_CTX_FLUSH, log)),
                       ("numba_alloc_slow", _hook_alloc(mm, log))):
        if undo is not None:
            names.append(name)
            undos.append(undo)
    return names, undos


class GilProbe:
    """A thread that sleeps ``interval_s`` again and again and logs (``gil_wait``) each wake-up later than
    ``threshold_s``: it needs the GIL to go on, so a late one is the GIL held elsewhere (a C extension that
    keeps it, a long collection; or every core busy).  Its lateness is kept in :class:`Latencies` bins."""

    def __init__(self, log: EventLog, interval_s: float = GIL_PROBE_S, threshold_s: float = GIL_WAIT_S):
        self.log, self.interval, self.threshold = log, interval_s, threshold_s
        self.lateness = Latencies()
        self.probes = self.late = 0
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def run(self) -> None:
        _TLS.index = PROBE_THREAD
        while not self.stop.is_set():
            t = time.perf_counter()
            time.sleep(self.interval)
            now = time.perf_counter()
            late = now - t - self.interval
            self.probes += 1
            self.lateness.add(max(late, 0.0))
            if late > self.threshold:
                self.late += 1
                self.log.add(K_GIL, t + self.interval, now, thread=PROBE_THREAD)

    def start(self) -> "GilProbe":
        self.thread = threading.Thread(target=self.run, daemon=True, name="soak-gil-probe")
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=1.0)

    def summary(self) -> dict:
        s = self.lateness.summary()
        return {"interval_ms": self.interval * 1e3, "threshold_ms": self.threshold * 1e3, "probes": self.probes,
                "late": self.late, "lateness_median_us": s.get("median_us"), "lateness_p99_us": s.get("p99_us"),
                "lateness_max_us": s.get("max_us")}


def _merge(t0, t1):
    """The union of intervals as disjoint sorted ``(starts, ends)``."""
    t0, t1 = np.asarray(t0, float), np.asarray(t1, float)
    if not len(t0):
        return np.zeros(0), np.zeros(0)
    o = np.argsort(t0, kind="stable")
    s, e = t0[o], t1[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def _overlaps(starts, ends, a, b):
    """Whether each interval ``[a, b]`` overlaps the union ``(starts, ends)`` (disjoint, sorted)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not len(starts):
        return np.zeros(a.shape, bool)
    i = np.searchsorted(starts, b, "left") - 1
    return (i >= 0) & (ends[np.maximum(i, 0)] > a)


def _covered(starts, ends, a, b):
    """The seconds of each interval ``[a, b]`` that the union ``(starts, ends)`` covers."""
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    out = np.zeros(a.shape)
    if not len(starts):
        return out
    lo, hi = np.searchsorted(ends, a, "right"), np.searchsorted(starts, b, "left")
    for i in range(len(a)):
        if hi[i] > lo[i]:
            s, e = starts[lo[i]:hi[i]], ends[lo[i]:hi[i]]
            out[i] = float(np.maximum(0.0, np.minimum(e, b[i]) - np.maximum(s, a[i])).sum())
    return out


def _chance(starts, ends, lengths, span: float):
    """The probability that an interval of each length, started anywhere in a window of ``span``
    seconds, overlaps the union: ``|∪ [s − L, e]| / span`` (the null a slow call is compared with)."""
    lengths = np.asarray(lengths, float)
    if not len(starts) or span <= 0:
        return np.zeros(lengths.shape)
    gaps = np.sort(starts[1:] - ends[:-1])
    cum = np.concatenate([[0.0], np.cumsum(gaps)])
    k = np.searchsorted(gaps, lengths)
    reach = cum[k] + lengths * (len(gaps) - k)  # Σ min(gap, L)
    return np.minimum(1.0, ((ends - starts).sum() + lengths + reach) / span)


def _form_of(key: str) -> str:
    return key.rsplit("[", 1)[-1].rstrip("]") if "[" in key else "?"


def attribute(calls: dict, events: dict, window: tuple, *, origin: float = 0.0, top: int = TOP_SLOW,
              slow_factor: float = SLOW_FACTOR, listed: int = 12) -> dict:
    """Which events overlapped the slow calls (a pure function of the logs; unit-tested).

    ``calls``: arrays ``t0``, ``t1``, ``cpu`` (seconds), ``thread``, ``median`` (seconds: the median of
    the call's problem and form), ``key`` ("problem [form]").  ``events``: arrays ``t0``, ``t1``,
    ``kind`` (names), ``thread``, ``n``, ``nbytes``.  ``window``: the measured phase's ``(start, end)``.
    Returns per kind the events' count, time and the fraction of the window they cover, and the fraction
    that began inside a timed call of their own thread; for the calls over ``slow_factor`` × their
    median, the fraction that overlapped each kind beside the fraction expected by chance (an interval of
    the same length anywhere in the window) and the fraction of all calls; and the ``top`` calls by ratio,
    each with the events that overlapped it (kind, thread, start relative to the call's, duration, count,
    bytes, the form of the call its thread was in then) and the other threads in a timed call then."""
    c = {k: np.asarray(calls[k]) for k in ("t0", "t1", "cpu", "thread", "median")}
    keys = np.asarray(calls["key"], dtype=object)
    forms = np.asarray([_form_of(k) for k in keys], dtype=object)
    e = {k: np.asarray(events[k]) for k in ("t0", "t1", "thread", "n", "nbytes")}
    kinds = np.asarray(events["kind"], dtype=object)
    w0, w1 = window
    span = max(w1 - w0, 0.0)
    dur = c["t1"] - c["t0"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(c["median"] > 0, dur / c["median"], np.nan)
    slow = np.flatnonzero(np.nan_to_num(ratio, nan=0.0) > slow_factor)

    # the call each event began in, on its own thread (-1: none)
    in_call = np.full(len(kinds), -1)
    for th in np.unique(e["thread"]) if len(kinds) else ():
        mine = np.flatnonzero(c["thread"] == th)
        if not len(mine):
            continue
        mine = mine[np.argsort(c["t0"][mine])]
        ev = np.flatnonzero(e["thread"] == th)
        j = np.searchsorted(c["t0"][mine], e["t0"][ev], "right") - 1
        hit = (j >= 0) & (c["t1"][mine[np.maximum(j, 0)]] >= e["t0"][ev])
        in_call[ev[hit]] = mine[j[hit]]

    inside = (e["t1"] > w0) & (e["t0"] < w1) if len(kinds) else np.zeros(0, bool)
    per_kind, overlap, unions = {}, {}, {}
    any_event = np.zeros(len(slow), bool)
    for kind in EVENT_KINDS:
        k = np.flatnonzero((kinds == kind) & inside)
        if not len(k):
            continue
        s, en = unions[kind] = _merge(np.maximum(e["t0"][k], w0), np.minimum(e["t1"][k], w1))
        d = e["t1"][k] - e["t0"][k]
        per_kind[kind] = {"count": int(len(k)), "total_ms": round(1e3 * float(d.sum()), 1),
                          "max_ms": round(1e3 * float(d.max()), 2),
                          "coverage": round(float((en - s).sum()) / span, 5) if span else None,
                          "inside_library_call": round(float((in_call[k] >= 0).mean()), 3)}
        hit = _overlaps(s, en, c["t0"][slow], c["t1"][slow])
        any_event |= hit
        half = _covered(s, en, c["t0"][slow], c["t1"][slow]) >= 0.5 * dur[slow] if len(slow) else np.zeros(0, bool)
        overlap[kind] = {"slow_calls": int(hit.sum()),
                         "fraction": round(float(hit.mean()), 3) if len(slow) else None,
                         # (the stronger test: this kind's events cover at least half of the slow call)
                         "half_covered": round(float(half.mean()), 3) if len(slow) else None,
                         "by_chance": round(float(_chance(s, en, dur[slow], span).mean()), 3) if len(slow) else None,
                         "all_calls": round(float(_overlaps(s, en, c["t0"], c["t1"]).mean()), 3) if len(dur) else None}

    worst = []
    order = np.argsort(-np.nan_to_num(ratio, nan=0.0), kind="stable")[:top] if len(dur) else []
    for j in order:
        a, b, th = c["t0"][j], c["t1"][j], c["thread"][j]
        others = (c["thread"] != th) & (c["t0"] < b) & (c["t1"] > a)
        by_form: dict = {}
        for f in forms[others]:
            by_form[f] = by_form.get(f, 0) + 1
        hit = np.flatnonzero((e["t0"] < b) & (e["t1"] > a)) if len(kinds) else np.zeros(0, int)
        hit = hit[np.argsort(-(e["t1"][hit] - e["t0"][hit]), kind="stable")]
        summary: dict = {}
        for i in hit:
            x = summary.setdefault(kinds[i], [0, 0.0])
            x[0] += 1
            x[1] = max(x[1], round(1e3 * float(e["t1"][i] - e["t0"][i]), 2))
        worst.append({
            "call": str(keys[j]), "thread": int(th), "at_s": round(float(a - origin), 3),
            "us": round(1e6 * float(b - a), 1), "median_us": round(1e6 * float(c["median"][j]), 2),
            "ratio": round(float(ratio[j]), 1), "cpu_us": round(1e6 * float(c["cpu"][j]), 1),
            "others_in_call": int(len(set(c["thread"][others].tolist()))), "others_by_form": by_form,
            "event_kinds": {k: {"count": v[0], "max_ms": v[1],
                                "covered_ms": round(1e3 * float(_covered(*unions[k], a, b)[0]), 3) if k in unions
                                else None} for k, v in summary.items()},
            "events": [{"kind": str(kinds[i]), "thread": int(e["thread"][i]),
                        "start_ms": round(1e3 * float(e["t0"][i] - a), 3),
                        "ms": round(1e3 * float(e["t1"][i] - e["t0"][i]), 3), "n": int(e["n"][i]),
                        "bytes": int(e["nbytes"][i]),
                        "in_call": str(forms[in_call[i]]) if in_call[i] >= 0 else None} for i in hit[:listed]]})
    by_form: dict = {}
    for f in forms[slow]:
        by_form[f] = by_form.get(f, 0) + 1
    return {"window_s": round(span, 3), "calls": int(len(dur)), "slow_factor": slow_factor,
            "events": per_kind,
            "slow": {"calls": int(len(slow)), "by_form": by_form, "overlap": overlap,
                     "overlapping_no_event": int((~any_event).sum())},
            "worst": worst}


def _host_rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory(simulator: bool, t0: float = 0.0) -> dict:
    """GPU bytes in use (total − free, after collecting garbage and Numba's pending frees) and host
    RSS; ``t`` in seconds since ``t0``."""
    from numba import cuda

    gc.collect()
    sample = {"t": round(time.perf_counter() - t0, 3)}
    if not simulator:
        ctx = cuda.current_context()
        cuda.synchronize()
        ctx.deallocations.clear()  # (the context's queue: streams, events, modules)
        queue = getattr(getattr(ctx, "memory_manager", None), "deallocations", None)
        if queue is not None:  # (the memory manager's: the device arrays' cuMemFree)
            queue.clear()
        free, total = ctx.get_memory_info()
        sample["gpu_used"] = int(total - free)
        cp = sys.modules.get("cupy")
        if cp is not None:  # (its pool grows by cudaMalloc: flat after the settle unless a call needs more)
            try:
                sample["cupy_pool"] = int(cp.get_default_memory_pool().total_bytes())
            except Exception:  # noqa: BLE001 - information only
                pass
    sample["host_rss"] = _host_rss()
    # what could step the memory once (sessions 18-19: host RSS +275 MiB in one step, then flat: torch imported
    # for the first interim JSON's machine description): kernels built, plans recorded and held, live threads,
    # modules loaded
    from .. import launch, runtime  # deferred: loads Numba (backend choice first)

    sample["kernels"] = len(runtime._BUILT)
    plans = launch.stats()
    sample["plans_recorded"], sample["plans"] = plans["recorded"], plans["plans"]
    sample["threads"] = threading.active_count()
    sample["modules"] = len(sys.modules)  # an import in the measured phase (a late import steps the RSS)
    return sample


# ---------------------------------------------------------------------------
# One call, checked
# ---------------------------------------------------------------------------

FULL_GC = _FullCollections()


class _Serial:
    """The simulator's kernels are not safe to run from two host threads at once (it swaps the kernel
    module's ``cuda`` global while a kernel runs): there the public calls take turns; on a GPU they
    run concurrently (this is a ``nullcontext``)."""

    def __init__(self, on: bool):
        self.lock = threading.Lock() if on else None

    def __enter__(self):
        if self.lock is not None:
            self.lock.acquire()

    def __exit__(self, *exc):
        if self.lock is not None:
            self.lock.release()


class Gate:
    """Between calls the workers pass the gate; :meth:`pause` closes it and waits until no call is
    in flight (the memory samples are taken then, and no timed call spans one); :meth:`resume`
    opens it."""

    def __init__(self):
        self.cond = threading.Condition()
        self.paused = False
        self.busy = 0

    def enter(self) -> None:
        with self.cond:
            while self.paused:
                self.cond.wait()
            self.busy += 1

    def leave(self) -> None:
        with self.cond:
            self.busy -= 1
            if self.busy == 0:
                self.cond.notify_all()

    def pause(self, timeout: float) -> bool:
        """True when every call in flight ended within ``timeout`` seconds."""
        with self.cond:
            self.paused = True
            return self.cond.wait_for(lambda: self.busy == 0, timeout)

    def resume(self) -> None:
        with self.cond:
            self.paused = False
            self.cond.notify_all()


class State:
    """What the main thread tells the workers: the phase, stop, abort the warm-up."""

    def __init__(self):
        self.phase = WARM_UP
        self.stop = threading.Event()
        self.abort = threading.Event()
        self.t0 = time.perf_counter()


class Worker:
    serial = _Serial(False)

    def __init__(self, index, problems_, streams, forms, seed, cupy, gate: Gate | None = None,
                 state: State | None = None):
        self.index, self.problems, self.streams, self.forms = index, problems_, streams, forms
        self.rng = random.Random(seed)
        self.cupy = cupy
        self.gate = gate or Gate()
        self.state = state or State()
        #: (function, form) → calls per phase
        self.calls: dict = {}
        self.wrong: list = []
        self.errors: list = []
        self.n_wrong = self.n_errors = 0
        self.graph_captures = self.graph_replays = 0
        self.warmed = False
        self.offset = 0  # where in the problems this thread's warm-up starts
        self.current = None  # (what, since): the call in flight
        self._capture_stream = None
        # the latency bins of every (problem, form), made now: constant memory from the start
        self.latency = {(p.label, f): Latencies() for p in problems_ for f in self.forms_of(p)}
        self.cpu = {k: Latencies() for k in self.latency}
        #: the measured calls one by one (start, seconds, CPU seconds, key): what the stall attribution reads
        self.keys = list(self.latency)
        self.key_index = {k: i for i, k in enumerate(self.keys)}
        self.log = CallLog()

    def forms_of(self, problem):
        return [f for f in self.forms if f != "shared" or problem.shared is not None]

    def _where(self, problem, form, stream) -> str:
        s = "default" if stream is None else f"S{self.streams.index(stream)}"
        return f"{problem.label} [{form}, thread {self.index}, stream {s}]"

    def _phase_text(self) -> str:
        return f"{PHASES[self.state.phase]} {time.perf_counter() - self.state.t0:.1f} s"

    def _wrong(self, text: str) -> None:
        self.n_wrong += 1
        if len(self.wrong) < EXAMPLES:
            self.wrong.append(f"{text} ({self._phase_text()})"[:600])

    def _error(self, text: str) -> None:
        self.n_errors += 1
        if len(self.errors) < EXAMPLES:
            self.errors.append(f"{text} ({self._phase_text()})"[:600])

    def call(self, problem: Problem, form: str, stream="random") -> None:
        """One checked call (the gate passed first)."""
        if stream == "random":
            stream = self.rng.choice(self.streams) if form in STREAM_FORMS else None
        self.gate.enter()
        if self.state.stop.is_set():  # (stopped while it waited at the gate: after the end's sample)
            self.gate.leave()
            return
        phase = self.state.phase
        where = self._where(problem, form, stream)
        self.current = (where, time.perf_counter())
        try:
            self._call(problem, form, stream, where, phase)
        except Exception as exc:  # noqa: BLE001 - counted and described; the soak goes on
            self._error(f"{where}: {type(exc).__name__}: {exc}")
        finally:
            self.current = None
            self.gate.leave()
        counts = self.calls.setdefault((problem.function, form), [0, 0, 0])
        counts[phase] += 1

    def _call(self, problem, form, stream, where, phase):
        from numba import cuda

        fn = getattr(st, problem.function)
        ref, bound = problem.ref, problem.bound
        if form == "cupy":
            return self.cupy_call(fn, problem, where, phase)
        if form == "graph":
            return self.graph_call(fn, problem, where, phase)
        if form == "numpy":
            args, kw, read = problem.inputs, {}, np.asarray
        elif form == "shared":
            args, ref, bound = problem.shared()
            kw, read = {}, lambda r: r.copy_to_host()
        else:
            args = tuple(cuda.to_device(x, stream=stream or 0) for x in problem.inputs)
            kw = {}
            if form == "out":
                kw["out"] = cuda.to_device(np.full(np.shape(ref), np.nan, problem.inputs[0].dtype), stream=stream or 0)
            if stream is not None:
                kw["stream"] = stream

            def read(r, stream=stream):
                host = r.copy_to_host(stream=stream or 0)
                if stream is not None:
                    stream.synchronize()
                return host
        kwargs = {**self.device_kwargs(problem, form, stream), **kw}
        with self.serial:
            g0, t0, c0 = FULL_GC.count, time.perf_counter(), time.thread_time()
            result = fn(*args, **kwargs)
            dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            clean = g0 == FULL_GC.count and not FULL_GC.active
            got = read(result if form != "out" else kw["out"])
        self.check(got, ref, bound, where)
        self.record(problem.label, form, dt, dc, where, phase, clean, start=t0)

    def device_kwargs(self, problem, form, stream):
        """The problem's keyword arguments; array ones (conv2d_nchw's bias) as the form's arrays."""
        from numba import cuda

        out = {}
        for k, v in problem.kwargs.items():
            out[k] = cuda.to_device(v, stream=stream or 0) if isinstance(v, np.ndarray) and form not in ("numpy",) \
                else v
        return out

    def record(self, label, form, seconds, cpu_seconds, where, phase, clean=True, start=None):
        """``start``: the timed region's ``perf_counter`` (the call is logged for the stall attribution)."""
        if phase == MEASURED:
            if start is not None:
                self.log.add(start, seconds, cpu_seconds, self.key_index[label, form])
            t = time.perf_counter() - self.state.t0
            self.latency[label, form].add(seconds, lambda: f"{where} at {t:.1f} s, {seconds * 1e6:.0f} µs", clean)
            self.cpu[label, form].add(cpu_seconds, lambda: f"{where} at {t:.1f} s, {cpu_seconds * 1e6:.0f} µs CPU",
                                      clean)

    def check(self, got, ref, bound, where):
        got = np.asarray(got)
        if got.shape != np.shape(ref):
            self._wrong(f"{where}: shape {got.shape}, expected {np.shape(ref)}")
            return
        res = check_within(got, np.asarray(ref), np.asarray(bound))
        if not res.passed:
            self._wrong(f"{where}: {res!r}")

    def cupy_call(self, fn, problem, where, phase):
        cp = self.cupy
        args = tuple(cp.asarray(x) for x in problem.inputs)
        kwargs = {k: cp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in problem.kwargs.items()}
        g0, t0, c0 = FULL_GC.count, time.perf_counter(), time.thread_time()
        result = fn(*args, **kwargs)
        dt, dc = time.perf_counter() - t0, time.thread_time() - c0
        clean = g0 == FULL_GC.count and not FULL_GC.active
        self.check(cp.asnumpy(result), problem.ref, problem.bound, where)
        self.record(problem.label, "cupy", dt, dc, where, phase, clean, start=t0)

    def capture_stream(self):
        """This thread's CuPy stream for graph captures, made once (a stream per capture would make a
        launch plan, a workspace and a CuPy pool of blocks per stream: state that grows with the
        number of streams ever made, not what a server capturing its graphs once does)."""
        if self._capture_stream is None:
            self._capture_stream = self.cupy.cuda.Stream(non_blocking=True)
        return self._capture_stream

    def graph_call(self, fn, problem, where, phase):
        """Capture ``fn(inputs, out=out)`` on the thread's CuPy stream, overwrite the inputs in place
        with the problem's twin's values (the same shapes), replay the graph, check against the
        twin's reference."""
        cp = self.cupy
        other = problem.twin()
        s = self.capture_stream()
        with s:
            args = tuple(cp.asarray(x) for x in problem.inputs)
            kwargs = {k: cp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in problem.kwargs.items()}
            out = cp.full(np.shape(problem.ref), cp.nan, problem.inputs[0].dtype)
            fn(*args, **kwargs, out=out)  # warm-up on the capture stream (workspaces, plan)
            s.synchronize()
            self.check(cp.asnumpy(out), problem.ref, problem.bound, where + " (before capture)")
            # thread-local: the capture must be clean in this thread without forbidding the other
            # threads' allocations (global mode would fail their cudaMalloc while it lasts)
            s.begin_capture(getattr(cp.cuda.runtime, "streamCaptureModeThreadLocal", None))
            fn(*args, **kwargs, out=out)
            graph = s.end_capture()
            self.graph_captures += 1
            for d, h in zip((*args, *_arrays(kwargs)), (*other.inputs, *_arrays(other.kwargs))):
                d[...] = cp.asarray(h)
            out.fill(cp.nan)
            g0, t0, c0 = FULL_GC.count, time.perf_counter(), time.thread_time()
            graph.launch(stream=s)
            dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            clean = g0 == FULL_GC.count and not FULL_GC.active
            self.graph_replays += 1
            s.synchronize()
        self.check(cp.asnumpy(out), other.ref, other.bound, where + " (graph replayed on new inputs)")
        self.record(problem.label, "graph", dt, dc, where, phase, clean, start=t0)

    def warm_up(self, progress: bool = False):
        """Every problem in every form; the stream forms on every stream (see the module docstring)."""
        t0 = time.perf_counter()
        k = self.offset % max(len(self.problems), 1)  # (threads start apart: a cut warm-up still reaches them all)
        for i, p in enumerate(self.problems[k:] + self.problems[:k]):
            for f in self.forms_of(p):
                for s in (self.streams if f in STREAM_FORMS else (None,)):
                    if self.state.abort.is_set():
                        return
                    self.call(p, f, stream=s)
            if progress:  # (thread 0: the compiles happen here, once per kernel whichever thread asks)
                print(f"soak: warm-up {i + 1}/{len(self.problems)} {p.label} ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
        self.warmed = True

    def loop(self):
        while not self.state.stop.is_set():
            p = self.rng.choice(self.problems)
            self.call(p, self.rng.choice(self.forms_of(p)))

    def run(self, progress: bool = False):
        _TLS.index = self.index  # (the events this thread logs name it)
        self.warm_up(progress)
        self.loop()


def _arrays(kwargs):
    return [v for v in kwargs.values() if hasattr(v, "shape")]


# ---------------------------------------------------------------------------
# The soak
# ---------------------------------------------------------------------------

def default_settle_s(minutes: float) -> float:
    """10 % of the measured minutes, at least 5 s, at most 30 s."""
    return max(5.0, min(30.0, 0.1 * minutes * 60))


def _cupy(simulator: bool):
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def soak(minutes: float = 5.0, threads: int = 16, streams: int = 4, *, problems_per_function: int = 6,
         seed: int = 0, sample_s: float = 10.0, forms=None, settle_s: float | None = None,
         wall_limit_s: float | None = None, release: bool = False, ignore=(), gc_freeze: bool = False,
         progress: bool = True, on_sample: Callable | None = None, gil_probe_ms: float = GIL_PROBE_S * 1e3,
         switch_interval_ms: float | None = None) -> dict:
    """Run the soak (see the module docstring); the results as a dict (the JSON).  ``on_sample(data)``
    is called with the results so far (``"complete": False``) at every memory sample.  ``gil_probe_ms``:
    the GIL probe's sleep (0: no probe); ``switch_interval_ms``: ``sys.setswitchinterval`` for the run
    (None: Python's, 5 ms), restored at the end."""
    global EVENTS
    switch_before = sys.getswitchinterval()
    if switch_interval_ms is not None:
        sys.setswitchinterval(switch_interval_ms / 1e3)
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from .. import launch, registry
    from ..runtime import SIMULATOR

    state = State()
    t_begin = state.t0
    wall_end = t_begin + wall_limit_s if wall_limit_s else math.inf
    reserve = 20.0 if wall_limit_s else 0.0  # the end: the last sample, the joins, the release, the JSON
    settle_s = default_settle_s(minutes) if settle_s is None else settle_s
    cupy = _cupy(SIMULATOR)
    if forms is None:
        forms = [f for f in FORMS if f not in ("cupy", "graph") or (cupy is not None and not SIMULATOR)]
    forms = list(forms)
    Worker.serial = _Serial(SIMULATOR)
    rng = random.Random(seed)
    pool = problems(rng, problems_per_function, small=SIMULATOR)
    stream_pool = [None] + [cuda.stream() for _ in range(streams)]
    gate = Gate()
    workers = [Worker(i, pool, stream_pool, forms, rng.randrange(2**32), cupy, gate, state) for i in range(threads)]
    for w in workers:
        w.offset = w.index * len(pool) // max(threads, 1)
    settings = {"minutes": minutes, "threads": threads, "streams": streams, "seed": seed,
                "problems_per_function": problems_per_function, "forms": forms, "settle_s": settle_s,
                "sample_s": sample_s, "wall_limit_s": wall_limit_s, "release": release, "ignore": list(ignore),
                "gc_freeze": gc_freeze, "gil_probe_ms": gil_probe_ms,
                "switch_interval_ms": round(sys.getswitchinterval() * 1e3, 3),
                "problems": [p.label for p in pool], "simulator": bool(SIMULATOR)}
    functions = sorted(n for n in registry.public_names() if callable(getattr(st, n)))
    # before any worker starts: describe() imports CuPy and torch for their versions (session 19: its first
    # call, in the first interim JSON 10 s into the measured phase, was the soak's +290 MiB RSS step and
    # stalled the calls beside it for ~15 s)
    machine = describe()
    # the stall log, its hooks and the GIL probe (made before the first sample: constant memory); the
    # soak goes on without a hook it could not install (named in the JSON)
    EVENTS = events = EventLog()
    hooks: dict = {"installed": [], "error": None}
    undos: list = []
    if not SIMULATOR:
        try:
            hooks["installed"], undos = install_stall_hooks(cuda.current_context(), events)
        except Exception as exc:  # noqa: BLE001 - information only
            hooks["error"] = f"{type(exc).__name__}: {exc}"
    probe = GilProbe(events, gil_probe_ms / 1e3).start() if gil_probe_ms > 0 else None
    window: dict = {}  # the measured phase's perf_counter start and end
    mem = {"start": memory(SIMULATOR, t_begin), "baseline": None, "samples": [], "end": None}
    phases = {"warm_up": None, "settle": None, "measured": None}
    hung: list = []

    def collect(complete: bool) -> dict:
        raw = _collect(workers, settings, functions, phases, mem, hung, complete)
        pauses = list(FULL_GC.pauses)
        raw.update(machine=machine, title="soak", command=" ".join(sys.argv), plans=launch.stats(),
                   gc={"full_collections": len(pauses), "max_ms": round(1e3 * max(pauses, default=0), 1),
                       "total_ms": round(1e3 * sum(pauses), 1), "frozen": gc_freeze})
        if complete:  # (not at the interim samples: the workers run then, and this holds the GIL)
            try:
                raw["stalls"] = {**_stalls(workers, events, raw["latency"], window, t_begin),
                                 "hooks": hooks, "gil_probe": probe.summary() if probe else None}
            except Exception as exc:  # noqa: BLE001 - the verdict stands without it
                raw["stalls"] = {"error": f"{type(exc).__name__}: {exc}", "hooks": hooks,
                                 "traceback": traceback.format_exc()[-2000:]}
        return summarise(raw, ignore=ignore)

    def sample(text: str = "") -> dict:
        quiet = gate.pause(timeout=60)
        FULL_GC.remove()  # (the sample's own collection: no call is in flight)
        try:
            s = memory(SIMULATOR, t_begin)
        finally:
            FULL_GC.install()
            gate.resume()
        if not quiet:
            s["calls_in_flight"] = [w.current[0] for w in workers if w.current]
        if progress:
            print(f"soak: {text}{_calls(workers)} calls, {sum(w.n_wrong for w in workers)} wrong, "
                  f"{sum(w.n_errors for w in workers)} errors; " + _memory_text(s), flush=True)
        return s

    ts = [threading.Thread(target=w.run, args=(progress and w.index == 0,), daemon=True, name=f"soak-{w.index}")
          for w in workers]
    for t in ts:
        t.start()
    # 1. warm-up: until every worker covered its calls (or the wall limit leaves only the end, or no
    # call ended for 5 minutes: a hang, reported at the end)
    last, last_t = -1, time.perf_counter()
    while not all(w.warmed for w in workers) and any(t.is_alive() for t in ts):
        now, n = time.perf_counter(), _calls(workers)
        if n != last:
            last, last_t = n, now
        if now > wall_end - reserve - settle_s - 10 or now - last_t > 300:
            state.abort.set()
            if progress:
                print("soak: warm-up cut short (" + ("the wall limit" if now - last_t <= 300 else
                                                     "no call ended for 300 s") + ")", flush=True)
            break
        time.sleep(0.05)
    t_settle = time.perf_counter()
    phases["warm_up"] = round(t_settle - t_begin, 1)
    state.phase = SETTLE
    if gc_freeze:  # what a server does after its start-up: full collections then skip the modules' objects
        gc.freeze()
    if progress:
        print(f"soak: warm-up {phases['warm_up']:.1f} s ({_calls(workers)} calls, {len(pool)} problems, "
              f"forms {', '.join(forms)}); settle {settle_s:g} s; then {minutes:g} min with {threads} threads "
              f"on {streams} streams", flush=True)
    # 2. settle
    while time.perf_counter() < min(t_settle + settle_s, wall_end - reserve - 5):
        time.sleep(min(0.2, settle_s))
    # 3. measured: the baseline taken with the workers paused, then the phase switched before they resume
    quiet = gate.pause(timeout=60)
    try:
        baseline = memory(SIMULATOR, t_begin)
        state.phase = MEASURED
        FULL_GC.pauses.clear()
        FULL_GC.install()
    finally:
        gate.resume()
    if not quiet:
        baseline["calls_in_flight"] = [w.current[0] for w in workers if w.current]
    mem["baseline"] = baseline
    t_measure = time.perf_counter()
    window["start"] = t_measure
    phases["settle"] = round(t_measure - t_settle, 1)
    deadline = min(t_measure + minutes * 60, wall_end - reserve)
    if progress:
        print("soak: baseline " + _memory_text(baseline), flush=True)
    while time.perf_counter() < deadline:
        time.sleep(max(0.0, min(sample_s, deadline - time.perf_counter())))
        if time.perf_counter() < deadline - 0.5:
            mem["samples"].append(sample(f"{(time.perf_counter() - t_measure) / 60:.1f} min: "))
            phases["measured"] = round(time.perf_counter() - t_measure, 1)
            if on_sample is not None:
                on_sample(collect(False))
    # the end, with the workers paused (then stopped); each step said, so a crash names where it was
    if progress:
        print("soak: end: pausing the workers", flush=True)
    quiet = gate.pause(timeout=60)
    window["end"] = time.perf_counter()
    phases["measured"] = round(time.perf_counter() - t_measure, 1)
    state.stop.set()
    FULL_GC.remove()
    if probe is not None:
        probe.close()
    for undo in undos:
        undo()
    try:
        mem["end"] = memory(SIMULATOR, t_begin)
    finally:
        gate.resume()
    join_by = time.perf_counter() + 60
    for w, t in zip(workers, ts):
        t.join(timeout=max(0.1, join_by - time.perf_counter()))
        if t.is_alive():
            frames = sys._current_frames().get(t.ident)
            hung.append({"thread": w.index, "call": w.current[0] if w.current else None,
                         "for_s": round(time.perf_counter() - w.current[1], 1) if w.current else None,
                         "stack": "".join(traceback.format_stack(frames))[-3000:] if frames else ""})
    if progress:
        print(f"soak: end: workers joined ({len(hung)} hung)", flush=True)
    data = collect(True)
    EVENTS = None
    sys.setswitchinterval(switch_before)
    if release:  # (the workers first: their CuPy capture streams, then the Numba streams)
        if progress:
            print("soak: release: dropping the workers and their streams", flush=True)
        if not hung:
            ts.clear()
            workers.clear()
            stream_pool.clear()
        data["released"] = _release(SIMULATOR, t_begin, cupy, hung, progress)
    return data


def _calls(workers) -> int:
    return sum(sum(c) for w in workers for c in w.calls.values())


def _stalls(workers, events: EventLog, latency: dict, window: dict, origin: float) -> dict:
    """:func:`attribute` over the workers' call logs (the medians: ``latency``'s, the verdict's) and the
    event log, in the measured phase."""
    parts: dict = {k: [] for k in ("t0", "t1", "cpu", "thread", "median", "key")}
    dropped = 0
    for w in workers:
        log = w.log
        n = min(log.n, log.capacity)
        dropped += log.n - n
        names = np.asarray([f"{label} [{form}]" for label, form in w.keys], dtype=object)
        med = np.asarray([1e-6 * (latency.get(k) or {}).get("median_us", math.nan) for k in names], float)
        key = log.key[:n]
        parts["t0"].append(log.t0[:n])
        parts["t1"].append(log.t0[:n] + log.dt[:n])
        parts["cpu"].append(log.cpu[:n])
        parts["thread"].append(np.full(n, w.index))
        parts["median"].append(med[key] if len(med) else np.zeros(n))
        parts["key"].append(names[key] if len(names) else np.zeros(n, dtype=object))
    calls = {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}
    ev = events.snapshot()
    if "start" not in window:
        return {"error": "no measured phase", "calls_dropped": dropped, "events_dropped": ev["dropped"]}
    out = attribute(calls, ev, (window["start"], window.get("end", time.perf_counter())), origin=origin)
    return {**out, "calls_dropped": dropped, "events_dropped": ev["dropped"]}


def _collect(workers, settings, functions, phases, mem, hung, complete) -> dict:
    """The workers' counts as plain data (what :func:`summarise` reads)."""
    calls: dict = {}
    lat: dict = {}
    cpu: dict = {}
    for w in workers:
        for (fn, form), c in list(w.calls.items()):
            per = calls.setdefault(fn, {}).setdefault(form, [0, 0, 0])
            for i, n in enumerate(c):
                per[i] += n
        for k, l in w.latency.items():
            lat.setdefault(k, Latencies()).merge(l)
            cpu.setdefault(k, Latencies()).merge(w.cpu[k])
    return {"complete": complete, "settings": settings, "functions": functions, "phases_s": dict(phases),
            "warm_up_complete": all(w.warmed for w in workers), "calls": calls,
            "graph": {"captures": sum(w.graph_captures for w in workers),
                      "replays": sum(w.graph_replays for w in workers)},
            "wrong_results": sum(w.n_wrong for w in workers), "wrong": [x for w in workers for x in w.wrong][:EXAMPLES],
            "errors": sum(w.n_errors for w in workers),
            "error_examples": [x for w in workers for x in w.errors][:EXAMPLES],
            "hung_threads": list(hung), "memory": {k: v for k, v in mem.items()},
            "latency": {f"{label} [{form}]": l.summary() for (label, form), l in sorted(lat.items())},
            "cpu_latency": {f"{label} [{form}]": l.summary() for (label, form), l in sorted(cpu.items())}}


def _release(simulator: bool, t0: float, cupy, hung, progress: bool = False) -> dict:
    """Free what simt_tiles, Numba and CuPy keep between calls (launch plans and the buffers they
    held, workspaces, CuPy's pools) and measure; :func:`run` destroys the CUDA context after the
    outputs (compute-sanitizer's leak check reports what is still allocated then)."""
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from .. import _per_stream, launch

    def say(step):
        if progress:
            print(f"soak: release: {step}", flush=True)

    say("launch plans and workspaces")
    launch.clear()
    launch._RETIRED.clear()
    dropped = _per_stream.clear_all()
    say("CuPy's pools")
    if cupy is not None and not simulator:
        cupy.cuda.Device().synchronize()
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    say("reference cycles")
    cyclic = _cyclic_device_arrays()  # (before the sample: arrays in unreachable cycles wait for a full GC)
    say("memory and live arrays")
    after = memory(simulator, t0)
    live = _live_device_arrays()
    holders = _holders_of_live_arrays() if live else {}
    say("done")
    # the context is destroyed by :func:`run`, after the outputs are written and this frame's objects
    # (the workers' arrays and streams) are gone: their finalizers call into it (a segfault otherwise)
    closed = "at the end of the run" if not simulator and not hung else False  # (a hung thread may still launch)
    return {"workspaces_dropped": dropped, "memory_after_release": after, "context_destroyed": closed,
            "live_device_arrays": live, "cyclic_device_arrays": cyclic, "holders_of_live_arrays": holders}


def _is_device_array(obj) -> bool:
    return (type(obj).__name__ in ("DeviceNDArray", "ndarray")
            and type(obj).__module__.split(".")[0] in ("numba", "numba_cuda", "cupy"))


def _cyclic_device_arrays(top: int = 8) -> dict:
    """Collect everything, keeping what was unreachable (``gc.DEBUG_SAVEALL``): the device arrays
    that only a reference cycle held (freed at the next full collection, which a slow process such
    as one under compute-sanitizer makes rarely), and the types of the objects in those cycles that
    refer to them directly (who made the cycle). Then frees them."""
    flags = gc.get_debug()
    gc.set_debug(flags | gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(flags)
        del gc.garbage[:]
    ids = {id(o) for o in garbage}
    arrays: dict = {}
    referrers: Counter = Counter()
    for obj in garbage:
        if _is_device_array(obj):
            entry = arrays.setdefault(f"{type(obj).__module__}.{type(obj).__name__}", [0, 0])
            entry[0] += 1
            entry[1] += int(getattr(obj, "nbytes", 0) or 0)
            referrers.update(f"{type(r).__module__}.{type(r).__qualname__}" for r in gc.get_referrers(obj)
                             if id(r) in ids)
    kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in garbage)
    del garbage
    gc.collect()
    return {"objects": sum(kinds.values()), "arrays": arrays, "array_referrers": dict(referrers.most_common(top)),
            "object_types": dict(kinds.most_common(top))}


def _holders_of_live_arrays(sample: int = 200, top: int = 8) -> dict:
    """The types of what refers to (up to ``sample``) device arrays still referenced after the
    release and a full collection, two steps back (a holder's own holder names the owner)."""
    live = [o for o in gc.get_objects() if _is_device_array(o)][:sample]
    first: Counter = Counter()
    second: Counter = Counter()
    for obj in live:
        for r in gc.get_referrers(obj):
            if r is live or isinstance(r, types.FrameType):
                continue
            first[f"{type(r).__module__}.{type(r).__qualname__}"] += 1
            if isinstance(r, (list, dict, tuple)):  # (a container: its holder names the owner)
                second.update(f"{type(h).__module__}.{type(h).__qualname__}" for h in gc.get_referrers(r)
                              if not isinstance(h, types.FrameType) and h is not live)
    frames = Counter(f"{o.f_code.co_name} ({os.path.basename(o.f_code.co_filename)}:{o.f_lineno})"
                     for o in gc.get_objects() if isinstance(o, types.FrameType))
    step = max(1, len(live) // 4)
    roots = [_root_path(live[i], exclude=(live,)) for i in range(0, len(live), step)][:4]
    del live
    return {"referrers": dict(first.most_common(top)), "their_referrers": dict(second.most_common(top)),
            "roots": roots, "frames_alive": dict(frames.most_common(top))}


def _root_path(obj, exclude=(), depth: int = 10, width: int = 64) -> str:
    """A chain of referrers from ``obj`` up to what keeps it alive: a module's global, a running
    frame (function, file:line) or a class attribute, else the longest chain found; found by a
    breadth-first search over ``gc.get_referrers`` (``width`` referrers a step)."""
    modules = {id(vars(m)): name for name, m in list(sys.modules.items()) if m is not None and hasattr(m, "__dict__")}
    here = sys._getframe()
    seen = {id(obj), id(here), *map(id, exclude)}
    paths = [[obj]]
    seen.add(id(paths))
    frontier = paths

    def name(o) -> str:
        if isinstance(o, dict) and id(o) in modules:
            return f"module {modules[id(o)]}"
        if isinstance(o, types.FrameType):
            return f"frame {o.f_code.co_name} ({os.path.basename(o.f_code.co_filename)}:{o.f_lineno})"
        return f"{type(o).__module__}.{type(o).__qualname__}"

    longest = frontier[0]
    for _ in range(depth):
        nxt = []
        seen.add(id(nxt))
        for path in frontier:
            refs = gc.get_referrers(path[-1])[:width]
            for r in refs:
                if id(r) in seen or r is frontier or r is nxt or isinstance(r, list) and r and r[0] is obj:
                    continue
                seen.add(id(r))
                if isinstance(r, types.FrameType) and r.f_code in _OWN_CODE:
                    continue  # (this search's own frames)
                chain = [*path, r]
                if isinstance(r, types.FrameType):  # (a frame of a finished call: say what holds it)
                    held = Counter(name(h) for h in gc.get_referrers(r) if h is not refs and h is not nxt
                                   and not (isinstance(h, list) and h and h[0] is obj)  # (the search's chains)
                                   and not (isinstance(h, types.FrameType) and h.f_code in _OWN_CODE))
                    return " <- ".join(name(o) for o in chain) + f" <- held by {dict(held.most_common(4))}"
                if (isinstance(r, dict) and id(r) in modules) or isinstance(r, type):
                    return " <- ".join(name(o) for o in chain)
                nxt.append(chain)
        if not nxt:
            break
        longest, frontier = nxt[0], nxt
    # (since Python 3.11 a running function's locals are found only once its frame object exists)
    return " <- ".join(name(o) for o in longest) + " (no root found: a running function's local?)"


_OWN_CODE = (_root_path.__code__, _holders_of_live_arrays.__code__)


def _live_device_arrays() -> dict:
    """What is still referenced after the release (what the memcheck's leak check then reports):
    ``{type name: [count, bytes]}`` of the device arrays the garbage collector sees (Numba's, CuPy's)."""
    out: dict = {}
    for obj in gc.get_objects():
        if _is_device_array(obj):
            entry = out.setdefault(f"{type(obj).__module__}.{type(obj).__name__}", [0, 0])
            entry[0] += 1
            entry[1] += int(getattr(obj, "nbytes", 0) or 0)
    return out


def fill(index: int, count: int, problems_per_function: int = 6, seed: int = 0, forms=None,
         progress: bool = True) -> dict:
    """The warm-up's calls of problems ``index, index + count, ...`` of the soak's pool (the same
    seed draws the same pool), in one thread on one stream: compiles what they need into the disk
    caches.  ``count`` processes, one per ``index``, fill them in parallel."""
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from ..runtime import SIMULATOR

    cupy = _cupy(SIMULATOR)
    if forms is None:
        forms = [f for f in FORMS if f not in ("cupy", "graph") or (cupy is not None and not SIMULATOR)]
    Worker.serial = _Serial(SIMULATOR)
    pool = problems(random.Random(seed), problems_per_function, small=SIMULATOR)
    mine = pool[index::count]
    w = Worker(0, mine, [None, cuda.stream()], list(forms), seed, cupy)
    t0 = time.perf_counter()
    w.warm_up(progress)
    return {"fill": f"{index}/{count}", "problems": len(mine), "calls": _calls([w]), "wrong_results": w.n_wrong,
            "wrong": w.wrong, "errors": w.n_errors, "error_examples": w.errors,
            "seconds": round(time.perf_counter() - t0, 1)}


# ---------------------------------------------------------------------------
# The verdict: a pure function of the collected counts
# ---------------------------------------------------------------------------

def _target(measured, limit, passed: bool, detail: str = "", ignored: bool = False) -> dict:
    return {"measured": measured, "limit": limit, "passed": bool(passed), "ignored": bool(ignored), "detail": detail}


def _memory_target(kind: str, mem: dict) -> dict:
    base = (mem.get("baseline") or {}).get(kind)
    later = [s[kind] for s in [*mem.get("samples", []), mem.get("end") or {}] if kind in s]
    if not base or not later:
        return _target(None, f"within {MEMORY_TOLERANCE:.0%} of the baseline", False,
                       "no baseline or no later sample (the measured phase did not run)")
    devs = [(x - base) / base for x in later]
    worst = max(devs, key=abs)
    end = devs[-1]
    mib = 2**20
    # what was built, recorded or imported after the baseline (the usual causes of a step)
    grew = []
    for key in ("kernels", "plans_recorded", "modules"):
        n = max(s.get(key, 0) for s in [*mem.get("samples", []), mem.get("end") or {}]) - mem["baseline"].get(key, 0)
        if key in mem["baseline"] and n > 0:
            grew.append(f"{key} +{n}")
    return {**_target(round(worst, 4), MEMORY_TOLERANCE, abs(worst) <= MEMORY_TOLERANCE,
                      f"baseline {base / mib:.0f} MiB, end {later[-1] / mib:.0f} MiB ({end:+.1%}), max "
                      f"{max(later) / mib:.0f} MiB, min {min(later) / mib:.0f} MiB; worst {worst:+.1%} over "
                      f"{len(later)} samples" + (f"; after the baseline: {', '.join(grew)}" if grew else "")),
            "baseline": base, "end": later[-1], "max": max(later), "min": min(later), "end_change": round(end, 4)}


def summarise(raw: dict, ignore=()) -> dict:
    """``raw`` (what :func:`_collect` gathers; synthetic in the tests) with ``targets`` (each: the
    measured value, its limit, passed, ignored, a sentence), ``scale`` (the settings against the
    issue's), ``worst_latency``, ``calls_per_function`` and ``passed`` (every target not ignored)."""
    s = raw["settings"]
    ignore = set(ignore)
    t: dict = {}
    t["wrong results"] = _target(raw["wrong_results"], 0, raw["wrong_results"] == 0,
                                 "; ".join(raw.get("wrong", [])[:3]))
    t["errors"] = _target(raw["errors"], 0, raw["errors"] == 0, "; ".join(raw.get("error_examples", [])[:3]))
    t["hung threads"] = _target(len(raw["hung_threads"]), 0, not raw["hung_threads"],
                                "; ".join(f"thread {h['thread']} in {h['call']}" for h in raw["hung_threads"][:3]))
    ran = raw["phases_s"].get("measured") or 0.0
    want = s["minutes"] * 60
    t["minutes run"] = _target(round(ran / 60, 2), s["minutes"], raw.get("complete", True) and ran >= 0.99 * want - 1,
                               f"measured phase {ran:.0f} s of {want:.0f} s asked (after a warm-up of "
                               f"{raw['phases_s'].get('warm_up')} s and a settle of {raw['phases_s'].get('settle')} s)"
                               + ("" if raw.get("warm_up_complete", True) else "; the warm-up was cut short"))
    per_function = {fn: sum(sum(c) for c in raw["calls"].get(fn, {}).values()) for fn in raw["functions"]}
    missing = [fn for fn, n in per_function.items() if n == 0]
    t["every public function called"] = _target(len(raw["functions"]) - len(missing), len(raw["functions"]),
                                                not missing, "not called: " + ", ".join(missing) if missing else "")
    for kind, name in (("gpu_used", "GPU memory"), ("host_rss", "host RSS")):
        if kind == "gpu_used" and raw["settings"].get("simulator"):
            continue
        t[f"{name} within {MEMORY_TOLERANCE:.0%} of the baseline"] = {
            **_memory_target(kind, raw["memory"]), "ignored": "memory" in ignore}
    lat = {k: v for k, v in raw["latency"].items() if v.get("calls")}
    worst = max(lat.items(), key=lambda kv: kv[1]["max_over_median"], default=None)
    worst_latency = None
    if worst is None:
        t[f"no call over {LATENCY_FACTOR:g}x its median"] = _target(None, LATENCY_FACTOR, False, "no measured call",
                                                                   ignored="latency" in ignore)
    else:
        key, w = worst
        over = sum(v["over_limit"] for v in lat.values())
        n = sum(v["calls"] for v in lat.values())
        cpu = raw.get("cpu_latency", {}).get(key, {})
        clean_key, clean = max(lat.items(), key=lambda kv: kv[1].get("max_no_gc_over_median", 0))
        worst_latency = {"key": key, **w, "cpu": cpu, "no_gc_key": clean_key,
                         "no_gc_max_over_median": clean.get("max_no_gc_over_median"),
                         "no_gc_slowest": clean.get("slowest_no_gc")}
        g = raw.get("gc") or {}
        t[f"no call over {LATENCY_FACTOR:g}x its median"] = _target(
            w["max_over_median"], LATENCY_FACTOR, w["max_over_median"] <= LATENCY_FACTOR,
            f"worst {key}: max {w['max_us']:.0f} µs / median {w['median_us']:.1f} µs ({w['slowest']}); "
            f"{over} of {n} measured calls over {LATENCY_FACTOR:g}x their median"
            + (f"; its CPU time max/median {cpu.get('max_over_median')}" if cpu.get("calls") else "")
            + (f"; calls that overlapped no full GC: worst {clean.get('max_no_gc_over_median')}x ({clean_key})"
               if "max_no_gc_over_median" in clean else "")
            + (f"; {g['full_collections']} full GCs in the measured phase, max {g['max_ms']} ms" if g else ""),
            ignored="latency" in ignore)
    scale = {k: s[k] >= v for k, v in ISSUE_SCALE.items()}
    return {**raw, "targets": t, "passed": all(v["passed"] for v in t.values() if not v["ignored"]),
            "scale": {"issue_36": all(scale.values()), **scale}, "worst_latency": worst_latency,
            "calls_total": sum(per_function.values()),
            "calls_measured": sum(c[MEASURED] for f in raw["calls"].values() for c in f.values()),
            "calls_per_function": {fn: {"total": per_function[fn],
                                        "measured": sum(c[MEASURED] for c in raw["calls"].get(fn, {}).values()),
                                        "forms": {form: c for form, c in raw["calls"].get(fn, {}).items()}}
                                   for fn in raw["functions"]}}


def _memory_text(s) -> str:
    if not s:
        return "-"
    gpu = f"GPU {s['gpu_used'] / 2**20:.0f} MiB, " if "gpu_used" in s else ""
    return f"{gpu}host RSS {s['host_rss'] / 2**20:.0f} MiB"


def table(data: dict) -> str:
    """The soak's summary as markdown: every target PASS / FAIL / INFO with its measured value."""
    s = data["settings"]
    m = data["memory"]
    lines = [f"# soak: {s['minutes']:g} min, {s['threads']} threads, {s['streams']} streams "
             f"({data.get('machine', {}).get('gpu', '?')}){'' if data.get('complete', True) else ' (INCOMPLETE)'}",
             "",
             f"phases: warm-up {data['phases_s'].get('warm_up')} s, settle {data['phases_s'].get('settle')} s, "
             f"measured {data['phases_s'].get('measured')} s; calls {data['calls_total']} "
             f"(measured {data['calls_measured']}), graph captures {data['graph']['captures']}, replays "
             f"{data['graph']['replays']}, plans {data.get('plans', {}).get('plans')}; issue-36 scale "
             f"(≥ 5 min, ≥ 16 threads, ≥ 4 streams): {'yes' if data['scale']['issue_36'] else 'no'}", "",
             f"memory: start {_memory_text(m.get('start'))}; baseline {_memory_text(m.get('baseline'))}; "
             f"end {_memory_text(m.get('end'))}", ""]
    for name, v in data["targets"].items():
        verdict = "INFO" if v["ignored"] else ("PASS" if v["passed"] else "FAIL")
        lines.append(f"- {verdict}: {name}: {v['measured']} (limit {v['limit']}){'; ' + v['detail'] if v['detail'] else ''}")
    lines += ["", f"**{'PASS' if data['passed'] else 'FAIL'}**", "",
              "| function | calls | measured | " + " | ".join(data["settings"]["forms"]) + " | worst max/median |",
              "|---|---|---|" + "---|" * len(data["settings"]["forms"]) + "---|"]
    for fn, c in data["calls_per_function"].items():
        worst = max((v["max_over_median"] for k, v in data["latency"].items()
                     if v.get("calls") and k.split(" ", 1)[0] == fn), default=None)
        forms = " | ".join(str(sum(c["forms"].get(f, [0]))) for f in data["settings"]["forms"])
        lines.append(f"| {fn} | {c['total']} | {c['measured']} | {forms} | {worst} |")
    slow = sorted(((k, v) for k, v in data["latency"].items() if v.get("calls")),
                  key=lambda kv: -kv[1]["max_over_median"])[:8]
    if slow:
        lines += ["", "| slowest (problem [form]) | calls | median µs | p99 µs | max µs | max/median | CPU max/median |",
                  "|---|---|---|---|---|---|---|"]
        for k, v in slow:
            cpu = data.get("cpu_latency", {}).get(k, {}).get("max_over_median")
            lines.append(f"| {k} | {v['calls']} | {v['median_us']} | {v['p99_us']} | {v['max_us']} | "
                         f"{v['max_over_median']} | {cpu} |")
    lines += _stall_lines(data.get("stalls"))
    lines += [""] + [f"- wrong: {w}" for w in data["wrong"][:5]] + [f"- error: {e}" for e in data["error_examples"][:5]]
    if data.get("hung_threads"):
        lines += [f"- hung: thread {h['thread']} in {h['call']} for {h['for_s']} s" for h in data["hung_threads"]]
    if data.get("released"):
        r = data["released"]
        lines.append(f"- released: {r['workspaces_dropped']} workspaces; after: "
                     f"{_memory_text(r['memory_after_release'])}; context destroyed: {r['context_destroyed']}")
        if r.get("cyclic_device_arrays"):
            c = r["cyclic_device_arrays"]
            lines.append(f"- released: device arrays only a reference cycle held: {c['arrays']}; their referrers in "
                         f"the cycles: {c['array_referrers']}; the cycles' objects: {c['object_types']}")
        if r.get("live_device_arrays"):
            lines.append(f"- released: device arrays still referenced: {r['live_device_arrays']}; held by: "
                         f"{r.get('holders_of_live_arrays')}")
    return "\n".join(lines)


def _event_text(x: dict) -> str:
    who = {MAIN_THREAD: "main", PROBE_THREAD: "probe", OTHER_THREAD: "other"}.get(x["thread"], f"thread {x['thread']}")
    extra = f", {x['n']} frees {x['bytes'] / 2**20:.1f} MiB" if x["kind"].endswith("flush") else ""
    where = f", in its {x['in_call']} call" if x.get("in_call") else ""
    return f"{x['kind']} {x['ms']:.2f} ms ({who}{extra}{where}, from {x['start_ms']:+.2f} ms)"


def _stall_lines(st_: dict | None) -> list:
    """The stall attribution as ``- INFO: why slow`` lines (what ``gpu_pass.sh soak`` prints) and a
    table of the slowest calls."""
    if not st_:
        return []
    if st_.get("error"):
        return ["", f"- INFO: why slow: no attribution ({st_['error']})"]
    slow = st_["slow"]
    hooks = (st_.get("hooks") or {})
    probe = st_.get("gil_probe") or {}
    forms = ", ".join(f"{f} {n}" for f, n in sorted(slow["by_form"].items(), key=lambda kv: -kv[1]))
    lines = ["", f"- INFO: why slow: {slow['calls']} of {st_['calls']} logged calls over {st_['slow_factor']:g}x "
                 f"their median ({forms or 'none'}); {slow['overlapping_no_event']} overlapped no logged event; "
                 f"hooks: {', '.join(hooks.get('installed') or []) or 'none'}{'; ' + hooks['error'] if hooks.get('error') else ''}"
                 f"; dropped: {st_.get('calls_dropped', 0)} calls, {st_.get('events_dropped', 0)} events"]
    if probe:
        lines.append(f"- INFO: why slow: GIL probe ({probe['interval_ms']:g} ms sleeps): {probe['probes']} wake-ups, "
                     f"{probe['late']} later than {probe['threshold_ms']:g} ms; lateness median "
                     f"{probe['lateness_median_us']} µs, p99 {probe['lateness_p99_us']} µs, max {probe['lateness_max_us']} µs")
    for kind, ev in st_["events"].items():
        o = slow["overlap"].get(kind, {})
        lines.append(f"- INFO: why slow: {kind}: {o.get('slow_calls')} slow calls ({o.get('fraction')}) overlapped one, "
                     f"{o.get('by_chance')} by chance, {o.get('all_calls')} of all calls; {o.get('half_covered')} "
                     f"half covered; {ev['count']} events, "
                     f"{ev['total_ms']} ms, max {ev['max_ms']} ms, cover {ev['coverage']} of the phase, "
                     f"{ev['inside_library_call']} began inside a library call")
    for i, w in enumerate(st_["worst"][:3]):
        evs = "; ".join(_event_text(x) for x in w["events"][:3]) or "no logged event"
        lines.append(f"- INFO: why slow #{i + 1}: {w['call']} thread {w['thread']} at {w['at_s']} s: {w['us']:.0f} µs = "
                     f"{w['ratio']}x (CPU {w['cpu_us']:.0f} µs); {w['others_in_call']} other threads in a call; {evs}")
    if st_["worst"]:
        lines += ["", "| slow call | thread | at s | µs | x median | CPU µs | others in a call | overlapping events |",
                  "|---|---|---|---|---|---|---|---|"]
        for w in st_["worst"]:
            kinds = ", ".join(f"{k} {v['count']} (max {v['max_ms']} ms, {v['covered_ms']} ms of the call)"
                              for k, v in w["event_kinds"].items()) or "-"
            lines.append(f"| {w['call']} | {w['thread']} | {w['at_s']} | {w['us']:.0f} | {w['ratio']} | {w['cpu_us']:.0f} | "
                         f"{w['others_in_call']} | {kinds} |")
    return lines


def add_arguments(p) -> None:
    add_output_arguments(p)  # (--reps and --plot are not used: one long run, no plot)
    p.add_argument("--minutes", type=float, default=5.0, help="minutes of the measured phase (default 5)")
    p.add_argument("--threads", type=int, default=16, help="host threads (default 16)")
    p.add_argument("--streams", type=int, default=4, help="Numba streams the threads share, besides the default one")
    p.add_argument("--problems", type=int, default=6, help="random problems per public function (default 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--forms", default=None, help=f"call forms, comma-separated (default: those available of {','.join(FORMS)})")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds between memory samples (default 10)")
    p.add_argument("--settle-s", type=float, default=None,
                   help="seconds of random calls after the warm-up before the baseline (default 10%% of the minutes, 5-30 s)")
    p.add_argument("--wall-limit-s", type=float, default=None,
                   help="the whole run's seconds: the measured phase is cut to end in time (default: none)")
    p.add_argument("--release", action="store_true",
                   help="at the end free every cache and destroy the CUDA context (for compute-sanitizer --leak-check full)")
    p.add_argument("--ignore", default="", help="targets reported but not judged: latency,memory (under a sanitizer)")
    p.add_argument("--gc-freeze", action="store_true",
                   help="gc.freeze() after the warm-up (full collections then skip the objects made so far)")
    p.add_argument("--gil-probe-ms", type=float, default=GIL_PROBE_S * 1e3,
                   help="the GIL probe thread's sleep, ms (late wake-ups are logged beside the slow calls; 0: none)")
    p.add_argument("--switch-interval-ms", type=float, default=None,
                   help="sys.setswitchinterval for the run, ms (default: Python's 5 ms; the GIL hypothesis's test)")
    p.add_argument("--fill", metavar="I/N", default=None,
                   help="only the warm-up's calls of every N-th problem from the I-th, one thread (fills the disk caches)")


def run(args) -> int:
    forms = args.forms.split(",") if args.forms else None
    if args.fill:
        i, n = map(int, args.fill.split("/"))
        data = fill(i, n, args.problems, args.seed, forms, progress=False)
        print(f"soak fill {data['fill']}: {data['problems']} problems, {data['calls']} calls in {data['seconds']} s, "
              f"{data['wrong_results']} wrong, {data['errors']} errors", flush=True)
        for x in data["wrong"][:5] + data["error_examples"][:5]:
            print("  " + x, flush=True)
        return 0 if not (data["wrong_results"] or data["errors"]) else 1
    ignore = [x for x in args.ignore.split(",") if x]
    # a crash (SIGSEGV/SIGABRT in a driver, a sanitizer or a binding) prints every thread's Python stack
    try:
        faulthandler.enable(file=sys.__stderr__, all_threads=True)
    except (AttributeError, OSError, ValueError):  # (no stderr with a file descriptor: an embedding)
        pass

    def interim(partial):  # a JSON that survives a kill
        write_outputs(args, "soak", partial, table(partial))

    data = soak(args.minutes, args.threads, args.streams, problems_per_function=args.problems, seed=args.seed,
                sample_s=args.sample_s, forms=forms, settle_s=args.settle_s, wall_limit_s=args.wall_limit_s,
                release=args.release, ignore=ignore, gc_freeze=getattr(args, "gc_freeze", False), on_sample=interim,
                gil_probe_ms=getattr(args, "gil_probe_ms", GIL_PROBE_S * 1e3),
                switch_interval_ms=getattr(args, "switch_interval_ms", None))
    text = table(data)
    print(text, flush=True)
    paths = write_outputs(args, "soak", data, text)
    written = [p for k, p in paths.items() if p and k != "plot"]
    if written:
        print("wrote " + ", ".join(written), flush=True)
    code = 0 if data["passed"] else 1
    if (data.get("released") or {}).get("context_destroyed"):
        _destroy_context_and_exit(code)
    return code


def _destroy_context_and_exit(code: int) -> None:
    """``--release``'s end: destroy the CUDA context (compute-sanitizer's leak check reports what is
    still allocated then), then leave at once: the interpreter's teardown would run finalizers
    (CuPy's pools and handles, Numba's arrays and modules) that call into the destroyed context."""
    try:
        from numba import cuda

        gc.collect()
        cuda.close()
    except BaseException:  # (the exit must still be os._exit: the teardown would meet a half-closed context)
        traceback.print_exc()
        code = code or 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # (a closed pipe: nothing more to say)
                pass
        os._exit(code)
