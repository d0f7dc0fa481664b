"""simt_tiles.mma (mma.sync / ldmatrix / cp.async by address) and the tensor-core matmul rungs k13/k14.

The fragment tests run one warp per instruction and compare every lane's registers with the NumPy
model of the PTX ISA layout (``simt_tiles.mma.fragment_*``); on a GPU the same kernels check the
hardware against that model, in the simulator they check the emulation.  The matmul property tests
draw ragged shapes (1, tile ± 1, primes, empty), both warp directions, NaN-poisoned outputs, and
compare with a long-double reference under :func:`simt_tiles.bounds.mma_error_factor`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numba import cuda

from simt_tiles import mma
from simt_tiles.bounds import mma_error_factor, ref_dtype
from simt_tiles.kernels.matmul import k13_mma_tf32 as k13
from simt_tiles.kernels.matmul import k14_mma_bf16 as k14
from simt_tiles.kernels.matmul.mma import MMA_RUNGS, matmul_mma
from simt_tiles.runtime import SIMULATOR, SMEM_ALIGN

from .profiles import PROFILE, examples

RNG = np.random.default_rng(30)


# --- fragments, lane by lane ------------------------------------------------------------------

@cuda.jit
def _mma_tf32_kernel(fa, fb, fc, d):
    lane = cuda.threadIdx.x
    r = mma.mma_tf32(fa[lane, 0], fa[lane, 1], fa[lane, 2], fa[lane, 3], fb[lane, 0], fb[lane, 1],
                     fc[lane, 0], fc[lane, 1], fc[lane, 2], fc[lane, 3])
    for i in range(4):
        d[lane, i] = r[i]


@cuda.jit
def _mma_16_kernel(fa, fb, fc, d, bf16):
    lane = cuda.threadIdx.x
    if bf16:
        r = mma.mma_bf16(fa[lane, 0], fa[lane, 1], fa[lane, 2], fa[lane, 3], fb[lane, 0], fb[lane, 1],
                         fc[lane, 0], fc[lane, 1], fc[lane, 2], fc[lane, 3])
    else:
        r = mma.mma_f16(fa[lane, 0], fa[lane, 1], fa[lane, 2], fa[lane, 3], fb[lane, 0], fb[lane, 1],
                        fc[lane, 0], fc[lane, 1], fc[lane, 2], fc[lane, 3])
    for i in range(4):
        d[lane, i] = r[i]


def _pack(pairs):
    p = pairs.astype(np.uint32)
    return p[..., 0] | (p[..., 1] << 16)


def test_mma_tf32_layout_lane_by_lane():
    """D = A·B + C through the documented fragments of m16n8k8 (TF32-exact inputs: no rounding)."""
    a = mma.tf32_round(RNG.standard_normal((16, 8)).astype(np.float32))
    b = mma.tf32_round(RNG.standard_normal((8, 8)).astype(np.float32))
    c = RNG.standard_normal((16, 8)).astype(np.float32)
    d = np.full((32, 4), np.nan, np.float32)
    fa, fb, fc = (np.ascontiguousarray(x) for x in (mma.fragment_a(a, "tf32"), mma.fragment_b(b, "tf32"),
                                                      mma.fragment_c(c)))
    dd = cuda.to_device(d)
    _mma_tf32_kernel[1, 32](cuda.to_device(fa), cuda.to_device(fb), cuda.to_device(fc), dd)
    want = mma.fragment_c(a.astype(np.float64) @ b.astype(np.float64) + c)
    np.testing.assert_allclose(dd.copy_to_host(), want, rtol=0, atol=8 * 2.0**-23 * np.abs(want).max())


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mma_16bit_layout_lane_by_lane(precision):
    to_bits = mma.bf16_bits if precision == "bf16" else mma.f16_bits
    a_bits = to_bits(RNG.standard_normal((16, 16)).astype(np.float32))
    b_bits = to_bits(RNG.standard_normal((16, 8)).astype(np.float32))
    c = RNG.standard_normal((16, 8)).astype(np.float32)
    fa = np.ascontiguousarray(_pack(mma.fragment_a(a_bits, precision)))
    fb = np.ascontiguousarray(_pack(mma.fragment_b(b_bits, precision)))
    fc = np.ascontiguousarray(mma.fragment_c(c))
    dd = cuda.to_device(np.full((32, 4), np.nan, np.float32))
    _mma_16_kernel[1, 32](cuda.to_device(fa), cuda.to_device(fb), cuda.to_device(fc), dd, precision == "bf16")
    a, b = mma.bits_to_f32(a_bits, precision), mma.bits_to_f32(b_bits, precision)
    want = mma.fragment_c(a.astype(np.float64) @ b.astype(np.float64) + c)
    np.testing.assert_allclose(dd.copy_to_host(), want, rtol=0, atol=16 * 2.0**-23 * np.abs(want).max())


@cuda.jit
def _ldsm_kernel(tile, out, trans):
    """tile: 16×16 uint16 in shared memory; lane L gives row L&7 + 8·((L>>3)&1), column 8·(L>>4)."""
    sm = cuda.shared.array((16, 16), np.uint16, alignment=SMEM_ALIGN)
    lane = cuda.threadIdx.x
    for i in range(8):
        sm[(lane * 8 + i) // 16, (lane * 8 + i) % 16] = tile[(lane * 8 + i) // 16, (lane * 8 + i) % 16]
    cuda.syncthreads()
    row = (lane & 7) + 8 * ((lane >> 3) & 1)
    base = mma.smem_base(sm)
    addr = mma.SA(base + mma.SA(row * 32 + 16 * (lane >> 4)))
    if trans:
        r = mma.ldsm_x4_t(addr, 0)
    else:
        r = mma.ldsm_x4(addr, 0)
    for i in range(4):
        out[lane, i] = r[i]


def test_ldmatrix_gives_the_a_fragment():
    """ldmatrix.x4 of a row-major 16×16 tile: lane L's registers are A's m16n8k16 fragment."""
    tile = RNG.integers(0, 2**16, (16, 16), dtype=np.uint16)
    out = cuda.to_device(np.zeros((32, 4), np.uint32))
    _ldsm_kernel[1, 32](cuda.to_device(tile), out, False)
    np.testing.assert_array_equal(out.copy_to_host(), _pack(mma.fragment_a(tile, "bf16")))


def test_ldmatrix_trans_gives_b_fragments():
    """ldmatrix.x4.trans of a row-major K×N (16×16) tile: registers (0, 1) are the B fragment of
    columns 0-7, (2, 3) of columns 8-15."""
    tile = RNG.integers(0, 2**16, (16, 16), dtype=np.uint16)
    out = cuda.to_device(np.zeros((32, 4), np.uint32))
    _ldsm_kernel[1, 32](cuda.to_device(tile), out, True)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:, :2], _pack(mma.fragment_b(tile[:, :8], "bf16")))
    np.testing.assert_array_equal(got[:, 2:], _pack(mma.fragment_b(tile[:, 8:], "bf16")))


def test_numpy_models():
    """The models the emulation and the tests share: TF32 rounding is to nearest, ties away; the
    BF16 conversion rounds to nearest even; mma_reference reproduces A·B + C."""
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-12, -(1 + 2.0**-11), 1 + 2.0**-12], np.float32)
    np.testing.assert_array_equal(mma.tf32_round(x), np.array([1 + 2.0**-10, 1 + 2.0**-10, -(1 + 2.0**-10), 1],
                                                             np.float32))
    assert mma.tf32_truncate(np.float32(1 + 2.0**-11)) == 1
    assert mma.bits_to_f32(mma.bf16_bits(np.float32(1 + 2.0**-8)), "bf16") == 1  # a tie: to even
    assert mma.bits_to_f32(mma.bf16_bits(np.float32(1 + 3 * 2.0**-8)), "bf16") == 1 + 2.0**-6
    a = mma.tf32_round(RNG.standard_normal((16, 8)).astype(np.float32))
    b = mma.tf32_round(RNG.standard_normal((8, 8)).astype(np.float32))
    d = mma.mma_reference(mma.fragment_a(a, "tf32"), mma.fragment_b(b, "tf32"), mma.fragment_c(np.zeros((16, 8))),
                          "tf32")
    np.testing.assert_allclose(d, mma.fragment_c(a.astype(np.float64) @ b), rtol=2.0**-22)


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's address checks")
def test_simulated_addresses_are_checked():
    """An address outside every registered array, or misaligned, fails in the simulator."""
    @cuda.jit
    def bad(x, which):
        sm = cuda.shared.array(64, np.float32)
        s = mma.smem_base(sm)
        if which == 0:
            mma.lds32(s, 256)  # one past the end
        else:
            mma.cp_async16(s, 4, mma.gaddr(x, 0), 16)  # shared side not 16-byte aligned

    x = cuda.to_device(np.zeros(16, np.float32))
    for which in (0, 1):
        with pytest.raises(ValueError, match="outside|multiple of 16"):
            bad[1, 1](x, which)


# --- the matmul rungs -----------------------------------------------------------------------

#: small configs for the simulator: warps stacked along M (the "sim" presets) and along N
TF32_CONFIGS = [k13.PRESETS["sim"], k13.Config(bm=16, bn=64, bk=16, wm=16, wn=32, stages=2, group=1),
                k13.Config(bm=16, bn=64, bk=16, wm=16, wn=64, stages=2, group=1, rounding=2),
                k13.Config(bm=32, bn=32, bk=16, wm=16, wn=32, stages=2, group=2, rounding=3)]
BF16_CONFIGS = [k14.PRESETS["sim"], k14.Config(bm=16, bn=64, bk=32, wm=16, wn=32, stages=2, group=3)]
SIZES = [0, 1, 7, 15, 16, 17, 31, 33]


def _inputs(m, n, k, precision):
    """An M × K and a K × N operand in ``precision``'s input type, and their values as float32."""
    return _batch_inputs((m, k), (k, n), precision)


