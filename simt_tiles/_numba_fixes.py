"""Fixes for numba-cuda 0.30, each installed only over the code it was written against.

1. The simulator (:func:`apply_simulator_shared_lock` and :func:`apply_simulator_block_yield`,
   installed by :mod:`simt_tiles.runtime` when the simulator is on): a block's shared arrays are
   created under a lock; a block's driver gives its threads the GIL while it waits for them
   (simulated kernels 3-4x faster: a matmul, a correlate2d and a softmax, 11.6 s → 3.2 s); and, on
   request (:func:`concurrent_blocks`, for tests), a launch's blocks all at once, so blocks that wait
   for one another can be tested.
2. Compile time (:func:`apply`: the compile gate's processes, and :mod:`simt_tiles.runtime` on the
   real target): quadratic steps of Numba's pipeline made linear; the same PTX (up to the symbol
   numbers each compilation draws anew).

``Lower._find_singly_assigned_variable`` rescans a variable's whole defining block for every
variable defined there, quadratic in a block's length.  The generated matmul rungs (k11, k12)
are a few long unrolled blocks of ~10k statements: counting once cuts the CPU time of compiling
one to PTX by 24–35% (benchmarks/notes/compile.md).

``InlineWorker.inline_ir`` (every ``inline="always"`` device function, at every call site) copies
the callee's IR block by block with ``copy.deepcopy(block)``, each with a fresh memo: every
variable refers to the scope, the scope to every variable, so each block copies all the callee's
variables again — blocks × variables.  The conv rungs inline their index and load helpers dozens
of times per kernel: this copy was 16.5 of 43 s compiling k08's four gate configs.  Here the
blocks of one copy share one memo (one scope copy, as the original IR has one scope; the inliner
points every inlined block at the caller's scope afterwards anyway).

Two smaller ones for the generated matmul rungs (9% off k11/k10/k05 split-row's gate rows, 132.9 →
120.8 s, the same PTX): the SSA rewrite's statement positions from a map instead of a scan per call
(``_FixSSAVars._stmt_index``), and ``TargetConfig.values`` (built ~750k times a compile to hash and
compare flags in typing's template cache) read from the option table instead of each property.

``analysis.compute_live_map`` (every ``PostProcessor.run``: 9 a compile) iterated two fix-points
over set unions, the first unioning each block's reaching names (~10k in a generated matmul)
into its successors' pass after pass: 2.9 of 11.6 s compiling k12's default.  Here reaching is a
bit test (blocks that reach a block, blocks that name a name) and liveness a worklist of new names:
the same map, k12's default 11.5 → 8.4 s (benchmarks/notes/compile.md, session 38).

3. The disk cache (:func:`apply_cache_lock`, with 2): Numba's on-disk kernel cache keeps one index
   per function, mapping each (signature, closure, …) key to a numbered data file, and rewrites it
   unlocked.  Two processes compiling two specialisations of one kernel factory at once (the
   disk-cache warm-up's workers, pytest-xdist, a user's worker processes) could both take number N:
   the index then maps one key to the other's kernel — the likely cause of two k10 launches on the
   H200 whose cached kernel took another number of weights than the call; with the same signature
   (another mode, say) it would run the wrong kernel silently.  Here the index's read-modify-write
   holds an exclusive lock (``flock`` on ``<index>.lock``), a load a shared one, and the data is
   written before the index names it.  A cache file that does not unpickle (truncated, garbage) is
   a miss with a warning, the entry rewritten; a failed write (a full disk, a read-only directory)
   a warning (numba-cuda raised from the compile in both).

4. A kernel's first launch (:func:`apply_cufunc_lock`, with 2): ``CUDACodeLibrary.get_cufunc``
   loads the kernel's module into the context on a cache miss, unlocked.  Two threads launching a
   kernel for the first time at once both load the same cubin (one ``ObjectCode``, so one library
   handle); the context's module table keeps the second under that handle and drops the first,
   whose finalizer then queues an unload of the handle both share.  The next flush of Numba's
   pending frees raised ``AssertionError`` in ``module_unload`` (the H200 soak, 16 threads), and
   under ``python -O`` it would unload a library kernels still run from.  Here the miss is loaded
   under a lock, so once.

``SIMT_TILES_NUMBA_FIXES=0`` installs none of them.  Each is left alone when Numba's method is not the
one it was written against (then compiles are only slower).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import itertools
import os
import sys
import threading
import time
import traceback

_APPLIED: list = []
#: ``SIMT_TILES_NUMBA_FIXES=0`` leaves numba-cuda as it is (every fix here patches it process-wide:
#: the compile-time ones apply to the caller's own kernels too, with the same PTX)
ENABLED = os.environ.get("SIMT_TILES_NUMBA_FIXES", "1") != "0"


def _find_singly_assigned_variable(self):
    """numba-cuda's ``Lower._find_singly_assigned_variable``: the variables assigned once, in one
    block, and used only there (lowered without an alloca); each block's assignments counted once."""
    from numba.cuda import lowering as L

    sav = set()
    if not self.func_ir.func_id.is_generator:
        blocks = self.func_ir.blocks
        use_defs = L.compute_use_defs(blocks)
        alloca_vars = L.must_use_alloca(blocks)
        var_assign_map = collections.defaultdict(set)  # where each variable is defined
        for blk, vl in use_defs.defmap.items():
            for var in vl:
                var_assign_map[var].add(blk)
        var_use_map = collections.defaultdict(set)  # where each is used (before a local definition)
        for blk, vl in use_defs.usemap.items():
            for var in vl:
                var_use_map[var].add(blk)
        counts: dict = {}  # block → how many times each name is assigned in it
        for var, defblks in var_assign_map.items():
            if var in alloca_vars or len(defblks) != 1 or var_use_map[var]:
                continue
            [defblk] = defblks
            if defblk not in counts:
                counts[defblk] = collections.Counter(
                    stmt.target.name for stmt in self.blocks[defblk].find_insts(L.ir.assign_types))
            if counts[defblk][var] == 1:
                sav.add(var)
    self._singly_assigned_vars = sav
    self._blk_local_varmap = {}


