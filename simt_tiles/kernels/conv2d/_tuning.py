"""What :mod:`simt_tiles.autotune` searches for conv2d: k10's register tiles for one image, filter and mode.

``correlate2d``, ``convolve2d`` and ``correlate1d`` with ``variant=None`` and ``config=None``
ask :func:`simt_tiles.autotune.choose` (function ``"conv2d"``) for filters up to
``BEST_MAX_SIZE`` on each axis; a miss keeps the rule (:func:`~simt_tiles.kernels.conv2d.default_rung`).

The problem
    ``(h, w, kh, kw, mode, dtype, weights)``: the image and filter shapes, the mode's name,
    the dtype's name and where the filter's values come from — ``"host"`` (a NumPy filter:
    kernel parameters) or ``"device"`` (a CuPy/PyTorch/Numba array: staged in shared memory).
    The two are different kernels with different register budgets (k10's ``for_source``).

Only rungs that read the filter at run time are searched
    A tuned choice must not make every new filter recompile: :func:`variants` keeps the
    rungs whose binding does not compile the filter's values in (``RUNG.bind.compiles_filter``
    False): k10 today.  k08 is faster at 7 × 7 (72 % of the copy against k05's 66 % on the
    H200) but compiles the values in (seconds per new filter), so it is no candidate; a k08
    with run-time weights would join here.

The space (:func:`register_tile_space`; no cartesian product)
    The tiles of :data:`TILES` — the default 32 × 4 threads of 6 × 4 outputs and four others,
    each with the blocks per SM its registers allow — specialised for the call's filter and mode.
    ``min_blocks`` (the launch bounds' budget) is capped by :func:`registers` (k10's own
    per-filter rule plus the tile's accumulators and window), by shared memory
    (:func:`simt_tiles.runtime.fits`' rule) and by k10's ``for_source`` and ``jit_options``,
    so the config timed is the config the launcher runs.  The estimate is a few registers off
    either way (benchmarks/notes/conv2d.md, "Its tuning space"), so each tile comes again
    with :data:`LOOSER` more registers (fewer blocks).
    float64 kernels are built for one block per SM whatever ``min_blocks`` says
    (``jit_options``): one candidate per tile.

The check
    Each candidate runs on the whole problem into a NaN-poisoned output; every row with a value
    that is not finite, and a sample of rows (all of a small image; else the first and last
    :data:`EDGE_ROWS` and every :data:`ROW_STRIDE`-th — a prime, so every residue of every tile
    height), is compared with the long-double reference (``reference.correlate2d_reference``'s
    arithmetic and bound, on those rows only: an 8192² image's full reference would take the
    whole tuning budget).

Shipped entries (``simt_tiles/tuned/<gpu>.json``) for conv2d have the key
``conv2d|*|<dtype>|<bucket>`` with the bucket of the problem tuple, e.g.
``conv2d|*|float32|8192x8192x7x7xreflectxfloat32xhost`` (:func:`simt_tiles.autotune.bucket`),
and ``{"choice": {"variant": "k10_runtime_weights", "config": {...}}, "problems": [...]}``
as the other families' entries.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numba import cuda

from ...autotune import Tunable, parse_ints
from ...bounds import check_within, gamma, unit_roundoff
from ...interop import device_operand, host_operand
from ...runtime import SM_SMEM, ConfigError
from . import k10_runtime_weights as k10
from ._args import mode_of
from ._common import TINY_WEIGHT, FilterCall, flops, specialise
from .dispatch import BEST_VARIANT, RUNGS
from .reference import extend_indices

#: k10 tiles (fields replacing its "default" preset), each with the blocks per SM its registers
#: allow for a 3 × 3 filter; the default first, so a tune cut short by its budget has it timed
TILES = (
    {},  # 32 × 4 threads of 6 × 4 outputs (24 × 128), 12 blocks of ≤ 40 registers
    {"ry": 4, "min_blocks": 16},  # 16 × 128: fewer accumulators, more blocks
    {"ry": 8, "min_blocks": 10},  # 32 × 128: less halo per output
    {"block_y": 8, "ry": 4, "min_blocks": 8},  # 256 threads, 32 × 128
    {"block_y": 8, "min_blocks": 6},  # 256 threads, 48 × 128
)
#: registers a thread of the default tile keeps for its accumulators and window (6 × 4 + 4),
#: inside k10's calibrated 40
DEFAULT_TILE_REGISTERS = 28
#: the second candidate per tile (float32): this many more registers
LOOSER = 8
#: the check's sample of a large image: the first and last rows, and every ROW_STRIDE-th
EDGE_ROWS, ROW_STRIDE = 8, 97
#: an image of at most this many outputs × taps is checked whole
FULL_CHECK = 2**22

_SOURCES = {"host": k10.Source.PARAMS, "device": k10.Source.STAGED}


def source_of(weights: str) -> int:
    """k10's ``Config.source`` for the problem's ``weights`` ("host" or "device")."""
    try:
        return _SOURCES[weights]
    except KeyError:
        raise ValueError(f"weights: expected 'host' or 'device'; got {weights!r}") from None


def registers(config, source: int, itemsize: int = 4) -> int:
    """A k10 thread's registers, estimated: k10's per-filter rule for the default tile
    (``k10.registers``) plus the accumulators and window values beyond the default tile's
    (two registers a word for float64).  A smaller tile counts as the default (ptxas gave
    4 × 4 outputs the default's 40 registers at 3 × 3, 71 of its 72 at 7 × 7)."""
    tile = max(0, config.ry * config.rx + config.rx - DEFAULT_TILE_REGISTERS)
    return (itemsize // 4) * (k10.registers(config, source) + tile)


def _blocks_for(config, regs: int) -> int:
    return 65536 // (config.threads * regs)


def register_tile_space(presets: dict, problem: dict, dtype):
    """k10's candidates for one problem (``functools.partial`` of its ``presets``): field dicts
    of each tile of :data:`TILES` specialised for the filter, mode and filter source, ``min_blocks``
    capped as the module docstring says.  A tile over 255 registers (or over what one block
    leaves) is left out."""
    dtype = np.dtype(dtype)
    source = source_of(problem["weights"])
    mode = mode_of(problem["mode"])
    looser = (0, LOOSER) if dtype.itemsize == 4 else (0,)
    for tile in TILES:
        try:
            cfg = specialise(dataclasses.replace(presets["default"], **tile), problem["kh"], problem["kw"], mode)
            cfg = dataclasses.replace(cfg, source=source)
            smem = cfg.smem_bytes(dtype.itemsize)
        except ConfigError:
            continue
        regs = registers(cfg, source, dtype.itemsize)
        if regs > min(255, 65536 // cfg.threads):
            continue
        by_smem = SM_SMEM // (smem + 1024)
        for extra in looser:
            blocks = min(cfg.min_blocks, by_smem, max(1, _blocks_for(cfg, regs + extra)))
            if blocks < 1:
                break
            spec = k10.for_source(dataclasses.replace(cfg, min_blocks=blocks), source)
            if dtype.itemsize == 4:  # the launch bounds the kernel gets (mirror/wrap: fewer)
                spec = dataclasses.replace(spec, min_blocks=k10.jit_options(spec, dtype)["launch_bounds"][1])
            yield {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


def variants(dtype) -> tuple:
    """Rungs searched for ``variant=None``: those reading the filter at run time (k10)."""
    return tuple(n for n in (BEST_VARIANT,) if not RUNGS[n].bind.compiles_filter)


def sample_rows(h: int, w: int, kh: int, kw: int) -> np.ndarray:
    """Rows the check compares: every row of a small problem, else the edges and a prime stride."""
    if h * w * kh * kw <= FULL_CHECK:
        return np.arange(h)
    rows = {*range(min(EDGE_ROWS, h)), *range(max(0, h - EDGE_ROWS), h), *range(0, h, ROW_STRIDE)}
    return np.array(sorted(rows))


def rows_reference(image: np.ndarray, weights: np.ndarray, mode: str, rows: np.ndarray):
    """``(ref, bound)`` of scipy's ``correlate`` (origin 0, cval 0) at ``rows`` only: the
    arithmetic and bound of ``reference.correlate2d_reference`` on those rows."""
    rdt = np.longdouble
    h, wd = image.shape
    w = np.asarray(weights, rdt)
    kh, kw = w.shape
    ah, aw = kh // 2, kw // 2
    ref = np.zeros((len(rows), wd), rdt)
    absref = np.zeros((len(rows), wd), rdt)
    for a in range(kh):
        src_rows = extend_indices(rows + a - ah, h, mode)
        for b in range(kw):
            if not abs(w[a, b]) > TINY_WEIGHT:
                continue
            cols = extend_indices(np.arange(wd) + b - aw, wd, mode)
            x = image[np.ix_(np.maximum(src_rows, 0), np.maximum(cols, 0))].astype(rdt)
            x = np.where((src_rows < 0)[:, None] | (cols < 0)[None, :], rdt(0), x)
            ref += w[a, b] * x
            absref += abs(w[a, b]) * np.abs(x)
    n = kh * kw + (1 if mode == "constant" else 0)
    g_ref = gamma(n, unit_roundoff(rdt))
    return ref, absref * (gamma(n, unit_roundoff(image.dtype)) + g_ref) * (1 + 2 * g_ref)


class Case:
    """One filtering on the device: a random image, a random filter (NumPy, or on the device
    for ``weights="device"``), a NaN-poisoned output and the check of the module docstring."""

    def __init__(self, problem: dict, seed: int = 2026):
        p = problem
        self.p, self.dtype = p, np.dtype(p["dtype"])
        source_of(p["weights"])
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((p["h"], p["w"])).astype(self.dtype)
        self.wts = (rng.standard_normal((p["kh"], p["kw"])) / (p["kh"] * p["kw"])).astype(self.dtype)
        self.image = cuda.to_device(self.x)
        self.out = cuda.device_array(self.x.shape, self.dtype)
        if p["weights"] == "host":
            self.w_op = host_operand(self.wts, "weights", ndim=2)
        else:
            self.w_op = device_operand(cuda.to_device(self.wts), "weights", ndim=2)
        self.rows = sample_rows(p["h"], p["w"], p["kh"], p["kw"])
        self.ref, self.bound = rows_reference(self.x, self.wts, p["mode"], self.rows)

    def poison(self) -> None:
        self.out.copy_to_device(np.full(self.out.shape, np.nan, self.dtype))

    def launcher(self, rung, config):
        """One call of ``rung`` with ``config`` as ``correlate2d`` makes it (``rung.bind``)."""
        p, dtype = self.p, self.dtype
        spec = specialise(config, p["kh"], p["kw"], mode_of(p["mode"]))
        spec.check_smem(dtype)
        call = FilterCall(self.image, self.w_op, self.out, 0.0, False, 0)
        kernel, args = rung.bind(rung, spec, dtype, call)
        grid, block = rung.geometry(spec, p["h"], p["w"])

        def launch():
            kernel[grid, block, 0](*args)

        return launch

    def check(self):
        got = self.out.copy_to_host()
        bad = np.flatnonzero(~np.isfinite(got).all(axis=1))  # unwritten (poisoned) rows, wherever they are
        rows = np.union1d(self.rows, bad)
        if len(rows) == len(self.rows):
            return check_within(got[self.rows], self.ref, self.bound)
        ref, bound = rows_reference(self.x, self.wts, self.p["mode"], rows)
        return check_within(got[rows], ref, bound)

    @staticmethod
    def flops(p: dict) -> int:
        return flops(p["h"], p["w"], p["kh"], p["kw"])


def parse(shape: str, options: dict) -> tuple:
    """``--shape HxW [--filter KHxKW] [--mode M] [--weights host|device]`` → the problem tuple."""
    h, w = parse_ints(shape, "--shape", (2,))
    kh, kw = parse_ints(options.get("filter") or "3x3", "--filter", (2,))
    mode = str(mode_of(options.get("mode") or "reflect"))
    weights = options.get("weights") or "host"
    source_of(weights)
    return (h, w, kh, kw, mode, np.dtype(options.get("dtype") or "float32").name, weights)


TUNABLE = Tunable("conv2d", "conv2d", ("h", "w", "kh", "kw", "mode", "dtype", "weights"), variants, Case, parse,
                  "HxW with --filter KHxKW, --mode and --weights host|device",
                  spaces={k10.RUNG.name: functools.partial(register_tile_space, k10.PRESETS)})
