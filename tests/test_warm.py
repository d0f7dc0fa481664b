"""simt-tiles warm: its jobs, the in-process path (simulator: a tiny job), the command line, and the
first-call notice on the ``simt_tiles.compile`` logger."""

from __future__ import annotations

import logging
import os
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


def test_command_line_without_functions_takes_the_default_and_names_a_bad_one():
    """``simt-tiles warm`` with no FUNCTION: the disk-cached ones (Python 3.11's argparse refused its own default
    against ``choices``: 'invalid choice: []'); a bad name: the usage error, exit 2, before any GPU check."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    ok = subprocess.run([sys.executable, "-m", "simt_tiles", "warm"], capture_output=True, text=True, env=env)
    assert "invalid choice" not in ok.stderr and "no GPU" in ok.stderr, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "simt_tiles", "warm", "bogus"], capture_output=True, text=True,
                         env=env)
    assert bad.returncode == 2 and "invalid choice: 'bogus'" in bad.stderr, bad.stderr


def test_command_line_without_a_gpu_or_the_variable_says_no_gpu():
    """No GPU and NUMBA_ENABLE_CUDASIM unset: the backend is chosen before Numba loads (the simulator), so the
    same clean message and exit 2 as with the variable set (it started jobs: a wall of CudaSupportError)."""
    from simt_tiles import _probe

    if _probe.gpu_present():
        pytest.skip("a GPU is present: warm would compile")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-m", "simt_tiles", "warm", "--no-progress"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 2 and "simt-tiles warm: no GPU" in out.stderr, out.stderr
    assert "Error" not in out.stderr, out.stderr


@pytest.mark.parametrize("jobs", ["0", "-3", "x"])
def test_a_bad_jobs_count_is_a_usage_error(jobs, capsys):
    from simt_tiles import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["warm", "-j", jobs])
    assert exit_.value.code == 2 and f"argument -j/--jobs: expected an integer >= 1; got {jobs!r}" in \
        capsys.readouterr().err


def test_a_cold_disk_cached_kernel_is_announced(caplog, tmp_path, monkeypatch):
    index = tmp_path / "k.nbi"
    monkeypatch.setattr(runtime, "_cache_index_path", lambda pyfunc: str(index))
    with caplog.at_level(logging.WARNING, logger="simt_tiles.compile"):
        runtime._note_cold_compile("k99_generated", "float32", None)
        index.write_bytes(b"")  # cached: a load, no notice
        runtime._note_cold_compile("k99_generated", "float32", None)
    assert [r.name for r in caplog.records] == ["simt_tiles.compile"]
    assert "compiling k99_generated (float32)" in caplog.text and "simt-tiles warm" in caplog.text



def test_warm_matmul_covers_every_tile_the_rules_name():
    """``simt-tiles warm matmul`` builds k11 and k12 on every tile that a float32 ``matmul(a, b)`` can choose
    by itself: the shipped table's rows (and k12 with a k11 row's tile, for ragged rows), its entries, and
    the shape classes' tiles (``dispatch.TILES``); k15 on every row group."""
    import dataclasses
    import json

    from simt_tiles import autotune
    from simt_tiles.kernels.matmul import dispatch, k15_gemv

    warmed = set(warm.matmul_kernels())
    assert len(warmed) == len(warm.matmul_kernels())  # no job twice
    tiles = {(v, c) for v, c, dt, _ in warmed if dt == "float32"}

    def tile(variant, fields):
        return variant, dataclasses.replace(dispatch.RUNGS[variant].presets["default"], **fields).compiled()

    named = {tile(r.variant, r.fields) for r in dispatch.fast_table()}
    named |= {tile(dispatch.RAGGED_ROWS.get(r.variant, r.variant), r.fields) for r in dispatch.fast_table()}
    named |= {tile(v, f) for v in dispatch.LAYOUT_RUNGS for f in dispatch.TILES.values()}
    shipped = json.loads((autotune.SHIPPED_DIR / "h200.json").read_text())["entries"]
    for key, entry in shipped.items():
        if key.startswith("matmul|"):
            fields = {f: v for f, v in entry["choice"]["config"].items() if f not in ("splits", "pad")}
            named.add(tile(entry["choice"]["variant"], fields))
    assert named <= tiles, sorted(map(str, named - tiles))
    assert {c.mt for v, c, _, _ in warmed if v == "k15_gemv"} == {k15_gemv.config_for(m).mt for m in range(1, 65)}
