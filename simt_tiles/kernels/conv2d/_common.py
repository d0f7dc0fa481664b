"""What every conv2d rung shares: boundary modes, the kernel signatures, how a
config is specialised for one call, the per-filter kernel cache, the register-tile
rungs' config and geometry, and how a rung takes a call.

The operation (scipy.ndimage.correlate, 2-D)::

    out[i, j] = Σ_a Σ_b  weights[a, b] · ext(image)[i + a − anchor_h, j + b − anchor_w]

``ext`` extends the image beyond its edges by the boundary mode; the anchor
(the filter's centre) is ``(KH // 2, KW // 2)``, shifted by scipy's ``origin``
(:func:`anchors`; ``FilterCall.origin``).  ``convolve2d`` is the same
kernel given the *flipped* filter (a view with negative strides, no copy) and
anchor ``((KH − 1) // 2, (KW − 1) // 2)`` — for an even size that is one less
than ``size // 2``, which is scipy's shift (``convolve`` = ``correlate`` of the
flipped filter with origin −1 on even axes).  Both are passed at launch time.

Compile-time constants (closure constants of each rung's factory)
    * the boundary **mode** — every rung's config has a ``mode`` field (a
      :class:`Mode`); the kernel tests it with ``MODE == REFLECT`` etc., and
      the compiler removes the other modes' branches;
    * the **filter shape** ``kh × kw`` for the shared-memory rungs (k02–k09):
      their shared-array shapes and unrolled loops need it.  k01 reads it from
      ``weights.shape`` at run time;
    * the **filter values** for the constant-filter rungs (k04, k05, k07–k09): the
      factory takes the filter as a NumPy array, the kernel places it in
      constant memory with ``cuda.const.array_like`` and the compiler folds
      each weight into its FMA.  Their kernels take no weights argument
      (:func:`constant_filter_signature`); :func:`constant_filter_kernel`
      compiles and caches one per distinct filter.  Built without a filter
      (the compile gate), they use :func:`gate_filter`.

    The launcher replaces these fields of the config it is given with the
    call's values (:func:`specialise`), so a caller picks only tile sizes;
    :meth:`Rung.kernel` then compiles once per (tiles, filter shape, mode,
    dtype).  A preset's ``kh``/``kw``/``mode`` are what the compile gate builds.

No plain device functions (they would blind the GPU-free compile gate, see
docs/design.md): every rung takes the index mapping, and k05–k09 the patch
loader and the tile or output store, from ``_staging.py`` as ``inline="always"``
device functions, which Numba inlines before typing.
:func:`extend_index` below is its plain-Python twin, for readers and tests.

How a rung takes a call
    The public functions check the arguments (:mod:`._args`), :mod:`.dispatch` chooses the rung
    and its config, and the rung launches: ``rung.run(spec, call)`` (:class:`FilterRung`) asks its
    binding, ``bind(rung, spec, dtype, call)``, for the compiled kernel and its arguments
    (:class:`FilterCall`, :class:`SeparableCall`; the call carries the filter's anchor, so that a
    binding calls nothing back here).  Three calling conventions for 2-D filters
    here, k10's own in its file, one for the fused separable kernel:

    =========================  ==========================================================
    :data:`WEIGHTS_ARGUMENT`   k01–k03: the filter is a device array argument, flipped as
                               a negative-stride view for convolve
    :data:`CONSTANT_FILTER`    k04, k05: the filter's values are compiled into the kernel
                               (one compilation per filter); anchors are arguments
    :data:`CONSTANT_VECTOR`    k07–k09: values and anchor compiled in; the kernel takes
                               whether image and out start 16-byte aligned
    :data:`k10.RUNTIME_WEIGHTS`  k10: a NumPy filter as kernel parameters (its values stay on
                               the host), a device filter as a device array
    :data:`SEPARABLE`          k06: two 1-D filters as device arrays
    =========================  ==========================================================

A stack of slices on grid z
    ``correlate1d`` along a middle axis of a volume is ``n`` independent 2-D problems of one shape
    (the C-contiguous ``(outer, L, inner)`` view).  A :class:`FilterCall` may carry them as 3-D
    ``(n, h, w)`` arrays.  A rung built with ``slices=True`` (``FilterRung.slices``: k01, k03, k10,
    the rungs ``variant=None`` picks) takes the stack in one launch: :func:`on_grid_z` wraps its
    2-D kernel, inlined, so that block ``(x, y, z)`` computes block ``(x, y)`` of slice ``z``
    (pieces of at most :data:`MAX_GRID_Z` slices).  Its 2-D kernel and signature are unchanged:
    ``slices=False`` builds them as before.  The other rungs launch once per slice.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda, int64, void

from ... import codegen
from ..._recording import no_plan
from ...interop import Operand
from ...runtime import Gate, Rung, TileConfig, grid_for, jit, numba_dtype
from ...vector import aligned


class Mode(enum.IntEnum):
    """scipy.ndimage's boundary modes, as the positive ints a config can hold.

    ``str(Mode.REFLECT) == "reflect"`` (the name the public functions take; ``_args.mode_of``
    reads it)."""

    REFLECT = 1  # d c b a | a b c d | d c b a   (edge repeated; period 2n)
    CONSTANT = 2  # k k k k | a b c d | k k k k   (k = cval)
    NEAREST = 3  # a a a a | a b c d | d d d d
    MIRROR = 4  # d c b | a b c d | c b a        (edge not repeated; period 2n − 2)
    WRAP = 5  # a b c d | a b c d | a b c d      (period n)

    def __str__(self) -> str:
        return self.name.lower()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


#: the mode names the public functions accept, in scipy's documentation order
MODES: tuple[str, ...] = tuple(str(m) for m in Mode)


def mode_rule(config):
    """The rule every conv2d config adds: ``mode`` is one of :class:`Mode`'s values."""
    return ("mode", config.mode in tuple(int(m) for m in Mode),
            f"mode is one of {', '.join(f'{int(m)} ({m})' for m in Mode)}")


