"""Traffic scores, as GPU-Puzzles keeps them: one recorded launch, the analyzer's numbers, the reference's.

After the correctness cases pass, :func:`score` runs the exercise once more on a fixed small
problem under :func:`simt_tiles.analyze.recording` and compares per (space, op) the warp-wide
requests and their cost — 32-byte sectors for global memory, wavefronts for shared memory —
with the reference solution's, recorded here in :data:`SCORES` (``tests/test_exercises.py``
checks that the shipped solutions measure exactly these).  For the exercises whose lesson
*is* the traffic (``strict``), more than the reference fails the check, naming the worst
source line ("8-way conflicts at swizzled_tile.py:41"); for the others the score is printed.
Vector accesses (:mod:`simt_tiles.vector`) bypass the simulator's array hooks, so they are
counted separately, per lane.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from numba import cuda

from ..runtime import cdiv

KEYS = ("global load", "global store", "shared load", "shared store")


@dataclasses.dataclass(frozen=True)
class Score:
    problem: str  # what the scored launch computes, shown with the numbers
    launch: Callable  # launch(mod): one run on the scored problem (inputs made here, float32)
    reference: tuple  # (requests, cost) of the reference solution, per key of KEYS
    strict: tuple = ()  # keys where more than the reference fails the check


def _mm(m, n, k, run):
    rng = np.random.default_rng(0)
    a = cuda.to_device(rng.standard_normal((m, k)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((k, n)).astype(np.float32))
    run(a, b, cuda.device_array((m, n), np.float32))


def _blocked(mod):
    _mm(32, 32, 8, lambda a, b, c: mod.make_kernel(np.float32)[
        (cdiv(32, mod.BN), cdiv(32, mod.BM)), (mod.THREADS,)](a, b, c))


def _image(h, w):
    return cuda.to_device(np.random.default_rng(0).standard_normal((h, w)).astype(np.float32))


def _softmax(mod):
    mod.softmax_kernel[2, 32](_image(2, 64), cuda.device_array((2, 64), np.float32))


def _axpy(mod):
    x = cuda.to_device(np.ones(256, np.float32))
    mod.axpy(np.float32(2), x, x, cuda.device_array(256, np.float32))


def _bias_relu(mod):
    rows, cols = mod.TILE
    mod.bias_relu_kernel[(cdiv(64, cols), cdiv(8, rows)), (cols, rows)](
        _image(8, 64), _image(1, 64)[0], cuda.device_array((8, 64), np.float32))


SCORES: dict[str, Score] = {
    "vector_add": Score("n=256, 64 threads", lambda mod: mod.vector_add(
        _image(1, 256)[0], _image(1, 256)[0], cuda.device_array(256, np.float32), 64), ((16, 64), (8, 32), (0, 0), (0, 0))),
    "bias_relu": Score("8×64", _bias_relu, ((32, 128), (16, 64), (0, 0), (0, 0))),
    "padded_transpose": Score("32×64", lambda mod: mod.make_kernel(np.float32)[(2, 1), (mod.T, mod.ROWS)](
        _image(32, 64), cuda.device_array((64, 32), np.float32)), ((64, 256), (64, 256), (64, 64), (64, 64))),
    "tiled_matmul": Score("32×32×16, T=8", lambda mod: _mm(32, 32, 16, lambda a, b, c: mod.make_kernel(
        8, np.float32)[(4, 4), (8, 8)](a, b, c)), ((128, 512), (32, 128), (1024, 1024), (128, 128))),
    "regblock_1d": Score("32×32×8", _blocked, ((32, 192), (32, 128), (320, 320), (32, 32)), ("shared load",)),
    "regblock_2d": Score("32×32×8", _blocked, ((16, 96), (32, 512), (128, 192), (16, 16)), ("shared load",)),
    "warp_tiling": Score("32×32×8", _blocked, ((16, 96), (32, 512), (128, 320), (16, 16))),
    "swizzled_tile": Score("32×32×8", _blocked, ((16, 64), (32, 512), (320, 320), (16, 16)), ("shared load", "shared store")),
    "double_buffer": Score("16×16×24", lambda mod: _mm(16, 16, 24, lambda a, b, c: mod.make_kernel(
        np.float32)[(2, 2), (mod.T, mod.T)](a, b, c)), ((48, 192), (8, 32), (384, 384), (64, 64))),
    "halo_tile": Score("image 8×32", lambda mod: mod.make_kernel(np.float32)[(cdiv(32, mod.TX), cdiv(8, mod.TY)), (
        mod.TX, mod.TY)](_image(8, 32), _image(3, 3), cuda.device_array((8, 32), np.float32)), ((86, 149), (8, 32), (72, 144), (16, 16))),
    "halo_modes": Score("image 8×32, reflect", lambda mod: mod.make_kernel(np.float32, "reflect")[
        (cdiv(32, mod.TX), cdiv(8, mod.TY)), (mod.TX, mod.TY)](_image(8, 32), _image(3, 3),
                                                              cuda.device_array((8, 32), np.float32)), ((88, 148), (8, 32), (72, 144), (16, 16))),
    "separable_filter": Score("image 8×32, 5×5", lambda mod: mod.correlate_separable(
        _image(8, 32), _image(1, 5)[0], _image(1, 5)[0], cuda.device_array((8, 32), np.float32)), ((152, 392), (16, 64), (0, 0), (0, 0))),
    "warp_reduce": Score("2×64", lambda mod: mod.make_kernel(np.float32)[2, 32](
        _image(2, 64), cuda.device_array(2, np.float32)), ((4, 16), (2, 2), (0, 0), (0, 0))),
    "stable_softmax": Score("2×64", _softmax, ((12, 48), (4, 16), (0, 0), (0, 0))),
    "online_softmax": Score("2×64", _softmax, ((8, 32), (4, 16), (0, 0), (0, 0)), ("global load",)),
    "split_k": Score("16×16×32, 4 splits", lambda mod: _mm(16, 16, 32, lambda a, b, c: mod.matmul_split_k(
        a, b, c, 4)), ((544, 1408), (40, 160), (0, 0), (0, 0))),
    "mma_fragments": Score("16×8×16", lambda mod: _mm(16, 8, 16, lambda a, b, c: mod.mma_kernel[(1, 1), 32](
        a, b, c)), ((12, 80), (4, 32), (0, 0), (0, 0))),
    "vectorized_loads": Score("n=256", _axpy, ((0, 0), (0, 0), (0, 0), (0, 0)), ("global load", "global store")),
}


def measure(sc: Score, mod):
    """(totals, report): key -> (requests, cost) of one recorded launch of the student's module."""
    from .. import analyze  # deferred: the analyzer's simulator hooks load only when a score is asked for

    vector = {"load": 0, "store": 0}
    saved = {}
    for name, op in (("load4", "load"), ("store4", "store")):  # vector accesses: count them per lane
        fn = getattr(mod, name, None)
        if callable(fn):
            saved[name] = fn

            def counted(*args, _fn=fn, _op=op):
                vector[_op] += 1
                return _fn(*args)
            setattr(mod, name, counted)
    try:
        with analyze.recording(races=False) as report:
            sc.launch(mod)
    finally:
        for name, fn in saved.items():
            setattr(mod, name, fn)
    t = report.totals()
    totals = {k: (t[k]["requests"], t[k]["cost"]) if k in t else (0, 0) for k in KEYS}
    return totals, report, vector


