"""The soak's verdict (``simt_tiles.bench.soak.summarise``) on synthetic runs: no GPU, no kernel.

A passing run of issue 36's scale passes every target; each planted fault — a wrong result, an error, a
hung thread, GPU memory or host RSS 6 % off the baseline at one sample or at the end, one call 150×
its median, a measured phase cut short, a public function never called — fails exactly its target
and the run (exit status 1), and the summary says FAIL with the measured value.  The soak itself
runs in the simulator in ``tests/test_faults.py``.
"""

from __future__ import annotations

import copy
import gc
import time
import types

import numpy as np
import pytest

from simt_tiles.bench import soak

MIB = 2**20
SLOW_CALL = "vector_add 1000 float32 [device, thread 3, stream S1] at 123.4 s, 3000 µs"


def _latency(times, where="vector_add 1000 float32 [device, thread 0, stream default] at 80.0 s"):
    lat = soak.Latencies()
    for t in times:
        lat.add(t, where if t == max(times) else "")
    return lat


def _run(**over) -> dict:
    """A passing 5-minute, 16-thread, 4-stream run."""
    base = {"t": 70.0, "gpu_used": 2000 * MIB, "host_rss": 3000 * MIB}
    samples = [{**base, "t": 70.0 + 10 * i, "gpu_used": (2000 + (i % 3)) * MIB, "host_rss": (3000 + i) * MIB}
               for i in range(1, 30)]
    raw = {"complete": True,
           "settings": {"minutes": 5.0, "threads": 16, "streams": 4, "simulator": False,
                        "forms": ["numpy", "device", "graph"]},
           "functions": ["matmul", "vector_add"],
           "phases_s": {"warm_up": 40.2, "settle": 30.0, "measured": 300.3}, "warm_up_complete": True,
           "calls": {"matmul": {"numpy": [16, 5, 900], "device": [80, 20, 4000], "graph": [16, 4, 700]},
                     "vector_add": {"numpy": [16, 6, 950], "device": [80, 22, 4100], "graph": [16, 5, 650]}},
           "graph": {"captures": 1391, "replays": 1391},
           "wrong_results": 0, "wrong": [], "errors": 0, "error_examples": [], "hung_threads": [],
           "memory": {"start": {"t": 0.0, "gpu_used": 600 * MIB, "host_rss": 400 * MIB}, "baseline": base,
                      "samples": samples, "end": {**base, "t": 370.5, "gpu_used": 2010 * MIB, "host_rss": 3050 * MIB}},
           "latency": {"vector_add 1000 float32 [device]": _latency([20e-6] * 99 + [1e-3]).summary(),
                       "matmul 100x100x100 float32 [device]": _latency([40e-6] * 50 + [80e-6] * 50).summary()},
           "cpu_latency": {"vector_add 1000 float32 [device]": _latency([15e-6] * 100).summary()}}
    for k, v in over.items():
        raw[k] = v
    return raw


def _failed(data) -> list:
    return [name for name, t in data["targets"].items() if not t["passed"]]


def _collected():
    """One full ``gc.collect()`` under the soak's full-collection counter, removed afterwards."""
    full = soak._FullCollections()
    full.install()
    try:
        gc.collect()
    finally:
        full.remove()
    return full


def test_latency_bins_give_median_tail_and_the_slowest_call():
    lat = _latency([20e-6] * 99 + [1e-3], where=SLOW_CALL)
    s = lat.summary()
    assert s["calls"] == 100 and s["median_us"] == pytest.approx(20, rel=0.02) and s["max_us"] == 1000
    assert s["max_over_median"] == pytest.approx(50, rel=0.03) and s["over_limit"] == 0 and s["slowest"] == SLOW_CALL
    lat.add(3e-3, SLOW_CALL)
    assert lat.summary()["over_limit"] == 1 and lat.summary()["max_over_median"] > 100
    assert soak.Latencies().summary() == {"calls": 0}


