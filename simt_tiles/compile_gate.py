"""GPU-free compile gate: every shipped config of every kernel → PTX (sm_90) → ptxas.

The simulator runs kernels as Python, so it accepts code the GPU compiler
rejects (a shared-array shape written ``T + 1``, a local array indexed at run
time that lands in local memory...).  This gate compiles each rung's presets
for both dtypes with ``cuda.compile_ptx(..., cc=(9, 0))`` and assembles the
PTX with the pip ``ptxas`` of the same CUDA 13.x (``-arch=sm_90 -v``).  It
fails when a kernel does not compile or when a rung declared spill-free
uses local memory (spill bytes or a stack frame), and prints registers, shared memory and spill bytes per config.

Must run with the real CUDA target loaded (``NUMBA_ENABLE_CUDASIM=0``); no
GPU is needed.  ``python -m simt_tiles compile-gate`` arranges that.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .runtime import SIMULATOR, Rung

#: options of ``cuda.jit`` that ``compile_ptx`` also understands
_PTX_OPTIONS = ("lineinfo", "fastmath", "launch_bounds", "opt", "debug")
CC = (9, 0)
ARCH = "sm_90"


@dataclasses.dataclass
class GateRow:
    ladder: str
    rung: str
    preset: str
    dtype: str
    config: str
    registers: int | None = None
    smem: int | None = None
    stack: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    error: str | None = None
    spill_free: bool = True
    #: shared-memory load instructions in the PTX, and how many are 128/64-bit wide
    lds: int | None = None
    lds_wide: int | None = None

    @property
    def spills(self) -> int:
        return (self.spill_stores or 0) + (self.spill_loads or 0)

    @property
    def ok(self) -> bool:
        # a spill-free rung may use no local memory at all: no spills, no stack frame
        # (a register array indexed at run time lands in the stack frame)
        return self.error is None and not (self.spill_free and (self.spills or self.stack))


def ladders() -> dict[str, dict[str, Rung]]:
    """Every ladder's rungs, by ladder name (from :mod:`simt_tiles.registry`)."""
    from .registry import ladders as registry_ladders

    return registry_ladders()


def find_ptxas() -> str:
    """The pip ``ptxas`` (package nvidia-cuda-nvcc), else one on PATH."""
    candidates = []
    try:
        import nvidia  # namespace package of the pip CUDA wheels

        for root in nvidia.__path__:
            candidates += sorted(Path(root).glob("cu*/bin/ptxas"))
            candidates += sorted(Path(root).glob("cuda_nvcc/bin/ptxas"))
    except ImportError:
        pass
    for c in candidates:
        if os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("ptxas")
    if found:
        return found
    raise FileNotFoundError(
        "ptxas: not found; install the pip package nvidia-cuda-nvcc "
        "(the same CUDA 13.x as numba-cuda's NVVM)"
    )


_RE_REGS = re.compile(r"Used (\d+) registers")
_RE_SMEM = re.compile(r"(\d+) bytes smem")
_RE_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(report: str) -> dict[str, int]:
    """Registers, shared memory, stack frame and spill bytes from ``ptxas -v``."""
    regs = _RE_REGS.search(report)
    frame = _RE_FRAME.search(report)
    if not regs or not frame:
        raise ValueError(f"unrecognised ptxas report:\n{report}")
    smem = _RE_SMEM.search(report)
    return {
        "registers": int(regs.group(1)),
        "smem": int(smem.group(1)) if smem else 0,
        "stack": int(frame.group(1)),
        "spill_stores": int(frame.group(2)),
        "spill_loads": int(frame.group(3)),
    }


def compile_one(rung: Rung, preset: str, dtype, ptxas: str, workdir: Path, ladder: str,
                params: dict | None = None) -> GateRow:
    from numba import cuda

    cfg = rung.presets[preset]
    dtype = np.dtype(dtype)
    params = params or {}
    name = rung.name + "".join(f" {k}={_param_text(v)}" for k, v in params.items())
    row = GateRow(ladder, name, preset, dtype.name, _short(cfg), spill_free=rung.spill_free)
    options = rung.jit_options(cfg, dtype)
    ptx_opts = {k: v for k, v in options.items() if k in _PTX_OPTIONS}
    try:
        cfg.check_smem(dtype)
        ptx, _ = cuda.compile_ptx(rung.factory(cfg, dtype, **params), rung.signature(dtype, **params),
                                  cc=CC, **ptx_opts)
    except Exception as exc:  # the point of the gate: report, don't crash
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        row.error = f"{type(exc).__name__}: " + " | ".join(lines[:2])[:240]
        return row
    row.lds = len(re.findall(r"\bld\.shared\.", ptx))
    row.lds_wide = len(re.findall(r"\bld\.shared\.v[24]\.", ptx))
    path = workdir / f"{name.replace(' ', '_')}-{preset}-{dtype.name}.ptx"
    path.write_text(ptx)
    cmd = [ptxas, f"-arch={ARCH}", "-v", str(path), "-o", os.devnull]
    if "max_registers" in options:
        cmd.insert(1, f"-maxrregcount={options['max_registers']}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        row.error = f"ptxas: {proc.stderr.strip().splitlines()[-1][:200]}"
        return row
    for key, value in parse_ptxas(proc.stderr + proc.stdout).items():
        setattr(row, key, value)
    return row


def _param_text(v) -> str:
    return np.dtype(v).name if isinstance(v, (type, np.dtype)) else str(v)


def _short(cfg) -> str:
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))


def run_gate(out=sys.stdout) -> list[GateRow]:
    if SIMULATOR:
        raise RuntimeError(
            "compile gate: Numba's simulator is loaded; run with NUMBA_ENABLE_CUDASIM=0 "
            "(python -m simt_tiles compile-gate does)"
        )
    ptxas = find_ptxas()
    rows: list[GateRow] = []
    with tempfile.TemporaryDirectory(prefix="simt-tiles-ptx-") as tmp:
        for ladder, rungs in ladders().items():
            for rung in rungs.values():
                for preset in rung.presets:
                    for dtype in (np.float32, np.float64):
                        if preset.endswith("_float32") and dtype is not np.float32:
                            continue  # a float32-only preset (its float64 tiles would not fit)
                        for params in rung.gate_params:
                            rows.append(compile_one(rung, preset, dtype, ptxas, Path(tmp), ladder, params))
    print(format_table(rows, ptxas), file=out)
    return rows


def format_table(rows: list[GateRow], ptxas: str = "") -> str:
    from ._table import render

    head = ["ladder", "kernel", "preset", "dtype", "config", "regs", "smem B", "stack B", "spill B",
            "ld.shared (wide)", "status"]
    body = []
    for r in rows:
        status = "ok" if r.ok else ("FAIL: " + (r.error or f"local memory: {r.stack} B stack, {r.spills} B spills (declared spill-free)"))
        body.append([
            r.ladder, r.rung, r.preset, r.dtype, r.config,
            _n(r.registers), _n(r.smem), _n(r.stack),
            "-" if r.error else str(r.spills),
            "-" if r.lds is None else f"{r.lds} ({r.lds_wide})", status,
        ])
    title = f"compile gate: PTX for sm_{CC[0]}{CC[1]} assembled by {ptxas or 'ptxas'}"
    return title + "\n" + render(head, body)


def _n(v) -> str:
    return "-" if v is None else str(v)


def main() -> int:
    rows = run_gate()
    bad = [r for r in rows if not r.ok]
    print(f"compile gate: {len(rows) - len(bad)} of {len(rows)} configs ok")
    return 1 if bad else 0
