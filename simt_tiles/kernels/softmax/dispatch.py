"""What runs for one softmax call: every choice of the family, in one place.

:func:`plan` maps a problem — the input viewed as ``(outer, n, inner)`` around the softmax
axis, the dtype, softmax or log_softmax, the caller's ``variant``/``config`` — to one
:class:`Plan`, whose :meth:`Plan.run` (``plan.run(Call(x, out, stream))``) launches through
``Rung.launch``: the only way the family launches a kernel.

The rules (``variant=None``), in order:

1. ``inner > 1`` (an axis that is not the last): **k07**, lines read in place (fewer lines a warp
   when the lines are too few to give each SM ``warps_per_sm`` warps);
2. rows (``inner == 1``): **k04** (registers) when its config holds the row;
3. else **k05** (registers + shared memory), when one of its presets holds the row: **one block per SM**
   (its ``one_per_sm`` preset, rows to 94208 float32 values) when two per SM (``default``) does not hold
   it, or when the row is ≥ ``ONE_PER_SM_FROM_BYTES`` and the rows are at most ``ONE_PER_SM_ROWS_PER_SM``
   a SM, or ≥ ``ONE_WAVE_FROM_BYTES`` and at most one a SM (its 512 threads a row finish few rows sooner;
   two blocks overlap many); else two per SM.
   Such a row is **split across blocks** (k08) only when it is past ``SPLIT_FROM_BYTES`` and the rows
   leave three SMs in four idle (``4·rows ≤ SMs``);
4. else **k08**: every row in pieces of ``piece_steps`` block steps (8192 values at the default; one step, 4096,
   while the pieces are under ``K08_FILL_PER_SM`` a SM), one launch
   whose blocks take their piece from a ticket queue (k06, the same split in two launches, runs when its
   config object is given; H100, k08 at 0.94× k06's time at 1024 × 128256, 0.69× at 4096 × 94209, 0.78× at
   64 × 128256: ``results/softmax_ticket_probe_s34b_h100.*``).

H200 (``benchmarks/lab/softmax_few_rows_probe.py``, ``results/softmax_few_rows_probe_s30*_h200.*``):
k05 one per SM beat the split at every row count from 34 to 500 and length from 32768 to 94208
(133 × 46081: 32.1 µs against 42.8; 400 × 50257: 67.8 against 107.6); the split won only below 34
rows of ≥ 77824 values (1 × 94208: 20.9 against 30.6; ties at 73728).

A ``variant`` names the rung and is used as is (k07 takes any axis, the others rows;
k01–k03, the lessons, have no log_softmax and no 16-bit inputs); a ``config`` the rung cannot fit raises.

16-bit inputs (float16; bfloat16 as its uint16 bits) take the same rules with the same numbers of
values: the rungs hold them as float32 (registers, shared memory), so a row fits, and is one or two
blocks per SM or split, where a float32 row of as many values is (the byte thresholds above are of
float32 values held, ``held_itemsize``) — but k05 leaves 16-bit rows two registers of its values
(``half_reg_overhead``: bfloat16's conversions spilled at 84), so its presets hold 45568 and 93184 of
them (float32: 46080, 94208), and a row between goes to the next (one block per SM, or k08).  What is
in bytes of memory counts the 2-byte values: k07's 32-byte sector of lines (16 lines, not 8) and
k08's lag of rows in the L2.  The float32 timings
behind the thresholds were not measured again at 16-bit (benchmarks/notes/patterns.md, "16-bit").
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ...runtime import SIMULATOR, ConfigError, Rung, TileConfig, cdiv, dtype_label
from ...vector import aligned
from ..reduce.dispatch import sm_count, workspace  # the SM count (2 in the simulator), kept buffers
from . import k01_smem_tree, k02_warp_shuffle, k03_online, k04_register_row, k05_split_row, k06_split_blocks
from ._common import compute_dtype, held_itemsize, is_half
from ..._numba_fixes import blocks_can_run_at_once
from . import k07_strided_axis, k08_ticket_queue, k09_register_pieces

RUNGS: dict[str, Rung] = {
    r.name: r for r in (k01_smem_tree.RUNG, k02_warp_shuffle.RUNG, k03_online.RUNG, k04_register_row.RUNG,
                        k05_split_row.RUNG, k06_split_blocks.RUNG, k07_strided_axis.RUNG,
                        k08_ticket_queue.RUNG, k09_register_pieces.RUNG)
}
#: the per-row rungs ``variant=None`` weighs (rules 2-3), each with a map from the preset named (config None
#: or a name) to the one it runs: k04, k05 two blocks per SM, k05 again with one block per SM
ROW_VARIANTS = (("k04_register_row", None), ("k05_split_row", None), ("k05_split_row", k05_split_row.ONE_PER_SM))
#: rungs that take 16-bit inputs (float16, bfloat16): every rung ``variant=None`` can choose, and k09
HALF_VARIANTS = ("k04_register_row", "k05_split_row", "k06_split_blocks", "k07_strided_axis", "k08_ticket_queue",
                 "k09_register_pieces")
#: rungs that compute log_softmax too
LOG_VARIANTS = ("k04_register_row", "k05_split_row", "k06_split_blocks", "k07_strided_axis", "k08_ticket_queue",
                "k09_register_pieces")
#: rows split across blocks below this many blocks per SM of work
BLOCKS_PER_SM = 4
#: k05 one block per SM rather than two for rows from this long (128 KiB: 32768 float32; H200: 3-9% at
#: 264-528 rows of 32768-46080, and two per SM 15-35% ahead at 16385-20000)
ONE_PER_SM_FROM_BYTES = 128 * 1024
#: … while the rows are at most this many a SM (H200: even at 792 rows, two per SM 0-5% ahead from 1056)
ONE_PER_SM_ROWS_PER_SM = 6
#: … and from this long (96 KiB: 24576 float32) while the rows are at most one a SM (H200, 1-131 rows: 12-19%
#: at 24576, 17-36% at 32000, 1-4% at 20000)
ONE_WAVE_FROM_BYTES = 96 * 1024
#: a row k05 holds is split (k08) only past this long (288 KiB: 73728 float32, a tie; 77824 split 7% ahead)
SPLIT_FROM_BYTES = 288 * 1024
#: a piece of a split row is at least this many k06 block steps
MIN_PIECE_STEPS = 4
#: k08 cuts pieces smaller (to one block step) while the P items are under this many a SM (H100: one step a
#: piece 7-17% faster at 1 × 73729 / 94208 and 7 × 100000, and at 33 × 77824 with lag_kib 8192; 64 and 1024 rows
#: keep two steps, measured at two only; the edge between 33 and 64 rows is not measured)
K08_FILL_PER_SM = 8
#: k09 cuts pieces smaller while a launch has fewer than this many blocks a SM (two fit an SM at the default)
K09_FILL_PER_SM = 2


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel launch: the rung's compile-time ``params`` (log, phase), its geometry."""

    params: tuple
    grid: tuple
    block: tuple


