"""The conv_nchw ladder: a multi-channel CNN convolution layer (NCHW), as ``torch.nn.functional.conv2d``.

``conv2d_nchw(x, w, bias=bias, stride=s, padding=p, dilation=d, groups=g)`` computes what
``torch.nn.functional.conv2d(x, w, bias, s, p, d, g)`` computes — cross-correlation, zero
padding (an int, a pair, "same", "valid"), optional bias — for float32 and float64.  The tiled
rungs take stride 1, dilation 1, one group and one padding on every side (and, through
space-to-depth, stride 2); k04 takes depthwise layers (groups = C_in) at stride 1 and 2; im2col then
matmul (``_im2col.py``) takes any one-group layer; k01 takes every layer (``dispatch.py`` says which runs what).  Read the rungs in order:

=======================  =====================================================
``k01_direct``           one thread per output element reads its
                         C_in·KH·KW window from global memory (any filter,
                         stride, dilation, groups)
``k02_smem_tiled``       a block stages CK input patches (tile + halo, zero
                         padding applied while loading) and the CO×CK×KH×KW
                         weights in shared memory; each thread accumulates
                         RCO channels × RP pixels in registers
``k03_double_buffered``  k02 with two shared stages: the loads of channel
                         step c+1 are in flight while step c is computed
``k04_depthwise``        depthwise layers (no channel reduction): a block
                         stages one plane's input patch with its halo
                         once, all of a thread's loads in flight, the
                         taps in registers, RH × RW outputs a thread
                         (stride 1 and 2, a channel multiplier)
=======================  =====================================================

``_common.py`` holds the kernel signature (flat arrays, 32-bit offsets), the
tiled rungs' config and shared layouts, and how a config is specialised.

Presets
    Every rung has ``"sim"`` (tiny tiles for the simulator) and ``"default"``;
    the tiled rungs also have ``"small"`` for layers with few output pixels.
    With ``config=None`` on a GPU, the tiled rungs use ``"default"`` when its
    grid has at least ``min_blocks`` blocks per SM (a full wave at the
    occupancy its launch bounds ask for), else ``"small"`` (4× more threads
    per output: N = 8, C = 256, 14 × 14 gives the default only 64 blocks).
    Measured on the H200 (benchmarks/results/autotune_h200.json): it picks
    "small" for N8 C256 14×14, the fastest of the six tuned configs there
    (16.1 TFLOP/s, "default" 10.5).  Before this rule, :mod:`simt_tiles.autotune`
    is asked (the user's cache, then the shipped H200 table: for N32 C64 56×56
    k03 with CK = 4, 3% faster than its preset).  k04 has ``"small"`` too (8 × 8
    tiles): ``config=None`` on a GPU takes it where the default's 16 × 32 tiles
    would leave more than half of an output plane idle (``dispatch.depthwise_preset``),
    then gives a thread more output rows while that raises the bytes of loads in
    flight per SM towards ``k04_depthwise.IN_FLIGHT_TARGET`` (``dispatch.depthwise_config``;
    rules, not yet measured).

Filter shape and shared memory
    The filter shape is compiled into k02/k03 (``kh``/``kw`` fields set by the
    launcher).  When a filter's staging does not fit in 48 KiB of static shared
    memory with a preset (``config`` None or a name), the launcher halves the
    preset's CK until it fits; if even CK = 1 does not fit, ``variant=None``
    falls back to k01 and an explicit variant raises ConfigError naming ``w``.
    ``variant=None`` also uses k02 instead of k03 for filters whose prefetch
    would need more than ``k03_double_buffered.PREFETCH_MAX`` registers (5 × 5
    and larger with the default tiles) or whose filter rows are long (1 × 7 with the
    default tiles): ``k03_double_buffered.prefetch_stays_in_registers``; those would
    land in local memory.
"""

from __future__ import annotations

import numpy as np

