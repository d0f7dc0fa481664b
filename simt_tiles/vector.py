"""128-bit memory access from Numba kernels: ``load4`` and ``store4``, also in the simulator.

CUDA C reads four floats with one instruction through ``float4``; Numba has no
such type for arrays, and LLVM's load-store vectorizer merges neighbouring
scalar accesses only where it can prove 16-byte alignment — which it can for
shared arrays (declared aligned) but not for a kernel's array arguments.  So
a kernel that wants ``LDG.128`` / ``STG.128`` says so:

    a, b, c, d = load4(row, i)        # row[i], row[i+1], row[i+2], row[i+3]
    store4(row, i, a, b, c, d)

``row`` is a C-contiguous array (a row of a 2-D argument, a shared array row,
or a whole 2-D array) and ``i`` the element's *flat* index in it (for a 1-D
array, its index; for a 2-D one, ``r·w + c`` — one address computation
instead of a row's and a column's).  **The caller promises that the address
of element ``i`` is a multiple of 16 bytes** (and that the four elements exist).
float32: one 128-bit access; float64 (4 × 8 bytes): LLVM splits it into two
128-bit accesses, each aligned.

* **On a GPU** each is a Numba ``intrinsic`` that emits an LLVM load/store of a
  ``<4 x T>`` vector with ``align 16``: ``ld.global.v4.f32`` in PTX.
* **In the simulator** each is plain Python that *checks the promise* — the
  address alignment (through the NumPy array behind the simulator's) and the
  bounds — and raises ``ValueError`` naming what is wrong: a kernel that would
  fault or read garbage on the GPU fails its simulator tests instead.

Asynchronous copies (sm_80+: ``cp.async``, SASS ``LDGSTS``)::

    copy4_async(dst, j, src, i)   # dst[j:j+4] = src[i:i+4], dst in shared memory
    commit_copies()               # close the group of this thread's copies issued so far
    wait_copies()                 # wait until all of this thread's committed groups have landed

A global → shared copy that needs no registers and does not stall the
thread: the load is in flight while the thread computes.  After
``wait_copies`` a thread's own copies are in shared memory; a
``syncthreads`` then makes everyone's visible.  Both addresses 16-byte
aligned (float32: 4 elements; float64 is refused — 32 bytes).  In the
simulator the copy reads its source at once (with the checks above) and lands
in shared memory only when a wait says it has (:func:`land_copies`, the latest
moment PTX allows): a read before the wait sees the old bytes there, as it may
on a GPU, so a missing or misplaced ``wait_copies`` fails the simulator tests.
"""

from __future__ import annotations

import threading

from .runtime import SIMULATOR

__all__ = ["load4", "store4", "copy4_async", "commit_copies", "wait_copies", "VECTOR_BYTES", "aligned"]

#: the alignment ``load4`` / ``store4`` require of their first element's address
VECTOR_BYTES = 16


def aligned(x) -> bool:
    """Whether ``x``'s data pointer is a multiple of :data:`VECTOR_BYTES`
    (``x``: anything with ``__cuda_array_interface__`` or ``__array_interface__``,
    e.g. a Numba device array, a CuPy array, or a simulator array)."""
    iface = getattr(x, "__cuda_array_interface__", None) or getattr(x, "__array_interface__", None)
    if iface is None:
        inner = getattr(x, "_ary", None)  # the simulator's device array
        iface = inner.__array_interface__
    return iface["data"][0] % VECTOR_BYTES == 0


