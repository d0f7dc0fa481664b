"""simt_tiles in PyTorch: custom ops that autograd and ``torch.compile`` see as one op each.

``import simt_tiles.torch`` (torch installed; ``import simt_tiles`` never loads this package)
registers ``torch.ops.simt_tiles.*`` with :mod:`torch.library` — a fake implementation for
tracing, an autograd formula whose backward runs this project's kernels — and gives:

* the ops as functions: :func:`matmul`, :func:`softmax`, :func:`log_softmax`, :func:`bias_relu`,
  :func:`vector_add`, :func:`reduce` (sum, mean), :func:`correlate2d`, :func:`convolve2d`,
  :func:`correlate1d`, :func:`correlate_separable`, :func:`conv2d_nchw`, :func:`correlate`, :func:`convolve`
  (scipy.ndimage's n-D filters on 1-D, 2-D, 3-D images) (and :func:`softmax_backward`, their softmax gradient);
* layers (:mod:`.nn`): :class:`Linear`, :class:`Conv2d` (the torch layers' parameters and
  initialisation, a simt_tiles forward and backward), :class:`ReLU`, :class:`LogSoftmax`.

``torch.compile(model, fullgraph=True)`` keeps every op in the graph (no break). See docs/torch.md.
"""

from __future__ import annotations

from .nn import Conv2d, Linear, LogSoftmax, ReLU
from .ops import (
    MATMUL_TAKES_TRANSPOSED,
    OPS,
    bias_relu,
    conv2d_nchw,
    convolve,
    convolve2d,
    correlate,
    correlate1d,
    correlate2d,
    correlate_separable,
    log_softmax,
    matmul,
    reduce,
    softmax,
    softmax_backward,
    transposed,
    vector_add,
)

__all__ = ["matmul", "softmax", "log_softmax", "softmax_backward", "bias_relu", "vector_add", "reduce",
           "correlate2d", "convolve2d", "correlate1d", "correlate_separable", "conv2d_nchw", "correlate", "convolve",
           "transposed", "MATMUL_TAKES_TRANSPOSED", "OPS",
           "Linear", "Conv2d", "ReLU", "LogSoftmax"]
