"""Does the benchmarks' L2 flush bill short memory-bound calls for write-backs that are not theirs?

Every timed call of `simt-tiles bench` follows an untimed flush that *writes* a buffer ten times the L2
(``buf.fill(0)``, ``common.session``).  It leaves the L2 full of dirty lines, so the next kernel's reads
first evict ~50 MB of them to DRAM.  Prediction: a ~12-15 µs tax on every timed call (the L2's size at
copy bandwidth), invisible on the 2 GiB copy ceiling and on long calls, ~30% of a 64 MiB GEMV: the
"fixed cost per call" of the decode GEMVs (notes/matmul.md, "k15's tile for decode GEMVs").  A flush
that ends with a read of the buffer leaves the L2 clean and still cold.

Each case timed after each flush (CUDA events around one call, median of 40), outputs checked first.

    python3 benchmarks/lab/flush_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    from _matmul_probe import reference, within
    from small_reduce_probe import timed  # median ms of one call after flush()

    import simt_tiles as st

    torch.backends.cuda.matmul.allow_tf32 = False
    buf = torch.empty(2**27, dtype=torch.float32, device="cuda")  # 512 MiB: ten L2s
    flushes = {
        "dirty": lambda: [buf.fill_(0) for _ in range(4)],  # as `bench` does today
        "clean": lambda: ([buf.fill_(0) for _ in range(4)], buf.sum()),  # then read: clean lines
        "none": lambda: None,
    }

    cases = []
    for mib in (16, 64, 256, 1024):
        src = torch.randn(mib * 2**18, device="cuda")
        dst = torch.empty_like(src)
        cases.append((f"copy {mib} MiB", 2 * src.nbytes, lambda s=src, d=dst: d.copy_(s), None))
    for m, n, k, lay in ((1, 4096, 4096, "nt"), (1, 4096, 4096, "nn"), (4, 11008, 4096, "nt"), (16, 4096, 11008, "nt")):
        x = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda") if lay == "nt" else torch.randn(k, n, device="cuda")
        wb = w.T if lay == "nt" else w
        out = torch.empty(m, n, device="cuda")
        ref, bound = reference(x, wb)
        nbytes = 4 * (m * k + n * k + m * n)
        check = lambda o=out, r=ref, b=bound: within(o, r, b)
        cases.append((f"matmul {m}x{n}x{k} {lay}", nbytes, lambda x=x, wb=wb, o=out: st.matmul(x, wb, out=o), check))
        cases.append((f"torch {m}x{n}x{k} {lay}", nbytes, lambda x=x, wb=wb, o=out: torch.matmul(x, wb, out=o), check))
    for r, c in ((16384, 256), (65536, 128), (16384, 4096)):
        x = torch.randn(r, c, device="cuda")
        out = torch.empty_like(x)
        ref = torch.softmax(x.double(), 1).float()
        check = lambda o=out, r=ref: bool(((o - r).abs() <= 1e-5).all())
        cases.append((f"softmax {r}x{c}", 2 * x.nbytes, lambda x=x, o=out: st.softmax(x, out=o), check))
        cases.append((f"torch.softmax {r}x{c}", 2 * x.nbytes, lambda x=x, o=out: torch.softmax(x, 1, out=o), check))
    rows, bad = [], 0
    for name, nbytes, fn, check in cases:
        fn()
        torch.cuda.synchronize()
        ok = check() if check else True
        bad += not ok
        us = {f: timed(fn, flushes[f], reps=40) * 1e3 for f in flushes}
        row = {"case": name, "bytes": nbytes, "ok": ok, **{f"{f}_us": v for f, v in us.items()}}
        rows.append(row)
        print(f"{name:28} {'ok' if ok else 'WRONG'} " + "  ".join(
            f"{f} {v:8.2f} us {nbytes / v / 1e3:6.0f} GB/s" for f, v in us.items()), flush=True)
    if args.json:
        import json
        Path(args.json).write_text(json.dumps({"command": "python3 benchmarks/lab/flush_probe.py",
                                               "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
