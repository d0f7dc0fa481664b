"""What runs for one matmul: every choice between the public function and the rung's launch.

:func:`plan` returns the ``(rung, config)`` that :func:`simt_tiles.matmul` launches with
``rung.run(config, call)``; the config carries the launch choices too (``splits``: K's split,
``pad``: whether ragged or unaligned rows are first copied into padded buffers).  In order:

1. a named ``config`` (a preset name or a config object) for the caller's ``variant``
   (None: :data:`BEST_VARIANT`);
2. ``config=None``: the user's autotune cache, then the table shipped for this GPU
   (:func:`simt_tiles.autotune.choose`: memoised, a dict lookup after the first call;
   ``autotune=True`` tunes a miss);
3. ``variant=None`` without an entry: the split-K rows of the shipped table by size
   (:func:`fast_plan`; float64: :data:`FLOAT64_VARIANT`); a named variant: its preset;
4. ``variant=None``: k12 for a k11 choice whose rows are ragged (:data:`RAGGED_ROWS`);
5. ``pad=Pad.RULE`` resolved by size (:func:`pad_rule`, the shipped ``rules.matmul_pad``).

The rungs decide nothing: k11 and k12 cut K into the config's ``splits`` and pad when the
config says ``Pad.ALWAYS`` and the operands need it (``run``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np
from numba import cuda

from ... import autotune
from ...devices import per_device
from ...runtime import SIMULATOR, Plan, Rung, cdiv, fits, pick_rung, rung_dict
from . import (
    k01_naive,
    k02_coalesced,
    k03_smem_tiled,
    k04_regblock_1d,
    k05_regblock_2d,
    k06_transposed,
    k07_padded,
    k08_swizzled,
    k09_double_buffered,
    k10_warptiled,
    k11_generated_split_k,
    k12_async_copy,
    _layouts,
)
from .k11_generated_split_k import Config as SplitKConfig
from .k11_generated_split_k import Pad

# ---- the call's shapes: np.matmul's reading of two operands (1-D promotion, broadcast batches), shared by
# the FP32 path (matmul, _strided) and the tensor-core path (mma.matmul_mma): read here, beside the choice
# they feed, so a call enters this file once (tests/test_call_path.py)

class Shapes(NamedTuple):
    """The product's shapes, as :func:`shapes` reads them (:mod:`._strided` launches on them)."""

    m: int
    n: int
    k: int
    batch: tuple  #: the broadcast batch shape
    out: tuple  #: the result's shape (batch, then M and N unless they were added)
    a: tuple  #: (shape, strides in elements) of A as a batch of M×K matrices (1-D promoted)
    b: tuple  #: (shape, strides) of B as a batch of K×N matrices


def shapes(a_shape, a_strides, b_shape, b_strides) -> Shapes:
    """``np.matmul``'s reading of two operands (strides in elements); ValueError naming the argument."""
    a_shape, b_shape, a_strides, b_strides = (tuple(int(v) for v in t) for t in (a_shape, b_shape, a_strides, b_strides))
    a_vec, b_vec = len(a_shape) == 1, len(b_shape) == 1
    if a_vec:
        a_shape, a_strides = (1,) + a_shape, (0,) + a_strides
    if b_vec:
        b_shape, b_strides = b_shape + (1,), b_strides + (0,)
    (m, k), (kb, n) = a_shape[-2:], b_shape[-2:]
    if kb != k:
        want = f"({k},)" if b_vec else f"(..., {k}, N)"
        raise ValueError(f"b: expected shape {want} since a has shape {_orig(a_shape, a_vec)} (the inner "
                         f"dimensions must match, as in np.matmul); got {_orig(b_shape, b_vec, b=True)}")
    try:
        batch = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    except ValueError:
        raise ValueError(f"b: batch dimensions {b_shape[:-2]} do not broadcast with a's {a_shape[:-2]} "
                         f"(a has shape {_orig(a_shape, a_vec)}, b {_orig(b_shape, b_vec, b=True)})") from None
    out = batch + (() if a_vec else (m,)) + (() if b_vec else (n,))
    return Shapes(m, n, k, batch, out, (a_shape, a_strides), (b_shape, b_strides))


def _orig(shape, vec, b=False):
    return (shape[-1 - b],) if vec else shape


