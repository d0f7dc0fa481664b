"""One k08 softmax launch (after warm-up) for Nsight Compute: ``ncu -k regex:k08 python3 benchmarks/lab/ncu_k08_once.py
ROWS COLS [field=value ...]`` (fields replace the default preset's)."""

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import simt_tiles  # noqa: E402
from simt_tiles.kernels.softmax import RUNGS  # noqa: E402

rows, cols = int(sys.argv[1]), int(sys.argv[2])
cfg = dataclasses.replace(RUNGS["k08_ticket_queue"].presets["default"],
                          **{k: int(v) for k, v in (a.split("=") for a in sys.argv[3:])})
x = torch.randn(rows, cols, device="cuda")
out = torch.empty_like(x)
for _ in range(3):
    simt_tiles.softmax(x, out=out, variant="k08_ticket_queue", config=cfg)
torch.cuda.synchronize()
