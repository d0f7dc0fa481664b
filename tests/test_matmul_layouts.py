"""matmul on the operands users bring (issue 32): row- or column-major operands with any leading
dimension (NumPy/CuPy ``.T`` views, torch ``.t()``, column slices of a wider matrix) without
copies, ``np.matmul``'s 1-D promotion and broadcast batches, the errors and the aliasing rule.

Every result is checked against ``np.matmul`` in long double with the γ_K·|A|·|B| bound, into a
NaN-poisoned ``out=``.  The simulator runs the ``"sim"`` tile (32×32, two warps) with K split 1-2
ways; shapes straddle it (1, primes, 4·j ± 1) so both the 128-bit and the scalar loaders run.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from contextlib import nullcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda  # noqa: F401  (module level: the simulator swaps this global)

import simt_tiles
from simt_tiles import launch
from simt_tiles.bounds import check_within, gamma, ref_dtype, unit_roundoff
from simt_tiles.kernels.matmul import _layouts, _strided, dispatch, k15_gemv
from simt_tiles.kernels.matmul.k11_generated_split_k import PRESETS
from simt_tiles.runtime import SIMULATOR

from .common import DTYPES, poisoned, transposed
from .profiles import examples

LAYOUTS = _layouts.LAYOUTS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 17, 31, 33, 36] if SIMULATOR else
                        [1, 3, 4, 17, 64, 127, 128, 129, 257, 500])


def reference(a, b):
    """``(ref, bound)`` of ``np.matmul(a, b)``: long double, γ_K(u) + γ_K(u_ref) of |A|·|B|."""
    rdt = ref_dtype()
    k = a.shape[-1]
    ar, br = a.astype(rdt), b.astype(rdt)
    g_ref = gamma(k, unit_roundoff(rdt))
    factor = (gamma(k, unit_roundoff(a.dtype)) + g_ref) * (1 + 2 * g_ref)
    return np.matmul(ar, br), np.matmul(np.abs(ar), np.abs(br)) * factor


def assert_np_matmul(got, a, b):
    ref, bound = reference(a, b)
    assert np.shape(got) == ref.shape, (np.shape(got), ref.shape)
    chk = check_within(np.asarray(got), ref, bound)
    assert chk.passed, f"{chk} for a{a.shape} b{b.shape} {a.dtype}"


def stored(rng, rows, cols, trans, dtype, pad=0, offset=0):
    """``(host, device)``: a rows×cols matrix, as a device view stored row-major (``trans=False``)
    or column-major (``x.T`` of a cols×rows array), inside storage ``pad`` elements wider than its
    contiguous extent (a column slice) and ``offset`` elements from the start (unaligned)."""
    inner, outer = (rows, cols) if trans else (cols, rows)
    size = outer * (inner + pad)
    buf = np.full(size + offset + 1, np.nan, dtype)  # what the view must not read: NaN (one past: never empty)
    full = buf[offset:offset + size].reshape(outer, inner + pad)
    full[:, :inner] = rng.standard_normal((outer, inner))
    dev = cuda.to_device(buf)[offset:offset + size].reshape(outer, inner + pad)[:, :inner]
    host = full[:, :inner]
    return (host.T, transposed(dev)) if trans else (host, dev)


def run_layout(rng, layout, m, n, k, dtype, pad=0, offset=0, **kw):
    a, da = stored(rng, m, k, layout[0] == "t", dtype, pad, offset)
    b, db = stored(rng, k, n, layout[1] == "t", dtype, pad, 0)
    out = poisoned((m, n), dtype)
    got = simt_tiles.matmul(da, db, out=out, **kw)
    assert got is out
    assert_np_matmul(out.copy_to_host(), np.ascontiguousarray(a), np.ascontiguousarray(b))


# --- layouts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_on_the_128_bit_path(layout, dtype):
    """Extents and leading dimensions multiples of 4: the vector build, K tail and M/N edges."""
    run_layout(np.random.default_rng(1), layout, 36, 8, 20, dtype, pad=4)


@settings(max_examples=examples(24), deadline=None)
@given(layout=st.sampled_from(LAYOUTS), dtype=st.sampled_from(DTYPES), m=SIZES, n=SIZES, k=st.sampled_from([0, 1, 5, 16, 17, 35]),
       pad=st.sampled_from([0, 1, 4]), offset=st.sampled_from([0, 1]), splits=st.integers(1, 2),
       seed=st.integers(0, 2**16))
def test_layouts_match_np_matmul(layout, dtype, m, n, k, pad, offset, splits, seed):
    """Every layout × dtype × ragged shape × leading dimension × alignment, K split 1-2 ways."""
    cfg = dataclasses.replace(PRESETS["sim" if SIMULATOR else "default"], splits=splits)
    run_layout(np.random.default_rng(seed), layout, m, n, k, dtype, pad, offset,
               variant="k11_generated_split_k", config=cfg)


def test_transposed_views_run_the_layout_kernel_without_copies(monkeypatch):
    """``x @ w.T`` and ``a.T @ b`` launch the layout kernel once on the callers' storage."""
    launched, copied = [], []
    real_launch = _strided._launch
    monkeypatch.setattr(_strided, "_launch", lambda *a, **k: launched.append(a[2]) or real_launch(*a, **k))
    monkeypatch.setattr(_strided, "contiguous_copy", lambda *a, **k: copied.append(1))
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((66, 12), np.float32), rng.standard_normal((70, 12), np.float32)  # past k15's class
    got = simt_tiles.matmul(cuda.to_device(x), transposed(cuda.to_device(w))).copy_to_host()
    assert_np_matmul(got, x, np.ascontiguousarray(w.T))
    p = rng.standard_normal((12, 66), np.float32)
    got = simt_tiles.matmul(p.T, w.T)  # NumPy views are uploaded as they lie: the same kernel
    assert_np_matmul(got, np.ascontiguousarray(p.T), np.ascontiguousarray(w.T))
    assert launched == ["nt", "tt"] and not copied