def check_matmul(m, n, k, precision, cfg):
    """matmul_mma against a long-double reference, every element within the stated bound."""
    a, b, a32, b32 = _inputs(m, n, k, precision)
    out_dtype = np.float32 if precision == "tf32" else a.dtype
    out = (np.full((m, n), 0x7FC0, np.uint16) if precision == "bf16"  # bfloat16 NaN bits
           else np.full((m, n), np.nan, out_dtype))
    if precision == "bf16":  # uint16 bits travel through the bf16 rung as NumPy has no bfloat16
        c = _bf16_call(a, b, out, cfg)
        got = mma.bits_to_f32(c, "bf16")
    else:
        got = matmul_mma(a, b, precision=precision, out=out, config=cfg).astype(np.float32)
    assert_within_bound(got, a32, b32, precision, cfg)


def assert_within_bound(got, a32, b32, precision, cfg):
    """Every element of ``got`` within the mma bound of the long-double product, none NaN (unwritten)."""
    k = a32.shape[-1]  # the inner dimension of a matrix, a batch of them or a 1-D row
    rdt = ref_dtype()
    ref = a32.astype(rdt) @ b32.astype(rdt)
    absprod = np.abs(a32.astype(rdt)) @ np.abs(b32.astype(rdt))
    f = mma_error_factor(k, precision, rounds_inputs=precision == "tf32", rounds_output=precision != "tf32",
                         truncates=getattr(cfg, "rounding", 1) == 2)
    bound = absprod * (f + 2 * max(k, 1) * float(np.finfo(rdt).eps))
    err = np.abs(got.astype(rdt) - ref)
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) outputs"
    assert (err <= bound).all(), (got.shape, k, precision, cfg, float((err / np.maximum(bound, 1e-300)).max()))


def _bf16_call(a_bits, b_bits, out_bits, cfg):
    """The bf16 rung on raw bits (NumPy without ml_dtypes): the launcher's 16-bit path, dtype-tagged."""
    from simt_tiles.kernels.matmul import mma as mma_mod

    class Tagged(np.ndarray):  # a uint16 array that reports dtype "bfloat16" to the launcher
        pass

    orig = mma_mod._dtype_name
    mma_mod._dtype_name = lambda x: "bfloat16" if isinstance(x, Tagged) else orig(x)
    try:
        res = matmul_mma(a_bits.view(Tagged), b_bits.view(Tagged), out=out_bits.view(Tagged), config=cfg)
    finally:
        mma_mod._dtype_name = orig
    return np.asarray(res).view(np.uint16)


@settings(max_examples=examples(6))
@given(m=st.sampled_from(SIZES), n=st.sampled_from(SIZES + [40, 65]), k=st.sampled_from(SIZES + [13]),
       which=st.integers(0, 3))
@example(m=17, n=65, k=13, which=1)  # 2 warps along N, 2×2 blocks, edges in every direction
@example(m=1, n=40, k=17, which=2)  # one warp of 16×64: the B bases repeat every 4 fragments
def test_tf32_matmul_property(m, n, k, which):
    check_matmul(m, n, k, "tf32", TF32_CONFIGS[which])


@settings(max_examples=examples(6))
@given(m=st.sampled_from(SIZES), n=st.sampled_from(SIZES + [40, 65]), k=st.sampled_from(SIZES + [13, 37]),
       which=st.integers(0, 1), precision=st.sampled_from(["bf16", "fp16"]))
@example(m=31, n=65, k=37, which=1, precision="bf16")  # 2 warps along N, 2 k tiles, ragged K (padded)
def test_16bit_matmul_property(m, n, k, which, precision):
    check_matmul(m, n, k, precision, BF16_CONFIGS[which])


#: the hoisted copy guards (``guards`` 2, 3; session 36): the sim presets (2 passes of A rows a thread, RA = 16,
#: so M = 17 has pass 0 inside C and pass 1 outside for most threads) and warps along N (B's k passes)
GUARD_CONFIGS = {("tf32", q, w): dataclasses.replace(TF32_CONFIGS[w], guards=q) for q in (2, 3) for w in (0, 1)}
GUARD_CONFIGS.update({(p, q, w): dataclasses.replace(BF16_CONFIGS[w], guards=q)
                      for p in ("bf16", "fp16") for q in (2, 3) for w in (0, 1)})


@settings(max_examples=examples(6))
@given(m=st.sampled_from(SIZES), n=st.sampled_from(SIZES + [40, 65]), k=st.sampled_from(SIZES + [13, 37]),
       which=st.integers(0, 1), guards=st.sampled_from([2, 3]), precision=st.sampled_from(["tf32", "bf16", "fp16"]))
@example(m=17, n=65, k=37, which=0, guards=2, precision="tf32")  # pass 1 of A outside C, 3 k tiles, K tail
@example(m=33, n=17, k=41, which=0, guards=3, precision="bf16")  # 2 row blocks, the second 1 row: pass 0 only
@example(m=31, n=65, k=37, which=1, guards=3, precision="fp16")  # warps along N, ragged N and K
def test_hoisted_guards_property(m, n, k, which, guards, precision):
    """``guards`` 2 and 3 (the copies' row and k guards hoisted out of the tile loop) on ragged shapes:
    every element within the bound, none unwritten; the generated names differ from guards 1's."""
    cfg = GUARD_CONFIGS[(precision, guards, which)]
    assert k13.kernel_name(cfg, precision).endswith(f"_q{guards}")
    check_matmul(m, n, k, precision, cfg)


