"""The generated kernels' sources (k11, k12: ``simt-tiles codegen dump VARIANT``) are byte-identical to
the recorded ones for every preset, dtype, index width and vector build — a refactor of the house must
not change what the GPU compiles.  A change that means to (a new generator) regenerates the table:
``python tests/test_generated_sources.py > tests/generated_sources.sha256.json``.  Pure Python, ~2 s."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

TABLE = Path(__file__).with_name("generated_sources.sha256.json")


def hashes() -> dict:
    from simt_tiles.registry import ladders

    out = {}
    for lad, rungs in ladders().items():
        if lad == "matmul_mma":
            continue  # the tensor-core rungs are new generators (k11/k12's sources are the ones held fixed)
        for name, rung in rungs.items():
            if not hasattr(rung, "source"):
                continue
            for preset, cfg in rung.presets.items():
                for dt in ("float32", "float64"):
                    for idx32 in (True, False):
                        for vec in (True, False):
                            src = rung.source(cfg, dt, idx32, vec=vec)
                            out[f"{name}/{preset}/{dt}/{idx32}/{vec}"] = hashlib.sha256(src.encode()).hexdigest()
    return out


def test_generated_sources_are_unchanged():
    want, got = json.loads(TABLE.read_text()), hashes()
    changed = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    assert not changed, f"generated sources changed (or appeared, or went): {changed[:8]} ({len(changed)})"


if __name__ == "__main__":
    json.dump(hashes(), sys.stdout, indent=1, sort_keys=True)