def extend_index(p: int, n: int, mode: Mode) -> int:
    """Which image index coordinate ``p`` of the extended line reads (line length
    ``n`` ≥ 1); −1 means "the constant ``cval``".

    Plain Python, the same statements as the inner ``extend`` of every kernel.
    Reflections *fold* with a modulo, so any distance from the edge works —
    a filter many times larger than the image included (a single reflection
    would index outside the image once p < −n).
    """
    if 0 <= p < n:
        return p
    if mode == Mode.REFLECT:
        p %= 2 * n
        return 2 * n - 1 - p if p >= n else p
    if mode == Mode.MIRROR:
        if n == 1:
            return 0
        p %= 2 * n - 2
        return 2 * n - 2 - p if p >= n else p
    if mode == Mode.NEAREST:
        return 0 if p < 0 else n - 1
    if mode == Mode.WRAP:
        return p % n
    return -1  # CONSTANT


#: scipy.ndimage's footprint rule: ``correlate``/``convolve`` skip every tap whose
#: weight has ``|w| <= DBL_EPSILON`` (2**-52; ``ni_filters.c``: ``fabs(w) > DBL_EPSILON``),
#: so a NaN or inf in the image spreads only along the other taps (a Laplacian's
#: cross, not its whole window) — 0·NaN would be NaN.  ``correlate1d`` counts every
#: tap (its 1-D loop has no such test): the kernels' ``all_taps=True``.  2**-52 is
#: exact in float32 too, so the test is the same in both dtypes.  A NaN weight fails
#: the test: skipped too, as scipy's correlate does.
TINY_WEIGHT = float(np.finfo(np.float64).eps)


def tap_counts(w, all_taps: bool = False):
    """Whether a tap of weight ``w`` contributes (plain-Python twin of the kernels' test)."""
    return all_taps or abs(w) > TINY_WEIGHT


def image_type(dtype, slices: bool = False):
    """The Numba type of a kernel's ``image`` and ``out``: C-contiguous 2-D, or 3-D ``(n, h, w)``
    for a kernel built with ``slices=True`` (:func:`on_grid_z`)."""
    t = numba_dtype(dtype)
    return t[:, :, ::1] if slices else t[:, ::1]


def signature(dtype, all_taps: bool = False, slices: bool = False):
    """``void(image, weights, out, cval, anchor_h, anchor_w)``.

    image and out are C-contiguous (3-D stacks of slices with ``slices=True``:
    :func:`on_grid_z`); weights may be any strided 2-D view (the
    flipped filter of ``convolve2d`` has negative strides).  cval has the
    image's dtype.  ``all_taps`` (a compile-time parameter of the factories,
    see :data:`TINY_WEIGHT`) does not change the signature."""
    t, a = numba_dtype(dtype), image_type(dtype, slices)
    return void(a, t[:, :], a, t, int64, int64)


