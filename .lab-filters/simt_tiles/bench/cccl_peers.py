"""cuda.compute peers (NVIDIA CCCL's Python API, package ``cuda-cccl``): device-wide reductions
(sum, max, min) and transforms (vector add, bias+ReLU), for the benchmarks.

``cuda.compute`` runs CUB's algorithms with the operator compiled in: the well-known operators
(``OpKind.PLUS``, ``MAXIMUM``, ``MINIMUM``) need no compiler; bias+ReLU is a C++ operator
(:data:`BIAS_RELU_OP`) compiled to LTO-IR with NVRTC (``cuda.core.Program``) and passed as a
``RawOp`` whose state is the bias pointer and the row length — the element index comes from a
``CountingIterator`` (no Numba JIT, no ``numba-cuda-mlir``).

Optional like every peer: :func:`cccl` returns ``(api, None)``, or ``(None, reason)`` where
``cuda.compute`` cannot be imported or used here.  Sums accumulate in float32 in CUB's order
(one sequential chain per thread, then trees), unlike ``simt_tiles.reduce`` (float64).
"""

from __future__ import annotations

import struct

__all__ = ["BIAS_RELU_OP", "cccl"]

#: the bias+ReLU operator (CCCL's ABI: void pointers; a stateful op gets its state first)
BIAS_RELU_OP = r"""
struct BiasState { const float* bias; unsigned int n; };
extern "C" __device__ void bias_relu_op(void* state, void* x, void* i, void* result) {
    const BiasState* s = static_cast<const BiasState*>(state);
    float v = *static_cast<const float*>(x) + s->bias[*static_cast<const unsigned int*>(i) % s->n];
    *static_cast<float*>(result) = v < 0.0f ? 0.0f : v;  // NaN kept (NaN < 0 is false)
}
"""

_API: dict = {}


class _Api:
    """The peers, with their build results and workspaces kept between calls (as a user would)."""

    def __init__(self, compute, np, cp):
        self.c, self.np, self.cp = compute, np, cp
        self._reducers: dict = {}
        self._ltoir = None

    def reduce(self, x, out, op="sum"):
        """out[0] = sum/max/min of the 1-D float32 CuPy array x (``reduce_into``, workspace kept)."""
        c, np = self.c, self.np
        kind = {"sum": c.OpKind.PLUS, "max": c.OpKind.MAXIMUM, "min": c.OpKind.MINIMUM}[op]
        init = np.array([{"sum": 0.0, "max": -np.inf, "min": np.inf}[op]], np.float32)
        key = (op, x.size)
        if key not in self._reducers:
            r = c.make_reduce_into(d_in=x, d_out=out, op=kind, h_init=init)
            nbytes = r(temp_storage=None, d_in=x, d_out=out, num_items=x.size, op=kind, h_init=init)
            self._reducers[key] = (r, self.cp.empty(max(1, nbytes), self.cp.uint8))
        r, tmp = self._reducers[key]
        r(temp_storage=tmp, d_in=x, d_out=out, num_items=x.size, op=kind, h_init=init)

    def vector_add(self, a, b, out):
        """out = a + b (``binary_transform`` with ``OpKind.PLUS``)."""
        self.c.binary_transform(d_in1=a, d_in2=b, d_out=out, op=self.c.OpKind.PLUS, num_items=a.size)

    def bias_relu(self, x, bias, out):
        """out = max(x + bias, 0) for a C-contiguous 2-D x: ``binary_transform`` of x and the
        element index, with the C++ operator :data:`BIAS_RELU_OP` (state: bias pointer, row length)."""
        from cuda.compute.op import RawOp

        n = x.shape[1]
        state = struct.pack("<QI4x", bias.data.ptr, n)
        op = RawOp(ltoir=self._bias_relu_ltoir(), name="bias_relu_op", state=state, state_alignment=8)
        self.c.binary_transform(d_in1=x.reshape(-1), d_in2=self.c.CountingIterator(self.np.uint32(0)),
                                d_out=out.reshape(-1), op=op, num_items=x.size)

    def _bias_relu_ltoir(self) -> bytes:
        if self._ltoir is None:
            from cuda.core import Device, Program, ProgramOptions

            major, minor = Device().compute_capability
            opts = ProgramOptions(arch=f"sm_{major}{minor}", relocatable_device_code=True,
                                  link_time_optimization=True)
            self._ltoir = Program(BIAS_RELU_OP, "c++", options=opts).compile("ltoir").code
        return self._ltoir


def cccl():
    """``(api, None)`` with ``api.reduce``, ``api.vector_add``, ``api.bias_relu`` (CuPy arrays),
    or ``(None, reason)`` where ``cuda.compute`` is missing or cannot run here."""
    if "api" in _API:
        return _API["api"], None
    try:
        import cupy as cp
        import numpy as np
        from cuda import compute

        compute.OpKind  # noqa: B018  (without CUDA bindings the module exposes nothing else)
    except (ImportError, AttributeError) as exc:  # optional peer
        return None, f"cuda.compute not usable ({type(exc).__name__}: {exc}); pip install cuda-cccl"
    _API["api"] = _Api(compute, np, cp)
    return _API["api"], None