@dataclasses.dataclass(frozen=True)
class Plan:
    """The rung, its config fitted to the problem, the view its kernels take, its launches."""

    rung: Rung
    config: TileConfig
    view: tuple  # (rows, n) for the row rungs, (outer, n, inner) for k07
    launches: tuple
    pieces: int = 1  # k06: pieces per row (> 1: partials, then finish); k08: per row
    lag: int = 0  # k08: rows whose P items precede the first W item
    #: k05 or k08 with ``vec`` > 1 (several 16-bit values a load): the same plan with ``vec=1``, which :meth:`run` takes
    #: where ``x`` or ``out`` is not 16-byte aligned (a fast-launch plan's key holds that alignment too)
    unaligned: "Plan | None" = None

    def run(self, call: "Call") -> None:
        """Run the plan on ``call``'s device arrays (any shape of ``view``'s size): each launch
        through ``Rung.launch``, its compile-time ``params`` (log, phase) given."""
        x, out, stream = call
        if self.unaligned is not None and not (aligned(x) and aligned(out)):
            return self.unaligned.run(call)
        xv, ov = x.reshape(self.view), out.reshape(self.view)
        args = (xv, ov)
        pdt = compute_dtype(x.dtype)  # the (max, sum) pairs: float32 for 16-bit inputs
        if self.rung is k06_split_blocks.RUNG:
            rows = self.view[0]
            if self.pieces > 1:
                pm = workspace((rows, self.pieces), pdt, stream, tag="softmax m")
                ps = workspace((rows, self.pieces), pdt, stream, tag="softmax s")
            else:
                pm = ps = workspace((1, 1), pdt, stream, tag="softmax m")
            args = (xv, ov, pm, ps)
        elif self.rung is k08_ticket_queue.RUNG:
            rows = self.view[0]
            pm = workspace((rows, self.pieces), pdt, stream, tag="softmax m")
            ps = workspace((rows, self.pieces), pdt, stream, tag="softmax s")
            tickets = workspace((rows + 1,), np.int32, stream, tag="softmax tickets")
            k08_ticket_queue.reset(tickets, stream)  # a launch: zero counters in every call, plan and graph
            args = (xv, ov, pm, ps, tickets, self.lag)
        elif self.rung is k09_register_pieces.RUNG:
            # one block at a time, a piece would wait for ever for the next (a row of one piece waits for none)
            if SIMULATOR and self.pieces > 1 and not blocks_can_run_at_once():
                raise ConfigError("k09_register_pieces: its blocks wait for one another, and this simulator runs "
                                  "them one at a time (a race check's recorder, or SIMT_TILES_NUMBA_FIXES=0)")
            rows = self.view[0]
            pm = workspace((rows, self.pieces), pdt, stream, tag="softmax m")
            ps = workspace((rows, self.pieces), pdt, stream, tag="softmax s")
            tickets = workspace((rows + 1,), np.int32, stream, tag="softmax tickets")
            k08_ticket_queue.reset(tickets, stream)  # as k08's
            args = (xv, ov, pm, ps, tickets)
        for ln in self.launches:
            self.rung.launch(self.config, x.dtype, ln.grid, ln.block, stream, *args, params=dict(ln.params))