#: CUDA's largest grid z: a stack of more slices launches in pieces of at most this many
MAX_GRID_Z = 65535
#: CUDA's grid y limit: a 2-D problem's tiles of rows (:meth:`FilterRung.run` refuses more, naming the image)
MAX_GRID_Y = 65535

#: the gate of a rung that takes slices (``FilterRung.slices``): its 2-D kernel and its stack's
SLICES_GATE = Gate(params=({}, {"slices": True}))


def on_grid_z(kernel):
    """The kernel function ``kernel`` (a 2-D rung's, with parameters named ``image`` and ``out``) for
    a stack of slices: the same parameters, ``image`` and ``out`` 3-D ``(n, h, w)``; block
    ``(x, y, z)`` runs ``kernel``'s body — inlined, so its code is the 2-D kernel's — on
    ``image[z]`` and ``out[z]``, the grid's x and y as for one slice.

    Written out as source (:mod:`simt_tiles.codegen`: a real file, so the disk cache of a rung that
    asks for it keeps this kernel too), one line per parameter list."""
    names = list(inspect.signature(kernel).parameters)
    if "image" not in names or "out" not in names:
        raise ValueError(f"kernel: expected parameters named image and out; got {names}")
    passed = ", ".join(f"{n}[z]" if n in ("image", "out") else n for n in names)
    src = codegen.Source()
    with src.block("def on_grid_z(body):"):
        with src.block(f"def {kernel.__name__}_slices({', '.join(names)}):"):
            src.line("z = uint64(cuda.blockIdx.z)  # this block's slice", f"body({passed})")
        src.line(f"return {kernel.__name__}_slices")
    wrap = codegen.load_function("on_grid_z", src.text(), header="from numba import cuda, uint64")
    return wrap(cuda.jit(device=True, inline="always")(kernel))


def constant_filter_signature(dtype):
    """``void(image, out, cval, anchor_h, anchor_w)``: the constant-filter rungs
    (k04, k05) take no weights argument — the values are compiled in."""
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[:, ::1], t, int64, int64)


def gate_filter(kh: int, kw: int, dtype) -> np.ndarray:
    """The deterministic filter a constant-filter rung is built with when none is
    given (the compile gate): distinct values in (0.3, 0.8) — none 0 or 1, so
    that no tap folds away."""
    n = kh * kw
    return (0.3 + 0.5 * np.arange(1, n + 1) / (n + 1)).reshape(kh, kw).astype(dtype)


#: compiled constant-filter kernels kept (least recently used dropped): each
#: distinct filter value is one compilation
FILTER_KERNEL_CACHE = 64


def constant_filter_kernel(rung, config, dtype, weights: np.ndarray, anchor=None, all_taps=False):
    """The compiled kernel of a constant-filter rung for ``config`` (already
    specialised), ``dtype`` and the host filter ``weights`` (any layout, the
    image's dtype) — and ``anchor`` ``(row, column)`` for a rung that compiles
    that in too (k07), and ``all_taps`` (:data:`TINY_WEIGHT`).  Cached on the
    filter's bytes, dtype and shape, the anchor, the tap rule, the mode and
    tiles (:data:`FILTER_KERNEL_CACHE` kernels)."""
    w = np.ascontiguousarray(weights, dtype=dtype)
    return _filter_kernel(rung, config, np.dtype(dtype), w.shape, w.tobytes(), anchor, bool(all_taps))


@functools.lru_cache(maxsize=FILTER_KERNEL_CACHE)
def _filter_kernel(rung, config, dtype: np.dtype, shape: tuple, data: bytes, anchor, all_taps=False):
    config.check_smem(dtype)
    w = np.frombuffer(data, dtype).reshape(shape)  # read-only: frozen into the kernel
    if anchor is None:
        pyfunc = rung.factory(config, dtype, w, all_taps=all_taps)
    else:
        pyfunc = rung.factory(config, dtype, w, anchor, all_taps=all_taps)
    return jit(pyfunc, func_or_sig=rung.signature(dtype), **rung.jit_options(config, dtype))


def specialise(config, kh: int, kw: int, mode: Mode):
    """``config`` with its filter-shape and mode fields set for one call.

    Only the fields the config has are replaced (k01 has no ``kh``/``kw``).
    Building the new config re-validates it, so a filter whose halo does not
    fit in shared memory raises :class:`~simt_tiles.runtime.ConfigError`."""
    names = {f.name for f in dataclasses.fields(config)}
    values = {"kh": kh, "kw": kw, "mode": mode}
    return dataclasses.replace(config, **{k: v for k, v in values.items() if k in names})


