"""The conv2d ladder: 2-D correlation and convolution with scipy.ndimage's boundary modes (and 3-D volumes).

``correlate2d`` / ``convolve2d`` compute exactly what ``scipy.ndimage.correlate``
/ ``scipy.ndimage.convolve`` compute for a 2-D image — modes
"reflect", "constant" (with ``cval``), "nearest", "mirror", "wrap"; any filter
size, even sizes and filters larger than the image included; scipy's ``origin``
(the anchor shifted at run time: no new kernel) — in the image's dtype (float32
or float64).  Integer images (``uint8`` … ``int64``), scipy's output-dtype rule
(``output=`` a dtype or an array) and filters of another dtype are scipy's too:
computed in float32 or float64 and converted as scipy converts (:mod:`._args`).
Complex inputs are not supported.  ``correlate1d`` is scipy.ndimage's ``correlate1d``
along any axis of an image of any number of dimensions (1-D, 2-D, 3-D volumes, ...: each
piece a 2-D problem of these rungs, see :func:`correlate1d`), and ``correlate_separable`` the 2-D
correlation with a rank-1 filter ``wy[:, None] · wx[None, :]`` computed as two 1-D passes;
``correlate2d``/``convolve2d``/``correlate_separable`` take 2-D images only (a volume's
separable filter is ``correlate1d`` along each axis in turn, as scipy's own).  ``correlate``/``convolve``
are scipy.ndimage's n-D ``correlate``/``convolve`` for 1-D, 2-D and 3-D images with a filter of as many
dimensions: a 2-D image is ``correlate2d``/``convolve2d``, a 1-D image a 1 × L one, a 3-D volume runs
``k12_volume`` (:data:`VOLUME_VARIANTS`).
Read the rungs in order:

========================  ====================================================
``k01_naive``             each output reads its window from global memory;
                          the boundary by index mapping (any filter size)
``k02_halo_tiled``        the block's tile plus a filter-sized halo staged in
                          shared memory, boundary applied while loading
``k03_register_blocked``  RX outputs of a row per thread, the window row
                          reused from registers (``variant=None``)
``k04_constant_filter``   k03 with the filter's values compiled into the
                          kernel (constant memory, folded into the FMAs):
                          one compilation per filter, opt-in
``k05_register_tile_2d``  RY × RX outputs per thread, each loaded row used
                          for up to KH output rows; a loader without
                          divisions; coalesced stores (filter compiled in,
                          opt-in)
``k06_separable_fused``   ``correlate_separable`` in one kernel: column pass
                          into shared memory, barrier, row pass
``k07_vectorized``        k05 with 128-bit global loads and stores (an
                          aligned patch, no staging); anchor compiled in too
``k08_prefetched``        k07 walking a column of tiles: the next tile's
                          patch loads into registers during this one's compute
``k09_async_copy``        k08 with cp.async (LDGSTS) into a second shared
                          buffer instead of registers
``k10_runtime_weights``   k05 with the filter read at run time (kernel
                          parameters, or staged from a device array): one
                          compilation per filter *shape*, kept on disk
                          (``variant=None`` up to 7 × 7)
``k11_large_filter``      the filter rows in a run-time loop, the weights
                          staged in shared memory, 128-bit loads feeding an
                          RY × RX register tile: FMA-bound filters past 7 × 7
                          (``variant=None`` there)
``k12_volume``            3-D volumes (``correlate``/``convolve``): k02's halo
                          tile walked down z, each halo plane staged once
                          into a ring of KD + 1 planes (2.5-D blocking, one
                          barrier per plane); ``k12_volume_naive`` (global
                          memory, any filter) when the ring does not fit
========================  ====================================================

``variant=None`` uses k10 for ``correlate2d``/``convolve2d``/``correlate1d`` with
filters up to 7 × 7 (device filters staged by each block: no copy back; a NumPy
filter with a NumPy image as kernel parameters: no upload; a NumPy filter with a
device image through its device copy, cached by content so that the call replays
its launch plan: :mod:`simt_tiles.device_copies`), k11 for larger ones (k10's loops
stop unrolling there; from 8 × 8 on a filter is FMA-bound), k03 and then k01 when the
halo does not fit in shared memory.
k04/k05/k07–k09 compile the filter's *values* in (seconds per new filter): opt-in.
``correlate_separable`` uses k06 (``variant="two_pass"``: two ``correlate1d``
calls with k03 through a global intermediate).

1-D filters are 2-D filters of extent 1 on the other axis: ``correlate1d``
along axis 1 is ``correlate2d`` with the 1 × K filter, along axis 0 with the
K × 1 filter, and any conv2d rung computes it (the filter shape is a
compile-time constant of the shared-memory rungs, so the extent-1 axis
costs nothing: one-trip loops, no halo).  scipy's ``correlate1d`` centres
the filter at K // 2 (origin 0), as ``correlate`` does.

Separable filters and mode "constant": ``correlate_separable(x, wy, wx)``
equals ``scipy.ndimage.correlate(x, outer(wy, wx))`` in every mode.  scipy's
chained ``correlate1d(correlate1d(x, wy, axis=0), wx, axis=1)`` (which its
separable filters — gaussian_filter, sobel, ... — use) equals that in every
mode but "constant": there the second pass pads the intermediate with
``cval``, whereas the 2-D filter's intermediate outside the image is
``cval·Σ wy``.  They agree when cval = 0 or Σ wy = 1; the two-pass variant
passes ``cval·Σ wy`` to its second pass to keep the 2-D semantics.

Zero weights, as scipy: ``correlate2d``/``convolve2d`` (and ``correlate_separable``)
skip every tap whose weight has ``|w| <= 2**-52`` — scipy's ``correlate`` tests
``fabs(w) > DBL_EPSILON`` — so a NaN or inf in the image (or a NaN ``cval``) spreads
only along the other taps (a Laplacian's cross, not its 3 × 3 window);
``correlate1d`` counts every tap (0·NaN = NaN), as scipy's ``correlate1d`` does.
Rungs that compile the filter in drop those taps from the code; the others test
each tap's weight once (a predicate on its multiply-adds).  ``correlate_separable``
skips a tiny ``wy[a]`` or ``wx[b]``; scipy's ``correlate`` with ``outer(wy, wx)``
decides per product, which differs only for tiny weights that are not zero (a
factor below 2**-52 times one above 1, or two factors near 1e-8).

One difference from scipy, on purpose: scipy's n-D ``correlate``/``convolve``
(scipy 1.17) map a "reflect" coordinate that lies an exact multiple of 2n,
at least 4n, before the start of an axis of length n to index −1 instead of
folding it, and read the element before the line (the previous row's last
value, or memory before the array).  Such coordinates need a filter radius of
at least four times the image side.  simt_tiles folds them, as scipy's
documentation and its 1-D ``correlate1d`` do (``tests/test_conv2d.py`` shows both).
"""

