"""GPU-free compile gate: every shipped config of every kernel → PTX (sm_90) → assembled, checked.

The simulator runs kernels as Python, so it accepts code the GPU compiler
rejects (a shared-array shape written ``T + 1``, a local array indexed at run
time that lands in local memory...).  This gate compiles each rung's presets
for both dtypes with ``cuda.compile_ptx(..., cc=(9, 0))`` and assembles the PTX
for sm_90 with a toolchain at least as new as the NVVM that wrote it: nvJitLink
(through ``cuda.core``'s :class:`~cuda.core.Linker`, installed with
``numba-cuda[cu13]``), else a ``ptxas`` whose release is checked against the
PTX ``.version`` first.  An older assembler is refused up front with a message
that says what to install (it would fail every row with
``Unsupported .version``).

A row fails when the kernel does not compile or assemble (the *first* error
line is shown), when a rung declared spill-free uses local memory (spill bytes
or a stack frame), or when the static shared memory the assembler reports is
not the config's declared ``smem_bytes`` (a rung may declare why it differs:
``Gate.smem_exception``).  Rows stream as they finish, from a pool of worker
processes (one per core; ``--jobs``); ``--ladder``/``--variant`` filter.

Must run with the real CUDA target loaded (``NUMBA_ENABLE_CUDASIM=0``); no GPU
is needed.  ``python -m simt_tiles compile-gate [--ladder L] [--variant V]``
arranges that.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import multiprocessing
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from ._numba_fixes import apply as apply_numba_fixes
from ._options import positive_int
from .registry import ladders as registry_ladders
from .runtime import SIMULATOR, Rung, dtype_label, storage_dtype

#: options of ``cuda.jit`` that ``compile_ptx`` also understands
_PTX_OPTIONS = ("lineinfo", "fastmath", "launch_bounds", "opt", "debug")
CC = (9, 0)
ARCH = "sm_90"


class AssemblerError(RuntimeError):
    """No assembler at least as new as the NVVM that writes the PTX."""


# ---------------------------------------------------------------------------
# Which CUDA release can assemble which PTX
# ---------------------------------------------------------------------------

#: PTX ISA version → the first CUDA release whose ptxas/nvJitLink accepts it (CUDA 12;
#: from CUDA 13.0 on, ISA 9.x is CUDA 13.x)
_ISA_12 = {(8, 0): (12, 0), (8, 1): (12, 1), (8, 2): (12, 2), (8, 3): (12, 3), (8, 4): (12, 4),
           (8, 5): (12, 5), (8, 6): (12, 7), (8, 7): (12, 8), (8, 8): (12, 9)}


def release_for_isa(isa: tuple[int, int]) -> tuple[int, int]:
    """The oldest CUDA release (major, minor) that assembles PTX ``.version`` ``isa``."""
    if isa[0] >= 9:
        return (isa[0] + 4, isa[1])
    return _ISA_12.get(isa, (11, 8) if isa[0] < 8 else (12, 9))


def ptx_isa(ptx: str) -> tuple[int, int]:
    """The ``.version`` of a PTX text, as (major, minor)."""
    m = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.M)
    if not m:
        raise ValueError("PTX without a .version line")
    return int(m.group(1)), int(m.group(2))


@functools.lru_cache(maxsize=None)
def nvvm_ptx_isa() -> tuple[int, int]:
    """The PTX ``.version`` numba-cuda's NVVM writes (compiles a one-line kernel)."""
    from numba import cuda, float32

    def probe(a):
        a[0] = 1

    return ptx_isa(cuda.compile_ptx(probe, (float32[:],), cc=CC)[0])


