"""Probe (GPU): the torch matmul op's backward with the tangent forms autograd and AOTAutograd pass
(an expanded ones tensor, strides (0, 0), and a contiguous one), called in both orders (launch-plan
replay), against torch's own product. Exit 1 on a wrong result.

    python3 benchmarks/lab/torch_matmul_grad_probe.py
"""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
import simt_tiles as st  # noqa: E402
import simt_tiles.torch  # noqa: E402,F401

bad = 0
torch.manual_seed(0)
a = torch.randn(3, 4, device="cuda")
b = torch.randn(4, 2, device="cuda")
forms = {"expanded": lambda: torch.ones((), device="cuda").expand(3, 2),
         "contiguous": lambda: torch.ones(3, 2, device="cuda"),
         "expanded row": lambda: torch.ones(2, device="cuda").expand(3, 2),
         "transposed": lambda: torch.ones(2, 3, device="cuda").t()}
for order in (list(forms), list(forms)[::-1]):
    for name in order:
        dc = forms[name]()
        for label, got, want in (("dA = dC·Bᵀ", st.matmul(dc, b.t()), dc @ b.t()),
                                 ("dB = Aᵀ·dC", st.matmul(a.t(), dc), a.t() @ dc)):
            err = (got - want).abs().max().item()
            ok = err < 1e-4
            bad += not ok
            print(f"{name:13} {label}: strides {tuple(dc.stride())} max err {err:.3g} {'ok' if ok else 'WRONG'}")
# the op through autograd, as opcheck's AOT check calls it
for name in forms:
    x, w = a.clone().requires_grad_(), b.clone().requires_grad_()
    y = torch.ops.simt_tiles.matmul(x, w)
    y.backward(forms[name]())
    xr, wr = a.clone().requires_grad_(), b.clone().requires_grad_()
    (xr @ wr).backward(forms[name]())
    e = max((x.grad - xr.grad).abs().max().item(), (w.grad - wr.grad).abs().max().item())
    bad += e >= 1e-4
    print(f"op backward, tangent {name:13}: max err {e:.3g}")
try:
    r = torch.library.opcheck(torch.ops.simt_tiles.matmul.default, (a.clone().requires_grad_(), b.clone().requires_grad_()))
    print("opcheck", r)
except Exception as exc:  # noqa: BLE001
    bad += 1
    print("opcheck failed:", str(exc)[:300])
print("WRONG results:", bad)
sys.exit(1 if bad else 0)
