"""The simulator's fixes (:mod:`simt_tiles._numba_fixes`): shared arrays, one per call site and
block however the threads interleave (:func:`~simt_tiles._numba_fixes.apply_simulator_shared_lock`);
a block's driver that yields while it waits (:func:`~simt_tiles._numba_fixes.apply_simulator_block_yield`);
and the compile-time replacements that need no compiler to check (SSA positions, flags' values,
the liveness map)."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from numba import cuda  # module level: the simulator swaps this global inside kernels

from simt_tiles import _numba_fixes
from simt_tiles.runtime import SIMULATOR


def _race(array_method, monkeypatch) -> int:
    """16 threads ask one FakeCUDAShared for the array of one call site at once (``np.empty``
    slowed to widen the window); how many distinct arrays they got."""
    from numba.cuda.simulator import kernelapi

    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", array_method)
    real = np.empty

    def slow_empty(*args, **kwargs):
        time.sleep(0.002)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "empty", slow_empty)
    shared, start, got = kernelapi.FakeCUDAShared(0), threading.Barrier(16), []

    def thread():
        start.wait()
        got.append(shared.array((4, 4), np.float32))  # every thread: this one call site

    threads = [threading.Thread(target=thread) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len({id(a) for a in got})


def test_one_shared_array_per_call_site_under_contention(monkeypatch):
    pytest.importorskip("numba.cuda.simulator")
    assert _numba_fixes.apply_simulator_shared_lock() or pytest.skip("numba-cuda's simulator changed")
    assert _race(_numba_fixes._shared_array, monkeypatch) == 1


def test_the_unlocked_original_races(monkeypatch):
    """numba-cuda's own method, under the same contention, hands out several arrays (the bug)."""
    assert _numba_fixes.apply_simulator_shared_lock() or pytest.skip("numba-cuda's simulator changed")
    assert _race(_numba_fixes._SHARED_ORIGINAL[0], monkeypatch) > 1


@cuda.jit
def _tree_sum(x, out):
    """A block of 8 threads sums 8 values: 3 rounds, a barrier after each; thread 0 of a block
    whose first value is negative indexes out of range (an error inside a kernel)."""
    buf = cuda.shared.array(8, np.float64)
    t = cuda.threadIdx.x
    buf[t] = x[cuda.blockIdx.x * 8 + t]
    cuda.syncthreads()
    step = 4
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        if buf[0] < -1e300:
            out[out.shape[0] + 5] = 1.0
        out[cuda.blockIdx.x] = buf[0]


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's block driver")
def test_the_yielding_block_driver_keeps_barriers_and_errors():
    from numba.cuda.simulator import kernel

    assert kernel.BlockManager.run is _numba_fixes._block_manager_run or \
        kernel.BlockManager.run.__module__ == "simt_tiles._simhooks"  # installed by simt_tiles.runtime
    x = np.arange(32, dtype=np.float64)
    out = np.full(4, np.nan)
    runner = threading.Thread(target=lambda: _tree_sum[4, 8](x, out), daemon=True)
    runner.start()
    runner.join(timeout=60)  # a driver that never releases a barrier hangs: fail, not wait forever
    assert not runner.is_alive(), "the simulated kernel did not finish in 60 s"
    np.testing.assert_array_equal(out, x.reshape(4, 8).sum(axis=1))
    x[16] = -1e308 * 10  # -inf: block 2's thread 0 fails
    with pytest.raises(IndexError):
        _tree_sum[4, 8](x, np.full(4, np.nan))


def test_compile_time_ssa_position_and_flag_values_match_numbas():
    """The compile-time fixes that replace a numba-cuda function outright compute what it computes:
    a statement's position under every ``stop`` (first occurrence, a statement twice, one absent),
    and a flags object's values with options set and unset."""
    from numba.cuda.core import ir, ssa
    from numba.cuda.core import targetconfig as TC
    from numba.cuda.flags import CUDAFlags, Flags

    original = (_numba_fixes._STMT_INDEX_ORIGINAL or [ssa._FixSSAVars._stmt_index])[0]
    if "range(len(block.body))[:stop]" not in __import__("inspect").getsource(original):
        pytest.skip("numba-cuda's SSA changed")
    loc = ir.Loc("f", 1)
    scope = ir.Scope(None, loc)
    stmts = [ir.Assign(ir.Const(i, loc), scope.define(f"v{i}", loc), loc) for i in range(6)]
    block, other = ir.Block(scope, loc), ir.Block(scope, loc)
    block.body = stmts[:5] + [stmts[2]]  # stmts[2] twice, stmts[5] absent
    other.body = stmts[::-1]
    handler = object.__new__(ssa._FixSSAVars)  # one handler, as a rewrite pass uses it: its maps reused

    def check():
        for stop in (-2, -1, 0, 1, 2, 3, 5, 6, 9):
            for b in (block, other):
                for s in stmts:
                    assert _numba_fixes._stmt_index(handler, s, b, stop) == original(object(), s, b, stop), (stop, s)

    check()
    block.body[0], block.body[1] = block.body[1], block.body[0]  # changed in place: same list, same length
    check()
    block.body.append(stmts[5])  # grown in place
    check()
    for cls in (Flags, CUDAFlags):
        flags = cls()
        flags.enable_ssa = False
        flags.nrt = True
        assert _numba_fixes._flags_values(flags) == {k: getattr(flags, k) for k in flags.options}
        assert TC.TargetConfig.values.__name__ in ("values", "_flags_values")