def _first_error(log: str) -> str:
    """The first line of an assembler log that says what went wrong (not the "aborted" summary)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\b(error|fatal)\b", ln, re.I) and "aborted due to errors" not in ln:
            return re.sub(r"^nvJitLink error log:\s*", "", ln)
    return lines[0] if lines else "(empty log)"


def _release_text(r) -> str:
    return "unknown" if r is None else f"{r[0]}.{r[1]}"


# ---------------------------------------------------------------------------
# Assemblers: nvJitLink (cuda.core) or a ptxas executable
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Assembler:
    """PTX → cubin for sm_90 with the resource report (``ptxas -v``'s lines)."""

    kind: str                     #: "nvjitlink" or "ptxas"
    release: tuple[int, int] | None
    path: str | None = None       #: the ptxas executable

    def __str__(self) -> str:
        where = f"ptxas {self.path}" if self.kind == "ptxas" else "nvJitLink (cuda.core Linker)"
        return f"{where}, CUDA {_release_text(self.release)}"

    def assemble(self, ptx: str, max_registers: int | None = None,
                 keep: Path | None = None) -> tuple[bool, str]:
        """(ok, log): the verbose log on success, the error log on failure; ``keep``: write the cubin there."""
        if self.kind == "nvjitlink":
            from cuda.core import Linker, LinkerOptions, ObjectCode

            opts = LinkerOptions(arch=ARCH, verbose=True, max_register_count=max_registers)
            linker = Linker(ObjectCode.from_ptx(ptx.encode()), options=opts)
            try:
                cubin = linker.link("cubin").code
            except Exception as exc:  # nvJitLinkError: the log says why
                return False, (linker.get_error_log() or "") + "\n" + str(exc)
            if keep is not None:
                Path(keep).write_bytes(bytes(cubin))
            # the link summary's "bytes smem" includes the 1 KiB sm_90 reserves per block; how the cubin
            # marks that reservation differs between nvJitLink releases: calibrated on a probe kernel
            smem = cubin_static_smem(bytes(cubin))
            if smem:
                smem = max(smem - nvjitlink_smem_offset(), 0)
            return True, f"{linker.get_info_log()}\nptxas info    : {smem} bytes smem (the cubin's static)"
        with tempfile.TemporaryDirectory(prefix="simt-tiles-ptxas-") as tmp:
            src = Path(tmp) / "k.ptx"
            src.write_text(ptx)
            cmd = [self.path, f"-arch={ARCH}", "-v", str(src), "-o", str(keep) if keep else os.devnull]
            if max_registers:
                cmd.insert(1, f"-maxrregcount={max_registers}")
            proc = subprocess.run(cmd, capture_output=True, text=True)
        return proc.returncode == 0, proc.stderr + proc.stdout


#: a kernel with exactly 256 B of static shared memory (hand-written PTX, accepted by CUDA 12.0+)
_PROBE_SMEM = 256
_SMEM_PROBE_PTX = """\
.version 8.0
.target sm_90
.address_size 64
.visible .entry smem_probe(.param .u64 out)
{
    .shared .align 4 .b8 buf[256];
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    cvt.u64.u32 %rd1, %r2;
    mov.u64 %rd2, buf;
    add.u64 %rd3, %rd2, %rd1;
    st.shared.u32 [%rd3], %r1;
    bar.sync 0;
    ld.shared.u32 %r3, [%rd2+252];
    ld.param.u64 %rd4, [out];
    cvta.to.global.u64 %rd4, %rd4;
    st.global.u32 [%rd4], %r3;
    ret;
}
"""


def cubin_static_smem(cubin: bytes) -> int:
    """Static shared memory of the kernel in a linked cubin (little-endian ELF64), as ``ptxas -v``
    counts it: the ``.nv.shared.<kernel>`` section less the per-block reservation that sm_80+ puts
    at its start (the value of the ``.nv.reservedSmem.cap`` symbol, 1 KiB on sm_90)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("expected an ELF64 cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def text(table: int, off: int) -> str:  # a NUL-terminated name in a string table section
        start = heads[table][4] + off
        return cubin[start: cubin.index(b"\0", start)].decode()

    names = [text(shstrndx, h[0]) for h in heads]
    shared = sum(h[5] for n, h in zip(names, heads) if n.startswith(".nv.shared.") and "reserved" not in n)
    reserved = 0
    if ".symtab" in names and ".strtab" in names:
        sym, strtab = heads[names.index(".symtab")], names.index(".strtab")
        for i in range(sym[5] // 24):
            st_name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", cubin, sym[4] + 24 * i)
            if text(strtab, st_name) == ".nv.reservedSmem.cap":
                reserved = value
    return max(shared - reserved, 0) if shared else 0


@functools.lru_cache(maxsize=None)
def nvjitlink_smem_offset() -> int:
    """What nvJitLink's cubins add to a kernel's static shared memory beyond its own arrays (0 where
    the sm_90 reservation is marked as such; 1 KiB where a release folds it in), measured once on a
    probe kernel with exactly 256 B."""
    from cuda.core import Linker, LinkerOptions, ObjectCode

    linker = Linker(ObjectCode.from_ptx(_SMEM_PROBE_PTX.encode()), options=LinkerOptions(arch=ARCH))
    return max(cubin_static_smem(bytes(linker.link("cubin").code)) - _PROBE_SMEM, 0)


def nvjitlink_release() -> tuple[int, int] | None:
    try:
        from cuda.bindings import nvjitlink
        import cuda.core  # noqa: F401  (the Linker the gate uses)

        return tuple(nvjitlink.version())[:2]
    except Exception:  # not installed, or the library cannot be loaded
        return None


def ptxas_release(path: str) -> tuple[int, int] | None:
    """The CUDA release of a ptxas executable (``ptxas --version``), or None."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _ptxas_candidates() -> list[str]:
    """The pip ptxas (package nvidia-cuda-nvcc), then the one on PATH."""
    found = []
    try:
        import nvidia  # namespace package of the pip CUDA wheels

        for root in nvidia.__path__:
            found += [str(p) for p in sorted(Path(root).glob("cu*/bin/ptxas"))]
            found += [str(p) for p in sorted(Path(root).glob("cuda_nvcc/bin/ptxas"))]
    except ImportError:
        pass
    on_path = shutil.which("ptxas")
    if on_path:
        found.append(on_path)
    return [p for p in dict.fromkeys(found) if os.access(p, os.X_OK)]


def _install_hint(need: tuple[int, int]) -> str:
    v = f"{need[0]}.{need[1]}"
    return (f"install a matching toolchain: pip install 'nvidia-nvjitlink=={v}.*' (used through cuda.core), "
            f"or pip install 'nvidia-cuda-nvcc=={v}.*' (ptxas), or a CUDA {v}+ toolkit")


def find_assembler(ptxas: str | None = None) -> Assembler:
    """An assembler that accepts the PTX numba-cuda's NVVM writes, checked on a probe kernel.

    ``ptxas`` (a path or a command name on PATH) forces that executable; otherwise
    nvJitLink, then the pip ptxas, then PATH's.  Raises :class:`AssemblerError` naming
    what was found, the PTX version and what to install."""
    isa = nvvm_ptx_isa()
    need = release_for_isa(isa)
    if ptxas is not None:
        path = shutil.which(ptxas) or ptxas
        if not os.access(path, os.X_OK):
            raise AssemblerError(f"ptxas: expected an executable; got {ptxas!r} (not found)")
        candidates = [Assembler("ptxas", ptxas_release(path), path)]
    else:
        candidates = [Assembler("nvjitlink", nvjitlink_release())] if nvjitlink_release() else []
        candidates += [Assembler("ptxas", ptxas_release(p), p) for p in _ptxas_candidates()]
    tried = []
    for asm in candidates:
        if asm.release is None or asm.release < need:
            tried.append(f"{asm}: too old (or its version unknown)")
            continue
        ok, log = asm.assemble(_probe_ptx())
        if ok:
            return asm
        tried.append(f"{asm}: {_first_error(log)}")
    raise AssemblerError(
        f"compile gate: numba-cuda's NVVM writes PTX .version {isa[0]}.{isa[1]}, which needs an assembler "
        f"from CUDA {need[0]}.{need[1]} or newer; "
        + ("; ".join(tried) if tried else "found neither nvJitLink nor ptxas") + ". " + _install_hint(need)
    )


@functools.lru_cache(maxsize=None)
def _probe_ptx() -> str:
    from numba import cuda, float32

    def probe(a):
        a[0] = 1

    return cuda.compile_ptx(probe, (float32[:],), cc=CC)[0]


def find_ptxas() -> str:
    """A ``ptxas`` executable that accepts numba-cuda's PTX (for tools that want a cubin file)."""
    try:
        asm = next(a for a in (Assembler("ptxas", ptxas_release(p), p) for p in _ptxas_candidates())
                   if a.release is not None and a.release >= release_for_isa(nvvm_ptx_isa()))
    except StopIteration:
        raise AssemblerError(f"ptxas: none of {_ptxas_candidates()} is CUDA "
                             f"{_release_text(release_for_isa(nvvm_ptx_isa()))} or newer; "
                             + _install_hint(release_for_isa(nvvm_ptx_isa()))) from None
    return asm.path


# ---------------------------------------------------------------------------
# One row: a (rung, preset, dtype, params) kernel compiled, assembled and checked
# ---------------------------------------------------------------------------


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
    #: the config's declared static shared memory (``smem_bytes``), and why the rung says it differs
    smem_declared: int | None = None
    smem_exception: str = ""
    #: shared-memory load instructions in the PTX, and how many are 128/64-bit wide
    lds: int | None = None
    lds_wide: int | None = None
    seconds: float = 0.0

    @property
    def spills(self) -> int:
        return (self.spill_stores or 0) + (self.spill_loads or 0)

    @property
    def smem_mismatch(self) -> bool:
        return (self.smem is not None and self.smem_declared is not None and not self.smem_exception
                and self.smem != self.smem_declared)

    @property
    def problem(self) -> str | None:
        """Why this row fails, or None."""
        if self.error:
            return self.error
        if self.spill_free and (self.spills or self.stack):
            # a register array indexed at run time lands in the stack frame
            return f"local memory: {self.stack} B stack, {self.spills} B spills (declared spill-free)"
        if self.smem_mismatch:
            return (f"static shared memory: the assembler reports {self.smem} B, the config declares "
                    f"{self.smem_declared} B (smem_bytes)")
        return None

    @property
    def ok(self) -> bool:
        return self.problem is None


def ladders() -> dict[str, dict[str, Rung]]:
    """Every ladder's rungs, by ladder name (from :mod:`simt_tiles.registry`)."""
    return registry_ladders()


_RE_REGS = re.compile(r"Used (\d+) registers", re.I)
_RE_SMEM = re.compile(r"(\d+) bytes smem")
_RE_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(report: str) -> dict[str, int]:
    """Registers, shared memory, stack frame and spill bytes from ``ptxas -v`` (or nvJitLink's
    verbose log, whose link summary carries the shared memory)."""
    regs = _RE_REGS.search(report)
    frame = _RE_FRAME.search(report)
    if not regs or not frame:
        raise ValueError(f"unrecognised ptxas report:\n{report}")
    smem = _RE_SMEM.findall(report)  # nvJitLink: the last line is the cubin's static figure
    return {
        "registers": int(regs.group(1)),
        "smem": int(smem[-1]) if smem else 0,
        "stack": int(frame.group(1)),
        "spill_stores": int(frame.group(2)),
        "spill_loads": int(frame.group(3)),
    }


def compile_one(rung: Rung, preset: str, dtype, assembler: Assembler | str, workdir: Path | None = None,
                ladder: str = "", params: dict | None = None, cubin_dir: Path | None = None) -> GateRow:
    """One gate row: ``rung.presets[preset]`` for ``dtype`` → PTX (kept in ``workdir``) → assembled
    (the cubin and the PTX kept in ``cubin_dir`` as ``<kernel>-<preset>-<dtype>.cubin``/``.ptx``, for
    SASS and PTX checks).

    ``assembler``: from :func:`find_assembler`, or the path of a ptxas executable."""
    from numba import cuda

    apply_numba_fixes()  # the generated rungs' long blocks: a linear lowering scan (same PTX)
    t0 = time.perf_counter()
    if isinstance(assembler, str):
        assembler = Assembler("ptxas", None, assembler)
    cfg = rung.presets[preset]
    dtype = storage_dtype(dtype)  # ("bfloat16": its uint16 bits, as the kernels take it)
    label = dtype_label(dtype)
    params = params or {}
    name = rung.name + "".join(f" {k}={_param_text(v)}" for k, v in params.items())
    row = GateRow(ladder, name, preset, label, _short(cfg), spill_free=rung.gate.spill_free,
                  smem_exception=rung.gate.smem_exception)
    options = rung.jit_options(cfg, dtype)
    ptx_opts = {k: v for k, v in options.items() if k in _PTX_OPTIONS}
    try:
        cfg.check_smem(dtype)
        row.smem_declared = cfg.smem_bytes(dtype.itemsize)
        # a config may imply compile-time parameters of its own (the tensor-core rungs' batched form: its signature)
        build = {**params, **(rung.config_params(cfg) if hasattr(rung, "config_params") else {})}
        ptx, _ = cuda.compile_ptx(rung.factory(cfg, dtype, **build), rung.signature(dtype, **build),
                                  cc=CC, **ptx_opts)
    except Exception as exc:  # the point of the gate: report, don't crash
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        row.error = f"{type(exc).__name__}: " + " | ".join(lines[:2])[:240]
        return row
    row.lds = len(re.findall(r"\bld\.shared\.", ptx))
    row.lds_wide = len(re.findall(r"\bld\.shared\.v[24]\.", ptx))
    for where in (workdir, cubin_dir):  # cubin_dir keeps the PTX too: tests read it instead of compiling again
        if where is not None:
            (Path(where) / f"{name.replace(' ', '_')}-{preset}-{label}.ptx").write_text(ptx)
    keep = Path(cubin_dir) / f"{name.replace(' ', '_')}-{preset}-{label}.cubin" if cubin_dir else None
    ok, log = assembler.assemble(ptx, options.get("max_registers"), keep)
    if not ok:
        row.error = f"{assembler.kind}: {_first_error(log)[:240]}"
        return row
    for key, value in parse_ptxas(log).items():
        setattr(row, key, value)
    row.seconds = time.perf_counter() - t0
    return row


def compile_configs(items, ladder: str = "", assembler: Assembler | None = None,
                    workdir: Path | None = None, n_jobs: int | None = None) -> list[GateRow]:
    """Gate rows for configs that are not presets: ``items`` are ``(rung, label, config, dtype)``;
    each is compiled as ``rung`` with ``presets={label: config}`` (every other field of the rung
    kept, through :func:`dataclasses.replace`).  Rungs of the registry are compiled in the gate's
    process pool (``n_jobs``, default one per core) unless ``workdir`` asks for the PTX files."""
    assembler = assembler or find_assembler()
    where = {id(r): lad for lad, rs in ladders().items() for r in rs.values()}
    n_jobs = n_jobs or default_jobs()
    if workdir is None and n_jobs > 1 and len(items) > 1 and all(id(it[0]) in where for it in items):
        todo = [Job(where[id(rung)], rung.name, label, dtype_label(dtype), config=config)
                for rung, label, config, dtype in items]
        rows = _run_jobs(todo, assembler, n_jobs)
        for row in rows:
            row.ladder = ladder or row.ladder
        return rows
    return [compile_one(dataclasses.replace(rung, presets={label: config}), label, dtype, assembler,
                        workdir, ladder) for rung, label, config, dtype in items]


def _param_text(v) -> str:
    return np.dtype(v).name if isinstance(v, (type, np.dtype)) else str(v)


def _short(cfg) -> str:
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))


