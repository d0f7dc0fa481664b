"""simt_tiles.torch: every custom op's gradient (gradcheck, float64), torch.library.opcheck, a
module of every op under torch.compile(fullgraph=True) with no graph break and the eager result,
clear errors in eager mode and under compile, and the digits CNN for one step beside plain torch.

In the simulator the ops take CPU tensors (the real kernels in Numba's CUDA simulator); on a GPU,
CUDA tensors.  Skipped where torch is not installed (the extra ``torch``; docs/torch.md)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

from simt_tiles.bounds import gamma, unit_roundoff
from simt_tiles.runtime import SIMULATOR

from .profiles import PROFILE

try:
    import torch

    import simt_tiles.torch as stt
    from simt_tiles.torch import ops
except ImportError:  # the torch extra is not installed
    torch = stt = ops = None

ROOT = Path(__file__).resolve().parents[1]
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (pip install simt-tiles[torch])")
#: heavier checks (opcheck of every op, every mode of the filters) outside the CI profile
not_in_ci = pytest.mark.skipif(PROFILE == "ci", reason="ci profile: the full and gpu profiles run it")
DEVICE = "cpu" if SIMULATOR else "cuda"


def _r(*shape, dtype=None, grad=True):
    dtype = dtype or torch.float64
    return torch.randn(*shape, dtype=dtype, device=DEVICE, requires_grad=grad)


def case(name: str, dtype=None):
    """``(function, inputs)`` of one op on tiny inputs (a seed per case)."""
    torch.manual_seed(sum(map(ord, name)))
    r = lambda *s: _r(*s, dtype=dtype)  # noqa: E731
    if name == "matmul":
        return stt.matmul, (r(3, 4), r(4, 2))
    if name == "softmax":
        return (lambda x: stt.softmax(x, 1)), (r(3, 2, 2),)
    if name == "log_softmax":
        return (lambda x: stt.log_softmax(x, -1)), (r(2, 5),)
    if name == "bias_relu":
        x, b = r(3, 4), r(4)
        with torch.no_grad():  # away from the kink at 0, where the finite differences straddle it
            x += torch.sign(x + b) * 0.1
        return stt.bias_relu, (x, b)
    if name == "vector_add":
        return stt.vector_add, (r(5), r(5))
    if name == "reduce_sum":
        return (lambda x: stt.reduce(x, "sum", [0, 2], False)), (r(2, 3, 2),)
    if name == "reduce_mean":
        return (lambda x: stt.reduce(x, "mean", [-1], True)), (r(2, 3),)
    if name == "conv2d_nchw":
        return (lambda x, w, b: stt.conv2d_nchw(x, w, b, 1)), (r(2, 2, 4, 3), r(3, 2, 3, 2), r(3))
    if name == "conv2d_nchw-crop":  # padding > K − 1: the data gradient crops dy
        return (lambda x, w: stt.conv2d_nchw(x, w, None, 2)), (r(1, 1, 3, 3), r(2, 1, 2, 2))
    if name == "correlate2d-large-filter":  # a filter larger than the image: extension beyond one reflection
        return (lambda x, w: stt.correlate2d(x, w, "reflect", 0.0)), (r(2, 2), r(5, 4))
    if name == "convolve2d-mirror-one-row":
        return (lambda x, w: stt.convolve2d(x, w, "mirror", 0.0)), (r(1, 3), r(2, 2))
    if name.startswith("correlate1d"):  # correlate1d-<axis>-<mode>: an even filter (its centre K // 2)
        _, axis, mode = name.split("-")
        return (lambda x, w: stt.correlate1d(x, w, int(axis) - 2, mode, 0.5)), (r(4, 3), r(4))  # axis -2 or -1
    if name.startswith("correlate_separable"):
        mode = name.split("-")[1]
        return (lambda x, a, b: stt.correlate_separable(x, a, b, mode, 0.5)), (r(4, 3), r(3), r(2))
    if name.startswith("volume"):  # volume-<op>-<mode>: a 3-D image, an even filter side, one wider than its axis
        _, op, mode = name.split("-")
        return (lambda x, w: getattr(stt, op)(x, w, mode, 0.5)), (r(3, 2, 4), r(2, 3, 2))
    if name.startswith("line"):  # line-<op>-<mode>: a 1-D image
        _, op, mode = name.split("-")
        return (lambda x, w: getattr(stt, op)(x, w, mode, 0.5)), (r(5), r(4))
    op, mode = name.split("-")
    fn = stt.correlate2d if op == "correlate2d" else stt.convolve2d
    return (lambda x, w: fn(x, w, mode, 0.5)), (r(4, 3), r(2, 3))


MODES = ("reflect", "constant", "nearest", "mirror", "wrap")
CASES = ["matmul", "softmax", "log_softmax", "bias_relu", "vector_add", "reduce_sum", "reduce_mean",
         "conv2d_nchw", "correlate2d-reflect", "convolve2d-constant", "correlate1d-0-reflect",
         "correlate_separable-constant", "volume-correlate-reflect", "volume-convolve-mirror"]
MORE = [f"{op}-{m}" for op in ("correlate2d", "convolve2d") for m in MODES
        if f"{op}-{m}" not in CASES] + ["conv2d_nchw-crop", "correlate2d-large-filter", "convolve2d-mirror-one-row"] + [
    f"correlate1d-{a}-{m}" for a in (1, 0) for m in MODES if f"correlate1d-{a}-{m}" not in CASES] + [
    f"correlate_separable-{m}" for m in MODES if m != "constant"] + [
    f"volume-{op}-{m}" for op in ("correlate", "convolve") for m in MODES
    if f"volume-{op}-{m}" not in CASES] + [f"line-{op}-{m}" for op in ("correlate", "convolve") for m in MODES]


def _gradcheck(name):
    fn, inputs = case(name)
    # fast mode (random projections) in the simulator, where every evaluation is a simulated launch
    assert torch.autograd.gradcheck(fn, inputs, fast_mode=SIMULATOR)


@needs_torch
# conv2d_nchw's backward is checked against torch's in the ci profile by the digits step
@pytest.mark.parametrize("name", [pytest.param(n, marks=not_in_ci if n == "conv2d_nchw" else ()) for n in CASES])
def test_gradcheck(name):
    _gradcheck(name)


@needs_torch
@not_in_ci
@pytest.mark.parametrize("name", MORE)
def test_gradcheck_every_filter_mode_and_edge(name):
    _gradcheck(name)


@needs_torch
@pytest.mark.parametrize("shape, axis, mode", [((2, 3, 2), 1, "reflect"), ((3, 2, 2), -3, "constant"),
                                               ((5,), 0, "wrap")])
def test_correlate1d_volume_forward_and_gradcheck(shape, axis, mode):
    """N-D images (issue 33): scipy's forward; the gradients of the axis moved last, rows flattened."""
    import scipy.ndimage as ndi

    x, w = _r(*shape), _r(4)
    y = stt.correlate1d(x, w, axis, mode, 0.5)
    expect = ndi.correlate1d(x.detach().cpu().numpy(), w.detach().cpu().numpy(), axis=axis, mode=mode, cval=0.5)
    np.testing.assert_allclose(y.detach().cpu().numpy(), expect, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: stt.correlate1d(a, b, axis, mode, 0.5), (x, w), fast_mode=SIMULATOR)


