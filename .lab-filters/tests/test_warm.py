"""simt-tiles warm: its jobs, the in-process path (simulator: a tiny job), the command line, and the
first-call notice on the ``simt_tiles.compile`` logger."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import simt_tiles
import importlib

from simt_tiles import runtime

warm = importlib.import_module("simt_tiles.warm")


def test_jobs_cover_every_function_and_refuse_unknown_names():
    for f in warm.FUNCTIONS:
        assert warm.jobs_for([f]), f
    assert {j[0] for j in warm.jobs_for(["matmul"])} == {"matmul"}
    with pytest.raises(ValueError, match=r"functions: expected names from .*; got 'nope'"):
        warm.jobs_for(["nope"])


def test_in_process_warm_runs_the_default_path(monkeypatch):
    monkeypatch.setattr(warm, "jobs_for", lambda functions: [("vector_add",), ("reduce", "sum", (40,), None)])
    done = simt_tiles.warm(["vector_add"], in_process=True, progress=False)
    assert [name for name, _ in done] == ["vector_add", "reduce sum (40,) None"]


def test_command_line_help_names_the_functions():
    out = subprocess.run([sys.executable, "-m", "simt_tiles", "warm", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "correlate2d" in out.stdout and "--jobs" in out.stdout


def test_a_cold_disk_cached_kernel_is_announced(caplog, tmp_path, monkeypatch):
    index = tmp_path / "k.nbi"
    monkeypatch.setattr(runtime, "_cache_index_path", lambda pyfunc: str(index))
    with caplog.at_level(logging.WARNING, logger="simt_tiles.compile"):
        runtime._note_cold_compile("k99_generated", "float32", None)
        index.write_bytes(b"")  # cached: a load, no notice
        runtime._note_cold_compile("k99_generated", "float32", None)
    assert [r.name for r in caplog.records] == ["simt_tiles.compile"]
    assert "compiling k99_generated (float32)" in caplog.text and "simt-tiles warm" in caplog.text
