"""Timing on the GPU with CUDA events: warm-up, then the median of many runs."""

from __future__ import annotations

import statistics
from typing import Callable

from numba import cuda


def time_cuda(fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, stream=0,
              before: Callable[[], object] | None = None) -> list[float]:
    """Milliseconds of each of ``reps`` calls of ``fn``, each between two events.

    ``fn`` must enqueue its work on ``stream`` (0: the legacy default stream,
    which CuPy and PyTorch also use unless told otherwise).

    ``before`` (untimed, enqueued before the start event) should be GPU work
    longer than ``fn``'s Python launch path — e.g. overwriting a buffer larger
    than L2, then reading it (the L2 left clean: no write-backs billed to
    ``fn``).  The GPU is then still busy with it when ``fn``'s kernels are
    enqueued, so the events measure GPU time only, not the tens of µs of
    Python checks and launch overhead of a public call; and every call starts
    with a cold L2.  Without it, a call's host overhead is inside its time.
    """
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = cuda.event(), cuda.event()
        if before is not None:
            before()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(cuda.event_elapsed_time(start, end))
    return times


def summarize(times_ms: list[float]) -> dict[str, float]:
    """Median, min, max and interquartile spread of a list of timings."""
    q = statistics.quantiles(times_ms, n=4) if len(times_ms) > 1 else [times_ms[0]] * 3
    return {
        "median_ms": statistics.median(times_ms),
        "min_ms": min(times_ms),
        "max_ms": max(times_ms),
        "iqr_ms": q[2] - q[0],
        "runs": len(times_ms),
    }
