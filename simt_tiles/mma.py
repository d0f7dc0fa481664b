"""Tensor-core instructions from Numba kernels: warp-level ``mma.sync``, ``ldmatrix``, ``cp.async``
by byte address, TF32/BF16/FP16 conversions — and their emulation in the simulator.

Numba has no tensor-core intrinsics; these are ``intrinsic`` functions that emit inline PTX
(as :mod:`simt_tiles.vector` does for cp.async and 128-bit loads).  A kernel that uses them
addresses shared memory by **byte address** (a 32-bit shared-window address, as CUTLASS does):
one base register per lane plus an immediate offset per fragment, so no index arithmetic sits
in the tile loop::

    s0 = smem_base(sm)                      # sm: a shared array; SA (uint32) address of sm[0]
    g = gaddr(a, i)                         # GA (uint64) address of a.flat[i] (global)
    cp_async16(s0, OFF, g, nbytes)          # 16 bytes global → shared, nbytes < 16 zero-filled
    commit_group(); wait_group(N)           # cp.async groups: at most N still in flight
    x = lds32(s0, OFF)                      # one 32-bit word of shared memory (as float32)
    u0, u1, u2, u3 = lds128(s0, OFF)        # 16 bytes of shared memory as four uint32 (16-byte aligned)
    sts128(s0, OFF, x0, x1, x2, x3)         # 16 bytes to shared memory (float32 or uint32 values, their bits)
    r0, r1, r2, r3 = ldsm_x4(s0, OFF)       # ldmatrix .x4 (this lane's row address s0+OFF)
    r0, r1, r2, r3 = ldsm_x4_t(s0, OFF)     # ldmatrix .x4.trans (16-bit elements)
    d0, d1, d2, d3 = mma_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)   # m16n8k8, float32 in
    d0, d1, d2, d3 = mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)   # m16n8k16, uint32 pairs in
    d0, d1, d2, d3 = mma_f16(...)                                       # m16n8k16, fp16 pairs
    y = cvt_tf32(x)                         # cvt.rna.tf32.f32: round to nearest, ties away (x: float32
                                            # or uint32 bits, e.g. an ldmatrix register)
    y = as_f32(u)                           # uint32 bits as float32
    y = rna_add(x)                          # x's bits + half a TF32 ulp: what the tensor cores then
                                            # truncate is x rounded to nearest, ties away (not NaN-safe
                                            # for NaN payloads ≥ 0x7FF000: those wrap to −0)
    y = rna_finite(u)                       # uint32 bits u plus half a TF32 ulp if finite, else u as is:
                                            # cvt.rna without its final mask of the 13 low bits, which the
                                            # tensor cores ignore (ptxas drops that mask itself when cvt.rna
                                            # feeds an mma): 2 SASS instructions, and NaN-safe
    h = f32_to_bf16(x); h = f32_to_f16(x)   # round to nearest even, the uint16 bits
    w = f32x2_to_bf16x2(lo, hi)             # both rounded to nearest even, packed: lo's bits in the low half
    w = f32x2_to_f16x2(lo, hi)              # (one cvt.rn.bf16x2.f32 / .f16x2.f32: one F2FP a pair)
    lo, hi = f16x2_to_f32(w)                # the two float16 halves of uint32 w as float32, low half first
    y = f64_to_f32_odd(x)                   # float64 → float32 rounded to odd (cvt.rz, the last bit set when
                                            # inexact): a rounding of y to 16 bits is x rounded once

``OFF`` must be an integer literal (it becomes the PTX immediate).  16-bit data travels as
``uint16`` arrays (the bits of bfloat16/float16: NumPy has no bfloat16), packed two to a
32-bit register, low half first, as the tensor cores read them.

Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k8 / m16n8k16"), g = lane >> 2,
t = lane & 3; C/D of both shapes: c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t], C[g+8][2t+1]

* TF32 m16n8k8 (A row-major 16×8, B column-major 8×8):
  a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]; b0 = B[t][g], b1 = B[t+4][g].
* BF16/FP16 m16n8k16 (A 16×16, B 16×8), each register two elements (k, k+1):
  a0 = A[g][2t:2t+2], a1 = A[g+8][2t:2t+2], a2 = A[g][2t+8:2t+10], a3 = A[g+8][2t+8:2t+10];
  b0 = B[2t:2t+2][g], b1 = B[2t+8:2t+10][g].
* ldmatrix .x4: lanes 8j..8j+7 give the row addresses of 8×8 matrix j (16 bytes a row);
  register j of lane L holds row L>>2, elements 2(L&3), 2(L&3)+1 of matrix j — with ``.trans``,
  elements (2(L&3), L>>2) and (2(L&3)+1, L>>2): the B fragment from a row-major K×N tile.

**In the simulator** every one is plain Python.  Addresses are the real host addresses of the
NumPy arrays behind the simulator's arrays (``smem_base``/``gaddr`` register the array they
point into), so the kernel's own address arithmetic is what is checked: an address outside
every registered array, or misaligned (16 bytes for cp.async and ldmatrix rows, 4 for lds32),
raises ``ValueError``.  ``mma_*`` and ``ldsm_*`` are warp rendezvous (:mod:`simt_tiles.warp`'s):
each lane deposits its fragment, and each reads back its part of D computed from the whole warp's
A, B and C with the layout above — a wrong lane mapping gives a wrong product here too.  The
arithmetic: the hardware's inputs (TF32: the top 19 bits of each float32, i.e. truncation when
``cvt_tf32`` was not applied; BF16/FP16 as given) multiplied exactly and summed with C in float64,
rounded once to float32 — within the bound the accumulation in float32 allows
(:func:`simt_tiles.bounds.mma_bound`).  cp.async reads its source at once and lands in shared
memory at the ``wait_group`` that covers its group (:func:`simt_tiles.vector.land_copies`), so a
read before that wait sees the old bytes and a missing or early ``wait_group`` fails the tests.

``SA`` / ``GA`` are the address types (uint32 / uint64 on the GPU; Python ``int`` in the
simulator, where host addresses exceed 32 bits): generated code writes ``SA(s0 + SA(x))``.
"""

