"""The SIMT float32 FMA ceiling of this GPU, measured: what a 2-D filter with k×k taps can reach at best.

    python3 benchmarks/lab/fma_peak.py [--json FILE]     (on the GPU)
    NUMBA_ENABLE_CUDASIM=0 python3 benchmarks/lab/fma_peak.py --sass-mix    (no GPU: what the kernel issues)

A dense filter costs k² FMAs per output and moves 8 bytes per output (float32 in and out), so at
7×7 its arithmetic (12.25 FLOP/byte) sits close to the H200's FP32 ridge (≈ 67 TFLOP/s nominal /
4.3 TB/s ≈ 15.7 FLOP/byte).  This script times a kernel that is nothing but independent FFMA chains
(8 per thread, every SM full) and prints, for each k, the time the FMAs alone need at that rate
against the time the copy ceiling allows, i.e. the share of the FP32 pipe a filter must sustain —
loads, index arithmetic, barriers and stores included — to reach a given fraction of the copy
bandwidth.  Timing: CUDA events after ≈ 1 s of warm-up (the clock ramps up), median of 50.

Measured (H200, benchmarks/results/fma_peak_h200.*): 55.9 TFLOP/s — 83% of the nominal
66.9 (132 SMs × 128 lanes × 2 × 1.98 GHz; nvidia-smi read 1980 MHz during the run); cuBLAS SGEMM
(49–50 TFLOP/s, shared/README.md) runs at 89% of it.  At 8192², 7×7: the FMAs alone take 117.6 µs,
the copy ceiling allows 129.3 µs, so 85% of the copy (152 µs) needs FFMAs issuing at this rate for
77% of the kernel's time, everything else in the remaining 23%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sass_mix

from numba import cuda, float32, int32  # noqa: E402

CHAINS = 8  # independent accumulators per thread: enough to hide the FFMA latency with many warps
UNROLL = 16  # chain steps per trip of the runtime loop, unrolled: 128 FFMAs per loop branch
THREADS = 256


def make_fma_chains(DT):
    """Eight independent FMA chains per thread in ``DT`` (float32: FFMA; the large-filter probe takes the
    float64 twin), trips × 16 × 8 FMAs, the runtime loop's counter a 32-bit integer.  (The first version
    looped over a Python ``range`` of int64 — SASS: ~4 integer instructions per 8 FFMAs — and measured
    30 TFLOP/s, with or without the 1 s warm-up; this one's loop is 128 FFMAs and 3 other instructions.)
    The sum is stored so nothing is dead code."""

    def fma_chains(out, trips, a, b):
        t = cuda.grid(1)
        x0 = DT(t)
        x1 = x0 + DT(1)
        x2 = x0 + DT(2)
        x3 = x0 + DT(3)
        x4 = x0 + DT(4)
        x5 = x0 + DT(5)
        x6 = x0 + DT(6)
        x7 = x0 + DT(7)
        i = int32(0)
        while i < trips:
            for _ in range(UNROLL):
                x0 = cuda.fma(x0, a, b)
                x1 = cuda.fma(x1, a, b)
                x2 = cuda.fma(x2, a, b)
                x3 = cuda.fma(x3, a, b)
                x4 = cuda.fma(x4, a, b)
                x5 = cuda.fma(x5, a, b)
                x6 = cuda.fma(x6, a, b)
                x7 = cuda.fma(x7, a, b)
            i += int32(1)
        out[t] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7

    return fma_chains


ffma_chains = cuda.jit(make_fma_chains(float32))

SIGNATURE = "void(float32[::1], int32, float32, float32)"


def static_mix() -> dict[str, int]:
    """The kernel's SASS opcode histogram for sm_90, without a GPU (pip ptxas and nvdisasm): the
    check that what is timed is FFMAs — the unrolled loop must hold CHAINS × UNROLL of them."""
    import collections
    import subprocess
    import tempfile
    from pathlib import Path

    from sass_mix import find_nvdisasm, opcode

    from simt_tiles import compile_gate

    ptx, _ = cuda.compile_ptx(ffma_chains.py_func, SIGNATURE, cc=(9, 0))
    ptxas = compile_gate.find_ptxas()
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp) / "f.ptx", Path(tmp) / "f.cubin"
        src.write_text(ptx)
        subprocess.run([ptxas, f"-arch={compile_gate.ARCH}", str(src), "-o", str(cubin)], check=True)
        sass = subprocess.run([find_nvdisasm(ptxas), "-c", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    return dict(collections.Counter(op for op in map(opcode, sass.splitlines()) if op))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sass-mix", action="store_true",
                   help="print the kernel's static SASS histogram (no GPU needed: NUMBA_ENABLE_CUDASIM=0)")
    p.add_argument("--trips", type=int, default=256)
    p.add_argument("--blocks-per-sm", type=int, default=8)
    p.add_argument("--size", type=int, default=8192, help="image side for the filter floors")
    p.add_argument("--copy-tbps", type=float, default=None,
                   help="copy bandwidth to compare with (default: measured here, 2^28 float32)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.sass_mix:
        print(json.dumps(static_mix()))
        return 0

    import cupy as cp

    from simt_tiles.timing import time_cuda

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    blocks = sms * args.blocks_per_sm
    out = cuda.device_array(blocks * THREADS, dtype="float32")
    a, b = float32(0.999), float32(1e-3)

    def run():
        ffma_chains[blocks, THREADS](out, int32(args.trips), a, b)

    fmas = blocks * THREADS * args.trips * UNROLL * CHAINS
    # the clock ramps up from idle: run ≈ 1 s before timing
    run()
    cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        for _ in range(50):
            run()
        cuda.synchronize()
    ms = statistics.median(time_cuda(run, warmup=3, reps=50))
    for _ in range(500):  # ≈ 0.3 s of FFMA while nvidia-smi reads the SM clock
        run()
    smi = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    cuda.synchronize()
    tflops = 2 * fmas / (ms * 1e-3) / 1e12
    clock_ghz = tflops * 1e12 / (2 * sms * 128) / 1e9  # at one FFMA per lane per clock, 128 lanes per SM

    if args.copy_tbps is None:
        n = 2**28
        src, dst = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
        copy_ms = statistics.median(time_cuda(lambda: cp.copyto(dst, src), warmup=3, reps=20))
        copy_tbps = 2 * src.nbytes / (copy_ms * 1e-3) / 1e12
    else:
        copy_tbps = args.copy_tbps

    print(f"FFMA: {fmas / 1e9:.2f} G FMAs in {ms:.3f} ms = {tflops:.1f} TFLOP/s "
          f"(= 128 FFMA/clock/SM × {sms} SMs at {clock_ghz:.2f} GHz; nvidia-smi during the run: {smi}); "
          f"copy {copy_tbps:.2f} TB/s")
    s = args.size
    rows = []
    print(f"{'filter':>7} {'FMA floor µs':>13} {'copy µs':>8} {'FP32 share needed at 85% of copy':>34}")
    for k in (3, 5, 7, 9):
        fma_us = s * s * k * k * 2 / (tflops * 1e12) * 1e6
        copy_us = 2 * s * s * 4 / (copy_tbps * 1e12) * 1e6
        need = fma_us / (copy_us / 0.85)  # FP32 pipe busy fraction to run at 85% of the copy rate
        rows.append({"k": k, "fma_floor_us": fma_us, "copy_us": copy_us, "fp32_share_at_85pct": need})
        print(f"{k}x{k:<5} {fma_us:13.1f} {copy_us:8.1f} {100 * need:33.0f}%")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"ffma_tflops": tflops, "clock_ghz_equiv": clock_ghz, "nvidia_smi_clock_power": smi, "sms": sms, "ms": ms,
                       "copy_tbps": copy_tbps, "size": s, "filters": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
