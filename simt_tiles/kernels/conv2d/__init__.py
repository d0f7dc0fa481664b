"""The conv2d ladder: 2-D correlation and convolution with scipy.ndimage's boundary modes.

``correlate2d`` / ``convolve2d`` compute exactly what ``scipy.ndimage.correlate``
/ ``scipy.ndimage.convolve`` compute for a 2-D image with origin 0 — modes
"reflect", "constant" (with ``cval``), "nearest", "mirror", "wrap"; any filter
size, even sizes and filters larger than the image included — in the image's
dtype (float32 or float64).  Read the rungs in order:

========================  ====================================================
``k01_naive``             each output reads its window from global memory;
                          the boundary by index mapping (any filter size)
``k02_halo_tiled``        the block's tile plus a filter-sized halo staged in
                          shared memory, boundary applied while loading
``k03_register_blocked``  RX outputs of a row per thread, the window row
                          reused from registers (top rung)
========================  ====================================================

``_common.py`` holds the boundary modes, the kernel signature and how the
launcher specialises a config (filter shape and mode are compile-time
constants of the shared-memory rungs).

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

from ...runtime import (
    ConfigError,
    Rung,
    as_stream,
    device_operand,
    finish_result,
    pick_rung,
    prepare_out,
)
from . import k01_naive, k02_halo_tiled, k03_register_blocked
from ._common import MODES, Mode, anchors, flops, specialise

#: every rung, in ladder order
RUNGS: dict[str, Rung] = {
    r.name: r
    for r in (
        k01_naive.RUNG,
        k02_halo_tiled.RUNG,
        k03_register_blocked.RUNG,
    )
}

#: variant names in ladder order (later rungs append)
CONV2D_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the rung ``variant=None`` uses.  No GPU measurements yet: the top rung by
#: construction (fewest global and shared loads per output).
BEST_VARIANT = "k03_register_blocked"

#: the rung that takes any filter (no shared memory): ``variant=None`` falls
#: back to it when a filter's halo does not fit in shared memory
FALLBACK_VARIANT = "k01_naive"

__all__ = [
    "correlate2d",
    "convolve2d",
    "CONV2D_VARIANTS",
    "RUNGS",
    "BEST_VARIANT",
    "FALLBACK_VARIANT",
    "MODES",
    "get_rung",
    "flops",
]


def get_rung(variant: str | None) -> Rung:
    """The rung named ``variant`` (None: :data:`BEST_VARIANT`)."""
    return pick_rung(RUNGS, variant, BEST_VARIANT)


def correlate2d(image, weights, *, mode="reflect", cval=0.0, out=None, variant=None, config=None,
                stream=None):
    """2-D correlation, as ``scipy.ndimage.correlate(image, weights, mode=mode, cval=cval)``.

    ``out[i, j] = Σ_a Σ_b weights[a, b] · ext(image)[i + a − KH//2, j + b − KW//2]``
    where ``ext`` extends the image by ``mode``.

    image
        2-D float32 or float64: a NumPy array (copied to the device; the result
        comes back as NumPy), a Numba device array, or a CUDA array from CuPy /
        PyTorch / any ``__cuda_array_interface__`` or DLPack producer (used in
        place; the result is of ``image``'s kind).  Device arrays must be
        C-contiguous.
    weights
        2-D, the image's dtype, at least 1×1; any size (larger than the image
        too).  Same kinds as ``image``.
    mode
        One of :data:`MODES`: "reflect" (d c b a | a b c d | d c b a),
        "constant" (k k k k | a b c d | k k k k with k = ``cval``), "nearest"
        (a a a | a b c d | d d d), "mirror" (d c b | a b c d | c b a),
        "wrap" (a b c d | a b c d | a b c d).
    cval
        The value outside the image for mode "constant" (rounded to the image's dtype).
    out
        Optional C-contiguous array of the image's shape and dtype; it is returned.
    variant
        A name from :data:`CONV2D_VARIANTS`; None picks :data:`BEST_VARIANT`,
        or :data:`FALLBACK_VARIANT` when the filter's halo does not fit in the
        best rung's shared memory (only with ``config`` None or a preset name).
    config
        A preset name (every rung has ``"sim"`` and ``"default"``) or the rung's
        config object; None means ``"sim"`` in the simulator, else ``"default"``.
        Its filter-shape and mode fields are replaced by this call's.
    stream
        None (default stream), a Numba stream, or a CuPy/PyTorch stream.
    """
    return _filter2d(image, weights, mode, cval, out, variant, config, stream, flipped=False)


def convolve2d(image, weights, *, mode="reflect", cval=0.0, out=None, variant=None, config=None,
               stream=None):
    """2-D convolution, as ``scipy.ndimage.convolve(image, weights, mode=mode, cval=cval)``.

    The correlation (see :func:`correlate2d`, same arguments) with the filter
    flipped on both axes and its centre at ``(KH − 1)//2, (KW − 1)//2`` — for
    even sizes one less than ``size//2``, which is scipy's shift.  The flipped
    filter is a view (negative strides) of ``weights``, not a copy.
    """
    return _filter2d(image, weights, mode, cval, out, variant, config, stream, flipped=True)


def _filter2d(image, weights, mode, cval, out, variant, config, stream, *, flipped):
    mode = Mode.parse(mode)
    if isinstance(cval, bool) or not isinstance(cval, numbers.Real):
        raise TypeError(f"cval: expected a real number; got {type(cval).__name__} {cval!r}")
    rung = get_rung(variant)
    cfg = rung.resolve_config(config)
    stream = as_stream(stream)

    img_op = device_operand(image, "image", ndim=2, stream=stream)
    w_op = device_operand(weights, "weights", ndim=2, stream=stream)
    dtype = np.dtype(img_op.dev.dtype)
    if w_op.dev.dtype != dtype:
        raise TypeError(
            f"weights: expected dtype {dtype} (the dtype of image); got {w_op.dev.dtype}"
        )
    kh, kw = w_op.dev.shape
    if kh == 0 or kw == 0:
        raise ValueError(
            f"weights: expected a non-empty 2-D array (at least 1x1); got shape {(kh, kw)}"
        )
    h, w = img_op.dev.shape
    out_op = prepare_out(out, img_op, (h, w), dtype, stream)

    if h and w:  # an empty image needs no launch (and a 0-block grid is invalid)
        may_fall_back = variant is None and (config is None or isinstance(config, str))
        rung, spec = _specialised(rung, cfg, config, kh, kw, mode, dtype, may_fall_back)
        kernel = rung.kernel(spec, dtype)
        grid, block = rung.geometry(spec, h, w)
        w_dev = w_op.dev[::-1, ::-1] if flipped else w_op.dev
        anchor_h, anchor_w = anchors(kh, kw, flipped=flipped)
        kernel[grid, block, stream](img_op.dev, w_dev, out_op.dev, dtype.type(cval), anchor_h, anchor_w)
    return finish_result(out_op, stream)


def _specialised(rung, cfg, config, kh, kw, mode, dtype, may_fall_back):
    """``(rung, config)`` with the call's filter shape and mode compiled in.

    A filter whose halo does not fit in shared memory: ConfigError naming
    ``weights`` — or, for ``variant=None`` with a preset, the fallback rung."""
    try:
        spec = specialise(cfg, kh, kw, mode)
        spec.check_smem(dtype)  # float32 was checked when spec was built; float64 doubles it
        return rung, spec
    except ConfigError as exc:
        if may_fall_back:
            fallback = RUNGS[FALLBACK_VARIANT]
            name = config if isinstance(config, str) else None
            return fallback, specialise(fallback.resolve_config(name), kh, kw, mode)
        raise ConfigError(
            f"weights: a {kh}x{kw} {dtype} filter does not fit {rung.name}'s shared memory "
            f"with this config (use variant='{FALLBACK_VARIANT}', variant=None, or smaller "
            f"tiles): {exc}"
        ) from exc