from __future__ import annotations

import numpy as np

from ...device_copies import device_copy
from ...interop import byte_order, finish_result
from ...launch import planned
from ...registry import Family
from . import _args, _cases, _tuning, dispatch, reference
from ._common import MODES, FilterCall, SeparableCall, VolumeCall, flops
from .dispatch import (
    BEST_MAX_SIZE,
    BEST_SEPARABLE_VARIANT,
    BEST_VARIANT,
    CONSTANT_FILTER_VARIANTS,
    FALLBACK_VARIANT,
    LARGE_VARIANT,
    RUNGS,
    SEPARABLE_FLOAT32_PRESET,
    SEPARABLE_RUNGS,
    SEPARABLE_VARIANTS,
    SHAPE_VARIANT,
    VECTOR_VARIANTS,
    BEST_VOLUME_VARIANT,
    VOLUME_FALLBACK,
    VOLUME_RUNGS,
    VOLUME_VARIANTS,
    _first_fitting,
    default_choice,
    default_rung,
    get_rung,
    separable_configs,
)

#: variant names in ladder order (later rungs append)
CONV2D_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the family's registration (:mod:`simt_tiles.registry`): the 2-D rungs and the separable kernel
FAMILY = Family("conv2d", {**RUNGS, **SEPARABLE_RUNGS, **VOLUME_RUNGS}, reference, (_tuning.TUNABLE,), _cases.demo,
                _cases.ALIASING, _cases.HAZARDS)


