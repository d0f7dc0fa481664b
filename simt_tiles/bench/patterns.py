"""Verify, then time the tile-pattern kernels (softmax, reduce, vector_add, bias_relu) on one GPU.

    simt-tiles bench patterns [--only softmax reduce elementwise bias_tiles] [--json P] [--md P]

Peers measured in the same process: a device-to-device copy (the bandwidth
ceiling: bytes read + bytes written), ``torch.softmax``, ``cupy.sum``.
Effective bandwidth counts each input read once and each output written
once.  Every implementation is checked against NumPy/CuPy before it is
timed (CUDA events, warm-up, median; inputs of ≥ 1 GiB, far beyond L2).
Softmax rows are timed as raw kernel launches; the other entries time the
public call (its Python checks cost tens of µs, small next to the ≥ 0.25 ms
of a 2^28-element pass).  Not yet run on the H200 (written in a session
whose device time was spent).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .. import _probe


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", default=["copy", "softmax", "reduce", "elementwise", "bias_tiles"])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    args = p.parse_args(argv)
    if _probe.select_backend():
        print("bench_patterns: no CUDA GPU found; GPU timings only.", file=sys.stderr)
        return 2

    import cupy as cp
    import numpy as np
    from numba import cuda

    import simt_tiles
    from simt_tiles._table import markdown
    from simt_tiles.cli import machine_info
    from simt_tiles.kernels.elementwise.bias_relu import Config as TileCfg
    from simt_tiles.kernels.elementwise.bias_relu import boundary_waste
    from simt_tiles.kernels.softmax import RUNGS as SOFTMAX_RUNGS
    from simt_tiles.kernels.softmax import SOFTMAX_VARIANTS
    from simt_tiles.timing import summarize, time_cuda

    rng = cp.random.default_rng(7)
    rows = []

    def bench(group, name, fn, nbytes, check, extra=None):
        ok = bool(check())
        row = {"group": group, "impl": name, "bytes": nbytes, "passed": ok, **(extra or {})}
        if ok:
            st = summarize(time_cuda(fn, warmup=3, reps=args.reps))
            row.update(st, gbps=nbytes / (st["median_ms"] * 1e-3) / 1e9)
        rows.append(row)
        print(f"  {group:<22} {name:<28} {'ok ' if ok else 'BAD'} "
              + (f"{row['median_ms']:.3f} ms {row['gbps']:.0f} GB/s" if ok else ""), flush=True)

    n_copy = 2**28
    src, dst = rng.standard_normal(n_copy, dtype=cp.float32), cp.empty(n_copy, cp.float32)
    bench("copy", "cupy copy 2^28 f32", lambda: dst.__setitem__(slice(None), src), 8 * n_copy,
          lambda: True)
    copy_gbps = rows[-1]["gbps"]
    src = dst = None  # free the copy buffers

    if "softmax" in args.only:
        import torch

        for cols in (256, 1024, 4096, 16384, 32768):
            x = rng.standard_normal((16384, cols), dtype=cp.float32)
            out = cp.empty_like(x)
            ref = cp.asnumpy(cp.exp(x - x.max(axis=1, keepdims=True)))
            ref /= ref.sum(axis=1, keepdims=True)
            nbytes = 2 * x.nbytes
            dx, dout = cuda.as_cuda_array(x), cuda.as_cuda_array(out)
            for v in SOFTMAX_VARIANTS:
                # time the kernel launch itself, not the Python checks of simt_tiles.softmax
                rung = SOFTMAX_RUNGS[v]
                cfg = rung.resolve_config(None)
                kern, (grid, block) = rung.kernel(cfg, np.float32), rung.geometry(cfg, 16384, cols)
                bench(f"softmax 16384x{cols}", v, lambda k=kern, g=grid, bl=block: k[g, bl](dx, dout), nbytes,
                      lambda v=v: (simt_tiles.softmax(x, out=out, variant=v) is not None)
                      and np.allclose(cp.asnumpy(out), ref, rtol=1e-5, atol=1e-7), {"cols": cols})
            tx = torch.as_tensor(x, device="cuda")
            bench(f"softmax 16384x{cols}", "torch.softmax", lambda: torch.softmax(tx, dim=1), nbytes,
                  lambda: np.allclose(torch.softmax(tx, dim=1).cpu().numpy(), ref, rtol=1e-5, atol=1e-7),
                  {"cols": cols})
            del x, out, tx

    if "reduce" in args.only:
        x = rng.standard_normal(2**28, dtype=cp.float32)
        ref = float(cp.sum(x.astype(cp.float64)))
        bench("sum 2^28", "simt_tiles.reduce", lambda: simt_tiles.reduce(x), x.nbytes,
              lambda: abs(float(simt_tiles.reduce(x)) - ref) <= 1e-6 * float(cp.abs(x).sum()))
        bench("sum 2^28", "cupy.sum", lambda: cp.sum(x), x.nbytes, lambda: True)
        x2 = x.reshape(16384, 16384)
        out = cp.empty(16384, cp.float32)
        ref2 = cp.asnumpy(x2.astype(cp.float64).sum(axis=1))
        bench("sum 16384x16384 axis=-1", "simt_tiles.reduce", lambda: simt_tiles.reduce(x2, axis=-1, out=out),
              x.nbytes, lambda: np.allclose(cp.asnumpy(simt_tiles.reduce(x2, axis=-1)), ref2, rtol=1e-5, atol=1e-3))
        bench("sum 16384x16384 axis=-1", "cupy.sum", lambda: cp.sum(x2, axis=1), x.nbytes, lambda: True)
        del x, x2

    if "elementwise" in args.only:
        a, b = rng.standard_normal(2**28, dtype=cp.float32), rng.standard_normal(2**28, dtype=cp.float32)
        c = cp.empty_like(a)
        for v in simt_tiles.VECTOR_ADD_VARIANTS:
            bench("vector_add 2^28", v, lambda v=v: simt_tiles.vector_add(a, b, out=c, variant=v), 3 * a.nbytes,
                  lambda v=v: simt_tiles.vector_add(a, b, out=c, variant=v) is not None and bool((c == a + b).all()))
        x = a.reshape(16384, 16384)
        bias = b[:16384].copy()
        y = cp.empty_like(x)
        bench("bias_relu 16384x16384", "default tiles", lambda: simt_tiles.bias_relu(x, bias, out=y), 2 * x.nbytes,
              lambda: simt_tiles.bias_relu(x, bias, out=y) is not None
              and bool((y == cp.maximum(x + bias, 0)).all()))
        del a, b, c

    if "bias_tiles" in args.only:
        m, n = 16383, 16381  # ragged: every tile shape has edge tiles
        x = rng.standard_normal((m, n), dtype=cp.float32)
        bias = rng.standard_normal(n, dtype=cp.float32)
        y = cp.empty_like(x)
        for tn, tm in ((32, 1), (32, 4), (32, 8), (32, 32), (64, 4), (128, 2), (16, 16), (8, 32)):
            cfg = TileCfg(tile_n=tn, tile_m=tm)
            t0 = time.perf_counter()
            simt_tiles.bias_relu(x, bias, out=y, config=cfg)
            cuda.synchronize()
            compile_s = time.perf_counter() - t0
            bench("bias_relu tile shapes", f"{tn}x{tm}", lambda cfg=cfg: simt_tiles.bias_relu(x, bias, out=y, config=cfg),
                  2 * x.nbytes, lambda: bool((y == cp.maximum(x + bias, 0)).all()),
                  {"compile_s": compile_s, "boundary_waste": boundary_waste(cfg, m, n)})

    for r in rows:
        if "gbps" in r:
            r["pct_copy"] = 100 * r["gbps"] / copy_gbps
    head = ["group", "impl", "check", "median ms", "GB/s", "% of copy", "extra"]
    body = [[r["group"], r["impl"], "pass" if r["passed"] else "FAIL", f"{r.get('median_ms', float('nan')):.3f}",
             f"{r.get('gbps', 0):.0f}", f"{r.get('pct_copy', 0):.1f}",
             ", ".join(f"{k}={r[k]:.3g}" for k in ("compile_s", "boundary_waste") if k in r)] for r in rows]
    table = markdown(head, body)
    print(table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_info(), "method": __doc__, "results": rows}, fh, indent=2)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(table + "\n")
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
