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


def _render_readme():
    import importlib.util

    path = os.path.join(os.path.dirname(README), "benchmarks", "render_readme.py")
    spec = importlib.util.spec_from_file_location("render_readme", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_numbers_are_generated():
    """Every measured number in the README is the output of benchmarks/render_readme.py."""
    mod = _render_readme()
    text = open(README).read()
    results = os.path.join(os.path.dirname(README), "benchmarks", "results")
    fresh = mod.render_all(text, results, "h200", plots=False)

    def numbers(t):  # per block, every number in it but those of the lessons (from the rung headers)
        blocks = re.findall(r"<!-- (\w+)-table:begin -->(.*?)<!-- \1-table:end -->", t, flags=re.S)
        out = {}
        for name, body in blocks:
            if name == "ladder":  # | rung | what it teaches | numbers ... |
                body = "\n".join("|".join(c for i, c in enumerate(line.split("|")) if i != 2)
                                  for line in body.splitlines())
            out[name] = re.findall(r"\d+(?:\.\d+)?", body)
        return out

    assert numbers(fresh) == numbers(text), "run python benchmarks/render_readme.py"
    assert len(numbers(text)) == 9


def test_readme_prose_has_no_measured_numbers():
    """Outside the generated blocks no rate, time, percentage or ratio is typed by hand."""
    text = open(README).read()
    prose = re.sub(r"<!-- (\w+)-table:begin -->.*?<!-- \1-table:end -->", "", text, flags=re.S)
    typed = re.findall(r"\d+(?:\.\d+)?\s*(?:GB/s|TB/s|TFLOP/s|µs|us\b|ms\b|%|×\s*cuBLAS)", prose)
    assert not typed, typed


def test_readme_speaks_only_of_the_project():
    text = open(README).read()
    for word in ("../shared", "prepare-carry", "gpu-carry", "carry:", "lent H200", "git show", ".ci/"):
        assert word not in text, word


def test_the_zoo_table_shows_a_failed_row_and_no_torch(tmp_path):
    """A failed default (no time) and a run without torch: dashes and the row named, the mean over the rest (the
    table raised a KeyError, and without torch every row was empty)."""
    import copy
    import json

    mod = _render_readme()
    src = os.path.join(os.path.dirname(README), "benchmarks", "results", "matmul_zoo_h200.json")
    with open(src) as fh:
        data = json.load(fh)
    bad = copy.deepcopy(data)
    first = next(r for r in bad["results"] if r["impl"] == "default")
    first["passed"] = False
    first.pop("median_ms", None)
    bad["results"] = [r for r in bad["results"] if r["impl"] != "torch.matmul"]
    path = tmp_path / "zoo.json"
    path.write_text(json.dumps(bad))
    text = mod.zoo_block(str(path))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows and all(line.count("|") == 8 for line in rows)
    assert sum("(check failed)" in line for line in rows) == 1 and "1 left out: a failed check" in text
