"""Verify, then time the convolution ladders on one GPU: 2-D filtering and the NCHW layer.

    simt-tiles bench conv [--only filter2d nchw] [--size 8192] [--filters 3 5 7]
                          [--modes constant reflect] [--k05-shapes 32x8x3x6 ...] [--reps 20]
                          [--out DIR | --json P --md P --plot P]

filter2d: an S×S float32 image (default 8192², 256 MiB), square filters, modes
"constant" and "reflect".  Effective bandwidth = image read once + output
written once, over the median time; the ceiling is a device-to-device copy
in the same run.  Peers: ``cupyx.scipy.ndimage.correlate`` (same semantics;
the ratio "× peer" is against it), ``torch.nn.functional.conv2d`` (cuDNN, TF32
off; zero padding = mode "constant" only) and, when cuda.tile is importable,
``simt_tiles.tile.correlate2d``.  k04/k05/k07–k09 compile the filter's values in and get
the filter as a NumPy array (a device filter would be copied back, synchronising,
on every call); the other rungs get it on the device, and k10 (the default rung) both ways.
What a user gets: ``correlate2d(x, w)`` with no variant or config, a CuPy and a NumPy
filter ("default, … filter" rows), and after the tables each one's rate over the best
rung's for the same problem.  Check: float64 ``cupyx`` reference with
the bound (γ_n(2⁻²⁴) + γ_n(2⁻⁵³))·Σ|w|·|x|, n = KH·KW + 1.

nchw: ResNet-like layers, float32, 3×3, padding 1: (N, C, H, W) = (32, 64, 56, 56)
and (8, 256, 14, 14), C_out = C_in.  Peer: ``torch.nn.functional.conv2d``
FP32 (cuDNN, ``allow_tf32 = False``); cuDNN with TF32 is shown for context,
labelled tf32, never used as the peer.  Check: float64 cuDNN reference, bound
with n = C_in·KH·KW + 1 (bias).  Rate: TFLOP/s with 2·N·C_out·H_out·W_out·C_in·KH·KW flops.

Every call is the public function (an L2 flush before each timed call hides
its Python launch path; see ``timing.time_cuda``).
"""

from __future__ import annotations

import sys

import simt_tiles
from simt_tiles.bounds import BoundCheck, gamma, TF32_U, unit_roundoff

from . import common

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "2-D filtering and the NCHW layer vs copy / cupyx / cuDNN"

NCHW_PROBLEMS = ((32, 64, 56, 56), (8, 256, 14, 14))
#: k05 shapes (block_x, block_y, rx, ry) timed besides the default 32×4, rx=4, ry=6 (mode constant
#: unless --k05-all-modes): the previous default, and the 7×7 filter's best (benchmarks/notes/conv2d.md)
K05_SWEEP = ((32, 4, 5, 6), (32, 8, 4, 6))
#: k07 shapes (block_x, block_y, rx, ry, min_blocks) timed besides its default: registers per
#: thread against blocks per SM (ptxas: 64 / 48 / 40 registers, no spills), and 256 threads
K07_SWEEP = ((32, 4, 4, 6, 8), (32, 4, 4, 6, 12), (32, 8, 4, 6, 5))
#: k08 shapes (block_x, block_y, rx, ry, min_blocks, tiles) besides its default (32×8 of 3×4, 4 blocks
#: per SM, 4 tiles a block): tiles per block, k07's 32×4 of 6×4 (96 registers, no spills), and
#: 32×8 of 4×4 (64 registers, no spills: more outputs per thread at the default's occupancy; not run yet)
K08_SWEEP = ((32, 8, 4, 3, 4, 2), (32, 8, 4, 3, 4, 8), (32, 4, 4, 6, 5, 4), (32, 8, 4, 4, 4, 4))
#: k09 shapes besides its default (32×4 of 6×4, 6 blocks per SM — shared memory — 2 tiles a block):
#: 1 tile a block (no prefetch: the control, the fastest k09) and 4.  Not in the sweep: 32×4 of 4×4
#: (8 blocks), 32×4 of 8×4 (5 blocks), 8 tiles — all slower (benchmarks/results/conv_k09_h200.log)
K09_SWEEP = ((32, 4, 4, 6, 6, 1), (32, 4, 4, 6, 6, 4))
#: the config fields the numbers of a --k0N-shapes entry set, in order
SHAPE_FIELDS = ("block_x", "block_y", "rx", "ry", "min_blocks", "tiles")
#: the fused separable kernel's shapes timed besides its default 32×8, rx=3, ry=2 (mode constant)
K06_SWEEP = ((32, 8, 3, 4), (32, 4, 5, 6), (32, 8, 5, 4))
#: k10 shapes (block_x, block_y, rx, ry, min_blocks) timed besides its default, NumPy filter: the
#: register budget (ptxas holds the kernel-parameter weights in registers too), k05's 7×7 best
K10_SWEEP = ((32, 4, 4, 6, 1), (32, 4, 4, 6, 8), (32, 8, 4, 6, 1))
#: the rows ``default_summary`` compares with the best rung
DEFAULT_ROWS = ("default, CuPy filter", "default, NumPy filter")


