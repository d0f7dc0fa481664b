"""Timing on the GPU with CUDA events: warm-up, then the median of many runs."""

from __future__ import annotations

import statistics
from typing import Callable

from numba import cuda


def time_cuda(fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, stream=0) -> list[float]:
    """Milliseconds of each of ``reps`` calls of ``fn``, each between two events.

    ``fn`` must enqueue its work on ``stream`` (0: the legacy default stream,
    which CuPy and PyTorch also use unless told otherwise).
    """
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = cuda.event(), cuda.event()
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
