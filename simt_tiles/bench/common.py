"""What the bandwidth benchmarks share: the session (harness, CuPy, optional cuTile), the copy ceiling,
and the end of a run (summary table, JSON with the machine description, markdown, plot)."""

from __future__ import annotations

import contextlib
import json

__all__ = ["session", "copy_ceiling", "finish", "load_tile"]

#: bytes overwritten before each timed call (untimed): > the H200's 50 MiB L2 ten times over, and
#: long enough (≈ 0.15 ms) to hide a public call's Python launch path (see timing.time_cuda)
FLUSH_BYTES = 512 * 2**20
#: the flush is repeated so that the GPU is busy for ≈ 2 ms: longer than any public call's host
#: path (reported per row as host_us), so the events bracket GPU time only
FLUSH_REPEAT = 16


def load_tile():
    """``simt_tiles.tile`` when cuda.tile is usable here, else None (with the reason printed)."""
    try:
        from .. import tile

        if not tile.available():
            raise ImportError("cuda.tile is not importable here (see simt_tiles.tile)")
        print(f"cuTile {tile.version()}", flush=True)
        return tile
    except Exception as exc:  # ImportError, or the toolchain missing
        print(f"cuTile counterparts skipped: {exc}", flush=True)
        return None


@contextlib.contextmanager
def session(title: str, reps: int, *, with_tile: bool = True, total: int | None = None):
    """``(harness, cupy, tile-or-None)`` with an L2 flush before every timed call and a progress line."""
    import cupy as cp

    from .harness import Harness, Progress

    flush = cp.empty(FLUSH_BYTES // 4, cp.float32)

    def before():
        for _ in range(FLUSH_REPEAT):
            flush.fill(0)

    tile = load_tile() if with_tile else None
    with Progress(title, total) as progress:
        yield Harness(reps=reps, progress=progress, before=before), cp, tile
    flush = None


def copy_ceiling(h, cp, n: int = 2**28) -> dict:
    """Device-to-device copy of ``n`` float32 (read + write counted): the bandwidth ceiling row."""
    src, dst = cp.random.default_rng(1).standard_normal(n, dtype=cp.float32), cp.empty(n, cp.float32)
    row = h.entry("copy", f"{n} float32", "device copy", lambda: cp.copyto(dst, src),
                  check=lambda: bool(cp.array_equal(src, dst)), kind="ceiling", nbytes=2 * src.nbytes, x=n)
    src = dst = None
    cp.get_default_memory_pool().free_all_blocks()
    return row


def finish(h, args, *, title: str, method: str, ceilings: dict, peers: dict) -> int:
    """Ratios, the summary table (printed and ``--md``), JSON (``--json``), plot (``--plot``).

    Exit status 1 when any implementation failed its check (they are in the table as FAIL)."""
    from ..machine import describe
    from ..report import group_tables, plot_groups

    rows = h.finish(ceilings=ceilings, peers=peers)
    data = {"machine": describe(), "title": title, "method": method, "results": rows}
    table = group_tables(data)
    print(table, flush=True)
    if getattr(args, "json", None):
        with open(args.json, "w") as fh:
            json.dump(data, fh, indent=2)
    if getattr(args, "md", None):
        with open(args.md, "w") as fh:
            fh.write(table + "\n")
    if getattr(args, "plot", None):
        plot_groups(data, args.plot)
    return 0 if all(r["passed"] for r in rows) else 1
