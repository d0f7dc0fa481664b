"""The matmul shape zoo: shapes, layouts and batches from real workloads, through the public call.

    simt-tiles bench matmul --zoo [--zoo-only decode attention ...] [--reps 10] [--out DIR]

Each row is ``np.matmul(a, b)`` as a pipeline calls it — ``a`` and ``b`` CuPy views in the row's
layout (``nt``: ``x @ w.T``, the linear layer; ``tn``: ``dyᵀ @ x``, a weight gradient; batches as
3-D arrays) — timed through ``simt_tiles.matmul(a, b, out=c)`` (its checks, its dispatch, its
launch plan) beside cuBLAS FP32 (``cupy.matmul``: op(A)/op(B), strided batches, no copies) and
torch FP32 (``torch.matmul``, TF32 off).  Every output is checked against a float64 product with
the γ_K·|A|·|B| bound before it is timed; an L2 flush precedes every timed call and input sets
rotate so that more than three L2s are touched (benchmarks/notes/method.md).  GPU time (CUDA events,
median) is the number; ``host_us`` is one call's host time.  Triton is not in the zoo (its autotuner
compiles per shape class for minutes: ``bench matmul --sizes`` has it).

``warm()`` compiles the kernels the zoo's rows launch, one process each, before anything is timed.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from ..bounds import check_within, gamma, unit_roundoff
from ..machine import l2_bytes
from . import common

#: (name, M, N, K, layout, batch, source): C[batch] = op(A) @ op(B), M×N×K per product
ZOO = [
    # decode (M = tokens in flight) on a 7B-class model (d = 4096, MLP 11008): x @ W.T per linear layer
    ("decode M=1 qkv/o", 1, 4096, 4096, "nt", 1, "Llama-2-7B attention projection, one token"),
    ("decode M=1 nn", 1, 4096, 4096, "nn", 1, "the same GEMV with W stored K×N (the issue's row)"),
    ("decode M=4 up", 4, 11008, 4096, "nt", 1, "Llama-2-7B MLP up/gate projection, 4 sequences"),
    ("decode M=16 down", 16, 4096, 11008, "nt", 1, "Llama-2-7B MLP down projection, 16 sequences"),
    ("decode M=16 qkv", 16, 4096, 4096, "nt", 1, "Llama-2-7B attention projection, batch 16"),
    # prefill: M = prompt tokens
    ("prefill M=512 qkv", 512, 4096, 4096, "nt", 1, "Llama-2-7B projection, a 512-token prompt"),
    ("prefill M=512 up", 512, 11008, 4096, "nt", 1, "Llama-2-7B MLP up, a 512-token prompt"),
    ("prefill M=4096 qkv", 4096, 4096, 4096, "nt", 1, "Llama-2-7B projection, a 4096-token prompt"),
    ("prefill M=4096 down", 4096, 4096, 11008, "nt", 1, "Llama-2-7B MLP down, a 4096-token prompt"),
    # training backward of the projection: dX = dY·W (nn), dW = dYᵀ·X (tn)
    ("backward dX M=512", 512, 4096, 4096, "nn", 1, "backward of x @ W.T: dY @ W"),
    ("backward dW K=512", 4096, 4096, 512, "tn", 1, "backward of x @ W.T: dY.T @ X over 512 tokens"),
    ("backward dW K=4096", 4096, 4096, 4096, "tn", 1, "the same over 4096 tokens"),
    # attention, 64 = batch × heads, sequence 512, head dim 64
    ("attention q@kT", 512, 512, 64, "nt", 64, "scores: 64 heads × (512×64 @ 64×512), k transposed"),
    ("attention p@v", 512, 64, 512, "nn", 64, "context: 64 heads × (512×512 @ 512×64)"),
    ("attention p@v hd128", 1024, 128, 1024, "nn", 32, "Llama-2-7B context: 32 heads × (1024×1024 @ 1024×128)"),
    # ResNet-50 convolutions as implicit GEMMs (batch 32, NHWC): M = N·H·W, N = out channels, K = kh·kw·C
    ("resnet conv2_x 3x3", 100352, 64, 576, "nn", 1, "ResNet-50 stage 2, 3×3 64→64 at 56×56"),
    ("resnet conv2_x 1x1", 100352, 64, 256, "nn", 1, "ResNet-50 stage 2, 1×1 256→64 at 56×56"),
    ("resnet conv3_x 3x3", 25088, 128, 1152, "nn", 1, "ResNet-50 stage 3, 3×3 128→128 at 28×28"),
    ("resnet conv4_x 3x3", 6272, 256, 2304, "nn", 1, "ResNet-50 stage 4, 3×3 256→256 at 14×14"),
    ("resnet conv4_x 1x1", 6272, 1024, 256, "nn", 1, "ResNet-50 stage 4, 1×1 256→1024 at 14×14"),
    ("resnet fc", 32, 1000, 2048, "nt", 1, "ResNet-50 classifier, batch 32"),
    # skinny, fat, primes and the old list (issue 32's table)
    ("skinny N=64", 4096, 64, 4096, "nn", 1, "issue 32: a skinny product"),
    ("lora down r=64", 4096, 64, 4096, "nt", 1, "LoRA rank-64 down-projection of a 4096-wide layer, 4096 tokens"),
    ("moe router", 8192, 64, 2048, "nt", 1, "DeepSeekMoE-16B router: 64 experts, hidden 2048, 8192 tokens"),
    ("skinny M=64", 64, 4096, 4096, "nn", 1, "issue 32: a fat product"),
    ("fat K=64", 4096, 4096, 64, "nn", 1, "issue 32: a rank-64 update"),
    ("ragged 777x5555x333", 777, 5555, 333, "nn", 1, "issue 32: ragged sizes"),
    ("primes 1031x997x1013", 1031, 997, 1013, "nn", 1, "the old list: primes"),
    ("small 128", 128, 128, 128, "nn", 1, "issue 32: a small square"),
    ("small 512", 512, 512, 512, "nn", 1, "issue 32: a small square"),
    ("square 2048", 2048, 2048, 2048, "nn", 1, "the old list"),
    ("square 4096 nn", 4096, 4096, 4096, "nn", 1, "the old list"),
    ("square 4096 nt", 4096, 4096, 4096, "nt", 1, "the old list, B transposed"),
    ("square 4096 tt", 4096, 4096, 4096, "tt", 1, "the old list, both transposed"),
]


def operands(xp, rng, m, n, k, layout, batch):
    """``(a, b, c)``: CuPy views in ``layout`` (``"t"``: the transpose of a C-order array), batch first."""
    lead = (batch,) if batch > 1 else ()

    def mat(rows, cols, t):
        if t == "t":
            x = rng.standard_normal(lead + (cols, rows), dtype=xp.float32)
            return x.swapaxes(-1, -2)
        return rng.standard_normal(lead + (rows, cols), dtype=xp.float32)

    return mat(m, k, layout[0]), mat(k, n, layout[1]), xp.empty(lead + (m, n), xp.float32)


def kernels(rows) -> list:
    """The ``(rung name, config, dtype, params)`` the default call launches for the zoo's rows."""
    import numpy as np

    # deferred: loads Numba (backend choice first)
    from ..kernels.matmul import dispatch, k15_gemv

    out = set()
    for _, m, n, k, layout, batch, _ in rows:
        a_kc, b_kc = layout[0] == "n", layout[1] == "t"
        side = dispatch.gemv_rule(m, n, k, batch, a_kc, b_kc, not b_kc)
        if side == "rows":
            out.add(("k15_rows", k15_gemv.rows_config(k15_gemv.config_for(m)), "float32", (("vec", n % 4 == 0),)))
            continue
        if side:
            out.add(("k15_gemv", k15_gemv.config_for(m if side == "m" else n), "float32", (("vec", True),)))
            continue
        if layout == "nn" and batch == 1:
            rung, cfg = dispatch.plan(None, None, m, n, k, np.float32)
            params = (("idx32", True),) if rung.name == "k12_async_copy" else (("idx32", True), ("vec", True))
            out.add((rung.name, cfg.compiled(), "float32", params))
            continue
        plan = dispatch.layout_plan(None, None, m, n, k, batch, np.float32, layout)
        vec = (layout[0] == "n" or m % 4 == 0) and (layout[1] == "t" or n % 4 == 0)
        out.add(("layouts", plan.config.compiled(), "float32", (("idx32", True), ("layout", layout), ("vec", vec))))
        if plan.rung.name == "k12_async_copy" and batch == 1 and (layout == "tn" or layout == "nt" and dispatch.nt_copies_b(m)):
            out.add(("k12_async_copy", plan.config.compiled(), "float32", (("idx32", True),)))  # k12 on the storage
    return sorted(out, key=repr)


