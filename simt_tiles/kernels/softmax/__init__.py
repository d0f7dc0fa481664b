"""The softmax ladder: numerically stable softmax along the last axis of a 2-D array.

=====================  ====================================================
``k01_smem_tree``      block per row; max, sum via shared-memory trees
``k02_warp_shuffle``   reductions in registers with warp shuffles
``k03_online``         one pass for (max, sum) together, one to write
``k04_register_row``   the row held in registers: one read, one write
``k05_split_row``      long rows: registers plus shared memory, two per SM
=====================  ====================================================
"""

from __future__ import annotations

import numbers

from ...interop import as_stream, device_operand, finish_result, prepare_out
from ...launch import planned
from ...registry import Family
from ...runtime import ConfigError, Rung, pick_rung
from .. import _patterns_cases as _cases
from . import k01_smem_tree, k02_warp_shuffle, k03_online, k04_register_row, k05_split_row, reference

RUNGS: dict[str, Rung] = {
    r.name: r for r in (k01_smem_tree.RUNG, k02_warp_shuffle.RUNG, k03_online.RUNG, k04_register_row.RUNG,
                        k05_split_row.RUNG)
}
SOFTMAX_VARIANTS: tuple[str, ...] = tuple(RUNGS)
#: the fewest bytes moved (one read, one write); rows too long for its registers (default: more
#: than 16384 float32, where one block would fill an SM) use the first of LONG_ROW_VARIANTS that fits
BEST_VARIANT = "k04_register_row"
LONG_ROW_VARIANTS = ("k05_split_row", "k03_online")
#: the family's registration (:mod:`simt_tiles.registry`)
FAMILY = Family("softmax", RUNGS, reference, (), _cases.softmax_demo, _cases.SOFTMAX_ALIASING, _cases.SOFTMAX_HAZARDS)

__all__ = ["softmax", "SOFTMAX_VARIANTS", "RUNGS", "BEST_VARIANT"]


@planned
def softmax(x, *, axis=-1, out=None, variant=None, config=None, stream=None):
    """``scipy.special.softmax(x, axis=-1)`` for a 2-D float32/float64 array, on the GPU.

    Only the last axis is supported (``axis`` -1 or 1).  Inputs and results
    follow the same interop rules as :func:`simt_tiles.matmul`: ``out`` must not
    overlap ``x`` (no in-place softmax; ValueError naming ``out``).
    """
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis: expected an int (-1 or 1, the last axis of a 2-D array); got {axis!r}")
    if axis not in (-1, 1):
        raise ValueError(f"axis: expected -1 or 1 (the last axis of a 2-D array); got {axis!r}")
    rung = pick_rung(RUNGS, variant, BEST_VARIANT)
    cfg = rung.resolve_config(config)
    stream = as_stream(stream, x)
    x_op = device_operand(x, "x", ndim=2, stream=stream)
    rows, cols = x_op.dev.shape
    out_op = prepare_out(out, x_op, (rows, cols), x_op.dev.dtype, stream)
    if rows and cols:
        try:
            cfg = cfg.for_problem(rows, cols, x_op.dev.dtype.itemsize)
        except ConfigError:
            if variant is not None:
                raise
            rung, cfg = _long_row_rung(config, rows, cols, x_op.dev.dtype.itemsize)
        grid, block = rung.geometry(cfg, rows, cols)
        rung.launch(cfg, x_op.dev.dtype, grid, block, stream, x_op.dev, out_op.dev)
    return finish_result(out_op, stream)


def _long_row_rung(config, rows, cols, itemsize):
    """The first of LONG_ROW_VARIANTS whose preset fits the row (k03 fits any)."""
    preset = config if isinstance(config, str) else None
    for name in LONG_ROW_VARIANTS:
        rung = RUNGS[name]
        try:
            return rung, rung.resolve_config(preset).for_problem(rows, cols, itemsize)
        except ConfigError:
            continue
    raise AssertionError("k03_online fits every row")  # pragma: no cover