def anchors(kh: int, kw: int, *, flipped: bool, origin: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """The filter's anchor: its centre ``size // 2`` shifted by scipy's ``origin`` (correlate), or
    ``(size − 1) // 2`` shifted by ``−origin`` (convolve, whose filter is flipped: scipy mirrors
    the origin and shifts even sizes by one).  ``origin`` is checked by the public functions
    (``_args.check_origin``), so the anchor lies in ``0 .. size − 1``."""
    oh, ow = origin
    if flipped:
        return (kh - 1) // 2 - oh, (kw - 1) // 2 - ow
    return kh // 2 + oh, kw // 2 + ow


def flops(h: int, w: int, kh: int, kw: int) -> int:
    """Floating-point operations of one filtering (a multiply and an add per tap)."""
    return 2 * h * w * kh * kw


# ---------------------------------------------------------------------------
# The tiled rungs (k03, k04: a row of outputs per thread; k05, k06 and k07–k10 built on k05: a
# 2-D register tile): config and launch geometry
# ---------------------------------------------------------------------------

# A ``block_x × block_y`` block computes one output tile (:meth:`FilterTileConfig.tile`) from a
# staged patch, the tile plus the filter's halo.  ``kh``, ``kw`` and ``mode`` are compile-time
# constants set by the launcher from the call (:func:`specialise`); a preset's values only choose
# what the compile gate builds.  Each rung gives ``smem_bytes`` (what it stages: its lesson).  The
# 2-D rungs also share device code — the patch loader (interior fast path, edge path with the
# boundary mapping) and the staged, coalesced tile store: :mod:`._staging`.  k02 keeps its own
# config: its lesson is the tile itself, one output per thread (``tile_w × tile_h`` threads).


@dataclasses.dataclass(frozen=True)
class FilterTileConfig(TileConfig):
    """What the tiled configs share besides their fields (``block_x``, ``block_y``, ``kh``, ``kw``,
    ``mode``, and the per-thread outputs :meth:`tile` reads): the block, the patch, the mode rule."""

    def block(self):
        return (self.block_x, self.block_y)

    def tile(self) -> tuple[int, int]:
        """Output tile (rows, columns) of one block."""
        raise NotImplementedError

    def patch(self) -> tuple[int, int]:
        """The staged patch (rows, columns): the output tile plus the filter's halo."""
        th, tw = self.tile()
        return th + self.kh - 1, tw + self.kw - 1

    def rules(self):
        yield mode_rule(self)


@dataclasses.dataclass(frozen=True)
class RowTileConfig(FilterTileConfig):
    """A ``block_x × block_y`` block; each thread computes ``rx`` consecutive outputs of one row,
    so the output tile is ``block_y × (rx·block_x)`` (k03, k04)."""

    block_x: int = 32
    block_y: int = 8
    rx: int = 3
    kh: int = 5
    kw: int = 5
    mode: int = Mode.REFLECT

    def tile(self) -> tuple[int, int]:
        return (self.block_y, self.rx * self.block_x)


@dataclasses.dataclass(frozen=True)
class RegisterTileConfig(FilterTileConfig):
    """A ``block_x × block_y`` block; each thread computes ``ry × rx`` outputs (``rx`` consecutive
    columns of ``ry`` consecutive rows), so the output tile is ``(ry·block_y) × (rx·block_x)``.

    Subclasses may change the defaults."""

    block_x: int = 32
    block_y: int = 8
    rx: int = 3
    ry: int = 4
    kh: int = 7
    kw: int = 7
    mode: int = Mode.REFLECT

    def tile(self) -> tuple[int, int]:
        return (self.ry * self.block_y, self.rx * self.block_x)


def geometry(config: FilterTileConfig, h: int, w: int):
    """One block per output tile (``config.tile()``); grid x over columns, y over rows."""
    th, tw = config.tile()
    return grid_for((w, h), (tw, th)), config.block()


# ---------------------------------------------------------------------------
# How a rung takes a call
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FilterCall:
    """One 2-D filtering on device arrays (non-empty): what a binding needs; or a stack of ``n``
    of them, ``image`` and ``out`` 3-D (:func:`on_grid_z`)."""

    image: Any  # (H, W) device array, or (n, H, W): n slices filtered alike
    weights: Operand  # (KH, KW): a device array, or NumPy for a rung that compiles the values in
    out: Any  # of image's shape
    cval: float
    flipped: bool  # convolve: the filter flipped on both axes, scipy's anchor
    stream: Any
    #: count zero taps too (correlate1d, as scipy's; ``_common.TINY_WEIGHT``)
    all_taps: bool = False
    #: scipy's ``origin`` (rows, columns): shifts the anchor (:func:`anchors`), at run time
    origin: tuple = (0, 0)
    #: the anchor (row, column) the kernel is given: :func:`anchors` of the filter's shape,
    #: ``flipped`` and ``origin``, set when the call is made (a binding reads it as a field)
    anchor: tuple = dataclasses.field(init=False)
    #: the compile-time parameters the call's arrays ask of the kernel: ``{"slices": True}`` for a
    #: stack (3-D image and out, :func:`on_grid_z`), none for one image; set as ``anchor`` is
    stacked: dict = dataclasses.field(init=False)

    def __post_init__(self):
        kh, kw = self.weights.dev.shape
        object.__setattr__(self, "anchor", anchors(kh, kw, flipped=self.flipped, origin=self.origin))
        object.__setattr__(self, "stacked", {} if len(self.image.shape) == 2 else {"slices": True})

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.image.dtype)

    @property
    def problem(self) -> tuple[int, int]:
        """``(h, w)``: what the rungs' ``geometry`` takes (of one slice)."""
        return tuple(self.image.shape[-2:])

    @property
    def slices(self) -> int | None:
        """How many slices a 3-D call stacks; None for a 2-D call."""
        return self.image.shape[0] if len(self.image.shape) == 3 else None

    def pieces(self, most: int):
        """A 3-D call as calls of at most ``most`` consecutive slices (views of the same arrays)."""
        return [dataclasses.replace(self, image=self.image[z:z + most], out=self.out[z:z + most])
                for z in range(0, self.slices, most)]

    def slice(self, z: int):
        """Slice ``z`` of a 3-D call, as a 2-D call."""
        return dataclasses.replace(self, image=self.image[z], out=self.out[z])


