"""simt_tiles.vector (128-bit loads and stores) and the rung built on it, conv2d k07.

* In the simulator ``load4``/``store4`` check their promise (16-byte aligned,
  contiguous, in bounds) — tests show each check fires.
* On the GPU target they compile to ``ld.global.v4.f32`` / ``st.global.v4.f32``
  (checked without a GPU, through ``cuda.compile_ptx``, in a subprocess).
* k07 takes its vector paths where the image allows (counted in the simulator)
  and its scalar paths where it does not (misaligned data, width not a multiple
  of 4, edge blocks), with correct results in every case.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda  # module level: the simulator swaps this global inside kernels

from simt_tiles import vector
from simt_tiles.bounds import check_within
from simt_tiles.kernels.conv2d import (
    MODES,
    _staging,
    convolve2d,
    correlate2d,
    k07_vectorized,
    k08_prefetched,
    k09_async_copy,
)
from simt_tiles.kernels.conv2d.reference import correlate2d_reference
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import DTYPES, poisoned

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sim_only = pytest.mark.skipif(not SIMULATOR, reason="the simulator's checks and call counts")


def test_aligned():
    x = np.zeros(64, np.float32)
    base = x.__array_interface__["data"][0] % 16  # NumPy's allocations: 16-byte aligned here
    assert vector.aligned(x[(16 - base) // 4 % 4:])
    assert not vector.aligned(x[(16 - base) // 4 % 4 + 1:])
    assert vector.aligned(cuda.to_device(x))


def _copy_kernel(a, b):
    i = cuda.grid(1) * 4
    if i + 4 <= a.shape[0]:
        p, q, r, s = vector.load4(a, i)
        vector.store4(b, i, p, q, r, s)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_load4_store4_copy(dtype):
    a = np.arange(32, dtype=dtype)
    b = poisoned((32,), dtype)
    cuda.jit(_copy_kernel)[2, 4](cuda.to_device(a), b)
    np.testing.assert_array_equal(b.copy_to_host(), a)


@sim_only
def test_simulator_checks_the_promise():
    """A misaligned start, a strided row and a vector past the end: each raises."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    x = np.arange(40, dtype=np.float32)
    start = (16 - x.__array_interface__["data"][0] % 16) // 4 % 4  # first 16-byte aligned element
    b = FakeCUDAArray(np.zeros(40, np.float32))
    for bad, what in [(x[start + 1:start + 33], "not a multiple of 16"),
                      (x[start::2][:16], "stride"),
                      (x[start:start + 6], "out of bounds")]:
        def kernel(a, b):
            p, q, r, s = vector.load4(a, 4)
            vector.store4(b, 0, p, q, r, s)
        with pytest.raises(Exception, match=what):
            cuda.jit(kernel)[1, 1](FakeCUDAArray(bad), b)


PTX_CHECK = textwrap.dedent("""
    import numpy as np
    from numba import cuda, float32, float64, void
    from simt_tiles import vector

    def k(a, b):
        i = cuda.grid(1) * 4
        p, q, r, s = vector.load4(a, i)
        vector.store4(b, i, p, q, r, s)

    for t, want in ((float32, ("ld.global.v4.f32", "st.global.v4.f32")),
                    (float64, ("ld.global.v2.f64", "st.global.v2.f64"))):
        ptx, _ = cuda.compile_ptx(k, void(t[::1], t[::1]), cc=(9, 0))
        for w in want:
            assert ptx.count(w) == (1 if t is float32 else 2), (w, ptx)
    print("ok")
""")


def test_gpu_target_emits_128_bit_accesses():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0",
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", PTX_CHECK], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


# --- base + constant: load4_at / store4_at / store_at (the generated matmul rungs) ---------


