"""Run every non-matmul kernel once per ragged shape and check it: the workload for compute-sanitizer.

    compute-sanitizer --tool memcheck  python3 benchmarks/lab/run_patterns_once.py
    compute-sanitizer --tool racecheck python3 benchmarks/lab/run_patterns_once.py [--only conv2d softmax]

Covers softmax, reduce, vector_add, bias_relu, the conv2d ladder (every mode,
odd/even/oversized filters), the separable path and the NCHW layer when
present, all with their "default" (GPU) configs on shapes that are not
multiples of any tile.  Outputs start NaN-poisoned; each result is checked
against its reference and bound.  (run_rungs_once.py does the same for matmul.)
Exits non-zero on any failed check.
"""

from __future__ import annotations

import argparse
import sys

import _once  # noqa: E402  (the checkout on sys.path)
import numpy as np  # noqa: E402

from simt_tiles import _probe  # noqa: E402

LADDERS = ("softmax", "reduce", "elementwise", "conv2d", "separable", "conv_nchw")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--only", nargs="+", default=list(LADDERS), choices=LADDERS)
    p.add_argument("--conv-variants", nargs="+", default=None,
                   help="conv2d rungs to check (default: all; a sanitizer run of all exceeds one device call)")
    p.add_argument("--conv-shapes", nargs="+", default=None, metavar="HxW:KHxKW",
                   help="conv2d cases to check, e.g. 61x404:7x7 (default: all)")
    args = p.parse_args(argv)
    _probe.select_backend()

    import simt_tiles
    from simt_tiles.bounds import check_within
    from simt_tiles.kernels.softmax.reference import softmax_reference

    rng = np.random.default_rng(0)
    tally = _once.Tally("run_patterns_once")
    report = tally.check

    if "softmax" in args.only:
        # (3, 30001) and (3, 32768): k05 with > 48 KiB of dynamic shared memory (ragged and full)
        for shape in ((1, 1), (3, 33), (5, 1000), (2, 4097), (3, 30001), (3, 32768), (7, 40000)):
            x = rng.standard_normal(shape).astype(np.float32)
            ref, bound = softmax_reference(x)
            for v in (*simt_tiles.SOFTMAX_VARIANTS, None):
                try:
                    chk = check_within(simt_tiles.softmax(x, variant=v), ref, bound)
                except simt_tiles.ConfigError as exc:  # a row too long for the rung: said, not run
                    print(f"softmax {v} {shape} skipped: {exc}", flush=True)
                    continue
                report(f"softmax {v} {shape}", chk.passed, repr(chk))

    if "reduce" in args.only:
        for shape in ((1,), (1000,), (2**20 + 3,), (33, 1025)):
            x = rng.standard_normal(shape).astype(np.float32)
            for op, fn in (("sum", np.sum), ("max", np.max), ("min", np.min)):
                for axis in (None, -1):
                    got = simt_tiles.reduce(x, op, axis=axis)
                    want = fn(x.astype(np.float64), axis=axis)
                    tol = 0 if op != "sum" else 1e-6 * np.sum(np.abs(x.astype(np.float64)), axis=axis)
                    report(f"reduce {op} {shape} axis={axis}", bool(np.all(np.abs(got - want) <= tol + 1e-30)))

    if "elementwise" in args.only:
        for n in (1, 1000, 2**20 + 3):
            a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            for v in simt_tiles.VECTOR_ADD_VARIANTS:
                report(f"vector_add {v} {n}", bool(np.array_equal(simt_tiles.vector_add(a, b, variant=v), a + b)))
        for shape in ((1, 1), (33, 65), (130, 1027)):
            x = rng.standard_normal(shape).astype(np.float32)
            bias = rng.standard_normal(shape[1]).astype(np.float32)
            report(f"bias_relu {shape}", bool(np.array_equal(simt_tiles.bias_relu(x, bias), np.maximum(x + bias, 0))))

    if "conv2d" in args.only:
        from simt_tiles.kernels.conv2d import VECTOR_VARIANTS
        from simt_tiles.kernels.conv2d.reference import correlate2d_reference

        # (97, 401) 5×5: k05's default tile (24 × 128) has interior blocks there (the unchecked loads);
        # (61, 404) 7×7 and 4×6: k07's vector loads and stores (width a multiple of 4, interior blocks)
        cases = (((37, 53), (3, 3)), ((37, 53), (4, 2)), ((1, 1), (3, 3)), ((61, 29), (7, 7)),
                 ((5, 6), (9, 8)), ((97, 401), (5, 5)), ((61, 404), (7, 7)), ((61, 404), (4, 6)))
        named = {"{}x{}:{}x{}".format(*shape, *fshape): (shape, fshape) for shape, fshape in cases}
        unknown = set(args.conv_shapes or ()) - set(named)
        if unknown:
            p.error(f"--conv-shapes: unknown {sorted(unknown)}; expected some of {list(named)}")
        for shape, fshape in [named[c] for c in args.conv_shapes] if args.conv_shapes else cases:
            img = rng.standard_normal(shape).astype(np.float32)
            w = rng.standard_normal(fshape).astype(np.float32)
            for mode in ("reflect", "constant", "nearest", "mirror", "wrap"):
                ref, bound = correlate2d_reference(img, w, mode, 0.5)
                for v in args.conv_variants or simt_tiles.CONV2D_VARIANTS:
                    chk = check_within(simt_tiles.correlate2d(img, w, mode=mode, cval=0.5, variant=v), ref, bound)
                    report(f"correlate2d {v} {shape} {fshape} {mode}", chk.passed, repr(chk))
        # the vector rungs on arrays whose data do not start 16-byte aligned: their scalar paths
        import cupy as cp

        img = rng.standard_normal((61, 404)).astype(np.float32)
        w = rng.standard_normal((7, 7)).astype(np.float32)
        ref, bound = correlate2d_reference(img, w, "reflect", 0.0)
        x = cp.empty(img.size + 1, np.float32)[1:].reshape(img.shape)
        x[...] = cp.asarray(img)
        for v in args.conv_variants or simt_tiles.CONV2D_VARIANTS:
            if v not in VECTOR_VARIANTS:
                continue
            y = cp.full(img.size + 1, np.nan, np.float32)[1:].reshape(img.shape)
            simt_tiles.correlate2d(x, w, out=y, variant=v)
            chk = check_within(cp.asnumpy(y), ref, bound)
            report(f"correlate2d {v} misaligned (61, 404) 7x7", chk.passed, repr(chk))

    if "separable" in args.only and "correlate1d" in dir(simt_tiles):
        import scipy.ndimage as ndi

        for shape, k in (((37, 53), 3), ((1, 1), 5), ((61, 29), 8)):
            img = rng.standard_normal(shape).astype(np.float64)
            w = rng.standard_normal(k)
            for mode in ("reflect", "constant", "wrap"):
                for axis in (0, 1):
                    got = simt_tiles.correlate1d(img, w, axis=axis, mode=mode)
                    want = ndi.correlate1d(img, w, axis=axis, mode=mode)
                    tol = 4 * k * 2.0**-53 * ndi.correlate1d(np.abs(img), np.abs(w), axis=axis, mode=mode)
                    report(f"correlate1d {shape} {k} {mode} axis={axis}", bool(np.all(np.abs(got - want) <= tol)))

    if "conv_nchw" in args.only and "conv2d_nchw" in dir(simt_tiles):
        from simt_tiles.kernels.conv_nchw import CONV_NCHW_VARIANTS

        for (n, ci, co, h, w_), (kh, kw), pad in (((2, 3, 5, 9, 11), (3, 3), 1), ((1, 1, 1, 1, 1), (3, 3), 1),
                                                   ((3, 17, 33, 15, 14), (3, 3), 1), ((1, 4, 2, 6, 7), (2, 4), 0)):
            # float32 operands; the reference computes with their exact values in float64
            x32 = rng.standard_normal((n, ci, h, w_)).astype(np.float32)
            w32 = rng.standard_normal((co, ci, kh, kw)).astype(np.float32)
            b32 = rng.standard_normal(co).astype(np.float32)
            x, wt, b = (t.astype(np.float64) for t in (x32, w32, b32))
            ho, wo = h + 2 * pad - kh + 1, w_ + 2 * pad - kw + 1
            xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
            want = np.zeros((n, co, ho, wo)) + b[None, :, None, None]
            absw = np.zeros_like(want) + np.abs(b)[None, :, None, None]
            for a in range(kh):
                for c in range(kw):
                    win = xp[:, :, a:a + ho, c:c + wo]
                    want += np.einsum("nihw,oi->nohw", win, wt[:, :, a, c])
                    absw += np.einsum("nihw,oi->nohw", np.abs(win), np.abs(wt[:, :, a, c]))
            tol = 2 * (ci * kh * kw + 1) * 2.0**-24 * absw
            for v in CONV_NCHW_VARIANTS:
                got = simt_tiles.conv2d_nchw(x32, w32, bias=b32, padding=pad, variant=v)
                report(f"conv2d_nchw {v} {(n, ci, co, h, w_)} {(kh, kw)} p{pad}",
                       bool(np.all(np.abs(got - want) <= tol)))

    return tally.exit_code()


if __name__ == "__main__":
    sys.exit(main())