def add_arguments(p) -> None:
    p.add_argument("--only", nargs="+", default=["filter2d", "nchw"], choices=["filter2d", "nchw"])
    p.add_argument("--size", type=int, default=8192, help="image side for filter2d")
    p.add_argument("--filters", nargs="+", type=int, default=[3, 5, 7])
    p.add_argument("--modes", nargs="+", default=["constant", "reflect"])
    p.add_argument("--variants", nargs="+", default=None,
                   help="conv2d rungs to time at their default config (default: all; peers always run)")
    p.add_argument("--no-separable-sweep", action="store_true", help="time the separable path's default only")
    p.add_argument("--k05-shapes", nargs="*", default=[f"{bx}x{by}x{rx}x{ry}" for bx, by, rx, ry in K05_SWEEP],
                   help="k05 shapes to time besides its default, as BLOCKXxBLOCKYxRXxRY[xMINBLOCKS] (mode constant)")
    p.add_argument("--k07-shapes", nargs="*", default=["x".join(map(str, t)) for t in K07_SWEEP],
                   help="k07 shapes to time besides its default, as for --k05-shapes")
    p.add_argument("--k08-shapes", nargs="*", default=["x".join(map(str, t)) for t in K08_SWEEP],
                   help="k08 shapes to time besides its default, as for --k05-shapes with xTILES after MINBLOCKS")
    p.add_argument("--k09-shapes", nargs="*", default=["x".join(map(str, t)) for t in K09_SWEEP],
                   help="k09 shapes to time besides its default, as for --k08-shapes")
    p.add_argument("--k10-shapes", nargs="*", default=["x".join(map(str, t)) for t in K10_SWEEP],
                   help="k10 shapes to time besides its default (NumPy filter), as for --k05-shapes")
    p.add_argument("--k05-all-modes", action="store_true", help="time the k05, k07, k08 and k09 shapes in every mode")
    common.add_output_arguments(p)


def run(args) -> int:
    with common.session("conv", args.reps) as (h, cp, tile):
        common.copy_ceiling(h, cp)
        if "filter2d" in args.only:
            filter2d(h, cp, tile, args)
        if "nchw" in args.only:
            nchw(h, cp, args)
        status = common.finish(h, args, group="conv", title="convolution", method=__doc__,
                               ceilings={"filter2d": "device copy"},
                               peers={"filter2d": "cupyx correlate", "nchw": "torch conv2d (cuDNN)"})
        summary = default_summary(h.rows)
        if summary:
            print(summary, flush=True)
            md = args.md or (common.result_paths(args.out, "conv")["md"] if args.out else None)
            if md:
                with open(md, "a") as fh:
                    fh.write("\n" + summary + "\n")
        return status


def default_summary(rows) -> str:
    """Markdown: per filter2d problem, the best rung's rate and each default row's share of it."""
    problems = {}
    for r in rows:
        if r.get("group") == "filter2d" and r.get("passed") and "gbps" in r:
            problems.setdefault(r["problem"], []).append(r)
    lines = []
    for problem, rs in problems.items():
        rungs = [r for r in rs if r["kind"] == "simt" and r["impl"] not in DEFAULT_ROWS
                 and not r["impl"].startswith("separable")]
        defaults = {r["impl"]: r for r in rs if r["impl"] in DEFAULT_ROWS}
        if not rungs or not defaults:
            continue
        best = max(rungs, key=lambda r: r["gbps"])
        cells = " | ".join(f"{100 * defaults[d]['gbps'] / best['gbps']:.0f}%" if d in defaults else "-"
                           for d in DEFAULT_ROWS)
        lines.append(f"| {problem} | {best['impl']} | {best['gbps']:.0f} | {cells} |")
    if not lines:
        return ""
    head = ("### filter2d: the default path against the best rung (same run)\n\n"
            "| problem | best rung | GB/s | " + " | ".join(f"{d} (of best)" for d in DEFAULT_ROWS) + " |\n"
            "|---|---|---|" + "---|" * len(DEFAULT_ROWS))
    return head + "\n" + "\n".join(lines)


def main(argv=None) -> int:
    """``python benchmarks/bench_conv.py ...`` = ``simt-tiles bench conv ...``."""
    return common.main_of("conv", add_arguments, run, __doc__, argv)