#: every rung, in ladder order
RUNGS: dict[str, Rung] = rung_dict(
    k01_naive.RUNG,
    k02_coalesced.RUNG,
    k03_smem_tiled.RUNG,
    k04_regblock_1d.RUNG,
    k05_regblock_2d.RUNG,
    k06_transposed.RUNG,
    k07_padded.RUNG,
    k08_swizzled.RUNG,
    k09_double_buffered.RUNG,
    k10_warptiled.RUNG,
    k11_generated_split_k.RUNG,
    k12_async_copy.RUNG,
)

#: the rung ``variant=None`` uses with a config but no table entry: the fastest one shipped
BEST_VARIANT = "k11_generated_split_k"


def get_rung(variant: str | None) -> Rung:
    """The rung named ``variant`` (None: :data:`BEST_VARIANT`); ValueError names the choices."""
    return pick_rung(RUNGS, variant, BEST_VARIANT)




def plan(variant, config, m: int, n: int, k: int, dtype, autotune_=None) -> Plan:
    """The rung and config for one problem (the module docstring's order)."""
    return resolved(*choose(variant, config, m, n, k, dtype, autotune_), m, n, k)


def resolved(rung: Rung, config, m: int, n: int, k: int) -> Plan:
    """The plan for ``rung`` and ``config`` with ``pad=Pad.RULE`` resolved by size (step 5; the
    tuner times its candidates through it, so it times what a call runs)."""
    if isinstance(config, SplitKConfig) and config.pad == Pad.RULE:  # (k07's ``pad`` is its smem padding)
        config = _with_pad(config, m, n, k)
    return RowsPlan(rung, config)


class RowsPlan(Plan):
    """A matmul plan: ``rung.run(config, call)``, C's rows in pieces where one launch's grid would pass
    CUDA's grid y (:data:`k11_generated_split_k.MAX_GRID_Y` blocks; every rung but k01 and k13 puts
    C's tiles of rows on y: k11's 128-row tiles fail past 8 388 480 rows, a driver error at launch)."""

    __slots__ = ()

    def run(self, call) -> None:
        """Each piece is a product of its own: A's and C's rows from ``r0`` (C-contiguous row views),
        B whole, the rung's copies and split-K partials per piece.  A rung with C's columns on y
        (k01) past the limit is refused, naming ``b``, before any launch."""
        (m, k), n = call.a.shape, call.b.shape[1]  # (call.problem: a call into _common, docs/design.md's path)
        cap = k11_generated_split_k.MAX_GRID_Y
        if m <= cap and n <= cap:  # grid y is at most C's rows (or k01's columns): one launch, no geometry
            return super().run(call)
        rows = piece_rows(self.rung, self.config, m, n, k)
        if rows >= m:
            return super().run(call)
        for r0 in range(0, m, rows):
            super().run(call._replace(a=call.a[r0:r0 + rows], c=call.c[r0:r0 + rows]))


def piece_rows(rung: Rung, config, m: int, n: int, k: int) -> int:
    """The most of C's ``m`` rows one launch of ``rung`` takes within CUDA's grid y (``m``: all of them;
    ValueError naming ``b`` where the grid's y does not cover rows)."""
    cap = k11_generated_split_k.MAX_GRID_Y

    def fits_y(rows: int) -> bool:
        grid = rung.geometry(config, rows, n, k)[0]
        return len(grid) < 2 or grid[1] <= cap

    if fits_y(m):
        return m
    if not fits_y(1):
        grid_y = rung.geometry(config, m, n, k)[0][1]
        raise ValueError(f"b: {n} columns are {grid_y} blocks of {rung.name}'s along CUDA's grid y, past its {cap}; "
                         "pick another variant (None chooses one that takes C's rows on y, in pieces)")
    lo, hi = 1, m - 1  # the most rows that fit: geometry grows with the rows
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits_y(mid) else (lo, mid - 1)
    return lo


def choose(variant, config, m: int, n: int, k: int, dtype, autotune_=None):
    """``(rung, config)`` before the padding is resolved: steps 1-4 of the module docstring."""
    if config is None:
        dtype = autotune.dtype_name(dtype)
        hit = autotune.choose("matmul", (m, n, k, dtype), variant, autotune_)
        if hit is not None or variant is None:
            rung, cfg = (get_rung(hit[0]), hit[1]) if hit is not None else _split_k_choice(m, n, k, dtype)
            if variant is None and rung.name in RAGGED_ROWS and (k % 4 or n % 4) and dtype == "float32":
                rung = RUNGS[RAGGED_ROWS[rung.name]]  # a bucket or row holds aligned and ragged sizes
            return rung, cfg
    rung = get_rung(variant)
    return rung, rung.resolve_config(config)


