"""Documentation code is test code: every README block marked ``<!-- doctest: sim -->`` runs."""

from __future__ import annotations

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
BLOCKS = re.findall(r"<!-- doctest: sim -->\s*```python\n(.*?)```", open(README).read(), flags=re.S)


def test_readme_has_runnable_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, capsys):
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), {"__name__": f"readme_{index}"})
