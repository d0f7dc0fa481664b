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
CuPy keep and destroys the CUDA context at the end (what compute-sanitizer's ``--leak-check full``
needs to report leaks); ``--fill I/N`` only runs the warm-up's calls of every N-th problem from
the I-th, in one thread (N processes fill the disk caches in parallel before a soak).

:func:`soak` runs in the simulator too (``tests/test_faults.py``: a few seconds, tiny shapes; the
calls take turns there); :func:`summarise` is a pure function of the collected counts (unit-tested
on synthetic runs); the command line, like every bench group, runs only on a GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import os
import random
import sys
import threading
import time
import traceback
import zlib
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
        correlate_separable_reference
    from ..kernels.conv_nchw.reference import conv2d_nchw_reference
    from ..kernels.matmul.reference import matmul_reference
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

    def __call__(self, phase, info):
        if info.get("generation") != 2:
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
        ctx.deallocations.clear()
        free, total = ctx.get_memory_info()
        sample["gpu_used"] = int(total - free)
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
        self.record(problem.label, form, dt, dc, where, phase, clean)

    def device_kwargs(self, problem, form, stream):
        """The problem's keyword arguments; array ones (conv2d_nchw's bias) as the form's arrays."""
        from numba import cuda

        out = {}
        for k, v in problem.kwargs.items():
            out[k] = cuda.to_device(v, stream=stream or 0) if isinstance(v, np.ndarray) and form not in ("numpy",) \
                else v
        return out

    def record(self, label, form, seconds, cpu_seconds, where, phase, clean=True):
        if phase == MEASURED:
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
        self.record(problem.label, "cupy", dt, dc, where, phase, clean)

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
        self.record(problem.label, "graph", dt, dc, where, phase, clean)

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
         progress: bool = True, on_sample: Callable | None = None) -> dict:
    """Run the soak (see the module docstring); the results as a dict (the JSON).  ``on_sample(data)``
    is called with the results so far (``"complete": False``) at every memory sample."""
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
                "gc_freeze": gc_freeze,
                "problems": [p.label for p in pool], "simulator": bool(SIMULATOR)}
    functions = sorted(n for n in registry.public_names() if callable(getattr(st, n)))
    # before any worker starts: describe() imports CuPy and torch for their versions (session 19: its first
    # call, in the first interim JSON 10 s into the measured phase, was the soak's +290 MiB RSS step and
    # stalled the calls beside it for ~15 s)
    machine = describe()
    mem = {"start": memory(SIMULATOR, t_begin), "baseline": None, "samples": [], "end": None}
    phases = {"warm_up": None, "settle": None, "measured": None}
    hung: list = []

    def collect(complete: bool) -> dict:
        raw = _collect(workers, settings, functions, phases, mem, hung, complete)
        pauses = list(FULL_GC.pauses)
        raw.update(machine=machine, title="soak", command=" ".join(sys.argv), plans=launch.stats(),
                   gc={"full_collections": len(pauses), "max_ms": round(1e3 * max(pauses, default=0), 1),
                       "total_ms": round(1e3 * sum(pauses), 1), "frozen": gc_freeze})
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
    # the end, with the workers paused (then stopped)
    quiet = gate.pause(timeout=60)
    phases["measured"] = round(time.perf_counter() - t_measure, 1)
    state.stop.set()
    FULL_GC.remove()
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
    data = collect(True)
    if release:  # (the workers first: their CuPy capture streams, then the Numba streams)
        if not hung:
            ts.clear()
            workers.clear()
            stream_pool.clear()
        data["released"] = _release(SIMULATOR, t_begin, cupy, hung)
    return data


def _calls(workers) -> int:
    return sum(sum(c) for w in workers for c in w.calls.values())


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


def _release(simulator: bool, t0: float, cupy, hung) -> dict:
    """Free what simt_tiles, Numba and CuPy keep between calls (launch plans and the buffers they
    held, workspaces, CuPy's pools), measure, then destroy the CUDA context (compute-sanitizer's
    leak check reports what is still allocated then)."""
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from .. import _per_stream, launch

    launch.clear()
    launch._RETIRED.clear()
    dropped = _per_stream.clear_all()
    if cupy is not None and not simulator:
        cupy.cuda.Device().synchronize()
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    after = memory(simulator, t0)
    live = _live_device_arrays()
    closed = False
    if not simulator and not hung:  # (a hung thread may still launch: keep its context)
        cuda.close()
        closed = True
    return {"workspaces_dropped": dropped, "memory_after_release": after, "context_destroyed": closed,
            "live_device_arrays": live}


def _live_device_arrays() -> dict:
    """What is still referenced after the release (what the memcheck's leak check then reports):
    ``{type name: [count, bytes]}`` of the device arrays the garbage collector sees (Numba's, CuPy's)."""
    out: dict = {}
    for obj in gc.get_objects():
        name = type(obj).__name__
        if name in ("DeviceNDArray", "ndarray") and type(obj).__module__.split(".")[0] in ("numba", "numba_cuda", "cupy"):
            entry = out.setdefault(f"{type(obj).__module__}.{name}", [0, 0])
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
    lines += [""] + [f"- wrong: {w}" for w in data["wrong"][:5]] + [f"- error: {e}" for e in data["error_examples"][:5]]
    if data.get("hung_threads"):
        lines += [f"- hung: thread {h['thread']} in {h['call']} for {h['for_s']} s" for h in data["hung_threads"]]
    if data.get("released"):
        r = data["released"]
        lines.append(f"- released: {r['workspaces_dropped']} workspaces; after: "
                     f"{_memory_text(r['memory_after_release'])}; context destroyed: {r['context_destroyed']}")
    return "\n".join(lines)


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

    def interim(partial):  # a JSON that survives a kill
        write_outputs(args, "soak", partial, table(partial))

    data = soak(args.minutes, args.threads, args.streams, problems_per_function=args.problems, seed=args.seed,
                sample_s=args.sample_s, forms=forms, settle_s=args.settle_s, wall_limit_s=args.wall_limit_s,
                release=args.release, ignore=ignore, gc_freeze=getattr(args, "gc_freeze", False), on_sample=interim)
    text = table(data)
    print(text, flush=True)
    paths = write_outputs(args, "soak", data, text)
    written = [p for k, p in paths.items() if p and k != "plot"]
    if written:
        print("wrote " + ", ".join(written), flush=True)
    return 0 if data["passed"] else 1