def _at_kernel(dt):
    from numba import uint32

    from simt_tiles.runtime import SMEM_ALIGN

    def kernel(a, b):
        """b[12 + 4t + q] = a[16 + 4(t ^ 1) + q] through a shared array, 4 threads: every access
        a uint32 base plus a constant offset."""
        s = cuda.shared.array(64, dt, alignment=SMEM_ALIGN)
        t = cuda.threadIdx.x
        i = uint32(t * 4)
        x0, x1, x2, x3 = vector.load4_at(a, i, 16)
        vector.store4_at(s, i, 32, x0, x1, x2, x3)
        cuda.syncthreads()
        y0, y1, y2, y3 = vector.load4_at(s, uint32(i ^ uint32(4)), 32)  # the neighbour's vector
        vector.store_at(b, i, 12, y0)  # b[12 + 4t + q]
        vector.store_at(b, i, 13, y1)
        vector.store_at(b, i, 14, y2)
        vector.store_at(b, i, 15, y3)

    return cuda.jit(kernel)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_base_plus_constant_accesses(dtype):
    from numba import float32, float64

    a = np.arange(40, dtype=dtype)
    b = poisoned((32,), dtype)
    _at_kernel(float32 if np.dtype(dtype) == np.float32 else float64)[1, 4](cuda.to_device(a), b)
    got, want = b.copy_to_host(), np.full(32, np.nan, dtype)
    for t in range(4):  # thread t stores the vector thread t ^ 1 loaded, at 12 + 4t
        want[12 + 4 * t:16 + 4 * t] = a[16 + 4 * (t ^ 1):20 + 4 * (t ^ 1)]
    np.testing.assert_array_equal(got, want)


PTX_AT = textwrap.dedent(r"""
    import re
    from numba import cuda, float32, uint32, void
    from simt_tiles import vector

    def k(a, b):
        s = cuda.shared.array(256, float32, alignment=16)
        i = uint32(cuda.threadIdx.x * 4)
        x0, x1, x2, x3 = vector.load4_at(a, i, 0)
        vector.store4_at(s, i, 64, x0, x1, x2, x3)
        cuda.syncthreads()
        y0, y1, y2, y3 = vector.load4_at(s, i, 128)
        z0, z1, z2, z3 = vector.load4_at(s, i, 160)
        vector.store_at(b, i, 0, y0 + z0 + y1 + z1 + y2 + z2 + y3 + z3)

    ptx, _ = cuda.compile_ptx(k, void(float32[::1], float32[::1]), cc=(9, 0))
    # the constants (bytes) are immediates in the address, not adds before each access
    # (the base registers differ in PTX: one opaque mov each; ptxas merges them)
    loads = re.findall(r"ld\.shared\.v4\.f32\s+\{[^}]*\},\s*\[%rd\d+\+(\d+)\]", ptx)
    assert sorted(map(int, loads)) == [512, 640], ptx
    assert re.search(r"st\.shared\.v4\.f32\s+\[%rd\d+\+256\]", ptx), ptx
    print("ok")
""")


def test_gpu_target_folds_the_constant_into_the_address():
    """load4_at / store4_at on the real target: ``[base+imm]`` (the tile loop's FFMA share rests on it)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0",
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", PTX_AT], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


# --- k07 --------------------------------------------------------------------------------


def _check(got, image, weights, mode, cval, convolve, what=""):
    ref, bound = correlate2d_reference(image, weights, mode, cval, convolve=convolve)
    chk = check_within(got, ref, bound)
    assert chk.passed, f"{chk} {what} image{image.shape} weights{weights.shape} {mode} convolve={convolve}"


VECTOR_RUNGS = {"k07_vectorized": k07_vectorized, "k08_prefetched": k08_prefetched,
                "k09_async_copy": k09_async_copy}


@pytest.fixture(params=list(VECTOR_RUNGS))
def counted(request, monkeypatch):
    """The rung's name, and counts of its vector loads, its vector stores into the patch and
    its vector stores of outputs (``_staging.make_output_store``); the simulator runs the
    kernel's Python."""
    calls = {"load4": 0, "store4": 0, "out4": 0}

    def wrap(name, f):
        def counting(*args):
            calls[name] += 1
            return f(*args)
        return counting

    module = VECTOR_RUNGS[request.param]
    # loads: load4, or copy4_async (k09: global -> shared, counted as a load); store4 into the patch
    for attr, key in (("load4", "load4"), ("copy4_async", "load4"), ("store4", "store4")):
        if hasattr(module, attr):
            monkeypatch.setattr(module, attr, wrap(key, getattr(vector, attr)))
    monkeypatch.setattr(_staging, "store4", wrap("out4", vector.store4))  # the outputs
    return request.param, calls