@pytest.mark.parametrize("m, n, k, splits", [(8, 13, 35, 1), (36, 20, 17, 2), (12, 3, 5, 1), (4, 33, 0, 1)])
def test_tn_runs_k12_on_the_callers_storage(m, n, k, splits, monkeypatch):
    """``a.T @ b`` (the backward pass's dW = dYᵀ·X) with a C-order K × M ``a`` (M a multiple of 4) and a
    C-order ``b``: k12 reads a's storage as its Aᵀ, no transposition and no layout kernel; ragged N
    padded by k12, K split and summed, K = 0 zeros."""
    k12 = dispatch.RUNGS["k12_async_copy"]
    given_at, launched = [], []
    real = type(k12).run_transposed
    monkeypatch.setattr(type(k12), "run_transposed", lambda self, cfg, at, *rest: given_at.append(at.shape)
                        or real(self, cfg, at, *rest))
    monkeypatch.setattr(_strided, "_launch", lambda *a, **kw: launched.append(a[2]))  # the layout kernel: not run
    rng = np.random.default_rng(m * n + k)
    a, da = stored(rng, m, k, True, np.float32)
    b, db = stored(rng, k, n, False, np.float32)
    out = poisoned((m, n), np.float32)
    cfg = dataclasses.replace(k12.presets["sim" if SIMULATOR else "64x64"], splits=splits)
    simt_tiles.matmul(da, db, out=out, variant="k12_async_copy", config=cfg)
    assert_np_matmul(out.copy_to_host(), np.ascontiguousarray(a), np.ascontiguousarray(b))
    assert given_at == [(k, m)] and not launched


@pytest.mark.parametrize("m, n, k, splits", [
    (9, 12, 35, 1), (37, 20, 17, 2),
    pytest.param(5, 4, 0, 1, marks=pytest.mark.skipif(
        not SIMULATOR, reason="on a GPU the call asks for a (1, 1) out: the helper's empty views come out (1, 0), "
        "numba-cuda's slicing of an empty device array (confirmed on the GPU: benchmarks/notes/matmul.md)"))])
def test_nt_over_many_rows_copies_b_for_k12(m, n, k, splits, monkeypatch):
    """``x @ w.T`` from NT_COPY_ROWS rows of x (here 1) with x and w C-order and N a multiple of 4: w
    copied once into k12's B (K × N), then k12 as for NN; no layout kernel."""
    monkeypatch.setattr(dispatch, "NT_COPY_ROWS", 1)
    launched = []
    monkeypatch.setattr(_strided, "_launch", lambda *a, **kw: launched.append(a[2]))  # the layout kernel: not run
    rng = np.random.default_rng(m * n + k)
    x, dx = stored(rng, m, k, False, np.float32)
    w, dw = stored(rng, k, n, True, np.float32)
    out = poisoned((m, n), np.float32)
    cfg = dataclasses.replace(dispatch.RUNGS["k12_async_copy"].presets["sim" if SIMULATOR else "64x64"], splits=splits)
    simt_tiles.matmul(dx, dw, out=out, variant="k12_async_copy", config=cfg)
    assert_np_matmul(out.copy_to_host(), np.ascontiguousarray(x), np.ascontiguousarray(w))
    assert not launched
    monkeypatch.setattr(dispatch, "NT_COPY_ROWS", m + 1)  # fewer rows: the layout kernel (K = 0: no launch)
    launch.clear()  # (on a GPU the first call's launch plan would replay)
    simt_tiles.matmul(dx, dw, out=out, variant="k12_async_copy", config=cfg)
    assert launched == (["nt"] if k else [])