#: the rungs whose tile runs every layout and batch (:mod:`._layouts`): a transposed, strided or
#: batched call with one of them (or ``variant=None``) runs their config on the layout kernel
LAYOUT_RUNGS = ("k11_generated_split_k", "k12_async_copy")


def layout_plan(variant, config, m: int, n: int, k: int, batches: int, dtype, layout: str,
                autotune_=None) -> Plan | None:
    """The plan of a strided or batched product (:mod:`._strided`): steps 1-5 for the stacked
    problem ``batches·M × N × K`` (as many output tiles), run on the layout kernel; None when the
    named rung or config cannot (the caller copies the operands into C order and loops over batches).

    ``variant=None`` keeps the layout kernel for every choice: float64's rung (k10) and a config the
    layout cannot take give way to k11's preset for this target."""
    if variant is not None and variant not in LAYOUT_RUNGS:
        return None
    rung, cfg = choose(variant, config, batches * m, n, k, dtype, autotune_)
    ok = rung.name in LAYOUT_RUNGS and isinstance(cfg, SplitKConfig) and not _layouts.layout_rules(cfg, layout)
    if not ok:
        if variant is not None or config is not None:
            return None
        rung = RUNGS[BEST_VARIANT]
        cfg = rung.resolve_config(None)
    return resolved(rung, cfg, batches * m, n, k)


#: ``x @ w.T`` (``"nt"``) from this many rows of x on k12's plan: w copied once into k12's B (K × N) and
#: the product run as NN, past the layout kernel, whose two swizzled k-contiguous tiles cost ~6% (4096³:
#: 3.03 ms against 2.85 for NN).  The copy moves 8·N·K bytes against 2·M·N·K flops: at ~48 TFLOP/s and
#: ~4 TB/s it costs 50/M of the product, under the 6% from M ≈ 800
NT_COPY_ROWS = 1024


def nt_copies_b(m: int) -> bool:
    """Whether an ``"nt"`` product whose plan is k12's copies B into K × N first (:data:`NT_COPY_ROWS`)."""
    return m >= NT_COPY_ROWS


#: the skinny class: a product with at most this many rows of C (M) or columns (N) is a GEMV
SKINNY = 16
#: k15 takes up to this many rows of the small side, in groups of 16 (grid rows), where the big
#: operand is at most :data:`SKINNY_L2_BYTES`: each group reads it again, from L2 after the first
SKINNY_L2 = 64
#: the big operand's bytes up to which :data:`SKINNY_L2` holds, measured (results/matmul_skinny_probe_s32_h100):
#: ResNet-50's classifier at batch 32 (W 2048×1000, 7.8 MiB) 20.3 µs against 28.3 for the M-narrow
#: tiles, a 1024×1024 W 13.5 against 19.3, both gaining up to 64 rows; a 4096×4096 W (64 MiB) lost
#: from 17 rows (88 against 64 µs)
SKINNY_L2_BYTES = 8 << 20


def gemv_rule(m: int, n: int, k: int, batches: int, a_kc: bool, b_kc: bool, b_nc: bool = False,
              itemsize: int = 4) -> str | None:
    """Where :mod:`.k15_gemv` runs a ``variant=None`` product: ``"m"`` (x's M rows against the
    N rows of a column-major B, the linear layer ``x @ w.T``), ``"rows"`` (M ≤ 16 rows against a
    row-major B: ``b_nc``, B contiguous along n), ``"n"`` (N columns against A's M rows), None
    (the tiles).  A shape class, not a table: one product, the operands contiguous along k
    (``a_kc``, ``b_kc``; ``"rows"``: B along n), and the other side longer than the small one (else
    a square-ish tiny problem, which k11's tile does in one block).  The small side is at most
    :data:`SKINNY` long, or :data:`SKINNY_L2` where the big operand (``itemsize`` bytes an element)
    fits :data:`SKINNY_L2_BYTES`."""
    if batches != 1 or not k:
        return None
    if m <= SKINNY and n > m and b_nc and not b_kc:
        return "rows"
    if not (a_kc and b_kc):
        return None
    if n > m and (m <= SKINNY or m <= SKINNY_L2 and n * k * itemsize <= SKINNY_L2_BYTES):
        return "m"
    if m > n and (n <= SKINNY or n <= SKINNY_L2 and m * k * itemsize <= SKINNY_L2_BYTES):
        return "n"
    return None