def _compile(job):
    import time

    t0 = time.perf_counter()
    name, cfg, dtype, params = job
    from ..warm import matmul_rung  # deferred: one process per kernel

    matmul_rung(name).kernel(cfg, dtype, **dict(params))
    return f"{name} {cfg} {dict(params)}", time.perf_counter() - t0


def warm(rows, jobs: int = 8) -> None:
    """Every kernel of :func:`kernels` compiled into Numba's disk cache, ``jobs`` processes at once."""
    todo = kernels(rows)
    print(f"zoo: warming {len(todo)} kernels, {jobs} at a time", flush=True)
    # spawn: planning the rows read the GPU's tuned rules, and a process forked after CUDA is up can't use it
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for what, sec in pool.map(_compile, todo):
            print(f"  {sec:6.1f} s  {what}", flush=True)


def run(args) -> int:
    import cupy as cp

    import simt_tiles  # deferred: loads Numba (backend choice first)

    rows = [r for r in ZOO if not args.zoo_only or any(s.replace("_", " ") in r[0] for s in args.zoo_only)]
    warm(rows, int(os.environ.get("ZOO_JOBS", "8")))
    impls = [("cuBLAS", "peer", lambda a, b, c: cp.matmul(a, b, out=c))]
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False

        def torch_mm(a, b, c):
            torch.matmul(torch.as_tensor(a), torch.as_tensor(b), out=torch.as_tensor(c))

        impls.append(("torch.matmul", "peer", torch_mm))
    except ImportError:
        pass
    impls.append(("default", "simt", lambda a, b, c: simt_tiles.matmul(a, b, out=c)))
    l2 = l2_bytes() or 50 * 2**20
    with common.session("matmul zoo", args.reps, flush=True, with_tile=False, budget_s=args.budget_s) as (h, _, _t):
        rng = cp.random.default_rng(2026)
        for name, m, n, k, layout, batch, source in rows:
            per = 4 * batch * (m * k + k * n + m * n)
            nsets = max(1, min(8, math.ceil(3 * l2 / per)))
            sets = [operands(cp, rng, m, n, k, layout, batch) for _ in range(nsets)]
            a0, b0, c0 = sets[0]
            a64, b64 = a0.astype(cp.float64), b0.astype(cp.float64)
            ref = cp.matmul(a64, b64)
            g = (gamma(k, unit_roundoff(cp.float32)) + gamma(k, unit_roundoff(cp.float64))) * (1 + 1e-6)
            bound = cp.matmul(cp.abs(a64), cp.abs(b64)) * g
            del a64, b64
            label = f"{name} {batch}x{m}x{n}x{k} {layout}" if batch > 1 else f"{name} {m}x{n}x{k} {layout}"
            print(f"{label}: {nsets} input sets ({source})", flush=True)
            for impl, kind, fn in impls:
                turn = iter(range(10**9))
                c0.fill(cp.nan)
                h.entry("matmul_zoo", label, impl, lambda fn=fn: fn(*sets[next(turn) % nsets]),
                        check=lambda: check_within(c0, ref, bound, xp=cp), kind=kind, precision="fp32",
                        flops=2 * batch * m * n * k, nbytes=per, x=2 * batch * m * n * k, m=m, n=n, k=k,
                        batch=batch, layout=layout, source=source, dtype="float32")
            sets = a0 = b0 = c0 = ref = bound = None
            cp.get_default_memory_pool().free_all_blocks()
        return common.finish(h, args, group="matmul_zoo", title="matmul shape zoo vs cuBLAS FP32", method=__doc__,
                             ceilings={}, peers={"matmul_zoo": "cuBLAS"})
