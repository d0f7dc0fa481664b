"""k08's ``vec`` knob: 16-bit softmax reading (and writing) 2, 4 or 8 values an access (issue 34).

With ``vec`` > 1 a thread's load is one 4-, 8- or 16-byte ``ld.global`` of consecutive 16-bit values
(:func:`simt_tiles.vector.load16_words`), split into float32 by :func:`simt_tiles.half_io.make_pairs`; the
results go back a word (two values) at a time.  What must hold: the same bound as every 16-bit rung
(tests/test_softmax16.py's :func:`bound16`) over shapes that are multiples of nothing, rows whose start is not
aligned (rows of odd length alternate: a scalar head), a partial last vector (a scalar tail), and arrays
whose *base* is not 16-byte aligned, which must run the ``vec=1`` kernel (in the simulator the wide
accesses check their alignment and would raise).  The default stays ``vec=1`` (unmeasured:
benchmarks/notes/patterns.md, "16-bit softmax, paired loads").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numba import cuda, uint32

import simt_tiles
from simt_tiles.half_io import make_io, make_pairs
from simt_tiles.kernels.softmax import RUNGS, dispatch
from simt_tiles.kernels.softmax.k08_ticket_queue import Config as TicketConfig
from simt_tiles.mma import bf16_bits, f16_bits
from simt_tiles.runtime import HALF_STORAGE, SIMULATOR
from simt_tiles.vector import load16_words, store16_words

from .common import HALF, configs, edge_sizes, spy_launched_vecs
from .profiles import PROFILE, examples
from .test_softmax16 import SPECIAL16, assert_softmax16_ok, call16, check_random_rows, from16, inputs, poisoned16, to16

K08 = RUNGS["k08_ticket_queue"]

if SIMULATOR:
    VEC_CONFIGS = st.builds(TicketConfig, threads=st.sampled_from([32, 64]), loads=st.sampled_from([1, 2, 3]),
                            piece_steps=st.sampled_from([1, 2]), lag_kib=st.sampled_from([1, 64]),
                            vec=st.sampled_from([2, 4, 8]))
else:
    VEC_CONFIGS = st.builds(TicketConfig, threads=st.sampled_from([32, 256, 512]), loads=st.sampled_from([1, 4, 8]),
                            piece_steps=st.sampled_from([1, 4]), lag_kib=st.sampled_from([1, 16384]),
                            vec=st.sampled_from([2, 4, 8]))


def vec_config(vec: int, **fields) -> TicketConfig:
    """The target's k08 preset ("sim" or "default") with ``vec`` (and ``fields``) replaced."""
    return dataclasses.replace(K08.resolve_config(None), vec=vec, **fields)


@pytest.fixture
def launched(monkeypatch):
    """The ``vec`` of every k08 config launched."""
    return spy_launched_vecs(monkeypatch, K08)


# ---------------------------------------------------------------------------
# the kernel: random configs, ragged shapes, special values
# ---------------------------------------------------------------------------


