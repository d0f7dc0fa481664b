"""Autotuning: time a function's candidate configs on this GPU once, keep the fastest on disk.

    simt-tiles tune matmul --shape 1024x1024x1024 [--dtype float32] [--verbose]
    simt-tiles tune conv2d_nchw --shape 32x64x56x56 --filter 64x3x3 --padding 1
    simt-tiles tune conv2d --shape 8192x8192 --filter 7x7 --mode reflect [--weights device]
    simt-tiles tune --show            # list the cache
    simt-tiles tune --clear           # empty it

:func:`tune` takes a function (``"matmul"``, ``"conv2d_nchw"``, ``"conv2d"``) and one problem, builds
the candidates — every rung's :attr:`~simt_tiles.runtime.Rung.tuning_space` for it,
valid by the config's rules and pruned by :func:`~simt_tiles.runtime.fits` — checks each
against the family's reference and its error bound on a NaN-poisoned output (a wrong
candidate is recorded and never timed, so never chosen), times the rest with the bench
harness (:class:`simt_tiles.bench.harness.Harness`: CUDA events, warm-up, median; an L2
flush before each timed call keeps the Python launch path out of the events) within a
per-problem budget (``budget_s``, 30 s: candidates past it are skipped, the default ones
come first), and stores the winner.

Where defaults come from
    :func:`choose`, which ``matmul``, ``conv2d_nchw`` and (``variant=None``, up to 7 × 7) ``correlate2d``,
    ``convolve2d`` and ``correlate1d`` call when ``config`` is None, answers
    from (a) the user's cache, (b) the table shipped for this GPU (``simt_tiles/tuned/<gpu>.json``,
    written by ``benchmarks/tune_tables.py`` from a tuning run), (c) None: the caller's own
    default.  Nothing is tuned implicitly: only ``autotune=True`` or ``SIMT_TILES_AUTOTUNE=1``
    tunes a problem that (a) and (b) miss.  In the simulator (c) always.  The answer is
    memoised per process: after the first call of a problem, a dict lookup.

The cache
    ``<cache root>/autotune/autotune.json``, the cache root being ``$SIMT_TILES_CACHE_DIR``
    or ``~/.cache/simt_tiles`` (``$XDG_CACHE_HOME``; :func:`simt_tiles.codegen.cache_root`,
    shared with the generated kernels).  One JSON object ``{"format": FORMAT, "entries":
    {key: record}}``; a key joins the GPU name, compute capability, driver version,
    numba-cuda and simt_tiles versions, function, requested variant (``*`` for None), dtype
    and shape bucket, so another GPU's or another version's entry is never used.  Writes go
    to a temporary file renamed over the old one (atomic: a reader sees the old file or the new
    one; two processes storing at once take turns on an ``flock`` of ``autotune.json.lock``, each
    reading the file again under it, so both entries are kept; a write that fails — a read-only
    directory, a full disk — leaves the old file and is an ``OSError`` naming the file, or, after a
    tune, a warning: the choice is then used in this process only).  A file that is not JSON or not
    of this format, and a record whose key does not match its own fields or whose config
    breaks its rung's rules, are ignored with a warning, never trusted.

Shape buckets
    Problems that share a bucket share an entry.  An integer of the problem up to 16 (a
    filter size, a padding, a tiny dimension) is kept exactly; a larger one is rounded up
    to the next of 2ᵉ·{1, 1.25, 1.5, 1.75} (quarter octaves: 1000 and 1024 → 1024,
    1031 → 1280, 2048 → 2048); strings (the dtype) are kept.

Verbose (``verbose=True`` or ``SIMT_TILES_AUTOTUNE_VERBOSE=1``) prints a line per
candidate as it is timed and the table of all of them at the end.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import json
import math
import numbers
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from . import _probe, codegen, devices, registry
from ._options import env_flag, positive_float
from ._version import __version__
from .machine import device_name, l2_bytes, slug_from_name

__all__ = ["choose", "lookup", "tune", "bucket", "dtype_name", "cache_path", "clear", "entries", "register", "Tunable",
           "TuneResult", "AUTOTUNE_ENV", "VERBOSE_ENV", "FORMAT"]

#: set to 1 to tune a problem on its first call when neither the cache nor the shipped table has it
AUTOTUNE_ENV = "SIMT_TILES_AUTOTUNE"
#: set to 1 to print every candidate's check and time
VERBOSE_ENV = "SIMT_TILES_AUTOTUNE_VERBOSE"
#: the cache file's format tag (a file without it is not trusted)
FORMAT = "simt_tiles.autotune/1"
#: the shipped tables' format tag
SHIPPED_FORMAT = "simt_tiles.tuned/1"
SHIPPED_DIR = Path(__file__).parent / "tuned"


# ---------------------------------------------------------------------------
# What can be tuned
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tunable:
    """A public function the tuner knows: its ladder, the names of its problem tuple's
    entries, the rungs it searches and how one problem is set up and checked.

    ``case(problem: dict)`` returns an object with ``poison()``, ``launcher(rung, config)
    -> call``, ``check() -> BoundCheck`` and ``flops(problem)``; ``variants(dtype)`` the rungs
    searched for ``variant=None``; ``parse(shape, options)`` the problem tuple from the
    command line."""

    function: str
    ladder: str
    fields: tuple
    variants: object
    case: object
    parse: object = None
    shape_help: str = ""
    #: rung name → its tuning space for this function (``(problem: dict, dtype) -> iterable``, as
    #: :attr:`simt_tiles.runtime.Rung.tuning_space`, which a rung without an entry here uses)
    spaces: dict = dataclasses.field(default_factory=dict)

    def candidates(self, variant: str, problem: dict, dtype) -> list:
        """The valid configs of ``variant``'s space for ``problem`` (its entry in :attr:`spaces`, else
        the rung's own :attr:`~simt_tiles.runtime.Rung.tuning_space`): :meth:`Rung.candidates`."""
        return _rungs(self.ladder)[variant].candidates(problem, dtype, self.spaces.get(variant))


