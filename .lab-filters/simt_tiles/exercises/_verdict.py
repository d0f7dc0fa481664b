"""The outcome of grading one exercise (its own module: the package and its grader both use it)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Verdict:
    """The outcome of grading: passed, the cases run, and the first failure's explanation."""

    name: str
    passed: bool
    cases: int
    message: str

    def __str__(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.name}"
        return f"{head}: {self.message}"
