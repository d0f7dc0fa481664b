"""Boolean environment variables (one rule: ``_options.env_flag``), Numba's own reading of
``NUMBA_ENABLE_CUDASIM`` (``_options.numba_flag``, which ``_probe.select_backend`` follows) and the
shared option types."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

import simt_tiles
from simt_tiles import _options, _pytest_racecheck, analyze, autotune

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "SIMT_TILES_TEST_FLAG"


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " yes ", "On"])
def test_env_flag_on(monkeypatch, value):
    monkeypatch.setenv(NAME, value)
    assert _options.env_flag(NAME) is True


@pytest.mark.parametrize("value", ["", "0", "false", "False", " no", "OFF "])
def test_env_flag_off(monkeypatch, value):
    monkeypatch.setenv(NAME, value)
    assert _options.env_flag(NAME, default=True) is False


def test_env_flag_unset_is_the_default(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    assert _options.env_flag(NAME) is False and _options.env_flag(NAME, default=True) is True


@pytest.mark.parametrize("value", ["2", "disable", "y", "nope"])
def test_env_flag_refuses_anything_else_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(NAME, value)
    with pytest.raises(ValueError, match=rf"{NAME}: expected .*got {value!r}"):
        _options.env_flag(NAME)


def test_autotune_switches_read_off_as_off(monkeypatch, capsys):
    for value, on in (("false", False), ("off", False), ("no", False), ("yes", True)):
        monkeypatch.setenv(autotune.AUTOTUNE_ENV, value)
        assert autotune._opted_in(None) is on
    monkeypatch.setenv(autotune.AUTOTUNE_ENV, "maybe")
    with pytest.raises(ValueError, match=autotune.AUTOTUNE_ENV):
        autotune._opted_in(None)
    monkeypatch.setenv(autotune.VERBOSE_ENV, "maybe")
    with pytest.raises(ValueError, match=autotune.VERBOSE_ENV):  # read before any candidate is built
        autotune.tune("matmul", (9, 10, 11, "float32"), "k10_warptiled", store_result=False)


def test_racecheck_switch_reads_off_as_off(monkeypatch):
    calls = []
    monkeypatch.setattr(analyze, "enable_racecheck", lambda: calls.append(1))
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    for value in ("off", "false", "0"):
        monkeypatch.setenv("SIMT_TILES_RACECHECK", value)
        simt_tiles._racecheck_from_environment()
        assert not _pytest_racecheck.racecheck_requested()
    assert calls == []
    monkeypatch.setenv("SIMT_TILES_RACECHECK", "on")
    simt_tiles._racecheck_from_environment()
    assert calls == [1] and _pytest_racecheck.racecheck_requested()
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "false")  # Numba's rule: int("false") fails, so 0: no simulator
    simt_tiles._racecheck_from_environment()
    assert calls == [1]
    monkeypatch.setenv("SIMT_TILES_RACECHECK", "sometimes")
    with pytest.raises(ValueError, match="SIMT_TILES_RACECHECK"):
        _pytest_racecheck.racecheck_requested()


def _run(code: str, **env) -> str:
    full = {**os.environ, "PYTHONPATH": ROOT, **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, check=True,
                          cwd=ROOT).stdout


def test_fast_launch_switch_reads_off_as_off():
    code = ("import importlib, os, simt_tiles.launch as l; print(l.enabled())\n"
            "os.environ['SIMT_TILES_FAST_LAUNCH'] = 'bogus'\n"
            "try:\n    importlib.reload(l)\nexcept ValueError as e:\n    print(e)\n")
    out = _run(code, NUMBA_ENABLE_CUDASIM="1", SIMT_TILES_FAST_LAUNCH="off").splitlines()
    assert out[0] == "False" and out[1].startswith("SIMT_TILES_FAST_LAUNCH: expected") and "'bogus'" in out[1]


def test_select_backend_reads_numba_enable_cudasim_as_numba_does():
    """``select_backend`` and ``numba.config`` agree on every value (Numba: ``int(value)``, 0 if that fails)."""
    values = ["1", "0", "", "false", "00", "true", " 1 ", "2", "-1", "on", "0x1"]
    code = ("import os, warnings, numba.core.config as c\nfrom simt_tiles import _probe\n"
            "warnings.simplefilter('ignore')\n"
            f"for v in {values!r}:\n"
            "    os.environ['NUMBA_ENABLE_CUDASIM'] = v\n    c.reload_config()\n"
            "    print(repr(v), _probe.select_backend(), bool(c.ENABLE_CUDASIM))\n")
    lines = _run(code, NUMBA_ENABLE_CUDASIM="1").splitlines()
    assert len(lines) == len(values)
    for line in lines:
        value, ours, numbas = line.rsplit(" ", 2)
        assert ours == numbas, line
    assert [_options.numba_flag(v) for v in values] == [True, False, False, False, False, False, True, True, True,
                                                          False, False]


@pytest.mark.parametrize("kind, text", [(_options.positive_int, "0"), (_options.positive_int, "-2"),
                                        (_options.positive_int, "x"), (_options.positive_float, "0"),
                                        (_options.positive_float, "-1"), (_options.positive_float, "nan"),
                                        (_options.positive_float, "inf")])
def test_positive_option_types_refuse(kind, text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"got {text!r}"):
        kind(text)


def test_positive_option_types_accept():
    assert _options.positive_int("3") == 3 and _options.positive_float("0.5") == 0.5
