"""The GPU-free compile gate: report parsing, and that it fails when it should.

These run the gate in a subprocess with NUMBA_ENABLE_CUDASIM=0 (PTX needs the
real target; no GPU needed) so they coexist with the simulator suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import json
import textwrap

import pytest

from simt_tiles.compile_gate import parse_ptxas

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


def _gate(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)


def test_every_shipped_config_compiles_spill_free():
    proc = _gate("import sys; from simt_tiles.compile_gate import main; sys.exit(main())")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from simt_tiles.kernels.matmul import MATMUL_VARIANTS

    for v in MATMUL_VARIANTS:
        rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("matmul ") and f" {v} " in ln]
        assert len(rows) == 4, proc.stdout  # 2 presets x 2 dtypes


BAD_RUNGS = """
import dataclasses, sys
from pathlib import Path
import numpy as np
from numba import cuda
from simt_tiles import compile_gate
from simt_tiles.runtime import Rung, numba_dtype
from simt_tiles.kernels.matmul import k03_smem_tiled as k03

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

base = k03.RUNG
rows = []
for name, factory in [("shape_expr", shape_expr), ("dynamic_local", dynamic_local)]:
    rung = Rung(name, base.config_type, base.presets, factory, base.geometry, base.signature)
    rows.append(compile_gate.compile_one(rung, "default", np.float32, compile_gate.find_ptxas(), Path("."), "test"))
for r in rows:
    print(r.rung, r.ok, r.error, r.stack, r.spills)
"""


def test_gate_fails_on_gpu_only_compile_errors_and_local_memory(tmp_path):
    proc = _gate(f"import os; os.chdir({str(tmp_path)!r})\n" + BAD_RUNGS)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["shape_expr"].startswith("False TypingError:"), proc.stdout
    assert lines["dynamic_local"].startswith("False None"), proc.stdout


@pytest.mark.parametrize("variant,expect", [("k04_register_row", "(cfg.group, cfg.vpt) == (512, 64)"),
                                             ("k05_split_row", "(cfg.vpt, cfg.reg_vpt) == (180, 84)")])
def test_softmax_largest_float32_fit_does_not_spill(tmp_path, variant, expect):
    """The longest float32 rows each row-in-registers rung takes, compiled: no local memory.

    k04: 32768 columns with max_vpt=64 (512 threads × 64 registers of values); k05 (default):
    46080 columns, 84 values in registers + 96 in shared memory within launch_bounds (256, 2)."""
    proc = _gate(f"""
        import dataclasses, os; os.chdir({str(tmp_path)!r})
        from pathlib import Path
        import numpy as np
        from simt_tiles import compile_gate
        from simt_tiles.kernels.softmax import RUNGS
        rung = RUNGS[{variant!r}]
        preset = rung.presets["default"]
        if {variant!r} == "k04_register_row":
            cfg = dataclasses.replace(preset, max_vpt=64).for_problem(16384, 32768, 4)
        else:
            cfg = preset.for_problem(16384, 46080, 4)
        assert {expect}, cfg
        rung.presets["largest"] = cfg
        r = compile_gate.compile_one(rung, "largest", np.float32, compile_gate.find_ptxas(), Path("."), "t")
        print(r.ok, r.error, r.registers, r.stack, r.spills)
    """)
    assert proc.returncode == 0, proc.stderr
    ok, error, *_ = proc.stdout.split()
    assert (ok, error) == ("True", "None"), proc.stdout


def test_softmax_register_row_loads_share_one_base_address():
    """k04's VPT loads (and stores) of a thread are one base register plus constant offsets.

    With signed subscripts Numba adds a negative-index wraparound to each access and every load
    got its own 64-bit address (85 SASS instructions per value, 47% of the copy on the H200);
    unsigned ones let LLVM fold ``t + i·G`` (38 per value, 96%).  This fails if that regresses."""
    proc = _gate("""
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


def test_sass_mix_prints_the_instruction_histogram():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sass_mix.py"), "softmax",
                           "k04_register_row", "default", "float32", "vpt=16", "group=256"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    head, regs, mix = proc.stdout.strip().splitlines()
    assert "vpt=16" in head and regs.startswith("registers ")
    counts = dict(item.rsplit(" ", 1) for item in mix.split(":", 1)[1].strip().split(", "))
    assert int(counts["LDG"]) == int(counts["STG"]) == 16, mix  # one load and one store per row value


def test_fma_peak_times_an_unrolled_ffma_loop():
    """benchmarks/fma_peak.py's ceiling is only a ceiling if its kernel issues FFMAs: the 16 unrolled
    steps of 8 chains must be 128 FFMAs with a handful of other instructions around them (a
    Python ``range`` of int64 put ~4 integer instructions beside every 8 FFMAs and halved the rate)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "fma_peak.py"), "--sass-mix"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    mix = json.loads(proc.stdout)
    assert mix["FFMA"] == 128, mix
    integer = sum(n for op, n in mix.items() if op.startswith(("I", "LEA", "LOP", "SHF")))
    assert integer <= 16, mix  # prologue and epilogue only: none per loop trip beyond the counter
