"""``simt-tiles warm [FUNCTION ...] [-j N]``: compile this GPU's default kernels before the first call.

The kernels slowest to compile are built with Numba's disk cache (``cache=True``): matmul's
generated rungs (k11/k12, 20–50 s each cold) and conv2d's k10 (one kernel per filter size, mode and
filter kind). Compiled here — one worker process each, in parallel, with a progress bar — they
load in about a second in every later process. The other families' kernels (softmax, log_softmax,
reduce, vector_add, bias_relu, conv2d_nchw) compile in about a second each and cannot be
disk-cached (Numba does not cache their factories' closures): the command line reports them;
:func:`warm` called from Python with ``in_process=True`` compiles them in the calling process (a
long-lived server warming up before its first request).

A first call that is about to compile a disk-cacheable kernel with no cache entry logs one line at
WARNING on the logger ``simt_tiles.compile`` (``simt_tiles.runtime``), naming the kernel and this
command; ``logging.getLogger("simt_tiles.compile").setLevel(logging.ERROR)`` silences it.
"""

from __future__ import annotations

import os
import sys
import time

from . import _probe
from ._options import positive_int

#: conv2d filters (kh, kw, mode) the default path compiles k10 for (bench conv's), both filter kinds
CONV_FILTERS = [(k, k, mode) for k in (3, 5, 7) for mode in ("constant", "reflect")]
#: functions whose kernels are disk-cached (warmed in worker processes) and the others
DISK_CACHED = ("matmul", "correlate2d")
IN_PROCESS = ("softmax", "log_softmax", "reduce", "vector_add", "bias_relu")
FUNCTIONS = DISK_CACHED + IN_PROCESS


def jobs_for(functions) -> list:
    """The jobs (picklable tuples) that build ``functions``' default kernels."""
    jobs = []
    for f in functions:
        if f == "matmul":
            jobs += [("matmul", *k) for k in matmul_kernels()]
        elif f == "correlate2d":
            jobs += [("correlate2d", kh, kw, mode, kind) for kh, kw, mode in CONV_FILTERS for kind in ("host", "device")]
        elif f in ("softmax", "log_softmax"):  # the row classes: short, mid, k05 (two and one a SM), vocabulary,
            # a row no block holds (k08), an inner axis
            jobs += [(f, shape, axis) for shape, axis in (((64, 32), -1), ((64, 1000), -1), ((64, 20000), -1),
                                                          ((1, 70000), -1), ((200, 50257), -1), ((1, 100000), -1),
                                                          ((8, 3, 40), 1))]
        elif f == "reduce":
            jobs += [("reduce", op, shape, axis) for op, shape, axis in (
                ("sum", (5000,), None), ("sum", (640, 64), -1), ("sum", (640, 4096), -1), ("sum", (2, 70000), -1),
                ("sum", (300, 40), 0), ("mean", (64, 64), -1), ("max", (5000,), None), ("argmax", (64, 1000), -1))]
        elif f in ("vector_add", "bias_relu"):
            jobs.append((f,))
        else:
            raise ValueError(f"functions: expected names from {FUNCTIONS}; got {f!r}")
    return jobs


def matmul_kernels() -> list:
    """``(rung, config, dtype, params)`` of the disk-cached kernels ``matmul(a, b)`` launches by its own
    choice: k11 and k12 on every tile of its shape classes (``dispatch.TILES``), the default tile's
    float64 and unaligned builds, the layout kernel's transposed forms on the default tile, and k15's
    row groups (each a picklable tuple: a job of a worker process)."""
    import dataclasses

    from .kernels.matmul import RUNGS, dispatch, k15_gemv  # deferred: Numba, for the matmul jobs only

    out = []
    for variant, params in (("k11_generated_split_k", (("idx32", True), ("vec", True))),
                            ("k12_async_copy", (("idx32", True),))):
        for fields in dispatch.TILES.values():
            out.append((variant, dataclasses.replace(RUNGS[variant].presets["default"], **fields).compiled(),
                        "float32", params))
    tile = RUNGS["k11_generated_split_k"].presets["default"].compiled()
    out += [("k11_generated_split_k", tile, dt, (("idx32", True), ("vec", vec)))
            for dt, vec in (("float32", False), ("float64", True), ("float64", False))]
    out += [("layouts", tile, "float32", (("idx32", True), ("layout", lay), ("vec", True))) for lay in ("nt", "tn", "tt")]
    for mt in (1, 2, 4, 8, 16):
        cfg = k15_gemv.config_for(mt)
        out += [("k15_gemv", cfg, "float32", (("vec", True),)),
                ("k15_rows", k15_gemv.rows_config(cfg), "float32", (("vec", True),))]
    return out