__all__ = [
    "correlate",
    "convolve",
    "correlate2d",
    "convolve2d",
    "correlate1d",
    "correlate_separable",
    "CONV2D_VARIANTS",
    "SEPARABLE_VARIANTS",
    "SEPARABLE_RUNGS",
    "VOLUME_VARIANTS",
    "VOLUME_RUNGS",
    "BEST_VOLUME_VARIANT",
    "VOLUME_FALLBACK",
    "BEST_SEPARABLE_VARIANT",
    "SEPARABLE_FLOAT32_PRESET",
    "RUNGS",
    "BEST_VARIANT",
    "BEST_MAX_SIZE",
    "SHAPE_VARIANT",
    "LARGE_VARIANT",
    "FALLBACK_VARIANT",
    "CONSTANT_FILTER_VARIANTS",
    "VECTOR_VARIANTS",
    "MODES",
    "get_rung",
    "flops",
    "default_rung",
    "default_choice",
]


def correlate2d(image, weights, *, mode="reflect", cval=0.0, origin=0, output=None, out=None, variant=None,
                config=None, stream=None):
    """2-D correlation, as ``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval,
    origin=origin, output=output)``.

    Images of an integer dtype (``uint8`` photos, ``int16``, ``int32``, ...) and a filter of
    another dtype than the image's are scipy's too: the filter runs in float32 (images and
    results of at most 16 bits or float32) or float64, and the result is converted to the output
    dtype as scipy does (truncated toward zero, out-of-range values wrapped as scipy's C cast:
    :mod:`._args`).  scipy sums in float64: where an 8- or 16-bit result's exact sum is within
    float32's rounding of an integer (a 3 × 3 box filter: 138.99999999999997), the truncation can
    land one unit off scipy's — ask ``output=np.float64`` (then cast) for scipy's integers exactly.
    2-D images only: a 3-D volume is a ValueError naming ``image`` (filter a volume
    one axis at a time with :func:`correlate1d`, or with a 3-D filter by :func:`correlate`); complex inputs are a
    TypeError.

    ``out[i, j] = Σ_a Σ_b weights[a, b] · ext(image)[i + a − KH//2, j + b − KW//2]``
    where ``ext`` extends the image by ``mode``.

    image
        2-D float32, float64 or integer (not uint64): a NumPy array (copied to the device; the result
        comes back as NumPy), a Numba device array, or a CUDA array from CuPy /
        PyTorch / any ``__cuda_array_interface__`` or DLPack producer (used in
        place; the result is of ``image``'s kind).  Device arrays must be
        C-contiguous.
    weights
        2-D, any real dtype (converted to the compute dtype), at least 1×1; any size (larger than the image
        too).  Same kinds as ``image``.
    mode
        One of :data:`MODES`: "reflect" (d c b a | a b c d | d c b a),
        "constant" (k k k k | a b c d | k k k k with k = ``cval``), "nearest"
        (a a a | a b c d | d d d), "mirror" (d c b | a b c d | c b a),
        "wrap" (a b c d | a b c d | a b c d).
    cval
        The value outside the image for mode "constant" (rounded to the compute dtype).
    origin
        scipy's ``origin``: an int (both axes) or a pair; the filter's anchor is
        ``(KH // 2 + origin[0], KW // 2 + origin[1])``.  ``-(KH // 2) <= origin[0] <= (KH − 1) // 2``
        (likewise on axis 1), else ValueError naming ``origin``.  A new origin compiles nothing.
    output
        scipy's ``output``: a dtype (float32, float64 or an integer dtype but uint64) for the
        result, or an array (as ``out``).  None: the image's dtype, as scipy.
    out
        Optional C-contiguous array of the image's shape; it is returned.  Its dtype is the
        result's (any of ``output``'s), as scipy's ``output`` array.
        It must not overlap ``image`` or ``weights`` in memory (ValueError naming
        ``out``: blocks would read inputs another block already overwrote);
        disjoint views of one buffer are fine, and NumPy inputs are copies (any NumPy ``out``).
    variant
        A name from :data:`CONV2D_VARIANTS`; None picks :data:`BEST_VARIANT`
        for filters up to :data:`BEST_MAX_SIZE` on each axis, else
        :data:`LARGE_VARIANT` (:func:`default_rung`; with ``config`` None a tuned config
        first, :func:`default_choice`), or :data:`SHAPE_VARIANT` and then :data:`FALLBACK_VARIANT`
        when the filter's halo does not fit in that rung's shared memory (only
        with ``config`` None or a preset name).  A new filter *value* never
        compiles with None: the kernels depend on the filter's shape, mode and
        dtype only, and are kept on disk (Numba's cache) across processes.
        The rungs of :data:`CONSTANT_FILTER_VARIANTS` compile the filter's
        values into the kernel: the first call with a new filter compiles
        (about a second or more); NumPy weights are used as they are (no upload),
        device weights are copied to the host — a transfer that waits for the
        stream's queued work, on every call: give these rungs a NumPy filter.
    config
        A preset name (every rung has ``"sim"`` and ``"default"``) or the rung's
        config object; None means ``"sim"`` in the simulator, else ``"default"``.
        Its filter-shape and mode fields are replaced by this call's.
    stream
        None (the current stream of the inputs' framework: CuPy's or PyTorch's current
        stream; Numba's default stream for Numba and NumPy arrays), a Numba stream, or a
        CuPy/PyTorch stream.
    """
    if _swaps(variant):
        weights = device_copy(weights, image, stream, 2, _params(variant, config, weights))
    return _correlate2d(image, weights, mode=mode, cval=cval, origin=origin, output=output, out=out,
                        variant=variant, config=config, stream=stream)


