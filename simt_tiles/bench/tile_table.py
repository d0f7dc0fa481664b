"""The SIMT-vs-Tile table: every system on every problem, checked then timed in one run.

    simt-tiles bench tile [--problems matmul_fp32 ...] [--quick] [--reps 20] [--out DIR]

Per problem (matmul FP32 and TF32 at 4096³, correlate2d 3×3 and 7×7 "constant" on an 8192²
image, row softmax 16384×4096, sum / max / min of 2^28 float32, row sums of 16384×16384,
vector add of 2^28, bias+ReLU of 16384×16384), one cell per system:

* **SIMT best rung**: the fastest of this project's candidate rungs (each at its default
  config, through the public call with ``variant=``), and **simt_tiles default**: the public
  call as users make it (``variant=None``);
* **cuTile Python** (``simt_tiles.tile``), **CUDA Tile C++** (``simt_tiles.tilecpp``),
  **Triton** (``simt_tiles.bench.triton_peers``), **cuda.compute** (``simt_tiles.bench.cccl_peers``);
* **library**: cuBLAS (CuPy), cuDNN (torch, TF32 off for FP32), CuPy, torch.

Every output is checked against the reference and its bound before it is timed (the bounds of
``simt-tiles bench matmul / conv / patterns``; float32 sums of CUB and CuPy get the stated
float32 assumption), on a NaN-poisoned output; the timing is the harness's (an L2 flush before
each call, CUDA events, median).  Each row carries ``system``, ``loc`` (lines of kernel code,
``simt_tiles.bench.loc`` says what is counted) and the run writes ``missing``: the cells that
could not be filled, and why.  Rates: TFLOP/s for matmul, GB/s (input read once + output
written once) otherwise; ratios are to the library cell of the same problem.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import simt_tiles
from .._table import markdown
from ..bounds import BoundCheck, check_within, gamma, TF32_U, unit_roundoff
from ..machine import describe
from . import cccl_peers, common, loc, loc as L, matmul_peers, triton_peers
from .cccl_peers import BIAS_RELU_OP

#: the one line of ``simt-tiles bench --help`` for this group
HELP = "the SIMT-vs-Tile table (every system per problem, lines of kernel code)"

SYSTEMS = ("SIMT best rung", "simt_tiles default", "cuTile Python", "CUDA Tile C++", "Triton", "cuda.compute",
           "library")
#: problem key → (title, precision)
PROBLEMS = {
    "matmul_fp32": ("matmul 4096³", "fp32"),
    "matmul_tf32": ("matmul 4096³", "tf32"),
    "correlate_3x3": ("correlate2d 8192² 3×3 constant", "fp32"),
    "correlate_7x7": ("correlate2d 8192² 7×7 constant", "fp32"),
    "softmax": ("row softmax 16384×4096", "fp32"),
    "sum": ("sum 2^28", "fp32"),
    "max": ("max 2^28", "fp32"),
    "min": ("min 2^28", "fp32"),
    "row_sum": ("row sums 16384×16384", "fp32"),
    "vector_add": ("vector add 2^28", "fp32"),
    "bias_relu": ("bias+ReLU 16384×16384", "fp32"),
}
#: --quick: small sizes (a trial of every code path; the numbers mean little)
QUICK = {"mm": 1024, "img": 2048, "rows": 1024, "cols": 4096, "n": 2**22, "sq": 2048}
FULL = {"mm": 4096, "img": 8192, "rows": 16384, "cols": 4096, "n": 2**28, "sq": 16384}
SIMT_MATMUL = ("k10_warptiled", "k11_generated_split_k", "k12_async_copy")
SIMT_MATMUL_TF32 = ("k13_mma_tf32",)  # mma.sync from SIMT code; the default with precision="tf32" runs it too
SIMT_CONV = ("k03_register_blocked", "k05_register_tile_2d", "k07_vectorized", "k08_prefetched")
ROOT = Path(__file__).resolve().parents[2]


def add_arguments(p) -> None:
    p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    p.add_argument("--quick", action="store_true", help="small sizes: try every code path quickly")
    common.add_output_arguments(p)


def run(args) -> int:
    import json
    import os

    paths = {k: getattr(args, k, None) for k in ("json", "md")}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        paths = {k: paths[k] or v for k, v in common.result_paths(args.out, "tile_table").items() if k != "plot"}

    def write(t, rows, done):  # after every problem: a run cut short keeps what it measured
        data = {"machine": describe(), "title": "SIMT vs Tile", "method": __doc__, "problems": done,
                "problem_titles": {k: t.title(k) for k in done}, "results": rows, "missing": t.missing,
                "loc_method": _loc_doc()}
        if paths.get("json"):
            Path(paths["json"]).write_text(json.dumps(data, indent=2))
        if paths.get("md"):
            Path(paths["md"]).write_text(render(data) + "\n")
        return data

    with common.session("tile", args.reps) as (h, cp, tile):
        t = Table(h, cp, tile, QUICK if args.quick else FULL)
        for i, key in enumerate(args.problems):
            getattr(t, key)(key)
            data = write(t, h.rows, args.problems[:i + 1])
    print(render(data), flush=True)
    return 0 if all(r["passed"] for r in data["results"]) else 1


def main(argv=None) -> int:
    """``simt-tiles bench tile ...`` on its own."""
    return common.main_of("tile", add_arguments, run, __doc__, argv)


def _loc_doc() -> str:
    return loc.__doc__.split("\n\n", 1)[1].strip()


# ---------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------


def _optional(load):
    """``(module_or_fn, None)`` or ``(None, reason)`` for an optional system."""
    try:
        return load()
    except Exception as exc:  # noqa: BLE001  (missing package, toolchain, GPU: the cell says why)
        return None, f"{type(exc).__name__}: {exc}"[:200]


def _tilecpp():
    try:
        from .. import tilecpp  # deferred: an optional part of the installation (may be absent)
    except ImportError as exc:
        return None, f"not built in this run (simt_tiles.tilecpp absent: {exc})"
    ok, why = tilecpp.available()
    return (tilecpp, None) if ok else (None, why)


def _triton():
    fn, why = triton_peers.triton_vector_add()
    return (triton_peers, None) if fn else (None, why)


def _cccl():
    return cccl_peers.cccl()


class Table:
    """One method per problem: inputs, check, then one harness entry per implementation."""

    def __init__(self, h, cp, tile, size):
        import numpy as np

        self.h, self.cp, self.tile, self.s, self.np = h, cp, tile, size, np
        self.missing: list[dict] = []
        self.tilecpp, self.tilecpp_why = _optional(_tilecpp)
        self.triton, self.triton_why = _optional(_triton)
        self.cccl, self.cccl_why = _optional(_cccl)
        self.tile_why = None if tile is not None else "cuda.tile not usable here (see simt_tiles.tile)"
        self.rng = cp.random.default_rng(2026)
        self._titles: dict = {}
        for name, why in (("CUDA Tile C++", self.tilecpp_why), ("Triton", self.triton_why),
                          ("cuda.compute", self.cccl_why), ("cuTile Python", self.tile_why)):
            if why:
                print(f"{name}: {why}", flush=True)

    def title(self, key):
        return self._titles.get(key, PROBLEMS[key][0])

    def miss(self, key, system, why):
        self.missing.append({"problem": self.title(key), "precision": PROBLEMS[key][1], "system": system, "why": why})

    def entry(self, key, system, impl, fn, check, *, loc=None, kind="peer", **kw):
        if callable(loc):
            try:
                loc = loc(L)
            except Exception as exc:  # noqa: BLE001  (a count that cannot be made is shown as such)
                print(f"loc of {impl}: {exc}", flush=True)
                loc = None
        return self.h.entry("tile", self.title(key), impl, fn, check=check, kind=kind,
                            precision=PROBLEMS[key][1], system=system, loc=loc, problem_key=key, **kw)

    def simt(self, key, variants, call, check, rung_module, **kw):
        """Every candidate rung as "SIMT best rung" (the table keeps the fastest) and the default."""
        for v in variants:
            self.entry(key, "SIMT best rung", v, lambda v=v: call(v), check, kind="simt",
                       loc=lambda L, v=v: L.rung_lines(f"{rung_module}.{v}"), **kw)
        self.entry(key, "simt_tiles default", "default (variant=None)", lambda: call(None), check, kind="simt", **kw)

    def absent(self, key, **why):
        for system, text in why.items():
            self.miss(key, {"simt": "SIMT best rung", "default": "simt_tiles default", "cutile": "cuTile Python",
                            "tilecpp": "CUDA Tile C++", "triton": "Triton", "cccl": "cuda.compute",
                            "library": "library"}[system], text)

    def _torch(self, x):
        import torch

        return torch.as_tensor(x, device="cuda")

    # --- matmul -------------------------------------------------------------

    def _matmul(self, key, precision):
        cp, np = self.cp, self.np
        # deferred: loads Numba (backend choice first)
        from ..kernels.matmul.reference import matmul_reference

        n = self.s["mm"]
        self._titles[key] = f"matmul {n}³"
        a, b = (self.rng.standard_normal((n, n), dtype=cp.float32) for _ in range(2))
        c = cp.full((n, n), cp.nan, cp.float32)
        ref, bound = matmul_reference(a, b, xp=cp, precise=False)
        g = (gamma(n, unit_roundoff(np.float32)) + gamma(n, unit_roundoff(np.float64))) * (1 + 1e-6)
        if precision == "tf32":
            bound = bound * ((g + 2 * TF32_U) / g)
        kw = dict(flops=2 * n**3, x=n)

        def check():
            res = check_within(c, ref, bound, xp=cp)
            c.fill(cp.nan)  # the next implementation starts from NaN again
            return res

        if precision == "fp32":
            self.simt(key, SIMT_MATMUL, lambda v: simt_tiles.matmul(a, b, out=c, variant=v), check,
                      "simt_tiles.kernels.matmul", **kw)
        else:
            self.simt(key, SIMT_MATMUL_TF32, lambda v: simt_tiles.matmul(a, b, out=c, variant=v, precision="tf32"),
                      check, "simt_tiles.kernels.matmul", **kw)
        tag = precision.upper()
        if self.tile is not None:
            c.fill(cp.nan)
            self.entry(key, "cuTile Python", f"cuTile {tag}", lambda: self.tile.matmul(a, b, precision=precision, out=c),
                       check, kind="tile", loc=lambda L: L.function_lines(ROOT / "simt_tiles/tile/_kernels.py", ["matmul"]),
                       **kw)
        else:
            self.miss(key, "cuTile Python", self.tile_why)
        self._tilecpp(key, "matmul", lambda: self.tilecpp.matmul(a, b, out=c, precision=precision), check, c, **kw)
        if self.triton is not None:
            fn, _ = self.triton.triton_matmul(precision)
            ta, tb, tc = self._torch(a), self._torch(b), self._torch(c)
            c.fill(cp.nan)
            self.entry(key, "Triton", f"Triton {tag}", lambda: fn(ta, tb, tc), check,
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/bench/triton_peers.py", ["matmul_kernel"]), **kw)
        else:
            self.miss(key, "Triton", self.triton_why)
        self.miss(key, "cuda.compute", "no matmul in cuda.compute (CCCL has no dense linear algebra)")
        c.fill(cp.nan)
        if precision == "fp32":
            self.entry(key, "library", "cuBLAS FP32", lambda: matmul_peers.cublas_fp32(a, b, c), check, **kw)
        elif matmul_peers._cupy_tf32_switch():
            self.entry(key, "library", "cuBLAS TF32", lambda: matmul_peers.cublas_tf32(a, b, c), check, **kw)
        else:
            self.entry(key, "library", "torch.matmul TF32", lambda: matmul_peers.torch_tf32(a, b, c), check, **kw)
        a = b = c = ref = bound = None
        cp.get_default_memory_pool().free_all_blocks()

    def matmul_fp32(self, key):
        self._matmul(key, "fp32")

    def matmul_tf32(self, key):
        self._matmul(key, "tf32")

    def _tilecpp(self, key, op, fn, check, out, **kw):
        if self.tilecpp is None:
            self.miss(key, "CUDA Tile C++", self.tilecpp_why)
            return
        out.fill(self.cp.nan)
        self.entry(key, "CUDA Tile C++", f"Tile C++ {op}", fn, check, kind="tile",
                   loc=lambda L: L.cu_file_lines(self.tilecpp.SOURCES[op]), **kw)

    # --- correlate2d -------------------------------------------------------------

    def _correlate(self, key, k):
        cp, np = self.cp, self.np
        import torch
        import torch.nn.functional as F
        from cupyx.scipy import ndimage as cnd

        # deferred: loads Numba (backend choice first)
        from ..kernels.conv2d import CONSTANT_FILTER_VARIANTS

        s = self.s["img"]
        self._titles[key] = f"correlate2d {s}² {k}×{k} constant"
        x = self.rng.standard_normal((s, s), dtype=cp.float32)
        w = self.rng.standard_normal((k, k), dtype=cp.float32)
        w_host = cp.asnumpy(w)
        out = cp.full_like(x, cp.nan)
        g = gamma(k * k + 1, unit_roundoff(np.float32)) + gamma(k * k + 1, unit_roundoff(np.float64))
        ref = cnd.correlate(x.astype(cp.float64), w.astype(cp.float64), mode="constant", cval=0.0)
        bound = cnd.correlate(cp.abs(x).astype(cp.float64), cp.abs(w).astype(cp.float64), mode="constant") * g * (1 + 1e-6)
        kw = dict(nbytes=2 * x.nbytes, x=k)

        def check(y=out):
            res = BoundCheck(y, ref, bound, xp=cp)
            out.fill(cp.nan)  # the next implementation starts from NaN again
            return res

        def call(v):
            # the rungs that compile the filter's values in get it as NumPy; the others (and the
            # default, k03: the constant-filter rungs are opt-in) on the device, as users call them
            wv = w_host if v in CONSTANT_FILTER_VARIANTS else w
            return simt_tiles.correlate2d(x, wv, mode="constant", out=out, variant=v)

        out.fill(cp.nan)
        self.simt(key, SIMT_CONV, call, check, "simt_tiles.kernels.conv2d", **kw)
        if self.tile is not None:
            out.fill(cp.nan)
            self.entry(key, "cuTile Python", "cuTile correlate2d",
                       lambda: self.tile.correlate2d(x, w, mode="constant", out=out), check, kind="tile",
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/tile/_kernels.py", ["correlate2d", "_reflect"]),
                       **kw)
        else:
            self.miss(key, "cuTile Python", self.tile_why)
        self._tilecpp(key, "correlate2d", lambda: self.tilecpp.correlate2d(x, w, mode="constant", out=out), check,
                      out, **kw)
        self.absent(key, triton="no Triton 2-D correlation written (Triton's tutorials have none)",
                    cccl="not expressible as one CCCL algorithm (a stencil)")
        out.fill(cp.nan)
        torch.backends.cudnn.allow_tf32 = False
        tx, tw = self._torch(x)[None, None], self._torch(w)[None, None]
        self.entry(key, "library", "cuDNN (torch conv2d, TF32 off)",
                   lambda: F.conv2d(tx, tw, padding=k // 2), lambda: check(cp.asarray(F.conv2d(tx, tw, padding=k // 2)[0, 0])),
                   **kw)
        self.entry(key, "library", "cupyx correlate",
                   lambda: cnd.correlate(x, w, mode="constant", output=out), check, **kw)
        x = out = ref = bound = tx = None
        cp.get_default_memory_pool().free_all_blocks()

    def correlate_3x3(self, key):
        self._correlate(key, 3)

    def correlate_7x7(self, key):
        self._correlate(key, 7)

    # --- softmax -------------------------------------------------------------

    def softmax(self, key):
        cp = self.cp
        import torch

        # deferred: loads Numba (backend choice first)
        from ..kernels.softmax import RUNGS
        from ..kernels.softmax.reference import softmax_reference
        from ..runtime import ConfigError

        rows, cols = self.s["rows"], self.s["cols"]
        self._titles[key] = f"row softmax {rows}×{cols}"
        x = self.rng.standard_normal((rows, cols), dtype=cp.float32)
        out = cp.full_like(x, cp.nan)
        ref, bound = softmax_reference(x, xp=cp)
        kw = dict(nbytes=2 * x.nbytes, x=cols)

        def check(y=out):
            res = BoundCheck(y, ref, bound, xp=cp)
            out.fill(cp.nan)  # the next implementation starts from NaN again
            return res

        fits = []
        for v in simt_tiles.SOFTMAX_VARIANTS:
            try:
                RUNGS[v].resolve_config(None).for_problem(rows, cols, 4)
                fits.append(v)
            except ConfigError:
                pass
        self.simt(key, fits, lambda v: simt_tiles.softmax(x, out=out, variant=v), check,
                  "simt_tiles.kernels.softmax", **kw)
        if self.tile is not None:
            self.entry(key, "cuTile Python", "cuTile softmax", lambda: self.tile.softmax(x, out=out), check,
                       kind="tile", loc=lambda L: L.function_lines(ROOT / "simt_tiles/tile/_kernels.py",
                                                                   ["softmax_tile"]), **kw)
        else:
            self.miss(key, "cuTile Python", self.tile_why)
        self._tilecpp(key, "softmax", lambda: self.tilecpp.softmax(x, out=out), check, out, **kw)
        tx, ty = self._torch(x), self._torch(out)
        if self.triton is not None:
            fn, _ = self.triton.triton_softmax()
            out.fill(cp.nan)
            self.entry(key, "Triton", "Triton softmax", lambda: fn(tx, ty), check,
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/bench/triton_peers.py", ["softmax_kernel"]), **kw)
        else:
            self.miss(key, "Triton", self.triton_why)
        self.miss(key, "cuda.compute", "no row-wise softmax in cuda.compute (a segmented reduce + transform "
                  "would take three passes)")
        self.entry(key, "library", "torch.softmax", lambda: torch.softmax(tx, dim=1),
                   lambda: check(cp.asarray(torch.softmax(tx, dim=1))), **kw)
        x = out = ref = bound = tx = ty = None
        cp.get_default_memory_pool().free_all_blocks()

    # --- reductions ------------------------------------------------------------

    def _reduce(self, key, op):
        cp, np = self.cp, self.np

        n = self.s["n"]
        self._titles[key] = f"{op} 2^{int(math.log2(n))}"
        if not hasattr(self, "_x1"):
            self._x1 = self.rng.standard_normal(n, dtype=cp.float32)
        x = self._x1
        kw = dict(nbytes=x.nbytes, x=n)
        if op == "sum":
            ref = float(x.astype(cp.float64).sum())
            absum = float(cp.abs(x).astype(cp.float64).sum())
            u32 = unit_roundoff(np.float32)

            def check_with(got, accumulate=np.float64, chain=None):
                # float64 accumulation: γ_n(2⁻⁵³) for any order, then one rounding to float32.
                # float32 accumulation (CUB, CuPy): a sequential chain per thread of at most
                # `chain` terms, then trees — a stated assumption (see tile_table's docstring)
                nterms = n if accumulate == np.float64 else chain + math.ceil(math.log2(n))
                gg = gamma(nterms, unit_roundoff(accumulate)) + gamma(n, unit_roundoff(np.float64))
                return BoundCheck(cp.asarray(got, cp.float64).reshape(-1), cp.asarray([ref]),
                                  cp.asarray([u32 * abs(ref) + gg * absum * (1 + 1e-6)]), xp=cp)
        else:
            want = getattr(cp, op)(x)

            def check_with(got, accumulate=None, chain=None):
                return bool(cp.asarray(got).reshape(-1)[0] == want)

        # float32 chains: all of the device's resident threads (132 SMs × 2048) share the array
        chain32 = math.ceil(n / (132 * 2048))
        out = cp.full((), cp.nan, cp.float32)  # a device result: no copy to the host in the timed call
        self.entry(key, "SIMT best rung", "k01_warp_shuffle", lambda: simt_tiles.reduce(x, op, out=out),
                   lambda: check_with(out), kind="simt",
                   loc=lambda L: L.rung_lines("simt_tiles.kernels.reduce.k01_warp_shuffle"), **kw)
        out.fill(cp.nan)
        self.entry(key, "simt_tiles default", f"simt_tiles.reduce(x, {op!r})",
                   lambda: simt_tiles.reduce(x, op, out=out), lambda: check_with(out), kind="simt", **kw)
        if op == "sum":
            if self.tile is not None:
                self.entry(key, "cuTile Python", "cuTile reduce_sum", lambda: self.tile.reduce_sum(x),
                           lambda: check_with(self.tile.reduce_sum(x)), kind="tile",
                           loc=lambda L: L.function_lines(ROOT / "simt_tiles/tile/_kernels.py", ["sum_rows"]), **kw)
            else:
                self.miss(key, "cuTile Python", self.tile_why)
            if self.tilecpp is not None:
                self.entry(key, "CUDA Tile C++", "Tile C++ reduce_sum", lambda: self.tilecpp.reduce_sum(x),
                           lambda: check_with(self.tilecpp.reduce_sum(x)), kind="tile",
                           loc=lambda L: L.cu_file_lines(self.tilecpp.SOURCES["reduce_sum"]), **kw)
            else:
                self.miss(key, "CUDA Tile C++", self.tilecpp_why)
        else:
            self.absent(key, cutile="simt_tiles.tile has sums only", tilecpp="simt_tiles.tilecpp has sums only")
        if self.triton is not None:
            fn, _ = self.triton.triton_reduce(op)
            parts_cp, tout_cp = cp.empty(self.triton.REDUCE_PROGRAMS, cp.float64), cp.full(1, cp.nan, cp.float32)
            tx, parts, tout = self._torch(x), self._torch(parts_cp), self._torch(tout_cp)
            self.entry(key, "Triton", f"Triton {op}", lambda: fn(tx, parts, tout), lambda: check_with(cp.asarray(tout)),
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/bench/triton_peers.py", ["reduce_kernel"]),
                       **kw)
        else:
            self.miss(key, "Triton", self.triton_why)
        if self.cccl is not None:
            cout = cp.full(1, cp.nan, cp.float32)
            self.entry(key, "cuda.compute", f"cuda.compute reduce_into {op}", lambda: self.cccl.reduce(x, cout, op),
                       lambda: check_with(cout, np.float32, chain32), loc=0, **kw)
        else:
            self.miss(key, "cuda.compute", self.cccl_why)
        self.entry(key, "library", f"cupy.{op}", lambda: getattr(cp, op)(x),
                   lambda: check_with(getattr(cp, op)(x), np.float32, chain32), **kw)

    def sum(self, key):
        self._reduce(key, "sum")

    def max(self, key):
        self._reduce(key, "max")

    def min(self, key):
        self._reduce(key, "min")

    def row_sum(self, key):
        cp, np = self.cp, self.np

        m = self.s["sq"]
        self._titles[key] = f"row sums {m}×{m}"
        x = self.rng.standard_normal((m, m), dtype=cp.float32)
        rows64 = x.astype(cp.float64)
        ref, absum = rows64.sum(axis=1), cp.abs(rows64).sum(axis=1)
        rows64 = None
        out = cp.full(m, cp.nan, cp.float32)
        u32 = unit_roundoff(np.float32)
        kw = dict(nbytes=x.nbytes, x=m)

        def check_with(got, accumulate=np.float64):
            # float32 (CuPy): at least one warp per row, each lane a sequential chain, then a tree
            nterms = m if accumulate == np.float64 else math.ceil(m / 32) + 5
            g = gamma(nterms, unit_roundoff(accumulate)) + gamma(m, unit_roundoff(np.float64))
            res = BoundCheck(got, ref, u32 * cp.abs(ref) + g * absum * (1 + 1e-6), xp=cp)
            out.fill(cp.nan)  # the next implementation starts from NaN again
            return res

        def call(v):
            return simt_tiles.reduce(x, axis=-1, out=out)

        out.fill(cp.nan)
        self.entry(key, "SIMT best rung", "k01_warp_shuffle", lambda: call(None), lambda: check_with(out), kind="simt",
                   loc=lambda L: L.rung_lines("simt_tiles.kernels.reduce.k01_warp_shuffle"), **kw)
        out.fill(cp.nan)
        self.entry(key, "simt_tiles default", "simt_tiles.reduce(x, axis=-1)", lambda: call(None),
                   lambda: check_with(out), kind="simt", **kw)
        if self.tile is not None:
            out.fill(cp.nan)
            self.entry(key, "cuTile Python", "cuTile reduce_sum", lambda: self.tile.reduce_sum(x, out=out),
                       lambda: check_with(out), kind="tile",
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/tile/_kernels.py", ["sum_rows"]), **kw)
        else:
            self.miss(key, "cuTile Python", self.tile_why)
        self._tilecpp(key, "reduce_sum", lambda: self.tilecpp.reduce_sum(x, axis=-1, out=out), lambda: check_with(out),
                      out, **kw)
        if self.triton is not None:
            fn, _ = self.triton.triton_row_sum()
            tx, tout = self._torch(x), self._torch(out)
            out.fill(cp.nan)
            self.entry(key, "Triton", "Triton row sum", lambda: fn(tx, tout), lambda: check_with(out),
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/bench/triton_peers.py", ["row_sum_kernel"]),
                       **kw)
        else:
            self.miss(key, "Triton", self.triton_why)
        self.miss(key, "cuda.compute", "segmented_reduce would do it; not measured in this table")
        self.entry(key, "library", "cupy.sum(axis=1)", lambda: cp.sum(x, axis=1),
                   lambda: check_with(cp.sum(x, axis=1), np.float32), **kw)
        x = out = ref = absum = None
        cp.get_default_memory_pool().free_all_blocks()

    # --- elementwise -------------------------------------------------------------

    def vector_add(self, key):
        cp = self.cp
        n = self.s["n"]
        self._titles[key] = f"vector add 2^{int(math.log2(n))}"
        a, b = (self.rng.standard_normal(n, dtype=cp.float32) for _ in range(2))
        c = cp.full_like(a, cp.nan)
        want = a + b
        kw = dict(nbytes=3 * a.nbytes, x=n)

        def check():
            ok = bool(cp.array_equal(c, want))
            c.fill(cp.nan)
            return ok

        self.simt(key, simt_tiles.VECTOR_ADD_VARIANTS, lambda v: simt_tiles.vector_add(a, b, out=c, variant=v),
                  check, "simt_tiles.kernels.elementwise", **kw)
        self.miss(key, "cuTile Python", "no vector add in simt_tiles.tile")
        self._tilecpp(key, "vector_add", lambda: self.tilecpp.vector_add(a, b, out=c), check, c, **kw)
        if self.triton is not None:
            fn, _ = self.triton.triton_vector_add()
            ta, tb, tc = self._torch(a), self._torch(b), self._torch(c)
            self.entry(key, "Triton", "Triton vector add", lambda: fn(ta, tb, tc), check,
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/bench/triton_peers.py", ["vector_add_kernel"]),
                       **kw)
        else:
            self.miss(key, "Triton", self.triton_why)
        if self.cccl is not None:
            self.entry(key, "cuda.compute", "cuda.compute binary_transform PLUS",
                       lambda: self.cccl.vector_add(a, b, c), check, loc=0, **kw)
        else:
            self.miss(key, "cuda.compute", self.cccl_why)
        self.entry(key, "library", "cupy.add", lambda: cp.add(a, b, out=c), check, **kw)
        a = b = c = want = None
        self._x1 = None
        cp.get_default_memory_pool().free_all_blocks()

    def bias_relu(self, key):
        cp = self.cp
        m = self.s["sq"]
        self._titles[key] = f"bias+ReLU {m}×{m}"
        x = self.rng.standard_normal((m, m), dtype=cp.float32)
        bias = self.rng.standard_normal(m, dtype=cp.float32)
        y = cp.full_like(x, cp.nan)
        want = cp.maximum(x + bias, 0)
        kw = dict(nbytes=2 * x.nbytes, x=m)

        def check():
            ok = bool(cp.array_equal(y, want))
            y.fill(cp.nan)
            return ok

        self.entry(key, "SIMT best rung", "bias_relu", lambda: simt_tiles.bias_relu(x, bias, out=y), check, kind="simt",
                   loc=lambda L: L.rung_lines("simt_tiles.kernels.elementwise.bias_relu"), **kw)
        self.entry(key, "simt_tiles default", "simt_tiles.bias_relu", lambda: simt_tiles.bias_relu(x, bias, out=y),
                   check, kind="simt", **kw)
        self.miss(key, "cuTile Python", "no bias+ReLU in simt_tiles.tile")
        self._tilecpp(key, "bias_relu", lambda: self.tilecpp.bias_relu(x, bias, out=y), check, y, **kw)
        if self.triton is not None:
            fn, _ = self.triton.triton_bias_relu()
            tx, tb, ty = self._torch(x), self._torch(bias), self._torch(y)
            self.entry(key, "Triton", "Triton bias+ReLU", lambda: fn(tx, tb, ty), check,
                       loc=lambda L: L.function_lines(ROOT / "simt_tiles/bench/triton_peers.py", ["bias_relu_kernel"]),
                       **kw)
        else:
            self.miss(key, "Triton", self.triton_why)
        if self.cccl is not None:
            self.entry(key, "cuda.compute", "cuda.compute binary_transform (C++ op)",
                       lambda: self.cccl.bias_relu(x, bias, y), check, loc=lambda L: L.cpp_lines(BIAS_RELU_OP), **kw)
        else:
            self.miss(key, "cuda.compute", self.cccl_why)
        tmp = cp.empty_like(x)

        def unfused():
            cp.add(x, bias, out=tmp)
            cp.maximum(tmp, 0, out=y)

        self.entry(key, "library", "cupy add + maximum (2 kernels)", unfused, check, **kw)
        x = y = want = tmp = None
        cp.get_default_memory_pool().free_all_blocks()


# ---------------------------------------------------------------------------
# rendering (pure: tested on a fixture)
# ---------------------------------------------------------------------------


def _rate(r):
    return r.get("tflops", r.get("gbps"))


def _fmt_rate(r):
    return f"{r['tflops']:.1f} TFLOP/s" if "tflops" in r else f"{r['gbps']:.0f} GB/s"


def cells(data: dict) -> list[dict]:
    """One dict per (problem, precision): ``title``, ``precision`` and per system the chosen row
    (the fastest passed one; SIMT best rung: the fastest candidate) or ``{"why": ...}``."""
    out = []
    for key in data["problems"]:
        title = data.get("problem_titles", {}).get(key, PROBLEMS.get(key, (key,))[0])
        prec = PROBLEMS.get(key, (None, "fp32"))[1]
        rows = [r for r in data["results"] if r.get("problem_key", None) == key]
        line = {"key": key, "title": title, "precision": prec, "systems": {}}
        for system in SYSTEMS:
            mine = [r for r in rows if r.get("system") == system]
            timed = [r for r in mine if r.get("passed") and _rate(r) is not None]
            if timed:
                line["systems"][system] = max(timed, key=_rate)
            elif mine:
                bad = mine[0]
                line["systems"][system] = {"why": "FAILED its check: " + bad.get("error", f"err/bound "
                                                                                  f"{bad.get('err_over_bound', '?')}")}
            else:
                why = next((m["why"] for m in data.get("missing", []) if m["system"] == system and
                            m["problem"] == title and m.get("precision", prec) == prec), "not measured")
                line["systems"][system] = {"why": why}
        out.append(line)
    return out


def _short(why: str) -> str:
    """A cell's reason: the text before its first parenthesis (the JSON keeps the whole)."""
    if why.startswith("FAILED") or len(why) <= 60:
        return why
    return why.split(" (")[0]


