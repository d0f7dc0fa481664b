"""What every conv2d rung shares: boundary modes, the kernel signatures, how a
config is specialised for one call, the per-filter kernel cache, and the
launch-side conventions.

The operation (scipy.ndimage.correlate, 2-D, origin 0)::

    out[i, j] = Σ_a Σ_b  weights[a, b] · ext(image)[i + a − anchor_h, j + b − anchor_w]

``ext`` extends the image beyond its edges by the boundary mode; the anchor
(the filter's centre) is ``(KH // 2, KW // 2)``.  ``convolve2d`` is the same
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
"""

from __future__ import annotations

import dataclasses
import enum
import functools

import numpy as np
from numba import int64, void

from ...runtime import jit, numba_dtype


class Mode(enum.IntEnum):
    """scipy.ndimage's boundary modes, as the positive ints a config can hold.

    ``str(Mode.REFLECT) == "reflect"`` (the name the public functions take)."""

    REFLECT = 1  # d c b a | a b c d | d c b a   (edge repeated; period 2n)
    CONSTANT = 2  # k k k k | a b c d | k k k k   (k = cval)
    NEAREST = 3  # a a a a | a b c d | d d d d
    MIRROR = 4  # d c b | a b c d | c b a        (edge not repeated; period 2n − 2)
    WRAP = 5  # a b c d | a b c d | a b c d      (period n)

    def __str__(self) -> str:
        return self.name.lower()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    @classmethod
    def parse(cls, mode) -> "Mode":
        """The Mode named ``mode`` (or ``mode`` itself, a Mode); ValueError naming
        the argument otherwise."""
        if isinstance(mode, cls):
            return mode
        if isinstance(mode, str) and mode in MODES:
            return cls[mode.upper()]
        raise ValueError(f"mode: expected one of {MODES}; got {mode!r}")


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


def signature(dtype, all_taps: bool = False):
    """``void(image, weights, out, cval, anchor_h, anchor_w)``.

    image and out are C-contiguous; weights may be any strided 2-D view (the
    flipped filter of ``convolve2d`` has negative strides).  cval has the
    image's dtype.  ``all_taps`` (a compile-time parameter of the factories,
    see :data:`TINY_WEIGHT`) does not change the signature."""
    t = numba_dtype(dtype)
    return void(t[:, ::1], t[:, :], t[:, ::1], t, int64, int64)


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


def anchors(kh: int, kw: int, *, flipped: bool) -> tuple[int, int]:
    """The filter's centre: ``size // 2`` (correlate) or ``(size − 1) // 2``
    (convolve, whose filter is flipped: scipy's shift for even sizes)."""
    if flipped:
        return (kh - 1) // 2, (kw - 1) // 2
    return kh // 2, kw // 2


def flops(h: int, w: int, kh: int, kw: int) -> int:
    """Floating-point operations of one filtering (a multiply and an add per tap)."""
    return 2 * h * w * kh * kw
