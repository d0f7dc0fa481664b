"""``simt-tiles bench dispatch``'s GPU column and 256³ matmul choice, with stand-ins (the bench
itself runs on a GPU: ``benchmarks/gpu_pass.sh dispatch``)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from simt_tiles.bench import _sleep, dispatch


@pytest.fixture
def clock(monkeypatch):
    holds = []

    class Sleep:
        def __getitem__(self, dims):
            return lambda us: holds.append(us)

    monkeypatch.setattr(_sleep, "sleep", Sleep())
    return holds


def _patch_events(monkeypatch, held, calls_ms):
    """cuda.event() → events: start→e0 reads held(number of sleeps so far) ms, e0→e1 calls_ms."""
    made = []

    class Event:
        def record(self, stream=0):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            i = made.index(self)
            return held() if i % 3 == 0 else calls_ms

    def event():
        made.append(Event())
        return made[-1]

    monkeypatch.setattr(cuda, "event", event)


def test_gpu_time_from_events_behind_the_sleep(clock, monkeypatch):
    _patch_events(monkeypatch, lambda: 1e6, 0.5)  # the sleep always outlasts the enqueueing
    got = dispatch.gpu_per_call(lambda: None, host_us=10.0, calls=50, reps=3)
    assert got == pytest.approx(0.5 * 1e3 / 50)  # 0.5 ms for 50 calls: 10 µs each
    assert clock[1:] == [3 * 50 * 10 + 2000] * 3  # (the first sleep compiles the kernel)


def test_gpu_time_sleeps_longer_then_gives_up(clock, monkeypatch):
    _patch_events(monkeypatch, lambda: 0.0, 0.5)  # the sleep never covers the enqueueing
    assert dispatch.gpu_per_call(lambda: None, host_us=10.0, calls=50, reps=3) is None
    assert clock[1:] == [3500 * 4**i for i in range(4)]


def test_matmul_choice_and_its_shipped_entry():
    from simt_tiles import autotune

    rows = [{"problem": "matmul 256^3 [default, 2 splits (the rule)] (numba)", "impl": "simt_tiles.matmul",
             "host_us": 15.0, "wall_us": 20.0, "gpu_us": 19.0},
            {"problem": "matmul 256^3 [64x64, unsplit] (numba)", "impl": "simt_tiles.matmul",
             "host_us": 10.0, "wall_us": 11.0, "gpu_us": 11.0},
            {"problem": "matmul 256^3 [64x64, 4 splits] (numba)", "impl": "simt_tiles.matmul",
             "host_us": 15.0, "wall_us": 15.2, "gpu_us": 6.0},  # faster GPU, slower host: paced at 15
            {"problem": "matmul 256^3 [128x64, unsplit] (numba)", "impl": "simt_tiles.matmul",
             "host_us": 9.0, "wall_us": 9.0, "gpu_us": None}]  # no GPU time: not a candidate
    assert "[64x64, unsplit]" in dispatch.matmul_choice(rows)
    (key, rec), = dispatch.matmul_entry(rows).items()
    assert key == "matmul|*|float32|256x256x256xfloat32"
    variant, cfg = autotune._decode(autotune.tunable("matmul"), rec, "float32", "test")
    assert variant == "k11_generated_split_k" and (cfg.bm, cfg.bn, cfg.splits) == (64, 64, 1)
    assert dispatch.matmul_entry(rows[3:]) == {}


def test_table_keeps_the_host_only_format_for_older_results():
    old = {"results": [{"problem": "p (cupy)", "impl": "simt_tiles.f", "host_us": 9.66, "wall_us": 9.7},
                       {"problem": "p (cupy)", "impl": "simt_tiles.f checked path", "host_us": 165.3, "wall_us": 166}]}
    assert dispatch.markdown(old).splitlines()[2] == "| p (cupy) | 9.7 | 165.3 | – |"
    old["results"][0]["gpu_us"] = 3.25
    assert dispatch.markdown(old).splitlines()[2] == "| p (cupy) | 9.7 | 9.7 | 3.2 | 165.3 | – |"


def test_host_breakdown_takes_a_repeated_call_apart():
    from simt_tiles import launch

    from simt_tiles.kernels import reduce as red

    cfg = red.RUNG.resolve_config(None)
    n = max(200, cfg.threads * cfg.loads + 1)  # more than one block's first step: two passes
    before = launch.set_enabled(True)
    try:
        case = dispatch.Case(f"reduce sum {n}", "reduce", lambda r: ((dispatch._f32(r, n),), {}), {},
                             lambda x: np.sum(x, dtype=np.float64))
        got = dispatch.host_breakdown(case, "numba", n=2)
    finally:
        launch.set_enabled(before)
        launch.clear()
    # a launch per pass of the plan: two in the simulator (k02's split), one where k01 reduces it whole
    launches = {k for k in got if k.startswith("launch ")}
    assert set(got) - launches == {"call", "signatures", "replay"}
    assert launches == {f"launch {i + 1}" for i in range(len(launches))} and launches
    assert all(v > 0 for v in got.values())


def test_run_writes_the_table(tmp_path, monkeypatch):
    """``run`` end to end on one tiny case with Numba arrays (kinds without their framework are
    reported, not fatal): rows, breakdown, JSON and markdown written."""
    import json
    import types

    from simt_tiles import launch

    tiny = dispatch.Case("reduce sum 40", "reduce", lambda r: ((dispatch._f32(r, 40),), {}), {},
                         lambda x: np.sum(x, dtype=np.float64), kinds=("numba",))
    monkeypatch.setattr(dispatch, "CASES", (tiny,))
    monkeypatch.setattr(dispatch, "BREAKDOWN", (tiny.name,))
    monkeypatch.setattr(dispatch, "matmul_cases", lambda: ())
    monkeypatch.setattr(dispatch, "_bare_numba", dict)
    monkeypatch.setattr(dispatch.host_breakdown, "__defaults__", (1,))
    monkeypatch.setattr(dispatch, "gpu_per_call", lambda call, host: 1.5)  # (tested above)
    args = types.SimpleNamespace(calls=2, reps=1, out=str(tmp_path), json=None, md=None, plot=None)
    before = launch.enabled()
    try:
        assert dispatch.run(args) == 0
    finally:
        launch.set_enabled(before)
    (path,) = tmp_path.glob("dispatch_*.json")
    data = json.loads(path.read_text())
    assert {r["impl"] for r in data["results"]} == {"simt_tiles.reduce", "simt_tiles.reduce checked path"}
    assert set(data["host_breakdown"]["reduce sum 40 (numba)"]) >= {"call", "replay", "launch 1"}
    assert data["results"][0]["gpu_us"] == 1.5 and data["results"][1]["gpu_us"] is None  # (checked path)
    assert "| reduce sum 40 (numba) |" in next(tmp_path.glob("dispatch_*.md")).read_text()
