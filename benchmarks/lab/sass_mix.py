"""The SASS instruction mix of one kernel config, without a GPU: what the H200 will issue.

    python benchmarks/lab/sass_mix.py softmax k04_register_row default [float32] [field=value ...]
    python benchmarks/lab/sass_mix.py conv2d k05_register_tile_2d default float32 kh=7 kw=7 mode=2

Compiles the rung's preset (with ``field=value`` overrides of its config) to PTX for sm_90,
assembles it with the pip ``ptxas`` and disassembles it with the pip ``nvdisasm`` (both from
nvidia-cuda-nvcc), then prints registers and a histogram of opcodes.  Counts are *static*
(instructions in the binary; a loop body counts once), so compare configs whose loops are fully
unrolled, or read the listing (``--sass FILE``).  This is how the index tax was found: softmax k04
had 85 instructions per row value with signed subscripts, 38 with unsigned ones
(benchmarks/notes/patterns.md, "The Numba index tax").  Constant-filter conv rungs compile the preset's gate filter.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["NUMBA_ENABLE_CUDASIM"] = "0"  # the real CUDA target: compile_ptx needs no GPU
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def find_nvdisasm(ptxas: str) -> str:
    path = Path(ptxas).with_name("nvdisasm")
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"nvdisasm: not found beside {ptxas} (pip package nvidia-cuda-nvcc)")
    return str(path)


def opcode(line: str) -> str | None:
    """``/*0120*/  @P0 LDG.E R4, desc[UR4][R2.64] ;`` → ``LDG``."""
    if "/*" not in line or ";" not in line or "*/" not in line:
        return None
    text = line.split("*/", 1)[1].strip()
    if text.startswith("@"):
        text = text.split(None, 1)[1]
    return text.split()[0].split(".")[0].rstrip(";") or None


def loops(sass: str) -> list[tuple[str, list[str]]]:
    """Each backward branch's body: ``(label, instruction lines from the label to the branch)``.
    A branch ``BRA `(.L_x_29)`` below the line ``.L_x_29:`` closes a loop (nvdisasm's labels)."""
    lines = sass.splitlines()
    where, out = {}, []
    for i, line in enumerate(lines):
        text = line.strip()
        if text.startswith(".L") and text.endswith(":"):
            where[text[:-1]] = i
        elif opcode(line) == "BRA" and "`(" in line:
            label = line.split("`(", 1)[1].split(")", 1)[0]
            if label in where:
                out.append((label, [x for x in lines[where[label]:i + 1] if opcode(x)]))
    return out


def main_loop(sass: str, op: str = "HMMA") -> tuple[str, collections.Counter] | None:
    """The loop with the most ``op`` instructions (HMMA, else FFMA) and its opcode histogram: a loop
    body counts once (the static count of one trip through it)."""
    best = None
    for label, body in loops(sass):
        ops = collections.Counter(map(opcode, body))
        if ops[op] and (best is None or ops[op] > best[1][op]):
            best = (label, ops)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ladder")
    p.add_argument("rung")
    p.add_argument("preset")
    p.add_argument("dtype", nargs="?", default="float32")
    p.add_argument("overrides", nargs="*", help="config field=value (integers)")
    p.add_argument("--sass", help="also write the disassembly here")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--loop", action="store_true",
                   help="also the histogram of the loop with the most HMMA (else FFMA): one trip of the main loop")
    args = p.parse_args(argv)
    import numpy as np

    from simt_tiles import compile_gate

    rung = compile_gate.ladders()[args.ladder][args.rung]
    cfg = rung.presets[args.preset]
    if args.overrides:
        fields = {k: int(v) for k, v in (o.split("=", 1) for o in args.overrides)}
        cfg = dataclasses.replace(cfg, **fields)
    rung.presets["_mix"] = cfg
    ptxas = compile_gate.find_ptxas()
    with tempfile.TemporaryDirectory() as tmp:
        from simt_tiles.runtime import storage_dtype  # ("bfloat16": its uint16 bits, as the 16-bit rungs take it)

        row = compile_gate.compile_one(rung, "_mix", storage_dtype(args.dtype), ptxas, Path(tmp), args.ladder)
        if row.error:
            print(f"{args.rung}: {row.error}", file=sys.stderr)
            return 1
        ptx = next(Path(tmp).glob("*.ptx"))
        cubin = Path(tmp) / "k.cubin"
        subprocess.run([ptxas, f"-arch={compile_gate.ARCH}", str(ptx), "-o", str(cubin)], check=True)
        sass = subprocess.run([find_nvdisasm(ptxas), "-c", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    if args.sass:
        Path(args.sass).write_text(sass)
    ops = collections.Counter(op for op in map(opcode, sass.splitlines()) if op)
    print(f"{args.ladder} {args.rung} {args.dtype} {cfg}")
    print(f"registers {row.registers}, shared {row.smem} B, stack {row.stack} B, spills {row.spills}")
    print(f"instructions (static) {sum(ops.values())}:",
          ", ".join(f"{op} {n}" for op, n in ops.most_common(args.top)))
    if args.loop:
        found = main_loop(sass, "HMMA") or main_loop(sass, "FFMA")
        if found is None:
            print("loop: none with HMMA or FFMA")
        else:
            label, lops = found
            key = "HMMA" if lops["HMMA"] else "FFMA"
            total, core = sum(lops.values()), lops[key]
            rest = total - core - lops["LDSM"] - lops["LDS"] - lops["LDGSTS"]
            print(f"loop {label}: {total} instructions, {key} {core} ({total / core:.2f} a {key}; "
                  f"{rest / core:.2f} a {key} not {key}/LDSM/LDS/LDGSTS):",
                  ", ".join(f"{op} {n}" for op, n in lops.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
