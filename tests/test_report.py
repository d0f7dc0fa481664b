"""The GPU-free parts of the benchmark harness: JSON → table/plot, the bench CLI, the statistics."""

from __future__ import annotations

import json

import pytest

from simt_tiles import bench, cli, report
from simt_tiles.timing import summarize

#: a matmul run in the harness schema
DATA = {
    "machine": {"gpu": "Test GPU"},
    "results": [
        {"group": "matmul", "problem": f"{m}x{n}x{k}", "x": 2 * m * n * k, "m": m, "n": n, "k": k, **r}
        for (m, n, k), r in [
            ((64, 64, 64), {"impl": "cuBLAS", "config": "library", "kind": "peer", "precision": "fp32",
                            "passed": True, "median_ms": 1.0, "tflops": 20.0}),
            ((128, 64, 32), {"impl": "cuBLAS", "config": "library", "kind": "peer", "precision": "fp32",
                             "passed": True, "median_ms": 1.0, "tflops": 30.0}),
            ((64, 64, 64), {"impl": "k01", "config": "a", "kind": "simt", "precision": "fp32", "passed": True,
                            "median_ms": 2.0, "tflops": 10.0, "vs_peer": 0.5, "peer": "cuBLAS"}),
            ((128, 64, 32), {"impl": "k01", "config": "a", "kind": "simt", "precision": "fp32", "passed": False}),
            ((64, 64, 64), {"impl": "k01 [b]", "config": "b", "kind": "simt", "custom": True, "precision": "fp32",
                            "passed": True, "median_ms": 4.0, "tflops": 5.0, "vs_peer": 0.25, "peer": "cuBLAS"}),
        ]
    ],
}

