"""What runs for one conv2d call: every choice between the public functions and the rung's launch.

:func:`plan_filter` (``correlate2d``, ``convolve2d``, ``correlate1d``) returns the ``(rung,
config)`` the call launches with ``rung.run(config, call)``, the config specialised for the
call's filter shape and mode:

1. ``variant=None``, ``config=None``, a filter up to :data:`BEST_MAX_SIZE` on each axis: the
   user's autotune cache, then the table shipped for this GPU (:func:`simt_tiles.autotune.choose`,
   function ``"conv2d"``; a dict lookup after the first call; nothing in the simulator);
2. else the rule (:func:`default_rung`): :data:`BEST_VARIANT` up to :data:`BEST_MAX_SIZE`,
   :data:`LARGE_VARIANT` beyond (with ``config=None``, the first of :func:`large_configs` that
   fits); a named variant is itself, with its preset or the caller's config;
3. a filter whose halo does not fit the config's shared memory: for ``variant=None`` with a
   preset, the next rung (:data:`NEXT_RUNG`: :data:`LARGE_VARIANT` → :data:`SHAPE_VARIANT`), then
   :data:`FALLBACK_VARIANT`; else a ConfigError naming the filter.

:func:`plan_separable` (``correlate_separable``): the fused :data:`BEST_SEPARABLE_VARIANT` with
the first of :func:`separable_configs` that fits, else (``variant=None``) the two-pass
composition, :class:`TwoPass`.  :func:`plan_volume` (``correlate``/``convolve`` of a 3-D volume):
:data:`BEST_VOLUME_VARIANT` with the call's filter shape and mode, or (``variant=None``) the
global-memory :data:`VOLUME_FALLBACK` when its ring of planes does not fit shared memory.
:func:`keeps_host_weights`: whether a NumPy filter stays on the
host (the rung compiles it in, or takes it as kernel parameters) or is uploaded.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import numpy as np
from numba import cuda

from ... import autotune
from ...runtime import SIMULATOR, ConfigError, Plan, Rung, pick_rung, rung_dict
from . import (
    k01_naive,
    k02_halo_tiled,
    k03_register_blocked,
    k04_constant_filter,
    k05_register_tile_2d,
    k06_separable_fused,
    k07_vectorized,
    k08_prefetched,
    k09_async_copy,
    k10_runtime_weights,
    k11_large_filter,
    k12_volume,
)
from ._common import CONSTANT_VECTOR, FilterCall, Mode, host_filter, specialise, tap_counts

#: every rung, in ladder order
RUNGS: dict[str, Rung] = rung_dict(
    k01_naive.RUNG,
    k02_halo_tiled.RUNG,
    k03_register_blocked.RUNG,
    k04_constant_filter.RUNG,
    k05_register_tile_2d.RUNG,
    k07_vectorized.RUNG,
    k08_prefetched.RUNG,
    k09_async_copy.RUNG,
    k10_runtime_weights.RUNG,
    k11_large_filter.RUNG,
)

#: variant names in ladder order (later rungs append)
CONV2D_VARIANTS: tuple[str, ...] = tuple(RUNGS)

#: the rung ``variant=None`` uses for filters up to :data:`BEST_MAX_SIZE` on each axis:
#: k05's register tiles with the weights read at run time — one compilation per filter
#: *shape*, mode and dtype, kept on disk (k10's docstring)
BEST_VARIANT = "k10_runtime_weights"

#: the largest filter side :data:`BEST_VARIANT` takes by default: beyond it its patch rows
#: and filter columns are no longer all unrolled (long compiles, weights in local memory)
BEST_MAX_SIZE = 7

#: the rung ``variant=None`` uses past :data:`BEST_MAX_SIZE` on an axis.  The rule in terms of the
#: arithmetic: a KH × KW float32 filter does KH·KW FMAs (2·KH·KW FLOP) per 8 bytes moved; the
#: H200's ridge is 55.9 TFLOP/s ÷ 4.27 TB/s ≈ 13 FLOP/byte, so from 8 × 8 (64 taps, 16 FLOP/byte)
#: on a filter is FMA-bound, and k11 is built for FFMA issue (90–97 % of its loops' instructions,
#: one shared load per ~20–40 FMAs) where k10's unrolled loops stop.  The thin ones past 7 on one
#: axis (1 × 9 … 7 × K, memory-bound or near the ridge) take it too: its patch is staged as k10's,
#: where k03 issues (RX + KW − 1)/RX + KW/RX shared loads per output and filter row (k03's header)
LARGE_VARIANT = "k11_large_filter"

#: ``correlate_separable``'s "two_pass" rung for its two 1-D passes, and ``variant=None``'s for a
#: filter too large for :data:`LARGE_VARIANT`'s shared memory: register blocking, one small
#: kernel per filter shape (the default past 7 × 7 before k11)
SHAPE_VARIANT = "k03_register_blocked"

#: ``variant=None``'s next rung when a filter does not fit a rung's shared memory (then
#: :data:`FALLBACK_VARIANT`)
NEXT_RUNG = {LARGE_VARIANT: SHAPE_VARIANT}

#: :data:`LARGE_VARIANT`'s presets ``config=None`` tries on a GPU, by dtype, the first that fits the
#: filter's patch in shared memory (k11's PRESETS say which filters each fits)
LARGE_PRESETS = {"float32": ("fast_float32", "default", "narrow"), "float64": ("default", "narrow")}

#: the patch-row skew (``k11.Config.skew``, bytes; 1: none) ``config=None`` gives :data:`LARGE_VARIANT`'s float32
#: preset (:func:`skewed`): the H100 timed 128 at 9 x 9 0.364 -> 0.311 ms and at 31 x 31 3.15 -> 2.73 ms (a block
#: fewer an SM there); float64 unchanged (conv2d.md, session 41)
LARGE_SKEW = 128

#: blocks an SM a skew may cost (:func:`skewed`): 31 x 31 went from 5 to 4 and still ran 13 % faster
SKEW_BLOCKS_LOST = 1

#: rungs that compile the filter's *values* into the kernel (constant memory):
#: one compilation per distinct filter, so they are opt-in (``variant=``) —
#: see k04's docstring.  Each rung declares its calling convention (``RUNG.bind``,
#: :mod:`._common`); these tuples are read from there.
CONSTANT_FILTER_VARIANTS: tuple[str, ...] = tuple(n for n, r in RUNGS.items() if r.bind.compiles_filter)

#: constant-filter rungs that compile the anchor in too and take ``aligned``
#: (whether image and out start 16-byte aligned) instead of the anchors
VECTOR_VARIANTS: tuple[str, ...] = tuple(n for n, r in RUNGS.items() if r.bind is CONSTANT_VECTOR)

#: the rung that takes any filter (no shared memory): ``variant=None`` falls
#: back to it when a filter's halo does not fit in shared memory
FALLBACK_VARIANT = "k01_naive"

#: kernels of ``correlate_separable`` (they take two 1-D filters, not a 2-D one)
SEPARABLE_RUNGS: dict[str, Rung] = {k06_separable_fused.RUNG.name: k06_separable_fused.RUNG}

#: ``correlate_separable``'s variants: the two-pass composition (two
#: ``correlate1d`` calls with :data:`BEST_VARIANT`) and the fused kernel
SEPARABLE_VARIANTS: tuple[str, ...] = ("two_pass", *SEPARABLE_RUNGS)

#: the separable variant ``variant=None`` uses (falls back to "two_pass" when
#: the filters do not fit its shared memory).  Not measured yet: the fused
#: kernel by construction (half the global traffic).
BEST_SEPARABLE_VARIANT = "k06_separable_fused"


#: kernels of ``correlate``/``convolve`` on 3-D volumes (they take a 3-D filter): k12's staged ring of
#: planes and its global-memory fallback
VOLUME_RUNGS: dict[str, Rung] = rung_dict(k12_volume.RUNG, k12_volume.NAIVE)

#: ``correlate``/``convolve``'s variants for a 3-D volume
VOLUME_VARIANTS: tuple[str, ...] = tuple(VOLUME_RUNGS)

#: the rung ``variant=None`` uses for a volume: each input plane loaded once per block instead of KD·KH·KW times
#: (H100, 256³ float32: 3.9× cupyx at 3³ with rx4, 4.8× at 5³, 3.7× at 7³ with rx3)
BEST_VOLUME_VARIANT = "k12_volume"

#: the staged-taps presets, most outputs a thread first: the first whose ring fits 48 KiB.  Measured (H100, float32,
#: 256³ and 128 × 512 × 512, benchmarks/notes/conv2d.md "3-D volumes"): every rx faster than the one below it at
#: every filter — rx4 1.6-1.7× the one-output tile at 3³, 2.0× at 5³; rx3 1.9× at 7³, where rx4's ring does not
#: fit; rx3y2 (3 × 2 outputs) first since session 41: 256³ 3³ 73.8 µs against rx4r's 77.2, 5³ 185 against rx4's
#: 289 (H100; its ring fits 7³ too, unmeasured there)
VOLUME_RX_LADDER = ("rx3y2", "rx4", "rx3", "rx2", "default")

#: the presets ``config=None`` tries on a GPU, in order: the taps in registers first where the filter has at most
#: ``k12_volume.MAX_REGISTER_TAPS`` taps (the others refuse it and the next preset runs), then
#: :data:`VOLUME_RX_LADDER`'s.  H100, 3³ float32: rx4r 1.18× rx4 at 256³, 1.16× at 128 × 512 × 512
#: (benchmarks/notes/conv2d.md, "Taps in registers").  The simulator keeps its "sim" preset.
VOLUME_REGISTER_TAPS_LADDER = ("rx3y2", "rx4r", "rx4", "rx3r", "rx3", "rx2", "default")

#: ``variant=None``'s rung for a volume whose filter's ring of planes does not fit 48 KiB
VOLUME_FALLBACK = "k12_volume_naive"


def get_volume_rung(variant: str | None) -> Rung:
    """The volume rung named ``variant`` (None: :data:`BEST_VOLUME_VARIANT`); ValueError names the choices."""
    return pick_rung(VOLUME_RUNGS, variant, BEST_VOLUME_VARIANT)


@functools.lru_cache(maxsize=256)
def _volume_spec(rung, cfg, kd, kh, kw, mode, dtype):
    names = {f.name for f in dataclasses.fields(cfg)}
    values = {"kd": kd, "kh": kh, "kw": kw, "mode": mode}
    spec = dataclasses.replace(cfg, **{k: v for k, v in values.items() if k in names})  # validates (ConfigError)
    spec.check_smem(dtype)
    return spec


def plan_volume(variant, config, kd: int, kh: int, kw: int, mode: Mode, dtype, ladder=None) -> Plan:
    """The plan for one 3-D filtering: the named rung (None: :data:`BEST_VOLUME_VARIANT`) with its
    config for this filter shape and mode — for k12 with ``config`` None the first preset of ``ladder``
    (None: :data:`VOLUME_REGISTER_TAPS_LADDER` on a GPU, the "sim" preset in the simulator) whose ring fits; for
    ``variant=None`` with ``config`` None or a preset name, :data:`VOLUME_FALLBACK` when the ring does not
    fit shared memory (else a ConfigError naming ``weights``)."""
    rung = get_volume_rung(variant)
    ladder = ladder if ladder is not None else () if SIMULATOR else VOLUME_REGISTER_TAPS_LADDER
    if config is None and rung is k12_volume.RUNG and ladder:
        for name in ladder[:-1]:
            try:
                return Plan(rung, _volume_spec(rung, rung.presets[name], kd, kh, kw, mode, np.dtype(dtype)))
            except ConfigError:
                continue  # its ring does not fit: fewer outputs per thread
        config = ladder[-1]
    cfg = rung.resolve_config(config)
    if rung is k12_volume.RUNG and cfg.taps == k12_volume.REGISTERS and kd * kh * kw > k12_volume.MAX_REGISTER_TAPS:
        raise ConfigError(
            f"config: {config if isinstance(config, str) else 'this config'} holds the taps in registers, at most "
            f"{k12_volume.MAX_REGISTER_TAPS}; a {kd}x{kh}x{kw} filter has {kd * kh * kw} (use a preset with the "
            f"taps in shared memory, e.g. 'rx4', or config=None)")
    try:
        return Plan(rung, _volume_spec(rung, cfg, kd, kh, kw, mode, np.dtype(dtype)))
    except ConfigError as exc:
        if variant is None and (config is None or isinstance(config, str)):
            fallback = VOLUME_RUNGS[VOLUME_FALLBACK]
            name = config if config in fallback.presets else None
            return Plan(fallback, _volume_spec(fallback, fallback.resolve_config(name), kd, kh, kw, mode,
                                               np.dtype(dtype)))
        raise ConfigError(
            f"weights: a {kd}x{kh}x{kw} {np.dtype(dtype)} filter does not fit {rung.name}'s shared memory with "
            f"this config (use variant='{VOLUME_FALLBACK}', variant=None, or smaller tiles): {exc}") from exc


def get_rung(variant: str | None) -> Rung:
    """The rung named ``variant`` (None: :data:`BEST_VARIANT`)."""
    return pick_rung(RUNGS, variant, BEST_VARIANT)


def default_rung(kh: int, kw: int, config=None) -> Rung:
    """The rung ``variant=None`` uses for a ``kh × kw`` filter by rule: :data:`BEST_VARIANT` up to
    :data:`BEST_MAX_SIZE` on each axis, else :data:`LARGE_VARIANT` — or, for any size, the rung
    whose config object ``config`` is (of these two and :data:`SHAPE_VARIANT`).  A tuned choice
    comes first: :func:`default_choice`."""
    for name in (BEST_VARIANT, LARGE_VARIANT, SHAPE_VARIANT):
        if isinstance(config, RUNGS[name].config_type):
            return RUNGS[name]
    if kh <= BEST_MAX_SIZE and kw <= BEST_MAX_SIZE:
        return RUNGS[BEST_VARIANT]
    return RUNGS[LARGE_VARIANT]


DEFAULT_RUNGS = (BEST_VARIANT, LARGE_VARIANT, SHAPE_VARIANT)  #: the rungs ``variant=None`` runs (config objects)


def check_default_config(config) -> None:
    """``variant=None``'s early check (before any upload): None, a config object of one of
    :data:`DEFAULT_RUNGS` (it picks that rung) or a preset name one of them has (TypeError/ValueError
    naming ``config`` otherwise; which rung the size takes is checked at the plan)."""
    if config is None or any(isinstance(config, RUNGS[n].config_type) for n in DEFAULT_RUNGS):
        return
    if isinstance(config, str):
        if any(config in RUNGS[n].presets for n in DEFAULT_RUNGS):
            return
        names = sorted({p for n in DEFAULT_RUNGS for p in RUNGS[n].presets})
        raise ValueError(f"config: variant=None (its rungs {', '.join(DEFAULT_RUNGS)}) has no preset {config!r}; "
                         f"expected one of {names}")
    raise TypeError(f"config: expected a preset name or a Config of one of {DEFAULT_RUNGS} (variant=None); "
                    f"got {config!r}")


def default_choice(h: int, w: int, kh: int, kw: int, mode, dtype, weights: str, config=None):
    """``(rung, config)`` for ``variant=None``: with ``config`` None and a filter up to
    :data:`BEST_MAX_SIZE` on each axis, the autotuner's choice for the problem
    ``(h, w, kh, kw, mode, dtype, weights)`` — ``weights`` "host" (a NumPy filter) or "device" —
    from the user's cache, then the table shipped for this GPU (:func:`simt_tiles.autotune.choose`
    with function ``"conv2d"``: a dict lookup after the first call; nothing in the simulator;
    ``SIMT_TILES_AUTOTUNE=1`` tunes a miss); else :func:`default_rung` with ``config`` resolved.
    Its candidates read the filter at run time (``_tuning``): a new filter value still compiles
    nothing."""
    if config is None and kh <= BEST_MAX_SIZE and kw <= BEST_MAX_SIZE:
        hit = autotune.choose("conv2d", (h, w, kh, kw, str(mode), autotune.dtype_name(dtype), weights))
        if hit is not None:
            return RUNGS[hit[0]], hit[1]
    rung = default_rung(kh, kw, config)
    if isinstance(config, str) and config not in rung.presets:
        raise ValueError(f"config: variant=None runs {rung.name} for a {kh}x{kw} filter, which has no preset "
                         f"{config!r}; expected one of {sorted(rung.presets)} (or name the variant)")
    return rung, rung.resolve_config(config)


#: k06's preset for float32 when no config is given: a larger tile measured faster on the H200
#: (32×8 threads of 4×5 outputs: 79 / 77 / 74% of the copy for 3×3 / 5×5 / 7×7 constant against
#: the default's 76 / 68 / 63%, benchmarks/results/conv_k08_h200.json) that needs 46.5 KB of shared
#: memory for 7 + 7 taps — float64, and float32 beyond 9 + 9 taps, keep the default
SEPARABLE_FLOAT32_PRESET = "fast_float32"


def separable_configs(rung, cfg, config, dtype, simulator: bool) -> list:
    """The configs ``correlate_separable`` tries for the fused kernel, in order: with
    ``config`` None on a GPU and float32, :data:`SEPARABLE_FLOAT32_PRESET` first, then
    ``cfg`` (the resolved preset or the caller's config)."""
    if config is None and not simulator and np.dtype(dtype) == np.float32 and \
            SEPARABLE_FLOAT32_PRESET in rung.presets:
        return [rung.presets[SEPARABLE_FLOAT32_PRESET], cfg]
    return [cfg]


def large_configs(rung, cfg, config, dtype, simulator: bool) -> list:
    """The configs :data:`LARGE_VARIANT` tries, in order: with ``config`` None on a GPU, its
    :data:`LARGE_PRESETS` for ``dtype``; else ``[cfg]`` (the resolved preset or the caller's config)."""
    if config is None and not simulator:
        return [rung.presets[name] for name in LARGE_PRESETS[np.dtype(dtype).name]]
    return [cfg]


def skewed(spec, dtype, skew: int):
    """``spec`` (k11, specialised) with its patch rows skewed by ``skew`` bytes where that applies (conflict-free
    window loads), fits 48 KiB and costs at most :data:`SKEW_BLOCKS_LOST` of the blocks an SM holds; else
    ``spec``.  float32 only (``blocks_per_sm`` is exact there: the launch bounds' 128 registers are what
    ptxas takes)."""
    itemsize = np.dtype(dtype).itemsize
    if skew == 1 or itemsize != 4:  # float64: the DFMA pipe is the limit, not shared memory (conv2d.md)
        return spec
    try:
        cand = dataclasses.replace(spec, skew=skew)  # (checks float32's 48 KiB)
    except ConfigError:
        return spec
    if k11_large_filter.skew(cand, itemsize) == (0, 1):
        return spec
    lost = k11_large_filter.blocks_per_sm(spec, itemsize) - k11_large_filter.blocks_per_sm(cand, itemsize)
    return cand if lost <= SKEW_BLOCKS_LOST else spec


def _first_fitting(configs, kh, kw, mode, dtype):
    """The first of ``configs`` specialised for the call whose shared memory fits
    ``dtype``; the last one's ConfigError if none does."""
    for i, cand in enumerate(configs):
        try:
            spec = specialise(cand, kh, kw, mode)
            spec.check_smem(dtype)
            return spec
        except ConfigError:
            if i == len(configs) - 1:
                raise


@functools.lru_cache(maxsize=1024)  # a filter shape called again skips the configs' validation
def specialised(rung, cfg, config, kh, kw, mode, dtype, may_fall_back, wname="weights"):
    """``(rung, config)`` with the call's filter shape and mode compiled in.

    A filter whose halo does not fit in shared memory: ConfigError naming
    ``wname`` — or, for ``variant=None`` with a preset, the next rung (:data:`NEXT_RUNG`)
    with its preset of that name (or its default), then the fallback rung."""
    configs = large_configs(rung, cfg, config, dtype, SIMULATOR) if rung.name == LARGE_VARIANT else [cfg]
    try:
        # float32 was checked when a config was built; float64 doubles it
        spec = _first_fitting(configs, kh, kw, mode, dtype)
        if rung.name == LARGE_VARIANT and config is None and not SIMULATOR:
            spec = skewed(spec, dtype, LARGE_SKEW)
        return rung, spec
    except ConfigError as exc:
        if may_fall_back:
            name = config if isinstance(config, str) else None
            for nxt in (NEXT_RUNG.get(rung.name), FALLBACK_VARIANT):
                if nxt is None:
                    continue
                fallback = RUNGS[nxt]
                try:
                    spec = specialise(fallback.resolve_config(name if name in fallback.presets else None), kh, kw,
                                      mode)
                    spec.check_smem(dtype)
                    return fallback, spec
                except ConfigError:
                    if nxt == FALLBACK_VARIANT:
                        raise
        raise ConfigError(
            f"{wname}: a {kh}x{kw} {dtype} filter does not fit {rung.name}'s shared memory "
            f"with this config (use variant='{FALLBACK_VARIANT}', variant=None, or smaller "
            f"tiles): {exc}"
        ) from exc




def keeps_host_weights(variant) -> bool:
    """Whether a NumPy filter stays on the host for ``variant``: the default (k10 takes it as
    kernel parameters; a rule's other rung uploads it itself) and the rungs that compile the
    values in or take them as parameters; the others get it uploaded by the public function."""
    if variant is None:
        return True
    bind = get_rung(variant).bind
    return bind.compiles_filter or bind.host_weights


def plan_filter(variant, config, h: int, w: int, kh: int, kw: int, mode: Mode, dtype, weights_at: str,
                wname: str = "weights") -> Plan:
    """The plan for one 2-D filtering (the module docstring's steps 1-3); ``weights_at`` "host" (a
    NumPy filter) or "device"."""
    if variant is None:
        rung, cfg = default_choice(h, w, kh, kw, mode, dtype, weights_at, config)
    else:
        rung = get_rung(variant)
        cfg = rung.resolve_config(config)
    may_fall_back = variant is None and (config is None or isinstance(config, str))
    return Plan(*specialised(rung, cfg, config, kh, kw, mode, dtype, may_fall_back, wname))


def separable_rung(variant) -> Rung:
    """The kernel a ``correlate_separable`` variant starts from (``"two_pass"``: its 1-D rung);
    ValueError names the choices."""
    name = BEST_SEPARABLE_VARIANT if variant is None else variant
    if not isinstance(name, str) or name not in SEPARABLE_VARIANTS:
        raise ValueError(f"variant: expected one of {SEPARABLE_VARIANTS} or None; got {variant!r}")
    return RUNGS[SHAPE_VARIANT] if name == "two_pass" else SEPARABLE_RUNGS[name]


def plan_separable(variant, config, kh: int, kw: int, mode: Mode, dtype):
    """The fused kernel's :class:`Plan`, or a :class:`TwoPass` (named, or for ``variant=None``
    when the filters do not fit the fused kernel's shared memory)."""
    name = separable_rung(variant).name if variant != "two_pass" else "two_pass"
    may_fall_back = variant is None and (config is None or isinstance(config, str))
    if name != "two_pass":
        rung = SEPARABLE_RUNGS[name]
        cfg = rung.resolve_config(config)
        try:
            return Plan(rung, _first_fitting(separable_configs(rung, cfg, config, dtype, SIMULATOR), kh, kw, mode,
                                             dtype))
        except ConfigError as exc:
            if not may_fall_back:
                raise ConfigError(
                    f"wy, wx: {kh}- and {kw}-tap {dtype} filters do not fit {rung.name}'s shared "
                    f"memory with this config (use variant='two_pass', variant=None, or smaller "
                    f"tiles): {exc}"
                ) from exc
    rung = RUNGS[SHAPE_VARIANT]
    # (a preset name of the fused kernel that does not fit: the 1-D rung's own default)
    fused_preset = may_fall_back and isinstance(config, str) and config not in rung.presets
    cfg = rung.resolve_config(None if fused_preset else config)
    return TwoPass(specialised(rung, cfg, config, kh, 1, mode, dtype, may_fall_back, "wy"),
                   specialised(rung, cfg, config, 1, kw, mode, dtype, may_fall_back, "wx"), mode)


class TwoPass(NamedTuple):
    """``correlate_separable`` as two 1-D passes through an intermediate of the image's dtype.

    The column pass pads with cval; the 2-D filter's intermediate outside the image is
    ``cval · Σ wy``, so that is the row pass's padding (mode "constant" only; else cval is unused)."""

    columns: tuple  #: (rung, config) of the column pass (the KH × 1 filter)
    rows: tuple  #: (rung, config) of the row pass (the 1 × KW filter)
    mode: Mode

    def run(self, call) -> None:
        h, w = call.image.shape
        mid = cuda.device_array((h, w), call.image.dtype, stream=call.stream)
        rung, cfg = self.columns
        rung.run(cfg, FilterCall(call.image, call.wy, mid, call.cval, False, call.stream,
                                 origin=(call.origin[0], 0)))
        cval_rows = call.cval
        if self.mode == Mode.CONSTANT and call.cval != 0:
            counted = [v for v in host_filter(call.wy, False, call.stream)[:, 0].tolist() if tap_counts(v)]
            # the taps the column pass counts; none: no tap of the 2-D filter counts, scipy's 0 (not NaN·0)
            # (±inf: the products' sum, as the 2-D filter adds them: taps of both signs give inf − inf = NaN)
            c = float(call.cval)
            cval_rows = (c * math.fsum(counted) if math.isfinite(c) else sum(c * v for v in counted)) if counted \
                else 0.0
        rung, cfg = self.rows
        rung.run(cfg, FilterCall(mid, call.wx, call.out, cval_rows, False, call.stream,
                                 origin=(0, call.origin[1])))
