"""One k08 (or k09) softmax launch (after warm-up) for Nsight Compute: ``ncu -k regex:k08 python3
benchmarks/lab/ncu_k08_once.py ROWS COLS [variant=k09_register_pieces] [field=value ...]`` (fields replace the
rung's default preset's)."""

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import simt_tiles  # noqa: E402
from simt_tiles.kernels.softmax import RUNGS  # noqa: E402

rows, cols = int(sys.argv[1]), int(sys.argv[2])
fields = dict(a.split("=") for a in sys.argv[3:])
variant = fields.pop("variant", "k08_ticket_queue")
cfg = dataclasses.replace(RUNGS[variant].presets["default"], **{k: int(v) for k, v in fields.items()})
x = torch.randn(rows, cols, device="cuda")
out = torch.empty_like(x)
for _ in range(3):
    simt_tiles.softmax(x, out=out, variant=variant, config=cfg)
torch.cuda.synchronize()