# ---------------------------------------------------------------------------
# The gate: every (ladder, rung, preset, dtype, params), in a process pool
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Job:
    ladder: str
    rung: str
    preset: str
    dtype: str
    params: tuple = ()
    #: a config to compile under the name ``preset`` instead of the rung's preset of that name
    config: object = None


#: ladders whose generated kernels take minutes each to reach PTX: with SIMT_TILES_GATE_QUICK=1
#: (``scripts/test`` without ``--full``) the gate builds only their ``"sim"`` preset (and only the
#: other presets of every other ladder: :func:`quick_skips`); the full gate (``--full``, the GPU
#: pass) builds every preset
SLOW_LADDERS = {"matmul_mma": "k13/k14's unrolled tensor-core tiles: 100-300 s each to PTX, 954 s for 9 rows on 2 cores"}


def quick() -> bool:
    """Whether this gate is the quick one (SIMT_TILES_GATE_QUICK=1)."""
    return os.environ.get("SIMT_TILES_GATE_QUICK") == "1"


def quick_skips(ladder: str, preset: str) -> bool:
    """Whether the quick gate leaves this row to the full one (its ``slices=True`` forms too:
    :func:`quick_skips_params`): the presets a GPU user runs are
    built; a rung's ``"sim"`` and ``"sim_*"`` presets (the simulator tests' tiny tiles, run on a GPU only by
    the GPU test pass, whose full gate builds them) are not — except for the :data:`SLOW_LADDERS`, whose
    ``"sim"`` preset is the only one built, as the cheap proof that their kernels assemble."""
    if not quick():
        return False
    return preset != "sim" if ladder in SLOW_LADDERS else preset == "sim" or preset.startswith("sim_")