from __future__ import annotations

import threading

import numpy as np

from .runtime import SIMULATOR

__all__ = ["SA", "GA", "smem_base", "gaddr", "cp_async16", "commit_group", "wait_group", "lds32", "lds128", "sts128",
           "ldsm_x4", "ldsm_x4_t", "mma_tf32", "mma_bf16", "mma_f16", "cvt_tf32", "as_f32", "rna_add", "rna_finite", "f32_to_bf16",
           "f32_to_f16", "f64_to_f32_odd", "round_to_odd32", "tf32_round", "tf32_truncate", "bf16_bits", "bits_to_f32", "f16_bits",
           "fragment_a", "fragment_b", "fragment_c", "mma_reference",
           "f32x2_to_bf16x2", "f32x2_to_f16x2", "f16x2_to_f32"]


# ---------------------------------------------------------------------------
# NumPy models (used by the simulator and by the tests)
# ---------------------------------------------------------------------------

def tf32_round(x):
    """float32 → TF32 (10 mantissa bits) as cvt.rna does: to nearest, ties away from zero.
    NaN and inf stay; a value that rounds past the largest finite becomes inf."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32)
    finite = (u & 0x7F800000) != 0x7F800000
    r = np.where(finite, (u + np.uint32(0x1000)) & np.uint32(0xFFFFE000), u)
    return r.astype(np.uint32).view(np.float32)


def tf32_truncate(x):
    """What the tensor cores read of a float32 given as TF32: the top 19 bits."""
    x = np.asarray(x, np.float32)
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def bf16_bits(x):
    """float32 → bfloat16 bits (uint16), round to nearest even (NaN stays NaN)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, (u >> 16) | 0x40, r).astype(np.uint16)


