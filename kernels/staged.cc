#include "kernels/staged.h"

#include <algorithm>

namespace nibble {

void DequantizeTileStaged(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          void* out, int64_t ld, TileFunction tile, ConvertFunction convert) {
  constexpr int64_t kChunk = 1024;
  Plan inner = plan;
  inner.out = OutType::kF32;
  inner.post_scale = 1.0f;
  inner.product = OutType::kF32;
  inner.nontemporal = false;
  inner.dot = nullptr;  // (staged values are not the kernels' float32 ones)
  const bool round_product = plan.product != OutType::kF32 && plan.product != plan.out;
  const int64_t eb = OutBytes(plan.out);
  alignas(64) float values[kChunk];
  alignas(64) uint16_t mid[kChunk];
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = c0; c < c1; c += kChunk) {
      const int64_t n = std::min(kChunk, c1 - c);
      tile(inner, r, r + 1, c, c + n, values, n);
      if (plan.post_scale != 1.0f) {
        for (int64_t i = 0; i < n; ++i) values[i] = values[i] * plan.post_scale;
      }
      char* dst = static_cast<char*>(out) + ((r - r0) * ld + (c - c0)) * eb;
      if (round_product) {
        convert(OutType::kF32, values, plan.product, mid, n);
        convert(plan.product, mid, plan.out, dst, n);
      } else {
        convert(OutType::kF32, values, plan.out, dst, n);
      }
    }
  }
}

}  // namespace nibble