def test_a_passing_run_passes_every_target_with_its_measured_value():
    data = soak.summarise(_run())
    assert data["passed"] and not _failed(data)
    t = data["targets"]
    assert t["wrong results"]["measured"] == 0 and t["minutes run"]["measured"] == pytest.approx(5.0, abs=0.01)
    assert t["GPU memory within 5% of the baseline"]["measured"] == pytest.approx(0.005, abs=1e-3)
    assert t["host RSS within 5% of the baseline"]["end"] == 3050 * MIB
    lat = t["no call over 100x its median"]
    assert lat["measured"] == pytest.approx(50, rel=0.03) and "vector_add 1000 float32 [device]" in lat["detail"]
    assert data["worst_latency"]["key"] == "vector_add 1000 float32 [device]"
    assert data["scale"]["issue_36"] and data["calls_per_function"]["matmul"] == {
        "total": 5741, "measured": 5600, "forms": {"numpy": [16, 5, 900], "device": [80, 20, 4000],
                                                   "graph": [16, 4, 700]}}
    text = soak.table(data)
    assert "**PASS**" in text and "FAIL" not in text and "PASS: GPU memory within 5% of the baseline" in text
    assert "| matmul | 5741 | 5600 |" in text and "graph captures 1391, replays 1391" in text


def _plant_memory(kind, at, change):
    raw = _run()
    mem = copy.deepcopy(raw["memory"])
    target = mem["end"] if at == "end" else mem["samples"][at]
    target[kind] = int(mem["baseline"][kind] * (1 + change))
    return {"memory": mem}


PLANTS = {
    "wrong result": ({"wrong_results": 1, "wrong": ["matmul 7x3x5 float32 [out, thread 2, stream S0]: 1 of 21 "
                                                    "elements off"]}, "wrong results"),
    "error": ({"errors": 2, "error_examples": ["softmax 3x4 float64 [cupy, ...]: RuntimeError: boom"]}, "errors"),
    "hung thread": ({"hung_threads": [{"thread": 4, "call": "reduce ...", "for_s": 61.0, "stack": ""}]},
                    "hung threads"),
    "GPU memory +6% at the end": (_plant_memory("gpu_used", "end", 0.06), "GPU memory within 5% of the baseline"),
    "GPU memory -7% at one sample": (_plant_memory("gpu_used", 11, -0.07), "GPU memory within 5% of the baseline"),
    "host RSS +6% at one sample": (_plant_memory("host_rss", 20, 0.06), "host RSS within 5% of the baseline"),
    "one call 150x its median": ({"latency": {"vector_add 1000 float32 [device]": _latency(
        [20e-6] * 99 + [3e-3], where=SLOW_CALL).summary()}}, "no call over 100x its median"),
    "measured phase cut short": ({"phases_s": {"warm_up": 200.0, "settle": 30.0, "measured": 180.0}}, "minutes run"),
    "killed before the end": ({"complete": False}, "minutes run"),
    "a function never called": ({"calls": {"matmul": {"numpy": [1, 0, 3]}}}, "every public function called"),
    "no baseline": ({"memory": {"start": {}, "baseline": None, "samples": [], "end": None},
                     "phases_s": {"warm_up": 600.0, "settle": 0.0, "measured": 0.0}}, None),
}


@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_planted_failure_fails_its_target_and_the_run(plant):
    over, target = PLANTS[plant]
    data = soak.summarise(_run(**over))
    assert not data["passed"]
    failed = _failed(data)
    if target is not None:
        assert failed == [target], failed
        assert f"FAIL: {target}" in soak.table(data) and "**FAIL**" in soak.table(data)
    else:  # nothing measured: the minutes, both memory targets
        assert {"minutes run", "GPU memory within 5% of the baseline", "host RSS within 5% of the baseline"} <= set(failed)
    if plant == "one call 150x its median":
        assert SLOW_CALL in data["targets"][target]["detail"] and data["targets"][target]["measured"] > 100


def test_within_five_percent_passes_and_ignored_targets_are_information():
    assert soak.summarise(_run(**_plant_memory("host_rss", "end", 0.049)))["passed"]
    over, target = PLANTS["one call 150x its median"]
    data = soak.summarise(_run(**over), ignore=("latency",))
    assert data["passed"] and data["targets"][target]["ignored"] and not data["targets"][target]["passed"]
    assert f"INFO: {target}" in soak.table(data)
    small = _run(settings={**_run()["settings"], "threads": 4, "minutes": 1.0},
                 phases_s={"warm_up": 90.0, "settle": 6.0, "measured": 60.1})
    data = soak.summarise(small)
    assert data["passed"] and not data["scale"]["issue_36"] and data["scale"]["threads"] is False