def matmul_rung(name: str):
    """The rung object a :func:`matmul_kernels` entry names (the ladder's, the layout kernel, k15's two)."""
    from .kernels.matmul import RUNGS, _layouts, k15_gemv  # deferred: Numba, for the matmul jobs only

    return {"layouts": _layouts.RUNG, "k15_gemv": k15_gemv.RUNG, "k15_rows": k15_gemv.ROWS_RUNG}.get(name) or RUNGS[name]


def run_job(job) -> tuple[str, float]:
    """Build one job's kernels by the path a user's call takes; ``(description, seconds)``."""
    import numpy as np
    from numba import cuda

    import simt_tiles  # deferred: a worker process loads Numba and the families it builds

    t0 = time.perf_counter()
    name = job[0]
    if name == "matmul":
        _, variant, cfg, dtype, params = job
        matmul_rung(variant).kernel(cfg, np.dtype(dtype), **dict(params))
    elif name == "correlate2d":
        _, kh, kw, mode, kind = job
        w = np.full((kh, kw), 0.5, np.float32)
        simt_tiles.correlate2d(cuda.to_device(np.ones((40, 140), np.float32)),
                               cuda.to_device(w) if kind == "device" else w, mode=mode)
    elif name in ("softmax", "log_softmax"):
        _, shape, axis = job
        getattr(simt_tiles, name)(cuda.device_array(shape, np.float32), axis=axis)
    elif name == "reduce":
        _, op, shape, axis = job
        simt_tiles.reduce(cuda.to_device(np.ones(shape, np.float32)), op, axis=axis)
    elif name == "vector_add":
        a = cuda.to_device(np.ones(1000, np.float32))
        simt_tiles.vector_add(a, a)
    elif name == "bias_relu":
        simt_tiles.bias_relu(cuda.to_device(np.ones((40, 50), np.float32)), cuda.to_device(np.ones(50, np.float32)))
    cuda.synchronize()
    return " ".join(map(str, job)), time.perf_counter() - t0


def warm(functions=None, *, jobs: int | None = None, in_process: bool = False, progress: bool = True) -> list:
    """Compile the default kernels of ``functions`` (None: every disk-cached one, plus the others
    when ``in_process``); returns ``[(job, seconds), ...]``.  Disk-cached kernels are built in
    ``jobs`` worker processes (default: one per core); the others in this process when
    ``in_process`` (else they are skipped: a worker's compilation would die with it)."""
    if isinstance(functions, (str, bytes)) or not (functions is None or hasattr(functions, "__iter__")):
        hint = f" (pass [{functions!r}])" if isinstance(functions, str) else ""
        raise TypeError(f"functions: expected None or a list of names from {FUNCTIONS}; got "
                        f"{type(functions).__name__} {functions!r}{hint}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int)):
        raise TypeError(f"jobs: expected None or an int >= 1; got {type(jobs).__name__} {jobs!r}")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs: expected None or an int >= 1; got {jobs}")
    functions = list(FUNCTIONS if in_process else DISK_CACHED) if functions is None else list(functions)
    todo = jobs_for(functions)
    disk = [j for j in todo if j[0] in DISK_CACHED]
    here = [j for j in todo if j[0] not in DISK_CACHED] if in_process else []
    done: list = []
    failed: list = []
    with _Progress(len(disk) + len(here), progress) as bar:
        if disk:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            workers = max(1, min(jobs or os.cpu_count() or 1, len(disk)))
            # spawn: a forked CUDA context is unusable, and the workers must not share this one
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(run_job, j): j for j in disk}
                for fut in as_completed(futures):
                    try:
                        done.append(fut.result())
                    except Exception as exc:  # noqa: BLE001 - one kernel's failure (or a killed worker) stops no other
                        failed.append((futures[fut], exc))
                        continue
                    bar.step(*done[-1])
        for j in here:
            done.append(run_job(j))
            bar.step(*done[-1])
    if failed:
        lines = "; ".join(f"{' '.join(map(str, j))}: {type(e).__name__}: {e}" for j, e in failed[:5])
        raise RuntimeError(f"simt-tiles warm: {len(failed)} of {len(disk)} disk-cached kernels failed ({lines}); the "
                           f"{len(done)} others are cached. A worker killed (out of memory, a signal) leaves no "
                           "partial cache entry: run the command again (fewer --jobs when memory is short)")
    return done