if SIMULATOR:
    def _check(name, row, i, count=4, align=VECTOR_BYTES):
        """The flat NumPy view behind ``row`` after checking the promise for elements ``i`` .. ``i + count − 1``:
        in bounds, contiguous, the first one's address a multiple of ``align`` bytes."""
        ary = getattr(row, "_ary", row)  # the NumPy array behind a simulator array
        if ary.ndim != 1:
            if not ary.flags.c_contiguous:
                raise ValueError(f"{name}: a {ary.ndim}-D array must be C-contiguous for a flat index")
            ary = ary.reshape(-1)  # a view: stores reach the array
        i = int(i)
        if i < 0 or i + count > ary.shape[0]:
            raise ValueError(f"{name}: elements {i}..{i + count - 1} of an array of {ary.shape[0]}: out of bounds")
        address = ary.__array_interface__["data"][0] + i * ary.strides[0]
        if address % align:
            raise ValueError(f"{name}: address of element {i} is {address:#x}, not a multiple of "
                             f"{align} bytes (a GPU would fault)")
        if ary.strides[0] != ary.itemsize:
            raise ValueError(f"{name}: row stride {ary.strides[0]} bytes; expected contiguous ({ary.itemsize})")
        return ary

    def load4(row, i):
        flat, i = _check("load4", row, i), int(i)
        return flat[i], flat[i + 1], flat[i + 2], flat[i + 3]

    def store4(row, i, a, b, c, d):
        flat, i = _check("store4", row, i), int(i)
        flat[i] = a
        flat[i + 1] = b
        flat[i + 2] = c
        flat[i + 3] = d

    _copies = threading.local()  # this simulated thread's cp.async groups: committed ones, oldest first, then the open one

    def _groups() -> list:
        if getattr(_copies, "groups", None) is None:
            _copies.groups = [[]]
        return _copies.groups

    def defer_copy(land) -> None:
        """An asynchronous copy in the simulator: ``land()`` (its write to shared memory) joins this thread's
        open group and runs at the wait that lets it land (:func:`land_copies`), not before."""
        _groups()[-1].append(land)

    def land_copies(n: int = 0) -> None:
        """``cp.async.wait_group n``: every committed group of this thread but the ``n`` newest lands now
        (copies not yet committed do not: PTX waits for groups only)."""
        groups = _groups()
        done = max(len(groups) - 1 - int(n), 0)
        for group in groups[:done]:
            for land in group:
                land()
        del groups[:done]

    def copy4_async(dst, j, src, i):
        if getattr(src, "_ary", src).dtype.itemsize != 4:
            raise TypeError("copy4_async: 4-byte elements only (16 bytes per copy)")
        _check("copy4_async", dst, j)  # alignment and bounds at issue, as a GPU would fault there
        values = load4(src, i)
        defer_copy(lambda: store4(dst, j, *values))

    def commit_copies():
        _groups().append([])

    def wait_copies():
        land_copies(0)

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    def _vector_pointer(context, builder, aryty, ary_value, index_type, index):
        """``<4 x T>*`` to flat element ``index`` of the C-contiguous array ``ary_value``."""
        ary = context.make_array(aryty)(context, builder, ary_value)
        i = context.cast(builder, index, index_type, types.intp)
        ptr = builder.gep(ary.data, [i])
        vec = ir.VectorType(context.get_value_type(aryty.dtype), 4)
        return builder.bitcast(ptr, vec.as_pointer(ptr.type.addrspace)), vec

    def _check_types(row, i):
        # C layout: a flat index is an element offset (a strided view would need its strides)
        return isinstance(row, types.Array) and row.layout == "C" and isinstance(i, types.Integer)

    @intrinsic
    def load4(typingctx, row, i):
        if not _check_types(row, i):
            return None
        sig = types.UniTuple(row.dtype, 4)(row, i)

        def codegen(context, builder, sig, args):
            vptr, _ = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            v = builder.load(vptr, align=VECTOR_BYTES)
            values = [builder.extract_element(v, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, values)

        return sig, codegen

    @intrinsic
    def store4(typingctx, row, i, a, b, c, d):
        if not _check_types(row, i):
            return None
        sig = types.void(row, i, row.dtype, row.dtype, row.dtype, row.dtype)

        def codegen(context, builder, sig, args):
            vptr, vec = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            v = ir.Constant(vec, ir.Undefined)
            for k in range(4):
                v = builder.insert_element(v, args[2 + k], ir.Constant(ir.IntType(32), k))
            builder.store(v, vptr, align=VECTOR_BYTES)
            return context.get_dummy_value()

        return sig, codegen

    def _element_pointer(context, builder, aryty, ary_value, index_type, index):
        ary = context.make_array(aryty)(context, builder, ary_value)
        return builder.gep(ary.data, [context.cast(builder, index, index_type, types.intp)])

    @intrinsic
    def copy4_async(typingctx, dst, j, src, i):
        if not (_check_types(dst, j) and _check_types(src, i) and dst.dtype == src.dtype
                and dst.dtype.bitwidth == 32):
            return None
        sig = types.void(dst, j, src, i)

        def codegen(context, builder, sig, args):
            dptr = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            sptr = _element_pointer(context, builder, sig.args[2], args[2], sig.args[3], args[3])
            i64 = ir.IntType(64)
            fnty = ir.FunctionType(ir.VoidType(), [i64, i64])
            # the shared operand is a 32-bit shared-window address: convert the generic one
            asm = ir.InlineAsm(
                fnty,
                "{ .reg .u64 a; .reg .u32 s; cvta.to.shared.u64 a, $0; cvt.u32.u64 s, a; "
                "cp.async.cg.shared.global [s], [$1], 16; }",
                "l,l,~{memory}", side_effect=True)
            builder.call(asm, [builder.ptrtoint(dptr, i64), builder.ptrtoint(sptr, i64)])
            return context.get_dummy_value()

        return sig, codegen

    def _asm_statement(text):
        @intrinsic
        def statement(typingctx):
            def codegen(context, builder, sig, args):
                asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", side_effect=True)
                builder.call(asm, [])
                return context.get_dummy_value()

            return types.void(), codegen

        return statement

    commit_copies = _asm_statement("cp.async.commit_group;")
    wait_copies = _asm_statement("cp.async.wait_group 0;")  # every committed group has landed


# ---------------------------------------------------------------------------
# Global loads issued where they are written (added for the generated matmul rungs)
# ---------------------------------------------------------------------------
#
#     x0, x1, x2, x3 = load4_global(ary, i)   # like load4, from global memory
#     x = load1_global(ary, i)                # ary.flat[i], one scalar
#
# ``load4`` is an ordinary LLVM load, and LLVM may move an ordinary load to just
# before its first use.  A prefetch whose value is only stored to shared memory
# after a tile's arithmetic then waits at the end of that arithmetic: the
# latency it was meant to hide is exposed at every tile (seen in a probe's SASS:
# LDG.128 sunk past the last FFMA).  These two are *side-effecting inline PTX*
# (``ld.global.v4.f32`` / ``ld.global.f32``, or ``.f64``), which nothing may move.
# The caller's promises are ``load4``'s (alignment for the 4-wide one, bounds
# for both); the simulator versions check them the same way.

if SIMULATOR:
    def load4_global(ary, i):
        return load4(ary, i)

    def load1_global(ary, i):
        flat = getattr(ary, "_ary", ary).reshape(-1)
        i = int(i)
        if i < 0 or i >= flat.shape[0]:
            raise ValueError(f"load1_global: element {i} of an array of {flat.shape[0]}: out of bounds")
        return flat[i]

else:
    def _global_load_asm(context, builder, aryty, ary, index_type, index, width):
        """``width`` consecutive elements from ``ary.flat[index]`` as one inline-PTX statement."""
        ptr = _element_pointer(context, builder, aryty, ary, index_type, index)
        i64 = ir.IntType(64)
        elem = context.get_value_type(aryty.dtype)
        bits = aryty.dtype.bitwidth
        reg, cons = ("f32", "=f") if bits == 32 else ("f64", "=d")
        outs = ", ".join(f"${k}" for k in range(width))
        if width == 1:
            text = f"ld.global.{reg} $0, [$1];"
        elif bits == 32:
            text = f"ld.global.v4.f32 {{{outs}}}, [$4];"
        else:  # 4 doubles: two 16-byte loads
            text = "ld.global.v2.f64 {$0, $1}, [$4]; ld.global.v2.f64 {$2, $3}, [$4+16];"
        ret = elem if width == 1 else ir.LiteralStructType([elem] * width)
        asm = ir.InlineAsm(ir.FunctionType(ret, [i64]), text, ",".join([cons] * width + ["l"]),
                           side_effect=True)
        return builder.call(asm, [builder.ptrtoint(ptr, i64)])

    def _float_array(ary, i):
        return _check_types(ary, i) and isinstance(ary.dtype, types.Float)

    @intrinsic
    def load4_global(typingctx, ary, i):
        if not _float_array(ary, i):
            return None
        sig = types.UniTuple(ary.dtype, 4)(ary, i)

        def codegen(context, builder, sig, args):
            r = _global_load_asm(context, builder, sig.args[0], args[0], sig.args[1], args[1], 4)
            vals = [builder.extract_value(r, k) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)

        return sig, codegen

    @intrinsic
    def load1_global(typingctx, ary, i):
        if not _float_array(ary, i):
            return None
        sig = ary.dtype(ary, i)

        def codegen(context, builder, sig, args):
            return _global_load_asm(context, builder, sig.args[0], args[0], sig.args[1], args[1], 1)

        return sig, codegen

__all__ += ["load4_global", "load1_global"]


# ---------------------------------------------------------------------------
# A 128-bit load at a base index plus a constant (added for the generated matmul rungs)
# ---------------------------------------------------------------------------
#
#     x0, x1, x2, x3 = load4_at(ary, i, OFFSET)   # load4(ary, i + OFFSET), OFFSET a literal
#
# ``ary[s, kk, U(i + U(r))]`` adds in uint32 (which may wrap) and only then widens, so
# the compiler cannot split the constant off: every read gets its own IADD3 + LEA.
# Here ``i`` is widened first and the constant added in 64 bits, which cannot wrap,
# so it folds into the instruction as an immediate (SASS ``LDS.128 R, [R_base+0x...]``):
# one address register per base, reused by every k-step and stage.  (A 32-bit base goes
# through an opaque ``mov``: where LLVM can bound its value it would fold the constant back
# into a 32-bit add before widening, the very thing this avoids.)  Same promises as
# ``load4`` (16-byte aligned, in bounds), checked the same way in the simulator.

#     store_at(ary, i, OFFSET, x)                  # ary.flat[i + OFFSET] = x
#     store4_at(ary, i, OFFSET, x0, x1, x2, x3)    # store4(ary, i + OFFSET, ...)

if SIMULATOR:
    def load4_at(ary, i, offset):
        return load4(ary, int(i) + int(offset))

    def store4_at(ary, i, offset, a, b, c, d):
        store4(ary, int(i) + int(offset), a, b, c, d)

    def store_at(ary, i, offset, x):
        flat = getattr(ary, "_ary", ary).reshape(-1)
        j = int(i) + int(offset)
        if j < 0 or j >= flat.shape[0]:
            raise ValueError(f"store_at: element {j} of an array of {flat.shape[0]}: out of bounds")
        flat[j] = x

else:
    def _pointer_at(context, builder, aryty, ary, ity, i, oty, offset, width):
        """Pointer to ``ary.flat[i + offset]`` (as ``<width x T>*`` when width > 1), the
        offset added after widening so that it folds into the access as an immediate."""
        arr = context.make_array(aryty)(context, builder, ary)
        if ity.bitwidth == 32:  # hide the base's value range: else LLVM narrows the add back to
            i32 = ir.IntType(32)  # 32 bits (it can prove no wrap) and the immediate is lost again
            i = builder.call(ir.InlineAsm(ir.FunctionType(i32, [i32]), "mov.b32 $0, $1;", "=r,r"), [i])
        idx = builder.add(context.cast(builder, i, ity, types.intp),
                          context.cast(builder, offset, oty, types.intp), flags=["nsw"])
        ptr = builder.gep(arr.data, [idx], inbounds=True)
        if width == 1:
            return ptr
        vec = ir.VectorType(context.get_value_type(aryty.dtype), width)
        return builder.bitcast(ptr, vec.as_pointer(ptr.type.addrspace))

    def _at_types(ary, i, offset):
        return _check_types(ary, i) and isinstance(offset, types.Integer)

    @intrinsic
    def load4_at(typingctx, ary, i, offset):
        if not _at_types(ary, i, offset):
            return None
        sig = types.UniTuple(ary.dtype, 4)(ary, i, offset)

        def codegen(context, builder, sig, args):
            v = builder.load(_pointer_at(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                                         sig.args[2], args[2], 4), align=VECTOR_BYTES)
            values = [builder.extract_element(v, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, values)

        return sig, codegen

    @intrinsic
    def store4_at(typingctx, ary, i, offset, a, b, c, d):
        if not _at_types(ary, i, offset):
            return None
        sig = types.void(ary, i, offset, ary.dtype, ary.dtype, ary.dtype, ary.dtype)

        def codegen(context, builder, sig, args):
            ptr = _pointer_at(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                              sig.args[2], args[2], 4)
            v = ir.Constant(ptr.type.pointee, ir.Undefined)
            for k in range(4):
                v = builder.insert_element(v, args[3 + k], ir.Constant(ir.IntType(32), k))
            builder.store(v, ptr, align=VECTOR_BYTES)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def store_at(typingctx, ary, i, offset, x):
        if not _at_types(ary, i, offset):
            return None
        sig = types.void(ary, i, offset, ary.dtype)

        def codegen(context, builder, sig, args):
            ptr = _pointer_at(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                              sig.args[2], args[2], 1)
            builder.store(args[3], ptr)
            return context.get_dummy_value()

        return sig, codegen

__all__ += ["load4_at", "store4_at", "store_at"]


# ---------------------------------------------------------------------------
# L2 eviction hints (added for softmax k08: a piece read twice, the reread from the L2)
# ---------------------------------------------------------------------------
#
#     x = load1_keep(ary, i)        # ary.flat[i]; its line is evicted last (createpolicy evict_last)
#     x = load1_last(ary, i)        # ary.flat[i], its last use: evicted first (ld.global.lu)
#     store1_stream(ary, i, x)      # ary.flat[i] = x, written once: evicted first (st.global.cs)
#
# A kernel that reads data twice, a few MB apart, wants the L2 to keep that data
# rather than the lines it wrote or read for the last time; by default the L2 treats
# them all alike.  These change the eviction priority only, never a value: the
# simulator runs them as plain accesses (with load1_global's bounds check).  C-contiguous
# arrays, flat index, float32 or float64.

if SIMULATOR:
    def load1_keep(ary, i):
        return load1_global(ary, i)

    def load1_last(ary, i):
        return load1_global(ary, i)

    def store1_stream(ary, i, x):
        store_at(ary, i, 0, x)

else:
    def _hinted_load(kind):
        def template(reg):
            if kind == "keep":
                return ("{ .reg .b64 p; createpolicy.fractional.L2::evict_last.b64 p, 1.0; "
                        f"ld.global.L2::cache_hint.{reg} $0, [$1], p; }}")
            return f"ld.global.lu.{reg} $0, [$1];"

        @intrinsic
        def load(typingctx, ary, i):
            if not _float_array(ary, i):
                return None
            sig = ary.dtype(ary, i)

            def codegen(context, builder, sig, args):
                ptr = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
                i64, bits = ir.IntType(64), sig.args[0].dtype.bitwidth
                reg, cons = ("f32", "=f") if bits == 32 else ("f64", "=d")
                asm = ir.InlineAsm(ir.FunctionType(context.get_value_type(sig.args[0].dtype), [i64]),
                                   template(reg), f"{cons},l", side_effect=True)
                return builder.call(asm, [builder.ptrtoint(ptr, i64)])

            return sig, codegen

        return load

    load1_keep = _hinted_load("keep")
    load1_last = _hinted_load("last")

    @intrinsic
    def store1_stream(typingctx, ary, i, x):
        if not _float_array(ary, i):
            return None
        sig = types.void(ary, i, ary.dtype)

        def codegen(context, builder, sig, args):
            ptr = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            i64, bits = ir.IntType(64), sig.args[0].dtype.bitwidth
            reg, cons = ("f32", "f") if bits == 32 else ("f64", "d")
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [i64, context.get_value_type(sig.args[0].dtype)]),
                               f"st.global.cs.{reg} [$0], $1;", f"l,{cons},~{{memory}}", side_effect=True)
            builder.call(asm, [builder.ptrtoint(ptr, i64), args[2]])
            return context.get_dummy_value()

        return sig, codegen

