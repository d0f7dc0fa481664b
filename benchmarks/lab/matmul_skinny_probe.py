"""matmul's skinny class past 16 rows: k15 (a warp per row of W, x's rows in groups of 16) against the
default's tiles, for ``x @ W.T`` with 17-64 rows of x.

The skinny class sends ``x @ W.T`` to k15 up to ``dispatch.SKINNY`` = 16 rows of x (a decode step), where
it beats cuBLAS (zoo: 16×4096×4096 1.24×).  Past 16 rows the M-narrow tiles take over (k12 32×64 or 64×64,
K split up to 8 ways, behind a transposed copy of x), and ResNet-50's classifier at batch 32 (32×1000×2048)
runs at 0.72× cuBLAS.  k15 takes more rows as grid rows of 16: W is read once per group, the second time
from L2 where W fits there (8 MB for the classifier; 180 MB for a Llama MLP weight does not).  This probe
times the default with SKINNY = 16 (today) and 64 (``k15``) beside torch (cuBLAS FP32, TF32 off).

Each call timed as the zoo times it: an L2 flush before the start event, CUDA events around one call, the
median of 30; outputs checked against a float64 product with the γ_K·|A|·|B| bound first.  Wall time per call
in a loop beside it.

    python3 benchmarks/lab/matmul_skinny_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (N, K, where from): W is N × K, x is M × K, C = x @ W.T
LAYERS = (
    (1000, 2048, "ResNet-50 classifier (fc 2048 -> 1000)"),
    (4096, 4096, "Llama-2-7B attention projection"),
    (11008, 4096, "Llama-2-7B MLP up/gate"),
    (4096, 11008, "Llama-2-7B MLP down"),
    (1024, 1024, "a 1024-wide layer (BERT-large attention projection)"),
)
ROWS = (17, 24, 32, 48, 64)


class _Skinny:
    """``with _Skinny(64):`` the default sends up to 64 rows to k15.  Launch plans replay what a call
    recorded, whatever SKINNY says now: each case first clears them and records its own (:func:`plans`)."""

    def __init__(self, rows: int):
        self.rows = rows

    def __enter__(self):
        from simt_tiles.kernels.matmul import dispatch

        self.d, self.real = dispatch, dispatch.SKINNY
        dispatch.SKINNY = self.rows

    def __exit__(self, *exc):
        self.d.SKINNY = self.real


def recorded(fn):
    """``fn`` with the launch plans cleared, then called once (its plan recorded): the timed calls replay it."""
    from simt_tiles import launch

    launch.clear()
    fn()
    return fn


def warm() -> None:
    from _matmul_probe import warm as compile_all

    from simt_tiles.bench import matmul_zoo as zoo

    rows = [("", m, n, k, "nt", 1, "") for n, k, _ in LAYERS for m in ROWS]
    todo = set(zoo.kernels(rows))
    with _Skinny(64):
        todo |= set(zoo.kernels(rows))
    compile_all(todo)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    from _matmul_probe import finish, flusher, reference, within
    from small_reduce_probe import loop_us, timed

    import simt_tiles

    warm()
    flush = flusher()
    rows = []
    for n, k, where in LAYERS:
        w = torch.randn(n, k, device="cuda")
        for m in ROWS:
            x = torch.randn(m, k, device="cuda")
            out = torch.empty(m, n, device="cuda")
            ref, bound = reference(x, w.T)

            def call():
                simt_tiles.matmul(x, w.T, out=out)

            cases = [("default", call, 16), ("k15", call, 64), ("torch", lambda: torch.matmul(x, w.T, out=out), 16)]
            label = f"{m}x{n}x{k} nt"
            for name, fn, skinny in cases:
                out.fill_(float("nan"))
                with _Skinny(skinny):
                    recorded(fn)  # the plan of this case's choice, replayed by every timed call
                torch.cuda.synchronize()
                ok = within(out, ref, bound)
                out.fill_(float("nan"))
                fn()  # replayed
                torch.cuda.synchronize()
                ok = ok and within(out, ref, bound)
                ms = timed(fn, flush, reps=30)
                loop = loop_us(fn)
                print(f"{label:<22} {name:<8} {ms * 1e3:9.2f} us  loop {loop:9.2f} us {'ok' if ok else 'WRONG'}",
                      flush=True)
                rows.append({"shape": label, "m": m, "n": n, "k": k, "where": where, "impl": name, "us": ms * 1e3,
                             "loop_us": loop, "ok": ok})
            del x, out, ref, bound
        del w
        torch.cuda.empty_cache()
    return finish(args.json, __file__, rows)


if __name__ == "__main__":
    sys.exit(main())
