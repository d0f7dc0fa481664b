"""The conv2d ladder: 2-D correlation and convolution with scipy.ndimage's boundary modes.

``correlate2d`` / ``convolve2d`` compute exactly what ``scipy.ndimage.correlate``
/ ``scipy.ndimage.convolve`` compute for a 2-D image — modes
"reflect", "constant" (with ``cval``), "nearest", "mirror", "wrap"; any filter
size, even sizes and filters larger than the image included; scipy's ``origin``
(the anchor shifted at run time: no new kernel) — in the image's dtype (float32
or float64).  Integer images (``uint8`` … ``int64``), scipy's output-dtype rule
(``output=`` a dtype or an array) and filters of another dtype are scipy's too:
computed in float32 or float64 and converted as scipy converts (:mod:`._ndimage`).
3-D volumes and complex inputs are not supported.  ``correlate1d`` is scipy.ndimage's ``correlate1d``
on either axis of a 2-D image, and ``correlate_separable`` the 2-D correlation
with a rank-1 filter ``wy[:, None] · wx[None, :]`` computed as two 1-D passes.
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
========================  ====================================================

``variant=None`` uses k10 for ``correlate2d``/``convolve2d``/``correlate1d`` with
filters up to 7 × 7 (device filters staged by each block: no copy back; a NumPy
filter with a NumPy image as kernel parameters: no upload; a NumPy filter with a
device image through its device copy, cached by content so that the call replays
its launch plan: ``_filter_cache.py``), k03 for larger ones (k10's loops
stop unrolling there), k01 when the halo does not fit in shared memory.
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

import numbers

import numpy as np
from numba import cuda

from ...interop import Operand, as_stream, device_operand, finish_result, host_operand, prepare_out
from ...launch import planned
from ...registry import Family
from . import _cases, _ndimage, _tuning, dispatch, reference
from ._common import MODES, FilterCall, Mode, SeparableCall, flops
from ._filter_cache import device_filter
from .dispatch import (
    BEST_MAX_SIZE,
    BEST_SEPARABLE_VARIANT,
    BEST_VARIANT,
    CONSTANT_FILTER_VARIANTS,
    FALLBACK_VARIANT,
    RUNGS,
    SEPARABLE_FLOAT32_PRESET,
    SEPARABLE_RUNGS,
    SEPARABLE_VARIANTS,
    SHAPE_VARIANT,
    VECTOR_VARIANTS,
    _first_fitting,
    default_choice,
    default_rung,
    get_rung,
    separable_configs,
)

#: variant names in ladder order (later rungs append)
CONV2D_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the family's registration (:mod:`simt_tiles.registry`): the 2-D rungs and the separable kernel
FAMILY = Family("conv2d", {**RUNGS, **SEPARABLE_RUNGS}, reference, (_tuning.TUNABLE,), _cases.demo,
                _cases.ALIASING, _cases.HAZARDS)


__all__ = [
    "correlate2d",
    "convolve2d",
    "correlate1d",
    "correlate_separable",
    "CONV2D_VARIANTS",
    "SEPARABLE_VARIANTS",
    "SEPARABLE_RUNGS",
    "BEST_SEPARABLE_VARIANT",
    "SEPARABLE_FLOAT32_PRESET",
    "RUNGS",
    "BEST_VARIANT",
    "BEST_MAX_SIZE",
    "SHAPE_VARIANT",
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
    :mod:`._ndimage`).  3-D volumes and complex inputs are not supported (ValueError / TypeError).

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
        disjoint views of one buffer are fine.
    variant
        A name from :data:`CONV2D_VARIANTS`; None picks :data:`BEST_VARIANT`
        for filters up to :data:`BEST_MAX_SIZE` on each axis, else
        :data:`SHAPE_VARIANT` (:func:`default_rung`; with ``config`` None a tuned config
        first, :func:`default_choice`), or :data:`FALLBACK_VARIANT`
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
    out, more = _more(origin, output, out, 2)
    if _swaps(variant):
        weights = device_filter(weights, image, stream, 2)
    return _correlate2d(image, weights, mode=mode, cval=cval, out=out, variant=variant, config=config,
                        stream=stream, **more)


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
    out, more = _more(origin, output, out, 2)
    if _swaps(variant):
        weights = device_filter(weights, image, stream, 2)
    return _convolve2d(image, weights, mode=mode, cval=cval, out=out, variant=variant, config=config,
                       stream=stream, **more)


def correlate1d(image, weights, *, axis=-1, mode="reflect", cval=0.0, origin=0, output=None, out=None,
                variant=None, config=None, stream=None):
    """1-D correlation along ``axis`` of a 2-D image, as
    ``scipy.ndimage.correlate1d(image, weights, axis=axis, mode=mode, cval=cval)``.

    Along axis 1: ``out[i, j] = Σ_b weights[b] · ext(image)[i, j + b − K//2]``
    (axis 0 likewise down the columns).  ``weights`` is 1-D, any real dtype (as
    :func:`correlate2d`'s), at least one value, any length (even, or longer than the axis).  It is
    :func:`correlate2d` with the 1 × K (axis 1) or K × 1 (axis 0) filter, so
    ``variant`` and ``config`` are those of :data:`CONV2D_VARIANTS`; the other
    arguments as :func:`correlate2d`.  ``axis`` is -2, -1, 0 or 1; ``origin`` one int
    (``-(K // 2) <= origin <= (K − 1) // 2``: the filter's centre is ``K // 2 + origin``).
    """
    out, more = _more(origin, output, out, 1)
    if _swaps(variant):
        weights = device_filter(weights, image, stream, 1)
    return _correlate1d(image, weights, axis=axis, mode=mode, cval=cval, out=out, variant=variant,
                        config=config, stream=stream, **more)


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
    out, more = _more(origin, output, out, 2)
    wy = device_filter(wy, image, stream, 1)
    wx = device_filter(wx, image, stream, 1)
    return _correlate_separable(image, wy, wx, mode=mode, cval=cval, out=out, variant=variant, config=config,
                                stream=stream, **more)


_NONE: dict = {}


def _more(origin, output, out, ndim):
    """``(out, keyword arguments)`` for the planned call: none for ``origin=0, output=None`` (the
    call is the one it always was), else ``origin``/``origin_h``, ``origin_w`` as ints and
    ``output`` as a dtype name (plain values: such calls get launch plans too)."""
    if type(origin) is int and not origin and output is None:
        return out, _NONE
    out, output = _ndimage.split_output(output, out)
    more = {}
    if ndim == 1:
        (o,) = _ndimage.parse_origin(origin, 1)
        if o:
            more["origin"] = o
    else:
        oh, ow = _ndimage.parse_origin(origin, 2)
        if oh:
            more["origin_h"] = oh
        if ow:
            more["origin_w"] = ow
    if output is not None:
        more["output"] = output
    return out, more


def _swaps(variant) -> bool:
    """Whether a NumPy filter becomes a cached device copy (:mod:`._filter_cache`): not for the
    rungs that compile its values in (they want it on the host)."""
    return variant is None or not isinstance(variant, str) or variant not in CONSTANT_FILTER_VARIANTS


# The planned calls (simt_tiles.launch): what the public functions above run, a NumPy filter
# already swapped for its cached device copy where that applies


@planned
def _correlate2d(image, weights, *, mode, cval, out, variant, config, stream, origin_h=0, origin_w=0,
                 output=None):
    return _filter2d(image, weights, mode, cval, out, variant, config, stream, flipped=False,
                     origin=(origin_h, origin_w), output=output)


@planned
def _convolve2d(image, weights, *, mode, cval, out, variant, config, stream, origin_h=0, origin_w=0,
                output=None):
    return _filter2d(image, weights, mode, cval, out, variant, config, stream, flipped=True,
                     origin=(origin_h, origin_w), output=output)


@planned
def _correlate1d(image, weights, *, axis, mode, cval, out, variant, config, stream, origin=0, output=None):
    axis = _check_axis(axis)
    return _filter2d(image, weights, mode, cval, out, variant, config, stream, flipped=False, axis=axis,
                     origin=(origin, 0) if axis == 0 else (0, origin), output=output)


@planned
def _correlate_separable(image, wy, wx, *, mode, cval, out, variant, config, stream, origin_h=0, origin_w=0,
                         output=None):
    mode = Mode.parse(mode)
    _check_cval(cval)
    dispatch.separable_rung(variant).resolve_config(config)  # a bad variant or config fails before any copy
    stream = as_stream(stream, image)

    img_op, src, out_dtype = _image_operand(image, out, output, stream)
    dtype = np.dtype(src.dtype)
    wy_op = _weights_operand(wy, "wy", dtype, stream, axis=0)  # KH x 1
    wx_op = _weights_operand(wx, "wx", dtype, stream, axis=1)  # 1 x KW
    kh, kw = wy_op.dev.shape[0], wx_op.dev.shape[1]
    _ndimage.check_origin((origin_h, origin_w), (kh, kw), "(len(wy), len(wx))")
    h, w = img_op.dev.shape
    out_op, dst = _out_operand(out, img_op, (h, w), out_dtype, dtype, stream, (wy_op, wx_op))
    if h and w:
        plan = dispatch.plan_separable(variant, config, kh, kw, mode, dtype)
        plan.run(SeparableCall(src, wy_op, wx_op, dst, cval, stream, origin=(origin_h, origin_w)))
        if dst is not out_op.dev:
            _ndimage.convert(dst, out_op.dev, stream)
    return finish_result(out_op, stream)


def _check_cval(cval) -> None:
    if isinstance(cval, bool) or not isinstance(cval, numbers.Real):
        raise TypeError(f"cval: expected a real number; got {type(cval).__name__} {cval!r}")


def _check_axis(axis) -> int:
    """``axis`` of a 2-D image as 0 or 1; TypeError/ValueError naming it otherwise."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis: expected an int; got {type(axis).__name__} {axis!r}")
    if not -2 <= axis <= 1:
        raise ValueError(f"axis: expected -2, -1, 0 or 1 for a 2-D image; got {axis}")
    return int(axis) % 2


def _image_operand(image, out, output, stream):
    """``(image operand, the device image the filter reads, output dtype)``.  A float32/float64
    image with its own dtype out is used as it is; any other (an integer image, another output
    dtype: ``_ndimage``) is converted to the compute dtype — a NumPy one on the host before the
    upload, a device one by the elementwise kernel."""
    if output is not None:
        out_dtype = np.dtype(output)
    elif out is not None and _ndimage.array_dtype(out) is not None:
        out_dtype = _ndimage.check_dtype("out", _ndimage.array_dtype(out))
    else:
        out_dtype = None
    if _ndimage.is_plain(image):
        img_op = device_operand(image, "image", ndim=2, stream=stream)
        in_dtype = np.dtype(img_op.dev.dtype)
        dtype = in_dtype if out_dtype is None else _ndimage.compute_dtype(in_dtype, out_dtype)
        if dtype == in_dtype:
            return img_op, img_op.dev, in_dtype if out_dtype is None else out_dtype
        return img_op, _ndimage.converted(img_op.dev, dtype, stream), out_dtype
    in_dtype = _ndimage.check_dtype("image", _ndimage.array_dtype(image))
    out_dtype = in_dtype if out_dtype is None else out_dtype
    dtype = _ndimage.compute_dtype(in_dtype, out_dtype)
    if isinstance(image, np.ndarray):
        img_op = device_operand(image.astype(dtype), "image", ndim=2, stream=stream)
        return Operand("image", img_op.dev, "numpy", image), img_op.dev, out_dtype
    img_op = device_operand(image, "image", ndim=2, stream=stream, dtype=in_dtype)
    return img_op, _ndimage.converted(img_op.dev, dtype, stream), out_dtype


def _out_operand(out, img_op, shape, out_dtype, dtype, stream, inputs):
    """``(out operand, the array the filter writes)``: ``out`` itself when it has the compute
    dtype, else a scratch array that ``_ndimage.convert`` then writes into ``out``."""
    if out is None and img_op.kind == "torch" and out_dtype.kind != "f":
        out_op = _ndimage.torch_result(img_op, shape, out_dtype, stream)
    else:
        out_op = prepare_out(out, img_op, shape, out_dtype, stream, inputs=inputs)
    if out_dtype == dtype:
        return out_op, out_op.dev
    return out_op, cuda.device_array(shape, dtype, stream=stream)


def _weights_operand(weights, name, dtype, stream, *, axis=None, upload=True) -> Operand:
    """The filter as a device operand of the compute ``dtype``: 2-D for
    ``axis=None``, else 1-D, returned as the 2-D view K × 1 (axis 0) or 1 × K
    (axis 1).  A filter of another real dtype is converted (NumPy on the host, a device one
    by ``_ndimage.convert``), as scipy allows.  Errors name ``name``."""
    ndim = 2 if axis is None else 1
    wdt = _ndimage.array_dtype(weights)
    if wdt is not None and wdt.newbyteorder("=") != dtype and (isinstance(weights, np.ndarray)
                                                               or _ndimage.is_array(weights)):
        wdt = _ndimage.check_dtype(name, wdt)
        if isinstance(weights, np.ndarray):
            weights = weights.astype(dtype)
        else:
            op = device_operand(weights, name, ndim=ndim, stream=stream, dtype=wdt)
            if 0 not in op.dev.shape:
                weights = _ndimage.converted(op.dev, dtype, stream)
    if not upload and isinstance(weights, np.ndarray):
        # a constant-filter rung compiles the values in: NumPy weights stay on the host
        # (an upload on the default stream would wait for the GPU's queued work)
        op = host_operand(weights, name, ndim=ndim)
    else:
        op = device_operand(weights, name, ndim=ndim, stream=stream)
    if op.dev.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {dtype} (the dtype of image); got {op.dev.dtype}")
    shape = tuple(op.dev.shape)
    if 0 in shape:
        if axis is None:
            raise ValueError(f"{name}: expected a non-empty 2-D array (at least 1x1); got shape {shape}")
        raise ValueError(f"{name}: expected a non-empty 1-D array; got shape {shape}")
    if axis is None:
        return op
    k = shape[0]
    as2d = (k, 1) if axis == 0 else (1, k)
    original = op.original.reshape(as2d) if op.kind == "numpy" else op.original
    return Operand(name, op.dev.reshape(as2d), op.kind, original)


def _filter2d(image, weights, mode, cval, out, variant, config, stream, *, flipped, axis=None, origin=(0, 0),
              output=None):
    mode = Mode.parse(mode)
    _check_cval(cval)
    get_rung(variant).resolve_config(config)  # a bad variant or config fails before any upload
    stream = as_stream(stream, image)

    img_op, src, out_dtype = _image_operand(image, out, output, stream)
    dtype = np.dtype(src.dtype)
    # NumPy weights stay on the host for a rung that compiles them in or passes them as
    # kernel parameters (the default); the others get them uploaded
    w_op = _weights_operand(weights, "weights", dtype, stream, axis=axis,
                            upload=not dispatch.keeps_host_weights(variant))
    if axis is None:
        _ndimage.check_origin(origin, w_op.dev.shape)
    else:
        _ndimage.check_origin(origin[axis:axis + 1], w_op.dev.shape[axis:axis + 1], "len(weights)")
    h, w = img_op.dev.shape
    out_op, dst = _out_operand(out, img_op, (h, w), out_dtype, dtype, stream, (w_op,))

    if h and w:  # an empty image needs no launch (and a 0-block grid is invalid)
        weights_at = "host" if isinstance(w_op.dev, np.ndarray) else "device"
        plan = dispatch.plan_filter(variant, config, h, w, *w_op.dev.shape, mode, dtype, weights_at)
        # scipy's correlate1d counts zero taps (0·NaN = NaN); correlate/convolve skip them
        plan.run(FilterCall(src, w_op, dst, cval, flipped, stream, all_taps=axis is not None, origin=origin))
        if dst is not out_op.dev:  # the output dtype is not the compute dtype: scipy's conversion
            _ndimage.convert(dst, out_op.dev, stream)
    return finish_result(out_op, stream)


# the planned call each public function runs (simt_tiles.launch; tests/test_faults.py checks every one has one)
correlate2d.__planned__ = _correlate2d
convolve2d.__planned__ = _convolve2d
correlate1d.__planned__ = _correlate1d
correlate_separable.__planned__ = _correlate_separable
