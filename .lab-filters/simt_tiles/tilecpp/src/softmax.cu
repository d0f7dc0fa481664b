// softmax along the rows of x (M, N), float32: an online pass (running max and sum over BN-column
// tiles, -inf padding), then a pass that writes exp(x - max) / sum.  BM rows per block.
#include "aligned.cuh"

template <int BM, int BN, bool A16>
__tile__ void softmax_rows(const float* x, float* y, int m, int n) {
  x = aligned<A16>(x), y = aligned<A16>(y), n = by4<A16>(n);
  using Row = ct::tile<float, ct::shape<BM, 1>>;
  constexpr auto pad = ct::view_padding_negative_inf_t{};
  auto xv = ct::partition_view{ct::tensor_span{x, ct::extents{m, n}}, ct::shape<BM, BN>{}};
  auto yv = ct::partition_view{ct::tensor_span{y, ct::extents{m, n}}, ct::shape<BM, BN>{}};
  int i = ct::bid().x, tiles = (n + BN - 1) / BN;
  auto run_max = ct::full<Row>(-INFINITY);
  auto run_sum = ct::zeros<Row>();
  for (int j = 0; j < tiles; ++j) {
    auto t = xv.load_masked(pad, i, j);
    auto new_max = ct::select(run_max > ct::reduce_max<1>(t), run_max, ct::reduce_max<1>(t));
    auto safe = ct::select(new_max == -INFINITY, ct::zeros<Row>(), new_max);  // rows of -inf so far
    run_sum = run_sum * ct::exp(run_max - safe) + ct::sum<1>(ct::exp(t - safe));
    run_max = new_max;
  }
  auto scale = 1.0f / run_sum;
  for (int j = 0; j < tiles; ++j)
    yv.store_masked(ct::exp(xv.load_masked(pad, i, j) - run_max) * scale, i, j);
}

extern "C" __tile_global__ void softmax_short(const float* x, float* y, int m, int n) {
  softmax_rows<16, 128, false>(x, y, m, n);
}
extern "C" __tile_global__ void softmax_short_a16(const float* x, float* y, int m, int n) {
  softmax_rows<16, 128, true>(x, y, m, n);
}
extern "C" __tile_global__ void softmax_mid(const float* x, float* y, int m, int n) {
  softmax_rows<4, 1024, false>(x, y, m, n);
}
extern "C" __tile_global__ void softmax_mid_a16(const float* x, float* y, int m, int n) {
  softmax_rows<4, 1024, true>(x, y, m, n);
}
extern "C" __tile_global__ void softmax_long(const float* x, float* y, int m, int n) {
  softmax_rows<1, 4096, false>(x, y, m, n);
}
extern "C" __tile_global__ void softmax_long_a16(const float* x, float* y, int m, int n) {
  softmax_rows<1, 4096, true>(x, y, m, n);
}