def round_to_odd32(x):
    """float64 → float32 rounded to odd: toward zero, then the last bit set if that was inexact (NaN stays NaN,
    ±inf stays, a finite value past float32's range becomes ±FLT_MAX).  float32 has 13 more bits than
    float16 and 16 more than bfloat16 (≥ 2 is enough), so rounding the result to nearest even in 16 bits is
    ``x`` rounded to nearest even once (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
    proved algorithms using rounding to odd", 2008); two roundings to nearest are not (1 + 2⁻¹¹ + 2⁻²⁴: float32
    makes it the float16 tie 1 + 2⁻¹¹, which goes to 1.0 instead of 1 + 2⁻¹⁰)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        t = x.astype(np.float32)
        away = np.abs(t.astype(np.float64)) > np.abs(x)  # rounded away from zero (to ±inf too): step back
        t = np.where(away, np.nextafter(t, np.float32(0)), t).astype(np.float32)
        inexact = (t.astype(np.float64) != x) & ~np.isnan(x)
    return np.where(inexact, t.view(np.uint32) | np.uint32(1), t.view(np.uint32)).astype(np.uint32).view(np.float32)


def f16_bits(x):
    """float32 → IEEE half bits (uint16), round to nearest even (past 65520: ±inf, as the GPU's, no warning)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).view(np.uint16)


def bits_to_f32(bits, precision: str):
    """uint16 bits of ``precision`` ("bf16" or "fp16") → float32."""
    bits = np.asarray(bits, np.uint16)
    if precision == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def _lanes():
    lane = np.arange(32)
    return lane >> 2, lane & 3


def fragment_a(a, precision: str):
    """Each lane's A registers for one mma of a 16×K tile ``a`` (K = 8 for tf32, 16 otherwise):
    tf32 → (32, 4) float32; bf16/fp16 (``a`` as uint16 bits) → (32, 4, 2) element pairs."""
    g, t = _lanes()
    if precision == "tf32":
        return np.stack([a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4]], axis=1)
    pair = lambda r, c: np.stack([a[r, c], a[r, c + 1]], axis=1)  # noqa: E731
    return np.stack([pair(g, 2 * t), pair(g + 8, 2 * t), pair(g, 2 * t + 8), pair(g + 8, 2 * t + 8)], axis=1)


def fragment_b(b, precision: str):
    """Each lane's B registers for a K×8 tile ``b``: tf32 (32, 2); bf16/fp16 (32, 2, 2)."""
    g, t = _lanes()
    if precision == "tf32":
        return np.stack([b[t, g], b[t + 4, g]], axis=1)
    pair = lambda r, c: np.stack([b[r, c], b[r + 1, c]], axis=1)  # noqa: E731
    return np.stack([pair(2 * t, g), pair(2 * t + 8, g)], axis=1)


def fragment_c(c):
    """Each lane's four accumulators of a 16×8 tile ``c``: (32, 4)."""
    g, t = _lanes()
    return np.stack([c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1]], axis=1)


def _scatter_c(frag):
    c = np.empty((16, 8), frag.dtype)
    g, t = _lanes()
    c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1] = frag.T
    return c


def _pairs_to_u32(p):
    p = np.asarray(p, np.uint16).astype(np.uint32)
    return p[..., 0] | (p[..., 1] << 16)


def _u32_to_pairs(u):
    u = np.asarray(u, np.uint32)
    return np.stack([u & 0xFFFF, u >> 16], axis=-1).astype(np.uint16)


def mma_reference(a_frag, b_frag, c_frag, precision: str):
    """D fragments (32, 4) float32 from the 32 lanes' A, B (tf32: float32 values; bf16/fp16:
    uint32 registers of two elements) and C fragments: the simulator's arithmetic."""
    g, t = _lanes()
    if precision == "tf32":
        fa, fb = tf32_truncate(np.asarray(a_frag, np.float32)), tf32_truncate(np.asarray(b_frag, np.float32))
        a = np.empty((16, 8), np.float32)
        b = np.empty((8, 8), np.float32)
        a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4] = fa.T
        b[t, g], b[t + 4, g] = fb.T
    else:
        pa = bits_to_f32(_u32_to_pairs(a_frag), precision)  # (32, 4, 2)
        pb = bits_to_f32(_u32_to_pairs(b_frag), precision)  # (32, 2, 2)
        a = np.empty((16, 16), np.float32)
        b = np.empty((16, 8), np.float32)
        for reg, (dr, dc) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
            a[g + dr, 2 * t + dc], a[g + dr, 2 * t + dc + 1] = pa[:, reg, 0], pa[:, reg, 1]
        for reg in range(2):
            b[2 * t + 8 * reg, g], b[2 * t + 8 * reg + 1, g] = pb[:, reg, 0], pb[:, reg, 1]
    c = _scatter_c(np.asarray(c_frag, np.float32))
    with np.errstate(all="ignore"):
        d = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    return fragment_c(d)


# ---------------------------------------------------------------------------
# The simulator's versions
# ---------------------------------------------------------------------------