def quick_skips_params(params: dict) -> bool:
    """Whether the quick gate leaves a rung's ``gate.params`` form to the full one: ``slices=True``, a stack of
    slices on grid z (``_common.on_grid_z``: the same kernel body with a z offset; the full gate, run by the GPU
    pass, checks its registers)."""
    return quick() and bool(params.get("slices"))


def jobs(ladder: list[str] | None = None, variant: list[str] | None = None) -> list[Job]:
    """The gate's rows: each rung's presets × (float32, float64) × its ``gate.params`` (the quick gate
    leaves some presets to the full one: :func:`quick_skips`)."""
    all_ladders = ladders()
    for name, choices in (("ladder", ladder), ("variant", variant)):
        known = set(all_ladders) if name == "ladder" else {r for rs in all_ladders.values() for r in rs}
        bad = sorted(set(choices or ()) - known)
        if bad:
            raise ValueError(f"{name}: expected some of {sorted(known)}; got {bad}")
    out = []
    for lad, rungs in all_ladders.items():
        if ladder and lad not in ladder:
            continue
        for rung in rungs.values():
            if variant and rung.name not in variant:
                continue
            for preset in rung.presets:
                if quick_skips(lad, preset):
                    continue  # quick_skips says why; the full gate builds it
                for dtype in ("float32", "float64", "float16", "bfloat16"):
                    if not rung.gate.builds(preset, dtype):
                        continue  # a float32-only preset, or a dtype whose kernel is another rung's
                    for params in rung.gate.params:
                        if quick_skips_params(params):
                            continue  # quick_skips_params says why; the full gate builds it
                        out.append(Job(lad, rung.name, preset, dtype, tuple(params.items())))
    return out


