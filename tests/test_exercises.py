"""The exercises: every unmodified stub fails its check, every reference solution passes (with
the reference's traffic, measured by the analyzer), and planted bugs (a missing guard, a lost
NaN, a missing barrier, a conflicting pad or swizzle, an unstaged halo, an unscaled merge, ...)
are caught with a verdict that names the case."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

import pytest

from simt_tiles import exercises, mma
from simt_tiles.exercises import _score
from simt_tiles.registry import ladders

from .profiles import PROFILE

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "exercises" / "solutions"
NAMES = list(exercises.EXERCISES)
#: CI grades the float32 cases only (the stubs fail on their first cases anyway); other profiles all
QUICK = PROFILE == "ci"
TECHNIQUES = ["regblock_1d", "regblock_2d", "swizzled_tile", "double_buffer", "warp_tiling", "halo_modes",
              "separable_filter", "warp_reduce", "online_softmax", "split_k", "vectorized_loads", "mma_fragments"]


def test_an_exercise_per_technique_each_with_statement_hints_and_solution():
    assert NAMES[:6] == ["vector_add", "bias_relu", "stable_softmax", "tiled_matmul", "padded_transpose", "halo_tile"]
    assert NAMES[6:] == TECHNIQUES and len(NAMES) >= 14
    for ex in exercises.EXERCISES.values():
        assert "Statement" in ex.statement and "Hints" in ex.statement, ex.name
        assert (SOLUTIONS / f"{ex.name}.py").is_file(), ex.name
        assert ex.name in _score.SCORES, f"{ex.name}: no traffic score recorded"
        ladder, rung = ex.lesson.split("/")  # the lesson page docs/generate.py writes: ladder/rung
        assert rung in ladders()[ladder], (ex.name, ex.lesson)


#: what the stubs of the traffic lessons fail on: right values, the analyzer's numbers
STUB_VERDICTS = {
    "regblock_2d": "shared loads: 512 requests",
    "swizzled_tile": "8-way conflicts at swizzled_tile.py:",
    "vectorized_loads": "global loads: 16 requests",
    "double_buffer": "race",
}


@pytest.mark.parametrize("name", NAMES)
def test_stub_fails(name):
    verdict = exercises.check(name, exercises.stub_path(name), compile_gpu=False, quick=QUICK)
    assert not verdict.passed, verdict
    assert str(verdict).startswith(f"FAIL {name}: ")
    assert STUB_VERDICTS.get(name, "") in str(verdict), verdict


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes_quickly_with_the_reference_traffic(name):
    start = time.perf_counter()
    verdict = exercises.check(name, SOLUTIONS / f"{name}.py", compile_gpu=False, quick=QUICK)
    assert verdict.passed, verdict
    assert verdict.cases >= (2 if QUICK else 4)
    assert "(race-checked)" in str(verdict), verdict
    assert "= the reference" in str(verdict), verdict  # the recorded reference numbers are this solution's
    assert time.perf_counter() - start < 60  # the bound; CI: keep grading shapes tiny


def test_solutions_compile_for_a_gpu_in_one_batch():
    """Numba's real compiler accepts every solution (one subprocess for all: CI time)."""
    from .gate_subprocess import run_real_target

    pairs = [x for n in NAMES for x in (n, str(SOLUTIONS / f"{n}.py"))]
    proc = run_real_target(args=["-m", "simt_tiles.exercises._ptx", "--float32", *pairs])
    if proc.returncode == 3:
        pytest.skip(f"Numba's CUDA compiler is not available here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_python_only_kernel_fails_the_gpu_compile(tmp_path):
    """The simulator runs any Python; the verdict says when Numba cannot compile it for a GPU."""
    verdict = _mutant(tmp_path, "vector_add", "out[i] = a[i] + b[i]", 'out[i] = a[i] + b[i] + int("0")', True)
    assert not verdict.passed and "case compile for a GPU" in str(verdict) and "TypingError" in str(verdict), verdict


#: the classic fragment bug: a1 (row + 8) and a2 (column + 4) swapped
_A1_A2 = "        return g + 8, t  # a1\n    if r == 2:\n        return g, t + 4  # a2"
_A1_A2_SWAPPED = "        return g, t + 4  # a1\n    if r == 2:\n        return g + 8, t  # a2"


def _mutant(tmp_path, name, old, new, compile_gpu=False):
    src = (SOLUTIONS / f"{name}.py").read_text()
    assert old in src, f"the planted bug's anchor is gone from the {name} solution: {old!r}"
    path = tmp_path / f"{name}.py"
    path.write_text(src.replace(old, new))
    return exercises.check(name, path, compile_gpu=compile_gpu, quick=QUICK)


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
    ("regblock_1d", "                b_val = b_s[kk, tc]  # one shared load ...\n",
     "                b_val = b_s[kk, tc]  # one shared load ...\n                b_val = b_s[kk, tc]\n", "shared loads"),
    ("regblock_2d", "row0 + r < m and k0 + q < k_len", "row0 + r < m", "M×N×K"),
    ("swizzled_tile", "return m ^ ((k % 8) << 2)", "return m ^ ((k % 4) << 3)", "conflicts at swizzled_tile.py:"),
    ("warp_tiling", "(lane // LN) * TM", "(lane % LN) * TM", "M×N×K"),
    ("double_buffer", "b_s[1 - s, ty, tx] = b_next", "b_s[s, ty, tx] = b_next", "race"),
    ("halo_modes", "return q if q < n else 2 * n - 2 - q", "return q if q < n else 2 * n - 1 - q", "mode 'mirror'"),
    ("separable_filter", "if 0 <= c < w:", "if 0 <= c <= w - 1 and b > 0:", "filter"),
    ("warp_reduce", "offset //= 2", "offset //= 4", "x 2×31"),
    ("online_softmax", "return m, s1 * math.exp(m1 - m) + s2 * math.exp(m2 - m)", "return m, s1 + s2 * math.exp(m2 - m)",
     "rising row"),
    ("split_k", "k_end = min(k_len, k_begin + chunk)", "k_end = k_begin + chunk", "splits"),
    ("vectorized_loads", "if i + 4 <= n:", "if i + 4 < n:", "global loads"),  # right values, scalar traffic
    ("mma_fragments", _A1_A2, _A1_A2_SWAPPED, "lane 0 (g = 0, t = 0) holds A[8][0] in a1; A[0][4] belongs to lane 0's a2"),
    ("mma_fragments", "return t + 4, g  # b1", "return t, g + 4  # b1", "b_element(0, 1) = (0, 4): in the m16n8k8"),
    ("mma_fragments", "return g, 2 * t + 1  # c1", "return g, 2 * t + 2  # c1", "c_element(0, 1) = (0, 2)"),
])
def test_planted_bug_is_caught(tmp_path, name, old, new, expect):
    verdict = _mutant(tmp_path, name, old, new)
    assert not verdict.passed, verdict
    assert expect in str(verdict), verdict


