"""Issue 33, session 35: conv2d_nchw's depthwise rung (k04) before and after this session, beside torch.

    git show c006160:simt_tiles/kernels/conv_nchw/k04_depthwise.py > k04_before.py   # the rung before
    python3 benchmarks/lab/depthwise_probe.py --old-source k04_before.py --json PATH [--ablate] [--reps 20]
    python3 benchmarks/lab/depthwise_probe.py --planes --json PATH   # session 40: planes 2 and 4 beside new

Layers: MobileNetV2's and EfficientNet-B0's depthwise convolutions (torchvision, 224² input; each row names
its module), batch 1 and 32, float32, torch tensors on CUDA, no bias.  Implementations:

old
    k04 as it was before session 35 (``--old-source FILE``, or ``git show`` of commit c006160 in a git
    checkout), with the preset the dispatch chose then (``dispatch.depthwise_preset``: "default" or
    "small"), through the public ``conv2d_nchw`` (the old rung installed in ``dispatch.RUNGS`` for those
    calls only).  Without a source the row is left out.
before-fields (``--ablate``)
    today's k04 with ``k04_depthwise.BEFORE`` (one load in flight a thread, the image's row and column
    order) on the old preset: the in-flight lesson alone, on today's staging runs and grid.
new
    ``conv2d_nchw(x, w, stride=s, padding=p, groups=C)`` with defaults (``dispatch.depthwise_config``).
planes2, planes4 (``--planes``; issue 33, session 40)
    the default's config with ``planes`` = 2 and 4 (a block computes its tile on 2 or 4 consecutive
    planes; ``min_blocks`` divided by it: the same threads an SM under the launch bounds), on the layers
    whose default tile is one warp (the 7 × 7 and 14 × 14 planes: features.14, efficientnet features.5.0).
torch
    ``torch.nn.functional.conv2d(..., groups=C)``, TF32 off.  For float32 NCHW depthwise PyTorch runs its
    own ``conv_depthwise2d`` kernel, not cuDNN (``ConvParams::use_cudnn_depthwise``); the backend torch
    reports is in the JSON where it can say.

Check first: every implementation once on a NaN-poisoned ``out=`` (torch: its result) against the float64
convolution, within (γ_n(2⁻²⁴) + γ_n(2⁻⁵³))·(1 + 2γ_n(2⁻⁵³))·(|w| ⋆ |x|), n = KH·KW (conv_issue33.py's
bound); only a passing implementation is timed.  GPU µs: an L2 flush (256 MB written, then read: the L2
left clean, benchmarks/notes/method.md) queued before each call keeps the GPU busy past the call's Python
path, so CUDA events around one call bracket its GPU time; 3 warm-up calls, the median of ``--reps``.
Wall µs: a loop of 100 calls queued back to back, synchronised at the end, over 100 (host path
included).  x + y bytes over GPU time gives TB/s (the layer's floor: x read once, y written once).

Prints a markdown table; ``--json PATH`` writes the rows.  Budget: ≤ 120 s on an H100/H200 with the
compiles (7 layers × 2–3 k04 configs); a run past ``--budget`` seconds stops and says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conv_issue33 import _gamma  # noqa: E402  (the zoo's bound)
from small_reduce_probe import loop_us, timed  # noqa: E402  (flush, events, median; the queued loop)

#: (module, its source, C, H = W of its input, K, stride): depthwise, padding K // 2, multiplier 1
LAYERS = (
    ("mobilenet_v2 features.1.conv.0.0", "torchvision mobilenet_v2", 32, 112, 3, 1),
    ("mobilenet_v2 features.2.conv.1.0", "torchvision mobilenet_v2", 96, 112, 3, 2),
    ("mobilenet_v2 features.4.conv.1.0", "torchvision mobilenet_v2", 144, 56, 3, 2),
    ("mobilenet_v2 features.14.conv.1.0", "torchvision mobilenet_v2", 576, 14, 3, 2),
    ("mobilenet_v2 features.3.conv.1.0", "torchvision mobilenet_v2", 144, 56, 3, 1),
    ("efficientnet_b0 features.3.0.block.1.0", "torchvision efficientnet_b0 (5 × 5)", 144, 56, 5, 2),
    ("efficientnet_b0 features.5.0.block.1.0", "torchvision efficientnet_b0 (5 × 5)", 480, 14, 5, 1),
)
BATCHES = (1, 32)
#: the commit whose k04 is "old" (the last before session 35)
OLD_COMMIT = "c006160"
OLD_PATH = "simt_tiles/kernels/conv_nchw/k04_depthwise.py"


def old_module(source: str | None):
    """The pre-session-35 k04 module, loaded from ``source`` (or ``git show`` here), in the conv_nchw
    package (its relative imports resolve); None when neither is there."""
    text = None
    if source:
        text = Path(source).read_text()
    else:
        try:
            text = subprocess.run(["git", "show", f"{OLD_COMMIT}:{OLD_PATH}"], cwd=ROOT, capture_output=True,
                                  text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
    path = Path("/tmp") / "k04_depthwise_before_s35.py"
    path.write_text(text)
    name = "simt_tiles.kernels.conv_nchw.k04_depthwise_before"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "simt_tiles.kernels.conv_nchw"
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class installed:
    """``dispatch.RUNGS``'s k04 replaced by ``rung`` inside the ``with`` (the old rung's calls only)."""

    def __init__(self, rung):
        from simt_tiles.kernels.conv_nchw import dispatch
        self.dispatch, self.rung = dispatch, rung

    def __enter__(self):
        self.saved = self.dispatch.RUNGS[self.dispatch.DEPTHWISE_VARIANT]
        self.dispatch.RUNGS[self.dispatch.DEPTHWISE_VARIANT] = self.rung

    def __exit__(self, *exc):
        self.dispatch.RUNGS[self.dispatch.DEPTHWISE_VARIANT] = self.saved


def torch_backend(torch, x, w, s, p, c) -> str:
    try:  # a private API: its arguments have changed between releases
        return str(torch._C._select_conv_backend(x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], c, None))
    except Exception as exc:  # noqa: BLE001
        return f"unknown ({type(exc).__name__})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--old-source", help="the pre-session-35 k04_depthwise.py (default: git show %s)" % OLD_COMMIT)
    ap.add_argument("--ablate", action="store_true", help="also today's k04 with the BEFORE fields")
    ap.add_argument("--planes", action="store_true",
                    help="also the default's config with planes=2 and 4 where its tile is one warp")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=110.0, help="seconds after which no new layer starts")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    import numpy as np
    import torch
    import torch.nn.functional as F

    import simt_tiles
    from simt_tiles.kernels.conv_nchw import DEPTHWISE_VARIANT, dispatch, k04_depthwise

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    old = old_module(args.old_source)
    buf = torch.empty(2**26, device="cuda")  # 256 MB

    def flush():
        buf.fill_(1.0)
        buf.sum()  # read back: the L2 left clean

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows, notes = [], []
    if old is None:
        notes.append(f"no old source (--old-source, or git show {OLD_COMMIT}): the old rows are left out")
    for n in BATCHES:
        for layer, source, c, hw, k, s in LAYERS:
            if time.perf_counter() - t_start > args.budget:
                notes.append(f"stopped at {layer} N{n}: past the {args.budget:.0f} s budget")
                break
            p = k // 2
            o = (hw + 2 * p - k) // s + 1
            x = torch.randn(n, c, hw, hw, device="cuda", generator=gen)
            w = torch.randn(c, 1, k, k, device="cuda", generator=gen) / math.sqrt(k * k)
            kw = dict(stride=s, padding=p, groups=c)
            ref = F.conv2d(x.double(), w.double(), **kw)
            gu = _gamma(k * k, 2.0**-53)
            bound = F.conv2d(x.double().abs(), w.double().abs(), **kw) * ((_gamma(k * k, 2.0**-24) + gu) * (1 + 2 * gu))
            out = torch.empty(n, c, o, o, device="cuda")
            preset = dispatch.depthwise_preset(o, o)
            new_cfg = dispatch.depthwise_config((n, c, o, o), k, k, (s, s), (1, 1), np.dtype(np.float32), sms)
            impls = {}  # name -> (call, config text, context)

            def ours(cfg=None):
                if cfg is None:
                    return lambda: simt_tiles.conv2d_nchw(x, w, out=out, **kw)
                return lambda: simt_tiles.conv2d_nchw(x, w, out=out, variant=DEPTHWISE_VARIANT, config=cfg, **kw)

            if old is not None:
                impls["old"] = (ours(old.PRESETS[preset]), f"{preset} (session 34)", installed(old.RUNG))
            if args.ablate:
                abl = dataclasses.replace(k04_depthwise.PRESETS[preset], **k04_depthwise.BEFORE)
                impls["before-fields"] = (ours(abl), f"{preset} + BEFORE", None)
            impls["new"] = (ours(), f"{new_cfg.block_x}x{new_cfg.block_y} rw{new_cfg.rw} rh{new_cfg.rh} "
                                    f"(tile {new_cfg.tile_h}x{new_cfg.tile_w})", None)
            if args.planes and new_cfg.threads <= 32:
                for planes in (2, 4):
                    pc = dataclasses.replace(new_cfg, planes=planes, min_blocks=max(1, new_cfg.min_blocks // planes))
                    impls[f"planes{planes}"] = (ours(pc), f"{new_cfg.block_x}x{new_cfg.block_y}x{planes} rw{pc.rw} "
                                                           f"rh{pc.rh} ({k04_depthwise.blocks(pc, n, c, o, o)} blocks)",
                                                None)
            impls["torch"] = (lambda: F.conv2d(x, w, **kw), torch_backend(torch, x, w, s, p, c), None)
            nbytes = (x.numel() + n * c * o * o) * 4
            for name, (fn, cfg_text, ctx) in impls.items():
                row = dict(layer=layer, source=source, n=n, c=c, h=hw, oh=o, k=k, stride=s, padding=p, impl=name,
                           config=cfg_text, mbytes=nbytes / 1e6)
                try:
                    if ctx is not None:
                        ctx.__enter__()
                    try:
                        out.fill_(float("nan"))
                        got = fn()
                        torch.cuda.synchronize()
                        err = (got.double() - ref).abs()
                        ok = bool((err <= bound).all())
                        row.update(check="pass" if ok else "FAIL", max_err=err.max().item(),
                                   max_bound=bound.max().item())
                        if ok:
                            row["gpu_us"] = timed(fn, flush, args.reps) * 1e3
                            row["wall_us"] = loop_us(fn, 100)
                            row["tbps"] = nbytes / (row["gpu_us"] * 1e-6) / 1e12
                    finally:
                        if ctx is not None:
                            ctx.__exit__(None, None, None)
                except Exception as exc:  # noqa: BLE001  (a failing implementation is reported, the rest run)
                    row.update(check=f"ERROR {type(exc).__name__}: {exc}"[:200])
                rows.append(row)
                print(json.dumps(row), flush=True)
        else:
            continue
        break
    seconds = time.perf_counter() - t_start
    table = markdown(rows, notes, seconds, torch.cuda.get_device_name(0), args)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=torch.cuda.get_device_name(0), seconds=seconds,
                                                   reps=args.reps, notes=notes, rows=rows), indent=1))
    return 0 if all(r["check"] == "pass" for r in rows) else 1


def markdown(rows, notes, seconds, device, args) -> str:
    def cell(layer, n, impl, key, fmt="{:.1f}"):
        r = next((r for r in rows if r["layer"] == layer and r["n"] == n and r["impl"] == impl), None)
        return fmt.format(r[key]) if r is not None and key in r else "—"

    impls = [i for i in ("old", "before-fields", "new", "planes2", "planes4", "torch")
             if any(r["impl"] == i for r in rows)]
    planes = [f"{i} ×torch" for i in ("planes2", "planes4") if i in impls]
    head = (["layer", "N", "C", "H→OH", "K", "s", "x+y MB"] + [f"{i} GPU µs" for i in impls]
            + ["new ×old", "new ×torch"] + planes + ["new TB/s"] + [f"{i} wall µs" for i in impls]
            + ["new config"])
    flags = (" --ablate" if args.ablate else "") + (" --planes" if args.planes else "")
    lines = [f"# conv2d_nchw depthwise (k04), session 35: {device}", "",
             f"Command: `python3 benchmarks/lab/depthwise_probe.py{flags} ...` "
             f"({seconds:.0f} s; method: the script's docstring).  GPU µs: median of {args.reps}, L2 flushed; "
             "wall µs: a loop of 100.", "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    seen = []
    for r in rows:
        key = (r["layer"], r["n"])
        if key in seen:
            continue
        seen.append(key)
        layer, n = key
        gpu = {i: next((q.get("gpu_us") for q in rows if (q["layer"], q["n"], q["impl"]) == (layer, n, i)), None)
               for i in impls}
        ratio = lambda a, b: f"{gpu[a] / gpu[b]:.2f}" if gpu.get(a) and gpu.get(b) else "—"  # noqa: E731
        cells = ([layer, n, r["c"], f"{r['h']}→{r['oh']}", r["k"], r["stride"], f"{r['mbytes']:.1f}"]
                 + [cell(layer, n, i, "gpu_us") for i in impls]
                 + [ratio("old", "new"), ratio("torch", "new")] + [ratio("torch", h.split()[0]) for h in planes]
                 + [cell(layer, n, "new", "tbps", "{:.2f}")]
                 + [cell(layer, n, i, "wall_us") for i in impls] + [cell(layer, n, "new", "config", "{}")])
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    bad = [f"{r['layer']} N{r['n']} {r['impl']}: {r['check']}" for r in rows if r["check"] != "pass"]
    if bad or notes:
        lines += ["", *[f"- {b}" for b in bad + notes]]
    lines.append("")
    lines.append("new ×old: old GPU µs / new GPU µs (> 1: faster now); new ×torch: torch / new (> 1: faster "
                 "than torch).")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
