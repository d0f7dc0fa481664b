"""One registration per family: a toy family — one folder and one registry line — is seen by every
consumer (the package's public names, the compile gate, the demo, the autotuner, the docs, the
aliasing tests, the bench), and every shipped family's registration is complete.  Pure Python but
for the toy's one simulated launch (4 threads)."""

from __future__ import annotations

import argparse
import ast
import sys
import textwrap
from pathlib import Path

import pytest

import simt_tiles
from simt_tiles import autotune, registry

TOY = textwrap.dedent('''
    """A toy family: out = x + 1 (one rung)."""
    import dataclasses

    from numba import cuda, void

    from simt_tiles import autotune
    from simt_tiles.interop import as_stream, device_operand, finish_result, prepare_out
    from simt_tiles.launch import planned
    from simt_tiles.registry import AliasCase, Family, numpy_case
    from simt_tiles.runtime import Rung, TileConfig, cdiv, numba_dtype


    @dataclasses.dataclass(frozen=True)
    class Config(TileConfig):
        threads: int = 32

        def block(self):
            return (self.threads,)


    def factory(config, dtype):
        def toy_k01_plus_one(x, out):
            i = cuda.grid(1)
            if i < x.size:
                out[i] = x[i] + 1
        return toy_k01_plus_one


    def geometry(config, n):
        return (cdiv(n, config.threads),), config.block()


    def signature(dtype):
        t = numba_dtype(dtype)[::1]
        return void(t, t)


    class Call:
        def __init__(self, x, out, stream):
            self.x, self.out, self.stream, self.dtype = x, out, stream, x.dtype
            self.problem, self.args = (x.size,), (x, out)


    RUNG = Rung("k01_plus_one", Config, {"sim": Config(4), "default": Config()}, factory, geometry, signature)
    RUNGS = {RUNG.name: RUNG}


    @planned
    def toy_plus_one(x, *, out=None, config=None, stream=None):
        cfg = RUNG.resolve_config(config)
        stream = as_stream(stream, x)
        x_op = device_operand(x, "x", ndim=1, stream=stream)
        out_op = prepare_out(out, x_op, x_op.dev.shape, x_op.dev.dtype, stream)
        if x_op.dev.size:
            RUNG.run(cfg, Call(x_op.dev, out_op.dev, stream))
        return finish_result(out_op, stream)


    def demo(rung, dtype, c):
        import numpy as np

        x = c.rng.standard_normal(5).astype(dtype)
        return numpy_case("5", lambda: toy_plus_one(x, config=c.preset), x + 1, np.zeros(5))


    TUNABLE = autotune.Tunable("toy_plus_one", "toy", ("n", "dtype"), lambda dtype: ("k01_plus_one",), None)
    FAMILY = Family("toy", RUNGS, None, (TUNABLE,), demo,
                    {"toy_plus_one": AliasCase(lambda x, out=None: toy_plus_one(x, out=out), ("x",), ((5,),), (5,))},
                    {"k01_plus_one": "None: one thread per element."})
''')


