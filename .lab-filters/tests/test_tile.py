"""simt_tiles.tile (the cuTile counterparts) against NumPy references with bound-based tolerances.

Three layers:

* CPU, always: ``import simt_tiles.tile`` works without cuda.tile and a call
  then raises the install hint; the kernels' shared index arithmetic; every
  launcher's argument checks and launch plan (grids, tile constants, the
  two-pass sum, the K = 0 fill) with the launches recorded instead of run.
* CPU, where cuda.tile is installed: every kernel lowers to TileIR bytecode,
  and (with tileiras) a few compile to sm_90 cubins — no GPU needed.
* GPU (``@pytest.mark.gpu``, skipped in the simulator; cuda.tile and PyTorch
  or CuPy needed): results against long-double NumPy references within error
  bounds that follow from the arithmetic, on ragged shapes, into NaN-poisoned
  outputs.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simt_tiles import tile
from simt_tiles.bounds import check_within, gamma, unit_roundoff
from simt_tiles.kernels.conv2d.reference import correlate2d_reference
from simt_tiles.kernels.matmul.reference import matmul_reference
from simt_tiles.kernels.softmax.reference import softmax_reference
from simt_tiles.tile import _defaults as D
from simt_tiles.tile import _index
from simt_tiles.tile import _interop as io

U32 = unit_roundoff(np.float32)  # 2^-24
U_TF32 = 2.0**-11  # tf32 keeps 10 explicit mantissa bits; ct.astype rounds to nearest even
#: tensor-core accumulation: float32, but not promised to round to nearest (Fasi, Higham, Mikaitis,
#: Pranesh 2021 measured truncation inside the MMA units), so one ulp (2^-23) per addition
U_TC_ACC = 2.0**-23
U_LD = unit_roundoff(np.longdouble)


# ===========================================================================
# CPU: no cuda.tile needed
# ===========================================================================


def test_import_does_not_need_cuda_tile_or_numba():
    code = ("import sys; sys.modules['cuda.tile'] = None\n"  # as if cuda-tile were not installed
            "import simt_tiles.tile as t\n"
            "assert 'numba' not in sys.modules, 'simt_tiles.tile imported numba'\n"
            "assert not t.available()\n"
            "print(t.version())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "None"


@pytest.fixture
def no_cuda_tile(monkeypatch):
    """cuda.tile made unimportable, and simt_tiles.tile's cached kernels forgotten."""
    monkeypatch.setitem(sys.modules, "cuda.tile", None)
    monkeypatch.setattr(tile, "_KERNELS", None)


CALLS = {
    "matmul": lambda: tile.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)),
    "matmul tf32": lambda: tile.matmul(None, None, precision="tf32"),
    "correlate2d": lambda: tile.correlate2d(np.ones((4, 4), np.float32), np.ones((3, 3), np.float32)),
    "softmax": lambda: tile.softmax(np.ones((2, 3), np.float32)),
    "reduce_sum": lambda: tile.reduce_sum(np.ones(5, np.float32)),
}


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
def test_calling_without_cuda_tile_says_what_to_install(no_cuda_tile, call):
    # the missing package is reported before anything else is looked at
    with pytest.raises(tile.CuTileUnavailableError) as info:
        CALLS[call]()
    assert isinstance(info.value, ImportError)
    msg = str(info.value)
    for needed in ("cuda.tile", "cuda-tile", "tileiras", "13.4", "r580", "pip install cuda-tile"):
        assert needed in msg, f"{needed!r} missing from: {msg}"
    assert "../shared" not in msg and "carry" not in msg  # the product speaks only of itself
    assert not tile.available()


@pytest.mark.parametrize("tiles_m, tiles_n, group", [
    (1, 1, 1), (1, 7, 8), (7, 1, 8), (9, 5, 8), (16, 16, 8), (17, 3, 4), (5, 5, 1), (3, 11, 32),
])
def test_grouped_block_order_visits_every_tile_once(tiles_m, tiles_n, group):
    seen = [_index.grouped_tile(pid, tiles_m, tiles_n, group) for pid in range(tiles_m * tiles_n)]
    assert sorted(seen) == list(itertools.product(range(tiles_m), range(tiles_n)))
    # consecutive blocks stay within one group of tile-rows
    for pid in range(min(group, tiles_m)):
        assert seen[pid] == (pid, 0)