class _BlockCopies:
    """Stands in for the ``copy`` module inside numba-cuda's ``inline_closurecall``: the blocks of
    one IR copied in a row (``copy_ir``: the same scope, no block twice) share one memo.  A block
    of another scope, or one already copied (the same callee inlined again), starts a new copy;
    every ``inline_ir`` call starts and ends with none (:meth:`reset`: nothing carries over from one
    inlining to the next, and the memo holds nothing between them)."""

    def __init__(self, block_type):
        import copy

        self._copy, self._block = copy, block_type
        self.reset()

    def reset(self):
        self._scope, self._memo, self._seen = None, {}, set()

    def deepcopy(self, x, memo=None):
        if memo is not None or type(x) is not self._block:
            return self._copy.deepcopy(x, memo)
        if x.scope is not self._scope or id(x) in self._seen:
            self._scope, self._memo, self._seen = x.scope, {}, set()
        self._seen.add(id(x))
        return self._copy.deepcopy(x, self._memo)

    def __getattr__(self, name):  # copy.copy and the rest: the real module's
        if name.startswith("__") or name in ("_copy", "_block"):
            raise AttributeError(name)
        return getattr(self._copy, name)


def _apply_shared_block_memo() -> bool:
    try:
        from numba.cuda.core import inline_closurecall as IC
        from numba.cuda.core import ir

        src = inspect.getsource(IC.InlineWorker.inline_ir)
        known = ("block_label: copy.deepcopy(block)" in src and "block.scope = scope" in src
                 and inspect.getsource(IC).count("copy.deepcopy(") == 1  # the module's only deep copy
                 and getattr(IC, "copy", None) is sys.modules.get("copy"))
    except (ImportError, AttributeError, OSError, TypeError):
        known = False
    if known:
        copies = IC.copy = _BlockCopies(ir.Block)
        inline_ir = IC.InlineWorker.inline_ir

        @functools.wraps(inline_ir)
        def inline_ir_fresh_copies(self, *args, **kwargs):
            copies.reset()
            try:
                return inline_ir(self, *args, **kwargs)
            finally:
                copies.reset()

        IC.InlineWorker.inline_ir = inline_ir_fresh_copies
    return known


