"""The reduce family's cases: the demo's, the aliasing tests' and each rung's lesson hazard (its
``FAMILY`` reads them; :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import numpy as np

import simt_tiles as st

from ...bounds import gamma, unit_roundoff
from ...registry import AliasCase, numpy_case


def reduce_demo(rung: str, dtype, c):
    """The sum of a ragged vector (reduce takes no variant: one rung)."""
    v = c.rng.standard_normal(1000 * c.scale).astype(dtype)
    ref = np.sum(v.astype(np.longdouble))
    bound = unit_roundoff(dtype) * abs(ref) + gamma(v.size, 2.0**-53) * np.sum(np.abs(v.astype(np.longdouble)))
    return numpy_case(f"sum {v.shape}", lambda: np.asarray([st.reduce(v, config=c.preset)]), np.asarray([ref]),
                      np.asarray([bound]))


REDUCE_ALIASING = {"reduce": AliasCase(lambda x, out=None: st.reduce(x, "sum", axis=-1, out=out), ("x",), ((4, 4),),
                                       (4,), None)}

#: the hazard each rung's lesson introduces (the docs' lesson pages, "The hazard it introduces")
REDUCE_HAZARDS = {
    "k01_warp_shuffle": ("Whole-array sums need a second launch (blocks cannot wait for each other); float32 sums "
                        "accumulate in float64 to stay within the pairwise bound."),
    "k02_axis_lanes": ("Many short rows to a warp: the lanes of one output must reduce among themselves only "
                       "(a segmented shuffle), and a long axis split across blocks needs a deterministic "
                       "second pass."),
    "k03_flat_lanes": ("Unchecked full steps: the count of steps whose loads all lie in the chunk must be exact "
                       "(one step too many reads past the row, or past the array), and the tail must take "
                       "every element left; the cheaper argmax rule holds only while k grows within an "
                       "accumulator."),
}