@dataclasses.dataclass(frozen=True)
class VolumeCall:
    """One 3-D filtering (``correlate``/``convolve`` of a volume, k12) on C-contiguous D × H × W device
    arrays (non-empty): the filter's anchor on each axis as :func:`anchors` gives it per axis."""

    image: Any  # (D, H, W) device array
    weights: Operand  # (KD, KH, KW) device array
    out: Any  # of image's shape
    cval: float
    flipped: bool  # convolve: the filter flipped on every axis, scipy's anchor
    stream: Any
    origin: tuple = (0, 0, 0)  #: scipy's ``origin`` per axis
    anchor: tuple = dataclasses.field(init=False)  #: (d, h, w), as :class:`FilterCall`'s

    def __post_init__(self):
        kd, kh, kw = self.weights.dev.shape
        od, oh, ow = self.origin
        ad = (kd - 1) // 2 - od if self.flipped else kd // 2 + od
        object.__setattr__(self, "anchor", (ad, *anchors(kh, kw, flipped=self.flipped, origin=(oh, ow))))

    dtype = FilterCall.dtype


@dataclasses.dataclass(frozen=True)
class SeparableCall:
    """One separable filtering: the column filter ``wy`` (KH × 1) and row filter ``wx`` (1 × KW)."""

    image: Any
    wy: Operand
    wx: Operand
    out: Any
    cval: float
    stream: Any
    origin: tuple = (0, 0)  #: scipy's origin (rows, columns), as :class:`FilterCall`'s
    anchor: tuple = dataclasses.field(init=False)  #: as :class:`FilterCall`'s (``wy`` × ``wx``, not flipped)

    def __post_init__(self):
        kh, kw = self.wy.dev.shape[0], self.wx.dev.shape[1]
        object.__setattr__(self, "anchor", anchors(kh, kw, flipped=False, origin=self.origin))

    dtype = FilterCall.dtype
    problem = FilterCall.problem
    slices = None  #: always one 2-D problem


@dataclasses.dataclass(frozen=True)
class Binding:
    """A calling convention: ``bind(rung, spec, dtype, call) -> (kernel, args)``."""

    name: str
    #: the filter's values are compiled into the kernel: NumPy weights stay on the host
    compiles_filter: bool
    bind: Callable
    #: NumPy weights stay on the host (compiled in, or passed as kernel parameters)
    host_weights: bool = False

    def __call__(self, rung, spec, dtype, call):
        return self.bind(rung, spec, np.dtype(dtype), call)


