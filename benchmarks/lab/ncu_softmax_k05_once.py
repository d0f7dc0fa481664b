"""k05 with one block per SM, softmax then log_softmax of 4096 × 50257, once each (float32) for Nsight Compute:
why log_softmax took 2.6× softmax's time there (benchmarks/lab/softmax_log_probe.py).  Exits non-zero on a wrong
result (checked against torch in float64)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import torch

    import simt_tiles
    from simt_tiles.kernels.softmax import RUNGS

    x = torch.randn(4096, 50257, device="cuda") * 4
    cfg = RUNGS["k05_split_row"].presets["one_per_sm"]
    bad = 0
    for fn, ref in ((simt_tiles.softmax, torch.softmax), (simt_tiles.log_softmax, torch.log_softmax)):
        got = fn(x, config=cfg)
        err = float((got - ref(x.double(), dim=-1)).abs().max())
        print(fn.__name__, "max error", err)
        bad += not err < 1e-3
    torch.cuda.synchronize()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