#: the default's rung for rows of A or B that are not a multiple of 4 long (K % 4, N % 4), by the
#: rung the table or the split-K rows chose: k11 reads such rows with scalar loads (1024×997×1024,
#: 64×64 tiles: 83 µs in the kernel alone), k12 copies them into padded rows and keeps its 16-byte
#: copies.  Same config: k12 takes k11's.
RAGGED_ROWS = {"k11_generated_split_k": "k12_async_copy"}


@functools.lru_cache(maxsize=4096)  # a size called again skips the rule and the config's validation
def _split_k_choice(m: int, n: int, k: int, dtype: str):
    """The split-K row's choice: its variant with the row's tile (the variant's ``"default"`` preset
    and the row's fields) and split.  The simulator keeps its small ``"sim"`` tile, with the split."""
    variant, splits, fields = fast_plan(m, n, k, dtype)
    rung = get_rung(variant)
    cfg = rung.resolve_config(None)
    if fields and not SIMULATOR:
        cfg = dataclasses.replace(rung.presets["default"], **fields)  # validated by fast_table
    if splits > 1:
        cfg = dataclasses.replace(cfg, splits=splits)
    return rung, cfg


def pads(config, m: int, n: int, k: int) -> bool:
    """Whether a problem whose A or B rows are ragged or unaligned is copied into padded buffers:
    ``Pad.ALWAYS`` / ``Pad.NEVER`` as the config says, else the shipped rule by size
    (``Pad.RULE``: :func:`pad_rule`)."""
    if config.pad != Pad.RULE:
        return config.pad == Pad.ALWAYS
    rule = pad_rule()
    return rule is not None and m * n * k >= rule


@functools.lru_cache(maxsize=4096)
def _with_pad(config, m: int, n: int, k: int):
    return dataclasses.replace(config, pad=Pad.ALWAYS if pads(config, m, n, k) else Pad.NEVER)


#: What ``matmul(variant=None, config=None)`` runs for a float32 problem that neither the
#: autotune cache nor the shipped table (:mod:`simt_tiles.autotune`) has, by shape class: how
#: many 128×128 tiles C has.  Two blocks fit per SM and the H200 has 132 SMs, so a grid of fewer
#: than 264 blocks leaves slots idle: K is then split (deterministically: partials, then one sum
#: kernel).  The rows live in the shipped table ``simt_tiles/tuned/h200.json``
#: (``rules.matmul_split_k``: one source of truth, with its measurements), first match wins, and
#: apply on every GPU (:func:`fast_table`).  A row is ``[most, splits, variant]`` or
#: ``[most, splits, variant, {fields}]``:
#:
#: * ``most``: the most **128×128 tiles of C** the row covers (whatever tile the row runs;
#:   ``null``: any, the last row);
#: * ``splits``: K's split count, or ``"balance"``: chosen by :func:`balance_splits`, or ``"fill"``:
#:   by :func:`fill_splits` (the small squares), or ``"waves"``: the tile and split chosen by
#:   :func:`wave_plan` (the mid-wave class);
#: * ``{fields}``: config fields applied to the variant's ``"default"`` preset (e.g. a 64×64
#:   tile: ``{"bm": 64, "bn": 64, "wm": 32, "wn": 32, "tn": 4, "min_blocks": 4}``), plus two
#:   numbers for ``"balance"``: ``resident`` (blocks per SM, default 2) and ``partial_cost``
#:   (default 0.05 of a wave).


#: float64 problems: no FP64 measurement of the generated rung yet
FLOAT64_VARIANT = "k10_warptiled"
#: fewest K elements per split: shorter chunks cost more in partial sums than they gain
MIN_SPLIT_K = 128
#: most K splits ``"balance"`` considers
MAX_BALANCE_SPLITS = 4
#: SMs assumed where there is no device to ask (the simulator): the H200's
DEFAULT_SMS = 132
#: ``"fill"`` rows: K split until the grid holds this many of the row's blocks a SM, at most
#: :data:`MAX_FILL_SPLITS` ways (384³-640³ on 64×64 tiles, H100, clean flush: 3-4 splits 1.06-1.34× ahead of 2;
#: benchmarks/results/matmul_small_s33_h100.json)
FILL_BLOCKS_PER_SM = 2
MAX_FILL_SPLITS = 4


