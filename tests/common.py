"""Test machinery every ladder uses: the dtypes, sizes that break tiled code, poisoned outputs,
the launch configs a property test draws."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import strategies as st
from numba import cuda

from simt_tiles.runtime import SIMULATOR, Rung

DTYPES = (np.float32, np.float64)
SMALL_PRIMES = (2, 3, 5, 7, 11, 13)
GPU_SIZES = (31, 97, 127, 257, 509, 1000, 1031)


def grid_limit(monkeypatch, y: int, z: int | None = None) -> list:
    """CUDA's grid limits, which the simulator does not enforce, at ``y`` (and ``z``) blocks for the rest
    of the test: a launch past them raises as the driver would (CUDA_ERROR_INVALID_VALUE).  Set the
    module's cap to the same number, so a launch the code forgot to cut fails here.  Returns the list
    of every launch's grid (simulator only)."""
    if not SIMULATOR:
        pytest.skip("the grid limit is the GPU's own (a test sets a small one in the simulator)")
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    configure, grids = FakeCUDAKernel.__getitem__, []

    def getitem(self, configuration):
        self = configure(self, configuration)
        grid = tuple(self.grid_dim)
        grids.append(grid)
        if grid[1] > y or (z is not None and grid[2] > z):
            raise ValueError(f"grid {grid} past the test's limits y {y}, z {z} (CUDA: 65535; the driver refuses it)")
        return self

    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", getitem)
    return grids


def edge_sizes(*tiles: int) -> list[int]:
    """Sizes that break tiled code: 0, 1, around each tile size, around two tiles, primes."""
    sizes = {0, 1, *SMALL_PRIMES}
    for tile in tiles:
        sizes |= {tile - 1, tile, tile + 1, 2 * tile + 1}
        if not SIMULATOR:
            sizes |= {4 * tile - 1}
    if not SIMULATOR:
        sizes |= set(GPU_SIZES)
    return sorted(s for s in sizes if s >= 0)


def poisoned(shape, dtype):
    """A device array full of NaN: any element the kernel fails to write fails the check."""
    return cuda.to_device(np.full(shape, np.nan, dtype=dtype))


def transposed(dev, axes=None):
    """A transposed *view* of a device array.  numba-cuda's ``DeviceNDArray.T`` copies on a GPU (it
    launches a transpose kernel and refuses more than 2-D); the simulator's ``.T`` is a NumPy view, so
    a test of strided operands must build the view itself to test the same thing in both."""
    axes = tuple(reversed(range(dev.ndim))) if axes is None else tuple(axes)
    if SIMULATOR:
        return dev.transpose(axes)
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    return DeviceNDArray(tuple(dev.shape[i] for i in axes), tuple(dev.strides[i] for i in axes), dev.dtype,
                         gpu_data=dev.gpu_data)


def configs(rung, random_configs, n_drawn: int = 2):
    """Launch configs for a property test of ``rung``.

    Simulator: its "sim" preset or a random valid config (a simulated "compile" is free).
    GPU: a fixed pool — the shipped presets (all but "sim") and ``n_drawn`` random valid
    configs drawn once per run — so each (rung, config, dtype) compiles once (0.5–3 s) and the
    examples vary the problem instead; the pool differs from run to run."""
    if SIMULATOR:
        return st.one_of(st.just(rung.presets["sim"]), random_configs)
    return st.sampled_from(gpu_pool(rung, random_configs, n_drawn))


_POOLS: dict = {}


def gpu_pool(rung, random_configs, n_drawn: int = 2) -> list:
    """The shipped presets of ``rung`` (but "sim") and ``n_drawn`` configs drawn from
    ``random_configs`` (once per run and rung)."""
    key = (id(rung), id(random_configs))
    if key not in _POOLS:
        from concurrent.futures import ThreadPoolExecutor

        # drawn in another thread: the pool is usually first needed inside a @given test, where
        # hypothesis refuses .example() (its build context is thread-local)
        with ThreadPoolExecutor(1) as one:
            _POOLS[key] = one.submit(_draw_pool, rung, random_configs, n_drawn).result()
    return _POOLS[key]


