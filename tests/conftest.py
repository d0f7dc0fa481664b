"""Test set-up: choose GPU or simulator *before* Numba is imported, and pick the
hypothesis profile (few, tiny examples in the slow simulator; more, larger on a GPU)."""

from __future__ import annotations

import os

from simt_tiles import _probe

SIM = _probe.select_backend()  # must precede any import of numba.cuda

import pytest  # noqa: E402

pytest_plugins = ["simt_tiles._pytest_racecheck"]  # --racecheck / SIMT_TILES_RACECHECK=1
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "sim", max_examples=30, deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("gpu", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# for the lent H200's time budget: every drawn config is a new compilation (0.5–3 s each), so the
# full "gpu" profile takes longer than one device call; benchmarks/gpu_pass.sh uses this one
settings.register_profile("gpu-quick", max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("SIMT_TILES_HYPOTHESIS_PROFILE", "sim" if SIM else "gpu"))


def pytest_report_header(config):
    return f"simt_tiles backend: {'Numba CUDA simulator' if SIM else 'real GPU'}"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a real CUDA GPU (running in the simulator)")
    skip_sim = pytest.mark.skip(reason="simulator-only test (a real GPU is present)")
    for item in items:
        if SIM and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
        if not SIM and "sim" in item.keywords:
            item.add_marker(skip_sim)