TINY = 2.0**-70  # below the 2**-52 under which the ndimage filters skip a weight; a power of two: exact scaling


@needs_torch
@pytest.mark.parametrize("name", ["correlate2d-reflect", "convolve2d-constant", "correlate1d-0-wrap",
                                  "correlate1d-1-mirror", "correlate_separable-nearest", "line-correlate-reflect",
                                  "line-convolve-constant", "volume-correlate-reflect"])
def test_filter_gradients_of_tiny_values_do_not_vanish(name):
    """The filter's gradient correlates the image with dy: every value of dy counts, however small (the
    ndimage filters skip |w| <= 2**-52, so with dy as their filter a gradient scaled by 2**-70 came back
    zero).  correlate1d's forward counts every tap and correlate_separable's is the product's, so their image
    gradients count tiny weights too."""
    fn, inputs = case(name)
    y = fn(*inputs)
    ones = torch.autograd.grad(y, inputs, torch.ones_like(y), retain_graph=True)
    tiny = torch.autograd.grad(y, inputs, torch.full_like(y, TINY))
    for i, (g1, gt) in enumerate(zip(ones, tiny)):
        assert g1.abs().max() > 0, (name, i)
        np.testing.assert_allclose(gt.detach().cpu().numpy(), g1.detach().cpu().numpy() * TINY, rtol=1e-12, atol=0,
                                   err_msg=f"{name}: the gradient of input {i}")
    if name.startswith(("correlate1d", "correlate_separable")):
        x, *ws = inputs
        scale = TINY ** (1 / len(ws))  # the separable's factors each above 2**-52, their product below it
        small = [(w.detach() * scale).requires_grad_() for w in ws]
        (gx,) = torch.autograd.grad(fn(x, *small).sum(), x)
        (g1,) = torch.autograd.grad(fn(x, *ws).sum(), x)
        np.testing.assert_allclose(gx.detach().cpu().numpy(), g1.detach().cpu().numpy() * TINY, rtol=1e-12, atol=0)


@needs_torch
def test_correlate1d_volume_bad_axis_names_it():
    with pytest.raises(ValueError, match=r"axis: expected an int in \[-3, 2\] \(image is 3-D\); got 3"):
        stt.correlate1d(_r(2, 3, 2, grad=False), _r(3, grad=False), 3, "reflect", 0.0)
    with pytest.raises(ValueError, match=r"axis: expected -2, -1, 0 or 1 \(image is 2-D\); got -3"):
        stt.correlate1d(_r(2, 3, grad=False), _r(3, grad=False), -3, "reflect", 0.0)