def convolve2d(image, weights, *, mode="reflect", cval=0.0, origin=0, output=None, out=None, variant=None,
               config=None, stream=None):
    """2-D convolution, as ``scipy.ndimage.convolve(image, weights, mode=mode, cval=cval)``.

    The correlation (see :func:`correlate2d`, same arguments) with the filter
    flipped on both axes and its centre at ``(KH − 1)//2, (KW − 1)//2`` — for
    even sizes one less than ``size//2``, which is scipy's shift.  The flipped
    filter is a view (negative strides) of ``weights``, not a copy.  ``origin`` has
    scipy's mirrored meaning: the anchor is ``(KH − 1)//2 − origin[0], (KW − 1)//2 − origin[1]``
    (the same valid range as :func:`correlate2d`'s).
    """
    if _swaps(variant):
        weights = device_copy(weights, image, stream, 2, _params(variant, config, weights))
    return _convolve2d(image, weights, mode=mode, cval=cval, origin=origin, output=output, out=out,
                       variant=variant, config=config, stream=stream)


def correlate1d(image, weights, *, axis=-1, mode="reflect", cval=0.0, origin=0, output=None, out=None,
                variant=None, config=None, stream=None):
    """1-D correlation along ``axis`` of an image of any number of dimensions, as
    ``scipy.ndimage.correlate1d(image, weights, axis=axis, mode=mode, cval=cval, origin=origin,
    output=output)``.

    Along axis 1 of a 2-D image: ``out[i, j] = Σ_b weights[b] · ext(image)[i, j + b − K//2 − origin]``
    (any other axis likewise, the other indices fixed).  ``weights`` is 1-D, any real dtype (as
    :func:`correlate2d`'s), at least one value, any length (even, or longer than the axis).  On a 2-D
    image it is :func:`correlate2d` with the 1 × K (axis 1) or K × 1 (axis 0) filter, so
    ``variant`` and ``config`` are those of :data:`CONV2D_VARIANTS`; the other arguments as
    :func:`correlate2d`.  ``origin`` is one int (``-(K // 2) <= origin <= (K − 1) // 2``: the
    filter's centre is ``K // 2 + origin``).

    image
        1-D, 2-D, 3-D (a volume) or more dimensions, of the dtypes and kinds :func:`correlate2d`
        takes (device arrays C-contiguous; ``out`` of the image's shape).
    axis
        An int in ``[-image.ndim, image.ndim − 1]`` (negative counts from the end), else ValueError
        naming ``axis`` (TypeError for a non-int).

    An N-D image is filtered as 2-D problems of the same rungs, on views of its storage (no copy):
    seen as ``(outer, L, inner)`` — L the axis' length, outer the product of the dimensions before
    it, inner of those after — it is one ``(outer, L)`` problem along axis 1 when inner is 1 (the
    last axis; a 1-D image is ``(1, L)``; past CUDA's 65535 grid rows, a stack of the trailing
    dimensions' slices that fit, e.g. 2048 slices of 2048 × 64), else ``outer`` problems
    ``(L, inner)`` along axis 0: one 2-D launch when the axis is the first, else one launch of the rung's kernel for a stack of
    slices, slice z on grid z (``_common.on_grid_z``; per 65535 slices, CUDA's grid z limit).  The
    rungs ``variant=None`` picks take stacks (k10, k03, k01); another named variant launches once
    per slice.  (The slices cannot be one ``(outer·L, inner)`` image: the filter would read across
    slice boundaries.)  The variant and config are chosen for the ``(L, inner)`` (or ``(outer, L)``)
    slice.  A 2-D image is used as it is (its kernels, calls and plans as before).
    """
    if _swaps(variant):
        weights = device_copy(weights, image, stream, 1, _params(variant, config, weights))
    return _correlate1d(image, weights, axis=axis, mode=mode, cval=cval, origin=origin, output=output, out=out,
                        variant=variant, config=config, stream=stream)