def test_block_of_is_row_major():
    assert [_index.block_of(p, 3) for p in range(6)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_default_tiles_follow_cutile_rules():
    for bm, bn, bk, g in D.MATMUL_TILES.values():
        assert all(D.is_pow2(v) for v in (bm, bn, bk)) and g >= 1
    assert all(D.is_pow2(v) for v in (*D.CORRELATE_TILE, *D.SUM_TILE, D.SOFTMAX_SINGLE_PASS_MAX,
                                      D.SOFTMAX_ONLINE_ROWS, D.SOFTMAX_ONLINE_COLS))
    assert D.MAX_FILTER <= 8  # the kernel reads each filter row as one 1×8 tile
    assert [D.next_pow2(n) for n in (0, 1, 2, 3, 1000, 1024, 1025)] == [1, 1, 2, 4, 1024, 1024, 2048]


# ---------------------------------------------------------------------------
# launch plans, with the launches recorded instead of run
# ---------------------------------------------------------------------------


class FakeDev:
    """A stand-in CUDA array: __cuda_array_interface__ only, at a made-up address."""

    _next = 1 << 20

    def __init__(self, shape, dtype=np.float32, strides=None, ptr=None):
        self.shape, self.dtype, self.strides_el = tuple(shape), np.dtype(dtype), strides
        if ptr is None:
            ptr = FakeDev._next
            FakeDev._next += (math.prod(self.shape) + 64) * self.dtype.itemsize * 4
        self.ptr = ptr

    @property
    def __cuda_array_interface__(self):
        strides = None if self.strides_el is None else tuple(s * self.dtype.itemsize for s in self.strides_el)
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": strides, "version": 3}

    def reshape(self, shape):
        assert self.strides_el is None
        return FakeDev(shape, self.dtype, ptr=self.ptr)


@pytest.fixture
def recorded(monkeypatch):
    """simt_tiles.tile with fake kernels; returns the list of recorded launches."""
    names = ("fill2d", "matmul", "correlate2d", "softmax_tile", "softmax_online", "sum_rows")
    fake = types.SimpleNamespace(MODE_CONSTANT=0, MODE_REFLECT=1, **{n: n for n in names})
    calls = []
    monkeypatch.setattr(tile, "require", lambda: fake)
    monkeypatch.setattr(tile, "_launch", lambda stream, grid, kernel, args, like: calls.append(
        (kernel, grid, tuple(a.shape if isinstance(a, FakeDev) else a for a in args))))
    monkeypatch.setattr(io, "empty", lambda like, shape, dtype, stream, name="out":
                        io.operand(FakeDev(shape, dtype), name, ndims=(len(shape),), dtype=dtype))
    monkeypatch.setattr(io, "as_kind", lambda x, like, name, stream:
                        io.operand(FakeDev(x.shape, x.dtype), name, ndims=(x.ndim,), dtype=x.dtype))
    return calls


S = "stream"  # any stream object is passed through to ct.launch untouched


def test_matmul_plan(recorded):
    c = tile.matmul(FakeDev((200, 300)), FakeDev((300, 70)), stream=S)
    assert isinstance(c, FakeDev) and c.shape == (200, 70) and c.dtype == np.float32
    assert recorded[-1] == ("matmul", (4 * 2,), ((200, 300), (300, 70), (200, 70), 64, 64, 16, 8, False))
    tile.matmul(FakeDev((200, 300)), FakeDev((300, 70)), precision="tf32", stream=S)
    assert recorded[-1] == ("matmul", (2 * 1,), ((200, 300), (300, 70), (200, 70), 128, 128, 32, 8, True))
    out = FakeDev((5, 3))
    assert tile.matmul(FakeDev((5, 9)), FakeDev((9, 3)), out=out, block_m=16, block_n=8, block_k=4, group_m=3,
                       stream=S) is out
    assert recorded[-1] == ("matmul", (1,), ((5, 9), (9, 3), (5, 3), 16, 8, 4, 3, False))
    # K = 0: zeros through the fill kernel; M = 0 or N = 0: nothing to launch
    tile.matmul(FakeDev((33, 0)), FakeDev((0, 129)), stream=S)
    assert recorded[-1] == ("fill2d", (2 * 2,), ((33, 129), 0.0, 32, 128))
    n = len(recorded)
    assert tile.matmul(FakeDev((0, 4)), FakeDev((4, 5)), stream=S).shape == (0, 5)
    assert tile.matmul(FakeDev((3, 4)), FakeDev((4, 0)), stream=S).shape == (3, 0)
    assert len(recorded) == n


def test_matmul_bad_arguments(recorded):
    a, b = FakeDev((4, 5)), FakeDev((5, 6))
    with pytest.raises(ValueError, match=r"a @ b: a is 4×5 and b is 6×5"):
        tile.matmul(a, FakeDev((6, 5)), stream=S)
    with pytest.raises(TypeError, match="a: expected a CUDA array .* got a NumPy array"):
        tile.matmul(np.ones((4, 5), np.float32), b, stream=S)
    with pytest.raises(TypeError, match="b: expected dtype float32; got float64"):
        tile.matmul(a, FakeDev((5, 6), np.float64), stream=S)
    with pytest.raises(ValueError, match="a: expected a 2-D array; got 3-D"):
        tile.matmul(FakeDev((2, 4, 5)), b, stream=S)
    with pytest.raises(TypeError, match="b: expected a CUDA array .* got builtins.list"):
        tile.matmul(a, [[1.0]], stream=S)
    with pytest.raises(ValueError, match="precision: expected one of"):
        tile.matmul(a, b, precision="fp16", stream=S)
    with pytest.raises(ValueError, match="block_m: expected a power of two"):
        tile.matmul(a, b, block_m=48, stream=S)
    with pytest.raises(ValueError, match="group_m: expected a positive int"):
        tile.matmul(a, b, group_m=0, stream=S)
    with pytest.raises(ValueError, match=r"out: expected shape \(4, 6\); got \(6, 4\)"):
        tile.matmul(a, b, out=FakeDev((6, 4)), stream=S)
    with pytest.raises(TypeError, match="out: expected dtype float32"):
        tile.matmul(a, b, out=FakeDev((4, 6), np.float64), stream=S)
    with pytest.raises(ValueError, match="out: expected a C-contiguous array"):
        tile.matmul(a, b, out=FakeDev((4, 6), strides=(1, 4)), stream=S)
    with pytest.raises(ValueError, match="out: overlaps a"):
        tile.matmul(a, b, out=FakeDev((4, 6), ptr=a.ptr + 8), stream=S)
    assert not recorded


def test_strided_inputs_are_passed_as_they_are(recorded):
    at = FakeDev((7, 5), strides=(1, 7))  # a transposed view: cuTile reads the strides
    tile.matmul(at, FakeDev((5, 3)), stream=S)
    assert recorded[-1][2][0] == (7, 5)


def test_correlate2d_plan(recorded):
    img = FakeDev((100, 200))
    tile.correlate2d(img, FakeDev((3, 5)), stream=S)  # reflect by default, like scipy
    assert recorded[-1] == ("correlate2d", (4 * 4,), ((100, 200), (3, 5), (100, 200), 0.0, 32, 64, 3, 5, 1, True))
    tile.correlate2d(img, np.ones((7, 2), np.float32), "constant", 2, tile_h=8, tile_w=16, fast_interior=False,
                     stream=S)
    assert recorded[-1] == ("correlate2d", (13 * 13,), ((100, 200), (7, 2), (100, 200), 2.0, 8, 16, 7, 2, 0,
                                                         False))
    with pytest.raises(ValueError, match="weights: expected a filter from 1×1 to 7×7; got 8×3"):
        tile.correlate2d(img, FakeDev((8, 3)), stream=S)
    with pytest.raises(ValueError, match="weights: expected a filter from 1×1 to 7×7; got 0×3"):
        tile.correlate2d(img, np.ones((0, 3), np.float32), stream=S)
    with pytest.raises(TypeError, match="weights: expected dtype float32"):
        tile.correlate2d(img, np.ones((3, 3)), stream=S)
    with pytest.raises(ValueError, match="mode: expected one of .'reflect', 'constant'."):
        tile.correlate2d(img, FakeDev((3, 3)), "nearest", stream=S)
    with pytest.raises(TypeError, match="cval: expected a real number"):
        tile.correlate2d(img, FakeDev((3, 3)), "constant", "0", stream=S)
    with pytest.raises(ValueError, match="tile_w: expected a power of two"):
        tile.correlate2d(img, FakeDev((3, 3)), tile_w=60, stream=S)
    with pytest.raises(ValueError, match="out: overlaps image"):
        tile.correlate2d(img, FakeDev((3, 3)), out=FakeDev((100, 200), ptr=img.ptr), stream=S)


def test_softmax_plan(recorded):
    tile.softmax(FakeDev((3, 1000)), stream=S)  # one tile per row block, 1024 wide; 8 rows fit, 4 needed
    assert recorded[-1] == ("softmax_tile", (1,), ((3, 1000), (3, 1000), 4, 1024))
    tile.softmax(FakeDev((300, 5)), stream=S)
    assert recorded[-1] == ("softmax_tile", (5,), ((300, 5), (300, 5), 64, 8))
    tile.softmax(FakeDev((3, 8193)), stream=S)  # longer than one tile: online
    assert recorded[-1] == ("softmax_online", (3,), ((3, 8193), (3, 8193), 1, 4096))
    tile.softmax(FakeDev((5, 100)), single_pass_max=64, block_rows=2, block_cols=32, stream=S)
    assert recorded[-1] == ("softmax_online", (3,), ((5, 100), (5, 100), 2, 32))
    n = len(recorded)
    assert tile.softmax(FakeDev((0, 7)), stream=S).shape == (0, 7)
    assert tile.softmax(FakeDev((7, 0)), stream=S).shape == (7, 0)
    assert len(recorded) == n
    with pytest.raises(ValueError, match="x: expected a 2-D array; got 1-D"):
        tile.softmax(FakeDev((7,)), stream=S)
    with pytest.raises(ValueError, match="single_pass_max: expected a power of two"):
        tile.softmax(FakeDev((7, 3)), single_pass_max=1000, stream=S)


def test_reduce_sum_plan(recorded):
    r = tile.reduce_sum(FakeDev((130, 5000)), stream=S)
    assert r.shape == (130,)
    # 33 row tiles of 4 rows, 5 column tiles of 1024: split 5 ways, then the 5 partials folded
    assert recorded[-2:] == [("sum_rows", (33, 5), ((130, 5000), (130, 5), 4, 1024, True)),
                             ("sum_rows", (33, 1), ((130, 5), (130, 1), 4, 8, True))]
    r = tile.reduce_sum(FakeDev((10**6,)), accumulate="float32", stream=S)
    assert r.shape == ()
    assert recorded[-2:] == [("sum_rows", (1, 528), ((1, 10**6), (1, 528), 1, 1024, False)),
                             ("sum_rows", (1, 1), ((1, 528), (1, 1), 1, 1024, False))]
    tile.reduce_sum(FakeDev((130, 5000)), split=1, block_rows=8, block_cols=256, stream=S)
    assert recorded[-1] == ("sum_rows", (17, 1), ((130, 5000), (130, 1), 8, 256, True))
    tile.reduce_sum(FakeDev((3, 10)), stream=S)  # small: one launch, a 16-wide tile
    assert recorded[-1] == ("sum_rows", (1, 1), ((3, 10), (3, 1), 4, 16, True))
    tile.reduce_sum(FakeDev((5, 0)), stream=S)  # empty rows sum to 0
    assert recorded[-1] == ("fill2d", (1,), ((5, 1), 0.0, 8, 1))
    n = len(recorded)
    assert tile.reduce_sum(FakeDev((0, 5)), stream=S).shape == (0,)
    assert len(recorded) == n
    out = FakeDev(())
    assert tile.reduce_sum(FakeDev((9,)), out=out, stream=S) is out
    with pytest.raises(ValueError, match=r"out: expected shape \(\); got \(1,\)"):
        tile.reduce_sum(FakeDev((9,)), out=FakeDev((1,)), stream=S)
    with pytest.raises(ValueError, match="x: expected a 1-D or 2-D array; got 3-D"):
        tile.reduce_sum(FakeDev((2, 2, 2)), stream=S)
    with pytest.raises(ValueError, match="accumulate: expected"):
        tile.reduce_sum(FakeDev((9,)), accumulate="float16", stream=S)
    with pytest.raises(ValueError, match="split: expected an int from 1 to 65535"):
        tile.reduce_sum(FakeDev((9,)), split=0, stream=S)


# ===========================================================================
# CPU with cuda.tile installed: the kernels compile (no GPU)
# ===========================================================================


def _tileiras_found() -> bool:
    try:
        from cuda.tile._compile import (
            _find_compiler_bin,  # private: only to decide whether to skip
        )

        _find_compiler_bin()
        return True
    except Exception:  # noqa: BLE001
        return shutil.which("tileiras") is not None


def test_every_kernel_lowers_to_tileir_bytecode():
    pytest.importorskip("cuda.tile")
    from simt_tiles.tile import _aot

    results = _aot.compile_all(bytecode=True)
    assert set(results) == {"fill2d", "matmul", "correlate2d", "softmax_tile", "softmax_online", "sum_rows"}
    assert all(size > 0 for rows in results.values() for _, size, _ in rows)


def test_default_matmuls_compile_to_sm90_cubins_without_spills():
    """The full check is ``python -m simt_tiles.tile._aot`` (43 signatures); here the four matmuls."""
    pytest.importorskip("cuda.tile")
    if not _tileiras_found():
        pytest.skip("no tileiras (CUDA 13.4) here")
    import io as _io

    from cuda.tile.compilation import export_kernel

    from simt_tiles.tile import _aot

    dump = _aot._cuobjdump()
    for name, kernel, sigs in _aot._signatures():
        if name != "matmul":
            continue
        for sig in sigs[:4]:  # fp32 and tf32 defaults, each strided and aligned
            buf = _io.BytesIO()
            export_kernel(kernel, [sig], buf, gpu_code="sm_90", output_format="cubin")
            assert buf.getvalue()[:4] == b"\x7fELF"
            if dump:
                res = _aot.resources(buf.getvalue(), dump)
                assert res["STACK"] == 0 and res["LOCAL"] == 0, res


# ===========================================================================
# GPU
# ===========================================================================


class Lib:
    """PyTorch (preferred) or CuPy: host ↔ device for the tests."""

    def __init__(self):
        try:
            import torch

            if not torch.cuda.is_available():
                raise ImportError
            self.name, self.mod = "torch", torch
        except ImportError:
            cupy = pytest.importorskip("cupy")
            self.name, self.mod = "cupy", cupy

    def dev(self, x):
        x = np.asarray(x, order="C")  # (ascontiguousarray would turn a 0-d array into shape (1,))
        if self.name == "torch":
            return self.mod.as_tensor(x, device="cuda")
        return self.mod.asarray(x)

    def host(self, x):
        if self.name == "torch":
            self.mod.cuda.synchronize()
            return x.cpu().numpy()
        return self.mod.asnumpy(x)

    def poisoned(self, shape):
        return self.dev(np.full(shape, np.nan, np.float32))

    def is_mine(self, x):
        return type(x).__module__.split(".")[0] == self.name


@pytest.fixture(scope="module")
def lib():
    pytest.importorskip("cuda.tile")
    return Lib()


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- matmul ---------------------------------------------------------------


def tf32_bound(a, b):
    """|C − AB| ≤ ((1 + u_t)²(1 + γ_K(u_acc)) − 1)·|A||B|, plus the reference's own error.

    Each operand is rounded once to tf32 (relative error ≤ u_t = 2⁻¹¹), their
    product is exact in the tensor core (11 × 11 significand bits), and the K
    products are added in float32 (γ_K with u_acc = 2⁻²³, see U_TC_ACC).
    """
    ref, ref_bound = matmul_reference(a, b)
    k = a.shape[1]
    absprod = np.abs(a.astype(np.longdouble)) @ np.abs(b.astype(np.longdouble))
    factor = (1 + U_TF32) ** 2 * (1 + gamma(k, U_TC_ACC)) - 1 + 2 * gamma(k, U_LD)
    return ref, absprod * factor * (1 + 1e-6) + ref_bound


def check_matmul(lib, a, b, precision, **kw):
    out = lib.poisoned((a.shape[0], b.shape[1]))
    got = tile.matmul(lib.dev(a), lib.dev(b), precision=precision, out=out, **kw)
    assert got is out
    c = lib.host(out)
    ref, bound = matmul_reference(a, b) if precision == "fp32" else tf32_bound(a, b)
    chk = check_within(c, ref, bound)
    assert chk.passed, f"{chk} for a{a.shape} b{b.shape} {precision} {kw}"
    return chk


MATMUL_SHAPES = [(1, 1, 1), (2, 3, 5), (63, 65, 17), (64, 64, 16), (128, 128, 32), (129, 127, 33),
                 (200, 70, 300), (1, 300, 1000), (257, 1, 65), (31, 500, 7)]


@pytest.mark.gpu
@pytest.mark.parametrize("precision", tile.PRECISIONS)
@pytest.mark.parametrize("m, n, k", MATMUL_SHAPES)
def test_matmul_ragged_shapes(lib, precision, m, n, k):
    rng = _rng(m * 1000 + n + k)
    check_matmul(lib, rng.standard_normal((m, k)).astype(np.float32),
                 rng.standard_normal((k, n)).astype(np.float32), precision)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", tile.PRECISIONS)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1.0, 1e-3, 1e4]))
@settings(max_examples=10, deadline=None)
def test_matmul_property(lib, precision, m, n, k, seed, scale):
    rng = _rng(seed)
    check_matmul(lib, (rng.standard_normal((m, k)) * scale).astype(np.float32),
                 rng.uniform(-1, 1, (k, n)).astype(np.float32), precision)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", tile.PRECISIONS)
def test_matmul_small_tiles(lib, precision):
    rng = _rng(1)
    a, b = rng.standard_normal((70, 45)).astype(np.float32), rng.standard_normal((45, 33)).astype(np.float32)
    check_matmul(lib, a, b, precision, block_m=16, block_n=32, block_k=8, group_m=2)


@pytest.mark.gpu
def test_tf32_really_rounds_the_operands(lib):
    # 1 + 2^-12 is a float32 but rounds to 1 in tf32 (10 mantissa bits): fp32 keeps it, tf32 must not
    a = np.full((16, 8), 1 + 2.0**-12, np.float32)
    b = np.zeros((8, 16), np.float32)
    b[0] = 1.0
    c32 = lib.host(tile.matmul(lib.dev(a), lib.dev(b), precision="fp32"))
    ctf = lib.host(tile.matmul(lib.dev(a), lib.dev(b), precision="tf32"))
    assert np.all(c32 == np.float32(1 + 2.0**-12))
    assert np.all(ctf == 1.0)


@pytest.mark.gpu
def test_matmul_zero_k_and_empty(lib):
    out = lib.poisoned((5, 7))
    tile.matmul(lib.dev(np.zeros((5, 0), np.float32)), lib.dev(np.zeros((0, 7), np.float32)), out=out)
    assert np.all(lib.host(out) == 0)
    assert lib.host(tile.matmul(lib.dev(np.zeros((0, 3), np.float32)), lib.dev(np.ones((3, 4), np.float32)))).shape \
        == (0, 4)


@pytest.mark.gpu
def test_matmul_strided_input_and_result_kind(lib):
    rng = _rng(2)
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    at = lib.dev(np.ascontiguousarray(a.T)).T  # a transposed (strided) view of the device copy
    c = tile.matmul(at, lib.dev(b))
    assert lib.is_mine(c)
    ref, bound = matmul_reference(a, b)
    assert check_within(lib.host(c), ref, bound).passed


@pytest.mark.gpu
def test_bad_device_arguments(lib):
    a = lib.dev(np.ones((4, 4), np.float32))
    with pytest.raises(TypeError, match="expected dtype float32; got float64"):
        tile.matmul(a, lib.dev(np.ones((4, 4))))
    with pytest.raises(ValueError, match="out: overlaps a"):
        tile.matmul(a, lib.dev(np.ones((4, 4), np.float32)), out=a)


# ---- correlate2d ------------------------------------------------------------


def check_correlate(lib, image, weights, mode, cval=0.0, **kw):
    out = lib.poisoned(image.shape)
    w_arg = weights if kw.pop("host_weights", False) else lib.dev(weights)
    assert tile.correlate2d(lib.dev(image), w_arg, mode, cval, out=out, **kw) is out
    ref, bound = correlate2d_reference(image, weights, mode, cval)
    chk = check_within(lib.host(out), ref, bound)
    assert chk.passed, f"{chk} for image {image.shape} filter {weights.shape} {mode} cval={cval} {kw}"


CONV_CASES = [  # (image shape, filter shape, mode, cval, extra launcher arguments)
    ((1, 1), (3, 3), "reflect", 0.0, {}),
    ((5, 3), (7, 7), "reflect", 0.0, {}),  # image smaller than the filter: folds several times
    ((33, 65), (3, 3), "reflect", 0.0, {}),
    ((100, 200), (3, 3), "reflect", 0.0, {}),  # interior blocks take the rectangular loads
    ((100, 200), (2, 5), "reflect", 0.0, {}),  # even size: the centre is KH//2
    ((131, 257), (7, 7), "reflect", 0.0, {}),
    ((64, 128), (1, 1), "reflect", 0.0, {}),
    ((100, 200), (3, 3), "reflect", 0.0, {"fast_interior": False}),
    ((1, 1), (3, 3), "constant", 1.5, {}),
    ((37, 70), (3, 3), "constant", 0.0, {}),
    ((100, 200), (4, 6), "constant", -2.25, {}),
    ((131, 257), (7, 7), "constant", 0.5, {"host_weights": True}),
    ((100, 200), (3, 3), "constant", 0.5, {"fast_interior": False}),
    ((45, 50), (5, 5), "reflect", 0.0, {"tile_h": 8, "tile_w": 16}),  # many interior blocks
    ((45, 50), (5, 5), "constant", 3.0, {"tile_h": 8, "tile_w": 16}),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape, fshape, mode, cval, kw", CONV_CASES,
                         ids=[f"{s[0]}x{s[1]}-{f[0]}x{f[1]}-{m}-{c}-{'-'.join(map(str, k.values()))}"
                              for s, f, m, c, k in CONV_CASES])
def test_correlate2d_matches_scipy_semantics(lib, shape, fshape, mode, cval, kw):
    rng = _rng(shape[0] + 7 * fshape[1])
    check_correlate(lib, rng.standard_normal(shape).astype(np.float32),
                    rng.standard_normal(fshape).astype(np.float32), mode, cval, **dict(kw))


@pytest.mark.gpu
@given(h=st.integers(1, 150), w=st.integers(1, 150), mode=st.sampled_from(tile.MODES),
       seed=st.integers(0, 2**32 - 1))
@settings(max_examples=10, deadline=None)
def test_correlate2d_property(lib, h, w, mode, seed):
    rng = _rng(seed)
    check_correlate(lib, rng.standard_normal((h, w)).astype(np.float32),
                    rng.standard_normal((3, 3)).astype(np.float32), mode, float(rng.standard_normal()))


def test_correlate2d_reference_is_scipy():  # CPU: the reference the GPU tests trust
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = _rng(3)
    x = rng.standard_normal((9, 6)).astype(np.float32)
    w = rng.standard_normal((4, 7)).astype(np.float32)
    for mode, cval in (("reflect", 0.0), ("constant", 1.25)):
        ref, bound = correlate2d_reference(x, w, mode, cval)
        sp = ndimage.correlate(x.astype(np.float64), w.astype(np.float64), mode=mode, cval=cval)
        assert np.all(np.abs(sp - ref) <= bound)


# ---- softmax ---------------------------------------------------------------


def check_softmax(lib, x, **kw):
    import scipy.special

    out = lib.poisoned(x.shape)
    assert tile.softmax(lib.dev(x), out=out, **kw) is out
    y = lib.host(out)
    ref, bound = softmax_reference(x)
    with np.errstate(invalid="ignore"):
        expect_nan = np.isnan(scipy.special.softmax(x.astype(np.float64), axis=-1))
    np.testing.assert_array_equal(np.isnan(y), expect_nan, err_msg=f"NaN pattern differs from scipy {kw}")
    ok = expect_nan | (np.abs(y.astype(ref.dtype) - ref) <= bound)
    assert ok.all(), f"{(~ok).sum()} elements outside the bound for {x.shape} {kw}; first {np.argwhere(~ok)[:3]}"


SOFTMAX_CASES = [((1, 1), {}), ((3, 5), {}), ((65, 1000), {}), ((7, 1024), {}), ((2, 8192), {}),
                 ((3, 8193), {}), ((2, 20000), {}), ((5, 100), {"single_pass_max": 64, "block_cols": 32}),
                 ((9, 100), {"single_pass_max": 64, "block_rows": 4, "block_cols": 16}),
                 ((300, 3), {"block_rows": 2})]


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kw", SOFTMAX_CASES, ids=[f"{s}-{k}" for s, k in SOFTMAX_CASES])
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_softmax_ragged_shapes(lib, shape, kw, scale):
    check_softmax(lib, (_rng(shape[1]).standard_normal(shape) * scale).astype(np.float32), **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"single_pass_max": 2, "block_cols": 2}], ids=["one-tile", "online"])
