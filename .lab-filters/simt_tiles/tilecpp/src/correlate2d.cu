// scipy.ndimage.correlate of a float32 image (H, W), origin 0, any filter size, every scipy
// boundary mode.  A block owns a TH x TW output tile; for each tap it gathers the shifted tile
// through a tile of pointers whose indices are folded back into the image by the mode (the
// rectangular, TMA-friendly partition_view loads can only pad with 0, -0, +-inf or NaN).
#include "cuda_tile.h"
namespace ct = cuda::tiles;
constexpr int TH = 32, TW = 64;
enum Mode { REFLECT, CONSTANT, NEAREST, MIRROR, WRAP };

template <typename Idx>  // coordinates p of the extended line -> indices into [0, len)
__tile__ Idx fold(Idx p, int len, int mode) {
  auto wrapped = [](Idx q, int period) { return ((q % period) + period) % period; };
  if (mode == REFLECT) {  // d c b a | a b c d | d c b a
    auto q = wrapped(p, 2 * len);
    return ct::select(q >= len, 2 * len - 1 - q, q);
  }
  if (mode == MIRROR && len > 1) {  // d c b | a b c d | c b a
    auto q = wrapped(p, 2 * len - 2);
    return ct::select(q >= len, 2 * len - 2 - q, q);
  }
  if (mode == WRAP) return wrapped(p, len);
  auto low = ct::select(p < 0, ct::zeros<Idx>(), p);  // NEAREST; CONSTANT masks these reads
  return ct::select(low >= len, ct::full<Idx>(len - 1), low);
}

extern "C" __tile_global__ void correlate2d(const float* x, const float* w, float* out, int h, int wd,
                                            int kh, int kw, int mode, float cval) {
  using Rows = ct::tile<int, ct::shape<TH, 1>>;
  using Cols = ct::tile<int, ct::shape<1, TW>>;
  using Tile = ct::tile<float, ct::shape<TH, TW>>;
  auto [bj, bi, _] = ct::bid();  // grid: (column tiles, row tiles)
  auto r0 = ct::reshape<ct::shape<TH, 1>>(ct::iota<ct::tile<int, ct::shape<TH>>>()) + int(bi) * TH - kh / 2;
  auto c0 = ct::reshape<ct::shape<1, TW>>(ct::iota<ct::tile<int, ct::shape<TW>>>()) + int(bj) * TW - kw / 2;
  auto acc = ct::zeros<Tile>();
  for (int a = 0; a < kh; ++a) {
    Rows r = r0 + a;
    auto rows = fold(r, h, mode) * wd;
    for (int b = 0; b < kw; ++b) {
      float wt = w[a * kw + b];
      if (wt <= 2.220446049250313e-16f && wt >= -2.220446049250313e-16f) continue;  // scipy skips |w| <= eps
      Cols c = c0 + b;
      auto ptrs = x + (rows + fold(c, wd, mode));
      auto inside = (r >= 0) & (r < h) & (c >= 0) & (c < wd);
      auto v = mode == CONSTANT ? ct::load_masked(ptrs, inside, ct::full<Tile>(cval)) : ct::load(ptrs);
      acc = acc + wt * v;
    }
  }
  auto ov = ct::partition_view{ct::tensor_span{out, ct::extents{h, wd}}, ct::shape<TH, TW>{}};
  ov.store_masked(acc, bi, bj);
}