def test_what_grew_after_the_baseline_is_named_beside_the_memory_step():
    """Sessions 18-19's host RSS step came with an import in the measured phase (torch, for the machine's
    description): the memory targets name the kernels, plans and modules added after the baseline."""
    raw = _run(**_plant_memory("host_rss", 3, 0.3))
    mem = raw["memory"]
    mem["baseline"].update(kernels=31, plans_recorded=1652, modules=900)
    for i, x in enumerate(mem["samples"]):
        x.update(kernels=31, plans_recorded=1652, modules=900 if i < 3 else 1450)
    detail = soak.summarise(raw)["targets"]["host RSS within 5% of the baseline"]["detail"]
    assert detail.endswith("; after the baseline: modules +550"), detail
    assert "after the baseline" not in soak.summarise(_run())["targets"]["host RSS within 5% of the baseline"]["detail"]


@pytest.mark.parametrize("plant", [None, "wrong result"])
def test_the_command_exits_1_when_a_target_fails(monkeypatch, capsys, tmp_path, plant):
    raw = _run(**(PLANTS[plant][0] if plant else {}))
    monkeypatch.setattr(soak, "soak", lambda *a, **k: {**soak.summarise(raw), "machine": {"gpu": "H200"}})
    args = types.SimpleNamespace(forms=None, fill=None, ignore="", minutes=5.0, threads=16, streams=4, problems=3,
                                 seed=0, sample_s=10.0, settle_s=None, wall_limit_s=None, release=False,
                                 json=str(tmp_path / "soak.json"), md=None, plot=None, out=None)
    assert soak.run(args) == (1 if plant else 0)
    out = capsys.readouterr().out
    assert ("FAIL: wrong results: 1" in out) == bool(plant) and (tmp_path / "soak.json").exists()


class _Exit(Exception):
    pass


@pytest.mark.parametrize("close_fails", [False, True], ids=["closes", "close_raises"])
def test_release_destroys_the_context_after_the_outputs_then_exits(monkeypatch, tmp_path, close_fails):
    """``--release`` (a destroyed context): the JSON written first, then ``cuda.close()`` and ``os._exit`` with
    the run's code; a close that raises still ends in ``os._exit`` (exit 1), never the interpreter's teardown."""
    import numba.cuda

    raw = {**soak.summarise(_run()), "machine": {"gpu": "H200"},
           "released": {"workspaces_dropped": 0, "memory_after_release": {}, "context_destroyed": "at the end of the run",
                        "live_device_arrays": {}, "cyclic_device_arrays": {}, "holders_of_live_arrays": {}}}
    monkeypatch.setattr(soak, "soak", lambda *a, **k: raw)
    events = []

    def close():
        events.append(("close", (tmp_path / "soak.json").exists()))
        if close_fails:
            raise RuntimeError("planted: the driver refused")

    def exit_(code):
        events.append(("exit", code))
        raise _Exit

    monkeypatch.setattr(numba.cuda, "close", close)
    monkeypatch.setattr(soak.os, "_exit", exit_)
    args = types.SimpleNamespace(forms=None, fill=None, ignore="", minutes=5.0, threads=16, streams=4, problems=3,
                                 seed=0, sample_s=10.0, settle_s=None, wall_limit_s=None, release=True,
                                 json=str(tmp_path / "soak.json"), md=None, plot=None, out=None)
    with pytest.raises(_Exit):
        soak.run(args)
    assert events == [("close", True), ("exit", 1 if close_fails else 0)]


def test_calls_that_overlapped_a_full_collection_are_told_apart():
    """Python's full garbage collections stop every thread: the slowest call that overlapped none is
    reported beside the slowest call (the target judges the slowest call, as the issue says)."""

    lat = soak.Latencies()
    for _ in range(99):
        lat.add(20e-6, "fast")
    lat.add(5e-3, "during a full GC", clean=False)
    lat.add(40e-6, "slowest without one")
    s = lat.summary()
    assert s["max_over_median"] > 200 and s["max_no_gc_over_median"] == pytest.approx(2, rel=0.05)
    assert s["slowest"] == "during a full GC" and s["slowest_no_gc"] == "slowest without one"
    data = soak.summarise(_run(latency={"vector_add 10 float32 [device]": s},
                               gc={"full_collections": 3, "max_ms": 4.9, "total_ms": 9.1, "frozen": False}))
    detail = data["targets"]["no call over 100x its median"]["detail"]
    assert not data["passed"] and "overlapped no full GC: worst 2.0x" in detail and "3 full GCs" in detail
    full = _collected()
    assert full.count == 2 and len(full.pauses) == 1 and not full.active and full not in gc.callbacks


