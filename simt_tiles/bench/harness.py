"""The one measuring loop: every benchmark group and the demo verify, then time, then record one row.

A row is one (problem, implementation) pair, the one schema that ``simt_tiles.report``
renders (older result files are converted on reading, ``report.load``)::

    {"group": "softmax", "problem": "16384x1024", "x": 1024, "impl": "k03_online",
     "kind": "simt" | "peer" | "tile" | "ceiling", "precision": "fp32" | "tf32" | "fp64",
     "passed": bool, "max_err": …, "err_over_bound": …,          # the check, before any timing
     "median_ms": …, "min_ms": …, "max_ms": …, "iqr_ms": …, "runs": …,
     "gbps": … (bytes moved / median) and/or "tflops": … (flops / median),
     "pct_ceiling": … (% of the ceiling of that group measured in the same run),
     "vs_peer": … (this rate / the named peer's rate for the same problem), "peer": name,
     "host_us": … (one call's host time), "error": "…" (why it failed, when it raised),
     **extra}  # what a group adds: matmul m, n, k, config, custom; the demo dtype, config

``group`` is a benchmark group (matmul, filter2d, softmax, …) or, for the demo, a ladder
of ``simt_tiles.registry``; ``kind`` "simt" rows are this project's rungs.

Method (benchmarks/notes/method.md): each implementation first runs once and is
checked (a :class:`~simt_tiles.bounds.BoundCheck` or a bool); a failing
one is recorded and never timed.  Then ``warmup`` untimed calls and up to
``reps`` calls each between two CUDA events (fewer when one call is so slow
that ``reps`` of them would exceed ``budget_s``); the median is the number.
With ``before`` (an L2 flush, see
:func:`simt_tiles.timing.time_cuda`) the events bracket GPU time only, so
public calls can be timed as users make them.  Ceilings (device copy bandwidth, cuBLAS FP32/TF32 rates) are ordinary rows
of kind "ceiling" measured in the same process; :meth:`Harness.finish` adds
the percentages and ratios.

The timer is a parameter so the bookkeeping is tested on a machine without a GPU.
"""

from __future__ import annotations

import time
from typing import Callable

from ..timing import summarize

__all__ = ["Harness", "Progress"]


class Progress:
    """A live line while a benchmark runs: ``rich`` when installed, plain prints otherwise.

    rich (optional extra ``bench``) shows the current entry, how many are done
    and the elapsed time; the plain fallback prints one line per entry, which
    is also what a log file gets."""

    def __init__(self, title: str, total: int | None = None, enabled: bool = True):
        self._rich = None
        self.title = title
        if enabled:
            try:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress
                from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

                self._rich = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                          MofNCompleteColumn(), TimeElapsedColumn(), transient=False)
            except ImportError:
                self._rich = None
        self._task = None
        self._total = total

    def __enter__(self):
        if self._rich is not None:
            self._rich.__enter__()
            self._task = self._rich.add_task(self.title, total=self._total)
        return self

    def __exit__(self, *exc):
        if self._rich is not None:
            self._rich.__exit__(*exc)

    def step(self, text: str) -> None:
        """Say what is being measured now."""
        if self._rich is not None:
            self._rich.update(self._task, description=f"{self.title}: {text}")

    def done(self, line: str) -> None:
        """One entry finished: its summary line."""
        if self._rich is not None:
            self._rich.console.print(line, highlight=False)
            self._rich.advance(self._task)
        else:
            print(line, flush=True)