OPCHECK = {
    "matmul": lambda: (stt.matmul, (_r(3, 4, dtype=torch.float32), _r(4, 2, dtype=torch.float32))),
    "softmax": lambda: (stt.softmax, (_r(3, 2, 2), 1)),
    "log_softmax": lambda: (stt.log_softmax, (_r(2, 5, dtype=torch.float32),)),
    "softmax_backward": lambda: (stt.softmax_backward, (_r(2, 5, grad=False), _r(2, 5, grad=False), -1, True)),
    "bias_relu": lambda: (stt.bias_relu, (_r(3, 4), _r(4))),
    "vector_add": lambda: (stt.vector_add, (_r(5), _r(5))),
    "reduce": lambda: (stt.reduce, (_r(2, 3, 2), "mean", [0, 2], True)),
    "correlate2d": lambda: (stt.correlate2d, (_r(4, 3), _r(2, 3), "wrap", 0.0)),
    "convolve2d": lambda: (stt.convolve2d, (_r(4, 3), _r(3, 3), "constant", 0.5)),
    "correlate1d": lambda: (stt.correlate1d, (_r(4, 3), _r(3), 0, "mirror", 0.0)),
    "correlate1d_volume": lambda: (stt.correlate1d, (_r(2, 3, 2), _r(3), -2, "nearest", 0.0)),
    "correlate_separable": lambda: (stt.correlate_separable, (_r(4, 3), _r(2), _r(3), "nearest", 0.0)),
    "conv2d_nchw": lambda: (stt.conv2d_nchw, (_r(2, 2, 4, 3), _r(3, 2, 3, 2), _r(3), 1)),
    "correlate": lambda: (stt.correlate, (_r(2, 3, 2), _r(2, 2, 1), "wrap", 0.0)),
    "convolve": lambda: (stt.convolve, (_r(3, 2, 2), _r(1, 2, 2), "constant", 0.5)),
}


@needs_torch
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "vector_add" else not_in_ci)
                                  for n in OPCHECK])
def test_opcheck(name):
    """Schema, fake implementation (static and dynamic shapes), autograd registration."""
    op, args = OPCHECK[name]()
    assert set(torch.library.opcheck(op, args).values()) == {"SUCCESS"}


def _device_arg(t, views: bool):
    """What ``ops._call`` hands the public function for a CUDA tensor: the detached tensor (made
    C-contiguous unless ``views``) on a GPU; in the simulator a device array of its values."""
    t = t.detach() if views else t.detach().contiguous()
    return t if t.is_cuda else cuda.to_device(t.numpy())


@needs_torch
@pytest.mark.parametrize("name", list(OPCHECK))
def test_an_ops_public_call_replays_a_launch_plan(plans, monkeypatch, name):
    """Issue 35: the call each op makes of its public function (function, keywords, arrays as
    ``ops._call`` passes CUDA tensors) takes the fast launch path — the first records one plan,
    the repeats replay it.  On the H200 ``reduce`` (its ``axis`` a tuple, then not part of a plan's
    key) and ``softmax_backward`` (not ``planned``) took the checked path on every call: 267–403 µs
    of host time per op call against 33–57 for the others, and no count in ``launch.stats()`` moved."""
    op, args = OPCHECK[name]()
    args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    calls, real = [], ops._call
    monkeypatch.setattr(ops, "_call", lambda fn, *ts, views=False, **kw: calls.append((fn, ts, views, kw))
                        or real(fn, *ts, views=views, **kw))
    want = op(*args).cpu().numpy()
    (fn, tensors, views, kw), = calls
    plans.clear()
    for i in range(3):  # new arrays each time (another training step): the plan takes their pointers
        got = fn(*(_device_arg(t, views) for t in tensors), **kw)
        got = got.cpu().numpy() if isinstance(got, torch.Tensor) else got.copy_to_host()
        np.testing.assert_array_equal(got, want)
        s = plans.stats()
        assert (s["recorded"], s["hit"]) == (1, i), (
            f"{name}: call {i + 1} of {getattr(fn, '__name__', fn)}(..., {kw}): {s} (recorded 1, hit {i} expected)")


def test_every_op_is_registered():
    if torch is None:
        pytest.skip("torch is not installed")
    import simt_tiles

    # every public function that computes (not warm, not the exception classes) has its op
    public = {n for n in simt_tiles.__all__ if callable(getattr(simt_tiles, n)) and n != "warm"
              and not isinstance(getattr(simt_tiles, n), type)}
    assert {"matmul", "correlate1d", "correlate_separable", "conv2d_nchw"} <= public
    assert public <= set(stt.OPS), public - set(stt.OPS)
    for name in stt.OPS:
        assert hasattr(torch.ops.simt_tiles, name)


class Every(torch.nn.Module if torch is not None else object):
    """A module calling every op (the layers too), forward and backward."""

    def __init__(self, dtype):
        super().__init__()
        self.conv = stt.Conv2d(1, 2, 3, padding=1, dtype=dtype)
        self.fc = stt.Linear(2 * 4 * 4, 3, dtype=dtype)
        self.filt = torch.nn.Parameter(torch.randn(3, 2, dtype=dtype))
        self.b = torch.nn.Parameter(torch.randn(3, dtype=dtype))
        self.taps = torch.nn.Parameter(torch.randn(2, dtype=dtype))

    def forward(self, x, img):
        st = torch.ops.simt_tiles
        h = stt.ReLU()(self.conv(x))
        y = self.fc(h.reshape(x.shape[0], -1))
        y = st.bias_relu(y, self.b) + st.softmax(y, 0)
        i = st.correlate2d(img, self.filt, "reflect", 0.0)
        j = st.convolve2d(img, self.filt, "wrap", 0.0)
        j = st.correlate1d(j, self.taps, 0, "nearest", 0.0) + st.correlate_separable(i, self.taps, self.filt[0],
                                                                                      "mirror", 0.0)
        v = st.vector_add(i.reshape(-1), j.reshape(-1))
        return st.log_softmax(y, -1), st.reduce(v, "mean", None, False)