def test_the_release_counts_the_device_arrays_still_referenced():
    """What the memcheck soak's leak check reports is what is still referenced after the release:
    the release's JSON counts Numba's and CuPy's device arrays by type (stand-ins of those names)."""
    fake = type("DeviceNDArray", (), {"__module__": "numba.stand_in", "nbytes": 40})  # (not a real module:
    other = type("DeviceNDArray", (), {"__module__": "elsewhere", "nbytes": 8})  # real arrays live on a GPU)
    keep = [fake(), fake(), other()]
    live = soak._live_device_arrays()
    assert live["numba.stand_in.DeviceNDArray"] == [2, 80]
    assert not any(k.startswith("elsewhere") for k in live) and keep


# --- why a call is slow: the stall log and its attribution (issue 36's 110.9x graph replay) ----------------

def _slow_call_logs():
    """Thread 0: 200 calls of 70 µs, one every ms; call 100 takes 8 ms.  Thread 1: a `device` call
    during which it flushes 11 pending frees (6 ms, from 1 ms before call 100 starts); a flush far from
    any slow call; a GIL probe wake-up late elsewhere."""
    t0 = np.arange(200) * 1e-3
    t1 = t0 + 70e-6
    t1[100] = t0[100] + 8e-3
    calls = {"t0": np.r_[t0, 0.0985], "t1": np.r_[t1, 0.1070], "cpu": np.r_[t1 - t0, 5e-3],
             "thread": np.r_[np.zeros(200, int), 1], "median": np.r_[np.full(200, 70e-6), 4e-3],
             "key": ["conv2d_nchw (3, 4, 16, 6) float64 [graph]"] * 200 + ["matmul 9x9x9 float64 [device]"]}
    events = {"t0": np.array([0.099, 0.150, 0.020]), "t1": np.array([0.105, 0.151, 0.025]),
              "kind": ["numba_free_flush", "numba_free_flush", "gil_wait"], "thread": np.array([1, 1, -2]),
              "n": np.array([11, 11, 0]), "nbytes": np.array([11 * MIB, 11 * MIB, 0])}
    return calls, events


def test_a_slow_call_is_attributed_to_the_flush_that_overlapped_it():
    calls, events = _slow_call_logs()
    r = soak.attribute(calls, events, (0.0, 0.2), origin=-100.0)
    w = r["worst"][0]
    assert w["call"].endswith("[graph]") and w["thread"] == 0 and w["ratio"] == pytest.approx(114.3, abs=0.1)
    assert w["at_s"] == pytest.approx(100.1) and w["others_in_call"] == 1 and w["others_by_form"] == {"device": 1}
    assert w["event_kinds"] == {"numba_free_flush": {"count": 1, "max_ms": 6.0, "covered_ms": pytest.approx(5.0)}}
    assert len(w["events"]) == 1
    flush = w["events"][0]
    assert flush == {"kind": "numba_free_flush", "thread": 1, "start_ms": pytest.approx(-1.0), "ms": pytest.approx(6.0),
                     "n": 11, "bytes": 11 * MIB, "in_call": "device"}
    slow = r["slow"]
    assert slow["calls"] == 1 and slow["by_form"] == {"graph": 1} and slow["overlapping_no_event"] == 0
    o = slow["overlap"]["numba_free_flush"]
    # the one slow call overlapped a flush; by chance an 8 ms call would overlap these 7 ms of flushes
    # in 0.2 s with probability (7 + 2 x 8) / 200
    assert o["slow_calls"] == 1 and o["fraction"] == 1.0 and o["by_chance"] == pytest.approx(0.115, abs=1e-3)
    assert o["half_covered"] == 1.0  # (5 of its 8 ms)
    assert slow["overlap"]["gil_wait"]["slow_calls"] == 0
    ev = r["events"]["numba_free_flush"]
    assert ev["count"] == 2 and ev["coverage"] == pytest.approx(0.035) and ev["inside_library_call"] == 0.5
    lines = "\n".join(soak._stall_lines({**r, "hooks": {"installed": ["numba_free_flush"]}}))
    assert "why slow #1: conv2d_nchw" in lines and "numba_free_flush 6.00 ms (thread 1, 11 frees 11.0 MiB, in its " \
        "device call, from -1.00 ms)" in lines and "FAIL" not in lines


