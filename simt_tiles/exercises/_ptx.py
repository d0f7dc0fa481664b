"""Compile a student's kernels to sm_90 PTX with Numba's real CUDA compiler (no GPU needed).

The simulator runs kernels as plain Python, so code that Numba cannot compile for a GPU (a
Python list, a NumPy call, an f-string) would pass there. ``check`` therefore also runs

    NUMBA_ENABLE_CUDASIM=0 python -m simt_tiles.exercises._ptx NAME FILE

in a subprocess (Numba picks its target once per process) and fails on a compile error.
Exit status 0: compiled; 1: a compile error (stderr says which kernel and why);
3: the compiler itself is unavailable here (numba-cuda without its NVVM).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

#: per exercise: (kernel getter, argument kinds) — "1": 1-D array, "2": 2-D array, C order
KERNELS = {
    "vector_add": lambda m, dt: [(m.add_kernel, "111")],
    "bias_relu": lambda m, dt: [(m.bias_relu_kernel, "212")],
    "stable_softmax": lambda m, dt: [(m.softmax_kernel, "22")],
    "tiled_matmul": lambda m, dt: [(m.make_kernel(16, dt), "222")],
    "padded_transpose": lambda m, dt: [(m.make_kernel(dt), "22")],
    "halo_tile": lambda m, dt: [(m.make_kernel(dt), "222")],
}


def main(argv: list[str]) -> int:
    name, path = argv
    import numpy as np
    from numba import config, cuda, types

    if config.ENABLE_CUDASIM:
        print("run with NUMBA_ENABLE_CUDASIM=0", file=sys.stderr)
        return 2
    def probe(x):  # a kernel that surely compiles: does the compiler work here at all?
        x[0] = 1.0

    try:
        cuda.compile_ptx(probe, (types.float32[::1],), cc=(9, 0))
    except Exception as exc:  # noqa: BLE001 — no NVVM / CUDA bindings in this environment
        print(f"the CUDA compiler is not available here: {exc}", file=sys.stderr)
        return 3
    spec = importlib.util.spec_from_file_location("_student_ptx", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for dtype in (np.float32, np.float64):
        nb = types.float32 if dtype == np.float32 else types.float64
        for kernel, kinds in KERNELS[name](mod, np.dtype(dtype)):
            sig = tuple(nb[::1] if k == "1" else nb[:, ::1] for k in kinds)
            fn = getattr(kernel, "py_func", kernel)
            try:
                cuda.compile_ptx(fn, sig, cc=(9, 0))
            except Exception as exc:  # noqa: BLE001 — any compile error is the student's verdict
                text = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
                where = re.findall(r"at (\S+?) \((\d+)\)", str(exc))
                mine = [(f, int(n)) for f, n in where if Path(f).resolve() == Path(path).resolve()]
                lines = Path(path).read_text().splitlines()
                at = "".join(f"\n    {Path(f).name}:{n}: {lines[n - 1].strip()}" for f, n in dict.fromkeys(mine)
                             if 0 < n <= len(lines))
                print(f"{fn.__name__} ({np.dtype(dtype).name}): {type(exc).__name__}: " + "\n".join(text[:6]) + at,
                      file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