@needs_torch
def test_compile_fullgraph_every_op_no_graph_break():
    """Dynamo sees one op per call (fullgraph=True compiles; explain counts no break) and the
    compiled module gives the eager outputs and gradients (the same kernels: within a few ulps)."""
    import torch._dynamo

    torch.manual_seed(0)
    dt = torch.float64
    model = Every(dt).to(DEVICE)
    x, img = torch.randn(2, 1, 4, 4, dtype=dt, device=DEVICE), torch.randn(5, 4, dtype=dt, device=DEVICE)

    def run(fn):
        model.zero_grad(set_to_none=True)
        out = fn(x, img)
        (out[0].sum() + out[1]).backward()
        return [o.detach() for o in out], {n: p.grad.clone() for n, p in model.named_parameters()}

    eager = run(model)
    torch._dynamo.reset()
    # the simulator's CPU tensors: aot_eager (the graphs, forward and backward, without inductor's
    # C++ build); on a GPU the default inductor backend
    backend = "aot_eager" if SIMULATOR else "inductor"
    compiled = run(torch.compile(model, fullgraph=True, backend=backend))
    tol = gamma(64, unit_roundoff(np.float64))  # the backward's torch ops (where, index_add) may re-associate
    for a, b in zip(eager[0], compiled[0]):
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)
    for n in eager[1]:
        torch.testing.assert_close(compiled[1][n], eager[1][n], rtol=tol, atol=tol)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x, img)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


@needs_torch
@not_in_ci
def test_export_keeps_every_op():
    """torch.export traces the module to one program whose nodes are the simt_tiles ops."""
    torch.manual_seed(0)
    dt = torch.float64
    model = Every(dt).to(DEVICE)
    x, img = torch.randn(2, 1, 4, 4, dtype=dt, device=DEVICE), torch.randn(5, 4, dtype=dt, device=DEVICE)
    program = torch.export.export(model, (x, img))
    names = {str(n.target).split(".")[1] for n in program.graph.nodes if "simt_tiles" in str(n.target)}
    assert names == {"conv2d_nchw", "bias_relu", "matmul", "vector_add", "softmax", "correlate2d", "convolve2d",
                     "correlate1d", "correlate_separable", "log_softmax", "reduce"}
    for a, b in zip(model(x, img), program.module()(x, img)):
        torch.testing.assert_close(b, a, rtol=0, atol=0)


@needs_torch
def test_errors_name_the_argument_eager_and_compiled(monkeypatch):
    a = torch.zeros(2, 3, dtype=torch.bfloat16, device=DEVICE)
    b = torch.zeros(3, 2, device=DEVICE)
    with pytest.raises(TypeError, match=r"a: expected dtype torch.float32 or torch.float64; got torch.bfloat16"):
        stt.matmul(a, b)
    with pytest.raises(TypeError, match=r"b: expected dtype torch.float32 \(the dtype of a\); got torch.float64"):
        stt.matmul(b.t(), b.double())
    with pytest.raises(ValueError, match=r"b: expected shape \(3, N\)"):
        stt.matmul(b.t(), b.t())
    with pytest.raises(ValueError, match="op: expected 'sum' or 'mean'"):
        stt.reduce(b, "max")
    with pytest.raises(ValueError, match="mode: expected one of"):
        stt.correlate2d(b, b, "zeros")
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: torch.ops.simt_tiles.matmul(x, y), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match=r"a: expected dtype torch.float32 or torch.float64; got torch.bfloat16"):
        f(a, b)
    # a CPU tensor without the simulator: refused by the real and the fake implementation
    monkeypatch.setattr(ops, "_simulator", lambda: False)
    x = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="x: expected a CUDA tensor; got a tensor on cpu"):
        stt.softmax(x)
    torch._dynamo.reset()
    g = torch.compile(lambda t: torch.ops.simt_tiles.softmax(t, -1), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="x: expected a CUDA tensor; got a tensor on cpu"):
        g(x)


def _z(*shape, dtype=torch.float64 if torch is not None else None):
    return torch.zeros(*shape, dtype=dtype, device=DEVICE)


