"""Any one-group layer as a matmul: im2col, then :func:`simt_tiles.matmul` (where cuDNN's GEMM algorithms start).

With K = C_in·KH·KW and P = OH·OW::

    cols[n, (c·KH + a)·KW + b, i·OW + j] = x[n, c, i·sh + a·dh − pad_top, j·sw + b·dw − pad_left]   (0 outside x)
    out[n] (C_out, P) = w (C_out, K) @ cols[n] (K, P)         one batched matmul, w broadcast over n

so a layer of any stride, dilation and padding runs on the matmul ladder's tiles (the 128×128 register
tiles, split-K, the narrow class) instead of a direct kernel.  The products and sums are the layer's, in
another order: within its γ_K bound.  Traffic: ``cols`` is KH·KW/(sh·sw) times x, written once and read by
the matmul (a 3×3 stride-1 layer: ~9× x, against the direct rungs' one read); a 1×1 layer of stride 1
with no padding needs none (x reshaped is the right operand).  Images go in chunks whose ``cols`` stay
under :data:`MAX_COLS` elements (a kept buffer per stream, as the space-to-depth phases); an image whose
``cols`` alone would pass it goes in pieces of its output pixels, each matmul's result placed into ``out``.  Bias: one
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


def _im2col(x, cols, n0, c_in, h, w, k_len, p_len, p0, q_len, kh, kw, sh, sw, dh, dw, pad_top, pad_left, ow):
    """cols[m, (c·kh + a)·kw + b, q] = x[n0 + m, c, i·sh + a·dh − pad_top, j·sw + b·dw − pad_left] for the
    output pixels p = i·ow + j = p0 + q, q < q_len (all of an image's: p0 = 0, q_len = p_len), on the flat arrays
    (``x`` (N·C_in·h·w,), ``cols`` (m·k_len·q_len,)).

    Grid (⌈q_len / THREADS⌉, Y, images): x over the output pixels (consecutive threads write
    consecutive columns); block y takes the filter rows ca = (c, a) y, y + Y, … (uniform per block: :func:`copy`
    picks Y for ~:data:`TARGET_BLOCKS` blocks), z the images (strided past the grid's 65535).  A thread writes
    its pixel's kw taps of every row it takes, stepping its flat offsets (divisions per thread and image, none per
    row or tap): the copy is bound by issued instructions, not by memory (benchmarks/notes/conv_nchw.md)."""
    q = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    p = p0 + q
    if q < q_len and p < p_len:
        i = p // ow
        j = p - i * ow
        s0 = j * sw - pad_left  # the column of tap b = 0
        rows = k_len // kw
        step = cuda.gridDim.y  # the filter rows a block strides by: (dc, da) channels and filter rows
        dc = step // kh
        da = step - dc * kh
        for m in range(cuda.blockIdx.z, cols.size // (k_len * q_len), cuda.gridDim.z):
            img = (n0 + m) * c_in
            ca = cuda.blockIdx.y
            c = ca // kh
            a = ca - c * kh
            while ca < rows:
                r = i * sh + a * dh - pad_top
                src = ((img + c) * h + r) * w + s0  # x's flat offset of tap b = 0
                dst = (m * k_len + ca * kw) * q_len + q  # cols' flat offset of tap b = 0
                row_in = 0 <= r < h
                s = s0
                for _ in range(kw):  # (unsigned subscripts: no negative-index wrap to compute)
                    if row_in and 0 <= s < w:
                        cols[np.uint64(dst)] = x[np.uint64(src)]
                    else:
                        cols[np.uint64(dst)] = 0  # the zero padding
                    s += dw
                    src += dw
                    dst += q_len
                ca += step
                c += dc
                a += da
                if a >= kh:
                    a -= kh
                    c += 1


def _place(out3, part, img, p0):
    """out3[img, o, p0 + q] = part[o, q]: a piece of one image's output pixels."""
    t = cuda.grid(1)
    c_out, q_len = part.shape
    if t < c_out * q_len:
        o = t // q_len
        q = t - o * q_len
        out3[img, o, p0 + q] = part[o, q]


def _add_bias(out, bias):
    """out[n, o, p] += bias[o]."""
    t = cuda.grid(1)
    n_img, c_out, p_len = out.shape
    if t < n_img * c_out * p_len:
        o = (t // p_len) % c_out
        out[t // (p_len * c_out), o, t % p_len] += bias[o]


im2col = jit(_im2col)
place = jit(_place)
add_bias = jit(_add_bias)


def needs_cols(kh: int, kw: int, stride, pads) -> bool:
    """False for a 1×1 layer of stride 1 and no padding (x itself is the right operand; a 1×1 filter
    has no dilation to apply)."""
    return (kh, kw, *stride) != (1, 1, 1, 1) or any(pads)


def copy(x, cols, n0: int, kh: int, kw: int, geom, stream, p0: int = 0) -> None:
    """``cols`` (m, C_in·kh·kw, Q) = the im2col of images ``n0 … n0 + m − 1`` of ``x``, output pixels
    ``p0 … p0 + Q − 1`` (all of them: Q = OH·OW, p0 = 0)."""
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    m, k_len, q_len = cols.shape
    blocks_x, blocks_z = cdiv(q_len, THREADS), min(m, MAX_GRID_YZ)
    grid = (blocks_x, max(1, min(k_len // kw, cdiv(TARGET_BLOCKS, blocks_x * blocks_z), MAX_GRID_YZ)), blocks_z)
    if cols.size:  # (none for no images or pixels, and none for C_in = 0: its rows' k_len // kw divides by 0)
        _, c_in, h, w = x.shape
        im2col[grid, THREADS, stream](x.reshape(x.size), cols.reshape(cols.size), n0, c_in, h, w, k_len,
                                      geom.oh * geom.ow, p0, q_len, kh, kw, sh, sw, dh, dw, geom.pad_top,
                                      geom.pad_left, geom.ow)


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
    elif k_len * p_len > MAX_COLS:  # one image's cols past the cap: its output pixels in pieces
        q = max(1, MAX_COLS // k_len)
        cols = _BUFFERS.get(stream, ((k_len * q,), np.dtype(x.dtype), "pixels"),
                            lambda: cuda.device_array(k_len * q, x.dtype, stream=stream))
        part = _BUFFERS.get(stream, ((c_out * q,), np.dtype(x.dtype), "piece"),
                            lambda: cuda.device_array(c_out * q, x.dtype, stream=stream))
        for img in range(n):
            for p0 in range(0, p_len, q):
                qc = min(q, p_len - p0)
                piece, res = cols[:k_len * qc].reshape(1, k_len, qc), part[:c_out * qc].reshape(c_out, qc)
                copy(x, piece, img, kh, kw, geom, stream, p0)
                matmul(w2, piece[0], out=res, stream=stream)
                place[cdiv(res.size, THREADS), THREADS, stream](out3, res, img, p0)
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
