"""Reference solution of exercise separable_filter (see simt_tiles/exercises/stubs/separable_filter.py for the statement)."""

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
            acc = DT(0)
            for b in range(wx.shape[0]):  # KW taps along the row
                c = j + b - rx
                if 0 <= c < w:
                    acc += wx[b] * tmp[i, c]
            out[i, j] = acc

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
