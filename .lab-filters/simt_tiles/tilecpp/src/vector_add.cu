// c = a + b for 1-D float32 arrays: one 4096-element tile per block.
#include "aligned.cuh"

template <bool A16>
__tile__ void add(const float* a, const float* b, float* c, int n) {
  auto tiled = [n = by4<A16>(n)](auto* p) {
    return ct::partition_view{ct::tensor_span{aligned<A16>(p), ct::extents{n}}, ct::shape<4096>{}};
  };
  auto i = ct::bid().x;
  tiled(c).store_masked(tiled(a).load_masked(i) + tiled(b).load_masked(i), i);
}

extern "C" __tile_global__ void vector_add(const float* a, const float* b, float* c, int n) { add<false>(a, b, c, n); }
extern "C" __tile_global__ void vector_add_a16(const float* a, const float* b, float* c, int n) { add<true>(a, b, c, n); }
