"""One checked launch per (fast-rung preset, shape) through ``simt_tiles.matmul``: the workload
for Nsight Compute and compute-sanitizer on the generated rungs (k11/k12, any preset, split-K).

    compute-sanitizer --tool racecheck python3 benchmarks/lab/run_fast_once.py --shapes 131x97x67 260x132x100
    ncu --kernel-name regex:matmul_k11 --metrics ... python3 benchmarks/lab/run_fast_once.py --shapes 4096 --cases default

A case is ``variant:preset[:splits[:pad]]`` (``default`` alone: ``variant=None, config=None``, the
table's choice; ``pad`` 3: A and B copied into padded, aligned buffers first, 2: the masked path).
Every output starts NaN and is checked against a float64 product with the γ_K bound; exits
non-zero on any failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import _once  # noqa: E402  (the checkout on sys.path)

CASES = ["k11_generated_split_k:64x64", "k11_generated_split_k:64x128", "k11_generated_split_k:128x64",
         "k11_generated_split_k:64x64:2", "k11_generated_split_k:default:2", "k11_generated_split_k:64x64:1:3",
         "k11_generated_split_k:default:3:3", "default"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=["131x97x67", "260x132x100"])
    p.add_argument("--cases", nargs="+", default=CASES)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args(argv)
    import cupy as cp

    import simt_tiles
    from simt_tiles.bench.matmul import parse_size
    from simt_tiles.bounds import check_within
    from simt_tiles.kernels.matmul import RUNGS
    from simt_tiles.kernels.matmul.reference import matmul_reference

    rng = cp.random.default_rng(0)
    tally = _once.Tally("run_fast_once")
    for m, n, k in map(parse_size, args.shapes):
        a = rng.standard_normal((m, k)).astype(args.dtype)
        b = rng.standard_normal((k, n)).astype(args.dtype)
        ref, bound = matmul_reference(a, b, xp=cp, precise=False)
        for case in args.cases:
            variant, config = None, None
            if case != "default":
                variant, preset, *launch = case.split(":")
                if "=" in preset:  # fields over the default preset: "k11_generated_split_k:bm=64,bk=32"
                    fields = {f: int(v) for f, v in (kv.split("=") for kv in preset.split(","))}
                    config = dataclasses.replace(RUNGS[variant].presets["default"], **fields)
                else:
                    config = RUNGS[variant].presets[preset]
                config = dataclasses.replace(config, **dict(zip(("splits", "pad"), map(int, launch))))
            c = cp.full((m, n), cp.nan, dtype=args.dtype)
            simt_tiles.matmul(a, b, out=c, variant=variant, config=config)
            chk = check_within(c, ref, bound, xp=cp)
            tally.check(f"{case:<32} {m}x{n}x{k} {args.dtype}", chk.passed, repr(chk))
    return tally.exit_code()


if __name__ == "__main__":
    sys.exit(main())
