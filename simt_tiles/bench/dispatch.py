"""Host time per call of every public function (the launch path, not the kernels), beside CuPy/PyTorch.

    simt-tiles bench dispatch [--calls 300] [--reps 3] [--out DIR]

For each public function on a small problem, with CuPy, PyTorch and Numba device arrays and
``out=`` given: after three warm-up calls, ``--calls`` calls back to back, then one
synchronisation (``--reps`` such loops, the median reported).  ``host_us`` is the wall time of the calls divided by their number (the
launches are asynchronous, so this is what the caller's thread spends per call); ``wall_us``
includes the final synchronisation (it exceeds ``host_us`` where the GPU is the slower side, unless
the launch queue filled and held the host back).  ``gpu_us`` is the device's own time per call:
50 calls enqueued behind a kernel that keeps the GPU asleep for longer than enqueueing them takes,
CUDA events after the sleep and after the last call (back to back on the GPU, whatever the host's
pace; none where the sleep did not cover the enqueueing).  A call keeps up with a pipeline at
max(host, GPU) µs.
Each function is timed with launch plans (the default, :mod:`simt_tiles.launch`) and on the
checked path (``SIMT_TILES_FAST_LAUNCH=0``), beside CuPy/PyTorch calls doing the same work (named
``cupy.<function>`` / ``torch.<function>``: ``cupy.add``, ``torch.relu(x + b)``, ``cupy.sum``,
``cupyx.scipy.ndimage.correlate``, ``torch.nn.functional.conv2d``, ... see :func:`_peers`) and a bare
Numba launch of a one-line kernel.  Every simt_tiles result is compared with its NumPy
reference, and the plan's result with the checked path's (bit for bit), before it is timed.
The ``matmul 256^3 [...]`` rows (Numba arrays, no peers) time the candidate configs for a small
product — the split-K rule's choice beside unsplit and smaller tiles — on host and GPU: the
measurement that decides what the shipped rule should pick at that size (:func:`matmul_choice`).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable

import numpy as np

import simt_tiles
from ..machine import describe
from .common import add_output_arguments, device_slug, main_of, write_outputs

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "host time per call of every public function (CuPy/PyTorch/Numba arrays) vs peers"

KINDS = ("cupy", "torch", "numba")


@dataclasses.dataclass(frozen=True)
class Case:
    """One public function on one small problem: NumPy inputs, keyword arguments, the output's
    shape and the NumPy reference."""

    name: str
    function: str  # attribute of simt_tiles
    inputs: Callable  # rng -> tuple of NumPy arrays (positional), dict of NumPy keyword arrays
    kwargs: dict
    reference: Callable  # (*inputs, **kw arrays) -> NumPy result
    rtol: float = 1e-4
    kinds: tuple = KINDS  # the array kinds it is timed with
    peers: bool = True  # time the CuPy/PyTorch equivalents beside it


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _conv_nchw(x, w, bias):
    n, c, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, co, h + 2 - kh + 1, wd + 2 - kw + 1), x.dtype)
    for a in range(kh):
        for b in range(kw):
            out += np.einsum("oc,nchw->nohw", w[:, :, a, b], xp[:, :, a:a + out.shape[2], b:b + out.shape[3]])
    return out + bias[None, :, None, None]


def _ndimage(name):
    def ref(image, weights=None, wy=None, wx=None, **kw):
        import scipy.ndimage as ndi

        if name == "separable":
            return ndi.correlate(image, np.outer(wy, wx), mode="reflect")
        if name == "correlate1d":
            return ndi.correlate1d(image, weights, axis=0, mode="reflect")
        return getattr(ndi, name)(image, weights, mode="reflect")

    return ref


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


#: small problems: the host path is what is measured
CASES: tuple[Case, ...] = (
    Case("vector_add 4096", "vector_add", lambda r: ((_f32(r, 4096), _f32(r, 4096)), {}), {},
         lambda a, b: a + b),
    Case("bias_relu 256x256", "bias_relu", lambda r: ((_f32(r, 256, 256), _f32(r, 256)), {}), {},
         lambda x, b: np.maximum(x + b, 0)),
    Case("softmax 256x256", "softmax", lambda r: ((_f32(r, 256, 256),), {}), {}, _softmax),
    Case("reduce sum 4096", "reduce", lambda r: ((_f32(r, 4096),), {}), {}, lambda x: np.sum(x, dtype=np.float64)),
    Case("reduce max 256x256 axis -1", "reduce", lambda r: ((_f32(r, 256, 256),), {}), {"op": "max", "axis": -1},
         lambda x: x.max(axis=-1)),
    Case("matmul 256^3 (default config)", "matmul", lambda r: ((_f32(r, 256, 256), _f32(r, 256, 256)), {}), {},
         lambda a, b: a.astype(np.float64) @ b, rtol=1e-3),
    Case("correlate2d 256^2 3x3", "correlate2d", lambda r: ((_f32(r, 256, 256), _f32(r, 3, 3)), {}), {},
         _ndimage("correlate")),
    Case("convolve2d 256^2 3x3", "convolve2d", lambda r: ((_f32(r, 256, 256), _f32(r, 3, 3)), {}), {},
         _ndimage("convolve")),
    Case("correlate1d 256^2 5 axis 0", "correlate1d", lambda r: ((_f32(r, 256, 256), _f32(r, 5)), {}),
         {"axis": 0}, _ndimage("correlate1d")),
    Case("correlate_separable 256^2 3+3", "correlate_separable",
         lambda r: ((_f32(r, 256, 256),), {"wy": _f32(r, 3), "wx": _f32(r, 3)}), {}, _ndimage("separable")),
    Case("correlate 64^3 3x3x3", "correlate", lambda r: ((_f32(r, 64, 64, 64), _f32(r, 3, 3, 3)), {}), {},
         _ndimage("correlate")),
    Case("convolve 64^3 3x3x3", "convolve", lambda r: ((_f32(r, 64, 64, 64), _f32(r, 3, 3, 3)), {}), {},
         _ndimage("convolve")),
    Case("conv2d_nchw 2x8x16x16 3x3 pad 1", "conv2d_nchw",
         lambda r: ((_f32(r, 2, 8, 16, 16), _f32(r, 8, 8, 3, 3)), {"bias": _f32(r, 8)}), {"padding": 1},
         _conv_nchw, rtol=1e-3),
)


#: k11 configs timed at 256³ (Numba arrays): ``(label, preset, splits)``; the first is the split-K rule's
#: choice there (128×128 tiles, 4 of them, K in 2 splits: 8 blocks and a second kernel)
MATMUL_CONFIGS = (
    ("default, 2 splits (the rule)", "default", 2),
    ("default, unsplit", "default", 1),
    ("64x64, unsplit", "64x64", 1),
    ("64x64, 2 splits", "64x64", 2),
    ("64x64, 4 splits", "64x64", 4),  # (64 K per split: below the rule's MIN_SPLIT_K, timed anyway)
    ("128x64, unsplit", "128x64", 1),
)


def matmul_cases(size: int = 256) -> tuple[Case, ...]:
    """:data:`MATMUL_CONFIGS` at ``size``³ as cases (the variant and config passed explicitly)."""
    import dataclasses as dc

    # deferred: loads Numba (backend choice first)
    from ..kernels.matmul import get_rung

    rung = get_rung("k11_generated_split_k")
    out = []
    for label, preset, splits in MATMUL_CONFIGS:
        cfg = dc.replace(rung.presets[preset], splits=splits)
        out.append(Case(f"matmul {size}^3 [{label}]", "matmul",
                        lambda r, size=size: ((_f32(r, size, size), _f32(r, size, size)), {}),
                        {"variant": rung.name, "config": cfg}, lambda a, b: a.astype(np.float64) @ b,
                        rtol=1e-3, kinds=("numba",), peers=False))
    return tuple(out)


def to_kind(x: np.ndarray, kind: str):
    """A device copy of ``x`` as a CuPy array, a PyTorch CUDA tensor or a Numba device array."""
    if kind == "cupy":
        import cupy

        return cupy.asarray(x)
    if kind == "torch":
        import torch

        return torch.from_numpy(x.copy(order="C")).cuda()  # (np.ascontiguousarray makes a 0-D array 1-D)
    from numba import cuda

    return cuda.to_device(x)


def to_host(x) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        return x.cpu().numpy()
    if hasattr(x, "get"):
        return x.get()
    return x.copy_to_host()


def empty_like_kind(shape, dtype, kind: str):
    return to_kind(np.full(shape, np.nan, dtype), kind)


def prepared(case: Case, kind: str, seed: int = 0):
    """``(call, out, host inputs)``: ``call()`` runs the case on ``kind`` arrays into ``out``."""
    pos, kw = case.inputs(np.random.default_rng(seed))
    ref = case.reference(*pos, **kw)
    dpos = tuple(to_kind(x, kind) for x in pos)
    dkw = {k: to_kind(v, kind) for k, v in kw.items()}
    out = empty_like_kind(np.shape(ref), pos[0].dtype, kind)
    fn = getattr(simt_tiles, case.function)
    return (lambda: fn(*dpos, **dkw, **case.kwargs, out=out)), out, (pos, kw, ref), (dpos, dkw)


def sync():
    from numba import cuda

    cuda.synchronize()


def per_call(call: Callable, calls: int, reps: int = 1) -> tuple[float, float]:
    """``(host µs, wall µs)`` per call: ``reps`` loops of ``calls`` calls (after three warm-up
    calls), one synchronisation after each loop; the median loop."""
    for _ in range(3):
        call()
    sync()
    host, wall = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        wall.append((t2 - t0) / calls * 1e6)
    return float(np.median(host)), float(np.median(wall))


def gpu_per_call(call: Callable, host_us: float, calls: int = 50, reps: int = 3) -> float | None:
    """GPU µs per call, the median of ``reps``: ``calls`` calls enqueued on the legacy default stream
    (every kind's current stream here) behind :func:`._sleep.sleep`, held for three times the host's
    enqueueing time plus 2 ms, so the calls run back to back; CUDA events after the sleep and after
    the last call.  A loop whose enqueueing outlasted the sleep (``nanosleep`` may wake early) is
    run again with a 4× longer sleep, three times at most; then None (the host paced it)."""
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from ._sleep import sleep

    sleep[1, 32](1)  # compiled before timing
    sync()
    hold = int(3 * calls * host_us) + 2000
    out = []
    tries = 0
    while len(out) < reps:
        start, e0, e1 = cuda.event(), cuda.event(), cuda.event()
        t0 = time.perf_counter()
        start.record()
        sleep[1, 32](hold)
        e0.record()
        for _ in range(calls):
            call()
        e1.record()
        enqueue_ms = (time.perf_counter() - t0) * 1e3
        e1.synchronize()
        if enqueue_ms >= start.elapsed_time(e0):
            tries += 1
            if tries > 3:
                return None
            hold *= 4
            continue
        out.append(e0.elapsed_time(e1) * 1e3 / calls)
    return float(np.median(out))


def _peers(case: Case, kind: str, dpos, dkw, out):
    """``{name: call}``: what a CuPy or PyTorch user calls for the same work (where one exists)."""
    fn = case.function
    if kind == "cupy":
        import cupy
        import cupyx.scipy.ndimage as cndi

        p = {
            "vector_add": lambda: cupy.add(*dpos, out=out),
            "softmax": None,
            "matmul": lambda: cupy.matmul(*dpos, out=out),
            "reduce": (lambda: cupy.sum(dpos[0], out=out)) if not case.kwargs else
                      (lambda: cupy.max(dpos[0], axis=-1, out=out)),
            "correlate2d": lambda: cndi.correlate(dpos[0], dpos[1], output=out, mode="reflect"),
            "convolve2d": lambda: cndi.convolve(dpos[0], dpos[1], output=out, mode="reflect"),
            "correlate1d": lambda: cndi.correlate1d(dpos[0], dpos[1], axis=0, output=out, mode="reflect"),
            "correlate": lambda: cndi.correlate(dpos[0], dpos[1], output=out, mode="reflect"),
            "convolve": lambda: cndi.convolve(dpos[0], dpos[1], output=out, mode="reflect"),
        }.get(fn)
        return {f"cupy.{fn}": p} if p else {}
    if kind == "torch":
        import torch
        import torch.nn.functional as F

        p = {
            "vector_add": lambda: torch.add(*dpos, out=out),
            "bias_relu": lambda: torch.relu(dpos[0] + dpos[1]),
            "softmax": lambda: torch.softmax(dpos[0], -1),
            "matmul": lambda: torch.matmul(*dpos, out=out),
            "reduce": (lambda: torch.sum(dpos[0])) if not case.kwargs else (lambda: torch.amax(dpos[0], -1)),
            "conv2d_nchw": lambda: F.conv2d(dpos[0], dpos[1], dkw["bias"], padding=1),
        }.get(fn)
        return {f"torch.{fn}": p} if p else {}
    return {}


def _bare_numba():
    """A one-line Numba kernel's launch with Numba and with CuPy arrays (4096 floats)."""
    import cupy
    from numba import cuda

    @cuda.jit
    def add(a, b, c):
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    rows = {}
    for kind in ("numba", "cupy"):
        a, b, c = (to_kind(np.ones(4096, np.float32), kind) for _ in range(3))
        rows[kind] = lambda a=a, b=b, c=c: add[16, 256](a, b, c)
    del cupy
    return rows


def check(case: Case, kind: str) -> str:
    """'' when the plan's result equals the checked path's bit for bit and the reference within
    tolerance; else what differs."""
    # deferred: loads Numba (backend choice first)
    from .. import launch

    call, out, (pos, kw, ref), _ = prepared(case, kind)
    launch.set_enabled(False)
    call()
    slow = to_host(out).copy()
    launch.set_enabled(True)
    for _ in range(3):  # record, then replay twice
        call()
    fast = to_host(out)
    if not np.array_equal(slow, fast, equal_nan=True):
        return f"plan result differs from the checked path's (max |Δ| {np.nanmax(np.abs(slow - fast))})"
    if not np.allclose(fast, ref, rtol=case.rtol, atol=case.rtol * max(1.0, float(np.abs(ref).max()))):
        return f"differs from the reference (max |Δ| {np.max(np.abs(fast - ref))})"
    return ""


#: the cases whose repeated call is taken apart by :func:`host_breakdown`
BREAKDOWN = ("reduce sum 4096", "matmul 256^3 (default config)")


def host_breakdown(case: Case, kind: str, n: int = 100) -> dict:
    """Where a repeated call's host time goes (µs, the best of 7 loops of ``n``, the device
    synchronised before each: few enough launches that a full launch queue does not pace the
    host with the GPU's time): the whole call;
    reading every array's signature and pointer; the framework's current stream; the plan's
    replay (aliasing check and launches); each launch alone (the driver call with its pointer
    patches).  The rest of the call is the wrapper's own Python (the key, the plan lookup)."""
    import timeit

    # deferred: loads Numba (backend choice first)
    from .. import launch

    call, *_ = prepared(case, kind)
    launch.clear()
    call()
    (plan,) = launch._PLANS.values()
    sigs = [launch.array_signature(v) for v in (*_args_of(call),)]
    arrays = [v for v, sg in zip(_args_of(call), sigs) if sg is not None]
    ptrs = [launch.array_signature(a)[2] for a in arrays]

    def best(fn):
        return min(timeit.repeat(fn, setup=sync, number=n, repeat=7)) / n * 1e6

    out = {"call": best(call), "signatures": best(lambda: [launch.array_signature(a) for a in arrays]),
           "replay": best(lambda: plan.replay(arrays, ptrs))}
    if kind != "numba":
        cur = launch._CURRENT[kind]
        out["current stream"] = best(lambda: cur(0))
    for i, lc in enumerate(plan.launches):
        out[f"launch {i + 1}"] = best(lambda lc=lc: lc(arrays, ptrs))
    sync()
    return {k: round(v, 2) for k, v in out.items()}


def _args_of(call):
    """The device arrays a :func:`prepared` call passes, in the order the wrapper reads them."""
    cells = dict(zip(call.__code__.co_freevars, (c.cell_contents for c in call.__closure__)))
    return (*cells["dpos"], *cells["dkw"].values(), cells["out"])


def add_arguments(p) -> None:
    add_output_arguments(p)  # --reps: loops of --calls calls, the median loop reported; --plot is not drawn
    p.set_defaults(reps=3)
    p.add_argument("--calls", type=int, default=300, help="calls per timed loop (default 300)")


def run(args) -> int:
    # deferred: loads Numba (backend choice first)
    from .. import launch

    try:  # the torch peers in FP32 as the rows beside them (cuDNN and cuBLAS take TF32 by default)
        import torch

        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    except ImportError:
        pass
    rows, failed = [], 0
    for case in (*CASES, *matmul_cases()):
        for kind in case.kinds:
            problem = f"{case.name} ({kind})"
            try:
                error = check(case, kind)
            except Exception as exc:  # noqa: BLE001 - reported as a failed row, the others still run
                error = f"{type(exc).__name__}: {exc}"
            if error:
                failed += 1
                rows.append({"problem": problem, "impl": f"simt_tiles.{case.function}", "error": error})
                print(f"FAIL {problem}: {error}", flush=True)
                continue
            call, out, _, (dpos, dkw) = prepared(case, kind)
            for impl, on in ((f"simt_tiles.{case.function}", True), (f"simt_tiles.{case.function} checked path", False)):
                launch.set_enabled(on)
                host, wall = per_call(call, args.calls, args.reps)
                gpu = gpu_per_call(call, host) if on else None  # (the checked path: host-paced anyway)
                rows.append({"problem": problem, "impl": impl, "host_us": round(host, 2), "wall_us": round(wall, 2),
                             "gpu_us": _round(gpu), "kind": kind, "function": case.function})
            launch.set_enabled(True)
            for impl, peer in (_peers(case, kind, dpos, dkw, out) if case.peers else {}).items():
                host, wall = per_call(peer, args.calls, args.reps)
                rows.append({"problem": problem, "impl": impl, "host_us": round(host, 2), "wall_us": round(wall, 2),
                             "gpu_us": _round(gpu_per_call(peer, host)), "kind": kind, "function": case.function,
                             "peer": True})
            for r in rows[-4:]:
                if r["problem"] == problem:
                    print(f"{problem:44s} {r['impl']:48s} {_us(r, 'host_us'):>8} µs host "
                          f"{_us(r, 'wall_us'):>8} wall {_us(r, 'gpu_us'):>8} GPU", flush=True)
    breakdown = {}
    for name in BREAKDOWN:
        for kind in KINDS:
            try:
                breakdown[f"{name} ({kind})"] = b = host_breakdown(next(c for c in CASES if c.name == name), kind)
            except Exception as exc:  # noqa: BLE001 - a diagnostic; the table still comes out
                b = f"{type(exc).__name__}: {exc}"
            print(f"host breakdown {name} ({kind}): {b}", flush=True)
    for kind, call in _bare_numba().items():
        host, wall = per_call(call, args.calls, args.reps)
        rows.append({"problem": f"vector_add 4096 ({kind})", "impl": "bare Numba launch", "host_us": round(host, 2),
                     "wall_us": round(wall, 2), "kind": kind, "peer": True})
        print(f"bare Numba launch ({kind}) {host:.2f} µs", flush=True)
    data = {"machine": describe(), "title": "host time per call", "calls": args.calls, "reps": args.reps,
            "method": __doc__.split("\n\n")[2].replace("\n", " "), "results": rows, "host_breakdown": breakdown}
    table = markdown(data)
    print(table)
    entry = matmul_entry(rows)
    if entry:
        import json

        print("shipped-table entry for that choice (simt_tiles/tuned/h200.json, entries):")
        print(json.dumps(entry, indent=1))
    write_outputs(args, "dispatch", data, table)
    return 1 if failed else 0


def _round(x):
    return None if x is None else round(x, 2)


def _us(r, key):
    v = r.get(key)
    return "–" if v is None else f"{v:.1f}"


def _matmul_best(results):
    """The :data:`MATMUL_CONFIGS` result row that keeps up best (least max(host, GPU) µs), or None."""
    best = None
    for r in results:
        if r["problem"].startswith("matmul ") and "[" in r["problem"] and r["impl"] == "simt_tiles.matmul" \
                and r.get("gpu_us") is not None:
            pace = max(r["host_us"], r["gpu_us"])
            if best is None or pace < best[0]:
                best = (pace, r)
    return None if best is None else best[1]


def matmul_choice(results) -> str:
    """One line naming :func:`_matmul_best`'s row, or ''."""
    r = _matmul_best(results)
    if r is None:
        return ""
    return (f"matmul at 256³, least max(host, GPU) per call: {r['problem']} — {r['host_us']:.1f} µs host, "
            f"{r['gpu_us']:.1f} µs GPU")


def matmul_entry(results, size: int = 256) -> dict:
    """The shipped-table entry (``simt_tiles/tuned/<gpu>.json``'s ``entries``) that makes
    ``matmul(config=None)`` at ``size``³ float32 run :func:`_matmul_best`'s config; {} if none."""
    import dataclasses as dc

    r = _matmul_best(results)
    if r is None:
        return {}
    label = r["problem"].split("[", 1)[1].split("]", 1)[0]
    _, preset, splits = next(c for c in MATMUL_CONFIGS if c[0] == label)
    # deferred: loads Numba (backend choice first)
    from ..kernels.matmul import get_rung

    rung = get_rung("k11_generated_split_k")
    cfg = dc.asdict(dc.replace(rung.presets[preset], splits=splits))
    return {f"matmul|*|float32|{size}x{size}x{size}xfloat32": {
        "choice": {"variant": rung.name, "config": cfg}, "problems": [[size, size, size, "float32"]],
        "measured": f"benchmarks/results/dispatch_{device_slug()}.json: {r['host_us']} µs host, {r['gpu_us']} µs GPU "
                    f"per call "
                    f"({label}; least max(host, GPU) of the {len(MATMUL_CONFIGS)} configs timed)"}}


def markdown(data: dict) -> str:
    """One row per function and array kind: µs per call with plans (host, wall, GPU), on the checked
    path (host), and the peers (host / GPU)."""
    by: dict = {}
    for r in data["results"]:
        by.setdefault(r["problem"], {})[r["impl"]] = r
    if not any("gpu_us" in r for r in data["results"]):
        return _markdown_host_only(by)  # results from before the GPU column
    lines = ["| call (arrays) | simt_tiles host µs | wall µs | GPU µs | checked path host µs | peer host / GPU µs |",
             "|---|---|---|---|---|---|"]
    for problem, impls in by.items():
        mine = [r for k, r in impls.items() if k.startswith("simt_tiles") and "checked" not in k]
        slow = [r for k, r in impls.items() if "checked" in k]
        peers = [f"{k} {_us(r, 'host_us')} / {_us(r, 'gpu_us')}" for k, r in impls.items() if r.get("peer")]
        if mine and "host_us" not in mine[0]:
            lines.append(f"| {problem} | FAIL | | | | |")
            continue
        m = mine[0] if mine else {}
        lines.append(f"| {problem} | {_us(m, 'host_us')} | {_us(m, 'wall_us')} | {_us(m, 'gpu_us')} | "
                     f"{_us(slow[0], 'host_us') if slow else '–'} | {'; '.join(peers) or '–'} |")
    choice = matmul_choice(data["results"])
    if choice:
        lines += ["", choice]
    return "\n".join(lines)


def _markdown_host_only(by: dict) -> str:
    lines = ["| call (arrays) | simt_tiles µs | checked path µs | peer µs |", "|---|---|---|---|"]
    for problem, impls in by.items():
        mine = [r for k, r in impls.items() if k.startswith("simt_tiles") and "checked" not in k]
        slow = [r for k, r in impls.items() if "checked" in k]
        peers = [f"{k} {r['host_us']:.1f}" for k, r in impls.items() if r.get("peer")]
        fmt = (lambda rs: f"{rs[0]['host_us']:.1f}" if rs and "host_us" in rs[0] else
               ("FAIL" if rs else "–"))
        lines.append(f"| {problem} | {fmt(mine)} | {fmt(slow)} | {'; '.join(peers) or '–'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    return main_of("dispatch", add_arguments, run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