@pytest.mark.parametrize("m, pad, offset", [(6, 0, 0), (8, 4, 0), (8, 0, 1)])
def test_tn_off_k12s_layout_takes_the_layout_kernel(m, pad, offset, monkeypatch):
    """``a.T @ b`` whose storage is not k12's Aᵀ (M not a multiple of 4, a column slice, unaligned) runs
    the layout kernel, which reads any leading dimension."""
    launched = []
    real = _strided._launch
    monkeypatch.setattr(_strided, "_launch", lambda *a, **kw: launched.append(a[2]) or real(*a, **kw))
    rng = np.random.default_rng(m + pad + offset)
    a, da = stored(rng, m, 9, True, np.float32, pad, offset)
    b, db = stored(rng, 9, 12, False, np.float32)
    out = poisoned((m, 12), np.float32)
    cfg = dispatch.RUNGS["k12_async_copy"].presets["sim" if SIMULATOR else "64x64"]
    simt_tiles.matmul(da, db, out=out, variant="k12_async_copy", config=cfg)
    assert_np_matmul(out.copy_to_host(), np.ascontiguousarray(a), np.ascontiguousarray(b))
    assert launched == ["tn"]


def test_other_strides_are_copied_once():
    """Neither stride 1 (every other column) or a negative stride: one copy, then the product."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 10)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    got = simt_tiles.matmul(cuda.to_device(a)[:, ::2], cuda.to_device(b)).copy_to_host()
    assert_np_matmul(got, np.ascontiguousarray(a[:, ::2]), b)
    got = simt_tiles.matmul(a[:, ::-2], b)  # NumPy: made contiguous on the host
    assert_np_matmul(got, np.ascontiguousarray(a[:, ::-2]), b)


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's arrays keep NumPy's stride-0 views")
def test_a_broadcast_operand_is_copied_by_its_strides_not_its_contiguity_flag():
    """``contiguous_copy`` decides by the strides: a (3, 5) view repeating each of 3 values along its row
    (strides (1, 0)) is copied value by value, even when the array says it is C-contiguous."""
    base = np.arange(1, 16, dtype=np.float32)
    view = np.lib.stride_tricks.as_strided(base, shape=(3, 5), strides=(4, 0))
    plain = cuda.to_device(view)

    class ClaimsContiguous(type(plain)):  # numba-cuda's answer for a broadcast array, and its reshape refused
        def is_c_contiguous(self):
            return True

        def reshape(self, *shape):
            raise AssertionError(f"reshape{shape} of a broadcast view: it would read past its one row")

    dev = ClaimsContiguous(plain._ary, 0)
    got = _strided.contiguous_copy(dev, (3, 5), (1, 0), np.float32, 0, "broadcast_copy")
    np.testing.assert_array_equal(got.copy_to_host(), np.ascontiguousarray(view))
    assert _strided._in_c_order((1, 4, 5), (7, 5, 1)) and _strided._in_c_order((4, 1), (1, 9))
    assert not _strided._in_c_order((3, 5), (1, 0)) and not _strided._in_c_order((2, 3), (1, 2))


def test_a_negative_batch_stride_is_copied():
    """A device batch read backwards (``x[::-1]``): its matrices lie before element 0 of the view, so the copy's
    views start at negative offsets (the simulator once refused them: "negative dimensions are not allowed")."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 5, 2))
    for variant in (None, "k03_smem_tiled"):
        got = simt_tiles.matmul(cuda.to_device(a)[::-1], cuda.to_device(b)[:, ::-1], variant=variant)
        assert_np_matmul(got.copy_to_host(), np.ascontiguousarray(a[::-1]), np.ascontiguousarray(b[:, ::-1]))


@pytest.mark.parametrize("variant", ["k01_naive", "k03_smem_tiled", "k10_warptiled"])
@pytest.mark.parametrize("sa, sb", [((2, 3, 0), (0, 4)), ((3, 0), (2, 0, 4)), ((0,), (0, 4)), ((3, 0), (0,))])
def test_a_named_rung_with_an_empty_inner_dimension(sa, sb, variant):
    """K = 0 on the batched and 1-D path with a rung that reads C-order copies: zeros, as np.matmul (the
    copies' reshape once failed: "cannot reshape array of size 0 into shape (3,0)")."""
    a, b = np.ones(sa), np.ones(sb)
    out = poisoned(np.matmul(a, b).shape, np.float64)
    simt_tiles.matmul(cuda.to_device(a), cuda.to_device(b), out=out, variant=variant)
    np.testing.assert_array_equal(out.copy_to_host(), np.matmul(a, b))


def test_a_named_lesser_rung_gets_c_order_copies():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 7, 5)), rng.standard_normal((6, 5))
    got = simt_tiles.matmul(a, transposed(cuda.to_device(b)), variant="k03_smem_tiled")  # a's kind: NumPy
    assert_np_matmul(got, a, np.ascontiguousarray(b.T))


def test_out_overlapping_a_transposed_view_is_refused():
    buf = cuda.to_device(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"out: overlaps a in memory"):
        simt_tiles.matmul(transposed(buf), cuda.to_device(np.ones((4, 4), np.float32)), out=buf)
    with pytest.raises(ValueError, match=r"out: overlaps b in memory"):
        simt_tiles.matmul(np.ones((4, 4), np.float32), transposed(buf), out=buf)