def test_compile_time_live_map_matches_numbas():
    """``_numba_fixes._live_map`` (bit masks and a worklist for numba-cuda's two fix-points) gives
    numba-cuda's ``compute_live_map`` on random control-flow graphs: loops, self-loops, unreachable
    blocks, names used before, after and without a definition; and declines (None) a graph whose
    edges leave the blocks."""
    import random

    from numba.cuda.core import analysis
    from numba.cuda.core.controlflow import CFGraph

    original = (_numba_fixes._LIVE_MAP_ORIGINAL or [analysis.compute_live_map])[0]
    if "def def_reach(dct):" not in __import__("inspect").getsource(original):
        pytest.skip("numba-cuda's liveness changed")
    rng = random.Random(38)
    for trial in range(300):
        n = rng.randint(1, 24)
        labels = rng.sample(range(0, 400, 2), n)  # block labels in no particular order
        cfg = CFGraph()
        for b in labels:
            cfg.add_node(b)
        for b in labels:
            for w in rng.sample(labels, rng.randint(0, min(3, n))):
                cfg.add_edge(b, w)
        cfg.set_entry_point(labels[0])
        cfg.process()
        names = [f"v{i}" for i in range(rng.randint(1, 40))]
        use = {b: set(rng.sample(names, rng.randint(0, min(6, len(names))))) for b in labels}
        defs = {b: set(rng.sample(names, rng.randint(0, min(8, len(names))))) for b in labels}
        blocks = dict.fromkeys(labels)
        want = original(cfg, blocks, use, defs)
        got = _numba_fixes._live_map(cfg, blocks, use, defs)
        assert got == want and list(got) == list(want), trial
        assert _numba_fixes.compute_live_map(cfg, blocks, use, defs) == want
    cfg = CFGraph()
    for b in (0, 2):
        cfg.add_node(b)
    cfg.add_edge(0, 2)
    cfg.set_entry_point(0)
    cfg.process()
    assert _numba_fixes._live_map(cfg, {0: None}, {0: set()}, {0: set()}) is None  # block 2 is not one of them


# --- the disk cache's index (no compiler: the index and data files are plain pickles) ----------

def _saver(save, root, proc, keys, start):
    """One process: 3 entries saved to the index every process shares, each index write slowed."""
    from numba.cuda.core import caching as C

    cache_file = C.IndexDataCacheFile(root, "kernel-1", source_stamp=(1.0, 10))
    write = cache_file._save_index

    def slow_write(overloads):
        time.sleep(0.05)  # another process reads the index meanwhile
        write(overloads)

    cache_file._save_index = slow_write
    start.wait()
    for key in keys:
        save(cache_file, key, {"key": key, "proc": proc})


