"""Graded exercises for a course on SIMT tiling, run in Numba's CUDA simulator (no GPU needed).

    python -m simt_tiles.exercises list                 # the exercises
    python -m simt_tiles.exercises show NAME            # its statement and hints
    python -m simt_tiles.exercises start NAME [DIR]     # copy the stub to DIR/NAME.py
    python -m simt_tiles.exercises check NAME [FILE]    # grade FILE (default ./NAME.py)

Each stub (``simt_tiles/exercises/stubs/NAME.py``) states the task and gives hints in its
docstring. ``check`` imports the student's file, runs it on ragged shapes in float32 and
float64 (float32 only for the TF32 tensor-core one) with NaN-poisoned outputs, compares with the project's references within their
error bounds (exact where the arithmetic is exact) and prints a verdict naming the case that
failed, the element, what was expected and what came, and finally compiles the kernels for
sm_90 with Numba's real compiler (the simulator runs any Python; a GPU does not). Where :mod:`simt_tiles.analyze` is
installed, launches are race-checked, so a missing barrier is reported as a race with its two
source lines, and one more launch is scored with it (:mod:`._score`): global sectors and shared
wavefronts beside the reference solution's, as GPU-Puzzles scores traffic — more than the
reference fails the exercises whose lesson is the traffic, naming the line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from pathlib import Path

from ._verdict import Verdict

__all__ = ["EXERCISES", "Exercise", "Verdict", "check", "main", "stub_path"]

STUBS = Path(__file__).resolve().parent / "stubs"


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise: its name, a one-line title and the lesson (a rung page) it practises."""

    name: str
    title: str
    lesson: str

    @property
    def stub(self) -> Path:
        return STUBS / f"{self.name}.py"

    @property
    def statement(self) -> str:
        """The stub's docstring: the statement and the hints."""
        import ast

        return ast.get_docstring(ast.parse(self.stub.read_text())) or ""


EXERCISES: dict[str, Exercise] = {e.name: e for e in (
    Exercise("vector_add", "c = a + b for n = 0, one element and a ragged last block", "elementwise/k01_grid_stride"),
    Exercise("bias_relu", "y = max(x + bias, 0) over a 2-D tile shape you choose", "elementwise/bias_relu"),
    Exercise("stable_softmax", "a softmax that does not overflow: subtract the row maximum", "softmax/k02_warp_shuffle"),
    Exercise("tiled_matmul", "the shared-memory tiled matmul and its two barriers", "matmul/k03_smem_tiled"),
    Exercise("padded_transpose", "one word of padding against a 32-way bank conflict", "matmul/k07_padded"),
    Exercise("halo_tile", "a shared-memory tile with its halo for a 3×3 filter", "conv2d/k02_halo_tiled"),
    Exercise("regblock_1d", "TM outputs per thread: one shared load of B reused TM times", "matmul/k04_regblock_1d"),
    Exercise("regblock_2d", "a TM×TN tile per thread as register outer products", "matmul/k05_regblock_2d"),
    Exercise("swizzled_tile", "a transposed A tile whose stores hit 32 banks: the XOR swizzle", "matmul/k08_swizzled"),
    Exercise("double_buffer", "two stages and ONE barrier per K step", "matmul/k09_double_buffered"),
    Exercise("warp_tiling", "a thread's outputs: its warp's tile, then its lane's place in it", "matmul/k10_warptiled"),
    Exercise("halo_modes", "the halo under all five boundary modes of scipy.ndimage", "conv2d/k02_halo_tiled"),
    Exercise("separable_filter", "a KH×KW filter as a column pass and a row pass", "conv2d/k06_separable_fused"),
    Exercise("warp_reduce", "a row sum in registers: five shuffles, no shared memory", "reduce/k01_warp_shuffle"),
    Exercise("online_softmax", "max and sum in one pass, merged across lanes", "softmax/k03_online"),
    Exercise("split_k", "slices of K in separate blocks, then a deterministic sum", "matmul/k11_generated_split_k"),
    Exercise("vectorized_loads", "128-bit loads and stores with a scalar ragged tail", "matmul/k11_generated_split_k"),
    Exercise("mma_fragments", "which elements of A, B and C each lane holds for one mma.sync m16n8k8",
             "matmul_mma/k13_mma_tf32"),
)}


def _exercise(name: str) -> Exercise:
    try:
        return EXERCISES[name]
    except KeyError:
        raise ValueError(f"exercise: expected one of {list(EXERCISES)}; got {name!r}") from None


