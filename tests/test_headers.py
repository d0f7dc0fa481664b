"""Rung headers: each states its lesson and ONE headline number, and that number is checked.

Every rung module of every ladder (``simt_tiles.registry``) has exactly one line of the form

    Headline (H200, benchmarks/results/FILE.json[, impl "ROW"]): VALUE UNIT on|at PROBLEM[, RATIO]

with UNIT one of ``TFLOP/s`` (the row's ``tflops``), ``TB/s`` (``gbps`` / 1000) or ``µs``
(``median_ms`` · 1000), PROBLEM the row's ``problem`` (matmul: ``4096³`` or ``MxNxK``), and
RATIO ``R× cuBLAS`` (``vs_cublas``), ``R× PEER`` (``vs_peer``, PEER part of the row's
``peer``) or ``P% of copy`` (``pct_ceiling``).  The row is the one whose ``impl`` is the
rung's name (or ROW), for that problem, float32; the printed numbers must equal the
committed results rounded to the digits printed.  A rung not yet measured on a GPU says so
instead, in the one form

    Headline: none yet — not measured on a GPU (WHERE THE NUMBER WILL COME FROM)

and then has no row in its ladder's results under its name (a measured rung must quote its
number).  Lab notes (dated "Measured" blocks, sweeps) live in the topic notes under
benchmarks/notes/, not in headers.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from simt_tiles import registry

ROOT = Path(__file__).resolve().parents[1]

HEADLINE = re.compile(
    r"^Headline \(H200, (?P<file>benchmarks/results/[\w.-]+\.json)(?:, impl \"(?P<impl>[^\"]+)\")?\): "
    r"(?P<value>\d+(?:\.\d+)?) (?P<unit>TFLOP/s|TB/s|µs) (?:on|at) (?P<problem>[^,]+?)"
    r"(?:, (?:(?P<ratio>\d+(?:\.\d+)?)× (?P<peer>.+)|(?P<pct>\d+(?:\.\d+)?)% of copy))?$"
)
UNMEASURED = re.compile(r"^Headline: none yet — not measured on a GPU \((?P<where>.+)\)$")

#: the results files each ladder's measured rungs quote (an unmeasured rung must have no row there)
LADDER_RESULTS = {"conv_nchw": ("conv_h200.json", "conv_issue33_h200.json")}


def rung_modules() -> list:
    return [pytest.param(ladder, name, inspect.getmodule(rung.factory), id=f"{ladder}-{name}")
            for ladder, rungs in registry.ladders().items() for name, rung in rungs.items()]


def headline_lines(doc: str) -> list[str]:
    return [ln.strip() for ln in doc.splitlines() if ln.strip().startswith("Headline")]


def _close(printed: str, actual: float) -> bool:
    """``printed`` is ``actual`` rounded to the digits printed (half a unit of the last digit)."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - actual) <= 0.5 * 10.0 ** -decimals + 1e-9


def _problem_matches(row: dict, problem: str) -> bool:
    cube = re.fullmatch(r"(\d+)³", problem)
    if "m" in row and (cube or re.fullmatch(r"\d+x\d+x\d+", problem)):  # a matmul row: 4096³ is 4096x4096x4096
        dims = (int(cube[1]),) * 3 if cube else tuple(int(d) for d in problem.split("x"))
        return (row["m"], row["n"], row["k"]) == dims
    return row.get("problem") == problem


def find_row(results: list[dict], impl: str, problem: str) -> dict:
    rows = [r for r in results if r.get("impl") == impl and _problem_matches(r, problem)
            and r.get("dtype", "float32") == "float32" and r.get("precision", "fp32") == "fp32"]
    if len(rows) > 1:  # matmul: the rung's default config beside custom ones
        rows = [r for r in rows if r.get("kind") == "default"]
    assert len(rows) == 1, f"expected one row impl={impl!r} problem={problem!r}; found {len(rows)}"
    return rows[0]


def measured_rows(rung_name: str, root: Path = ROOT) -> list[str]:
    """The committed results files that have a row for ``rung_name`` (its ``impl``)."""
    return [path.name for path in sorted((root / "benchmarks" / "results").glob("*.json"))
            if any(r.get("impl") == rung_name for r in json.loads(path.read_text()).get("results", []))]


