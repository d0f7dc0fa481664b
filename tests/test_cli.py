"""The command line: help everywhere (no GPU looked for), the demo in the simulator, the machine
description, result-file names, the peer registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from simt_tiles import bench, cli, registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELP = [[], *([name] for name in cli.available()), *(["bench", g] for g in (*bench.groups(), "all"))]


def run_cli(*argv, env=None):
    full = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "simt_tiles", *argv], capture_output=True, text=True, env=full,
                          timeout=300, cwd=ROOT)


@pytest.mark.parametrize("argv", HELP, ids=lambda a: " ".join(a) or "top")
def test_help_of_every_subcommand(argv):
    # a user's environment: no simulator chosen; help must neither look for a GPU nor fail without one
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    res = subprocess.run([sys.executable, "-m", "simt_tiles", *argv, "--help"], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": ROOT}, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: "), res.stdout[:200]
    assert "simt-tiles" in res.stdout or argv[:1] not in (["demo"], ["bench"], []), res.stdout[:200]
    if argv[:1] == ["bench"] and len(argv) == 2 and argv[1] != "all":
        assert "--out DIR" in res.stdout and "--reps" in res.stdout


def test_every_subcommand_has_help_text():
    assert set(cli.available()) >= {"demo", "compile-gate", "bench"}
    out = cli.build_parser([]).format_help()
    for name in cli.available():
        assert name in out
    for name in set(cli.SUBCOMMANDS) - set(cli.available()):  # a module not in this installation
        assert f"    {name} " not in out


def test_bad_arguments_name_the_argument(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "--shape", "1,2"])
    assert exc.value.code == 2 and "--shape" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["demo", "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


@pytest.mark.parametrize("config", ["nosuch", "bm=7"])
def test_codegen_dump_names_a_bad_config(config, capsys):
    """A preset the rung does not have: a message and exit 2, as a bad variant (a ValueError traceback, exit 1)."""
    assert cli.main(["codegen", "dump", "k11_generated_split_k", "--config", config]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simt-tiles codegen dump: config: ") and repr(config) in err and "Traceback" not in err


def test_codegen_help_names_the_command_it_was_run_as(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["codegen", "--help"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("usage: simt-tiles codegen ")


@pytest.mark.parametrize("argv", [["demo", "--ladder", "elementwise", "--json"], ["bench", "matmul", "--json"],
                                  ["bench", "conv", "--md"], ["bench", "patterns", "--plot"],
                                  ["analyze", "k06_transposed", "--shape", "2x2x2", "--plot"]],
                         ids=lambda a: "_".join(a[:2]))
def test_an_output_file_in_no_folder_is_refused_before_the_run(argv, tmp_path, capsys):
    """A file to write in a folder that does not exist (or a folder given as the file): a usage error naming
    the option, before anything runs (the demo and the analyzer ran, then raised FileNotFoundError)."""
    for path, why in ((tmp_path / "missing" / "x.out", "no folder"), (tmp_path, "is a folder")):
        with pytest.raises(SystemExit) as exc:
            cli.main([*argv, str(path)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and f"argument {argv[-1]}: " in err and why in err, err


@pytest.mark.sim
def test_demo_in_the_simulator(tmp_path):
    out = tmp_path / "demo.json"
    res = run_cli("demo", "--ladder", "matmul", "elementwise", "--shape", "5,7,3", "--dtype", "float32",
                  "--json", str(out), env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "simulator" in res.stdout and "checks passed" in res.stdout
    data = json.loads(out.read_text())
    assert data["machine"]["slug"] == "sim" and data["machine"]["simulator"] is True
    rows = data["results"]
    want = {(lad, rung) for lad in ("matmul", "elementwise") for rung in registry.ladder(lad).rungs()}
    assert {(r["group"], r["impl"]) for r in rows} == want  # every rung of the chosen ladders, once
    assert all(r["passed"] and "median_ms" not in r for r in rows)  # checked, never timed in the simulator
    assert all(r["problem"] == "5x7x3, float32" for r in rows if r["group"] == "matmul")


def test_every_ladder_has_a_demo_case():
    assert all(callable(f.demo) for f in registry.families().values())


@pytest.mark.sim
def test_demo_reports_a_wrong_kernel(monkeypatch, capsys):
    """A demo that cannot fail is a defect: a rung that returns wrong numbers must be a FAIL row."""
    import numpy as np

    import simt_tiles
    from simt_tiles import demo

    real = simt_tiles.vector_add
    monkeypatch.setattr(simt_tiles, "vector_add", lambda a, b, **kw: np.asarray(real(a, b, **kw)) + 1e-3)
    assert demo.main(["--ladder", "elementwise", "--dtype", "float64"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "k01_grid_stride" in out


@pytest.mark.sim
def test_machine_in_the_simulator():
    from simt_tiles import machine

    info = machine.describe()
    assert machine.slug() == "sim" and machine.l2_bytes() is None
    assert info["simulator"] is True and info["gpu"] == "Numba CUDA simulator"
    for key in ("numpy", "numba", "numba_cuda", "simt_tiles", "python"):
        assert info[key], key


@pytest.mark.parametrize("name, slug", [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
                                        ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("Tesla V100-SXM2-16GB",
                                                                                  "v100-sxm2-16gb"),
                                        ("Numba CUDA simulator", "sim"), ("NVIDIA", "gpu")])
def test_slug_from_name(name, slug):
    from simt_tiles.machine import slug_from_name

    assert slug_from_name(name) == slug


def test_result_files_are_named_from_the_device(tmp_path):
    from simt_tiles.bench.common import flush_bytes, result_paths

    paths = result_paths(str(tmp_path), "matmul", "rtx-4090")
    assert paths == {k: str(tmp_path / f"matmul_rtx-4090.{e}") for k, e in (("json", "json"), ("md", "md"),
                                                                             ("plot", "png"))}
    assert flush_bytes(60 * 2**20) == 600 * 2**20 and flush_bytes(None) == 512 * 2**20


@pytest.mark.sim
def test_result_paths_default_to_this_device(tmp_path):
    from simt_tiles.bench.common import result_paths

    assert result_paths(str(tmp_path), "conv")["json"].endswith("conv_sim.json")


def test_peer_registry():
    from simt_tiles.bench import peers

    names = [p.name for p in peers.peers("matmul", only_available=False)]
    assert names[0] == "cuBLAS" == peers.baseline("matmul")  # the baseline every matmul row is divided by
    assert {"Triton FP32", "torch.matmul", "cuBLAS TF32", "cuTile FP32"} <= set(names)
    primary = {p.name for p in peers.peers("matmul", only_available=False) if not p.context}
    assert primary == {"cuBLAS", "Triton FP32"}  # the FP32 peers --no-extra-peers keeps
    with pytest.raises(ValueError, match="already has a peer called 'cuBLAS'"):
        peers.peer("matmul", "cuBLAS")(lambda a, b, c: None)
    try:
        @peers.peer("test-group", "one")
        def one(a, b, c):
            return None

        assert [p.name for p in peers.peers("test-group")] == ["one"] and peers.baseline("test-group") == "one"
    finally:
        peers._REGISTRY[:] = [p for p in peers._REGISTRY if p.group != "test-group"]


def _fake_venv(tmp_path):
    """A venv whose python logs pip calls and whose simt-tiles logs its arguments (no network)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "log"
    py = venv / "bin" / "python"
    py.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "pip $*" >> {log}; exit 0; fi\n'
                  f'exec {sys.executable} "$@"\n')
    tool = venv / "bin" / "simt-tiles"
    tool.write_text(f'#!/bin/sh\necho "simt-tiles $*" >> {log}\n')
    py.chmod(0o755)
    tool.chmod(0o755)
    return venv, log