#: the same run as the matmul bench wrote it before the one schema (no "group"; kind default/custom)
OLD_DATA = {
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


@pytest.mark.parametrize("data", [DATA, OLD_DATA], ids=["schema", "old-schema"])
def test_ratio_table(data):
    table = report.ratio_table(data).splitlines()
    assert table[0] == "| implementation | 64×64×64 | 128×64×32 |"
    assert "| k01 | 10.0 (0.50×) | FAIL |" in table
    assert "| k01 [b] | 5.0 (0.25×) |  |" in table


def test_old_rows_are_upgraded(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(OLD_DATA))
    rows = report.load(path)["results"]
    assert all(r["group"] == "matmul" for r in rows)
    assert rows[0]["kind"] == "peer" and rows[2]["kind"] == "simt" and rows[4]["custom"]
    assert rows[2]["problem"] == "64x64x64" and rows[2]["vs_peer"] == 0.5 and "vs_cublas" not in rows[2]
    assert report.upgrade(report.upgrade(OLD_DATA)) == report.upgrade(OLD_DATA)  # idempotent
    demo = {"results": [{"impl": "k01_naive", "dtype": "float32", "shape": [3, 4, 5], "passed": True,
                         "config": "default", "tflops": 1.0, "vs_cublas": 0.1},
                        {"impl": "cuBLAS (CuPy)", "dtype": "float32", "shape": [3, 4, 5], "passed": True,
                         "config": "library", "tflops": 10.0}]}
    up = report.upgrade(demo)["results"]
    assert [r["kind"] for r in up] == ["simt", "peer"] and up[0]["problem"] == "3x4x5"


def test_every_committed_result_renders():
    import glob
    import os

    files = glob.glob(os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results", "*.json"))
    rendered = 0
    for path in files:
        with open(path) as fh:
            rows = json.load(fh).get("results")
        if not rows or not any(key in rows[0] for key in ("group", "m", "shape")):
            continue  # not a harness file (fma_peak's own format; dispatch's host times per call)
        data = report.load(path)
        assert "| problem | implementation |" in report.group_tables(data), path
        rendered += 1
    assert rendered >= 10


@pytest.mark.parametrize("data", [DATA, OLD_DATA], ids=["schema", "old-schema"])
def test_plot_is_a_png(tmp_path, data):
    out = report.plot_rates(data, tmp_path / "p.png", include_custom=True)
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


RESULTS = __import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def test_report_cli_on_files_that_are_not_old_matmul_runs(tmp_path, capsys):
    """Rows without ``group`` are upgraded only when they have m, n, k (or shape): dispatch's host-time rows
    raised KeyError 'm'; harness matmul rows without m, n, k (defaults_h200) raised it in the ratio table; a
    row that is no object raised TypeError.  Rows left out are named; nothing left is exit 2."""
    assert report.main([str(RESULTS / "dispatch_h200.json")]) == 2
    err = capsys.readouterr().err
    assert "report: " in err and "94 of 94 rows are not benchmark rows" in err and "no benchmark rows" in err
    assert report.main([str(RESULTS / "defaults_h200.json"), "--md", str(tmp_path / "d.md")]) == 0
    assert "| problem | implementation |" in (tmp_path / "d.md").read_text()
    for rows, code in (([1], 2), ([None, "x", {"group": "g"}], 2), ([1, DATA["results"][0]], 0)):
        path = tmp_path / "r.json"
        path.write_text(json.dumps({"results": rows}))
        assert report.main([str(path)]) == code
        err = capsys.readouterr().err
        assert f"report: {path}: " in err and "not benchmark rows" in err and "Traceback" not in err


@pytest.mark.parametrize("option", ["--md", "--plot"])
def test_report_cli_refuses_an_output_file_in_no_folder(option, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(DATA))
    with pytest.raises(SystemExit) as exc:
        report.main([str(path), option, str(tmp_path / "missing" / "out")])
    assert exc.value.code == 2 and f"argument {option}: no folder" in capsys.readouterr().err


@pytest.mark.sim
@pytest.mark.parametrize("argv", [["matmul"], ["conv"], ["softmax", "--reps", "3"], ["all"], ["all", "--out", "x"]])
def test_bench_refuses_without_a_gpu(argv, capsys):
    assert bench.main(argv) == 2
    assert "no CUDA GPU found" in capsys.readouterr().err
    assert cli.main(["bench", *argv]) == 2


def test_bench_rejects_unknown_groups(capsys):
    assert bench.main(["convolution"]) == 2
    assert "invalid choice: 'convolution'" in capsys.readouterr().err
    assert bench.main(["all", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
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


def test_harness_ceilings_by_group_and_rows_without_a_rate():
    """A zoo group's own copy row is its ceiling (the first group's copy was every group's); a passing row with no
    rate (no bytes given) and a median of 0 no longer crash finish() or the entry."""
    h = harness(ms=1.0)
    for group, gbs in (("zoo a", 4e9), ("zoo b", 2e9)):
        h.entry(group, "n", "device copy", lambda: None, check=lambda: True, kind="ceiling", nbytes=gbs)
        h.entry(group, "x", "k", lambda: None, check=lambda: True, nbytes=1e9)
    h.entry("zoo b", "y", "no bytes", lambda: None, check=lambda: True)
    rows = h.finish(ceilings={"zoo a": "device copy", "zoo b": "device copy"}, peers={})
    assert rows[1]["pct_ceiling"] == pytest.approx(25.0) and rows[3]["pct_ceiling"] == pytest.approx(50.0)
    assert "gbps" not in rows[4] and "pct_ceiling" not in rows[4]
    zero = harness(ms=0.0).entry("g", "p", "fast", lambda: None, check=lambda: True, nbytes=1e9)
    assert zero["passed"] and zero["median_ms"] == 0 and "gbps" not in zero


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


# --- the matmul group's loop, GPU-free: NumPy in place of CuPy, a fake timer ---------------------


def test_matmul_bench_loop_checks_each_impl_on_rotating_sets(capsys):
    import types

    import numpy as np

    from simt_tiles.bench.matmul import Impl, measure

    class FakeCupy:  # NumPy under CuPy's name: what the loop uses of CuPy
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def get_default_memory_pool():
            return types.SimpleNamespace(free_all_blocks=lambda: None)

    xp = FakeCupy()
    used = []

    def peer(sets, m, n, k):
        def launch(a, b, c):
            used.append(next(i for i, s in enumerate(sets) if s[0] is a))
            np.matmul(a, b, out=c)
        return launch

    def wrong(sets, m, n, k):  # a rung that leaves the last column unwritten
        return lambda a, b, c: c.__setitem__((slice(None), slice(0, -1)), (a @ b)[:, :-1])

    def broken(sets, m, n, k):
        raise ValueError("config does not fit")

    h = harness(reps=5)
    l2 = 4 * (7 * 5 + 5 * 6 + 7 * 6)  # one set of 7x6x5 fills L2: three sets for 3·L2
    measure(h, xp, [(7, 6, 5)], [Impl("numpy", peer, "peer", "fp32", {"config": "library"}),
                                 Impl("wrong", wrong, "simt", "fp32", {"config": "x"}),
                                 Impl("broken", broken, "simt", "fp32", {})], l2)
    rows = h.finish(ceilings={}, peers={"matmul": "numpy"})
    assert [r["impl"] for r in rows] == ["numpy", "wrong", "broken"]
    ok, bad, err = rows
    assert ok["passed"] and ok["problem"] == "7x6x5" and (ok["m"], ok["n"], ok["k"]) == (7, 6, 5)
    assert ok["vs_peer"] == 1.0 and ok["tflops"] > 0 and ok["group"] == "matmul"
    assert used[0] == 0 and set(used) == {0, 1, 2}  # checked on set 0, then timed over all three sets
    assert not bad["passed"] and np.isnan(bad["err_over_bound"])  # the NaN poison left in the column
    assert not err["passed"] and err["error"] == "ValueError: config does not fit"
    assert "3 rotating input sets" in capsys.readouterr().out
