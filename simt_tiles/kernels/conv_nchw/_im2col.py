"""Any one-group layer as a matmul: im2col, then :func:`simt_tiles.matmul` (where cuDNN's GEMM algorithms start).

With K = C_in·KH·KW and P = OH·OW::

    cols[n, (c·KH + a)·KW + b, i·OW + j] = x[n, c, i·sh + a·dh − pad_top, j·sw + b·dw − pad_left]   (0 outside x)
    out[n] (C_out, P) = w (C_out, K) @ cols[n] (K, P)         one batched matmul, w broadcast over n

so a layer of any stride, dilation and padding runs on the matmul ladder's tiles (the 128×128 register
tiles, split-K, the narrow class) instead of a direct kernel.  The products and sums are the layer's, in
another order: within its γ_K bound.  Traffic: ``cols`` is KH·KW/(sh·sw) times x, written once and read by
the matmul (a 3×3 stride-1 layer: ~9× x, against the direct rungs' one read); a 1×1 layer of stride 1
with no padding needs none (x reshaped is the right operand).  Images go in chunks whose ``cols`` stay
under :data:`MAX_COLS` elements (a kept buffer per stream, as the space-to-depth phases).  Bias: one
more pass over the output.  ``variant="im2col_gemm"``, and the default where ``dispatch.im2col_rule`` says so
(H200: resnet18's layer4.0.conv1 at N = 32 768 → 225 µs; ``benchmarks/notes/conv_nchw.md``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._per_stream import PerStream
from ...runtime import cdiv, jit
from ..matmul import matmul

#: threads per block of the two copy kernels
THREADS = 256

#: the most blocks along a grid's y and z (CUDA's limit): more filter rows or images are strided
MAX_GRID_YZ = 65535

#: the copy's grid: about this many blocks (~31 per H200 SM), each striding over several filter rows.  A
#: block per filter row (N = 32, 64 channels, 3×3: 80,000 blocks of 3 stores a thread) ran at 430 GB/s
TARGET_BLOCKS = 4096

#: the largest ``cols`` buffer in elements (1 GiB of float32): a larger batch goes in chunks of images
MAX_COLS = 1 << 28

#: per (device, stream, host thread), bounded (:mod:`simt_tiles._per_stream`), then (shape, dtype)
_BUFFERS = PerStream("im2col")


def _im2col(x, cols, n0, kh, kw, sh, sw, dh, dw, pad_top, pad_left, ow):
    """cols[m, (c·kh + a)·kw + b, i·ow + j] = x[n0 + m, c, i·sh + a·dh − pad_top, j·sw + b·dw − pad_left].

    Grid (⌈P / THREADS⌉, Y, images): x over the output pixels p = i·ow + j (one division per thread;
    consecutive threads write consecutive columns); block y takes the filter rows (c, a) y, y + Y, …
    (uniform per block: :func:`copy` picks Y for ~:data:`TARGET_BLOCKS` blocks), z the images (strided past
    the grid's 65535); each thread writes its pixel's kw taps b of every row it takes."""
    n_img, k_len, p_len = cols.shape
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p < p_len:
        i = p // ow
        j = p - i * ow
        h, w = x.shape[2], x.shape[3]
        for m in range(cuda.blockIdx.z, n_img, cuda.gridDim.z):
            for ca in range(cuda.blockIdx.y, k_len // kw, cuda.gridDim.y):
                c = ca // kh
                r = i * sh + (ca - c * kh) * dh - pad_top
                for b in range(kw):
                    s = j * sw + b * dw - pad_left
                    if 0 <= r < h and 0 <= s < w:
                        cols[m, ca * kw + b, p] = x[n0 + m, c, r, s]
                    else:
                        cols[m, ca * kw + b, p] = 0  # the zero padding


def _add_bias(out, bias):
    """out[n, o, p] += bias[o]."""
    t = cuda.grid(1)
    n_img, c_out, p_len = out.shape
    if t < n_img * c_out * p_len:
        o = (t // p_len) % c_out
        out[t // (p_len * c_out), o, t % p_len] += bias[o]


im2col = jit(_im2col)
add_bias = jit(_add_bias)


def needs_cols(kh: int, kw: int, stride, pads) -> bool:
    """False for a 1×1 layer of stride 1 and no padding (x itself is the right operand; a 1×1 filter
    has no dilation to apply)."""
    return (kh, kw, *stride) != (1, 1, 1, 1) or any(pads)


def copy(x, cols, n0: int, kh: int, kw: int, geom, stream) -> None:
    """``cols`` (m, C_in·kh·kw, OH·OW) = the im2col of images ``n0 … n0 + m − 1`` of ``x``."""
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    m, k_len, p_len = cols.shape
    blocks_x, blocks_z = cdiv(p_len, THREADS), min(m, MAX_GRID_YZ)
    grid = (blocks_x, max(1, min(k_len // kw, cdiv(TARGET_BLOCKS, blocks_x * blocks_z), MAX_GRID_YZ)), blocks_z)
    if 0 not in grid:
        im2col[grid, THREADS, stream](x, cols, n0, kh, kw, sh, sw, dh, dw, geom.pad_top, geom.pad_left, geom.ow)


def run(call, geom) -> None:
    """``call.out = conv(call.x, call.w) (+ call.bias)`` for a one-group layer (``geom``: its
    ``_params.Geometry``), as im2col then one matmul per chunk of images."""
    x, w, stream = call.x, call.w, call.stream
    n, c_in, h, wd = x.shape
    c_out, _, kh, kw = w.shape
    k_len, p_len = c_in * kh * kw, geom.oh * geom.ow
    w2 = w.reshape(c_out, k_len)  # (a view: w is C-contiguous)
    out3 = call.out.reshape(n, c_out, p_len)
    pads = (geom.pad_top, geom.pad_left, geom.pad_bottom, geom.pad_right)
    if not needs_cols(kh, kw, geom.stride, pads):
        matmul(w2, x.reshape(n, c_in, h * wd), out=out3, stream=stream)
    else:
        chunk = max(1, min(n, MAX_COLS // max(k_len * p_len, 1)))
        cols = _BUFFERS.get(stream, ((chunk, k_len, p_len), np.dtype(x.dtype)),
                            lambda: cuda.device_array((chunk, k_len, p_len), x.dtype, stream=stream))
        for n0 in range(0, n, chunk):
            part = cols[:min(chunk, n - n0)]
            copy(x, part, n0, kh, kw, geom, stream)
            matmul(w2, part, out=out3[n0:n0 + len(part)], stream=stream)
    if call.bias is not None:
        add_bias[cdiv(out3.size, THREADS), THREADS, stream](out3, call.bias)