from ...autotune import check_argument as check_autotune
from ...interop import as_stream, device_operand, finish_result, prepare_out
from ...launch import planned
from ...registry import Family
from . import _cases, _im2col, _params, _tuning, dispatch, reference
from ._common import MAX_ELEMENTS, Call, flops, output_hw
from .dispatch import BEST_VARIANT, DEPTHWISE_VARIANT, FALLBACK_VARIANT, IM2COL_VARIANT, RUNGS, get_rung

#: variant names in ladder order (later rungs append)
CONV_NCHW_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the family's registration (:mod:`simt_tiles.registry`)
FAMILY = Family("conv_nchw", RUNGS, reference, (_tuning.TUNABLE,), _cases.demo, _cases.ALIASING, _cases.HAZARDS)


__all__ = [
    "conv2d_nchw",
    "CONV_NCHW_VARIANTS",
    "RUNGS",
    "BEST_VARIANT",
    "FALLBACK_VARIANT",
    "DEPTHWISE_VARIANT",
    "IM2COL_VARIANT",
    "get_rung",
    "flops",
    "output_hw",
]


def conv2d_nchw(x, w, *, bias=None, stride=1, padding=0, dilation=1, groups=1, out=None, variant=None,
                config=None, stream=None, autotune=None):
    """A convolution layer, as ``torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)``.

    ``out[n, o, i, j] = bias[o] + Σ_c Σ_a Σ_b w[o, c, a, b] · xp[n, G(o) + c, i·sh + a·dh, j·sw + b·dw]``
    with ``xp`` = ``x`` zero-padded (cross-correlation), c < C_in / groups and ``G(o)`` the first
    input channel of output channel o's group (``_params.py``).

    x
        (N, C_in, H, W), float32 or float64: a NumPy array (copied to the
        device; the result comes back as NumPy), a Numba device array, or a
        CUDA array from CuPy / PyTorch / any ``__cuda_array_interface__`` or
        DLPack producer (used in place; the result is of ``x``'s kind).
        Device arrays must be C-contiguous.  N = 0 gives an empty result.
    w
        (C_out, C_in / groups, KH, KW), x's dtype, KH and KW ≥ 1.
    bias
        None or (C_out,), x's dtype.
    stride, dilation
        An int ≥ 1 or a pair ``(h, w)`` of them, as torch.
    padding
        An int ≥ 0 or a pair ``(h, w)``: zero rows and columns added on both sides of each axis;
        ``"valid"`` (0); ``"same"`` (stride 1 only, as torch: the output has x's size, an odd total
        padding ``dilation·(K − 1)`` puts the extra row or column after).  The output is
        ``(N, C_out, OH, OW)``, ``OH = (H + 2·ph − dh·(KH − 1) − 1) // sh + 1``; OH and OW must be ≥ 1
        (as torch, a filter larger than the padded input is an error).
    groups
        An int ≥ 1 dividing C_in and C_out: output channel o reads the C_in / groups input channels
        of its group (groups = C_in: depthwise).
    out
        Optional C-contiguous array of the output's shape and dtype; it is returned.
        It must not overlap ``x``, ``w`` or ``bias`` in device memory (ValueError naming ``out``);
        NumPy inputs are copies, so a NumPy ``out`` may be one of them.
    variant
        A name from :data:`CONV_NCHW_VARIANTS` (the rungs) or :data:`IM2COL_VARIANT`; None picks :data:`BEST_VARIANT`
        (or :data:`FALLBACK_VARIANT` when a filter's staging cannot fit in
        shared memory, see the package docstring).  Stride 1, dilation 1, groups 1 and one padding
        on every side take the tiled rungs; with ``variant`` and ``config`` None a depthwise layer
        (groups = C_in ≥ 2, stride 1 or 2 per axis: ``dispatch.depthwise_rule``) takes
        :data:`DEPTHWISE_VARIANT` (k04); a float32 one-group layer of at least 2^22 multiply-adds with a
        stride, dilation or uneven padding, or with an output plane of at most 400 pixels and no tuned
        entry, runs as im2col then matmul (``dispatch.im2col_rule``); otherwise a stride-2 layer (dilation
        1, one group) takes the tiled rungs through space-to-depth (``_space_to_depth.py``: the input's
        and filter's phases as channels, then a stride-1 layer); any other layer takes
        ``dispatch.GENERAL_VARIANT`` (k01).
        ``"im2col_gemm"`` (:data:`IM2COL_VARIANT`, ``config`` None): any one-group layer as im2col
        then a batched :func:`simt_tiles.matmul` (``_im2col.py``).
        Another named variant is a ValueError naming the rule (``dispatch.route``).
    config
        A preset name (``"sim"``, ``"default"``; the tiled rungs also
        ``"small"``) or the rung's config object; None: the tuned config for
        this GPU and layer when the autotune cache or the shipped table has one
        (:mod:`simt_tiles.autotune`), else ``"sim"`` in the simulator, else
        ``"default"`` or ``"small"`` by the size of the grid (general layers:
        :func:`dispatch.plan_general`).  Its filter-shape fields are replaced by this call's.
    stream
        None (the current stream of the inputs' framework: CuPy's or PyTorch's current
        stream; Numba's default stream for Numba and NumPy arrays), a Numba stream, or a
        CuPy/PyTorch stream.
    autotune
        True: with ``config=None``, a layer that neither the cache nor the shipped
        table has is tuned now and stored; None: only when ``SIMT_TILES_AUTOTUNE=1``;
        False: never (stride-1 layers only).

    Every array may have at most 2**31 − 1 elements (the kernels use 32-bit offsets).
    """
    check_autotune(autotune)
    # pairs become ints before the planned call: a tuple argument would keep it off launch plans
    sh, sw = _params.pair("stride", stride, 1)
    dh, dw = _params.pair("dilation", dilation, 1)
    pad = _params.padding_of(padding, (sh, sw))
    ph, pw = (-1, -1) if pad == "same" else pad
    return _conv2d_nchw(x, w, bias=bias, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw, groups=_params.groups_of(groups),
                        out=out, variant=variant, config=config, stream=stream, autotune=autotune)