#: (op, its arguments, the error, what it says): each of the fast guards' conditions failing alone (a
#: guard that let the call through would call the public function, or raise something else)
GUARDED = [] if torch is None else [
    ("matmul", lambda: (_z(2, 3, dtype=torch.int32), _z(3, 2)), TypeError, r"^a: expected dtype"),
    ("matmul", lambda: (_z(2, 3), _z(3, 2, dtype=torch.float32)), TypeError, r"^b: expected dtype torch.float64"),
    ("matmul", lambda: (_z(1, 2, 3), _z(3, 2)), ValueError, r"^a: expected a 2-D tensor; got 3-D"),
    ("matmul", lambda: (_z(2, 3), _z(3)), ValueError, r"^b: expected a 2-D tensor; got 1-D"),
    ("matmul", lambda: (_z(2, 3), _z(4, 2)), ValueError, r"^b: expected shape \(3, N\)"),
    ("softmax", lambda: (_z(()), -1), ValueError, r"^x: expected a tensor of at least 1 dimension"),
    ("softmax", lambda: (_z(2, 3), 2), ValueError, r"^axis: 2 is out of bounds"),
    ("log_softmax", lambda: (_z(2, 3), -3), ValueError, r"^axis: -3 is out of bounds"),
    ("log_softmax", lambda: (_z(2, 3, dtype=torch.int64), -1), TypeError, r"^x: expected dtype"),
    ("softmax_backward", lambda: (_z(2, 3), _z(2, 3, dtype=torch.float32), -1, False), TypeError, r"^dy: expected"),
    ("softmax_backward", lambda: (_z(2, 3, dtype=torch.float16), _z(2, 3, dtype=torch.float16), -1, False),
     TypeError, r"^y: expected dtype torch.float32 or torch.float64"),
    ("bias_relu", lambda: (_z(2, 3), _z(3, dtype=torch.float32)), TypeError, r"^bias: expected dtype torch.float64"),
    ("bias_relu", lambda: (_z(2, 3), _z(1, 3)), ValueError, r"^bias: expected a 1-D tensor"),
    ("bias_relu", lambda: (_z(2, 3), _z(2)), ValueError, r"^bias: expected shape \(3,\)"),
    ("bias_relu", lambda: (_z(6), _z(6)), ValueError, r"^x: expected a 2-D tensor"),
    ("vector_add", lambda: (_z(3), _z(4)), ValueError, r"^b: expected shape \(3,\)"),
    ("vector_add", lambda: (_z(3, 1), _z(3, 1)), ValueError, r"^a: expected a 1-D tensor"),
    ("reduce", lambda: (_z(2, 3), "sum", [0], False), None, None),  # (fills the cache of axes the next ones meet)
    ("reduce", lambda: (_z(2, 3), "max", [0], False), ValueError, r"^op: expected 'sum' or 'mean'"),
    ("reduce", lambda: (_z(2, 3, dtype=torch.int32), "sum", [0], False), TypeError, r"^x: expected dtype"),
    ("reduce", lambda: (_z(2, 3), "sum", [0, -2], False), ValueError, r"^axis: expected distinct axes"),
    ("reduce", lambda: (_z(2, 3), "sum", [2], False), ValueError, r"^axis: 2 is out of bounds"),
    ("correlate2d", lambda: (_z(4, 4), _z(0, 3), "reflect", 0.0), ValueError, r"^weights: expected a non-empty"),
    ("correlate2d", lambda: (_z(4, 4), _z(3, 3), "zeros", 0.0), ValueError, r"^mode: expected one of"),
    ("convolve2d", lambda: (_z(4, 4, 1), _z(3, 3), "reflect", 0.0), ValueError, r"^image: expected a 2-D tensor"),
    ("convolve2d", lambda: (_z(4, 4), _z(3), "reflect", 0.0), ValueError, r"^weights: expected a 2-D tensor"),
    ("correlate", lambda: (_z(2, 2, 2, 2), _z(1, 1, 1, 1), "reflect", 0.0), ValueError,
     r"^image: expected a 1-D, 2-D or 3-D tensor"),
    ("convolve", lambda: (_z(4, 4), _z(3), "reflect", 0.0), ValueError, r"^weights: expected a 2-D tensor"),
    ("convolve", lambda: (_z(4, 4), _z(3, 0), "reflect", 0.0), ValueError, r"^weights: expected at least one value"),
    ("correlate", lambda: (_z(4), _z(3), "nope", 0.0), ValueError, r"^mode: expected one of"),
    ("correlate1d", lambda: (_z(4, 4), _z(0), -1, "reflect", 0.0), ValueError, r"^weights: expected at least one"),
    ("correlate1d", lambda: (_z(4, 4), _z(3, 1), -1, "reflect", 0.0), ValueError, r"^weights: expected a 1-D"),
    ("correlate1d", lambda: (_z(4, 4), _z(3), 2, "reflect", 0.0), ValueError, r"^axis: expected -2, -1, 0 or 1"),
    ("correlate1d", lambda: (_z(()), _z(3), 0, "reflect", 0.0), ValueError, r"^image: expected a tensor of at least"),
    ("correlate1d", lambda: (_z(4, 4), _z(3), 0, "edge", 0.0), ValueError, r"^mode: expected one of"),
    ("correlate_separable", lambda: (_z(4, 4), _z(3), _z(0), "reflect", 0.0), ValueError, r"^wx: expected at least"),
    ("correlate_separable", lambda: (_z(4, 4), _z(3, dtype=torch.float32), _z(3), "reflect", 0.0), TypeError,
     r"^wy: expected dtype torch.float64"),
    ("correlate_separable", lambda: (_z(4), _z(3), _z(3), "reflect", 0.0), ValueError, r"^image: expected a 2-D"),
    ("conv2d_nchw", lambda: (_z(1, 2, 8, 8), _z(3, 2, 3, 3), None, -1), ValueError, r"^padding: expected an int >= 0"),
    ("conv2d_nchw", lambda: (_z(1, 2, 4, 4), _z(3, 1, 3, 3), None, 0), ValueError, r"^w: expected 2 input channels"),
    ("conv2d_nchw", lambda: (_z(1, 2, 4, 4), _z(3, 2, 5, 3), None, 0), ValueError, r"^w: a 5x3 filter is larger"),
    ("conv2d_nchw", lambda: (_z(1, 2, 4, 4), _z(3, 2, 3, 3), _z(2), 1), ValueError, r"^bias: expected shape \(3,\)"),
    ("conv2d_nchw", lambda: (_z(1, 2, 4, 4), _z(3, 2, 3, 3), _z(3, dtype=torch.float32), 1), TypeError,
     r"^bias: expected dtype torch.float64"),
    ("conv2d_nchw", lambda: (_z(2, 4, 4), _z(3, 2, 3, 3), None, 0), ValueError, r"^x: expected a 4-D tensor"),
]