def test_mma_probe_names_the_element_the_mma_saw(tmp_path):
    """Registers handed to mma_tf32 in the wrong order (the maps themselves right): the exact probe
    (B = I, so C must be A) names the swapped element and the lane and register the layout puts it in."""
    from simt_tiles.exercises import _grading, _more

    path = tmp_path / "mma_fragments.py"
    call = "load_a(a, lane, 1, row0, k0),\n                                  load_a(a, lane, 2, row0, k0)"
    src = (SOLUTIONS / "mma_fragments.py").read_text()
    assert call in src
    path.write_text(src.replace(call, call.replace("lane, 1", "lane, @").replace("lane, 2", "lane, 1").replace("@", "2")))
    mod = _grading._load(path)
    assert _more._fragment_maps(mod) is None  # the maps are right ...
    problem = _more._probe(mod, "a")  # ... the call is not
    assert problem.startswith("C[0][4] = 65 = A[8][0], expected 5 = A[0][4]: the mma saw A[8][0] where the "
                              "layout puts A[0][4] (lane 0's a2)"), problem
    verdict = exercises.check("mma_fragments", path, compile_gpu=False, quick=QUICK)
    assert "case fragment map of A" in str(verdict) and "C[0][4] = 65" in str(verdict), verdict


def _stub_map(statement: str, matrix: str) -> dict:
    """{(row, column): (lane, register)} of the lines ``<matrix> row|k <i> <8 lanes> <registers>`` the
    stub's picture draws (registers: "a0 | a2" = columns 0-3 | 4-7, "b0" = all, "c0 c1" = even | odd)."""
    cells = {}
    for line in statement.splitlines():
        m = re.match(rf"\s*{matrix} (?:row|k) +(\d+) +((?:\d+ +){{7}}\d+) +(.*)$", line)
        if not m:
            continue
        i, lanes, regs = int(m[1]), [int(v) for v in m[2].split()], re.findall(r"[abc]\d", m[3])[:2]
        if "|" in m[3]:
            per_col = [regs[0]] * 4 + [regs[1]] * 4
        elif len(regs) == 2:
            per_col = regs * 4
        else:
            per_col = regs * 8
        cells.update({(i, j): (lanes[j], int(per_col[j][1])) for j in range(8)})
    return cells


def test_stub_picture_is_the_layout():
    """The fragment map drawn in the stub's statement agrees with simt_tiles.mma's fragment helpers
    (the layout the emulation computes with), row by drawn row."""
    statement = exercises.EXERCISES["mma_fragments"].statement
    idx = np.arange(128).reshape(16, 8)
    frags = {"A": mma.fragment_a(idx, "tf32"), "B": mma.fragment_b(idx[:8], "tf32"), "C": mma.fragment_c(idx)}
    for matrix, frag in frags.items():
        drawn = _stub_map(statement, matrix)
        assert len(drawn) >= 8 * 5, (matrix, len(drawn))  # five rows or more of each drawn
        truth = {divmod(int(frag[lane, r]), 8): (lane, r) for lane in range(32) for r in range(frag.shape[1])}
        assert {k: truth[k] for k in drawn} == drawn, matrix


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
