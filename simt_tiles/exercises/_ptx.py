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

#: per exercise: (kernel getter, argument kinds) — "s": a scalar, "1"/"2"/"3": a C-order 1-/2-/3-D array
KERNELS = {
    "vector_add": lambda m, dt: [(m.add_kernel, "111")],
    "bias_relu": lambda m, dt: [(m.bias_relu_kernel, "212")],
    "stable_softmax": lambda m, dt: [(m.softmax_kernel, "22")],
    "tiled_matmul": lambda m, dt: [(m.make_kernel(16, dt), "222")],
    "padded_transpose": lambda m, dt: [(m.make_kernel(dt), "22")],
    "halo_tile": lambda m, dt: [(m.make_kernel(dt), "222")],
    "regblock_1d": lambda m, dt: [(m.make_kernel(dt), "222")],
    "regblock_2d": lambda m, dt: [(m.make_kernel(dt), "222")],
    "swizzled_tile": lambda m, dt: [(m.make_kernel(dt), "222")],
    "warp_tiling": lambda m, dt: [(m.make_kernel(dt), "222")],
    "double_buffer": lambda m, dt: [(m.make_kernel(dt), "222")],
    "halo_modes": lambda m, dt: [(m.make_kernel(dt, mode), "222") for mode in ("reflect", "mirror")],
    "separable_filter": lambda m, dt: [(k, "212") for k in m.make_kernels(dt)],
    "warp_reduce": lambda m, dt: [(m.make_kernel(dt), "21")],
    "online_softmax": lambda m, dt: [(m.softmax_kernel, "22")],
    "split_k": lambda m, dt: [(k, s) for k, s in zip(m.make_kernels(dt), ("223", "32"))],
    "vectorized_loads": lambda m, dt: [(m.axpy_kernel, "s111")],
    "mma_fragments": lambda m, dt: [(m.mma_kernel, "222")] if dt == "float32" else [],  # TF32: float32 only
}


def main(argv: list[str]) -> int:
    import numpy as np

    dtypes = (np.float32, np.float64)
    if argv[:1] == ["--float32"]:  # the test suite's batch: one dtype is enough to prove it compiles
        dtypes, argv = (np.float32,), argv[1:]
    if not argv or len(argv) % 2:
        print("usage: python -m simt_tiles.exercises._ptx [--float32] NAME FILE [NAME FILE ...]", file=sys.stderr)
        return 2
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
    for name, path in zip(argv[::2], argv[1::2]):
        if _compile(name, path, dtypes):
            return 1
    return 0


def _compile(name: str, path: str, dtypes) -> bool:
    """Compile exercise ``name``'s kernels in ``path``; True (and a message on stderr) on an error."""
    import numpy as np
    from numba import cuda, types

    spec = importlib.util.spec_from_file_location(f"_student_ptx_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for dtype in dtypes:
        nb = types.float32 if dtype == np.float32 else types.float64
        for kernel, kinds in KERNELS[name](mod, np.dtype(dtype)):
            sig = tuple({"s": nb, "1": nb[::1], "2": nb[:, ::1], "3": nb[:, :, ::1]}[k] for k in kinds)
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
                return True
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