def _stmt_index(self, defstmt, block, stop=-1):
    """numba-cuda's ``_FixSSAVars._stmt_index`` (a statement's position in ``block.body``, searched in
    ``range(len(body))[:stop]``, else ``len(body)``) from a position map built once per body list
    instead of a scan per call.  The SSA rewrite reads each block's body without changing it (it
    builds new bodies); the map is checked against the list and its length, and every hit against
    the statement itself (a moved statement: the scan)."""
    body = block.body
    memo = self.__dict__.setdefault("_simt_tiles_positions", {})
    entry = memo.get(id(body))
    if entry is None or entry[0] is not body or entry[1] != len(body):
        positions: dict = {}
        for i, stmt in enumerate(body):
            positions.setdefault(id(stmt), i)  # the first occurrence, as the scan finds it
        entry = memo[id(body)] = (body, len(body), positions)
    n = len(body)
    i = entry[2].get(id(defstmt))
    if i is not None and body[i] is not defstmt:  # changed under us: numba-cuda's scan
        for j in range(n)[:stop]:
            if body[j] is defstmt:
                return j
        return n
    return i if i is not None and i < len(range(n)[:stop]) else n


_STMT_INDEX_ORIGINAL: list = []


def _flags_values(self):
    """numba-cuda's ``TargetConfig.values`` (every option's value, its default where unset) read
    from the option table instead of through each option's property: the same dict.  Typing looks
    up its template cache by the flags (hash and equality build this dict) ~750k times in a
    generated matmul's compile."""
    values = self._values
    return {k: values.get(k, opt.default) for k, opt in self.options.items()}


def _apply_ssa_and_flags() -> None:
    try:
        from numba.cuda.core import ssa
        from numba.cuda.core import targetconfig as TC

        src = inspect.getsource(ssa._FixSSAVars._stmt_index)
        if ("for i in range(len(block.body))[:stop]:" in src and "return len(block.body)" in src
                and not _STMT_INDEX_ORIGINAL):
            _STMT_INDEX_ORIGINAL.append(ssa._FixSSAVars._stmt_index)
            ssa._FixSSAVars._stmt_index = _stmt_index
        values_src = inspect.getsource(TC.TargetConfig.values)
        getter_src = inspect.getsource(TC._MetaTargetConfig)
        if ("return {k: getattr(self, k) for k in self.options}" in values_src
                and "return self._values.get(name, option.default)" in getter_src):
            TC.TargetConfig.values = _flags_values
    except (ImportError, AttributeError, OSError, TypeError):
        pass


_LIVE_MAP_ORIGINAL: list = []


