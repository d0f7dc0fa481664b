"""The softmax and reduce families' cases — the demo's, the aliasing tests' and each rung's lesson
hazard — kept in the house until those families' folders hold them (their ``FAMILY`` reads them
from here; :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import numpy as np

import simt_tiles as st

from ..bounds import gamma, unit_roundoff
from ..registry import AliasCase, numpy_case
from .softmax.reference import softmax_reference


def softmax_demo(rung: str, dtype, c):
    """``rung`` on three ragged rows."""
    x = c.rng.standard_normal((3, 37 * c.scale)).astype(dtype)
    ref, bound = softmax_reference(x)
    return numpy_case(f"{x.shape}", lambda: st.softmax(x, variant=rung, config=c.preset), ref, bound)


def reduce_demo(rung: str, dtype, c):
    """The sum of a ragged vector (reduce takes no variant: one rung)."""
    v = c.rng.standard_normal(1000 * c.scale).astype(dtype)
    ref = np.sum(v.astype(np.longdouble))
    bound = unit_roundoff(dtype) * abs(ref) + gamma(v.size, 2.0**-53) * np.sum(np.abs(v.astype(np.longdouble)))
    return numpy_case(f"sum {v.shape}", lambda: np.asarray([st.reduce(v, config=c.preset)]), np.asarray([ref]),
                      np.asarray([bound]))


SOFTMAX_ALIASING = {"softmax": AliasCase(lambda x, out=None: st.softmax(x, out=out), ("x",), ((3, 7),), (3, 7)),
                    "log_softmax": AliasCase(lambda x, out=None: st.log_softmax(x, out=out), ("x",), ((3, 7),),
                                             (3, 7))}
REDUCE_ALIASING = {"reduce": AliasCase(lambda x, out=None: st.reduce(x, "sum", axis=-1, out=out), ("x",), ((4, 4),),
                                       (4,), None)}

#: the hazard each rung's lesson introduces (the docs' lesson pages, "The hazard it introduces")
SOFTMAX_HAZARDS = {
    "k01_smem_tree": ("A tree reduction in shared memory: a barrier at every level, and a WAR barrier before the "
                     "second reduction reuses the buffer."),
    "k02_warp_shuffle": ("A shuffle is a rendezvous: every lane in the mask must make the matching call (none may "
                        "branch around it); between warps, shared memory and one barrier per reduction remain."),
    "k03_online": ("Rescaling the running sum when the max grows: −inf − (−inf) is NaN, so all-(−inf) rows "
                  "need their own branch."),
    "k04_register_row": ("The row must fit in registers, in a local array indexed only by unrolled constants (or it "
                        "spills); rows longer than threads · max_vpt go to k05. Short rows: a warp per row and no "
                        "barrier at all."),
    "k05_split_row": ("More than 48 KiB of shared memory must be dynamic and the kernel opted in at launch "
                     "(`runtime.allow_dynamic_smem`); each thread keeps a private column, so no barrier and no "
                     "bank conflict."),
    "k06_split_blocks": ("Blocks cannot wait for each other: a row split across blocks needs a second pass over "
                         "the per-piece (max, sum) partials, combined in a fixed order so the result is "
                         "deterministic."),
    "k07_strided_axis": ("Reading an inner axis in place: a warp's lanes must take neighbouring *outer* "
                         "elements (stride 1) and walk the axis, or every load is a separate sector."),
}

REDUCE_HAZARDS = {
    "k01_warp_shuffle": ("Whole-array sums need a second launch (blocks cannot wait for each other); float32 sums "
                        "accumulate in float64 to stay within the pairwise bound."),
    "k02_axis_lanes": ("Many short rows to a warp: the lanes of one output must reduce among themselves only "
                       "(a segmented shuffle), and a long axis split across blocks needs a deterministic "
                       "second pass."),
}