#: the Tunables loaded so far, by function; a family's line of :data:`simt_tiles.registry.LADDERS` names
#: the functions it can tune and its ``FAMILY.tunables`` holds them (:func:`register` adds others)
_TUNABLES: dict = {}


def register(tunable: Tunable) -> None:
    """Make ``tunable.function`` tunable (a family that is not in the built-in list)."""
    _TUNABLES[tunable.function] = tunable
    _forget()


def tunable(function: str) -> Tunable:
    if function not in _TUNABLES:
        lad = registry.tunable_functions().get(function)
        if lad is None:
            raise ValueError(f"function: expected one of {sorted({*registry.tunable_functions(), *_TUNABLES})}; "
                             f"got {function!r}")
        for t in lad.family().tunables:
            _TUNABLES.setdefault(t.function, t)
    return _TUNABLES[function]


def _rungs(ladder: str) -> dict:
    return registry.ladder(ladder).rungs()


# ---------------------------------------------------------------------------
# Buckets and keys
# ---------------------------------------------------------------------------


def bucket_int(x: int) -> int:
    """``x`` itself up to 16, else the next 2ᵉ·{1, 1.25, 1.5, 1.75} ≥ x (quarter octaves)."""
    if x <= 16:
        return int(x)
    e = math.floor(math.log2(x))
    for q in (4, 5, 6, 7, 8):
        v = (q << e) // 4 if e >= 2 else math.ceil(q * 2**e / 4)
        if v >= x:
            return v
    raise AssertionError("unreachable: 8·2^e/4 = 2^(e+1) > x")


def bucket(problem: tuple) -> str:
    """The shape bucket of a problem tuple, as text (``"1024x1024x1024x float32"`` style)."""
    return "x".join(str(bucket_int(int(p))) if isinstance(p, numbers.Integral) and not isinstance(p, bool)
                    else str(p) for p in problem)  # (NumPy ints too: a shape read off an array buckets as an int)


#: per current GPU ordinal (:func:`simt_tiles.devices.current`): two GPUs may be two models
_MACHINE: dict = {}