@pytest.mark.skipif(sys.platform == "win32", reason="a bash script")
def test_scripts_demo_installs_once(tmp_path):
    venv, log = _fake_venv(tmp_path)

    def demo(**env):
        res = subprocess.run(["bash", os.path.join(ROOT, "scripts", "demo"), "--dtype", "float32"],
                             env={**os.environ, "SIMT_TILES_VENV": str(venv), **env}, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        lines = log.read_text().splitlines()
        log.write_text("")
        return lines

    first = demo()
    assert first[0].startswith("pip -m pip install") and first[0].endswith(".[cu13]")
    assert first[1] == "simt-tiles demo --dtype float32"
    assert demo() == ["simt-tiles demo --dtype float32"]  # installed: no pip, so it works offline
    assert demo(SIMT_TILES_CUDA="cu12")[0].endswith(".[cu12]")  # another toolkit: install again
    stamp = venv / ".simt-tiles-installed"
    stamp.write_text("cu13 an-older-pyproject\n")
    assert demo()[0].startswith("pip")  # pyproject.toml changed: install again
    res = subprocess.run(["bash", os.path.join(ROOT, "scripts", "demo")], capture_output=True, text=True,
                         env={**os.environ, "SIMT_TILES_VENV": str(venv), "SIMT_TILES_CUDA": "cu11"})
    assert res.returncode == 2 and "expected cu13 or cu12; got 'cu11'" in res.stderr


def test_no_import_circle_and_no_numba_before_a_command_runs():
    """The bench and the machine description never import the CLI; building any subcommand's
    parser imports no Numba (the backend is chosen when the command runs, not before)."""
    code = (
        "import sys\n"
        "import simt_tiles.bench, simt_tiles.bench.common, simt_tiles.bench.matmul, simt_tiles.bench.conv\n"
        "import simt_tiles.bench.patterns, simt_tiles.bench.peers, simt_tiles.machine, simt_tiles.report\n"
        "import simt_tiles.demo\n"
        "assert 'simt_tiles.cli' not in sys.modules, 'import circle'\n"
        "from simt_tiles import cli\n"
        "for argv in (['demo'], ['bench'], ['bench', 'matmul']):\n"
        "    cli.build_parser(argv)\n"
        "assert not any(m == 'numba' or m.startswith('numba.') for m in sys.modules), 'numba imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**env, "PYTHONPATH": ROOT}, cwd=ROOT)
    assert res.returncode == 0, res.stderr
