"""Matmul test machinery: config strategies per rung, tile extents, operands, the bound check
(the generic bits — DTYPES, edge_sizes, poisoned — are in :mod:`tests.common`)."""

from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from simt_tiles.bounds import check_within
from simt_tiles.kernels.matmul import RUNGS
from simt_tiles.kernels.matmul._blocked import BlockedConfig
from simt_tiles.kernels.matmul.k01_naive import Config as BlockConfig
from simt_tiles.kernels.matmul.k03_smem_tiled import Config as TileConfigK03
from simt_tiles.kernels.matmul.k04_regblock_1d import Config as Config1D
from simt_tiles.kernels.matmul.k07_padded import Config as PaddedConfig
from simt_tiles.kernels.matmul.k08_swizzled import Config as SwizzledConfig
from simt_tiles.kernels.matmul.k09_double_buffered import Config as PipelinedConfig
from simt_tiles.kernels.matmul.k10_warptiled import Config as WarpConfig
from simt_tiles.kernels.matmul.k11_generated_split_k import Config as FastConfig
from simt_tiles.kernels.matmul.reference import matmul_reference
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import DTYPES, configs, edge_sizes, gpu_pool, poisoned  # noqa: F401 - re-exported for the matmul tests

# Launch configurations drawn at random per rung.  Every rung must have one
# (test_every_variant_has_a_config_strategy), so a new rung cannot go untested.
if SIMULATOR:
    _block = st.builds(BlockConfig, st.integers(1, 6), st.integers(1, 6))
    _tile = st.builds(TileConfigK03, st.integers(1, 5))
else:
    _block = st.builds(BlockConfig, st.sampled_from([1, 8, 16, 32, 64]), st.sampled_from([1, 4, 8, 16]))
    _tile = st.builds(TileConfigK03, st.sampled_from([8, 16, 24, 32]))



@st.composite
def blocked_configs(draw, cls=BlockedConfig, tn_values=None, **fixed):
    """Random valid BlockedConfig-style configs (BM×BN tile, BK, TM×TN per thread)."""
    if SIMULATOR:
        tm, tn = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from(tn_values or [1, 2]))
        rows, cols = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 4]))
        bk = draw(st.sampled_from([1, 2, 3, 4, 8]))
    else:
        tm, tn = draw(st.sampled_from([4, 8])), draw(st.sampled_from(tn_values or [4, 8]))
        rows, cols = draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([8, 16, 32]))
        bk = draw(st.sampled_from([8, 16]))
    kwargs = dict(bm=tm * rows, bn=tn * cols, bk=bk, tm=tm, tn=tn)
    kwargs.update(fixed)
    try:
        return cls(**kwargs)
    except ConfigError:
        assume(False)


@st.composite
def swizzled_configs(draw, cls=SwizzledConfig, groups_of_4=False):
    """bm must be a multiple of 32 (the swizzle permutes bits 2-4 of the column)."""
    tm = draw(st.sampled_from([4, 8] if groups_of_4 or not SIMULATOR else [2, 4, 8]))
    tn = draw(st.sampled_from([4] if groups_of_4 and SIMULATOR else [1, 2] if SIMULATOR else [4, 8]))
    cols = draw(st.sampled_from([1, 2] if SIMULATOR else [8, 16]))
    bk = draw(st.sampled_from([2, 4, 8] if SIMULATOR else [8, 16]))
    bm = 32 if SIMULATOR else draw(st.sampled_from([64, 128]))
    try:
        return cls(bm=bm, bn=tn * cols, bk=bk, tm=tm, tn=tn)
    except ConfigError:
        assume(False)