_WORKER: dict = {}


def _init_worker(assembler: Assembler, cubin_dir: str | None = None) -> None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    _WORKER["assembler"] = assembler
    _WORKER["cubin_dir"] = cubin_dir


def _run_job(job: Job) -> GateRow:
    if "ladders" not in _WORKER:
        _WORKER["ladders"] = ladders()
    rung = _WORKER["ladders"][job.ladder][job.rung]
    if job.config is not None:
        rung = dataclasses.replace(rung, presets={job.preset: job.config})
    return compile_one(rung, job.preset, job.dtype, _WORKER["assembler"], None, job.ladder, dict(job.params),
                       _WORKER.get("cubin_dir"))


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_gate(out=sys.stdout, ladder=None, variant=None, n_jobs: int | None = None,
             ptxas: str | None = None, cubin_dir: str | None = None) -> list[GateRow]:
    """Compile and check every selected row, printing each as it finishes; the rows, in gate order."""
    if SIMULATOR:
        raise RuntimeError(
            "compile gate: Numba's simulator is loaded; run with NUMBA_ENABLE_CUDASIM=0 "
            "(python -m simt_tiles compile-gate does)"
        )
    todo = jobs(ladder, variant)
    assembler = find_assembler(ptxas)
    n_jobs = max(1, min(n_jobs or default_jobs(), len(todo) or 1))
    print(f"compile gate: {len(todo)} kernels, PTX .version {'.'.join(map(str, nvvm_ptx_isa()))} for "
          f"sm_{CC[0]}{CC[1]} assembled by {assembler}; {n_jobs} worker process(es)", file=out, flush=True)
    print(ROW_HEAD, file=out, flush=True)
    if cubin_dir:
        os.makedirs(cubin_dir, exist_ok=True)
    return _run_jobs(todo, assembler, n_jobs, lambda row: print(format_row(row), file=out, flush=True),
                     cubin_dir)


