"""What runs for one reduction: every choice of the family, in one place.

:func:`plan` maps (shape, axes, operator, dtype, ``variant``/``config``) to one :class:`Plan`:
a list of :class:`Step` launches whose inputs and outputs are the caller's ``x``, the result,
or workspaces; :meth:`Plan.run` (``plan.run(Call(x, out, stream))``, each launch through ``Rung.launch``) is the
only way the family launches a kernel.

The rules (k03's lanes, ``variant=None``; k02 runs the same plan through 3-D subscripts):

* the reduced axes are grouped into runs of adjacent axes; each run is one pass over the
  array viewed as ``(outer, n, inner)``, the last run first (a tuple of non-adjacent axes is
  reduced run by run, the intermediates in the accumulator's dtype: float64 for sums);
* lanes: rows (``inner == 1``) get ``G = min(32, 2^⌈log2 ⌈n / loads⌉⌉)`` lanes, so short rows
  share a warp; an inner axis gets ``W`` = the power of two ≤ min(inner, 32) outputs per warp
  (and on k03 a launch bound of ``inner_min_threads`` threads per SM: three blocks of 256, not two;
  ``row_min_threads``, four, where a warp or less takes a row — float64 argmax/argmin none — and
  ``row_loads`` a step there when a row takes more than one step of ``loads``);
* a warp per output group while there are at least ``WARPS_PER_SM · SMs`` groups; rows fewer than that
  get ``P`` = the power of two ≤ ``WARPS_PER_SM · SMs / groups`` warps each (at most the block's), in blocks
  of ``32·P`` threads, unsplit: the SMs' warp slots filled once (session 28, rows of 2048-4096 values at 1-4
  warps a row: 1.3-1.8× faster than a whole block's warps and a split); fewer rows than
  ``WARPS_PER_SM · SMs / (threads/32)``, and other few groups (whole arrays, few columns), get a block each
  (its warps meet in shared memory) and are **split** into ``S = min(⌈BLOCKS_PER_SM·SMs / groups⌉,
  n // min_chunk, MAX_SPLITS)`` pieces (a row's pieces whole multiples of ``SPLIT_ALIGN`` values,
  so each starts on a 128-byte line when the row does), whose (S, Q) partials the next pass folds
  in a fixed order (the same result on every run and GPU).
* ``mean`` is the sum times 1/count in the last pass (NaN for an empty axis, as NumPy); for 16-bit results
  the sum divided by count (``divide``: one float64 rounding before the one to 16 bits).

k01 takes sum/max/min of whole arrays, and of rows of at least ``K01_MIN_ROW`` values when there
are from ``K01_MIN_ROWS_PER_SM`` to fewer than ``K01_MAX_ROWS_PER_SM`` rows per SM (``config`` None or a
preset name; a k01 config object or ``variant="k01_warp_shuffle"`` asks for it anywhere it applies:
``axis=None`` or the last axis).  Its block a row wins only while the rows are few: measured on the H200
(session 27, ``benchmarks/lab/k01_rows_probe.py``) k01 was 26% / 3% / 3% ahead of k03 at 2 / 3.9 / 7.8 rows
per SM, k03 3% / 9% / 5% / 2.1× ahead at 15.5 / 62 / 124 / 993 (rows of 65536 / 16384 / 16384 / 2048).

k03 runs k02's plan (the same passes, lanes, warps per output and splits) over the flat memory, and is
what ``variant=None`` runs wherever k01 does not: measured on the H200 (benchmarks/notes/patterns_zoo.md,
session 23) at 0.120 / 0.224 / 0.263 ms where k02 took 0.155 / 0.933 / 0.712 ms (sum of 2^20 rows of 64,
argmax of 4096 × 50257, mean of 16384² rows), within ±8% of k02 on inner axes, and within 4% of k01 on
whole arrays (k03 1-4% ahead at 2^24-2^28 values in session 27; k01 keeps them, its small-sum tail tuned and
k03's not timed there). ``variant="k02_axis_lanes"`` still runs k02.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from ..._per_stream import PerStream
from ...devices import per_device
from ...runtime import SIMULATOR, Rung, cdiv
from . import k01_warp_shuffle, k02_axis_lanes, k03_flat_lanes
from ._common import ARGMAX, ARGMIN, SUM, acc_dtype

RUNGS: dict[str, Rung] = {r.name: r for r in (k01_warp_shuffle.RUNG, k02_axis_lanes.RUNG, k03_flat_lanes.RUNG)}
#: the rungs that run a lanes plan (:func:`plan`'s passes): k02 subscripts the (outer, n, inner) view, k03 the flat array
LANE_RUNGS = ("k02_axis_lanes", "k03_flat_lanes")
#: the lanes rung ``variant=None`` runs (where k01 does not)
DEFAULT_LANES = "k03_flat_lanes"
WARPS_PER_SM = 64  # 2048 threads
BLOCKS_PER_SM = 8  # of 256 threads
MAX_SPLITS = 1024
#: a split row's pieces are whole multiples of this many values (a float32 row's 128-byte lines)
SPLIT_ALIGN = 32
#: each lane of a split piece runs at least this many steps (1 in the simulator: tiny tests split)
MIN_STEPS = 1 if SIMULATOR else 4
SIM_SMS = 2
#: whole arrays, and rows of at least K01_MIN_ROW values when there are K01_MIN_ROWS_PER_SM per SM,
#: take k01 (sum/max/min): a block per row, or grid-stride blocks and one block for the partials
K01_MIN_ROW = 2048
K01_MIN_ROWS_PER_SM = 2
K01_MAX_ROWS_PER_SM = 8


@per_device
def sm_count() -> int:
    return SIM_SMS if SIMULATOR else int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


# ---------------------------------------------------------------------------
# Workspaces: partials and intermediates, kept between calls
# ---------------------------------------------------------------------------

#: per (device, stream, host thread) — bounded, see :mod:`simt_tiles._per_stream` — and (shape,
#: dtype, tag): a buffer kept between calls.  A fresh cuda.device_array per call costs a cudaMalloc
#: and, later, a cudaFree that synchronises the device.  Work on one stream runs in order, so calls
#: sharing a stream can share its buffer — from one host thread: two threads' calls interleave
#: their kernels on a shared stream, and the per-thread default stream is one handle for many streams.
_WORKSPACES = PerStream("reduce")


def workspace(shape, dtype, stream, tag: str = ""):
    return _WORKSPACES.get(stream, (tuple(shape), np.dtype(dtype), tag),
                           lambda: cuda.device_array(shape, dtype, stream=stream))


# ---------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Step:
    """One launch of a lanes rung (k02, k03): ``src`` (a buffer name) viewed as ``view`` (outer, n,
    inner) into ``dst`` viewed as (splits, Q); compile-time ``params``; ``chunk`` and ``scale`` arguments."""

    config: k02_axis_lanes.Config | k03_flat_lanes.Config
    params: tuple
    view: tuple
    splits: int
    chunk: int
    scale: float
    src: str
    dst: str
    grid: tuple
    block: tuple


@dataclasses.dataclass(frozen=True)
class Plan:
    rung: Rung
    steps: tuple
    buffers: dict  # name → (shape, dtype) of the workspaces
    out_dtype: np.dtype

    def run(self, call: "Call") -> None:
        """Run the steps on ``call``'s device arrays, each through ``Rung.launch``."""
        x, out, stream = call
        if self.rung is k01_warp_shuffle.RUNG:
            self.steps[0](x, out, stream)
            return
        bufs = {"x": x, "out": out}
        for name, (shape, dt) in self.buffers.items():
            bufs[name] = workspace(shape, dt, stream, name)
        arg = self.out_dtype == np.int64
        none = workspace((1, 1, 1), np.int64, stream, "no indices")
        flat = self.rung is k03_flat_lanes.RUNG  # k03 reads the flat array and (n, inner)

        # argmax/argmin: a buffer's values are "<name>.v", its indices "<name>" (x: no indices)
        def values(name):
            return bufs[name + ".v"] if arg and name != "x" else bufs[name]

        def indices(name):
            return bufs[name] if arg and name != "x" else none

        for st in self.steps:
            src = values(st.src)
            q = st.view[0] * st.view[2]
            dst_i = indices(st.dst)
            src_i = indices(st.src)
            out2, out_i = values(st.dst).reshape(st.splits, q), dst_i.reshape((st.splits, q) if arg else (1, 1))
            if flat:
                size = st.view[0] * st.view[1] * st.view[2]
                args = (src.reshape(size), src_i.reshape(size if arg and st.src != "x" else 1), out2, out_i,
                        st.view[1], st.view[2], st.chunk, st.scale)
            else:
                args = (src.reshape(st.view), src_i.reshape(st.view if arg and st.src != "x" else (1, 1, 1)), out2,
                        out_i, st.chunk, st.scale)
            self.rung.launch(st.config, src.dtype, st.grid, st.block, stream, *args, params=dict(st.params))


