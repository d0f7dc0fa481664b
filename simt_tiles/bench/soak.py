"""Load for minutes: threads × streams × every public function × random shapes and call forms, every
result checked against its reference.

    simt-tiles bench soak --minutes 5 --threads 16 --streams 4 [--seed 0] [--out DIR | --json PATH]

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
* ``graph``: a call with ``out=`` captured into a CUDA graph on a CuPy stream (after a warm-up call
  there, as torch's documentation asks), the inputs then overwritten in place with new values of
  the same shapes, the graph replayed and the result checked against the new values' reference
  (where CuPy is installed; never in the simulator).

Every result is copied back and compared with its reference within its bound (NaN never passes).
A first pass runs every problem in every form on every thread (compiles, records the launch plans);
GPU memory (``cuMemGetInfo``, after ``gc`` and Numba's pending frees) and host memory (RSS) are
sampled then, every ``--sample-s`` seconds and at the end.  Host latency of each public call (the
call alone, not the copies and checks around it; asynchronous for device forms) is kept per
function in log-spaced bins (1 % wide: constant memory), from which the median, the maximum and
the calls over 100× the median come.  The JSON holds the calls made, the wrong results (with the
first few described), the errors raised, memory at start, after warm-up and at the end (and the
samples), latencies per function, and the verdict against issue 36's targets: no wrong result, no
error, GPU and host memory within 5 % of their level after warm-up, no call over 100× its median.

:func:`soak` runs in the simulator too (``tests/test_faults.py``: a few seconds, tiny shapes); the
command line, like every bench group, only on a GPU.
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
import zlib
from collections.abc import Callable

import numpy as np

import simt_tiles as st
from ..bounds import check_within
from ..machine import describe
from .common import add_output_arguments, write_outputs

__all__ = ["soak", "Problem", "problems", "FORMS", "add_arguments", "run"]

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "minutes of threads x streams x every public function, every result checked, memory sampled"

FORMS = ("numpy", "device", "out", "shared", "cupy", "graph")
#: issue 36's targets
MEMORY_TOLERANCE = 0.05
LATENCY_FACTOR = 100.0


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

    def twin(self) -> "Problem":
        """The same call (shapes, parameters) with other values, made once."""
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
    """Seconds in log-spaced bins, 1 % wide, from 1 µs to 1000 s: median and tail in constant memory."""

    LO, STEP = 1e-6, math.log(1.01)
    BINS = int(math.log(1e9) / math.log(1.01)) + 2

    def __init__(self):
        self.counts = np.zeros(self.BINS, np.int64)
        self.max = 0.0

    def add(self, seconds: float) -> None:
        i = 0 if seconds <= self.LO else min(self.BINS - 1, int(math.log(seconds / self.LO) / self.STEP) + 1)
        self.counts[i] += 1
        self.max = max(self.max, seconds)

    def merge(self, other: "Latencies") -> None:
        self.counts += other.counts
        self.max = max(self.max, other.max)

    def _value(self, i: int) -> float:
        return self.LO * math.exp(self.STEP * max(i - 0.5, 0))

    def summary(self) -> dict:
        n = int(self.counts.sum())
        if not n:
            return {"calls": 0}
        cum = np.cumsum(self.counts)
        med = self._value(int(np.searchsorted(cum, (n + 1) // 2)))
        over = int(self.counts[[i for i in range(self.BINS) if self._value(i) > LATENCY_FACTOR * med]].sum())
        return {"calls": n, "median_us": round(med * 1e6, 2), "max_us": round(self.max * 1e6, 2),
                "max_over_median": round(self.max / med, 1), f"over_{LATENCY_FACTOR:g}x_median": over}


def _host_rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory(simulator: bool) -> dict:
    """GPU bytes in use (total − free, after collecting garbage and Numba's pending frees) and host RSS."""
    from numba import cuda

    gc.collect()
    sample = {"t": round(time.perf_counter(), 3), "host_rss": _host_rss()}
    if not simulator:
        ctx = cuda.current_context()
        cuda.synchronize()
        ctx.deallocations.clear()
        free, total = ctx.get_memory_info()
        sample["gpu_used"] = int(total - free)
    return sample


# ---------------------------------------------------------------------------
# One call, checked
# ---------------------------------------------------------------------------

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


class Worker:
    serial = _Serial(False)

    def __init__(self, index, problems_, streams, forms, seed, cupy):
        self.index, self.problems, self.streams, self.forms = index, problems_, streams, forms
        self.rng = random.Random(seed)
        self.cupy = cupy
        self.calls = 0
        self.wrong: list = []
        self.errors: list = []
        self.latency: dict = {}
        self.timing = False

    def call(self, problem: Problem, form: str) -> None:
        from numba import cuda

        fn = getattr(st, problem.function)
        ref, bound = problem.ref, problem.bound
        stream = self.rng.choice(self.streams)
        where = f"{problem.label} [{form}, thread {self.index}, stream {'default' if stream is None else 'S'}]"
        try:
            if form == "numpy":
                args, kw, read = problem.inputs, {}, np.asarray
            elif form == "shared":
                args, ref, bound = problem.shared()
                kw, read = {}, lambda r: r.copy_to_host()
            elif form == "cupy":
                return self.cupy_call(fn, problem, where)
            elif form == "graph":
                return self.graph_call(fn, problem, where)
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
                t0 = time.perf_counter()
                result = fn(*args, **kwargs)
                dt = time.perf_counter() - t0
                got = read(result if form != "out" else kw["out"])
            self.check(got, ref, bound, where)
            self.record(problem.function, dt)
        except Exception as exc:  # noqa: BLE001 - counted and described; the soak goes on
            self.errors.append(f"{where}: {type(exc).__name__}: {exc}"[:500])
        self.calls += 1

    def device_kwargs(self, problem, form, stream):
        """The problem's keyword arguments; array ones (conv2d_nchw's bias) as the form's arrays."""
        from numba import cuda

        out = {}
        for k, v in problem.kwargs.items():
            out[k] = cuda.to_device(v, stream=stream or 0) if isinstance(v, np.ndarray) and form not in ("numpy",) \
                else v
        return out

    def record(self, function, seconds):
        if self.timing:
            self.latency.setdefault(function, Latencies()).add(seconds)

    def check(self, got, ref, bound, where):
        got = np.asarray(got)
        if got.shape != np.shape(ref):
            self.wrong.append(f"{where}: shape {got.shape}, expected {np.shape(ref)}")
            return
        res = check_within(got, np.asarray(ref), np.asarray(bound))
        if not res.passed:
            self.wrong.append(f"{where}: {res!r}")

    def cupy_call(self, fn, problem, where):
        cp = self.cupy
        args = tuple(cp.asarray(x) for x in problem.inputs)
        kwargs = {k: cp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in problem.kwargs.items()}
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        dt = time.perf_counter() - t0
        self.check(cp.asnumpy(result), problem.ref, problem.bound, where)
        self.record(problem.function, dt)
        self.calls += 1

    def graph_call(self, fn, problem, where):
        """Capture ``fn(inputs, out=out)`` on a CuPy stream, overwrite the inputs in place with the
        problem's twin's values (the same shapes), replay the graph, check against the twin's reference."""
        cp = self.cupy
        other = problem.twin()
        s = cp.cuda.Stream(non_blocking=True)
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
            for d, h in zip((*args, *_arrays(kwargs)), (*other.inputs, *_arrays(other.kwargs))):
                d[...] = cp.asarray(h)
            out.fill(cp.nan)
            t0 = time.perf_counter()
            graph.launch(stream=s)
            dt = time.perf_counter() - t0
            s.synchronize()
        self.check(cp.asnumpy(out), other.ref, other.bound, where + " (graph replayed on new inputs)")
        self.record(problem.function + " (graph replay)", dt)
        self.calls += 1

    def forms_of(self, problem):
        return [f for f in self.forms if f != "shared" or problem.shared is not None]

    def warm_up(self, progress: bool = False):
        t0 = time.perf_counter()
        for i, p in enumerate(self.problems):
            for f in self.forms_of(p):
                self.call(p, f)
            if progress:  # (thread 0: the compiles happen here, once per kernel whichever thread asks)
                print(f"soak: warm-up {i + 1}/{len(self.problems)} {p.label} ({time.perf_counter() - t0:.0f} s)",
                      flush=True)

    def loop(self, stop: threading.Event):
        self.timing = True
        while not stop.is_set():
            p = self.rng.choice(self.problems)
            self.call(p, self.rng.choice(self.forms_of(p)))


def _arrays(kwargs):
    return [v for v in kwargs.values() if hasattr(v, "shape")]


# ---------------------------------------------------------------------------
# The soak
# ---------------------------------------------------------------------------

def soak(minutes: float = 5.0, threads: int = 16, streams: int = 4, *, problems_per_function: int = 6,
         seed: int = 0, sample_s: float = 10.0, forms=None, progress: bool = True) -> dict:
    """Run the soak (see the module docstring); the results as a dict (the JSON)."""
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from .. import launch
    from ..runtime import SIMULATOR

    try:
        import cupy
    except ImportError:
        cupy = None
    if forms is None:
        forms = [f for f in FORMS if f not in ("cupy", "graph") or (cupy is not None and not SIMULATOR)]
    Worker.serial = _Serial(SIMULATOR)
    rng = random.Random(seed)
    pool = problems(rng, problems_per_function, small=SIMULATOR)
    stream_pool = [None] + [cuda.stream() for _ in range(streams)]
    start = memory(SIMULATOR)
    workers = [Worker(i, pool, stream_pool, forms, rng.randrange(2**32), cupy) for i in range(threads)]
    t0 = time.perf_counter()
    _run_threads([functools.partial(w.warm_up, progress and w.index == 0) for w in workers])
    warm_s = time.perf_counter() - t0
    warmed = memory(SIMULATOR)
    if progress:
        print(f"soak: warm-up {warm_s:.1f} s ({sum(w.calls for w in workers)} calls, {len(pool)} problems, "
              f"forms {', '.join(forms)}); {minutes:g} min with {threads} threads on {streams} streams", flush=True)
    stop = threading.Event()
    samples = [warmed]
    ts = [threading.Thread(target=w.loop, args=(stop,), daemon=True) for w in workers]
    for t in ts:
        t.start()
    deadline = time.perf_counter() + minutes * 60
    while time.perf_counter() < deadline:
        time.sleep(max(0.0, min(sample_s, deadline - time.perf_counter())))
        if time.perf_counter() < deadline:
            samples.append(memory(SIMULATOR))
            if progress:
                print(f"soak: {sum(w.calls for w in workers)} calls, {sum(len(w.wrong) for w in workers)} wrong, "
                      f"{sum(len(w.errors) for w in workers)} errors; " + _memory_text(samples[-1]), flush=True)
    stop.set()
    hung = []
    for i, t in enumerate(ts):
        t.join(timeout=120)
        if t.is_alive():
            hung.append(i)
    end = memory(SIMULATOR)
    samples.append(end)
    lat = {}
    for w in workers:
        for fn, l in w.latency.items():
            lat.setdefault(fn, Latencies()).merge(l)
    latency = {fn: l.summary() for fn, l in sorted(lat.items())}
    wrong = [x for w in workers for x in w.wrong]
    errors = [x for w in workers for x in w.errors]
    growth = {k: (end[k] - warmed[k]) / max(warmed[k], 1) for k in ("gpu_used", "host_rss") if k in end}
    peak = {k: (max(s[k] for s in samples) - warmed[k]) / max(warmed[k], 1) for k in growth}
    slow = {fn: s for fn, s in latency.items() if s.get("max_over_median", 0) > LATENCY_FACTOR}
    targets = {"no wrong result": not wrong, "no error": not errors, "no hung thread": not hung,
               **{f"{k} within {MEMORY_TOLERANCE:.0%} of after warm-up": abs(growth[k]) <= MEMORY_TOLERANCE
                  and peak[k] <= MEMORY_TOLERANCE for k in growth},
               f"no call over {LATENCY_FACTOR:g}x its median": not slow}
    return {"machine": describe(), "title": "soak", "command": " ".join(sys.argv),
            "settings": {"minutes": minutes, "threads": threads, "streams": streams, "seed": seed,
                         "problems_per_function": problems_per_function, "forms": list(forms),
                         "problems": [p.label for p in pool]},
            "calls": sum(w.calls for w in workers), "warm_up_calls": sum(len(w.forms_of(p)) for w in workers for p in pool),
            "warm_up_s": round(warm_s, 1), "wrong_results": len(wrong), "wrong": wrong[:20],
            "errors": len(errors), "error_examples": errors[:20], "hung_threads": hung,
            "memory": {"start": start, "after_warm_up": warmed, "end": end, "samples": samples,
                       "growth_after_warm_up": growth, "peak_growth_after_warm_up": peak},
            "latency": latency, "plans": launch.stats(), "targets": targets, "passed": all(targets.values())}


def _run_threads(targets):
    ts = [threading.Thread(target=t) for t in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _memory_text(s) -> str:
    gpu = f"GPU {s['gpu_used'] / 2**20:.0f} MiB, " if "gpu_used" in s else ""
    return f"{gpu}host RSS {s['host_rss'] / 2**20:.0f} MiB"


def table(data: dict) -> str:
    """The soak's summary as markdown."""
    lines = [f"# soak: {data['settings']['minutes']:g} min, {data['settings']['threads']} threads, "
             f"{data['settings']['streams']} streams ({data['machine'].get('gpu', '?')})", "",
             f"calls {data['calls']} (warm-up {data['warm_up_calls']}), wrong results {data['wrong_results']}, "
             f"errors {data['errors']}, plans {data['plans'].get('plans')}", "",
             f"memory: start {_memory_text(data['memory']['start'])}; after warm-up "
             f"{_memory_text(data['memory']['after_warm_up'])}; end {_memory_text(data['memory']['end'])}", "",
             "| function | calls | median µs | max µs | max/median |", "|---|---|---|---|---|"]
    for fn, s in data["latency"].items():
        if s.get("calls"):
            lines.append(f"| {fn} | {s['calls']} | {s['median_us']} | {s['max_us']} | {s['max_over_median']} |")
    lines += ["", *(f"- {'PASS' if ok else 'FAIL'}: {name}" for name, ok in data["targets"].items())]
    lines += [f"- wrong: {w}" for w in data["wrong"][:5]] + [f"- error: {e}" for e in data["error_examples"][:5]]
    return "\n".join(lines)


def add_arguments(p) -> None:
    add_output_arguments(p)  # (--reps and --plot are not used: one long run, no plot)
    p.add_argument("--minutes", type=float, default=5.0, help="minutes of load after the warm-up (default 5)")
    p.add_argument("--threads", type=int, default=16, help="host threads (default 16)")
    p.add_argument("--streams", type=int, default=4, help="Numba streams the threads share, besides the default one")
    p.add_argument("--problems", type=int, default=6, help="random problems per public function (default 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--forms", default=None, help=f"call forms, comma-separated (default: those available of {','.join(FORMS)})")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds between memory samples (default 10)")


def run(args) -> int:
    data = soak(args.minutes, args.threads, args.streams, problems_per_function=args.problems, seed=args.seed,
                sample_s=args.sample_s, forms=args.forms.split(",") if args.forms else None)
    text = table(data)
    print(text, flush=True)
    paths = write_outputs(args, "soak", data, text)
    written = [p for k, p in paths.items() if p and k != "plot"]
    if written:
        print("wrote " + ", ".join(written), flush=True)
    return 0 if data["passed"] else 1