def test_softmax_special_values(lib, kw):
    x = np.array([[1.0, 2.0, np.nan, 0.0], [1.0, np.inf, 2.0, 0.0], [-np.inf] * 4, [0.0, -np.inf, 0.0, 1.0],
                  [-np.inf, -np.inf, 3.0, 1.0], [1e30, -1e30, 0.0, 5.0]], np.float32)
    check_softmax(lib, x, **kw)


@pytest.mark.gpu
@given(m=st.integers(1, 70), n=st.integers(1, 9000), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=10, deadline=None)
def test_softmax_property(lib, m, n, seed):
    check_softmax(lib, (_rng(seed).standard_normal((m, n)) * 10).astype(np.float32))


# ---- reduce_sum --------------------------------------------------------------


def sum_ref_bound(x, accumulate):
    """(reference, bound) for the sum over the last axis of n terms.

    float64 accumulation: γ_n(2⁻⁵³)·Σ|x| and one final rounding, u·|ref|.
    float32: γ_n(2⁻²⁴)·Σ|x| for any order of the n − 1 additions (zero padding adds exactly).
    Plus the long-double reference's own γ_n(u_ld)·Σ|x|.
    """
    xl = x.astype(np.longdouble)
    n = max(x.shape[-1], 1)
    ref, absum = xl.sum(axis=-1), np.abs(xl).sum(axis=-1)
    if accumulate == "float64":
        bound = U32 * np.abs(ref) + (gamma(n, 2.0**-53) + gamma(n, U_LD)) * absum
    else:
        bound = (gamma(n, U32) + gamma(n, U_LD)) * absum
    return ref, bound * (1 + 1e-6)


