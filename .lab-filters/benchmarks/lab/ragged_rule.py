"""Read the ragged sweep of ``gpu_pass.sh fast`` and say what the shipped table should hold.

    python benchmarks/lab/ragged_rule.py out/matmul_ragged_h200.json

For each problem: the k11 rows timed masked (``pad=2``) and padded (``pad=3``) for the same tile and
split, their ratio, and the fastest SIMT row against Triton-ieee and cuBLAS.  The suggested
``rules.matmul_pad.min_mnk`` of ``simt_tiles/tuned/h200.json`` is the smallest M·N·K from which
the padded row wins every pair at that size and at every larger ragged size (None: it loses at
the largest, so keep the masked path).  Below the smallest size timed the rule is not extrapolated.
"""

from __future__ import annotations

import json
import re
import sys


def pairs(rows):
    """``{(problem, tile): {pad: median_ms}}`` for the k11 rows that name ``pad=2`` or ``pad=3``, at
    ragged problems only (K or N not a multiple of 4: where an aligned problem pads nothing)."""
    out = {}
    for r in rows:
        m = re.search(r"\bpad=([23])\b", r.get("config", ""))
        if r.get("kind") == "simt" and m and r.get("passed") and (r["k"] % 4 or r["n"] % 4):
            tile = re.sub(r",?\bpad=[23]\b", "", r["config"])
            out.setdefault((r["problem"], tile), {})[int(m[1])] = r["median_ms"]
    return {key: v for key, v in out.items() if len(v) == 2}


def min_mnk(rows):
    """The suggested threshold (see the module doc), from the problems that have pairs."""
    wins = {}
    size = {r["problem"]: r["m"] * r["n"] * r["k"] for r in rows}
    for (problem, _), t in pairs(rows).items():
        wins[problem] = wins.get(problem, True) and t[3] < t[2]
    if not wins:
        return None
    suggestion = None
    for problem in sorted(wins, key=size.get, reverse=True):  # largest first: the run of wins from the top
        if not wins[problem]:
            break
        suggestion = size[problem]
    return suggestion


def main(argv=None) -> int:
    path = (argv or sys.argv[1:])[0]
    rows = json.load(open(path))["results"]
    for (problem, tile), t in sorted(pairs(rows).items()):
        print(f"{problem:>16}  {tile:<72} masked {t[2]:.4f} ms  padded {t[3]:.4f} ms  ({t[2] / t[3]:.2f}x)")
    for problem in dict.fromkeys(r["problem"] for r in rows):
        here = [r for r in rows if r["problem"] == problem and r.get("passed")]
        peer = {r["impl"]: r["median_ms"] for r in here if r.get("kind") == "peer"}
        best = min((r for r in here if r.get("kind") == "simt"), key=lambda r: r["median_ms"], default=None)
        if best and "Triton FP32" in peer and "cuBLAS" in peer:
            print(f"{problem:>16}  best {best['impl']} {best['median_ms']:.4f} ms: "
                  f"{peer['Triton FP32'] / best['median_ms']:.2f}x Triton, {peer['cuBLAS'] / best['median_ms']:.2f}x cuBLAS")
    print(f"suggested rules.matmul_pad.min_mnk: {min_mnk(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