# --- NumPy semantics ----------------------------------------------------------------------------

BATCH_CASES = [
    ((4, 5, 6), (6, 3)),  # a batch against one matrix (B's batch stride 0)
    ((6,), (4, 6, 3)),  # a 1-D a against a batch
    ((2, 1, 5, 6), (3, 6, 4)),  # broadcast on both sides: a loop over the dimension that does not merge
    ((4, 5, 6), (6,)),  # batch @ vector
    ((6,), (6,)),  # a scalar
    ((5, 6), (6,)),
    ((0, 5, 6), (6, 3)),  # an empty batch
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("sa, sb", BATCH_CASES, ids=lambda s: "x".join(map(str, s)))
def test_np_matmul_semantics(sa, sb, dtype):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
    if dtype == np.float64:  # NumPy in, NumPy out
        assert_np_matmul(simt_tiles.matmul(a, b), a, b)
        return
    got = simt_tiles.matmul(cuda.to_device(a), cuda.to_device(b))
    assert_np_matmul(got.copy_to_host(), a, b)


def test_a_vector_dot_is_numpys_scalar_and_dtype_errors_say_why():
    """v @ v from NumPy: NumPy's scalar of the dtype (a 0-d array before), FP32, TF32 and 16-bit alike; a dtype
    error lists the 16-bit dtypes too, and a second operand of another accepted dtype is named as not a's."""
    v = np.arange(1.0, 4.0)
    for x, kw in ((v.astype(np.float32), {}), (v, {}), (v.astype(np.float32), {"precision": "tf32"}),
                  (v.astype(np.float16), {})):
        got = simt_tiles.matmul(x, x, **kw)
        assert type(got) is x.dtype.type and got == 14, (x.dtype, kw, got)
    out = np.full((), np.nan, np.float32)
    assert simt_tiles.matmul(v.astype(np.float32), v.astype(np.float32), out=out) is out and out == 14
    a = np.ones((3, 5), np.float32)
    with pytest.raises(TypeError, match=r"^a: expected dtype float32, float64, bfloat16 or float16; got int16"):
        simt_tiles.matmul(a.astype(np.int16), a.T.astype(np.float16))
    with pytest.raises(TypeError, match=r"^b: expected dtype float32 \(the dtype of a\); got float16"):
        simt_tiles.matmul(a, a.T.astype(np.float16))
    with pytest.raises(ValueError, match=r"^precision: .* leave variant None or name one of MATMUL_VARIANTS"):
        simt_tiles.matmul(a, a.T.copy(), variant="k13_mma_tf32")


def test_transposed_batches_run_in_one_launch(monkeypatch):
    """Attention's ``q @ k.T`` per head: both operands batched, B column-major; one launch, z over batches."""
    calls = []
    real_launch = _strided._launch
    monkeypatch.setattr(_strided, "_launch", lambda *a, **k: calls.append(a[-2]) or real_launch(*a, **k))
    rng = np.random.default_rng(6)
    q, kk = rng.standard_normal((3, 9, 8)).astype(np.float32), rng.standard_normal((3, 10, 8)).astype(np.float32)
    out = poisoned((3, 9, 10), np.float32)
    simt_tiles.matmul(cuda.to_device(q), transposed(cuda.to_device(kk), (0, 2, 1)), out=out)
    assert_np_matmul(out.copy_to_host(), q, np.ascontiguousarray(kk.transpose(0, 2, 1)))
    assert calls == [3]  # nb


def test_collapse_merges_what_strides_allow():
    assert _strided.collapse((2, 3), (12, 4), (0, 0)) == ((), 6, 4, 0)
    assert _strided.collapse((2, 3), (4, 0), (0, 7)) == (((2, 4, 0),), 3, 0, 7)
    assert _strided.collapse((5, 1), (1, 9), (2, 3)) == ((), 5, 1, 2)


@pytest.mark.parametrize("a, b, pattern", [
    ((2, 3), (4, 2), r"b: expected shape \(\.\.\., 3, N\) since a has shape \(2, 3\).*got \(4, 2\)"),
    ((3,), (4,), r"b: expected shape \(3,\) since a has shape \(3,\).*got \(4,\)"),
    ((2, 5, 3), (4, 3, 2), r"b: batch dimensions \(4,\) do not broadcast with a's \(2,\)"),
    ((), (3,), r"a: expected an array of at least 1 dimension; got 0-D"),
])
def test_bad_shapes_name_the_argument(a, b, pattern):
    with pytest.raises(ValueError, match=pattern):
        simt_tiles.matmul(np.ones(a, np.float32), np.ones(b, np.float32))


def test_layout_plan_follows_the_stacked_problem():
    """A batch of B products is tiled like one (B·M)×N×K problem; float64 stays on the layout kernel."""
    p = dispatch.layout_plan(None, None, 512, 64, 64, 64, np.float32, "nt")
    q = dispatch.plan(None, None, 512 * 64, 64, 64, np.float32)
    assert p.config == q.config
    assert dispatch.layout_plan(None, None, 8, 8, 8, 1, np.float64, "tn").rung.name == "k11_generated_split_k"
    assert dispatch.layout_plan("k03_smem_tiled", None, 8, 8, 8, 1, np.float32, "tn") is None


# --- on the GPU: torch and CuPy views -----------------------------------------------------------


@pytest.mark.gpu
def test_torch_linear_layer_and_backward_views():
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(300, 256, device="cuda", generator=g)
    w = torch.randn(129, 256, device="cuda", generator=g)
    for _ in range(2):  # the second call replays the launch plan
        y = simt_tiles.matmul(x, w.t())
        assert isinstance(y, torch.Tensor)
        assert_np_matmul(y.cpu().numpy(), x.cpu().numpy(), w.t().cpu().numpy())
    dw = simt_tiles.matmul(y.t(), x)  # dW = dYᵀ·X
    assert_np_matmul(dw.cpu().numpy(), y.t().cpu().numpy(), x.cpu().numpy())
    wide = torch.randn(256, 200, device="cuda", generator=g)
    got = simt_tiles.matmul(x, wide[:, 8:136])  # a column slice: leading dimension 200
    assert_np_matmul(got.cpu().numpy(), x.cpu().numpy(), wide[:, 8:136].cpu().numpy())


@pytest.mark.gpu
def test_cupy_transposed_batches():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((8, 130, 64), np.float32), rng.standard_normal((8, 131, 64), np.float32)
    got = simt_tiles.matmul(cp.asarray(q), cp.asarray(k).transpose(0, 2, 1))
    assert_np_matmul(cp.asnumpy(got), q, np.ascontiguousarray(k.transpose(0, 2, 1)))


@pytest.mark.gpu
def test_zero_stride_numba_operands():
    """Numba device views with strides (0, 0) and (0, 1) read in place (their own strides: Numba's
    interface reports a broadcast array as C-contiguous), both sides, twice (a plan's replay)."""
    from simt_tiles.interop import device_view

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 4), np.float32), rng.standard_normal((4, 2), np.float32)
    base = cuda.to_device(np.arange(1, 3, dtype=np.float32))
    for strides in ((0, 0), (0, 4)):
        dc = device_view(base, (3, 2), strides)
        want = np.lib.stride_tricks.as_strided(np.arange(1, 3, dtype=np.float32), (3, 2), strides)
        for _ in range(2):
            assert_np_matmul(simt_tiles.matmul(dc, transposed(cuda.to_device(b))).copy_to_host(),
                             want, b.T)
            assert_np_matmul(simt_tiles.matmul(transposed(cuda.to_device(a)), dc).copy_to_host(), a.T, want)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["torch", "cupy"])