def host_filter(w_op: Operand, flipped: bool, stream) -> np.ndarray:
    """The filter's values on the host, flipped for convolve (a constant-filter
    rung compiles them in).  Device weights are copied back: a synchronising
    copy of KH·KW values."""
    no_plan("the filter's values are compiled in")  # a plan would keep this filter's kernel
    if w_op.kind == "numpy":
        w = w_op.original
    else:
        w = w_op.dev.copy_to_host(stream=stream)
        if stream:
            stream.synchronize()
    return w[::-1, ::-1] if flipped else w


def _weights_argument(rung, spec, dtype, call: FilterCall):
    w = call.weights.dev
    if isinstance(w, np.ndarray):  # kept on the host for a constant-filter rung, then fell back
        w = cuda.to_device(w, stream=call.stream)
    anchor_h, anchor_w = call.anchor
    taps = {"all_taps": True} if call.all_taps else {}
    kernel = rung.kernel(spec, dtype, **taps, **call.stacked)
    return kernel, (call.image, w[::-1, ::-1] if call.flipped else w, call.out, dtype.type(call.cval),
                    anchor_h, anchor_w)


def _constant_filter(rung, spec, dtype, call: FilterCall):
    anchor_h, anchor_w = call.anchor
    kernel = constant_filter_kernel(rung, spec, dtype, host_filter(call.weights, call.flipped, call.stream),
                                    all_taps=call.all_taps)
    return kernel, (call.image, call.out, dtype.type(call.cval), anchor_h, anchor_w)


def _constant_vector(rung, spec, dtype, call: FilterCall):
    kernel = constant_filter_kernel(rung, spec, dtype, host_filter(call.weights, call.flipped, call.stream),
                                    call.anchor, all_taps=call.all_taps)
    return kernel, (call.image, call.out, dtype.type(call.cval), aligned(call.image) and aligned(call.out))


def _separable(rung, spec, dtype, call: SeparableCall):
    anchor_h, anchor_w = call.anchor
    return rung.kernel(spec, dtype), (call.image, call.wy.dev[:, 0], call.wx.dev[0], call.out,
                                      dtype.type(call.cval), anchor_h, anchor_w)


WEIGHTS_ARGUMENT = Binding("weights argument", False, _weights_argument)
CONSTANT_FILTER = Binding("constant filter", True, _constant_filter)
CONSTANT_VECTOR = Binding("constant filter and anchor, aligned flag", True, _constant_vector)
SEPARABLE = Binding("two 1-D filters", False, _separable)


@dataclasses.dataclass(frozen=True, eq=False)
class FilterRung(Rung):
    """A conv2d rung: a :class:`~simt_tiles.runtime.Rung` that takes a :class:`FilterCall` (or a
    :class:`SeparableCall`) through its :class:`Binding` — the rungs differ in what the kernel
    is given for the filter."""

    bind: Binding | None = None
    #: the factory and signature take ``slices=True`` (:func:`on_grid_z`), and the gate builds it:
    #: a 3-D call is one launch (per :data:`MAX_GRID_Z` slices); else one launch per slice
    slices: bool = False

    def run(self, config, call) -> None:
        grid, block = self.geometry(config, *call.problem)
        if len(grid) > 1 and grid[1] > MAX_GRID_Y:  # CUDA's grid y: the driver's error, said in the caller's terms
            raise ValueError(
                f"image: {call.problem[0]} rows are {grid[1]} tiles of {self.name}'s along CUDA's grid y, past its "
                f"{MAX_GRID_Y}; filter fewer rows at a time (a 1-D filter along the last axis: view the image as "
                "(n, rows / n, columns), and correlate1d filters it as a stack of slices)")
        for grid, one in self.launches(grid, call):
            kernel, args = self.bind(self, config, one.dtype, one)
            kernel[grid, block, one.stream](*args)

    def launches(self, grid, call) -> list:
        """``(grid, call)`` per launch: a 2-D call as it is; a 3-D call in pieces of at most
        :data:`MAX_GRID_Z` slices, slice z on grid z (a rung that takes slices), else slice by slice."""
        if call.slices is None:
            return [(grid, call)]
        if self.slices:
            return [((*grid, piece.slices), piece) for piece in call.pieces(MAX_GRID_Z)]
        return [(grid, call.slice(z)) for z in range(call.slices)]
