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

import os
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
    skip_gpus2 = pytest.mark.skip(reason="needs two CUDA GPUs (fewer are visible)")
    two = None
    for item in items:
        if SIM and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
        if "gpus2" in item.keywords:
            if two is None:
                two = not SIM and _gpu_count() >= 2
            if not two:
                item.add_marker(skip_gpus2)
        if not SIM and "sim" in item.keywords:
            item.add_marker(skip_sim)
    _resume(config, items)
    _long_first(config, items)


def _resume(config, items) -> None:
    """``SIMT_TILES_DESELECT_FILE``: node IDs (one per line) not to run again — the tests a cut GPU pass
    already passed or skipped (``benchmarks/gpu_pass.sh`` writes them; ``TEST_RESUME`` reads them back)."""
    path = os.environ.get("SIMT_TILES_DESELECT_FILE")
    if not path:
        return
    with open(path) as fh:
        done = {line.strip() for line in fh if line.strip()}
    keep = [item for item in items if item.nodeid not in done]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
    items[:] = keep


def _gpu_count() -> int:
    from numba import cuda

    return len(cuda.gpus)


#: tests that compile for 25-120 s each on a GPU (the H200 pass's ``--durations`` and its compile log:
#: shipped presets with the filter's values compiled in, the generated matmul rungs): scheduled first
#: there, like the ``long`` tests everywhere.  (Semantics tests at tiny images run the small "sim"
#: tile on a GPU too: ``tests.common.SEMANTICS_CONFIG``.)  (The correlate1d callers that were slow there load
#: their k10 kernels from the disk cache the GPU pass's warm step fills.)
GPU_LONG = {
    "test_conv2d.py": {"test_larger_images_on_gpu", "test_conv2d_matches_reference"},
    "test_vector.py": {"test_vector_rungs_on_gpu"},
    "test_conv2d_separable.py": {"test_constant_filter_rungs_match_reference", "test_larger_images_on_gpu"},
    "test_conv2d_runtime_weights.py": {"test_matches_scipy_with_zero_taps_and_nonfinite_values"},
    "test_matmul.py": {"test_matmul_matches_reference"},
    "test_matmul_fast.py": {"test_small_tile_presets_match_reference"},
    "test_conv_nchw.py": {"test_larger_layers_on_gpu"},
}


def _is_long(item) -> bool:
    return "long" in item.keywords or (
        not SIM and getattr(item, "originalname", item.name) in GPU_LONG.get(item.path.name, ()))


