"""The softmax family's cases: the demo's, the aliasing tests' and each rung's lesson hazard (its
``FAMILY`` reads them; :mod:`simt_tiles.registry`)."""

from __future__ import annotations

import simt_tiles as st

from ...registry import AliasCase, numpy_case
from .reference import softmax_reference


def softmax_demo(rung: str, dtype, c):
    """``rung`` on three ragged rows."""
    x = c.rng.standard_normal((3, 37 * c.scale)).astype(dtype)
    ref, bound = softmax_reference(x)
    return numpy_case(f"{x.shape}", lambda: st.softmax(x, variant=rung, config=c.preset), ref, bound)


SOFTMAX_ALIASING = {"softmax": AliasCase(lambda x, out=None: st.softmax(x, out=out), ("x",), ((3, 7),), (3, 7)),
                    "log_softmax": AliasCase(lambda x, out=None: st.log_softmax(x, out=out), ("x",), ((3, 7),),
                                             (3, 7)),
                    "softmax_backward": AliasCase(lambda y, dy, out=None: st.softmax_backward(y, dy, out=out),
                                                  ("y", "dy"), ((3, 7), (3, 7)), (3, 7))}

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
