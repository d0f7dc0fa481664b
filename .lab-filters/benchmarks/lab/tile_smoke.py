"""One-shot smoke run of simt_tiles.tile (the cuTile kernels) on a GPU.

    python3 benchmarks/lab/tile_smoke.py [--lib torch|cupy]

Runs every tile function once on a small ragged input, compares with a NumPy
(long double) reference under the same error bounds as tests/test_tile.py,
and prints PASS/FAIL with the max error and the worst err/bound ratio per
case.  Each case runs in its own try/except and prints its full traceback on
failure, so one broken kernel does not hide the others.  The first call of a
case includes the JIT compile (tileiras); both times are printed.  Exit
status: 0 if every case passed, 1 otherwise, 2 if nothing could run.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def environment(libname):
    print(f"python {platform.python_version()}  numpy {np.__version__}")
    try:
        import cuda.tile as ct

        print(f"cuda.tile {ct.__version__} from {os.path.dirname(ct.__file__)}")
    except Exception:  # noqa: BLE001
        print("cuda.tile: NOT importable")
        traceback.print_exc()
    tileiras = shutil.which("tileiras")
    print(f"tileiras on PATH: {tileiras}")
    if tileiras:
        try:
            out = subprocess.run([tileiras, "--version"], capture_output=True, text=True, timeout=60, check=False)
            print("  " + (out.stdout or out.stderr).strip().replace("\n", "\n  "))
        except Exception as exc:  # noqa: BLE001
            print(f"  tileiras --version failed: {exc}")
    try:
        if libname == "torch":
            import torch

            print(f"torch {torch.__version__}, GPU: {torch.cuda.get_device_name()} "
                  f"cc {torch.cuda.get_device_capability()}")
        else:
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            print(f"cupy {cupy.__version__}, GPU: {props['name'].decode()}")
    except Exception:  # noqa: BLE001
        traceback.print_exc()


class Lib:
    def __init__(self, name):
        self.name = name
        if name == "torch":
            import torch

            self.mod = torch
        else:
            import cupy

            self.mod = cupy

    def dev(self, x):
        x = np.asarray(x, order="C")  # (ascontiguousarray would turn a 0-d array into shape (1,))
        return self.mod.as_tensor(x, device="cuda") if self.name == "torch" else self.mod.asarray(x)

    def sync(self):
        if self.name == "torch":
            self.mod.cuda.synchronize()
        else:
            self.mod.cuda.Device().synchronize()

    def host(self, x):
        self.sync()
        return x.cpu().numpy() if self.name == "torch" else self.mod.asnumpy(x)

    def nan(self, shape):
        return self.dev(np.full(shape, np.nan, np.float32))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", choices=["torch", "cupy"], default=None, help="array library (default: torch, else cupy)")
    args = p.parse_args(argv)
    libname = args.lib
    if libname is None:
        try:
            import torch  # noqa: F401

            libname = "torch"
        except ImportError:
            libname = "cupy"
    print("=== environment")
    environment(libname)
    try:
        from simt_tiles import tile
        from simt_tiles.bounds import check_within, gamma, unit_roundoff
        from simt_tiles.kernels.conv2d.reference import correlate2d_reference
        from simt_tiles.kernels.matmul.reference import matmul_reference
        from simt_tiles.kernels.softmax.reference import softmax_reference

        lib = Lib(libname)
        tile.require()
    except Exception:  # noqa: BLE001
        print("FATAL: cannot set up (simt_tiles.tile / array library / cuda.tile)")
        traceback.print_exc()
        return 2

    rng = np.random.default_rng(2024)
    u_ld = unit_roundoff(np.longdouble)

    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # each case: () -> (got host array, ref, bound, extra note)
    def mm(precision, m, n, k, **kw):
        a, b = f32(m, k), f32(k, n)
        out = lib.nan((m, n))
        tile.matmul(lib.dev(a), lib.dev(b), precision=precision, out=out, **kw)
        ref, bound = matmul_reference(a, b)
        if precision == "tf32":
            absprod = np.abs(a.astype(np.longdouble)) @ np.abs(b.astype(np.longdouble))
            ut = 2.0**-11
            bound = bound + absprod * ((1 + ut) ** 2 * (1 + gamma(k, 2.0**-23)) - 1) * (1 + 1e-6)
        return lib.host(out), ref, bound

    def tf32_rounds():
        a = np.full((16, 8), 1 + 2.0**-12, np.float32)
        b = np.zeros((8, 16), np.float32)
        b[0] = 1
        c = lib.host(tile.matmul(lib.dev(a), lib.dev(b), precision="tf32"))
        ref = np.ones_like(c, dtype=np.longdouble)
        return c, ref, np.zeros_like(ref)  # exact: 1 + 2^-12 must round to 1 in tf32

    def conv(mode, cval, shape, fshape, **kw):
        x, w = f32(*shape), f32(*fshape)
        out = lib.nan(shape)
        tile.correlate2d(lib.dev(x), lib.dev(w), mode, cval, out=out, **kw)
        ref, bound = correlate2d_reference(x, w, mode, cval)
        return lib.host(out), ref, bound

    def smax(shape, **kw):
        x = f32(*shape, scale=10.0)
        x[0, 0] = -np.inf
        out = lib.nan(shape)
        tile.softmax(lib.dev(x), out=out, **kw)
        ref, bound = softmax_reference(x)
        return lib.host(out), ref, bound

    def rsum(shape, accumulate, **kw):
        x = f32(*shape)
        out = lib.nan(shape[:-1])
        tile.reduce_sum(lib.dev(x), out=out, accumulate=accumulate, **kw)
        xl = x.astype(np.longdouble)
        n = max(shape[-1], 1)
        ref, absum = xl.sum(axis=-1), np.abs(xl).sum(axis=-1)
        if accumulate == "float64":
            bound = unit_roundoff(np.float32) * np.abs(ref) + (gamma(n, 2.0**-53) + gamma(n, u_ld)) * absum
        else:
            bound = (gamma(n, unit_roundoff(np.float32)) + gamma(n, u_ld)) * absum
        return np.asarray(lib.host(out)), np.asarray(ref), np.asarray(bound * (1 + 1e-6))

    cases = [
        ("matmul fp32 200x70x300", lambda: mm("fp32", 200, 70, 300)),
        ("matmul tf32 200x70x300", lambda: mm("tf32", 200, 70, 300)),
        ("matmul tf32 129x257x65 small tiles", lambda: mm("tf32", 129, 257, 65, block_m=32, block_n=64, block_k=16)),
        ("matmul tf32 rounds operands", tf32_rounds),
        ("correlate2d reflect 3x3 on 100x200", lambda: conv("reflect", 0.0, (100, 200), (3, 3))),
        ("correlate2d reflect 7x7 on 5x3", lambda: conv("reflect", 0.0, (5, 3), (7, 7))),
        ("correlate2d constant 4x6 cval=1.5 on 131x257", lambda: conv("constant", 1.5, (131, 257), (4, 6))),
        ("correlate2d constant 3x3 gather only", lambda: conv("constant", -2.0, (70, 90), (3, 3),
                                                             fast_interior=False)),
        ("softmax 65x1000 (one tile a row)", lambda: smax((65, 1000))),
        ("softmax 3x20000 (online)", lambda: smax((3, 20000))),
        ("reduce_sum 2-D 130x5000 float64 acc", lambda: rsum((130, 5000), "float64")),
        ("reduce_sum 2-D 37x3001 float32 acc split=3", lambda: rsum((37, 3001), "float32", split=3)),
        ("reduce_sum 1-D 1000003", lambda: rsum((1_000_003,), "float64")),
    ]

    print(f"\n=== cases (arrays: {libname})")
    failed = 0
    for name, case in cases:
        try:
            t0 = time.perf_counter()
            got, ref, bound = case()
            t1 = time.perf_counter()
            case()  # again, compiled
            lib.sync()
            t2 = time.perf_counter()
            chk = check_within(np.asarray(got), ref, bound)
            nan_ok = True
            if name.startswith("softmax"):  # the planted -inf column: finite rows stay finite
                nan_ok = not np.isnan(got).any()
            ok = chk.passed and nan_ok
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}  {name:45s} max_err={chk.max_err:.3g} "
                  f"worst err/bound={chk.worst_ratio:.3g} bad={chk.n_bad} nan={chk.has_nan}  "
                  f"first call {t1 - t0:.2f}s, second {t2 - t1:.3f}s", flush=True)
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL  {name:45s} raised:", flush=True)
            traceback.print_exc()
            sys.stderr.flush()
    print(f"\n{len(cases) - failed}/{len(cases)} passed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
