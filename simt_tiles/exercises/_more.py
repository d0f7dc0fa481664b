"""The graders of the technique exercises (register blocking to vectorised loads).

Same contract as :mod:`._grading`'s: each grader yields ``(case label, thunk)`` and a thunk
returns None when the case passes or a sentence saying what differed.  Shapes are tiny and
ragged (not tile multiples, K = 0, one element), both dtypes, NaN-poisoned outputs, the
project's references and bounds.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import mma
from ..bounds import mma_error_factor, ref_dtype
from ..kernels.conv2d.reference import CONV_MODES, correlate2d_reference, correlate_separable_reference
from ..kernels.matmul.reference import matmul_reference
from ..kernels.softmax.reference import softmax_reference
from ..runtime import cdiv
from ._grading import DTYPES, _barriers, _bounded, _exact, _poisoned

#: M×N×K cases of the matmul exercises: one element, ragged edges, K = 0, several blocks
MATMUL_SHAPES = ((1, 1, 1), (17, 9, 5), (5, 33, 0), (33, 18, 9))


def _ints(mod, *names):
    values = [getattr(mod, n, None) for n in names]
    if not all(isinstance(v, int) and v > 0 for v in values):
        got = ", ".join(f"{n}={v!r}" for n, v in zip(names, values))
        return f"expected positive int constants {', '.join(names)}; got {got}"
    return None


def _matmul_cases(mod, launch, shapes=MATMUL_SHAPES, seed=10):
    rng = np.random.default_rng(seed)
    for m, n, k in shapes:
        for dt in DTYPES:
            def case(m=m, n=n, k=k, dt=dt):
                a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
                c = _poisoned((m, n), dt)
                launch(cuda.to_device(a), cuda.to_device(b), c, dt)
                ref, bound = matmul_reference(a, b)
                return _bounded(c.copy_to_host(), ref, bound)
            yield f"M×N×K = {m}×{n}×{k}, {np.dtype(dt).name}", case


def _blocked_launch(mod):
    def launch(a, b, c, dt):
        m, n = c.shape
        mod.make_kernel(dt)[(cdiv(n, mod.BN), cdiv(m, mod.BM)), (mod.THREADS,)](a, b, c)
    return launch


def _blocked(names):
    def grader(mod, path):
        problem = _ints(mod, *names)
        if problem is None and mod.THREADS > 1024:
            problem = f"THREADS = {mod.THREADS}: at most 1024 threads per block"
        if problem:
            yield "constants", lambda: problem
            return
        yield from _matmul_cases(mod, _blocked_launch(mod))
    return grader


def _double_buffer(mod, path):
    n_sync = _barriers(path)
    if n_sync > 2:
        yield "barriers", lambda: (f"found {n_sync} cuda.syncthreads() calls in {path.name}: the point of two "
                                   "stages is ONE barrier per K step (plus the prologue's)")
        return
    if (problem := _ints(mod, "T")):
        yield "constants", lambda: problem
        return

    def launch(a, b, c, dt):
        m, n = c.shape
        mod.make_kernel(dt)[(cdiv(n, mod.T), cdiv(m, mod.T)), (mod.T, mod.T)](a, b, c)
    yield from _matmul_cases(mod, launch, shapes=((1, 1, 1), (9, 7, 17), (4, 4, 0), (17, 9, 8)))


def _halo_modes(mod, path):
    if (problem := _ints(mod, "TX", "TY")):
        yield "constants", lambda: problem
        return
    rng = np.random.default_rng(11)
    for mode in ("constant", "nearest", "wrap", "reflect", "mirror"):
        for h, w in ((1, 1), (5, 18)):
            for dt in DTYPES:
                def case(h=h, w=w, dt=dt, mode=mode):
                    image = rng.standard_normal((h, w)).astype(dt)
                    weights = rng.standard_normal((3, 3)).astype(dt)
                    out = _poisoned((h, w), dt)
                    mod.make_kernel(dt, mode)[(cdiv(w, mod.TX), cdiv(h, mod.TY)), (mod.TX, mod.TY)](
                        cuda.to_device(image), cuda.to_device(weights), out)
                    ref, bound = correlate2d_reference(image, weights, mode=mode, cval=0.0)
                    return _bounded(out.copy_to_host(), ref, bound)
                yield f"mode {mode!r}, image {h}×{w}, {np.dtype(dt).name}", case
    assert set(CONV_MODES) == {"constant", "nearest", "wrap", "reflect", "mirror"}


def _separable_filter(mod, path):
    rng = np.random.default_rng(12)
    for (h, w), (kh, kw) in (((1, 1), (3, 3)), ((6, 19), (5, 3)), ((9, 5), (1, 7))):
        for dt in DTYPES:
            def case(h=h, w=w, kh=kh, kw=kw, dt=dt):
                image = rng.standard_normal((h, w)).astype(dt)
                wy, wx = rng.standard_normal(kh).astype(dt), rng.standard_normal(kw).astype(dt)
                out = _poisoned((h, w), dt)
                mod.correlate_separable(cuda.to_device(image), cuda.to_device(wy), cuda.to_device(wx), out)
                ref, bound = correlate_separable_reference(image, wy, wx, mode="constant", cval=0.0)
                return _bounded(out.copy_to_host(), ref, bound)
            yield f"image {h}×{w}, filter {kh}×{kw}, {np.dtype(dt).name}", case


def _warp_reduce(mod, path):
    rng = np.random.default_rng(13)
    for rows, n in ((1, 1), (2, 31), (3, 33), (2, 97)):
        for dt in DTYPES:
            def case(rows=rows, n=n, dt=dt):
                x = rng.standard_normal((rows, n)).astype(dt)
                out = _poisoned(rows, dt)
                mod.make_kernel(dt)[rows, 32](cuda.to_device(x), out)
                ref, bound = matmul_reference(x, np.ones((n, 1), dt))  # row sums: x @ 1
                return _bounded(out.copy_to_host(), ref[:, 0], bound[:, 0])
            yield f"x {rows}×{n}, {np.dtype(dt).name}", case


def _online_softmax(mod, path):
    rng = np.random.default_rng(14)
    for rows, n in ((1, 1), (2, 33), (3, 70)):
        for dt in DTYPES:
            def case(rows=rows, n=n, dt=dt):
                x = (rng.standard_normal((rows, n)) * 3).astype(dt)
                x[0] += 1000  # exp(1000) overflows: the running maximum must be subtracted
                x[-1] += np.linspace(0, 50, n).astype(dt)  # a rising row: the maximum changes often
                if n > 1:
                    x[-1, 0] = -np.inf
                y = _poisoned((rows, n), dt)
                mod.softmax_kernel[rows, 32](cuda.to_device(x), y)
                ref, bound = softmax_reference(x)
                return _bounded(y.copy_to_host(), ref, bound)
            yield f"x {rows}×{n} (a row near +1000, a rising row), {np.dtype(dt).name}", case


def _split_k(mod, path):
    for splits in (1, 3, 4):
        def launch(a, b, c, dt, splits=splits):
            mod.matmul_split_k(a, b, c, splits)
        shapes = ((1, 1, 1), (9, 10, 2), (5, 7, 0), (17, 9, 13)) if splits == 4 else ((9, 10, 11),)
        for label, case in _matmul_cases(mod, launch, shapes=shapes, seed=15 + splits):
            yield f"{label}, {splits} splits", case


def _vectorized_loads(mod, path):
    rng = np.random.default_rng(16)
    for n in (0, 1, 4, 7, 130, 259):
        for dt in DTYPES:
            def case(n=n, dt=dt):
                x, y = rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)
                out = _poisoned(n, dt)
                alpha = dt(1.5)
                mod.axpy(alpha, cuda.to_device(x), cuda.to_device(y), out)
                ref, bound = matmul_reference(np.stack([x, y], 1), np.array([[alpha], [1]], dt))
                return _bounded(out.copy_to_host(), ref[:, 0], bound[:, 0])
            yield f"n={n}, {np.dtype(dt).name}", case


# ---- mma_fragments: the m16n8k8 TF32 fragment map --------------------------------------------

def _layout(name):
    """{(lane, r): (row, column)} of register r of each lane for one m16n8k8 TF32 mma, from
    :mod:`simt_tiles.mma`'s fragment helpers (the layout its emulation computes with)."""
    if name == "a":
        shape, frag = (16, 8), mma.fragment_a(np.arange(128).reshape(16, 8), "tf32")
    elif name == "b":
        shape, frag = (8, 8), mma.fragment_b(np.arange(64).reshape(8, 8), "tf32")
    else:
        shape, frag = (16, 8), mma.fragment_c(np.arange(128).reshape(16, 8))
    return {(lane, r): divmod(int(frag[lane, r]), shape[1]) for lane in range(32) for r in range(frag.shape[1])}