def machine() -> dict:
    """The current GPU and this process's software: what a cache entry is keyed by (memoised per GPU)."""
    device = devices.current()
    if device not in _MACHINE:
        info = {"gpu": device_name(), "cc": "sim", "driver": "sim", "simt_tiles": __version__}
        try:
            from importlib.metadata import version

            info["numba_cuda"] = version("numba-cuda")
        except Exception:  # pragma: no cover  (not installed as a distribution)
            info["numba_cuda"] = "unknown"
        import numba

        if not numba.config.ENABLE_CUDASIM:
            from numba import cuda

            info["cc"] = ".".join(map(str, cuda.get_current_device().compute_capability))
            info["driver"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
        _MACHINE[device] = info
    return _MACHINE[device]


_MACHINE_FIELDS = ("gpu", "cc", "driver", "numba_cuda", "simt_tiles")


def _key(mach: dict, function: str, variant, dtype: str, bkt: str) -> str:
    return "|".join([*(str(mach[f]) for f in _MACHINE_FIELDS), function, variant or "*", dtype, bkt])


def _short_key(function: str, variant, dtype: str, bkt: str) -> str:
    """A shipped table's key: its file already names the GPU."""
    return "|".join([function, variant or "*", dtype, bkt])


_DTYPE_NAMES: dict = {}


def dtype_name(dtype) -> str:
    """``np.dtype(dtype).name``, memoised (``.name`` costs microseconds on a hot launch path)."""
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        import numpy as np

        name = np.dtype(dtype).name
        try:
            _DTYPE_NAMES[dtype] = name
        except TypeError:  # unhashable
            pass
        return name


def _dtype_of(t: Tunable, problem: tuple) -> str:
    return str(problem[t.fields.index("dtype")])


# ---------------------------------------------------------------------------
# The cache file
# ---------------------------------------------------------------------------


def cache_path() -> Path:
    """``<cache root>/autotune/autotune.json`` (see the module docstring)."""
    return codegen.cache_root() / "autotune" / "autotune.json"


#: (path, format) → (the file's state when parsed, its object): the latest parse of each file only
_FILES: dict = {}


def _read_json(path: Path, fmt: str) -> dict:
    """The file's object when it is of format ``fmt``; {} (with a warning) when it is not one.
    Parsed once per state of the file (size, modification time, inode); only the latest state is kept.
    Shared: callers must not change it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except OSError:
        st = None
    ident, stamp = (str(path), fmt), st and (st.st_size, st.st_mtime_ns, st.st_ino)
    hit = _FILES.get(ident)
    if st is not None and hit is not None and hit[0] == stamp:
        return hit[1]
    data = _parse_json(path, fmt)
    if st is not None:
        _FILES[ident] = (stamp, data)  # replaces the file's previous state
    return data


def _parse_json(path: Path, fmt: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.warn(f"autotune: {path} is not readable JSON ({exc}); ignored", stacklevel=3)
        return {}
    if not isinstance(data, dict) or data.get("format") != fmt or not isinstance(data.get("entries"), dict):
        warnings.warn(f"autotune: {path} is not a simt_tiles table of format {fmt!r}; ignored", stacklevel=3)
        return {}
    return data


def _entries() -> dict:
    """The user cache's records, shared with the parsed-file cache: read only."""
    return _read_json(cache_path(), FORMAT).get("entries", {})


def entries() -> dict:
    """The user cache's records, by key (a bad file: {} with a warning).  A copy: change it freely."""
    return copy.deepcopy(_entries())


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive ``flock`` on ``<path>.lock`` (a sibling file, never removed): two processes storing at
    once then read, add and replace one after the other.  Where there is no ``fcntl`` (Windows) or the lock
    cannot be taken (a read-only directory, a file system without locks), nothing is held: the later rename
    wins, as before."""
    fd = None
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):
        pass
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # (closing releases the lock)


def _write(entries_: dict) -> None:
    path = cache_path()
    text = json.dumps({"format": FORMAT, "entries": entries_}, indent=1, sort_keys=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".autotune-", suffix=".tmp")
    except OSError as exc:
        raise _unwritable(path, exc) from exc
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        codegen.publish_mode(tmp)  # mkstemp's 0600 would hide a shared cache from its other users
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except BaseException as exc:
        with _suppress():
            os.unlink(tmp)
        if isinstance(exc, OSError):  # a full disk: the old file is intact
            raise _unwritable(path, exc) from exc
        raise


def _unwritable(path: Path, exc: OSError) -> OSError:
    return codegen.os_error(exc.errno, f"autotune: cannot write {path} ({exc.strerror or exc}); set "
                                       f"{codegen.CACHE_ENV} to a writable directory with free space")


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def clear() -> int:
    """Empty the user cache; the number of records removed."""
    path = cache_path()
    with _locked(path):
        n = len(_parse_json(path, FORMAT).get("entries", {}))
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:  # (a read-only directory: the file stays, and so would its entries)
            raise codegen.os_error(exc.errno, f"autotune: cannot remove {path} ({exc.strerror or exc}); delete it "
                                              f"by hand or set {codegen.CACHE_ENV} to another directory") from exc
    _forget()
    return n


def _forget() -> None:
    """What ``config=None`` means may have changed: forget the memoised choices and the launch
    plans recorded with them (:mod:`simt_tiles.launch`, when loaded)."""
    _MEMO.clear()
    launch = sys.modules.get("simt_tiles.launch")
    if launch is not None:
        launch.clear()


def store(function: str, problem: tuple, variant, choice: tuple, **info) -> str:
    """Record ``choice = (variant, config)`` for ``problem`` in the user cache (read, add, atomic
    write, under a lock: another process's entry stored meanwhile is kept); returns the key."""
    t = tunable(function)
    dtype, bkt = _dtype_of(t, problem), bucket(problem)
    key = _key(machine(), function, variant, dtype, bkt)
    rec = {"machine": {f: machine()[f] for f in _MACHINE_FIELDS}, "function": function, "variant": variant,
           "dtype": dtype, "bucket": bkt, "problem": list(problem),
           "choice": {"variant": choice[0], "config": dataclasses.asdict(choice[1])},
           "tuned_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **info}
    path = cache_path()
    with _locked(path):
        all_ = _parse_json(path, FORMAT).get("entries", {})  # read again under the lock, never a memoised state
        all_[key] = rec
        _write(all_)
    _forget()
    return key


def _decode(t: Tunable, rec, dtype: str, where: str):
    """``(variant, config)`` from a record's choice, or None with a warning (never trusted blindly)."""
    # deferred: loads Numba (backend choice first)
    from .runtime import ConfigError, fits

    try:
        variant, fields = rec["choice"]["variant"], rec["choice"]["config"]
        rung = _rungs(t.ladder)[variant]
        cfg = rung.config_type(**fields)
        why = fits(cfg, dtype)
        if why:
            raise ConfigError(why)
        return variant, cfg
    except (KeyError, TypeError, ValueError, ConfigError) as exc:
        warnings.warn(f"autotune: {where}: an entry for {t.function} is not a valid choice ({exc!r}); ignored",
                      stacklevel=4)
        return None


# ---------------------------------------------------------------------------
# Lookup: user cache -> shipped table -> None
# ---------------------------------------------------------------------------


def _shipped(mach: dict) -> dict:
    """The shipped table for this GPU (matched by name and compute capability), or {}."""
    path = SHIPPED_DIR / f"{slug_from_name(mach['gpu'])}.json"
    if not path.exists():
        return {}
    data = _read_json(path, SHIPPED_FORMAT)
    if data.get("gpu") != mach["gpu"] or str(data.get("compute_capability")) != mach["cc"]:
        return {}
    return data.get("entries", {})


def shipped_rules(name: str, gpu_slug: str = "h200"):
    """A rule a shipped table carries besides its entries (e.g. ``"matmul_split_k"``, the
    split-K rows ``matmul(variant=None)`` applies to sizes no entry covers), or None."""
    data = _read_json(SHIPPED_DIR / f"{gpu_slug}.json", SHIPPED_FORMAT)
    return data.get("rules", {}).get(name)


def lookup(function: str, problem: tuple, variant=None, *, sources=("user", "shipped")):
    """``(variant, config, source)`` for ``problem`` from the user cache, then the shipped table;
    None when neither has it.  Not memoised (see :func:`choose`); works in the simulator too."""
    t = tunable(function)
    dtype, bkt = _dtype_of(t, problem), bucket(problem)
    mach = machine()
    if "user" in sources:
        recs, key = _entries(), _key(mach, function, variant, dtype, bkt)
        if key in recs:
            rec = recs[key]
            if not isinstance(rec, dict) or rec.get("function") != function or rec.get("bucket") != bkt \
                    or rec.get("dtype") != dtype or rec.get("machine") != {f: mach[f] for f in _MACHINE_FIELDS}:
                warnings.warn(f"autotune: {cache_path()}: an entry's fields do not match its key; ignored",
                              stacklevel=2)
            else:
                hit = _decode(t, rec, dtype, str(cache_path()))
                if hit is not None:
                    return (*hit, "user")
    if "shipped" in sources:
        rec = _shipped(mach).get(_short_key(function, variant, dtype, bkt))
        if rec is not None:
            hit = _decode(t, rec, dtype, "shipped table")
            if hit is not None:
                return (*hit, "shipped")
    return None


_MEMO: dict = {}
#: held while a problem is tuned (:func:`choose`)
_TUNING = threading.Lock()


def check_argument(autotune) -> None:
    """TypeError naming ``autotune`` unless it is None, True or False (a public function's argument:
    "no" or 2 must not mean True)."""
    if autotune is None or isinstance(autotune, bool):
        return
    import numpy as np  # deferred, as this module's other NumPy uses

    if not isinstance(autotune, np.bool_):
        raise TypeError(f"autotune: expected None, True or False; got {type(autotune).__name__} {autotune!r}")


def _opted_in(autotune) -> bool:
    return bool(autotune) if autotune is not None else env_flag(AUTOTUNE_ENV)


def choose(function: str, problem: tuple, variant=None, autotune=None):
    """``(variant, config)`` for ``problem`` — the user cache, else the shipped table — or None
    (the caller's default).  With ``autotune=True`` (or ``SIMT_TILES_AUTOTUNE=1``) a miss is
    tuned now and stored.  None in the simulator.  Memoised: a repeated call is a dict lookup.

    ``problem`` is the function's problem tuple (hashable), e.g. ``(m, n, k, "float32")`` for
    matmul; ``variant`` the caller's variant (None: any rung).  A function with no
    :class:`Tunable` (neither built in nor :func:`register`-ed) gets None."""
    key = (function, problem, variant, autotune, devices.current())  # each GPU its own choice
    try:
        return _MEMO[key]
    except KeyError:
        pass
    # deferred: loads Numba (backend choice first)
    from .runtime import SIMULATOR

    result = None
    if not SIMULATOR and (function in _TUNABLES or function in registry.tunable_functions()):  # else: not tunable
        hit = lookup(function, problem, variant)
        if hit is not None:
            result = hit[:2]
        elif _opted_in(autotune):
            with _TUNING:  # one tune at a time: two threads' timings on one GPU would spoil each other's
                if key in _MEMO:  # another thread tuned it meanwhile
                    return _MEMO[key]
                result = tune(function, problem, variant).choice
                _MEMO[key] = result
            launch = sys.modules.get("simt_tiles.launch")
            if launch is not None:  # the tuner's launches are no part of this call's launch plan
                launch.no_plan("autotune tuned this problem during the call")
    _MEMO[key] = result
    return result


# ---------------------------------------------------------------------------
# Tuning
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class TuneResult:
    """The winner (``choice``: (variant, config), or None when no candidate passed), every
    candidate's harness row, the seconds the tune took and the cache key it was stored under."""

    function: str
    problem: tuple
    choice: tuple | None
    rows: list
    seconds: float
    key: str | None = None

    def table(self) -> str:
        """One line per candidate, fastest first; failures and skips last."""
        rows = sorted(self.rows, key=lambda r: (r.get("median_ms") is None, r.get("median_ms") or 0))
        best = rows[0].get("median_ms") if rows else None
        out = [f"autotune {self.function} {'x'.join(map(str, self.problem))}: {len(self.rows)} candidates, "
               f"{self.seconds:.1f} s",
               f"  {'rank':>4} {'variant':<22} {'ms':>9} {'rel':>6} {'TFLOP/s':>8}  config"]
        for i, r in enumerate(rows, 1):
            if r.get("median_ms") is not None:
                t = f"{r['median_ms']:9.4f} {r['median_ms'] / best:6.2f} {r.get('tflops', 0):8.2f}"
            else:
                t = f"{r.get('status', 'FAIL'):>9} {'':>6} {'':>8}"
            out.append(f"  {i:>4} {r['variant']:<22} {t}  {r['config']}")
        return "\n".join(out)


class _Quiet:
    """A harness progress that prints nothing (verbose off) or plain lines (verbose on)."""

    def __init__(self, verbose: bool, total: int):
        self.verbose, self.total, self.n = verbose, total, 0

    def step(self, text: str) -> None:
        pass

    def done(self, line: str) -> None:
        self.n += 1
        if self.verbose:
            print(f"[{self.n}/{self.total}]{line}", flush=True)


def _flush_before():
    """An untimed GPU workload before each timed call (≈ 1 ms of writes over 10× L2, then a read of
    it): the events then bracket GPU time, not the Python launch path, and every call starts with a
    cold and clean L2 (``timing.time_cuda``; writes alone leave dirty lines whose write-backs the
    timed call would pay, more for candidates that move more bytes: benchmarks/notes/method.md)."""
    import numpy as np
    from numba import cuda

    # deferred: loads Numba (backend choice first)
    from .runtime import cdiv, jit

    n = max(128 * 2**20, 10 * (l2_bytes() or 0)) // 4
    buf = cuda.device_array(n, np.float32)

    sink = cuda.device_array(1, np.float32)

    def fill(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = 0.0

    def read(x, out):
        i = cuda.grid(1)
        if i < x.size and x[i] != 0.0:  # the buffer holds zeros: every value read, nothing written
            out[0] = x[i]

    kernel, reader = jit(fill), jit(read)
    grid = cdiv(n, 256)

    def before():
        for _ in range(4):
            kernel[grid, 256](buf)
        reader[grid, 256](buf, sink)

    return before


def candidates(function: str, problem: tuple, variant=None) -> list:
    """``[(variant, config)]`` the tuner times for ``problem``: the default choice first."""
    t = tunable(function)
    rungs = _rungs(t.ladder)
    if variant is not None and (not isinstance(variant, str) or variant not in rungs):
        raise ValueError(f"variant: expected one of {sorted(rungs)} or None; got {variant!r}")
    pdict = dict(zip(t.fields, problem))
    dtype = pdict["dtype"]
    import numba

    if not numba.config.ENABLE_CUDASIM:
        from numba import cuda

        pdict["sms"] = int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    names = [variant] if variant is not None else list(t.variants(dtype))
    out = [(v, cfg) for v in names for cfg in t.candidates(v, pdict, dtype)]
    prior = lookup(function, problem, variant, sources=("shipped",))
    if prior is not None and prior[:2] in out:  # the shipped choice first: a budget cut keeps it
        out.remove(prior[:2])
        out.insert(0, prior[:2])
    return out


def tune(function: str, problem: tuple, variant=None, *, budget_s: float = 30.0, verbose=None, progress=False,
         store_result=True, reps: int = 20, warmup: int = 3, timer=None, sync=None, before=None,
         extra_candidates=()) -> TuneResult:
    """Check, then time every candidate for ``problem`` (see the module docstring); store and
    return the fastest that passed.  ``verbose``: a line per candidate and the table at the end;
    ``progress``: the lines only.  ``timer``/``sync``/``before`` replace the harness's CUDA ones
    (tests); ``extra_candidates`` are ``(variant, config)`` pairs timed besides the space."""
    # deferred: loads Numba (backend choice first)
    from .bench.harness import Harness

    t0 = time.perf_counter()
    t = tunable(function)
    problem = tuple(problem)
    if len(problem) != len(t.fields):
        raise ValueError(f"problem: expected {len(t.fields)} values {t.fields}; got {problem!r}")
    verbose = env_flag(VERBOSE_ENV) if verbose is None else bool(verbose)
    cands = candidates(function, problem, variant) + [c for c in extra_candidates]
    pdict = dict(zip(t.fields, problem))
    case = t.case(pdict)
    if before is None and timer is None:
        before = _flush_before()
    rungs = _rungs(t.ladder)
    progress = _Quiet(verbose or progress, len(cands))
    per_entry = max(0.05, min(1.0, budget_s / max(1, 3 * len(cands))))
    h = Harness(reps=reps, warmup=warmup, budget_s=per_entry, timer=timer, sync=sync, before=before,
                progress=progress)
    rows = []
    for v, cfg in cands:
        text = _config_text(rungs[v], cfg)
        if time.perf_counter() - t0 > budget_s:
            rows.append({"variant": v, "config": text, "status": "skipped", "passed": False, "cfg": cfg})
            progress.done(f"  {v:<22} skipped (budget of {budget_s:g} s spent)  {text}")
            continue
        try:
            fn = case.launcher(rungs[v], cfg)
        except Exception as exc:  # noqa: BLE001  (a candidate that cannot build is a failed row)
            def fn(exc=exc):
                raise exc
        case.poison()
        row = h.entry(function, bucket(problem), f"{v} [{text}]", fn, check=case.check, flops=case.flops(pdict),
                      config=text)
        row.update(variant=v, cfg=cfg)
        if not row["passed"]:
            row["status"] = "FAIL"
        rows.append(row)
    timed = [r for r in rows if r.get("median_ms") is not None]
    choice = None
    if timed:
        best = min(timed, key=lambda r: r["median_ms"])
        choice = (best["variant"], best["cfg"])
    result = TuneResult(function, problem, choice, [{k: v for k, v in r.items() if k != "cfg"} for r in rows],
                        time.perf_counter() - t0)
    if choice is not None and store_result:
        try:
            result.key = store(function, problem, variant, choice, median_ms=min(r["median_ms"] for r in timed),
                               candidates=len(rows), tune_seconds=round(result.seconds, 2))
        except OSError as exc:  # the tune is not lost: this process uses the choice
            warnings.warn(f"{exc}; the tuned choice is used in this process only", stacklevel=2)
    if verbose:
        print(result.table(), flush=True)
    return result


def _config_text(rung, cfg) -> str:
    """The fields where ``cfg`` differs from the rung's default preset (``default`` if none)."""
    base = rung.presets.get("default")
    diff = [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
            if base is None or getattr(cfg, f.name) != getattr(base, f.name)]
    return ",".join(diff) or "default"


# ---------------------------------------------------------------------------
# Command line: simt-tiles tune
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("function", nargs="?", help=f"what to tune: {', '.join(registry.tunable_functions())}")
    p.add_argument("--shape", help="the problem: matmul N or MxNxK; conv2d_nchw NxCxHxW (with --filter); conv2d HxW")
    p.add_argument("--filter", help="conv2d_nchw: C_OUTxKHxKW (default: C_in x 3 x 3); conv2d: KHxKW (default 3x3)")
    p.add_argument("--padding", type=int, default=None, help="conv2d_nchw: zero padding on each side (default KH//2)")
    p.add_argument("--mode", default=None, help="conv2d: the boundary mode (default reflect)")
    p.add_argument("--weights", default=None, choices=["host", "device"],
                   help="conv2d: a NumPy filter (host, the default) or a device array's")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--variant", default=None, help="tune this rung's configs only (default: the function's rungs)")
    p.add_argument("--budget-s", type=positive_float, default=30.0, help="seconds for one tune (default 30)")
    p.add_argument("--verbose", action="store_true", help="print every candidate (also SIMT_TILES_AUTOTUNE_VERBOSE=1)")
    p.add_argument("--show", action="store_true", help="list the cache and exit")
    p.add_argument("--clear", action="store_true", help="empty the cache and exit")


def show() -> str:
    """The cache as text: one line per record."""
    recs = entries()
    lines = [f"{cache_path()}: {len(recs)} entries"]
    for rec in sorted(recs.values(), key=_show_order):
        try:
            m, c = rec["machine"], rec["choice"]
            cfg = ",".join(f"{k}={v}" for k, v in c["config"].items())
            lines.append(f"  {m['gpu']} (cc {m['cc']}, driver {m['driver']}, numba-cuda {m['numba_cuda']}, "
                         f"simt_tiles {m['simt_tiles']}) {rec['function']} variant={rec['variant'] or '*'} "
                         f"{rec['dtype']} {rec['bucket']} -> {c['variant']} [{cfg}] "
                         f"{rec.get('median_ms', float('nan')):.4f} ms")
        except (KeyError, TypeError, AttributeError, ValueError):  # (ValueError: a median that is no number)
            lines.append(f"  (an unreadable entry: {str(rec)[:80]})")
    return "\n".join(lines)


def _show_order(rec) -> tuple:
    """:func:`show`'s order (GPU, function, bucket), as text: a record edited by hand (not an object, a
    field of another type) is listed, not a crash."""
    if not isinstance(rec, dict):
        return ("", "", "")
    mach = rec.get("machine")
    return tuple(str(v) for v in (mach.get("gpu", "") if isinstance(mach, dict) else "", rec.get("function", ""),
                                  rec.get("bucket", "")))


def run(args) -> int:
    if args.clear:
        try:
            print(f"autotune: removed {clear()} entries from {cache_path()}")
        except OSError as exc:
            print(f"simt-tiles tune: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.show:
        print(show())
        return 0
    if not args.function or not args.shape:
        print("simt-tiles tune: expected FUNCTION and --shape (or --show / --clear)", file=sys.stderr)
        return 2
    known = {*registry.tunable_functions(), *_TUNABLES}  # (the name is checked before Numba loads)
    if args.function not in known:
        print(f"simt-tiles tune: function: expected one of {sorted(known)}; got {args.function!r}", file=sys.stderr)
        return 2
    if _probe.select_backend():
        print("simt-tiles tune: needs a CUDA GPU (the simulator has no timings to compare)", file=sys.stderr)
        return 2
    try:
        t = tunable(args.function)
        problem = t.parse(args.shape, {"filter": args.filter, "padding": args.padding, "dtype": args.dtype,
                                       "mode": args.mode, "weights": args.weights})
        rungs = _rungs(t.ladder)
        if args.variant is not None and args.variant not in rungs:
            raise ValueError(f"--variant: expected one of {sorted(rungs)}; got {args.variant!r}")
    except ValueError as exc:
        print(f"simt-tiles tune: {exc}", file=sys.stderr)
        return 2
    res = tune(args.function, problem, args.variant, budget_s=args.budget_s, verbose=True if args.verbose else None,
               progress=True)
    if res.choice is None:
        print("autotune: no candidate passed its check; nothing stored", file=sys.stderr)
        return 1
    v, cfg = res.choice
    print(f"autotune: {args.function} {'x'.join(map(str, problem))} -> {v} "
          f"[{_config_text(_rungs(t.ladder)[v], cfg)}] in {res.seconds:.1f} s; stored in {cache_path()}")
    return 0


def parse_ints(text: str, name: str, count: tuple) -> list:
    """``"AxBxC"`` → [A, B, C] with ``len`` in ``count``; ValueError naming ``name`` otherwise."""
    try:
        parts = [int(p) for p in str(text).lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in count or min(parts, default=0) < 1:
        raise ValueError(f"{name}: expected {' or '.join(str(c) for c in count)} positive integers joined by 'x'; "
                         f"got {text!r}")
    return parts