@needs_torch
def test_every_fast_guard_condition_still_raises_the_named_error(monkeypatch):
    """Issue 35: each op checks its arguments with one fast guard and runs the full check (the errors that
    name the argument) only when a condition fails; every condition failing alone still raises that error,
    and with the simulator off a CPU tensor is refused by every op (the guards' device part).  The public
    functions are out of reach meanwhile (their own checks say much the same: they must not be what raises)."""
    def let_through(fn, *tensors, **kw):
        raise AssertionError(f"a bad call reached the public function {fn}")

    for name, make, exc, match in GUARDED:
        if exc is None:
            monkeypatch.undo()
            getattr(torch.ops.simt_tiles, name)(*make())
            continue
        monkeypatch.setattr(ops, "_call", let_through)
        with pytest.raises(exc, match=match):
            getattr(torch.ops.simt_tiles, name)(*make())
    monkeypatch.setattr(ops, "_simulator", lambda: False)
    for name in OPCHECK:  # (the same calls on CPU tensors: on a GPU, OPCHECK's are CUDA tensors)
        op, args = OPCHECK[name]()
        args = [a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(ValueError, match=r"expected a CUDA tensor; got a tensor on cpu"):
            op(*args)


@needs_torch
def test_digits_one_step_beside_plain_torch():
    """The example's model, tiny, one Adam step: the simt loss equals plain torch's (float64) and
    the updated parameters agree."""
    pytest.importorskip("sklearn")
    spec = importlib.util.spec_from_file_location("digits_cnn", ROOT / "examples" / "digits_cnn.py")
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)
    dt = torch.float64
    data = [t[:4] for t in digits.load(dt, DEVICE)]
    ref, ours = digits.pair(0, (1, 2), 4, dt, DEVICE)
    a = digits.train(ref, data, epochs=1, batch=2, steps=1, evaluate=False)
    b = digits.train(ours, data, epochs=1, batch=2, steps=1, evaluate=False)
    u = unit_roundoff(np.float64)
    assert abs(a["losses"][0] - b["losses"][0]) <= gamma(200, u) * abs(a["losses"][0])
    for (n, p), q in zip(ref.named_parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-9, atol=1e-12, msg=n)