#: the toy family's bench group (a family outside the package keeps it in its folder: ``toyfam.bench``)
TOY_BENCH = textwrap.dedent('''
    """Time the toy family (here: say what would be timed)."""
    HELP = "the toy family"


    def add_arguments(p):
        p.add_argument("--reps", type=int, default=20)


    def run(args):
        print(f"toy: {args.reps} reps")
        return 0
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy family's folder on sys.path and its one line in the registry."""
    (tmp_path / "toyfam").mkdir()
    (tmp_path / "toyfam" / "__init__.py").write_text(TOY)
    (tmp_path / "toyfam" / "bench.py").write_text(TOY_BENCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "LADDERS", registry.LADDERS)  # undone after the test
    registry.register(registry.Ladder("toy", "toyfam", ("toy_plus_one",), ("toy_plus_one",), bench="toy"))
    yield sys.modules.get("toyfam")
    monkeypatch.delitem(sys.modules, "toyfam", raising=False)
    monkeypatch.delitem(sys.modules, "toyfam.bench", raising=False)
    autotune._TUNABLES.pop("toy_plus_one", None)
    vars(simt_tiles).pop("toy_plus_one", None)


def test_a_toy_family_is_seen_by_every_consumer(toy, monkeypatch, capsys):
    from simt_tiles import bench, compile_gate, demo

    assert "toy" in registry.ladders() and registry.families()["toy"].name == "toy"  # registry, analyze, codegen
    assert simt_tiles.toy_plus_one.__module__ == "toyfam"  # the package's public names
    monkeypatch.setenv("SIMT_TILES_GATE_QUICK", "0")  # the full gate: every preset (the quick one leaves "sim")
    assert {j.preset for j in compile_gate.jobs(["toy"])} == {"sim", "default"}  # the compile gate
    assert autotune.tunable("toy_plus_one").ladder == "toy"  # the autotuner
    assert "toy_plus_one" in registry.aliasing_cases()  # tests/test_aliasing.py
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "docs"))
    import generate

    assert generate._hazards("toy") == {"k01_plus_one": "None: one thread per element."}  # the docs
    assert demo.main(["--ladder", "toy", "--dtype", "float32"]) == 0  # the demo: its case, checked
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)  # the bench: its group, from the registry line
    assert "the toy family" in parser.format_help() and "toy:" in parser.format_help()  # listed, and in `all`
    monkeypatch.setattr(bench._probe, "select_backend", lambda: False)  # as on a GPU: run the group
    assert bench.run(parser.parse_args(["toy", "--reps", "3"])) == 0
    assert capsys.readouterr().out.endswith("toy: 3 reps\n")


def test_a_second_line_for_a_family_is_refused(toy):
    with pytest.raises(ValueError, match="registered already"):
        registry.register(registry.Ladder("toy", "toyfam"))


def test_every_shipped_family_registers_what_its_line_says():
    for lad in registry.LADDERS:
        family = lad.family()
        assert family.name == lad.name and family.rungs, lad.name
        assert callable(family.demo), lad.name
        assert set(family.hazards) <= set(family.rungs), lad.name  # no hazard for a rung that is not there
        assert {t.function for t in family.tunables} == set(lad.tunables), lad.name
        functions = {n for n in lad.public if n.islower()}
        assert set(family.aliasing) == functions, lad.name  # every public function has its aliasing case
        for name in lad.public:
            assert getattr(simt_tiles, name) is getattr(__import__(lad.module, fromlist=["_"]), name)


# ---------------------------------------------------------------------------
# One launch style: public function → dispatch's plan → plan.run(call) → the rung
# ---------------------------------------------------------------------------

KERNELS = Path(__file__).resolve().parents[1] / "simt_tiles" / "kernels"


def launches(path: Path) -> list[int]:
    """Lines of ``path`` that launch a kernel: a call of a subscript by grid and block (``kernel[grid, block,
    ...](...)``; ``steps[0](...)`` is not one)."""
    tree = ast.parse(path.read_text())
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                  and isinstance(n.func.slice, ast.Tuple) and len(n.func.slice.elts) >= 2)


def may_launch(path: Path) -> bool:
    """A rung file (it defines ``RUNG``) or a family's private module (``_name.py``) may launch kernels."""
    if path.name.startswith("_") and path.name != "__init__.py":
        return True
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "RUNG" for t in n.targets)
               for n in tree.body)


def test_every_family_chooses_in_dispatch_and_its_public_modules_launch_nothing():
    """The family's ``__init__``, ``dispatch`` and other public modules hand a call to a plan (``plan.run(call)``,
    ``rung.run(config, call)``, ``Rung.launch``); ``kernel[...]`` is written only in rung files and private
    helpers (docs/design.md: "The one path of a call")."""
    families = sorted(p for p in KERNELS.iterdir() if (p / "__init__.py").exists())
    assert len(families) >= 6
    assert [f.name for f in families if not (f / "dispatch.py").exists()] == []
    bad = [f"{p.relative_to(KERNELS)}:{line}" for f in families for p in sorted(f.glob("*.py"))
           if not may_launch(p) for line in launches(p)]
    assert bad == [], "kernel launches outside a rung file or a private helper:\n  " + "\n  ".join(bad)


def test_the_launch_check_sees_a_planted_launch(tmp_path):
    public = tmp_path / "dispatch.py"
    public.write_text("def run(kernel, x):\n    kernel[1, 32, 0](x)\n")
    rung = tmp_path / "k01_rung.py"
    rung.write_text(public.read_text() + "RUNG = None\n")
    assert launches(public) == [2] and not may_launch(public)
    assert may_launch(rung) and may_launch(tmp_path / "_helper.py")
