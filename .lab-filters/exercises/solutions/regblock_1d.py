"""Reference solution of exercise regblock_1d (see simt_tiles/exercises/stubs/regblock_1d.py for the statement)."""

from numba import cuda

from simt_tiles.runtime import numba_dtype

BM, BN, BK, TM = 16, 16, 4, 4  # block tile BM×BN, K step BK, TM outputs per thread
THREADS = BM * BN // TM  # 64 threads: two warps; one A and one B element each per K step


def make_kernel(dtype):
    DT = numba_dtype(dtype)

    @cuda.jit
    def matmul_kernel(a, b, c):
        tid = cuda.threadIdx.x
        m, k_len = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        tr, tc = tid // BN, tid % BN  # rows row0 + tr·TM + [0, TM) of column col0 + tc
        a_s = cuda.shared.array((BM, BK), DT)
        b_s = cuda.shared.array((BK, BN), DT)
        acc = cuda.local.array(TM, DT)  # TM registers: constant size, constant indices
        for i in range(TM):
            acc[i] = DT(0)

        for k0 in range(0, k_len, BK):
            r, q = tid // BK, tid % BK
            a_s[r, q] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k_len else DT(0)
            r, q = tid // BN, tid % BN
            b_s[r, q] = b[k0 + r, col0 + q] if k0 + r < k_len and col0 + q < n else DT(0)
            cuda.syncthreads()  # RAW: the tiles are complete
            for kk in range(BK):
                b_val = b_s[kk, tc]  # one shared load ...
                for i in range(TM):  # ... reused TM times from a register
                    acc[i] += a_s[tr * TM + i, kk] * b_val
            cuda.syncthreads()  # WAR: everyone is done reading before the next step's loads

        col = col0 + tc
        for i in range(TM):
            row = row0 + tr * TM + i
            if row < m and col < n:
                c[row, col] = acc[i]

    return matmul_kernel
