"""Softmax over few long rows: where k05 (one block per SM, or two) and k06 split across blocks cross.

Session 29's vocabulary probe timed k05 one block per SM beside the default's k06 split at three row counts the
rules send to the split (waves of 1.01, 1.5 and 3.03 SMs): k05 one/SM was 1.3-1.6x faster at all three
(133 x 46081 32.0 us against 42.7; 200 x 50257 39.8 against 64.7; 400 x 50257 67.7 against 107.8).  This probe
sweeps the row count from 1 to past 4 waves at the row lengths the rules treat differently, to place the edge.

Each call timed as the zoo times it: an L2 flush before the start event, CUDA events around one call, the median
of 40; outputs checked against torch first.  Wall time per call in a queued loop beside it (``loop us``).

    python3 benchmarks/lab/softmax_few_rows_probe.py [--rows 1,4,...] [--columns 32768,...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROWS = (1, 4, 16, 33, 66, 100, 131, 133, 166, 200, 264, 333, 400, 500)
#: (columns, where from)
COLUMNS = ((32768, "past k06's two-piece edge (2 x 16384), inside k05 two/SM"),
           (46081, "one past k05 two/SM"), (50257, "GPT-2 vocabulary"), (65024, "ChatGLM vocabulary"),
           (94208, "the longest row k05 one/SM holds"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rows", help="comma-separated row counts (default: ROWS)")
    ap.add_argument("--columns", help="comma-separated row lengths (default: COLUMNS)")
    args = ap.parse_args()
    rows_list = [int(r) for r in args.rows.split(",")] if args.rows else ROWS
    columns = [(int(c), "swept") for c in args.columns.split(",")] if args.columns else COLUMNS
    import torch
    from small_reduce_probe import loop_us, timed

    import simt_tiles
    from simt_tiles.kernels.softmax import RUNGS, dispatch

    k05 = RUNGS["k05_split_row"]
    one, two = k05.presets["one_per_sm"], k05.presets["default"]
    flush_buf = torch.empty(2**27, dtype=torch.float32, device="cuda")  # 512 MiB > L2
    flush = lambda: flush_buf.zero_()  # noqa: E731
    out_rows = []
    for n, where in columns:
        for rows in rows_list:
            x = torch.randn(rows, n, device="cuda") * 4
            ref = torch.softmax(x, -1)
            out = torch.empty_like(x)
            p = dispatch.plan((rows, n, 1), "float32", config="default")
            cases = [("default", lambda: simt_tiles.softmax(x, out=out)), ("torch", lambda: torch.softmax(x, -1)),
                     ("k06 split", lambda: simt_tiles.softmax(x, out=out, variant="k06_split_blocks"))]
            for name, cfg in (("k05 one/SM", one), ("k05 two/SM", two)):
                try:
                    cfg.for_problem(rows, n, 4)
                except Exception:
                    continue
                cases.append((name, (lambda c: lambda: simt_tiles.softmax(x, out=out, variant="k05_split_row",
                                                                         config=c))(cfg)))
            for name, fn in cases:
                out.fill_(float("nan"))
                got = fn()
                got = got if name == "torch" else out
                torch.cuda.synchronize()
                ok = bool(torch.allclose(got, ref, rtol=1e-4, atol=1e-9)) and not bool(torch.isnan(got).any())
                ms = timed(fn, flush, reps=40)
                loop = loop_us(fn)
                label = f"{name} ({p.rung.name} x{p.pieces})" if name == "default" else name
                print(f"{rows:>4}x{n:<6} {label:<34} {ms * 1e3:8.2f} us  loop {loop:8.2f} us "
                      f"{'ok' if ok else 'WRONG'}", flush=True)
                out_rows.append({"rows": rows, "n": n, "where": where, "variant": name, "plan": [p.rung.name, p.pieces],
                                 "us": ms * 1e3, "loop_us": loop, "ok": ok})
            del x, ref, out
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/softmax_few_rows_probe.py",
                                               "rows": out_rows}, indent=1))
    return 0 if all(r["ok"] for r in out_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
