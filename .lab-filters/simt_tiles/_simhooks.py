"""Memory-access recording in Numba's CUDA simulator (private to :mod:`simt_tiles.analyze`).

While a :class:`Recorder` is installed, every simulated kernel launch records each
element access to a shared array (``cuda.shared.array``) and to a kernel argument
(global memory): block, barrier interval, warp, lane, array, byte address, size,
read or write, and the source site (file, line, bytecode offset) that made it.
At the end of each block the recorder hands the block's accesses to its
``on_block`` callback and forgets them, so memory stays bounded by one block.

How it hooks in (the careful way :mod:`simt_tiles.warp` does): patches on the
simulator's classes, installed by :func:`install` and removed by the matching
:func:`uninstall` (reference-counted, so nested users are fine):

* ``FakeCUDAShared.array`` — the same per-source-line allocation as the
  simulator's (one array per ``(file, line)``: two ``cuda.shared.array`` calls on
  one line alias, exactly as in the simulator), returned as a recording view.
  Dynamic shared memory (shape 0) is one address space for every dtype view.
* ``FakeWithinKernelCUDAArray.__getitem__/__setitem__`` — global arrays.
* ``BlockThread.syncthreads`` — counts the thread's barriers (its barrier interval).
* ``simt_tiles.warp._exchange`` — counts ``syncwarp`` calls (a warp's memory
  ordering point, used for intra-warp hazards).
* ``BlockManager.run`` — delimits blocks.

Only accesses made on simulator threads are recorded; nothing changes on a GPU.
"""

from __future__ import annotations

import operator
import sys
import threading

import numpy as np

SHARED, GLOBAL = "shared", "global"

_lock = threading.Lock()
_installed = 0
_saved: dict = {}
#: the recorder receiving accesses (one simulated launch runs at a time)
active: Recorder | None = None


class Recorder:
    """Collects one block's accesses at a time; ``on_block(block, records)`` consumes them.

    A record is a tuple ``(space, site, occurrence, warp, lane, interval, wsync,
    array key, byte address, size, is_write)``; ``site`` is ``(file, line)`` and
    ``occurrence`` counts that thread's accesses of that array, that way, on that
    line (how the lanes of one warp-wide request are paired: two accesses of one
    array on one line, ``s[i] + s[i + k]``, are told apart by their order, which
    every lane follows).
    """

    def __init__(self, on_block, *, shared: bool = True, global_: bool = True):
        self.on_block = on_block
        self.shared = shared
        self.global_ = global_
        self.records: list = []
        self.names: dict = {}  # (site, array key) -> variable name, found once per site
        self.shapes: dict = {}  # array key -> its shape (simt_tiles.pictures folds addresses with it)
        self.barriers: set = set()  # (file, line) of every syncthreads executed

    # -- called by the hooks ---------------------------------------------------------
    def record(self, space, key, addr, size, is_write, frame, obj):
        t = threading.current_thread()
        tid = getattr(t, "thread_id", None)
        if tid is None:  # not a simulated CUDA thread
            return
        # not f_lasti: Python 3.11 reports other offsets for a code object's first runs
        site = (frame.f_code.co_filename, frame.f_lineno)
        occ = t.__dict__.setdefault("_simt_occ", {})
        n = occ.get((site, key, is_write), 0)
        occ[(site, key, is_write)] = n + 1
        if (site, key) not in self.names:
            self.names[(site, key)] = _name_in(frame, obj)
            self.shapes[key] = tuple(getattr(obj, "shape", ()))
        self.records.append((space, site, n, tid // 32, tid % 32, t.__dict__.get("_simt_bar", 0),
                             t.__dict__.get("_simt_wsync", 0), key, addr, size, is_write))

    def end_block(self, grid_point):
        records, self.records = self.records, []
        self.on_block(tuple(int(v) for v in grid_point), records)


def _name_in(frame, obj):
    """The local variable name bound to ``obj`` in ``frame`` (for the report), or "?"."""
    for name, value in frame.f_locals.items():
        if value is obj:
            return name
    return "?"


