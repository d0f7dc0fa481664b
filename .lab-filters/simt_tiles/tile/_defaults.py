"""Default tile sizes for the H200 (sm_90), and the rules every tile size obeys.

The values were chosen by construction (checked to compile for sm_90 without
spills: ``python -m simt_tiles.tile._aot``) and have been measured once, not
tuned (H200, 2026-11-29, benchmarks/results/): matmul 4096³ TF32 224 TFLOP/s
(cuBLAS TF32 358), FP32 5.5 (cuBLAS FP32 49); sum of 2^28 4.20 TB/s (99% of
the device copy); softmax 1.25–1.80 TB/s (29–42%); correlate2d 8192² 0.26–1.48
TB/s.  Every tile dimension is a power of two (cuTile's rule).
"""

from __future__ import annotations

#: (BM, BN, BK, GROUP_M) per precision, from the sm_90 cubins tileiras 13.4
#: builds (``cuobjdump --dump-resource-usage`` / ``--dump-sass``):
#: * tf32: 128×128×32 compiles to Hopper wgmma (HGMMA), 234 registers, no
#:   spills, 157 KB shared memory; 128×256 and 256×128 spill.
#: * fp32: ``ct.mma`` on float32 tiles is lowered to FMUL + FADD (no tensor
#:   cores, not even FFMA); 64×64×16 is the largest tile without spills
#:   (64×64×32 spills 688 bytes of stack, 128×64×16 424).
MATMUL_TILES = {
    "tf32": (128, 128, 32, 8),
    "fp32": (64, 64, 16, 8),
}

#: (TH, TW) output tile of correlate2d: 32 rows × 64 columns per block
#: (spill-free on sm_90 for every filter up to 7×7, both modes; 64×64 spills at 7×7)
CORRELATE_TILE = (32, 64)
#: the largest filter side: the filter is read as one 8×8 tile and the taps
#: are unrolled; a radius ≤ 3 also keeps "reflect" clear of scipy's n-D
#: folding quirk (see simt_tiles.kernels.conv2d), which needs radius ≥ 4n
MAX_FILTER = 7

#: rows up to this many columns (power of two) are done in one tile per block
SOFTMAX_SINGLE_PASS_MAX = 8192
#: elements per block for the single-tile softmax (rows × padded columns)
SOFTMAX_TILE_ELEMS = 8192
#: the online (two-pass) softmax for longer rows: BM rows, BN-column tiles
SOFTMAX_ONLINE_ROWS = 1
SOFTMAX_ONLINE_COLS = 4096

#: (BM, BN) tile of the row-sum kernel; BM shrinks to 1 for a single row
SUM_TILE = (4, 1024)
#: the row-sum grid splits columns across blocks until about this many
#: blocks run (4 per SM of the H200's 132), then folds the partial sums
SUM_TARGET_BLOCKS = 4 * 132


def next_pow2(n: int) -> int:
    """The smallest power of two ≥ n (1 for n ≤ 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def is_pow2(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


def matmul_tiles(precision: str) -> tuple[int, int, int, int]:
    return MATMUL_TILES[precision]


def softmax_rows(padded_cols: int) -> int:
    """Rows per block for the single-tile softmax: SOFTMAX_TILE_ELEMS elements, at most 64 rows."""
    return max(1, min(64, SOFTMAX_TILE_ELEMS // padded_cols))
