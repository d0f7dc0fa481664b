"""The documentation site builds with warnings as errors, every rung has its lesson page,
no kernel code is pasted into it, and the code blocks of Getting started run."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from simt_tiles import registry

pytestmark = pytest.mark.long  # the site build (a module fixture) takes half a minute: start it first

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install -e '.[docs]')")
    pytest.importorskip("myst_parser", reason="myst-parser is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("html")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(check=False, args=[sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           str(DOCS), str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"sphinx-build -W failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def test_site_builds_with_every_page(site):
    for page in ("index", "getting_started", "interop", "api", "design", "generated/performance",
                 "generated/simt_vs_tile", "generated/exercises", "generated/lessons/index"):
        assert (site / f"{page}.html").is_file(), page


def test_a_lesson_page_per_rung_in_ladder_order(site):
    for ladder, rungs in registry.ladders().items():
        index = (site / "generated" / "lessons" / ladder / "index.html").read_text()
        positions = [index.find(f"{name}.html") for name in rungs]
        assert -1 not in positions and positions == sorted(positions), ladder
        for name in rungs:
            html = (site / "generated" / "lessons" / ladder / f"{name}.html").read_text()
            for section in ("The lesson", "Measured on the H200", "The hazard it introduces", "The kernel",
                            "What changed"):
                assert section in html, (ladder, name, section)


@pytest.fixture
def generate_module(monkeypatch):
    monkeypatch.syspath_prepend(str(DOCS))
    import generate

    return generate


def test_generated_pages_include_sources_not_pasted(generate_module, tmp_path):
    pages = generate_module.generate(tmp_path, analyze=False)
    total = sum(len(r) for r in registry.ladders().values())
    assert len(pages) == total
    for page in pages:
        text = (tmp_path / "lessons" / f"{page}.md").read_text()
        assert "```{literalinclude} /../simt_tiles/kernels/" in text
        # no kernel code pasted: outside the generated diff, no line of a kernel body
        outside_diff = text.split("```diff")[0]
        assert "cuda.syncthreads()" not in outside_diff and "@cuda.jit" not in outside_diff, page
        assert "ANALYZER HOOK" in text, page


def test_analyzer_numbers_when_installed(site):
    """With simt_tiles.analyze, the built lesson pages show its numbers: k06's 8-way store conflict,
    k01's 32 sectors per uncoalesced load (the build wrote them under docs/generated)."""
    pytest.importorskip("simt_tiles.analyze")
    lessons = DOCS / "generated" / "lessons" / "matmul"
    k06 = (lessons / "k06_transposed.md").read_text()
    assert "| a_t | store | _transposed.py: 60 | 8 | 8.00 |" in k06, k06
    k01 = (lessons / "k01_naive.md").read_text()
    assert "| a | load | k01_naive.py: 54 | 256 |  | 32.00 |" in k01, k01
    assert "wavefronts" in (site / "generated" / "lessons" / "matmul" / "k06_transposed.html").read_text()


@pytest.mark.parametrize("example", ["numpy_quickstart.py", "numba_pipeline.py", "errors.py"])
def test_example_runs(example, capsys):
    runpy.run_path(str(EXAMPLES / example), run_name="__main__")


@pytest.mark.gpu
@pytest.mark.parametrize("example, lib", [("cupy_interop.py", "cupy"), ("torch_interop.py", "torch")])
def test_gpu_example_runs(example, lib):
    pytest.importorskip(lib)
    runpy.run_path(str(EXAMPLES / example), run_name="__main__")


def test_every_example_is_on_a_page():
    pages = (DOCS / "getting_started.md").read_text()
    for path in EXAMPLES.glob("*.py"):
        assert f"examples/{path.name}" in pages, path.name
        compile(path.read_text(), str(path), "exec")  # the GPU-only ones at least parse
