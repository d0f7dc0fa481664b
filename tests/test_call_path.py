"""The one path of a call (docs/design.md, "The one path of a call"; issue 29): from the public
function to the kernel launch, ``correlate2d`` enters at most five family files and ``matmul`` at
most four, with no return to a file already left.

What is measured: the calls of one checked-path call (``sys.setprofile``, call events only, in the
calling thread; in the simulator, with launch plans off, on a repeated call so that nothing
compiles).

family file
    A file under ``simt_tiles/kernels/<family>/``.  Every other file of ``simt_tiles`` (interop,
    autotune, runtime, launch, device_copies, ...) is the shared layer, below every family.
entering a family file
    A call of a function of family file F from a frame of another file: a family file, the shared
    layer (``launch.planned`` calling the function it wraps, ``runtime.Plan.run`` calling the
    rung), the test, the standard library, a dataclass's generated ``__init__``.  A call from F
    into F (a helper beside it) enters nothing; a return enters nothing.
the path
    The family files entered, in order, a file entered again right after itself written once.
    A call into the shared layer does not leave a file: F → launch.planned → F is F, once.
a return to a file already left
    A family file that stands twice in the path: entered, then another family file entered, then
    entered again — whoever calls it the second time (a family file, or the shared layer calling
    back).  E.g. ``__init__.correlate2d`` → ``_filter_cache`` → ``launch.planned`` →
    ``__init__._correlate2d``, the path before issue 29's argument module: ``__init__`` again.

A bounce is planted by :func:`test_a_planted_bounce_is_seen`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import simt_tiles as st
from simt_tiles import launch
from simt_tiles.runtime import SIMULATOR

pytestmark = pytest.mark.skipif(not SIMULATOR, reason="the path is measured in the simulator (docs/design.md); "
                                "a GPU's tuned tables may choose other rungs")

KERNELS = Path(st.__file__).resolve().parent / "kernels"
LIMITS = {"correlate2d": 5, "matmul": 4}


def family_file(filename: str) -> str | None:
    """``"<family>/<file>"`` for a family file, else None."""
    try:
        rel = Path(filename).resolve().relative_to(KERNELS)
    except ValueError:
        return None
    return rel.as_posix() if len(rel.parts) == 2 else None


def entries(call) -> list[tuple[str, str]]:
    """``(family file, function)`` for each family file ``call()`` enters, in order."""
    found = []
    files = {}  # co_filename -> family file or None

    def profile(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_filename
        if name not in files:
            files[name] = family_file(name)
        if files[name] is None:
            return
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename == name:
            return  # a helper in the same file: nothing entered
        found.append((files[name], frame.f_code.co_qualname))

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(before)
    return found


def path(found) -> list[str]:
    """The family files entered, a file entered again right after itself once."""
    out = []
    for f, _ in found:
        if not out or out[-1] != f:
            out.append(f)
    return out


def returns(p: list[str]) -> list[str]:
    """The files of path ``p`` entered again after another family file was."""
    return [f for i, f in enumerate(p) if f in p[:i]]


def _explain(found) -> str:
    return "\n".join(f"  {f}: {fn}" for f, fn in found)


@pytest.fixture
def checked_path():
    """Launch plans off (the simulator's default; whatever SIMT_TILES_FAST_LAUNCH says)."""
    before = launch.set_enabled(False)
    yield
    launch.set_enabled(before)


def _filter_calls():
    rng = np.random.default_rng(29)
    image = cuda.to_device(rng.standard_normal((8, 9)).astype(np.float32))
    w = (np.arange(9, dtype=np.float32).reshape(3, 3) - 4) / 8
    return {
        "correlate2d(device image, NumPy 3x3 filter)": lambda: st.correlate2d(image, w),
        "correlate2d(device image, device 3x3 filter)": (lambda dw: lambda: st.correlate2d(image, dw))(
            cuda.to_device(w)),
    }


def _matmul_call():
    rng = np.random.default_rng(29)
    a = cuda.to_device(rng.standard_normal((40, 24)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((24, 36)).astype(np.float32))
    return lambda: st.matmul(a, b)


def _check(name, call, family, limit):
    for _ in range(2):  # compiles and fills the filter cache (a reused NumPy filter's second call takes its
        call()  # values as parameters: device_copies): the path measured is a repeated call's
    found = entries(call)
    p = path(found)
    where = f"{name}: the path {p}; entered:\n{_explain(found)}"
    assert p and p[0] == f"{family}/__init__.py", where
    assert p[-1].split("/")[1].startswith("k"), where  # it reached the rung (the launch)
    assert len(set(p)) <= limit, f"{len(set(p))} family files, at most {limit}: {where}"
    assert not returns(p), f"returns to {returns(p)}: {where}"
    return p


@pytest.mark.parametrize("name", list(_filter_calls()))
def test_correlate2d_path(checked_path, name):
    p = _check(name, _filter_calls()[name], "conv2d", LIMITS["correlate2d"])
    assert p == ["conv2d/__init__.py", "conv2d/_args.py", "conv2d/dispatch.py", "conv2d/_common.py",
                 "conv2d/k10_runtime_weights.py"], "docs/design.md lists this path: update both"


def test_matmul_path(checked_path):
    p = _check("matmul(a, b)", _matmul_call(), "matmul", LIMITS["matmul"])
    assert p == ["matmul/__init__.py", "matmul/dispatch.py", "matmul/k11_generated_split_k.py"], \
        "docs/design.md lists this path: update both"


def test_a_replay_enters_at_most_the_public_functions_file():
    """With plans on, a repeated call with device arrays replays its plan: conv2d's public function
    (the filter swap) and nothing below it; matmul's no family file at all."""
    before = launch.set_enabled(True)
    launch.clear()
    try:
        for name, call, want in [*((n, c, ["conv2d/__init__.py"]) for n, c in _filter_calls().items()),
                                 ("matmul(a, b)", _matmul_call(), [])]:
            call()
            call()  # (a reused NumPy filter's second call records its own plan: device_copies)
            hits = launch.stats()["hit"]
            found = entries(call)
            assert launch.stats()["hit"] == hits + 1, name
            assert path(found) == want, f"{name}: {_explain(found)}"
    finally:
        launch.set_enabled(before)
        launch.clear()


def test_a_planted_bounce_is_seen(checked_path, monkeypatch):
    """A check of the arguments inside the choice (``_args`` entered again from ``dispatch``, then
    ``dispatch`` again) is two returns: the path test fails."""
    from simt_tiles.kernels.conv2d import _args, dispatch

    real = dispatch.plan_filter

    def planted(*a, **k):
        _args.check_cval(0.0)  # the bounce
        return real(*a, **k)

    monkeypatch.setattr(dispatch, "plan_filter", planted)
    name, call = next(iter(_filter_calls().items()))
    call()
    call()  # (the first call alone also records the reused NumPy filter's device copy: the path depended on test order)
    p = path(entries(call))
    assert returns(p) == ["conv2d/_args.py", "conv2d/dispatch.py"], p
    with pytest.raises(AssertionError, match="returns to"):
        _check(name, call, "conv2d", LIMITS["correlate2d"])


def test_the_definitions():
    assert path([("a", "f"), ("a", "g"), ("b", "h"), ("a", "i")]) == ["a", "b", "a"]
    assert returns(["a", "b", "a", "c", "b"]) == ["a", "b"]
    assert family_file(str(KERNELS / "conv2d" / "_args.py")) == "conv2d/_args.py"
    assert family_file(str(KERNELS / "__init__.py")) is None
    assert family_file(str(KERNELS.parent / "launch.py")) is None