@sim_only
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kh, kw, convolve", [(3, 3, False), (2, 4, False), (2, 4, True), (1, 5, True)])
def test_vector_rungs_take_their_vector_paths_inside_the_image(kh, kw, convolve, dtype, counted):
    """A 17 × 28 image with the sim presets (tile 4 × 8; k08: two tiles a block): blocks whose
    patch lies inside load whole vectors, full tiles store them; even filters shift the window
    (anchor compiled in)."""
    variant, calls = counted
    rng = np.random.default_rng(kh * 7 + kw)
    image = rng.standard_normal((17, 28)).astype(dtype)
    weights = rng.standard_normal((kh, kw)).astype(dtype)
    out = poisoned(image.shape, dtype)
    (convolve2d if convolve else correlate2d)(image, weights, mode="wrap", out=out, variant=variant)
    _check(out.copy_to_host(), image, weights, "wrap", 0.0, convolve, variant)
    if variant == "k09_async_copy":  # its patch is written by the copies; float64: no copies
        assert (calls["load4"] > 0) == (np.dtype(dtype).itemsize == 4) and calls["out4"] > 0, calls
    else:
        assert calls["load4"] > 0 and calls["store4"] > 0 and calls["out4"] > 0, calls


@sim_only
@pytest.mark.parametrize("shape", [(13, 27), (13, 4)], ids=["width-not-multiple-of-4", "edge-blocks-only"])
def test_vector_rungs_scalar_paths_when_vectors_do_not_fit(shape, counted):
    variant, calls = counted
    rng = np.random.default_rng(3)
    image = rng.standard_normal(shape).astype(np.float32)
    weights = rng.standard_normal((3, 3)).astype(np.float32)
    for mode in MODES:
        got = correlate2d(image, weights, mode=mode, cval=0.5, variant=variant)
        _check(got, image, weights, mode, 0.5, False, variant)
    if shape[1] % 4:
        assert calls == {"load4": 0, "store4": 0, "out4": 0}
    else:
        assert calls["load4"] == 0  # no block's patch lies inside a 4-wide image


