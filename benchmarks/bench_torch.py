"""simt_tiles inside torch: host overhead per op call, and the digits CNN beside plain torch (GPU).

Per op, on small float32 CUDA tensors (the kernel takes a few µs, so the loop measures the host
path): ``torch.ops.simt_tiles.<op>`` (the custom op), the public ``simt_tiles.<op>`` on the same
tensors (no torch.library layer), and the torch op computing the same thing.  ``host_us``: the
loop's time per call before the final synchronize (what the host spends queueing); ``wall_us``:
per call including the synchronize.  Warm-up first (every kernel compiled).

Then the torch layer alone per op (``benchmarks/lab/torch_layer_probe.py``: the public call stubbed, beside
a same-schema op that returns at once), and ``examples/digits_cnn.py``'s comparison (same initialisation,
same batches, Adam, float32).

    python benchmarks/bench_torch.py --out benchmarks/results/torch_h200 [--epochs 15] [--skip-digits]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import simt_tiles
import simt_tiles.torch  # noqa: F401  (registers torch.ops.simt_tiles)

ROOT = Path(__file__).resolve().parents[1]
ops = torch.ops.simt_tiles


def cases(dev):
    g = torch.Generator(device=dev).manual_seed(0)

    def r(*s):
        return torch.randn(*s, device=dev, generator=g)

    a, b = r(64, 64), r(64, 64)
    x, bias = r(64, 128), r(128)
    y = torch.softmax(x, -1)
    ly = torch.log_softmax(x, -1)
    v1, v2 = r(4096), r(4096)
    img, filt = r(64, 64), r(3, 3)
    cx, cw, cb = r(8, 8, 16, 16), r(16, 8, 3, 3), r(16)
    return {
        "matmul 64x64x64": (lambda: ops.matmul(a, b), lambda: simt_tiles.matmul(a, b), lambda: torch.matmul(a, b)),
        "softmax 64x128": (lambda: ops.softmax(x, -1), lambda: simt_tiles.softmax(x), lambda: torch.softmax(x, -1)),
        "log_softmax 64x128": (lambda: ops.log_softmax(x, -1), lambda: simt_tiles.log_softmax(x),
                               lambda: torch.log_softmax(x, -1)),
        "softmax_backward 64x128": (lambda: ops.softmax_backward(y, x, -1, False), None,
                                    lambda: torch._softmax_backward_data(x, y, -1, torch.float32)),
        "log_softmax_backward 64x128": (lambda: ops.softmax_backward(ly, x, -1, True), None,
                                        lambda: torch._log_softmax_backward_data(x, ly, -1, torch.float32)),
        "bias_relu 64x128": (lambda: ops.bias_relu(x, bias), lambda: simt_tiles.bias_relu(x, bias),
                             lambda: torch.relu(x + bias)),
        "vector_add 4096": (lambda: ops.vector_add(v1, v2), lambda: simt_tiles.vector_add(v1, v2),
                            lambda: torch.add(v1, v2)),
        "reduce sum axis 0 64x128": (lambda: ops.reduce(x, "sum", [0], False),
                                     lambda: simt_tiles.reduce(x, "sum", axis=0), lambda: torch.sum(x, 0)),
        "correlate2d 64x64 3x3 reflect": (lambda: ops.correlate2d(img, filt, "reflect", 0.0),
                                          lambda: simt_tiles.correlate2d(img, filt),
                                          lambda: F.conv2d(F.pad(img[None, None], (1, 1, 1, 1), mode="replicate"),
                                                           filt[None, None])),
        "conv2d_nchw 8x8x16x16 16x3x3": (lambda: ops.conv2d_nchw(cx, cw, cb, 1),
                                         lambda: simt_tiles.conv2d_nchw(cx, cw, bias=cb, padding=1),
                                         lambda: F.conv2d(cx, cw, cb, padding=1)),
    }


def per_call(fn, n=300, warm=30):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return 1e6 * (t1 - t0) / n, 1e6 * (t2 - t0) / n


def overhead(rows):
    for problem, fns in cases("cuda").items():
        for impl, fn in zip(("torch.ops.simt_tiles", "simt_tiles (public)", "torch"), fns):
            if fn is None:
                continue
            reps = [per_call(fn) for _ in range(3)]
            host, wall = sorted(reps)[1]  # the median of three loops
            rows.append({"problem": problem, "impl": impl, "host_us": round(host, 2), "wall_us": round(wall, 2)})
            print(f"{problem:32s} {impl:22s} host {host:7.2f} µs  wall {wall:7.2f} µs", flush=True)


def registration_probe(rows):
    """The torch.library layer alone: an op whose kernel is ``torch.empty_like`` (no simt_tiles),
    registered as simt_tiles.torch registers (Library.define + impl + register_autograd) and with
    ``torch.library.custom_op``; beside ``torch.empty_like`` itself."""
    lib = torch.library.Library("simt_tiles_probe", "DEF")
    lib.define("low(Tensor a, Tensor b) -> Tensor")
    lib.impl("low", lambda a, b: torch.empty_like(a), "CUDA")
    torch.library.register_autograd("simt_tiles_probe::low", lambda ctx, g: (g, g),
                                    setup_context=lambda ctx, i, o: None, lib=lib)

    @torch.library.custom_op("simt_tiles_probe::high", mutates_args=())
    def high(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(a)

    high.register_autograd(lambda ctx, g: (g, g), setup_context=lambda ctx, i, o: None)
    a, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    low = torch.ops.simt_tiles_probe.low.default
    for impl, fn in (("torch.empty_like", lambda: torch.empty_like(a)),
                     ("Library.define + impl + register_autograd (simt_tiles.torch)", lambda: low(a, b)),
                     ("torch.library.custom_op + register_autograd", lambda: high(a, b))):
        host, wall = sorted(per_call(fn, n=2000) for _ in range(3))[1]
        rows.append({"problem": "registration layer (kernel: empty_like)", "impl": impl,
                     "host_us": round(host, 2), "wall_us": round(wall, 2)})
        print(f"probe {impl:60s} host {host:7.2f} µs", flush=True)


def layer_probe(out):
    """The torch layer alone on this host (``benchmarks/lab/torch_layer_probe.py``): every op with its public
    call stubbed, beside an op of the same schema registered the same way that returns at once (the floor)."""
    spec = importlib.util.spec_from_file_location("torch_layer_probe", ROOT / "benchmarks" / "lab" /
                                                  "torch_layer_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    out["layer"] = probe.measure(300, 7)
    for r in out["layer"]:
        print(f"layer {r['op']:22s} op {r['op_us']:7.2f} µs  floor {r['floor_us']:7.2f} µs  ours {r['ours_us']:6.2f}",
              flush=True)


def step_time(model, data, batch=64, n=30):
    """Wall ms per training step (forward, backward, Adam) of ``model`` on one fixed batch."""
    xtr, ytr = data[0][:batch], data[1][:batch]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = model.loss(model(xtr), ytr)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0) / n


def digits(epochs):
    spec = importlib.util.spec_from_file_location("digits_cnn", ROOT / "examples" / "digits_cnn.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.compare(epochs=epochs, device="cuda")
    data = mod.load(torch.float32, "cuda")
    ref, ours = mod.pair(1, device="cuda")
    res["step_ms"] = {"torch": round(step_time(ref, data), 3), "simt": round(step_time(ours, data), 3)}
    return res


def markdown(out) -> str:
    lines = [f"# simt_tiles inside torch ({out['device']})", "", f"`{out['command']}`", "",
             "## Host overhead per op call (float32, small inputs; µs, median of 3 loops of 300 calls)", "",
             "| problem | torch.ops.simt_tiles host | wall | simt_tiles (public) host | wall | torch host | wall |",
             "|---|---|---|---|---|---|---|"]
    by = {}
    probe = [r for r in out["overhead"] if r["problem"].startswith("registration")]
    for r in out["overhead"]:
        if r in probe:
            continue
        by.setdefault(r["problem"], {})[r["impl"]] = r
    for p, d in by.items():
        cells = []
        for impl in ("torch.ops.simt_tiles", "simt_tiles (public)", "torch"):
            r = d.get(impl)
            cells += [f"{r['host_us']:.1f}", f"{r['wall_us']:.1f}"] if r else ["—", "—"]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += ["", "The registration layer alone (host µs per call):", ""]
    lines += [f"- {r['impl']}: {r['host_us']:.1f}" for r in probe]
    if out.get("layer"):
        lines += ["", "## The torch layer alone (public call stubbed; host µs per call, median of 7 rounds of 300)",
                  "", "`benchmarks/lab/torch_layer_probe.py`'s measure: CPU tensors that answer `is_cuda`; the floor "
                  "is an op of the same schema registered the same way whose kernel returns at once.", "",
                  "| op | torch.ops.simt_tiles | floor | ours |", "|---|---|---|---|"]
        lines += [f"| {r['op']} | {r['op_us']:.2f} | {r['floor_us']:.2f} | {r['ours_us']:.2f} |" for r in out["layer"]]
    dg = out.get("digits")
    if dg:
        lines += ["", f"## Digits CNN ({dg['config']['epochs']} epochs, batch {dg['config']['batch']}, Adam, float32)", "",
                  "| epoch | torch loss | simt loss |", "|---|---|---|"]
        for e, (a, b) in enumerate(zip(dg["torch"]["epoch_loss"], dg["simt"]["epoch_loss"]), 1):
            lines.append(f"| {e} | {a:.4f} | {b:.4f} |")
        lines += ["", f"test accuracy: torch {100 * dg['torch']['test_accuracy']:.2f}%, "
                      f"simt {100 * dg['simt']['test_accuracy']:.2f}% (gap {dg['accuracy_gap_pp']:.2f} pp); "
                      f"training step {dg['step_ms']['torch']:.2f} ms (torch) vs {dg['step_ms']['simt']:.2f} ms (simt)"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="path prefix: writes PREFIX.json and PREFIX.md")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--skip-digits", action="store_true")
    a = p.parse_args(argv)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "python": platform.python_version(),
           "command": "python " + " ".join(sys.argv), "overhead": []}
    registration_probe(out["overhead"])
    layer_probe(out)
    overhead(out["overhead"])
    Path(a.out + ".json").write_text(json.dumps(out, indent=1))  # kept if the digits run is cut short
    if not a.skip_digits:
        out["digits"] = digits(a.epochs)
        d = out["digits"]
        print(f"digits: torch {d['torch']['test_accuracy']:.4f} simt {d['simt']['test_accuracy']:.4f} "
              f"gap {d['accuracy_gap_pp']:.2f} pp; step ms {d['step_ms']}", flush=True)
    Path(a.out + ".json").write_text(json.dumps(out, indent=1))
    Path(a.out + ".md").write_text(markdown(out))


if __name__ == "__main__":
    main()