#: the presets' ``guards`` (H100, mma_s36: the hoisted guards where they were faster at 4096³ and 8192³; TF32's
#: default from mma_s39, session 41)
SHIPPED_GUARDS = {("k13_mma_tf32", "large"): 2, ("k13_mma_tf32", "large_batched"): 2, ("k13_mma_tf32", "default"): 3,
                  ("k14_mma_bf16", "large"): 2, ("k14_mma_bf16", "large_batched"): 2, ("k14_mma_bf16", "default"): 3}


def test_guards_default_is_the_first_generator():
    """``guards`` 1 (the field's default) generates the source as before session 36: no hoisted names in it; the
    presets take the hoisted guards where they were measured faster (:data:`SHIPPED_GUARDS`), the rest 1."""
    assert k13.Config().guards == 1
    for rung in MMA_RUNGS.values():
        for name, preset in rung.presets.items():
            assert preset.guards == SHIPPED_GUARDS.get((rung.name, name), 1), (rung.name, name)
            cfg = dataclasses.replace(preset, guards=1)
            src = rung.source(cfg)
            assert "a_rok0" in src and "a_left" not in src and "I32" not in src, rung.name
            hoisted = rung.source(dataclasses.replace(cfg, guards=2))
            assert "a_rok0" not in hoisted and "a_left" in hoisted and " else a0p" in hoisted
            assert " else a0p" not in rung.source(dataclasses.replace(cfg, guards=3))
    with pytest.raises(Exception, match="guards"):
        k13.Config(guards=4)


#: TF32 rounded once a block in shared memory (``round_in_smem`` 2; session 36 (b)): warps along M and along N,
#: cvt.rna and the add, guards 1 and 3 (k13's sim preset: 64 threads, 2 chunks of A and 2 of B a thread a tile)
SMEM_ROUND_CONFIGS = {(w, r, q): dataclasses.replace(TF32_CONFIGS[w], rounding=r, guards=q)
                      for w in (0, 1) for r in (1, 3) for q in (1, 3)}


@pytest.mark.skipif(PROFILE == "ci", reason="ci budget (~12 s; round_in_smem 2 is in no preset): the full, dev and "
                                               "gpu profiles run it")
@settings(max_examples=examples(6))
@given(m=st.sampled_from(SIZES), n=st.sampled_from(SIZES + [40, 65]), k=st.sampled_from(SIZES + [13, 37, 40, 65]),
       which=st.integers(0, 1), rounding=st.sampled_from([1, 3]), guards=st.sampled_from([1, 3]))
@example(m=17, n=65, k=37, which=0, rounding=1, guards=3)  # 3 k tiles through 2 stages (each refilled), K tail
@example(m=33, n=17, k=65, which=1, rounding=3, guards=1)  # warps along N, 5 k tiles, a ragged last one
@example(m=1, n=1, k=1, which=0, rounding=1, guards=1)  # one tile, mostly zero-filled chunks
def test_round_in_smem_is_bit_identical(m, n, k, which, rounding, guards):
    """``round_in_smem`` 2 against 1 on the same inputs: the same bits reach the tensor cores in the same
    order, so C is bit-identical (both deterministic); and within the bound, none unwritten."""
    off = SMEM_ROUND_CONFIGS[(which, rounding, guards)]
    on = dataclasses.replace(off, round_in_smem=2)
    assert k13.kernel_name(on, "tf32") == k13.kernel_name(off, "tf32") + "_m2"
    a, b, _, _ = _inputs(m, n, k, "tf32")
    if m and k:
        a[0, -1] = np.float32(3.4e38)  # rounds up to inf (either way): row 0 of C inf or NaN in both
    got_off = matmul_mma(a, b, precision="tf32", out=np.full((m, n), np.nan, np.float32), config=off)
    got_on = matmul_mma(a, b, precision="tf32", out=np.full((m, n), np.nan, np.float32), config=on)
    np.testing.assert_array_equal(got_on.view(np.uint32), got_off.view(np.uint32))
    assert_within_bound(got_on[1:], a[1:], b, "tf32", on)  # written, within the bound (row 0: inf or NaN by design)


def test_round_in_smem_source_and_rules():
    """``round_in_smem`` 1 (the default) generates the source as before; 2 rounds in the copies' chunks
    (lds128 / sts128) and not at the fragment loads; 16-bit operands and truncation have nothing to round."""
    for rung in MMA_RUNGS.values():
        for cfg in rung.presets.values():
            assert cfg.round_in_smem == 1
            assert "lds128" not in rung.source(cfg) and "_m2" not in k13.kernel_name(cfg, "tf32")
    for cfg in k13.PRESETS.values():
        for r, fn in ((1, "rna_finite"), (3, "rna_add")):
            src = k13.RUNG.source(dataclasses.replace(cfg, round_in_smem=2, rounding=r))
            assert src.count("lds128(") == src.count("sts128(") > 0 and f"sts128(sa0, 0, {fn}(u0)" in src
            assert "cvt_tf32(" not in src.split("import", 2)[-1] and f"= {fn}(lds32" not in src
    with pytest.raises(Exception, match="round_in_smem"):
        k13.Config(round_in_smem=2, rounding=2)
    with pytest.raises(Exception, match="round_in_smem"):
        k14.Config(round_in_smem=2)
    with pytest.raises(Exception, match="round_in_smem"):
        k13.Config(round_in_smem=3)


def test_rna_finite_is_cvt_rna_under_truncation():
    """rna_finite (the smem pass's rounding for ``rounding`` 1): the bits plus half a TF32 ulp where finite,
    as they are for inf and NaN; truncated as the tensor cores do, it is cvt.rna (NaN stays NaN)."""
    x = RNG.standard_normal(1000).astype(np.float32)
    x[:8] = [1 + 2.0**-11, -(1 + 2.0**-11), np.inf, -np.inf, 3.4e38, -3.4e38, np.nan, 1e-40]
    x[8] = np.uint32(0xFFFFFFFF).view(np.float32)  # the GPU's NaN, negated: rna_add wraps it to +0
    got = np.array([mma.rna_finite(u) for u in x.view(np.uint32)], np.float32) if SIMULATOR else None
    if got is None:
        pytest.skip("the simulator's model (the GPU's is checked by test_round_in_smem_is_bit_identical)")
    t, want = mma.tf32_truncate(got), mma.tf32_round(x)
    np.testing.assert_array_equal(np.isnan(t), np.isnan(x))
    ok = ~np.isnan(x)
    np.testing.assert_array_equal(t[ok].view(np.uint32), want[ok].view(np.uint32))


@pytest.mark.parametrize("precision, shape", [("tf32", (33, 17, 41)), ("fp16", (17, 20, 70))])
def test_several_k_tiles_and_blocks(precision, shape):
    """Three k tiles through a two-stage pipeline (each stage refilled), warps stacked along M,
    2×1 blocks with ragged edges (TF32)."""
    check_matmul(*shape, precision, (TF32_CONFIGS if precision == "tf32" else BF16_CONFIGS)[0])


