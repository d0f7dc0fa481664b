"""Reference solution of exercise warp_reduce (see simt_tiles/exercises/stubs/warp_reduce.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype
from simt_tiles.warp import FULL_MASK, shfl_down_sync


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def row_sum_kernel(x, out):
        row = cuda.blockIdx.x  # one warp (block of 32) per row
        lane = cuda.threadIdx.x
        acc = DT(0)
        for j in range(lane, x.shape[1], 32):  # each lane: a strided slice of the row
            acc += x[row, j]
        offset = 16
        while offset > 0:  # tree: 5 shuffles, each halving the lanes that hold partial sums
            acc += shfl_down_sync(FULL_MASK, acc, offset)
            offset //= 2
        if lane == 0:
            out[row] = acc

    return row_sum_kernel
