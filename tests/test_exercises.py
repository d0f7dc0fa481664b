"""The exercises: every unmodified stub fails its check, every reference solution passes,
and planted bugs (a missing guard, a lost NaN, a missing barrier, a conflicting pad, an
unstaged halo) are caught with a verdict that names the case."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from simt_tiles import exercises

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "exercises" / "solutions"
NAMES = list(exercises.EXERCISES)


def test_six_exercises_each_with_statement_hints_and_solution():
    assert NAMES == ["vector_add", "bias_relu", "stable_softmax", "tiled_matmul", "padded_transpose", "halo_tile"]
    for ex in exercises.EXERCISES.values():
        assert "Statement" in ex.statement and "Hints" in ex.statement, ex.name
        assert (SOLUTIONS / f"{ex.name}.py").is_file(), ex.name


@pytest.mark.parametrize("name", NAMES)
def test_stub_fails(name):
    verdict = exercises.check(name, exercises.stub_path(name))
    assert not verdict.passed, verdict
    assert str(verdict).startswith(f"FAIL {name}: ")


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes_quickly(name):
    start = time.perf_counter()
    verdict = exercises.check(name, SOLUTIONS / f"{name}.py")
    assert verdict.passed, verdict
    assert verdict.cases >= 4
    assert "compiles for sm_90" in str(verdict), verdict  # Numba's real compiler (a dependency) accepts it
    assert time.perf_counter() - start < 20  # CI budget: keep grading shapes tiny


def test_python_only_kernel_fails_the_gpu_compile(tmp_path):
    """The simulator runs any Python; the verdict says when Numba cannot compile it for a GPU."""
    verdict = _mutant(tmp_path, "vector_add", "out[i] = a[i] + b[i]", 'out[i] = a[i] + b[i] + int("0")')
    assert not verdict.passed and "case compile for a GPU" in str(verdict) and "TypingError" in str(verdict), verdict


def _mutant(tmp_path, name, old, new):
    src = (SOLUTIONS / f"{name}.py").read_text()
    assert old in src, f"the planted bug's anchor is gone from the {name} solution: {old!r}"
    path = tmp_path / f"{name}.py"
    path.write_text(src.replace(old, new))
    return exercises.check(name, path)


@pytest.mark.parametrize("name, old, new, expect", [
    ("vector_add", ("    if i < out.shape[0]:  # the ragged last block: its threads past n do nothing\n"
                   "        out[i] = a[i] + b[i]"), "    out[i] = a[i] + b[i]", "guard"),
    ("vector_add", "    if blocks == 0:", "    if blocks == -1:", "zero blocks"),
    ("vector_add", "(n + threads - 1) // threads", "n // threads", "never written"),
    ("bias_relu", "0 if v < 0 else v", "v if v > 0 else 0", "expected nan, got 0"),
    ("bias_relu", "TILE = (4, 32)", "TILE = (32, 4)", "multiple of 32"),
    ("stable_softmax", "math.exp(x[row, j] - m) / s", "math.exp(x[row, j]) / s", "case x"),
    ("tiled_matmul", "            cuda.syncthreads()  # WAR", "            pass  # WAR", "two"),
    ("tiled_matmul", "a_tile[ty, tx] = a[row, ka] if row < m and ka < k_len else DT(0)",
                     "a_tile[ty, tx] = a[row, ka] if row < m else DT(0)", "M×N×K"),
    ("padded_transpose", "PAD = 1", "PAD = 2", "2 wavefronts"),
    ("halo_tile", "for p in range(ty * TX + tx, PH * PW, TX * TY):", "for p in range(ty * TX + tx, PH * PW, 2 * TX * TY):",
     "elements wrong"),
])
def test_planted_bug_is_caught(tmp_path, name, old, new, expect):
    verdict = _mutant(tmp_path, name, old, new)
    assert not verdict.passed, verdict
    assert expect in str(verdict), verdict


def test_missing_barrier_reported_as_race(tmp_path):
    """With the simulator analyzer installed, a barrier that never runs is a race with two source lines."""
    pytest.importorskip("simt_tiles.analyze")
    verdict = _mutant(tmp_path, "tiled_matmul", "            cuda.syncthreads()  # WAR",
                      "            if k0 < 0:\n                cuda.syncthreads()  # WAR")
    assert not verdict.passed and "race" in str(verdict), verdict
    assert str(verdict).count("tiled_matmul.py:") >= 2, verdict


def test_unstaged_halo_reported_as_unwritten_shared_memory():
    """With the analyzer, the halo stub fails on its first, tiny case (whose values happen to be right:
    the simulator's fresh shared memory is zero, like the padding) by naming the read of unwritten words."""
    pytest.importorskip("simt_tiles.analyze")
    verdict = exercises.check("halo_tile", exercises.stub_path("halo_tile"))
    assert "case image 1×1" in str(verdict) and "before any thread wrote it" in str(verdict), verdict
    assert "halo_tile.py:" in str(verdict) and "patch[ty + di, tx + dj]" in str(verdict), verdict


def test_solutions_are_race_checked():
    pytest.importorskip("simt_tiles.analyze")
    assert "race-checked" in str(exercises.check("tiled_matmul", SOLUTIONS / "tiled_matmul.py", compile_gpu=False))


def test_cli_list_show_start_check(tmp_path, capsys):
    assert exercises.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(n in listed for n in NAMES)
    assert exercises.main(["show", "halo_tile"]) == 0
    assert "Hints" in capsys.readouterr().out
    assert exercises.main(["start", "vector_add", str(tmp_path)]) == 0
    copied = tmp_path / "vector_add.py"
    assert copied.read_text() == exercises.stub_path("vector_add").read_text()
    capsys.readouterr()
    assert exercises.main(["start", "vector_add", str(tmp_path)]) == 2  # never overwrites the student's work
    assert "exists" in capsys.readouterr().err
    assert exercises.main(["check", "vector_add", str(copied)]) == 1
    assert capsys.readouterr().out.startswith("FAIL vector_add: case n=")
    assert exercises.main(["check", "vector_add", str(SOLUTIONS / "vector_add.py")]) == 0
    assert capsys.readouterr().out.startswith("PASS vector_add")


def test_cli_bad_input(tmp_path, capsys):
    assert exercises.main(["check", "nope"]) == 2
    assert "expected one of" in capsys.readouterr().err
    assert exercises.main(["check", "vector_add", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    assert exercises.main(["check", "vector_add", str(broken)]) == 1
    assert "failed to import" in capsys.readouterr().out


def test_check_from_a_process_with_the_gpu_target_grades_in_the_simulator():
    """A GPU user's process (Numba's real target already loaded) gets the same verdicts: the
    grading runs in a simulator subprocess (race check, launch rules)."""
    from .gate_subprocess import run_real_target

    proc = run_real_target(f"""
        from numba import cuda  # the real target, as in a GPU user's script
        from simt_tiles import exercises
        ok = exercises.check("vector_add", {str(SOLUTIONS / "vector_add.py")!r}, compile_gpu=False)
        stub = exercises.check("vector_add", exercises.stub_path("vector_add"), compile_gpu=False)
        print(ok.passed, ok.cases >= 4, stub.passed, str(stub).startswith("FAIL vector_add: "))
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-4:] == ["True", "True", "False", "True"], proc.stdout + proc.stderr[-2000:]
