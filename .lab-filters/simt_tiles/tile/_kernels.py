"""The cuTile kernels.  This module imports ``cuda.tile`` at its top, so only
:mod:`simt_tiles.tile` imports it, lazily, the first time a function runs.

The kernels are written for float32 data (the launchers accept nothing else):
accumulators are float32 (float64 for the sums on request).  Tile shapes are
compile-time constants (``ct.Constant``
parameters; cuTile requires each tile dimension to be a power of two) and the
launchers in :mod:`simt_tiles.tile` pick them.  Ragged edges are the loads'
job: a tile that runs past an array's end is padded (``padding_mode``), and a
store drops the elements outside the array.

matmul and correlate2d use a 1-D grid (a 2-D one could exceed the y limit,
65535) and decompose the block index (:mod:`._index`); sum_rows puts the row
tiles on x and its column split (≤ 65535) on y.
"""

from __future__ import annotations

import cuda.tile as ct

from ._index import block_of, grouped_tile

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]

NEG_INF = float("-inf")
ZERO_PAD = ct.PaddingMode.ZERO
NEG_INF_PAD = ct.PaddingMode.NEG_INF

#: correlate2d boundary modes (a compile-time constant of the kernel)
MODE_CONSTANT = 0
MODE_REFLECT = 1


# ---------------------------------------------------------------------------
# fill: out[...] = value (2-D views; used where a reduction is empty)
# ---------------------------------------------------------------------------


@ct.kernel
def fill2d(out, value, BM: ConstInt, BN: ConstInt):
    t = ct.full((BM, BN), value, dtype=out.dtype)
    ct.store(out, block_of(ct.bid(0), ct.cdiv(out.shape[1], BN)), t)


# ---------------------------------------------------------------------------
# matmul: C = A @ B, float32 in and out, float32 accumulators
# ---------------------------------------------------------------------------


@ct.kernel
def matmul(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt, GROUP_M: ConstInt, TF32: ConstBool):
    """One BM×BN tile of C per block, K walked in BK steps by ``ct.mma``.

    Block order: the 1-D grid is walked in groups of GROUP_M tile-rows, column
    by column inside a group, so that blocks running at the same time share
    A's rows and B's columns in L2.  With TF32 the operand tiles are rounded
    to tf32 (``ct.astype``: round to nearest even, 10 explicit mantissa bits)
    before the tensor-core product; the accumulator stays float32 either way.
    K's ragged last step is safe because both loads pad with zeros.
    """
    tiles_m = ct.cdiv(a.shape[0], BM)
    tiles_n = ct.cdiv(b.shape[1], BN)
    tm, tn = grouped_tile(ct.bid(0), tiles_m, tiles_n, GROUP_M)

    acc = ct.zeros((BM, BN), dtype=ct.float32)
    steps = ct.num_tiles(a, axis=1, shape=(BM, BK))
    for k in range(steps):
        ta = ct.load(a, (tm, k), (BM, BK), padding_mode=ZERO_PAD)
        tb = ct.load(b, (k, tn), (BK, BN), padding_mode=ZERO_PAD)
        if TF32:
            acc = ct.mma(ct.astype(ta, ct.tfloat32), ct.astype(tb, ct.tfloat32), acc)
        else:
            acc = ct.mma(ta, tb, acc)
    ct.store(c, (tm, tn), ct.astype(acc, c.dtype))


# ---------------------------------------------------------------------------
# correlate2d: scipy.ndimage.correlate, origin 0, modes "constant" / "reflect"
# ---------------------------------------------------------------------------


def _reflect(p, n):
    """scipy's "reflect" (d c b a | a b c d | d c b a) for an int32 index tile.

    Folds with a period of 2n, so any distance from the image works (the
    image may be smaller than the filter).  cuTile's ``%`` on integers follows
    Python (the result takes the divisor's sign; the TileIR shows the
    remi-and-adjust), so ``p % period`` is in [0, 2n) for negative p too.
    """
    period = 2 * n
    q = p % period
    return ct.where(q >= n, period - 1 - q, q)


