// c = a + b for 1-D float32 arrays: one 4096-element tile per block.
#include "cuda_tile.h"
namespace ct = cuda::tiles;

extern "C" __tile_global__ void vector_add(const float* a, const float* b, float* c, int n) {
  auto tiled = [n](auto* p) { return ct::partition_view{ct::tensor_span{p, ct::extents{n}}, ct::shape<4096>{}}; };
  auto i = ct::bid().x;
  tiled(c).store_masked(tiled(a).load_masked(i) + tiled(b).load_masked(i), i);
}
