"""The autotuner without a GPU: the cache (round trip, atomic write, corrupt and foreign files, other
GPUs and versions), the order defaults come from, the tuning spaces, a planted wrong candidate,
verbose output and the ``simt-tiles tune`` command.  Timings are faked (the simulator has none);
the checks are real."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os

import numpy as np
import pytest

from simt_tiles import autotune, cli
from simt_tiles.kernels import matmul as matmul_ladder
from simt_tiles.kernels.matmul import RUNGS, _tuning
from simt_tiles.runtime import SIMULATOR, fits

REAL_SHIPPED_DIR = autotune.SHIPPED_DIR
H200 = {"gpu": "NVIDIA H200", "cc": "9.0", "driver": "13.0", "numba_cuda": "0.30.4", "simt_tiles": "0.1.0"}
PROBLEM = (9, 10, 11, "float32")
K10 = RUNGS["k10_warptiled"]
SIM_K10 = K10.presets["sim"]
SIM_K10_B = dataclasses.replace(SIM_K10, min_blocks=1)  # a second valid (and correct) config


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A fresh cache directory, an H200 as this machine, no shipped table, nothing memoised."""
    monkeypatch.setenv("SIMT_TILES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(autotune.AUTOTUNE_ENV, raising=False)
    monkeypatch.delenv(autotune.VERBOSE_ENV, raising=False)
    monkeypatch.setattr(autotune, "_MACHINE", {0: dict(H200)})
    monkeypatch.setattr(autotune, "SHIPPED_DIR", tmp_path / "shipped")
    autotune._MEMO.clear()
    yield
    autotune._MEMO.clear()


def fake_timer(ms_by_call):
    """A harness timer returning the next of ``ms_by_call`` for each candidate timed."""
    it = iter(ms_by_call)

    def timer(fn, warmup, reps, before):
        return [next(it)] * reps

    return timer


def tune(*args, times=None, **kw):
    return autotune.tune(*args, timer=fake_timer(itertools.count(1) if times is None else times),
                         sync=lambda: None, **kw)


@pytest.fixture
def k10_space():
    """k10 tuned over two small, correct configs (the simulator runs every thread in Python)."""
    object.__setattr__(K10, "tuning_space", ("sim", dataclasses.asdict(SIM_K10_B)))
    yield
    object.__setattr__(K10, "tuning_space", matmul_ladder.k10_warptiled.TUNING_SPACE)


# --- buckets and spaces ----------------------------------------------------------------------


def test_buckets_are_quarter_octaves_above_16():
    b = autotune.bucket_int
    assert [b(x) for x in (1, 7, 16)] == [1, 7, 16]
    assert b(1000) == b(1024) == 1024 and b(1031) == 1280 and b(2048) == 2048 and b(17) == 20
    for x in range(17, 5000):
        assert x <= b(x) < 1.25 * x + 1 and b(b(x)) == b(x)
    assert autotune.bucket((1000, 1024, 3, "float32")) == "1024x1024x3xfloat32"
    # a shape read off an array (NumPy ints) buckets as ints do; a bool is no size
    assert autotune.bucket((np.int64(1000), np.int32(1031), np.intp(3), "float32")) == "1024x1280x3xfloat32"
    assert autotune.bucket((True, np.True_)) == "TruexTrue"


@pytest.mark.parametrize("variant", ["k10_warptiled", "k11_generated_split_k", "k12_async_copy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_spaces_are_small_valid_and_pruned(variant, dtype):
    for n in (1000, 1024, 2048, 4096):
        cands = autotune.tunable("matmul").candidates(variant, {"m": n, "n": n, "k": n, "sms": 132}, dtype)
        # ≤ 20: k11's presets "64x64" and "128x64" (4-warp tiles, launch bounds without spills) join
        # the dict tiles at the small sizes (18 candidates at 1024³)
        assert 1 <= len(cands) <= 20 and len(set(cands)) == len(cands)
        assert all(isinstance(c, RUNGS[variant].config_type) and fits(c, dtype) is None for c in cands)
        if variant != "k10_warptiled":
            assert cands[0] == RUNGS[variant].presets["default"]  # the default first
            splits = {c.splits for c in cands}
            assert splits == {1} if n >= 4096 else len(splits) > 1  # split K only where the grid is small


def test_a_space_skips_missing_presets_and_invalid_configs():
    space = ("default", "a_preset_another_branch_adds", {"wm": 3}, {"bm": 4096, "min_blocks": 1}, "default")
    object.__setattr__(K10, "tuning_space", space)
    try:
        assert K10.candidates({"m": 64, "n": 64, "k": 64}, "float32") == [K10.presets["default"]]
    finally:
        object.__setattr__(K10, "tuning_space", matmul_ladder.k10_warptiled.TUNING_SPACE)


def test_register_estimate_prunes_tiles_over_the_launch_bounds():
    k11 = RUNGS["k11_generated_split_k"].presets["default"]
    assert _tuning.registers(k11, 4) <= 65536 // (k11.threads * k11.min_blocks)
    greedy = dataclasses.replace(k11, min_blocks=4)  # 64 registers a thread: too few for 8×8 outputs
    assert _tuning.registers(greedy, 4) > 65536 // (k11.threads * 4)
    space = list(_tuning.split_k_space({"default": greedy}, {"m": 4096, "n": 4096, "k": 4096}, "float32"))
    assert space and not any(c["bm"] == c["bn"] == 128 for c in space)  # the other tiles stay


def test_conv_spaces_are_specialised_for_the_filter():
    p = {"n": 8, "c_in": 256, "h": 14, "w": 14, "c_out": 256, "kh": 3, "kw": 3, "padding": 1}
    for v in ("k02_smem_tiled", "k03_double_buffered"):
        cands = autotune.tunable("conv2d_nchw").candidates(v, p, "float32")
        assert len(cands) >= 2 and all((c.kh, c.kw) == (3, 3) for c in cands)
    assert autotune.tunable("conv2d_nchw").candidates("k03_double_buffered", {**p, "kh": 5, "kw": 5},
                                                      "float32") == []  # prefetch spills


# --- the cache -------------------------------------------------------------------------------


def store(problem=PROBLEM, cfg=SIM_K10, variant=None):
    return autotune.store("matmul", problem, variant, ("k10_warptiled", cfg), median_ms=1.0)


def test_cache_round_trip():
    assert autotune.lookup("matmul", PROBLEM) is None
    key = store()
    assert autotune.cache_path().exists() and list(autotune.entries()) == [key]
    assert autotune.lookup("matmul", PROBLEM) == ("k10_warptiled", SIM_K10, "user")
    assert autotune.lookup("matmul", (10, 9, 11, "float32")) is None  # up to 16: exact
    store(problem=(1000, 1000, 1000, "float32"))
    assert autotune.lookup("matmul", (1024, 1010, 999, "float32"))[2] == "user"  # the same bucket
    assert autotune.lookup("matmul", (1031, 1024, 1024, "float32")) is None
    assert autotune.lookup("matmul", (9, 10, 11, "float64")) is None
    assert autotune.lookup("matmul", PROBLEM, "k10_warptiled") is None  # keyed by the requested variant too
    store(variant="k10_warptiled", cfg=SIM_K10_B)
    assert autotune.lookup("matmul", PROBLEM, "k10_warptiled")[:2] == ("k10_warptiled", SIM_K10_B)
    assert len(autotune.entries()) == 3


def test_writes_are_atomic(monkeypatch):
    store()
    before = autotune.cache_path().read_text()
    calls = []

    def broken_replace(src, dst):
        calls.append((src, dst))
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        store(problem=(99, 99, 99, "float32"))
    assert autotune.cache_path().read_text() == before  # the old file, whole
    assert calls and calls[0][1] == autotune.cache_path() and os.path.dirname(calls[0][0]) == str(
        autotune.cache_path().parent)
    assert sorted(os.listdir(autotune.cache_path().parent)) == ["autotune.json", "autotune.json.lock"]  # no .tmp


_RACER = """
import dataclasses, os, sys, time
from simt_tiles import autotune

@dataclasses.dataclass
class C:
    x: int = 1

autotune.register(autotune.Tunable("fake", "matmul", ("n", "dtype"), None, None))
real_write = autotune._write
autotune._write = lambda entries: (time.sleep(0.01), real_write(entries))  # a wide window after the read
me, n, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
open(os.path.join(folder, "ready" + me), "w").close()
while len([f for f in os.listdir(folder) if f.startswith("ready")]) < 2:  # both start storing together
    time.sleep(0.001)
for i in range(n):
    autotune.store("fake", (f"p{me}-{i}", "float32"), None, ("v", C(i)))  # (text: a bucket of its own)
"""


def test_two_processes_storing_at_once_keep_every_entry(tmp_path):
    """Read, add, replace under a lock, the file read again inside it: without, each process's rename
    dropped the entries the other stored since its read."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root, "NUMBA_ENABLE_CUDASIM": "1"}  # (SIMT_TILES_CACHE_DIR: the fixture's)
    n = 10
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, me, str(n), str(tmp_path)], env=env, cwd=root,
                              stderr=subprocess.PIPE, text=True) for me in "01"]
    for p in procs:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    got = json.loads(autotune.cache_path().read_text())["entries"]
    assert sorted(rec["bucket"] for rec in got.values()) == sorted(f"p{me}-{i}xfloat32" for me in "01"
                                                                   for i in range(n))


def test_entries_is_a_deep_copy():
    key = store()
    mine = autotune.entries()
    mine[key]["choice"]["config"]["wm"] = 3  # breaks k10's rules, were it the cache's own
    mine[key]["machine"]["gpu"] = "other"
    assert autotune.entries()[key]["choice"]["config"]["wm"] == SIM_K10.wm
    assert autotune.lookup("matmul", PROBLEM) == ("k10_warptiled", SIM_K10, "user")


def test_the_parsed_file_cache_keeps_one_state_per_file():
    for i in range(50):
        store(problem=(9, 9, 1 + i % 16, "float32"))
        autotune.entries()
    mine = [k for k in autotune._FILES if k[0] == str(autotune.cache_path())]
    assert len(mine) == 1 and len(autotune.entries()) == 16


def test_the_cache_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        store()
    finally:
        os.umask(old)
    assert autotune.cache_path().stat().st_mode & 0o777 == 0o640  # mkstemp's own: 0600


@pytest.mark.parametrize("text", ["{not json", "", "[1, 2]", '{"entries": {}}', '{"format": "other/1", "entries": {}}'])
def test_a_corrupt_or_foreign_file_is_ignored_with_a_warning(text):
    path = autotune.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.warns(UserWarning, match="ignored"):
        assert autotune.lookup("matmul", PROBLEM) is None
    store()  # a new entry replaces the bad file (its warning was given once, above)
    assert autotune.lookup("matmul", PROBLEM)[2] == "user"


def test_an_invalid_or_tampered_entry_is_never_trusted():
    key = store()
    data = json.loads(autotune.cache_path().read_text())
    data["entries"][key]["choice"]["config"]["wm"] = 3  # breaks k10's rules
    autotune.cache_path().write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="not a valid choice"):
        assert autotune.lookup("matmul", PROBLEM) is None
    data["entries"][key]["choice"]["config"]["wm"] = 32
    data["entries"][key]["bucket"] = "1x1x1xfloat32"  # fields that do not match the key
    autotune.cache_path().write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="do not match"):
        assert autotune.lookup("matmul", PROBLEM) is None


@pytest.mark.parametrize("record", [5, None, [1, 2], "k10_warptiled"])
def test_an_entry_that_is_not_an_object_is_ignored_and_listed(record, capsys):
    """A record edited into a number, null, a list or a string: a warning and the default (it raised
    AttributeError from every call that asked the cache), and ``tune --show`` lists it, as it does one
    whose median is no number (both raised from the sort and the format)."""
    key = store()
    data = json.loads(autotune.cache_path().read_text())
    rec = data["entries"][key]
    data["entries"]["other"] = {**rec, "median_ms": "fast"}
    data["entries"]["third"] = {**rec, "machine": {**rec["machine"], "gpu": 7}}  # sorted beside text
    data["entries"][key] = record
    autotune.cache_path().write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="do not match"):
        assert autotune.lookup("matmul", PROBLEM) is None
    assert cli.main(["tune", "--show"]) == 0
    out = capsys.readouterr().out
    assert out.count("an unreadable entry") == 2 and "  7 (cc 9.0" in out


@pytest.mark.parametrize("field,value", [("gpu", "NVIDIA H100 80GB HBM3"), ("cc", "8.0"), ("driver", "12.8"),
                                         ("numba_cuda", "0.31.0"), ("simt_tiles", "0.2.0")])
def test_another_gpu_driver_or_version_does_not_match(monkeypatch, field, value):
    store()
    monkeypatch.setattr(autotune, "_MACHINE", {0: {**H200, field: value}})
    assert autotune.lookup("matmul", PROBLEM) is None
    monkeypatch.setattr(autotune, "_MACHINE", {0: dict(H200)})
    assert autotune.lookup("matmul", PROBLEM) is not None


# --- where defaults come from ------------------------------------------------------------------


def ship(cfg=SIM_K10_B, gpu="NVIDIA H200", cc="9.0"):
    autotune.SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
    key = autotune._short_key("matmul", None, "float32", autotune.bucket(PROBLEM))
    (autotune.SHIPPED_DIR / "h200.json").write_text(json.dumps({
        "format": autotune.SHIPPED_FORMAT, "gpu": gpu, "compute_capability": cc, "rules": {},
        "entries": {key: {"choice": {"variant": "k10_warptiled", "config": dataclasses.asdict(cfg)}}}}))


def test_selection_order_user_cache_then_shipped_table_then_default():
    assert autotune.lookup("matmul", PROBLEM) is None  # (c): the caller's default
    ship()
    assert autotune.lookup("matmul", PROBLEM) == ("k10_warptiled", SIM_K10_B, "shipped")
    store(cfg=SIM_K10)
    assert autotune.lookup("matmul", PROBLEM) == ("k10_warptiled", SIM_K10, "user")
    autotune.clear()
    assert autotune.lookup("matmul", PROBLEM)[2] == "shipped"


def test_a_shipped_table_of_another_gpu_is_not_used():
    ship(cc="8.0")
    assert autotune.lookup("matmul", PROBLEM) is None


@pytest.mark.sim  # its first assertion is the simulator's rule
def test_choose_is_skipped_in_the_simulator_and_memoised(monkeypatch):
    store()
    assert autotune.choose("matmul", PROBLEM) is None  # the simulator: defaults only
    from simt_tiles import runtime

    monkeypatch.setattr(runtime, "SIMULATOR", False)  # as on a GPU
    calls = []
    real = autotune.lookup
    monkeypatch.setattr(autotune, "lookup", lambda *a, **k: calls.append(a) or real(*a, **k))
    autotune._MEMO.clear()
    for _ in range(3):
        assert autotune.choose("matmul", PROBLEM) == ("k10_warptiled", SIM_K10)
    assert len(calls) == 1  # later calls: one dict lookup


def test_matmul_defaults_ask_autotune_first(monkeypatch):
    monkeypatch.setattr(autotune, "choose", lambda f, p, v, a: ("k10_warptiled", SIM_K10_B))
    rung, cfg = matmul_ladder.choose(None, None, 9, 10, 11, np.float32)
    assert (rung.name, cfg) == ("k10_warptiled", SIM_K10_B)
    assert matmul_ladder.choose(None, "sim", 9, 10, 11, np.float32)[0].name == matmul_ladder.BEST_VARIANT
    monkeypatch.setattr(autotune, "choose", lambda f, p, v, a: None)
    monkeypatch.setattr(autotune, "SHIPPED_DIR", REAL_SHIPPED_DIR)
    rung, cfg = matmul_ladder.choose(None, None, 768, 768, 768, np.float32)  # the shipped split-K rule
    assert rung.name == "k11_generated_split_k" and cfg.splits == 2


def test_an_unknown_function_gets_the_default(monkeypatch):
    from simt_tiles import runtime

    monkeypatch.setattr(runtime, "SIMULATOR", False)
    assert autotune.choose("fft2d", (64, 64, "float32")) is None
    with pytest.raises(ValueError, match="function"):
        autotune.lookup("fft2d", (64, 64, "float32"))


def test_no_implicit_tuning_without_opting_in(monkeypatch):
    from simt_tiles import runtime

    monkeypatch.setattr(runtime, "SIMULATOR", False)
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: pytest.fail("tuned without opting in"))
    assert autotune.choose("matmul", PROBLEM) is None
    assert autotune.choose("matmul", PROBLEM, autotune=False) is None
    tuned = []
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: tuned.append(a) or autotune.TuneResult(
        "matmul", PROBLEM, ("k10_warptiled", SIM_K10), [], 0.0))
    assert autotune.choose("matmul", PROBLEM, autotune=True) == ("k10_warptiled", SIM_K10)
    monkeypatch.setenv(autotune.AUTOTUNE_ENV, "1")
    assert autotune.choose("matmul", (50, 50, 50, "float32")) == ("k10_warptiled", SIM_K10)
    assert len(tuned) == 2


# --- tuning ------------------------------------------------------------------------------------


def test_tune_checks_times_and_stores_the_fastest(k10_space):
    res = tune("matmul", PROBLEM, "k10_warptiled", times=[2.0, 1.0])
    assert res.choice == ("k10_warptiled", SIM_K10_B) and all(r["passed"] for r in res.rows)
    assert autotune.lookup("matmul", PROBLEM, "k10_warptiled")[:2] == res.choice


def test_a_wrong_candidate_is_never_chosen(k10_space, monkeypatch):
    """Plant a candidate that computes a wrong C — and make it the fastest."""
    launcher = _tuning.Case.launcher

    def planted(self, rung, config):
        fn = launcher(self, rung, config)
        if config != SIM_K10_B:
            return fn

        def wrong():
            fn()
            self.out[3, 4] = self.out[3, 4] * (1 + 1e-4)  # a relative error far above γ_K

        return wrong

    monkeypatch.setattr(_tuning.Case, "launcher", planted)
    res = tune("matmul", PROBLEM, "k10_warptiled", times=[2.0, 1.0])
    assert res.choice == ("k10_warptiled", SIM_K10)
    bad = [r for r in res.rows if not r["passed"]]
    assert len(bad) == 1 and "median_ms" not in bad[0] and bad[0]["status"] == "FAIL"  # checked, never timed


def test_a_candidate_that_raises_is_a_failed_row(k10_space, monkeypatch):
    monkeypatch.setattr(_tuning.Case, "launcher", lambda self, rung, cfg: (_ for _ in ()).throw(RuntimeError("x")))
    res = tune("matmul", PROBLEM, "k10_warptiled")
    assert res.choice is None and res.key is None and not autotune.entries()


def test_verbose_prints_progress_and_the_candidate_table(k10_space, capsys, monkeypatch):
    tune("matmul", PROBLEM, "k10_warptiled", times=[2.0, 1.0], verbose=False)
    assert capsys.readouterr().out == ""
    monkeypatch.setenv(autotune.VERBOSE_ENV, "1")
    tune("matmul", PROBLEM, "k10_warptiled", times=[2.0, 1.0])
    out = capsys.readouterr().out
    assert "[1/2]" in out and "[2/2]" in out and "2 candidates" in out
    table = out[out.index("rank"):].splitlines()
    assert "min_blocks=1" in table[1] and "1.0000" in table[1] and "2.0000" in table[2]  # fastest first


def test_the_budget_skips_the_rest(k10_space):
    res = tune("matmul", PROBLEM, "k10_warptiled", budget_s=0.0)
    assert [r.get("status") for r in res.rows] == ["skipped", "skipped"] and res.choice is None


# --- the command line --------------------------------------------------------------------------


def test_cli_show_and_clear(capsys):
    store()
    assert cli.main(["tune", "--show"]) == 0
    out = capsys.readouterr().out
    assert "1 entries" in out and "NVIDIA H200" in out and "k10_warptiled" in out
    assert cli.main(["tune", "--clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert not autotune.entries()
    assert cli.main(["tune", "--show"]) == 0 and "0 entries" in capsys.readouterr().out


def test_cli_tune_needs_a_gpu_and_a_shape(capsys):
    assert cli.main(["tune", "matmul"]) == 2 and "--shape" in capsys.readouterr().err
    if SIMULATOR:  # on a GPU the same command tunes (tests/test_autotune's GPU tests)
        assert cli.main(["tune", "matmul", "--shape", "64"]) == 2 and "GPU" in capsys.readouterr().err


def test_cli_tune_checks_its_arguments_first(capsys, monkeypatch):
    """A bad function name before the GPU check; a bad --variant (as a shape) a usage error, exit 2 (it raised
    from the tune: a traceback, exit 1); --budget-s <= 0 refused when parsed (every candidate was skipped, then
    "no candidate passed")."""
    monkeypatch.setattr(autotune._probe, "select_backend", lambda: True)  # no GPU: the function is still checked
    assert cli.main(["tune", "fft", "--shape", "64"]) == 2
    err = capsys.readouterr().err
    assert "function: expected one of" in err and "'fft'" in err and "GPU" not in err
    monkeypatch.setattr(autotune._probe, "select_backend", lambda: False)  # as on a GPU
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: pytest.fail("tuned with a bad argument"))
    assert cli.main(["tune", "matmul", "--shape", "64", "--variant", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "simt-tiles tune: --variant: expected one of" in err and "'nosuch'" in err
    for budget in ("0", "-1"):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["tune", "matmul", "--shape", "64", "--budget-s", budget])
        assert exit_.value.code == 2 and "--budget-s: expected a number > 0" in capsys.readouterr().err


def test_shapes_parse_or_name_the_argument():
    assert autotune.tunable("matmul").parse("64", {}) == (64, 64, 64, "float32")
    assert autotune.tunable("matmul").parse("3x4x5", {"dtype": "float64"}) == (3, 4, 5, "float64")
    conv = autotune.tunable("conv2d_nchw")
    assert conv.parse("8x256x14x14", {}) == (8, 256, 14, 14, 256, 3, 3, 1, "float32")
    assert conv.parse("1x3x9x9", {"filter": "4x5x5", "padding": 0}) == (1, 3, 9, 9, 4, 5, 5, 0, "float32")
    for bad in ("0", "3x4", "axb"):
        with pytest.raises(ValueError, match="--shape"):
            autotune.tunable("matmul").parse(bad, {})
    with pytest.raises(ValueError, match="function"):
        autotune.tunable("fft")


def test_the_shipped_tables_are_valid(monkeypatch):
    """Every entry of every shipped table decodes to a valid, fitting config of an existing rung."""
    monkeypatch.setattr(autotune, "SHIPPED_DIR", REAL_SHIPPED_DIR)
    tables = sorted(REAL_SHIPPED_DIR.glob("*.json"))
    assert tables
    for path in tables:
        data = json.loads(path.read_text())
        assert data["format"] == autotune.SHIPPED_FORMAT
        monkeypatch.setattr(autotune, "_MACHINE", {0: {**H200, "gpu": data["gpu"], "cc": data["compute_capability"]}})
        for key, rec in data["entries"].items():
            function, variant, _, bkt = key.split("|")
            for problem in rec["problems"]:
                assert autotune.bucket(tuple(problem)) == bkt
                hit = autotune.lookup(function, tuple(problem), None if variant == "*" else variant)
                assert hit is not None and hit[2] == "shipped" and hit[0] == rec["choice"]["variant"]


def test_storing_forgets_launch_plans_and_a_tuning_call_makes_none(monkeypatch):
    from simt_tiles import launch, runtime

    cleared, refused = [], []
    monkeypatch.setattr(launch, "clear", lambda: cleared.append(1))
    monkeypatch.setattr(launch, "no_plan", lambda reason: refused.append(reason))
    store()
    assert cleared  # config=None may mean another config now: recorded plans are stale
    monkeypatch.setattr(runtime, "SIMULATOR", False)
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: autotune.TuneResult(
        "matmul", a[1], ("k10_warptiled", SIM_K10), [], 0.0))
    autotune.choose("matmul", (50, 50, 50, "float32"), autotune=True)
    assert refused and "autotune" in refused[0]


def test_a_bad_variant_is_a_value_error_naming_it():
    """``tune``/``candidates`` with a variant the function's ladder lacks: ValueError naming ``variant`` (it was a
    bare KeyError from the ladder's dict)."""
    for bad in ("nosuch", 3):
        with pytest.raises(ValueError, match=r"^variant: expected one of \[.*'k03_smem_tiled'.*\] or None; got"):
            autotune.tune("matmul", (64, 64, 64, "float32"), bad, timer=lambda *a: 0, sync=lambda: None,
                          before=lambda: None)