def test_the_stall_hooks_log_flushes_slow_allocations_and_collections(monkeypatch):
    """The hooks wrap an object with Numba's ``_PendingDeallocs`` interface (its ``add_item`` calls
    ``self.clear()`` past 10 items) and a memory manager's ``memalloc``; the GC callback logs
    generations 1 and 2; the worker's call log feeds the attribution with the verdict's medians."""

    class Pending:  # (Numba's _PendingDeallocs, as numba-cuda 0.30 has it)
        def __init__(self):
            self._cons, self._size, self.is_disabled = [], 0, False

        def add_item(self, dtor, handle, size):
            self._cons.append((dtor, handle))
            self._size += size
            if len(self._cons) > 10:
                self.clear()

        def clear(self):
            if not self.is_disabled:
                while self._cons:
                    dtor, handle = self._cons.pop(0)
                    dtor(handle)
                self._size = 0

        def __len__(self):
            return len(self._cons)

    class Manager:
        def __init__(self):
            self.deallocations = Pending()

        def memalloc(self, size):
            if size > 2**20:
                time.sleep(2e-4)  # (slower than SLOW_ALLOC_S: logged)
            return size

    ctx = types.SimpleNamespace(memory_manager=Manager(), deallocations=Pending())
    log = soak.EventLog(64)
    names, undos = soak.install_stall_hooks(ctx, log)
    assert names == ["numba_free_flush", "numba_ctx_flush", "numba_alloc_slow"]
    assert soak.install_stall_hooks(ctx, log) == ([], [])  # (once)
    freed = []
    for i in range(23):
        ctx.memory_manager.deallocations.add_item(freed.append, i, 1000)
    ctx.deallocations.clear()  # (nothing pending: not logged)
    ctx.memory_manager.memalloc(4096)  # (fast: not logged)
    ctx.memory_manager.memalloc(2**21)
    monkeypatch.setattr(soak, "EVENTS", log)
    full = _collected()
    for undo in undos:
        undo()
    assert not any("clear" in vars(x) or "memalloc" in vars(x) for x in (ctx.deallocations, ctx.memory_manager,
                                                                          ctx.memory_manager.deallocations))
    snap = log.snapshot()
    assert list(snap["kind"]) == ["numba_free_flush", "numba_free_flush", "numba_alloc_slow", "gc_full"]
    assert freed == list(range(22)) and list(snap["n"][:3]) == [11, 11, 1]
    assert list(snap["nbytes"][:3]) == [11000, 11000, 2**21] and snap["t1"][2] - snap["t0"][2] >= 2e-4
    assert list(snap["thread"]) == [soak.MAIN_THREAD] * 4 and snap["dropped"] == 0

    # a worker's logged calls, with the medians of the verdict's latency summary
    problem = types.SimpleNamespace(label="vector_add 10 float32", function="vector_add", shared=None)
    w = soak.Worker(3, [problem], [None], ["numpy", "graph"], 0, None)
    for i in range(50):
        w.record(problem.label, "graph", 8e-3 if i == 20 else 70e-6, 50e-6, "where", soak.MEASURED, start=i * 1e-3)
    w.record(problem.label, "numpy", 1.0, 1.0, "where", soak.WARM_UP, start=0.0)  # (not measured: not logged)
    latency = {"vector_add 10 float32 [graph]": w.latency[problem.label, "graph"].summary()}
    log = soak.EventLog(8)
    log.add(soak.K_GIL, 0.0195, 0.0265, thread=soak.PROBE_THREAD)
    r = soak._stalls([w], log, latency, {"start": 0.0, "end": 0.06}, 0.0)
    assert r["calls"] == 50 and r["calls_dropped"] == 0 and r["slow"]["overlap"]["gil_wait"]["slow_calls"] == 1
    assert r["worst"][0]["call"] == "vector_add 10 float32 [graph]" and r["worst"][0]["at_s"] == pytest.approx(0.02)