def correlate_separable(image, wy, wx, *, mode="reflect", cval=0.0, origin=0, output=None, out=None,
                        variant=None, config=None, stream=None):
    """2-D correlation with the separable filter ``wy[:, None] · wx[None, :]``,
    as ``scipy.ndimage.correlate(image, np.outer(wy, wx), mode=mode, cval=cval)``,
    computed as a column pass with ``wy`` then a row pass with ``wx``
    (KH + KW multiply-adds per output instead of KH·KW).

    wy, wx
        1-D, any real dtype (as :func:`correlate2d`'s ``weights``), at least one value each, any length.
    variant
        A name from :data:`SEPARABLE_VARIANTS`: ``"k06_separable_fused"`` (one
        kernel, the intermediate in shared memory) or ``"two_pass"`` (two
        :func:`correlate1d` calls with :data:`BEST_VARIANT` through an
        intermediate image in global memory).  None picks
        :data:`BEST_SEPARABLE_VARIANT`, or "two_pass" when the filters do not
        fit its shared memory (with ``config`` None or a preset name).
    config
        A preset name, or the config of the variant's kernel (k06's Config for
        the fused kernel, k03's for "two_pass").

    The intermediate is rounded to the image's dtype: the result differs from
    :func:`correlate2d` with the outer product by rounding only, within
    γ_{KH+KW}·Σ|wy_a|·|wx_b|·|x| (see k06).  Every mode has the 2-D semantics,
    mode "constant" included (see the package docstring for how that differs
    from chaining scipy's ``correlate1d``).  The other arguments as
    :func:`correlate2d` (``origin`` as for the outer product: ``origin[0]`` shifts ``wy``,
    ``origin[1]`` shifts ``wx``).
    """
    wy = device_copy(wy, image, stream, 1)
    wx = device_copy(wx, image, stream, 1)
    return _correlate_separable(image, wy, wx, mode=mode, cval=cval, origin=origin, output=output, out=out,
                                variant=variant, config=config, stream=stream)


def correlate(image, weights, *, mode="reflect", cval=0.0, origin=0, output=None, out=None, variant=None,
              config=None, stream=None):
    """N-D correlation, as ``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval,
    origin=origin, output=output)``, for 1-D, 2-D and 3-D images with a filter of the same number of
    dimensions.

    ``out[i, j, k] = Σ_a Σ_b Σ_c weights[a, b, c] · ext(image)[i + a − KD//2 − origin[0],
    j + b − KH//2 − origin[1], k + c − KW//2 − origin[2]]`` (3-D; likewise on fewer axes), ``ext``
    the image extended by ``mode``.  A 2-D image is :func:`correlate2d` (its rungs, variants and
    configs); a 1-D image is a 1 × L image with the 1 × K filter (the same rungs; unlike
    :func:`correlate1d`, zero weights are skipped, as scipy's ``correlate`` skips them); a 3-D
    volume runs :data:`VOLUME_VARIANTS` (k12: a block walks its tile's planes, a ring of staged halo
    planes in shared memory; :data:`VOLUME_FALLBACK` for filters whose ring does not fit).  The
    rules of :func:`correlate2d` hold on every axis: the five modes, filters larger than the image,
    even sizes, integer images and scipy's output dtype, filters of another dtype, taps with
    ``|w| <= 2**-52`` skipped (a NaN spreads as scipy's), ``out`` not overlapping the inputs.

    image
        1-D, 2-D or 3-D, of the dtypes and kinds :func:`correlate2d` takes (a volume of at most
        2**31 − 1 elements: its kernels use 32-bit offsets); 4-D or more: ValueError naming ``image``.
    weights
        As many dimensions as ``image`` (else ValueError naming ``weights``), at least one value per
        axis, any real dtype.
    origin
        An int (every axis) or a sequence of one int per axis; ``-(K // 2) <= origin[i] <= (K − 1) // 2``
        for the filter's extent K on axis i.
    variant, config
        A 1-D or 2-D image: those of :func:`correlate2d`.  A 3-D image: a name from
        :data:`VOLUME_VARIANTS` (None: :data:`BEST_VOLUME_VARIANT`, or :data:`VOLUME_FALLBACK` when
        the filter's ring of planes does not fit shared memory) and a preset name or that rung's
        config.  A new filter *value* compiles nothing (one kernel per filter shape, mode and dtype).
    """
    return _correlate(image, _volume_filter(weights, image, stream, variant, config), mode=mode, cval=cval,
                      origin=origin, output=output, out=out, variant=variant, config=config, stream=stream)


