"""Exercise separable_filter — a KH × KW filter as two 1-D passes: KH + KW taps, not KH·KW.

Statement
    ``correlate_separable(image, wy, wx, out)`` computes ``scipy.ndimage.correlate(image,
    outer(wy, wx), mode="constant")`` (zeros outside, odd KH, KW, centred) as a column pass
    with ``wy`` into a temporary, then a row pass with ``wx``. The stub's row pass only copies
    the temporary: write it. The grader runs 1 × 1, ragged images and filters of 1 to 7 taps
    in both dtypes against the project's separable reference (KH + KW terms per output).

Hints
    1. The row pass is the column pass with the roles of i and j exchanged.
    2. Zeros outside: skip the taps whose column ``j + b − KW // 2`` is outside [0, w).

Check: ``python -m simt_tiles.exercises check separable_filter separable_filter.py``
"""

from numba import cuda

from simt_tiles.runtime import numba_dtype

TX, TY = 16, 4  # blocks of TX × TY threads, one output each


def make_kernels(dtype):
    """(column pass, row pass): ``tmp = correlate along axis 0 with wy``, then ``out = … axis 1 with wx``."""
    DT = numba_dtype(dtype)

    @cuda.jit
    def column_pass(image, wy, tmp):
        j, i = cuda.grid(2)
        h, w = image.shape
        ry = wy.shape[0] // 2
        if i < h and j < w:
            acc = DT(0)
            for a in range(wy.shape[0]):  # KH taps down the column, zeros outside
                r = i + a - ry
                if 0 <= r < h:
                    acc += wy[a] * image[r, j]
            tmp[i, j] = acc

    @cuda.jit
    def row_pass(tmp, wx, out):
        j, i = cuda.grid(2)
        h, w = tmp.shape
        rx = wx.shape[0] // 2
        if i < h and j < w:
            out[i, j] = tmp[i, j]  # TODO: KW taps along the row (rx = KW // 2 on each side)

    return column_pass, row_pass


def correlate_separable(image, wy, wx, out):
    """out = correlate(image, outer(wy, wx), mode="constant"): KH + KW taps per output, not KH·KW."""
    h, w = image.shape
    if h == 0 or w == 0:
        return out
    column_pass, row_pass = make_kernels(image.dtype)
    tmp = cuda.device_array((h, w), image.dtype)
    grid = ((w + TX - 1) // TX, (h + TY - 1) // TY)
    column_pass[grid, (TX, TY)](image, wy, tmp)
    row_pass[grid, (TX, TY)](tmp, wx, out)
    return out
