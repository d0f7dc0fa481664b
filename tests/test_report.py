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
@pytest.mark.parametrize("argv", [["matmul"], ["conv"], ["softmax", "--reps", "3"], ["all"], ["all", "--out", "x"]])
def test_bench_refuses_without_a_gpu(argv, capsys):
    assert bench.main(argv) == 2
    assert "no CUDA GPU found" in capsys.readouterr().err
    assert cli.main(["bench", *argv]) == 2


def test_bench_rejects_unknown_groups(capsys):
    assert bench.main(["convolution"]) == 2
    assert "expected one of ('matmul', 'conv'" in capsys.readouterr().err
    assert bench.main(["all", "--bogus"]) == 2
    assert "expected no options or --out DIR" in capsys.readouterr().err
    assert bench.main([]) == 2 and bench.main(["--help"]) == 0


def test_summarize():
    s = summarize([3.0, 1.0, 2.0, 10.0, 2.0])
    assert s["median_ms"] == 2.0 and s["min_ms"] == 1.0 and s["max_ms"] == 10.0 and s["runs"] == 5
    assert s["iqr_ms"] > 0
    assert summarize([4.0])["iqr_ms"] == 0



# --- the harness: verify, then time (a fake timer: no GPU needed) -------------------------------


class FakeTimer:
    def __init__(self, ms):
        self.ms, self.calls = ms, []

    def __call__(self, fn, *, warmup, reps, before=None):
        self.calls.append((warmup, reps, before))
        for _ in range(reps):
            fn()
        return [self.ms] * reps


def harness(ms=2.0, **kw):
    from simt_tiles.bench.harness import Harness

    return Harness(timer=FakeTimer(ms), sync=lambda: None, **kw)


def test_harness_checks_before_timing():
    import numpy as np

    from simt_tiles.bounds import check_within

    h = harness(reps=7)
    calls = []
    good = h.entry("g", "p", "good", lambda: calls.append(1), check=lambda: True, nbytes=2e9, x=1)
    assert good["passed"] and good["runs"] == 7 and good["gbps"] == pytest.approx(1000.0)
    assert len(calls) == 2 + 7 + 5  # the checked call, the one-call estimate, the timed calls, 5 host-timed
    bad = h.entry("g", "p", "bad", lambda: None,
                  check=lambda: check_within(np.array([1.0, np.nan]), np.array([1.0, 2.0]), np.array([0.1, 0.1])),
                  nbytes=1)
    assert not bad["passed"] and "median_ms" not in bad and np.isnan(bad["err_over_bound"])
    assert len(h.timer.calls) == 1  # the failing entry was never timed

    def boom():
        raise RuntimeError("no kernel image")

    err = h.entry("g", "p", "broken", boom, check=lambda: True)
    assert not err["passed"] and err["error"] == "RuntimeError: no kernel image"


def test_harness_ratios_and_flush():
    flush = []
    h = harness(ms=1.0, before=lambda: flush.append(1))
    h.entry("copy", "n", "device copy", lambda: None, check=lambda: True, kind="ceiling", nbytes=4e9)
    h.entry("softmax", "16x8", "k01", lambda: None, check=lambda: True, nbytes=2e9, x=8)
    h.entry("softmax", "16x8", "torch.softmax", lambda: None, check=lambda: True, kind="peer", nbytes=1e9, x=8)
    h.entry("mm", "64", "rung", lambda: None, check=lambda: True, flops=2e9)
    h.entry("mm", "64", "cuBLAS", lambda: None, check=lambda: True, kind="ceiling", flops=4e9)
    rows = h.finish(ceilings={"softmax": "device copy", "mm": "cuBLAS"}, peers={"softmax": "torch.softmax"})
    k01 = rows[1]
    assert k01["pct_ceiling"] == pytest.approx(50.0) and k01["ceiling"] == "device copy"
    assert k01["vs_peer"] == pytest.approx(2.0) and k01["peer"] == "torch.softmax"
    assert rows[3]["pct_ceiling"] == pytest.approx(50.0)
    assert "pct_ceiling" not in rows[0]  # a ceiling is not a percentage of itself
    assert h.timer.calls[0][2] is not None


GROUP_DATA = {
    "machine": {"gpu": "Test GPU"}, "title": "t",
    "results": [
        {"group": "copy", "problem": "n", "x": 1, "impl": "device copy", "kind": "ceiling", "precision": "fp32",
         "passed": True, "median_ms": 1.0, "gbps": 4000.0},
        *({"group": "softmax", "problem": f"16x{c}", "x": c, "impl": impl, "kind": kind, "precision": "fp32",
           "passed": True, "median_ms": 1.0, "gbps": g * c, "pct_ceiling": g * c / 40, "vs_peer": 1.1,
           "err_over_bound": 0.01} for c in (256, 1024) for impl, kind, g in (("k01", "simt", 2.0),
                                                                             ("torch.softmax", "peer", 1.5))),
        {"group": "reduce", "problem": "sum 2^28", "x": 2**28, "impl": "simt_tiles.reduce", "kind": "simt",
         "precision": "fp32", "passed": False, "error": "ValueError: x | y"},
        {"group": "nchw", "problem": "N32", "x": 56, "impl": "torch conv2d (cuDNN TF32)", "kind": "peer",
         "precision": "tf32", "passed": True, "median_ms": 1.0, "tflops": 30.0, "err_over_bound": 0.2},
    ],
}


def test_group_tables():
    text = report.group_tables(GROUP_DATA)
    assert "### softmax" in text and "### nchw" in text
    assert "| 16x1024 | k01 | fp32 | pass (0.01) | 1.000 | 2048.0 | 51.2 | 1.10 |  |" in text
    assert "| tf32 | pass (0.2) | 1.000 | 30.0 |" in text and "TFLOP/s" in text
    assert "FAIL" in text and "ValueError: x / y" in text  # a '|' in a message must not break the table


def test_plot_groups_and_cli(tmp_path):
    out = report.plot_groups(GROUP_DATA, tmp_path / "g.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GROUP_DATA))
    assert report.main([str(path), "--md", str(tmp_path / "g.md"), "--plot", str(tmp_path / "g2.png")]) == 0
    assert "### softmax" in (tmp_path / "g.md").read_text()


def test_progress_plain(capsys):
    from simt_tiles.bench.harness import Progress

    with Progress("t", enabled=False) as p:
        p.step("x")
        p.done("line one")
    assert capsys.readouterr().out == "line one\n"