LOC_NOTE = ("lines: non-blank, non-comment, non-docstring lines of kernel code, counted from the sources by "
            "`simt_tiles/bench/loc.py` — SIMT: the rung's device-code functions (kernel factory, device "
            "helpers, code generators; not configs, geometry or launchers); Triton and cuTile: the kernel "
            "functions; Tile C++: the `.cu` file and the project header it includes; cuda.compute: the C++ operator (0 for a built-in one)")


def render(data: dict) -> str:
    """The markdown table: per problem, per system ``rate (× library) · LOC · implementation``."""
    body = []
    for line in cells(data):
        lib = line["systems"].get("library", {})
        base = _rate(lib) if "why" not in lib else None
        row = [line["title"], line["precision"].upper()]
        for system in SYSTEMS:
            r = line["systems"][system]
            if "why" in r:
                row.append(f"— {_short(r['why'])[:90]}")
                continue
            ratio = f" ({_rate(r) / base:.2f}×)" if base else ""
            loc = f" · {r['loc']} lines" if r.get("loc") is not None else ""
            row.append(f"{_fmt_rate(r)}{ratio}{loc} · {r['impl']}")
        body.append(row)
    m = data.get("machine", {})
    head = (f"On {m.get('gpu', '?')}, one run: rate (× the library cell of the row) · lines of kernel code · "
            "implementation; every cell checked against its reference and bound before it was timed; a dash "
            f"says why a cell is empty. TFLOP/s for matmul, GB/s otherwise; {LOC_NOTE}.")
    return head + "\n\n" + markdown(["problem", "precision", *SYSTEMS], body)


if __name__ == "__main__":
    sys.exit(main())