@pytest.mark.parametrize("k", [5, 0])
def test_padded_copies_and_zero_fill_launch_rows_in_pieces(k, monkeypatch):
    """The rows padded to 16-byte multiples (K = 5) and C's zero fill (K = 0) launch 8 rows a block along
    grid y: past CUDA's 65535 blocks (524 280 rows; here 1 block) in pieces of rows (``k13.row_pieces``)."""
    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    from .common import grid_limit

    monkeypatch.setattr(k11, "MAX_GRID_Y", 1)
    grids = grid_limit(monkeypatch, y=1)
    if k:
        check_matmul(20, 8, k, "tf32", TF32_CONFIGS[0])
    else:
        got = matmul_mma(np.ones((20, 0), np.float32), np.ones((0, 3), np.float32), precision="tf32",
                         out=np.full((20, 3), np.nan, np.float32))
        np.testing.assert_array_equal(got, np.zeros((20, 3), np.float32))
    assert sum(g[1] == 1 and g[0] == 1 for g in grids) >= 3  # 20 rows: 3 copies (or fills) of 8


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_device_operands_replay_a_plan_padding_copies_included(precision, plans):
    """Numba device operands whose rows are not 16-byte multiples (K = 7, N = 3: both copied into
    zero-padded workspaces): the first call records a plan (the two copies and the tile kernel), the
    next ones replay it on the arrays' new values, each within the bound; a float16 call returns a
    float16 Numba array (not its uint16 bits)."""
    m, n, k = 5, 3, 7
    cfg = (TF32_CONFIGS if precision == "tf32" else BF16_CONFIGS)[0]
    a, b, a32, b32 = _inputs(m, n, k, precision)
    da, db = cuda.to_device(a), cuda.to_device(b)
    for i in range(3):
        c = matmul_mma(da, db, precision=precision, config=cfg)
        assert c.dtype == a.dtype and c.shape == (m, n)
        assert_within_bound(c.copy_to_host().astype(np.float32), a32, b32, precision, cfg)
        assert plans.stats()["recorded"] == 1 and plans.stats()["hit"] == i, plans.stats()
        a, _, a32, _ = _inputs(m, n, k, precision)  # new values in the same device memory
        da.copy_to_device(a)


# --- the launcher's rules -------------------------------------------------------------------

def test_float32_needs_an_explicit_tf32():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="precision='tf32'"):
        matmul_mma(a, a)
    with pytest.raises(ValueError, match="precision"):
        matmul_mma(a, a, precision="bf16")
    with pytest.raises(ValueError, match="precision: expected one of"):
        matmul_mma(a, a, precision="fp8")


def test_bad_arguments():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(TypeError, match="b: expected dtype float32"):
        matmul_mma(a, a.astype(np.float16), precision="tf32")
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul_mma(a, np.ones((5, 4), np.float32), precision="tf32")
    with pytest.raises(TypeError, match="float32 .*bfloat16 or float16"):
        matmul_mma(a.astype(np.float64), a.astype(np.float64))
    with pytest.raises(ValueError, match="variant: k13_mma_tf32 does not compute 'fp16'"):
        matmul_mma(a.astype(np.float16), a.astype(np.float16), variant="k13_mma_tf32")
    with pytest.raises(ValueError, match="variant: expected one of"):
        matmul_mma(a, a, precision="tf32", variant="k99")


def test_config_choice():
    """config=None: the large tile on grids of at least LARGE_TILES of them, else the default."""
    from simt_tiles.kernels.matmul import mma as mma_mod

    for rung in MMA_RUNGS.values():
        large = rung.presets["large"]
        assert mma_mod.choose_config(rung, "default", 8192, 8192) == rung.presets["default"]
        choose = lambda m, n: mma_mod.choose_config(rung, None, m, n, simulator=False)  # noqa: E731
        assert choose(8192, 8192) == large and choose(4096, 4096) == large  # measured: 2048, 512 tiles
        assert choose(1031, 997) == rung.presets["default"]  # measured: 36 tiles
        edge = mma_mod.LARGE_TILES  # unmeasured: the threshold itself, from one row of tiles
        assert choose(large.bm, edge * large.bn) == large
        assert choose(large.bm, edge * large.bn - large.bn) == rung.presets["default"]
        assert choose(1, 1) == rung.presets["default"]


def test_bench_specs_replace_preset_fields():
    """``python -m simt_tiles.bench.mma --presets``: a preset, or one with fields replaced (what session 27
    measured k14's BK 64 preset with); a field the config has not is an error, not a silent default."""
    from simt_tiles.bench.mma import _rung_cfg

    prec, rung, cfg = _rung_cfg("bf16:large,bk=32,stages=4")
    assert (prec, rung.name) == ("bf16", "k14_mma_bf16")
    assert (cfg.bk, cfg.stages) == (32, 4) and cfg.bm == k14.PRESETS["large"].bm
    assert _rung_cfg("tf32:large")[2] == k13.PRESETS["large"]
    assert _rung_cfg("tf32:default,rounding=3")[2].rounding == 3
    assert _rung_cfg("bf16:large,guards=2")[2] == dataclasses.replace(k14.PRESETS["large"], guards=2)  # session 36
    assert _rung_cfg("tf32:large,guards=3,round_in_smem=2")[2] == dataclasses.replace(  # session 36 (b)
        k13.PRESETS["large"], guards=3, round_in_smem=2)
    assert k14.PRESETS["large"].bk == 64 and k14.PRESETS["large"].stages == 3  # measured: +3-11% over BK 32 x 4
    with pytest.raises(TypeError):
        _rung_cfg("tf32:large,bks=16")


def test_rna_add_rounds_to_nearest():
    """rounding=3: the bits plus half a TF32 ulp, then the tensor cores' truncation, is cvt.rna."""
    x = RNG.standard_normal(1000).astype(np.float32)
    x[:4] = [1 + 2.0**-11, -(1 + 2.0**-11), np.inf, 3.4e38]
    added = (x.view(np.uint32) + np.uint32(0x1000)).view(np.float32)
    np.testing.assert_array_equal(mma.tf32_truncate(added), mma.tf32_round(x))


def test_a_16_bit_out_of_another_layout_says_what_it_got():
    a = np.ones((4, 5), np.float16)
    with pytest.raises(ValueError, match=r"^out: expected a writeable C-contiguous NumPy array; got strides \(2, 8\)"):
        matmul_mma(a, a.T.copy(), out=np.zeros((4, 4), np.float16).T)


def test_fp16_output_dtype_and_empty():
    a = np.ones((3, 0), np.float16)
    out = matmul_mma(a, np.ones((0, 5), np.float16))
    assert out.dtype == np.float16 and out.shape == (3, 5) and not out.any()
    assert matmul_mma(np.ones((0, 4), np.float32), np.ones((4, 2), np.float32), precision="tf32").shape == (0, 2)


def test_error_factor():
    """The bound's pieces: operand rounding 2u + u², then γ_K at 2⁻²³ (a directed rounding's)."""
    u = 2.0**-11
    assert mma_error_factor(1, "tf32") == pytest.approx(2 * u + u * u + 2.0**-23 * (1 + u) ** 2, rel=1e-9)
    assert mma_error_factor(100, "bf16", rounds_inputs=False) == pytest.approx(100 * 2.0**-23, rel=1e-4)
    assert mma_error_factor(10, "bf16", rounds_inputs=False, rounds_output=True) > 2.0**-8
    with pytest.raises(ValueError, match="precision"):
        mma_error_factor(4, "fp8")


def test_rungs_generate_their_presets():
    """Every preset's source generates (the compile gate compiles them) and names its instructions."""
    for rung in MMA_RUNGS.values():
        for name, cfg in rung.presets.items():
            src = rung.source(cfg)
            assert ("ldsm_x4_t(" in src) == (rung is k14.RUNG), (rung.name, name)
            assert re.search(r"mma_(tf32|bf16|f16)\(", src), (rung.name, name)


