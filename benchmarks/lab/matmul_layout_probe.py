"""matmul's transposed layouts on k12: ``a.T @ b`` on a's storage and ``x @ w.T`` after one copy of w, against
the layout kernel they replace, the same shape in NN, and torch (cuBLAS FP32).

Issue 32 asks for transposed layouts within 5% of NN.  The layout kernel (k11's tile, any strides) ran
4096³ ``nt`` at 3.03 ms and ``tn`` at 3.00 against 2.85 for NN on k12.  ``tn`` with a C-order K × M ``a``
is k12's own Aᵀ: k12 runs on it without its transposition (expected ≤ NN).  ``nt`` from
``dispatch.NT_COPY_ROWS`` rows copies w into K × N first (8·N·K bytes: ~50/M of the product; expected
NN plus ~1% at 4096 rows); fewer rows keep the layout kernel (the 512-row control is unchanged).

Each call timed as the zoo times it (an L2 flush, CUDA events around one call, median of 20); the default and
the layout kernel each record their own launch plan first; outputs checked against float64 with the γ_K bound.

    python3 benchmarks/lab/matmul_layout_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (M, N, K, layout, where from)
SHAPES = (
    (4096, 4096, 4096, "nt", "the zoo's square nt; Llama-2-7B qkv over a 4096-token prompt"),
    (4096, 4096, 4096, "tn", "the zoo's backward dW = dY.T @ X over 4096 tokens"),
    (4096, 4096, 11008, "nt", "Llama-2-7B MLP down over a 4096-token prompt"),
    (4096, 4096, 512, "tn", "backward dW over 512 tokens"),
    (4096, 1024, 4096, "tn", "backward dW of a 1024-wide layer"),
    (2048, 4096, 4096, "nt", "Llama-2-7B qkv over a 2048-token prompt"),
    (1024, 11008, 4096, "nt", "Llama-2-7B MLP up over a 1024-token prompt (NT_COPY_ROWS)"),
    (512, 11008, 4096, "nt", "control: 512 rows keep the layout kernel"),
)


class _LayoutKernel:
    """``with _LayoutKernel():`` the transposed products take the layout kernel, as before session 32."""

    def __enter__(self):
        from simt_tiles.kernels.matmul import _strided

        self.s, self.real = _strided, (_strided._tn_on_k12, _strided._nt_on_k12)
        _strided._tn_on_k12 = _strided._nt_on_k12 = lambda *a: False

    def __exit__(self, *exc):
        self.s._tn_on_k12, self.s._nt_on_k12 = self.real


def operands(m, n, k, layout):
    """``(a, b)`` torch operands of ``layout`` on C-order storage."""
    import torch

    a = torch.randn(k, m, device="cuda").T if layout[0] == "t" else torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda").T if layout[1] == "t" else torch.randn(k, n, device="cuda")
    return a, b


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import contextlib

    import torch
    from _matmul_probe import finish, flusher, reference, warm, within
    from matmul_skinny_probe import recorded
    from small_reduce_probe import timed

    import simt_tiles
    from simt_tiles.bench import matmul_zoo as zoo

    warm(zoo.kernels([("", m, n, k, lay, 1, "") for m, n, k, lay, _ in SHAPES]
                     + [("", m, n, k, "nn", 1, "") for m, n, k, _, _ in SHAPES]))
    flush = flusher()
    rows = []
    for m, n, k, layout, where in SHAPES:
        a, b = operands(m, n, k, layout)
        a_nn, b_nn = a.contiguous(), b.contiguous()
        out = torch.empty(m, n, device="cuda")
        ref, bound = reference(a, b)
        cases = [("default", lambda: simt_tiles.matmul(a, b, out=out), contextlib.nullcontext),
                 ("layout kernel", lambda: simt_tiles.matmul(a, b, out=out), _LayoutKernel),
                 ("NN", lambda: simt_tiles.matmul(a_nn, b_nn, out=out), contextlib.nullcontext),
                 ("torch", lambda: torch.matmul(a, b, out=out), contextlib.nullcontext)]
        label = f"{m}x{n}x{k} {layout}"
        for name, fn, mode in cases:
            out.fill_(float("nan"))
            with mode():
                recorded(fn)
            torch.cuda.synchronize()
            ok = within(out, ref, bound)
            ms = timed(fn, flush, reps=20)
            print(f"{label:<22} {name:<14} {ms:8.3f} ms {2 * m * n * k / ms / 1e9:6.1f} TFLOP/s "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
            rows.append({"shape": label, "m": m, "n": n, "k": k, "layout": layout, "where": where, "impl": name,
                         "ms": ms, "ok": ok})
        del a, b, a_nn, b_nn, out, ref, bound
        torch.cuda.empty_cache()
    return finish(args.json, __file__, rows)


if __name__ == "__main__":
    sys.exit(main())