class Call(NamedTuple):
    """One softmax call on device arrays: ``out = softmax(x)`` over the plan's view."""

    x: Any
    out: Any  #: written
    stream: Any = 0


def plan(shape3: tuple, dtype, *, log: bool = False, variant: str | None = None, config=None,
         sms: int | None = None) -> Plan:
    """The plan for a softmax over the middle axis of ``shape3 = (outer, n, inner)`` (all > 0); ``dtype`` as
    the kernels take it (bfloat16: ``np.uint16``, :data:`simt_tiles.runtime.HALF_STORAGE`)."""
    outer, n, inner = shape3
    itemsize = np.dtype(dtype).itemsize  # as stored; the rungs' fits count values as held (held_itemsize)
    # k09's pieces of a row must be resident at once: at most one a SM on a GPU; the simulator runs its
    # blocks all at once (unless a test gives ``sms``, asking for a GPU's rules)
    resident = None if SIMULATOR and sms is None else (sm_count() if sms is None else sms)
    sms = sm_count() if sms is None else sms
    if config is not None and not isinstance(config, (str, TileConfig)):
        RUNGS["k04_register_row"].resolve_config(config)  # the TypeError naming what config takes
    if variant is None and isinstance(config, TileConfig):
        named = next((n for n, r in RUNGS.items() if type(config) is r.config_type), None)
        if named is None:  # a foreign config: the TypeError naming the expected type
            RUNGS["k04_register_row"].resolve_config(config)
        if named not in (*(n for n, _ in ROW_VARIANTS), "k06_split_blocks", "k07_strided_axis", "k08_ticket_queue"):
            variant = named  # a lesson rung's config names it; the others go to their rung by the rules
    if variant is not None:
        if not isinstance(variant, str) or variant not in RUNGS:
            raise ValueError(f"variant: expected one of {tuple(RUNGS)} or None; got {variant!r}")
        if log and variant not in LOG_VARIANTS:
            raise ValueError(f"variant: log_softmax runs on {LOG_VARIANTS} or None; got {variant!r}")
        if is_half(dtype) and variant not in HALF_VARIANTS:
            raise TypeError(f"variant: {variant!r} takes float32 or float64; got {dtype_label(dtype)} (16-bit inputs "
                            f"run on {HALF_VARIANTS} or None)")
        if inner > 1 and variant != "k07_strided_axis":
            raise ValueError(f"variant: {variant!r} takes the last axis only; an inner axis needs "
                             "'k07_strided_axis' or None")
        return _build(RUNGS[variant], config, shape3, itemsize, log, sms, split_ok=True, resident=resident)
    if inner > 1:
        k07 = RUNGS["k07_strided_axis"]
        return _build(k07, _preset_for(k07, config), shape3, itemsize, log, sms)
    rows = outer
    fits = {}  # the plan of each per-row preset that holds the row, in ROW_VARIANTS order
    for i, (name, twin) in enumerate(ROW_VARIANTS):
        preset = _preset_for(RUNGS[name], config)
        if twin is not None:  # a preset's twin: only for a preset named (or None); a config object tries its rung once
            if preset is not None and not isinstance(preset, str):
                continue
            preset = twin.get(preset or ("sim" if SIMULATOR else "default"))
            if preset is None:
                continue
        try:
            fits[i] = _build(RUNGS[name], preset, shape3, itemsize, log, sms)
        except ConfigError:
            continue
        if i == 0:
            return fits[0]  # k04: the row in registers
    # a row split across blocks: k08 (one launch), or k06 when its config object was given
    split = RUNGS["k06_split_blocks" if isinstance(config, k06_split_blocks.Config) else "k08_ticket_queue"]
    if fits:
        nb = n * held_itemsize(itemsize)  # bytes of the row as held on chip (16-bit: as float32)
        if nb > SPLIT_FROM_BYTES and 4 * rows <= sms:
            return _build(split, _preset_for(split, config), shape3, itemsize, log, sms, split_ok=True)
        two, one = fits.get(1), fits.get(2)  # k05 two blocks per SM, one per SM
        few = (nb >= ONE_PER_SM_FROM_BYTES and rows <= ONE_PER_SM_ROWS_PER_SM * sms
               or nb >= ONE_WAVE_FROM_BYTES and rows <= sms)
        return one if one is not None and (two is None or few) else two
    return _build(split, _preset_for(split, config), shape3, itemsize, log, sms, split_ok=True)