def _draw_pool(rung, random_configs, n_drawn: int) -> list:
    import warnings

    from hypothesis.errors import NonInteractiveExampleWarning

    from simt_tiles.runtime import ConfigError

    pool = [c for name, c in rung.presets.items() if name != "sim"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        target = len(pool) + n_drawn
        for _ in range(8 * n_drawn):  # .example() may repeat a config
            if len(pool) >= target:
                break
            try:
                cfg = random_configs.example()
            except ConfigError:  # a draw past the rung's rules (shared memory, threads): not a config to test
                continue
            if cfg not in pool:
                pool.append(cfg)
    return pool


#: the config a semantics test at a tiny image passes with a named variant: the rung's small "sim" tile,
#: in the simulator (where it is the default) and on a GPU too.  Edge, fold and special-value code is
#: the same code at any tile size, and a tile of a few outputs compiles 5-10x faster than a shipped
#: preset with the filter unrolled over 24 outputs (30-50 s a kernel on the H200's host under load):
#: the GPU pass's property and larger-image tests run the shipped presets
SEMANTICS_CONFIG = "sim"

#: correlate and convolve (``ops``: the ``convolve`` flags a test runs): two parameters in the
#: simulator, one test for both on a GPU — a rung that takes its weights at run time compiles one
#: kernel for both, once, in the test's own process (not twice, on two workers at once)
BOTH_OPS = ((pytest.param((False,), id="correlate"), pytest.param((True,), id="convolve")) if SIMULATOR
            else (pytest.param((False, True), id="correlate+convolve"),))

#: filter sides a GPU property test draws from (each (config, filter shape, mode, dtype) compiles
#: once); 17 is longer than 4n + 2 for the image sides n ≤ 3 (reflect and mirror fold more than once)
GPU_FILTER_SIDES = (1, 2, 3, 4, 5, 17)
_CASES: dict = {}


def kernel_cases(key, config_strategy, fits=lambda config, kh, kw, mode: True, modes=None,
                 sides=GPU_FILTER_SIDES) -> list:
    """A GPU conv test's kernels: one ``(config, kh, kw, mode, convolve, weights_seed)`` per mode,
    drawn once per run and ``key`` (the config from ``config_strategy``, the filter sides from
    ``sides``, ``fits`` to refuse a case), so its examples compile one kernel per mode and vary
    what costs no compilation (image sides, values, cval).  The weights come from
    ``weights_seed``: a rung that compiles the filter's values in (k04, k05) compiles once per case."""
    if key not in _CASES:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as one:  # .example() outside the test's hypothesis context
            _CASES[key] = one.submit(_draw_cases, config_strategy, fits, modes, sides).result()
    return _CASES[key]


def _draw_cases(config_strategy, fits, modes, sides) -> list:
    import random
    import warnings

    from hypothesis.errors import NonInteractiveExampleWarning

    from simt_tiles.kernels.conv2d._common import MODES

    rnd, cases = random.Random(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        for mode in modes or MODES:
            for _ in range(50):
                config, kh, kw = config_strategy.example(), rnd.choice(sides), rnd.choice(sides)
                if fits(config, kh, kw, mode):
                    cases.append((config, kh, kw, mode, rnd.random() < 0.5, rnd.randrange(2**32)))
                    break
    return cases


def assert_like_scipy(got, expect, ref, bound, what):
    """NaN / +inf / -inf exactly where scipy has them (and the reference too); every finite element
    within the reference's bound.  Returns the bound check (for ``note``)."""
    from simt_tiles.bounds import check_within

    got = np.asarray(got)
    assert got.dtype == expect.dtype, what
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        np.testing.assert_array_equal(test(ref), test(expect), err_msg=f"reference's {name} differ: {what}")
        np.testing.assert_array_equal(test(got), test(expect), err_msg=f"{name} positions differ: {what}")
    finite = np.isfinite(expect)
    chk = check_within(got[finite], ref[finite], bound[finite])
    assert chk.passed, f"{chk}: {what}"
    return chk


# ---- 16-bit results (float16, bfloat16) -----------------------------------------------------------------
HALF = ("float16", "bfloat16")
#: unit roundoff of a rounding to the 16-bit dtype, and half its smallest subnormal (an output that underflows)
U16 = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
ETA16 = {"float16": 2.0 ** -25, "bfloat16": 2.0 ** -134}


class Bf16(np.ndarray):
    """uint16 bits that ``dtype_name`` reports as bfloat16 (within :func:`bf16_names`): NumPy without ml_dtypes."""


@contextlib.contextmanager
def bf16_names(family_module):
    """``family_module``'s dtype recognition (and interop's, for ``out=``) reads a :class:`Bf16` array as bfloat16."""
    import simt_tiles.interop as interop

    plain = interop.dtype_name

    def name(x):
        return "bfloat16" if isinstance(x, Bf16) else plain(x)

    saved = family_module.dtype_name, interop.dtype_name
    family_module.dtype_name = interop.dtype_name = name
    try:
        yield
    finally:
        family_module.dtype_name, interop.dtype_name = saved


def spy_launched_vecs(monkeypatch, rung) -> list:
    """The ``vec`` of every config of ``rung`` launched from now on (through ``Rung.launch``, a family's only way to
    launch): the 16-bit wide-load tests' proof of which kernel ran."""
    seen: list[int] = []
    launch = Rung.launch

    def spy(self, config, *args, **kwargs):
        if self is rung:
            seen.append(config.vec)
        return launch(self, config, *args, **kwargs)

    monkeypatch.setattr(Rung, "launch", spy)
    return seen
