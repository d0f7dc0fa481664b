"""Compile every cuTile kernel ahead of time, without a GPU.

``cuda.tile.compilation.export_kernel`` lowers a kernel for an explicit
signature to TileIR bytecode (cuda-tile alone) or, through ``tileiras``
(CUDA 13.4 for sm_90), to a cubin — neither needs a driver or a GPU.  This is
the tile subpackage's counterpart of the Numba compile gate: it proves that
each kernel, with the launchers' default tile sizes, type-checks and compiles
for the H200.  It cannot prove that the results are right; only a GPU run can.

    python -m simt_tiles.tile._aot            # cubins for sm_90 (needs tileiras); with a
                                              # cuobjdump: registers, and exit 1 on spills
    python -m simt_tiles.tile._aot --bytecode # TileIR bytecode only

Besides the launchers' defaults, each kernel is compiled for the two array
flavours a launch specialises to: no assumptions (strided, unaligned), and
C-contiguous, 16-byte aligned, extents multiples of 16 (where tileiras can use
TMA and wide accesses).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

from . import _defaults as D


def _signatures():
    """(name, kernel, [KernelSignature, ...]) for every kernel and default config."""
    import cuda.tile as ct
    from cuda.tile.compilation import (
        ArrayConstraint,
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
    )

    from . import _kernels as K  # deferred: imports cuda.tile (optional)

    cc = CallingConvention.cutile_python_v2()

    def arr(dtype, ndim, aligned=False):
        """A strided array with no assumptions, or (aligned) what a launch specialises a
        C-contiguous array to when its base is 16-byte aligned and its extents are multiples of 16."""
        extra = {}
        if aligned:
            extra = {"stride_constant": (None,) * (ndim - 1) + (1,), "shape_divisible_by": 16,
                     "stride_divisible_by": (128 // dtype.bitwidth,) * (ndim - 1) + (1,),
                     "base_addr_divisible_by": 16}
        return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False, **extra)

    f32, f64 = ct.float32, ct.float64
    a2 = arr(f32, 2)
    al = arr(f32, 2, aligned=True)
    out = []
    out.append(("fill2d", K.fill2d, [KernelSignature([a2, ScalarConstraint(f64), 32, 128], cc),
                                     KernelSignature([a2, ScalarConstraint(f32), 1, 1], cc)]))
    mm = []
    for tf32 in (False, True):
        bm, bn, bk, g = D.matmul_tiles("tf32" if tf32 else "fp32")
        mm.append(KernelSignature([a2, a2, a2, bm, bn, bk, g, tf32], cc))
        mm.append(KernelSignature([al, al, al, bm, bn, bk, g, tf32], cc))
    mm.append(KernelSignature([a2, a2, a2, 16, 16, 8, 1, True], cc))  # a small config as well
    out.append(("matmul", K.matmul, mm))
    cv = []
    th, tw = D.CORRELATE_TILE
    for mode in (K.MODE_CONSTANT, K.MODE_REFLECT):
        for kh, kw in ((1, 1), (3, 3), (2, 5), (7, 7)):
            for scal in (f64, f32):
                cv.append(KernelSignature([a2, a2, a2, ScalarConstraint(scal), th, tw, kh, kw, mode, True], cc))
        cv.append(KernelSignature([a2, a2, a2, ScalarConstraint(f64), th, tw, 3, 3, mode, False], cc))
        for kh in (3, 7):
            cv.append(KernelSignature([al, al, al, ScalarConstraint(f64), th, tw, kh, kh, mode, True], cc))
    out.append(("correlate2d", K.correlate2d, cv))
    out.append(("softmax_tile", K.softmax_tile,
                [KernelSignature([a2, a2, bm_, bn_], cc) for bn_ in (1, 64, D.SOFTMAX_SINGLE_PASS_MAX)
                 for bm_ in (D.softmax_rows(bn_),)]))
    out[-1][2].append(KernelSignature([al, al, 1, D.SOFTMAX_SINGLE_PASS_MAX], cc))
    out.append(("softmax_online", K.softmax_online,
                [KernelSignature([x, x, D.SOFTMAX_ONLINE_ROWS, D.SOFTMAX_ONLINE_COLS], cc) for x in (a2, al)]))
    rs = []
    for acc64 in (True, False):
        part = arr(f64 if acc64 else f32, 2)
        rs.append(KernelSignature([a2, part, D.SUM_TILE[0], D.SUM_TILE[1], acc64], cc))  # pass 1
        rs.append(KernelSignature([part, a2, D.SUM_TILE[0], D.SUM_TILE[1], acc64], cc))  # pass 2
        rs.append(KernelSignature([a2, part, 1, D.SUM_TILE[1], acc64], cc))  # one-row (1-D) shape
        rs.append(KernelSignature([al, arr(part.dtype, 2, aligned=True), D.SUM_TILE[0], D.SUM_TILE[1], acc64], cc))
    out.append(("sum_rows", K.sum_rows, rs))
    return out


def _cuobjdump() -> str | None:
    """cuobjdump from PATH, or from the nvidia-cuda-cuobjdump / nvcc wheels (nvidia/cu13/bin)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        from nvidia import cu13

        for root in cu13.__path__:
            cand = os.path.join(root, "bin", "cuobjdump")
            if os.access(cand, os.X_OK):
                return cand
    except ImportError:
        pass
    return None


