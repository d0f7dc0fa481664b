"""A real client (needs a GPU, torch and torchvision): torchvision's ResNet-18 with every Conv2d
computed by ``simt_tiles.conv2d_nchw``.

Random weights (``weights=None``: nothing is downloaded), eval mode, float32.  Each ``nn.Conv2d``
is replaced by :class:`SimtConv2d`, a small module that keeps the layer's weight and calls
``conv2d_nchw`` with the layer's stride, padding, dilation and groups (torch's semantics; the 3×3
stride-1 layers take the tiled fast path, the stem, the stride-2 3×3 layers and the 1×1
downsampling shortcuts the same through space-to-depth).  The rest of the network (batch norm, ReLU, pooling, the classifier) stays
torch's.

    python docs/examples/resnet18.py [--batch 8] [--size 224]

prints the logits' largest difference to torch's FP32 forward and to a float64 forward, and the
forward's time beside torch FP32 (cuDNN, TF32 off), CUDA events, median of 10 after 3 warm-ups.
``tests/test_conv_nchw_resnet.py`` imports this file and checks each layer within its γ bound.
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.nn as nn

import simt_tiles


class SimtConv2d(nn.Module):
    """An ``nn.Conv2d`` (zero padding) computed by ``simt_tiles.conv2d_nchw``."""

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        if conv.padding_mode != "zeros":
            raise ValueError(f"conv: padding_mode {conv.padding_mode!r}; conv2d_nchw pads with zeros")
        self.register_buffer("weight", conv.weight.detach().clone())
        self.register_buffer("bias", None if conv.bias is None else conv.bias.detach().clone())
        # ints where both axes agree: the launch plan's key stays scalar
        self.stride, self.padding, self.dilation = (_one(conv.stride), _one(conv.padding),
                                                    _one(conv.dilation))
        self.groups = conv.groups

    def forward(self, x):
        return simt_tiles.conv2d_nchw(x.contiguous(), self.weight, bias=self.bias, stride=self.stride,
                                      padding=self.padding, dilation=self.dilation, groups=self.groups)


def _one(v):
    if isinstance(v, str):
        return v
    return v[0] if len(v) == 2 and v[0] == v[1] else tuple(v)


def swap_convs(model: nn.Module) -> nn.Module:
    """``model`` with every ``nn.Conv2d`` replaced by a :class:`SimtConv2d` (in place)."""
    for name, child in model.named_children():
        if isinstance(child, nn.Conv2d):
            setattr(model, name, SimtConv2d(child))
        else:
            swap_convs(child)
    return model


def models(seed: int = 0):
    """``(torch's resnet18, the same with SimtConv2d)``: random weights, eval mode, on the GPU."""
    import torchvision

    torch.manual_seed(seed)
    ref = torchvision.models.resnet18(weights=None).eval().cuda()
    return ref, swap_convs(copy.deepcopy(ref))


def time_forward(model, x, reps: int = 10, warmup: int = 3) -> float:
    """Median milliseconds of ``model(x)`` (CUDA events around each call)."""
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=224)
    args = p.parse_args(argv)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    ref, ours = models()
    x = torch.randn(args.batch, 3, args.size, args.size, device="cuda")
    with torch.no_grad():
        got, expect = ours(x), ref(x)
        exact = copy.deepcopy(ref).double()(x.double())
    print(f"logits {tuple(got.shape)}: max |simt_tiles - torch FP32| = {(got - expect).abs().max().item():.3g}, "
          f"|simt_tiles - float64| = {(got.double() - exact).abs().max().item():.3g}, "
          f"|torch FP32 - float64| = {(expect.double() - exact).abs().max().item():.3g}")
    t_ours, t_ref = time_forward(ours, x), time_forward(ref, x)
    print(f"forward, batch {args.batch} at {args.size}²: simt_tiles convs {t_ours:.3f} ms, "
          f"torch FP32 (cuDNN) {t_ref:.3f} ms: {t_ref / t_ours:.2f}x torch")


if __name__ == "__main__":
    main()