@st.composite
def warp_configs(draw):
    """k10: warps of WM×WN = 32·TM·TN outputs; bm a multiple of 32."""
    if SIMULATOR:  # one or two warps of 4×4 outputs per lane
        kwargs = dict(bm=32, bn=draw(st.sampled_from([16, 32])), bk=draw(st.sampled_from([2, 4, 8])),
                      wm=32, wn=16, tm=4, tn=4)
    else:
        wm, wn = draw(st.sampled_from([(32, 64), (64, 32)]))
        kwargs = dict(bm=draw(st.sampled_from([64, 128])), bn=draw(st.sampled_from([64, 128])),
                      bk=draw(st.sampled_from([8, 16])), wm=wm, wn=wn, tm=8, tn=8)
    try:
        return WarpConfig(**kwargs)
    except ConfigError:
        assume(False)


#: k11/k12 tiles of the other depths the rules allow (BK 8 and 32; float64: 4 and 16), small enough for
#: the simulator; 32 and 64 threads.  k11's A swizzle spans 2·BK rows: "bk32" has A-fragment groups
#: 32 rows apart (inside the span at BK=32), "bk32_wide" 64 apart (one base register serves both)
BK_TILES = {
    "bk8": FastConfig(bm=32, bn=32, bk=8, wm=32, wn=32, tm=8, tn=4),
    "bk32": FastConfig(bm=64, bn=32, bk=32, wm=64, wn=16, tm=8, tn=4),
    "bk32_wide": FastConfig(bm=64, bn=32, bk=32, wm=64, wn=16, tm=4, tn=8),
}


@st.composite
def fast_configs(draw):
    """k11/k12: one warp row or 2×2 warps, or a tile of BK_TILES; K split 1–3 ways (the GPU: the default tile)."""
    if SIMULATOR:
        base = draw(st.sampled_from([FastConfig(bm=32, bn=32, bk=16, wm=16, wn=32, tm=4, tn=4),
                                     FastConfig(bm=64, bn=64, bk=16, wm=32, wn=32, tm=8, tn=4),
                                     *BK_TILES.values()]))
    else:
        base = FastConfig()
    return FastConfig(**{**base.__dict__, "splits": draw(st.integers(1, 3))})


CONFIG_STRATEGIES = {
    "k01_naive": _block,
    "k02_coalesced": _block,
    "k03_smem_tiled": _tile,
    "k04_regblock_1d": blocked_configs(Config1D, tn_values=[1]),
    "k05_regblock_2d": blocked_configs(),
    "k06_transposed": blocked_configs(),
    "k07_padded": st.builds(lambda c, pad: PaddedConfig(**{**c.__dict__, "pad": pad}),
                            blocked_configs(), st.sampled_from([1, 2, 4])),
    "k08_swizzled": swizzled_configs(),
    "k09_double_buffered": swizzled_configs(PipelinedConfig, groups_of_4=True),
    "k10_warptiled": warp_configs(),
    "k11_generated_split_k": fast_configs(),
    "k12_async_copy": fast_configs(),
}


def config_strategy(variant: str):
    """The rung's shipped preset or a random valid config (on a GPU: from a fixed pool, :func:`configs`)."""
    return configs(RUNGS[variant], CONFIG_STRATEGIES[variant])


def tile_extents(config) -> tuple[int, ...]:
    """The sizes (in elements) a config tiles M, N and K by, for choosing edge sizes."""
    if isinstance(config, FastConfig):
        return (config.bm, config.bn, config.bk)
    if isinstance(config, WarpConfig):
        return (config.bm, config.bn, config.bk, config.wm, config.wn)
    if isinstance(config, BlockedConfig):
        return (config.bm, config.bn, config.bk)
    return tuple(config.block())


def random_operands(rng, m, n, k, dtype):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    return a, b


def assert_matmul_ok(a, b, out_host):
    # long double reference for small problems; float64 BLAS (its own γ_K(2^-53)
    # error is part of the bound) where long double would take seconds
    precise = a.shape[0] * a.shape[1] * b.shape[1] <= 2_000_000
    ref, bound = matmul_reference(a, b, precise=precise)
    chk = check_within(out_host, ref, bound)
    assert chk.passed, f"{chk} for shapes a{a.shape} b{b.shape} dtype {a.dtype}"
    return chk
