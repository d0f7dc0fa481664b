"""Test set-up: choose GPU or simulator *before* Numba is imported, pick the hypothesis
profile, and (on a GPU) count the kernels the session compiles.

Hypothesis profiles (``SIMT_TILES_HYPOTHESIS_PROFILE=<name>``; default ``sim`` in the
simulator, ``gpu`` on a GPU):

* ``sim``  — the simulator default: few, tiny examples (every thread runs in Python).
* ``ci``   — what ``scripts/test`` runs (CI, 2 cores): the same tests and strategies with
  fewer examples per property test, derandomized (a CI verdict can be re-run).
* ``dev``  — the simulator default without the shrink phase and stopping at the first
  failure: reports a failing example in seconds instead of minutes (then re-run with
  ``sim`` for the minimal one).
* ``full`` — a deeper run (~7× ``sim``'s examples): before a release, or after touching a
  kernel's index arithmetic.
* ``gpu``  — on a GPU: configs come from the shipped presets plus a pool drawn once per run (each
  distinct kernel compiles once per run), the conv property tests draw one kernel per mode once per
  run (``tests.common.kernel_cases``) and run correlate and convolve in one test (``BOTH_OPS``);
  derandomized and without the shrink phase (every shrink step compiles kernels: a failure is
  shrunk in the simulator from the printed example).
  ``gpu-quick`` and ``gpu-triage`` take fewer examples.

Tests that fix their own example count scale it with :func:`tests.profiles.examples`.
"""

from __future__ import annotations

import time

from simt_tiles import _probe

SIM = _probe.select_backend()  # must precede any import of numba.cuda

import pytest  # noqa: E402

pytest_plugins = ["simt_tiles._pytest_racecheck"]  # --racecheck / SIMT_TILES_RACECHECK=1

from .profiles import PROFILE  # noqa: E402  (registers and loads the hypothesis profiles)


def pytest_report_header(config):
    return (f"simt_tiles backend: {'Numba CUDA simulator' if SIM else 'real GPU'}; "
            f"hypothesis profile {PROFILE}")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a real CUDA GPU (running in the simulator)")
    skip_sim = pytest.mark.skip(reason="simulator-only test (a real GPU is present)")
    for item in items:
        if SIM and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
        if not SIM and "sim" in item.keywords:
            item.add_marker(skip_sim)
    # the tests that run for minutes go first: with pytest-xdist (scripts/test: --dist worksteal) they
    # start at once on their own workers instead of leaving the other cores idle at the end
    items.sort(key=lambda item: "long" not in item.keywords)


# --- on a GPU: how many kernels did this session compile, and how long did that take? ---------

_COMPILES: dict = {"kernels": 0, "seconds": 0.0, "by_kernel": {}}


def _count_compiles() -> None:
    """Wrap CUDADispatcher.compile: count the calls that add an overload (a real compilation)."""
    from numba.cuda.dispatcher import CUDADispatcher

    original = CUDADispatcher.compile

    def compile(self, sig):
        before = len(self.overloads)
        t0 = time.perf_counter()
        out = original(self, sig)
        if len(self.overloads) > before:
            _COMPILES["kernels"] += 1
            _COMPILES["seconds"] += time.perf_counter() - t0
            name = getattr(self.py_func, "__name__", "?")
            _COMPILES["by_kernel"][name] = _COMPILES["by_kernel"].get(name, 0) + 1
        return out

    CUDADispatcher.compile = compile


if not SIM:
    _count_compiles()


def pytest_terminal_summary(terminalreporter):
    if SIM or not _COMPILES["kernels"]:
        return
    top = sorted(_COMPILES["by_kernel"].items(), key=lambda kv: -kv[1])[:12]
    terminalreporter.write_line(
        f"kernels compiled this session: {_COMPILES['kernels']} distinct (kernel, config, dtype) in "
        f"{_COMPILES['seconds']:.0f} s; most: " + ", ".join(f"{k} {n}" for k, n in top))


@pytest.fixture(autouse=True)
def _gpu_faults_blame_their_own_test():
    """On a GPU, synchronise after each test: an asynchronous fault (illegal address) then fails
    the test that launched it, not the next test of the same worker (a poisoned context fails all)."""
    yield
    if not SIM:
        from numba import cuda

        cuda.synchronize()
