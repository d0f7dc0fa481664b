"""16-bit floats at a kernel's global loads and stores: what softmax, bias_relu and reduce share.

A kernel that takes float16 or bfloat16 is built for :data:`simt_tiles.runtime.HALF_STORAGE`'s dtype
(float16 itself; bfloat16 as its ``uint16`` bits), computes in float32 and rounds each output once to the
input's dtype, to nearest even (torch's rule).  :func:`make_io` gives it the two conversions, applied at each
global load (``up``) and store (``down``); for float32/float64 both are the value itself, so those kernels'
PTX is what it was without them.  :func:`make_store` is the store of a value computed in float64 (reduce's sums):
rounded to 16 bits once, through float32 rounded to odd.  :func:`make_pairs` converts two 16-bit values a
32-bit word (the wide loads and stores of :func:`simt_tiles.vector.load16_words`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, uint32
from numba.types import float16

from .mma import as_f32, f16x2_to_f32, f32_to_bf16, f32x2_to_bf16x2, f32x2_to_f16x2, f64_to_f32_odd
from .runtime import HALF_STORAGE

#: Numba inlines these at the call site, before typing: the GPU-free compile gate keeps working and the
#: PTX is that of the statements written out
inline = cuda.jit(device=True, inline="always")


def compute_dtype(dtype) -> np.dtype:
    """The dtype of the arithmetic for inputs of ``dtype`` as stored: float32 for 16-bit, else ``dtype``."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize == 2 else dtype


def make_io(dtype):
    """``up(v)``: a stored element as the compute type; ``down(v)``: a computed value as a stored element,
    for inputs stored as ``dtype``.  float32/float64: the value itself (the PTX of those kernels is what it
    was without these); float16: Numba's conversions (``cvt.f32.f16``; ``cvt.rn.f16.f32``, to nearest even);
    bfloat16 (``uint16`` bits): up exactly (the bits shifted 16), down to nearest even, NaN kept
    (:func:`simt_tiles.mma.f32_to_bf16`: ``cvt.rn.bf16.f32``)."""
    dtype = np.dtype(dtype)
    if dtype == HALF_STORAGE["bfloat16"]:
        @inline
        def up(v):
            return as_f32(uint32(uint32(v) << uint32(16)))

        @inline
        def down(v):
            return f32_to_bf16(v)
    elif dtype == HALF_STORAGE["float16"]:
        @inline
        def up(v):
            return float32(v)

        @inline
        def down(v):
            return float16(v)
    else:
        @inline
        def up(v):
            return v

        @inline
        def down(v):
            return v
    return up, down


def make_pairs(dtype):
    """``unpack(w) -> (lo, hi)``: the two 16-bit values of a 32-bit word ``w`` (the lower-addressed one in the
    low half) as float32, exactly; ``pack(lo, hi) -> w``: two float32 values rounded to nearest even into one
    word — each as :func:`make_io`'s ``up`` / ``down`` would, a pair at a time.  bfloat16 (``uint16`` bits): a
    shift and a mask up, one ``cvt.rn.bf16x2.f32`` down; float16: ``cvt.f32.f16`` of each half up, one
    ``cvt.rn.f16x2.f32`` down (:mod:`simt_tiles.mma`).  16-bit storage only (TypeError otherwise)."""
    dtype = np.dtype(dtype)
    if dtype == HALF_STORAGE["bfloat16"]:
        @inline
        def unpack(w):
            return as_f32(uint32(w << uint32(16))), as_f32(uint32(w & uint32(0xFFFF0000)))

        return unpack, f32x2_to_bf16x2
    if dtype == HALF_STORAGE["float16"]:
        return f16x2_to_f32, f32x2_to_f16x2
    raise TypeError(f"make_pairs: 16-bit storage (float16, or bfloat16's uint16 bits); got {dtype}")


def make_store(dtype, value_dtype):
    """``store(v)``: a computed value of ``value_dtype`` (float32 or float64) as an element stored as ``dtype``.
    float32/float64 storage: the value itself, as :func:`make_io`'s ``down`` (the kernel's own cast or assignment
    converts it: the PTX is what it was); 16-bit storage: ``down``, after :func:`simt_tiles.mma.f64_to_f32_odd`
    for float64 values, so that a float64 sum is rounded to 16 bits once (``down(float32(v))`` rounds twice:
    1 + 2⁻¹¹ + 2⁻²⁴ becomes 1.0 in float16, not 1 + 2⁻¹⁰)."""
    dtype, value_dtype = np.dtype(dtype), np.dtype(value_dtype)
    _, down = make_io(dtype)
    if dtype.itemsize == 2 and value_dtype == np.float64:
        @inline
        def store(v):
            return down(f64_to_f32_odd(v))

        return store
    return down
