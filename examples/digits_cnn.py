"""A small CNN trained on scikit-learn's handwritten digits, through simt_tiles ops, beside plain torch.

The digits (1797 images of 8×8 pixels, shipped inside scikit-learn: nothing is downloaded) are
split 75/25 (``random_state=0``).  One model class, two forwards of the same parameters:

* ``impl="simt"``: :class:`simt_tiles.torch.Conv2d` (conv2d_nchw), :class:`~simt_tiles.torch.ReLU`
  (bias_relu), :class:`~simt_tiles.torch.Linear` (matmul + bias_relu / vector_add),
  log_softmax and the loss's mean (reduce) — forward *and* backward run simt_tiles kernels;
* ``impl="torch"``: ``torch.nn.functional`` (cuDNN / cuBLAS on a GPU).

Both start from the same initialisation (the simt model loads the torch model's ``state_dict``),
see the same batches in the same order (one seed) and use the same optimiser; the script prints
both loss curves and test accuracies.  On a GPU::

    python examples/digits_cnn.py --device cuda --epochs 15 [--compile] [--json out.json]

On a machine without a GPU, the simt model runs in Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``): use a tiny configuration, e.g.
``--channels 2 2 --hidden 8 --batch 8 --steps 2`` (tests/test_torch_ops.py runs that).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

import simt_tiles.torch as stt

_st = torch.ops.simt_tiles


class DigitsCNN(torch.nn.Module):
    """conv 3×3 (pad 1) → ReLU → conv 3×3 (pad 1) → ReLU → flatten → linear → ReLU → linear → log_softmax."""

    def __init__(self, impl: str = "simt", channels=(8, 16), hidden: int = 64, dtype=torch.float32):
        super().__init__()
        if impl not in ("simt", "torch"):
            raise ValueError(f"impl: expected 'simt' or 'torch'; got {impl!r}")
        self.impl = impl
        c1, c2 = channels
        conv = stt.Conv2d if impl == "simt" else torch.nn.Conv2d
        self.conv1 = conv(1, c1, 3, padding=1, dtype=dtype)
        self.conv2 = conv(c1, c2, 3, padding=1, dtype=dtype)
        if impl == "simt":
            self.fc1 = stt.Linear(c2 * 64, hidden, relu=True, dtype=dtype)
            self.fc2 = stt.Linear(hidden, 10, dtype=dtype)
            self.relu = stt.ReLU()
        else:
            self.fc1 = torch.nn.Linear(c2 * 64, hidden, dtype=dtype)
            self.fc2 = torch.nn.Linear(hidden, 10, dtype=dtype)

    def forward(self, x):
        if self.impl == "torch":
            h = F.relu(self.conv2(F.relu(self.conv1(x))))
            return F.log_softmax(self.fc2(F.relu(self.fc1(h.flatten(1)))), dim=-1)
        h = self.relu(self.conv2(self.relu(self.conv1(x))))
        return _st.log_softmax(self.fc2(self.fc1(h.reshape(h.shape[0], -1))), -1)

    def loss(self, logp, y):
        """The mean negative log-likelihood (simt: the mean by simt_tiles' reduce)."""
        if self.impl == "torch":
            return F.nll_loss(logp, y)
        picked = logp.gather(1, y[:, None]).reshape(-1)
        return -_st.reduce(picked, "mean", None, False)


def load(dtype=torch.float32, device="cpu"):
    """(x_train, y_train, x_test, y_test): the digits scaled to [0, 1], as (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float64)[:, None]
    xtr, xte, ytr, yte = train_test_split(x, d.target, test_size=0.25, random_state=0, stratify=d.target)

    def t(a, dt):
        return torch.as_tensor(a, dtype=dt, device=device)

    return t(xtr, dtype), t(ytr, torch.int64), t(xte, dtype), t(yte, torch.int64)


def pair(seed: int = 0, channels=(8, 16), hidden: int = 64, dtype=torch.float32, device="cpu"):
    """The torch model and the simt model, with the same initial parameters."""
    torch.manual_seed(seed)
    ref = DigitsCNN("torch", channels, hidden, dtype).to(device)
    ours = DigitsCNN("simt", channels, hidden, dtype).to(device)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def train(model, data, *, epochs=15, batch=64, lr=1e-3, seed=0, steps=None, forward=None, evaluate=True):
    """Adam on shuffled batches (the order from ``seed``; the last partial batch dropped: one
    shape). ``steps`` stops early. Returns the per-step losses, the per-epoch mean losses and
    the test accuracy (None without ``evaluate``); ``forward`` (default the model) may be a
    compiled model."""
    xtr, ytr, xte, yte = data
    forward = model if forward is None else forward
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    losses, epoch_loss, done = [], [], 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        order = torch.randperm(len(xtr), generator=gen).to(xtr.device)
        per = []
        for i in range(0, len(xtr) - batch + 1, batch):
            idx = order[i:i + batch]
            loss = model.loss(forward(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            per.append(loss.detach())
            done += 1
            if steps is not None and done >= steps:
                break
        losses += [float(v) for v in per]
        epoch_loss.append(float(torch.stack(per).mean()))
        if steps is not None and done >= steps:
            break
    seconds = time.perf_counter() - t0
    acc = None
    if evaluate:
        with torch.no_grad():
            acc = float((forward(xte).argmax(1) == yte).double().mean())
    return {"losses": losses, "epoch_loss": epoch_loss, "test_accuracy": acc, "train_seconds": seconds}


def compare(*, epochs=15, batch=64, lr=1e-3, seed=0, channels=(8, 16), hidden=64, dtype=torch.float32,
            device="cpu", steps=None, compile=False, limit=None):
    """Train both models; their results side by side. ``limit`` keeps the first images only."""
    data = load(dtype, device)
    if limit is not None:
        data = (data[0][:limit], data[1][:limit], data[2][:limit], data[3][:limit])
    ref, ours = pair(seed, channels, hidden, dtype, device)
    out = {}
    for name, model in (("torch", ref), ("simt", ours)):
        fwd = torch.compile(model, fullgraph=True) if compile else None
        out[name] = train(model, data, epochs=epochs, batch=batch, lr=lr, seed=seed, steps=steps, forward=fwd)
    out["accuracy_gap_pp"] = 100 * abs(out["torch"]["test_accuracy"] - out["simt"]["test_accuracy"])
    out["max_loss_gap"] = max((abs(a - b) for a, b in zip(out["torch"]["losses"], out["simt"]["losses"])),
                              default=0.0)
    out["config"] = dict(epochs=epochs, batch=batch, lr=lr, seed=seed, channels=list(channels), hidden=hidden,
                         dtype=str(dtype), device=str(device), steps=steps, compile=compile,
                         train_images=len(data[0]), test_images=len(data[2]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--channels", type=int, nargs=2, default=(8, 16))
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--float64", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) both models")
    p.add_argument("--json", default=None, help="write the results here")
    a = p.parse_args(argv)
    res = compare(epochs=a.epochs, batch=a.batch, lr=a.lr, seed=a.seed, channels=tuple(a.channels),
                  hidden=a.hidden, dtype=torch.float64 if a.float64 else torch.float32, device=a.device,
                  steps=a.steps, compile=a.compile)
    print(f"{'epoch':>5} {'torch loss':>11} {'simt loss':>11}")
    for e, (lt, ls) in enumerate(zip(res["torch"]["epoch_loss"], res["simt"]["epoch_loss"]), 1):
        print(f"{e:>5} {lt:>11.5f} {ls:>11.5f}")
    for name in ("torch", "simt"):
        r = res[name]
        print(f"{name:>5}: test accuracy {100 * r['test_accuracy']:.2f}%  ({r['train_seconds']:.1f} s training)")
    print(f"accuracy gap {res['accuracy_gap_pp']:.2f} pp; largest per-step loss gap {res['max_loss_gap']:.2e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