class _Progress:
    """rich's progress bar when installed (the ``bench`` extra), else one line per kernel."""

    def __init__(self, total: int, on: bool):
        self.total, self.on, self.n, self.bar = total, on, 0, None

    def __enter__(self):
        if self.on:
            try:
                from rich.progress import Progress

                self.bar = Progress(transient=False)
                self.bar.start()
                self.task = self.bar.add_task("compiling", total=self.total)
            except ImportError:
                self.bar = None
        return self

    def step(self, name: str, seconds: float) -> None:
        self.n += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=f"{name} ({seconds:.1f} s)")
        elif self.on:
            print(f"[{self.n}/{self.total}] {name} ({seconds:.1f} s)", file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


def add_arguments(p) -> None:
    # no argparse choices: Python 3.11 checks an empty nargs="*" (its default too) against them; run() checks the names
    p.add_argument("functions", nargs="*", default=None, metavar="FUNCTION",
                   help=f"functions to warm (default: the disk-cached ones, {', '.join(DISK_CACHED)}); "
                        f"also {', '.join(IN_PROCESS)} (compiled in this process only: reported, not kept)")
    p.add_argument("-j", "--jobs", type=positive_int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    functions = args.functions or list(DISK_CACHED)
    bad = [f for f in functions if f not in FUNCTIONS]
    if bad:
        print(f"simt-tiles warm: error: argument FUNCTION: invalid choice: {bad[0]!r} (choose from "
              f"{', '.join(map(repr, FUNCTIONS))})", file=sys.stderr)
        return 2
    if _probe.select_backend():  # before Numba loads: no GPU and no NUMBA_ENABLE_CUDASIM means the simulator
        print("simt-tiles warm: no GPU (the simulator compiles nothing)", file=sys.stderr)
        return 2
    skipped = [f for f in functions if f not in DISK_CACHED]
    t0 = time.perf_counter()
    try:
        done = warm([f for f in functions if f in DISK_CACHED], jobs=args.jobs, progress=not args.no_progress)
    except (RuntimeError, ValueError) as exc:  # ValueError: a bad --jobs, named
        print(exc, file=sys.stderr)
        return 1
    print(f"{len(done)} kernels in the disk cache ({time.perf_counter() - t0:.0f} s)")
    if skipped:
        print(f"not disk-cached (about 1 s each on first use; simt_tiles.warm({skipped!r}, in_process=True) "
              "compiles them in a running process): " + ", ".join(skipped))
    return 0


class _CallableModule(type(sys)):
    """``simt_tiles.warm`` is this module once ``simt_tiles.warm`` was imported as one (the command
    line does) and the function otherwise: either way ``simt_tiles.warm(...)`` warms."""

    def __call__(self, *args, **kwargs):
        return warm(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