if SIMULATOR:
    from .vector import commit_copies, defer_copy, land_copies  # the simulator's cp.async groups

    SA = GA = int

    _regions: dict[int, np.ndarray] = {}  # start address → flat uint8 view of a registered array
    _regions_lock = threading.Lock()
    _MAX_REGIONS = 256

    def _register(ary) -> int:
        ary = getattr(ary, "_ary", ary)
        start = ary.__array_interface__["data"][0]
        with _regions_lock:
            if start not in _regions:
                if len(_regions) >= _MAX_REGIONS:
                    del _regions[next(iter(_regions))]
                _regions[start] = ary.reshape(-1).view(np.uint8)
            elif _regions[start].nbytes != ary.nbytes:
                _regions[start] = ary.reshape(-1).view(np.uint8)
        return start

    def _bytes(name, addr, n, align):
        addr = int(addr)
        if addr % align:
            raise ValueError(f"{name}: address {addr:#x} is not a multiple of {align} bytes (a GPU would fault)")
        with _regions_lock:
            regions = list(_regions.items())
        for start, buf in reversed(regions):
            if start <= addr and addr + n <= start + buf.nbytes:
                return buf[addr - start:addr - start + n]
        raise ValueError(f"{name}: {n} bytes at {addr:#x} lie outside every array the kernel "
                         "registered with smem_base/gaddr (out of bounds)")

    def smem_base(ary):
        return _register(ary)

    def gaddr(ary, i):
        flat = getattr(ary, "_ary", ary)
        i = int(i)
        if i < 0 or i >= flat.size:
            raise ValueError(f"gaddr: element {i} of an array of {flat.size}: out of bounds")
        return _register(flat) + i * flat.itemsize

    def cp_async16(s, off, g, nbytes):
        dst = _bytes("cp_async16 (shared)", int(s) + int(off), 16, 16)
        n = int(nbytes)
        if not 0 <= n <= 16:
            raise ValueError(f"cp_async16: source size {n}; expected 0..16")
        data = np.zeros(16, np.uint8)
        if n:
            data[:n] = _bytes("cp_async16 (global)", int(g), 16, 16)[:n]
        words, out = data.view(np.uint32), dst.view(np.uint32)

        def land():
            for i in range(4):  # element writes: simt_tiles.analyze records them (slices it does not)
                out[i] = words[i]

        defer_copy(land)  # lands at the wait_group that covers it (simt_tiles.vector.land_copies)

    def commit_group():
        commit_copies()

    def wait_group(n):
        land_copies(n)

    def lds32(s, off):
        return _bytes("lds32", int(s) + int(off), 4, 4).view(np.float32)[0]

    def lds128(s, off):
        words = _bytes("lds128", int(s) + int(off), 16, 16).view(np.uint32)
        return tuple(np.uint32(words[i]) for i in range(4))  # element reads: the race check records them

    def _bits(x):
        return np.uint32(x) if isinstance(x, (np.uint32, np.integer, int)) else np.float32(x).view(np.uint32)

    def sts128(s, off, x0, x1, x2, x3):
        out = _bytes("sts128", int(s) + int(off), 16, 16).view(np.uint32)
        for i, x in enumerate((x0, x1, x2, x3)):
            out[i] = _bits(x)

    def _words(buf):
        return np.uint32(buf.view(np.uint32)[0])

    def _half(name, addr):
        """The 16-bit element at ``addr``, read as its aligned 32-bit word (the access the race
        check pairs with the copies' 32-bit writes)."""
        word = int(_words(_bytes(name, addr & ~3, 4, 4)))
        return (word >> 16) if addr & 2 else (word & 0xFFFF)

    def _ldsm(name, s, off, trans):
        from .warp import FULL_MASK, _exchange  # deferred: the simulator's warp rendezvous, only when simulated

        lane, _, rows = _exchange(name, FULL_MASK, int(s) + int(off))
        out = []
        for j in range(4):
            if not trans:  # row lane>>2 of matrix j, elements 2(lane&3), +1: one word
                out.append(_words(_bytes(name, rows[8 * j + (lane >> 2)] + 4 * (lane & 3), 4, 4)))
            else:  # elements (2(lane&3), lane>>2) and (2(lane&3)+1, lane>>2)
                for row in (rows[8 * j + 2 * (lane & 3)], rows[8 * j + 2 * (lane & 3) + 1]):
                    _bytes(name, row, 16, 16)  # the row address must be valid and aligned
                lo, hi = (_half(name, rows[8 * j + 2 * (lane & 3) + h] + 2 * (lane >> 2)) for h in (0, 1))
                out.append(np.uint32(lo | (hi << 16)))
            if not trans:
                _bytes(name, rows[8 * j + (lane >> 2)], 16, 16)
        return tuple(out)

    def ldsm_x4(s, off):
        return _ldsm("ldsm_x4", s, off, False)

    def ldsm_x4_t(s, off):
        return _ldsm("ldsm_x4_t", s, off, True)

    def _mma(precision, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        from .warp import FULL_MASK, _exchange  # deferred: the simulator's warp rendezvous, only when simulated

        lane, _, v = _exchange(f"mma_{precision}", FULL_MASK, ((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3)))
        dt = np.float32 if precision == "tf32" else np.uint32
        fa = np.array([v[i][0] for i in range(32)], dt)
        fb = np.array([v[i][1] for i in range(32)], dt)
        fc = np.array([v[i][2] for i in range(32)], np.float32)
        d = mma_reference(fa, fb, fc, precision)[lane]
        return np.float32(d[0]), np.float32(d[1]), np.float32(d[2]), np.float32(d[3])

    def mma_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("tf32", a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    def mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("bf16", a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    def mma_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("fp16", a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    def as_f32(u):
        return np.uint32(u).view(np.float32)

    def rna_add(x):
        u = np.uint32(x) if isinstance(x, (np.uint32, np.integer)) else np.float32(x).view(np.uint32)
        return np.uint32((int(u) + 0x1000) & 0xFFFFFFFF).view(np.float32)

    def rna_finite(u):
        u = int(np.uint32(u))
        return np.uint32(u + 0x1000 if (u & 0x7F800000) != 0x7F800000 else u).view(np.float32)

    def cvt_tf32(x):
        if isinstance(x, (np.uint32, np.integer)):
            x = np.uint32(x).view(np.float32)
        return tf32_round(np.float32(x))[()]

    def f32_to_bf16(x):
        return bf16_bits(np.float32(x))[()]

    def f32_to_f16(x):
        return f16_bits(np.float32(x))[()]

    def f32x2_to_bf16x2(lo, hi):
        return np.uint32(int(f32_to_bf16(lo)) | int(f32_to_bf16(hi)) << 16)

    def f32x2_to_f16x2(lo, hi):
        return np.uint32(int(f32_to_f16(lo)) | int(f32_to_f16(hi)) << 16)

    def f16x2_to_f32(w):
        w = int(np.uint32(w))
        halves = np.array([w & 0xFFFF, w >> 16], np.uint16).view(np.float16).astype(np.float32)
        return halves[0], halves[1]

    def f64_to_f32_odd(x):
        return round_to_odd32(np.float64(x))[()]

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    SA = types.uint32
    GA = types.uint64
    _I32, _I64, _F32, _I16 = ir.IntType(32), ir.IntType(64), ir.FloatType(), ir.IntType(16)

    def _asm(builder, ret, args, text, constraints, side_effect=False):
        fnty = ir.FunctionType(ret, [a.type for a in args])
        return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args)

    def _literal(off):
        return isinstance(off, types.IntegerLiteral)

    @intrinsic
    def smem_base(typingctx, ary):
        if not isinstance(ary, types.Array):
            return None

        def codegen(context, builder, sig, args):
            arr = context.make_array(sig.args[0])(context, builder, args[0])
            p = builder.ptrtoint(arr.data, _I64)
            return _asm(builder, _I32, [p], "{ .reg .u64 a; cvta.to.shared.u64 a, $1; cvt.u32.u64 $0, a; }",
                        "=r,l")

        return types.uint32(ary), codegen

    @intrinsic
    def gaddr(typingctx, ary, i):
        if not (isinstance(ary, types.Array) and isinstance(i, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            arr = context.make_array(sig.args[0])(context, builder, args[0])
            idx = context.cast(builder, args[1], sig.args[1], types.intp)
            return builder.ptrtoint(builder.gep(arr.data, [idx]), _I64)

        return types.uint64(ary, i), codegen

    @intrinsic
    def cp_async16(typingctx, s, off, g, nbytes):
        if not (isinstance(s, types.Integer) and _literal(off) and isinstance(g, types.Integer)
                and isinstance(nbytes, types.Integer)):
            return None
        offset = off.literal_value

        def codegen(context, builder, sig, args):
            sv = context.cast(builder, args[0], sig.args[0], types.uint32)
            gv = context.cast(builder, args[2], sig.args[2], types.uint64)
            nv = context.cast(builder, args[3], sig.args[3], types.uint32)
            _asm(builder, ir.VoidType(), [sv, gv, nv],
                 f"cp.async.cg.shared.global [$0+{offset}], [$1], 16, $2;", "r,l,r,~{memory}", True)
            return context.get_dummy_value()

        return types.void(s, off, g, nbytes), codegen

    @intrinsic
    def commit_group(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], "cp.async.commit_group;", "~{memory}", True)
            return context.get_dummy_value()

        return types.void(), codegen

    @intrinsic
    def wait_group(typingctx, n):
        if not _literal(n):
            return None
        count = n.literal_value

        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], f"cp.async.wait_group {count};", "~{memory}", True)
            return context.get_dummy_value()

        return types.void(n), codegen

    @intrinsic
    def lds32(typingctx, s, off):
        if not (isinstance(s, types.Integer) and _literal(off)):
            return None
        offset = off.literal_value

        def codegen(context, builder, sig, args):
            sv = context.cast(builder, args[0], sig.args[0], types.uint32)
            # volatile: a load must not move above the barrier that makes its stage ready
            return _asm(builder, _F32, [sv], f"ld.shared.f32 $0, [$1+{offset}];", "=f,r,~{memory}", True)

        return types.float32(s, off), codegen

    @intrinsic
    def sts128(typingctx, s, off, x0, x1, x2, x3):
        xs = (x0, x1, x2, x3)
        if not (isinstance(s, types.Integer) and _literal(off)
                and all(x in (types.float32, types.uint32) for x in xs)):
            return None
        offset = off.literal_value

        def codegen(context, builder, sig, args):
            sv = context.cast(builder, args[0], sig.args[0], types.uint32)
            vals = [builder.bitcast(v, _I32) if ty == types.float32 else v for v, ty in zip(args[2:], sig.args[2:])]
            # volatile, memory clobber: not moved below the barrier that publishes it
            _asm(builder, ir.VoidType(), [sv] + vals, f"st.shared.v4.b32 [$0+{offset}], {{$1, $2, $3, $4}};",
                 "r,r,r,r,r,~{memory}", True)
            return context.get_dummy_value()

        return types.void(s, off, *xs), codegen

    def _shared_load4(instruction: str):
        """An intrinsic ``(s, OFF) -> four uint32``: ``instruction {$0..$3}, [s+OFF]`` on shared memory; volatile
        with a memory clobber, so not moved above the wait_group that makes this thread's copies visible to it."""
        @intrinsic
        def load(typingctx, s, off):
            if not (isinstance(s, types.Integer) and _literal(off)):
                return None
            offset = off.literal_value
            sig = types.UniTuple(types.uint32, 4)(s, off)

            def codegen(context, builder, sig, args):
                sv = context.cast(builder, args[0], sig.args[0], types.uint32)
                r = _asm(builder, ir.LiteralStructType([_I32] * 4), [sv],
                         f"{instruction} {{$0, $1, $2, $3}}, [$4+{offset}];", "=r,=r,=r,=r,r,~{memory}", True)
                vals = [builder.extract_value(r, k) for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return load

    lds128 = _shared_load4("ld.shared.v4.u32")
    ldsm_x4 = _shared_load4("ldmatrix.sync.aligned.m8n8.x4.shared.b16")
    ldsm_x4_t = _shared_load4("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16")

    def _mma_intrinsic(shape: str, kind: str, in_type):
        text = (f"mma.sync.aligned.{shape}.row.col.f32.{kind}.{kind}.f32 "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")

        @intrinsic
        def mma(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            sig = types.UniTuple(types.float32, 4)(*([in_type] * 6 + [types.float32] * 4))

            def codegen(context, builder, sig, args):
                ins = []
                for v, ty in zip(args[:6], sig.args[:6]):
                    ins.append(builder.bitcast(v, _I32) if ty == types.float32 else v)
                r = _asm(builder, ir.LiteralStructType([_F32] * 4), ins + list(args[6:]), text,
                         "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3")
                vals = [builder.extract_value(r, k) for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return mma

    mma_tf32 = _mma_intrinsic("m16n8k8", "tf32", types.float32)
    mma_bf16 = _mma_intrinsic("m16n8k16", "bf16", types.uint32)
    mma_f16 = _mma_intrinsic("m16n8k16", "f16", types.uint32)

    @intrinsic
    def cvt_tf32(typingctx, x):
        bits = x == types.uint32  # ldmatrix's registers: the float's bits

        def codegen(context, builder, sig, args):
            v = builder.bitcast(args[0], _F32) if bits else args[0]
            r = _asm(builder, _I32, [v], "cvt.rna.tf32.f32 $0, $1;", "=r,f")
            return builder.bitcast(r, _F32)

        return types.float32(types.uint32 if bits else types.float32), codegen

    @intrinsic
    def rna_add(typingctx, x):
        bits = x == types.uint32

        def codegen(context, builder, sig, args):
            v = args[0] if bits else builder.bitcast(args[0], _I32)
            return builder.bitcast(builder.add(v, ir.Constant(_I32, 0x1000)), _F32)

        return types.float32(types.uint32 if bits else types.float32), codegen

    @intrinsic
    def rna_finite(typingctx, u):
        if u != types.uint32:
            return None

        def codegen(context, builder, sig, args):
            r = _asm(builder, _I32, [args[0]],
                     "{ .reg .pred p; .reg .f32 a; .reg .b32 t; mov.b32 a, $1; abs.f32 a, a; "
                     "setp.lt.f32 p, a, 0f7F800000; add.u32 t, $1, 4096; selp.b32 $0, t, $1, p; }", "=r,r")
            return builder.bitcast(r, _F32)

        return types.float32(types.uint32), codegen

    @intrinsic
    def as_f32(typingctx, u):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], _F32)

        return types.float32(types.uint32), codegen

    def _to16(kind):
        @intrinsic
        def convert(typingctx, x):
            def codegen(context, builder, sig, args):
                return _asm(builder, _I16, [args[0]],
                            f"{{ .reg .b16 h; cvt.rn.{kind}.f32 h, $1; mov.b16 $0, h; }}", "=h,f")

            return types.uint16(types.float32), codegen

        return convert

    f32_to_bf16 = _to16("bf16")
    f32_to_f16 = _to16("f16")

    def _to16x2(kind):
        @intrinsic
        def convert(typingctx, lo, hi):
            def codegen(context, builder, sig, args):
                # cvt's first source goes to the upper half: (hi, lo)
                return _asm(builder, _I32, [args[1], args[0]], f"cvt.rn.{kind}x2.f32 $0, $1, $2;", "=r,f,f")

            return types.uint32(types.float32, types.float32), codegen

        return convert

    f32x2_to_bf16x2 = _to16x2("bf16")
    f32x2_to_f16x2 = _to16x2("f16")

    @intrinsic
    def f16x2_to_f32(typingctx, w):
        def codegen(context, builder, sig, args):
            r = _asm(builder, ir.LiteralStructType([_F32, _F32]), [args[0]],
                     "{ .reg .b16 l, h; mov.b32 {l, h}, $2; cvt.f32.f16 $0, l; cvt.f32.f16 $1, h; }", "=f,=f,r")
            return context.make_tuple(builder, sig.return_type, [builder.extract_value(r, k) for k in range(2)])

        return types.UniTuple(types.float32, 2)(types.uint32), codegen

    @intrinsic
    def f64_to_f32_odd(typingctx, x):
        # toward zero, then the sticky bit: inexact (or NaN, whose mantissa stays non-zero) sets the last bit
        def codegen(context, builder, sig, args):
            return _asm(builder, _F32, [args[0]],
                        "{ .reg .f32 t; .reg .f64 b; .reg .pred p; .reg .b32 u; cvt.rz.f32.f64 t, $1; "
                        "cvt.f64.f32 b, t; setp.neu.f64 p, b, $1; mov.b32 u, t; @p or.b32 u, u, 1; mov.b32 $0, u; }",
                        "=f,d")

        return types.float32(types.float64), codegen
