"""Layers whose forward and backward run simt_tiles kernels: Linear and Conv2d subclass torch's (drop-in), ReLU
and LogSoftmax are modules of their own with torch's call form.

:class:`Linear` and :class:`Conv2d` *are* ``torch.nn.Linear`` / ``torch.nn.Conv2d`` (the same
parameters, initialisation and ``state_dict``), with a forward through ``torch.ops.simt_tiles``:
a model built from them loads a plain-torch model's weights as they are.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import ops

__all__ = ["Linear", "Conv2d", "ReLU", "LogSoftmax"]

_st = torch.ops.simt_tiles


class Linear(torch.nn.Linear):
    """``y = x·Wᵀ + b`` (``relu=True``: ``max(x·Wᵀ + b, 0)``, one bias_relu kernel).

    The matmul reads ``W.t()`` (:func:`simt_tiles.torch.transposed`: a copy until the matmul takes
    transposed views); the bias goes in through bias_relu (with ``relu``) or vector_add."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, relu: bool = False,
                 device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.relu = relu

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]  # torch.nn.Linear's (*, in_features): the leading dimensions as rows
        if x.dim() < 1 or x.shape[-1] != self.in_features or x.dtype != self.weight.dtype:
            raise (TypeError if x.dim() >= 1 and x.shape[-1] == self.in_features else ValueError)(
                f"x: expected a tensor of shape (*, {self.in_features}) and dtype {self.weight.dtype} (the layer's); "
                f"got shape {tuple(x.shape)}, dtype {x.dtype}")
        y = _st.matmul(x.reshape(math.prod(lead), x.shape[-1]), ops.transposed(self.weight))  # (an empty x too)
        if self.relu:
            bias = self.bias if self.bias is not None else y.new_zeros(y.shape[1])
            y = _st.bias_relu(y, bias)
        elif self.bias is not None:
            n, m = y.shape
            y = _st.vector_add(y.reshape(-1), self.bias.expand(n, m).reshape(-1)).reshape(n, m)
        return y.reshape(*lead, y.shape[-1])

    def extra_repr(self) -> str:
        return super().extra_repr() + (", relu=True" if self.relu else "")


class Conv2d(torch.nn.Conv2d):
    """``torch.nn.Conv2d`` restricted to what :func:`simt_tiles.conv2d_nchw` computes: stride 1,
    dilation 1, one group, the same int zero padding on every side."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, padding: int = 0, bias: bool = True,
                 *, device=None, dtype=None):
        if isinstance(padding, bool) or not isinstance(padding, int):
            raise TypeError(f"padding: expected an int >= 0 (the same on every side); got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride=1, padding=padding, bias=bias,
                         device=device, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        # (the attributes torch's layer keeps may be changed after construction: what the kernel computes or not)
        if (tuple(self.stride), tuple(self.dilation), self.groups, self.padding_mode) != ((1, 1), (1, 1), 1, "zeros") \
                or isinstance(self.padding, str) or self.padding[0] != self.padding[1]:
            raise ValueError(f"Conv2d: simt_tiles computes stride 1, dilation 1, groups 1 and one int zero padding; "
                             f"got stride={self.stride}, dilation={self.dilation}, groups={self.groups}, "
                             f"padding={self.padding!r}, padding_mode={self.padding_mode!r}")
        return _st.conv2d_nchw(x, self.weight, self.bias, self.padding[0])


class ReLU(torch.nn.Module):
    """``max(x, 0)`` of any tensor of rank ≥ 1: bias_relu over ``x`` as (rows, last axes) with a zero bias."""

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(x.shape[0], math.prod(x.shape[1:])) if x.dim() > 1 else x.reshape(1, -1)  # (empty too)
        return _st.bias_relu(flat, flat.new_zeros(flat.shape[1])).reshape(x.shape)


class LogSoftmax(torch.nn.Module):
    """``log_softmax`` along ``dim`` (default the last)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return _st.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
