"""One GPU pass over the CUDA Tile C++ counterparts (simt_tiles.tilecpp): the launch rule, the
parameter layout, every op checked against the family references and bounds on ragged shapes
(NumPy, CuPy and PyTorch operands), then checked and timed at the benchmark sizes.

    SIMT_TILES_CACHE_DIR=<folder holding tilecpp/<ver>-sm_90/*.cubin> python benchmarks/lab/tilecpp_gpu.py OUT.json

Timing: CuPy events around each call on the legacy default stream after an untimed 512 MiB fill
(GPU time only, cold L2), 3 warm-ups, median of 20.  Each op runs twice where it has an "_a16"
instantiation: with it (aligned operands, row lengths multiple of 4) and forced general.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import traceback

import cupy as cp
import numpy as np

from simt_tiles import tilecpp
from simt_tiles.bounds import TF32_U, BoundCheck, gamma, unit_roundoff
from simt_tiles.kernels.conv2d.reference import correlate2d_reference
from simt_tiles.kernels.matmul.reference import matmul_reference
from simt_tiles.kernels.softmax.reference import softmax_reference
from simt_tiles.tilecpp import _build, _launch

R: dict = {"env": {}, "launch_rule": {}, "params": {}, "checks": [], "timings": []}
PATH = "tilecpp.json"
U32 = unit_roundoff(np.float32)
rng = np.random.default_rng(20261130)


def note(kind, **kw):
    R[kind].append(kw) if isinstance(R[kind], list) else R[kind].update(kw)
    print(kind, json.dumps(kw, default=str), flush=True)
    with open(PATH, "w") as fh:  # as it goes: a run cut short still leaves its results
        json.dump(R, fh, indent=1, default=str)


def check(op, case, fn):
    try:
        ok, detail = fn()
    except Exception as exc:  # noqa: BLE001 - record and go on
        ok, detail = False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    note("checks", op=op, case=case, ok=bool(ok), detail=str(detail))


_FLUSH = None


def time_it(fn, reps=20, warmup=3):
    """GPU time of ``fn``: a 512 MiB fill is queued first (untimed), so the GPU is still busy
    with it while the call's Python runs (the events see GPU time only) and L2 starts cold."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = cp.empty(2**27, cp.float32)
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        _FLUSH.fill(0)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return statistics.median(ts), min(ts)


# --- matmul ------------------------------------------------------------------------------

def mm_bound(a, b, precision, xp=np):
    ref, bound = matmul_reference(a, b, xp=xp, precise=xp is np)
    if precision == "tf32":
        absprod = xp.abs(a.astype(xp.float64)) @ xp.abs(b.astype(xp.float64))
        bound = bound + absprod * (2 * TF32_U + TF32_U**2) * (1 + gamma(max(a.shape[1], 1), U32))
    return ref, bound


def mm_small(m, n, k, precision):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    got = tilecpp.matmul(a, b, out=out, precision=precision)
    ref, bound = mm_bound(a, b, precision)
    c = BoundCheck(got, ref, bound)
    return c.passed and got is out, repr(c)


def conv_small(h, w, kh, kw, mode):
    x = rng.standard_normal((h, w)).astype(np.float32)
    wt = rng.standard_normal((kh, kw)).astype(np.float32)
    got = tilecpp.correlate2d(x, wt, mode=mode, cval=1.5)
    ref, bound = correlate2d_reference(x, wt, mode, 1.5)
    c = BoundCheck(got, ref, bound)
    return c.passed, repr(c)


