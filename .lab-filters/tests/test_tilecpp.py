"""simt_tiles.tilecpp, the CUDA Tile C++ counterparts.

On the CPU: the cubin reader (on a synthetic cubin), the argument packing (bytes and types),
the toolchain messages, the CLI, the API's argument checks (simulator), and — where the CUDA
13.3+ toolchain with tileiras is installed (``pip install 'simt-tiles[tilecpp]'``) — the build,
whose cubins must declare exactly the parameter layout :data:`_launch.SIGNATURES` packs.
On a GPU (marked gpu): every op against its family's reference and bound.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from simt_tiles import tilecpp
from simt_tiles.tilecpp import _build, _cubin, _launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------
# the cubin reader, on a cubin made here
# ---------------------------------------------------------------------------


def _attr_sval(attr: int, payload: bytes) -> bytes:
    return struct.pack("<BBH", 4, attr, len(payload)) + payload


def _fake_cubin(kernel: str, params: list[tuple[int, int]], reqntid=(128, 1, 1)) -> bytes:
    """A minimal 64-bit ELF with a section ``.nv.info.<kernel>`` as nvcc writes it."""
    info = b""
    for ordinal, (offset, size) in reversed(list(enumerate(params))):  # nvcc lists them last first
        info += _attr_sval(_cubin.EIATTR_KPARAM_INFO, struct.pack("<IHHI", 0, ordinal, offset, 0x1F000 | size << 18))
    info += struct.pack("<BBH", 3, 0x1B, 0xFF)  # MAXREG_COUNT: a 2-byte attribute to skip
    info += struct.pack("<BBH", 3, _cubin.EIATTR_CBANK_PARAM_SIZE, params[-1][0] + params[-1][1])
    info += _attr_sval(_cubin.EIATTR_REQNTID, struct.pack("<III", *reqntid))
    names = b"\0.shstrtab\0.nv.info." + kernel.encode() + b"\0"
    body = names + info
    shoff = 64 + len(body)
    shoff += -shoff % 8
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0, 64,
                                                                        0, 0, 64, 3, 1)
    sections = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(names), 0, 0, 1, 0),
                struct.pack("<IIQQQQIIQQ", 11, 0x70000000, 0, 0, 64 + len(names), len(info), 0, 0, 4, 0)]
    return (header + body).ljust(shoff, b"\0") + b"".join(sections)


def test_cubin_reader_finds_layout_and_threads():
    info = _cubin.kernels(_fake_cubin("vector_add", [(0, 8), (8, 8), (16, 8), (24, 4)]))
    k = info["vector_add"]
    assert [(p.offset, p.size) for p in k.params] == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert k.param_bytes == 28 and k.reqntid == (128, 1, 1)


def test_cubin_reader_refuses_other_files():
    with pytest.raises(ValueError, match="cubin"):
        _cubin.kernels(b"not an elf file at all, not at all")


# ---------------------------------------------------------------------------
# argument packing
# ---------------------------------------------------------------------------


def test_pack_gives_the_c_types():
    args = _launch.pack("correlate2d", 0x7F00_0000_1000, 0x10, 0x20, 5, 6, 3, 3, 1, 1.5)
    assert [a.dtype for a in args] == [np.uint64] * 3 + [np.int32] * 5 + [np.float32]
    assert int(args[0]) == 0x7F00_0000_1000 and float(args[-1]) == 1.5


def test_param_buffer_bytes():
    buf = _launch.param_buffer("vector_add", 0x1000, 0x2000, 0x3000, 7)
    assert buf == struct.pack("<QQQi", 0x1000, 0x2000, 0x3000, 7)
    # an int after a pointer, then a float: natural alignment, no padding needed here
    buf = _launch.param_buffer("correlate2d", 1, 2, 3, 4, 5, 6, 7, 8, -0.5)
    assert buf == struct.pack("<QQQiiiiif", 1, 2, 3, 4, 5, 6, 7, 8, -0.5) and len(buf) == 48


@pytest.mark.parametrize("name", sorted(_launch.SIGNATURES))
def test_layouts_are_naturally_aligned(name):
    layout = _launch.param_layout(name)
    end = 0
    for offset, size in layout:
        assert offset % size == 0 and offset >= end
        end = offset + size


def test_pack_refuses_what_would_wrap():
    with pytest.raises(ValueError, match="expected 4 arguments"):
        _launch.pack("vector_add", 1, 2, 3)
    with pytest.raises(ValueError, match="32-bit int"):
        _launch.pack("vector_add", 1, 2, 3, 2**31)
    with pytest.raises(ValueError, match="device address"):
        _launch.pack("vector_add", -1, 2, 3, 4)


def test_every_kernel_is_in_a_source():
    for name, (stem, _types) in _launch.SIGNATURES.items():
        text = (_build.SRC_DIR / f"{stem}.cu").read_text()
        assert f"__tile_global__ void {name}(" in text, (name, stem)
    assert set(tilecpp.SOURCES) == {"matmul", "correlate2d", "softmax", "reduce_sum", "vector_add", "bias_relu"}
    assert all(p.is_file() for p in (*tilecpp.SOURCES.values(), *tilecpp.SHARED_HEADERS))
    assert [p.name for p in tilecpp.SHARED_HEADERS] == ["aligned.cuh"]


# ---------------------------------------------------------------------------
# the toolchain and the build
# ---------------------------------------------------------------------------


def _toolchain_or_none():
    try:
        return _build.toolchain()
    except _build.ToolchainError:
        return None


def test_missing_toolchain_says_what_to_install(monkeypatch):
    monkeypatch.setattr(_build, "_pip_bins", list)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(_build.ToolchainError) as err:
        _build.toolchain()
    assert "pip install 'simt-tiles[tilecpp]'" in str(err.value) and "g++" in str(err.value)


def test_old_host_compiler_is_named(monkeypatch, tmp_path):
    fake = tmp_path / "g++"
    fake.write_text("#!/bin/sh\necho 9.4.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(_build.ToolchainError, match=r"C\+\+20 \(g\+\+ 10 or newer\)"):
        _build._host_compiler()


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SIMT_TILES_CACHE_DIR", str(tmp_path))
    assert _build.cache_dir("13.5.37") == tmp_path / "tilecpp" / "13.5.37-sm_90"


def test_build_command_without_toolchain_fails_clearly(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT, "PATH": "/nonexistent", "SIMT_TILES_CACHE_DIR": str(tmp_path),
           "SIMT_TILES_TILECPP_NO_PIP": "1"}
    code = ("import sys; from simt_tiles.tilecpp import _build; _build._pip_bins = lambda: []; "
            "from simt_tiles import cli; sys.exit(cli.main(['tilecpp', 'build']))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 1 and "simt-tiles[tilecpp]" in res.stderr, res.stderr


def test_available_says_why_not():
    ok, why = tilecpp.available()
    assert isinstance(ok, bool) and (ok or why)


@pytest.mark.skipif(_toolchain_or_none() is None, reason="no CUDA 13.3+ toolchain with tileiras (pip install "
                    "'simt-tiles[tilecpp]') and g++ 10+ here")
def test_build_matches_the_launcher(monkeypatch, tmp_path):
    """The cubins are built, carry every kernel, and declare the parameter layout that
    :func:`_launch.pack` fills; a second build compiles nothing."""
    monkeypatch.setenv("SIMT_TILES_CACHE_DIR", str(tmp_path))
    out = tilecpp.build()
    assert out == _build.cache_dir(_build.toolchain().version) and _build.built_dir() == out
    for name, (stem, _types) in _launch.SIGNATURES.items():
        info = _launch.cubin_kernels(_build.cubin_path(out, stem))[name]
        assert [(p.offset, p.size) for p in info.params] == _launch.param_layout(name), name
        last = _launch.param_layout(name)[-1]
        assert info.param_bytes >= last[0] + last[1] and info.reqntid and info.reqntid[0] >= 32
        if name in _launch.ALIGNED_VARIANTS:  # the TMA needs the _a16 promises: only the general one has none
            assert info.param_bytes == last[0] + last[1], name
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*.cubin")}
    tilecpp.build()
    assert stamps == {p: p.stat().st_mtime_ns for p in out.glob("*.cubin")}
    # the comparison above can fail: a signature that disagrees with the source is caught
    monkeypatch.setitem(_launch.SIGNATURES, "vector_add", ("vector_add", ("ptr", "ptr", "i32", "ptr")))
    info = _launch.cubin_kernels(_build.cubin_path(out, "vector_add"))["vector_add"]
    assert [(p.offset, p.size) for p in info.params] != _launch.param_layout("vector_add")


# ---------------------------------------------------------------------------
# the API's argument checks (before any launch; NumPy operands go through Numba)
# ---------------------------------------------------------------------------

F32, F64 = np.float32, np.float64


@pytest.mark.parametrize("call, exc, match", [
    (lambda: tilecpp.matmul(np.ones((2, 3), F32), np.ones((4, 2), F32)), ValueError, "b: expected 3 rows"),
    (lambda: tilecpp.matmul(np.ones((2, 3), F64), np.ones((3, 2), F32)), TypeError, "a: expected dtype float32"),
    (lambda: tilecpp.matmul(np.ones((2, 3), F32), np.ones((3, 2), F32), precision="bf16"), ValueError, "precision"),
    (lambda: tilecpp.matmul(np.ones(3, F32), np.ones((3, 2), F32)), ValueError, "a: expected a 2-D array"),
    (lambda: tilecpp.matmul(np.ones((2, 3), F32), np.ones((3, 2), F32), out=np.ones((2, 3), F32)),
     ValueError, "out: expected shape"),
    (lambda: tilecpp.correlate2d(np.ones((4, 4), F32), np.ones((3, 3), F32), mode="grid-wrap"), ValueError, "mode"),
    (lambda: tilecpp.correlate2d(np.ones((4, 4), F32), np.ones((3, 3), F32), cval="0"), TypeError, "cval"),
    (lambda: tilecpp.correlate2d(np.ones((4, 4), F32), np.ones((0, 3), F32)), ValueError, "weights: expected at"),
    (lambda: tilecpp.correlate2d(np.ones((4, 4), F32), np.ones((3, 3), F64)), TypeError, "weights: expected dtype"),
    (lambda: tilecpp.softmax(np.ones(4, F32)), ValueError, "x: expected a 2-D array"),
    (lambda: tilecpp.reduce_sum(np.ones((2, 2), F32), axis=0), ValueError, "axis"),
    (lambda: tilecpp.reduce_sum(np.ones((2, 2), F32), axis=1.0), TypeError, "axis"),
    (lambda: tilecpp.vector_add(np.ones(3, F32), np.ones(4, F32)), ValueError, "b: expected shape"),
    (lambda: tilecpp.bias_relu(np.ones((3, 4), F32), np.ones(3, F32)), ValueError, "bias: expected shape"),
    (lambda: tilecpp.bias_relu(np.ones((3, 4), F32), [1.0] * 4), TypeError, "bias: expected a NumPy array"),
])
def test_bad_arguments_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------------------
# on a GPU: every op against its family's reference and bound
# ---------------------------------------------------------------------------


def _gpu_ready():
    ok, why = tilecpp.available()
    if not ok:
        pytest.skip(why)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "tf32"])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (65, 33, 17), (129, 200, 67), (4, 6, 0), (0, 3, 2)])
def test_matmul_gpu(precision, m, n, k):
    from simt_tiles.bounds import TF32_U, BoundCheck, gamma, unit_roundoff
    from simt_tiles.kernels.matmul.reference import matmul_reference

    _gpu_ready()
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k)).astype(F32), rng.standard_normal((k, n)).astype(F32)
    got = tilecpp.matmul(a, b, precision=precision)
    ref, bound = matmul_reference(a, b)
    if precision == "tf32":
        bound = bound + (np.abs(a) @ np.abs(b)) * (2 * TF32_U + TF32_U**2) * (1 + gamma(max(k, 1), unit_roundoff(F32)))
    assert BoundCheck(got, ref, bound)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", tilecpp.MODES)
@pytest.mark.parametrize("h, w, kh, kw", [(37, 70, 3, 3), (5, 3, 7, 7), (33, 65, 4, 5)])
def test_correlate2d_gpu(mode, h, w, kh, kw):
    from simt_tiles.bounds import BoundCheck
    from simt_tiles.kernels.conv2d.reference import correlate2d_reference

    _gpu_ready()
    rng = np.random.default_rng(h * w)
    x, wt = rng.standard_normal((h, w)).astype(F32), rng.standard_normal((kh, kw)).astype(F32)
    ref, bound = correlate2d_reference(x, wt, mode, 1.5)
    assert BoundCheck(tilecpp.correlate2d(x, wt, mode=mode, cval=1.5), ref, bound)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n", [(1, 1), (17, 100), (5, 1025), (2, 9000)])
def test_softmax_gpu(m, n):
    from simt_tiles.kernels.softmax.reference import softmax_reference

    _gpu_ready()
    x = np.random.default_rng(n).standard_normal((m, n)).astype(F32) * 10
    ref, bound = softmax_reference(x)
    assert np.all(np.abs(tilecpp.softmax(x).astype(ref.dtype) - ref) <= bound)


@pytest.mark.gpu
@pytest.mark.parametrize("shape, axis", [((0,), None), ((4097,), None), ((1_000_003,), None), ((7, 3000), -1)])
def test_reduce_sum_gpu(shape, axis):
    from simt_tiles.bounds import gamma, unit_roundoff

    _gpu_ready()
    x = np.random.default_rng(7).standard_normal(shape).astype(F32)
    ref = x.astype(np.longdouble).sum(axis=axis)
    n = max(x.size if axis is None else shape[-1], 1)
    bound = unit_roundoff(F32) * np.abs(ref) + 2 * gamma(n, 2.0**-53) * np.abs(x.astype(np.longdouble)).sum(axis=axis)
    assert np.all(np.abs(np.asarray(tilecpp.reduce_sum(x, axis=axis), np.longdouble) - ref) <= bound * (1 + 1e-6))


@pytest.mark.gpu
def test_elementwise_gpu():
    _gpu_ready()
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(4097).astype(F32), rng.standard_normal(4097).astype(F32)
    assert np.array_equal(tilecpp.vector_add(a, b), a + b)
    x, bias = rng.standard_normal((40, 513)).astype(F32), rng.standard_normal(513).astype(F32)
    x[::3, ::7] = np.nan
    assert np.array_equal(tilecpp.bias_relu(x, bias), np.maximum(x + bias, F32(0)), equal_nan=True)
