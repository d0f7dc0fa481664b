// y = max(x + bias, 0) for x (M, N) and bias (N,), float32; NaN stays NaN.
#include "aligned.cuh"
constexpr int BM = 16, BN = 256;

template <bool A16>
__tile__ void bias_relu_tiles(const float* x, const float* bias, float* y, int m, int n) {
  n = by4<A16>(n);
  auto xv = ct::partition_view{ct::tensor_span{aligned<A16>(x), ct::extents{m, n}}, ct::shape<BM, BN>{}};
  auto yv = ct::partition_view{ct::tensor_span{aligned<A16>(y), ct::extents{m, n}}, ct::shape<BM, BN>{}};
  auto bv = ct::partition_view{ct::tensor_span{aligned<A16>(bias), ct::extents{n}}, ct::shape<BN>{}};
  int tiles_n = (n + BN - 1) / BN, i = ct::bid().x / tiles_n, j = ct::bid().x % tiles_n;
  auto v = xv.load_masked(i, j) + ct::reshape<ct::shape<1, BN>>(bv.load_masked(j));
  yv.store_masked(ct::select(v < 0.0f, ct::zeros<decltype(v)>(), v), i, j);
}

extern "C" __tile_global__ void bias_relu(const float* x, const float* bias, float* y, int m, int n) {
  bias_relu_tiles<false>(x, bias, y, m, n);
}
extern "C" __tile_global__ void bias_relu_a16(const float* x, const float* bias, float* y, int m, int n) {
  bias_relu_tiles<true>(x, bias, y, m, n);
}
