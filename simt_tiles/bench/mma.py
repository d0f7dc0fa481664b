"""GPU benchmark of the mma.sync rungs (k13 TF32, k14 BF16/FP16) beside cuBLAS (torch), Triton
``tl.dot`` and cuTile: verify, then time, in one process.

    python -m simt_tiles.bench.mma --out results/ [--presets "tf32:default;bf16:large,bk=64"] [--sizes 4096x4096x4096]
    python -m simt_tiles.bench.mma --presets "bf16:default;bf16:large" --sizes 32x512x512x64,32x512x64x512 --peers cublas

* **compile** every kernel first, in parallel processes (Numba's disk cache; the generated
  kernels take a minute each to build);
* **verify** each kernel at ragged and large shapes against a float64 reference on the GPU,
  NaN-poisoned output, error over :func:`simt_tiles.bounds.mma_error_factor`·|A|·|B|;
* **time** with :func:`simt_tiles.timing.time_cuda` (CUDA events around one call after a flush that
  writes then reads 10× the L2, 3 warm-ups, the median of ``--reps``), configs that passed every check
  only: the kernel alone (launched on prepared arrays: ragged shapes on operands padded outside its time,
  so those rows carry no ratio) and ``matmul_mma`` per call (its ratios to the peers are what a caller
  gets); peers on the same inputs, cuBLAS without reduced-precision 16-bit reductions.  Writes
  ``mma.json`` and ``mma.md``.
* **batches**: a size ``BxMxNxK`` is B products (attention's heads: 32x512x512x64 is
  32 × (512×64 @ 64×512)): each preset's batched call (one launch, grid z; checked first against a
  float64 reference, NaN-poisoned), the same total work as one product of (B·M)×N×K, and
  ``torch.matmul`` on the batch (cuBLAS's batched GEMM).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

DEFAULT_SIZES = ("4096x4096x4096", "8192x8192x8192", "4096x8192x1024", "1031x997x1013")
DEFAULT_PRESETS = ("tf32:default", "tf32:large", "bf16:default", "bf16:large")


def _rung_cfg(spec: str):
    """``"tf32:large"``, or a preset with fields replaced: ``"tf32:large,rounding=3"``, ``"bf16:large,bk=64"``."""
    from simt_tiles.kernels.matmul.mma import MMA_RUNGS, RUNG_FOR  # deferred: loads Numba (backend choice first)

    prec, preset = spec.split(":")
    preset, *fields = preset.split(",")
    rung = MMA_RUNGS[RUNG_FOR[prec]]
    cfg = rung.resolve_config(preset)
    if fields:
        cfg = dataclasses.replace(cfg, **{f.split("=")[0]: int(f.split("=")[1]) for f in fields})
    return prec, rung, cfg


def _compile(spec: str) -> tuple[str, float, str]:
    import numpy as np

    t0 = time.perf_counter()
    try:
        prec, rung, cfg = _rung_cfg(spec)
        rung.kernel(cfg, np.float32, **({} if prec == "tf32" else {"precision": prec}))
        return spec, time.perf_counter() - t0, ""
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return spec, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"[:400]


def _triton_matmul():
    import triton
    import triton.language as tl

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_warps=w, num_stages=s)
               for bm, bn, bk, w, s in ((128, 128, 32, 4, 4), (128, 256, 32, 8, 3), (128, 128, 64, 4, 3),
                                        (256, 128, 64, 8, 3), (128, 256, 64, 8, 3))]

    @triton.autotune(configs=configs, key=["M", "N", "K", "TF32"])
    @triton.jit
    def kernel(a, b, c, M, N, K, TF32: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               G: tl.constexpr):
        pid = tl.program_id(0)
        gm, gn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        width = G * gn
        first = (pid // width) * G
        gsz = min(gm - first, G)
        pm = first + (pid % width) % gsz
        pn = (pid % width) // gsz
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, tl.cdiv(K, BK)):
            kk = k0 * BK + rk
            x = tl.load(a + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            y = tl.load(b + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            if TF32:
                acc = tl.dot(x, y, acc, input_precision="tf32")
            else:
                acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(x, y, out):
        M, K = x.shape
        N = y.shape[1]
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
        kernel[grid](x, y, out, M, N, K, TF32=x.dtype.itemsize == 4)
        return out

    return run


def _time_batched(size, specs, compiled, peers, bench, rows, checks, dev, tdt) -> None:
    """One ``BxMxNxK`` size: per preset, the batched call checked (NaN-poisoned, against float64 under the
    mma bound), then timed beside one (B·M)×N×K product (the same work unbatched) and cuBLAS's batch."""
    import torch

    # deferred: loads Numba (backend choice first)
    from simt_tiles.bounds import mma_error_factor
    from simt_tiles.kernels.matmul.mma import matmul_mma

    nb, m, n, k = size
    flop = 2.0 * nb * m * n * k
    for prec in sorted({_rung_cfg(s)[0] for s in specs}):
        a = torch.randn(nb, m, k, device=dev).to(tdt[prec])
        b = torch.randn(nb, k, n, device=dev).to(tdt[prec])
        c = torch.full((nb, m, n), float("nan"), device=dev, dtype=tdt[prec])
        a2, c2 = a.reshape(nb * m, k), torch.empty(nb * m, n, device=dev, dtype=tdt[prec])

        def record(impl, ms, extra=None):
            row = {"impl": impl, "operands": prec, "shape": [nb, m, n, k], "median_ms": ms,
                   "problem": f"{nb}x({m}x{n}x{k})", "tflops": flop / ms / 1e9, **(extra or {})}
            rows.append(row)
            print(f"{row['problem']} {prec} {impl:32s} {ms:8.4f} ms {row['tflops']:7.1f} TFLOP/s", flush=True)

        for spec in specs:
            p2, rung, cfg = _rung_cfg(spec)
            if p2 != prec or compiled[spec][1]:
                continue
            c.fill_(float("nan"))
            matmul_mma(a, b, precision=prec, out=c, config=cfg)
            torch.cuda.synchronize()
            ref, absprod = a.double() @ b.double(), a.double().abs() @ b.double().abs()
            f = mma_error_factor(k, prec, rounds_inputs=prec == "tf32", rounds_output=prec != "tf32",
                                 truncates=getattr(cfg, "rounding", 1) == 2) + 2 * k * 2.0**-53
            ratio = float(((c.double() - ref).abs() / (f * absprod).clamp_min(1e-300)).max())
            ok = bool(torch.isfinite(c).all()) and ratio <= 1.0
            checks.append({"kernel": spec, "shape": list(size), "err_over_bound": ratio, "ok": ok})
            print(f"verify {spec:16s} {nb}x({m}x{n}x{k}): err/bound {ratio:.3g} {'ok' if ok else 'FAIL'}", flush=True)
            if not ok:
                continue
            name = f"{rung.name}:{spec.split(':')[1]}"
            record(f"{name} batched (call)", bench(lambda: matmul_mma(a, b, precision=prec, out=c, config=cfg)),
                   {"config": dataclasses.asdict(cfg), "kind": "batched call"})
            record(f"{name} (B·M)xNxK (call)", bench(lambda: matmul_mma(a2, b[0], precision=prec, out=c2, config=cfg)),
                   {"config": dataclasses.asdict(cfg), "kind": "same work unbatched"})
        if "cublas" in peers:
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            record(f"cuBLAS {prec.upper()}", bench(lambda: torch.matmul(a, b, out=c)))
            torch.backends.cuda.matmul.allow_tf32 = False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m simt_tiles.bench.mma")
    p.add_argument("--out", default="results")
    p.add_argument("--presets", default=";".join(DEFAULT_PRESETS),
                   help="';'-separated specs, e.g. 'tf32:large;tf32:large,rounding=3'")
    p.add_argument("--sizes", default=",".join(DEFAULT_SIZES))
    p.add_argument("--peers", default="cublas,triton,cutile")
    p.add_argument("--reps", type=int, default=20, help="timed calls a row (the median is reported)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    specs = [s for s in args.presets.split(";") if s]
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",") if s]
    batched = [s for s in sizes if len(s) == 4]
    sizes = [s for s in sizes if len(s) == 3]
    peers = set(args.peers.split(","))

    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(specs), os.cpu_count() or 4)) as pool:
        compiled = {s: (t, e) for s, t, e in pool.map(_compile, specs)}
    print(f"compiled {len(specs)} kernels in {time.perf_counter() - t0:.0f} s:",
          {s: round(t) for s, (t, e) in compiled.items()}, flush=True)

    import numpy as np
    import torch
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from simt_tiles.bench.common import flush_bytes
    from simt_tiles.bounds import mma_error_factor
    from simt_tiles.kernels.matmul.mma import matmul_mma
    from simt_tiles.machine import l2_bytes
    from simt_tiles.runtime import allow_dynamic_smem
    from simt_tiles.timing import time_cuda

    torch.manual_seed(0)
    dev = torch.device("cuda")
    tdt = {"tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    # cuBLAS as ours: FP32 accumulation, no reduced-precision 16-bit reductions (torch allows them by default)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rows, checks = [], []

    # the house's timing (benchmarks/notes/method.md): CUDA events around one call after a flush that writes then
    # reads 10x the L2 (triton's do_bench only writes: the dirty lines' write-backs were billed to the next call)
    flush = torch.empty(flush_bytes(l2_bytes()) // 4, device=dev)

    def bench(fn):
        return float(np.median(time_cuda(fn, warmup=3, reps=args.reps, before=lambda: flush.fill_(1.0).sum())))

    def kernel_launcher(prec, rung, cfg, a, b, c):
        params = {} if prec == "tf32" else {"precision": prec}
        k = rung.kernel(cfg, np.float32, **params)
        sh = rung.dynamic_smem(cfg, np.float32)
        allow_dynamic_smem(k, sh)
        grid, block = rung.geometry(cfg, a.shape[0], b.shape[1], a.shape[1])
        view = (lambda t: cuda.as_cuda_array(t)) if prec == "tf32" else \
            (lambda t: cuda.as_cuda_array(t.view(torch.int16)).view(np.uint16))
        ad, bd, cd = view(a), view(b), view(c)
        stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        return lambda: k[grid, block, stream, sh](ad, bd, cd)

    # --- verify ---
    verify_sizes = [(1031, 997, 1013), (129, 130, 33), (1, 1, 1), (4096, 4096, 4096)]
    for spec in specs:
        if compiled[spec][1]:
            checks.append({"kernel": spec, "error": compiled[spec][1]})
            continue
        prec, rung, cfg = _rung_cfg(spec)
        for (m, n, k) in verify_sizes:
            a = torch.randn(m, k, device=dev).to(tdt[prec])
            b = torch.randn(k, n, device=dev).to(tdt[prec])
            c = torch.full((m, n), float("nan"), device=dev, dtype=tdt[prec])
            matmul_mma(a, b, precision=prec, out=c, config=cfg)
            torch.cuda.synchronize()
            ref = a.double() @ b.double()
            absprod = a.double().abs() @ b.double().abs()
            f = mma_error_factor(k, prec, rounds_inputs=prec == "tf32", rounds_output=prec != "tf32",
                                 truncates=getattr(cfg, "rounding", 1) == 2) + 2 * k * 2.0**-53
            err = (c.double() - ref).abs()
            ratio = float((err / (f * absprod).clamp_min(1e-300)).max())
            rel = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
            ok = bool(torch.isfinite(c).all()) and ratio <= 1.0
            checks.append({"kernel": spec, "shape": [m, n, k], "err_over_bound": ratio, "rel_fro": rel, "ok": ok})
            print(f"verify {spec:16s} {m}x{n}x{k}: err/bound {ratio:.3g} rel {rel:.2e} {'ok' if ok else 'FAIL'}",
                  flush=True)

    # --- time --- (a config that failed a check is not timed: its rows would publish a wrong kernel's speed)
    failed = {c["kernel"] for c in checks if not c.get("ok", False)}
    tri = _triton_matmul() if "triton" in peers else None
    try:
        from simt_tiles import tile as cutile  # deferred: cuda.tile is optional
        cutile_ok = "cutile" in peers
    except Exception as exc:  # noqa: BLE001
        print("cuTile unavailable:", type(exc).__name__, exc)
        cutile_ok = False
    for (m, n, k) in sizes:
        flop = 2.0 * m * n * k
        for prec in sorted({_rung_cfg(s)[0] for s in specs}):
            a = torch.randn(m, k, device=dev).to(tdt[prec])
            b = torch.randn(k, n, device=dev).to(tdt[prec])
            c = torch.empty(m, n, device=dev, dtype=tdt[prec])

            def record(impl, ms, extra=None):
                row = {"impl": impl, "operands": prec, "shape": [m, n, k], "median_ms": ms,
                       "problem": f"{m}³" if m == n == k else f"{m}x{n}x{k}", "tflops": flop / ms / 1e9,
                       **(extra or {})}
                rows.append(row)
                print(f"{m}x{n}x{k} {prec} {impl:24s} {ms:8.4f} ms {row['tflops']:7.1f} TFLOP/s", flush=True)

            for spec in specs:
                p2, rung, cfg = _rung_cfg(spec)
                if p2 != prec or compiled[spec][1] or spec in failed:
                    continue
                vec = 16 // a.element_size()
                ap = torch.nn.functional.pad(a, (0, -k % vec)).contiguous()  # what the launcher copies to
                bp = torch.nn.functional.pad(b, (0, -n % vec)).contiguous()
                record(f"{rung.name}:{spec.split(':')[1]}", bench(kernel_launcher(prec, rung, cfg, ap, bp, c)),
                       {"padded": bool(k % vec or n % vec), "config": dataclasses.asdict(cfg), "kind": "kernel"})
                call = lambda: matmul_mma(a, b, precision=prec, out=c, config=cfg)  # noqa: E731
                call()
                torch.cuda.synchronize()
                t_wall = time.perf_counter()
                for _ in range(20):
                    call()
                torch.cuda.synchronize()
                wall = (time.perf_counter() - t_wall) / 20 * 1e3
                record(f"{rung.name}:{spec.split(':')[1]} (call)", bench(call),
                       {"wall_ms_per_call": wall, "config": dataclasses.asdict(cfg), "kind": "call"})
                print(f"   wall per call (20 back to back): {wall:.4f} ms", flush=True)
            if "cublas" in peers:  # FP32 accumulation as ours: no TF32 beyond tf32's, no 16-bit reductions
                torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
                record(f"cuBLAS {prec.upper()}", bench(lambda: torch.matmul(a, b, out=c)))
                torch.backends.cuda.matmul.allow_tf32 = False
            if tri is not None and prec in ("tf32", "bf16"):
                try:
                    record(f"Triton {prec.upper()}", bench(lambda: tri(a, b, c)))
                except Exception as exc:  # noqa: BLE001
                    print("triton failed:", exc)
            if cutile_ok and prec == "tf32":
                try:
                    record("cuTile TF32", bench(lambda: cutile.matmul(a, b, precision="tf32", out=c)))
                except Exception as exc:  # noqa: BLE001
                    print("cuTile failed:", type(exc).__name__, str(exc)[:200])
                    cutile_ok = False
    for size in batched:
        _time_batched(size, specs, compiled, peers, bench, rows, checks, dev, tdt)
    for r in rows:  # same-run ratios to the peers of the same operands and shape
        for peer in ("cuBLAS", "Triton", "cuTile"):
            p_ms = [q["median_ms"] for q in rows if q["impl"] == f"{peer} {r['operands'].upper()}"
                    and q["shape"] == r["shape"]]
            # (a kernel row on operands padded outside its time is not what a caller gets: no ratio; its call is)
            if p_ms and r["impl"].startswith("k1") and not r.get("padded", False):
                r[f"vs_{peer.lower()}"] = p_ms[0] / r["median_ms"]
        if "vs_cublas" in r:
            r["peer"], r["vs_peer"] = f"cuBLAS {r['operands'].upper()}", r["vs_cublas"]
    result = {"device": torch.cuda.get_device_name(), "compile_s": {s: t for s, (t, e) in compiled.items()},
              "checks": checks, "results": rows}
    with open(os.path.join(args.out, "mma.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.join(args.out, "mma.md"), "w") as fh:
        fh.write("| shape | operands | implementation | ms | TFLOP/s | × cuBLAS | × Triton | × cuTile |\n"
                 "|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            ratios = " | ".join(f"{r[key]:.2f}" if key in r else "" for key in ("vs_cublas", "vs_triton", "vs_cutile"))
            fh.write(f"| {r['problem']} | {r['operands']} | {r['impl']} | {r['median_ms']:.4f} | "
                     f"{r['tflops']:.1f} | {ratios} |\n")
    print(open(os.path.join(args.out, "mma.md")).read())
    return 0 if all(c.get("ok", False) for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