def test_zero_stride_operands(kind):
    """Expanded operands (strides (0, 0) and (0, 1): the ones autograd passes as the gradient of
    ``y.sum()``, a broadcast row) against the product of their copies, both sides, twice (the second
    call would replay a plan). On the H200 these read in place gave wrong products (2.3-4.9 off)."""
    xp = pytest.importorskip(kind)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4), np.float32), rng.standard_normal((4, 2), np.float32)
    if kind == "torch":
        dev = lambda v: xp.from_numpy(v).cuda()  # noqa: E731
        forms = [xp.ones((), device="cuda").expand(3, 2), xp.ones(2, device="cuda").expand(3, 2)]
        host = lambda v: v.cpu().numpy()  # noqa: E731
    else:
        dev, host = xp.asarray, xp.asnumpy
        forms = [xp.broadcast_to(xp.ones((), xp.float32), (3, 2)), xp.broadcast_to(xp.arange(2, dtype=xp.float32), (3, 2))]
    da, db = dev(a), dev(b)
    for dc in forms:
        for _ in range(2):
            assert_np_matmul(host(simt_tiles.matmul(dc, db.T if kind == "cupy" else db.t())), host(dc), b.T)
            assert_np_matmul(host(simt_tiles.matmul(da.T if kind == "cupy" else da.t(), dc)), a.T, host(dc))


