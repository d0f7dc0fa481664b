"""k05's ``spill_bits=16``: a 16-bit row's shared-memory values kept as their own 16-bit bits (half the bytes).

Softmax then takes the exp of a shared value twice (its sum, its write) from the same input bits, so the result is
bit-for-bit that of the same config holding them as float32 (``spill_bits=32``, which stores the exp back): the
property test compares the two over ragged rows reaching shared memory, several warps, softmax and log_softmax,
special values, both 16-bit dtypes, NaN-poisoned outputs, and each against the family's 16-bit bound.  The
race check runs the shared part; the capacity test states what the preset holds (two blocks an SM of 50257 values,
GPT-2's vocabulary, which the float32-held presets hold only one an SM).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simt_tiles import analyze
from simt_tiles.kernels.softmax import RUNGS
from simt_tiles.kernels.softmax.k05_split_row import Config as SplitConfig
from simt_tiles.runtime import SIMULATOR, ConfigError

from .common import HALF, edge_sizes
from .profiles import examples
from .test_softmax16 import SPECIAL16, assert_softmax16_ok, call16, inputs, poisoned16, random_rows, to16
from .test_softmax16_k05_vec import fitted_k05

K05 = RUNGS["k05_split_row"]


@st.composite
def spill16_configs(draw):
    """A k05 config with ``spill_bits=16``: one to three warps, one or two values in registers (``max_vpt`` caps
    them, so rows reach shared memory), shared memory for one to four register-fulls."""
    threads = draw(st.sampled_from([32, 64, 96] if SIMULATOR else [32, 256, 512]), "threads")
    reg = draw(st.sampled_from([1, 2]), "values in registers")
    smem = 2 * threads * reg * draw(st.sampled_from([1, 2, 4]), "register-fulls in shared memory")
    return SplitConfig(threads=threads, vpt=reg, reg_vpt=reg, max_vpt=reg, smem_budget=smem, min_blocks=1,
                       vpt_step=1, spill_bits=16)


@settings(max_examples=examples(20))
@given(dt=st.sampled_from(HALF), data=st.data())
def test_spill16_is_bit_equal_to_float32_held_values(dt, data):
    """Rows of 1-3, lengths around a block's registers and its shared columns, special values, a row of −inf:
    ``spill_bits=16`` gives the bits ``spill_bits=32`` does at the same split (fitted the same), within the bound."""
    config = data.draw(st.one_of(st.just(K05.presets["sim_held16"]), spill16_configs()), "config")
    T, R = config.threads, config.max_vpt
    rows = data.draw(st.sampled_from([1, 2, 3]), "rows")
    cols = data.draw(st.sampled_from(edge_sizes(T, T * R, 2 * T * R + 1, 3 * T * R)), "cols")
    fitted = fitted_k05(dt, rows, cols, config)
    x16, x32, log = random_rows(data, dt, rows, cols)
    y16 = call16(x16, dt, log=log, out=poisoned16((rows, cols), dt), variant="k05_split_row", config=fitted)
    as32 = dataclasses.replace(fitted, spill_bits=32, smem_budget=2 * fitted.smem_budget)  # (the same split)
    y32 = call16(x16, dt, log=log, out=poisoned16((rows, cols), dt), variant="k05_split_row", config=as32)
    assert np.array_equal(y16.view(np.uint32), y32.view(np.uint32)), (y16, y32)
    assert_softmax16_ok(x32, y16, dt, log)


@pytest.mark.parametrize("dt", HALF)
def test_spill16_special_rows(dt):
    """scipy's special rows (NaN, ±inf, all −inf, ±60000: float16's log_softmax −inf below −65520, as torch's), every
    value in shared memory but one a thread."""
    x16, x32 = to16(np.tile(SPECIAL16, (1, 40)), dt)  # 120 columns: 64 threads × (1 register + 1 shared) and more
    cfg = SplitConfig(threads=32, vpt=4, reg_vpt=1, max_vpt=1, smem_budget=2 * 32 * 4, min_blocks=1, vpt_step=1,
                      spill_bits=16)
    assert_softmax16_ok(x32, call16(x16, dt, variant="k05_split_row", config=cfg), dt)
    y = call16(x16, dt, log=True, variant="k05_split_row", config=cfg)
    assert_softmax16_ok(x32[:-1], y[:-1], dt, log=True)  # (the last row: float16's log_softmax overflows, as torch's)
    assert (y[-1, 1::3] == -np.inf).all() if dt == "float16" else np.isfinite(y[-1]).all()


@pytest.mark.sim  # simt_tiles.analyze runs in the simulator
def test_spill16_passes_the_race_check():
    """The 16-bit shared values (a thread's own column) and the float32 partials: no conflict in a barrier interval."""
    x16, x32 = inputs(np.random.default_rng(8), (2, 300), "bfloat16")
    with analyze.racecheck():
        y = call16(x16, "bfloat16", variant="k05_split_row", config="sim_held16")
    assert_softmax16_ok(x32, y, "bfloat16")


def test_spill16_holds_a_vocabulary_row_two_blocks_an_sm():
    """The "held16" preset: 50257 16-bit values (GPT-2) in 256 threads × (82 registers + 118 shared), 59 KiB of
    shared memory a block (two blocks an SM: ≤ 113 KiB each; the float32-held "default" holds 45568 at most); 70144
    at most; the knob is refused with ``vec`` and leaves float32 rows as they were."""
    held16 = K05.presets["held16"]
    fit = held16.for_problem(4096, 50257, 2)
    assert (fit.reg_vpt, fit.vpt) == (82, 200) and fit.dynamic_smem_bytes(2) == 118 * 256 * 2 <= 113 * 1024
    assert held16.for_problem(1, 70144, 2).vpt == 274
    with pytest.raises(ConfigError, match="rows of 70145 values of 2 bytes do not fit"):
        held16.for_problem(1, 70145, 2)
    with pytest.raises(ConfigError, match="do not fit k05_split_row"):
        K05.presets["default"].for_problem(1, 45569, 2)
    assert held16.for_problem(1, 30000, 4).dynamic_smem_bytes(4) == \
        dataclasses.replace(held16, spill_bits=32).for_problem(1, 30000, 4).dynamic_smem_bytes(4)
    with pytest.raises(ConfigError, match=r"spill_bits is 32 or 16 \(16: with vec 1\)"):
        SplitConfig(vec=2, vpt=4, reg_vpt=4, spill_bits=16)
