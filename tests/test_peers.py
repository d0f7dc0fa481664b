"""The benchmark peers without a GPU: optional imports, the kernel line counter, the SIMT-vs-Tile
table's renderer (on a fixture) and its README block."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from simt_tiles.bench import cccl_peers, loc, tile_table, triton_peers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- optional imports: a missing package is a reason, never an error -----------------------


@pytest.fixture
def no_module(monkeypatch):
    """``no_module("triton")``: importing it raises ImportError (as where it is not installed)."""
    def hide(*names):
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)
    return hide


@pytest.mark.parametrize("make", [triton_peers.triton_softmax, triton_peers.triton_vector_add,
                                  triton_peers.triton_bias_relu, triton_peers.triton_row_sum,
                                  lambda: triton_peers.triton_reduce("max"), lambda: triton_peers.triton_matmul("tf32")],
                         ids=["softmax", "vector_add", "bias_relu", "row_sum", "reduce", "matmul"])
def test_triton_peers_absent_give_a_reason(no_module, monkeypatch, make):
    monkeypatch.setattr(triton_peers, "_K", {})
    no_module("triton", "triton.language")
    fn, why = make()
    assert fn is None and why.startswith("Triton not importable")


def test_triton_peers_reject_bad_arguments():
    with pytest.raises(ValueError, match="precision"):
        triton_peers.triton_matmul("bf16")
    with pytest.raises(ValueError, match="op"):
        triton_peers.triton_reduce("mean")


def test_cccl_absent_gives_a_reason(no_module, monkeypatch):
    monkeypatch.setattr(cccl_peers, "_API", {})
    no_module("cuda.compute")
    api, why = cccl_peers.cccl()
    assert api is None and "cuda.compute not usable" in why and "cuda-cccl" in why


def test_table_systems_absent_give_reasons(no_module, monkeypatch):
    monkeypatch.setattr(triton_peers, "_K", {})
    monkeypatch.setattr(cccl_peers, "_API", {})
    no_module("triton", "cuda.compute", "simt_tiles.tilecpp")
    for load in (tile_table._triton, tile_table._cccl, tile_table._tilecpp):
        got, why = tile_table._optional(load)
        assert got is None and why, load


def test_matmul_peer_registry_without_triton(no_module, monkeypatch):
    from simt_tiles.bench import peers

    monkeypatch.setattr(triton_peers, "_K", {})
    no_module("triton", "triton.language")
    names = [p.name for p in peers.peers("matmul", only_available=False)]
    assert {"Triton FP32", "Triton TF32"} <= set(names)
    tf32 = next(p for p in peers.peers("matmul", only_available=False) if p.name == "Triton TF32")
    assert tf32.precision == "tf32" and not tf32.available()


# --- the line counter --------------------------------------------------------------------

SOURCE = textwrap.dedent('''
    """module docstring"""

    def make_kernel(config):
        """a docstring of
        two lines"""
        # a comment
        x = 1

        def kernel(a):  # nested: counted with its factory
            a[0] = x
        return kernel


    def geometry(config):
        return 1, 2
    ''')


def test_function_lines(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(SOURCE)
    # def make_kernel, x = 1, def kernel, a[0] = x, return kernel
    assert loc.function_lines(p, ["make_kernel"]) == 5
    assert loc.function_lines(p, ["kernel"]) == 2
    assert loc.function_lines(p, ["geometry"]) == 2
    with pytest.raises(ValueError, match="missing_kernel"):
        loc.function_lines(p, ["missing_kernel"])


def test_cpp_lines():
    src = "// header\n#include <x.h>\n/* a\n   block */\nint f() {  // trailing\n\n  return 1; /* x */\n}\n"
    assert loc.cpp_lines(src) == 4  # include, int f, return, }


def test_cu_file_lines_follow_local_includes(tmp_path):
    (tmp_path / "shared.cuh").write_text('#pragma once\n#include "cuda_tile.h"\nint helper();\n')
    (tmp_path / "k.cu").write_text('#include "shared.cuh"\n#include "shared.cuh"\n// c\nint k() { return helper(); }\n')
    # k.cu: 2 includes + 1 line; shared.cuh once: 3 lines; cuda_tile.h is not beside them
    assert loc.cu_file_lines(tmp_path / "k.cu") == 3 + 3


def test_rung_lines_follows_sibling_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "fakeladder"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_common.py").write_text("def make_never_counted():\n    return 1\n")
    (pkg / "_staging.py").write_text("def make_loader(c):\n    return c\n\n\ndef helper_not_imported():\n    return 0\n")
    (pkg / "k01_a.py").write_text(SOURCE + "\n\ndef emit_body(s):\n    s.append(1)\n")
    (pkg / "k02_b.py").write_text(textwrap.dedent('''
        """k02"""
        from ._common import make_never_counted
        from ._staging import make_loader, helper_not_imported
        from .k01_a import emit_body, geometry


        def make_kernel(config):
            load = make_loader(config)
            return load
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert loc.rung_lines("fakeladder.k01_a") == 5 + 2  # make_kernel + emit_body; not geometry
    # own make_kernel (3) + make_loader (2) + k01's emit_body (2); not _common, helpers, geometry
    assert loc.rung_lines("fakeladder.k02_b") == 3 + 2 + 2


def test_rung_lines_of_the_ladders():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    k03 = loc.rung_lines("simt_tiles.kernels.matmul.k03_smem_tiled")
    assert 10 < k03 < loc.rung_lines("simt_tiles.kernels.matmul.k11_generated_split_k")
    assert loc.function_lines(os.path.join(ROOT, "simt_tiles", "bench", "triton_peers.py"),
                              ["softmax_kernel", "reduce_kernel", "matmul_kernel"]) > 0
    assert loc.cpp_lines(cccl_peers.BIAS_RELU_OP) > 0


# --- the table renderer ------------------------------------------------------------------

def _row(key, system, impl, rate, *, passed=True, loc_=None, metric="gbps", **kw):
    r = {"group": "tile", "problem_key": key, "system": system, "impl": impl, "passed": passed, "loc": loc_, **kw}
    if passed:
        r[metric] = rate
    return r


FIXTURE = {
    "machine": {"gpu": "Test GPU"},
    "problems": ["sum", "matmul_tf32", "matmul_fp32"],
    "problem_titles": {"sum": "sum 2^10", "matmul_tf32": "matmul 64³", "matmul_fp32": "matmul 64³"},
    "results": [
        _row("sum", "SIMT best rung", "k_slow", 100.0, loc_=50),
        _row("sum", "SIMT best rung", "k_fast", 300.0, loc_=70),
        _row("sum", "Triton", "Triton sum", None, passed=False, error="AssertionError: boom"),
        _row("sum", "library", "cupy.sum", 200.0),
        _row("matmul_fp32", "library", "cuBLAS FP32", 50.0, metric="tflops"),
        _row("matmul_fp32", "cuTile Python", "cuTile FP32", 5.0, metric="tflops", loc_=15),
        _row("matmul_tf32", "cuTile Python", "cuTile TF32", 250.0, metric="tflops", loc_=15),
        _row("matmul_tf32", "library", "cuBLAS TF32", 400.0, metric="tflops"),
    ],
    "missing": [
        {"problem": "sum 2^10", "precision": "fp32", "system": "cuda.compute", "why": "cuda.compute not usable"},
        {"problem": "matmul 64³", "precision": "tf32", "system": "SIMT best rung", "why": "FP32 only: no TF32"},
    ],
}


def test_cells_pick_the_fastest_and_say_why():
    lines = {(c["key"]): c for c in tile_table.cells(FIXTURE)}
    s = lines["sum"]["systems"]
    assert s["SIMT best rung"]["impl"] == "k_fast"  # the fastest candidate, not the first
    assert s["Triton"]["why"].startswith("FAILED") and "boom" in s["Triton"]["why"]
    assert s["cuda.compute"]["why"] == "cuda.compute not usable"
    assert s["CUDA Tile C++"]["why"] == "not measured"
    # same title, two precisions: each row gets its own cells
    assert lines["matmul_tf32"]["systems"]["SIMT best rung"]["why"] == "FP32 only: no TF32"
    assert lines["matmul_fp32"]["systems"]["SIMT best rung"]["why"] == "not measured"
    assert lines["matmul_tf32"]["systems"]["cuTile Python"]["impl"] == "cuTile TF32"


def test_render_markdown():
    md = tile_table.render(FIXTURE)
    rows = {ln.split("|")[1].strip() + " " + ln.split("|")[2].strip(): ln for ln in md.splitlines()
            if ln.startswith("| ") and "---" not in ln}
    assert "300 GB/s (1.50×) · 70 lines · k_fast" in rows["sum 2^10 FP32"]
    assert "— FAILED its check: AssertionError: boom" in rows["sum 2^10 FP32"]
    assert "250.0 TFLOP/s (0.62×) · 15 lines · cuTile TF32" in rows["matmul 64³ TF32"]
    assert "5.0 TFLOP/s (0.10×) · 15 lines · cuTile FP32" in rows["matmul 64³ FP32"]
    assert md.count("\n| ") == 1 + 3  # header + one row per problem
    assert md.startswith("On Test GPU")


def test_render_shortens_long_reasons():
    long = "not built in this run (simt_tiles.tilecpp absent: cannot import name 'tilecpp' from 'simt_tiles')"
    assert tile_table._short(long) == "not built in this run"
    assert tile_table._short("FP32 only: Numba SIMT has no tensor-core (TF32) path").endswith("(TF32) path")


def test_committed_table_renders_and_is_in_the_readme():
    path = os.path.join(ROOT, "benchmarks", "results", "tile_table_h200.json")
    with open(path) as fh:
        data = json.load(fh)
    md = tile_table.render(data)
    assert md.count("\n| ") == 1 + len(data["problems"])
    with open(os.path.join(ROOT, "README.md")) as fh:
        readme = fh.read()
    block = readme.split("<!-- tile_table-table:begin -->")[1].split("<!-- tile_table-table:end -->")[0]
    assert md in block
