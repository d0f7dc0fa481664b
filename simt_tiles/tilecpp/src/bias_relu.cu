// y = max(x + bias, 0) for x (M, N) and bias (N,), float32; NaN stays NaN.
#include "cuda_tile.h"
namespace ct = cuda::tiles;
constexpr int BM = 16, BN = 256;

extern "C" __tile_global__ void bias_relu(const float* x, const float* bias, float* y, int m, int n) {
  auto xv = ct::partition_view{ct::tensor_span{x, ct::extents{m, n}}, ct::shape<BM, BN>{}};
  auto yv = ct::partition_view{ct::tensor_span{y, ct::extents{m, n}}, ct::shape<BM, BN>{}};
  auto bv = ct::partition_view{ct::tensor_span{bias, ct::extents{n}}, ct::shape<BN>{}};
  int tiles_n = (n + BN - 1) / BN, i = ct::bid().x / tiles_n, j = ct::bid().x % tiles_n;
  auto v = xv.load_masked(i, j) + ct::reshape<ct::shape<1, BN>>(bv.load_masked(j));
  yv.store_masked(ct::select(v < 0.0f, ct::zeros<decltype(v)>(), v), i, j);
}