def test_import_simt_tiles_loads_no_torch():
    """``import simt_tiles`` (and a kernel) never imports torch: simt_tiles.torch is opt-in."""
    code = "import sys, simt_tiles; simt_tiles.vector_add; print('torch' in sys.modules)"
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_16bit_softmax_forward_and_backward(dtype, log):
    """16-bit tensors: the result in the input's dtype within tests/test_softmax16.py's bound (the float32 bound
    plus one rounding, u16·|ref|); the gradient through the float32 backward, rounded to the input's dtype.
    Its reference is the gradient of the 16-bit y and dy the backward is given (exact in float32), in float64:
    softmax dx = y·(dy − S), S = Σ y·dy; log_softmax dx = dy − e^y·Σdy.  Bound: the final rounding u16·|dx|,
    plus the float32 arithmetic, 2γ_n(2⁻²⁴) of the terms' magnitudes (|y|·(|dy − S| + Σ|y·dy|); e^y·(|y| + 1)·|Σdy|
    + |dy|: exp's own error is relative to its argument), plus 2⁻²⁴ for outputs that underflow."""
    from .test_softmax16 import bound16

    dt = getattr(torch, dtype)
    torch.manual_seed(7)
    n = 37
    x = torch.randn(3, n, device=DEVICE).to(dt)
    f, tf = (stt.log_softmax, torch.log_softmax) if log else (stt.softmax, torch.softmax)
    y = f(x, -1)
    assert y.dtype == dt and y.shape == x.shape
    ref, bound = bound16(x.float().cpu().numpy(), dtype, log)
    assert (np.abs(y.float().cpu().numpy().astype(ref.dtype) - ref) <= bound).all()
    xg = x.clone().requires_grad_(True)
    g = torch.randn(3, n, device=DEVICE).to(dt)
    (dx,) = torch.autograd.grad(f(xg, -1), xg, g)
    assert dx.dtype == dt
    yd, gd = y.double(), g.double()  # the backward's inputs: the 16-bit y, dy
    if log:
        dref = gd - yd.exp() * gd.sum(-1, keepdim=True)  # from the 16-bit y, exactly
        mag = yd.exp() * (yd.abs() + 1) * gd.sum(-1, keepdim=True).abs() + gd.abs()
    else:
        s = (yd * gd).sum(-1, keepdim=True)
        dref = yd * (gd - s)
        mag = yd.abs() * ((gd - s).abs() + (yd * gd).abs().sum(-1, keepdim=True))
    u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    gamma = n * 2.0 ** -24 / (1 - n * 2.0 ** -24)
    tol = u * dref.abs() + 2 * gamma * (mag + dref.abs()) + 2.0 ** -24
    assert ((dx.double() - dref).abs() <= tol).all()


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_bias_relu_forward_and_backward(dtype):
    """16-bit tensors: the result is torch's ``relu(x + b)`` exactly (float32 sum, one rounding; relu commutes
    with it: tests/test_bias_relu16.py), NaN kept; dx is dy where y > 0 (exact), dbias the float32 sum of dx's
    rows (reduce's 16-bit rule: summed in float64, rounded once to the input's dtype; within torch's half sum's
    bound u16·|Σ| + γ_M(2⁻²⁴)·Σ|dx|)."""
    dt = getattr(torch, dtype)
    torch.manual_seed(11)
    x = torch.randn(7, 13, device=DEVICE).to(dt)
    b = torch.randn(13, device=DEVICE).to(dt)
    x[2, 3] = float("nan")
    y = stt.bias_relu(x, b)
    assert y.dtype == dt and y.shape == x.shape
    want = torch.relu(x + b)
    assert torch.equal(y.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(y.float()), torch.nan_to_num(want.float()))
    with pytest.raises(TypeError, match=rf"bias: expected dtype torch.{dtype} \(the dtype of x\); got torch.float32"):
        stt.bias_relu(x, b.float())
    x = torch.nan_to_num(x)
    xg, bg = x.clone().requires_grad_(True), b.clone().requires_grad_(True)
    g = torch.randn(7, 13, device=DEVICE).to(dt)
    dx, db = torch.autograd.grad(stt.bias_relu(xg, bg), (xg, bg), g)
    assert dx.dtype == dt and db.dtype == dt
    dref = torch.where(torch.relu(x + b) > 0, g, torch.zeros((), dtype=dt, device=DEVICE))
    assert torch.equal(dx, dref)
    s = dref.double().sum(0)
    u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    tol = u * s.abs() + gamma(7, 2.0 ** -24) * dref.double().abs().sum(0) + 2.0 ** -24
    assert ((db.double() - s).abs() <= tol).all()


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_reduce_forward_and_backward(dtype):
    """16-bit tensors: sum/mean of x's dtype within one rounding of the float64 sum (u16·|s| + the sum's
    γ term; tests/test_reduce16.py has the exact cases); the backward broadcasts dy in x's dtype."""
    dt = getattr(torch, dtype)
    torch.manual_seed(5)
    x = torch.randn(6, 9, device=DEVICE).to(dt)
    u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    for op, axis in (("sum", [0]), ("mean", [1]), ("sum", None)):
        y = stt.reduce(x, op, axis)
        s = getattr(x.double(), op)(dim=axis) if axis else getattr(x.double(), op)()
        assert y.dtype == dt and y.shape == s.shape
        tol = u * s.abs() + gamma(54, 2.0 ** -53) * x.double().abs().sum() + 2.0 ** -24
        assert ((y.double() - s).abs() <= tol).all(), (op, axis)
    # one rounding, exactly: 1 + half an ulp of 1 + a tiny term is the next value up (two roundings: 1.0)
    p, tiny = (11, 2.0 ** -24) if dtype == "float16" else (8, 2.0 ** -40)
    trap = torch.tensor([1.0, 2.0 ** -p, tiny], dtype=torch.float64, device=DEVICE).to(dt)
    assert trap.double()[2].item() == tiny
    assert stt.reduce(trap, "sum", None).item() == 1 + 2.0 ** (1 - p)
    xg = x.clone().requires_grad_(True)
    (dx,) = torch.autograd.grad(stt.reduce(xg, "sum", [1]), (xg,), torch.ones(6, device=DEVICE, dtype=dt))
    assert dx.dtype == dt and torch.equal(dx, torch.ones_like(x))


@needs_torch
def test_reduce_of_a_zero_d_tensor_is_torchs():
    """A 0-d tensor reduces to its value as torch.sum/mean do, the fake op's shape the real one's (it was a
    ValueError on the device and a () result in the fake), and the gradient is one (mean: of one value)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    for op in ("sum", "mean"):
        for axis in (None, []):
            x = torch.tensor(-1.5, dtype=torch.float64, device=DEVICE, requires_grad=True)
            y = stt.reduce(x, op, axis)
            assert y.shape == () and y.item() == -1.5
            (dx,) = torch.autograd.grad(y, (x,))
            assert dx.item() == 1.0
            plain = x.detach()
            with FakeTensorMode() as mode:
                assert stt.reduce(mode.from_tensor(plain), op, axis).shape == ()
    with pytest.raises(ValueError, match="^axis: 0 is out of bounds"):
        stt.reduce(torch.tensor(1.0, dtype=torch.float64, device=DEVICE), "sum", [0])


@needs_torch
def test_16bit_backward_kernel_dtype_error_stays_clear():
    """softmax_backward itself takes float32/float64 (the autograd path converts 16-bit): a clear TypeError."""
    y = torch.zeros(2, 3, dtype=torch.bfloat16, device=DEVICE)
    with pytest.raises(TypeError, match=r"y: expected dtype torch.float32 or torch.float64; got torch.bfloat16"):
        stt.softmax_backward(y, y, -1, False)
    with pytest.raises(TypeError, match=r"x: expected dtype torch.float32, torch.float64, torch.float16 or "
                                        r"torch.bfloat16; got torch.int32"):
        stt.softmax(torch.zeros(2, 3, dtype=torch.int32, device=DEVICE), -1)


@needs_torch
@pytest.mark.parametrize("relu, bias", [(False, True), (True, True), (False, False)])
def test_linear_takes_torchs_leading_dimensions(relu, bias):
    """``stt.Linear`` on ``(*, in_features)`` as ``torch.nn.Linear``: a batch of sequences, one vector, no rows;
    forward and the input's gradient (it refused anything but 2-D, naming ``a``, an argument users never pass)."""
    layer = stt.Linear(4, 2, bias=bias, relu=relu, dtype=torch.float64, device=DEVICE)
    for shape in ((2, 3, 4), (4,), (0, 4)):
        x = torch.randn(*shape, dtype=torch.float64, device=DEVICE, requires_grad=True)
        want = torch.nn.functional.linear(x, layer.weight, layer.bias)
        want = want.relu() if relu else want
        got = layer(x)
        assert got.shape == want.shape and torch.allclose(got, want), shape
        if x.numel():
            (gx,) = torch.autograd.grad(got.sum(), x)
            (wx,) = torch.autograd.grad(want.sum(), x)
            assert torch.allclose(gx, wx), shape


