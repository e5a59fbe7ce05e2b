#include "kernels/stream_fill.h"

#include <cstdint>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/stream_fill.cc"
#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void StreamFillImpl(void* p, size_t bytes) {
  const hn::ScalableTag<float> df;
  const size_t vec = hn::Lanes(df) * sizeof(float);
  auto* b = static_cast<unsigned char*>(p);
  const size_t head = (vec - reinterpret_cast<uintptr_t>(b) % vec) % vec;
  if (head >= bytes) {
    std::memset(b, 0, bytes);
    return;
  }
  std::memset(b, 0, head);
  float* f = reinterpret_cast<float*>(b + head);
  const size_t n = (bytes - head) / vec;
  const auto v = hn::Set(df, 1.0f);
  for (size_t i = 0; i < n; ++i) hn::Stream(v, df, f + i * hn::Lanes(df));
  std::memset(b + head + n * vec, 0, bytes - head - n * vec);
  hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
HWY_EXPORT(StreamFillImpl);
void StreamFill(void* p, size_t bytes) { HWY_DYNAMIC_DISPATCH(StreamFillImpl)(p, bytes); }
}  // namespace nibble
#endif
