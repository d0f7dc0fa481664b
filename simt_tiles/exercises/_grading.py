"""The graders: ragged cases, NaN-poisoned outputs, the project's references and bounds.

Imported by :func:`simt_tiles.exercises.check` after it has chosen the simulator.
Each grader yields ``(case label, thunk)``; a thunk returns None when the case passes or
a sentence saying what differed. The first failing case ends the grading.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
from numba import cuda

from ..bounds import check_within
from ..kernels.conv2d.reference import correlate2d_reference
from ..kernels.matmul.reference import matmul_reference
from ..kernels.softmax.reference import softmax_reference
from ..runtime import cdiv
from ._verdict import Verdict

DTYPES = (np.float32, np.float64)
_loaded = itertools.count()


def _analyze():
    try:
        from .. import analyze  # deferred: optional (the simulator analyzer, when installed)
    except ImportError:
        return None
    return analyze


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_student_{path.stem}_{next(_loaded)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _poisoned(shape, dtype):
    return cuda.to_device(np.full(shape, np.nan, dtype))


def _first_bad(bad: np.ndarray, got, expected, bound=None) -> str:
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f"[{', '.join(map(str, idx))}]" if idx else "[]"
    msg = (f"element {where}: expected {float(expected[idx]):.9g}, got {float(got[idx]):.9g}"
           + (f" (allowed error {float(bound[idx]):.3g})" if bound is not None else "")
           + f"; {int(bad.sum())} of {bad.size} elements wrong")
    if np.isnan(got[idx]) and not np.isnan(expected[idx]):
        msg += " — NaN is the poison the output started with: that element was never written"
    return msg


def _exact(got, expected) -> str | None:
    if got.shape != expected.shape:
        return f"expected shape {expected.shape}, got {got.shape}"
    bad = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    return _first_bad(bad, got, expected) if bad.any() else None


def _bounded(got, ref, bound) -> str | None:
    if got.shape != ref.shape:
        return f"expected shape {ref.shape}, got {got.shape}"
    if check_within(got, ref, bound):
        return None
    err = np.abs(got.astype(ref.dtype) - ref)
    bad = ~(err <= bound)
    return _first_bad(bad, got.astype(ref.dtype), ref, bound)


@contextlib.contextmanager
def _gpu_launch_rules():
    """Make the simulator refuse what a GPU refuses: a launch of zero blocks (the simulator
    runs it as a no-op; the driver returns CUDA_ERROR_INVALID_VALUE)."""
    from numba import config

    if not config.ENABLE_CUDASIM:
        yield
        return
    from numba.cuda.simulator import kernel as sim

    original = sim.FakeCUDAKernel.__getitem__

    def getitem(self, configuration):
        out = original(self, configuration)
        if 0 in tuple(self.grid_dim):
            raise ValueError(f"a launch with grid {tuple(configuration[0]) if isinstance(configuration[0], tuple) else configuration[0]} "
                             "has zero blocks: on a GPU it fails (CUDA_ERROR_INVALID_VALUE); when there is no "
                             "work, do not launch")
        return out

    sim.FakeCUDAKernel.__getitem__ = getitem
    try:
        yield
    finally:
        sim.FakeCUDAKernel.__getitem__ = original


def _barriers(path: Path) -> int:
    return sum(1 for ln in path.read_text().splitlines()
               if "syncthreads(" in ln and not ln.lstrip().startswith("#"))


# ---------------------------------------------------------------------------
# the exercises
# ---------------------------------------------------------------------------

def _vector_add(mod, path):
    rng = np.random.default_rng(1)
    for threads in (32, 64):
        for n in (0, 1, threads - 1, threads, threads + 1, 2 * threads + 5):
            for dt in DTYPES:
                def case(n=n, dt=dt, threads=threads):
                    a, b = rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)
                    out = _poisoned(n, dt)
                    mod.vector_add(cuda.to_device(a), cuda.to_device(b), out, threads)
                    return _exact(out.copy_to_host(), a + b)
                yield f"n={n}, threads={threads}, {np.dtype(dt).name}", case


def _bias_relu(mod, path):
    tile = getattr(mod, "TILE", None)
    ok = (isinstance(tile, tuple) and len(tile) == 2 and all(isinstance(v, int) and v > 0 for v in tile))
    if not ok:
        yield "TILE", lambda: f"TILE: expected a (ROWS, COLS) tuple of positive ints; got {tile!r}"
        return
    rows, cols = tile
    if rows * cols > 1024 or cols % 32:
        yield "TILE", lambda: (f"TILE = {tile!r}: expected COLS a multiple of 32 (a warp reads 32 consecutive "
                               f"addresses of a row) and ROWS·COLS <= 1024 threads; got {rows * cols} threads")
        return
    rng = np.random.default_rng(2)
    # (shapes unlike in each direction: a kernel that swaps rows and columns leaves outputs unwritten)
    for m, n in ((1, 1), (5, 31), (rows + 1, 2 * cols + 3), (3 * rows + 2, cols + 1)):
        for dt in DTYPES:
            def case(m=m, n=n, dt=dt):
                x = rng.standard_normal((m, n)).astype(dt)
                x.flat[::7] = np.nan
                bias = rng.standard_normal(n).astype(dt)
                y = _poisoned((m, n), dt)
                grid = (cdiv(n, cols), cdiv(m, rows))
                mod.bias_relu_kernel[grid, (cols, rows)](cuda.to_device(x), cuda.to_device(bias), y)
                return _exact(y.copy_to_host(), np.maximum(x + bias, 0))
            yield f"x {m}×{n}, TILE={tile}, {np.dtype(dt).name}", case


def _stable_softmax(mod, path):
    rng = np.random.default_rng(3)
    for rows, n in ((1, 1), (2, 31), (3, 33), (2, 70)):
        for dt in DTYPES:
            def case(rows=rows, n=n, dt=dt):
                x = (rng.standard_normal((rows, n)) * 3).astype(dt)
                x[0] += 1000  # exp(1000) overflows in both dtypes
                if rows > 1:
                    x[1] -= 1000
                if n > 1:
                    x[-1, 0] = -np.inf
                y = _poisoned((rows, n), dt)
                mod.softmax_kernel[rows, 32](cuda.to_device(x), y)
                ref, bound = softmax_reference(x)
                return _bounded(y.copy_to_host(), ref, bound)
            yield f"x {rows}×{n} (rows near +1000 and -1000), {np.dtype(dt).name}", case


def _tiled_matmul(mod, path):
    n_sync = _barriers(path)
    if n_sync < 2:
        yield "barriers", lambda: (f"found {n_sync} cuda.syncthreads() call(s) in {path.name}: the tile loop needs "
                                   "two — after the loads (read-after-write) and after the inner loop "
                                   "(write-after-read, before the next step overwrites the tiles)")
        return
    rng = np.random.default_rng(4)
    # T = 8: blocks of two warps, so a missing barrier is a cross-warp race the race check sees
    for T, m, n, k in ((4, 1, 1, 1), (4, 5, 7, 3), (8, 9, 6, 13), (8, 4, 4, 0), (8, 17, 9, 8)):
        for dt in DTYPES:
            def case(m=m, n=n, k=k, dt=dt, T=T):
                a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
                c = _poisoned((m, n), dt)
                kern = mod.make_kernel(T, dt)
                kern[(cdiv(n, T), cdiv(m, T)), (T, T)](cuda.to_device(a), cuda.to_device(b), c)
                ref, bound = matmul_reference(a, b)
                return _bounded(c.copy_to_host(), ref, bound)
            yield f"M×N×K = {m}×{n}×{k}, T={T} ({T * T} threads), {np.dtype(dt).name}", case


def _wavefronts(T: int, pad: int) -> int:
    """Bank model (32 banks of 4 bytes): wavefronts of the column read tile[tx, c], tx = 0..31, float32."""
    words = {tx * (T + pad) for tx in range(32)}
    return max(sum(1 for w in words if w % 32 == b) for b in range(32))


def _padded_transpose(mod, path):
    T, rows, pad = getattr(mod, "T", None), getattr(mod, "ROWS", None), getattr(mod, "PAD", None)
    if not all(isinstance(v, int) for v in (T, rows, pad)) or pad < 0 or T != 32 or T % rows:
        yield "constants", lambda: f"expected T = 32, ROWS dividing T and PAD >= 0 (ints); got T={T!r}, ROWS={rows!r}, PAD={pad!r}"
        return
    rng = np.random.default_rng(5)
    for m, n, dt in ((1, 1, np.float32), (33, 35, np.float32), (5, 37, np.float64)):
        def case(m=m, n=n, dt=dt):
            a = rng.standard_normal((m, n)).astype(dt)
            out = _poisoned((n, m), dt)
            mod.make_kernel(dt)[(cdiv(n, T), cdiv(m, T)), (T, rows)](cuda.to_device(a), out)
            return _exact(out.copy_to_host(), a.T)
        yield f"a {m}×{n}, {np.dtype(dt).name}", case

    def conflicts():
        analyze = _analyze()
        if analyze is not None and hasattr(analyze, "recording"):
            a = rng.standard_normal((T, T)).astype(np.float32)
            with analyze.recording(races=False, global_=False) as rep:
                mod.make_kernel(np.float32)[(1, 1), (T, rows)](cuda.to_device(a), _poisoned((T, T), np.float32))
            worst = max((s for s in rep.sites if s.space == "shared"), key=lambda s: s.per_request)
            wf, where = worst.per_request, f" at {worst.where} ({worst.array} {worst.op}, measured by simt_tiles.analyze)"
        else:
            wf, where = _wavefronts(T, pad), " in the column read tile[tx, c] (bank model: 32 banks of 4 bytes)"
        if wf > 1:
            return (f"PAD = {pad}: {wf:g} wavefronts per warp-wide request{where}; expected 1 "
                    f"(rows of {T + pad} words put lanes tx and tx + {32 // np.gcd(T + pad, 32)} in one bank)")
        least = next(p for p in range(T + 1) if _wavefronts(T, p) == 1)
        if pad > least:
            return (f"PAD = {pad}: conflict-free, but {pad - least} words a row more than needed; expected the "
                    f"least padding that is (PAD = {least}: rows of {T + least} words)")
        return None
    yield "bank conflicts and padding, float32", conflicts


def _halo_tile(mod, path):
    if _barriers(path) < 1:
        yield "barriers", lambda: "found no cuda.syncthreads(): the patch must be staged before any thread reads it"
        return
    tx, ty = getattr(mod, "TX", None), getattr(mod, "TY", None)
    if not (isinstance(tx, int) and isinstance(ty, int) and tx > 0 and ty > 0 and tx * ty <= 1024):
        yield "TX, TY", lambda: f"expected positive ints TX, TY with TX·TY <= 1024; got TX={tx!r}, TY={ty!r}"
        return
    rng = np.random.default_rng(6)
    for h, w in ((1, 1), (4, 9), (ty + 1, tx + 1), (11, 17)):
        for dt in DTYPES:
            def case(h=h, w=w, dt=dt):
                image = rng.standard_normal((h, w)).astype(dt)
                weights = rng.standard_normal((3, 3)).astype(dt)
                out = _poisoned((h, w), dt)
                mod.make_kernel(dt)[(cdiv(w, tx), cdiv(h, ty)), (tx, ty)](
                    cuda.to_device(image), cuda.to_device(weights), out)
                ref, bound = correlate2d_reference(image, weights, mode="constant", cval=0.0)
                return _bounded(out.copy_to_host(), ref, bound)
            yield f"image {h}×{w}, block {tx}×{ty}, {np.dtype(dt).name}", case


GRADERS = {
    "vector_add": _vector_add,
    "bias_relu": _bias_relu,
    "stable_softmax": _stable_softmax,
    "tiled_matmul": _tiled_matmul,
    "padded_transpose": _padded_transpose,
    "halo_tile": _halo_tile,
}


def _compile_for_gpu(name: str, path: Path) -> tuple[bool, str] | None:
    """(compiled, why not) from Numba's real CUDA compiler in a subprocess; None when it is unavailable."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(__file__).resolve().parents[2]),
                                                     env.get("PYTHONPATH", "")] if p)
    proc = subprocess.run([sys.executable, "-m", "simt_tiles.exercises._ptx", name, str(path)], check=False,
                          capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode == 3:
        return None
    return proc.returncode == 0, proc.stderr.strip()[-1500:]


def _quote(text: str, path: Path) -> str:
    """The lines of the student's file that ``text`` names as ``FILE:LINE``, quoted."""
    src = path.read_text().splitlines()
    lines = sorted({int(n) for n in re.findall(rf"{re.escape(path.name)}:(\d+)", text)})
    return "".join(f"\n    {path.name}:{n}: {src[n - 1].strip()}" for n in lines if 0 < n <= len(src))


def _uninitialised(report, path: Path) -> str | None:
    """The analyzer's shared loads of words no thread of the block had written (None when clean)."""
    seen = getattr(report, "uninitialized", None)
    if not seen:
        return None
    where = ", ".join(f"{w} ({n} loads)" for w, n in sorted(seen.items()))
    return f"shared memory read before any thread wrote it, at {where}" + _quote(where, path)


def _explain(exc: BaseException, path: Path) -> str:
    """A student-facing sentence for an exception, with the line of their file it came from."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    at = f" (at {path.name}:{frames[-1].lineno}: {frames[-1].line})" if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, IndexError) or re.search(r"out of (bounds|range)", str(exc)):
        text += " — an access outside an array: is a guard missing for the ragged edge?"
    if isinstance(exc, OverflowError):
        text += " — the simulator stops where a GPU would give inf (and then inf / inf = NaN)"
    if type(exc).__name__ == "RaceError":
        return f"race: {exc}" + _quote(str(exc), path)
    return text + at


def grade(ex, path: Path, *, compile_gpu: bool = True, grader=None, score=None, quick: bool = False):
    """Run ``grader`` (default: this module's for ``ex``) case by case (``quick``: the float32 ones
    only); then ``score(name, module)`` -> (problem or None, score line), where the analyzer is
    available; then the GPU compile."""
    try:
        mod = _load(path)
    except Exception as exc:  # noqa: BLE001 — a syntax error, an import error: the student's to fix
        return Verdict(ex.name, False, 0, f"{path} failed to import — {_explain(exc, path)}")
    from numba import config

    analyze = _analyze() if config.ENABLE_CUDASIM else None  # the analyzer instruments the simulator
    race_ctx = analyze.racecheck if analyze is not None and hasattr(analyze, "racecheck") else contextlib.nullcontext
    cases = 0
    try:
        for label, thunk in (grader or GRADERS[ex.name])(mod, path):
            if quick and "float64" in label:
                continue
            cases += 1
            report = None
            try:
                with _gpu_launch_rules(), race_ctx() as report:
                    problem = thunk()
            except Exception as exc:  # noqa: BLE001 — whatever the student's code raised is the verdict
                problem = _explain(exc, path)
            unwritten = _uninitialised(report, path)
            if unwritten:  # the cause, whether or not this case's values happened to come out right
                problem = f"{problem}; {unwritten}" if problem else unwritten
            if problem:
                return Verdict(ex.name, False, cases, f"case {label}: {problem}")
    except Exception as exc:  # noqa: BLE001 — e.g. a missing name the grader looked up
        return Verdict(ex.name, False, cases, _explain(exc, path))
    traffic = ""
    if score is not None and analyze is not None:
        try:
            problem, traffic = score(ex.name, mod)
        except Exception as exc:  # noqa: BLE001 — the scored launch failed: the student's to fix
            problem = _explain(exc, path)
        if problem:
            return Verdict(ex.name, False, cases + 1, f"case traffic: {problem}" + (f"\n{traffic}" if traffic else ""))
        traffic = f"\n{traffic}" if traffic else ""
    compiled = _compile_for_gpu(ex.name, path) if compile_gpu else None
    if compiled is not None and not compiled[0]:
        return Verdict(ex.name, False, cases + 1, f"case compile for a GPU (sm_90 PTX, Numba's real compiler): "
                       f"the simulator ran your kernel as Python, but Numba cannot compile it — {compiled[1]}")
    race = (" (race-checked)" if race_ctx is not contextlib.nullcontext else
            " (race check not available: it needs simt_tiles.analyze and the simulator)")
    gpu = ("; compiles for sm_90" if compiled else "" if not compile_gpu else
           "; GPU compile not checked: Numba's CUDA compiler is not available here")
    return Verdict(ex.name, True, cases + bool(compiled), f"all {cases} cases passed{race}{gpu}{traffic}")