class Call(NamedTuple):
    """One reduction on device arrays: ``out`` (the result's shape) from ``x``."""

    x: Any
    out: Any  #: written
    stream: Any = 0


def groups_of(axes: tuple) -> list:
    """Runs of adjacent axes, from the last run to the first: (2, 3, 0) → [(2, 3), (0,)]."""
    runs: list = []
    for a in sorted(axes):
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    return [tuple(r) for r in reversed(runs)]


def plan(shape: tuple, axes: tuple, op: str, code: int, dtype, *, variant=None, config=None,
         sms: int | None = None, min_steps: int = MIN_STEPS) -> Plan:
    """The plan reducing ``axes`` (normalised, sorted, distinct) of a C-contiguous ``shape``
    (``sms``, ``min_steps``: this machine's unless given; tests give the H200's)."""
    dtype = np.dtype(dtype)
    sms = sm_count() if sms is None else sms
    if 0 in (shape[a] for a in axes) and len(axes) < len(shape):
        # an empty reduced axis: no value is read, so one pass over (outputs, 0) writes every output's identity
        # (mean: NaN) — reduced run by run, a pass could meet zero outputs, e.g. (0, 128, 0) over (0, 2)
        shape, axes = (math.prod(d for a, d in enumerate(shape) if a not in axes), 0), (1,)
    if variant is None and isinstance(config, RUNGS["k01_warp_shuffle"].config_type):
        variant = "k01_warp_shuffle"  # a config object names its rung
    for name in LANE_RUNGS:
        if variant is None and isinstance(config, RUNGS[name].config_type):
            variant = name
    nd = len(shape)
    if variant is None and (config is None or isinstance(config, str)) and op in ("sum", "max", "min") and (
            axes == tuple(range(nd)) or (axes == (nd - 1,) and nd > 1 and shape[-1] >= K01_MIN_ROW
                                         and K01_MIN_ROWS_PER_SM * sms <= math.prod(shape[:-1])
                                         < K01_MAX_ROWS_PER_SM * sms)):
        variant = "k01_warp_shuffle"  # measured at 97-100% of the copy there (k02: 72% and 35%)
    if variant not in (None, *LANE_RUNGS):
        if variant != "k01_warp_shuffle":
            raise ValueError(f"variant: expected one of {tuple(RUNGS)} or None; got {variant!r}")
        return _k01_plan(shape, axes, op, code, dtype, config)
    rung = RUNGS[variant or DEFAULT_LANES]
    base = rung.resolve_config(config)
    arg = code in (ARGMAX, ARGMIN)
    out_dtype = np.dtype(np.int64) if arg else dtype
    acc = acc_dtype(code, dtype)
    count = math.prod(shape[a] for a in axes)
    steps, buffers = [], {}
    cur, src = list(shape), "x"
    runs = groups_of(axes)
    if not runs:  # axis=(): a reduction over a trailing axis of length 1 (a copy, in NumPy's dtype)
        runs, cur = [(len(shape),)], cur + [1]
    for r, run in enumerate(runs):
        lo, hi = run[0], run[-1] + 1
        view = (math.prod(cur[:lo]), math.prod(cur[lo:hi]), math.prod(cur[hi:]))
        cur = cur[:lo] + [1] * (hi - lo) + cur[hi:]
        last_run = r == len(runs) - 1
        # passes of this run: split while it pays, each folding the previous one's partials
        while True:
            outer, n, inner = view
            cfg, splits, chunk = _fit(base, view, sms, min_steps, wide_index=arg and dtype.itemsize == 8)
            q = outer * inner
            done = splits == 1
            final = done and last_run
            dst = "out" if final else f"t{len(steps)}"
            # the mean: the sum times 1/count, or, rounded to 16 bits, divided by count (one rounding in float64)
            divide = op == "mean" and final and dtype.itemsize == 2
            scale = float(count) if divide and count else (1.0 / count if count else math.nan) if (
                op == "mean" and final) else 1.0
            in_dt = dtype if src == "x" else (acc if not arg else dtype)
            out_dt = out_dtype if final else (acc if not arg else np.dtype(np.int64))
            params = {"op": code}
            if code == SUM:
                params["acc"] = np.dtype(np.float64)
                if not final:
                    params["out_dtype"] = np.dtype(np.float64)
                elif in_dt != dtype:
                    params["out_dtype"] = dtype
            if arg:
                params["idx_in"] = src != "x"
            if divide:
                params["divide"] = True
            if not final:
                buffers[dst] = ((splits, q), out_dt)
            if arg:
                buffers[dst + ".v"] = ((splits, q), dtype)
            grid, block = rung.geometry(cfg, q, splits)
            steps.append(Step(cfg, tuple(sorted(params.items())), view, splits, chunk, scale, src, dst, grid, block))
            src = dst
            if done:
                break
            view = (1, splits, q)
    return Plan(rung, tuple(steps), buffers, out_dtype)


