// The memory side of gpt-oss's transposed write (DequantizeTransposedPow2)
// without its arithmetic, and with a stand-in for it: a view of 4096 x
// 4096 4-bit codes (2 KiB a row) written transposed as a [4096, 4096]
// output of EB bytes per value (-DEB=4: float32, -DEB=2: 16-bit) in
// panels of 128 view rows: per panel, 16 words (128 columns) at a time,
// each output row gets one run of 128 * EB bytes (non-temporal 64-byte
// stores). Modes, bit by bit:
//   1  the next panel's codes fetched into L2 in address order, spread
//      over the panel (TileSource::FetchRows);
//   2  the panel's code lines loaded as the kernel loads them (a column of
//      64-byte lines across the panel's rows);
//   4  a stand-in for the arithmetic per store (shift, vpermd, test,
//      masked add), codes staged on the stack as the kernel does.
// Each mode 9 times (caches flushed before each); best and median.
// Build: g++ -O2 -march=sapphirerapids -DEB=4 transposed_write_probe.cc
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef EB
#define EB 4
#endif

double Run(int mode, const uint8_t* codes, uint8_t* out) {
  const auto start = std::chrono::steady_clock::now();
  constexpr size_t kRows = 4096, kCols = 4096, kPitch = 2048, kLd = kRows * EB;
  constexpr int kRuns = 128 * EB / 64;  // 64-byte stores per output row and panel
  __m512i acc = _mm512_set1_epi32(1);
  alignas(64) __m512i staged[16][8];
  __m512i k[8];
  for (int i = 0; i < 8; ++i) k[i] = _mm512_set1_epi32(i << 23);
  const __m512i table = _mm512_set_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  for (size_t j0 = 0; j0 < kRows; j0 += 128) {
    const uint8_t* next = codes + (j0 + 128) * kPitch;
    const size_t lines = j0 + 128 < kRows ? 128 * kPitch / 64 : 0;
    size_t fetched = 0;
    for (size_t w0 = 0; w0 < kCols / 8; w0 += 16) {
      if (mode & 2) {
        for (size_t r = 0; r < 128; ++r) {
          acc = _mm512_add_epi32(acc, _mm512_loadu_si512(codes + (j0 + r) * kPitch + 4 * w0));
        }
      }
      if (mode & 4) {
        for (int i = 0; i < 16; ++i) {
          for (int sb = 0; sb < 8; ++sb) {
            staged[i][sb] = _mm512_add_epi32(
                acc, _mm512_loadu_si512(codes + (j0 + 16 * sb + i) * kPitch + 4 * w0));
          }
        }
      }
      for (size_t i = 0; i < 16; ++i) {
        if (mode & 1) {
          const size_t due = lines * (w0 + i + 1) / (kCols / 8);
          for (; fetched < due; ++fetched) {
            _mm_prefetch(reinterpret_cast<const char*>(next + 64 * fetched), _MM_HINT_T1);
          }
        }
        const size_t c = 8 * (w0 + i);
        for (int f = 0; f < 8; ++f) {
          for (int sb = 0; sb < kRuns; ++sb) {
            __m512i v = acc;
            if (mode & 4) {
              const __m512i x = _mm512_srli_epi32(staged[i][sb % 8], 4 * f);
              v = _mm512_permutexvar_epi32(x, table);
              const __mmask16 nz = _mm512_test_epi32_mask(v, _mm512_set1_epi32(0x7FFFFFFF));
              v = _mm512_mask_add_epi32(v, nz, v, k[sb % 8]);
            }
            _mm512_stream_si512(reinterpret_cast<__m512i*>(out + (c + f) * kLd + j0 * EB + 64 * sb),
                                v);
          }
        }
      }
    }
  }
  _mm_sfence();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int main() {
  const size_t out_bytes = size_t{4096} * 4096 * EB, code_bytes = size_t{8} << 20;
  auto* codes = static_cast<uint8_t*>(aligned_alloc(4096, code_bytes));
  auto* out = static_cast<uint8_t*>(aligned_alloc(4096, out_bytes));
  std::memset(codes, 1, code_bytes);
  std::memset(out, 0, out_bytes);
  std::vector<uint8_t> flush(size_t{256} << 20, 1);
  const char* names[] = {"stores", "stores+fetch", "stores+loads", "stores+loads+fetch",
                         "arith",  "arith+fetch",  "arith+loads",  "arith+loads+fetch"};
  constexpr int kRounds = 9;
  double t[8][kRounds];
  for (int round = 0; round < kRounds; ++round) {
    for (int mode = 0; mode < 8; ++mode) {
      for (size_t i = 0; i < flush.size(); i += 64) ++flush[i];
      t[mode][round] = Run(mode, codes, out);
    }
  }
  for (int mode = 0; mode < 8; ++mode) {
    std::sort(t[mode], t[mode] + kRounds);
    std::printf("EB %d %-20s best %.2f ms median %.2f ms (%.1f GB/s read + write)\n", EB,
                names[mode], t[mode][0] * 1e3, t[mode][kRounds / 2] * 1e3,
                static_cast<double>(out_bytes + code_bytes) / t[mode][kRounds / 2] / 1e9);
  }
  std::free(codes);
  std::free(out);
}