class Harness:
    """Collects rows; :meth:`entry` checks then (when ``timed``) times one implementation."""

    def __init__(self, *, reps: int = 20, warmup: int = 3, budget_s: float = 3.0, timer: Callable | None = None,
                 sync: Callable | None = None, progress: Progress | None = None,
                 before: Callable[[], object] | None = None, timed: bool = True):
        if timer is None and timed:
            # deferred: loads Numba (backend choice first)
            from ..timing import time_cuda as timer
        if sync is None:
            from numba import cuda

            sync = cuda.synchronize
        self.reps, self.warmup, self.budget_s = reps, warmup, budget_s
        self.timer, self.sync, self.before, self.timed = timer, sync, before, timed
        self.progress = progress or Progress("bench", enabled=False)
        self.rows: list[dict] = []

    def entry(self, group: str, problem: str, impl: str, fn: Callable[[], object], *,
              check: Callable[[], object], kind: str = "simt", precision: str = "fp32",
              nbytes: float | None = None, flops: float | None = None, x: float | None = None,
              timed: bool | None = None, **extra) -> dict:
        """Check ``fn``'s result with ``check()`` (run after one call of ``fn``), then time ``fn``.

        ``check`` returns a BoundCheck-like object (``passed``, ``max_err``,
        ``worst_ratio``) or a bool.  An exception in ``fn`` or ``check`` is
        recorded as a failure with its message (the run goes on).  ``timed=False``: check only
        (default: the harness's ``timed``)."""
        self.progress.step(f"{group} {problem} {impl}")
        row = {"group": group, "problem": problem, "x": x, "impl": impl, "kind": kind,
               "precision": precision, **extra}
        try:
            fn()
            self.sync()
            res = check()
        except Exception as exc:  # a broken implementation is a result, not a crash of the run
            res, row["error"] = False, f"{type(exc).__name__}: {exc}"[:500]
        row["passed"] = bool(getattr(res, "passed", res))
        if hasattr(res, "worst_ratio"):
            row["max_err"], row["err_over_bound"] = res.max_err, res.worst_ratio
        if row["passed"] and (self.timed if timed is None else timed):
            t0 = time.perf_counter()
            fn()
            self.sync()
            one = time.perf_counter() - t0
            reps = max(5, min(self.reps, int(self.budget_s / max(one, 1e-6))))
            st = summarize(self.timer(fn, warmup=self.warmup, reps=reps, before=self.before))
            row.update(st)
            # host time of one call (Python checks + launch), which `before` keeps out of median_ms
            host = []
            for _ in range(5):
                t0 = time.perf_counter()
                fn()
                host.append(time.perf_counter() - t0)
                self.sync()
            row["host_us"] = 1e6 * sorted(host)[2]
            sec = st["median_ms"] * 1e-3  # (0: below the events' resolution, no rate rather than a crash)
            if nbytes is not None and sec > 0:
                row["bytes"], row["gbps"] = nbytes, nbytes / sec / 1e9
            if flops is not None and sec > 0:
                row["flops"], row["tflops"] = flops, flops / sec / 1e12
        self.rows.append(row)
        self.progress.done(self.line(row))
        return row

    @staticmethod
    def line(row: dict) -> str:
        head = f"  {row['group']:<10} {row['problem']:<22} {row['impl']:<26} {row['precision']:<4}"
        if not row["passed"]:
            return f"{head} FAIL {row.get('error', '')} err/bound={row.get('err_over_bound', float('nan')):.3g}"
        rate = " ".join(f"{row[k]:.2f} {u}" for k, u in (("tflops", "TFLOP/s"), ("gbps", "GB/s")) if k in row)
        if "median_ms" not in row:
            return f"{head} ok   err/bound={row.get('err_over_bound', 0.0):.3g}"
        return f"{head} ok   {row['median_ms']:.3f} ms  {rate}  (host {row.get('host_us', 0):.0f} µs/call)"

    def finish(self, *, ceilings: dict[str, str], peers: dict[str, str]) -> list[dict]:
        """Add ``pct_ceiling`` and ``vs_peer`` to every timed row.

        ``ceilings``: group → impl name of the ceiling row (same group; for
        bandwidth groups any problem: the copy is measured once); ``peers``:
        group → impl name of the peer each row is divided by (same problem)."""
        for r in self.rows:
            metric = "tflops" if "tflops" in r else "gbps"
            if not r["passed"] or metric not in r:  # (a failed or untimed row, or one with no rate)
                continue
            ceil = self._find(ceilings.get(r["group"]), r, metric, same_problem=metric == "tflops")
            if ceil and ceil is not r:
                r["pct_ceiling"], r["ceiling"] = 100 * r[metric] / ceil[metric], ceil["impl"]
            peer = self._find(peers.get(r["group"]), r, metric, same_problem=True)
            if peer:
                r["vs_peer"], r["peer"] = r[metric] / peer[metric], peer["impl"]
        return self.rows

    def _find(self, impl, row, metric, *, same_problem):
        """The passing row of ``impl`` with ``metric``: of ``row``'s problem (``same_problem``), else of its group
        first (a zoo group's own copy), then of any group (the patterns groups share one copy row)."""
        if impl is None:
            return None
        rows = [r for r in self.rows if r["impl"] == impl and r["passed"] and metric in r]
        if same_problem:
            return next((r for r in rows if (r["group"], r["problem"]) == (row["group"], row["problem"])), None)
        return next((r for r in rows if r["group"] == row["group"]), rows[0] if rows else None)