@pytest.mark.gpu
def test_zero_stride_copy_runs_on_the_calls_stream():
    """The framework's copy of an expanded operand belongs to the call's stream.  Here torch's current stream is
    another one, and the call's stream is held busy (``torch.cuda._sleep``): a copy allocated on the current stream
    went back to that stream's pool when the call returned, the NaN tensor allocated next on it took the same block
    and was filled at once, and the product, still waiting on its stream, read NaN.  Queued on the call's stream, the
    copy's block stays with it until the product has read it."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    m, k, n = 512, 256, 384
    b = rng.standard_normal((k, n), np.float32)
    row = torch.from_numpy(rng.standard_normal(k, np.float32)).cuda()
    db = torch.from_numpy(b).cuda()
    current, side = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(current):
        for _ in range(3):
            with torch.cuda.stream(side):
                torch.cuda._sleep(50_000_000)  # ~25 ms of the call's stream
            got = simt_tiles.matmul(row.expand(m, k), db, stream=side)
            poison = torch.full((m, k), float("nan"), device="cuda")  # on `current`, not waiting for `side`
            side.synchronize()
            assert_np_matmul(got.cpu().numpy(), np.broadcast_to(row.cpu().numpy(), (m, k)), b)
            del poison
    torch.cuda.synchronize()


def test_zero_stride_operands_are_copied_by_their_framework(monkeypatch):
    """The rule without a GPU: a torch/CuPy operand with a zero stride in its matrix is replaced by
    its framework's contiguous copy and the call leaves the launch plans (the copy is not replayable);
    a batch stride of 0 or a Numba/NumPy operand is left alone."""
    import simt_tiles.kernels.matmul as mm

    class Fake:  # a torch tensor as the rule sees it
        def __init__(self, strides):
            self.strides, self.copied = strides, False

        def contiguous(self):
            self.copied = True
            return self

    refused, rebuilt = [], []
    from simt_tiles import interop

    monkeypatch.setattr(interop, "no_plan", refused.append)  # framework_copy's (shared with the tensor-core path)
    streams = []  # the copy is queued on the call's stream, in the framework's own stream context
    monkeypatch.setattr(interop, "framework_stream", lambda o, handle: streams.append(handle) or nullcontext())
    monkeypatch.setattr(mm, "device_operand", lambda x, name, **kw: rebuilt.append((x, name)) or "copy")

    def op(kind, shape, strides):
        x = Fake(strides)
        return x, type("Op", (), {"kind": kind, "ndim": len(shape), "shape": shape, "strides": strides,
                                  "original": x, "name": "a"})()

    for kind, shape, strides, copies in [("torch", (3, 2), (0, 0), True), ("torch", (3, 2), (0, 1), True),
                                         ("torch", (1, 2), (0, 1), False), ("torch", (4, 3, 2), (0, 2, 1), False),
                                         ("numba", (3, 2), (0, 0), False), ("torch", (3, 2), (2, 1), False)]:
        refused.clear(), rebuilt.clear(), streams.clear()
        x, o = op(kind, shape, strides)
        got = mm._unbroadcast(o, 0)
        assert (got == "copy") is copies and x.copied is copies and bool(refused) is copies, (kind, shape, strides)
        assert streams == ([0] if copies else [])
        assert rebuilt == ([(x, "a")] if copies else [])


# --- the skinny class: k15 -----------------------------------------------------------------------


def test_gemv_rule_is_a_shape_class():
    rule = dispatch.gemv_rule
    for m in (1, 2, 5, 16):  # decode token counts against any N, K (no table holds these)
        assert rule(m, 4099, 333, 1, True, True) == "m" and rule(m, 11008, 4096, 1, True, True) == "m"
    assert rule(7777, 3, 999, 1, True, True) == "n"
    assert rule(17, 4096, 4096, 1, True, True) is None  # past 16 rows with a 64 MiB W: the tiles
    # past 16 rows, up to 64, where the big operand stays in L2 between the groups of 16
    # (results/matmul_skinny_probe_s32_h100: ResNet-50's fc at batch 32 20.3 µs against 28.3 on the tiles)
    assert rule(32, 1000, 2048, 1, True, True) == "m" and rule(64, 1024, 1024, 1, True, True) == "m"
    assert rule(65, 1000, 2048, 1, True, True) is None
    assert rule(4096, 48, 512, 1, True, True) == "n" and rule(4096, 48, 4096, 1, True, True) is None
    assert rule(32, 1024, 2048, 1, True, True) == "m" and rule(32, 1025, 2048, 1, True, True) is None  # 8 MiB
    assert rule(32, 1024, 1024, 1, True, True, itemsize=8) == "m" and rule(32, 1024, 2048, 1, True, True, itemsize=8) is None
    assert rule(8, 8, 4096, 1, True, True) is None  # a square tiny problem: one tile
    assert rule(1, 4096, 4096, 2, True, True) is None  # batched: the layout kernel's grid z
    assert rule(1, 4096, 4096, 1, True, False) is None  # B neither k- nor n-contiguous: the tiles
    assert rule(3, 4097, 1000, 1, False, False, True) == "rows"  # B row-major (x @ W, W stored K×N), any A
    assert rule(20, 4097, 1000, 1, True, False, True) is None


@pytest.mark.parametrize("m, n, k, offset, dtype", [(1, 37, 45, 0, np.float32), (3, 20, 130, 1, np.float64),
                                                     (6, 18, 9, 0, np.float32), (29, 2, 13, 0, np.float64),
                                                     (33, 40, 21, 0, np.float32), (5, 50, 18, 1, np.float64)])
def test_gemv_linear_layer(m, n, k, offset, dtype, monkeypatch):
    """``x @ w.T`` (M small) and ``a @ v.T`` (N small) on k15: ragged K (the scalar tail, lanes past K),
    unaligned rows (the scalar build), rows past the block clamped, C written transposed, and past
    16 rows (a small W) groups of 16 rows as grid rows (33: three, the last of one row)."""
    sides = []
    real = _strided.gemv
    monkeypatch.setattr(_strided, "gemv", lambda side, *a: sides.append(side) or real(side, *a))
    rng = np.random.default_rng(8)
    x, dx = stored(rng, m, k, False, dtype, 0, offset)
    w, dw = stored(rng, k, n, True, dtype, 0, 0)
    out = poisoned((m, n), dtype)
    simt_tiles.matmul(dx, dw, out=out)
    assert_np_matmul(out.copy_to_host(), np.ascontiguousarray(x), np.ascontiguousarray(w))
    assert sides == ["m" if m < n else "n"]


@pytest.mark.parametrize("vec", [True, False], ids=["v4", "v1"])
@pytest.mark.parametrize("unroll, xg, g", [(2, 16, 32), (4, 16, 32), (8, 16, 32), (2, 1, 32), (1, 2, 32),
                                           (2, 16, 8), (4, 2, 4), (1, 16, 16)])
def test_gemv_steps_in_flight(unroll, xg, g, vec, monkeypatch):
    """k15 with ``unroll`` steps of 4·g k's in flight (g lanes a row of W), K long enough for the unrolled
    loop, then single steps and the scalar tail (K = 2·4g·unroll + 4g + 4, or + 131: rows not a multiple
    of 4 long, the scalar build): every k summed once; x's rows loaded with W's (``xg`` ≥ MT) or ``xg`` at
    a time beside their FMAs; 32 / g rows of W a warp at once, the rows past N clamped."""
    seen = []  # the operands' alignment, as launch reads it (the 128-bit build needs both, and rows of 4·j)
    monkeypatch.setattr(k15_gemv, "aligned", lambda arr, real=k15_gemv.aligned: seen.append(real(arr)) or seen[-1])
    rng = np.random.default_rng(12)
    k = 2 * 4 * g * unroll + (4 * g + 4 if vec else 131)
    m, n = 4, 5 if g == 32 else 37  # (37: several blocks of 32 / g · 2 rows)
    cfg = dataclasses.replace(k15_gemv.PRESETS["sim"], mt=4, unroll=unroll, warps=1, xg=xg, g=g)
    x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
    out = cuda.to_device(np.full(m * n, np.nan, np.float32))
    k15_gemv.launch(cfg, cuda.to_device(x.ravel()), cuda.to_device(w.ravel()), out, m, n, k, k, k, n, 1, 0)
    assert_np_matmul(out.copy_to_host().reshape(m, n), x, np.ascontiguousarray(w.T))
    assert all(seen) and (k % 4 == 0) == vec  # so the 128-bit build ran exactly in the "v4" cases


def test_gemv_vector_times_matrix():
    rng = np.random.default_rng(9)
    v, w = rng.standard_normal(40).astype(np.float32), rng.standard_normal((9, 40)).astype(np.float32)
    assert_np_matmul(simt_tiles.matmul(v, w.T), v, np.ascontiguousarray(w.T))  # 1-D x: M = 1, removed


@pytest.mark.parametrize("m, n, k, a_t, dtype", [(1, 37, 45, False, np.float32), (3, 20, 130, True, np.float64),
                                                  (16, 18, 9, False, np.float32)])
def test_gemv_row_major_b(m, n, k, a_t, dtype, monkeypatch):
    """``x @ W`` with W stored K×N (C-contiguous: the 2-D call's own path too) on k15's rows kernel:
    columns past N clamped, 8 rows in flight and the single-row tail, the warps' sums folded."""
    sides = []
    real = _strided.gemv
    monkeypatch.setattr(_strided, "gemv", lambda side, *a: sides.append(side) or real(side, *a))
    rng = np.random.default_rng(10)
    x, dx = stored(rng, m, k, a_t, dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    out = poisoned((m, n), dtype)
    simt_tiles.matmul(dx, cuda.to_device(w), out=out)
    assert_np_matmul(out.copy_to_host(), np.ascontiguousarray(x), w)
    assert sides == ["rows"]


# --- SASS rules of the new kernels (compiled for sm_90 in a subprocess; no GPU) -----------------

_SASS = """
import re, subprocess, sys
sys.path.insert(0, "benchmarks/lab")
import numpy as np
from numba import cuda
from sass_mix import find_nvdisasm
from simt_tiles import compile_gate
from simt_tiles.kernels.matmul import _layouts, k15_gemv, k11_generated_split_k as k11
from tests.test_matmul_fast import tile_loop
ptxas = compile_gate.find_ptxas()
jobs = {"nt": (_layouts.RUNG, k11.PRESETS["default"], dict(idx32=True, vec=True, layout="nt")),
        "gemv": (k15_gemv.RUNG, k15_gemv.PRESETS["mt1"], dict(vec=True)),
        "gemv4": (k15_gemv.RUNG, k15_gemv.PRESETS["mt4"], dict(vec=True))}
for v, (r, cfg, params) in jobs.items():
    ptx, _ = cuda.compile_ptx(r.factory(cfg, np.float32, **params), r.signature(np.float32, **params),
                              cc=compile_gate.CC, launch_bounds=r.jit_options(cfg, np.float32)["launch_bounds"])
    path = sys.argv[1] + "/" + v
    open(path + ".ptx", "w").write(ptx)
    p = subprocess.run([ptxas, f"-arch={compile_gate.ARCH}", "-v", path + ".ptx", "-o", path + ".cubin"],
                       capture_output=True, text=True, check=True)
    sass = subprocess.run([find_nvdisasm(ptxas), "-c", path + ".cubin"], capture_output=True, text=True, check=True).stdout
    loop = tile_loop(sass)
    print(v, bool(re.search(r"\\b0 bytes spill stores, 0 bytes spill loads", p.stdout + p.stderr)),
          bool(re.search(r"\\b(LDL|STL)\\b", sass)), loop["FFMA"], sum(loop.values()), loop["LDG"],
          loop["DSETP"] + loop["I2F"])
"""


@pytest.mark.skipif(os.environ.get("SIMT_TILES_HYPOTHESIS_PROFILE") == "ci",
                    reason="~60 s on 2 cores (two generated kernels): the full profile and the GPU pass run it")
def test_layout_and_gemv_kernels_sass(tmp_path):
    """x @ w.T's tile (B column-major: swizzled scalar stores, swizzled reads) keeps k11's loop: spill-free,
    2·16·64 FFMA and 8 LDG.128 per trip, FFMA ≥ 88% of it, no float64 compare or int→float conversion;
    the GEMV: spill-free, 128-bit loads, the same two conversions absent."""
    from simt_tiles import compile_gate

    if not compile_gate._ptxas_candidates():
        pytest.skip("no ptxas (pip package nvidia-cuda-nvcc)")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _SASS, str(tmp_path)], env=env, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}
    spill_free, local, ffma, total, ldg, bad = got["nt"]
    assert spill_free == "True" and local == "False" and bad == "0", got
    assert int(ffma) == 2 * 16 * 64 and int(ldg) == 8 and int(ffma) / int(total) >= 0.88, got
    for v, preset in (("gemv", "mt1"), ("gemv4", "mt4")):  # a trip's loads: unroll × (W rows + x rows)
        cfg = k15_gemv.PRESETS[preset]
        spill_free, local, ffma, total, ldg, bad = got[v]
        assert spill_free == "True" and local == "False" and bad == "0", got
        assert int(ldg) == cfg.unroll * (cfg.nw + cfg.mt), (preset, got)  # 8 and 32: every step in flight


