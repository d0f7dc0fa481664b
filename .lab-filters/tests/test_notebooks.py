"""The chapter notebooks (notebooks/*.ipynb) run top to bottom in the simulator: every code cell
except those tagged ``gpu`` (timings), executed in one namespace per notebook by a tiny runner —
no Jupyter needed (nbclient would add a kernel, ZeroMQ and nbformat for what ``exec`` does here).
They are what ``notebooks/make_notebooks.py`` writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simt_tiles.runtime import SIMULATOR

pytest.importorskip("matplotlib")  # the notebooks draw the analyzer's pictures


ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHAPTERS = ["01_matmul", "02_filters", "03_nchw", "04_patterns", "05_simt_vs_tile"]


def _cells(path: Path):
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    return nb["cells"]


def test_a_notebook_per_chapter_install_first_gpu_last():
    assert [p.stem for p in NOTEBOOKS] == CHAPTERS
    for path in NOTEBOOKS:
        code = [c for c in _cells(path) if c["cell_type"] == "code"]
        assert "install" in code[0]["metadata"].get("tags", []), path.name
        assert "gpu" in code[-1]["metadata"].get("tags", []), path.name
        assert all(not c["outputs"] for c in code), f"{path.name}: committed with outputs"


def test_notebooks_are_what_the_generator_writes(tmp_path):
    text = (ROOT / "notebooks" / "make_notebooks.py").read_text().replace(
        "HERE = Path(__file__).resolve().parent", f"HERE = Path({str(tmp_path)!r})")
    script = tmp_path / "make.py"
    script.write_text(text)
    subprocess.run([sys.executable, str(script)], check=True)
    for path in NOTEBOOKS:
        assert (tmp_path / path.name).read_text() == path.read_text(), f"{path.name}: run notebooks/make_notebooks.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch, capsys):
    monkeypatch.chdir(path.parent)
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code" or ("gpu" in cell["metadata"].get("tags", []) and SIMULATOR):
            continue
        source = "".join(cell["source"])
        exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)  # noqa: S102 — our own notebooks
        ran += 1
    assert ran >= 4
    out = capsys.readouterr().out
    assert ("simulator" if SIMULATOR else "GPU") in out and "passed=False" not in out, out