def check_headline(line: str, rung_name: str, root: Path = ROOT) -> None:
    """Raise AssertionError unless ``line`` parses and agrees with its results file (or says
    "none yet — not measured on a GPU" of a rung no results file has a row for)."""
    if UNMEASURED.match(line):
        found = measured_rows(rung_name, root)
        assert not found, f"{line!r}: {rung_name} has been measured ({', '.join(found)}): state its headline"
        return
    m = HEADLINE.match(line)
    assert m, f"headline not in the fixed form: {line!r}"
    path = root / m["file"]
    assert path.is_file(), f"{m['file']}: no such results file"
    row = find_row(json.loads(path.read_text())["results"], m["impl"] or rung_name, m["problem"])
    actual = {"TFLOP/s": row.get("tflops"), "TB/s": (row.get("gbps") or 0) / 1000,
              "µs": row["median_ms"] * 1000}[m["unit"]]
    assert _close(m["value"], actual), f"{line!r}: the results say {actual:.4g} {m['unit']}"
    if m["ratio"]:
        if m["peer"] == "cuBLAS" and "vs_cublas" in row:  # older results; newer ones name their peer
            ratio = row["vs_cublas"]
        else:
            assert m["peer"] in row.get("peer", ""), f"{line!r}: the row's peer is {row.get('peer')!r}"
            ratio = row["vs_peer"]
        assert _close(m["ratio"], ratio), f"{line!r}: the results say {ratio:.4g}×"
    if m["pct"]:
        assert "copy" in row.get("ceiling", ""), f"{line!r}: the row's ceiling is {row.get('ceiling')!r}"
        assert _close(m["pct"], row["pct_ceiling"]), f"{line!r}: the results say {row['pct_ceiling']:.4g}%"


@pytest.mark.parametrize("ladder, name, module", rung_modules())
def test_header_has_one_checked_headline(ladder, name, module):
    doc = module.__doc__ or ""
    lines = headline_lines(doc)
    assert len(lines) == 1, f"{module.__name__}: expected one Headline line, found {len(lines)}"
    if UNMEASURED.match(lines[0]):  # no row under its name in any results file, its ladder's files included
        check_unmeasured(ladder, name)
    check_headline(lines[0], name)


def check_unmeasured(ladder: str, rung_name: str, root: Path = ROOT) -> None:
    """An unmeasured rung has no float32 row under its name in its ladder's results files."""
    for file in LADDER_RESULTS.get(ladder, ()):
        path = root / "benchmarks" / "results" / file
        data = json.loads(path.read_text()) if path.is_file() else {}
        rows = data.get("results", []) if isinstance(data, dict) else []
        assert not any(isinstance(r, dict) and r.get("impl") == rung_name for r in rows), \
            f"{rung_name}: says 'not measured' but {file} has its rows: quote the number"


@pytest.mark.parametrize("ladder, name, module", rung_modules())
def test_header_holds_no_lab_notes(ladder, name, module):
    """Dated measurements and sweeps belong in the topic notes (benchmarks/notes/*.md, "From the rung headers")."""
    doc = module.__doc__ or ""
    assert not re.search(r"^\s*Measured\b", doc, re.M), f"{module.__name__}: a 'Measured' block"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", doc), f"{module.__name__}: a dated note"


# --- the checker itself must be able to fail --------------------------------

GOOD = "Headline (H200, benchmarks/results/matmul_h200.json): 31.4 TFLOP/s at 4096³, 0.61× cuBLAS"


def test_checker_accepts_the_committed_number():
    check_headline(GOOD, "k10_warptiled")


def test_unmeasured_form():
    assert UNMEASURED.match("Headline: none yet — not measured on a GPU (the zoo will give it)")
    for bad in ("Headline: none yet", "Headline: none yet - not measured on a GPU (x)",
                "Headline: TBD (the zoo)"):
        assert not UNMEASURED.match(bad), bad
    with pytest.raises(AssertionError, match="quote the number"):
        check_unmeasured("conv_nchw", "k03_double_buffered")  # measured: its rows are in conv_h200.json


@pytest.mark.parametrize("bad, rung", [
    (GOOD.replace("31.4", "32.4"), "k10_warptiled"),  # a typed, wrong number
    (GOOD.replace("0.61×", "0.71×"), "k10_warptiled"),  # a wrong ratio
    (GOOD, "k09_double_buffered"),  # another rung's number
    (GOOD.replace("4096³", "2048³"), "k10_warptiled"),  # another problem's row
    (GOOD.replace("matmul_h200", "matmul_a100"), "k10_warptiled"),  # no such file
    (GOOD.replace("Headline (H200, ", "Headline ("), "k10_warptiled"),  # not the fixed form
    ("Headline (H200, benchmarks/results/patterns_h200.json, impl \"simt_tiles.reduce\"): "
     "4.18 TB/s on sum 2^28, 90% of copy", "k01_warp_shuffle"),  # a wrong percentage
    ("Headline: none yet — not measured on a GPU (the zoo)", "k01_warp_shuffle"),  # a measured rung claiming none
    ("Headline: not measured yet", "k99_new"),  # not the fixed form: what will measure it is missing
])
def test_checker_rejects(bad, rung):
    with pytest.raises(AssertionError):
        check_headline(bad, rung)