__all__ += ["load1_keep", "load1_last", "store1_stream"]


# ---------------------------------------------------------------------------
# 16-bit elements, two a 32-bit word, up to eight a load (added for 16-bit softmax, issue 34)
# ---------------------------------------------------------------------------
#
#     load = load16_words(W); store = store16_words(W)     # W = 1, 2 or 4 words: 4, 8 or 16 bytes
#     load(row, i, buf)     # buf[k] = bits of row[i + 2k] | bits of row[i + 2k + 1] << 16, k < W
#     store(row, i, buf)    # row[i + 2k], row[i + 2k + 1] = the low and high halves of buf[k]
#
# ``row``: a C-contiguous array of 2-byte elements (float16, or bfloat16's uint16 bits), ``i`` a flat index
# whose address **the caller promises is a multiple of 4·W bytes**; ``buf``: a local ``uint32`` array of (at
# least) W words, indexed by constants after unrolling, so registers.  One ``ld.global.u32`` / ``.v2.u32`` /
# ``.v4.u32`` (or ``st.``) where 2W scalar 2-byte accesses were; the lower-addressed element in the low half
# (little-endian, as ``mov.b32 {lo, hi}`` and the tensor cores' pairs).  The simulator checks the promise
# (alignment, bounds, contiguity) as ``load4`` does.

