// C = A @ B for float32 A (M, K), B (K, N): one BM x BN output tile per block, K in BK steps
// (zero padding past the edges), ct::mma with a float32 accumulator.  TF32 rounds both operand
// tiles to tf32 first (the tensor cores).  Blocks walk the tiles in groups of GROUP_M tile-rows
// so that neighbouring blocks share tiles of A and B in L2.
#include "aligned.cuh"
#include "cuda_tf32.h"  // __nv_tf32

template <typename Op, int BM, int BN, int BK, int GROUP_M, bool A16>
__tile__ void matmul_tiles(const float* a, const float* b, float* c, int m, int n, int k) {
  a = aligned<A16>(a), b = aligned<A16>(b), c = aligned<A16>(c), n = by4<A16>(n), k = by4<A16>(k);
  auto av = ct::partition_view{ct::tensor_span{a, ct::extents{m, k}}, ct::shape<BM, BK>{}};
  auto bv = ct::partition_view{ct::tensor_span{b, ct::extents{k, n}}, ct::shape<BK, BN>{}};
  auto cv = ct::partition_view{ct::tensor_span{c, ct::extents{m, n}}, ct::shape<BM, BN>{}};
  int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN, bid = ct::bid().x;
  int group = bid / (GROUP_M * tiles_n), first_m = group * GROUP_M;
  int rows = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
  int pm = first_m + (bid % (GROUP_M * tiles_n)) % rows, pn = (bid % (GROUP_M * tiles_n)) / rows;
  auto acc = ct::zeros<ct::tile<float, ct::shape<BM, BN>>>();
  for (int kk = 0; kk < (k + BK - 1) / BK; ++kk)
    acc = ct::mma(ct::element_cast<Op>(av.load_masked(pm, kk)), ct::element_cast<Op>(bv.load_masked(kk, pn)), acc);
  cv.store_masked(acc, pm, pn);
}

extern "C" __tile_global__ void matmul_fp32(const float* a, const float* b, float* c, int m, int n, int k) {
  matmul_tiles<float, 64, 64, 16, 8, false>(a, b, c, m, n, k);
}
extern "C" __tile_global__ void matmul_fp32_a16(const float* a, const float* b, float* c, int m, int n, int k) {
  matmul_tiles<float, 64, 64, 16, 8, true>(a, b, c, m, n, k);
}
extern "C" __tile_global__ void matmul_tf32(const float* a, const float* b, float* c, int m, int n, int k) {
  matmul_tiles<__nv_tf32, 128, 128, 32, 8, false>(a, b, c, m, n, k);
}
extern "C" __tile_global__ void matmul_tf32_a16(const float* a, const float* b, float* c, int m, int n, int k) {
  matmul_tiles<__nv_tf32, 128, 128, 32, 8, true>(a, b, c, m, n, k);
}
