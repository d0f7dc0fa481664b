"""Device code the conv2d rungs share: the boundary mapping (``make_extend``, k01 and
the patch loaders), k05's patch loader (k05–k09), its staged tile store (k05, k06),
its register-window accumulator and k07's vector output store (k05, k07–k09), and
k08's vector numbering (k08, k09), and the staged filter and the patch's NaN/inf scan (k10,
k11).  (k02's own patch loader, which k03 and k04 reuse,
lives in ``k02_halo_tiled.py``.)

Each ``make_…`` function returns a ``cuda.jit(device=True, inline="always")``
function closing over the config's constants.  ``inline="always"`` makes Numba
inline the call *before* typing (the callee is never compiled on its own), so
``cuda.compile_ptx`` needs no driver and the GPU-free compile gate keeps
working — unlike a plain device function or ``register_jitable``, whose
compilation picks the target through the driver (docs/design.md).  The PTX is
the same as with the statements written out in the kernel.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, int64, uint32, uint64

from ...vector import store4

from ...runtime import cdiv
from ._common import TINY_WEIGHT, Mode

#: Numba inlines these at the call site, before typing: no device function is compiled
inline = cuda.jit(device=True, inline="always")


def make_extend(mode):
    """``extend(p, n)``: the image index coordinate ``p`` of the extended line reads
    (line length ``n``); −1: ``cval``.  The same statements as
    :func:`._common.extend_index`; ``mode`` is compiled in, so the other modes'
    branches are removed."""
    MODE = int(mode)
    REFLECT, NEAREST, MIRROR, WRAP = (int(m) for m in (Mode.REFLECT, Mode.NEAREST, Mode.MIRROR, Mode.WRAP))

    @inline
    def extend(p, n):
        if p < 0 or p >= n:
            if MODE == REFLECT:  # d c b a | a b c d | d c b a: fold with period 2n
                p = p % (2 * n)
                if p >= n:
                    p = 2 * n - 1 - p
            elif MODE == MIRROR:  # d c b | a b c d | c b a: fold with period 2n - 2
                if n == 1:
                    p = 0
                else:
                    p = p % (2 * n - 2)
                    if p >= n:
                        p = 2 * n - 2 - p
            elif MODE == NEAREST:  # a a a | a b c d | d d d
                p = 0 if p < 0 else n - 1
            elif MODE == WRAP:  # a b c d | a b c d | a b c d
                p = p % n
            else:  # CONSTANT: outside reads cval
                p = -1
        return p

    return extend


def make_patch_loader(config, sw=None, skew=(0, 1)):
    """``load_patch(image, patch, cval, top, left, tx, ty)``: copy the
    ``SH × SW`` patch whose element (0, 0) is coordinate (``top``, ``left``)
    of the extended image into the shared array ``patch``, with the boundary
    mode applied (k05's loader, also k06's and k07's).  ``tx``, ``ty``: uint32.  No barrier.
    ``SW`` is the tile width plus the halo (``sw``: wider, k07's aligned halo).
    ``skew`` ``(V, P)``: patch column c is stored at ``c + V·(c // P)`` (k11's padded rows; V = 0: at c).

    Thread (tx, ty) copies columns tx + j·BX of rows ty + k·BY.  ``(j + 1) * BX
    <= SW or ...``: the first test is a compile-time constant, true for every j
    but the last, so only the last column group (and row group) checks its bound.
    """
    BX, BY = config.block_x, config.block_y
    TH, TW = config.tile()
    SH, SW = TH + config.kh - 1, TW + config.kw - 1 if sw is None else sw  # output tile plus halo
    LOAD_COLS = cdiv(SW, BX)  # patch columns each thread copies (the same in every row)
    LOAD_ROWS = cdiv(SH, BY)
    MODE = int(config.mode)
    CONSTANT = int(Mode.CONSTANT)
    extend = make_extend(config.mode)
    column = make_skewed_column(BX, *skew)

    @inline
    def load_patch(image, patch, cval, top, left, tx, ty):
        h, w = image.shape
        if top >= 0 and top + SH <= h and left >= 0 and left + SW <= w:
            # Interior block (almost all of a large image): no boundary mapping.  Unsigned
            # 64-bit indices: no negative-index checks, and element j of a row is the
            # row's first address plus the constant j*BX*itemsize.
            first = uint64(left) + uint64(tx)
            for k in range(LOAD_ROWS):
                r = ty + uint32(k * BY)
                if (k + 1) * BY <= SH or r < SH:
                    src = image[uint64(top) + uint64(r)]
                    for j in range(LOAD_COLS):
                        c = tx + uint32(j * BX)
                        if (j + 1) * BX <= SW or c < SW:
                            patch[r, column(c, j)] = src[first + uint64(j * BX)]
        else:
            # Edge block: columns mapped once per thread (the same in every row, kept in
            # registers), each row once; constant mode marks "outside" with -1.
            src_col = cuda.local.array(LOAD_COLS, int64)  # registers (unrolled j)
            for j in range(LOAD_COLS):
                src_col[j] = extend(left + int(tx) + j * BX, w)
            for k in range(LOAD_ROWS):
                r = ty + uint32(k * BY)
                if (k + 1) * BY <= SH or r < SH:
                    gr = extend(top + int(r), h)
                    src = image[uint64(max(gr, 0))]
                    for j in range(LOAD_COLS):
                        c = tx + uint32(j * BX)
                        if (j + 1) * BX <= SW or c < SW:
                            gc = src_col[j]
                            if MODE == CONSTANT:
                                patch[r, column(c, j)] = cval if gr < 0 or gc < 0 else src[uint64(gc)]
                            else:
                                patch[r, column(c, j)] = src[uint64(gc)]

    return load_patch


def make_skewed_column(bx: int, v: int, p: int):
    """``column(c, j)``: where patch column ``c`` = tx + j·``bx`` (tx < bx; ``j`` a constant once unrolled) is
    stored in a row padded by ``v`` values after every ``p`` (k11's ``Config.skew``: lanes' windows on distinct
    banks); ``v`` 0: ``c`` itself.  Where ``bx`` divides ``p``, tx never crosses a period: the pad is a constant
    per j, in unsigned arithmetic: a signed floor division (Python's, with its sign fix-ups) stopped LLVM from
    unrolling k11's copy loop — 25 instructions a value where 3 do (session 41)."""
    V, P, BX = v, p, bx

    @inline
    def column(c, j):
        if V == 0:
            return c
        if P % BX == 0:
            return c + uint32(V) * (uint32(j) // uint32(P // BX))
        return c + uint32(V) * (c // uint32(P))

    return column


def make_tile_store(config):
    """``store_tile(out, patch, acc, row0, col0, tx, ty, h, w)``: write a thread's
    ``RY × RX`` accumulators ``acc`` (output rows ty·RY …, columns tx·RX …) to
    the shared array ``patch`` (its first TH × TW elements: every thread must
    have finished reading it), barrier, then store the block's TH × TW tile at
    (``row0``, ``col0``) of ``out`` row by row, consecutive lanes on consecutive
    columns (coalesced).  ``tx``, ``ty``: uint32; ``h``, ``w``: the shape of ``out``."""
    BX, BY, RX, RY = config.block_x, config.block_y, config.rx, config.ry
    TW = config.tile()[1]
    STORE_COLS = cdiv(TW, BX)

    @inline
    def store_tile(out, patch, acc, row0, col0, tx, ty, h, w):
        r0 = ty * uint32(RY)  # this thread's first output row / column within the tile
        c0 = tx * uint32(RX)
        for oy in range(RY):
            for i in range(RX):
                patch[r0 + uint32(oy), c0 + uint32(i)] = acc[oy * RX + i]
        cuda.syncthreads()  # RAW: the results are complete before they are stored
        first = uint64(col0) + uint64(tx)
        full = col0 + TW <= w  # block-uniform: only the last block column checks columns
        for k in range(RY):
            r = ty + uint32(k * BY)
            row = row0 + int(r)
            if row < h:
                dst = out[uint64(row)]
                for j in range(STORE_COLS):
                    c = tx + uint32(j * BX)
                    if ((j + 1) * BX <= TW or c < TW) and (full or col0 + int(c) < w):
                        dst[first + uint64(j * BX)] = patch[r, c]

    return store_tile


def make_output_store(config):
    """``store_outputs(out, patch, acc, row0, col0, tx, ty, h, w, vector)``: k07's (and
    k08's) store of a thread's ``RY × RX`` accumulators.  With ``vector`` (the arrays'
    rows 16-byte aligned) and the whole tile inside ``out``: one 128-bit store per 4
    consecutive outputs, straight from registers — a warp writes 512 contiguous bytes.
    Otherwise k05's: barrier (every thread has read ``patch``), stage, store rows.
    ``vector`` and the tile test are block-uniform, so the barriers are too."""
    RX, RY = config.rx, config.ry
    TH, TW = config.tile()
    store_tile = make_tile_store(config)

    @inline
    def store_outputs(out, patch, acc, row0, col0, tx, ty, h, w, vector):
        r0 = ty * uint32(RY)
        c0 = tx * uint32(RX)
        if vector and row0 + TH <= h and col0 + TW <= w:
            for oy in range(RY):
                dst = out[uint64(row0) + uint64(r0 + uint32(oy))]
                for g in range(RX // 4):
                    o = oy * RX + g * 4
                    store4(dst, uint64(col0) + uint64(c0 + uint32(g * 4)),
                           acc[o], acc[o + 1], acc[o + 2], acc[o + 3])
        else:
            cuda.syncthreads()  # WAR: every thread has read the patch before it is overwritten
            store_tile(out, patch, acc, row0, col0, tx, ty, h, w)

    return store_outputs


def make_window_accumulator(config, shift=0, win=None, all_taps=False):
    """``accumulate(patch, w_c, acc, win, r0, c0)``: k05's inner loop (also k07's).

    The thread's ``RY × RX`` outputs start at tile row ``r0``, column ``c0``
    (uint32); output row oy reads patch rows r0 + oy … r0 + oy + KH − 1.  The
    thread walks its RY + KH − 1 patch rows once: patch row p is loaded into the
    register window ``win`` (``WIN`` values from column ``c0``: ``win``, default
    ``shift + RX + KW − 1``, the values the outputs need) and added, with
    every filter row a = p − oy that applies, to the accumulators of output row
    oy.  Window value ``shift + i + b`` meets filter column b for output column
    i (k07's patch starts ``shift`` columns left of k05's).  ``w_c``: the filter
    (a constant array: each weight's address is a constant, folded into its FMA).
    Taps with ``|w| <= 2**-52`` are skipped unless ``all_taps`` (scipy's rule,
    ``_common.TINY_WEIGHT``): the test folds with the weight, so they emit no code.
    """
    RX, RY, KH, KW = config.rx, config.ry, config.kh, config.kw
    ROWS = RY + KH - 1  # patch rows one thread reads
    WIN = shift + RX + KW - 1 if win is None else win
    SHIFT = shift
    ALL_TAPS = bool(all_taps)
    TINY = np.float32(TINY_WEIGHT)  # 2**-52 is exact in float32: one constant for both dtypes

    @inline
    def patch_row(patch, w_c, acc, win, r0, c0, p):
        # p is a constant at every call below: after inlining and unrolling, every
        # accumulator index and weight address is a constant
        for q in range(WIN):
            win[q] = patch[r0 + uint32(p), c0 + uint32(q)]
        for oy in range(RY):
            a = p - oy
            if a >= 0 and a < KH:
                for b in range(KW):
                    wv = w_c[a, b]
                    if ALL_TAPS or abs(wv) > TINY:
                        for i in range(RX):
                            acc[oy * RX + i] += wv * win[SHIFT + i + b]

    @inline
    def accumulate(patch, w_c, acc, win, r0, c0):
        # Hand-unrolled (Numba has no "#pragma unroll"; see k04): conditions on
        # compile-time constants, the untaken calls are removed.  NVVM stops unrolling
        # long before RY·RX·KH·KW multiply-adds, so the first UNROLLED_ROWS rows are
        # written out; longer filters run the rest in a loop (weights loaded, not folded).
        if ROWS > 0:
            patch_row(patch, w_c, acc, win, r0, c0, 0)
        if ROWS > 1:
            patch_row(patch, w_c, acc, win, r0, c0, 1)
        if ROWS > 2:
            patch_row(patch, w_c, acc, win, r0, c0, 2)
        if ROWS > 3:
            patch_row(patch, w_c, acc, win, r0, c0, 3)
        if ROWS > 4:
            patch_row(patch, w_c, acc, win, r0, c0, 4)
        if ROWS > 5:
            patch_row(patch, w_c, acc, win, r0, c0, 5)
        if ROWS > 6:
            patch_row(patch, w_c, acc, win, r0, c0, 6)
        if ROWS > 7:
            patch_row(patch, w_c, acc, win, r0, c0, 7)
        if ROWS > 8:
            patch_row(patch, w_c, acc, win, r0, c0, 8)
        if ROWS > 9:
            patch_row(patch, w_c, acc, win, r0, c0, 9)
        if ROWS > 10:
            patch_row(patch, w_c, acc, win, r0, c0, 10)
        if ROWS > 11:
            patch_row(patch, w_c, acc, win, r0, c0, 11)
        for p in range(UNROLLED_ROWS, ROWS):
            patch_row(patch, w_c, acc, win, r0, c0, p)

    return accumulate


#: patch rows :func:`make_window_accumulator` unrolls by hand (its ``if ROWS > p``
#: lines); rows beyond run in a loop whose weights are constant-memory loads.  Each
#: line is an inlined copy of the row's code: more lines, longer compiles
UNROLLED_ROWS = 12


def make_vector_slots(threads: int, nvec: int, vrow: int, vec: int):
    """``slot(t, k) -> (live, row, column)``: thread ``t``'s ``k``-th 4-element vector of a patch of
    ``nvec`` vectors, ``vrow`` to a row, numbered across the block so that consecutive threads take
    consecutive vectors (coalesced) and a thread's ``k``-th vector exists for every ``k`` but the
    last (``live`` folds to True for those once the caller's ``range`` is unrolled: only real
    vectors cost registers or copies).  k08's prefetch and k09's async copy walk the patch with it."""

    @inline
    def slot(t, k):
        v = uint32(t + uint32(k * threads))
        live = (k + 1) * threads <= nvec or v < nvec
        r = uint32(v // uint32(vrow))
        c = uint32(v - r * uint32(vrow)) * uint32(vec)
        return live, r, c

    return slot



def make_patch_scan(threads: int, sh: int, sw: int, dtype, skew=(0, 1)):
    """``patch_not_finite(patch, t) -> 0/1``: whether thread ``t``'s share of the ``sh × sw`` patch (values
    ``t, t + threads, …``) holds a NaN or an inf — the block ORs the answers to learn whether skipping a zero
    tap could change an output (k10, k11).  ``skew``: the patch's row padding (:func:`make_skewed_column`)."""
    NS = sh * sw
    NSCAN, T, SW = cdiv(NS, threads), threads, sw
    INF = np.dtype(dtype).type(np.inf)
    V, P = skew

    @inline
    def patch_not_finite(patch, t):
        bad = 0
        for k in range(NSCAN):
            v = t + uint32(k * T)
            if (k + 1) * T <= NS or v < NS:
                r = v // uint32(SW)
                c = v - r * uint32(SW)
                if V != 0:
                    c += uint32(V) * (c // uint32(P))
                if not abs(patch[r, c]) < INF:
                    bad = 1
        return bad

    return patch_not_finite


def make_weight_stager(threads: int, kh: int, kw: int, kwp: int, all_taps: bool, dtype):
    """``stage_weights(weights, w_s, t) -> 0/1``: thread ``t`` copies taps ``t, t + threads, …`` of the
    ``kh × kw`` filter into the shared ``w_s`` (``kh × kwp``: rows padded with zeros past ``kw``), a tap
    with |w| ≤ 2⁻⁵² (NaN too, as scipy) as exactly 0 unless ``all_taps``; 1 if it did so (k10, k11)."""
    T, KW, KWP, KK = threads, kw, kwp, kh * kwp
    NSTAGE, PADDED, ALL_TAPS = cdiv(KK, threads), kwp != kw, bool(all_taps)
    DT = np.dtype(dtype).type
    TINY = np.float32(TINY_WEIGHT)  # exact in float32 too

    @inline
    def stage_weights(weights, w_s, t):
        tiny = 0
        for k in range(NSTAGE):
            i = t + uint32(k * T)
            if (k + 1) * T <= KK or i < KK:
                a = i // uint32(KWP)
                b = i - a * uint32(KWP)
                v = DT(0)
                if not PADDED or b < uint32(KW):
                    v = weights[a, b]
                    if not ALL_TAPS and not abs(v) > TINY:  # a tap to skip
                        v = DT(0)  # adds exactly nothing to finite values
                        tiny = 1
                w_s[a, b] = v
        return tiny

    return stage_weights