def _flat_offset(shape, strides, idx):
    """Byte offset of element ``idx`` (ints only) or None when ``idx`` is not a full index."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) != len(shape):
        return None
    off = 0
    for i, n, s in zip(idx, shape, strides):
        try:
            i = operator.index(i)
        except TypeError:
            return None
        if i < 0:
            i += n
        off += i * s
    return off


def _data_ptr(ary) -> int:
    return ary.__array_interface__["data"][0]


# ---------------------------------------------------------------------------
# shared memory: a recording ndarray view
# ---------------------------------------------------------------------------


class TrackedShared(np.ndarray):
    """A view of a simulator shared array that records element reads and writes."""

    _simt_key = None
    _simt_root = 0  # data pointer of the allocation this view lies in

    def __array_finalize__(self, obj):
        if obj is not None:
            self._simt_key = getattr(obj, "_simt_key", None)
            self._simt_root = getattr(obj, "_simt_root", 0)

    def _simt_note(self, idx, is_write):
        rec = active
        if rec is None or not rec.shared or self._simt_key is None:
            return
        off = _flat_offset(self.shape, self.strides, idx)
        if off is None:
            return
        addr = _data_ptr(self) - self._simt_root + off
        rec.record(SHARED, self._simt_key, addr, self.itemsize, is_write, sys._getframe(2), self)

    def __getitem__(self, idx):
        self._simt_note(idx, False)
        return super().__getitem__(idx)

    def __setitem__(self, idx, value):
        self._simt_note(idx, True)
        super().__setitem__(idx, value)


def _shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array`` keyed per source line like the simulator's, returning a recording view."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    if shape == 0:
        count = self._dynshared_size // dtype.itemsize
        res = np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
        key, root = ("<dynamic shared>", 0), _data_ptr(self._dynshared)
    else:
        f = sys._getframe(1)
        key = (f.f_code.co_filename, f.f_lineno)
        res = self._allocations.get(key)
        if res is None:
            res = self._allocations[key] = np.empty(shape, dtype)
        root = _data_ptr(res)
    view = res.view(TrackedShared)
    view._simt_key, view._simt_root = key, root
    return view


# ---------------------------------------------------------------------------
# global memory: kernel arguments
# ---------------------------------------------------------------------------


def _global_meta(wrapper):
    meta = wrapper.__dict__.get("_simt_meta")
    if meta is None:
        ary = wrapper.__dict__["_item"]._ary
        root = ary
        while isinstance(root.base, np.ndarray):
            root = root.base
        meta = (("<global>", id(root)), _data_ptr(ary) - _data_ptr(root), ary.shape, ary.strides, ary.itemsize)
        wrapper.__dict__["_simt_meta"] = meta
    return meta


def _global_note(wrapper, idx, is_write):
    rec = active
    if rec is None or not rec.global_:
        return
    key, base, shape, strides, itemsize = _global_meta(wrapper)
    off = _flat_offset(shape, strides, idx)
    if off is not None:
        rec.record(GLOBAL, key, base + off, itemsize, is_write, sys._getframe(2), wrapper)


def _global_getitem(self, idx):
    _global_note(self, idx, False)
    return _saved["getitem"](self, idx)


def _global_setitem(self, idx, value):
    _global_note(self, idx, True)
    _saved["setitem"](self, idx, value)


# ---------------------------------------------------------------------------
# barriers, warps, blocks
# ---------------------------------------------------------------------------


def _syncthreads(self):
    self.__dict__["_simt_bar"] = self.__dict__.get("_simt_bar", 0) + 1
    rec = active
    if rec is not None:  # the barrier's source line (under cuda.syncthreads in kernelapi)
        f = sys._getframe(2)
        rec.barriers.add((f.f_code.co_filename, f.f_lineno))
    _saved["syncthreads"](self)


def _exchange(name, mask, value):
    out = _saved["exchange"](name, mask, value)
    if name == "syncwarp":
        t = threading.current_thread()
        t.__dict__["_simt_wsync"] = t.__dict__.get("_simt_wsync", 0) + 1
    return out


def _block_run(self, grid_point, *args):
    try:
        _saved["block_run"](self, grid_point, *args)
    except BaseException:
        if active is not None:  # the block failed: its accesses are not analysed (the error stands)
            active.records = []
        raise
    if active is not None:
        active.end_block(grid_point)


def install() -> None:
    """Patch the simulator (idempotent, reference-counted; a no-op on a GPU)."""
    global _installed
    # deferred: loads Numba (backend choice first)
    from .runtime import SIMULATOR

    if not SIMULATOR:
        raise RuntimeError(
            "simt_tiles.analyze needs Numba's CUDA simulator: set NUMBA_ENABLE_CUDASIM=1 before numba is imported"
        )
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    # deferred: loads Numba (backend choice first)
    from . import warp

    with _lock:
        _installed += 1
        if _installed > 1:
            return
        _saved.update(
            shared_array=kernelapi.FakeCUDAShared.array,
            getitem=devicearray.FakeWithinKernelCUDAArray.__getitem__,
            setitem=devicearray.FakeWithinKernelCUDAArray.__setitem__,
            syncthreads=kernel.BlockThread.syncthreads,
            block_run=kernel.BlockManager.run,
            exchange=warp._exchange,
        )
        kernelapi.FakeCUDAShared.array = _shared_array
        devicearray.FakeWithinKernelCUDAArray.__getitem__ = _global_getitem
        devicearray.FakeWithinKernelCUDAArray.__setitem__ = _global_setitem
        kernel.BlockThread.syncthreads = _syncthreads
        kernel.BlockManager.run = _block_run
        warp._exchange = _exchange


def uninstall() -> None:
    """Undo one :func:`install`; the last one restores the simulator."""
    global _installed
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    # deferred: loads Numba (backend choice first)
    from . import warp

    with _lock:
        if _installed == 0:
            return
        _installed -= 1
        if _installed:
            return
        kernelapi.FakeCUDAShared.array = _saved["shared_array"]
        devicearray.FakeWithinKernelCUDAArray.__getitem__ = _saved["getitem"]
        devicearray.FakeWithinKernelCUDAArray.__setitem__ = _saved["setitem"]
        kernel.BlockThread.syncthreads = _saved["syncthreads"]
        kernel.BlockManager.run = _saved["block_run"]
        warp._exchange = _saved["exchange"]
        _saved.clear()
