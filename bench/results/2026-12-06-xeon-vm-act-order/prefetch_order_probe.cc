// The memory side of the column layouts' kernels, without their
// arithmetic: a 32 MiB output streamed with non-temporal 64-byte stores,
// and per 256 output bytes one 64-byte line of an 8 MiB code array
// touched, in one of five ways:
//   0 nothing (the store stream alone);
//   1 prefetcht1 in AWQ's band order ([4096, 2 KiB] word rows: per band,
//     the band's two lines of every row, rows 2 KiB apart);
//   2 prefetcht1 in address order;
//   3 loads in address order (the hardware prefetchers' case);
//   4 loads in band order.
// Each way 9 times (caches flushed before each); best and median.
// Build: g++ -O2 prefetch_order_probe.cc -o prefetch_order_probe
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__attribute__((target("avx512f"))) double Run(int mode, const uint8_t* codes, uint8_t* out,
                                              size_t out_bytes, size_t code_bytes) {
  const auto start = std::chrono::steady_clock::now();
  const size_t lines = code_bytes / 64;
  const size_t kPitch = 2048, rows = code_bytes / kPitch;
  const __m512i v = _mm512_set1_epi32(1);
  __m512i acc = _mm512_setzero_si512();
  size_t li = 0;
  for (size_t o = 0; o < out_bytes; o += 256) {
    size_t at = li * 64;
    if (mode == 1 || mode == 4) {
      const size_t band = li / (rows * 2), row = (li / 2) % rows, line = li % 2;
      at = row * kPitch + band * 128 + line * 64;
    }
    if (mode == 1 || mode == 2) {
      _mm_prefetch(reinterpret_cast<const char*>(codes + at), _MM_HINT_T1);
    }
    if (mode == 3 || mode == 4) acc = _mm512_add_epi32(acc, _mm512_load_si512(codes + at));
    li = (li + 1) % lines;
    for (int q = 0; q < 4; ++q) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + o + 64 * q), _mm512_add_epi32(v, acc));
    }
  }
  _mm_sfence();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int main() {
  const size_t out_bytes = size_t{32} << 20, code_bytes = size_t{8} << 20;
  auto* codes = static_cast<uint8_t*>(aligned_alloc(4096, code_bytes));
  auto* out = static_cast<uint8_t*>(aligned_alloc(4096, out_bytes));
  std::memset(codes, 1, code_bytes);
  std::memset(out, 0, out_bytes);
  std::vector<uint8_t> flush(size_t{64} << 20, 1);
  const char* names[] = {"nt only", "prefetcht1 band order", "prefetcht1 sequential",
                         "loads sequential", "loads band order"};
  constexpr int kRounds = 9;
  double t[5][kRounds];
  for (int round = 0; round < kRounds; ++round) {
    for (int mode = 0; mode < 5; ++mode) {
      for (size_t i = 0; i < flush.size(); i += 64) ++flush[i];
      t[mode][round] = Run(mode, codes, out, out_bytes, code_bytes);
    }
  }
  for (int mode = 0; mode < 5; ++mode) {
    std::sort(t[mode], t[mode] + kRounds);
    std::printf("%-24s best %.2f ms median %.2f ms\n", names[mode], t[mode][0] * 1e3,
                t[mode][kRounds / 2] * 1e3);
  }
  std::free(codes);
  std::free(out);
}