def convolve(image, weights, *, mode="reflect", cval=0.0, origin=0, output=None, out=None, variant=None,
             config=None, stream=None):
    """N-D convolution, as ``scipy.ndimage.convolve(image, weights, mode=mode, cval=cval, origin=origin,
    output=output)``: :func:`correlate` (same arguments) with the filter flipped on every axis, its
    centre at ``(K − 1) // 2`` on each axis (scipy's shift for even sizes) and ``origin`` mirrored:
    the anchor is ``(K − 1) // 2 − origin[i]`` (the same valid range as :func:`correlate`'s).  The
    flipped filter is a view (negative strides), not a copy."""
    return _convolve(image, _volume_filter(weights, image, stream, variant, config), mode=mode, cval=cval,
                     origin=origin, output=output, out=out, variant=variant, config=config, stream=stream)


def _volume_filter(weights, image, stream, variant, config):
    """``correlate``/``convolve``'s filter swap (as the 2-D functions'): a NumPy filter of the image's
    number of dimensions becomes its cached device copy, with its values for k10 on 1-D and 2-D images."""
    nd = _args.ndim_of(image)
    if nd not in (1, 2, 3) or not _swaps(variant):
        return weights
    with_values = nd < 3 and _params(variant, config, weights)
    return device_copy(weights, image, stream, nd, with_values)


def _params(variant, config, weights) -> bool:
    """Whether the default takes a reused NumPy filter's values as kernel parameters (k10 PARAMS: up
    to :data:`dispatch.BEST_MAX_SIZE` taps each way, far under its parameter bytes), so its cached
    copy should carry them (:func:`simt_tiles.device_copies.device_copy`'s ``with_values``)."""
    return variant is None and config is None and isinstance(weights, np.ndarray) and weights.ndim >= 1 \
        and max(weights.shape) <= dispatch.BEST_MAX_SIZE


def _swaps(variant) -> bool:
    """Whether a NumPy filter becomes a cached device copy (:mod:`simt_tiles.device_copies`), so that
    the call replays its launch plan: not for the rungs that compile its values in (they want it on
    the host)."""
    return variant is None or not isinstance(variant, str) or variant not in CONSTANT_FILTER_VARIANTS


# The planned calls (simt_tiles.launch): what the public functions above run, a NumPy filter
# already swapped for its cached device copy where that applies.  Each reads check (_args: the
# arguments as device arrays, scipy.ndimage's rules) → choose (dispatch) → launch (the rung).


@planned
def _correlate2d(image, weights, *, mode, cval, origin, output, out, variant, config, stream):
    return _filter2d(image, weights, mode, cval, origin, output, out, variant, config, stream, flipped=False)


@planned
def _convolve2d(image, weights, *, mode, cval, origin, output, out, variant, config, stream):
    return _filter2d(image, weights, mode, cval, origin, output, out, variant, config, stream, flipped=True)


@planned
def _correlate1d(image, weights, *, axis, mode, cval, origin, output, out, variant, config, stream):
    return _filter2d(image, weights, mode, cval, origin, output, out, variant, config, stream, flipped=False,
                     ndim=1, axis=axis)