# --- SASS of the gated presets (the compile gate's cubins: SIMT_TILES_GATE_CUBINS) ------------

#: HMMA share of the main loop's static SASS on the default presets (nvJitLink, CUDA 13.5): k13 384 of
#: 2207 (17.4%: each TF32 operand's cvt.rna is FSETP + IMAD, 768 instructions), k14 256 of 808 (31.7%)
MIN_HMMA_SHARE = {"k13_mma_tf32": 0.17, "k14_mma_bf16_precision=bf16": 0.30}


def hmma_loop(sass: str):
    """Opcode counts of the loop with the most HMMA: from a label to the backward branch to it."""
    import collections

    labels, ops, best = {}, [], collections.Counter()
    for line in sass.splitlines():
        label = re.match(r"\s*(\.L_x_\d+):", line)
        if label:
            labels[label[1]] = len(ops)
            continue
        op = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if op:
            ops.append((op[1], line))
    for i, (op, line) in enumerate(ops):
        target = re.search(r"\((\.L_x_\d+)\)", line) if op == "BRA" else None
        if target and labels.get(target[1], i + 1) <= i:
            body = collections.Counter(o for o, _ in ops[labels[target[1]]:i + 1])
            if body["HMMA"] > best["HMMA"]:
                best = body
    return best, [o for o, _ in ops]


@pytest.mark.parametrize("kernel", sorted(MIN_HMMA_SHARE))
def test_mma_rungs_sass_rules(kernel):
    """The default presets: no local memory, and HMMA at least MIN_HMMA_SHARE of the main loop."""
    gate = os.environ.get("SIMT_TILES_GATE_CUBINS")
    path = os.path.join(gate or "", f"{kernel}-default-float32.cubin")
    if not (gate and os.path.exists(path)):
        pytest.skip("needs the compile gate's cubins (SIMT_TILES_GATE_CUBINS)")
    from simt_tiles import compile_gate

    nvdisasm = next((os.path.join(os.path.dirname(p), "nvdisasm") for p in compile_gate._ptxas_candidates()
                     if os.access(os.path.join(os.path.dirname(p), "nvdisasm"), os.X_OK)), None)
    if nvdisasm is None:
        pytest.skip("no nvdisasm")
    sass = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True, check=True).stdout
    loop, ops = hmma_loop(sass)
    assert "LDL" not in ops and "STL" not in ops, (kernel, "local memory")
    assert loop["HMMA"] > 0 and loop["HMMA"] / sum(loop.values()) >= MIN_HMMA_SHARE[kernel], (kernel, loop.most_common(10))


# --- the public path: simt_tiles.matmul(precision=...) and 16-bit inputs -------------------------

def test_public_matmul_routes_to_the_tensor_cores():
    """``simt_tiles.matmul`` keeps FP32 for float32 unless asked (precision="tf32"), and takes
    float16 inputs to k14 with their own dtype out; each against the mma bound."""
    import simt_tiles

    m, n, k = 17, 9, 13
    a, b = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
    cfg = TF32_CONFIGS[0]
    got = simt_tiles.matmul(a, b, precision="tf32", config=cfg)
    np.testing.assert_array_equal(got, matmul_mma(a, b, precision="tf32", config=cfg))  # the same kernel
    rdt = ref_dtype()
    ref = a.astype(rdt) @ b.astype(rdt)
    bound = (np.abs(a.astype(rdt)) @ np.abs(b.astype(rdt))) * (mma_error_factor(k, "tf32") + 2 * k * float(np.finfo(rdt).eps))
    assert (np.abs(got - ref) <= bound).all()
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    h = simt_tiles.matmul(a16, b16, config=BF16_CONFIGS[0])
    assert h.dtype == np.float16 and h.shape == (m, n)
    np.testing.assert_array_equal(h, matmul_mma(a16, b16, config=BF16_CONFIGS[0]))
    with pytest.raises(ValueError, match="precision: expected one of"):
        simt_tiles.matmul(a, b, precision="fp8")
    with pytest.raises(TypeError, match="float32 .*bfloat16 or float16"):
        simt_tiles.matmul(a.astype(np.float64), b.astype(np.float64), precision="tf32")


@pytest.mark.sim  # simt_tiles.analyze runs in the simulator
def test_round_in_smem_has_no_races():
    """``round_in_smem`` 2 stores into shared memory between ``wait_group`` and the barrier: the race check sees
    every other warp's fragment loads behind that barrier (planted: the pass after the barrier — two races)."""
    from simt_tiles import analyze

    for shape in ("17x9x37", "7x5x9"):
        report = analyze.run("k13_mma_tf32", ladder="matmul_mma", config="round_in_smem=2", shape=shape)
        assert report.races == [] and not report.uninitialized and report.blocks > 0, report.format()


# --- fragments two k-slices ahead (``frag`` 2, 3; session 40) ----------------------------------------

#: three register sets need (bk/kstep)·stages a multiple of 3: 3 stages; 2 k-slices a tile (only the tile boundary
#: loads two slices) and 4 (slices two ahead inside the tile too); warps along M (0, 2) and along N (1)
FRAG_BASE = {"tf32": [dataclasses.replace(TF32_CONFIGS[0], stages=3), dataclasses.replace(TF32_CONFIGS[1], stages=3),
                      dataclasses.replace(TF32_CONFIGS[0], bk=32, stages=3, guards=3)],
             "bf16": [dataclasses.replace(BF16_CONFIGS[0], stages=3), dataclasses.replace(BF16_CONFIGS[1], stages=3),
                      dataclasses.replace(BF16_CONFIGS[0], bk=64, stages=3, guards=2)]}
FRAG_BASE["fp16"] = FRAG_BASE["bf16"]


def _call(a, b, precision, cfg):
    m, n = a.shape[0], b.shape[1]
    if precision == "bf16":
        return _bf16_call(a, b, np.full((m, n), 0x7FC0, np.uint16), cfg)
    out = np.full((m, n), np.nan, np.float32 if precision == "tf32" else np.float16)
    return np.asarray(matmul_mma(a, b, precision=precision, out=out, config=cfg))


@pytest.mark.skipif(PROFILE == "ci", reason="ci budget (frag 2/3 are in no preset): the full, dev and gpu profiles run it")
@settings(max_examples=examples(6))
@given(m=st.sampled_from(SIZES), n=st.sampled_from(SIZES + [40, 65]), k=st.sampled_from(SIZES + [13, 37, 65, 130]),
       which=st.integers(0, 2), frag=st.sampled_from([2, 3]), precision=st.sampled_from(["tf32", "bf16", "fp16"]))
@example(m=31, n=65, k=37, which=1, frag=2, precision="fp16")  # warps along N, 2 k tiles: fewer than the stages
@example(m=1, n=1, k=1, which=0, frag=2, precision="tf32")  # one tile, mostly zero-filled
def test_fragments_two_ahead_are_bit_identical(m, n, k, which, frag, precision):
    """``frag`` 2 (A's and B's fragments two k-slices ahead) and 3 (B's only) against 1: the same mma in the same
    order on every accumulator, so C is bit-identical; and within the bound, none unwritten (NaN-poisoned)."""
    _check_fragments(m, n, k, which, frag, precision)


