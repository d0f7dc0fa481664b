"""Verify, then time the tile-pattern kernels (softmax, reduce, vector_add, bias_relu) on one GPU.

    simt-tiles bench patterns [--only softmax reduce elementwise bias_tiles zoo] [--cols 256 1024 ...]
                              [--reps 20] [--out DIR | --json P --md P --plot P]

``--only zoo`` (group ``patterns_zoo``) times softmax, log_softmax and the reductions over a zoo of
shapes — row lengths 32 … 2²², row counts 1 … 2²⁰, LLM vocabulary rows (32000, 50257, 128256,
151936), axes that are not the last — with ``variant=None`` (what users get), a few alternatives
the dispatch rules chose against, and torch in the same process; each zoo group has its own copy
ceiling (2²⁸ float32).

Peers measured in the same process: a device-to-device copy (the bandwidth
ceiling: bytes read + bytes written, ``cupy`` assignment of 2^28 float32),
``torch.softmax``, ``cupy.sum`` and, when ``cuda.tile`` is importable, the
cuTile counterparts of ``simt_tiles.tile``.  Effective bandwidth counts each
input read once and each output written once.  Every implementation is first
checked (softmax: the float64 reference and its bound; sums: γ_n·Σ|x|
bounds; elementwise: exact equality) on a NaN-poisoned output, then timed
through its public call with CUDA events, warm-up, median.  Before each
timed call a buffer of ten times the device's L2 (at least 512 MiB) is
overwritten (untimed): the L2 is cold and the
Python launch path is hidden behind GPU work, so the times are GPU times.
Inputs are ≥ 256 MiB except the softmax rows (16384 × cols).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time

import simt_tiles
from simt_tiles.bounds import BoundCheck, gamma, unit_roundoff

from . import common
from .common import copy_ceiling

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "softmax, reduce, vector_add, bias_relu vs copy / torch / cupy"
#: the groups of ``simt-tiles bench`` that run one part of this one (``bench softmax`` =
#: ``bench patterns --only softmax``)
SUBGROUPS = ("softmax", "reduce", "elementwise", "bias_tiles")

SOFTMAX_COLS = (256, 1024, 4096, 16384, 32768)
GROUPS = (*SUBGROUPS, "zoo")


def add_arguments(p, only=None) -> None:
    if only is None:
        p.add_argument("--only", nargs="+", default=list(SUBGROUPS), choices=[*GROUPS, "copy"])
    else:
        p.set_defaults(only=[only])
    if only in (None, "softmax"):
        p.add_argument("--cols", nargs="+", type=int, default=list(SOFTMAX_COLS), help="softmax row lengths")
    else:
        p.set_defaults(cols=list(SOFTMAX_COLS))
    common.add_output_arguments(p)


def run(args) -> int:
    name = args.only[0] if len(args.only) == 1 else "patterns"
    if name == "zoo":
        with common.session("patterns_zoo", args.reps, with_tile=False) as (h, cp, _):
            measure_zoo(h, cp)
            return common.finish(h, args, group="patterns_zoo", title="softmax and reductions over a shape zoo",
                                 method=__doc__, ceilings={g: "device copy" for g in ZOO_GROUPS},
                                 peers={g: "torch" for g in ZOO_GROUPS})
    with common.session(name, args.reps) as (h, cp, tile):
        measure(h, cp, tile, args)
        return common.finish(h, args, group=name, title="tile patterns", method=__doc__,
                             ceilings={g: "device copy" for g in GROUPS},
                             peers={"softmax": "torch.softmax", "reduce": "cupy.sum",
                                    "elementwise": "cupy a+b"})


def main(argv=None) -> int:
    """``python benchmarks/bench_patterns.py ...`` = ``simt-tiles bench patterns ...``."""
    return common.main_of("patterns", add_arguments, run, __doc__, argv)


def measure(h, cp, tile, args) -> None:
    import numpy as np
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from simt_tiles.kernels.elementwise.bias_relu import Config as TileCfg
    from simt_tiles.kernels.elementwise.bias_relu import boundary_waste
    from simt_tiles.kernels.softmax.reference import softmax_reference

    rng = cp.random.default_rng(7)
    copy_ceiling(h, cp)
    u32 = unit_roundoff(np.float32)

    def exact(got, want):
        return bool(cp.array_equal(got, want))

    if "softmax" in args.only:
        import torch

        # deferred: loads Numba (backend choice first)
        from simt_tiles.kernels.softmax import RUNGS as SOFTMAX_RUNGS
        from simt_tiles.kernels.softmax.k04_register_row import Config as RegRowConfig
        from simt_tiles.kernels.softmax.k05_split_row import Config as SplitRowConfig
        from simt_tiles.runtime import ConfigError

        # block size × values per thread: how many rows an SM holds in registers, and how many
        # loads each thread has in flight (k03 is not swept: at 512/1024 threads it was slower at every size)
        SOFTMAX_SWEEP = [("k04_register_row", RegRowConfig(threads=t, vpt_target=v, max_vpt=64,
                                                                 min_threads=t))
                         for t, v in ((128, 16), (512, 16), (512, 32), (1024, 16), (1024, 32))]
        # k05 at 32768 columns: 512 threads × (20 registers + 44 shared) and 1024 × (20 + 12), one
        # block per SM, against the default's 256 × (84 + 44): warps per SM against values per thread
        SOFTMAX_SWEEP += [("k05_split_row", SplitRowConfig(threads=512)),
                          ("k05_split_row", SplitRowConfig(threads=1024, min_blocks=1, smem_budget=48 * 1024))]

        for cols in args.cols:
            x = rng.standard_normal((16384, cols), dtype=cp.float32)
            out = cp.full_like(x, cp.nan)
            ref, bound = softmax_reference(x, xp=cp)
            kw = dict(nbytes=2 * x.nbytes, x=cols)
            problem = f"16384x{cols}"

            def check(y=out):
                return BoundCheck(y, ref, bound, xp=cp)

            # a copy of the same bytes: small problems cannot reach the 2^28 copy's bandwidth either
            h.entry("softmax", problem, "device copy (same bytes)", lambda: cp.copyto(out, x),
                    check=lambda: bool(cp.array_equal(out, x)), kind="ceiling", **kw)
            for v in simt_tiles.SOFTMAX_VARIANTS:
                try:
                    SOFTMAX_RUNGS[v].resolve_config(None).for_problem(16384, cols, 4)
                except ConfigError:  # the row does not fit this rung's default (k04 > 16384, k05 > 46080 float32)
                    continue
                out.fill(cp.nan)
                h.entry("softmax", problem, v, lambda v=v: simt_tiles.softmax(x, out=out, variant=v),
                        check=check, **kw)
            out.fill(cp.nan)  # what a user gets: k04, k05 or k03 by row length
            h.entry("softmax", problem, "softmax (variant=None)", lambda: simt_tiles.softmax(x, out=out),
                    check=check, **kw)
            for v, cfg in SOFTMAX_SWEEP:
                try:
                    cfg.for_problem(16384, cols, 4)
                except ConfigError:  # the row does not fit this block's registers: nothing to time
                    continue
                out.fill(cp.nan)
                label = f"{v} threads={cfg.threads}" + (f" vpt_target={cfg.vpt_target}" if v.startswith("k04") else "")
                h.entry("softmax", problem, label,
                        lambda v=v, cfg=cfg: simt_tiles.softmax(x, out=out, variant=v, config=cfg), check=check, **kw)
            tx = torch.as_tensor(x, device="cuda")
            h.entry("softmax", problem, "torch.softmax", lambda: torch.softmax(tx, dim=1),
                    check=lambda: check(cp.asarray(torch.softmax(tx, dim=1))), kind="peer", **kw)
            if tile is not None:
                h.entry("softmax", problem, "cuTile softmax", lambda: tile.softmax(x, out=out),
                        check=lambda: check(tile.softmax(x)), kind="tile", **kw)
            x = out = ref = bound = tx = None
            cp.get_default_memory_pool().free_all_blocks()

    if "reduce" in args.only:
        n = 2**28
        x = rng.standard_normal(n, dtype=cp.float32)
        absum = float(cp.abs(x).astype(cp.float64).sum())
        ref = float(x.astype(cp.float64).sum())

        def sum_check(got, nterms, accumulate=np.float64):
            # simt_tiles: float64 accumulation in any order, then one rounding: a rigorous bound.
            # Peers accumulate in float32 in an order they do not document; γ_n(2⁻²⁴) is void for
            # n ≥ 2²⁴, so they get the bound of a float32 pairwise sum (depth ⌈log2 n⌉) with a
            # 64-term sequential chain per thread — a stated assumption, not a proof.
            if accumulate == np.float32:
                nterms = 64 + math.ceil(math.log2(nterms))
            g = gamma(nterms, unit_roundoff(accumulate)) + gamma(nterms, unit_roundoff(np.float64))
            return BoundCheck(cp.asarray(got, cp.float64).reshape(-1), cp.asarray([ref]),
                              cp.asarray([u32 * abs(ref) + g * absum * (1 + 1e-6)]), xp=cp)

        h.entry("reduce", "sum 2^28", "simt_tiles.reduce", lambda: simt_tiles.reduce(x),
                check=lambda: sum_check(simt_tiles.reduce(x), n), nbytes=x.nbytes, x=n)
        # deferred: loads Numba (backend choice first)
        from simt_tiles.kernels.reduce import RUNGS as REDUCE_RUNGS

        base = next(iter(REDUCE_RUNGS.values())).presets["default"]
        for kw in ({"loads": 1}, {"loads": 4}, {"threads": 512, "max_blocks": 528},
                   {"threads": 1024, "max_blocks": 264}, {"max_blocks": 2112}):  # loads in flight, grid shape
            cfg = dataclasses.replace(base, **kw)
            label = " ".join(f"{k}={v}" for k, v in kw.items())
            h.entry("reduce", "sum 2^28", f"simt_tiles.reduce {label}", lambda cfg=cfg: simt_tiles.reduce(
                x, config=cfg), check=lambda cfg=cfg: sum_check(simt_tiles.reduce(x, config=cfg), n),
                nbytes=x.nbytes, x=n)
        h.entry("reduce", "sum 2^28", "cupy.sum", lambda: cp.sum(x),
                check=lambda: sum_check(cp.sum(x), n, np.float32), kind="peer", nbytes=x.nbytes, x=n)
        if tile is not None:
            h.entry("reduce", "sum 2^28", "cuTile sum", lambda: tile.reduce_sum(x),
                    check=lambda: sum_check(tile.reduce_sum(x), n), kind="tile", nbytes=x.nbytes, x=n)
        x2 = x.reshape(16384, 16384)
        rows = x2.astype(cp.float64)
        ref2, absum2 = rows.sum(axis=1), cp.abs(rows).sum(axis=1)
        rows = None
        out = cp.empty(16384, cp.float32)

        def rows_check(got, accumulate=np.float64):
            nterms = 16384 if accumulate == np.float64 else 64 + 14  # as sum_check
            g = gamma(nterms, unit_roundoff(accumulate)) + gamma(16384, unit_roundoff(np.float64))
            return BoundCheck(got, ref2, u32 * cp.abs(ref2) + g * absum2 * (1 + 1e-6), xp=cp)

        def rows_simt():
            return simt_tiles.reduce(x2, axis=-1, out=out)

        out.fill(cp.nan)  # poisoned once, before the checked first call (a fill inside the timed call billed a kernel)
        h.entry("reduce", "sum 16384x16384 axis=-1", "simt_tiles.reduce", rows_simt,
                check=lambda: rows_check(out), nbytes=x.nbytes, x=16384)
        for kw in ({"row_threads": 512}, {"row_threads": 1024}, {"loads": 4}):  # one block per row: its size
            cfg = dataclasses.replace(base, **kw)
            label = " ".join(f"{k}={v}" for k, v in kw.items())

            def rows_cfg(cfg=cfg):
                return simt_tiles.reduce(x2, axis=-1, out=out, config=cfg)

            out.fill(cp.nan)
            h.entry("reduce", "sum 16384x16384 axis=-1", f"simt_tiles.reduce {label}", rows_cfg,
                    check=lambda: rows_check(out), nbytes=x.nbytes, x=16384)
        h.entry("reduce", "sum 16384x16384 axis=-1", "cupy.sum", lambda: cp.sum(x2, axis=1),
                check=lambda: rows_check(cp.sum(x2, axis=1), np.float32), kind="peer", nbytes=x.nbytes, x=16384)
        if tile is not None:
            h.entry("reduce", "sum 16384x16384 axis=-1", "cuTile sum", lambda: tile.reduce_sum(x2),
                    check=lambda: rows_check(tile.reduce_sum(x2)), kind="tile", nbytes=x.nbytes,
                    x=16384)
        x = x2 = out = ref2 = absum2 = None
        cp.get_default_memory_pool().free_all_blocks()

    if "elementwise" in args.only:
        n = 2**28
        a, b = rng.standard_normal(n, dtype=cp.float32), rng.standard_normal(n, dtype=cp.float32)
        c = cp.full_like(a, cp.nan)
        want = a + b
        # deferred: loads Numba (backend choice first)
        from simt_tiles.kernels.elementwise import VECTOR_ADD_RUNGS

        for v in simt_tiles.VECTOR_ADD_VARIANTS:
            c.fill(cp.nan)
            h.entry("elementwise", "vector_add 2^28", v, lambda v=v: simt_tiles.vector_add(a, b, out=c, variant=v),
                    check=lambda: exact(c, want), nbytes=3 * a.nbytes, x=n)
        base = VECTOR_ADD_RUNGS["k02_multi_element"].presets["default"]
        for items, blocks in ((8, 1056), (16, 1056), (4, 4224), (8, 2112)):  # bytes in flight vs grid size
            cfg = dataclasses.replace(base, items=items, max_blocks=blocks)
            c.fill(cp.nan)
            h.entry("elementwise", "vector_add 2^28", f"k02 items={items} max_blocks={blocks}",
                    lambda cfg=cfg: simt_tiles.vector_add(a, b, out=c, variant="k02_multi_element", config=cfg),
                    check=lambda: exact(c, want), nbytes=3 * a.nbytes, x=n)
        h.entry("elementwise", "vector_add 2^28", "cupy a+b", lambda: cp.add(a, b, out=c),
                check=lambda: exact(c, want), kind="peer", nbytes=3 * a.nbytes, x=n)
        x, bias = a.reshape(16384, 16384), b[:16384].copy()
        y = cp.full_like(x, cp.nan)
        want = cp.maximum(x + bias, 0)
        h.entry("elementwise", "bias_relu 16384x16384", "simt_tiles.bias_relu",
                lambda: simt_tiles.bias_relu(x, bias, out=y), check=lambda: exact(y, want), nbytes=2 * x.nbytes,
                x=n)
        a = b = c = x = y = want = None
        cp.get_default_memory_pool().free_all_blocks()

    if "bias_tiles" in args.only:
        m, n = 16383, 16381  # ragged: every tile shape has edge tiles
        x = rng.standard_normal((m, n), dtype=cp.float32)
        bias = rng.standard_normal(n, dtype=cp.float32)
        y = cp.full_like(x, cp.nan)
        want = cp.maximum(x + bias, 0)
        for tn, tm, rpt in ((32, 1, 1), (32, 8, 1), (32, 32, 1), (16, 16, 1), (8, 32, 1), (128, 2, 1),
                            (32, 8, 4), (32, 4, 8), (64, 4, 4), (128, 2, 4), (32, 8, 8)):
            cfg = TileCfg(tile_n=tn, tile_m=tm, rows_per_thread=rpt)
            t0 = time.perf_counter()
            simt_tiles.bias_relu(x, bias, out=y, config=cfg)
            cuda.synchronize()
            compile_s = time.perf_counter() - t0  # first call: compile + one run
            y.fill(cp.nan)
            h.entry("bias_tiles", f"{m}x{n}", f"{tn}x{tm} threads, {rpt} rows each", lambda cfg=cfg: simt_tiles.bias_relu(
                x, bias, out=y, config=cfg), check=lambda: exact(y, want), nbytes=2 * x.nbytes, x=tn * tm,
                compile_s=compile_s, boundary_waste=boundary_waste(cfg, m, n))
        x = y = want = None
        cp.get_default_memory_pool().free_all_blocks()


ZOO_GROUPS = ("softmax zoo", "log_softmax zoo", "reduce zoo")
#: (rows, cols) of the softmax zoo, float32, last axis; vocabulary rows at 4096/1024 rows (GPT-2 50257, Llama 32000
#: and 128256, Qwen 151936; ChatGLM's 65024 at 2048 rows, 600 GPT-2 rows: 4.5 waves of one row per SM); sampling
#: at decode, one row a sequence: GPT-2 at batch 8, Llama-2 at batch 32, Llama-3 at batch 64
SOFTMAX_ZOO = [(2, 4194304), (4096, 50257), (16384, 256), (2**20, 32), (65536, 128), (16384, 4096), (16384, 32768),
               (4096, 32000), (1024, 128256), (1024, 151936), (1, 2**22), (1, 1000), (2048, 65024), (600, 50257),
               (8, 50257), (32, 32000), (64, 128256)]
LOG_SOFTMAX_ZOO = [(4096, 50257), (16384, 256), (2, 4194304)]
#: (shape, axis) with an axis that is not the last
SOFTMAX_AXIS_ZOO = [((4096, 4096), 0), ((256, 1024, 64), 1)]
#: (op, shape, axis); rows of hidden sizes at prefill token counts: a per-token max (int8 activation scales,
#: LLM.int8-style) of Llama-2-7B's 4096 × 4096 and a per-token sum of a 2048-wide model (Llama-3.2-1B) at 8192 tokens
REDUCE_ZOO = [("sum", (2**20, 64), -1), ("sum", (2, 2**27), -1), ("sum", (2**28,), None), ("sum", (16384, 16384), -1),
              ("sum", (4096, 4096), 0), ("sum", (2**22, 4), 0), ("argmax", (4096, 50257), -1),
              ("mean", (16384, 16384), 1), ("max", (2**28,), None), ("sum", (1000,), None),
              ("sum", (64, 1024, 256), (0, 2)), ("max", (4096, 4096), -1), ("sum", (8192, 2048), -1)]


def host_calls(h, cp, torch, calls: int = 2000) -> None:
    """Host time per repeated call (torch tensors, ``out=`` given, small problems so the GPU keeps
    up): the call forms of the issue, shared inputs included; a row each (group "host", untimed)."""
    import simt_tiles  # deferred: loads Numba (backend choice first)

    t = lambda *s: torch.randn(*s, device="cuda")  # noqa: E731
    x, y, o = t(64, 64), t(64, 64), t(64, 64)
    a, b, v = t(4096), t(4096), t(4096)
    r, ri = t(64), torch.empty(64, dtype=torch.int64, device="cuda")
    assert ri.dtype == torch.int64
    forms = {
        "softmax(x, out=)": lambda: simt_tiles.softmax(x, out=o),
        "log_softmax(x, out=)": lambda: simt_tiles.log_softmax(x, out=o),
        "softmax(x, axis=0, out=)": lambda: simt_tiles.softmax(x, axis=0, out=o),
        "reduce(x, axis=-1, out=)": lambda: simt_tiles.reduce(x, axis=-1, out=r),
        "reduce(x, 'argmax', axis=-1, out=)": lambda: simt_tiles.reduce(x, "argmax", axis=-1, out=ri),
        "vector_add(a, b, out=)": lambda: simt_tiles.vector_add(a, b, out=v),
        "vector_add(a, a, out=)": lambda: simt_tiles.vector_add(a, a, out=v),
        "matmul(x, y, out=)": lambda: simt_tiles.matmul(x, y, out=o),
        "matmul(x, x, out=)": lambda: simt_tiles.matmul(x, x, out=o),
        "torch.softmax(x, dim=1)": lambda: torch.softmax(x, dim=1),
    }
    for label, f in forms.items():
        def timed(f=f):
            for _ in range(20):
                f()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            us = (time.perf_counter() - t0) / calls * 1e6
            torch.cuda.synchronize()
            return us

        us = []
        h.entry("host", "per call", label, lambda: us.append(timed()), check=lambda: True, timed=False,
                kind="peer" if label.startswith("torch") else "simt")
        if us:
            h.rows[-1]["host_us"] = round(us[0], 2)
        print(f"host time per call: {label}: {h.rows[-1]['host_us']} us", flush=True)


def measure_zoo(h, cp) -> None:
    """softmax / log_softmax / reduce over the zoo; every row checked (reference and bound, or
    exact), then timed; torch in the same process; each group's own copy ceiling.  Past
    ``SIMT_TILES_ZOO_BUDGET_S`` seconds (default 600) the remaining problems are skipped (failed rows)."""
    import os

    import torch

    # deferred: loads Numba (backend choice first)
    import simt_tiles
    from simt_tiles.bounds import BoundCheck
    from simt_tiles.kernels.softmax.k04_register_row import Config as RegRowConfig
    from simt_tiles.kernels.softmax.reference import log_softmax_reference, softmax_reference

    rng = cp.random.default_rng(11)
    src, dst = rng.standard_normal(2**28, dtype=cp.float32), cp.empty(2**28, cp.float32)
    for g in ZOO_GROUPS:
        h.entry(g, "copy 2^28", "device copy", lambda: cp.copyto(dst, src), check=lambda: bool(cp.array_equal(src, dst)),
                kind="ceiling", nbytes=2 * src.nbytes, x=2**28)
    src = dst = None
    cp.get_default_memory_pool().free_all_blocks()

    def reduce_row(op, shape, axis):
        _reduce_zoo_row(h, cp, torch, rng, op, shape, axis)

    def softmax_rows(group, shape, axis, log, extra=()):
        x = rng.standard_normal(shape, dtype=cp.float32) * 4
        out = cp.full_like(x, cp.nan)
        moved = cp.moveaxis(x, axis, -1)
        ref, bound = (log_softmax_reference if log else softmax_reference)(moved, xp=cp)
        moved = None
        f = simt_tiles.log_softmax if log else simt_tiles.softmax
        tf = torch.log_softmax if log else torch.softmax
        tx = torch.as_tensor(x, device="cuda")
        problem = "x".join(map(str, shape)) + ("" if axis in (-1, len(shape) - 1) else f" axis={axis}")
        kw = dict(nbytes=2 * x.nbytes, x=shape[axis])

        def check(y):
            return BoundCheck(cp.moveaxis(cp.asarray(y), axis, -1), ref, bound, xp=cp)

        def ours(**k):
            return f(x, axis=axis, out=out, **k)

        # poisoned before the entry's first (checked) call, outside the timed calls
        out.fill(cp.nan)
        h.entry(group, problem, "simt_tiles (variant=None)", ours, check=lambda: check(out), **kw)
        for label, k in extra:
            out.fill(cp.nan)
            h.entry(group, problem, label, lambda k=k: ours(**k), check=lambda: check(out), **kw)
        h.entry(group, problem, "torch", lambda: tf(tx, dim=axis), check=lambda: check(tf(tx, dim=axis)),
                kind="peer", **kw)
        cp.get_default_memory_pool().free_all_blocks()

    deadline = time.monotonic() + float(os.environ.get("SIMT_TILES_ZOO_BUDGET_S", "600"))

    def guarded(f, *a):  # a problem whose setup fails is a failed row, not a crashed run
        try:
            if time.monotonic() > deadline:
                raise TimeoutError("skipped: SIMT_TILES_ZOO_BUDGET_S spent")
            f(*a)
        except Exception as exc:  # noqa: BLE001
            h.entry("failed", str(a)[:80], f.__name__, lambda: None, check=lambda: False, timed=False, error=repr(exc)[:300])
            cp.get_default_memory_pool().free_all_blocks()

    guarded(host_calls, h, cp, torch)
    for rows, cols in SOFTMAX_ZOO:
        extra = []
        if cols <= 1024:  # the short-row rule: several rows to a warp against a warp per row
            extra.append(("k04 min_group=32", {"variant": "k04_register_row",
                                                "config": RegRowConfig(threads=512, group=512, vpt=32, max_vpt=32,
                                                                       min_group=32)}))
        if 16384 < cols <= 151936 and rows >= 1024:  # vocabulary rows: the fused rung against k03
            extra.append(("k03_online", {"variant": "k03_online"}))
            extra.append(("k06_split_blocks", {"variant": "k06_split_blocks"}))
        guarded(softmax_rows, "softmax zoo", (rows, cols), -1, False, extra)
    for rows, cols in LOG_SOFTMAX_ZOO:
        guarded(softmax_rows, "log_softmax zoo", (rows, cols), -1, True)
    for shape, axis in SOFTMAX_AXIS_ZOO:
        guarded(softmax_rows, "softmax zoo", shape, axis, False)

    for op, shape, axis in REDUCE_ZOO:
        guarded(reduce_row, op, shape, axis)


def _reduce_zoo_row(h, cp, torch, rng, op, shape, axis) -> None:
    import numpy as np

    # deferred: loads Numba (backend choice first)
    import simt_tiles
    from simt_tiles.bounds import BoundCheck, gamma, unit_roundoff
    from simt_tiles.kernels.reduce import dispatch
    from simt_tiles.kernels.reduce._common import op_code

    u32 = unit_roundoff(np.float32)
    x = rng.standard_normal(shape, dtype=cp.float32)
    tx = torch.as_tensor(x, device="cuda")
    problem = f"{op} " + "x".join(map(str, shape)) + f" axis={axis}"
    axes = tuple(range(len(shape))) if axis is None else tuple(a % len(shape) for a in np.atleast_1d(axis))
    count = int(np.prod([shape[a] for a in axes]))
    kw = dict(nbytes=x.nbytes, x=count)
    if op in ("sum", "mean"):
        xd = x.astype(cp.float64)
        ref = xd.sum(axis=axis) / (count if op == "mean" else 1)
        absum = cp.abs(xd).sum(axis=axis) / (count if op == "mean" else 1)
        xd = None

        def check(got, acc=np.float64, ref=ref, absum=absum, count=count):
            nterms = count if acc == np.float64 else 64 + int(np.ceil(np.log2(count)))  # see measure()
            g = gamma(nterms, unit_roundoff(acc)) + gamma(count, 2.0**-53)
            return BoundCheck(cp.asarray(got).astype(cp.float64).reshape(-1), ref.reshape(-1),
                              (u32 * cp.abs(ref) + g * absum * (1 + 1e-6) + 4 * 2.0**-53 * cp.abs(ref)).reshape(-1),
                              xp=cp)
        peer_check = lambda got, check=check: check(got, np.float32)  # noqa: E731
    else:
        want = getattr(cp, op)(x, axis=axis)

        def check(got, want=want):
            return bool(cp.array_equal(cp.asarray(got), want))
        peer_check = check
    dims = None if axis is None else axis
    tfun = {"sum": lambda: torch.sum(tx) if dims is None else torch.sum(tx, dim=dims),
            "mean": lambda: torch.mean(tx, dim=dims),
            "max": lambda: torch.max(tx) if dims is None else torch.amax(tx, dim=dims),
            "argmax": lambda: torch.argmax(tx, dim=dims)}[op]
    def default_check():  # CuPy in; and for argmax/argmin torch in too (its int64 result once came back float64)
        ok = check(simt_tiles.reduce(x, op, axis=axis))
        if op.startswith("arg"):
            got = simt_tiles.reduce(tx, op, axis=axis)
            ok = ok and got.dtype == torch.int64 and check(got)
        return ok

    h.entry("reduce zoo", problem, "simt_tiles (variant=None)", lambda: simt_tiles.reduce(x, op, axis=axis),
            check=default_check, **kw)
    if op == "sum" and axis == -1 and len(shape) == 2:  # the block-per-row rung it replaced
        h.entry("reduce zoo", problem, "k01_warp_shuffle", lambda: simt_tiles.reduce(
            x, op, axis=axis, variant="k01_warp_shuffle"), check=lambda: check(simt_tiles.reduce(
                x, op, axis=axis, variant="k01_warp_shuffle")), **kw)
    # the lanes rungs on every problem: k02 (where variant=None runs k01) and k03 (never the default
    # until measured), each beside torch; rows named by the rung, as the headers' check reads them
    default = dispatch.plan(tuple(shape), tuple(sorted(axes)), op, op_code(op), np.float32).rung.name
    for variant in ("k02_axis_lanes", "k03_flat_lanes"):
        if variant != default:
            h.entry("reduce zoo", problem, variant, lambda v=variant: simt_tiles.reduce(x, op, axis=axis, variant=v),
                    check=lambda v=variant: check(simt_tiles.reduce(x, op, axis=axis, variant=v)), **kw)
    h.entry("reduce zoo", problem, "torch", tfun, check=lambda: peer_check(tfun()), kind="peer", **kw)
    x = tx = None
    cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    sys.exit(main())