_MAPS = (("a", "a_element", "A", "row, column", "a"), ("b", "b_element", "B", "k, column", "b"),
         ("c", "c_element", "C", "row, column", "c"))


def _fragment_maps(mod):
    """The student's a_element/b_element/c_element, called for every lane and register, against the layout."""
    for key, fn_name, matrix, coords, reg in _MAPS:
        fn = getattr(mod, fn_name, None)
        if fn is None:  # a kernel written without the stub's helpers: the probes below still grade it
            continue
        fn = getattr(fn, "py_func", fn)
        want = _layout(key)
        wrong = []
        for (lane, r), rc in want.items():
            got = fn(lane, r)
            try:
                got = tuple(int(v) for v in got)
            except TypeError:
                return f"{fn_name}({lane}, {r}) returned {got!r}; expected a ({coords}) pair of ints"
            if got != rc:
                wrong.append((lane, r, got, rc))
        if wrong:
            lane, r, got, (i, j) = wrong[0]
            g, t = lane >> 2, lane & 3
            holder = next(f"lane {ln}'s {reg}{rr}" for (ln, rr), rc in want.items() if rc == got) \
                if got in want.values() else "no register: it is outside the tile"
            return (f"{fn_name}({lane}, {r}) = {got}: in the m16n8k8 TF32 layout lane {lane} (g = {g}, t = {t}) "
                    f"holds {matrix}[{i}][{j}] in {reg}{r}; {matrix}[{got[0]}][{got[1]}] belongs to {holder}. "
                    f"{len(wrong)} of {len(want)} {matrix} registers wrong")
    return None