def _long_first(config, items) -> None:
    """Put the long tests at the head of every xdist worker's first batch, not all on one worker.

    ``--dist worksteal`` hands worker i the i-th contiguous slice of the collection and an idle
    worker steals from the *tail* of a busy one's queue: long tests sorted to the front would all
    land in worker 0's slice and run one after another.  Here they are dealt round-robin to the
    slices' heads (tests of a module marked ``long`` as a whole stay together: they share a module
    fixture), so each starts at once on its own worker; without xdist they simply go first."""
    long_groups: dict = {}
    for item in items:
        if _is_long(item):
            marks = getattr(getattr(item, "module", None), "pytestmark", [])  # one mark or a list
            whole = any(m.name == "long" for m in (marks if isinstance(marks, list) else [marks]))
            long_groups.setdefault(item.path if whole else item.nodeid, []).append(item)
    if not long_groups:
        return
    rest = [item for item in items if not _is_long(item)]
    groups = sorted(long_groups.values(), key=len, reverse=True)
    workers = getattr(config, "workerinput", {}).get("workercount") or config.getoption("numprocesses", 0) or 1
    workers = workers if isinstance(workers, int) else 1
    # worksteal's first hand-out: worker i gets len(pending) // (workers - i) of what is left
    heads: list = [[] for _ in range(workers)]
    for i, group in enumerate(groups):
        heads[i % workers].extend(group)
    slices, left = [], len(items)
    for i in range(workers):
        slices.append(left // (workers - i))
        left -= slices[-1]
    out = []
    for i in range(workers):  # each slice: its long tests, then ordinary ones up to the slice's size
        take = max(0, slices[i] - len(heads[i]))
        out += heads[i] + rest[:take]
        rest = rest[take:]
    items[:] = out + rest


# --- on a GPU: how many kernels did this session compile, and how long did that take? ---------

_COMPILES: dict = {"kernels": 0, "seconds": 0.0, "by_kernel": {}, "by_test": {}}
_CURRENT_TEST: list = ["(collection)"]
#: SIMT_TILES_COMPILE_LOG=<file>: every worker appends "seconds<TAB>kernel<TAB>test" per compilation
_COMPILE_LOG = os.environ.get("SIMT_TILES_COMPILE_LOG")


def _count_compiles() -> None:
    """Wrap CUDADispatcher.compile: count the calls that add an overload (a real compilation)."""
    from numba.cuda.dispatcher import CUDADispatcher

    original = CUDADispatcher.compile

    def compile(self, sig):
        before = len(self.overloads)
        t0 = time.perf_counter()
        out = original(self, sig)
        if len(self.overloads) > before:
            seconds = time.perf_counter() - t0
            _COMPILES["kernels"] += 1
            _COMPILES["seconds"] += seconds
            test = _CURRENT_TEST[0]
            _COMPILES["by_test"][test] = _COMPILES["by_test"].get(test, 0.0) + seconds
            name = getattr(self.py_func, "__name__", "?")
            _COMPILES["by_kernel"][name] = _COMPILES["by_kernel"].get(name, 0) + 1
            if _COMPILE_LOG:  # one line per compilation, written at once: a run cut at its limit keeps it
                with open(_COMPILE_LOG, "a") as f:
                    f.write(f"{seconds:.2f}\t{name}\t{test}\n")
        return out

    CUDADispatcher.compile = compile


if not SIM:
    _count_compiles()


def pytest_sessionfinish(session):
    """An xdist worker hands its counts to the controller (:func:`pytest_testnodedown`)."""
    if not SIM and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["simt_tiles_compiles"] = _COMPILES


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller adds up its workers' counts (each worker compiles its own kernels)."""
    got = getattr(node, "workeroutput", {}).get("simt_tiles_compiles")
    if not got:
        return
    _COMPILES["kernels"] += got["kernels"]
    _COMPILES["seconds"] += got["seconds"]
    for key in ("by_kernel", "by_test"):
        for name, n in got[key].items():
            _COMPILES[key][name] = _COMPILES[key].get(name, 0) + n


def pytest_terminal_summary(terminalreporter):
    if SIM or not _COMPILES["kernels"]:
        return
    top = sorted(_COMPILES["by_kernel"].items(), key=lambda kv: -kv[1])[:12]
    terminalreporter.write_line(
        f"kernels compiled this session: {_COMPILES['kernels']} distinct (kernel, config, dtype) in "
        f"{_COMPILES['seconds']:.0f} s (all workers); most: " + ", ".join(f"{k} {n}" for k, n in top))
    terminalreporter.write_line("compile seconds by test (the GPU pass's schedule: tests/conftest.py GPU_LONG):")
    for test, seconds in sorted(_COMPILES["by_test"].items(), key=lambda kv: -kv[1])[:25]:
        terminalreporter.write_line(f"  {seconds:7.1f} s  {test}")


@pytest.fixture(autouse=True)
def _gpu_faults_blame_their_own_test(request):
    """On a GPU, synchronise after each test: an asynchronous fault (illegal address) then fails
    the test that launched it, not the next test of the same worker (a poisoned context fails all)."""
    _CURRENT_TEST[0] = request.node.nodeid  # compile seconds are charged to it (on a GPU)
    yield
    if not SIM:
        from numba import cuda

        cuda.synchronize()


@pytest.fixture
def plans():
    """Launch plans on (the simulator's default is off), none recorded before the test or kept after."""
    from simt_tiles import launch  # (after the backend choice at the top of this file)

    before = launch.set_enabled(True)
    launch.clear()
    yield launch
    launch.set_enabled(before)
    launch.clear()