def fill_splits(blocks: int, k: int, sms: int) -> int:
    """K's split count for a small problem of ``blocks`` output tiles: the fewest splits that put
    :data:`FILL_BLOCKS_PER_SM` blocks on each of ``sms`` SMs, at most :data:`MAX_FILL_SPLITS`, with at
    least :data:`MIN_SPLIT_K` K elements each (512³ on 64×64 tiles: 64 blocks → 4 splits of 128)."""
    want = -(-FILL_BLOCKS_PER_SM * sms // max(blocks, 1))
    return max(1, min(want, MAX_FILL_SPLITS, k // MIN_SPLIT_K))


class SplitRow(NamedTuple):
    """One decoded row of ``rules.matmul_split_k``."""

    most: int | None  #: most 128×128 tiles of C (None: any)
    splits: int | str  #: K splits, "balance", "fill" or "waves"
    variant: str
    fields: dict  #: config fields over the variant's "default" preset ({}: the preset)
    config: object  #: the variant's config with ``fields`` (validated; ``splits`` not applied)
    resident: float = 2.0  #: blocks resident per SM ("balance")
    partial_cost: float = 0.05  #: a split's partial sums, as a fraction of one wave ("balance")


def balance_splits(blocks: int, k: int, sms: int, resident: float = 2.0, partial_cost: float = 0.05,
                   most: int = MAX_BALANCE_SPLITS) -> int:
    """K's split count s that balances ``blocks`` output tiles over ``sms`` SMs.

    A GPU runs ``resident·sms`` blocks at once (one *wave*).  Unsplit, ``blocks`` tiles take
    ``ceil(blocks / (R·SMs))`` waves, and the last wave may be nearly empty: 272 blocks on
    264 slots take two full waves' time for 3% more work.  Splitting K s ways makes s times
    as many blocks, each 1/s as long, so the time in waves of the unsplit block is

        t(s) = ceil(blocks·s / (R·SMs)) / s  +  c·s·(s > 1)

    where the second term charges the partial sums (s partial C's written and read back,
    ``c`` = ``partial_cost`` of a wave each).  272 blocks, 264 slots: t(1) = 2,
    t(2) = 3/2 + 0.1, t(3) = 4/3 + 0.15, t(4) = 5/4 + 0.2 = 1.45 → 4.  256 blocks:
    t(1) = 1 wave, already full → 1.  s runs over 1..``most`` (default :data:`MAX_BALANCE_SPLITS`) with at
    least :data:`MIN_SPLIT_K` K elements per split; ties keep the fewer splits.
    """
    slots = max(1, int(resident * sms))
    most = max(1, min(most, k // MIN_SPLIT_K))
    best, best_t = 1, float("inf")
    for s in range(1, most + 1):
        t = -(-blocks * s // slots) / s + (partial_cost * s if s > 1 else 0.0)
        if t < best_t - 1e-12:
            best, best_t = s, t
    return best


@per_device
def sm_count() -> int:
    """The current device's SM count (:data:`DEFAULT_SMS` in the simulator)."""
    if SIMULATOR:
        return DEFAULT_SMS
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


#: the narrow class: C at most this many rows wide (M-narrow: a classifier's 32 rows, a skinny layer),
#: the other side at least :data:`NARROW_LONG` long
NARROW = 64
#: tall products (N-narrow: a ResNet conv as a GEMM, 100352×64×576 or 25088×128×1152; attention's
#: ``p @ v``) up to this many columns of C, with at least 4·N rows: there A is the big operand
NARROW_TALL = 256
NARROW_LONG = 512
#: most K splits the narrow class takes (each split at least :data:`MIN_SPLIT_K` long)
MAX_NARROW_SPLITS = 8
#: flops the tiles do in the time the GPU moves a byte (~45 TFLOP/s of FFMA against ~4.3 TB/s on the
#: H200): what a split's partial sums cost in waves (:func:`_split`)
FLOPS_PER_BYTE = 10
#: the tiles the narrow and mid-wave classes choose from: config fields over the rung's ``"default"``
#: preset (128×128); their ``min_blocks`` is also the blocks counted resident per SM
TILES = {
    "128x128": {},
    "128x64": {"bn": 64, "min_blocks": 3},
    "64x128": {"bm": 64, "wm": 32, "wn": 64, "min_blocks": 3},
    "64x64": {"bm": 64, "bn": 64, "wm": 32, "wn": 32, "tn": 4, "min_blocks": 4},
    "32x64": {"bm": 32, "bn": 64, "wm": 32, "wn": 32, "tn": 4, "min_blocks": 6},
}
#: the fill of whole waves (two 128×128 blocks a SM) from which a tall product whose C is a multiple
#: of 128 wide keeps the 128×128 tile unsplit, where the 128×64 tiles fill less: 32 attention heads of
#: 1024×128 (256 blocks on 264 slots) 0.192 ms against 0.251 for 128×64 tiles split 3 ways
FULL_WAVES = 0.9


def _fill(blocks: int, slots: int) -> float:
    """The fraction of ``ceil(blocks / slots)`` whole waves that ``blocks`` fill."""
    return blocks / (-(-blocks // slots) * slots) if blocks else 0.0


def _split(m: int, n: int, k: int, tile: str) -> int:
    """K's split for ``tile`` (:func:`balance_splits` at the tile's residency, up to
    :data:`MAX_NARROW_SPLITS`): a split's partials (C written and read back, 8·M·N bytes) priced in
    waves of the unsplit tile by :data:`FLOPS_PER_BYTE` (4096×64×4096 on 64×64: 0.001 of a wave)."""
    sms, resident = sm_count(), TILES[tile].get("min_blocks", 2)
    bm, bn = map(int, tile.split("x"))
    blocks, slots = -(-m // bm) * -(-n // bn), resident * sms
    partial = 4 * m * n * FLOPS_PER_BYTE / (slots * bm * bn * max(k, 1))
    return balance_splits(blocks, k, sms, resident, partial, MAX_NARROW_SPLITS)


def narrow_plan(m: int, n: int, k: int) -> tuple[str, int, dict] | None:
    """``(variant, splits, fields)`` for a float32 product in the narrow class, else None.

    A 128×128 tile over a C 64 wide computes half zeros, and a C of 4096 × 64 is 64 such tiles:
    half a wave on 132 SMs.  So the tile's short side is 64 (32 for C of at most 32 rows), its long
    side 128 where those tiles alone fill two blocks per SM, and K is split as :func:`_split` says.
    The rung follows the big operand:

    * tall (C at most :data:`NARROW_TALL` wide, at least 4·N rows; A the big operand): k11, which
      reads A in place (k12 first writes Aᵀ, an extra read and write of A that costs about 50/N of
      the product: 8·M·K bytes at ~4 TB/s against 2·M·N·K flops at ~50 TFLOP/s); a C a multiple of
      128 wide keeps the 128×128 tile unsplit where it fills :data:`FULL_WAVES` of whole waves and the
      128×64 tiles fill less;
    * M-narrow (C at most :data:`NARROW` rows; A small, its transpose free): k12.

    Shapes near square keep the table's rows."""
    sms = sm_count()
    if n <= NARROW_TALL and m >= max(NARROW_LONG, 4 * n):
        rows = -(-m // 128)
        full = _fill(rows * n // 128, 2 * sms)
        if n % 128 == 0 and full >= FULL_WAVES and full > _fill(rows * n // 64, 3 * sms):
            return "k11_generated_split_k", 1, TILES["128x128"]
        tile = "128x64" if rows * -(-n // 64) >= 2 * sms else "64x64"
        return "k11_generated_split_k", _split(m, n, k, tile), TILES[tile]
    if not (m <= NARROW and n >= NARROW_LONG):
        return None
    tile = "32x64" if m <= 32 else "64x128" if -(-n // 128) >= 2 * sms else "64x64"
    return "k12_async_copy", _split(m, n, k, tile), TILES[tile]


#: the mid-wave class's cost model (a ``"waves"`` row: the table's catch-all, past 132 tiles of 128×128),
#: per tile of :data:`TILES` (R resident a SM: its ``min_blocks``): ``(µs per round of R blocks, µs per
#: block per 1000 elements of K)``.  Fitted by relative least squares to k12's times over 8 sizes × 11
#: tiles and splits (benchmarks/results/matmul_waves_s32_h100.json; median error 1.7%, the largest 15%
#: at 1024×3072×768 on 128×128 in 3 splits)
WAVE_TILES = {
    "128x128": (22.0, 83.4),
    "128x64": (18.3, 43.1),
    "64x128": (19.7, 43.3),
    "64x64": (10.6, 22.8),
}
#: a split's fixed cost in the same fit (µs; it absorbs the partials' sum kernel, whose bytes the fit
#: cannot tell apart from it)
WAVE_SPLIT_US = 6.7
#: how much faster (predicted) another tile or split must be to replace 128×128 unsplit: the fit's error
WAVE_MARGIN = 0.02
#: shortest K the model chooses for: the sweep's shortest (333) in whole BK = 16 tiles; shorter K keeps
#: 128×128 unsplit (6272×1024×256: 0.084 ms, against 0.086 for the model's 64×64)
WAVE_MIN_K = 320


def wave_time(m: int, n: int, k: int, tile: str, splits: int, sms: int) -> float:
    """Predicted µs of a product on ``tile`` with K in ``splits``: the busiest SM sets the time.

    It runs b = ceil(blocks / SMs) blocks, R at a time: ceil(b / R) rounds of fill and drain, and
    b main loops over its K chunk (whole BK = 16 tiles, as :func:`.k11_generated_split_k.split_plan`
    cuts it).  344 tiles of 128×128 (512×11008×4096) put 3 blocks on 80 SMs: a second round for one
    block.  Split K in three, they put 8 on most SMs: 4 full rounds of a third of K each, 1.013 ms
    predicted against 1.069 (measured on an H100: 1.007 and 1.082)."""
    round_us, k_us = WAVE_TILES[tile]
    bm, bn = map(int, tile.split("x"))
    chunk = cdiv(cdiv(k, splits), 16) * 16 if k else 0
    splits = cdiv(k, chunk) if k else 1
    b = cdiv(cdiv(m, bm) * cdiv(n, bn) * splits, max(sms, 1))  # blocks on the busiest SM
    rounds = cdiv(b, TILES[tile].get("min_blocks", 2))
    return rounds * round_us + b * chunk / 1000 * k_us + (WAVE_SPLIT_US if splits > 1 else 0.0)


def wave_plan(m: int, n: int, k: int) -> tuple[int, dict]:
    """``(splits, fields)`` of a ``"waves"`` row: the tile of :data:`WAVE_TILES` and split of K (each
    chunk at least :data:`MIN_SPLIT_K`, at most :data:`MAX_BALANCE_SPLITS`) that :func:`wave_time`
    predicts fastest, where it beats 128×128 unsplit by :data:`WAVE_MARGIN` (else that; also for K
    under :data:`WAVE_MIN_K`).

    Short grids lose most to a last wave left half empty: 777×5555×333 on 308 tiles of 128×128
    (3 blocks on 44 SMs) 0.131 ms, on 1131 of 64×64 (9 a SM at most, 4 at a time) 0.097 ms."""
    if k < WAVE_MIN_K:
        return 1, TILES["128x128"]
    sms = sm_count()
    base = wave_time(m, n, k, "128x128", 1, sms)
    best, best_t = (1, "128x128"), base * (1 - WAVE_MARGIN)
    for tile in WAVE_TILES:
        for s in range(1, MAX_BALANCE_SPLITS + 1):
            if s > 1 and k // s < MIN_SPLIT_K:
                break
            t = wave_time(m, n, k, tile, s, sms)
            if t < best_t:
                best, best_t = (s, tile), t
    return best[0], TILES[best[1]]


def fast_plan(m: int, n: int, k: int, dtype) -> tuple[str, int, dict]:
    """``(variant, splits, fields)`` for ``matmul(variant=None)``: the narrow class
    (:func:`narrow_plan`), else :func:`fast_table`'s first matching row; ``fields`` are the config
    fields over the variant's ``"default"`` preset (``{}``: the preset)."""
    if np.dtype(dtype) != np.float32:
        return FLOAT64_VARIANT, 1, {}
    narrow = narrow_plan(m, n, k)
    if narrow is not None:
        return narrow
    tiles = -(-m // 128) * -(-n // 128)
    for row in fast_table():
        if row.most is None or tiles <= row.most:
            if row.splits == "waves":
                return (row.variant, *wave_plan(m, n, k))
            if row.splits in ("balance", "fill"):
                cfg = row.config
                blocks = -(-m // cfg.bm) * -(-n // cfg.bn)
                splits = (fill_splits(blocks, k, sm_count()) if row.splits == "fill"
                          else balance_splits(blocks, k, sm_count(), row.resident, row.partial_cost))
            else:
                splits = max(1, min(row.splits, k // MIN_SPLIT_K))
            return row.variant, splits, row.fields
    raise AssertionError("the split-K rows end with a catch-all row")


def fast_choice(m: int, n: int, k: int, dtype) -> tuple[str, int]:
    """``(variant, splits)`` for ``matmul(variant=None)`` (:func:`fast_plan` without the tile)."""
    return fast_plan(m, n, k, dtype)[:2]


_ROW_NUMBERS = ("resident", "partial_cost")


def decode_row(i: int, row) -> SplitRow:
    """Row ``i`` of ``rules.matmul_split_k`` checked and decoded; ValueError naming the row."""
    where = f"simt_tiles/tuned/h200.json: rules.matmul_split_k row {i} {row!r}"
    try:
        if not isinstance(row, (list, tuple)) or len(row) not in (3, 4):
            raise ValueError("expected [most, splits, variant] or [most, splits, variant, {fields}]")
        most, splits, variant = row[:3]
        fields = row[3] if len(row) == 4 else {}
        if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 0):
            raise ValueError(f"most: expected a tile count >= 0 or null; got {most!r}")
        if splits not in ("balance", "fill", "waves") and (isinstance(splits, bool) or not isinstance(splits, int)
                                                           or splits < 1):
            raise ValueError(f"splits: expected an integer >= 1, 'balance', 'fill' or 'waves'; got {splits!r}")
        if splits == "waves" and (fields or variant != "k12_async_copy"):
            raise ValueError("a 'waves' row runs k12_async_copy on the tiles of the wave model (WAVE_TILES, "
                             f"fitted to k12); expected [most, 'waves', 'k12_async_copy'], got {row!r}")
        if variant not in RUNGS:
            raise ValueError(f"variant: expected one of {sorted(RUNGS)}; got {variant!r}")
        if not isinstance(fields, dict):
            raise ValueError(f"fields: expected a dict of config fields; got {fields!r}")
        fields = dict(fields)
        numbers = {f: fields.pop(f) for f in _ROW_NUMBERS if f in fields}
        if numbers and splits != "balance":
            raise ValueError(f"{', '.join(numbers)}: only a 'balance' row reads them; this row's splits is {splits!r}")
        for f, v in numbers.items():
            ok = not isinstance(v, bool) and isinstance(v, (int, float))
            if not ok or (v <= 0 if f == "resident" else v < 0):
                raise ValueError(f"{f}: expected a number {'> 0' if f == 'resident' else '>= 0'}; got {v!r}")
        rung = RUNGS[variant]
        default = rung.presets["default"]
        known = {f.name for f in dataclasses.fields(default)} - {"splits"}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"fields: {unknown} not config fields of {variant} "
                             f"(expected some of {sorted(known | set(_ROW_NUMBERS))})")
        cfg = dataclasses.replace(default, **fields)  # the rung's own rules (ConfigError)
        tiles = [dataclasses.replace(default, **TILES[t]) for t in WAVE_TILES] if splits == "waves" else []
        why = next(filter(None, (fits(c, "float32") for c in [cfg, *tiles])), None)
        if why:
            raise ValueError(why)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    return SplitRow(most, splits, variant, fields, cfg, **{f: float(v) for f, v in numbers.items()})


@functools.lru_cache(maxsize=1)
def fast_table() -> tuple[SplitRow, ...]:
    """The split-K rows of the shipped H200 table, read and validated once."""
    rule = autotune.shipped_rules("matmul_split_k")
    rows = tuple(decode_row(i, r) for i, r in enumerate((rule or {}).get("rows", ())))
    if not rows or rows[-1].most is not None:
        raise RuntimeError("simt_tiles/tuned/h200.json: rules.matmul_split_k must end with a catch-all row")
    return rows


#: when the shipped table has no ``rules.matmul_pad``: pad from this many multiply-adds (512³)
PAD_MIN_MNK = 2**27


@functools.lru_cache(maxsize=1)
def pad_rule() -> int | None:
    """Fewest M·N·K multiply-adds from which a ragged or unaligned problem is copied into padded,
    16-byte aligned buffers (k11's ``pad=Pad.RULE``): ``rules.matmul_pad.min_mnk`` of the shipped
    table (read once; ``null``: never), else :data:`PAD_MIN_MNK`.  Below it the copies' launches
    cost more than the scalar loads they save."""
    rule = autotune.shipped_rules("matmul_pad") or {}
    value = rule.get("min_mnk", PAD_MIN_MNK)
    return None if value is None else int(value)