@needs_torch
def test_fake_results_are_contiguous_as_the_real_ones():
    """A transposed input: the real ops return C-contiguous results, and so do the fakes (empty_like kept the input's
    strides: opcheck's stride mismatch, and a compiled ``.view`` that eager allows failed)."""
    x = torch.randn(3, 4, dtype=torch.float64, device=DEVICE).t()
    for op, args in ((stt.softmax, (x, 0)), (stt.bias_relu, (x, torch.zeros(3, dtype=x.dtype, device=DEVICE))),
                     (stt.correlate2d, (x, torch.ones(2, 2, dtype=x.dtype, device=DEVICE), "reflect", 0.0))):
        assert set(torch.library.opcheck(op, args, test_utils=("test_faketensor",)).values()) == {"SUCCESS"}, op
    f = torch.compile(lambda t: stt.softmax(t.t(), 0).view(-1), fullgraph=True, backend="eager")
    torch.testing.assert_close(f(x.t()), torch.softmax(x, 0).reshape(-1))


@needs_torch
def test_second_derivatives_of_softmax():
    """softmax_backward has its own gradient (torch took it as zero: a silently wrong Hessian): gradgradcheck of
    softmax and log_softmax along each axis, gradcheck of softmax_backward in y and dy."""
    torch.manual_seed(3)
    x = torch.randn(3, 4, dtype=torch.float64, device=DEVICE, requires_grad=True)
    for f in (stt.softmax, stt.log_softmax):
        for axis in (0, -1):
            assert torch.autograd.gradgradcheck(lambda t: f(t, axis), (x,)), (f, axis)
    y = torch.softmax(torch.randn(2, 3, dtype=torch.float64, device=DEVICE), -1).requires_grad_()
    dy = torch.randn(2, 3, dtype=torch.float64, device=DEVICE, requires_grad=True)
    for log in (False, True):
        assert torch.autograd.gradcheck(lambda a, b: stt.softmax_backward(a, b, -1, log), (y, dy))


@needs_torch
def test_square_filter_conv_backward_with_dynamic_shapes():
    """conv2d_nchw's backward hands the op a padding of K − 1 − p: under dynamic shapes a SymInt (it was refused)."""
    w = torch.randn(2, 1, 2, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    x = torch.randn(1, 1, 3, 3, dtype=torch.float64, device=DEVICE, requires_grad=True)
    assert set(torch.library.opcheck(stt.conv2d_nchw, (x, w, None, 0)).values()) == {"SUCCESS"}


@needs_torch
def test_empty_images_and_batches_in_the_layers():
    """A 2-D filter's gradients on an empty image are zeros of the inputs' shapes (np.pad raised); ReLU and Linear
    take a size-0 dimension as torch's; Linear names x with the layer's shape and dtype; Conv2d refuses a stride
    set after construction (it was ignored); LogSoftmax shows its dim."""
    a = torch.randn(0, 4, dtype=torch.float64, device=DEVICE, requires_grad=True)
    w = torch.randn(2, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    for mode in ("reflect", "constant"):
        da, dw = torch.autograd.grad(stt.correlate2d(a, w, mode, 0.0).sum(), (a, w))
        assert da.shape == a.shape and dw.shape == w.shape and not dw.any()
    assert stt.ReLU()(torch.randn(0, 3, dtype=torch.float64, device=DEVICE)).shape == (0, 3)
    lin = stt.Linear(4, 2).to(torch.float64).to(DEVICE)
    assert lin(torch.randn(0, 4, dtype=torch.float64, device=DEVICE)).shape == (0, 2)
    with pytest.raises(ValueError, match=r"^x: expected a tensor of shape \(\*, 4\) and dtype torch.float64"):
        lin(torch.randn(2, 3, dtype=torch.float64, device=DEVICE))
    with pytest.raises(TypeError, match=r"^x: expected .* got shape \(2, 4\), dtype torch.float32"):
        lin(torch.randn(2, 4, device=DEVICE))
    conv = stt.Conv2d(1, 1, 3, padding=1).to(torch.float64).to(DEVICE)
    conv.stride = (2, 2)
    with pytest.raises(ValueError, match=r"^Conv2d: simt_tiles computes stride 1.* got stride=\(2, 2\)"):
        conv(torch.randn(1, 1, 4, 4, dtype=torch.float64, device=DEVICE))
    assert repr(stt.LogSoftmax(1)) == "LogSoftmax(dim=1)"