def _run_jobs(todo: list[Job], assembler: Assembler, n_jobs: int, done=None,
              cubin_dir: str | None = None) -> list[GateRow]:
    """Every job's row, in ``todo``'s order; ``done(row)`` as each finishes."""
    rows: dict[int, GateRow] = {}
    if n_jobs == 1:
        _init_worker(assembler, cubin_dir)
        for i, job in enumerate(todo):
            rows[i] = _run_job(job)
            if done:
                done(rows[i])
    else:
        # spawn: fresh interpreters that load Numba's real target (the environment says CUDASIM=0
        # while they start; the caller's environment is restored after: a test process that called
        # the gate must not believe afterwards that a GPU target was chosen)
        before = os.environ.get("NUMBA_ENABLE_CUDASIM")
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
        try:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(n_jobs, mp_context=ctx, initializer=_init_worker,
                                     initargs=(assembler, cubin_dir)) as pool:
                futures = {pool.submit(_run_job, job): i for i, job in enumerate(todo)}
                for fut in as_completed(futures):
                    rows[futures[fut]] = fut.result()
                    if done:
                        done(rows[futures[fut]])
        finally:
            if before is None:
                os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
            else:
                os.environ["NUMBA_ENABLE_CUDASIM"] = before
    return [rows[i] for i in range(len(todo))]