def test_the_gil_probe_sees_a_c_call_that_keeps_the_gil():
    """Hypothesis 1's mechanism (benchmarks/notes/faults.md): a C function that does not let go of the
    GIL (builtin ``sum`` over a range) holds every other thread; the probe's wake-up is late by about
    as long."""
    log = soak.EventLog(4096)
    probe = soak.GilProbe(log, 1e-3, 1e-3).start()

    def wait_for_probes(n):  # by count, not by a fixed sleep: a loaded CI machine wakes the probe late
        deadline = time.perf_counter() + 10.0
        while probe.probes < n and time.perf_counter() < deadline:
            time.sleep(0.005)

    try:
        wait_for_probes(6)
        t0 = time.perf_counter()
        sum(range(3_000_000))
        t1 = time.perf_counter()
        wait_for_probes(probe.probes + 6)
    finally:
        probe.close()
    snap = log.snapshot()
    held = [(a, b) for a, b, k in zip(snap["t0"], snap["t1"], snap["kind"]) if k == "gil_wait" and a < t1 and b > t0]
    assert held and max(b - a for a, b in held) > 0.5 * (t1 - t0), (held, t1 - t0)
    s = probe.summary()
    assert s["probes"] > 10 and s["late"] >= 1 and s["lateness_max_us"] > 1e3


def test_the_release_names_the_cycles_that_held_device_arrays():
    """An array that only a reference cycle holds is counted with the cycle's type, then freed; one
    still referenced is named with its holder (stand-ins of Numba's name)."""
    fake = type("DeviceNDArray", (), {"__module__": "numba.stand_in", "nbytes": 40})

    class Holder:
        pass

    cyc = Holder()
    cyc.me, cyc.array = cyc, fake()
    del cyc
    kept = Holder()
    kept.array = fake()
    gc.disable()
    try:
        c = soak._cyclic_device_arrays()
    finally:
        gc.enable()
    assert c["arrays"] == {"numba.stand_in.DeviceNDArray": [1, 40]}
    assert any(k.endswith("Holder") for k in c["array_referrers"])
    assert not gc.garbage and soak._live_device_arrays()["numba.stand_in.DeviceNDArray"] == [1, 40]
    held = soak._holders_of_live_arrays()
    # (Python 3.12 keeps an instance's attributes inline: the Holder itself, or its __dict__'s holder)
    assert any(k.endswith("Holder") for k in [*held["referrers"], *held["their_referrers"]]) and kept


_HELD: dict = {}


def test_the_release_names_the_root_that_keeps_an_array_alive():
    """The chain from a still-referenced array up to a module global (planted: an array kept in this
    module's dict through a list and an object must be named with the module)."""
    fake = type("DeviceNDArray", (), {"__module__": "numba.stand_in", "nbytes": 40})
    holder = type("Holder", (), {})()
    holder.array = fake()
    _HELD["x"] = [holder]
    try:
        path = soak._root_path(holder.array)
        assert path.startswith("numba.stand_in.DeviceNDArray <- ") and "Holder" in path
        assert path.endswith(f"module {__name__}"), path
    finally:
        _HELD.clear()


def test_the_release_names_what_holds_a_finished_calls_frame():
    """An array kept alive by a finished call's frame object (held in a list here; a traceback or a
    tool's reference in a real run) is traced to that frame and to what holds it."""
    import sys

    fake = type("DeviceNDArray", (), {"__module__": "numba.stand_in", "nbytes": 40})

    def alloc():
        a = fake()  # noqa: F841 - the frame's local
        _HELD.setdefault("frames", []).append(sys._getframe())

    alloc()
    try:
        found = [o for o in gc.get_objects() if type(o) is fake]
        path = soak._root_path(found[0], exclude=(found,))
        assert "<- frame alloc (test_soak.py:" in path and path.endswith("held by {'builtins.list': 1}"), path
        assert any(k.startswith("alloc (test_soak.py:") for k in soak._holders_of_live_arrays(top=10**6)["frames_alive"])
    finally:
        _HELD.clear()
