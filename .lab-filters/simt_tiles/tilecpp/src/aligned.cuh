// What lets tileiras use 16-byte vector loads and the TMA: pointers aligned to 16 bytes and row
// lengths (the strides of C-contiguous arrays) that are multiples of 4 floats.  cuTile Python
// specializes a kernel on these facts at launch; in Tile C++ the kernel states them
// (ct::assume_*) and the host launches the "_a16" instantiation only when they hold.
#pragma once
#include "cuda_tile.h"
namespace ct = cuda::tiles;

template <bool A16, typename T>
__tile__ T* aligned(T* p) {
  using namespace ct::literals;
  if constexpr (A16) return ct::assume_aligned(p, 16_ic); else return p;
}
template <bool A16>
__tile__ int by4(int n) {
  using namespace ct::literals;
  if constexpr (A16) return ct::assume_divisible(n, 4_ic); else return n;
}
