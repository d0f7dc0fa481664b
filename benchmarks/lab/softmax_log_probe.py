"""log_softmax against softmax on the row-in-registers rungs (issue 34): k05 with one block per SM ran log_softmax of
4096 × 50257 at 1.376 ms where softmax took 0.528 (H200, session 24), with a NaN-propagating max; k04 (rows
≤ 16384) kept that max until session 25.  Times each (shape, op, rung) with CUDA
events around loops of 10 queued calls (warm-up, median of 15, outputs checked against torch first; until session
25 one call per event pair, whose host time entered the short rows' times) and prints one line each.

    python3 benchmarks/lab/softmax_log_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: (rows, cols): k04's rows in registers (the patterns zoo's 16384 × 256, 65536 × 128, 2^20 × 32, 16384 × 4096),
#: k05's two-blocks-per-SM range (32000, 32768, 46080) and its one-per-SM twin (50257, 65024)
SHAPES = [(16384, 256), (65536, 128), (1048576, 32), (16384, 4096),
          (4096, 32000), (16384, 32768), (4096, 46080), (4096, 50257), (2048, 65024)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch

    import simt_tiles
    from simt_tiles.kernels.softmax import RUNGS

    rows_out, bad = [], 0
    for rows, cols in SHAPES:
        x = torch.randn(rows, cols, device="cuda") * 4
        out = torch.empty_like(x)
        for log in (False, True):
            fn = simt_tiles.log_softmax if log else simt_tiles.softmax
            want = (torch.log_softmax if log else torch.softmax)(x.double(), dim=-1).float()
            one = RUNGS["k05_split_row"].presets["one_per_sm"]
            if cols <= 16384:
                cases = {"default": {}, "k04": {"variant": "k04_register_row"}, "torch": None}
            else:
                cases = {"default": {}, "k06": {"variant": "k06_split_blocks"}, "k05": {"variant": "k05_split_row"},
                         "k05 one_per_sm": {"variant": "k05_split_row", "config": one}, "torch": None}
            for name, kw in cases.items():
                if kw is None:
                    run = lambda: (torch.log_softmax if log else torch.softmax)(x, dim=-1)  # noqa: E731
                else:
                    out.fill_(float("nan"))  # poison: a case that writes nothing must not pass on the last one's output
                    try:
                        fn(x, out=out, **kw)
                    except Exception as exc:  # noqa: BLE001 (a rung that does not fit the row)
                        print(f"{rows}x{cols} {'log' if log else 'softmax'} {name}: {exc!r}"[:200])
                        continue
                    run = lambda: fn(x, out=out, **kw)  # noqa: E731
                got = run() if kw is None else (run(), out)[1]
                err = float((got - want).abs().max())
                ok = err <= 1e-4 * (1 + float(want.abs().max()))
                bad += not ok
                for _ in range(3):
                    run()
                times = []
                for _ in range(15):  # loops of 10 queued calls: a call's host time does not enter
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    for _ in range(10):
                        run()
                    b.record()
                    b.synchronize()
                    times.append(a.elapsed_time(b) / 10)
                ms = statistics.median(times)
                gbs = 2 * x.numel() * 4 / ms / 1e6
                rows_out.append({"shape": [rows, cols], "log": log, "impl": name, "ms": ms, "GB/s": gbs, "ok": ok})
                print(f"{rows}x{cols} {'log_softmax' if log else 'softmax':11s} {name:15s} {ms:7.3f} ms {gbs:7.0f} GB/s "
                      f"{'ok' if ok else f'WRONG ({err:.2g})'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/softmax_log_probe.py", "rows": rows_out},
                                              indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
