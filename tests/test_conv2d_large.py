"""conv2d k11_large_filter, ``variant=None``'s rung past 7 taps on an axis (issue 33: every filter size fast).

* Property test: random small k11 configs (several threads each way, vector and scalar loads, one and
  several chunks of filter columns, tiles taller or shorter than the filter), filters of 8 … 31 taps on
  an axis (even, non-square, 1-D), images not a multiple of the tile (1, tile ± 1, primes, smaller than
  the filter), both dtypes, every mode, ``origin``, correlate / convolve / correlate1d, NumPy and device
  filters, zero and 2**-52 taps, NaN/±inf in the image and a NaN ``cval``, NaN-poisoned outputs: NaN/±inf
  exactly where scipy has them, the rest within the reference's γ_n·Σ|w|·|x| bound.
* The default: which rung and preset ``variant=None`` takes for a filter (k10 up to 7 × 7, k11 past it,
  k03 then k01 when the filter does not fit), k03 still by name, a new filter value compiles nothing,
  a volume's middle axis in one launch.
* The harness sees a planted bug (the last filter column dropped).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from numba import cuda  # module level: the simulator swaps this global inside kernels

import simt_tiles
from simt_tiles import runtime
from simt_tiles.kernels.conv2d import (
    FALLBACK_VARIANT,
    LARGE_VARIANT,
    MODES,
    RUNGS,
    SHAPE_VARIANT,
    convolve2d,
    correlate1d,
    correlate2d,
    dispatch,
)
from simt_tiles.kernels.conv2d import k11_large_filter as k11
from simt_tiles.kernels.conv2d._common import Mode, specialise
from simt_tiles.kernels.conv2d.reference import correlate1d_reference, correlate2d_reference
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import DTYPES, assert_like_scipy, configs, kernel_cases, poisoned
from .profiles import examples
from .test_conv2d import scipy_nd_misreads
from .test_conv2d_volumes import kernel_launches

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 2.0**-52  # scipy skips |w| <= EPS
EXAMPLES = examples(30) if SIMULATOR else settings.default.max_examples
#: the most image values × taps one example computes (the simulator runs every FMA in Python: ~0.1 s for
#: 12 × 17 with 9 × 9)
MAX_WORK = 20_000 if SIMULATOR else 4_000_000



def _skewed(config):
    """``config``, or with its rows padded every 1, 2 or 4 float32 windows of a lane (``Config.skew``)."""
    periods = [1] + ([4 * config.rx * n for n in (1, 2, 4)] if config.rx % 4 == 0 else [])
    return st.sampled_from(periods).map(lambda skew: dataclasses.replace(config, skew=skew))


if SIMULATOR:
    RANDOM = st.builds(k11.Config, block_x=st.integers(1, 3), block_y=st.integers(1, 3),
                       rx=st.sampled_from([1, 2, 3, 4, 8]), ry=st.integers(1, 4),
                       kc=st.sampled_from([1, 3, 4, 5, 8])).flatmap(_skewed)
else:
    RANDOM = st.builds(k11.Config, block_x=st.sampled_from([8, 16, 32]), block_y=st.sampled_from([1, 2, 4, 8]),
                       rx=st.sampled_from([3, 4, 8, 16]), ry=st.integers(1, 8), kc=st.sampled_from([4, 5, 8, 16]),
                       min_blocks=st.sampled_from([1, 4]), min_blocks64=st.sampled_from([1, 2])).flatmap(_skewed)

#: filter sides: 1 (a 1-D filter), the small ones k10 takes on the other axis, and 8 … 31 (even and odd)
LONG = st.integers(8, 31)
SIDE = st.one_of(LONG, st.integers(1, 7))


def _fits(config, kh, kw, dtype) -> bool:
    try:
        spec = specialise(config, kh, kw, Mode.REFLECT)
    except ConfigError:
        return False
    return spec.smem_bytes(np.dtype(dtype).itemsize) <= spec.MAX_STATIC_SMEM


def _origin(data, k: int, label: str) -> int:
    return data.draw(st.integers(-(k // 2), (k - 1) // 2), label)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data())
def test_matches_scipy(dtype, data):
    if SIMULATOR:
        config = data.draw(configs(k11.RUNG, RANDOM), label="config")
        op = data.draw(st.sampled_from(["correlate", "convolve", "correlate1d"]), "op")
        axis = data.draw(st.sampled_from([0, 1]), "axis")
        if op == "correlate1d":
            kh, kw = (data.draw(LONG, "K"), 1) if axis == 0 else (1, data.draw(LONG, "K"))
        else:
            kh, kw = data.draw(SIDE, "KH"), data.draw(SIDE, "KW")
            assume(max(kh, kw) >= 8)
        mode = data.draw(st.sampled_from(MODES), "mode")
        on_device = data.draw(st.booleans(), "device filter")
    else:  # one kernel per mode (drawn once per run: kernel_cases); the examples vary the rest
        config, kh, kw, mode, on_device, _ = data.draw(st.sampled_from(kernel_cases(
            ("k11 large", dtype), configs(k11.RUNG, RANDOM),
            lambda c, kh, kw, m: max(kh, kw) >= 8 and _fits(c, kh, kw, dtype), sides=(1, 8, 9, 12, 17, 31))),
            "kernel")
        ops = ["correlate", "convolve"] + (["correlate1d"] if 1 in (kh, kw) else [])
        op = data.draw(st.sampled_from(ops), "op")
        axis = 1 if kh == 1 else 0  # correlate1d's filter lies along the axis
    assume(_fits(config, kh, kw, dtype))
    th, tw = config.tile()
    sides = sorted({1, 2, 3, 5, 7, 11, 13, th - 1, th, th + 1, tw - 1, tw + 1, 2 * th + 1} - {0})
    h = data.draw(st.sampled_from(sides), "H")
    w = data.draw(st.sampled_from(sides), "W")
    assume(h * w * kh * kw <= MAX_WORK)
    if op == "correlate1d":
        origin = _origin(data, max(kh, kw), "origin")
        origins = (origin, 0) if axis == 0 else (0, origin)
    else:
        origins = (_origin(data, kh, "origin rows"), _origin(data, kw, "origin columns"))
        origin = origins
    if mode == "reflect":  # scipy's n-D path misreads some far coordinates (tests/test_conv2d.py)
        flip = op == "convolve"
        ah = (kh - 1) // 2 - origins[0] if flip else kh // 2 + origins[0]
        aw = (kw - 1) // 2 - origins[1] if flip else kw // 2 + origins[1]
        assume(not scipy_nd_misreads(h, kh, ah) and not scipy_nd_misreads(w, kw, aw))
    cval = data.draw(st.sampled_from([0.0, 1.5, float("nan")]), "cval")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.standard_normal((h, w)).astype(dtype)
    for value in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=2), "non-finite"):
        x[rng.integers(h), rng.integers(w)] = value
    f = rng.standard_normal((kh, kw)).astype(dtype)
    kinds = rng.choice(4, size=f.shape, p=[0.7, 0.1, 0.1, 0.1])  # weight, 0, 2**-52 (skipped), 2**-51
    f = np.where(kinds == 1, 0, np.where(kinds == 2, EPS, np.where(kinds == 3, 2 * EPS, f))).astype(dtype)
    out = poisoned(x.shape, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no NumPy warnings from simulated kernels
        if op == "correlate1d":
            k = f.reshape(-1)
            correlate1d(x, cuda.to_device(k) if on_device else k, axis=axis, mode=mode, cval=cval, origin=origin,
                        out=out, variant=LARGE_VARIANT, config=config)
        else:
            fn = convolve2d if op == "convolve" else correlate2d
            fn(x, cuda.to_device(f) if on_device else f, mode=mode, cval=cval, origin=origin, out=out,
               variant=LARGE_VARIANT, config=config)
    got = out.copy_to_host()
    with np.errstate(invalid="ignore"):
        if op == "correlate1d":
            expect = ndi.correlate1d(x, k, axis=axis, mode=mode, cval=cval, origin=origin)
            ref, bound = correlate1d_reference(x, k, axis, mode, cval, origin=origin)
        else:
            expect = (ndi.convolve if op == "convolve" else ndi.correlate)(x, f, mode=mode, cval=cval,
                                                                          origin=origin)
            ref, bound = correlate2d_reference(x, f, mode, cval, convolve=op == "convolve", origin=origin)
    note(repr(assert_like_scipy(got, expect, ref, bound, f"{op} {kh}x{kw} {mode} {np.dtype(dtype)} {config}")))


# --- edge rows, middle rows and chunks: the generated loops' boundaries, one by one -----------------------


#: (tile rows ry, filter rows): no middle row (KH < RY), exactly one, many; (rx, kc, filter columns): one
#: chunk, full chunks written out (``WRITTEN_CHUNKS``) with and without a rest, full chunks in the run-time
#: loop with and without a rest, scalar loads (rx 3, kc 5)
SHAPES = [(4, 2, 4, 8, 9), (2, 2, 4, 4, 9), (3, 9, 4, 4, 8), (1, 8, 4, 4, 12), (4, 11, 3, 5, 10),
          (2, 13, 8, 8, 16), (3, 3, 2, 3, 17), (2, 9, 4, 4, 11), (2, 10, 4, 4, 16)]


@pytest.mark.parametrize("ry, kh, rx, kc, kw", SHAPES, ids=[f"ry{s[0]}-kh{s[1]}-rx{s[2]}-kc{s[3]}-kw{s[4]}"
                                                            for s in SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_edge_and_middle_rows_and_chunks(ry, kh, rx, kc, kw, dtype):
    """Each shape puts a boundary of the generated code (the edge loop's rows, the middle loop's, a full
    chunk, the last one) somewhere else; a 2 × 2 block, an image of 2 tiles + 1 each way, mode "wrap"
    (every halo value from the far side), a device filter with a zero tap (finite data: the fast loop)."""
    cfg = k11.Config(block_x=2, block_y=2, rx=rx, ry=ry, kc=kc)
    th, tw = cfg.tile()
    rng = np.random.default_rng(kh * 100 + kw)
    x = rng.standard_normal((2 * th + 1, 2 * tw + 1)).astype(dtype)
    f = rng.standard_normal((kh, kw)).astype(dtype)
    f[kh // 2, 0] = 0
    out = poisoned(x.shape, dtype)
    correlate2d(x, cuda.to_device(f), mode="wrap", out=out, variant=LARGE_VARIANT, config=cfg)
    expect = ndi.correlate(x, f, mode="wrap")
    ref, bound = correlate2d_reference(x, f, "wrap")
    assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"{cfg}")


#: (block_x, rx, kc, skew bytes, filter columns): windows 1, 2 and 4 lanes a period (float64: 1, 2 — or none
#: where a lane's window is wider than the period), a block narrower than a period and one that does not divide
#: it (the patch loader's run-time column), one chunk, two written out with a rest; chunks in a loop: no skew
SKEWS = [(2, 4, 4, 16, 9), (2, 4, 4, 32, 9), (3, 4, 4, 32, 10), (4, 4, 4, 64, 8), (4, 8, 4, 32, 9),
         (2, 4, 8, 32, 7), (2, 4, 4, 32, 11), (2, 4, 4, 32, 13)]


@pytest.mark.parametrize("bx, rx, kc, skew, kw", SKEWS, ids=[f"bx{s[0]}-rx{s[1]}-kc{s[2]}-skew{s[3]}-kw{s[4]}"
                                                           for s in SKEWS])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_skewed_patch_rows(bx, rx, kc, skew, kw, dtype):
    """Rows padded by 16 bytes every ``skew`` bytes (lanes' 128-bit window loads on distinct banks): the window
    loads, the patch copy (interior and edge blocks), the NaN scan and the plain loop that skips a zero tap all
    read the padded layout.  An image of 3 tiles + 1 each way (interior blocks too), mode "mirror", a NaN beside
    a zero tap."""
    cfg = k11.Config(block_x=bx, block_y=2, rx=rx, ry=2, kc=kc, skew=skew)
    itemsize = np.dtype(dtype).itemsize
    spec = specialise(cfg, 9, kw, Mode.MIRROR)
    applies = skew % (rx * itemsize) == 0 and k11.chunks(spec)[1] <= k11.WRITTEN_CHUNKS
    assert (k11.skew(spec, itemsize) != (0, 1)) == applies
    assert k11.pitch(spec, itemsize) > k11.pitch(dataclasses.replace(spec, skew=1), itemsize) or not applies
    th, tw = cfg.tile()
    rng = np.random.default_rng(skew + kw)
    x = rng.standard_normal((3 * th + 1, 3 * tw + 1)).astype(dtype)
    f = rng.standard_normal((9, kw)).astype(dtype)
    for nan in (False, True):
        if nan:  # a zero tap and a NaN in the first block's last patch column (padded the most): the scan must find
            x[th, tw - 1 + kw - 1 - kw // 2], f[4, kw - 1] = np.nan, 0  # it, or the zero tap meets it (0·NaN)
        out = poisoned(x.shape, dtype)
        correlate2d(x, cuda.to_device(f), mode="mirror", out=out, variant=LARGE_VARIANT, config=cfg)
        with np.errstate(invalid="ignore"):
            expect = ndi.correlate(x, f, mode="mirror")
            ref, bound = correlate2d_reference(x, f, "mirror")
        assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"{cfg} nan={nan}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("on_device", [False, True], ids=["numpy-filter", "device-filter"])
def test_zero_taps_keep_a_nan_off_their_outputs_as_scipy(on_device, dtype):
    """A NaN and an inf in the image, a filter whose middle column and one more tap are 0 or 2**-52: scipy
    skips those taps, so the NaN reaches fewer outputs than the window (correlate2d: the blocks with them take
    the plain loop); correlate1d counts every tap (0·NaN = NaN).  A deterministic case of the property test's."""
    cfg = k11.Config(block_x=2, block_y=2, rx=4, ry=2, kc=4)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 17)).astype(dtype)
    x[5, 8], x[9, 2] = np.nan, np.inf
    f = rng.standard_normal((9, 9)).astype(dtype)
    f[:, 4] = 0
    f[2, 6] = EPS
    put = cuda.to_device if on_device else (lambda a: a)
    out = poisoned(x.shape, dtype)
    correlate2d(x, put(f), mode="mirror", out=out, variant=LARGE_VARIANT, config=cfg)
    with np.errstate(invalid="ignore"):
        expect = ndi.correlate(x, f, mode="mirror")
        ref, bound = correlate2d_reference(x, f, "mirror")
        counted = correlate2d_reference(x, f, "mirror", all_taps=True)[0]  # every tap counted
    assert np.isnan(expect).sum() < np.isnan(counted).sum()  # the skipped taps spare some outputs
    assert_like_scipy(out.copy_to_host(), expect, ref, bound, "correlate2d")
    k = f[2].copy()  # 0 and 2**-52 taps, counted
    out = poisoned(x.shape, dtype)
    correlate1d(x, put(k), axis=1, mode="mirror", out=out, variant=LARGE_VARIANT, config=cfg)
    with np.errstate(invalid="ignore"):
        expect = ndi.correlate1d(x, k, axis=1, mode="mirror")
        ref, bound = correlate1d_reference(x, k, 1, "mirror")
    assert np.isnan(expect[5]).sum() == 9  # counted: the NaN reaches all 9 windows over it
    assert_like_scipy(out.copy_to_host(), expect, ref, bound, "correlate1d")


