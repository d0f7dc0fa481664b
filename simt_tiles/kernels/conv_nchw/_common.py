"""What every conv_nchw rung shares: the kernel signature, the output shape,
the tiled rungs' configuration and padded shared-memory layouts, and how a
config is specialised for one call.

The operation (``torch.nn.functional.conv2d`` with stride 1, zero padding p)::

    out[n, o, i, j] = bias[o] + Σ_c Σ_a Σ_b  w[o, c, a, b] · xp[n, c, i + a, j + b]

where ``xp`` is ``x`` with p zero rows/columns on each side.  Output rows
``OH = H + 2p − KH + 1``, columns ``OW = W + 2p − KW + 1``.  It is a matrix
product in disguise ("implicit GEMM"): M = N·OH·OW output pixels, N = C_out
output channels, and a reduction of K = C_in·KH·KW terms; every input value
is used by KH·KW pixels and by every output channel.

Kernel arguments (one signature for every rung)
    Flat (1-D) views of the C-contiguous ``x`` (N, C_in, H, W), ``w`` (C_out,
    C_in, KH, KW), ``bias`` (C_out,) — any 1-D array when the call has none:
    ``has_bias`` = 0 and it is never read — and ``out`` (N, C_out, OH, OW);
    then N, C_in, H, W, C_out, OH, OW, the padding, the filter shape (read by
    k01; k02/k03 have it compiled in) and ``has_bias``.  For output channel
    o, the reduction index ``k = (c·KH + a)·KW + b`` runs over one contiguous
    row of ``w``: ``w[o·K + k]`` with K = C_in·KH·KW.

32-bit offsets
    The kernels compute flat offsets in unsigned 32-bit arithmetic: no 64-bit
    multiplies or divisions, no negative-index checks (Numba adds one to every
    signed index).  Coordinates stay non-negative — a row of the *padded*
    input is compared with the padding before it is subtracted — since the
    simulator computes with NumPy uint32 scalars, which warn on wrap-around.
    The launcher refuses arrays of 2**31 elements or more
    (:data:`MAX_ELEMENTS`): the tiled rungs mark a zero-padding position by
    an offset ≥ 2**31, which the one test "offset < end of the image" rejects.

Compile-time constants of the tiled rungs (k02, k03)
    The filter shape ``kh × kw``: the shared-array shapes and the unrolled
    register loops need it.  The launcher replaces a config's ``kh``/``kw``
    with the call's (:func:`specialise`); a preset's values are what the
    compile gate builds.  The padding stays a run-time argument (it only
    shifts the halo's load coordinates).

No device functions (they would blind the GPU-free compile gate, see
docs/design.md): k03 writes its kernel out in full in its own file, k02's is in
``_tiled.py``; k01 writes its window loop out itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
from numba import int64, void

from ...runtime import TileConfig, cdiv, numba_dtype

#: the largest array (in elements) the kernels index: offsets are unsigned 32-bit
#: and a zero-padding position of the halo is marked by an offset of 2**31 or more
MAX_ELEMENTS = 2**31 - 1

#: weights are staged in groups of this many consecutive reduction indices of one
#: output channel (16 bytes of float32 from global memory); see :func:`padded_co`
W_GROUP = 4


def signature(dtype):
    """``void(x, w, bias, out, n, c_in, h, w, c_out, oh, ow, padding, kh, kw, has_bias)``.

    The arrays are flat (1-D, C-contiguous) views, the dimensions separate
    int64 arguments: the kernels compute every offset themselves, in 32-bit
    unsigned arithmetic (see the module docstring)."""
    t = numba_dtype(dtype)
    return void(t[::1], t[::1], t[::1], t[::1], *([int64] * 11))


def output_hw(h: int, w: int, kh: int, kw: int, padding: int) -> tuple[int, int]:
    """(OH, OW) = (H + 2p − KH + 1, W + 2p − KW + 1); may be < 1 (the caller rejects that)."""
    return h + 2 * padding - kh + 1, w + 2 * padding - kw + 1


def flops(n: int, c_in: int, c_out: int, oh: int, ow: int, kh: int, kw: int) -> int:
    """Floating-point operations of one layer (a multiply and an add per tap; bias not counted)."""
    return 2 * n * c_out * oh * ow * c_in * kh * kw


def padded_row(sw: int) -> int:
    """Row length of a staged input tile: the smallest ≥ ``sw`` with ``% 8 == 4``.

    A thread's pixels lie in one tile row; lanes ``l`` of a warp take rows
    ``l % TH`` (consecutive lanes → consecutive rows).  With a row stride of
    4·odd words, 8 consecutive rows start in 8 different 4-bank groups: the
    window reads are conflict-free (scalar reads with two column groups per
    warp; 128-bit reads of 8 lanes per phase when the pixel run is a
    multiple of 4) and rows stay 16-byte aligned."""
    return sw + (4 - sw) % 8


def padded_co(co: int) -> int:
    """Row length of the staged weights (one row per reduction index, output
    channels along it): the smallest ≥ ``co`` with ``% 16 == 8``.

    Staging writes W_GROUP = 4 consecutive reduction indices × 8 output
    channels per warp: rows 8 words apart mod 32 put those 32 stores in 32
    banks.  The rows stay 16-byte aligned, so a thread's RCO channels are
    read with 128-bit loads — the same address for the whole warp (a broadcast)."""
    return co + (8 - co) % 16


@dataclasses.dataclass(frozen=True)
class TiledConfig(TileConfig):
    """A block computes a ``tile_h × tile_w`` tile of output pixels for ``co``
    output channels of one image, walking the input channels ``ck`` at a time.

    Each thread owns ``rco`` output channels × ``rp`` consecutive pixels of one
    tile row: ``rco·rp`` accumulators in registers.  Threads per block:
    ``(co / rco) · (tile_h · tile_w / rp)``.  ``kh``/``kw`` (the filter shape
    compiled in) are set by the launcher from the call.  ``min_blocks`` is the
    second launch bound for float32 (blocks per SM that ptxas must leave room
    for; float64 halves it)."""

    tile_h: int = 8
    tile_w: int = 14
    co: int = 64
    ck: int = 4
    rco: int = 8
    rp: int = 7
    kh: int = 3
    kw: int = 3
    min_blocks: int = 4

    #: shared-memory stages (k03 doubles)
    STAGES = 1

    @property
    def pixel_groups(self) -> int:
        """Runs of ``rp`` pixels in the tile (threads per output-channel group)."""
        return self.tile_h * self.tile_w // self.rp

    def block(self):
        return ((self.co // self.rco) * self.pixel_groups,)

    # --- shared-memory layout -------------------------------------------------
    def halo(self) -> tuple[int, int]:
        """(SH, SW): the input patch one output tile reads, per channel."""
        return self.tile_h + self.kh - 1, self.tile_w + self.kw - 1

    def x_shape(self) -> tuple[int, int, int]:
        """Staged inputs per stage: ck patches of SH rows, padded row length."""
        sh, sw = self.halo()
        return (self.ck, sh, padded_row(sw))

    def w_shape(self) -> tuple[int, int]:
        """Staged weights per stage: one row per reduction index, output channels along it."""
        return (self.ck * self.kh * self.kw, padded_co(self.co))

    def smem_bytes(self, itemsize):
        x = int(np.prod(self.x_shape()))
        w = int(np.prod(self.w_shape()))
        return self.STAGES * (x + w) * itemsize

    # --- what each thread loads per channel step --------------------------------
    @property
    def x_loads(self) -> int:
        """Input-patch elements each thread stages per channel step (at most)."""
        sh, sw = self.halo()
        return cdiv(self.ck * sh * sw, self.threads)

    @property
    def w_loads(self) -> int:
        """Weight elements each thread stages per channel step (at most)."""
        return weight_staging(self).passes

    def rules(self):
        yield ("rp", self.tile_w % self.rp == 0, "tile_w % rp == 0 (a thread's pixels lie in one tile row)")
        yield ("rco", self.co % self.rco == 0, "co % rco == 0 (threads split the block's output channels)")


@dataclasses.dataclass(frozen=True)
class WeightStaging:
    """How the threads of a block copy the step's weights ``w[co0 + o, c0·KH·KW + k]``
    (o < CO, k < R = CK·KH·KW) into ``w_s[k·COP + o]``, in passes.

    Threads are laid out as ``group`` consecutive k (16 bytes of float32 from
    one row of ``w``) × consecutive output channels, so a warp reads 8 rows
    in 16-byte pieces and its transposed stores hit 32 banks (``padded_co``).
    The layout is chosen so that a thread's (k, o) in pass p is its pass-0
    (k, o) plus *constants* — ``(p // per_row)·step_k`` and ``(p % per_row)·step_o``
    — so the kernels compute the expensive part of the offsets once, before
    the channel loop.  Only the first ``threads`` threads take part (the rest
    of the block idles while the weights are copied, at most a quarter of it
    in the presets).

    group
        consecutive k per thread group (4, or 1 when the block size is not a multiple of 4)
    threads
        threads that copy: a multiple of ``group·CO`` or a divisor of it
    per_row
        passes that cover the CO output channels of one group of k
    step_k, step_o
        what one pass adds to k (every ``per_row`` passes) and to o
    passes
        passes per channel step
    """

    group: int
    threads: int
    per_row: int
    step_k: int
    step_o: int
    passes: int


def weight_staging(config: "TiledConfig") -> WeightStaging:
    """The :class:`WeightStaging` plan of a tiled config."""
    t = config.threads
    g = W_GROUP if t % W_GROUP == 0 else 1
    row = g * config.co  # one group of k for every output channel
    k_groups = cdiv(config.ck * config.kh * config.kw, g)
    if t >= row:  # several groups of k per pass
        wt = (t // row) * row
        rows = wt // row
        return WeightStaging(g, wt, 1, rows * g, 0, cdiv(k_groups, rows))
    wt = max(d for d in range(g, t + 1, g) if row % d == 0)  # part of a row per pass
    per_row = row // wt
    return WeightStaging(g, wt, per_row, g, wt // g, per_row * k_groups)


def tiled_launch_bounds(config: TiledConfig, dtype) -> dict:
    """``launch_bounds=(threads, blocks)``: ``min_blocks`` for float32, half of it
    (at least 1) for float64, whose accumulators take two registers each."""
    blocks = config.min_blocks if np.dtype(dtype).itemsize == 4 else max(1, config.min_blocks // 2)
    return {"launch_bounds": (config.threads, blocks)}


def tiled_geometry(config: TiledConfig, n: int, c_out: int, oh: int, ow: int):
    """A 1-D grid: block ``b`` → output-channel group ``b % co_groups`` (fastest:
    consecutive blocks read the same input patch), then the pixel tile, then the
    image.  (1-D, so that no grid dimension limit of 65535 applies.)"""
    blocks = cdiv(c_out, config.co) * cdiv(oh, config.tile_h) * cdiv(ow, config.tile_w) * n
    return (blocks,), config.block()


def specialise(config, kh: int, kw: int):
    """``config`` with its filter shape set for one call (re-validated: a filter
    whose staging does not fit in shared memory raises ConfigError).  Configs
    without ``kh``/``kw`` (k01) are returned as they are."""
    names = {f.name for f in dataclasses.fields(config)}
    if "kh" not in names:
        return config
    return dataclasses.replace(config, kh=kh, kw=kw)


class Call(NamedTuple):
    """One layer on device arrays, as a rung's ``run(config, call)`` takes it: x (N, C_in, H, W),
    w (C_out, C_in/groups, KH, KW), bias (C_out,) or None, out (N, C_out, OH, OW).  ``padding`` is
    the tiled rungs' (the same on every side); k01 reads ``pad_w`` (None: ``padding``), ``stride``,
    ``dilation`` and ``groups`` too (``_params.py``)."""

    x: Any
    w: Any
    bias: Any
    out: Any
    padding: int
    stream: Any = 0
    pad_w: int | None = None
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    groups: int = 1

    @property
    def dtype(self):
        return self.x.dtype

    @property
    def problem(self) -> tuple[int, int, int, int]:
        """``(n, c_out, oh, ow)``: what the rungs' ``geometry`` takes."""
        return tuple(self.out.shape)

    def _flat(self):
        w_flat = self.w.reshape(self.w.size)
        b_flat = w_flat if self.bias is None else self.bias  # never read without a bias
        return self.x.reshape(self.x.size), w_flat, b_flat, self.out.reshape(self.out.size)

    @property
    def args(self) -> tuple:
        """The tiled kernels' arguments: the arrays flat, then the sizes (:func:`signature`)."""
        n, c_in, h, w = self.x.shape
        c_out, _, kh, kw = self.w.shape
        oh, ow = self.out.shape[2:]
        return (*self._flat(), n, c_in, h, w, c_out, oh, ow, self.padding, kh, kw, int(self.bias is not None))

    @property
    def direct_args(self) -> tuple:
        """k01's arguments (``k01_direct.signature``): torch's parameters at run time."""
        n, c_in, h, w = self.x.shape
        c_out, _, kh, kw = self.w.shape
        oh, ow = self.out.shape[2:]
        pad_w = self.padding if self.pad_w is None else self.pad_w
        return (*self._flat(), n, c_in, h, w, c_out, oh, ow, self.padding, pad_w, kh, kw, *self.stride,
                *self.dilation, self.groups, int(self.bias is not None))