def _probe(mod, which):
    """One 16×8×8 mma on exact inputs whose product shows a fragment map: B = I makes C the A the
    mma saw (``which`` = "a"); A = [I; I] makes C = [B; B] of the B it saw ("b"), each reading
    assuming the other operand's map is right (the A probe runs first).  Integers below 2¹¹:
    exact in TF32.  This also grades a kernel written without the stub's map functions, and
    catches registers handed to ``mma_tf32`` in the wrong order."""
    if which == "a":
        a, b = np.arange(1, 129, dtype=np.float32).reshape(16, 8), np.eye(8, dtype=np.float32)
        want, src = a, a
    else:
        a, b = np.vstack([np.eye(8, dtype=np.float32)] * 2), np.arange(1, 65, dtype=np.float32).reshape(8, 8)
        want, src = np.vstack([b, b]), b
    c = _poisoned((16, 8), np.float32)
    mod.mma_kernel[(1, 1), 32](cuda.to_device(a), cuda.to_device(b), c)
    got = c.copy_to_host()
    problem = _exact(got, want)
    if problem is None:
        return None
    i, j = (int(v) for v in np.argwhere(~(got == want))[0])
    v, (name, other) = got[i, j], ("A", "B") if which == "a" else ("B", "A")
    pos = (i, j) if which == "a" else (i % 8, j)
    if np.isfinite(v) and v == int(v) and 1 <= v <= src.size:
        seen = "{}[{}][{}]".format(name, *divmod(int(v) - 1, src.shape[1]))
        lane, r = next(key for key, rc in _layout(name.lower()).items() if rc == pos)
        problem = (f"C[{i}][{j}] = {int(v)} = {seen}, expected {int(want[i, j])} = {name}[{pos[0]}][{pos[1]}]: "
                   f"the mma saw {seen} where the layout puts {name}[{pos[0]}][{pos[1]}] (lane {lane}'s "
                   f"{name.lower()}{r}), if {other}'s map is right — or C[{i}][{j}]'s accumulator was stored "
                   f"elsewhere; {problem}")
    return problem


def _mma_fragments(mod, path):
    yield "fragment maps: a_element, b_element, c_element for all 32 lanes", lambda: _fragment_maps(mod)
    yield "fragment map of A: 16×8×8 with B = I (C must be A exactly), float32", lambda: _probe(mod, "a")
    yield "fragment map of B: 16×8×8 with A = [I; I] (C must be [B; B] exactly), float32", lambda: _probe(mod, "b")
    rng = np.random.default_rng(17)
    for m, n, k in ((16, 8, 8), (17, 9, 13), (1, 1, 1), (5, 7, 0), (33, 17, 20)):
        def case(m=m, n=n, k=k):
            a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
            c = _poisoned((m, n), np.float32)
            mod.mma_kernel[(cdiv(n, 8), cdiv(m, 16)), 32](cuda.to_device(a), cuda.to_device(b), c)
            rdt = ref_dtype()
            ref = a.astype(rdt) @ b.astype(rdt)
            # TF32 operands (rounded by cvt_tf32, or truncated by the tensor cores without it), FP32 sums
            f = mma_error_factor(k, "tf32", truncates=True) + 2 * max(k, 1) * float(np.finfo(rdt).eps)
            return _bounded(c.copy_to_host(), ref, (np.abs(a.astype(rdt)) @ np.abs(b.astype(rdt))) * f)
        yield f"M×N×K = {m}×{n}×{k} (TF32 products: the mma bound), float32", case


GRADERS = {
    "regblock_1d": _blocked(("BM", "BN", "BK", "TM", "THREADS")),
    "regblock_2d": _blocked(("BM", "BN", "BK", "TM", "TN", "THREADS")),
    "swizzled_tile": _blocked(("BM", "BN", "BK", "TM", "TN", "THREADS")),
    "warp_tiling": _blocked(("BM", "BN", "BK", "TM", "TN", "WM", "WN", "THREADS")),
    "double_buffer": _double_buffer,
    "halo_modes": _halo_modes,
    "separable_filter": _separable_filter,
    "warp_reduce": _warp_reduce,
    "online_softmax": _online_softmax,
    "split_k": _split_k,
    "vectorized_loads": _vectorized_loads,
    "mma_fragments": _mma_fragments,
}