def _filter2d(image, weights, mode, cval, origin, output, out, variant, config, stream, *, flipped, ndim=2,
              axis=None, all_taps=None):
    args, w_op = _args.filter2d(image, weights, mode=mode, cval=cval, origin=origin, output=output, out=out,
                                variant=variant, config=config, stream=stream, ndim=ndim, axis=axis)
    src, dst = args.src, args.dst
    if args.volume is None:
        h, w = args.src.shape
        pieces = 1
    else:  # an N-D image (correlate1d): ``pieces`` 2-D problems of (h, w) (_args.volume_view)
        pieces, h, w = args.volume
    if pieces and h and w:  # an empty image needs no launch (and a 0-block grid is invalid)
        if args.volume is not None:  # views of its storage: one image, or a stack of slices (one launch)
            shape = (h, w) if pieces == 1 else args.volume
            src, dst = src.reshape(shape), dst.reshape(shape)
        weights_at = "host" if isinstance(w_op.dev, np.ndarray) else "device"
        plan = dispatch.plan_filter(variant, config, h, w, *w_op.dev.shape, args.mode, args.dtype, weights_at)
        # scipy's correlate1d counts zero taps (0·NaN = NaN); correlate/convolve skip them
        taps = ndim == 1 if all_taps is None else all_taps  # correlate on a 1-D image skips them as correlate2d
        plan.run(FilterCall(src, w_op, dst, cval, flipped, args.stream, all_taps=taps, origin=args.origin))
        if args.dst is not args.out.dev:  # the output dtype is not the compute dtype: scipy's conversion
            _args.convert(args.dst, args.out.dev, args.stream)
    return byte_order(finish_result(args.out, args.stream), output)


@planned
def _correlate(image, weights, *, mode, cval, origin, output, out, variant, config, stream):
    return _filter_nd(image, weights, mode, cval, origin, output, out, variant, config, stream, flipped=False)


@planned
def _convolve(image, weights, *, mode, cval, origin, output, out, variant, config, stream):
    return _filter_nd(image, weights, mode, cval, origin, output, out, variant, config, stream, flipped=True)


def _filter_nd(image, weights, mode, cval, origin, output, out, variant, config, stream, *, flipped):
    """``correlate``/``convolve``: by the image's number of dimensions, the 2-D path (a 1-D image as
    1 × L, zero taps skipped as scipy's ``correlate``) or the volume rungs."""
    nd = _args.image_ndim(image, weights)
    if nd == 2:
        return _filter2d(image, weights, mode, cval, origin, output, out, variant, config, stream, flipped=flipped)
    if nd == 1:
        return _filter2d(image, weights, mode, cval, _args.origin_1d(origin), output, out, variant, config, stream,
                         flipped=flipped, ndim=1, axis=0, all_taps=False)
    args, w_op = _args.filter3d(image, weights, mode=mode, cval=cval, origin=origin, output=output, out=out,
                                variant=variant, config=config, stream=stream)
    if 0 not in args.src.shape:  # an empty volume needs no launch
        plan = dispatch.plan_volume(variant, config, *w_op.dev.shape, args.mode, args.dtype)
        plan.run(VolumeCall(args.src, w_op, args.dst, cval, flipped, args.stream, origin=args.origin))
        if args.dst is not args.out.dev:  # the output dtype is not the compute dtype: scipy's conversion
            _args.convert(args.dst, args.out.dev, args.stream)
    return byte_order(finish_result(args.out, args.stream), output)


@planned
def _correlate_separable(image, wy, wx, *, mode, cval, origin, output, out, variant, config, stream):
    args, wy_op, wx_op = _args.separable(image, wy, wx, mode=mode, cval=cval, origin=origin, output=output,
                                         out=out, variant=variant, config=config, stream=stream)
    h, w = args.src.shape
    if h and w:
        kh, kw = wy_op.dev.shape[0], wx_op.dev.shape[1]
        plan = dispatch.plan_separable(variant, config, kh, kw, args.mode, args.dtype)
        plan.run(SeparableCall(args.src, wy_op, wx_op, args.dst, cval, args.stream, origin=args.origin))
        if args.dst is not args.out.dev:
            _args.convert(args.dst, args.out.dev, args.stream)
    return byte_order(finish_result(args.out, args.stream), output)


# the planned call each public function runs (simt_tiles.launch; tests/test_faults.py checks every one has one)
correlate2d.__planned__ = _correlate2d
convolve2d.__planned__ = _convolve2d
correlate1d.__planned__ = _correlate1d
correlate_separable.__planned__ = _correlate_separable
correlate.__planned__ = _correlate
convolve.__planned__ = _convolve
