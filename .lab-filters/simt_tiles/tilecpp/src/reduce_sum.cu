// Row sums of x (M, N) in float64, one rounding to float32 at the end.  A whole-array sum runs
// sum_partials (each block adds every G-th tile of the flat array) and then sum_rows on the
// G partial sums viewed as one row.
#include "aligned.cuh"
constexpr int T = 4096;

template <int BM, int BN, bool A16, typename In, typename Out>
__tile__ void sum_rows(const In* x, Out* out, int m, int n) {
  x = aligned<A16>(x), n = by4<A16>(n);
  auto xv = ct::partition_view{ct::tensor_span{x, ct::extents{m, n}}, ct::shape<BM, BN>{}};
  auto ov = ct::partition_view{ct::tensor_span{out, ct::extents{m}}, ct::shape<BM>{}};
  int i = ct::bid().x;
  auto acc = ct::zeros<ct::tile<double, ct::shape<BM, BN>>>();
  for (int j = 0; j < (n + BN - 1) / BN; ++j)
    acc = acc + ct::element_cast<double>(xv.load_masked(i, j));
  ov.store_masked(ct::element_cast<Out>(ct::reshape<ct::shape<BM>>(ct::sum<1>(acc))), i);
}

extern "C" __tile_global__ void sum_rows_f32(const float* x, float* out, int m, int n) {
  sum_rows<4, 1024, false>(x, out, m, n);
}
extern "C" __tile_global__ void sum_rows_f32_a16(const float* x, float* out, int m, int n) {
  sum_rows<4, 1024, true>(x, out, m, n);
}
extern "C" __tile_global__ void sum_rows_f64(const double* x, float* out, int m, int n) {
  sum_rows<1, 1024, false>(x, out, m, n);
}

template <bool A16>
__tile__ void partial_sums(const float* x, double* partials, int n) {
  x = aligned<A16>(x), n = by4<A16>(n);
  auto xv = ct::partition_view{ct::tensor_span{x, ct::extents{n}}, ct::shape<T>{}};
  int b = ct::bid().x, g = ct::num_blocks().x;
  auto acc = ct::zeros<ct::tile<double, ct::shape<T>>>();
  for (int j = b; j < (n + T - 1) / T; j += g)
    acc = acc + ct::element_cast<double>(xv.load_masked(j));
  auto pv = ct::partition_view{ct::tensor_span{partials, ct::extents{g}}, ct::shape<1>{}};
  pv.store(ct::sum<0>(acc), b);
}

extern "C" __tile_global__ void sum_partials(const float* x, double* partials, int n) {
  partial_sums<false>(x, partials, n);
}
extern "C" __tile_global__ void sum_partials_a16(const float* x, double* partials, int n) {
  partial_sums<true>(x, partials, n);
}