def _worst(report, key, by_requests):
    """The site of ``key`` with the most requests (``by_requests``) or the most wavefronts per request."""
    space, op = key.split()
    sites = [s for s in report.sites if s.space == space and s.op == op]
    order = (lambda s: (s.requests, s.per_request)) if by_requests else (lambda s: (s.per_request, s.requests))
    return max(sites, key=order) if sites else None


def verdict(name: str, mod) -> tuple[str | None, str]:
    """(problem or None, the score line) for exercise ``name``'s module ``mod``."""
    sc = SCORES.get(name)
    if sc is None:
        return None, ""
    totals, report, vector = measure(sc, mod)
    ref = dict(zip(KEYS, sc.reference))
    unit = {"global": "sectors", "shared": "wavefronts"}
    parts = [f"{k} {totals[k][0]} req / {totals[k][1]} {unit[k.split()[0]]} (ref {ref[k][0]} / {ref[k][1]})"
             for k in KEYS if totals[k] != (0, 0) or ref[k] != (0, 0)]
    if vector["load"] or vector["store"]:
        parts.append(f"vector accesses {vector['load']} load4 + {vector['store']} store4 lane-calls (not in the totals)")
    costs = [(ref[k][1], totals[k][1]) for k in KEYS if ref[k][1] and totals[k][1]]
    line = f"traffic on {sc.problem}: " + "; ".join(parts or ["no recorded accesses"])
    if all(totals[k] == ref[k] for k in KEYS):
        line += "; = the reference"
    elif costs:  # GPU-Puzzles' score: the reference's cost over yours (geometric mean), 1.00 = as good
        line += f"; score {float(np.prod([r / t for r, t in costs])) ** (1 / len(costs)):.2f} (1.00 = the reference)"
    for key in sc.strict:
        (req, cost), (rreq, rcost) = totals[key], ref[key]
        if req <= rreq and cost <= rcost:
            continue
        worst = _worst(report, key, by_requests=req > rreq)
        what = "wavefronts" if key.startswith("shared") else "sectors"
        problem = f"{key}s: {req} requests costing {cost} {what}; the reference needs {rreq} costing {rcost}"
        if worst is not None and req <= rreq and worst.per_request > 1:
            problem += (f" — your kernel still has {worst.per_request:g}-way conflicts at {worst.where} "
                        f"({worst.array} {worst.op}, measured by simt_tiles.analyze)")
        elif worst is not None:
            problem += (f" — too many requests; the busiest site is {worst.where} ({worst.array} {worst.op}, "
                        f"{worst.requests} requests, measured by simt_tiles.analyze)")
        return problem, line
    return None, line
