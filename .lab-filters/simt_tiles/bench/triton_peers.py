"""Triton peers for the benchmarks: matmul (FP32 and TF32), row softmax, sums, vector add, bias+ReLU.

Triton is optional: every function here returns ``(fn, None)``, or ``(None, reason)`` where
Triton cannot be imported, and the bench prints the reason instead of a row.  The kernels are
the ``@triton.jit`` functions of :func:`_kernels` (built on first use, so importing this module
needs no Triton); the SIMT-vs-Tile table counts their lines by name.

* matmul: Triton's tutorial matmul (grouped block order, masked edges); the dot runs with
  ``input_precision="ieee"`` (FFMA on the SIMT pipe: the arithmetic of cuBLAS FP32 and of the
  rungs) or ``"tf32"`` (tensor cores, operands rounded to tf32).  Autotuned over a few tile
  shapes per (M, N, K, precision) on the first call (that call is not timed: the bench checks it).
* softmax: the tutorial's fused row softmax — one row per program, loaded once as a
  power-of-two block padded with −inf, max-subtracted; rows up to 32768 columns.
* sums: float64 accumulation in every program, one rounding at the end — the arithmetic of
  ``simt_tiles.reduce`` (so the same rigorous bound applies); whole arrays in two launches
  (per-program partials, then one program over the partials), rows one launch (rows per program).
  max/min: the same structure, exact.
* vector add and bias+ReLU: one block of elements (or a rows × columns tile) per program.
"""

from __future__ import annotations

import math

__all__ = ["triton_bias_relu", "triton_matmul", "triton_reduce", "triton_row_sum", "triton_softmax",
           "triton_vector_add"]

_K: dict = {}
#: whole-array reductions: programs of the first launch (8 per SM of an H200) and elements per load
REDUCE_PROGRAMS, REDUCE_BLOCK = 1056, 2048
SOFTMAX_MAX_COLS = 32768


