"""The GPU-free compile gate: report parsing, and that it fails when it should.

These run the gate in a subprocess with NUMBA_ENABLE_CUDASIM=0 (PTX needs the
real target; no GPU needed) so they coexist with the simulator suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import json

import pytest

from simt_tiles import compile_gate
from simt_tiles.compile_gate import _first_error, parse_ptxas, release_for_isa

from .gate_subprocess import ROOT, run_real_target
from .profiles import PROFILE

REPORT = """\
ptxas info    : 8 bytes gmem
ptxas info    : Compiling entry function '_Z3k03' for 'sm_90'
ptxas info    : Function properties for _Z3k03
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 384 bytes cmem[0]
"""


def test_parse_ptxas():
    assert parse_ptxas(REPORT) == {"registers": 40, "smem": 8192, "stack": 16, "spill_stores": 8, "spill_loads": 12}


def test_parse_ptxas_rejects_garbage():
    with pytest.raises(ValueError, match="unrecognised ptxas report"):
        parse_ptxas("hello")


NVJITLINK_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3k07' for 'sm_90'
ptxas info    : Function properties for _Z3k07
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 142 registers, used 1 barriers
info    : used 142 registers, used 1 barriers, 0 stack, 9344 bytes smem, 744 bytes cmem[0], 0 bytes lmem
ptxas info    : 8320 bytes smem (the cubin's static)
"""


def test_parse_nvjitlink_log_takes_the_cubins_static_shared_memory():
    """nvJitLink's link summary counts the 1 KiB sm_90 reserves per block; the gate appends the
    cubin's own figure last, and that is the one parsed."""
    assert parse_ptxas(NVJITLINK_LOG) == {"registers": 142, "smem": 8320, "stack": 0, "spill_stores": 0,
                                          "spill_loads": 0}


def test_first_error_line_is_the_cause_not_the_summary():
    log = ("ptxas application ptx input, line 9; fatal   : Unsupported .version 9.5; current version is '9.0'\n"
           "ptxas fatal   : Ptx assembly aborted due to errors\n")
    assert _first_error(log).endswith("Unsupported .version 9.5; current version is '9.0'")


def test_release_for_isa():
    assert release_for_isa((9, 5)) == (13, 5) and release_for_isa((9, 0)) == (13, 0)
    assert release_for_isa((8, 8)) == (12, 9) and release_for_isa((8, 5)) == (12, 5)


GATE_LOG = os.environ.get("SIMT_TILES_GATE_LOG")


def test_every_shipped_config_compiles_spill_free():
    """The whole gate (scripts/test runs it once before pytest and points SIMT_TILES_GATE_LOG at its
    output; anywhere else this runs it): it passes, and each matmul rung has its 4 rows."""
    if GATE_LOG:
        with open(GATE_LOG) as f:
            out = f.read()
    else:
        proc = run_real_target(args=["-m", "simt_tiles", "compile-gate"])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = proc.stdout
    from simt_tiles.kernels.matmul import RUNGS
    from simt_tiles.registry import ladders

    from simt_tiles.compile_gate import jobs

    total = len(jobs())  # every row, or the quick gate's (SIMT_TILES_GATE_QUICK: compile_gate.quick_skips)
    gated = lambda lad, r: sum(1 for p in r.presets for d in ("float32", "float64", "float16", "bfloat16")  # noqa: E731
                               if r.gate.builds(p, d) and not compile_gate.quick_skips(lad, p))
    forms = lambda r: sum(1 for p in r.gate.params if not compile_gate.quick_skips_params(p))  # noqa: E731
    assert total == sum(forms(r) * gated(lad, r) for lad, rs in ladders().items() for r in rs.values())
    assert f"compile gate: {total} of {total} configs ok" in out, out[-3000:]
    for v, r in RUNGS.items():
        rows = [ln for ln in out.splitlines() if ln.startswith("matmul ") and f" {v} " in ln]
        # each preset x its gated dtypes (both, but k12's float64 kernel is k11's)
        assert len(rows) == forms(r) * gated("matmul", r) and all("  ok  " in r for r in rows), out