@pytest.mark.sim  # counts the simulator's calls of vector.store4 (compiled code calls none)
@pytest.mark.parametrize("rx", [4, 8])
def test_whole_tiles_store_vectors_from_registers(monkeypatch, rx):
    """Rows of ``out`` that start 16-byte aligned (a width of a multiple of 4) and whole tiles: 128-bit
    stores from registers (``vector.store4``, counted); an ``out`` whose data is 4 bytes off 16, or an edge
    tile: the staged stores.  Both give scipy's numbers."""
    from simt_tiles.kernels.conv2d import _staging

    calls = []
    real = _staging.store4

    def count(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_staging, "store4", count)  # the simulator looks the global up at each call
    cfg = k11.Config(block_x=2, block_y=2, rx=rx, ry=2, kc=4)
    th, tw = cfg.tile()
    rng = np.random.default_rng(rx)
    x = rng.standard_normal((2 * th + 1, 2 * tw + 4)).astype(np.float32)
    f = rng.standard_normal((9, 8)).astype(np.float32)
    ref, bound = correlate2d_reference(x, f, "nearest")
    expect = ndi.correlate(x, f, mode="nearest")
    buf = cuda.to_device(np.full(x.size + 4, np.nan, np.float32))
    for offset, vectors in ((0, 4 * th * tw // 4), (1, 0)):  # 4 whole tiles of th·tw/4 vectors; none
        calls.clear()
        out = buf[offset:offset + x.size].reshape(x.shape)
        correlate2d(x, f, mode="nearest", out=out, variant=LARGE_VARIANT, config=cfg)
        assert len(calls) == vectors, offset
        assert_like_scipy(out.copy_to_host(), expect, ref, bound, f"offset {offset}")


# --- the default ---------------------------------------------------------------------------------------


def test_the_default_takes_k11_past_seven_taps_and_k03_stays_by_name():
    plan = dispatch.plan_filter
    f32 = np.dtype(np.float32)
    assert plan(None, None, 64, 64, 7, 7, Mode.REFLECT, f32, "host").rung.name == "k10_runtime_weights"
    for kh, kw in ((8, 8), (9, 9), (13, 5), (1, 31), (31, 31), (16, 2)):
        assert plan(None, None, 64, 64, kh, kw, Mode.REFLECT, f32, "host").rung.name == LARGE_VARIANT, (kh, kw)
    assert plan(SHAPE_VARIANT, None, 64, 64, 9, 9, Mode.REFLECT, f32, "host").rung.name == SHAPE_VARIANT
    # a k03 config object with variant=None is k03's
    cfg = RUNGS[SHAPE_VARIANT].presets["sim"]
    assert plan(None, cfg, 64, 64, 9, 9, Mode.REFLECT, f32, "host").rung.name == SHAPE_VARIANT
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    w = rng.standard_normal((9, 9)).astype(np.float32)
    got = correlate2d(x, w, variant=SHAPE_VARIANT)
    ref, bound = correlate2d_reference(x, w, "reflect")
    assert_like_scipy(got, ndi.correlate(x, w), ref, bound, "k03 by name")


def test_a_filter_too_large_for_k11_takes_k03_then_k01():
    """The simulator's presets: 76 × 76 does not fit k11's "sim" tile (48 KiB) but k03's; 110 × 110 neither."""
    f32 = np.dtype(np.float32)
    for k, rung in ((70, LARGE_VARIANT), (76, SHAPE_VARIANT), (110, FALLBACK_VARIANT)):
        got = dispatch.plan_filter(None, None if SIMULATOR else "sim", 8, 8, k, k, Mode.REFLECT, f32, "host")
        assert got.rung.name == rung, k
    with pytest.raises(ConfigError, match=r"weights: a 76x76 float32 filter does not fit k11_large_filter"):
        dispatch.plan_filter(LARGE_VARIANT, "sim", 8, 8, 76, 76, Mode.REFLECT, f32, "host")
    rng = np.random.default_rng(76)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((76, 76)).astype(np.float32)
    got = correlate2d(x, w, mode="mirror", config=None if SIMULATOR else "sim")
    ref, bound = correlate2d_reference(x, w, "mirror")
    assert_like_scipy(got, ndi.correlate(x, w, mode="mirror"), ref, bound, "76 x 76 through k03")


@pytest.mark.parametrize("dtype, k, preset", [
    (np.float32, 9, "fast_float32"), (np.float32, 31, "fast_float32"), (np.float32, 35, "fast_float32"),
    (np.float32, 41, "default"), (np.float32, 55, "narrow"), (np.float64, 9, "default"), (np.float64, 25, "default"),
    (np.float64, 31, "narrow"), (np.float64, 15, "default")])
def test_on_a_gpu_the_first_preset_that_fits(dtype, k, preset):
    """``large_configs`` on a GPU (``config=None``): float32 the 32 × 128 tile up to 35 × 35, then the
    float64 tiles; float64 64 × 32 up to 25 × 25, 48 × 32 up to 31 × 31."""
    rung = RUNGS[LARGE_VARIANT]
    cands = dispatch.large_configs(rung, rung.presets["default"], None, np.dtype(dtype), simulator=False)
    spec = dispatch._first_fitting(cands, k, k, Mode.REFLECT, np.dtype(dtype))
    assert dataclasses.replace(spec, kh=rung.presets[preset].kh, kw=rung.presets[preset].kw,
                               mode=rung.presets[preset].mode) == rung.presets[preset]


def _window_wavefronts(cfg, itemsize: int) -> tuple[int, int]:
    """(wavefronts, 128-bit loads) of warp 0's window loads in one patch row, by the sm_90 bank model
    (``analyze.wavefronts``), at the addresses the skewed layout gives (``k11.skew``, ``k11.pitch``)."""
    from simt_tiles.analyze import wavefronts

    v, p = k11.skew(cfg, itemsize)
    pitch = k11.pitch(cfg, itemsize)
    kc, full, rest = k11.chunks(cfg)
    total = loads = 0
    for b, cols in [(k * kc, kc) for k in range(full)] + ([(full * kc, rest)] if rest else []):
        for q in range(0, cfg.rx + cols - 4, 4):  # the chunk's 128-bit window loads
            lanes = []
            for lane in range(32):
                tx, ty = lane % cfg.block_x, lane // cfg.block_x
                c = tx * cfg.rx + b + q
                lanes.append((lane, (ty * cfg.ry * pitch + c + (v * (c // p) if v else 0)) * itemsize, 16))
            total, loads = total + wavefronts(lanes), loads + 1
    return total, loads


@pytest.mark.parametrize("skew", [64, 128])
def test_skewed_window_loads_are_conflict_free(skew):
    """fast_float32's window loads, filters 8 … 32 wide (one chunk or two written out): 4 wavefronts each (two
    half-warps of 256 bytes) with the rows skewed every 64 or 128 bytes, 2-4 times that without."""
    for k in range(8, 33):
        cfg = specialise(RUNGS[LARGE_VARIANT].presets["fast_float32"], 9, k, Mode.REFLECT)
        plain, loads = _window_wavefronts(cfg, 4)
        skewed, same = _window_wavefronts(dataclasses.replace(cfg, skew=skew), 4)
        assert same == loads and skewed == 4 * loads and plain >= 8 * loads, (k, plain, skewed, loads)


SKEWED_COPY_PTX = textwrap.dedent("""
    import dataclasses
    from numba import cuda, float32, int64, uint32, void
    from simt_tiles.kernels.conv2d import k11_large_filter as k11
    from simt_tiles.kernels.conv2d._common import Mode, specialise
    from simt_tiles.kernels.conv2d._staging import make_patch_loader

    def stores(cfg):
        sh, pitch = cfg.patch()[0], k11.pitch(cfg, 4)
        load = make_patch_loader(cfg, skew=k11.skew(cfg, 4))

        def k(image, out):
            patch = cuda.shared.array((sh, pitch), float32)
            tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
            load(image, patch, float32(0), int64(cuda.blockIdx.y), int64(cuda.blockIdx.x), tx, ty)
            cuda.syncthreads()
            out[tx] = patch[ty, tx]

        return cuda.compile_ptx(k, void(float32[:, :], float32[::1]), cc=(9, 0))[0].count("st.shared")

    cfg = specialise(k11.PRESETS["fast_float32"], 9, 9, Mode.REFLECT)
    print("stores", stores(cfg), stores(dataclasses.replace(cfg, skew=128)))
""")


def test_skewed_patch_copy_is_unrolled_as_the_plain_one():
    """The real target (``cuda.compile_ptx``, a subprocess): k11's patch copy with rows skewed writes as many
    shared stores as the plain copy — LLVM unrolls both.  A signed floor division in the padding (session 40)
    left the copy a loop: 38 stores where 51, +63 % instructions and 1.9× the time at 9 × 9 on the H100."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0",
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SKEWED_COPY_PTX], env=env, capture_output=True, text=True)
    got = [line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("stores")]
    assert proc.returncode == 0 and got and got[0][0] == got[0][1], proc.stdout + proc.stderr


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_the_skew_rule_costs_at_most_a_block_an_sm(dtype):
    """``dispatch.skewed`` (``config=None``'s patch-row skew, when ``LARGE_SKEW`` asks for one) on the preset the
    GPU default takes, for every filter 8 … 41 wide and tall (squares and 13 × 5-like shapes): a skewed config
    only where it applies, fits 48 KiB and costs at most ``SKEW_BLOCKS_LOST`` blocks an SM; the plain one
    elsewhere.  Pinned: float32 9 × 9, 15 × 15, 21 × 21 and 31 × 31 skewed (the last two measured), 33 × 33
    not (past 48 KiB); float64 never."""
    rung, dt = RUNGS[LARGE_VARIANT], np.dtype(dtype)
    item = dt.itemsize
    cands = dispatch.large_configs(rung, rung.presets["default"], None, dt, simulator=False)
    assert dispatch.LARGE_SKEW == 128 and dispatch.SKEW_BLOCKS_LOST == 1  # measured (conv2d.md, session 41)
    took = {}
    for kh, kw in [(k, k) for k in range(8, 42)] + [(13, 5), (5, 13), (31, 9)]:
        try:
            spec = dispatch._first_fitting(cands, kh, kw, Mode.REFLECT, dt)
        except ConfigError:
            continue
        assert dispatch.skewed(spec, dt, 1) is spec
        got = dispatch.skewed(spec, dt, 128)
        try:
            cand = dataclasses.replace(spec, skew=128)
        except ConfigError:  # past float32's 48 KiB
            assert got is spec, (kh, kw)
            continue
        applies = k11.skew(cand, item) != (0, 1)
        keeps = k11.blocks_per_sm(spec, item) - k11.blocks_per_sm(cand, item) <= 1
        fits = cand.smem_bytes(item) <= cand.MAX_STATIC_SMEM
        assert got == (cand if applies and keeps and fits and item == 4 else spec), (kh, kw)
        took[(kh, kw)] = got.skew == 128
    if dt == np.float32:
        assert all(took[(k, k)] for k in (9, 15, 21, 31)) and not took.get((33, 33)), took
    else:  # float64: the DFMA pipe, not shared memory, is the limit
        assert not any(took.values())


def _compiles():
    return runtime._compiled.cache_info().misses


@pytest.mark.parametrize("on_device", [False, True], ids=["numpy-filter", "device-filter"])
def test_a_new_filter_value_compiles_nothing(on_device):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((9, 10)).astype(np.float32)
    put = cuda.to_device if on_device else (lambda a: a)
    runtime._compiled.cache_clear()  # other tests may have built the shapes below
    correlate2d(x, put(rng.standard_normal((9, 8)).astype(np.float32)), mode="nearest")
    before = _compiles()
    for _ in range(2):
        w = rng.standard_normal((9, 8)).astype(np.float32)
        got = correlate2d(x, put(w), mode="nearest")
        ref, bound = correlate2d_reference(x, w, "nearest")
        assert_like_scipy(got, ndi.correlate(x, w, mode="nearest"), ref, bound, "new value")
    assert _compiles() == before, "a new filter value compiled a kernel"
    correlate2d(x, put(rng.standard_normal((8, 9)).astype(np.float32)), mode="nearest")
    assert _compiles() == before + 1, "a new filter shape must compile one kernel"


def test_a_volumes_middle_axis_is_one_launch_of_the_stack_kernel(monkeypatch):
    """correlate1d along a middle axis with 9 taps: k11's kernel for a stack of slices, once."""
    seen = kernel_launches(monkeypatch)
    rng = np.random.default_rng(34)
    x = rng.standard_normal((3, 11, 4)).astype(np.float64)
    k = rng.standard_normal(9)
    got = simt_tiles.correlate1d(x, k, axis=1, mode="reflect", origin=2)
    np.testing.assert_allclose(got, ndi.correlate1d(x, k, axis=1, mode="reflect", origin=2), rtol=1e-12, atol=1e-12)
    assert [(name, grid[2]) for name, grid, _ in seen] == [("conv2d_k11_large_filter_slices", 3)], seen


# --- the harness catches a planted bug -------------------------------------------------------------------


def test_a_dropped_filter_column_is_caught(monkeypatch):
    """k11 built with its last filter column dropped (``chunks`` one column short): the check fails."""
    real = k11.chunks

    def short(config):
        kc, full, rest = real(config)
        return (kc, full, rest - 1) if rest > 1 else (kc, full - 1, kc) if full > 1 else (kc, full, rest)

    cfg = k11.Config(block_x=2, block_y=2, rx=4, ry=2, kc=4)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 9)).astype(np.float64)
    w = rng.standard_normal((9, 10))
    ref, bound = correlate2d_reference(x, w, "reflect")
    monkeypatch.setattr(k11, "chunks", short)
    runtime._compiled.cache_clear()  # the planted kernel must be built here, and not kept
    runtime._BUILT.clear()
    try:
        got = correlate2d(x, w, variant=LARGE_VARIANT, config=cfg)
    finally:
        runtime._compiled.cache_clear()
        runtime._BUILT.clear()
    with pytest.raises(AssertionError):
        assert_like_scipy(got, ndi.correlate(x, w), ref, bound, "planted")
    monkeypatch.undo()
    got = correlate2d(x, w, variant=LARGE_VARIANT, config=cfg)
    assert_like_scipy(got, ndi.correlate(x, w), ref, bound, "the real kernel")