@pytest.mark.skipif(PROFILE == "ci", reason="ci budget (~27 s of simulated mma): the full, dev and gpu profiles run it")
@pytest.mark.parametrize("m, n, k, which, frag, precision", [
    (17, 65, 130, 2, 2, "bf16"),  # 3 k tiles of 4 slices (a trip), K tail
    (33, 40, 65, 2, 3, "tf32"),  # 3 k tiles of 4 slices, B two ahead, A one
])
def test_fragments_two_ahead_over_a_whole_trip(m, n, k, which, frag, precision):
    """The property test's trips through all three register sets (its examples, each ~13 s in the simulator)."""
    _check_fragments(m, n, k, which, frag, precision)


def _check_fragments(m, n, k, which, frag, precision):
    off = FRAG_BASE[precision][which]
    on = dataclasses.replace(off, frag=frag)
    assert k13.kernel_name(on, precision) == k13.kernel_name(off, precision) + f"_f{frag}"
    a, b, a32, b32 = _inputs(m, n, k, precision)
    got_off, got_on = _call(a, b, precision, off), _call(a, b, precision, on)
    np.testing.assert_array_equal(got_on.view(np.uint16 if got_on.itemsize == 2 else np.uint32),
                                  got_off.view(np.uint16 if got_off.itemsize == 2 else np.uint32))
    got = mma.bits_to_f32(got_on, "bf16") if precision == "bf16" else got_on.astype(np.float32)
    assert_within_bound(got, a32, b32, precision, on)


def test_fragments_source_presets_and_rules():
    """``frag`` 1 (the field's default) is the source as before (pinned by the sources test below); 2 loads three
    register sets (names a2_*, b2_*) with the copies after the first slice's mma; 3 three of B's, two of A's; the
    presets and the bench's spec; the rule on (bk/kstep)·stages."""
    from simt_tiles.bench.mma import _rung_cfg

    assert k13.Config().frag == 1
    for rung in MMA_RUNGS.values():
        large = rung.presets["large"]
        src = {f: rung.source(dataclasses.replace(large, frag=f)) for f in (1, 2, 3)}
        assert "a2_0_0" not in src[1] and "b2_0_0" not in src[1]
        assert "a2_0_0" in src[2] and "b2_0_0" in src[2] and "a2_0_0" not in src[3] and "b2_0_0" in src[3]
        first_mma = src[2].index("mma_", src[2].index("while t < n_tiles"))
        assert src[2].index("cp_async16", src[2].index("while t < n_tiles")) > first_mma
    assert _rung_cfg("bf16:large,frag=2")[2] == dataclasses.replace(k14.PRESETS["large"], frag=2)
    assert _rung_cfg("tf32:default,frag=3")[2] == dataclasses.replace(k13.PRESETS["default"], frag=3)
    with pytest.raises(Exception, match="frag"):
        dataclasses.replace(k14.PRESETS["default"], frag=2)  # 2 slices a tile × 4 stages: 8 a trip
    with pytest.raises(Exception, match="frag"):
        k13.Config(frag=4)


@pytest.mark.sim  # simt_tiles.analyze runs in the simulator
@pytest.mark.skipif(PROFILE == "ci", reason="ci budget (frag 2/3 are in no preset): the full, dev and gpu profiles run it")
def test_fragments_two_ahead_have_no_races():
    """``frag`` 2 loads the next tile's first two slices after the barrier and the copies refill a stage only after
    every warp's last load of it: the race check finds nothing (K = 37: 3 tiles through 3 stages, each refilled)."""
    from simt_tiles import analyze

    for rung, cfg in (("k13_mma_tf32", "stages=3,frag=2"), ("k14_mma_bf16", "bk=64,stages=3,frag=2")):
        report = analyze.run(rung, ladder="matmul_mma", config=cfg, shape="17x9x150")
        assert report.races == [] and not report.uninitialized and report.blocks > 0, report.format()


# --- batched and 1-D products (np.matmul's shapes; the batched form, grid z) -----------------------

#: sha256 (first 16 hex digits) of the 2-D kernels' sources before the batched form (``batched`` 1, the
#: default): the batched generator must leave them byte-identical
SOURCES_BEFORE_BATCHED = {
    "k13_mma_tf32/sim/tf32": "dd14ce3f2e4655ed", "k13_mma_tf32/default/tf32": "5376fd18bc828717",
    "k13_mma_tf32/large/tf32": "60190b22b8d12d39", "k14_mma_bf16/sim/bf16": "26907a1f16ff4125",
    "k14_mma_bf16/sim/fp16": "b0bae92bebb5d927", "k14_mma_bf16/default/bf16": "638fd912a7b42fb5",
    "k14_mma_bf16/default/fp16": "192ec5387da6bfec", "k14_mma_bf16/large/bf16": "7d824403850a85bf",
    "k14_mma_bf16/large/fp16": "805f48f1ef9dc674",
}


def test_default_sources_are_byte_identical_and_the_batched_form_differs_only_where_it_must():
    """``batched`` 1 (every shipped preset but ``large_batched``) generates the sources pinned above; ``batched`` 2
    changes the signature, where m/k/lda/ldb come from, the operands' base addresses and C's row, nothing else."""
    import hashlib

    for rung, precs in ((k13.RUNG, ("tf32",)), (k14.RUNG, ("bf16", "fp16"))):
        for preset, cfg in rung.presets.items():
            for p in precs:
                if cfg.batched == 1 and cfg.frag == 1:
                    one = dataclasses.replace(cfg, guards=1)  # (the pins are guards 1's; SHIPPED_GUARDS: the presets')
                    digest = hashlib.sha256(rung.source(one, precision=p).encode()).hexdigest()[:16]
                    assert digest == SOURCES_BEFORE_BATCHED[f"{rung.name}/{preset}/{p}"], (rung.name, preset, p)
        assert rung.presets["large_batched"] == dataclasses.replace(rung.presets["large"], batched=2)
        cfg = rung.presets["sim"]
        two, one = (rung.source(dataclasses.replace(cfg, batched=z), precision=precs[0]).splitlines() for z in (2, 1))
        assert len(two) == len(one) + 2 * cfg.wm // 16  # `cr = ...` a row half of a fragment (2 lines for 2)
        changed = [ln for ln in two if ln not in one]
        assert any("(a, b, c, m, k_len, lda, ldb, sa, sb):" in ln for ln in changed)
        assert "    a0p = gaddr(a, I64(bz * sa)); b0p = gaddr(b, I64(bz * sb))" in changed
        assert all(re.search(r"def |batched form|bz = |gaddr|cr = |c\[cr, ", ln) for ln in changed), changed
    with pytest.raises(Exception, match="batched"):
        k13.Config(batched=3)


def _batch_inputs(a_shape, b_shape, precision):
    """Random operands of the given shapes in ``precision``'s input type, and their values as float32."""
    a = RNG.standard_normal(a_shape).astype(np.float32)
    b = RNG.standard_normal(b_shape).astype(np.float32)
    if precision == "tf32":
        return a, b, a, b
    to_bits = mma.bf16_bits if precision == "bf16" else mma.f16_bits
    ab, bb = to_bits(a), to_bits(b)
    if precision == "fp16":
        return ab.view(np.float16), bb.view(np.float16), mma.bits_to_f32(ab, "fp16"), mma.bits_to_f32(bb, "fp16")
    return ab, bb, mma.bits_to_f32(ab, "bf16"), mma.bits_to_f32(bb, "bf16")