def test_the_quick_gate_builds_every_preset_a_gpu_user_runs(monkeypatch):
    """The quick gate (CI) leaves only the simulator tests' "sim" and "sim_*" presets and the ``slices=True``
    forms to the full one, and of the slow ladders it builds the "sim" preset alone; the full gate builds every
    row."""
    from simt_tiles.compile_gate import jobs

    monkeypatch.setenv("SIMT_TILES_GATE_QUICK", "0")
    full = {(j.ladder, j.rung, j.preset, j.dtype, j.params) for j in jobs()}
    monkeypatch.setenv("SIMT_TILES_GATE_QUICK", "1")
    quick = {(j.ladder, j.rung, j.preset, j.dtype, j.params) for j in jobs()}
    assert quick < full
    slow = compile_gate.SLOW_LADDERS
    sim = {j for j in full if j[0] not in slow and (j[2] == "sim" or j[2].startswith("sim_"))}
    slices = {j for j in full if j[0] not in slow and dict(j[4]).get("slices")}
    assert {j for j in full - quick if j[0] not in slow} == sim | slices
    assert len(sim) > len({j for j in sim if j[2] == "sim"}) and slices - sim
    assert {j for j in quick if j[0] in slow} == {j for j in full if j[0] in slow and j[2] == "sim"}


def test_a_rungs_gate_says_what_the_gate_builds(monkeypatch):
    """``Rung.gate`` (a :class:`~simt_tiles.runtime.Gate`) alone decides the rows: k11's small tiles
    in float32 only, k12 and k13 in float32 only, k14 once per precision, a default gate both dtypes;
    and no gate setting is left on :class:`~simt_tiles.runtime.Rung` itself."""
    import dataclasses

    from simt_tiles.compile_gate import jobs
    from simt_tiles.runtime import Gate, Rung

    assert not {f.name for f in dataclasses.fields(Rung)} & {*(f.name for f in dataclasses.fields(Gate)),
                                                              "gate_params", "gate_dtypes", "gate_float32_only"}
    assert Gate().builds("default", "float64") and not Gate().builds("big_float32", "float64")
    assert not Gate(float32_only=("64x64",)).builds("64x64", "float64") and Gate().builds("64x64", "float64")
    assert not Gate(dtypes=("float32",)).builds("default", "float64")
    monkeypatch.setenv("SIMT_TILES_GATE_QUICK", "0")
    rows = {(j.rung, j.preset, j.dtype, j.params) for j in jobs(["matmul", "matmul_mma"])}
    k11 = {(p, d) for r, p, d, _ in rows if r == "k11_generated_split_k"}
    assert ("64x64", "float32") in k11 and ("64x64", "float64") not in k11 and ("default", "float64") in k11
    assert {d for r, _, d, _ in rows if r in ("k12_async_copy", "k13_mma_tf32", "k14_mma_bf16")} == {"float32"}
    assert {dict(q)["precision"] for r, p, _, q in rows if r == "k14_mma_bf16" and p == "default"} == {"bf16", "fp16"}


FAKE_PTXAS = """#!/bin/sh
# a ptxas from an older CUDA than the NVVM that writes the PTX
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release {release}, V{release}.0"; exit 0; fi
echo "ptxas application ptx input, line 9; fatal   : Unsupported .version 9.5; current version is '9.0'" >&2
echo "ptxas fatal   : Ptx assembly aborted due to errors" >&2
exit 255
"""


