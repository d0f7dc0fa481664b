"""k08 (a row split across blocks in one launch, a ticket queue) against k06, k05 and torch at vocabulary rows
(issue 34: 1024 × 128256 at 61% of copy on k06's three passes).  Outputs checked against torch first; each call
timed after a flush that leaves the L2 clean (_matmul_probe.flusher), CUDA events around one call, median of
``--reps``; k08 over its knobs (threads, loads, piece steps, lag), so the preset and the rule come from here.

    python3 benchmarks/lab/softmax_ticket_probe.py [--json PATH] [--reps 20] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (rows, columns, where from)
SHAPES = [
    (1024, 128256, "Llama-3 vocabulary, 1024 tokens (k06 fused today)"),
    (1024, 151936, "Qwen2 vocabulary, 1024 tokens"),
    (64, 128256, "Llama-3, decode batch 64 (k06 split)"),
    (8, 151936, "Qwen2, decode batch 8"),
    (4096, 50257, "GPT-2 vocabulary, 4096 tokens (k05 one per SM)"),
    (600, 50257, "GPT-2, 600 tokens"),
    (2048, 65024, "ChatGLM vocabulary"),
    (4096, 94209, "one past k05 one per SM"),
    (2, 4194304, "two very long rows (k06 split)"),
    (4096, 32000, "Llama-2 vocabulary (k05 two per SM)"),
]
#: k08 knobs tried beside the default preset (fields replaced)
KNOBS = [{}, {"threads": 256}, {"loads": 4}, {"threads": 1024, "loads": 4}, {"piece_steps": 2},
         {"piece_steps": 8}, {"lag_kib": 4096}, {"lag_kib": 8192}, {"lag_kib": 32768}, {"lag_kib": 1 << 20}]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="the default k08 preset only")
    ap.add_argument("--knobs", help="a JSON list of field dicts to try instead of KNOBS")
    ap.add_argument("--peers", action="store_true", help="also k05 one block per SM (where it holds the row) and k06")
    ap.add_argument("--shapes", help="rows x columns to run, e.g. 1024x128256,64x128256 (default: SHAPES)")
    ap.add_argument("--k09", nargs="?", const="[{}]", metavar="JSON",
                    help="also k09 (a row's pieces held in registers), over a JSON list of field dicts (default [{}])")
    args = ap.parse_args()
    import torch
    from _matmul_probe import flusher
    from small_reduce_probe import loop_us, timed

    import simt_tiles
    from simt_tiles.kernels.softmax import RUNGS, dispatch

    flush = flusher()
    k08 = RUNGS["k08_ticket_queue"]
    base = k08.presets["default"]
    knobs = json.loads(args.knobs) if args.knobs else KNOBS[:1] if args.quick else KNOBS
    shapes = SHAPES
    if args.shapes:
        want = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
        shapes = [next((s for s in SHAPES if s[:2] == w), (*w, "asked for")) for w in want]
    rows_out = []

    def record(rows, n, where, name, fn, out, ref, log=False):
        out.fill_(float("nan"))
        got = fn()
        got = got if name.startswith("torch") else out
        torch.cuda.synchronize()
        ok = bool(torch.allclose(got, ref, rtol=1e-4, atol=1e-6 if log else 1e-9)) and not bool(torch.isnan(got).any())
        ms = timed(fn, flush, reps=args.reps)
        gbs = 2 * rows * n * 4 / ms / 1e6
        print(f"{rows}x{n:<8} {name:<34} {ms * 1e3:9.2f} us {gbs:7.0f} GB/s {'ok' if ok else 'WRONG'}", flush=True)
        rows_out.append({"rows": rows, "n": n, "where": where, "variant": name, "ms": ms, "GBps": gbs, "ok": ok})
        return ms

    for rows, n, where in shapes:
        x = torch.randn(rows, n, device="cuda") * 4
        ref = torch.softmax(x, -1)
        out = torch.empty_like(x)
        p = dispatch.plan((rows, n, 1), "float32")
        print(f"# {rows}x{n}: default = {p.rung.name} pieces {p.pieces}", flush=True)
        record(rows, n, where, "default " + p.rung.name, lambda: simt_tiles.softmax(x, out=out), out, ref)
        record(rows, n, where, "torch", lambda: torch.softmax(x, -1), out, ref)
        if args.peers:
            one = RUNGS["k05_split_row"].presets["one_per_sm"]
            try:
                one.for_problem(rows, n, 4)
                record(rows, n, where, "k05 one/SM", lambda: simt_tiles.softmax(x, out=out, variant="k05_split_row",
                                                                             config=one), out, ref)
            except simt_tiles.ConfigError:
                pass
            record(rows, n, where, "k06 split", lambda: simt_tiles.softmax(x, out=out, variant="k06_split_blocks"),
                   out, ref)
        for kn in json.loads(args.k09) if args.k09 else ():
            cfg = dataclasses.replace(RUNGS["k09_register_pieces"].presets["default"], **kn)
            name = "k09 " + (",".join(f"{k}={v}" for k, v in kn.items()) or "default")
            try:
                dispatch.plan((rows, n, 1), "float32", variant="k09_register_pieces", config=cfg)
            except simt_tiles.ConfigError as exc:
                print(f"{rows}x{n:<8} {name}: {exc}", flush=True)
                continue
            record(rows, n, where, name,
                   (lambda c: lambda: simt_tiles.softmax(x, out=out, variant="k09_register_pieces", config=c))(cfg),
                   out, ref)
        for kn in knobs:
            cfg = dataclasses.replace(base, **kn)
            name = "k08 " + (",".join(f"{k}={v}" for k, v in kn.items()) or "default")
            record(rows, n, where, name,
                   (lambda c: lambda: simt_tiles.softmax(x, out=out, variant="k08_ticket_queue", config=c))(cfg),
                   out, ref)
        if (rows, n) in ((1024, 128256), (4096, 50257)):
            lref = torch.log_softmax(x, -1)
            record(rows, n, where, "log k08", lambda: simt_tiles.log_softmax(x, out=out, variant="k08_ticket_queue"),
                   out, lref, log=True)
            record(rows, n, where, "log default", lambda: simt_tiles.log_softmax(x, out=out), out, lref, log=True)
            record(rows, n, where, "torch log", lambda: torch.log_softmax(x, -1), out, lref, log=True)
            us = loop_us(lambda: simt_tiles.softmax(x, out=out, variant="k08_ticket_queue"))
            print(f"{rows}x{n:<8} k08 wall per call in a loop {us:.1f} us", flush=True)
            rows_out.append({"rows": rows, "n": n, "variant": "k08 loop wall", "us": us})
            if args.k09:
                record(rows, n, where, "log k09", lambda: simt_tiles.log_softmax(x, out=out, variant="k09_register_pieces"),
                       out, lref, log=True)
                us = loop_us(lambda: simt_tiles.softmax(x, out=out, variant="k09_register_pieces"))
                print(f"{rows}x{n:<8} k09 wall per call in a loop {us:.1f} us", flush=True)
                rows_out.append({"rows": rows, "n": n, "variant": "k09 loop wall", "us": us})
        del x, ref, out
    src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), flush, reps=args.reps)
    print(f"copy 2^28 {ms * 1e3:.1f} us {2 * 2**30 / ms / 1e6:.0f} GB/s")
    rows_out.append({"variant": "copy 2^28", "ms": ms, "GBps": 2 * 2**30 / ms / 1e6})
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/softmax_ticket_probe.py",
                                               "device": torch.cuda.get_device_name(), "rows": rows_out}, indent=1))
    return 0 if all(r.get("ok", True) for r in rows_out) else 1


if __name__ == "__main__":
    sys.exit(main())