@planned
def _conv2d_nchw(x, w, *, bias, sh, sw, ph, pw, dh, dw, groups, out, variant, config, stream, autotune):
    """:func:`conv2d_nchw` with its parameters as ints (``ph = pw = -1``: "same")."""
    if variant is not None and not (isinstance(variant, str) and (variant == IM2COL_VARIANT or variant in RUNGS)):
        raise ValueError(f"variant: expected one of {(*RUNGS, IM2COL_VARIANT)} or None; got {variant!r}")
    rung = None if variant == IM2COL_VARIANT else get_rung(variant)
    if rung is not None and config is not None and (sh, sw, dh, dw, groups) == (1, 1, 1, 1, 1):
        rung.resolve_config(config)  # a bad preset name or config type fails before any copy
    stream = as_stream(stream, x)

    x_op = device_operand(x, "x", ndim=4, stream=stream)
    w_op = device_operand(w, "w", ndim=4, stream=stream)
    dtype = np.dtype(x_op.dev.dtype)
    if w_op.dev.dtype != dtype:
        raise TypeError(f"w: expected dtype {dtype} (the dtype of x); got {w_op.dev.dtype}")
    n, c_in, h, wd = x_op.dev.shape
    c_out, w_cin, kh, kw = w_op.dev.shape
    if c_in % groups or c_out % groups:
        raise ValueError(f"groups: expected a divisor of C_in = {c_in} and C_out = {c_out} (x.shape[1], "
                         f"w.shape[0]); got {groups}")
    if w_cin * groups != c_in:
        per = "x.shape[1] = C_in" if groups == 1 else f"x.shape[1] / groups = {c_in} / {groups}"
        raise ValueError(
            f"w: expected {c_in // groups} input channels (w.shape[1] == {per}); "
            f"got w of shape {tuple(w_op.dev.shape)} for x of shape {tuple(x_op.dev.shape)}"
        )
    if kh < 1 or kw < 1:
        raise ValueError(
            f"w: expected a filter of at least 1x1 (KH, KW >= 1); got shape {tuple(w_op.dev.shape)}"
        )
    b_op = None
    if bias is not None:
        b_op = device_operand(bias, "bias", ndim=1, stream=stream)
        if b_op.dev.dtype != dtype:
            raise TypeError(f"bias: expected dtype {dtype} (the dtype of x); got {b_op.dev.dtype}")
        if b_op.dev.shape[0] != c_out:
            raise ValueError(
                f"bias: expected shape ({c_out},) (C_out = w.shape[0]); got {tuple(b_op.dev.shape)}"
            )
    geom = _params.geometry(h, wd, kh, kw, (sh, sw), "same" if ph < 0 else (ph, pw), (dh, dw), groups)
    oh, ow = geom.oh, geom.ow
    if oh < 1 or ow < 1:
        pads = (geom.pad_top, geom.pad_bottom, geom.pad_left, geom.pad_right)
        sides = (f"padding={pads[0]} on each side" if len(set(pads)) == 1
                 else f"padding (top, bottom, left, right) {pads}")
        dil = "" if (dh, dw) == (1, 1) else f" (dilation {dh}x{dw})"
        if h == 0 or wd == 0:  # (an empty image with padding is its bias, as the zero-padded sum)
            raise ValueError(f"x: expected H, W >= 1 (or padding that leaves a window); got shape "
                             f"{tuple(x_op.dev.shape)}, {sides}: the output would be {oh}x{ow}")
        raise ValueError(
            f"w: a {kh}x{kw} filter{dil} is larger than the padded input {h + pads[0] + pads[1]}x"
            f"{wd + pads[2] + pads[3]} (x's {h}x{wd} plus {sides}): the output would be {oh}x{ow}"
        )
    path = dispatch.route(variant, config, geom, c_in, c_out, kh, kw, x_shape=(n, c_in, h, wd),
                          dtype=dtype)  # a variant for another layer: ValueError
    shape = (n, c_out, oh, ow)
    for name, size in (("x", x_op.dev.size), ("w", w_op.dev.size), ("out", n * c_out * oh * ow)):
        if size > MAX_ELEMENTS:
            raise ValueError(
                f"{name}: {size} elements; the kernels index with 32-bit offsets, at most "
                f"{MAX_ELEMENTS} (split the batch)"
            )
    out_op = prepare_out(out, x_op, shape, dtype, stream, inputs=(w_op, b_op))

    if n and c_out:  # an empty output needs no launch (and a 0-block grid is invalid)
        b_dev = None if b_op is None else b_op.dev
        if path == "tiled":  # the tiled rungs, as before
            padding = geom.pad_top
            plan = dispatch.plan(variant, config, (n, c_in, h, wd), c_out, kh, kw, padding, dtype, autotune)
            plan.run(Call(x_op.dev, w_op.dev, b_dev, out_op.dev, padding, stream))
        elif path == "depthwise":
            plan = dispatch.plan_depthwise(config, shape, kh, kw, geom.stride, geom.dilation, dtype)
            plan.run(Call(x_op.dev, w_op.dev, b_dev, out_op.dev, geom.pad_top, stream, geom.pad_left,
                          geom.stride, geom.dilation, groups))
        elif path == "im2col":
            _im2col.run(Call(x_op.dev, w_op.dev, b_dev, out_op.dev, 0, stream), geom)
        elif path == "space_to_depth":
            dispatch.SpaceToDepth(oh, ow, geom.pad_top, geom.pad_left, autotune).run(
                Call(x_op.dev, w_op.dev, b_dev, out_op.dev, 0, stream))
        else:
            plan = dispatch.plan_general(variant, config, c_out, groups, (sh, sw), (dh, dw))
            plan.run(Call(x_op.dev, w_op.dev, b_dev, out_op.dev, geom.pad_top, stream, geom.pad_left,
                          geom.stride, geom.dilation, groups))
    return finish_result(out_op, stream)


# the planned call each public function runs (simt_tiles.launch; tests/test_faults.py checks every one has one)
conv2d_nchw.__planned__ = _conv2d_nchw