def _fake_ptxas(tmp_path, release: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ptxas"
    fake.write_text(FAKE_PTXAS.format(release=release))
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_gate_refuses_a_too_old_ptxas_saying_what_to_install(tmp_path):
    """An old ptxas first on PATH, asked for: refused before any row, naming the PTX version, the
    release found and needed, and what to install (not 149 rows of "aborted due to errors")."""
    proc = run_real_target(args=["-m", "simt_tiles", "compile-gate", "--ptxas", "ptxas", "--variant", "k01_naive"],
                           env=_fake_ptxas(tmp_path, "12.0"))  # older than any CUDA 13 NVVM's PTX
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "PTX .version 9." in err and "CUDA 12.0" in err and "too old" in err, err
    assert "pip install 'nvidia-nvjitlink==" in err and "nvidia-cuda-nvcc==" in err, err
    assert "configs ok" not in proc.stdout, proc.stdout


def test_gate_reports_the_first_error_line_of_a_failing_assembler(tmp_path):
    """A ptxas that claims a new enough release but fails: the refusal quotes the cause line."""
    proc = run_real_target(args=["-m", "simt_tiles", "compile-gate", "--ptxas", "ptxas", "--variant", "k01_naive"],
                           env=_fake_ptxas(tmp_path, "99.9"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Unsupported .version 9.5; current version is '9.0'" in proc.stderr, proc.stderr
    assert "aborted due to errors" not in proc.stderr, proc.stderr


def test_gate_by_default_ignores_an_old_ptxas_on_path(tmp_path):
    """The issue's case (a system ptxas 13.0 first on PATH, PTX from NVVM 13.5): the default
    assembler is nvJitLink of numba-cuda's toolkit, so the gate passes, streaming its rows."""
    proc = run_real_target(args=["-m", "simt_tiles", "compile-gate", "--ladder", "elementwise",
                                 "--variant", "k01_grid_stride", "-j", "1"], env=_fake_ptxas(tmp_path, "12.0"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = 2 if compile_gate.quick() else 4  # the quick gate (scripts/test) leaves the "sim" preset out
    assert "assembled by nvJitLink" in proc.stdout and f"compile gate: {rows} of {rows} configs ok" in proc.stdout, \
        proc.stdout


def test_gate_rejects_unknown_filters():
    proc = run_real_target(args=["-m", "simt_tiles", "compile-gate", "--ladder", "matmull"])
    assert proc.returncode == 2 and "ladder: expected some of" in proc.stderr and "matmull" in proc.stderr, proc.stderr


BAD_RUNGS = """
import dataclasses, sys
from pathlib import Path
import numpy as np
from numba import cuda
from simt_tiles import compile_gate
from simt_tiles.runtime import Gate, numba_dtype
from simt_tiles.kernels.matmul import k03_smem_tiled as k03, k07_padded as k07
from simt_tiles.kernels.matmul._transposed import make_transposed_kernel

def shape_expr(cfg, dtype):
    T = cfg.tile; DT = numba_dtype(dtype)
    def k(a, b, c):
        s = cuda.shared.array((T, T + 1), DT)   # fine in the simulator, rejected on the GPU
        s[0, 0] = a[0, 0]
        c[0, 0] = s[0, 0]
    return k

def dynamic_local(cfg, dtype):
    DT = numba_dtype(dtype)
    def k(a, b, c):
        acc = cuda.local.array(64, DT)          # indexed at run time: local memory
        for i in range(64):
            acc[i] = a[0, i % a.shape[1]]
        c[0, 0] = acc[int(b[0, 0]) % 64]
    return k

def k07_unpadded(cfg, dtype):                   # k07 with its padding removed (k06's width)
    return make_transposed_kernel(cfg, dtype, cfg.bm, False, "matmul_k07_unpadded")

items = [(dataclasses.replace(k03.RUNG, name="shape_expr", factory=shape_expr), "default"),
         (dataclasses.replace(k03.RUNG, name="dynamic_local", factory=dynamic_local), "default"),
         (dataclasses.replace(k07.RUNG, name="k07_unpadded", factory=k07_unpadded), "default"),
         (dataclasses.replace(k07.RUNG, name="k07_unpadded_excused", factory=k07_unpadded,
                              gate=Gate(smem_exception="test: declared with its padding")), "default")]
rows = compile_gate.compile_configs([(r, p, r.presets[p], np.float32) for r, p in items], "test")
for r in rows:
    print(r.rung, r.ok, r.problem)
"""


def test_gate_fails_on_gpu_only_compile_errors_local_memory_and_undeclared_shared_memory(tmp_path):
    proc = run_real_target(BAD_RUNGS, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["shape_expr"].startswith("False TypingError:"), proc.stdout
    assert lines["dynamic_local"].startswith("False local memory:"), proc.stdout
    # 128·(8 + 4)·4 + 8·128·4 declared; k06's width assembles to 8192 B
    assert lines["k07_unpadded"] == ("False static shared memory: the assembler reports 8192 B, the config "
                                     "declares 8320 B (smem_bytes)"), proc.stdout
    assert lines["k07_unpadded_excused"] == "True None", proc.stdout


@pytest.mark.parametrize("variant,expect", [("k04_register_row", "(cfg.group, cfg.vpt) == (512, 64)"),
                                             ("k05_split_row", "(cfg.vpt, cfg.reg_vpt) == (180, 84)"),
                                             ("k05_one_per_sm", "(cfg.vpt, cfg.reg_vpt) == (184, 84)"),
                                             ("k05_split_row bfloat16", "(cfg.vpt, cfg.reg_vpt) == (178, 82)")])
def test_softmax_largest_float32_fit_does_not_spill(tmp_path, variant, expect):
    """The longest float32 rows each row-in-registers rung takes, compiled: no local memory.

    k04: 32768 columns with max_vpt=64 (512 threads × 64 registers of values); k05 (default):
    46080 columns, 84 values in registers + 96 in shared memory within launch_bounds (256, 2); k05's
    one_per_sm preset: 94208 columns, 512 threads × (84 + 100) within launch_bounds (512, 1).
    bfloat16 (its store conversion spilled 12 bytes at 84 values): k05's 16-bit fit, 45568 columns,
    82 + 96 (one_per_sm's 82 + 100 and float16's were checked once: no spill, benchmarks/notes/patterns.md)."""
    dtype = "bfloat16" if variant.endswith("bfloat16") else "float32"
    variant = variant.split()[0]
    cols = {"float32": 46080, "bfloat16": 45568}[dtype]
    proc = run_real_target(f"""
        import dataclasses, os; os.chdir({str(tmp_path)!r})
        from pathlib import Path
        import numpy as np
        from simt_tiles import compile_gate
        from simt_tiles.kernels.softmax import RUNGS
        rung = RUNGS[{variant!r}.replace("k05_one_per_sm", "k05_split_row")]
        if {variant!r} == "k04_register_row":
            cfg = dataclasses.replace(rung.presets["default"], max_vpt=64).for_problem(16384, 32768, 4)
        elif {variant!r} == "k05_split_row":
            cfg = rung.presets["default"].for_problem(16384, {cols}, {2 if dtype == "bfloat16" else 4})
        else:
            cfg = rung.presets["one_per_sm"].for_problem(4096, 94208, 4)
        assert {expect}, cfg
        r, = compile_gate.compile_configs([(rung, "largest", cfg, {dtype!r})], "t")
        print(r.ok, r.error, r.registers, r.stack, r.spills)
        # log_softmax too: its shift and NaN rule's registers (notes/patterns_zoo.md)
        r = compile_gate.compile_one(dataclasses.replace(rung, presets={{"largest": cfg}}), "largest", {dtype!r},
                                     compile_gate.find_assembler(), params={{"log": True}})
        print(r.ok, r.error, r.registers, r.stack, r.spills)
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    for line in lines:
        ok, error, *_ = line.split()
        assert (ok, error) == ("True", "None"), proc.stdout
    assert len(lines) == 2, proc.stdout


def test_softmax_register_row_loads_share_one_base_address():
    """k04's VPT loads (and stores) of a thread are one base register plus constant offsets.

    With signed subscripts Numba adds a negative-index wraparound to each access and every load
    got its own 64-bit address (85 SASS instructions per value, 47% of the copy on the H200);
    unsigned ones let LLVM fold ``t + i·G`` (38 per value, 96%).  This fails if that regresses."""
    proc = run_real_target("""
        import re
        from collections import Counter
        import numpy as np
        from numba import cuda
        from simt_tiles.kernels.softmax import RUNGS
        rung = RUNGS["k04_register_row"]
        cfg = rung.presets["default"].for_problem(16384, 16384, 4)
        ptx, _ = cuda.compile_ptx(rung.factory(cfg, np.float32), rung.signature(np.float32), cc=(9, 0))
        for op in ("ld", "st"):
            bases = re.findall(rf"\\b{op}\\.global\\.f32\\s+[^;]*?\\[(%rd\\d+)(?:\\+\\d+)?\\]", ptx)
            top = Counter(bases).most_common(1)[0][1] if bases else 0
            print(op, cfg.vpt, len(bases), top)
    """)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.strip().splitlines()]
    for op, vpt, n, top in rows:
        assert int(n) == int(vpt) and int(top) == int(vpt), f"{op}: {n} accesses, {top} on the commonest base"


def test_softmax_k08_vec_issues_wide_accesses_without_spills():
    """k08's ``vec`` knob (16-bit values a load, off in the presets) compiles to one 4- or 16-byte load and store
    a vector in both 16-bit dtypes (scalar 2-byte accesses remain for a row's head and tail only), converts pairs
    with one ``cvt.rn.*x2.f32``, and assembles spill-free (benchmarks/notes/patterns.md, "paired loads")."""
    proc = run_real_target("""
        import dataclasses, re
        from numba import cuda
        from simt_tiles import compile_gate
        from simt_tiles.kernels.softmax import RUNGS
        from simt_tiles.runtime import storage_dtype
        rung = RUNGS["k08_ticket_queue"]
        for vec, loads, wide in ((2, 8, "u32"), (8, 2, "v4.u32")):
            for dt in ("float16", "bfloat16"):
                cfg = dataclasses.replace(rung.presets["default"], vec=vec, loads=loads)
                ptx, _ = cuda.compile_ptx(rung.factory(cfg, storage_dtype(dt)), rung.signature(storage_dtype(dt)),
                                          cc=(9, 0))
                kind = "bf16" if dt == "bfloat16" else "f16"
                print(vec, dt, len(re.findall(rf"\\bld\\.global\\.{re.escape(wide)}\\b", ptx)),
                      len(re.findall(rf"\\bst\\.global\\.{re.escape(wide)}\\b", ptx)),
                      len(re.findall(rf"\\bcvt\\.rn\\.{kind}x2\\.f32\\b", ptx)), loads)
        cfg = dataclasses.replace(rung.presets["default"], vec=8, loads=2)
        r, = compile_gate.compile_configs([(rung, "vec8", cfg, "bfloat16")], "t")
        print("gate", r.ok, r.error, r.stack, r.spills)
    """)
    assert proc.returncode == 0, proc.stderr
    *rows, gate = proc.stdout.strip().splitlines()
    assert gate.split() == ["gate", "True", "None", "0", "0"], proc.stdout
    assert len(rows) == 4, proc.stdout
    for row in rows:
        vec, dt, loads_wide, stores_wide, cvt2, loads = row.split()
        # a step's loads in the fold and the reread, its stores; a pair converted per word stored
        assert int(loads_wide) == 2 * int(loads) and int(stores_wide) == int(loads), row
        assert int(cvt2) == int(loads) * int(vec) // 2, row


def test_sass_mix_prints_the_instruction_histogram():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "lab", "sass_mix.py"), "softmax",
                           "k04_register_row", "default", "float32", "vpt=16", "group=256"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    head, regs, mix = proc.stdout.strip().splitlines()
    assert "vpt=16" in head and regs.startswith("registers ")
    counts = dict(item.rsplit(" ", 1) for item in mix.split(":", 1)[1].strip().split(", "))
    assert int(counts["LDG"]) == int(counts["STG"]) == 16, mix  # one load and one store per row value


def test_fma_peak_times_an_unrolled_ffma_loop():
    """benchmarks/lab/fma_peak.py's ceiling is only a ceiling if its kernel issues FFMAs: the 16 unrolled
    steps of 8 chains must be 128 FFMAs with a handful of other instructions around them (a
    Python ``range`` of int64 put ~4 integer instructions beside every 8 FFMAs and halved the rate)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "lab", "fma_peak.py"), "--sass-mix"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    mix = json.loads(proc.stdout)
    assert mix["FFMA"] == 128, mix
    integer = sum(n for op, n in mix.items() if op.startswith(("I", "LEA", "LOP", "SHF")))
    assert integer <= 16, mix  # prologue and epilogue only: none per loop trip beyond the counter


def test_inliner_block_copies_share_a_memo():
    """simt_tiles._numba_fixes: the inliner's block copies share one memo per copy (one scope copy)
    and a block copied again starts a fresh copy (numba-cuda's inliner checked to be the one patched)."""
    proc = run_real_target("""
        import copy
        from numba.cuda.core import inline_closurecall as IC
        from numba.cuda.core import ir
        from simt_tiles import _numba_fixes
        assert IC.copy is copy
        _numba_fixes.apply()
        assert isinstance(IC.copy, _numba_fixes._BlockCopies), "numba-cuda's inliner changed: review _numba_fixes"
        loc = ir.Loc("f", 1)
        scope = ir.Scope(None, loc)
        x = scope.define("x", loc)
        a, b = ir.Block(scope, loc), ir.Block(scope, loc)
        a.append(ir.Assign(ir.Const(1, loc), x, loc))
        b.append(ir.Assign(ir.Const(2, loc), x, loc))
        a1, b1 = IC.copy.deepcopy(a), IC.copy.deepcopy(b)  # one IR's blocks: one scope copy
        assert a1.scope is b1.scope and a1.scope is not scope and a1.body[0].target.scope is a1.scope
        a2 = IC.copy.deepcopy(a)  # the same callee again: a fresh copy
        assert a2 is not a1 and a2.scope is not a1.scope
        print("ok")
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-1] == "ok", proc.stdout


@pytest.mark.skipif(PROFILE == "ci", reason="ci budget (two conv compilations, ~16 s): the full and gpu profiles run it")
def test_inliner_block_copies_give_the_same_ptx():
    """simt_tiles._numba_fixes: a conv rung that inlines its helpers dozens of times compiles to the
    same PTX with the fixed block copies as with numba-cuda's own copy."""
    proc = run_real_target("""
        import copy
        import re
        import numpy as np
        from numba import cuda
        from numba.cuda.core import inline_closurecall as IC
        from simt_tiles import _numba_fixes
        _numba_fixes.apply()
        from simt_tiles.kernels.conv2d import RUNGS
        from simt_tiles.kernels.conv2d._common import Mode, specialise
        rung = RUNGS["k08_prefetched"]
        cfg = specialise(rung.presets["sim"], 5, 4, Mode.MIRROR)
        def ptx():  # each compilation numbers its symbols anew: named by order of first use
            text = cuda.compile_ptx(rung.factory(cfg, np.float32), rung.signature(np.float32), cc=(9, 0))[0]
            names = {}
            return re.sub(r"_ZN\\w+|_cudapy_smem_\\d+", lambda m: names.setdefault(m.group(), f"sym{len(names)}"), text)
        fixed = ptx()
        IC.copy = copy
        print("same" if ptx() == fixed else "DIFFERENT")
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-1] == "same", proc.stdout


def test_linear_single_assignment_scan_matches_numbas():
    """simt_tiles._numba_fixes (applied by the gate: generated rungs compile 24–35% faster) computes
    the same singly-assigned variables as numba-cuda's own quadratic scan, on every function the
    lowering of a loop-tiled kernel sees (both run on the same lowering object)."""
    proc = run_real_target("""
        import numpy as np
        from numba import cuda
        from numba.cuda import lowering as L
        from simt_tiles import _numba_fixes
        from simt_tiles.kernels.matmul import RUNGS
        original = L.Lower._find_singly_assigned_variable
        assert _numba_fixes.apply(), "numba-cuda's scan changed: review simt_tiles/_numba_fixes.py"
        linear = L.Lower._find_singly_assigned_variable
        seen = []
        def both(self):
            original(self)
            theirs = set(self._singly_assigned_vars)
            linear(self)
            seen.append((theirs == self._singly_assigned_vars, len(theirs), len(self._singly_assigned_vars)))
        L.Lower._find_singly_assigned_variable = both
        rung = RUNGS["k05_regblock_2d"]
        cuda.compile_ptx(rung.factory(rung.presets["sim"], np.float32), rung.signature(np.float32), cc=(9, 0))
        print(len(seen), all(s[0] for s in seen), sum(s[1] for s in seen), seen)
    """)
    assert proc.returncode == 0, proc.stderr
    functions, same, singly, _ = proc.stdout.split(None, 3)
    assert int(functions) >= 1 and int(singly) > 0, proc.stdout
    assert same == "True", proc.stdout


def test_live_map_matches_numbas_on_a_compile():
    """simt_tiles._numba_fixes' liveness map (session 38: a generated matmul's compile 11.5 → 8.4 s)
    is numba-cuda's ``compute_live_map``, the same dict of the same sets, on every call a loop-tiled
    kernel's compile makes (both run on the same inputs; numba-cuda's result is the one used)."""
    proc = run_real_target("""
        import numpy as np
        from numba import cuda
        from numba.cuda.core import analysis
        from simt_tiles import _numba_fixes
        _numba_fixes.apply()
        assert _numba_fixes._LIVE_MAP_ORIGINAL, "numba-cuda's liveness changed: review simt_tiles/_numba_fixes.py"
        original, fixed = _numba_fixes._LIVE_MAP_ORIGINAL[0], analysis.compute_live_map
        assert fixed is _numba_fixes.compute_live_map
        seen = []
        def both(cfg, blocks, use, defs):
            theirs = original(cfg, blocks, use, defs)
            ours = _numba_fixes._live_map(cfg, blocks, use, defs)
            seen.append((ours == theirs and list(ours) == list(theirs), sum(map(len, theirs.values()))))
            return theirs
        analysis.compute_live_map = both
        from simt_tiles.kernels.matmul import RUNGS
        rung = RUNGS["k05_regblock_2d"]
        cuda.compile_ptx(rung.factory(rung.presets["sim"], np.float32), rung.signature(np.float32), cc=(9, 0))
        print(len(seen), all(s[0] for s in seen), sum(s[1] for s in seen))
    """)
    assert proc.returncode == 0, proc.stderr
    calls, same, live = proc.stdout.split()
    assert int(calls) >= 2 and int(live) > 0, proc.stdout
    assert same == "True", proc.stdout


@pytest.mark.parametrize("problem", ["inner", "split rows", "rows", "long rows"])
def test_reduce_passes_fit_their_launch_bounds_without_spills(tmp_path, problem):
    """The dispatch's k03 passes under their launch bounds, every op, both dtypes: no local memory, and the
    bound reached ptxas (its registers: ≤ 85 for 3 blocks of 256 per SM, ≤ 64 for 4; unbounded ~100).
    inner: 4096² axis 0 (the split pass and the pass over its partials), ``inner_min_threads`` (3 blocks;
    4 spilled 72–172 bytes in argmax's first pass); split rows: 2 rows of 2^27 (a block's warps a row), 3
    blocks (4 spilled in float32 sum and argmax); rows: 65536 rows of 256 (a warp a row), ``row_min_threads``
    (4 blocks), float64 argmax/argmin unbounded (4 spilled 92 bytes); long rows: 65536 rows of 1000 (as rows,
    ``row_loads`` a step)."""
    shape, axes = {"inner": ((4096, 4096), (0,)), "split rows": ((2, 2**27), (1,)),
                   "rows": ((65536, 256), (1,)), "long rows": ((65536, 1000), (1,))}[problem]
    # ci: the ops that spilled (sum, argmax); max/min and argmin share their code with a flipped compare
    ops = ("sum", "argmax") if PROFILE == "ci" else ("sum", "max", "min", "argmax", "argmin")
    proc = run_real_target(f"""
        import dataclasses, os; os.chdir({str(tmp_path)!r})
        import numpy as np
        from simt_tiles import compile_gate
        from simt_tiles.kernels.reduce import dispatch
        from simt_tiles.kernels.reduce._common import SUM, MAX, MIN, ARGMAX, ARGMIN
        asm = compile_gate.find_assembler()
        for dt in (np.float32, np.float64):
            for op, code in (("sum", SUM), ("max", MAX), ("min", MIN), ("argmax", ARGMAX), ("argmin", ARGMIN)):
                if op not in {ops!r}:
                    continue
                p = dispatch.plan({shape!r}, {axes!r}, op, code, dt, sms=132, min_steps=4)
                for k, st in enumerate(p.steps):
                    src = dt if st.src == "x" else (np.float64 if op == "sum" else dt)
                    r = compile_gate.compile_one(dataclasses.replace(p.rung, presets={{"x": st.config}}), "x", src,
                                                 asm, params=dict(st.params))
                    print(np.dtype(dt).name, op, k, st.config.min_blocks, st.config.loads, r.ok, r.error, r.registers,
                          r.stack, r.spills)
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    steps = {"inner": 2, "split rows": 2, "rows": 1, "long rows": 1}[problem]  # passes a plan takes
    assert len(lines) == steps * len(ops) * 2, proc.stdout
    rows = problem.endswith("rows") and problem != "split rows"
    for line in lines:
        dt, op, _, blocks, loads, *compiled = line.split()
        want = 1 if rows and dt == "float64" and op.startswith("arg") else (4 if rows else 3)
        assert int(blocks) == want, line
        assert int(loads) == (4 if problem == "long rows" else 8), line
        assert compiled[:2] == ["True", "None"] and int(compiled[2]) <= min(255, 65536 // (256 * want)), proc.stdout


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_a_bad_jobs_count_is_a_usage_error(jobs, capsys):
    """``-j 0``: argparse's error and exit 2, as every other bad argument (it was SystemExit's exit 1)."""
    from simt_tiles.compile_gate import main

    with pytest.raises(SystemExit) as exit_:
        main(["-j", jobs])
    assert exit_.value.code == 2 and "expected an integer >= 1" in capsys.readouterr().err