def _preset_for(rung: Rung, config):
    """A preset name passes to every rung; a config object only to its own rung's type."""
    if config is None or isinstance(config, str):
        return config
    return config if isinstance(config, rung.config_type) else None


def _pieces(cfg, rows: int, n: int, sms: int) -> int:
    return max(1, min(cdiv(BLOCKS_PER_SM * sms, rows), n // (MIN_PIECE_STEPS * cfg.step())))


def _build(rung: Rung, config, shape3, itemsize: int, log: bool, sms: int, *, pieces: int | None = None,
           split_ok: bool = False, resident: int | None = 0) -> Plan:
    outer, n, inner = shape3
    cfg = rung.resolve_config(config)
    lg = (("log", True),) if log else ()
    if rung is k07_strided_axis.RUNG:
        cfg = cfg.for_problem(outer, n, inner, itemsize, sms)
        grid, block = rung.geometry(cfg, outer, n, inner)
        return Plan(rung, cfg, (outer, n, inner), (Launch(lg, grid, block),))
    rows = outer
    if rung is k06_split_blocks.RUNG:
        if pieces is None:  # a variant named: split when the rule would
            pieces = _pieces(cfg, rows, n, sms) if split_ok else 1
        pieces = min(pieces, cdiv(n, cfg.step()))  # no empty piece
        grid, block = rung.geometry(cfg, rows, n, pieces)
        F, P, Fin = k06_split_blocks.FUSED, k06_split_blocks.PARTIAL, k06_split_blocks.FINISH
        phases = (F,) if pieces == 1 else (P, Fin)
        launches = tuple(Launch((*lg, ("phase", ph)), grid, block) for ph in phases)
        return Plan(rung, cfg, (rows, n), launches, pieces)
    if rung is k08_ticket_queue.RUNG:
        if config is None and itemsize == 2:  # 16-bit rows: several values a load (H100: 1.66× the scalar loads)
            cfg = rung.resolve_config("sim_half" if SIMULATOR else "half")
        k06_split_blocks.check_hints(cfg.hints, itemsize)
        k06_split_blocks.check_vec(cfg.vec, itemsize)
        unaligned = None if cfg.vec == 1 else _build(rung, dataclasses.replace(cfg, vec=1), shape3, itemsize, log, sms)
        pieces = cfg.pieces(n, rows, K08_FILL_PER_SM * sms)
        grid, block = rung.geometry(cfg, rows, n, pieces)
        return Plan(rung, cfg, (rows, n), (Launch(lg, grid, block),), pieces, cfg.lag_rows(n, itemsize), unaligned)
    if rung is k09_register_pieces.RUNG:
        resident = sms if resident == 0 else resident  # (None: the simulator, blocks all at once, no fill)
        cfg = cfg.for_problem(rows, n, itemsize, resident, 0 if resident is None else K09_FILL_PER_SM * sms)
        grid, block = rung.geometry(cfg, rows, n)
        return Plan(rung, cfg, (rows, n), (Launch(lg, grid, block),), cfg.pieces(n))
    unaligned = None
    if rung is k05_split_row.RUNG:
        k06_split_blocks.check_vec(cfg.vec, itemsize)
        if cfg.vec > 1:  # (its vec=1 twin is fitted on its own: it holds whatever the runs hold)
            unaligned = _build(rung, dataclasses.replace(cfg, vec=1), shape3, itemsize, log, sms)
    if hasattr(cfg, "for_problem"):
        cfg = cfg.for_problem(rows, n, itemsize)
    grid, block = rung.geometry(cfg, rows, n)
    return Plan(rung, cfg, (rows, n), (Launch(lg, grid, block),), unaligned=unaligned)