def check_sum(lib, x, accumulate="float64", **kw):
    shape = x.shape[:-1]
    out = lib.poisoned(shape)
    assert tile.reduce_sum(lib.dev(x), out=out, accumulate=accumulate, **kw) is out
    got = lib.host(out)
    ref, bound = sum_ref_bound(x, accumulate)
    assert got.shape == shape
    err = np.abs(got.astype(np.longdouble) - ref)
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound.max()} for {x.shape} {accumulate} {kw}"


SUM_SHAPES = [(1,), (7,), (1024,), (1025,), (1_000_003,), (0,), (1, 1), (3, 1025), (130, 5000), (5, 0),
              (0, 5), (1000, 3), (2, 600_000)]


@pytest.mark.gpu
@pytest.mark.parametrize("accumulate", ["float64", "float32"])
@pytest.mark.parametrize("shape", SUM_SHAPES, ids=str)
def test_reduce_sum_ragged_shapes(lib, accumulate, shape):
    check_sum(lib, _rng(sum(shape)).standard_normal(shape).astype(np.float32), accumulate)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{"split": 1}, {"split": 3}, {"split": 1000}, {"block_rows": 1, "block_cols": 32},
                                {"block_rows": 16, "block_cols": 64, "split": 7}], ids=str)
@pytest.mark.parametrize("shape", [(5000,), (37, 3001)], ids=str)
def test_reduce_sum_tiles_and_splits(lib, shape, kw):
    x = (_rng(4).standard_normal(shape) * 1e3 + 1).astype(np.float32)
    check_sum(lib, x, "float64", **kw)
    check_sum(lib, x, "float32", **kw)


@pytest.mark.gpu
@given(m=st.integers(0, 50), n=st.integers(0, 70_000), one_d=st.booleans(), seed=st.integers(0, 2**32 - 1),
       accumulate=st.sampled_from(["float64", "float32"]))
@settings(max_examples=10, deadline=None)
def test_reduce_sum_property(lib, m, n, one_d, seed, accumulate):
    shape = (n,) if one_d else (m, n)
    check_sum(lib, _rng(seed).standard_normal(shape).astype(np.float32), accumulate)


@pytest.mark.gpu
def test_reduce_sum_returns_callers_kind(lib):
    s = tile.reduce_sum(lib.dev(np.arange(10, dtype=np.float32)))
    assert lib.is_mine(s) and tuple(s.shape) == ()
    assert float(lib.host(s)) == 45.0
