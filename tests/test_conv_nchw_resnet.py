"""A real client on the GPU: torchvision's resnet18 (random weights) with every Conv2d computed by
conv2d_nchw (docs/examples/resnet18.py's SimtConv2d).

* Every layer's output within the γ bound of its own input (float64 conv by torch, Σ|w|·|x| by
  the same conv of |x| and |w|; n = (C_in/groups)·KH·KW terms): the stem (7×7 stride 2), the 3×3
  stride-1 and stride-2 layers, the 1×1 stride-2 shortcuts.
* The logits against a float64 forward: as close as torch's own FP32 forward (within 4× its
  largest error: both are FP32 networks; the per-layer bounds are the strict part).

Skips without a GPU, torch or torchvision.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from simt_tiles.bounds import check_within, gamma, unit_roundoff

pytestmark = pytest.mark.gpu

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "resnet18.py"


def _example():
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    spec = importlib.util.spec_from_file_location("resnet18_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_resnet18_layers_and_logits():
    ex = _example()
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    ref, ours = ex.models(seed=1)
    seen = []

    def hook(mod, inputs, output):
        seen.append((mod, inputs[0].detach().clone(), output.detach().clone()))

    handles = [m.register_forward_hook(hook) for m in ours.modules() if isinstance(m, ex.SimtConv2d)]
    assert len(handles) == 20  # resnet18: the stem, 16 3x3 convs, 3 1x1 shortcuts
    x = torch.randn(2, 3, 224, 224, device="cuda")
    with torch.no_grad():
        got, expect = ours(x), ref(x)
        exact = ref.double()(x.double())
    for h in handles:
        h.remove()
    strided = 0
    for mod, inp, out in seen:
        kw = dict(stride=mod.stride, padding=mod.padding, dilation=mod.dilation, groups=mod.groups)
        w64 = mod.weight.double()
        ref64 = F.conv2d(inp.double(), w64, **kw)
        absref = F.conv2d(inp.double().abs(), w64.abs(), **kw)
        n = (w64.shape[1]) * w64.shape[2] * w64.shape[3]
        g64 = gamma(n, unit_roundoff(np.float64))
        bound = absref * ((gamma(n, unit_roundoff(np.float32)) + g64) * (1 + 2 * g64))
        chk = check_within(out.cpu().numpy(), ref64.cpu().numpy(), bound.cpu().numpy())
        assert chk.passed, f"{chk} for conv {tuple(mod.weight.shape)} {kw} on {tuple(inp.shape)}"
        strided += mod.stride != 1
    assert strided == 7  # the stem, three 3x3 stride-2 convs, three shortcuts
    err_ours = (got.double() - exact).abs().max().item()
    err_torch = (expect.double() - exact).abs().max().item()
    assert got.shape == (2, 1000) and torch.isfinite(got).all()
    assert err_ours <= 4 * err_torch + 1e-6, f"logits: |ours - f64| {err_ours:.3g}, |torch - f64| {err_torch:.3g}"
