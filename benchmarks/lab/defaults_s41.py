"""Session 41's new defaults at the points its runs did not time: k11's skewed rows at 15 × 15 and 21 × 21 (float32
8192²), k12's rx3y2 at 7³ (float32 256³).  Each: ``config=None`` against the config it replaced, outputs compared
first (the two must agree to the float32 bound's order: max |diff| / max |out| printed), then the kernel time
(``simt_tiles.timing.time_cuda``: CUDA events around one call after an L2 flush, median of ``--reps``, two warm-ups).

    PYTHONPATH=$PWD python3 benchmarks/lab/defaults_s41.py [--reps 10] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy as cp

    import simt_tiles as st
    from simt_tiles.timing import time_cuda

    flush = cp.empty(64 * 2**20, cp.float32)  # 256 MiB, written then read (the L2 left clean: method.md)

    def time_ms(f):
        return statistics.median(time_cuda(f, warmup=2, reps=args.reps, before=lambda: (flush.fill(1), flush.sum())))

    rows = []

    def compare(case, call, new, old, old_kw):  # config=None (new) beside the config it replaced (old)
        runs = {new: {}, old: old_kw}
        outs = {name: call(**kw) for name, kw in runs.items()}
        for name, kw in runs.items():
            diff = float(cp.abs(outs[name] - outs[old]).max() / cp.abs(outs[old]).max())
            rows.append(dict(case=case, impl=name, ms=time_ms(lambda kw=kw: call(**kw)), rel_diff=diff))

    rng = cp.random.default_rng(0)
    img = rng.standard_normal((8192, 8192), dtype=cp.float32)
    for k in (15, 21):
        w = rng.standard_normal((k, k), dtype=cp.float32)
        compare(f"correlate2d 8192² {k}x{k} float32", lambda **kw: st.correlate2d(img, w, **kw), "default (skew 128)",
                "plain rows", dict(variant="k11_large_filter", config="fast_float32"))
    vol = rng.standard_normal((256, 256, 256), dtype=cp.float32)
    w3 = rng.standard_normal((7, 7, 7), dtype=cp.float32)
    compare("correlate 256³ 7x7x7 float32 reflect", lambda **kw: st.correlate(vol, w3, **kw), "default (rx3y2)",
            "rx3 (the default before)", dict(variant="k12_volume", config="rx3"))
    for r in rows:
        print(f"{r['case']:40s} {r['impl']:28s} {r['ms']:8.3f} ms  max|diff|/max|out| {r['rel_diff']:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(command="python3 benchmarks/lab/defaults_s41.py", rows=rows),
                                              indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
