"""What the one-launch GPU workloads of the lab share: the checkout on ``sys.path`` and a tally of checks.

The ``*_once.py`` scripts launch each case once and check it, for Nsight Compute and compute-sanitizer
(a profiler wants one launch per case; a sanitizer run is only worth its minutes if every result is
also right).  Each prints one line per check and exits non-zero on any failure.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


class Tally:
    """Failed checks of one script: ``check`` prints a line per result, ``exit_code`` the summary."""

    def __init__(self, script: str):
        self.script, self.failures = script, []

    def check(self, label: str, passed: bool, detail: str = "") -> bool:
        if not passed:
            self.failures.append(label)
        print(f"{label:<40} {'ok' if passed else 'FAIL'} {detail}", flush=True)
        return passed

    def exit_code(self) -> int:
        print(f"{self.script}: {len(self.failures)} failures {self.failures[:10]}")
        return 1 if self.failures else 0
