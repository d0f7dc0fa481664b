"""k12's copies before and after session 32's K striding: did the loop cost the copies anything?

Session 32 made ``k12.transpose_pad`` loop over K's tiles (a grid is at most 65535 blocks high) and
replaced ``pad_columns`` by ``k11.pad_copy`` (a loop over rows too), untimed.  The defaults check then
read 4096×1024×8192 +3% and 1031×997×1013 +6% against the committed H200 rows, on an H100: the card
confounds it.  This times the old kernels (kept here, verbatim, for the A/B only) beside the current
ones on one card, outputs compared.  Expected: within 2% (one more barrier per 32×32 tile).  Outcome
(results/transpose_probe_s33_h100.*): 11-33% slower (transposition), 30-51% (padded copy); both kernels are
now one tile a thread or block again, launched in pieces past 65535 grid rows; the probe's second run
(``…_s33b_…``) times those against the old ones.

    python3 benchmarks/lab/transpose_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    from _matmul_probe import finish, flusher
    from small_reduce_probe import timed  # median ms of one call after flush()
    from numba import cuda, float32

    from simt_tiles.kernels.matmul import k11_generated_split_k as k11
    from simt_tiles.kernels.matmul import k12_async_copy as k12
    from simt_tiles.runtime import cdiv

    @cuda.jit
    def transpose_old(a, at):  # k12.transpose_pad before 4d3deae: one K tile a block
        tile = cuda.shared.array((32, 33), float32)
        m0 = cuda.blockIdx.x * 32
        k0 = cuda.blockIdx.y * 32
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        m_len, k_len = a.shape
        for j in range(0, 32, 8):
            r, col = m0 + ty + j, k0 + tx
            tile[ty + j, tx] = a[r, col] if r < m_len and col < k_len else float32(0)
        cuda.syncthreads()
        for j in range(0, 32, 8):
            r, col = k0 + ty + j, m0 + tx
            if r < k_len and col < at.shape[1]:
                at[r, col] = tile[tx, ty + j]

    @cuda.jit
    def pad_columns_old(b, bp):  # k12.pad_columns before 4d3deae
        col, r = cuda.grid(2)
        if r < bp.shape[0] and col < bp.shape[1]:
            bp[r, col] = b[r, col] if col < b.shape[1] else float32(0)

    flush = flusher()

    rows = []

    def compare(kernel, shape, new, old, same) -> None:
        """Both once, ``same()`` checks them; then each timed after the flush."""
        new(), old()
        torch.cuda.synchronize()
        ok = same()
        t_new, t_old = (timed(f, flush, reps=40) * 1e3 for f in (new, old))
        rows.append({"kernel": kernel, "shape": shape, "new_us": t_new, "old_us": t_old, "ok": ok})
        print(f"{kernel} {shape}: new {t_new:8.2f} us  old {t_old:8.2f} us  new/old {t_new / t_old:.3f} "
              f"{'ok' if ok else 'WRONG'}", flush=True)

    for m, k in ((4096, 8192), (4096, 4096), (8192, 1024), (1031, 1013), (509, 521)):
        a = torch.randn(m, k, device="cuda")
        mp = cdiv(m, 4) * 4
        at_new, at_old = (torch.full((k, mp), float("nan"), device="cuda") for _ in range(2))
        da, dn, do = (cuda.as_cuda_array(t) for t in (a, at_new, at_old))
        compare("transpose", f"{m}x{k}", lambda: k12.transpose_into(da, dn, 0),
                lambda: transpose_old[(cdiv(mp, 32), cdiv(k, 32)), (32, 8)](da, do),
                lambda: bool(torch.equal(at_new[:, :m], a.T) and torch.equal(at_old, at_new)))
    for k, n in ((1013, 997), (4096, 1023), (8192, 4095)):
        b = torch.randn(k, n, device="cuda")
        np_ = cdiv(n, 4) * 4
        bn, bo = (torch.full((k, np_), float("nan"), device="cuda") for _ in range(2))
        db, dn, do = (cuda.as_cuda_array(t) for t in (b, bn, bo))
        compare("pad", f"{k}x{n}", lambda: k11.copy_padded(db, dn, 0),
                lambda: pad_columns_old[(cdiv(np_, 32), cdiv(k, 8)), (32, 8)](db, do),
                lambda: bool(torch.equal(bn[:, :n], b) and torch.equal(bo, bn)))
    return finish(args.json, __file__, rows)


if __name__ == "__main__":
    sys.exit(main())
