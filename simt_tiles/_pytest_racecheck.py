"""pytest plugin: ``pytest --racecheck`` (or ``SIMT_TILES_RACECHECK=1``) race-checks every simulated launch.

Every kernel launched in Numba's CUDA simulator during the session records its
shared-memory accesses; a conflicting pair within one barrier interval (see
:mod:`simt_tiles.analyze`) fails the launch with :class:`simt_tiles.analyze.RaceError`
naming both source lines.  On a GPU the option does nothing.  Registered by
``pytest_plugins`` in ``tests/conftest.py``; imports Numba only when enabled.
"""

from __future__ import annotations

from simt_tiles import analyze
from simt_tiles._options import env_flag


def racecheck_requested(config=None) -> bool:
    """``--racecheck`` given, or ``SIMT_TILES_RACECHECK`` on (1, true, yes, on; a value that is neither on
    nor off is a ValueError naming the variable)."""
    if config is not None and config.getoption("racecheck", default=False):
        return True
    return env_flag("SIMT_TILES_RACECHECK")


def pytest_addoption(parser):
    parser.getgroup("simt_tiles").addoption(
        "--racecheck", action="store_true", default=False,
        help="race-check every kernel launched in the CUDA simulator (shared-memory hazards "
             "within one barrier interval fail the launch); also SIMT_TILES_RACECHECK=1")


def pytest_configure(config):
    if not racecheck_requested(config):
        return
    # deferred: loads Numba (backend choice first)
    from simt_tiles.runtime import SIMULATOR

    if SIMULATOR:
        analyze.enable_racecheck()


def pytest_report_header(config):
    if racecheck_requested(config):
        return "simt_tiles race check: on (simulated launches raise RaceError on a shared-memory race)"
    return None


def pytest_unconfigure(config):
    if racecheck_requested(config):
        analyze.disable_racecheck()
