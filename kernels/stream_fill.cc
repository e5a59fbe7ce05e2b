#include "kernels/stream_fill.h"

#include <algorithm>
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

uint32_t StreamReadWriteImpl(const void* in, size_t in_bytes, void* out, size_t out_bytes) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t lanes = hn::Lanes(df), vec = lanes * sizeof(float);
  const auto* src = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(out);
  size_t read = 0;  // input bytes read so far (whole vectors, then the tail)
  auto acc = hn::Zero(du);
  // Reads the input up to `to` (rounded down to whole vectors).
  const auto read_to = [&](size_t to) HWY_ATTR {
    for (; read + vec <= to; read += vec) {
      acc = hn::Xor(acc, hn::LoadU(du, reinterpret_cast<const uint32_t*>(src + read)));
    }
  };
  const double per_out =
      out_bytes == 0 ? 0.0 : static_cast<double>(in_bytes) / static_cast<double>(out_bytes);
  const size_t head = std::min(out_bytes, (vec - reinterpret_cast<uintptr_t>(b) % vec) % vec);
  if (head > 0) std::memset(b, 0, head);
  const size_t n = (out_bytes - head) / vec;
  float* f = reinterpret_cast<float*>(b + head);
  const auto v = hn::Set(df, 1.0f);
  constexpr size_t kStep = 16;  // vectors stored between reads
  for (size_t i = 0; i < n; i += kStep) {
    const size_t end = std::min(n, i + kStep);
    read_to(static_cast<size_t>(per_out * static_cast<double>(head + end * vec)));
    for (size_t j = i; j < end; ++j) hn::Stream(v, df, f + j * lanes);
  }
  if (out_bytes > head + n * vec) std::memset(b + head + n * vec, 0, out_bytes - head - n * vec);
  read_to(in_bytes);
  alignas(64) uint32_t lanes_out[hn::MaxLanes(du)];
  hn::Store(acc, du, lanes_out);
  uint32_t x = 0;
  for (size_t i = 0; i < lanes; ++i) x ^= lanes_out[i];
  for (; read < in_bytes; ++read) x ^= static_cast<uint32_t>(src[read]) << (8 * (read % 4));
  hwy::FlushStream();
  return x;
}

// The fill: the same stores with nothing to read.
void StreamFillImpl(void* p, size_t bytes) { (void)StreamReadWriteImpl(nullptr, 0, p, bytes); }

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
HWY_EXPORT(StreamFillImpl);
void StreamFill(void* p, size_t bytes) { HWY_DYNAMIC_DISPATCH(StreamFillImpl)(p, bytes); }
HWY_EXPORT(StreamReadWriteImpl);
uint32_t StreamReadWrite(const void* in, size_t in_bytes, void* out, size_t out_bytes) {
  return HWY_DYNAMIC_DISPATCH(StreamReadWriteImpl)(in, in_bytes, out, out_bytes);
}
}  // namespace nibble
#endif
