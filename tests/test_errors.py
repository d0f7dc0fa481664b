"""Bad input raises TypeError/ValueError naming the argument, the expectation and what came."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import simt_tiles
from simt_tiles.kernels.matmul import k01_naive, k03_smem_tiled
from simt_tiles.runtime import ConfigError

f32 = np.float32


def ones(*shape, dtype=f32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "a, b, exc, pattern",
    [
        # 1-D and batched operands follow np.matmul (tests/test_matmul_layouts.py)
        (ones(4), ones(3, 2), ValueError, r"b: expected shape \(\.\.\., 4, N\) since a has shape \(4,\)"),
        (ones(2, 3), ones(4, 2, 1), ValueError, r"b: expected shape \(\.\.\., 3, N\).*got \(4, 2, 1\)"),
        (ones(2, 3), ones(4, 2), ValueError, r"b: expected shape \(\.\.\., 3, N\).*got \(4, 2\)"),
        (ones(2, 3, dtype=np.int32), ones(3, 2), TypeError,
         r"a: expected dtype float32, float64, bfloat16 or float16; got int32"),
        (ones(2, 3, dtype=np.float16), ones(3, 2), TypeError, r"b: expected dtype float16 \(the dtype of a\); got float32"),
        (ones(2, 3), ones(3, 2, dtype=np.float64), TypeError, r"b: expected dtype float32 \(the dtype of a\); got float64"),
        ([[1.0, 2.0]], ones(2, 2), TypeError, r"a: expected a NumPy array or a CUDA array.*got builtins.list"),
        (ones(2, 3), 3.0, TypeError, r"b: expected a NumPy array or a CUDA array.*got builtins.float"),
    ],
)
def test_bad_operands(a, b, exc, pattern):
    with pytest.raises(exc, match=pattern):
        simt_tiles.matmul(a, b)


@pytest.mark.parametrize(
    "out, exc, pattern",
    [
        (np.empty((2, 3), f32), ValueError, r"out: expected shape \(2, 2\); got \(2, 3\)"),
        (np.empty((2, 2), np.float64), TypeError, r"out: expected dtype float32; got float64"),
        (np.empty((2, 4), f32)[:, ::2], ValueError, r"out: expected a writeable C-contiguous NumPy array"),
        (cuda.device_array((3, 2), f32), ValueError, r"out: expected shape \(2, 2\); got \(3, 2\)"),
        (cuda.device_array((2, 2), np.float64), TypeError, r"out: expected dtype float32; got float64"),
        (cuda.device_array(4, f32), ValueError, r"out: expected shape \(2, 2\); got \(4,\)"),
    ],
    ids=["np-shape", "np-dtype", "np-strided", "dev-shape", "dev-dtype", "dev-ndim"],
)
def test_bad_out(out, exc, pattern):
    with pytest.raises(exc, match=pattern):
        simt_tiles.matmul(ones(2, 3), ones(3, 2), out=out)


def test_readonly_numpy_out_is_rejected():
    out = np.empty((2, 2), f32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable=False"):
        simt_tiles.matmul(ones(2, 3), ones(3, 2), out=out)


def test_non_contiguous_device_array_is_copied_once_by_matmul():
    # matmul reads row- or column-major operands in place; other strides: one copy (its docstring)
    a = cuda.to_device(np.arange(24, dtype=f32).reshape(4, 6))[:, ::2]
    c = simt_tiles.matmul(a, ones(3, 2))
    np.testing.assert_array_equal(c.copy_to_host(), np.arange(24, dtype=f32).reshape(4, 6)[:, ::2] @ ones(3, 2))


def test_non_contiguous_numpy_is_accepted():
    # NumPy inputs are copied to the device anyway; the copy is made contiguous.
    a = np.arange(24, dtype=f32).reshape(4, 6)[:, ::2]
    c = simt_tiles.matmul(a, ones(3, 2), variant="k02_coalesced")
    np.testing.assert_array_equal(c, a @ ones(3, 2))


def test_bad_variant_and_config():
    with pytest.raises(ValueError, match=r"variant: expected one of \('k01_naive'"):
        simt_tiles.matmul(ones(2, 2), ones(2, 2), variant="k99")
    with pytest.raises(ValueError, match=r"config: k03_smem_tiled has no preset 'huge'; expected one of \['default', 'sim'\]"):
        simt_tiles.matmul(ones(2, 2), ones(2, 2), variant="k03_smem_tiled", config="huge")
    with pytest.raises(TypeError, match=r"config: expected a preset name or a .*k03_smem_tiled.Config"):
        simt_tiles.matmul(ones(2, 2), ones(2, 2), variant="k03_smem_tiled", config=k01_naive.Config(4, 4))


def test_bad_stream():
    with pytest.raises(TypeError, match=r"stream: expected None, a Numba stream, or a CuPy/PyTorch stream; got builtins.str"):
        simt_tiles.matmul(ones(2, 2), ones(2, 2), stream="fast")


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: k03_smem_tiled.Config(33), r"Config: block \(33, 33\) has 1089 threads; the rule is threads per block <= 1024"),
        (lambda: k03_smem_tiled.Config(0), r"Config.tile = 0: expected a positive int"),
        (lambda: k03_smem_tiled.Config(2.5), r"Config.tile = 2.5: expected a positive int"),
        (lambda: k01_naive.Config(64, 32), r"block \(64, 32\) has 2048 threads"),
    ],
)
def test_config_validation(make, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make()


def test_config_shared_memory_limit():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Big(k03_smem_tiled.Config):
        def block(self):
            return (1,)

    with pytest.raises(ConfigError, match=r"needs 131072 bytes of static shared memory for float32; the rule is <= 49152"):
        Big(128)
    cfg = Big(64)  # 32 KiB for float32: valid; 64 KiB for float64: refused when built
    with pytest.raises(ConfigError, match=r"needs 65536 bytes of static shared memory for float64"):
        simt_tiles.matmul(np.ones((2, 2)), np.ones((2, 2)), variant="k03_smem_tiled", config=cfg)


def test_configs_are_frozen_and_hashable():
    cfg = k03_smem_tiled.Config(8)
    with pytest.raises(Exception):
        cfg.tile = 4
    assert hash(cfg) == hash(k03_smem_tiled.Config(8))
