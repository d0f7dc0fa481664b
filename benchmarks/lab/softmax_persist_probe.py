"""Does a persistent block that loads row r + G while it writes row r beat k05's one block per row?  (issue 34:
4096 × 50257 at 73% of copy: with one block an SM, nothing overlaps its phases; session 29's two-blocks-per-SM
k05 was slower.)  A prototype, float32 softmax, rows that fit the registers alone (512 threads × VR values, no
shared part): one block per SM walks rows b, b + G, …; the write loop stores value k of row r, then loads
value k of the next row into the same register.  Beside k05 one per SM with the same VR (no shared part
either), and torch; checked against torch first; each call timed after an L2 flush (median of 40).

Session 29 (``results/softmax_persist_probe_s29_h200.*``): 5-12% over k05 one per SM (4096 × 43008 409 µs
against 459), not over the default two per SM (395.5); the rung built on it (k08, commit 47af8a1) spilled at
50257 and was reverted (benchmarks/notes/patterns_zoo.md, "Session 29").

    python3 benchmarks/lab/softmax_persist_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (rows, columns, threads, values a thread)
SHAPES = [(4096, 43008, 512, 84), (4096, 32768, 512, 64), (16384, 16384, 512, 32), (1024, 43008, 512, 84)]


def make_persistent(T: int, VR: int):
    from numba import cuda, float32, uint32, uint64

    from simt_tiles.kernels.softmax._common import make_row_reductions

    NW = T // 32
    row_max, row_sum, mx = make_row_reductions(NW, float32)
    NEG_INF = -math.inf

    @cuda.jit("void(float32[:, ::1], float32[:, ::1])", launch_bounds=(T, 1))
    def softmax_persistent(x, out):
        tid = cuda.threadIdx.x
        lane, wid = tid % 32, tid // 32
        rows, n = x.shape[0], x.shape[1]
        lim = uint32(n - tid) if n > tid else uint32(0)
        tu = uint64(tid)
        red_m = cuda.shared.array(NW, float32)
        red_s = cuda.shared.array(NW, float32)
        vals = cuda.local.array(VR, float32)
        r = cuda.blockIdx.x
        if r < rows:
            for k in range(VR):
                vals[k] = x[r, tu + uint64(k * T)] if uint32(k * T) < lim else float32(NEG_INF)
        while r < rows:
            m = float32(NEG_INF)
            for k in range(VR):
                m = mx(m, vals[k])
            m = row_max(m, red_m, wid, lane, 0)
            s = float32(0)
            for k in range(VR):
                e = math.exp(vals[k] - m)
                vals[k] = e
                s += e
            s = row_sum(s, red_s, wid, lane, 0)
            a = float32(1) / s
            rn = r + cuda.gridDim.x
            if rn < rows:  # the next row's loads behind this row's stores
                for k in range(VR):
                    if uint32(k * T) < lim:
                        out[r, tu + uint64(k * T)] = vals[k] * a
                        vals[k] = x[rn, tu + uint64(k * T)]
            else:
                for k in range(VR):
                    if uint32(k * T) < lim:
                        out[r, tu + uint64(k * T)] = vals[k] * a
            r = rn

    return softmax_persistent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import dataclasses

    import torch
    from small_reduce_probe import timed

    import simt_tiles
    from simt_tiles.kernels.reduce.dispatch import sm_count
    from simt_tiles.kernels.softmax import RUNGS

    one = RUNGS["k05_split_row"].presets["one_per_sm"]
    flush = torch.empty(2**27, dtype=torch.float32, device="cuda")
    sms = sm_count()
    out_rows = []
    for rows, n, T, VR in SHAPES:
        assert T * VR >= n
        x = torch.randn(rows, n, device="cuda") * 4
        ref = torch.softmax(x, -1)
        out = torch.empty_like(x)
        kern = make_persistent(T, VR)
        cfg = dataclasses.replace(one, threads=T, max_vpt=VR)
        cases = [("torch", lambda: torch.softmax(x, -1)),
                 ("k05 one/SM", lambda: simt_tiles.softmax(x, out=out, variant="k05_split_row", config=cfg)),
                 ("default", lambda: simt_tiles.softmax(x, out=out))]
        for blocks_per_sm in (1,):
            g = min(rows, blocks_per_sm * sms)
            cases.append((f"persistent {g} blocks", (lambda g: lambda: kern[g, T](x, out))(g)))
        for name, fn in cases:
            out.fill_(float("nan"))
            got = fn()
            got = got if name == "torch" else out
            torch.cuda.synchronize()
            ok = bool(torch.allclose(got, ref, rtol=1e-4, atol=1e-9))
            ms = timed(fn, lambda: flush.zero_(), reps=40)
            gbs = 2 * rows * n * 4 / ms / 1e6
            extra = ""
            if name.startswith("persistent"):
                extra = f"regs {kern.get_regs_per_thread()} local {kern.get_local_mem_per_thread()} B"
            print(f"{rows}x{n:<7} {name:<22} {ms * 1e3:9.2f} us {gbs:6.0f} GB/s {'ok' if ok else 'WRONG'} {extra}",
                  flush=True)
            out_rows.append({"rows": rows, "n": n, "variant": name, "ms": ms, "GBps": gbs, "ok": ok})
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/softmax_persist_probe.py",
                                               "rows": out_rows}, indent=1))
    return 0 if all(r["ok"] for r in out_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
