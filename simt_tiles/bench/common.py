"""What every benchmark group shares: its output options, the session (harness, CuPy, optional
cuTile, an L2 flush sized from the device), the copy ceiling, and the end of a run (summary
table, JSON with the machine description, markdown, plot; ``--out DIR`` names them
``<group>_<device slug>.*``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from .. import _probe, tile
from .._options import output_file
from ..machine import describe, l2_bytes, slug as device_slug
from ..report import group_tables, plot
from . import NO_GPU

__all__ = ["add_output_arguments", "copy_ceiling", "finish", "flush_bytes", "load_tile", "main_of",
           "result_paths", "session"]

#: the L2 flush before each timed call overwrites at least this much (untimed): long enough
#: (≈ 0.15 ms) to hide a public call's Python launch path (see timing.time_cuda)
FLUSH_MIN_BYTES = 512 * 2**20
#: the flush is repeated so that the GPU is busy for ≈ 2 ms: longer than any public call's host
#: path (reported per row as host_us), so the events bracket GPU time only.  It ends with a read of
#: the buffer: writes alone leave the L2 full of dirty lines, and the timed call's first reads would
#: write ~L2-size bytes back (8-9 µs of a 64 MiB GEMV on the H100: benchmarks/lab/flush_probe.py)
FLUSH_REPEAT = 16


def flush_bytes(l2: int | None) -> int:
    """Bytes of the flush buffer: ten times the device's L2, and at least :data:`FLUSH_MIN_BYTES`."""
    return max(FLUSH_MIN_BYTES, 10 * (l2 or 0))


def result_paths(out_dir: str, group: str, slug: str | None = None) -> dict[str, str]:
    """``{"json", "md", "plot"}`` → ``out_dir/<group>_<slug>.{json,md,png}`` (slug: this device's)."""
    if slug is None:
        slug = device_slug()
    stem = os.path.join(out_dir, f"{group}_{slug}")
    return {"json": f"{stem}.json", "md": f"{stem}.md", "plot": f"{stem}.png"}


def write_outputs(args, group: str, data: dict, table: str) -> dict[str, str | None]:
    """Write ``data`` (JSON) and ``table`` (markdown) where ``args`` says: ``--json``/``--md``, else
    ``--out DIR``'s ``<group>_<device>.*``; returns the paths (``plot`` included, for the caller)."""
    paths = {k: getattr(args, k, None) for k in ("json", "md", "plot")}
    if getattr(args, "out", None):
        os.makedirs(args.out, exist_ok=True)
        paths = {k: paths[k] or v for k, v in result_paths(args.out, group).items()}
    if paths["json"]:
        with open(paths["json"], "w") as fh:
            json.dump(data, fh, indent=2)
    if paths["md"]:
        with open(paths["md"], "w") as fh:
            fh.write(table + "\n")
    return paths


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    """The options every group takes: repetitions and where the results go."""
    p.add_argument("--reps", type=int, default=20, help="timed runs per entry (median reported; default 20)")
    p.add_argument("--out", metavar="DIR", help="write DIR/<group>_<device>.{json,md,png} (device: e.g. h200)")
    p.add_argument("--json", metavar="PATH", type=output_file,
                   help="write the rows and the machine description as JSON")
    p.add_argument("--md", metavar="PATH", type=output_file, help="write the summary table as markdown")
    p.add_argument("--plot", metavar="PATH", type=output_file, help="write a PNG plot")


def main_of(group: str, add_arguments, run, doc: str, argv=None) -> int:
    """A group's stand-alone entry point (``python benchmarks/bench_<group>.py``): parse, check for a GPU, run."""

    p = argparse.ArgumentParser(prog=f"simt-tiles bench {group}", description=doc.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    if _probe.select_backend():
        print(NO_GPU, file=sys.stderr)
        return 2
    return run(args)


def load_tile():
    """``simt_tiles.tile`` when cuda.tile is usable here, else None (with the reason printed)."""
    try:
        if not tile.available():
            raise ImportError("cuda.tile is not importable here (see simt_tiles.tile)")
        print(f"cuTile {tile.version()}", flush=True)
        return tile
    except Exception as exc:  # ImportError, or the toolchain missing
        print(f"cuTile counterparts skipped: {exc}", flush=True)
        return None


@contextlib.contextmanager
def session(title: str, reps: int, *, with_tile: bool = True, total: int | None = None, flush: bool = True,
            budget_s: float = 3.0):
    """``(harness, cupy, tile-or-None)``; with ``flush``, an L2 flush before every timed call."""
    import cupy as cp

    # deferred: loads Numba (backend choice first)
    from .harness import Harness, Progress

    before = None
    if flush:
        buf = cp.empty(flush_bytes(l2_bytes()) // 4, cp.float32)

        def before():
            for _ in range(FLUSH_REPEAT):
                buf.fill(0)
            buf.sum()  # then read it: the L2 ends clean, so the timed call pays no one else's write-backs

    tile = load_tile() if with_tile else None
    with Progress(title, total) as progress:
        yield Harness(reps=reps, progress=progress, before=before, budget_s=budget_s), cp, tile
    buf = before = None


def copy_ceiling(h, cp, n: int = 2**28) -> dict:
    """Device-to-device copy of ``n`` float32 (read + write counted): the bandwidth ceiling row."""
    src, dst = cp.random.default_rng(1).standard_normal(n, dtype=cp.float32), cp.empty(n, cp.float32)
    row = h.entry("copy", f"{n} float32", "device copy", lambda: cp.copyto(dst, src),
                  check=lambda: bool(cp.array_equal(src, dst)), kind="ceiling", nbytes=2 * src.nbytes, x=n)
    src = dst = None
    cp.get_default_memory_pool().free_all_blocks()
    return row


def finish(h, args, *, group: str, title: str, method: str, ceilings: dict, peers: dict) -> int:
    """Ratios, the summary table (printed and written), JSON, plot: to ``--json/--md/--plot`` or ``--out DIR``.

    Exit status 1 when any implementation failed its check (they are in the table as FAIL)."""

    rows = h.finish(ceilings=ceilings, peers=peers)
    data = {"machine": describe(), "title": title, "method": method, "results": rows}
    table = group_tables(data)
    print(table, flush=True)
    paths = write_outputs(args, group, data, table)
    if paths["plot"]:
        plot(data, paths["plot"])
    written = [p for p in paths.values() if p]
    if written:
        print("wrote " + ", ".join(written), flush=True)
    return 0 if all(r["passed"] for r in rows) else 1
