"""What runs for one conv2d_nchw layer: every choice between the public function and the rung's launch.

:func:`plan` returns the ``(rung, config)`` that :func:`simt_tiles.conv2d_nchw` launches with
``rung.run(config, call)``, the config specialised for the layer's filter:

1. ``config=None``: the user's autotune cache, then the table shipped for this GPU
   (:func:`simt_tiles.autotune.choose`, function ``"conv2d_nchw"``);
2. else the caller's variant (None: :data:`BEST_VARIANT`) with its preset: ``"sim"`` in the
   simulator, ``"default"`` or ``"small"`` by the grid's size (:func:`auto_preset`);
3. a preset whose staging does not fit shared memory gets a smaller CK (:func:`fit`); for
   ``variant=None`` k02 instead of k03 when k03's prefetch would not stay in registers, and
   :data:`FALLBACK_VARIANT` when nothing fits.

Layers with other parameters than stride 1, dilation 1, groups 1 and one padding on every side
(torch's, ``_params.py``): depthwise layers (groups = C_in ≥ 2) that :data:`DEPTHWISE_VARIANT` takes
(:func:`depthwise_rule`), ``variant`` and ``config`` None, run on it (:func:`plan_depthwise`); stride 2
with dilation 1 and one group, ``variant`` and ``config`` None, as :class:`SpaceToDepth` (the phases,
then :func:`plan`'s stride-1 layer); the rest :func:`plan_general` (k01 with the parameters at run
time).  Before those, in float32, :func:`im2col_rule` sends one-group layers with other parameters, and
stride-1 layers of small output planes, to im2col + matmul (``_im2col.py``), measured faster there.
:func:`route` says which of these paths a layer takes.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numba import cuda

from ... import autotune
from ...devices import per_device
from ...runtime import SIMULATOR, ConfigError, Plan, Rung, cdiv, pick_rung, rung_dict
from typing import NamedTuple

from . import _im2col, _space_to_depth, k01_direct, k02_smem_tiled, k03_double_buffered, k04_depthwise
from ._common import Call, output_hw, specialise, tiled_geometry

#: every rung, in ladder order
RUNGS: dict[str, Rung] = rung_dict(
    k01_direct.RUNG,
    k02_smem_tiled.RUNG,
    k03_double_buffered.RUNG,
    k04_depthwise.RUNG,
)

#: the rung ``variant=None`` uses: the fastest on the H200 (1.12× cuDNN FP32 on the
#: ResNet 56×56 layer, 0.90× on N8 C256 14×14; benchmarks/results/conv_h200.json).
BEST_VARIANT = "k03_double_buffered"

#: the rung that takes any filter (no shared memory): ``variant=None`` falls
#: back to it when a filter's staging does not fit in shared memory
FALLBACK_VARIANT = "k01_direct"

def get_rung(variant: str | None) -> Rung:
    """The rung named ``variant`` (None: :data:`BEST_VARIANT`)."""
    return pick_rung(RUNGS, variant, BEST_VARIANT)


@per_device
def sm_count() -> int:
    """Streaming multiprocessors of the current device (GPU only)."""
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


def auto_preset(rung: Rung, shape: tuple[int, int, int, int], sms: int) -> str:
    """The preset ``config=None`` means on a GPU with ``sms`` SMs for an output of
    ``shape`` (N, C_out, OH, OW): "default", unless the rung has "small" and the
    default's grid has fewer than ``min_blocks`` blocks per SM."""
    default = rung.presets["default"]
    if "small" not in rung.presets:
        return "default"
    (blocks,), _ = tiled_geometry(default, *shape)
    return "default" if blocks >= default.min_blocks * sms else "small"


@functools.lru_cache(maxsize=1024)  # a layer called again launches without re-deciding
def _choose(rung: Rung, variant, config, shape, kh: int, kw: int, dtype):
    """``(rung, config)`` to launch, with the call's filter shape compiled in.

    Presets (``config`` None or a name) whose staging does not fit in shared
    memory get a smaller CK.  For ``variant=None``: k02 instead of k03 when
    k03's prefetch would not stay in registers, and the fallback rung when
    nothing fits."""
    preset = config if isinstance(config, str) else None
    if config is None:
        preset = "sim" if SIMULATOR else auto_preset(rung, shape, sm_count())
    spec, error = fit(rung, rung.resolve_config(preset if preset is not None else config), kh, kw, dtype,
                       shrink=preset is not None)
    if spec is not None and variant is None and rung is RUNGS["k03_double_buffered"]:
        if not k03_double_buffered.prefetch_stays_in_registers(spec):
            k02 = RUNGS["k02_smem_tiled"]
            spec02, _ = fit(k02, k02.resolve_config(preset), kh, kw, dtype, shrink=True)
            if spec02 is not None:
                return k02, spec02
    if spec is not None:
        return rung, spec
    if variant is None and preset is not None:
        fallback = RUNGS[FALLBACK_VARIANT]
        name = preset if preset in fallback.presets else None
        return fallback, specialise(fallback.resolve_config(name), kh, kw)
    raise ConfigError(
        f"w: a {kh}x{kw} {np.dtype(dtype)} filter's staging does not fit {rung.name}'s shared memory "
        f"with this config (use variant='{FALLBACK_VARIANT}', variant=None, a preset, or a smaller "
        f"co/ck/tile): {error}"
    )


