"""The GPU-free parts of the benchmark harness: JSON → table/plot, the bench CLI, the statistics."""

from __future__ import annotations

import json

import pytest

from simt_tiles import bench, cli, report
from simt_tiles.timing import summarize

DATA = {
    "machine": {"gpu": "Test GPU"},
    "results": [
        {"impl": "cuBLAS", "config": "lib", "kind": "peer", "m": 64, "n": 64, "k": 64, "passed": True,
         "median_ms": 1.0, "tflops": 20.0, "vs_cublas": 1.0},
        {"impl": "cuBLAS", "config": "lib", "kind": "peer", "m": 128, "n": 64, "k": 32, "passed": True,
         "median_ms": 1.0, "tflops": 30.0, "vs_cublas": 1.0},
        {"impl": "k01", "config": "a", "kind": "default", "m": 64, "n": 64, "k": 64, "passed": True,
         "median_ms": 2.0, "tflops": 10.0, "vs_cublas": 0.5},
        {"impl": "k01", "config": "a", "kind": "default", "m": 128, "n": 64, "k": 32, "passed": False},
        {"impl": "k01", "config": "b", "kind": "custom", "m": 64, "n": 64, "k": 64, "passed": True,
         "median_ms": 4.0, "tflops": 5.0, "vs_cublas": 0.25},
    ],
}


def test_ratio_table():
    table = report.ratio_table(DATA).splitlines()
    assert table[0] == "| implementation | 64×64×64 | 128×64×32 |"
    assert "| k01 | 10.0 (0.50×) | FAIL |" in table
    assert "| k01 [b] | 5.0 (0.25×) |  |" in table


def test_plot_is_a_png(tmp_path):
    out = report.plot_rates(DATA, tmp_path / "p.png", include_custom=True)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_cli(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(DATA))
    assert report.main([str(path), "--md", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p.png")]) == 0
    assert "k01" in (tmp_path / "t.md").read_text() and (tmp_path / "p.png").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert report.main([str(bad)]) == 2
    assert "expected a benchmark JSON" in capsys.readouterr().err


@pytest.mark.sim
@pytest.mark.parametrize("argv", [["matmul"], ["softmax", "--reps", "3"], ["all"]])
def test_bench_refuses_without_a_gpu(argv, capsys):
    assert bench.main(argv) == 2
    assert "no CUDA GPU found" in capsys.readouterr().err
    assert cli.main(["bench", *argv]) == 2


def test_bench_rejects_unknown_groups(capsys):
    assert bench.main(["conv"]) == 2
    assert "expected one of ('matmul'" in capsys.readouterr().err
    assert bench.main([]) == 2 and bench.main(["--help"]) == 0


def test_summarize():
    s = summarize([3.0, 1.0, 2.0, 10.0, 2.0])
    assert s["median_ms"] == 2.0 and s["min_ms"] == 1.0 and s["max_ms"] == 10.0 and s["runs"] == 5
    assert s["iqr_ms"] > 0
    assert summarize([4.0])["iqr_ms"] == 0

