"""k15's tile for decode-step GEMVs: rows per warp (``nw``), warps per block and steps in flight (``unroll``)
at 1, 4 and 16 rows of x against Llama-2-7B's weights, beside the shipped preset and cuBLAS.

The decode rows of the matmul zoo run k15 at 53-56% of the H100's copy bandwidth (1×4096×4096 `nt`:
35.8 µs for 64 MiB of W); issue 32 asks for 85%.  A warp walks its rows' K in steps of 128 elements,
``unroll`` steps of loads in flight, so one row takes K / (128·unroll) dependent DRAM round trips; the
preset for one row (4 rows a warp, 4 warps a block) puts 1024 warps on the GPU for N = 4096: about
8 a SM.  Expected: fewer rows a warp and more warps a block (more rows in flight at once) move toward
bandwidth; ``unroll`` 2 ahead of 1.

Session 33: ``unroll`` 4 and 8 (four or eight steps of loads in flight: K / (128·unroll) round trips a
warp), a read of W alone (``torch.sum``: the reads' ceiling), and the clean flush (``_matmul_probe.flusher``).

Each launch timed after an L2 flush, CUDA events around one launch (its host cost hidden behind the flush),
median of 30; every output checked against a float64 product with the γ_K bound first.

    python3 benchmarks/lab/gemv_config_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (N, K, where from): W is N × K (``x @ W.T``)
LAYERS = ((4096, 4096, "Llama-2-7B attention projection"), (11008, 4096, "Llama-2-7B MLP up/gate"),
          (4096, 11008, "Llama-2-7B MLP down"))
ROWS = (1, 4, 16)


def configs(m: int) -> list:
    from simt_tiles.kernels.matmul import k15_gemv

    base = k15_gemv.config_for(m)
    out = [base]
    # MT below the rows: x's rows in groups (grid rows), W read once a group, the later groups from L2
    for mt, nw, warps, unroll in itertools.product(MTS or (base.mt,), (1, 2, 4), (4, 8), (1, 2, 4, 8)):
        cfg = dataclasses.replace(base, mt=mt, nw=nw, warps=warps, unroll=unroll)
        # partial sums a lane, and a step's loads in flight: registers
        if cfg != base and mt <= base.mt and cfg.mt * cfg.nw <= 32 and (cfg.mt + cfg.nw) * 4 * unroll <= 144:
            out.append(cfg)
    return out


#: ``--mt``: the row groups tried (default: the preset's own)
MTS: tuple = ()


def x_group_configs(m: int) -> list:
    """``--xg``: x's rows ``xg`` at a time beside their FMAs, so more W rows a warp fit the registers (8-16 rows:
    16 loads of x for 2 of W a step keep the L1, not DRAM, busy)."""
    from simt_tiles.kernels.matmul import k15_gemv

    base = k15_gemv.config_for(m)
    out = [base]
    for nw, xg, unroll, warps in itertools.product((2, 4, 8), (1, 2, 4), (1, 2), (4, 8)):
        if base.mt * nw <= 64 and (nw + xg) * 4 * unroll <= 64:  # accumulators, loads in flight
            out.append(dataclasses.replace(base, nw=nw, xg=xg, unroll=unroll, warps=warps))
    return out


def lane_group_configs(m: int) -> list:
    """``--g``: g lanes a row of W (32 / g rows a warp at once): a lane's x values serve its group's rows,
    so x's L1 reads fall by 32 / g for the same W bytes (16 rows: 16 x loads for 2 W rows a step today)."""
    from simt_tiles.kernels.matmul import k15_gemv

    base = k15_gemv.config_for(m)
    out = [base]
    for g, nw, unroll, xg in itertools.product((4, 8, 16), (1, 2, 4), (1, 2, 4), (2, 16)):
        cfg = dataclasses.replace(base, g=g, nw=nw, unroll=unroll, xg=xg)
        if base.mt * nw <= 64 and (nw + min(xg, base.mt)) * 4 * unroll <= 96:
            out.append(cfg)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rows", type=int, nargs="+", default=list(ROWS))
    ap.add_argument("--mt", type=int, nargs="+", default=[], help="row groups to try beside the preset's")
    ap.add_argument("--xg", action="store_true", help="x's rows loaded in groups beside their FMAs (x_group_configs)")
    ap.add_argument("--g", action="store_true", help="fewer lanes a row of W (lane_group_configs)")
    args = ap.parse_args()
    global MTS, configs
    MTS = tuple(args.mt)
    if args.xg:
        configs = x_group_configs
    if args.g:
        configs = lane_group_configs
    import torch
    from _matmul_probe import finish, flusher, reference, warm, within
    from numba import cuda
    from small_reduce_probe import timed

    from simt_tiles.kernels.matmul import k15_gemv

    warm({("k15_gemv", c, "float32", (("vec", True),)) for m in args.rows for c in configs(m)})
    flush = flusher()
    rows = []
    for n, k, where in LAYERS:
        w = torch.randn(n, k, device="cuda")
        for m in args.rows:
            x = torch.randn(m, k, device="cuda")
            out = torch.empty(m, n, device="cuda")
            ref, bound = reference(x, w.T)
            fx, fw, fc = (cuda.as_cuda_array(t.reshape(-1)) for t in (x, w, out))
            cases = [(f"{c}", lambda c=c: k15_gemv.launch(c, fx, fw, fc, m, n, k, k, k, n, 1, 0)) for c in configs(m)]
            cases.append(("cuBLAS", lambda: torch.matmul(x, w.T, out=out)))
            cases.append(("read W (torch.sum)", lambda: torch.sum(w)))
            mib = (n * k + m * k + m * n) * 4 / 2**20
            for i, (name, fn) in enumerate(cases):
                out.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                ok = within(out, ref, bound) if not name.startswith("read") else True
                ms = timed(fn, flush, reps=30)
                gbs = mib * 2**20 / (ms * 1e-3) / 1e9
                print(f"{m}x{n}x{k} {'preset' if i == 0 else '':6} {ms * 1e3:8.2f} us {gbs:7.0f} GB/s "
                      f"{'ok' if ok else 'WRONG'}  {name}", flush=True)
                rows.append({"m": m, "n": n, "k": k, "where": where, "impl": name, "preset": i == 0, "us": ms * 1e3,
                             "gbs": gbs, "ok": ok})
            del x, out, ref, bound, fx, fc
        del w, fw
        torch.cuda.empty_cache()
    return finish(args.json, __file__, rows)


if __name__ == "__main__":
    sys.exit(main())