@settings(max_examples=examples(30))
@given(dt=st.sampled_from(HALF), data=st.data())
def test_vec_k08_matches_scipy(dt, data):
    """k08 with ``vec`` 2, 4 or 8 and a random config (several warps among them): rows of 1, 2, 3 and 5 (odd
    lengths: rows start unaligned in turn), lengths around a warp's and a load's columns and primes, special
    values and rows of −inf, softmax and log_softmax, NaN-poisoned ``out`` (float16)."""
    config = data.draw(configs(K08, VEC_CONFIGS), "config")
    rows = data.draw(st.sampled_from([1, 2, 3, 5]), "rows")
    cols = data.draw(st.sampled_from(edge_sizes(config.vec, config.threads, config.threads * config.vec)), "cols")
    assume(cols > 0)
    check_random_rows(data, dt, rows, cols, variant="k08_ticket_queue", config=config)


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("vec", [2, 4, 8])
def test_vec_special_rows(vec, dt):
    """scipy's special rows (3 values: every row is head, vectors and tail at vec 2; all head or tail at 4, 8),
    log_softmax's float16 overflow to −inf, and 1/3 rounded to nearest even, as the scalar path."""
    cfg = vec_config(vec)
    x16, x32 = to16(SPECIAL16.astype(np.float32), dt)
    assert_softmax16_ok(x32, call16(x16, dt, variant="k08_ticket_queue", config=cfg), dt)
    ly = call16(x16, dt, log=True, variant="k08_ticket_queue", config=cfg)
    assert_softmax16_ok(x32[:-1], ly[:-1], dt, log=True)
    assert ly[-1][0] == 0.0 and (ly[-1][1] == -np.inf if dt == "float16" else np.isfinite(ly[-1][1])), ly[-1]
    thirds = call16(to16(np.full((4, 3 * vec), 7.0, np.float32), dt)[0], dt, variant="k08_ticket_queue", config=cfg)
    np.testing.assert_array_equal(thirds, from16(to16(np.full((4, 3 * vec), 1 / (3 * vec), np.float32), dt)[0], dt))


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("vec", [2, 8])
@pytest.mark.parametrize("cols", [1, 3, 17, 67] + ([] if PROFILE == "ci" else [2, 7]))
def test_vec_rows_of_any_length_take_the_wide_path(cols, vec, dt, launched):
    """Rows of odd (and short: below one vector) length on an aligned base run the ``vec`` kernel — each row's
    unaligned head and last partial vector one value at a time — and are right, softmax and log_softmax."""
    rng = np.random.default_rng(cols * vec)
    x16, x32 = inputs(rng, (5, cols), dt, 5.0)
    for log in (False, True):
        y = call16(x16, dt, log=log, out=poisoned16((5, cols), dt), variant="k08_ticket_queue", config=vec_config(vec))
        assert_softmax16_ok(x32, y, dt, log)
    assert launched == [vec, vec]


# ---------------------------------------------------------------------------
# alignment: a base not 16-byte aligned runs vec=1
# ---------------------------------------------------------------------------


def _offset_view(host, offset: int):
    """A device array of ``host``'s values whose data starts ``offset`` elements into a larger allocation
    (the allocation itself 16-byte aligned), C-contiguous."""
    big = cuda.to_device(np.zeros(host.size + offset, host.dtype))
    view = big[offset:].reshape(host.shape)
    view.copy_to_device(np.ascontiguousarray(host))
    return view


@pytest.mark.parametrize("vec", [2, 4, 8])
@pytest.mark.parametrize("x_offset, out_offset, wide", [(0, 0, True), (1, 0, False), (2, 0, False), (0, 1, False),
                                                          (3, 5, False), (8, 8, True)])
def test_vec_unaligned_base_runs_the_scalar_kernel(x_offset, out_offset, wide, vec, launched):
    """float16 arrays (Numba device arrays: used in place) starting 2, 4 or 10 bytes past a 16-byte boundary —
    ``x`` or ``out`` — run ``vec=1`` (the wide kernel would fault; the simulator's checks raise), and are right;
    16-byte aligned ones (offset 0 or 8 elements) run ``vec``.  Odd rows of 61: the rows alternate as well."""
    x16, x32 = inputs(np.random.default_rng(vec + x_offset), (4, 61), "float16", 4.0)
    x = _offset_view(x16, x_offset)
    out = _offset_view(np.full((4, 61), np.nan, np.float16), out_offset)
    for log in (False, True):
        f = simt_tiles.log_softmax if log else simt_tiles.softmax
        res = f(x, out=out, variant="k08_ticket_queue", config=vec_config(vec))
        assert res is out
        assert_softmax16_ok(x32, out.copy_to_host().astype(np.float32), "float16", log)
    assert launched == [vec if wide else 1] * 2


