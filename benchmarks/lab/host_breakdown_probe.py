"""Where a repeated call's host time goes on the GPU machine (issue 34's ≤ 10 µs, issue 35's ≤ 15 µs).

Each row: host µs (a loop of 400 calls timed before it synchronises) and µs per call of a synchronised loop
of 5000 (tiny problems: the host paces it): the public call with ``out=``, then the pieces of its replay path timed alone — the
arrays' signatures, the framework's current-stream query, the capture query, ``_Plan.replay``, one
``GpuLaunch``, the raw ``cuLaunchKernel`` through ctypes — and torch's own op beside it.  Then cProfile of
the public call.  Live: run it on the GPU machine after a change to the replay path.

    python3 benchmarks/lab/host_breakdown_probe.py [--json out.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time

import torch

import simt_tiles as st
from simt_tiles import launch

N, ROUNDS, HOST_N = 5000, 5, 400


def per_call(f, n=N, short=HOST_N):
    """(host µs: a loop of ``short`` calls timed before it synchronises — fewer than the launch queue
    holds, so the GPU cannot pace it —, µs per call of a loop of ``n`` synchronised: what the GPU allows)"""
    f()
    torch.cuda.synchronize()
    host, total = [], []
    for _ in range(ROUNDS):
        t = time.perf_counter_ns()
        for _ in range(short):
            f()
        host.append((time.perf_counter_ns() - t) / short / 1000)
        torch.cuda.synchronize()
        t = time.perf_counter_ns()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        total.append((time.perf_counter_ns() - t) / n / 1000)
    return round(statistics.median(host), 2), round(statistics.median(total), 2)


def launch_variants():
    """An empty kernel (no parameters, one warp) launched five ways: what the driver call costs by itself."""
    import ctypes

    from numba import cuda

    @cuda.jit("void()")
    def empty():
        pass

    k = next(iter(empty.overloads.values()))
    handle = int(k._codelibrary.get_cufunc().handle)
    stream = launch._CURRENT["torch"](0)
    u = ctypes.c_uint
    geo = (u(1), u(1), u(1), u(32), u(1), u(1), u(0))
    out = {}
    for lib_name, lib in (("CDLL", ctypes.CDLL("libcuda.so.1")), ("PyDLL", ctypes.PyDLL("libcuda.so.1"))):
        f = lib.cuLaunchKernel
        f.restype = ctypes.c_int
        get = lib.cuKernelGetFunction
        get.restype = ctypes.c_int
        func = ctypes.c_void_p()
        rc = get(ctypes.byref(func), ctypes.c_void_p(handle))
        args_k = (ctypes.c_void_p(handle), *geo, ctypes.c_void_p(stream), None, None)
        out[f"{lib_name} cuLaunchKernel(CUkernel handle)"] = per_call(lambda: f(*args_k))
        if rc == 0:
            args_f = (func, *geo, ctypes.c_void_p(stream), None, None)
            out[f"{lib_name} cuLaunchKernel(cuKernelGetFunction's CUfunction)"] = per_call(lambda: f(*args_f))
        else:
            out[f"{lib_name} cuKernelGetFunction"] = f"rc={rc} (the handle is a CUfunction already?)"
    drv = launch._drv()
    a = (drv.CUfunction(handle), 1, 1, 1, 32, 1, 1, 0, drv.CUstream(stream), 0, 0)
    out["cuda.bindings cuLaunchKernel"] = per_call(lambda: drv.cuLaunchKernel(*a))
    out["numba empty[1, 32]()"] = per_call(lambda: empty[1, 32]())
    return out


def the_plan(fn):
    ident = f"{fn.__module__}.{fn.__qualname__}"
    return next(p for k, p in launch._PLANS.items() if (k[0] if isinstance(k[0], str) else k[0][0]) == ident)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    x = torch.randn(256, 256, device="cuda")
    y = torch.randn(256, 256, device="cuda")
    o = torch.empty_like(x)
    r = torch.empty(256, device="cuda")
    xf, yf, of = x.view(-1), y.view(-1), o.view(-1)
    s64, so64 = torch.randn(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
    rows = {}
    calls = {
        "softmax(x, out=o)": lambda: st.softmax(x, out=o),
        "vector_add(x, y, out=o) (1-D)": lambda: st.vector_add(xf, yf, out=of),
        "reduce(x, axis=-1, out=r)": lambda: st.reduce(x, axis=-1, out=r),
        "matmul(x, y, out=o)": lambda: st.matmul(x, y, out=o),
        "softmax(x)": lambda: st.softmax(x),
        "softmax(s, out=so) 64x64 (the zoo's host row)": lambda: st.softmax(s64, out=so64),
        "torch.softmax(x, 1)": lambda: torch.softmax(x, 1),
        "torch.add(x, y, out=o) (1-D)": lambda: torch.add(xf, yf, out=of),
        "torch.sum(x, 1, out=r)": lambda: torch.sum(x, 1, out=r),
        "torch.mm(x, y, out=o)": lambda: torch.mm(x, y, out=o),
    }
    for name, f in calls.items():
        rows[name] = per_call(f)
        print(f"{name:40s} host {rows[name][0]:7.2f} µs  loop {rows[name][1]:7.2f}", flush=True)
    st.softmax(x, out=o)
    plan = the_plan(st.softmax.__wrapped__.__wrapped_planned__) if hasattr(st.softmax.__wrapped__, "__wrapped_planned__") else None
    if plan is None:
        plan = next(p for k, p in launch._PLANS.items() if "softmax" in str(k[0]))
    ptrs = [x.data_ptr(), o.data_ptr()]
    gl = plan.launches[0]
    h = launch._CURRENT["torch"](0)
    parts = {
        "_torch_sig(x), _torch_sig(o)": lambda: (launch._torch_sig(x), launch._torch_sig(o)),
        "x.data_ptr()": lambda: x.data_ptr(),
        "x.shape, x.stride(), x.dtype": lambda: (x.shape, x.stride(), x.dtype),
        "x.requires_grad, x.is_cuda": lambda: (x.requires_grad, x.is_cuda),
        "torch current raw stream": lambda: launch._CURRENT["torch"](0),
        "_capturing(handle)": lambda: launch._capturing(h),
        "plan.replay": lambda: plan.replay([x, o], ptrs),
        "GpuLaunch.__call__": lambda: gl([x, o], ptrs),
        "raw cuLaunchKernel (ctypes)": lambda: gl.c_launch(*gl.args),
        "planned call (no device guard)": lambda: st.softmax.__wrapped__(x, out=o),
    }
    for name, f in parts.items():
        try:
            rows[name] = per_call(f)
        except Exception as exc:  # a probe: say it and go on
            rows[name] = repr(exc)
        print(f"  {name:38s} {rows[name]}", flush=True)
    for name, v in launch_variants().items():
        rows[name] = v
        print(f"  {name:52s} {v}", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N):
        st.softmax(x, out=o)
    torch.cuda.synchronize()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    print(s.getvalue())
    print("launch stats", launch.stats())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows_us": rows, "n": N, "rounds": ROUNDS}, fh, indent=1)


if __name__ == "__main__":
    main()