if SIMULATOR:
    import numpy as _np

    def _words16(name, row, i, W):
        flat = _check(name, row, i, 2 * W, 4 * W)
        if flat.itemsize != 2:
            raise TypeError(f"{name}: 2-byte elements only; got {flat.dtype}")
        return flat, int(i)

    def load16_words(W):
        def load16(row, i, buf):
            flat, i = _words16("load16", row, i, W)
            half = flat[i:i + 2 * W].view(_np.uint16).astype(_np.uint32)
            for k in range(W):
                buf[k] = _np.uint32(half[2 * k] | (half[2 * k + 1] << _np.uint32(16)))

        return load16

    def store16_words(W):
        def store16(row, i, buf):
            flat, i = _words16("store16", row, i, W)
            words = _np.array([buf[k] for k in range(W)], _np.uint32)
            half = _np.empty(2 * W, _np.uint16)
            half[0::2], half[1::2] = words & _np.uint32(0xFFFF), words >> _np.uint32(16)
            flat[i:i + 2 * W] = half.view(flat.dtype)

        return store16

else:
    def _words16_types(row, i, buf):
        return (_check_types(row, i) and row.dtype.bitwidth == 16 and isinstance(buf, types.Array)
                and buf.dtype == types.uint32)

    def _words16_pointer(context, builder, sig, args, W):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        i32 = ir.IntType(32)
        wide = ir.VectorType(i32, W) if W > 1 else i32
        words = context.make_array(sig.args[2])(context, builder, args[2]).data
        return builder.bitcast(ptr, wide.as_pointer(ptr.type.addrspace)), words, i32

    def load16_words(W):
        @intrinsic
        def load16(typingctx, row, i, buf):
            if not _words16_types(row, i, buf):
                return None

            def codegen(context, builder, sig, args):
                wptr, words, i32 = _words16_pointer(context, builder, sig, args, W)
                v = builder.load(wptr, align=4 * W)
                for k in range(W):
                    w = builder.extract_element(v, ir.Constant(i32, k)) if W > 1 else v
                    builder.store(w, builder.gep(words, [ir.Constant(i32, k)]))
                return context.get_dummy_value()

            return types.void(row, i, buf), codegen

        return load16

    def store16_words(W):
        @intrinsic
        def store16(typingctx, row, i, buf):
            if not _words16_types(row, i, buf):
                return None

            def codegen(context, builder, sig, args):
                wptr, words, i32 = _words16_pointer(context, builder, sig, args, W)
                v = ir.Constant(ir.VectorType(i32, W), ir.Undefined) if W > 1 else None
                for k in range(W):
                    w = builder.load(builder.gep(words, [ir.Constant(i32, k)]))
                    v = builder.insert_element(v, w, ir.Constant(i32, k)) if W > 1 else w
                builder.store(v, wptr, align=4 * W)
                return context.get_dummy_value()

            return types.void(row, i, buf), codegen

        return store16

__all__ += ["load16_words", "store16_words"]
