"""The hypothesis profiles (documented in tests/conftest.py) and :func:`examples`, which scales
a test's own example count with the profile.  Imported by conftest after the backend is chosen."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

from simt_tiles.runtime import SIMULATOR

#: example counts are written for ``sim`` (30 per property test); other profiles scale them
_BASE = 30
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
_NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]

settings.register_profile("sim", max_examples=_BASE, deadline=None, suppress_health_check=_QUIET)
# ci: 7 examples per property test (10 until session 14, when the suite grew to 3000 tests) — what fits the 10-minute budget on 2 cores with the compile gate
# (session 10 cut it to 7 when CI took 578-659 s; the simulator's yielding block driver and the
# inliner's copy fix brought CI to 400 s, session 11); `scripts/test --full` runs 200
settings.register_profile("ci", max_examples=7, deadline=None, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=_QUIET)
settings.register_profile("dev", max_examples=_BASE, deadline=None, phases=_NO_SHRINK,
                          report_multiple_bugs=False, suppress_health_check=_QUIET)
settings.register_profile("full", max_examples=200, deadline=None, suppress_health_check=_QUIET)
# gpu: the H200 pass; no shrinking (each shrink step compiles kernels: a failure is reproduced and
# shrunk in the simulator from the printed example), derandomized so a rerun draws the same examples
settings.register_profile("gpu", max_examples=10, deadline=None, derandomize=True, database=None,
                          phases=_NO_SHRINK, report_multiple_bugs=False, print_blob=True,
                          suppress_health_check=_QUIET)
settings.register_profile("gpu-quick", max_examples=4, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("gpu-triage", max_examples=4, deadline=None, phases=_NO_SHRINK,
                          report_multiple_bugs=False, suppress_health_check=_QUIET)

PROFILE = os.environ.get("SIMT_TILES_HYPOTHESIS_PROFILE", "sim" if SIMULATOR else "gpu")
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """``n`` examples as written for the ``sim`` profile, scaled to the loaded profile's count."""
    return max(1, round(n * settings.default.max_examples / _BASE))