def check_batched(a_shape, b_shape, precision, cfg, out_of=None):
    """matmul_mma on np.matmul's shapes against np.matmul of the rounded inputs in long double: the result's
    shape and dtype, every element within the mma bound, none unwritten (NaN-poisoned out=)."""
    a, b, a32, b32 = _batch_inputs(a_shape, b_shape, precision)
    rdt = ref_dtype()
    ref = np.matmul(a32.astype(rdt), b32.astype(rdt))
    if precision == "bf16":
        got = mma.bits_to_f32(_bf16_call(a, b, np.full(ref.shape, 0x7FC0, np.uint16), cfg), "bf16")
    else:
        dt = np.float32 if precision == "tf32" else np.float16
        res = matmul_mma(a, b, precision=precision, config=cfg, out=np.full(ref.shape, np.nan, dt))
        assert res.dtype == dt
        got = np.asarray(res, np.float32)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    k = a_shape[-1]
    absprod = np.matmul(np.abs(a32.astype(rdt)), np.abs(b32.astype(rdt)))
    f = mma_error_factor(k, precision, rounds_inputs=precision == "tf32", rounds_output=precision != "tf32")
    bound = absprod * (f + 2 * max(k, 1) * float(np.finfo(rdt).eps))
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) outputs"
    err = np.abs(got.astype(rdt) - ref)
    assert (err <= bound).all(), (a_shape, b_shape, precision, float((err / np.maximum(bound, 1e-300)).max()))


#: (a's batch, b's batch): stride-0 broadcasts on either side, several batch dimensions, an empty batch
BATCHES = [((3,), (3,)), ((3,), ()), ((), (2,)), ((1,), (3,)), ((2, 1), (1, 3)), ((2, 3), (3,)), ((0,), (0,)),
           ((2, 2), ())]
#: ragged M, N, K for the sim presets (tile 32): 1, primes, tile ± 1, empty; None: a 1-D operand there
DIMS = [0, 1, 7, 13, 31, 33]


@settings(max_examples=examples(10))
@given(batches=st.sampled_from(BATCHES), m=st.sampled_from(DIMS + [None]), n=st.sampled_from(DIMS + [None]),
       k=st.sampled_from(DIMS[1:] + [0]), precision=st.sampled_from(["tf32", "bf16", "fp16"]))
@example(batches=((3,), (1,)), m=17, n=13, k=37, precision="tf32")  # b broadcast (stride 0); 3 k tiles, ragged
@example(batches=((1,), (3,)), m=33, n=9, k=13, precision="bf16")  # a broadcast, 2 row blocks; K padded
@example(batches=((2, 1), (1, 3)), m=5, n=31, k=8, precision="fp16")  # outer dimension: a loop of 2 launches
@example(batches=((), (2,)), m=None, n=7, k=13, precision="tf32")  # x @ W (1-D x, a batch of W)
@example(batches=((2,), ()), m=3, n=None, k=8, precision="fp16")  # A @ v
@example(batches=((), ()), m=None, n=None, k=9, precision="bf16")  # dot: a 0-D result
@example(batches=((0,), (1,)), m=5, n=3, k=4, precision="tf32")  # an empty batch
@example(batches=((2,), (2,)), m=4, n=5, k=0, precision="fp16")  # K = 0: zeros
def test_batched_matmul_property(batches, m, n, k, precision):
    (ba, bb) = batches
    a_shape = (k,) if m is None else ba + (m, k)
    b_shape = (k,) if n is None else bb + (k, n)
    cfg = TF32_CONFIGS[0] if precision == "tf32" else BF16_CONFIGS[0]
    check_batched(a_shape, b_shape, precision, cfg)


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_batched_warps_along_n_and_guards(precision):
    """The batched form of the configs with warps along N and hoisted guards: edges in every direction."""
    cfg = dataclasses.replace((TF32_CONFIGS if precision == "tf32" else BF16_CONFIGS)[1], guards=3)
    check_batched((2, 17, 19), (1, 19, 65), precision, cfg)


def _no_copies(monkeypatch):
    """Any copy of an operand (C order or padding) fails the test; returns the list of launched grids."""
    from simt_tiles.kernels.matmul import _strided
    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    from .common import grid_limit

    def refuse(*a, **k):
        raise AssertionError("an operand was copied")

    for mod, name in ((_strided, "contiguous_copy"), (k11, "copy_padded"), (k13, "pad_rows"), (k13, "pad_batch")):
        monkeypatch.setattr(mod, name, refuse)
    return grid_limit(monkeypatch, y=65535, z=65535)


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_strided_batches_are_read_in_place_in_one_launch(precision, monkeypatch):
    """Batches of C-contiguous matrices with any batch stride are not copied: a slice of a taller batch (stride
    (M + 3)·K), a stride-0 broadcast (NumPy's broadcast_to as a Numba view), in one launch of the batched form."""
    from simt_tiles.interop import device_view

    m, n, k, nb = 9, 8, 16, 3  # rows of 16-byte multiples: nothing to pad
    cfg = TF32_CONFIGS[0] if precision == "tf32" else BF16_CONFIGS[0]
    dt = np.float32 if precision == "tf32" else np.float16
    a, _, a32, _ = _batch_inputs((nb, m + 3, k), (1,), precision)
    _, b, _, b32 = _batch_inputs((1,), (k, n), precision)
    da, db = cuda.to_device(a), cuda.to_device(b)
    es = np.dtype(dt).itemsize
    a_view = da[:, :m, :]  # batch stride (m + 3)·k
    b_view = device_view(db, (nb, k, n), (0, n * es, es))  # stride 0
    grids = _no_copies(monkeypatch)
    got = matmul_mma(a_view, b_view, precision=precision, config=cfg)
    assert [g for g in grids if g[2] > 1] == [(1, 1, nb)] and len(grids) == 1, grids
    rdt = ref_dtype()
    ref = np.matmul(a32[:, :m].astype(rdt), b32.astype(rdt))
    f = mma_error_factor(k, precision, rounds_inputs=precision == "tf32", rounds_output=precision != "tf32")
    bound = np.matmul(np.abs(a32[:, :m].astype(rdt)), np.abs(b32.astype(rdt))) * (f + 2 * k * float(np.finfo(rdt).eps))
    assert (np.abs(got.copy_to_host().astype(rdt) - ref) <= bound).all()


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_padded_strided_batches_copy_in_one_launch_per_grid_z_piece(precision, monkeypatch):
    """Batches apart by a stride other than a matrix, with rows of no 16-byte multiple (K = 13): every matrix is
    padded by one launch of ``pad_batch`` per ``MAX_GRID_Z`` matrices (2 here: 5 matrices, 3 pieces), not a launch
    per matrix; the product is then right everywhere."""
    from .common import grid_limit

    m, n, k, nb = 7, 8, 13, 5
    cfg = TF32_CONFIGS[0] if precision == "tf32" else BF16_CONFIGS[0]
    a, b, a32, b32 = _batch_inputs((nb, m + 2, k), (k, n), precision)
    monkeypatch.setattr(k13, "MAX_GRID_Z", 2)
    grids = grid_limit(monkeypatch, y=65535, z=2)
    pads, pad = [], k13.pad_batch
    monkeypatch.setattr(k13, "pad_batch", type("P", (), {"__getitem__": lambda s, c: pads.append(c[0]) or pad[c]})())
    got = matmul_mma(cuda.to_device(a)[:, :m], b, precision=precision, config=cfg)  # batch stride (m + 2)·k
    assert [g[2] for g in pads] == [2, 2, 1], pads
    assert len(grids) >= 3
    rdt = ref_dtype()
    ref = np.matmul(a32[:, :m].astype(rdt), b32.astype(rdt))
    f = mma_error_factor(k, precision, rounds_inputs=precision == "tf32", rounds_output=precision != "tf32")
    bound = np.matmul(np.abs(a32[:, :m].astype(rdt)), np.abs(b32.astype(rdt))) * (f + 2 * k * float(np.finfo(rdt).eps))
    assert (np.abs(np.asarray(got.copy_to_host(), rdt) - ref) <= bound).all()