def filter2d(h, cp, tile, args) -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from cupyx.scipy import ndimage as cnd

    # deferred: loads Numba (backend choice first)
    from simt_tiles.kernels.conv2d import CONSTANT_FILTER_VARIANTS
    from simt_tiles.kernels.conv2d import RUNGS as CONV2D_RUNGS
    from simt_tiles.kernels.conv2d.k05_register_tile_2d import Config as K05Config
    from simt_tiles.kernels.conv2d.k06_separable_fused import Config as K06Config
    from simt_tiles.kernels.conv2d.k07_vectorized import Config as K07Config
    from simt_tiles.kernels.conv2d.k08_prefetched import Config as K08Config
    from simt_tiles.kernels.conv2d.k09_async_copy import Config as K09Config
    from simt_tiles.kernels.conv2d.k10_runtime_weights import Config as K10Config

    torch.backends.cudnn.allow_tf32 = False
    s = args.size
    rng = cp.random.default_rng(11)
    x = rng.standard_normal((s, s), dtype=cp.float32)
    x64, ax64 = x.astype(cp.float64), cp.abs(x).astype(cp.float64)
    out = cp.empty_like(x)
    separable = getattr(simt_tiles, "correlate_separable", None)  # the rank-one path, when built
    for k in args.filters:
        wy, wx = rng.standard_normal(k, dtype=cp.float32), rng.standard_normal(k, dtype=cp.float32)
        w = cp.outer(wy, wx).astype(cp.float32)  # rank one, so the separable path computes the same filter
        w_host = cp.asnumpy(w)
        n = k * k + 1
        g = gamma(n, unit_roundoff(np.float32)) + gamma(n, unit_roundoff(np.float64))
        for mode in args.modes:
            ref = cnd.correlate(x64, w.astype(cp.float64), mode=mode, cval=0.0)
            bound = cnd.correlate(ax64, cp.abs(w).astype(cp.float64), mode=mode, cval=0.0) * g * (1 + 1e-6)
            problem, kw = f"{s}² {k}x{k} {mode}", dict(nbytes=2 * x.nbytes, x=k)

            def check(y=out):
                return BoundCheck(y, ref, bound, xp=cp)

            for label, wv in zip(DEFAULT_ROWS, (w, w_host)):  # what a user gets: no variant, no config
                out.fill(cp.nan)
                h.entry("filter2d", problem, label, lambda wv=wv: simt_tiles.correlate2d(x, wv, mode=mode, out=out),
                        check=check, **kw)
            for v in args.variants or simt_tiles.CONV2D_VARIANTS:
                # the rungs that compile the filter's values in get them as NumPy (from a device
                # filter they would copy it back: a synchronising transfer every call)
                wv = w_host if v in CONSTANT_FILTER_VARIANTS else w
                out.fill(cp.nan)
                h.entry("filter2d", problem, v, lambda v=v, wv=wv: simt_tiles.correlate2d(
                    x, wv, mode=mode, out=out, variant=v), check=check, **kw)
                if CONV2D_RUNGS[v].bind.host_weights:  # k10: kernel parameters too
                    out.fill(cp.nan)
                    h.entry("filter2d", problem, f"{v} (NumPy filter)", lambda v=v: simt_tiles.correlate2d(
                        x, w_host, mode=mode, out=out, variant=v), check=check, **kw)
            if mode == "constant" or args.k05_all_modes:  # register tiles: loads per output vs registers
                for rung, Config, shapes in (("k05_register_tile_2d", K05Config, args.k05_shapes),
                                             ("k07_vectorized", K07Config, args.k07_shapes),
                                             ("k08_prefetched", K08Config, args.k08_shapes),
                                             ("k09_async_copy", K09Config, args.k09_shapes),
                                             ("k10_runtime_weights", K10Config, args.k10_shapes)):
                    for shape in shapes:
                        fields = dict(zip(SHAPE_FIELDS, map(int, shape.split("x"))))
                        cfg = Config(**fields)
                        out.fill(cp.nan)
                        label = (f"{rung} {cfg.block_x}x{cfg.block_y} rx={cfg.rx} ry={cfg.ry}"
                                 + "".join(f" {k}={v}" for k, v in fields.items() if k in SHAPE_FIELDS[4:]))
                        h.entry("filter2d", problem, label,
                                lambda cfg=cfg, rung=rung: simt_tiles.correlate2d(x, w_host, mode=mode, out=out,
                                                                                  variant=rung, config=cfg),
                                check=check, **kw)
            if separable is not None:
                out.fill(cp.nan)
                # the separable bound: two passes of k taps; Σ|wy||wx||x| is the same sum as above
                g_sep = 2 * gamma(k + 1, unit_roundoff(np.float32)) + gamma(n, unit_roundoff(np.float64))
                h.entry("filter2d", problem, "separable (wy, wx)",
                        lambda: separable(x, wy, wx, mode=mode, out=out),
                        check=lambda: BoundCheck(out, ref, bound / g * g_sep, xp=cp), **kw)
                for bx, by, rx, ry in (K06_SWEEP if mode == "constant" and not args.no_separable_sweep else ()):
                    cfg = K06Config(block_x=bx, block_y=by, rx=rx, ry=ry)
                    out.fill(cp.nan)
                    h.entry("filter2d", problem, f"separable k06 {bx}x{by} rx={rx} ry={ry}",
                            lambda cfg=cfg: separable(x, wy, wx, mode=mode, out=out,
                                                      variant="k06_separable_fused", config=cfg),
                            check=lambda: BoundCheck(out, ref, bound / g * g_sep, xp=cp), **kw)
            h.entry("filter2d", problem, "cupyx correlate", lambda: cnd.correlate(x, w, mode=mode, output=out),
                    check=check, kind="peer", **kw)
            if mode == "constant" and k % 2:
                tx, tw = torch.as_tensor(x, device="cuda")[None, None], torch.as_tensor(w, device="cuda")[None, None]
                h.entry("filter2d", problem, "torch conv2d (cuDNN)", lambda: F.conv2d(tx, tw, padding=k // 2),
                        check=lambda: check(cp.asarray(F.conv2d(tx, tw, padding=k // 2)[0, 0])), kind="peer", **kw)
            if tile is not None:
                h.entry("filter2d", problem, "cuTile correlate2d",
                        lambda: tile.correlate2d(x, w, mode=mode, out=out),
                        check=lambda: check(tile.correlate2d(x, w, mode=mode)), kind="tile", **kw)
            ref = bound = None
            cp.get_default_memory_pool().free_all_blocks()


def nchw(h, cp, args) -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F

    try:
        # deferred: loads Numba (backend choice first)
        from simt_tiles.kernels.conv_nchw import CONV_NCHW_VARIANTS, DEPTHWISE_VARIANT, conv2d_nchw
    except ImportError as exc:
        print(f"nchw: simt_tiles.conv2d_nchw not available ({exc})", flush=True)
        CONV_NCHW_VARIANTS, DEPTHWISE_VARIANT, conv2d_nchw = (), None, None
    # these are dense layers: the depthwise rung takes none (benchmarks/lab/conv_issue33.py times it)
    dense_variants = tuple(v for v in CONV_NCHW_VARIANTS if v != DEPTHWISE_VARIANT)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(5)
    for n, c, hh, ww in NCHW_PROBLEMS:
        k, pad = 3, 1
        x = torch.randn((n, c, hh, ww), device="cuda", generator=gen)
        w = torch.randn((c, c, k, k), device="cuda", generator=gen) / (c * k * k) ** 0.5
        b = torch.randn(c, device="cuda", generator=gen)
        ref = F.conv2d(x.double(), w.double(), b.double(), padding=pad)
        terms = c * k * k + 1
        g = gamma(terms, unit_roundoff(np.float32)) + gamma(terms, unit_roundoff(np.float64))
        bound = (F.conv2d(x.double().abs(), w.double().abs(), b.double().abs(), padding=pad) * g * (1 + 1e-6))
        ref_c, bound_c = cp.asarray(ref), cp.asarray(bound)
        out = torch.empty_like(ref, dtype=torch.float32)
        flops = 2 * n * c * ref.shape[2] * ref.shape[3] * c * k * k
        problem, kw = f"N{n} C{c} {hh}x{ww} 3x3 p1", dict(flops=flops, x=hh)

        def check(y=out):
            return BoundCheck(cp.asarray(y), ref_c, bound_c, xp=cp)

        for v in dense_variants:
            out.fill_(float("nan"))
            h.entry("nchw", problem, v, lambda v=v: conv2d_nchw(x, w, bias=b, padding=pad, out=out, variant=v),
                    check=check, **kw)
        h.entry("nchw", problem, "torch conv2d (cuDNN)", lambda: F.conv2d(x, w, b, padding=pad),
                check=lambda: check(F.conv2d(x, w, b, padding=pad)), kind="peer", **kw)
        torch.backends.cudnn.allow_tf32 = True
        try:
            # TF32 keeps 10 mantissa bits of each operand: ≤ 2·TF32_U more per product than FP32
            h.entry("nchw", problem, "torch conv2d (cuDNN TF32)", lambda: F.conv2d(x, w, b, padding=pad),
                    check=lambda: BoundCheck(cp.asarray(F.conv2d(x, w, b, padding=pad)), ref_c,
                                             bound_c * ((g + 2 * TF32_U) / g), xp=cp), kind="peer",
                    precision="tf32", **kw)
        finally:
            torch.backends.cudnn.allow_tf32 = False
        x = w = b = ref = bound = ref_c = bound_c = out = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