def stub_path(name: str) -> Path:
    """The stub file of exercise ``name`` (ValueError names the choices)."""
    return _exercise(name).stub


def check(name: str, path: str | os.PathLike, *, compile_gpu: bool = True, quick: bool = False) -> Verdict:
    """Grade the student's file ``path`` for exercise ``name`` in the simulator; then, with
    ``compile_gpu``, compile its kernels to sm_90 PTX with Numba's real compiler (a subprocess,
    a few seconds; skipped with a note where that compiler is unavailable).  ``quick`` grades
    the float32 cases only (the test suite's CI profile)."""
    ex = _exercise(name)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file: expected your solution of {name!r} at {path}; there is no such file "
                                f"(python -m simt_tiles.exercises start {name} makes one)")
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before Numba is imported: no GPU needed
    if _real_target_loaded():
        return _check_in_simulator_process(name, path, compile_gpu)  # (all cases: a GPU user's check)
    from . import _grading, _more, _score  # deferred: loads Numba, after NUMBA_ENABLE_CUDASIM is set above

    grader = _grading.GRADERS.get(name) or _more.GRADERS[name]
    return _grading.grade(ex, path, compile_gpu=compile_gpu, grader=grader, score=_score.verdict, quick=quick)


def _real_target_loaded() -> bool:
    """Whether this process already imported Numba's CUDA target for a GPU (a GPU user's script, a
    test run on a GPU): Numba picks its target once per process, and the grading (race check,
    unwritten shared memory, the GPU's launch rules) needs the simulator."""
    if "numba.cuda" not in sys.modules:
        return False
    from numba import config

    return not config.ENABLE_CUDASIM


_VERDICT = "simt_tiles-exercise-verdict: "


def _check_in_simulator_process(name: str, path: Path, compile_gpu: bool) -> Verdict:
    """:func:`check` in a fresh process with the simulator (a few seconds more)."""
    import json
    import subprocess

    code = ("import dataclasses, json, sys\n"
            "from simt_tiles import exercises\n"
            "v = exercises.check(sys.argv[1], sys.argv[2], compile_gpu=sys.argv[3] == '1')\n"
            f"print({_VERDICT!r} + json.dumps(dataclasses.asdict(v)))\n")
    here = str(Path(__file__).resolve().parents[2])  # this simt_tiles, whatever put it on sys.path
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", code, name, str(path.resolve()), "1" if compile_gpu else "0"],
                          env=env, capture_output=True, text=True, check=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_VERDICT):
            return Verdict(**json.loads(line[len(_VERDICT):]))
    raise RuntimeError(f"exercise check of {name!r} in a simulator process failed (exit {proc.returncode}):\n"
                       f"{proc.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    """The command line: ``list``, ``show NAME``, ``start NAME [DIR]``, ``check NAME [FILE]``."""
    via_cli = os.path.basename(sys.argv[0]) == "simt-tiles" or sys.argv[0].endswith(
        os.path.join("simt_tiles", "__main__.py"))
    p = argparse.ArgumentParser(prog="simt-tiles exercise" if via_cli else "python -m simt_tiles.exercises",
                                description="Graded SIMT tiling exercises (run in the CUDA simulator).")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the exercises")
    s = sub.add_parser("show", help="print an exercise's statement and hints")
    s.add_argument("name")
    s = sub.add_parser("start", help="copy an exercise's stub into DIR (default: .)")
    s.add_argument("name")
    s.add_argument("dir", nargs="?", default=".")
    s = sub.add_parser("check", help="grade FILE (default: ./NAME.py)")
    s.add_argument("name")
    s.add_argument("file", nargs="?")
    args = p.parse_args(argv)
    try:
        if args.cmd == "list":
            width = max(map(len, EXERCISES))
            for ex in EXERCISES.values():
                print(f"{ex.name:<{width}}  {ex.title}")
            return 0
        ex = _exercise(args.name)
        if args.cmd == "show":
            print(ex.statement)
            return 0
        if args.cmd == "start":
            dest = Path(args.dir) / f"{ex.name}.py"
            if dest.exists():
                print(f"error: {dest} exists; not overwriting your work", file=sys.stderr)
                return 2
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ex.stub, dest)
            print(f"{dest}: the stub of {ex.name} — {ex.title}\n")
            print(ex.statement)
            print(f"\nWhen done: {p.prog} check {ex.name} {dest}")
            return 0
        verdict = check(ex.name, args.file or f"{ex.name}.py")
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(verdict)
    return 0 if verdict.passed else 1