def test_launch_plans_replay_transposed_batched_and_gemv_calls(plans):
    """A repeated call replays its plan (on a GPU, every call after the first): the strided operands'
    flat views are tied to the callers' arrays, so new arrays of the same layout get new results."""
    rng = np.random.default_rng(11)
    for shape_a, shape_w in (((20, 12), (24, 12)), ((12,), (24, 12)), ((3, 20, 12), (24, 12))):
        for _ in range(2):
            a, w = rng.standard_normal(shape_a, np.float32), rng.standard_normal(shape_w, np.float32)
            got = simt_tiles.matmul(cuda.to_device(a), transposed(cuda.to_device(w))).copy_to_host()
            assert_np_matmul(got, a, np.ascontiguousarray(w.T))
    assert plans.stats()["hit"] == 3


@pytest.mark.parametrize("variant", ["k11_generated_split_k", "k12_async_copy"])
def test_padded_transposed_operands_with_a_ragged_n(variant):
    """``pad=Pad.ALWAYS`` on ``x @ w.T`` and ``a.T @ b`` with N % 4 != 0: the layout path pads B to N₄ columns and
    k11 took N from B, so its 128-bit stores ran past C's 7 columns (the simulator's store4 check; a fault on a GPU).
    Now N is C's: the product as np.matmul, the poisoned out fully written."""
    from simt_tiles.kernels.matmul import k11_generated_split_k as k11

    cfg = dataclasses.replace(PRESETS["sim"], pad=k11.Pad.ALWAYS)
    rng = np.random.default_rng(5)
    for m, n, k in ((9, 7, 5), (7, 13, 11)):
        x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
        for a, b in ((x, w.T), (np.ascontiguousarray(x.T).T, w.T)):
            out = poisoned((m, n), np.float32)
            simt_tiles.matmul(a, b, variant=variant, config=cfg, out=out)
            got, want = out.copy_to_host(), x.astype(np.float64) @ w.T.astype(np.float64)
            assert check_within(got, want, gamma(k, unit_roundoff(np.float32)) * (np.abs(x) @ np.abs(w.T))).passed
