"""The one small runtime layer every kernel in simt_tiles stands on.

* **Simulator or GPU** — :data:`SIMULATOR` says which target Numba loaded.
* **jit options** — :func:`jit` drops the options the simulator rejects
  (``lineinfo``, ``max_registers``, ``launch_bounds``, ...), so kernel files
  can state their GPU options unconditionally.
* **Tile configurations** — :class:`TileConfig`, a frozen dataclass that
  validates itself at construction (threads per block, static shared memory,
  and each kernel's own divisibility rules) and raises :class:`ConfigError`
  naming the field, its value and the rule.
* **Launch geometry** — :func:`cdiv` and :func:`grid_for`.
* **Rungs** — :class:`Rung` (a kernel factory plus its presets, geometry,
  signature, jit options and its tuning space; a family may subclass it), the
  compile cache, dynamic shared memory (:func:`allow_dynamic_smem`),
  :func:`fits` (the limits a tuning candidate must keep) and :func:`pick_rung`.

Arrays in and out of the public functions (NumPy, Numba, CuPy, PyTorch,
DLPack; ``out=``; streams) are :mod:`simt_tiles.interop`'s business.

``cuda`` is imported here at module level, once: the simulator and the real
target are chosen by Numba at that import (see :mod:`simt_tiles._probe`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import threading
from typing import Any, Callable, Iterable, NamedTuple

import numba
import numpy as np
from numba import cuda

from . import _numba_fixes
from .interop import SUPPORTED_FLOATS

__all__ = [
    "SIMULATOR",
    "SMEM_ALIGN",
    "ConfigError",
    "TileConfig",
    "jit",
    "GPU_ONLY_JIT_OPTIONS",
    "cdiv",
    "grid_for",
    "numba_dtype",
    "SUPPORTED_FLOATS",
    "Gate",
    "Rung",
    "pick_rung",
    "rung_dict",
    "Plan",
    "fits",
    "SM_SMEM",
    "MAX_DYNAMIC_SMEM",
    "allow_dynamic_smem",
]

#: True when Numba runs kernels in its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).
SIMULATOR: bool = bool(numba.config.ENABLE_CUDASIM)
if SIMULATOR:  # shared arrays first allocated under a lock (a race otherwise); a block's driver
    # that lets its threads run while it waits (3-4x faster simulated kernels): simt_tiles._numba_fixes
    _numba_fixes.apply_simulator_shared_lock()
    _numba_fixes.apply_simulator_block_yield()

#: ``alignment=`` for shared arrays read with 128-bit loads.  The simulator
#: rejects any alignment other than None (RuntimeError), so kernels pass this.
SMEM_ALIGN = None if SIMULATOR else 16


# ---------------------------------------------------------------------------
# jit options
# ---------------------------------------------------------------------------

#: Options the GPU target understands and the simulator's ``jit`` rejects
#: (TypeError or NotImplementedError there).
GPU_ONLY_JIT_OPTIONS = frozenset(
    {"lineinfo", "max_registers", "launch_bounds", "link", "lto", "forceinline", "cache", "opt"}
)


def jit(pyfunc: Callable, **options: Any):
    """``cuda.jit(**options)(pyfunc)``, minus the options the simulator rejects.

    In the simulator a kernel's threads run under ``np.errstate(all="ignore")``
    (:class:`_QuietThreads`): it evaluates the kernel on NumPy scalars, which warn
    where the GPU silently computes inf or NaN (inf − inf in a softmax row of
    infinities, 0·inf in a filter) — users would see kernel source lines as warnings."""
    if not SIMULATOR:
        _compile_time_fixes()
        return cuda.jit(**options)(pyfunc)
    options = {k: v for k, v in options.items() if k not in GPU_ONLY_JIT_OPTIONS}
    kernel = cuda.jit(**options)(pyfunc)
    if not options.get("device") and hasattr(kernel, "fn"):
        kernel.fn = _QuietThreads(kernel.fn)
    return kernel


_FIXES_LOCK = threading.Lock()


@functools.cache
def _compile_time_fixes() -> None:
    """numba-cuda's two quadratic compile steps made linear, before the first real-target kernel
    (the same PTX; a third or more off a conv rung's compile): :mod:`simt_tiles._numba_fixes`.
    Under a lock: threads' first kernels at once must not patch Numba twice."""
    with _FIXES_LOCK:
        _numba_fixes.apply()


class _QuietThreads:
    """A simulated kernel's function, called under ``np.errstate(all="ignore")``.

    NumPy's error state is per thread (a context variable) and every simulated
    CUDA thread is a fresh Python thread, so it is set here, inside each one.
    ``__globals__`` is the kernel's: the simulator swaps the ``cuda`` module in it."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__globals__ = fn.__globals__
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        with np.errstate(all="ignore"):
            return self.fn(*args)


def numba_dtype(dtype) -> numba.types.Type:
    """The Numba scalar type for a NumPy dtype (used for shared arrays, accumulators)."""
    return numba.from_dtype(np.dtype(dtype))


#: what a kernel built for 16-bit floats is given as its dtype: float16 itself, and bfloat16 as its ``uint16``
#: bits (NumPy has no bfloat16 without ml_dtypes, Numba no bfloat16 array type), so a rung that takes 16-bit
#: inputs reads ``np.uint16`` as bfloat16 (no rung takes integers of that width)
HALF_STORAGE = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(np.uint16)}


def storage_dtype(dtype) -> np.dtype:
    """The dtype a kernel is built and launched for: ``"bfloat16"`` → ``uint16`` (its bits), else ``np.dtype(dtype)``."""
    return HALF_STORAGE["bfloat16"] if isinstance(dtype, str) and dtype == "bfloat16" else np.dtype(dtype)


def dtype_label(dtype) -> str:
    """The name of a kernel's dtype as a user reads it (gate rows, errors): ``uint16`` → ``"bfloat16"``."""
    dtype = storage_dtype(dtype)
    return "bfloat16" if dtype == HALF_STORAGE["bfloat16"] else dtype.name


# ---------------------------------------------------------------------------
# Tile configurations
# ---------------------------------------------------------------------------


class ConfigError(ValueError):
    """A tile configuration breaks a rule; the message names field, value and rule."""


@dataclasses.dataclass(frozen=True)
class TileConfig:
    """Base of every kernel's configuration: a small, hashable, validated value.

    Subclasses declare integer fields and override :meth:`block`,
    :meth:`smem_bytes` and (optionally) :meth:`rules`.  Validation happens in
    ``__post_init__``, so an invalid configuration can never exist.
    """

    #: hardware limits checked for every config (sm_90; static shared memory)
    MAX_THREADS = 1024
    MAX_STATIC_SMEM = 48 * 1024

    def block(self) -> tuple[int, ...]:
        """CUDA block shape (threads) this config launches with."""
        raise NotImplementedError

    def smem_bytes(self, itemsize: int) -> int:
        """Static shared memory per block for elements of ``itemsize`` bytes."""
        return 0

    def rules(self) -> Iterable[tuple[str, bool, str]]:
        """Kernel-specific rules: ``(field, holds, rule text)`` triples."""
        return ()

    @property
    def threads(self) -> int:
        return math.prod(self.block())

    def __post_init__(self) -> None:
        name = type(self).__qualname__
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(
                    f"{name}.{f.name} = {value!r}: expected a positive int"
                )
        for field, holds, rule in self.rules():
            if not holds:
                raise ConfigError(
                    f"{name}.{field} = {getattr(self, field)!r} breaks the rule: {rule} ({self})"
                )
        if self.threads > self.MAX_THREADS:
            raise ConfigError(
                f"{name}: block {self.block()} has {self.threads} threads; "
                f"the rule is threads per block <= {self.MAX_THREADS} ({self})"
            )
        self.check_smem(np.dtype(np.float32))  # float64 is checked when a kernel is built

    def for_problem(self, *shape: int) -> "TileConfig":
        """This config fitted to one problem's shape (compile-time fields a launcher
        derives from the data, e.g. softmax k04's values per thread).  Default: itself."""
        return self

    def check_smem(self, dtype) -> None:
        """Raise ConfigError if this config needs too much static shared memory for ``dtype``."""
        dtype = np.dtype(dtype)
        smem = self.smem_bytes(dtype.itemsize)
        if smem > self.MAX_STATIC_SMEM:
            raise ConfigError(
                f"{type(self).__qualname__}: needs {smem} bytes of static shared memory for "
                f"{dtype.name}; the rule is <= {self.MAX_STATIC_SMEM} bytes ({self})"
            )


# ---------------------------------------------------------------------------
# Launch geometry
# ---------------------------------------------------------------------------


def cdiv(n: int, d: int) -> int:
    """Ceiling division: number of tiles of size ``d`` covering ``n`` items."""
    return -(-n // d)


def grid_for(extents: tuple[int, ...], per_block: tuple[int, ...]) -> tuple[int, ...]:
    """Blocks per grid dimension so that ``per_block`` items each cover ``extents``."""
    return tuple(cdiv(n, b) for n, b in zip(extents, per_block))


# ---------------------------------------------------------------------------
# Rungs: a kernel factory plus what is needed to configure, build and launch it
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Gate:
    """What the compile gate (:mod:`simt_tiles.compile_gate`) builds of a rung and requires of it;
    a rung whose gate differs from the default says why in its RUNG line."""

    #: extra compile-time parameters the factory and signature take (e.g. a reduction's operator),
    #: one dict per kernel the gate must build
    params: tuple = ({},)
    #: dtypes built; a rung whose kernel for a dtype *is* another rung's (and is gated there) leaves it out
    dtypes: tuple = ("float32", "float64")
    #: presets also built for float16 and bfloat16 (a rung that takes 16-bit inputs: the presets its users run)
    half: tuple = ()
    #: presets built for float16 and bfloat16 only (a 16-bit preset: e.g. several 2-byte values a load)
    half_only: tuple = ()
    #: presets built for float32 only (besides those named ``*_float32``): e.g. tuning candidates of
    #: a rung whose float64 default is another rung's
    float32_only: tuple = ()
    #: a preset that spills (or has a stack frame) fails the gate
    spill_free: bool = True
    #: the assembler's static shared memory must equal the config's ``smem_bytes``; a rung where they
    #: differ on purpose says why here (empty: they must match)
    smem_exception: str = ""

    def builds(self, preset: str, dtype: str) -> bool:
        """Whether the gate builds ``preset`` in ``dtype``."""
        if dtype in HALF_STORAGE:
            return preset in self.half or preset in self.half_only
        if dtype not in self.dtypes or preset in self.half_only:
            return False
        return dtype == "float32" or not (preset.endswith("_float32") or preset in self.float32_only)


@dataclasses.dataclass(frozen=True, eq=False)
class Rung:
    """One rung of a ladder: the pieces a kernel file exports.

    ``factory(config, dtype)`` returns the *Python* kernel function (closing
    over the config's constants); :meth:`kernel` jit-compiles it once per
    ``(config, dtype)``.  ``geometry(config, *problem)`` returns
    ``(grid, block)``.  ``signature(dtype)`` is the Numba signature the kernel
    is compiled for (also used by the PTX compile gate).
    """

    name: str
    config_type: type
    presets: dict
    factory: Callable
    geometry: Callable
    signature: Callable
    #: options for ``cuda.jit`` per (config, dtype).  The default, launch bounds of
    #: the config's block size, makes ptxas keep registers within what a block of
    #: that size may use (65536 / threads), so every valid config can launch.
    jit_options: Callable = lambda config, dtype: {"launch_bounds": (config.threads,)}
    #: bytes of dynamic shared memory a launch needs, per (config, dtype)
    dynamic_smem: Callable = lambda config, dtype: 0
    #: what the compile gate builds and requires (:class:`Gate`)
    gate: Gate = Gate()
    #: the configs :mod:`simt_tiles.autotune` times for one problem: a tuple, or a function
    #: ``(problem: dict, dtype) -> iterable`` of preset names (skipped where this rung has no such
    #: preset), dicts of fields replacing the "default" preset's, or config objects; see :meth:`candidates`
    tuning_space: Callable | tuple = ()

    def resolve_config(self, config) -> TileConfig:
        """A config object from ``None`` (the preset for this target), a preset
        name, or a config object of this rung's type."""
        if config is None:
            config = "sim" if SIMULATOR else "default"
        if isinstance(config, str):
            try:
                return self.presets[config]
            except KeyError:
                raise ValueError(
                    f"config: {self.name} has no preset {config!r}; "
                    f"expected one of {sorted(self.presets)}"
                ) from None
        if not isinstance(config, self.config_type):
            raise TypeError(
                f"config: expected a preset name or a {self.config_type.__module__}."
                f"{self.config_type.__qualname__} for {self.name}; got {config!r}"
            )
        return config

    def candidates(self, problem: dict, dtype, space=None) -> list:
        """The valid configs of ``space`` (default :attr:`tuning_space`) for one ``problem`` (the family's fields, e.g.
        ``{"m": .., "n": .., "k": .., "sms": ..}``), in declared order, without duplicates.

        An entry that breaks the config's own rules (ConfigError) or :func:`fits` is left out,
        as is a preset name this rung does not have: a space may name presets another branch adds."""
        space = self.tuning_space if space is None else space  # a family's Tunable may give the space
        space = space(problem, dtype) if callable(space) else space
        out: list = []
        for entry in space:
            try:
                if isinstance(entry, str):
                    if entry not in self.presets:
                        continue
                    cfg = self.presets[entry]
                elif isinstance(entry, dict):
                    cfg = dataclasses.replace(self.presets["default"], **entry)
                else:
                    cfg = self.resolve_config(entry)
            except (ConfigError, TypeError):
                continue
            if fits(cfg, dtype, self.dynamic_smem(cfg, np.dtype(dtype))) is None and cfg not in out:
                out.append(cfg)
        return out

    def kernel(self, config: TileConfig, dtype, **params):
        """The compiled kernel for ``config``, ``dtype`` and any extra compile-time
        ``params`` the rung's factory takes (cached; compiled once however many threads ask at once)."""
        key = (self, config, np.dtype(dtype), tuple(sorted(params.items())))
        if key in _BUILT:
            return _compiled(*key)
        return _compile_once(key)

    def run(self, config: TileConfig, call) -> None:
        """Launch this rung for one call: ``call`` is the family's description of it (e.g.
        :class:`simt_tiles.kernels.matmul._common.Call`), with ``dtype``, ``problem`` (what
        :attr:`geometry` takes after the config) and ``args`` (the kernel's arguments) and
        ``stream``, and optionally ``params`` (the factory's compile-time parameters, a dict).
        A rung whose launch is more than one kernel, or whose arguments depend on the call (a
        filter compiled in, padded copies, split-K partials), overrides this."""
        grid, block = self.geometry(config, *call.problem)
        self.launch(config, call.dtype, grid, block, call.stream, *call.args, params=getattr(call, "params", None))

    def launch(self, config: TileConfig, dtype, grid, block, stream, *args, params=None) -> None:
        """Launch the kernel of ``config``, ``dtype`` and compile-time ``params`` (a dict, see
        :meth:`kernel`) with its :attr:`dynamic_smem` bytes of dynamic shared memory
        (:func:`allow_dynamic_smem` first, so more than 48 KiB works).  Every kernel a family
        launches for its rungs goes through here or a rung's own :meth:`run`."""
        kernel = self.kernel(config, dtype, **(params or {}))
        shared = self.dynamic_smem(config, np.dtype(dtype))
        if shared:
            allow_dynamic_smem(kernel, shared)
        kernel[grid, block, stream, shared](*args)


#: the most dynamic shared memory one block may use on sm_90 (227 KiB)
MAX_DYNAMIC_SMEM = 227 * 1024
_OPTED_IN: dict = {}


def allow_dynamic_smem(kernel, nbytes: int) -> None:
    """Let ``kernel`` (a dispatcher compiled for its signature) launch with ``nbytes``
    of dynamic shared memory.

    When static plus dynamic shared memory exceed 48 KiB per block, CUDA wants an
    opt-in per kernel (``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)``;
    without it the launch fails with CUDA_ERROR_INVALID_VALUE — seen on the H200 with
    exactly 48 KiB dynamic plus 256 bytes static), which numba-cuda 0.30 does not
    expose (NVIDIA/numba-cuda#94): this sets it through numba-cuda's own driver
    binding on each compiled overload — the call its ``set_shared_memory_carveout``
    makes for another attribute.  Once per kernel, device and size; nothing in the
    simulator."""
    if SIMULATOR or nbytes <= 0:
        return
    key = (id(kernel), cuda.get_current_device().id)
    if _OPTED_IN.get(key, 0) >= nbytes:
        return
    if nbytes > MAX_DYNAMIC_SMEM:
        raise ConfigError(f"dynamic shared memory: {nbytes} bytes; the rule is <= {MAX_DYNAMIC_SMEM}")
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    for overload in kernel.overloads.values():
        cufunc = overload.library.get_cufunc()
        driver.cuKernelSetAttribute(attr, nbytes, cufunc.handle, cufunc.device.id)
    _OPTED_IN[key] = nbytes


#: shared memory of one SM of sm_90 that blocks may use (228 KiB, less 1 KiB reserved per block)
SM_SMEM = 228 * 1024


def fits(config: TileConfig, dtype, dynamic: int = 0) -> str | None:
    """Why ``config`` cannot run well for ``dtype`` (None: it can): static shared memory over
    48 KiB, or the shared memory of the ``min_blocks`` blocks per SM its launch bounds ask for
    (when it has that field) over :data:`SM_SMEM`, or more registers per thread than those
    blocks leave (65536 / (threads · blocks), at most 255) by the config's own
    ``registers(itemsize)`` estimate, when it has one.  Tuning spaces are pruned with it."""
    dtype = np.dtype(dtype)
    try:
        config.check_smem(dtype)
    except ConfigError as exc:
        return str(exc)
    blocks = getattr(config, "min_blocks", 1)
    smem = config.smem_bytes(dtype.itemsize) + dynamic
    if blocks * (smem + 1024) > SM_SMEM:
        return f"{blocks} blocks of {smem} B shared memory exceed an SM's {SM_SMEM} B"
    estimate = getattr(config, "registers", None)
    if estimate is not None:
        budget = min(255, 65536 // (config.threads * blocks))
        if estimate(dtype.itemsize) > budget:
            return f"~{estimate(dtype.itemsize)} registers per thread; {blocks} blocks leave {budget}"
    return None


def rung_dict(*rungs: Rung) -> dict[str, Rung]:
    """A family's ``RUNGS``: name → rung, in ladder order (the order given)."""
    return {r.name: r for r in rungs}


class Plan(NamedTuple):
    """What one call launches, as a family's ``dispatch`` chose it: ``rung.run(config, call)``."""

    rung: Rung
    config: Any

    def run(self, call) -> None:
        self.rung.run(self.config, call)


def pick_rung(rungs: dict[str, Rung], variant: str | None, best: str) -> Rung:
    """The rung named ``variant`` from a ladder (None: ``best``); ValueError names the choices."""
    name = best if variant is None else variant
    try:
        return rungs[name]
    except (KeyError, TypeError):
        raise ValueError(f"variant: expected one of {tuple(rungs)} or None; got {variant!r}") from None


#: the keys :func:`_compiled` has built, and a lock per key being built: ``functools.lru_cache`` runs
#: a miss in every thread that asks meanwhile — 16 threads' first calls would compile each kernel
#: 16 times, one after another under Numba's compiler lock (minutes for the generated rungs)
_BUILT: set = set()
_BUILDING: dict = {}
_BUILDING_GUARD = threading.Lock()


def _compile_once(key: tuple):
    with _BUILDING_GUARD:
        lock = _BUILDING.setdefault(key, threading.RLock())
    with lock:  # the other threads asking for this kernel wait for it; others' kernels do not
        kernel = _compiled(*key)
        _BUILT.add(key)
    return kernel


@functools.lru_cache(maxsize=None)
def _compiled(rung: Rung, config: TileConfig, dtype: np.dtype, params: tuple = ()):
    config.check_smem(dtype)
    pyfunc = rung.factory(config, dtype, **dict(params))
    sig = rung.signature(dtype, **dict(params))
    options = rung.jit_options(config, dtype)
    if options.get("cache") and not SIMULATOR:
        _note_cold_compile(rung.name, dtype, pyfunc)
    try:
        return jit(pyfunc, **{"func_or_sig": sig, **options})
    except RuntimeError as exc:  # no writable cache directory anywhere: compiled without the disk cache
        if not options.get("cache") or "cannot cache function" not in str(exc):
            raise
        _COMPILE_LOG.warning("simt_tiles: %s (%s) is compiled without Numba's disk cache (%s); set NUMBA_CACHE_DIR "
                             "to a writable directory to keep it", rung.name, dtype, exc)
        return jit(pyfunc, **{"func_or_sig": sig, **{k: v for k, v in options.items() if k != "cache"}})


#: one WARNING line before a first call compiles a disk-cached kernel that has no cache entry
#: (the generated matmul rungs, conv2d's k10: 20-50 s): ``logging.getLogger("simt_tiles.compile")``
_COMPILE_LOG = logging.getLogger("simt_tiles.compile")


def _cache_index_path(pyfunc: Callable) -> str | None:
    """Where Numba's disk cache keeps ``pyfunc``'s index (None: Numba cannot say)."""
    try:
        from numba.cuda.dispatcher import CUDACache

        return CUDACache(pyfunc)._cache_file._index_path
    except Exception:  # noqa: BLE001 - a cache Numba cannot locate (or the simulator): no notice
        return None


def _note_cold_compile(name: str, dtype: np.dtype, pyfunc: Callable) -> None:
    index = _cache_index_path(pyfunc)
    if index is None or os.path.exists(index):  # an entry (for some signature): a load, not a compile
        return
    _COMPILE_LOG.warning("simt_tiles: compiling %s (%s) for this GPU, once (tens of seconds; Numba's disk "
                         "cache keeps it); `simt-tiles warm` compiles the defaults ahead of time", name, dtype)
