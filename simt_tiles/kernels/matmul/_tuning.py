"""What :mod:`simt_tiles.autotune` searches for a matmul: the rungs' tuning spaces and one problem's check.

The spaces are small and explicit (no cartesian product): a few tile shapes that the
rungs' own rules accept, each with the splits of K that could fill the GPU, pruned by
:func:`simt_tiles.runtime.fits` (shared memory) and :func:`registers` (a per-thread estimate
against the launch bounds' budget).

Tile shapes (float32; float64 tiles hold the same bytes)
    128×128 (the default: 256 threads of 8×8 outputs, 2 blocks per SM), 128×64 and
    64×64 (128 and 64 threads of 8×8, 4 and 6 blocks per SM), 64×64 and 32×64 (128 and 64
    threads of 8×4, 4 and 6 blocks per SM): a problem with few 128×128 tiles of C gets more,
    smaller blocks instead of (or besides) a split of K.  Preset names that another version
    of a rung may add (``"small"``, ``"128x64"``) are tried as well and skipped where the
    rung has none.

Splits of K
    1, and for a grid of fewer than two blocks per SM also 2, 3, 4, 6, 8 while the split
    grid stays within four blocks per SM and each split keeps :data:`MIN_SPLIT_K` of K.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numba import cuda

from ...autotune import Tunable, parse_ints
from ...bounds import check_within
from ...runtime import ConfigError, cdiv
from . import dispatch, k11_generated_split_k, k12_async_copy
from ._common import Call
from .dispatch import MIN_SPLIT_K
from .reference import matmul_reference

#: tile shapes of the generated rungs (fields replacing the "default" preset's), then preset
#: names a rung may have; the default first, so a tune cut short by its budget has it timed
TILES = (
    {},
    {"bn": 64, "wm": 64, "wn": 32, "min_blocks": 4},
    {"bm": 64, "bn": 64, "wm": 64, "wn": 32, "min_blocks": 6},
    # 128 threads of 8×4 (k11's "64x64" preset) and 64 threads of 8×4: the H200's fastest tiles
    # from 768³ to 1031×997×1013 (benchmarks/results/matmul_small_h200.md)
    {"bm": 64, "bn": 64, "wm": 32, "wn": 32, "tn": 4, "min_blocks": 4},
    {"bm": 32, "bn": 64, "wm": 32, "wn": 32, "tn": 4, "min_blocks": 6},
    "small", "128x64",
)
#: splits of K tried when a grid has fewer than two blocks per SM
SPLITS = (2, 3, 4, 6, 8)


def registers(config, itemsize: int) -> int:
    """A k11/k12 thread's registers, estimated: accumulators and fragments (two per float64),
    the vectors prefetched per tile (k11) and ~20 for indices and pointers."""
    words = itemsize // 4
    depth = config.depth(itemsize)
    prefetch = 4 * ((config.bm + config.bn) * depth // 4 // config.threads)
    return words * (config.tm * config.tn + config.tm + config.tn) + prefetch + 20


def split_k_space(presets: dict, problem: dict, dtype):
    """k11/k12 candidates for one problem (``functools.partial`` of the rung's ``presets``):
    every tile of :data:`TILES`, each with its splits of K."""
    m, n, k, sms = problem["m"], problem["n"], problem["k"], problem.get("sms", 132)
    itemsize = np.dtype(dtype).itemsize
    for tile in TILES:
        try:
            cfg = presets[tile] if isinstance(tile, str) else dataclasses.replace(presets["default"], **tile)
        except (KeyError, ConfigError):
            continue
        blocks_per_sm = cfg.min_blocks if itemsize == 4 else 1  # the launch bounds (jit_options)
        if registers(cfg, itemsize) > min(255, 65536 // (cfg.threads * blocks_per_sm)):
            continue
        base = _fields(cfg)
        yield {**base, "splits": 1}
        blocks = cdiv(m, cfg.bm) * cdiv(n, cfg.bn)
        if blocks >= 2 * sms:
            continue
        for s in SPLITS:
            if blocks * s <= 4 * sms and k // s >= MIN_SPLIT_K:
                yield {**base, "splits": s}


def _fields(cfg) -> dict:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def default_space(problem: dict, dtype):
    """A rung without a space of its own is timed with its default preset only."""
    return ("default",)


class Case:
    """One problem on the device: operands, a NaN-poisoned output, the reference and its bound.

    The reference is computed once, in float64 (NumPy on the host: the package needs no
    CuPy), and every candidate's result is checked against it with the γ_K·|A|·|B| bound
    (:func:`~simt_tiles.kernels.matmul.reference.matmul_reference`)."""

    def __init__(self, problem: dict, seed: int = 2026):
        m, n, k = problem["m"], problem["n"], problem["k"]
        self.dtype = np.dtype(problem["dtype"])
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(self.dtype)
        b = rng.standard_normal((k, n)).astype(self.dtype)
        self.ref, self.bound = matmul_reference(a, b, precise=m * n * k <= 2**21)
        self.a, self.b = cuda.to_device(a), cuda.to_device(b)
        self.out = cuda.device_array((m, n), self.dtype)
        self.shape = (m, n, k)

    def poison(self) -> None:
        self.out.copy_to_device(np.full(self.out.shape, np.nan, self.dtype))

    def launcher(self, rung, config):
        """One call of ``rung`` with ``config`` into the output (the launch the public call makes)."""
        if not all(self.shape[:2]):
            return lambda: None
        plan = dispatch.resolved(rung, config, *self.shape)
        call = Call(self.a, self.b, self.out, 0)
        return functools.partial(plan.run, call)

    def check(self):
        return check_within(self.out.copy_to_host(), self.ref, self.bound)

    @staticmethod
    def flops(problem: dict) -> int:
        return 2 * problem["m"] * problem["n"] * problem["k"]


def variants(dtype) -> tuple:
    """Rungs searched for ``variant=None``: the generated ones (float64: k10 and k11's kernel)."""
    if np.dtype(dtype) == np.float32:
        return ("k11_generated_split_k", "k12_async_copy")
    return ("k10_warptiled", "k11_generated_split_k")


def parse(shape: str, options: dict) -> tuple:
    """``"N"`` or ``"MxNxK"`` (``simt-tiles tune matmul --shape``) → ``(m, n, k, dtype)``."""
    parts = parse_ints(shape, "--shape", (1, 3))
    m, n, k = parts * 3 if len(parts) == 1 else parts
    return (m, n, k, np.dtype(options.get("dtype") or "float32").name)


TUNABLE = Tunable("matmul", "matmul", ("m", "n", "k", "dtype"), variants, Case, parse, "N or MxNxK",
                  spaces={r.name: functools.partial(split_k_space, r.presets)
                          for r in (k11_generated_split_k.RUNG, k12_async_copy.RUNG)})
