"""Build, verify, then time every matmul rung against cuBLAS FP32 — one run, one GPU.

    simt-tiles bench matmul [--sizes 4096 1000x1000x1000 ...] [--variants k03_smem_tiled ...]
                            [--config k03_smem_tiled:tile=16 ...] [--reps 20] [--out DIR]
    simt-tiles bench matmul --zoo [--zoo-only decode attention ...] [--reps 10] [--out DIR]

Method (benchmarks/notes/method.md): each implementation is first checked against a
float64 cuBLAS reference with the γ_K·|A|·|B| bound on a NaN-poisoned output;
only then timed (``simt_tiles.bench.harness``: CUDA events, warm-up, median).
Input sets are rotated so that the bytes touched per size exceed three times the
device's L2 (read from the device) even for small sizes.  The peers
(``simt_tiles.bench.peers``: cuBLAS FP32 first — every row's ratio is to it —
then torch FP32, cuBLAS/torch TF32 and the cuTile counterparts when they can run
here; ``--no-extra-peers`` keeps cuBLAS FP32 only) are measured in the same
process.  Rungs are launched directly (no Python API checks inside the timed
region).  TF32 rows are checked against the TF32 bound (the FP32 bound plus
2·2⁻¹⁰·|A|·|B| for the operands' conversion) and their error is shown beside
their speed, so a TF32 rate is never read as an FP32 one.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import sys

from ..bounds import TF32_U, check_within, gamma, unit_roundoff
from ..machine import l2_bytes
from . import common
from .peers import baseline, peers

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "the matmul ladder vs cuBLAS FP32 and the other registered peers"

DEFAULT_SIZES = ["1024", "2048", "4096", "8192", "4096x1024x8192", "8192x8192x1024", "1000x1000x1000", "1031x997x1013"]
#: L2 size assumed when the device does not report one
FALLBACK_L2_BYTES = 50 * 2**20


def parse_size(text: str) -> tuple[int, int, int]:
    """``"4096"`` → (4096, 4096, 4096); ``"MxNxK"`` → (M, N, K)."""
    try:
        parts = [int(p) for p in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 3) or min(parts) <= 0:
        raise argparse.ArgumentTypeError(f"expected N or MxNxK with positive integers; got {text!r}")
    return tuple(parts * 3) if len(parts) == 1 else tuple(parts)  # type: ignore[return-value]


def parse_config(text: str):
    """``variant:field=value,field=value`` → (variant, config object)."""
    # deferred: loads Numba (backend choice first)
    from ..kernels.matmul import RUNGS

    variant, _, fields = text.partition(":")
    if variant not in RUNGS:
        raise ValueError(f"--config: expected a rung of {list(RUNGS)} before ':'; got {variant!r}")
    base = RUNGS[variant].presets["default"]
    kwargs = {k: int(v) for k, v in (f.split("=") for f in fields.split(",") if f)}
    return variant, dataclasses.replace(base, **kwargs)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", nargs="+", type=parse_size, default=[parse_size(s) for s in DEFAULT_SIZES],
                   metavar="SIZE", help="N (square) or MxNxK (default: %s)" % " ".join(DEFAULT_SIZES))
    p.add_argument("--variants", nargs="+", default=None, help="rungs to time at their default config (default: all)")
    p.add_argument("--config", nargs="*", default=[], metavar="RUNG:FIELD=V,...",
                   help="extra configs, e.g. k03_smem_tiled:tile=16")
    p.add_argument("--budget-s", type=float, default=3.0, help="max timed seconds per entry (fewer reps for slow ones)")
    p.add_argument("--default", action="store_true",
                   help="time the default simt_tiles.matmul (its choice per size) beside --variants too")
    p.add_argument("--zoo", action="store_true",
                   help="the shape zoo (ZOO: real workloads' shapes, layouts and batches) through the public "
                        "simt_tiles.matmul beside cuBLAS FP32 and torch FP32 (TF32 off)")
    p.add_argument("--zoo-only", nargs="+", default=None, metavar="NAME",
                   help="with --zoo: only the zoo rows whose name contains one of these strings")
    p.add_argument("--no-extra-peers", action="store_true",
                   help="only the FP32 peers (cuBLAS, Triton) beside the rungs: no TF32, torch or cuTile")
    common.add_output_arguments(p)


def run(args) -> int:
    import cupy as cp
    import numpy as np
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from ..kernels.matmul import MATMUL_VARIANTS, RUNGS, dispatch
    from ..kernels.matmul._common import Call

    if os.environ.get("CUPY_TF32"):
        print("bench matmul: CUPY_TF32 must be unset (cuBLAS FP32 is the baseline)", file=sys.stderr)
        return 2
    if getattr(args, "zoo", False):
        from . import matmul_zoo  # deferred: the zoo (and torch) only when asked

        return matmul_zoo.run(args)
    unknown = sorted(set(args.variants or ()) - set(RUNGS))
    if unknown:
        print(f"bench matmul: --variants: expected rungs of {list(RUNGS)}; got {unknown}", file=sys.stderr)
        return 2
    base = baseline("matmul")
    impls = [Impl(p.name, lambda sets, m, n, k, run=p.run: run, p.kind, p.precision, {"config": "library"})
             for p in peers("matmul") if not (args.no_extra_peers and p.context)]

    def launcher(variant, cfg):
        def make(sets, m, n, k):
            plan = (dispatch.resolved(RUNGS[variant], cfg, m, n, k) if variant is not None
                    else dispatch.plan(None, None, m, n, k, np.float32))  # what matmul(variant=None) runs here
            rung, c = plan
            devs = {id(x): cuda.as_cuda_array(x) for s in sets for x in s}

            def launch(a, b, out):
                plan.run(Call(devs[id(a)], devs[id(b)], devs[id(out)], 0))

            launch.config = f"{rung.name} {config_text(c)}" if variant is None else config_text(c)
            return launch

        return make

    if args.default or not args.variants:  # the public call's own choice per size
        impls.append(Impl("default", launcher(None, None), "simt", "fp32", {"config": "variant=None"}))
    for variant, cfg, custom in ([(v, RUNGS[v].presets["default"], False) for v in (args.variants or MATMUL_VARIANTS)]
                                 + [(v, cfg, True) for v, cfg in map(parse_config, args.config)]):
        text = config_text(cfg)
        impls.append(Impl(f"{variant} [{text}]" if custom else variant, launcher(variant, cfg), "simt", "fp32",
                          {"config": text, "custom": custom}))
    # flush=True: an L2 flush before each timed call keeps the Python launch path (tens of µs; two
    # launches with split-K) out of the events, so small sizes are timed as GPU time
    with common.session("matmul", args.reps, flush=True, with_tile=False, budget_s=args.budget_s) as (h, _, _t):
        measure(h, cp, args.sizes, impls, l2_bytes() or FALLBACK_L2_BYTES)
        return common.finish(h, args, group="matmul", title="matmul ladder vs cuBLAS FP32", method=__doc__,
                             ceilings={}, peers={"matmul": base})


@dataclasses.dataclass(frozen=True)
class Impl:
    """One implementation to time: ``make(sets, m, n, k)`` returns ``launch(a, b, c)`` (c = a @ b;
    a ``launch.config`` string, when set, is the row's config for that size)."""

    name: str
    make: object
    kind: str
    precision: str
    extra: dict


def measure(h, xp, sizes, impls, l2: int) -> None:
    """Every implementation on every size, through the harness ``h``, on rotating float32 input sets
    (``xp``: CuPy; NumPy in the tests) of at least three times ``l2`` bytes in all."""
    import numpy as np

    # deferred: loads Numba (backend choice first)
    from ..kernels.matmul import flops
    from ..kernels.matmul.reference import matmul_reference

    rng = xp.random.default_rng(2026)
    for m, n, k in sizes:
        nsets = max(1, min(16, math.ceil(3 * l2 / (4 * (m * k + k * n + m * n)))))
        sets = [(rng.standard_normal((m, k), dtype=xp.float32), rng.standard_normal((k, n), dtype=xp.float32),
                 xp.empty((m, n), xp.float32)) for _ in range(nsets)]
        ref, bound = matmul_reference(sets[0][0], sets[0][1], xp=xp, precise=False)
        g = (gamma(k, unit_roundoff(np.float32)) + gamma(k, unit_roundoff(np.float64))) * (1 + 1e-6)
        bounds = {"fp32": bound, "tf32": bound * ((g + 2 * TF32_U) / g)}  # bound = g·|A|·|B|
        print(f"{m}x{n}x{k}: {nsets} rotating input sets", flush=True)
        c0 = sets[0][2]
        for impl in impls:
            try:
                launch = impl.make(sets, m, n, k)
            except Exception as exc:  # noqa: BLE001  (a config that cannot build is a failed row)
                launch = _raiser(exc)
            turn = itertools.count()  # call 0, the checked one, uses set 0
            c0.fill(xp.nan)
            extra = {**impl.extra, **({"config": launch.config} if hasattr(launch, "config") else {})}
            h.entry("matmul", f"{m}x{n}x{k}", impl.name, lambda: launch(*sets[next(turn) % nsets]),
                    check=lambda: check_within(c0, ref, bounds[impl.precision], xp=xp), kind=impl.kind,
                    precision=impl.precision, flops=flops(m, n, k), x=2 * m * n * k, m=m, n=n, k=k,
                    dtype="float32", **extra)
        sets = c0 = ref = bound = bounds = launch = None
        xp.get_default_memory_pool().free_all_blocks()


def _raiser(exc):
    def launch(*_):
        raise exc

    return launch


def config_text(cfg) -> str:
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))


def main(argv=None) -> int:
    """``python benchmarks/bench_matmul.py ...`` = ``simt-tiles bench matmul ...``."""
    return common.main_of("matmul", add_arguments, run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