def _live_map(cfg, blocks, var_use_map, var_def_map):
    """numba-cuda's ``analysis.compute_live_map`` (the names live at each block's entry), or None where
    the inputs are not the plain case it was checked on (the caller then runs numba-cuda's).

    numba-cuda first iterates ``def_reach`` to a fix-point: each block's set of the names used or
    defined in any block that reaches it, every pass unioning each block's set (up to ~10k names in a
    generated matmul) into its successors'.  Here a name's reaching is a bit test instead: the blocks
    that reach a block (itself included) as one bit mask (Tarjan's strongly connected components in
    topological order), and each name's blocks as another.  The liveness fix-point (a name live at
    a block's entry is live at a predecessor's entry when it reaches the predecessor and is not
    defined there) is a union of a map that distributes over unions, so a worklist that pushes only
    each block's new names reaches the same least fix-point as numba-cuda's repeated passes."""
    keys = list(blocks.keys())
    keyset = set(keys)
    if keyset != set(var_def_map) or keyset != set(var_use_map) or len(keyset) != len(keys):
        return None
    succ = {o: [w for w, _ in cfg.successors(o)] for o in keys}
    pred = {o: [w for w, _ in cfg.predecessors(o)] for o in keys}
    edges = {(o, w) for o in keys for w in succ[o]}
    if edges != {(p, o) for o in keys for p in pred[o]} or not all(w in keyset for _, w in edges):
        return None
    bit = {o: 1 << i for i, o in enumerate(keys)}
    # Tarjan's components (emitted sinks first), iteratively
    index: dict = {}
    low: dict = {}
    onstack: set = set()
    stack: list = []
    comps: list = []
    for root in keys:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        onstack.add(root)
        work = [(root, iter(succ[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    onstack.add(w)
                    work.append((w, iter(succ[w])))
                    break
                if w in onstack and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work and low[v] < low[work[-1][0]]:
                    low[work[-1][0]] = low[v]
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        onstack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(comp)
    reached_from: dict = {}  # block → the blocks that reach it, itself included (a bit mask)
    for comp in reversed(comps):  # sources first: every predecessor outside the component is done
        mask = 0
        for v in comp:
            mask |= bit[v]
            for p in pred[v]:
                mask |= reached_from.get(p, 0)  # one of this component: its bits are in mask already
        for v in comp:
            reached_from[v] = mask
    named_in: dict = {}  # name → the blocks that use or define it (a bit mask)
    for o in keys:
        b = bit[o]
        for names in (var_def_map[o], var_use_map[o]):
            for name in names:
                named_in[name] = named_in.get(name, 0) | b
    live_map = {o: set(var_use_map[o]) for o in keys}
    pending = {o: set(live) for o, live in live_map.items() if live}  # names not yet pushed back
    while pending:
        o, new = pending.popitem()
        for inc in pred[o]:
            have, defined, reach = live_map[inc], var_def_map[inc], reached_from[inc]
            add = {v for v in new if v not in have and v not in defined and named_in.get(v, 0) & reach}
            if add:
                have |= add
                if inc in pending:
                    pending[inc] |= add
                else:
                    pending[inc] = add
    return live_map


def compute_live_map(cfg, blocks, var_use_map, var_def_map):
    """:func:`_live_map`, else (an input it does not take) numba-cuda's own."""
    try:
        live_map = _live_map(cfg, blocks, var_use_map, var_def_map)
    except Exception:  # noqa: BLE001 - on any doubt, numba-cuda's own
        live_map = None
    if live_map is None:
        return _LIVE_MAP_ORIGINAL[0](cfg, blocks, var_use_map, var_def_map)
    return live_map


def _apply_live_map() -> bool:
    try:
        from numba.cuda.core import analysis, ir_utils

        src = inspect.getsource(analysis.compute_live_map)
        known = all(m in src for m in (
            "def def_reach(dct):", "used_or_defined = var_def_map[offset] | var_use_map[offset]",
            "dct[out_blk] |= dct[offset]", "reachable = live_vars & def_reach_map[inc_blk]",
            "dct[inc_blk] |= reachable - var_def_map[inc_blk]", "live_map[offset] = set(var_use_map[offset])",
            "fix_point(def_reach, def_reach_map)", "fix_point(liveness, live_map)"))
    except (ImportError, AttributeError, OSError, TypeError):
        known = False
    if known and not _LIVE_MAP_ORIGINAL:
        original = analysis.compute_live_map
        _LIVE_MAP_ORIGINAL.append(original)
        analysis.compute_live_map = compute_live_map  # postproc's variable lifetimes read it from here
        if getattr(ir_utils, "compute_live_map", None) is original:  # remove_dead's own name for it
            ir_utils.compute_live_map = compute_live_map
    return bool(_LIVE_MAP_ORIGINAL)


def apply() -> bool:
    """Install the five compile-time fixes and the two locks (once per process); whether the lowering scan is installed
    (the inliner's copy, the SSA positions, the flags' values and the liveness map are each installed where they match).  Imports Numba's CUDA lowering: call it where
    the real target is loaded (the compile gate's processes; :mod:`simt_tiles.runtime` off the
    simulator)."""
    if _APPLIED:
        return _APPLIED[0]
    if not ENABLED:
        _APPLIED.append(False)
        return False
    try:
        from numba.cuda import lowering as L

        src = inspect.getsource(L.Lower._find_singly_assigned_variable)
        known = ("assigns = [" in src and ".find_insts(" in src and "_blk_local_varmap = {}" in src
                 and hasattr(L, "compute_use_defs") and hasattr(L, "must_use_alloca"))
    except (ImportError, AttributeError, OSError, TypeError):
        known = False
    if known:
        L.Lower._find_singly_assigned_variable = _find_singly_assigned_variable
    _apply_shared_block_memo()
    _apply_ssa_and_flags()
    _apply_live_map()
    apply_cache_lock()
    apply_cufunc_lock()
    _APPLIED.append(known)
    return known


# --- the disk cache: a function's index written by one process at a time ---------------------

_CACHE_ORIGINAL: dict = {}


@contextlib.contextmanager
def _index_lock(cache_file, exclusive: bool):
    """``flock`` on ``<index>.lock`` beside the cache file's index for the ``with`` block; no lock
    where the file cannot be made (a read-only cache: nothing is written there either) or locked
    (a file system without ``flock``): then numba-cuda's behaviour, unlocked."""
    try:
        import fcntl

        fd = os.open(cache_file._index_path + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # (closing releases the lock)


def _cache_save(self, key, data):
    """numba-cuda's ``IndexDataCacheFile.save`` under the index's exclusive lock: the index is read
    again inside it, so no two processes take one data file's number for two keys; the data is
    written before the index names it (an index entry never names a file that holds another
    kernel, even after a crash between the two).  An unreadable index is started anew; a write
    that fails (a full disk, a read-only directory) is a warning: the kernel is compiled, only not
    kept for the next process."""
    try:
        with _index_lock(self, exclusive=True):
            overloads = _index_or_empty(self)
            data_name = overloads.get(key)
            if data_name is None:  # a new key: the first number no entry uses
                existing = set(overloads.values())
                data_name = next(n for n in map(self._data_name, itertools.count(1)) if n not in existing)
            self._save_data(data_name, data)
            if overloads.get(key) != data_name:
                overloads[key] = data_name
                self._save_index(overloads)
    except OSError as exc:
        _cache_warning(f"could not write Numba's disk cache in {os.path.dirname(self._index_path)} ({exc}); "
                       "the kernel is compiled, but the next process compiles it again (free disk space, or "
                       "point NUMBA_CACHE_DIR at a writable directory)")


def _index_or_empty(cache_file) -> dict:
    """The index's entries, or {} (with a warning) when the file is not a readable index."""
    try:
        return cache_file._load_index()
    except Exception as exc:  # noqa: BLE001 - any unpickling failure of a truncated or garbage file, or
        # an index that cannot be read (numba-cuda itself treats only a missing one as empty)
        _unreadable(cache_file, cache_file._index_path, exc)
        return {}


def _cache_load(self, key):
    """numba-cuda's ``IndexDataCacheFile.load`` under the index's shared lock (never between another
    process's data and index writes).  An index or data file that does not unpickle (truncated by a
    crash or a full disk, overwritten, garbage) is a miss with a warning: the kernel is compiled and
    the entry written anew — never an exception, never another entry's kernel."""
    with _index_lock(self, exclusive=False):
        overloads = _index_or_empty(self)
        data_name = overloads.get(key)
        if data_name is None:
            return None
        try:
            return self._load_data(data_name)
        except OSError:  # (numba-cuda's own case) removed while the index still names it
            return None
        except Exception as exc:  # noqa: BLE001 - as for the index
            _unreadable(self, self._data_path(data_name), exc)
            return None


def _unreadable(cache_file, path: str, exc) -> None:
    _cache_warning(f"Numba's disk cache file {path} is unreadable ({type(exc).__name__}: {exc}); compiling the "
                   "kernel again and rewriting the entry (deleting the directory's *.nbi/*.nbc files clears the cache)")


def _cache_warning(text: str) -> None:
    import warnings

    warnings.warn(f"simt_tiles: {text}", RuntimeWarning, stacklevel=3)


def apply_cache_lock() -> bool:
    """Install :func:`_cache_save` and :func:`_cache_load` over numba-cuda's disk cache (once per
    process); whether they are installed.  Left alone when ``save`` is not the one this was
    written against, or with ``SIMT_TILES_NUMBA_FIXES=0``."""
    if not ENABLED:
        return False
    if _CACHE_ORIGINAL:
        return True
    try:
        from numba.cuda.core import caching as C

        cls = C.IndexDataCacheFile
        src = inspect.getsource(cls.save)
        known = (all(m in src for m in ("overloads = self._load_index()", "self._data_name(i)",
                                         "self._save_index(overloads)", "self._save_data(data_name, data)"))
                 and all(m in inspect.getsource(cls.load) for m in ("overloads.get(key)", "self._load_data(data_name)"))
                 and "self._index_path =" in inspect.getsource(cls.__init__)  # the lock file's name
                 and all(hasattr(cls, n) for n in ("_load_index", "_save_index", "_save_data", "_data_name",
                                                   "_load_data", "_data_path")))
    except (ImportError, AttributeError, OSError, TypeError):
        return False
    if not known:
        return False
    _CACHE_ORIGINAL.update(save=cls.save, load=cls.load)
    cls.save, cls.load = _cache_save, _cache_load
    return True


# --- a kernel's module loaded once, whatever the threads ----------------------------------------

_CUFUNC_LOCK = threading.RLock()  # re-entrant: a module's setup may load another library's module
_CUFUNC_ORIGINAL: list = []


def locked_get_cufunc(original):
    """``original`` (``CUDACodeLibrary.get_cufunc``, called at every launch) under
    :data:`_CUFUNC_LOCK`: a hit is a dict lookup either way (the GIL already runs one thread's at a
    time); a miss loads the module once, whichever threads ask."""

    @functools.wraps(original)
    def get_cufunc(self):
        with _CUFUNC_LOCK:
            return original(self)

    return get_cufunc


def apply_cufunc_lock() -> bool:
    """Install :func:`locked_get_cufunc` over numba-cuda's ``CUDACodeLibrary.get_cufunc`` (once per
    process); whether it is installed.  Left alone when the method is not the one this was written
    against, or with ``SIMT_TILES_NUMBA_FIXES=0``."""
    return _install("numba.cuda.codegen", "CUDACodeLibrary", "get_cufunc", locked_get_cufunc, _CUFUNC_ORIGINAL,
                    ("self._cufunc_cache.get(device.id", "ctx.create_module_image(",
                     "self._cufunc_cache[device.id] = cufunc"))


# --- the simulator: a block's shared arrays created under a lock ------------------------------

_SHARED_LOCK = threading.Lock()
_SHARED_ORIGINAL: list = []


def _shared_array(self, shape, dtype, alignment=None):
    """numba-cuda's ``FakeCUDAShared.array`` with the first allocation of a call site atomic:
    the simulator runs a block's threads as Python threads and keys each shared array on the
    caller's file and line, filling the dict on first use — two threads asking at once could
    each create one, and a thread would then work on an array the others never see."""
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    if alignment is None and shape == 0 and _CONCURRENT:  # the dynamic buffer, a block's own
        key = ("dynamic", tuple(getattr(threading.current_thread(), "blockIdx", ())))
        with _SHARED_LOCK:
            buf = self._allocations.setdefault(key, np.zeros(self._dynshared_size, dtype=np.byte))
        dtype = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else np.dtype(dtype)
        return np.frombuffer(buf.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)
    if alignment is not None or shape == 0:  # an error, or the dynamic buffer: no allocation here
        return _SHARED_ORIGINAL[0](self, shape, dtype, alignment)
    caller = traceback.extract_stack(sys._getframe())[-2][0:2]  # as numba-cuda: the caller's line
    if _CONCURRENT:  # blocks at once (:func:`concurrent_blocks`): a block's own arrays
        caller = (*caller, tuple(getattr(threading.current_thread(), "blockIdx", ())))
    with _SHARED_LOCK:
        res = self._allocations.get(caller)
        if res is None:
            if isinstance(dtype, types.Type):
                dtype = numpy_support.as_dtype(dtype)
            res = self._allocations[caller] = np.empty(shape, dtype)
    return res


def apply_simulator_shared_lock() -> bool:
    """Install :func:`_shared_array` in numba-cuda's CUDA simulator (once per process); whether it
    is installed.  Seen once in CI before it: k07's staged store gave wrong values in the columns
    of one thread — the thread had its own "shared" patch.  Left alone when the method is not the
    one this was written against."""
    return _install_simulator("kernelapi", "FakeCUDAShared", "array", _shared_array, _SHARED_ORIGINAL,
                              ("self._allocations.get(caller)", "stack[-2][0:2]",
                               "self._allocations[caller] = res"))


def _install_simulator(module: str, cls: str, name: str, replacement, saved: list, markers) -> bool:
    """:func:`_install` over ``numba.cuda.simulator.<module>.<cls>.<name>``."""
    return _install(f"numba.cuda.simulator.{module}", cls, name, lambda original: replacement, saved, markers)


def _install(module: str, cls: str, name: str, make, saved: list, markers) -> bool:
    """Put ``make(original)`` in place of ``<module>.<cls>.<name>`` (the original kept in ``saved``)
    when that method's source holds every one of ``markers``; whether it is installed (once per
    process; never with ``SIMT_TILES_NUMBA_FIXES=0``)."""
    if not ENABLED:
        return False
    if saved:
        return True
    try:
        import importlib

        owner = getattr(importlib.import_module(module), cls)
        src = inspect.getsource(getattr(owner, name))
    except (ImportError, AttributeError, OSError, TypeError):
        return False
    if not all(m in src for m in markers):
        return False
    saved.append(getattr(owner, name))
    setattr(owner, name, make(saved[0]))
    return True


# --- the simulator: a block's driver that waits instead of spinning --------------------------

_BLOCK_RUN_ORIGINAL: list = []


#: > 0 inside :func:`concurrent_blocks`; the blocks of the launch being collected
_CONCURRENT = 0
_PENDING: list = []


def _own_shared_arrays() -> bool:
    """Whether the simulator's shared arrays are :func:`_shared_array`'s (a race check's recorder installs its
    own, one per call site for every block: blocks at once would share them)."""
    from numba.cuda.simulator import kernelapi

    return kernelapi.FakeCUDAShared.array is _shared_array


def blocks_can_run_at_once() -> bool:
    """Whether :func:`concurrent_blocks` can work: the simulator's block driver and shared arrays are
    this module's (not while :mod:`simt_tiles._simhooks`' race check records)."""
    try:
        from numba.cuda.simulator import kernel, kernelapi
    except ImportError:
        return False
    return kernel.BlockManager.run is _block_manager_run and kernelapi.FakeCUDAShared.array is _shared_array


@contextlib.contextmanager
def concurrent_blocks():
    """Within this block, the simulator runs every block of a launch at once (each block's driver in a
    thread of its own, each block with its own shared arrays) instead of one block after another.
    For kernels whose blocks wait for one another (softmax's k08: a W item waits for its row's P
    items): run one at a time, the blocks never wait, so a wrong wait condition passes; run at once,
    blocks take their tickets in any order and some wait.  Keep the grids small (a Python thread per
    CUDA thread of every block).  Not reentrant across host threads: the simulator runs one launch
    at a time anyway."""
    global _CONCURRENT
    if not blocks_can_run_at_once():
        raise RuntimeError("concurrent_blocks: the simulator's block driver or shared arrays are not these "
                           "(numba-cuda changed, SIMT_TILES_NUMBA_FIXES=0, or a race check's recorder is installed)")
    _CONCURRENT += 1
    try:
        yield
    finally:
        _CONCURRENT -= 1
        _PENDING.clear()


def blocks_wait(kernel, waits=None):
    """Mark ``kernel`` (a Python function, before ``cuda.jit``) as one whose blocks wait for one another
    with no order guarantee the simulator keeps (softmax's k09: a piece waits for the pieces of its row
    with *larger* tickets too): the simulator then always runs its launches' blocks at once, as
    :func:`concurrent_blocks` does.  ``waits(args)`` (the launch's arguments) says whether a launch's
    blocks wait at all (None: always).  Where blocks cannot run at once (a race check's recorder owns the
    shared arrays), a launch that waits raises RuntimeError instead of spinning for ever; one that does not
    runs a block at a time.  On a GPU the mark changes nothing."""
    kernel._simt_tiles_blocks_wait = waits or (lambda args: True)
    return kernel


#: after one block of a launch at once raises, how long the others may take to finish before the error is
#: raised anyway (a block that waits for the failed one would spin for ever; its driver is a daemon thread)
FAILED_BLOCK_GRACE_S = 2.0


def _block_manager_run(self, grid_point, *args):
    """numba-cuda's ``BlockManager.run`` (the simulator runs one block: a Python thread per CUDA
    thread, released together at each ``syncthreads``) with one change: the driver's polling loop
    gives the GIL up after each pass (``time.sleep(0)``).  numba-cuda's loop only asks its threads
    ``is_alive()``, which keeps the GIL: the driver took a full switch interval (5 ms) in every
    round of the threads it was waiting for — a large share of every simulated kernel's time.

    Inside :func:`concurrent_blocks` the launch's blocks are collected until its last one, and then
    all run at once, each on a driver thread of its own; the first exception is raised."""
    global _CONCURRENT
    waits = getattr(self._f, "_simt_tiles_blocks_wait", None)
    at_once = _CONCURRENT or (waits is not None and _own_shared_arrays())
    if waits is not None and not at_once and waits(args):
        raise RuntimeError(f"{getattr(self._f, '__name__', 'kernel')}: its blocks wait for one another, and this "
                           "simulator runs them one at a time (a race check's recorder owns the shared arrays)")
    if at_once:
        if not any(grid_point):  # a launch's first block: nothing left from an interrupted one
            _PENDING.clear()
        _PENDING.append((self, grid_point, args))
        if tuple(grid_point) != tuple(d - 1 for d in self._grid_dim):
            return
        blocks, errors = list(_PENDING), []
        _PENDING.clear()

        def drive(manager, point, block_args):
            try:
                _run_block(manager, point, *block_args)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, on the launching thread
                errors.append(exc)

        _CONCURRENT += 1  # for a marked kernel (blocks_wait) too: each block its own shared arrays
        try:
            drivers = [threading.Thread(target=drive, args=b, daemon=True) for b in blocks]
            for d in drivers:
                d.start()
            failed_at = None
            while True:  # a failed block may leave others waiting for it for ever: raise after the grace
                alive = [d for d in drivers if d.is_alive()]
                if not alive:
                    break
                if errors:
                    failed_at = failed_at or time.monotonic()
                    if time.monotonic() - failed_at > FAILED_BLOCK_GRACE_S:
                        break
                alive[0].join(0.05)
        finally:
            _CONCURRENT -= 1
        if errors:
            raise errors[0]
        return
    _run_block(self, grid_point, *args)


def _run_block(self, grid_point, *args):
    """One block: its threads started, released at each barrier, joined (see :func:`_block_manager_run`)."""
    import time

    import numpy as np
    from numba.cuda.simulator.kernel import BlockThread

    threads, livethreads, blockedthreads = set(), set(), set()
    for block_point in np.ndindex(*self._block_dim):

        def target():
            self._f(*args)

        t = BlockThread(target, self, grid_point, block_point, self._debug)
        t.start()
        threads.add(t)
        livethreads.add(t)
    while livethreads:
        for t in livethreads:
            if t.syncthreads_blocked:
                blockedthreads.add(t)
            elif t.exception:  # abort the others, do not join them (as numba-cuda: for debugging)
                for t_other in threads:
                    t_other.abort = True
                    t_other.syncthreads_blocked = False
                    t_other.syncthreads_event.set()
                raise t.exception[0].with_traceback(t.exception[1])
        if livethreads == blockedthreads:
            for t in blockedthreads:
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
            blockedthreads = set()
        livethreads = {t for t in livethreads if t.is_alive()}
        time.sleep(0)  # the one change: the threads run while the driver waits
    for t in threads:  # an exception set just before a thread finished
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def apply_simulator_block_yield() -> bool:
    """Install :func:`_block_manager_run` in numba-cuda's CUDA simulator (once per process); whether
    it is installed.  Left alone when the method is not the one this was written against."""
    return _install_simulator("kernel", "BlockManager", "run", _block_manager_run, _BLOCK_RUN_ORIGINAL,
                              ("livethreads = set([t for t in livethreads if t.is_alive()])",
                               "t.syncthreads_event.set()", "BlockThread(",
                               "t.exception[0].with_traceback(t.exception[1])"))