def softmax_small(m, n, special=False):
    x = rng.standard_normal((m, n)).astype(np.float32) * 10
    if special:
        x[0, : min(n, 5000)] = -np.inf  # a row whose first tile is all -inf
        if m > 1:
            x[1, :] = -np.inf  # a row of -inf: NaN, as scipy
        if m > 2:
            x[2, n // 2] = np.nan
    got = tilecpp.softmax(x)
    ref, bound = softmax_reference(x)
    nan_ok = bool(np.array_equal(np.isnan(got), np.isnan(ref)))
    fin = ~np.isnan(ref)
    ok = nan_ok and bool(np.all(np.abs(got[fin].astype(ref.dtype) - ref[fin]) <= bound[fin]))
    return ok, f"nan positions match: {nan_ok}"


def sum_bound(x, axis):
    xl = x.astype(np.longdouble)
    ref = xl.sum(axis=axis)
    absum = np.abs(xl).sum(axis=axis)
    n = x.size if axis is None else x.shape[-1]
    bound = U32 * np.abs(ref) + (gamma(max(n, 1), 2.0**-53) + gamma(max(n, 1), unit_roundoff(np.longdouble))) * absum
    return ref, bound * (1 + 1e-6)


def sum_small(shape, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    got = tilecpp.reduce_sum(x, axis=axis)
    ref, bound = sum_bound(x, axis)
    ok = bool(np.all(np.abs(np.asarray(got, np.longdouble) - ref) <= bound))
    return ok and np.shape(got) == np.shape(ref), f"got shape {np.shape(got)}"


def add_small(n):
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    return bool(np.array_equal(tilecpp.vector_add(a, b), a + b)), ""


def relu_small(m, n):
    x = rng.standard_normal((m, n)).astype(np.float32)
    x.flat[:: 7] = np.nan
    bias = rng.standard_normal(n).astype(np.float32)
    got, want = tilecpp.bias_relu(x, bias), np.maximum(x + bias, np.float32(0))
    return bool(np.array_equal(got, want, equal_nan=True)), ""


def main(path):
    global PATH
    PATH = path
    R["env"]["available"] = tilecpp.available()
    R["env"]["cubins"] = str(_build.built_dir())
    props = cp.cuda.runtime.getDeviceProperties(0)
    R["env"]["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    R["env"]["driver"] = cp.cuda.runtime.driverGetVersion()
    core = _launch._core()
    R["env"]["cuda.core"] = f"{core.__name__} {getattr(sys.modules.get('cuda.core'), '__version__', '?')}"
    print("env", R["env"], flush=True)

    # --- the launch rule: block (1,1,1), the cubin's REQNTID, max_threads_per_block --------
    d = _build.built_dir()
    n = 1_000_003
    a, b = cp.random.standard_normal(n, dtype=cp.float32), cp.random.standard_normal(n, dtype=cp.float32)
    infos = _launch.cubin_kernels(_build.cubin_path(d, "vector_add"))
    k = _launch._kernel(str(_build.cubin_path(d, "vector_add")), "vector_add")
    try:
        maxt = k.attributes.max_threads_per_block
        maxt = maxt() if callable(maxt) else int(maxt)
    except Exception:  # noqa: BLE001 - an older cuda.core: ask the driver
        from cuda.bindings import driver
        maxt = _launch._check(driver.cuKernelGetAttribute(
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.handle, driver.CUdevice(0)), "attr")
    for block in [(1, 1, 1), tuple(infos["vector_add"].reqntid), (maxt, 1, 1), (64, 1, 1)]:
        c = cp.full(n, cp.nan, cp.float32)
        try:
            _launch.launch(_build.cubin_path(d, "vector_add"), "vector_add", (math.ceil(n / 4096),),
                           a.data.ptr, b.data.ptr, c.data.ptr, n, block=block)
            cp.cuda.Device().synchronize()
            res = "correct" if bool(cp.array_equal(c, a + b)) else "WRONG"
        except Exception as exc:  # noqa: BLE001
            res = f"{type(exc).__name__}: {exc}"
        R["launch_rule"][str(block)] = res
    R["launch_rule"]["max_threads_per_block"] = maxt
    R["launch_rule"]["reqntid"] = {k: v.reqntid for k, v in infos.items()}
    print("launch_rule", R["launch_rule"], flush=True)

    # --- parameter layout: cuda.core's arguments_info vs SIGNATURES ------------------------
    for name, (stem, _types) in _launch.SIGNATURES.items():
        kk = _launch._kernel(str(_build.cubin_path(d, stem)), name)
        try:
            got = [(int(p.offset), int(p.size)) for p in kk.arguments_info]
        except Exception as exc:  # noqa: BLE001
            got = f"{type(exc).__name__}: {exc}"
        R["params"][name] = {"driver": got, "ours": _launch.param_layout(name), "ok": got == _launch.param_layout(name)}
    print("params ok:", all(v["ok"] for v in R["params"].values()), flush=True)

    # --- ragged shapes against the references, with and without the _a16 instantiations ------
    for aligned in [True, False][: 1 if "--quick" in sys.argv else 2]:
        tilecpp.USE_ALIGNED = aligned
        small_checks(aligned)
    tilecpp.USE_ALIGNED = False
    check("interop", "cupy and torch operands", kinds)

    # --- benchmark sizes: check, then time ---------------------------------------------------
    def bench(op, problem, fn, verify, *, flops=None, nbytes=None):
        for aligned in (True, False):
            tilecpp.USE_ALIGNED = aligned
            try:
                c = verify()
                ok = bool(c)
                med, mn = time_it(fn)
                row = dict(op=op, problem=problem, a16=aligned, ok=ok, check=repr(c), median_ms=med, min_ms=mn)
                if flops:
                    row["tflops"] = flops / med / 1e9
                if nbytes:
                    row["gbs"] = nbytes / med / 1e6
            except Exception as exc:  # noqa: BLE001
                row = dict(op=op, problem=problem, a16=aligned, ok=False, check=f"{type(exc).__name__}: {exc}")
            note("timings", **row)
        tilecpp.USE_ALIGNED = False

    return rest(bench, path)


def kinds():
    x = cp.random.standard_normal((70, 90), dtype=cp.float32)
    y = tilecpp.softmax(x)
    ok1 = isinstance(y, cp.ndarray) and bool(cp.allclose(y.sum(axis=1), 1, atol=1e-5))
    try:
        import torch
        t = torch.randn(70, 90, device="cuda")
        yt = tilecpp.softmax(t)
        ok2 = isinstance(yt, torch.Tensor) and bool(torch.allclose(yt, torch.softmax(t, 1), atol=1e-6))
    except ImportError:
        ok2 = True
    return ok1 and ok2, f"cupy {ok1}, torch {ok2}"


def small_checks(aligned):
    sfx = " a16" if aligned else ""
    for prec in ("fp32", "tf32"):
        for m, nn, kk_ in [(1, 1, 1), (65, 33, 17), (129, 200, 67), (0, 5, 3), (5, 0, 3), (4, 6, 0), (257, 131, 1000),
                           (128, 96, 100), (33, 20, 12), (200, 260, 516)]:
            check("matmul", f"{prec} {m}x{nn}x{kk_}{sfx}", lambda: mm_small(m, nn, kk_, prec))
    for mode in tilecpp.MODES:
        for h, w, kh, kw in [(37, 70, 3, 3), (33, 65, 5, 4), (5, 3, 7, 7), (1, 1, 2, 3), (70, 130, 1, 1)]:
            check("correlate2d", f"{mode} {h}x{w} k{kh}x{kw}{sfx}", lambda: conv_small(h, w, kh, kw, mode))
    for m, nn in [(1, 1), (17, 100), (3, 129), (5, 1025), (5, 5000), (2, 9000)]:
        check("softmax", f"{m}x{nn}{sfx}", lambda: softmax_small(m, nn))
    check("softmax", "specials 4x9000" + sfx, lambda: softmax_small(4, 9000, special=True))
    check("softmax", "specials 4x100" + sfx, lambda: softmax_small(4, 100, special=True))
    for shape, axis in [((0,), None), ((1,), None), ((4097,), None), ((1_000_003,), None), ((7, 3000), None),
                        ((7, 3000), -1), ((5, 0), -1), ((3, 4, 5), -1), ((9,), -1), ((1_000_000,), None),
                        ((9, 4096), -1), ((5, 8), None)]:
        check("reduce_sum", f"{shape} axis={axis}{sfx}", lambda: sum_small(shape, axis))
    for nn in (1, 4095, 4096, 4097, 1_000_000, 1_000_001):
        check("vector_add", f"{nn}{sfx}", lambda: add_small(nn))
    for m, nn in [(1, 1), (17, 300), (40, 513), (33, 1024)]:
        check("bias_relu", f"{m}x{nn}{sfx}", lambda: relu_small(m, nn))


def rest(bench, path):
    n = 2**28
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.empty_like(x)
    med, _ = time_it(lambda: cp.copyto(y, x))
    R["env"]["copy_2^28_gbs"] = 2 * x.nbytes / med / 1e6
    print("copy", R["env"]["copy_2^28_gbs"], flush=True)

    m = 4096
    A, B = cp.random.standard_normal((m, m), dtype=cp.float32), cp.random.standard_normal((m, m), dtype=cp.float32)
    C = cp.full((m, m), cp.nan, cp.float32)
    for prec in ("fp32", "tf32"):
        def v(prec=prec):
            C.fill(cp.nan)
            tilecpp.matmul(A, B, out=C, precision=prec)
            ref, bound = mm_bound(A, B, prec, xp=cp)
            return BoundCheck(C, ref, bound, xp=cp)
        bench("matmul", f"4096^3 {prec}", lambda prec=prec: tilecpp.matmul(A, B, out=C, precision=prec), v,
              flops=2 * m**3)
    A = B = C = None
    cp.get_default_memory_pool().free_all_blocks()

    import cupyx.scipy.ndimage as ndi
    s = 8192
    img = cp.random.standard_normal((s, s), dtype=cp.float32)
    O = cp.full_like(img, cp.nan)
    for kh, mode in [(3, "reflect"), (3, "constant"), (3, "wrap"), (5, "reflect"), (7, "reflect")]:
        w = rng.standard_normal((kh, kh)).astype(np.float32)
        wd = cp.asarray(w)
        def v(mode=mode, w=w, wd=wd, kh=kh):
            O.fill(cp.nan)
            tilecpp.correlate2d(img, wd, mode=mode, out=O)
            ref = ndi.correlate(img.astype(cp.float64), wd.astype(cp.float64), mode=mode, cval=0.0)
            absref = ndi.correlate(cp.abs(img).astype(cp.float64), cp.abs(wd).astype(cp.float64), mode=mode)
            nt = kh * kh + (mode == "constant")
            return BoundCheck(O, ref, absref * (gamma(nt, U32) + 2 * gamma(nt, 2.0**-53)), xp=cp)
        bench("correlate2d", f"8192^2 {kh}x{kh} {mode}", lambda mode=mode, wd=wd: tilecpp.correlate2d(img, wd, mode=mode, out=O),
              v, nbytes=2 * img.nbytes)
    img = O = None
    cp.get_default_memory_pool().free_all_blocks()

    for cols in (256, 1024, 4096, 16384, 32768):
        X = cp.random.standard_normal((16384, cols), dtype=cp.float32)
        Y = cp.full_like(X, cp.nan)
        def v(X=X, Y=Y):
            Y.fill(cp.nan)
            tilecpp.softmax(X, out=Y)
            ref, bound = softmax_reference(X, xp=cp)
            return BoundCheck(Y, ref, bound, xp=cp)
        bench("softmax", f"16384x{cols}", lambda X=X, Y=Y: tilecpp.softmax(X, out=Y), v, nbytes=2 * X.nbytes)
        X = Y = None
        cp.get_default_memory_pool().free_all_blocks()

    out0 = cp.full((), cp.nan, cp.float32)
    def v_sum():
        got = tilecpp.reduce_sum(x, out=out0)
        ref = float(x.astype(cp.float64).sum())
        absum = float(cp.abs(x).astype(cp.float64).sum())
        bound = U32 * abs(ref) + 2 * gamma(n, 2.0**-53) * absum
        return BoundCheck(cp.asarray(got).reshape(1), cp.asarray([ref]), cp.asarray([bound]), xp=cp)
    bench("reduce_sum", "2^28 whole", lambda: tilecpp.reduce_sum(x, out=out0), v_sum, nbytes=x.nbytes)
    x2 = x.reshape(16384, 16384)
    r2 = cp.full(16384, cp.nan, cp.float32)
    def v_rows():
        tilecpp.reduce_sum(x2, axis=-1, out=r2)
        ref = x2.astype(cp.float64).sum(axis=1)
        absum = cp.abs(x2).astype(cp.float64).sum(axis=1)
        return BoundCheck(r2, ref, U32 * cp.abs(ref) + 2 * gamma(16384, 2.0**-53) * absum, xp=cp)
    bench("reduce_sum", "16384x16384 axis=-1", lambda: tilecpp.reduce_sum(x2, axis=-1, out=r2), v_rows, nbytes=x.nbytes)

    b2 = cp.random.standard_normal(n, dtype=cp.float32)
    c2 = cp.full_like(x, cp.nan)
    def v_add():
        c2.fill(cp.nan)
        tilecpp.vector_add(x, b2, out=c2)
        return bool(cp.array_equal(c2, x + b2))
    bench("vector_add", "2^28", lambda: tilecpp.vector_add(x, b2, out=c2), v_add, nbytes=3 * x.nbytes)
    bias = cp.random.standard_normal(16384, dtype=cp.float32)
    y2 = c2.reshape(16384, 16384)
    def v_relu():
        y2.fill(cp.nan)
        tilecpp.bias_relu(x2, bias, out=y2)
        return bool(cp.array_equal(y2, cp.maximum(x2 + bias, 0)))
    bench("bias_relu", "16384x16384", lambda: tilecpp.bias_relu(x2, bias, out=y2), v_relu, nbytes=2 * x.nbytes)

    R["env"]["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(path, "w") as fh:
        json.dump(R, fh, indent=1, default=str)
    bad = [c for c in R["checks"] if not c["ok"]] + [t for t in R["timings"] if not t["ok"]]
    print(f"\n{len(R['checks'])} checks, {len(bad)} failed (checks + timed)")
    for t in R["timings"]:
        extra = f"{t.get('tflops', 0):.1f} TFLOP/s" if "tflops" in t else f"{t.get('gbs', 0):.0f} GB/s"
        print(f"{t['op']:12s} {t['problem']:24s} a16={t['a16']!s:5s} ok={t['ok']} "
              f"{t.get('median_ms', float('nan')):.3f} ms {extra}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(next((a for a in sys.argv[1:] if not a.startswith("--")), "tilecpp.json")))
