"""examples/digits_ddp.py: its pure parts on CPU (arguments, the batch split, the tolerance), and the
run itself on two GPUs (``gpus2``: torchrun, NCCL, ``--check`` against one GPU)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_ddp.py"


def _load():
    spec = importlib.util.spec_from_file_location("digits_ddp", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_nvls_off_and_arguments():
    ddp = _load()
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    a = ddp.parse_args(["--batch", "32", "--check"])
    assert (a.batch, a.steps, a.check) == (32, 10, True)
    with pytest.raises(SystemExit):
        ddp.parse_args(["--batch", "0"])


def test_shard_splits_the_global_batch():
    ddp = _load()
    parts = [ddp.shard(64, 2, r) for r in range(2)]
    assert parts == [slice(0, 32), slice(32, 64)]
    assert sorted(i for p in parts for i in range(64)[p]) == list(range(64))
    with pytest.raises(ValueError, match=r"^batch: expected a multiple of the 2 processes; got 63"):
        ddp.shard(63, 2, 0)


def test_tolerance():
    ddp = _load()
    assert ddp.tolerance(10, 64, 0.05) == pytest.approx(10 * 64 * 2.0**-24 * 1.5**10)
    assert ddp.tolerance(10, 64, 0.05) < 3e-3


@pytest.mark.gpus2
def test_ddp_matches_one_gpu():
    pytest.importorskip("torch")
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(EXAMPLE),
                          "--steps", "10", "--check"], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "check: largest parameter difference" in run.stdout and "ok" in run.stdout
