"""Issue 33's one GPU pass: NumPy filters' host time, the NCHW layer zoo beside cuDNN, resnet18.

    python benchmarks/lab/conv_issue33.py --out DIR [--only host zoo resnet] [--quick]

host
    ``correlate2d(cupy_image, w)`` with defaults, float32, mode "reflect", at 8192² (256 MiB, over
    the L2) and 256², 3×3 and 7×7: ``w`` a NumPy filter (cached device copy, this issue), a CuPy
    filter, and a NumPy filter on the path it took before (the planned call without the swap: the
    checked path every call).  Per call: ``host_us`` (N calls enqueued back to back, no sync, over
    N), ``wall_us`` (the same loop with the final synchronisation), ``gpu_us`` (calls queued behind
    a kernel that sleeps longer than enqueueing them takes; CUDA events after the sleep and after
    the last call).  Checked first against cupyx.scipy.ndimage.correlate in float64 with the bound
    (γ_n(2⁻²⁴) + γ_n(2⁻⁵³))·Σ|w|·|x|, n = KH·KW + 1.
zoo
    Layers of torchvision's resnet18 and mobilenet_v2 at 224² (each row names its module), batch 1
    and 32, float32, ``conv2d_nchw`` beside ``torch.nn.functional.conv2d`` (cuDNN, TF32 off), GPU
    time per call: CUDA events around each call, median of ``--reps`` after warm-up (batch-1
    inputs fit in L2: what such a layer is).  Checked first against the float64 conv with the γ
    bound of (C_in/groups)·KH·KW terms.
resnet
    docs/examples/resnet18.py: the forward with every Conv2d replaced, beside torch FP32 (cuDNN,
    TF32 off), batch 1 and 32 at 224², median of 10 (CUDA events), and the logits' differences.

Writes ``DIR/conv_issue33_h200.json`` and ``.md`` after every section (a run stopped by its
time limit keeps what it measured).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

RESULTS: dict = {"host": [], "zoo": [], "resnet": [], "errors": []}

#: (source module at 224², C_in, C_out, H = W of the input, K, stride, padding, groups)
ZOO = (
    ("resnet18 conv1 (stem)", 3, 64, 224, 7, 2, 3, 1),
    ("resnet18 layer1.0.conv1", 64, 64, 56, 3, 1, 1, 1),
    ("resnet18 layer2.0.conv1", 64, 128, 56, 3, 2, 1, 1),
    ("resnet18 layer2.0.downsample.0", 64, 128, 56, 1, 2, 0, 1),
    ("resnet18 layer3.0.conv1", 128, 256, 28, 3, 2, 1, 1),
    ("resnet18 layer4.0.conv1", 256, 512, 14, 3, 2, 1, 1),
    ("resnet18 layer4.0.conv2", 512, 512, 7, 3, 1, 1, 1),
    ("mobilenet_v2 features.0.0", 3, 32, 224, 3, 2, 1, 1),
    ("mobilenet_v2 features.1.conv.0.0 (depthwise)", 32, 32, 112, 3, 1, 1, 32),
    ("mobilenet_v2 features.2.conv.1.0 (depthwise)", 96, 96, 112, 3, 2, 1, 96),
    ("mobilenet_v2 features.4.conv.1.0 (depthwise)", 144, 144, 56, 3, 2, 1, 144),
    ("mobilenet_v2 features.14.conv.1.0 (depthwise)", 576, 576, 14, 3, 2, 1, 576),
    ("mobilenet_v2 features.17.conv.2 (pointwise)", 960, 320, 7, 1, 1, 0, 1),
)


#: the zoo's "path" column: what ``dispatch.route`` says ``conv2d_nchw`` with defaults runs
PATH_LABELS = {"tiled": "tiled", "space_to_depth": "space-to-depth, tiled", "depthwise": "k04 depthwise",
               "general": "k01 general", "im2col": "im2col, matmul"}


def _gamma(n, u):
    return n * u / (1 - n * u)


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "conv_issue33_h200.json").write_text(json.dumps(RESULTS, indent=1))
    lines = ["# conv issue 33 (H200): NumPy filters' host time, the NCHW zoo, resnet18", "",
             "Command: `python benchmarks/lab/conv_issue33.py --out DIR` (method: the script's docstring).", ""]
    if RESULTS["host"]:
        lines += ["## correlate2d host / wall / GPU µs per call (CuPy image, float32, reflect)", "",
                  "| image | filter | filter kind | host µs | wall µs | GPU µs | check |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['size']}² | {r['k']}x{r['k']} | {r['kind']} | {r['host_us']:.1f} | {r['wall_us']:.1f} | "
                  f"{r['gpu_us']:.1f} | {r['check']} |" for r in RESULTS["host"]]
        lines.append("")
    if RESULTS["zoo"]:
        lines += ["## conv2d_nchw layer zoo vs cuDNN FP32 (TF32 off), GPU µs per call (median)", "",
                  "| layer (torchvision, 224²) | N | C_in→C_out | H | K | s | p | g | path | simt µs | cuDNN µs "
                  "| × cuDNN | check | im2col_gemm µs | × cuDNN |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['layer']} | {r['n']} | {r['c_in']}→{r['c_out']} | {r['h']} | {r['k']} | {r['stride']} | "
                  f"{r['padding']} | {r['groups']} | {r['path']} | {r['simt_us']:.1f} | {r['cudnn_us']:.1f} | "
                  f"{r['cudnn_us'] / r['simt_us']:.2f} | {r['check']} | " + _im2col_cells(r) for r in RESULTS["zoo"]]
        ratios = [r["cudnn_us"] / r["simt_us"] for r in RESULTS["zoo"]]
        lines += ["", f"Geometric mean × cuDNN: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f} "
                  f"({len(ratios)} layers; min {min(ratios):.2f})", ""]
    if RESULTS["resnet"]:
        lines += ["## resnet18 forward (every Conv2d by conv2d_nchw) vs torch FP32", "",
                  "| batch | simt_tiles ms | torch ms | × torch | max abs(simt − f64) | max abs(torch − f64) |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['batch']} | {r['simt_ms']:.3f} | {r['torch_ms']:.3f} | {r['torch_ms'] / r['simt_ms']:.2f} | "
                  f"{r['err_simt']:.3g} | {r['err_torch']:.3g} |" for r in RESULTS["resnet"]]
        lines.append("")
    if RESULTS["errors"]:
        lines += ["## errors", ""] + [f"- {e}" for e in RESULTS["errors"]]
    (out / "conv_issue33_h200.md").write_text("\n".join(lines) + "\n")


def _im2col_cells(r) -> str:
    if r.get("im2col_us") is None:
        return "— | — |"
    parts = "" if r.get("im2col_copy_us") is None else \
        f"; copy {r['im2col_copy_us']:.1f} + matmul {r['im2col_matmul_us']:.1f}"
    return f"{r['im2col_us']:.1f} ({r['im2col_check']}{parts}) | {r['cudnn_us'] / r['im2col_us']:.2f} |"


def _im2col_parts(x, w, s, geom, whole) -> dict:
    """im2col_gemm's two steps apart (issue 33: its 1,458 µs at layer1.0.conv1, N = 32, undiagnosed): the
    im2col copy kernel alone and the batched matmul alone, on buffers shaped as ``_im2col.run``'s (the zoo's
    dilation 1), for a layer that needs ``cols`` and fits one chunk; checked first (the two steps give
    ``whole`` exactly)."""
    import torch
    from numba import cuda

    import simt_tiles
    from simt_tiles.kernels.conv_nchw import _im2col
    n, c_in, _, _ = x.shape
    c_out, _, kh, kw = w.shape
    k_len, p_len = c_in * kh * kw, geom.oh * geom.ow
    pads = (geom.pad_top, geom.pad_left, geom.pad_bottom, geom.pad_right)
    if not _im2col.needs_cols(kh, kw, (s, s), pads) or n * k_len * p_len > _im2col.MAX_COLS:
        return {}
    cols = torch.empty((n, k_len, p_len), device="cuda")
    out = torch.empty((n, c_out, p_len), device="cuda")
    xs, cs = cuda.as_cuda_array(x), cuda.as_cuda_array(cols)
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    w2 = w.reshape(c_out, k_len)

    def copy():
        _im2col.copy(xs, cs, 0, kh, kw, geom, stream)

    def product():
        simt_tiles.matmul(w2, cols, out=out)

    copy()
    product()
    if not torch.equal(out.reshape(whole.shape), whole):
        raise AssertionError("im2col parts: copy + matmul differ from im2col_gemm's result")
    return {"im2col_copy": copy, "im2col_matmul": product}


def host_section(quick: bool) -> None:
    import cupy as cp
    from cupyx.scipy import ndimage as cnd

    import simt_tiles
    from simt_tiles.bench._sleep import sleep
    from simt_tiles.kernels import conv2d as fam

    rng = np.random.default_rng(0)
    for size in ((256, 8192) if not quick else (256,)):
        img = cp.asarray(rng.standard_normal((size, size), dtype=np.float32))
        out = cp.empty_like(img)
        x64 = img.astype(cp.float64)
        for k in (3, 7):
            w = (rng.random((k, k)) / (k * k)).astype(np.float32)
            ref = cnd.correlate(x64, cp.asarray(w, cp.float64), mode="reflect")
            bound = (_gamma(k * k + 1, 2.0**-24) + _gamma(k * k + 1, 2.0**-53)) * cnd.correlate(
                cp.abs(x64), cp.asarray(np.abs(w), cp.float64), mode="reflect")
            kinds = {
                "NumPy (cached device copy)": lambda: simt_tiles.correlate2d(img, w, out=out),
                "CuPy (device)": (lambda wd=cp.asarray(w): simt_tiles.correlate2d(img, wd, out=out)),
                "NumPy, before (checked path)": lambda: fam._correlate2d(img, w, mode="reflect", cval=0.0, origin=0,
                                                                        output=None, out=out, variant=None,
                                                                        config=None, stream=None),
            }
            for kind, call in kinds.items():
                out.fill(cp.nan)
                call()
                cp.cuda.Device().synchronize()
                ok = bool(cp.all(cp.abs(out.astype(cp.float64) - ref) <= bound))
                for _ in range(3):
                    call()
                cp.cuda.Device().synchronize()
                n = 200 if size == 256 else 40
                t0 = time.perf_counter()
                for _ in range(n):
                    call()
                t1 = time.perf_counter()
                cp.cuda.Device().synchronize()
                t2 = time.perf_counter()
                q = 20 if "before" not in kind else 5
                sleep[1, 1](min(20000, int(q * 600) + 2000))
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record()
                for _ in range(q):
                    call()
                e1.record()
                e1.synchronize()
                gpu = cp.cuda.get_elapsed_time(e0, e1) * 1e3 / q
                RESULTS["host"].append(dict(size=size, k=k, kind=kind, host_us=(t1 - t0) / n * 1e6,
                                            wall_us=(t2 - t0) / n * 1e6, gpu_us=gpu, check="pass" if ok else "FAIL"))
                print(RESULTS["host"][-1], flush=True)
        del img, out, x64


def zoo_section(reps: int, quick: bool) -> None:
    import torch
    import torch.nn.functional as F

    import simt_tiles
    from simt_tiles.kernels.conv_nchw import _params, dispatch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in ((1, 32) if not quick else (1,)):
        for (layer, c_in, c_out, h, k, s, p, g) in ZOO:
            x = torch.randn(batch, c_in, h, h, device="cuda", generator=gen)
            w = torch.randn(c_out, c_in // g, k, k, device="cuda", generator=gen) / math.sqrt(c_in // g * k * k)
            try:
                got = simt_tiles.conv2d_nchw(x, w, stride=s, padding=p, groups=g)
                kw = dict(stride=s, padding=p, groups=g)
                ref = F.conv2d(x.double(), w.double(), **kw)
                n = c_in // g * k * k
                gu = _gamma(n, 2.0**-53)
                bound = F.conv2d(x.double().abs(), w.double().abs(), **kw) * ((_gamma(n, 2.0**-24) + gu) * (1 + 2 * gu))
                ok = bool(((got.double() - ref).abs() <= bound).all())
                im2col = None  # variant="im2col_gemm" beside the default (one-group layers): checked, then timed
                if g == 1:
                    im2col = lambda: simt_tiles.conv2d_nchw(x, w, stride=s, padding=p, variant="im2col_gemm")  # noqa: E731
                    ok_im2col = bool(((im2col().double() - ref).abs() <= bound).all())
                geom = _params.geometry(h, h, k, k, (s, s), (p, p), (1, 1), g)
                path = PATH_LABELS[dispatch.route(None, None, geom, c_in, c_out, k, k, x_shape=(batch, c_in, h, h),
                                                           dtype=np.float32)]  # what variant=None runs
                ts = {}
                fns = {"simt": lambda: simt_tiles.conv2d_nchw(x, w, stride=s, padding=p, groups=g),
                       "cudnn": lambda: F.conv2d(x, w, stride=s, padding=p, groups=g)}
                if im2col is not None:
                    fns["im2col"] = im2col
                    fns.update(_im2col_parts(x, w, s, geom, im2col()))
                for name, fn in fns.items():
                    for _ in range(3):
                        fn()
                    times = []
                    for _ in range(reps):
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        fn()
                        e1.record()
                        e1.synchronize()
                        times.append(e0.elapsed_time(e1) * 1e3)
                    ts[name] = sorted(times)[len(times) // 2]
                RESULTS["zoo"].append(dict(layer=layer, n=batch, c_in=c_in, c_out=c_out, h=h, k=k, stride=s,
                                           padding=p, groups=g, path=path,
                                           simt_us=ts["simt"], cudnn_us=ts["cudnn"], check="pass" if ok else "FAIL",
                                           im2col_us=ts.get("im2col"), im2col_copy_us=ts.get("im2col_copy"),
                                           im2col_matmul_us=ts.get("im2col_matmul"),
                                           im2col_check=None if im2col is None else ("pass" if ok_im2col else "FAIL")))
                print(RESULTS["zoo"][-1], flush=True)
            except Exception as exc:  # a layer that fails is reported, the others still run
                RESULTS["errors"].append(f"zoo {layer} N{batch}: {type(exc).__name__}: {exc}"[:300])
                print(RESULTS["errors"][-1], flush=True)


def resnet_section(quick: bool) -> None:
    import copy

    import torch

    path = Path(__file__).resolve().parents[2] / "docs" / "examples" / "resnet18.py"
    spec = importlib.util.spec_from_file_location("resnet18_example", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    ref, ours = ex.models()
    exact_model = copy.deepcopy(ref).double()
    for batch in ((1, 32) if not quick else (1,)):
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        with torch.no_grad():
            got, expect, exact = ours(x), ref(x), exact_model(x.double())
        t_ours, t_ref = ex.time_forward(ours, x), ex.time_forward(ref, x)
        RESULTS["resnet"].append(dict(batch=batch, simt_ms=t_ours, torch_ms=t_ref,
                                      err_simt=(got.double() - exact).abs().max().item(),
                                      err_torch=(expect.double() - exact).abs().max().item()))
        print(RESULTS["resnet"][-1], flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="+", default=["host", "zoo", "resnet"], choices=["host", "zoo", "resnet"])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="the small sizes only (a smoke run)")
    args = p.parse_args(argv)
    out = Path(args.out)
    sections = {"host": lambda: host_section(args.quick), "zoo": lambda: zoo_section(args.reps, args.quick),
                "resnet": lambda: resnet_section(args.quick)}
    for name in args.only:
        t0 = time.perf_counter()
        try:
            sections[name]()
        except Exception as exc:
            RESULTS["errors"].append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            print(RESULTS["errors"][-1], flush=True)
        print(f"section {name}: {time.perf_counter() - t0:.1f} s", flush=True)
        write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
