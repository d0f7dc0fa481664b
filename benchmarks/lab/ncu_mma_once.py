"""The tensor-core rungs (k13 TF32, k14 BF16) at 4096³, one launch per spec, for Nsight Compute (issue 30: why both
plateau at 62-64% of the mma.sync ceiling; the issue's "tensor pipe busy ≥ 70%, bank conflicts ≈ 0" check).

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats --kernel-name regex:matmul_mma_ \\
        python3 benchmarks/lab/ncu_mma_once.py ["tf32:large;bf16:large,bk=64,stages=2"]

Specs as ``python -m simt_tiles.bench.mma --presets`` takes them.  Each result is checked against a float64
product of the same operands (its error over :func:`simt_tiles.bounds.mma_error_factor`·|A|·|B|).
"""

from __future__ import annotations

import sys

from _once import Tally

SPECS = "tf32:large;bf16:large"


def main(argv: list[str]) -> int:
    import torch

    from simt_tiles.bench.mma import _rung_cfg
    from simt_tiles.bounds import mma_error_factor
    from simt_tiles.kernels.matmul.mma import matmul_mma

    tally = Tally("ncu_mma_once")
    n = 4096
    dtypes = {"tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    torch.manual_seed(0)
    for spec in (argv[0] if argv else SPECS).split(";"):
        prec, _, cfg = _rung_cfg(spec)
        a = torch.randn(n, n, device="cuda").to(dtypes[prec])
        b = torch.randn(n, n, device="cuda").to(dtypes[prec])
        c = torch.full((n, n), float("nan"), device="cuda", dtype=dtypes[prec])
        matmul_mma(a, b, precision=prec, out=c, config=cfg)
        ref = a.double() @ b.double()
        bound = mma_error_factor(n, prec, rounds_inputs=prec == "tf32", rounds_output=prec != "tf32",
                                 truncates=cfg.rounding == 2) + 2 * n * 2.0**-53  # + the float64 reference's own
        bound = bound * (a.double().abs() @ b.double().abs())
        ratio = float(((c.double() - ref).abs() / bound).max())
        tally.check(spec, ratio <= 1.0, f"err/bound {ratio:.3g}")
    return tally.exit_code()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