def _fit(base: k02_axis_lanes.Config | k03_flat_lanes.Config, view: tuple, sms: int, min_steps: int,
         wide_index: bool = False):
    """A lanes rung's config for one pass over ``view`` (k02's rule, k03's too), and its number of splits
    (``wide_index``: argmax/argmin of 8-byte values, which spill under the row passes' tighter bound)."""
    outer, n, inner = view
    q = outer * inner
    if inner == 1:
        lanes = min(32, 1 << max(0, (cdiv(n, base.loads) - 1).bit_length()))
        axis = k02_axis_lanes.ALONG_K
    else:
        lanes = 32 // min(32, 1 << (inner.bit_length() - 1))
        axis = k02_axis_lanes.ALONG_OUTPUTS
    groups = cdiv(q, 32 // lanes)
    nw = base.threads // 32
    block_mode = groups < WARPS_PER_SM * sms and n > lanes * base.loads
    wpo = nw if block_mode else 1
    graded = False
    if block_mode and inner == 1:
        # rows: the warps a row that fill WARPS_PER_SM a SM (a power of two), in blocks of that many warps
        # and unsplit; a whole block's warps, and splits, only where the rows are fewer than WARPS_PER_SM·SMs / nw
        wpo = min(nw, 1 << ((WARPS_PER_SM * sms // groups).bit_length() - 1))
        block_mode = wpo == nw
        graded = not block_mode
    cfg = dataclasses.replace(base, lanes=lanes, lane_axis=axis, wpo=wpo, threads=base.threads if wpo == 1 else 32 * wpo)
    if isinstance(base, k03_flat_lanes.Config):  # launch bounds: more loads in flight per SM
        if axis == k02_axis_lanes.ALONG_OUTPUTS or wpo > 1:
            cfg = dataclasses.replace(cfg, min_blocks=cfg.inner_blocks())
        else:
            if not wide_index:
                cfg = dataclasses.replace(cfg, min_blocks=cfg.row_blocks())
            if n > lanes * base.loads and base.row_loads < base.loads:  # rows of several steps: shorter steps
                cfg = dataclasses.replace(cfg, loads=base.row_loads)
    min_chunk = lanes * wpo * base.loads * min_steps
    target = BLOCKS_PER_SM * sms if block_mode else groups if graded else WARPS_PER_SM * sms
    # at least 2 values a piece: with min_chunk 1 (one lane, one warp, one load, min_steps 1: the simulator)
    # a pass over the (1, S, Q) partials would split into S pieces again, for ever
    splits = max(1, min(cdiv(target, groups), n // max(2, min_chunk), MAX_SPLITS))
    chunk = cdiv(n, splits)
    if inner == 1 and splits > 1:  # pieces of a row start on 128-byte lines (2 rows of 2^27: 528 odd pieces, 82% of copy)
        chunk = cdiv(chunk, SPLIT_ALIGN) * SPLIT_ALIGN
        splits = cdiv(n, chunk)
    return cfg, splits, chunk


def _k01_plan(shape, axes, op, code, dtype, config) -> Plan:
    """k01 as it always ran: the whole array (two passes past one block's first step) or rows."""
    if op not in ("sum", "max", "min"):
        raise ValueError(f"variant: k01_warp_shuffle reduces sum/max/min; got op {op!r}")
    nd = len(shape)
    rung = RUNGS["k01_warp_shuffle"]
    cfg = rung.resolve_config(config)
    whole = axes == tuple(range(nd))
    if not whole and axes != (nd - 1,):
        raise ValueError(f"variant: k01_warp_shuffle reduces the whole array or the last axis; got axes {axes}")

    def run(x, out, stream):
        n = math.prod(shape)
        T = cfg.threads
        if whole:
            if n <= T * cfg.loads:
                rung.launch(cfg, dtype, 1, T, stream, x.reshape(1, n), out.reshape(1),
                            params={"op": code, "out_dtype": dtype})
                return
            acc = acc_dtype(code, dtype)
            blocks = min(cfg.max_blocks, -(-n // T))
            partials = workspace((blocks,), acc, stream, "k01 partials")
            rung.launch(cfg, dtype, blocks, T, stream, x.reshape(1, n), partials, params={"op": code, "out_dtype": acc})
            rung.launch(cfg, acc, 1, T, stream, partials.reshape(1, blocks), out.reshape(1),
                        params={"op": code, "out_dtype": dtype})
        else:
            rows, cols = math.prod(shape[:-1]), shape[-1]
            rcfg = cfg.for_rows()
            rung.launch(rcfg, dtype, rows, rcfg.threads, stream, x.reshape(rows, cols), out.reshape(rows),
                        params={"op": code, "out_dtype": dtype})

    return Plan(rung, (run,), {}, dtype)