def _kernels():
    """The ``@triton.jit`` kernels (built once), or raise ImportError without Triton."""
    if _K:
        return _K
    import triton
    import triton.language as tl

    def cfg(bm, bn, bk, warps, stages):
        return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}, num_warps=warps, num_stages=stages)

    configs = [cfg(128, 128, 32, 8, 3), cfg(128, 128, 16, 8, 4), cfg(128, 256, 16, 8, 3),
               cfg(256, 128, 16, 8, 3), cfg(64, 128, 32, 4, 4), cfg(128, 64, 32, 4, 4),
               # small problems (~1000³ fills 132 SMs only with small tiles): a fair peer gets them too
               cfg(64, 64, 32, 4, 4), cfg(64, 64, 16, 4, 3), cfg(32, 64, 32, 4, 4)]

    @triton.autotune(configs=configs, key=["M", "N", "K", "PRECISION"])
    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, PRECISION: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        width = GROUP_M * grid_n
        group = pid // width
        first_m = group * GROUP_M
        size_m = min(grid_m - first_m, GROUP_M)
        pid_m = first_m + (pid % width) % size_m
        pid_n = (pid % width) // size_m
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        pa = a + rm[:, None] * sam + rk[None, :] * sak
        pb = b + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(tl.cdiv(K, BK)):
            kleft = K - k0 * BK
            x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < kleft), other=0.0)
            y = tl.load(pb, mask=(rk[:, None] < kleft) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc, input_precision=PRECISION)
            pa += BK * sak
            pb += BK * sbk
        pc = c + rm[:, None] * scm + rn[None, :] * scn
        tl.store(pc, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    @triton.jit
    def softmax_kernel(x, y, n_rows, n_cols, sx, sy, BLOCK: tl.constexpr):
        for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
            cols = tl.arange(0, BLOCK)
            v = tl.load(x + row * sx + cols, mask=cols < n_cols, other=-float("inf"))
            m = tl.max(v, axis=0)
            m = tl.where(m == -float("inf"), 0.0, m)  # a row of −inf: 0/0 = NaN, as scipy
            e = tl.exp(v - m)
            tl.store(y + row * sy + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)

    # program p folds blocks p, p + P, p + 2P, ... into a BLOCK-wide float64 vector, then one
    # tree: out[p] (float64 partial sums; max/min are exact)
    @triton.jit
    def reduce_kernel(x, out, n, OP: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        if OP == "sum":
            acc = tl.zeros((BLOCK,), dtype=tl.float64)
        elif OP == "max":
            acc = tl.full((BLOCK,), -float("inf"), dtype=tl.float64)
        else:
            acc = tl.full((BLOCK,), float("inf"), dtype=tl.float64)
        for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
            mask = start + offs < n
            if OP == "sum":
                acc += tl.load(x + start + offs, mask=mask, other=0.0).to(tl.float64)
            elif OP == "max":
                v = tl.load(x + start + offs, mask=mask, other=-float("inf")).to(tl.float64)
                acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)
            else:
                v = tl.load(x + start + offs, mask=mask, other=float("inf")).to(tl.float64)
                acc = tl.minimum(acc, v, propagate_nan=tl.PropagateNan.ALL)
        if OP == "sum":
            r = tl.sum(acc, axis=0)
        elif OP == "max":
            r = tl.max(acc, axis=0)
        else:
            r = tl.min(acc, axis=0)
        tl.store(out + tl.program_id(0), r.to(out.dtype.element_ty))

    @triton.jit
    def row_sum_kernel(x, out, n_rows, n_cols, sx, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float64)
        for c0 in range(0, n_cols, BN):
            mask = (rows[:, None] < n_rows) & (c0 + cols[None, :] < n_cols)
            acc += tl.load(x + rows[:, None] * sx + c0 + cols[None, :], mask=mask, other=0.0).to(tl.float64)
        tl.store(out + rows, tl.sum(acc, axis=1).to(tl.float32), mask=rows < n_rows)

    @triton.jit
    def vector_add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(c + offs, tl.load(a + offs, mask=offs < n) + tl.load(b + offs, mask=offs < n), mask=offs < n)

    @triton.jit
    def bias_relu_kernel(x, bias, y, n_rows, n_cols, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.program_id(1) * BN + tl.arange(0, BN)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        at = rows[:, None] * n_cols + cols[None, :]
        v = tl.load(x + at, mask=mask) + tl.load(bias + cols, mask=cols < n_cols)[None, :]
        tl.store(y + at, tl.where(v < 0.0, 0.0, v), mask=mask)  # NaN kept (NaN < 0 is false)

    _K.update(triton=triton, matmul=matmul_kernel, softmax=softmax_kernel, reduce=reduce_kernel,
              row_sum=row_sum_kernel, vector_add=vector_add_kernel, bias_relu=bias_relu_kernel)
    return _K


def _get(build):
    """``(build(kernels), None)`` or ``(None, reason)`` when Triton cannot be imported."""
    try:
        k = _kernels()
    except ImportError as exc:  # optional peer
        return None, f"Triton not importable ({exc})"
    return build(k), None


def triton_matmul(precision: str = "fp32"):
    """``(matmul(a, b, c), None)`` for PyTorch CUDA float32 tensors (zero-copy views of CuPy
    arrays work: ``torch.as_tensor``), or ``(None, reason)``.  ``precision``: "fp32" (IEEE) or "tf32"."""
    if precision not in ("fp32", "tf32"):
        raise ValueError(f"precision: expected 'fp32' or 'tf32'; got {precision!r}")

    def build(k):
        triton, kernel = k["triton"], k["matmul"]
        prec = "ieee" if precision == "fp32" else "tf32"

        def matmul(a, b, c):
            m, kk = a.shape
            n = b.shape[1]
            grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
            kernel[grid](a, b, c, m, n, kk, *a.stride(), *b.stride(), *c.stride(), prec)

        return matmul

    return _get(build)


def triton_softmax():
    """``(softmax(x, y), None)``: y = softmax of each row of the 2-D float32 tensor x (rows of
    at most :data:`SOFTMAX_MAX_COLS`, unit column stride), or ``(None, reason)``."""

    def build(k):
        triton, kernel = k["triton"], k["softmax"]

        def softmax(x, y):
            rows, cols = x.shape
            if cols > SOFTMAX_MAX_COLS or x.stride(1) != 1 or y.stride(1) != 1:
                raise ValueError(f"x: expected rows of at most {SOFTMAX_MAX_COLS} contiguous columns; "
                                 f"got shape {tuple(x.shape)}, strides {tuple(x.stride())}")
            block = triton.next_power_of_2(cols)
            warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
            kernel[(min(rows, 132 * 8),)](x, y, rows, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)

        return softmax

    return _get(build)


def triton_reduce(op: str = "sum"):
    """``(reduce(x, partials, out), None)``: out[0] = sum/max/min of the 1-D float32 tensor x
    (``partials``: :data:`REDUCE_PROGRAMS` float64 of workspace), or ``(None, reason)``."""
    if op not in ("sum", "max", "min"):
        raise ValueError(f"op: expected 'sum', 'max' or 'min'; got {op!r}")

    def build(k):
        kernel = k["reduce"]

        def reduce(x, partials, out):
            n = x.numel()
            programs = max(1, min(REDUCE_PROGRAMS, math.ceil(n / REDUCE_BLOCK)))
            kernel[(programs,)](x, partials, n, OP=op, BLOCK=REDUCE_BLOCK, num_warps=8)
            kernel[(1,)](partials, out, programs, OP=op, BLOCK=1024, num_warps=8)

        return reduce

    return _get(build)


def triton_row_sum():
    """``(row_sum(x, out), None)``: out[i] = the sum of row i of the 2-D float32 tensor x
    (float64 accumulation), or ``(None, reason)``."""

    def build(k):
        triton, kernel = k["triton"], k["row_sum"]

        def row_sum(x, out):
            rows, cols = x.shape
            if x.stride(1) != 1:
                raise ValueError(f"x: expected contiguous rows; got strides {tuple(x.stride())}")
            kernel[(triton.cdiv(rows, 4),)](x, out, rows, cols, x.stride(0), BM=4, BN=512, num_warps=4)

        return row_sum

    return _get(build)


def triton_vector_add():
    """``(vector_add(a, b, c), None)`` for 1-D contiguous float32 tensors, or ``(None, reason)``."""

    def build(k):
        triton, kernel = k["triton"], k["vector_add"]

        def vector_add(a, b, c):
            n = a.numel()
            kernel[(triton.cdiv(n, 4096),)](a, b, c, n, BLOCK=4096, num_warps=8)

        return vector_add

    return _get(build)


def triton_bias_relu():
    """``(bias_relu(x, bias, y), None)``: y = max(x + bias, 0) (NaN kept) for a C-contiguous 2-D
    float32 tensor x and 1-D bias, or ``(None, reason)``."""

    def build(k):
        triton, kernel = k["triton"], k["bias_relu"]

        def bias_relu(x, bias, y):
            rows, cols = x.shape
            kernel[(triton.cdiv(rows, 16), triton.cdiv(cols, 256))](x, bias, y, rows, cols, BM=16, BN=256,
                                                                   num_warps=8)

        return bias_relu

    return _get(build)
