"""matmul's narrow class: the default against the session-16 rule, at shapes the sweep did not measure.

Session 31's sweep (``gpu_pass.sh narrow``, ``results/matmul_narrow_s31_h200.md``) found k11 1.3-1.7x faster
than the k12 tiles the narrow class ran on tall products (C at most 256 wide, A the big operand): k12 first
writes Aᵀ.  The class now runs k11 there, up to 256 columns, with ``balance_splits`` per tile.  This probe
times the default (the new rule) beside the rule it replaced (``session16``, kept here, not in the house) and
torch (cuBLAS FP32) at real layers and at the class's edges, none of them in the sweep.

Each call timed as the zoo times it: an L2 flush before the start event, CUDA events around one call, the
median of 30; outputs checked against a float64 product with the γ_K·|A|·|B| bound first.  Wall time per call
in a loop of 50 beside it.

    python3 benchmarks/lab/matmul_narrow_rule_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (M, N, K, layout, batch, where from)
SHAPES = (
    (4096, 64, 4096, "nn", 1, "swept: issue 32's skinny product"),
    (100352, 64, 576, "nn", 1, "swept: ResNet-50 conv2_x 3x3 as a GEMM"),
    (100352, 64, 256, "nn", 1, "ResNet-50 conv2_x 1x1 256->64 (batch 32, 56x56)"),
    (25088, 128, 512, "nn", 1, "ResNet-50 conv3_x 1x1 512->128 (batch 32, 28x28)"),
    (8192, 64, 2048, "nt", 1, "DeepSeekMoE-16B router: 8192 tokens x 64 experts, hidden 2048 (x @ W.T)"),
    (4096, 64, 4096, "nt", 1, "LoRA rank 64 down-projection on a 4096-wide layer (x @ A.T)"),
    (1024, 128, 1024, "nn", 32, "attention p@v, 32 heads, sequence 1024, head dim 128 (Llama-2-7B)"),
    (16384, 192, 768, "nn", 1, "rule: 192 columns, between the swept 128 and 256"),
    (8192, 96, 2048, "nn", 1, "rule: 96 columns"),
    (1024, 256, 1024, "nn", 1, "rule edge: M = 4N, the smallest tall 256-wide product"),
    (512, 64, 512, "nn", 1, "rule edge: the smallest tall product"),
    (2048, 256, 4096, "nn", 1, "rule: 64 tiles of 64x64, K long"),
    (3001, 201, 999, "nn", 1, "rule: ragged (K % 4, N % 4: k12 with k11's tile)"),
    (64, 4096, 4096, "nn", 1, "swept: issue 32's fat product (M-narrow: k12, 5 -> 8 splits)"),
    (48, 3000, 1024, "nn", 1, "M-narrow, 48 rows"),
)


def session16(m: int, n: int, k: int):
    """The narrow class as session 16 shipped it: k12 only, C at most 64 wide, splits to 2 blocks per SM."""
    from simt_tiles.kernels.matmul import dispatch as d

    if min(m, n) > 64 or max(m, n) < 512:
        return None
    full = 2 * d.sm_count()
    if n <= 64:
        tile = "128x64" if -(-m // 128) >= full else "64x64"
    else:
        tile = "32x64" if m <= 32 else "64x128" if -(-n // 128) >= full else "64x64"
    bm, bn = map(int, tile.split("x"))
    blocks = -(-m // bm) * -(-n // bn)
    return "k12_async_copy", max(1, min(8, k // d.MIN_SPLIT_K, -(-full // blocks))), d.TILES[tile]


class _Session16:
    """``with _Session16():`` the default chooses as session 16 did (the memoised choices cleared on both sides)."""

    def __enter__(self):
        from simt_tiles.kernels.matmul import dispatch

        self.d, self.real = dispatch, dispatch.narrow_plan
        dispatch.narrow_plan = session16
        dispatch._split_k_choice.cache_clear()

    def __exit__(self, *exc):
        self.d.narrow_plan = self.real
        self.d._split_k_choice.cache_clear()


def warm() -> None:
    """The kernels both rules launch at SHAPES, compiled into Numba's disk cache in parallel (as the zoo warms)."""
    from _matmul_probe import warm as compile_all

    from simt_tiles.bench import matmul_zoo as zoo

    rows = [(w, m, n, k, layout, batch, w) for m, n, k, layout, batch, w in SHAPES]
    todo = set(zoo.kernels(rows))
    with _Session16():
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
    from simt_tiles.kernels.matmul import dispatch

    warm()
    flush = flusher()
    rows = []
    for m, n, k, layout, batch, where in SHAPES:
        new_plan = dispatch.choose(None, None, batch * m, n, k, "float32")
        with _Session16():
            old_rung, old_cfg = dispatch.choose(None, None, batch * m, n, k, "float32")
        lead = (batch,) if batch > 1 else ()
        a = torch.randn(lead + (m, k), device="cuda")
        b = torch.randn(lead + (n, k), device="cuda").transpose(-1, -2) if layout[1] == "t" else \
            torch.randn(lead + (k, n), device="cuda")
        out = torch.empty(lead + (m, n), device="cuda")
        ref, bound = reference(a, b)
        cases = [("default", lambda: simt_tiles.matmul(a, b, out=out)),
                 ("session16", lambda: simt_tiles.matmul(a, b, out=out, variant=old_rung.name, config=old_cfg)),
                 ("torch", lambda: torch.matmul(a, b, out=out))]
        label = f"{batch}x{m}x{n}x{k} {layout}" if batch > 1 else f"{m}x{n}x{k} {layout}"
        plans = {"default": f"{new_plan[0].name} {new_plan[1]}", "session16": f"{old_rung.name} {old_cfg}"}
        for name, fn in cases:
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            ok = within(out, ref, bound)
            ms = timed(fn, flush, reps=30)
            loop = loop_us(fn)
            print(f"{label:<24} {name:<10} {ms * 1e3:9.2f} us  loop {loop:9.2f} us {'ok' if ok else 'WRONG'}  "
                  f"{plans.get(name, '')}", flush=True)
            rows.append({"shape": label, "where": where, "impl": name, "plan": plans.get(name), "us": ms * 1e3,
                         "loop_us": loop, "ok": ok})
        del a, b, out, ref, bound
        torch.cuda.empty_cache()
    return finish(args.json, __file__, rows)


if __name__ == "__main__":
    sys.exit(main())