def _save_race(save, root) -> list:
    """4 processes save 3 keys each into one function's cache index at once; the keys whose entry
    loads another key's data (or nothing)."""
    import multiprocessing

    from numba.cuda.core import caching as C

    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(4)
    keys = [[("sig", p, i) for i in range(3)] for p in range(4)]
    procs = [ctx.Process(target=_saver, args=(save, str(root), p, keys[p], start)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    reader = C.IndexDataCacheFile(str(root), "kernel-1", source_stamp=(1.0, 10))
    return [k for ks in keys for k in ks if (reader.load(k) or {}).get("key") != k]


@pytest.fixture
def cache_fix():
    pytest.importorskip("numba.cuda.core.caching")
    if sys.platform != "linux":
        pytest.skip("fork and flock: Linux")
    assert _numba_fixes.apply_cache_lock() or pytest.skip("numba-cuda's disk cache changed")
    return _numba_fixes._CACHE_ORIGINAL


def test_cache_index_saved_by_several_processes_maps_each_key_to_its_own_kernel(cache_fix, tmp_path):
    assert _save_race(_numba_fixes._cache_save, tmp_path) == []


def test_the_unlocked_cache_index_maps_keys_to_other_kernels(cache_fix, tmp_path):
    """numba-cuda's own save, the same race: entries that load another process's kernel (the likely
    cause of two k10 launches on the H200 whose cached kernel took another number of weights)."""
    assert len(_save_race(cache_fix["save"], tmp_path)) > 0


def test_cache_lock_is_installed_with_the_compile_fixes():
    from numba.cuda.core import caching as C

    if not _numba_fixes.apply_cache_lock():
        pytest.skip("numba-cuda's disk cache changed")
    assert C.IndexDataCacheFile.save is _numba_fixes._cache_save
    assert C.IndexDataCacheFile.load is _numba_fixes._cache_load


def test_cache_works_unlocked_where_the_file_system_refuses_locks(cache_fix, tmp_path, monkeypatch):
    """A cache directory whose file system has no ``flock`` (ENOLCK) still saves and loads."""
    import errno
    import fcntl

    from numba.cuda.core import caching as C

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    cache_file = C.IndexDataCacheFile(str(tmp_path), "kernel-1", source_stamp=(1.0, 10))
    _numba_fixes._cache_save(cache_file, ("sig", 1), {"key": 1})
    assert _numba_fixes._cache_load(cache_file, ("sig", 1)) == {"key": 1}


@cuda.jit
def _handshake(flags, out):
    """Block 0 waits until block 1 has written its flag (a wait on a later block: it needs both blocks
    running at once); each block's shared array holds its own block index."""
    mine = cuda.shared.array(4, np.int64)
    t = cuda.threadIdx.x
    mine[t] = cuda.blockIdx.x
    cuda.syncthreads()
    if cuda.blockIdx.x == 1 and t == 0:
        cuda.atomic.add(flags, 0, 1)
    if cuda.blockIdx.x == 0 and t == 0:
        while cuda.atomic.add(flags, 0, 0) < 1:
            pass
    cuda.syncthreads()
    out[cuda.blockIdx.x, t] = mine[t]


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's block driver")
def test_concurrent_blocks_run_a_launch_at_once_with_their_own_shared_arrays():
    """Inside ``concurrent_blocks`` a block may wait for a later one (one block after another it would
    wait forever), and each block has its own shared arrays (block 1 would otherwise overwrite block 0's);
    an error in one block is raised; outside it, blocks run one at a time again."""
    if not _numba_fixes.blocks_can_run_at_once():
        pytest.skip("the simulator's block driver is not simt_tiles' (a race check's recorder?)")
    flags, out = np.zeros(1, np.int64), np.full((2, 4), -1, np.int64)
    with _numba_fixes.concurrent_blocks():
        runner = threading.Thread(target=lambda: _handshake[2, 4](flags, out), daemon=True)
        runner.start()
        runner.join(timeout=60)
        assert not runner.is_alive(), "block 0 waited for block 1 forever"
        np.testing.assert_array_equal(out, [[0] * 4, [1] * 4])
        x = np.arange(32, dtype=np.float64)
        x[16] = -np.inf  # block 2's thread 0 fails
        with pytest.raises(IndexError):
            _tree_sum[4, 8](x, np.full(4, np.nan))
    assert _numba_fixes._CONCURRENT == 0 and not _numba_fixes._PENDING
    x = np.arange(32, dtype=np.float64)
    out4 = np.full(4, np.nan)
    _tree_sum[4, 8](x, out4)
    np.testing.assert_array_equal(out4, x.reshape(4, 8).sum(axis=1))


def _waits_for_a_failing_block(flags, out):
    """Block 1 fails (an index past ``out``) before it raises the flag block 0 waits on; block 0's wait ends
    on its own after 8 s (so that the test's thread does not spin for the rest of the session)."""
    if cuda.blockIdx.x == 1:
        out[5] = 1  # IndexError: out has 2 elements
        flags[0] = 1
    else:
        t0 = time.monotonic()  # (the simulator runs this as Python)
        while flags[0] == 0 and time.monotonic() - t0 < 8:
            pass
        out[0] = 1


def _copies_a_flag(flags, out):
    out[cuda.blockIdx.x] = flags[0]


_marked = cuda.jit(_numba_fixes.blocks_wait(_waits_for_a_failing_block)) if SIMULATOR else None
# (a mark is an attribute of the function: a second mark of the same function would replace the first)
_marked_never_waits = cuda.jit(_numba_fixes.blocks_wait(_copies_a_flag, waits=lambda args: False)) if SIMULATOR else None


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's block driver")
def test_a_failed_block_of_a_marked_launch_raises_without_waiting_for_its_waiters():
    """A kernel marked ``blocks_wait`` runs its blocks at once; when one raises, the launch raises within
    ``FAILED_BLOCK_GRACE_S`` even though another block waits for it (joined, it would hang)."""
    if not _numba_fixes.blocks_can_run_at_once():
        pytest.skip("the simulator's block driver is not simt_tiles' (a race check's recorder?)")
    t0 = time.monotonic()
    with pytest.raises(IndexError):
        _marked[2, 1](np.zeros(1, np.int64), np.zeros(2, np.int64))
    assert time.monotonic() - t0 < 6, "the launch waited for the block that waits for the failed one"
    assert _numba_fixes._CONCURRENT == 0


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's block driver")
def test_a_marked_launch_that_waits_is_refused_under_the_race_check():
    """A race check's recorder runs blocks one at a time with shared arrays of its own: a marked launch whose
    blocks wait raises RuntimeError naming the kernel (it would spin for ever, plan replays included); one whose
    ``waits`` says no runs a block at a time."""
    from simt_tiles import analyze

    with analyze.racecheck():
        with pytest.raises(RuntimeError, match="_waits_for_a_failing_block: its blocks wait for one another"):
            _marked[2, 1](np.zeros(1, np.int64), np.zeros(2, np.int64))
        out = np.zeros(3, np.int64)
        _marked_never_waits[3, 1](np.full(1, 7, np.int64), out)  # a block at a time: the recorder's
        np.testing.assert_array_equal(out, [7, 7, 7])