def test_numpy_slices_are_copied_aligned(launched):
    """``x[:, 1:]`` of a NumPy array (an odd start, a row stride of 72 values, 71 long) is copied to an aligned
    C-contiguous array: the wide kernel runs on it (odd rows), right."""
    x16, x32 = inputs(np.random.default_rng(3), (5, 72), "float16", 4.0)
    y = call16(x16[:, 1:], "float16", variant="k08_ticket_queue", config=vec_config(2))
    assert_softmax16_ok(x32[:, 1:], y, "float16")
    assert launched == [2]


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's checks of the wide accesses (a GPU would fault)")
@pytest.mark.parametrize("W", [1, 2, 4])
def test_wide_accesses_check_their_promise_in_the_simulator(W):
    """What the unaligned twin keeps k08 from: a wide access at an address not a multiple of 4·W bytes raises in
    the simulator (as ``load4``'s; a GPU would fault), as one past the end does.  (A k08 launch that raised would
    leave its W blocks waiting for ever in the simulator's threads: removing the twin is a plant, in the notes.)"""
    load, store = load16_words(W), store16_words(W)

    def kernel(a, b):
        buf = cuda.local.array(4, uint32)
        load(a, 0, buf)
        store(b, 0, buf)

    x = np.arange(48, dtype=np.float16)
    start = (16 - x.__array_interface__["data"][0] % 16) // 2 % 8  # the first 16-byte aligned element
    out = cuda.to_device(np.zeros(16, np.float16))
    cuda.jit(kernel)[1, 1](cuda.to_device(x[start:start + 16]), out)  # (a copy: aligned)
    for shift, what in ((1, f"not a multiple of {4 * W} bytes"), (2 * W - 1, "out of bounds")):
        a = _offset_view(x[:2 * W - 1] if what == "out of bounds" else x[:16], shift)
        with pytest.raises(Exception, match=what):
            cuda.jit(kernel)[1, 1](a, out)


# ---------------------------------------------------------------------------
# the pieces: wide accesses, pairs of conversions, the knob's rules
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("W", [1, 2, 4])
def test_load16_store16_words_round_trip(W):
    """``load16_words(W)`` packs row[i + 2k] into word k's low half and row[i + 2k + 1] into its high half;
    ``store16_words(W)`` writes them back where they were."""
    load, store = load16_words(W), store16_words(W)

    @cuda.jit
    def copy(src, dst, words):
        t = cuda.threadIdx.x
        buf = cuda.local.array(4, uint32)
        load(src, t * 2 * W, buf)
        for k in range(W):
            words[t, k] = buf[k]
        store(dst, t * 2 * W, buf)

    src = np.arange(1, 8 * 2 * W + 1, dtype=np.uint16) * np.uint16(257)
    dst = cuda.to_device(np.zeros_like(src))
    words = cuda.to_device(np.zeros((8, W), np.uint32))
    copy[1, 8](cuda.to_device(src), dst, words)
    np.testing.assert_array_equal(dst.copy_to_host(), src)
    pairs = src.reshape(8, W, 2).astype(np.uint32)
    np.testing.assert_array_equal(words.copy_to_host(), pairs[..., 0] | pairs[..., 1] << 16)


