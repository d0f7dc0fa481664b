"""simt_tiles.warp: warp shuffles and votes with real warp semantics in the simulator.

Each kernel here runs on the GPU too (the same expectations hold there); in
the simulator it exercises the rendezvous implementation, including partial
last warps, non-full masks, poison on undefined reads and deadlock reports.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from simt_tiles import warp
from simt_tiles.runtime import SIMULATOR

FULL = 0xFFFFFFFF


def run(kernel, nthreads, *arrays, blocks=1):
    dev = [cuda.to_device(a) for a in arrays]
    kernel[blocks, nthreads](*dev)
    return [d.copy_to_host() for d in dev]


def test_gpu_names_are_numba_intrinsics_or_simulated():
    if SIMULATOR:
        assert cuda.shfl_down_sync is warp.shfl_down_sync  # installed on the simulator's cuda
    else:
        assert warp.shfl_down_sync is cuda.shfl_down_sync


@cuda.jit
def _butterfly_sum(x, out):
    # every lane ends with the warp's sum (shfl_xor butterfly)
    i = cuda.grid(1)
    v = x[i]
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, off)
    out[i] = v


@pytest.mark.parametrize("blocks", [1, 3])
def test_xor_butterfly_full_warps(blocks):
    x = np.arange(64 * blocks, dtype=np.float32)
    (_, out) = run(_butterfly_sum, 64, x, np.zeros_like(x), blocks=blocks)
    expect = x.reshape(-1, 32).sum(axis=1).repeat(32)
    np.testing.assert_array_equal(out, expect)


@cuda.jit
def _down_tree(x, out):
    # lane 0 of each warp gets the sum of its (existing) lanes: shfl_down tree
    i = cuda.threadIdx.x
    v = x[i]
    for off in (16, 8, 4, 2, 1):
        v += warp.shfl_down_sync(FULL, v, off)
    out[i] = v


def test_partial_last_warp_reads_poison_from_missing_lanes():
    # 40 threads: warp 1 has lanes 0..7 only.  Lane 0 of warp 1 reads lane 16 (missing):
    # undefined on the GPU -> NaN poison in the simulator, so a naive tree reduction fails loudly.
    x = np.ones(40, np.float32)
    (_, out) = run(_down_tree, 40, x, np.zeros_like(x))
    assert out[0] == 32  # full warp 0
    if SIMULATOR:
        assert np.isnan(out[32])


@cuda.jit
def _up_scan(x, out):
    # inclusive prefix sum within each warp (shfl_up): lanes < off keep their value
    i = cuda.threadIdx.x
    lane = i % 32
    v = x[i]
    for off in (1, 2, 4, 8, 16):
        n = cuda.shfl_up_sync(FULL, v, off)
        if lane >= off:
            v += n
    out[i] = v


def test_shfl_up_inclusive_scan():
    x = np.arange(1, 65, dtype=np.int32)
    (_, out) = run(_up_scan, 64, x, np.zeros_like(x))
    expect = np.concatenate([np.cumsum(x[:32]), np.cumsum(x[32:])])
    np.testing.assert_array_equal(out, expect)


@cuda.jit
def _masked_even_lanes(x, out):
    # only even lanes take part; each reads the next even lane (wrapping within the mask)
    i = cuda.threadIdx.x
    lane = i % 32
    if lane % 2 == 0:
        out[i] = cuda.shfl_sync(0x55555555, x[i], (lane + 2) % 32)


def test_non_full_mask_shfl_sync():
    x = np.arange(32, dtype=np.float32)
    out0 = np.full(32, -1, np.float32)
    (_, out) = run(_masked_even_lanes, 32, x, out0)
    even = np.arange(0, 32, 2)
    np.testing.assert_array_equal(out[even], x[(even + 2) % 32])
    np.testing.assert_array_equal(out[1::2], -1)


@cuda.jit
def _read_outside_mask(x, out):
    i = cuda.threadIdx.x
    if i < 16:
        out[i] = cuda.shfl_sync(0x0000FFFF, x[i], 20)  # lane 20 is not in the mask


@pytest.mark.sim
def test_reading_outside_the_mask_is_poison():
    x = np.arange(32, dtype=np.float32)
    (_, out) = run(_read_outside_mask, 32, x, np.zeros(32, np.float32))
    assert np.isnan(out[:16]).all()


@cuda.jit
def _votes(x, out):
    i = cuda.threadIdx.x
    # the mask names the lanes that exist: a full mask on the 4-lane warp is undefined on a GPU
    # (seen on the H200: wrong votes), so CUDA code passes the partial warp's own lanes
    m = FULL if i < 32 else 0xF
    p = x[i] > 0
    out[i, 0] = cuda.all_sync(m, p)
    out[i, 1] = cuda.any_sync(m, p)
    out[i, 2] = cuda.ballot_sync(m, p)
    out[i, 3] = cuda.eq_sync(m, x[i] // 100)
    cuda.syncwarp(m)


def test_votes_on_a_partial_warp():
    # 36 threads: warp 0 mixed predicates, warp 1 (4 lanes) all positive
    x = np.zeros(36, np.int64)
    x[[1, 5, 31]] = 1
    x[32:] = 7
    (_, out) = run(_votes, 36, x, np.zeros((36, 4), np.int64))
    want = np.zeros((36, 4), np.int64)
    want[:32, 1] = 1  # warp 0: not all, but any
    want[:32, 2] = (1 << 1) | (1 << 5) | (1 << 31)
    want[32:, :2] = 1  # warp 1: all and any
    want[32:, 2] = 0b1111
    want[:, 3] = 1  # every lane of each warp passes the same value (0)
    # ballot is a 32-bit mask (bit 31 may come back as a negative int32): compare its low 32 bits
    np.testing.assert_array_equal(out[:, 2] & 0xFFFFFFFF, want[:, 2], err_msg="ballot_sync")
    for col, name in ((0, "all_sync"), (1, "any_sync"), (3, "eq_sync")):  # predicates: any non-zero is true
        np.testing.assert_array_equal(out[:, col] != 0, want[:, col] != 0, err_msg=name)


@cuda.jit
def _excluded_lane(x):
    i = cuda.threadIdx.x
    x[i] = cuda.shfl_sync(0x1, x[i], 0)  # every lane calls, but the mask names lane 0 only


@pytest.mark.sim
def test_lane_outside_its_own_mask_raises():
    with pytest.raises(RuntimeError, match=r"lane 1 of warp 0 called with mask 0x00000001"):
        run(_excluded_lane, 2, np.zeros(2, np.float32))


@cuda.jit
def _divergent(x):
    i = cuda.threadIdx.x
    if i != 3:  # lane 3 never arrives
        x[i] = cuda.shfl_down_sync(FULL, x[i], 1)


@pytest.mark.sim
def test_divergent_collective_reports_deadlock(monkeypatch):
    monkeypatch.setattr(warp, "TIMEOUT_S", 1.0)
    with pytest.raises(RuntimeError, match=r"deadlocked: lanes \[3\]"):
        run(_divergent, 8, np.zeros(8, np.float32))


@cuda.jit
def _two_d_block(x, out):
    # warps are formed from the linear thread index x + y*Dx: a (16, 4) block has 2 warps
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i = tx + ty * cuda.blockDim.x
    v = x[i]
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, off)
    out[i] = v


def test_warps_follow_the_linear_thread_index():
    x = np.arange(64, dtype=np.float32)
    dx, dout = cuda.to_device(x), cuda.to_device(np.zeros(64, np.float32))
    _two_d_block[1, (16, 4)](dx, dout)
    np.testing.assert_array_equal(dout.copy_to_host(), x.reshape(2, 32).sum(1).repeat(32))


def test_ptx_uses_real_shuffles():
    """On the GPU target the module's names compile to shfl.sync (checked without a GPU)."""
    import os
    import subprocess
    import sys

    code = (
        "from numba import cuda, float32, void\n"
        "from simt_tiles import warp\n"
        "def k(a):\n"
        "    i = cuda.threadIdx.x\n"
        "    a[i] = warp.shfl_down_sync(warp.FULL_MASK, a[i], 1) + warp.ballot_sync(warp.FULL_MASK, a[i] > 0)\n"
        "ptx, _ = cuda.compile_ptx(k, void(float32[::1]), cc=(9, 0))\n"
        "print('shfl.sync.down' in ptx, 'vote.sync.ballot' in ptx)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)  # keep a site shim
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": path}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "True"], out.stderr
