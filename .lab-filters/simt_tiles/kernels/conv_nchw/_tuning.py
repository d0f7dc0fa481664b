"""What :mod:`simt_tiles.autotune` searches for ``conv2d_nchw``: the tiled rungs' spaces and one layer's check.

A space is the rung's presets (``"default"``, ``"small"``) and a few explicit variations
of them, each specialised for the call's filter (``_common.specialise``; a staging that does
not fit in shared memory gets a smaller CK, as the launcher does for presets) and pruned by
:func:`simt_tiles.runtime.fits`; k03 candidates whose prefetch would leave registers
(``k03_double_buffered.prefetch_stays_in_registers``) are left out.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numba import cuda

from ...autotune import Tunable, parse_ints
from ...bounds import check_within
from ...runtime import ConfigError
from . import k02_smem_tiled, k03_double_buffered
from ._common import Call, flops, output_hw
from .dispatch import fit
from .k03_double_buffered import prefetch_stays_in_registers
from .reference import conv2d_nchw_reference

#: k02: its presets, and the default tiles with twice the channels per step (fewer barriers)
K02_SPACE = ("default", "small", {"ck": 8})
#: k03: its presets, and the default tiles with CK = 4 (its preset has 2: two stages in 48 KiB)
K03_SPACE = ("default", "small", {"ck": 4})


def tiled_space(presets: dict, space: tuple, problem: dict, dtype):
    """Field dicts of ``space``'s configs, specialised for ``problem``'s filter
    (``functools.partial`` of a rung's ``presets`` and space)."""
    kh, kw = problem["kh"], problem["kw"]
    for entry in space:
        try:
            base = presets[entry] if isinstance(entry, str) else dataclasses.replace(presets["default"], **entry)
        except (KeyError, ConfigError):
            continue
        spec, _ = fit(None, base, kh, kw, dtype, shrink=True)  # fit reads no rung
        if spec is None:
            continue
        if type(spec).STAGES == 2:  # k03: its prefetch must stay in registers
            if not prefetch_stays_in_registers(spec):
                continue
        yield {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


def variants(dtype) -> tuple:
    """Rungs searched for ``variant=None``: the two tiled ones, k03 (the default rung) first."""
    return ("k03_double_buffered", "k02_smem_tiled")


class Case:
    """One layer on the device (random x, w scaled by 1/√(C·KH·KW), a bias), a NaN-poisoned
    output and the reference with its bound (``reference.conv2d_nchw_reference``, float64
    on the host beyond its long-double limit)."""

    def __init__(self, problem: dict, seed: int = 2026):
        p = problem
        self.dtype = np.dtype(p["dtype"])
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((p["n"], p["c_in"], p["h"], p["w"])).astype(self.dtype)
        w = (rng.standard_normal((p["c_out"], p["c_in"], p["kh"], p["kw"]))
             / np.sqrt(p["c_in"] * p["kh"] * p["kw"])).astype(self.dtype)
        b = rng.standard_normal(p["c_out"]).astype(self.dtype)
        self.ref, self.bound = conv2d_nchw_reference(x, w, b, p["padding"])
        self.oh, self.ow = output_hw(p["h"], p["w"], p["kh"], p["kw"], p["padding"])
        self.x, self.w, self.b = cuda.to_device(x), cuda.to_device(w), cuda.to_device(b)
        self.out = cuda.device_array((p["n"], p["c_out"], self.oh, self.ow), self.dtype)
        self.p = p

    def poison(self) -> None:
        self.out.copy_to_device(np.full(self.out.shape, np.nan, self.dtype))

    def launcher(self, rung, config):
        """One call of ``rung`` with ``config`` as ``conv2d_nchw`` makes it."""
        return functools.partial(rung.run, config, Call(self.x, self.w, self.b, self.out, self.p["padding"], 0))

    def check(self):
        return check_within(self.out.copy_to_host().reshape(self.ref.shape), self.ref, self.bound)

    @staticmethod
    def flops(p: dict) -> int:
        oh, ow = output_hw(p["h"], p["w"], p["kh"], p["kw"], p["padding"])
        return flops(p["n"], p["c_in"], p["c_out"], oh, ow, p["kh"], p["kw"])


def parse(shape: str, options: dict) -> tuple:
    """``--shape NxCxHxW [--filter C_OUTxKHxKW] [--padding P]`` → the problem tuple."""
    n, c, h, w = parse_ints(shape, "--shape", (4,))
    c_out, kh, kw = parse_ints(options.get("filter") or f"{c}x3x3", "--filter", (3,))
    pad = options.get("padding")
    pad = kh // 2 if pad is None else int(pad)
    if pad < 0:
        raise ValueError(f"--padding: expected an int >= 0; got {pad}")
    return (n, c, h, w, c_out, kh, kw, pad, np.dtype(options.get("dtype") or "float32").name)


TUNABLE = Tunable("conv2d_nchw", "conv_nchw", ("n", "c_in", "h", "w", "c_out", "kh", "kw", "padding", "dtype"),
                  variants, Case, parse, "NxCxHxW with --filter C_OUTxKHxKW and --padding P",
                  spaces={k02_smem_tiled.RUNG.name: functools.partial(tiled_space, k02_smem_tiled.PRESETS, K02_SPACE),
                          k03_double_buffered.RUNG.name: functools.partial(tiled_space, k03_double_buffered.PRESETS,
                                                                           K03_SPACE)})