@sim_only
def test_k07_misaligned_arrays_take_the_scalar_paths():
    """Data starting 4 bytes past a 16-byte boundary: the launcher passes aligned=False and
    the result is right; the same launch told aligned=True faults in the simulator's check."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    from simt_tiles.kernels.conv2d._common import constant_filter_kernel, specialise

    rng = np.random.default_rng(4)
    h, w = 13, 28
    buf = np.zeros(h * w + 8, np.float32)
    start = (16 - buf.__array_interface__["data"][0] % 16) // 4 % 4 + 1  # 4 bytes past alignment
    image = buf[start:start + h * w].reshape(h, w)
    image[...] = rng.standard_normal((h, w))
    weights = rng.standard_normal((3, 3)).astype(np.float32)
    img_d = FakeCUDAArray(image)
    assert not vector.aligned(img_d)
    got = correlate2d(img_d, weights, mode="reflect", variant="k07_vectorized")
    _check(got.copy_to_host(), image, weights, "reflect", 0.0, False, "k07 misaligned")

    rung = k07_vectorized.RUNG
    spec = specialise(rung.presets["sim"], 3, 3, k07_vectorized.Mode.REFLECT)
    kernel = constant_filter_kernel(rung, spec, np.dtype(np.float32), weights, (1, 1))
    grid, block = rung.geometry(spec, h, w)
    with pytest.raises(Exception, match="not a multiple of 16"):
        kernel[grid, block](img_d, cuda.to_device(np.zeros((h, w), np.float32)), np.float32(0), True)


def test_k07_config_rules():
    with pytest.raises(ConfigError, match="rx"):
        k07_vectorized.Config(block_x=2, block_y=2, rx=3, ry=2)
    cfg = k07_vectorized.PRESETS["default"]
    # the patch's pitch: 4-aligned left halo + tile + right halo, whole vectors (7 x 7: 136 words)
    assert k07_vectorized.left_halo(3) == (4, 1) and k07_vectorized.patch_pitch(128, 7, 1) == 136
    assert cfg.smem_bytes(4) == 30 * 136 * 4


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VECTOR_RUNGS))
@pytest.mark.parametrize("mode, shape, filter_shape, convolve",
                         [("constant", (200, 1028), (7, 7), False), ("reflect", (97, 516), (4, 6), True),
                          ("wrap", (130, 1031), (5, 5), False)],
                         ids=["constant-1028-7x7", "reflect-516-4x6-convolve", "wrap-1031-5x5"])
def test_vector_rungs_on_gpu(mode, variant, shape, filter_shape, convolve):
    """Widths that are and are not multiples of 4, odd and even filters, a mode of each kind
    (constant's cval, reflect's fold, wrap's modulo), and CuPy arrays whose data start 4 bytes
    past a 16-byte boundary (the scalar paths).  Each filter, anchor and mode is a compilation
    (20-30 s on the GPU host with the filter compiled in): one test each, so that they spread over
    the GPU pass's workers; every mode of every rung meets the shipped presets in test_conv2d's
    property tests."""
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(31)
    (h, w), (kh, kw) = shape, filter_shape
    image = rng.standard_normal((h, w)).astype(np.float32)
    weights = rng.standard_normal((kh, kw)).astype(np.float32)
    f = convolve2d if convolve else correlate2d
    _check(f(image, weights, mode=mode, cval=0.5, variant=variant),
           image, weights, mode, 0.5, convolve, variant)
    x = cp.empty(h * w + 1, np.float32)[1:].reshape(h, w)
    x[...] = cp.asarray(image)
    y = cp.full(h * w + 1, np.nan, np.float32)[1:].reshape(h, w)
    f(x, weights, mode=mode, cval=0.5, out=y, variant=variant)  # same kernel, aligned=False
    _check(cp.asnumpy(y), image, weights, mode, 0.5, convolve, f"{variant} misaligned")


@sim_only
def test_simulated_async_copies_land_at_their_wait():
    """cp.async in the simulator: a copy reads its source at once and lands at the wait that covers its
    group, not before (a read before the wait sees the old bytes, as it may on a GPU): what lets the
    simulator tests catch a missing or early wait.  k09 (copy4_async) and k13/k14 (mma.cp_async16) share it."""
    from simt_tiles import mma

    src, dst = np.arange(1, 9, dtype=np.float32), np.zeros(8, np.float32)
    vector.copy4_async(dst, 0, src, 0)
    src[:4] = -1  # the source was read at issue
    assert not dst.any()  # issued, not landed
    vector.wait_copies()
    assert not dst.any()  # not committed: a wait covers groups only
    vector.commit_copies()
    vector.copy4_async(dst, 4, src, 4)
    vector.commit_copies()
    mma.wait_group(1)  # all but the newest group
    assert dst.tolist() == [1, 2, 3, 4, 0, 0, 0, 0]
    mma.wait_group(0)
    assert dst.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    with pytest.raises(ValueError, match="copy4_async"):
        vector.copy4_async(dst, 1, src, 0)  # a misaligned destination faults at issue
