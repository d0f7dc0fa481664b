"""The torch layer's own host cost per op call (issue 35), on any machine: no GPU, no kernel.

    python benchmarks/lab/torch_layer_probe.py [--calls 300] [--rounds 7] [--profile softmax] [--json PATH]

Every ``torch.ops.simt_tiles.<op>`` is called on small CPU tensors that answer ``is_cuda`` True (a
``torch.Tensor`` subclass with torch-function handling off, so the dispatcher and torch's own code see
plain tensors), with the public function it calls (``simt_tiles.<name>``; ``softmax_backward``'s kernel)
replaced by a stub that returns a preallocated tensor.  What is timed is then exactly the path a CUDA
tensor takes through ``simt_tiles.torch`` up to the public call: torch's dispatcher, the autograd
layer ``register_autograd`` installs, our kernel's argument checks and ``ops._call``'s re-packing.

Beside each op, the **floor**: an op with the same schema in another namespace, registered the same
way (``Library.define`` + ``impl`` for CompositeExplicitAutograd + ``register_fake`` +
``register_autograd``) whose kernel returns the preallocated tensor.  ``ours`` = op − floor is what
the project's Python adds between torch's dispatcher and the public call.

Host µs per call: the median over ``--rounds`` interleaved rounds (each round times every op and its
floor, one loop of ``--calls`` each, in alternating order) — plus each row's minimum.  ``--profile``
cProfiles one op's calls (the functions by own time).  On the GPU host, add the public call itself
(``benchmarks/bench_torch.py``'s public column) to the op's number here to predict its host time;
``bench_torch.py`` runs :func:`measure` there too (its "torch layer alone" table).  No kernel runs, so the
probe runs with or without Numba's simulator (run as a script it picks the simulator unless told otherwise).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

if __name__ == "__main__":  # (imported by bench_torch.py on a GPU host: Numba is loaded already there)
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before Numba is imported: no GPU needed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import simt_tiles  # noqa: E402
from simt_tiles.torch import ops as stops  # noqa: E402


class CudaLooking(torch.Tensor):
    """A CPU tensor whose ``is_cuda`` is True: ``ops._call`` takes its CUDA branch (detach, contiguous,
    the public call), as a CUDA tensor's call does.  No ``__torch_function__``: torch treats it as a
    plain tensor (no subclass dispatch on any call)."""

    is_cuda = True
    __torch_function__ = torch._C._disabled_torch_function_impl


def _t(*shape):
    """A CUDA tensor on a GPU host (the simulator off: the full checks refuse CPU tensors), else a CudaLooking one."""
    if torch.cuda.is_available() and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != "1":
        return torch.randn(*shape, device="cuda")
    return torch.randn(*shape).as_subclass(CudaLooking)


def _e(*shape):
    """The stub's result, on the device of :func:`_t`'s tensors."""
    return torch.empty(*shape, device="cuda" if _t(1).device.type == "cuda" else "cpu")


def cases():
    """op name → (public attribute patched: (object, name), the op's arguments, the result the stub returns)."""
    a, b = _t(8, 8), _t(8, 8)
    x, bias = _t(8, 16), _t(16)
    v1, v2 = _t(64), _t(64)
    img, filt, taps = _t(16, 16), _t(3, 3), _t(3)
    cx, cw, cb = _t(2, 2, 8, 8), _t(4, 2, 3, 3), _t(4)
    sm = (simt_tiles, "softmax")
    return {
        "matmul": ((simt_tiles, "matmul"), (a, b), _e(8, 8)),
        "softmax": (sm, (x, -1), _e(8, 16)),
        "log_softmax": ((simt_tiles, "log_softmax"), (x, -1), _e(8, 16)),
        "softmax_backward": ((stops, "_softmax_backward_kernel"), (x, x, -1, False), _e(8, 16)),
        "bias_relu": ((simt_tiles, "bias_relu"), (x, bias), _e(8, 16)),
        "vector_add": ((simt_tiles, "vector_add"), (v1, v2), _e(64)),
        "reduce": ((simt_tiles, "reduce"), (x, "sum", [0], False), _e(16)),
        "correlate2d": ((simt_tiles, "correlate2d"), (img, filt, "reflect", 0.0), _e(16, 16)),
        "convolve2d": ((simt_tiles, "convolve2d"), (img, filt, "reflect", 0.0), _e(16, 16)),
        "correlate1d": ((simt_tiles, "correlate1d"), (img, taps, -1, "reflect", 0.0), _e(16, 16)),
        "correlate_separable": ((simt_tiles, "correlate_separable"), (img, taps, taps, "reflect", 0.0),
                                _e(16, 16)),
        "conv2d_nchw": ((simt_tiles, "conv2d_nchw"), (cx, cw, cb, 1), _e(2, 4, 8, 8)),
        "correlate": ((simt_tiles, "correlate"), (img, filt, "reflect", 0.0), _e(16, 16)),
        "convolve": ((simt_tiles, "convolve"), (img, filt, "reflect", 0.0), _e(16, 16)),
    }


_FLOOR = torch.library.Library("simt_tiles_floor", "DEF")


def floor_op(name: str, result: torch.Tensor):
    """An op with ``torch.ops.simt_tiles.<name>``'s schema, registered as ``ops._custom_op`` + ``_fake`` +
    ``_autograd`` register (the autograd layer where the op has one), whose kernel returns ``result``: what
    torch's layers cost with nothing of ours."""
    schema = str(getattr(torch.ops.simt_tiles, name).default._schema).split("::", 1)[1]
    _FLOOR.define(schema)
    _FLOOR.impl(name, lambda *args: result, "CompositeExplicitAutograd")
    qual = f"simt_tiles_floor::{name}"
    torch.library.register_fake(qual, lambda *args: torch.empty_like(result), lib=_FLOOR)
    if torch._C._dispatch_has_kernel_for_dispatch_key(f"simt_tiles::{name}", "Autograd"):  # (softmax_backward: none)
        torch.library.register_autograd(qual, lambda ctx, g: None, setup_context=lambda ctx, inputs, output: None,
                                        lib=_FLOOR)
    return getattr(torch.ops.simt_tiles_floor, name)


def per_call(fn, args, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return 1e6 * (time.perf_counter() - t0) / n


def install_stubs(table) -> list:
    """Replace each op's public function by ``lambda *a, **k: result``; the originals, to put back."""
    saved = []
    for _, ((obj, attr), _, result) in table.items():
        saved.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, lambda *a, _r=result, **k: _r)
    return saved


def measure(calls: int, rounds: int, only=None) -> list[dict]:
    table = {k: v for k, v in cases().items() if only is None or k in only}
    pairs = {name: (getattr(torch.ops.simt_tiles, name), floor_op(name, res), args)
             for name, (_, args, res) in table.items()}
    saved = install_stubs(table)
    try:
        for op, floor, args in pairs.values():  # warm-up (and the stubs' results checked)
            for _ in range(50):
                got, want = op(*args), floor(*args)
            assert got is want, "the stub's result did not come back unchanged"
        times = {name: ([], []) for name in pairs}
        for r in range(rounds):
            for i, (name, (op, floor, args)) in enumerate(pairs.items()):
                order = (0, 1) if (r + i) % 2 == 0 else (1, 0)
                for k in order:
                    times[name][k].append(per_call((op, floor)[k], args, calls))
    finally:
        for obj, attr, orig in saved:
            setattr(obj, attr, orig)
    rows = []
    for name, (ops_t, floor_t) in times.items():
        o, f = statistics.median(ops_t), statistics.median(floor_t)
        rows.append({"op": name, "op_us": round(o, 2), "floor_us": round(f, 2), "ours_us": round(o - f, 2),
                     "op_min_us": round(min(ops_t), 2), "floor_min_us": round(min(floor_t), 2)})
    return rows


def profile(name: str, calls: int = 3000, top: int = 25) -> str:
    table = {name: cases()[name]}
    (_, args, _), = table.values()
    op = getattr(torch.ops.simt_tiles, name)
    saved = install_stubs(table)
    try:
        for _ in range(50):
            op(*args)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            op(*args)
        prof.disable()
    finally:
        for obj, attr, orig in saved:
            setattr(obj, attr, orig)
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", nargs="*", help="op names (default: every op)")
    p.add_argument("--profile", default=None, help="cProfile this op's calls after the table")
    p.add_argument("--json", default=None, help="write the rows here")
    a = p.parse_args(argv)
    rows = measure(a.calls, a.rounds, a.only)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; host µs per call, median of {a.rounds} interleaved "
          f"rounds of {a.calls} calls (min in brackets); public call stubbed")
    print(f"{'op':22s} {'torch.ops.simt_tiles':>22s} {'floor (same schema)':>22s} {'ours':>8s}")
    for r in rows:
        print(f"{r['op']:22s} {r['op_us']:12.2f} [{r['op_min_us']:6.2f}] {r['floor_us']:12.2f} "
              f"[{r['floor_min_us']:6.2f}] {r['ours_us']:8.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    if a.profile:
        print(profile(a.profile))


if __name__ == "__main__":
    main()
