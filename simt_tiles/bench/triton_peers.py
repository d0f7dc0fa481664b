"""Triton peers for the benchmarks: a pure-FP32 matmul (``tl.dot(..., input_precision="ieee")``).

Triton is optional: :func:`triton_matmul` returns ``(None, reason)`` where it cannot be imported,
and the bench prints the reason instead of a row.

The kernel is Triton's tutorial matmul (grouped block order, masked edges), with the dot
forced to IEEE FP32 — FFMA on the SIMT pipe, no TF32 tensor cores — so it is the same
arithmetic as cuBLAS FP32 and the simt_tiles rungs.  Autotuned over a few tile shapes per
(M, N, K) on the first call (that call is not timed: the bench checks it first).
"""

from __future__ import annotations

__all__ = ["triton_matmul"]

_CACHE: dict = {}


def triton_matmul():
    """``(matmul(a, b, c), None)`` for CuPy/PyTorch CUDA float32 arrays, or ``(None, reason)``."""
    if "fn" in _CACHE:
        return _CACHE["fn"], None
    try:
        import triton
        import triton.language as tl
    except ImportError as exc:  # optional peer
        return None, f"Triton not importable ({exc})"

    def cfg(bm, bn, bk, warps, stages):
        return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}, num_warps=warps, num_stages=stages)

    configs = [cfg(128, 128, 32, 8, 3), cfg(128, 128, 16, 8, 4), cfg(128, 256, 16, 8, 3),
               cfg(256, 128, 16, 8, 3), cfg(64, 128, 32, 4, 4), cfg(128, 64, 32, 4, 4),
               # small problems (~1000³ fills 132 SMs only with small tiles): a fair peer gets them too
               cfg(64, 64, 32, 4, 4), cfg(64, 64, 16, 4, 3), cfg(32, 64, 32, 4, 4)]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
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
        for k0 in range(0, tl.cdiv(K, BK)):
            kleft = K - k0 * BK
            x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < kleft), other=0.0)
            y = tl.load(pb, mask=(rk[:, None] < kleft) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc, input_precision="ieee")
            pa += BK * sak
            pb += BK * sbk
        pc = c + rm[:, None] * scm + rn[None, :] * scn
        tl.store(pc, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def matmul(a, b, c):  # PyTorch CUDA tensors (zero-copy views of CuPy arrays work: torch.as_tensor)
        m, k = a.shape
        n = b.shape[1]
        strides = lambda x: tuple(x.stride())  # noqa: E731  (in elements)
        grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)  # noqa: E731
        kernel[grid](a, b, c, m, n, k, *strides(a), *strides(b), *strides(c))

    _CACHE["fn"] = matmul
    return matmul, None