@pytest.mark.parametrize("dt", HALF)
def test_pairs_convert_as_the_scalar_io(dt):
    """``make_pairs``' unpack of every 16-bit pattern (low and high halves) is ``make_io``'s ``up`` of it, bit for
    bit (NaN as NaN); its pack of float32 values (halfway points, subnormals, overflow, ±inf, NaN) is ``down``'s
    rounding of each, to nearest even."""
    storage = HALF_STORAGE[dt]
    up, down = make_io(storage)
    unpack, pack = make_pairs(storage)
    to_bits = f16_bits if dt == "float16" else bf16_bits

    def as_f32(bits16):  # NumPy: 16-bit patterns → their float32 values
        if dt == "float16":
            return bits16.view(np.float16).astype(np.float32)
        return (bits16.astype(np.uint32) << 16).view(np.float32)

    @cuda.jit
    def convert(words, halves, lo, hi, ref_lo, ref_hi, vals, packed):
        t = cuda.threadIdx.x
        for i in range(t, words.shape[0], cuda.blockDim.x):
            lo[i], hi[i] = unpack(words[i])
            ref_lo[i], ref_hi[i] = up(halves[2 * i]), up(halves[2 * i + 1])
        for i in range(t, packed.shape[0], cuda.blockDim.x):
            packed[i] = pack(vals[2 * i], vals[2 * i + 1])

    every = np.arange(65536, dtype=np.uint32).astype(np.uint16)  # every pattern, pairs in 32768 words
    rng = np.random.default_rng(7)
    base = as_f32(to_bits(rng.standard_normal(2000).astype(np.float32) * 100))
    # bfloat16: float32 values one ulp past a 16-bit value (not halfway) and halfway between two (ties to even)
    ties = (base.view(np.uint32) | np.uint32(0x8000)).view(np.float32) if dt == "bfloat16" else \
        (base.astype(np.float64) + np.spacing(base.astype(np.float16)).astype(np.float64) / 2).astype(np.float32)
    vals = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 1000, ties, np.nextafter(base, np.inf),
                           np.float32([2 ** -20, -(2 ** -140), 2 ** -133, 2 ** -25, 3 * 2 ** -26, 65519.0, 65520.0,
                                       -3.4e38, np.inf, -np.inf, np.nan, 0.0, -0.0, 1 / 3])]).astype(np.float32)
    vals = vals[: vals.size // 2 * 2]
    outs = [cuda.device_array(32768, np.float32) for _ in range(4)]
    packed = cuda.device_array(vals.size // 2, np.uint32)
    convert[1, 64](cuda.to_device(every.view(np.uint32)), cuda.to_device(every.view(storage)), *outs,
                   cuda.to_device(vals), packed)
    lo, hi, ref_lo, ref_hi = (o.copy_to_host() for o in outs)
    for got, want in ((lo, ref_lo), (hi, ref_hi)):
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    np.testing.assert_array_equal(ref_lo[~np.isnan(ref_lo)], as_f32(every[0::2])[~np.isnan(ref_lo)])
    p = packed.copy_to_host()
    got16 = np.stack([p & 0xFFFF, p >> 16], axis=1).reshape(-1).astype(np.uint16)
    nan = np.isnan(vals)
    np.testing.assert_array_equal(got16[~nan], to_bits(vals)[~nan])
    assert np.isnan(as_f32(got16[nan])).all()


def test_vec_rules():
    """``vec`` is 1, 2, 4 or 8, and 1 for float32/float64 (ConfigError naming config); the float presets keep
    ``vec=1``, and 16-bit rows on the default path (config None) take "half" on a GPU, "sim_half" here, with the
    scalar twin for unaligned arrays; a preset named keeps its own ``vec``."""
    for dtype, vec, ok in ((np.float32, 2, False), (np.float64, 4, False), (np.float16, 3, False),
                           (np.float16, 16, False), (np.uint16, 8, True), (np.float32, 1, True)):
        cfg = vec_config(vec)
        if ok:
            assert dispatch.plan((2, 100, 1), dtype, variant="k08_ticket_queue", config=cfg).config.vec == vec
        else:
            with pytest.raises(simt_tiles.ConfigError, match=rf"config: vec={vec} \(16-bit values a load\)"):
                dispatch.plan((2, 100, 1), dtype, variant="k08_ticket_queue", config=cfg)
    assert all(c.vec == 1 for n, c in K08.presets.items() if n not in ("half", "sim_half"))
    assert K08.presets["half"].vec == 8 and K08.presets["sim_half"].vec == 2
    for storage in HALF_STORAGE.values():  # a preset named: one value a load
        p = dispatch.plan((4, 300000, 1), storage, config="default", sms=132)
        assert p.rung is K08 and p.config.vec == 1 and p.unaligned is None
    want = K08.presets["sim_half" if SIMULATOR else "half"]
    for storage in HALF_STORAGE.values():  # the default path (long rows, few of them: k08) and k08 named
        for p in (dispatch.plan((4, 300000, 1), storage, sms=132),
                  dispatch.plan((3, 1000, 1), storage, variant="k08_ticket_queue")):
            assert p.rung is K08 and p.config == want and p.unaligned.config == dataclasses.replace(want, vec=1)
    p = dispatch.plan((4, 300000, 1), np.float32, sms=132)  # float32 rows: the scalar default
    assert p.rung is K08 and p.config.vec == 1 and p.unaligned is None
    cfg = vec_config(4)
    assert cfg.step() == cfg.threads * cfg.loads * 4
    p = dispatch.plan((3, 1000, 1), np.float16, variant="k08_ticket_queue", config=cfg)
    assert p.unaligned.config == dataclasses.replace(cfg, vec=1) and p.unaligned.unaligned is None