ROW_HEAD = (f"{'ladder':<11} {'kernel':<26} {'preset':<14} {'dtype':<7} {'regs':>4} {'smem B':>6} "
            f"{'stack':>5} {'spill':>5} {'ld.sh(wide)':>11}  status  [config]")


def format_row(r: GateRow) -> str:
    status = "ok" if r.ok else "FAIL: " + r.problem
    if r.ok and r.smem_exception and r.smem != r.smem_declared:
        status += f" (smem declared {r.smem_declared} B: {r.smem_exception})"
    lds = "-" if r.lds is None else f"{r.lds} ({r.lds_wide})"
    return (f"{r.ladder:<11} {r.rung:<26} {r.preset:<14} {r.dtype:<7} {_n(r.registers):>4} {_n(r.smem):>6} "
            f"{_n(r.stack):>5} {'-' if r.error else str(r.spills):>5} {lds:>11}  {status}  [{r.config}]")


def format_table(rows: list[GateRow], assembler="") -> str:
    return "\n".join([f"compile gate: PTX for sm_{CC[0]}{CC[1]} assembled by {assembler or 'ptxas'}",
                      ROW_HEAD, *map(format_row, rows)])


def _n(v) -> str:
    return "-" if v is None else str(v)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="simt-tiles compile-gate",
        description="Compile every shipped config of every rung to PTX for sm_90 and assemble it (no GPU "
                    "needed): fails on compile errors, local memory in spill-free rungs, and static shared "
                    "memory that differs from the config's smem_bytes.")
    p.add_argument("--ladder", action="append", metavar="NAME", help="only this ladder (repeatable)")
    p.add_argument("--variant", action="append", metavar="RUNG", help="only this rung (repeatable)")
    p.add_argument("-j", "--jobs", type=positive_int, default=None,
                   help=f"worker processes (default: the usable cores, {default_jobs()} here)")
    p.add_argument("--keep-cubins", metavar="DIR", default=os.environ.get("SIMT_TILES_GATE_CUBINS"),
                   help="write every assembled cubin and its PTX to DIR (default: $SIMT_TILES_GATE_CUBINS; "
                        "the SASS and PTX tests read them there instead of compiling again)")
    p.add_argument("--ptxas", metavar="PATH",
                   help="assemble with this ptxas (checked against the PTX version) instead of nvJitLink")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        rows = run_gate(ladder=args.ladder, variant=args.variant, n_jobs=args.jobs, ptxas=args.ptxas,
                        cubin_dir=args.keep_cubins)
    except (AssemblerError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    bad = [r for r in rows if not r.ok]
    for r in bad:
        print("FAILED " + format_row(r))
    print(f"compile gate: {len(rows) - len(bad)} of {len(rows)} configs ok "
          f"({time.perf_counter() - t0:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
