"""Softmax over vocabulary-length rows (issue 34: 4096 × 50257 at 73% of copy on k05 one block per SM): k05 with
two blocks per SM and up to 112 KiB of shared memory each, beside k05 one per SM, k06 split across blocks, the
default and torch.  Outputs checked against torch first; each call timed as the zoo times it (an L2 flush before
the start event, CUDA events around one call, median of 40), and the driver's occupancy of each k05 kernel
(blocks per SM) printed beside it.

Session 29 ran it at commits 10d2a01 (k05 also reading the values past 112 KiB again from L2) and 47af8a1 (a k08
rung: one block per SM walking its rows): both lost to k05 one per SM at every vocabulary row and were reverted
(``results/softmax_vocab_probe_s29*_h200.*``; benchmarks/notes/patterns_zoo.md, "Session 29").

    python3 benchmarks/lab/softmax_vocab_probe.py [--json PATH]
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
    (4096, 50257, "GPT-2 vocabulary, 4096 tokens"),
    (4096, 50176, "the most two blocks per SM hold (84 + 112 values a thread)"),
    (2048, 65024, "ChatGLM vocabulary"),
    (4096, 94208, "the longest row k05 one per SM holds"),
    (600, 50257, "GPT-2, 600 tokens (4.5 waves of one block per SM)"),
    (4096, 46592, "past the default's two-per-SM edge (46080)"),
    (133, 46081, "one wave of SMs and one row (split)"),
    (4096, 32000, "Llama-2 vocabulary (control: unchanged)"),
    (16384, 32768, "control: unchanged"),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import numpy as np
    import torch
    from numba import cuda
    from small_reduce_probe import timed

    import simt_tiles
    from simt_tiles.kernels.softmax import RUNGS, dispatch

    k05 = RUNGS["k05_split_row"]
    old_two = k05.presets["default"]  # 96 KiB
    two = dataclasses.replace(old_two, smem_budget=112 * 1024)  # two blocks and the driver's 1 KiB each: 226 KiB
    one = k05.presets["one_per_sm"]
    flush = torch.empty(2**27, dtype=torch.float32, device="cuda")  # 512 MiB > L2
    rows_out = []

    def occupancy(cfg, n, log=False):
        fitted = cfg.for_problem(1, n, 4)
        kernel = k05.kernel(fitted, np.float32, **({"log": True} if log else {}))
        fn = next(iter(kernel.overloads.values())).library.get_cufunc()
        return cuda.current_context().get_active_blocks_per_multiprocessor(
            fn, fitted.threads, k05.dynamic_smem(fitted, np.dtype(np.float32)))

    for rows, n, where in SHAPES:
        x = torch.randn(rows, n, device="cuda") * 4
        ref = torch.softmax(x, -1)
        out = torch.empty_like(x)
        cases = [("default", lambda: simt_tiles.softmax(x, out=out), None),
                 ("torch", lambda: torch.softmax(x, -1), None)]
        for name, cfg in (("k05 two/SM 112K", two), ("k05 two/SM 96K", old_two), ("k05 one/SM", one)):
            try:
                cfg.for_problem(rows, n, 4)
            except Exception:
                continue
            cases.append((name, (lambda c: lambda: simt_tiles.softmax(x, out=out, variant="k05_split_row", config=c))(cfg), cfg))
        cases.append(("k06 split", lambda: simt_tiles.softmax(x, out=out, variant="k06_split_blocks"), None))
        for name, fn, cfg in cases:
            out.fill_(float("nan"))
            got = fn()
            got = out if name != "torch" else got
            torch.cuda.synchronize()
            ok = bool(torch.allclose(got, ref, rtol=1e-4, atol=1e-9)) and not bool(torch.isnan(got).any())
            ms = timed(fn, lambda: flush.zero_(), reps=40)
            gbs = 2 * rows * n * 4 / ms / 1e6
            extra = ""
            if cfg is not None:
                f = cfg.for_problem(rows, n, 4)
                extra = f"regs {f.reg_vpt} smem {f.smem_vpt} blocks/SM {occupancy(cfg, n)}"
            print(f"{rows}x{n:<8} {name:<24} {ms * 1e3:9.2f} us {gbs:7.0f} GB/s {'ok' if ok else 'WRONG'} {extra}",
                  flush=True)
            rows_out.append({"rows": rows, "n": n, "where": where, "variant": name, "ms": ms, "GBps": gbs, "ok": ok,
                             "config": extra})
        if (rows, n) == (4096, 50257):  # log_softmax: the default and k05 one per SM (two per SM does not hold it)
            for name, v, cfg in (("log default", None, None), ("log k05 one/SM", "k05_split_row", one)):
                fn = (lambda v, c: lambda: simt_tiles.log_softmax(x, out=out, variant=v, config=c))(v, cfg)
                fn()
                ok = bool(torch.allclose(out, torch.log_softmax(x, -1), rtol=1e-5, atol=1e-4))
                ms = timed(fn, lambda: flush.zero_(), reps=40)
                print(f"{rows}x{n:<8} {name:<24} {ms * 1e3:9.2f} us {'ok' if ok else 'WRONG'}", flush=True)
                rows_out.append({"rows": rows, "n": n, "where": where, "variant": name, "ms": ms, "ok": ok})
            ms = timed(lambda: torch.log_softmax(x, -1), lambda: flush.zero_(), reps=40)
            print(f"{rows}x{n:<8} {'log torch':<24} {ms * 1e3:9.2f} us", flush=True)
            rows_out.append({"rows": rows, "n": n, "where": where, "variant": "log torch", "ms": ms, "ok": True})
        del x, ref, out
    copy_src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    ms = timed(lambda: copy_dst.copy_(copy_src), lambda: flush.zero_(), reps=20)
    print(f"copy 2^28 {ms * 1e3:.1f} us {2 * 2**30 / ms / 1e6:.0f} GB/s")
    rows_out.append({"variant": "copy 2^28", "ms": ms, "GBps": 2 * 2**30 / ms / 1e6})
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/softmax_vocab_probe.py",
                                               "rows": rows_out}, indent=1))
    return 0 if all(r.get("ok", True) for r in rows_out) else 1


if __name__ == "__main__":
    sys.exit(main())
