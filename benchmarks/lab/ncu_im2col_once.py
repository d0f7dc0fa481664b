"""conv2d_nchw's im2col copy on two resnet18 layers, for Nsight Compute (issue 33: the copy runs at
0.74 TB/s on layer1.0.conv1 at N = 32, benchmarks/notes/conv_nchw.md).

    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        --section WarpStateStats --section Occupancy -k regex:im2col --csv \\
        python3 benchmarks/lab/ncu_im2col_once.py [--batch 32]

Each layer (layer1.0.conv1: 64 → 64, 56², 3×3, stride 1; layer2.0.conv1: 64 → 128, 56², 3×3, stride 2)
runs ``conv2d_nchw(x, w, variant="im2col_gemm")`` twice on Numba device arrays (the first call compiles or
loads the kernels: compare the last launch of each layer), and its first image is checked against the
float64 reference within its bound.  Runs in the simulator too, at ``--batch 1 --side 6 --channels 2``.
"""

from __future__ import annotations

import argparse

import _once  # (the checkout on sys.path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--side", type=int, default=56)
    p.add_argument("--channels", type=int, default=64)
    args = p.parse_args(argv)
    import numpy as np
    from numba import cuda

    import simt_tiles
    from simt_tiles.bounds import check_within
    from simt_tiles.kernels.conv_nchw.reference import conv2d_nchw_reference

    rng = np.random.default_rng(0)
    c, h = args.channels, args.side
    tally = _once.Tally("ncu_im2col_once")
    for name, c_out, stride in (("layer1.0.conv1", c, 1), ("layer2.0.conv1", 2 * c, 2)):
        x = rng.standard_normal((args.batch, c, h, h), dtype=np.float32)
        w = (rng.standard_normal((c_out, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        xd, wd = cuda.to_device(x), cuda.to_device(w)
        for _ in range(2):
            got = simt_tiles.conv2d_nchw(xd, wd, stride=stride, padding=1, variant="im2col_gemm")
        ref, bound = conv2d_nchw_reference(x[:1], w, stride=stride, padding=1)
        tally.check(f"{name} N={args.batch} C={c}->{c_out} {h}x{h} s{stride}",
                    check_within(got.copy_to_host()[:1], ref, bound).passed)
    cuda.synchronize()
    return tally.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