def test_transposed_batches_are_copied_once_into_c_order():
    """A batch of transposed matrices (np.swapaxes: column-major in each batch) is copied into C order first."""
    a, b, a32, b32 = _batch_inputs((2, 7, 13), (2, 9, 13), "tf32")
    bt, bt32 = np.swapaxes(b, -1, -2), np.swapaxes(b32, -1, -2)
    got = matmul_mma(a, bt, precision="tf32", config=TF32_CONFIGS[0])
    rdt = ref_dtype()
    ref = np.matmul(a32.astype(rdt), bt32.astype(rdt))
    bound = np.matmul(np.abs(a32.astype(rdt)), np.abs(bt32.astype(rdt))) * (mma_error_factor(13, "tf32") + 26 * float(np.finfo(rdt).eps))
    assert got.shape == (2, 7, 9) and (np.abs(got - ref) <= bound).all()


def test_a_broadcast_transposed_matrix_is_copied_once(monkeypatch):
    """A stride-0 batch of one transposed matrix (a Numba view): one copy into C order, then read with stride 0."""
    from simt_tiles.interop import device_view
    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    copies, copy = [], k11.copy_padded
    monkeypatch.setattr(k11, "copy_padded", lambda *a: copies.append(a[1].shape) or copy(*a))
    a, b, a32, b32 = _batch_inputs((5, 7), (7, 3), "tf32")
    da = cuda.to_device(np.ascontiguousarray(a.T))
    at = device_view(da, (4, 5, 7), (0, 4, 20))  # 4 batches of a, each column-major
    got = matmul_mma(at, b, precision="tf32", config=TF32_CONFIGS[0])
    assert copies == [(5, 7)], copies
    rdt = ref_dtype()
    ref = np.broadcast_to(a32.astype(rdt) @ b32.astype(rdt), (4, 5, 3))
    bound = np.abs(a32.astype(rdt)) @ np.abs(b32.astype(rdt)) * (mma_error_factor(7, "tf32") + 14 * float(np.finfo(rdt).eps))
    assert got.shape == (4, 5, 3) and (np.abs(got - ref) <= bound).all()


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_batches_past_grid_z_launch_in_pieces(precision, monkeypatch):
    """More batches than grid z takes (here a cap of 2) launch in pieces of 2, 2, 1; every piece's C written (a
    skipped piece leaves NaN), A's pieces from their own batch (B broadcast, stride 0)."""
    from .common import grid_limit

    monkeypatch.setattr(k13, "MAX_GRID_Z", 2)
    grids = grid_limit(monkeypatch, y=65535, z=2)
    check_batched((5, 7, 16), (16, 8), precision, (TF32_CONFIGS if precision == "tf32" else BF16_CONFIGS)[0])
    assert [g[2] for g in grids if len(g) == 3 and g[0] == 1 and g[1] == 1][-3:] == [2, 2, 1], grids


def test_batched_bad_shapes_name_the_argument():
    a = np.ones((2, 4, 5), np.float16)
    with pytest.raises(ValueError, match=r"b: batch dimensions \(3,\) do not broadcast with a's \(2,\)"):
        matmul_mma(a, np.ones((3, 5, 4), np.float16))
    with pytest.raises(ValueError, match=r"b: expected shape \(\.\.\., 5, N\) since a has shape \(2, 4, 5\)"):
        matmul_mma(a, np.ones((2, 4, 4), np.float16))
    with pytest.raises(ValueError, match=r"b: expected shape \(5,\)"):
        matmul_mma(a, np.ones(4, np.float16))
    with pytest.raises(ValueError, match="a: expected an array of at least 1 dimension; got 0-D"):
        matmul_mma(np.float16(1), a)
    with pytest.raises(ValueError, match="a: expected an array of at least 1 dimension"):
        matmul_mma(np.array(1, np.float32), np.ones((1, 2), np.float32), precision="tf32")
    with pytest.raises(ValueError, match=r"out: expected shape \(2, 4, 4\); got \(4, 4\)"):
        matmul_mma(a, np.ones((5, 4), np.float16), out=np.ones((4, 4), np.float16))
    with pytest.raises(ValueError, match=r"out: expected shape \(2, 4, 4\)"):
        matmul_mma(a.astype(np.float32), np.ones((5, 4), np.float32), precision="tf32",
                   out=np.ones((4, 4), np.float32))


def test_batched_out_must_not_overlap_an_input():
    """out= of the result's shape that is an input's memory: ValueError naming out (the FP32 path's rule)."""
    x = cuda.to_device(np.ones((2, 8, 8), np.float16))
    with pytest.raises(ValueError, match="out: overlaps a"):
        matmul_mma(x, np.ones((8, 8), np.float16), out=x)


def test_config_choice_counts_a_batch_as_its_tiles():
    """choose_config: a batch is its products' tiles together (batches × one product's), the large tile from
    LARGE_TILES of them; attention's 32 × (512×64 @ 64×512) in BF16 is 256 tiles of 256 × 128: the default."""
    from simt_tiles.kernels.matmul import mma as mma_mod

    for rung in MMA_RUNGS.values():
        large, default = rung.presets["large"], rung.presets["default"]
        one = -(-512 // large.bm) * -(-512 // large.bn)
        choose = lambda m, n, b: mma_mod.choose_config(rung, None, m, n, simulator=False, batches=b)  # noqa: E731
        assert choose(512, 512, 1) == default and choose(512, 512, -(-mma_mod.LARGE_TILES // one)) == large
        assert choose(512, 512, mma_mod.LARGE_TILES // one - (mma_mod.LARGE_TILES % one == 0)) == default
    assert mma_mod.choose_config(k14.RUNG, None, 512, 512, simulator=False, batches=32) == k14.PRESETS["default"]
    for rung in MMA_RUNGS.values():  # many small products: never the large tile (half of it on a side is the edge)
        large = rung.presets["large"]
        choose = lambda m, n, b: mma_mod.choose_config(rung, None, m, n, simulator=False, batches=b)  # noqa: E731
        assert choose(64, 64, 100_000) == choose(large.bm // 2 - 1, 4096, 10_000) == rung.presets["default"]
        assert choose(4096, large.bn // 2 - 1, 10_000) == rung.presets["default"]
        assert choose(large.bm // 2, large.bn // 2, 10_000) == large


@pytest.mark.sim  # simt_tiles.analyze runs in the simulator
def test_batched_form_has_no_races():
    """The batched form under the race check: a batch of 2 (grid z), and one product on ``batched=2``."""
    from simt_tiles import analyze

    for rung, shape in (("k13_mma_tf32", "2x17x9x13"), ("k14_mma_bf16", "2x7x5x37"), ("k13_mma_tf32", "7x5x9")):
        report = analyze.run(rung, ladder="matmul_mma", config="batched=2", shape=shape)
        assert report.races == [] and not report.uninitialized and report.blocks > 0, report.format()


def test_a_bf16_config_is_not_a_tf32_one():
    """k14's Config subclasses k13's; given to the TF32 rung its 2-byte k-steps made misaligned copies of
    float32 rows (the simulator's cp.async check; a fault on a GPU): a TypeError naming config now."""
    a, b = np.ones((5, 9), np.float32), np.ones((9, 7), np.float32)
    with pytest.raises(TypeError, match="^config: expected a preset name or a .*k13_mma_tf32.Config"):
        matmul_mma(a, b, precision="tf32", config=k14.PRESETS["sim"])