def resources(cubin: bytes, cuobjdump: str) -> dict:
    """{"REG", "STACK", "SHARED", "LOCAL"} of the kernel in ``cubin`` (``cuobjdump --dump-resource-usage``)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    return {k: int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text)}


def compile_all(gpu_code: str | None = "sm_90", *, bytecode: bool = False, verbose: bool = False):
    """Compile every kernel signature; returns {name: [(constants, size in bytes, resources), ...]}.

    ``resources`` (registers, stack, shared and local memory per thread /
    block) is filled for cubins when a cuobjdump is found, else {}.  Raises
    the first compile error (a cuda.tile TileError or the tileiras failure)
    with the kernel's name added to the message.
    """
    from cuda.tile.compilation import export_kernel

    dump = None if bytecode else _cuobjdump()
    results = {}
    for name, kernel, sigs in _signatures():
        results[name] = []
        for sig in sigs:
            consts = [p.value for p in sig.parameters if hasattr(p, "value")]
            buf = io.BytesIO()
            try:
                export_kernel(kernel, [sig], buf, gpu_code=None if bytecode else gpu_code,
                              output_format="tileir_bytecode" if bytecode else "cubin")
            except Exception as exc:
                raise RuntimeError(f"cuTile kernel {name} (constants {consts}) failed to compile: {exc}") from exc
            res = resources(buf.getvalue(), dump) if dump else {}
            results[name].append((consts, len(buf.getvalue()), res))
            if verbose:
                extra = " ".join(f"{k}:{v}" for k, v in res.items())
                print(f"  {name:15s} {consts!s:28s} {len(buf.getvalue()):8d} bytes  {extra}", flush=True)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu-code", default="sm_90")
    p.add_argument("--bytecode", action="store_true", help="stop at TileIR bytecode (no tileiras needed)")
    args = p.parse_args(argv)
    results = compile_all(args.gpu_code, bytecode=args.bytecode, verbose=True)
    n = sum(map(len, results.values()))
    what = "TileIR bytecode" if args.bytecode else f"cubin for {args.gpu_code}"
    spills = [(name, c, r) for name, rows in results.items() for c, _, r in rows
              if r.get("STACK", 0) or r.get("LOCAL", 0)]
    print(f"OK: {n} kernel signatures compiled to {what}")
    if not args.bytecode:
        if not _cuobjdump():
            print("(no cuobjdump found: registers and spills not read)")
        elif spills:
            print(f"SPILLS in {len(spills)}: " + "; ".join(f"{a} {b} {c}" for a, b, c in spills))
            return 1
        else:
            print("no spills (STACK:0 LOCAL:0 everywhere)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