def fit(rung: Rung, cfg, kh: int, kw: int, dtype, *, shrink: bool):
    """``(spec, None)``: ``cfg`` specialised for a kh × kw filter, its CK halved
    (``shrink``) until the staging fits in shared memory for ``dtype``; or
    ``(None, the first ConfigError)``."""
    error = None
    while True:
        try:
            spec = specialise(cfg, kh, kw)
            spec.check_smem(dtype)  # float32 was checked when spec was built; float64 doubles it
            return spec, None
        except ConfigError as exc:
            error = error or exc
        if not shrink or getattr(cfg, "ck", 1) == 1:
            return None, error
        cfg = dataclasses.replace(cfg, ck=cfg.ck // 2)  # fewer channels per step: less staging




def plan(variant, config, x_shape: tuple, c_out: int, kh: int, kw: int, padding: int, dtype, autotune_=None) -> Plan:
    """The plan for one layer of input ``x_shape`` (N, C_in, H, W) (the module docstring's steps)."""
    n, c_in, h, w = x_shape
    rung = get_rung(variant)
    if config is None:  # the tuned choice for this GPU and layer, if any (a dict lookup once seen)
        problem = (n, c_in, h, w, c_out, kh, kw, padding, autotune.dtype_name(dtype))
        hit = autotune.choose("conv2d_nchw", problem, variant, autotune_)
        if hit is not None:
            variant, config = hit
            rung = RUNGS[variant]
    oh, ow = output_hw(h, w, kh, kw, padding)
    return Plan(*_choose(rung, variant, config, (n, c_out, oh, ow), kh, kw, np.dtype(dtype)))


#: the rung of every layer the tiled rungs do not take (``_params.Geometry.fast`` false: a stride or
#: dilation other than 1, groups, a padding that differs between sides), by rule — no tuning yet
GENERAL_VARIANT = FALLBACK_VARIANT

#: channels per group from which the general layers' rung gives a thread 4 of them ("channels4")
GENERAL_RCO_MIN = 4


def plan_general(variant, config, c_out: int, groups: int, stride, dilation) -> Plan:
    """The plan for a layer the tiled rungs do not take: :data:`GENERAL_VARIANT` with ``config``
    (None: "sim" in the simulator, else "channels4" when a group has at least
    :data:`GENERAL_RCO_MIN` output channels, else "default").  Another named variant: ValueError."""
    rung = RUNGS[GENERAL_VARIANT]
    if variant is not None and variant != GENERAL_VARIANT:
        get_rung(variant)  # an unknown name: the usual error
        raise ValueError(
            f"variant: {variant} takes stride 1, dilation 1, groups 1 and the same padding on every side; "
            f"got stride={stride}, dilation={dilation}, groups={groups} (or an asymmetric padding): "
            f"use variant=None or '{GENERAL_VARIANT}'")
    if config is None:
        config = "sim" if SIMULATOR else ("channels4" if c_out // groups >= GENERAL_RCO_MIN else "default")
    return Plan(rung, rung.resolve_config(config))


#: the rung of depthwise layers (groups = C_in, C_out a multiple of it): with ``variant`` and ``config``
#: None it runs those :func:`depthwise_rule` accepts (groups >= 2); by rule, not measured yet
DEPTHWISE_VARIANT = "k04_depthwise"

#: what :data:`DEPTHWISE_VARIANT` takes, as its ValueError states it
DEPTHWISE_RULE = (f"depthwise layers (groups == C_in, C_out a multiple of C_in) with stride 1 or 2 on each "
                  f"axis, at most {k04_depthwise.TAPS_MAX} taps and a patch that fits shared memory")


@functools.lru_cache(maxsize=1024)
def depthwise_rule(c_in: int, c_out: int, groups: int, stride: tuple, dilation: tuple, kh: int, kw: int):
    """Why :data:`DEPTHWISE_VARIANT` cannot take a layer (None: it can): not depthwise, a stride above 2,
    more than ``k04_depthwise.TAPS_MAX`` taps, or a patch (a dilation stretches it) that does not fit
    static shared memory with the "default" preset in float64 (the largest patch a preset stages)."""
    if groups != c_in or c_out % c_in:
        return f"groups={groups} with C_in={c_in}, C_out={c_out} is not depthwise"
    try:
        k04_depthwise.for_layer(k04_depthwise.PRESETS["default"], kh, kw, stride, dilation).check_smem(np.float64)
    except ConfigError as exc:
        return str(exc)
    return None


#: any one-group layer as im2col then a batched matmul (``_im2col.py``): by name, and by :func:`im2col_rule`
IM2COL_VARIANT = "im2col_gemm"

#: stride-1 layers whose output plane has at most this many pixels run as im2col by default: the direct
#: rungs tile the plane, and a small one leaves the GPU idle (H200, session 23: 7 × 7 planes 2-4× faster
#: as im2col, 56 × 56 3× slower at N = 32); 400 = 20², the geometric middle of those two measured points
IM2COL_MAX_PLANE = 400

#: the fewest multiply-adds (N·C_out·OH·OW·C_in·KH·KW) for which the rule takes im2col: a smaller layer is
#: launch-bound, and im2col's two or three launches would cost more than the direct kernel's one.  2^22 is
#: below the smallest layer measured faster as im2col (resnet18's 1×1 stride-2 shortcut at N = 1: 6.4 M,
#: 38 against 60 µs); smaller layers keep the direct paths, unmeasured either way
IM2COL_MIN_MACS = 1 << 22


def im2col_rule(geom, x_shape: tuple, c_out: int, kh: int, kw: int, dtype) -> bool:
    """Whether ``variant=None, config=None`` runs a layer as im2col + matmul: float32, one group, at least
    :data:`IM2COL_MIN_MACS` multiply-adds, and either
    a stride, dilation or padding the tiled rungs do not take (the space-to-depth and k01 paths ran at
    0.26-0.58× cuDNN there, im2col at 0.48-1.31×), or an output plane of at most :data:`IM2COL_MAX_PLANE`
    pixels with no tuned entry for the layer (the tuned table names a tiled rung it measured); and one
    image's ``cols`` within ``_im2col.MAX_COLS`` (else it would be one buffer past the cap).  Measured on
    the zoo of ``benchmarks/lab/conv_issue33.py`` (``benchmarks/notes/conv_nchw.md``); float64 is not."""
    if geom.groups != 1 or np.dtype(dtype) != np.float32:
        return False
    n, c_in = x_shape[0], x_shape[1]
    if n * c_out * geom.oh * geom.ow * c_in * kh * kw < IM2COL_MIN_MACS:
        return False
    if c_in * kh * kw * geom.oh * geom.ow > _im2col.MAX_COLS:  # (one image's cols over the buffer's cap)
        return False
    if not geom.fast:
        return True
    if geom.oh * geom.ow > IM2COL_MAX_PLANE:
        return False
    # a tuned entry (a lookup only: a tune, which times the tiled rungs, is plan()'s, after the checks)
    problem = (*x_shape, c_out, kh, kw, geom.pad_top, autotune.dtype_name(dtype))
    return autotune.choose("conv2d_nchw", problem, None, False) is None


def route(variant, config, geom, c_in: int, c_out: int, kh: int, kw: int, *, x_shape=None, dtype=None) -> str:
    """The path a layer takes (``geom``: its ``_params.Geometry``): ``"depthwise"`` (:func:`plan_depthwise`:
    the variant named, or ``variant`` and ``config`` None on a layer of groups >= 2 that
    :func:`depthwise_rule` accepts), ``"tiled"`` (:func:`plan`), ``"space_to_depth"``
    (:class:`SpaceToDepth`) or ``"general"`` (:func:`plan_general`).  :data:`DEPTHWISE_VARIANT` named
    for a layer it does not take: ValueError naming the variant and the rule; :data:`IM2COL_VARIANT`
    named: ``"im2col"`` (one group, ``config`` None), and ``variant`` and ``config`` None where
    :func:`im2col_rule` says so (``x_shape`` (N, C_in, H, W) and ``dtype`` given; without them the rule is
    not asked)."""
    if variant == IM2COL_VARIANT:
        if geom.groups != 1:
            raise ValueError(f"variant: {variant} takes layers of one group; got groups={geom.groups}: use "
                             f"variant=None or '{GENERAL_VARIANT}'")
        if config is not None:
            raise ValueError(f"config: {variant} has no config (its matmul chooses its own tiles); got {config!r}")
        return "im2col"
    if variant == DEPTHWISE_VARIANT:
        why = depthwise_rule(c_in, c_out, geom.groups, geom.stride, geom.dilation, kh, kw)
        if why is not None:
            raise ValueError(f"variant: {variant} takes {DEPTHWISE_RULE}; got groups={geom.groups}, C_in={c_in}, "
                             f"C_out={c_out}, stride={geom.stride}, dilation={geom.dilation}, a {kh}x{kw} filter "
                             f"({why}): use variant=None or '{GENERAL_VARIANT}'")
        return "depthwise"
    if (variant is None and config is None and geom.groups > 1
            and depthwise_rule(c_in, c_out, geom.groups, geom.stride, geom.dilation, kh, kw) is None):
        return "depthwise"
    if (variant is None and config is None and dtype is not None and x_shape is not None
            and im2col_rule(geom, x_shape, c_out, kh, kw, dtype)):
        return "im2col"
    if geom.fast:
        return "tiled"
    if space_to_depth_applies(variant, config, geom.stride, geom.dilation, geom.groups):
        return "space_to_depth"
    return "general"


def depthwise_preset(oh: int, ow: int) -> str:
    """The preset ``config=None`` means for k04 on a GPU: "default" (a 16 × 32 tile), unless its tiles
    would leave more than half of an OH × OW plane's outputs idle and "small"'s (8 × 8) fewer — the
    7 × 7 and 14 × 14 planes of MobileNetV2's last stages.  By rule, not measured yet."""
    def used(cfg) -> float:
        return oh * ow / (cdiv(oh, cfg.tile_h) * cfg.tile_h * cdiv(ow, cfg.tile_w) * cfg.tile_w)

    default, small = k04_depthwise.PRESETS["default"], k04_depthwise.PRESETS["small"]
    return "small" if used(default) < 0.5 and used(small) > used(default) else "default"


#: output rows a thread may take (``k04_depthwise.Config.rh``), fewest first: what :func:`depthwise_config` tries
DEPTHWISE_ROWS = (1, 2, 4)

#: the least share of an output plane a taller tile must still cover (the rest: threads that only stage)
DEPTHWISE_MIN_USED = 0.75

#: blocks an sm_90 SM holds at most: a grid of one-warp tiles past this many a SM is capped at 32 warps an SM
SM_BLOCK_LIMIT = 32


def plane_used(cfg, oh: int, ow: int) -> float:
    """The share of the outputs of ``cfg``'s tiles over an OH × OW plane that lie in the plane."""
    return oh * ow / (cdiv(oh, cfg.tile_h) * cfg.tile_h * cdiv(ow, cfg.tile_w) * cfg.tile_w)


@functools.lru_cache(maxsize=1024)
def depthwise_config(shape: tuple, kh: int, kw: int, stride: tuple, dilation: tuple, dtype, sms: int):
    """The config ``config=None`` means for k04 on a GPU of ``sms`` SMs, for an output of ``shape``
    (N, C_out, OH, OW), by a rule in bytes and blocks (not a table): :func:`depthwise_preset`'s tile
    for the plane, then the fewest output rows a thread (``rh``, :data:`DEPTHWISE_ROWS`) that keep
    ``k04_depthwise.IN_FLIGHT_TARGET`` bytes of loads in flight per SM (``k04_depthwise.in_flight_bytes``:
    blocks per SM × the patch a block stages; 3 × 3 float32: 19 KB with one row at stride 1, 36 KB with
    two; 60 KB with one at stride 2).  A taller tile is taken only while it has more in flight (its
    registers may cost blocks), still covers :data:`DEPTHWISE_MIN_USED` of the plane, fits shared
    memory, and its grid fills one wave (``sms`` × blocks per SM): a grid below one wave has all its
    loads in flight at once, and more threads spread its work over more SMs (batch 1: MobileNetV2's
    features.1 keeps one row, 896 blocks of 128 threads, against 512 with two).  Last, a stride-2 layer of
    one-warp tiles whose grid fills a block-limited wave (``sms`` × :data:`SM_BLOCK_LIMIT` blocks) takes two
    planes a block (``planes``, half the blocks of two warps each): H100, features.14 at batch 32 15.8 →
    13.8 µs (0.93× → 1.07× torch); stride 1 (efficientnet's features.5.0, 27.8 → 28.2) and grids under a
    wave (batch 1) keep one (benchmarks/notes/conv_nchw.md, session 41)."""
    n, c_out, oh, ow = shape
    base = k04_depthwise.for_layer(k04_depthwise.PRESETS[depthwise_preset(oh, ow)], kh, kw, stride, dilation)
    best = base  # one row a thread: the presets' rh
    for rh in DEPTHWISE_ROWS[1:]:
        if k04_depthwise.in_flight_bytes(best, dtype) >= k04_depthwise.IN_FLIGHT_TARGET:
            break
        try:
            cfg = dataclasses.replace(base, rh=rh)
            cfg.check_smem(dtype)
        except ConfigError:
            break
        blocks = k04_depthwise.blocks(cfg, n, c_out, oh, ow)
        if (plane_used(cfg, oh, ow) < DEPTHWISE_MIN_USED or blocks < sms * k04_depthwise.blocks_per_sm(cfg, dtype)
                or k04_depthwise.in_flight_bytes(cfg, dtype) <= k04_depthwise.in_flight_bytes(best, dtype)):
            break
        best = cfg
    if (best.block_x * best.block_y == 32 and tuple(stride) == (2, 2)
            and k04_depthwise.blocks(best, n, c_out, oh, ow) >= sms * SM_BLOCK_LIMIT):
        try:
            two = dataclasses.replace(best, planes=2, min_blocks=max(1, best.min_blocks // 2))  # small_p2's bounds
            two.check_smem(dtype)
            return two
        except ConfigError:
            pass
    return best


def plan_depthwise(config, shape: tuple, kh: int, kw: int, stride: tuple, dilation: tuple,
                   dtype=np.float32) -> Plan:
    """:data:`DEPTHWISE_VARIANT` for one layer of output ``shape`` (N, C_out, OH, OW): ``config`` (None:
    "sim" in the simulator, else :func:`depthwise_config`) with the layer's filter shape, stride and
    dilation compiled in (``k04_depthwise.for_layer``; a config whose patch does not fit raises
    ConfigError naming it)."""
    rung = RUNGS[DEPTHWISE_VARIANT]
    if config is None:
        if not SIMULATOR:
            return Plan(rung, depthwise_config(tuple(shape), kh, kw, tuple(stride), tuple(dilation),
                                               np.dtype(dtype), sm_count()))
        config = "sim"
    return _depthwise_plan(rung.resolve_config(config), kh, kw, stride, dilation)


@functools.lru_cache(maxsize=1024)  # a layer called again launches without re-validating its config
def _depthwise_plan(config, kh: int, kw: int, stride: tuple, dilation: tuple) -> Plan:
    return Plan(RUNGS[DEPTHWISE_VARIANT], k04_depthwise.for_layer(config, kh, kw, stride, dilation))


def space_to_depth_applies(variant, config, stride, dilation, groups: int) -> bool:
    """Whether a layer runs as :class:`SpaceToDepth`: ``variant`` and ``config`` None, stride 2 on both
    axes, dilation 1, one group (ResNet's stride-2 3×3 convs, its stem and 1×1 shortcuts)."""
    return variant is None and config is None and stride == (2, 2) and dilation == (1, 1) and groups == 1


class SpaceToDepth(NamedTuple):
    """A stride-2 layer as the stride-1 layer of its input's and filter's phases (``_space_to_depth``):
    two copy kernels, then :func:`plan`'s tiled rung for the (N, 4·C_in) input and the ⌈KH/2⌉ × ⌈KW/2⌉
    filter with padding 0; for an odd filter, the direct layer where the input held a NaN or ±inf
    (``_space_to_depth.fix_non_finite``)."""

    oh: int
    ow: int
    pad_top: int
    pad_left: int
    autotune: object = None

    def run(self, call: Call) -> None:
        xs, ws, flag = _space_to_depth.phases(call.x, call.w, self.oh, self.ow, self.pad_top, self.pad_left,
                                              call.stream)
        c_out, _, kh2, kw2 = ws.shape
        plan(None, None, tuple(xs.shape), c_out, kh2, kw2, 0, call.x.dtype, self.autotune).run(
            Call(xs, ws, call.bias, call.out, 0, call.stream))
        # an odd filter's padded taps meet the input just past a window: a NaN/inf there, the layer again
        _space_to_depth.fix_non_finite(call.x, call.w, call.bias, call.out, flag, self.pad_top, self.pad_left,
                                       call.stream)
