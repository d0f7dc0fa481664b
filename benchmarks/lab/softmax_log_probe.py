"""log_softmax against softmax on the long-row rungs (issue 34): k05 with one block per SM ran log_softmax of
4096 × 50257 at 1.376 ms where softmax took 0.528 (H200, session 24).  Times each (shape, op, rung) with CUDA
events (warm-up, median of 20, outputs checked against torch first) and prints one line each.

    python3 benchmarks/lab/softmax_log_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: (rows, cols): k05's two-blocks-per-SM range (32000, 32768, 46080) and its one-per-SM twin (50257, 65024)
SHAPES = [(4096, 32000), (16384, 32768), (4096, 46080), (4096, 50257), (2048, 65024)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import numpy as np
    import torch
    from numba import cuda

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
            cases = {"default": {}, "k06": {"variant": "k06_split_blocks"}, "k05 one_per_sm": {"config": one},
                     "torch": None}
            for name, kw in cases.items():
                if kw is None:
                    run = lambda: (torch.log_softmax if log else torch.softmax)(x, dim=-1)  # noqa: E731
                else:
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
                for _ in range(20):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(); run(); b.record(); b.synchronize()  # noqa: E702
                    times.append(a.elapsed_time(b))
                ms = statistics.median(times)
                gbs = 2 * x.numel() * 4 / ms / 1e6
                rows_out.append({"shape": [rows, cols], "log": log, "impl": name, "ms": ms, "GB/s": gbs, "ok": ok})
                print(f"{rows}x{cols} {'log_softmax' if log else 'softmax':11s} {name:15s} {ms:7.3f} ms {gbs:7.0f} GB/s "
                      f"{'ok' if ok else f'WRONG ({err:.2g})'}", flush=True)
    # the diagnosis: k05's log_softmax with the plain (FMNMX) max of softmax instead of the NaN-propagating one
    # (timing only: rows without NaN give the same result)
    import dataclasses

    from simt_tiles.kernels.softmax import k05_split_row

    def plain_max_factory(config, dtype, log=False):
        real = k05_split_row.make_row_reductions
        k05_split_row.make_row_reductions = lambda *a, **k: real(*a, **{**k, "nan_max": False})
        try:
            return k05_split_row.make_kernel(config, dtype, log=log)
        finally:
            k05_split_row.make_row_reductions = real

    probe = dataclasses.replace(RUNGS["k05_split_row"], name="k05 plain max", factory=plain_max_factory)
    for rows, cols in [(4096, 46080), (4096, 50257)]:
        x = torch.randn(rows, cols, device="cuda") * 4
        out = torch.empty_like(x)
        want = torch.log_softmax(x.double(), dim=-1).float()
        for preset in ("default", "one_per_sm"):
            cfg = probe.presets[preset].for_problem(rows, cols, 4)
            xd, od = cuda.as_cuda_array(x), cuda.as_cuda_array(out)
            run = lambda: probe.launch(cfg, np.float32, (rows,), (cfg.threads,), 0, xd, od, params={"log": True})  # noqa: E731
            run(); torch.cuda.synchronize()  # noqa: E702
            ok = float((out - want).abs().max()) < 1e-3
            bad += not ok
            times = []
            for _ in range(20):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); run(); b.record(); b.synchronize()  # noqa: E702
                times.append(a.elapsed_time(b))
            ms = statistics.median(times)
            print(f"{rows}x{cols} log_softmax k05 {preset} plain max {ms:7.3f} ms {2 * x.numel() * 4 / ms / 1e6:7.0f} GB/s "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
            rows_out.append({"shape": [rows, cols], "log": True, "impl": f"k05 {preset} plain max", "ms": ms, "ok": ok})
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/softmax_log_probe.py", "rows": rows_out},
                                              indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
