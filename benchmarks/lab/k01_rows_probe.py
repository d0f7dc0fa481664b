"""k01 against k03 where the reduce default routes to k01 (issue 34): sum/max along rows of at least
``dispatch.K01_MIN_ROW`` values and whole arrays.  The zoo's sum of 16384² rows ran k01 at 0.260 ms and k03 at
0.249 (sessions 23 and 27): is that true of every row length the rule sends to k01?  Outputs checked against
torch first; each problem timed as reduce_occupancy_probe times (loops of 10 queued calls, median of 15).

    python3 benchmarks/lab/k01_rows_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from reduce_occupancy_probe import gpu_ms  # noqa: E402

#: (shape, op, axis): rows from 2048 (the rule's edge) to 262144 values, few rows (2 per SM) and many,
#: 16 MiB (L2-resident) to 1 GiB; whole arrays
PROBLEMS = [((131072, 2048), "sum", -1), ((32768, 4096), "sum", -1), ((8192, 16384), "sum", -1),
            ((16384, 16384), "sum", -1), ((2048, 65536), "sum", -1), ((512, 262144), "sum", -1),
            ((264, 65536), "sum", -1), ((1024, 4096), "sum", -1), ((65536, 3000), "max", -1),
            ((4096, 50257), "max", -1), ((16384, 16384), "min", -1), ((1 << 28,), "sum", None),
            ((1 << 24,), "max", None), ((4096, 4096), "sum", None)]
VARIANTS = (None, "k01_warp_shuffle", "k03_flat_lanes")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch

    import simt_tiles

    rows, bad = [], 0
    for shape, op, axis in PROBLEMS:
        torch.manual_seed(0)
        x = torch.randn(*shape, device="cuda")
        ref = getattr(x.double(), {"sum": "sum", "max": "amax", "min": "amin"}[op])(
            *(() if axis is None else (axis,)))
        name = f"{op} {'x'.join(map(str, shape))} axis={axis}"
        for v in VARIANTS:
            run = lambda v=v: simt_tiles.reduce(x, op=op, axis=axis, variant=v)  # noqa: E731
            err = float((run().double() - ref).abs().max() / ref.abs().max().clamp_min(1))
            ok = err < 1e-4
            bad += not ok
            ms = gpu_ms(run)
            rows.append({"problem": name, "variant": v or "default", "ms": ms, "ok": ok,
                         "gbps": x.numel() * 4 / ms / 1e6})
            print(f"{name:34s} {v or 'default':18s} {ms:8.4f} ms {rows[-1]['gbps']:7.0f} GB/s {'ok' if ok else 'FAIL'}",
                  flush=True)
        f = {"sum": torch.sum, "max": torch.amax, "min": torch.amin}[op]
        ms = gpu_ms(lambda: f(x) if axis is None else f(x, dim=axis))
        rows.append({"problem": name, "variant": "torch", "ms": ms, "gbps": x.numel() * 4 / ms / 1e6})
        print(f"{name:34s} {'torch':18s} {ms:8.4f} ms {rows[-1]['gbps']:7.0f} GB/s", flush=True)
        del x
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