@ct.kernel
def correlate2d(image, weights, out, cval, TH: ConstInt, TW: ConstInt, KH: ConstInt, KW: ConstInt,
                MODE: ConstInt, FAST_INTERIOR: ConstBool):
    """One TH×TW output tile per block: Σ over the KH·KW taps of w[a, b] times
    the image tile shifted by (a − KH//2, b − KW//2).

    The taps are unrolled (``ct.static_iter``); the filter is one ≤ 8×8 tile
    loaded once, each weight taken out of it with ``ct.extract``.

    * Interior blocks (their whole halo inside the image, FAST_INTERIOR) read
      each shifted tile with a plain ``ct.load`` of a sliced view of the image
      starting at the shifted corner — a rectangular, in-bounds load.
    * Border blocks gather: the shifted row and column indices are mapped by
      the boundary mode (reflect), or left outside the image so that
      ``ct.gather`` returns its ``padding_value`` there (constant: cval).
    """
    h = image.shape[0]
    w = image.shape[1]
    bi, bj = block_of(ct.bid(0), ct.cdiv(w, TW))
    r0 = bi * TH
    c0 = bj * TW
    AH = KH // 2
    AW = KW // 2
    cv = ct.astype(cval, image.dtype)

    acc = ct.zeros((TH, TW), dtype=ct.float32)

    interior = (r0 >= AH) & (r0 + TH + (KH - 1 - AH) <= h) & (c0 >= AW) & (c0 + TW + (KW - 1 - AW) <= w)
    if FAST_INTERIOR and interior:
        for a in range(KH):
            wrow = ct.load(weights, (a, 0), (1, 8), padding_mode=ZERO_PAD)
            rows = image.slice(axis=0, start=r0 + (a - AH), stop=r0 + (a - AH) + TH)
            for b in ct.static_iter(range(KW)):
                view = rows.slice(axis=1, start=c0 + (b - AW), stop=c0 + (b - AW) + TW)
                x = ct.load(view, (0, 0), (TH, TW))
                acc = acc + ct.extract(wrow, (0, b), shape=(1, 1)) * x
    else:
        rbase = r0 + ct.arange(TH, dtype=ct.int32)
        cbase = c0 + ct.arange(TW, dtype=ct.int32)
        for a in range(KH):
            wrow = ct.load(weights, (a, 0), (1, 8), padding_mode=ZERO_PAD)
            ri = rbase + (a - AH)
            if MODE == MODE_REFLECT:
                ri = _reflect(ri, h)
            for b in ct.static_iter(range(KW)):
                ci = cbase + (b - AW)
                if MODE == MODE_REFLECT:
                    ci = _reflect(ci, w)
                x = ct.gather(image, (ri[:, None], ci[None, :]), padding_value=cv)
                acc = acc + ct.extract(wrow, (0, b), shape=(1, 1)) * x
    ct.store(out, (bi, bj), ct.astype(acc, out.dtype))


# ---------------------------------------------------------------------------
# softmax along the last axis
# ---------------------------------------------------------------------------


@ct.kernel
def softmax_tile(x, y, BM: ConstInt, BN: ConstInt):
    """BM whole rows per block (BN ≥ the row length): max, exp, sum, divide.

    Padding is −inf, whose exp is 0, so the padded columns add nothing.  A row
    whose maximum is −inf (all −inf) subtracts 0 instead and gives 0/0 = NaN,
    as scipy does.
    """
    i = ct.bid(0)
    t = ct.load(x, (i, 0), (BM, BN), padding_mode=NEG_INF_PAD)
    m = ct.max(t, axis=1, keepdims=True, propagate_nan=True)
    m = ct.where(m == NEG_INF, 0.0, m)
    e = ct.exp(t - m)
    s = ct.sum(e, axis=1, keepdims=True)
    ct.store(y, (i, 0), e / s)


@ct.kernel
def softmax_online(x, y, BM: ConstInt, BN: ConstInt):
    """Rows longer than one tile: pass 1 keeps a running (max, sum) per row
    over the BN-column tiles, rescaling the sum when the max grows; pass 2
    reads the row again and writes exp(x − max) / sum.
    """
    i = ct.bid(0)
    steps = ct.num_tiles(x, axis=1, shape=(BM, BN))
    m = ct.full((BM, 1), NEG_INF, dtype=ct.float32)
    s = ct.zeros((BM, 1), dtype=ct.float32)
    for j in range(steps):
        t = ct.load(x, (i, j), (BM, BN), padding_mode=NEG_INF_PAD)
        m_new = ct.maximum(m, ct.max(t, axis=1, keepdims=True, propagate_nan=True), propagate_nan=True)
        # −inf so far: subtract 0 (exp(−inf − 0) = 0) rather than −inf (NaN)
        shift = ct.where(m_new == NEG_INF, 0.0, m_new)
        s = s * ct.exp(m - shift) + ct.sum(ct.exp(t - shift), axis=1, keepdims=True)
        m = m_new
    shift = ct.where(m == NEG_INF, 0.0, m)
    for j in range(steps):
        t = ct.load(x, (i, j), (BM, BN), padding_mode=NEG_INF_PAD)
        ct.store(y, (i, j), ct.exp(t - shift) / s)


# ---------------------------------------------------------------------------
# sum over the last axis of a 2-D array
# ---------------------------------------------------------------------------


@ct.kernel
def sum_rows(x, out, BM: ConstInt, BN: ConstInt, ACC64: ConstBool):
    """Block (i, s) of an (row tiles × S) grid sums rows [i·BM, i·BM + BM) over
    the column tiles s, s + S, s + 2S, ... and writes out[rows, s] (out is
    M × S).  S = 1 gives the row sums; S > 1 gives partial sums that a second
    launch (S = 1, on the partials) folds.  Accumulates in float64 (ACC64) or
    in float32; zero padding adds nothing.
    """
    i = ct.bid(0)
    part = ct.bid(1)
    split = ct.num_blocks(1)
    steps = ct.num_tiles(x, axis=1, shape=(BM, BN))
    if ACC64:
        acc = ct.zeros((BM, BN), dtype=ct.float64)
        for j in range(part, steps, split):
            acc = acc + ct.astype(ct.load(x, (i, j), (BM, BN), padding_mode=ZERO_PAD), ct.float64)
        total = ct.sum(acc, axis=1, keepdims=True)
    else:
        acc = ct.zeros((BM, BN), dtype=ct.float32)
        for j in range(part, steps, split):
            acc = acc + ct.astype(ct.load(x, (i, j), (BM, BN), padding_mode=ZERO_PAD), ct.float32)
        total = ct.sum(acc, axis=1, keepdims=True)
    ct.store(out, (i, part), ct.astype(total, out.dtype))
