// Overlap probe (2026-12-02): does this machine overlap a kernel's
// arithmetic with its memory stream? A synthetic kernel reads 16 bytes and
// writes one 64-byte line (non-temporal) per output line, the ratio of
// int4 codes to float32 / 4-bit to 16-bit outputs, with C 16-bit permutes
// of arithmetic per line (independent, short chains). 64 MiB out, 16 MiB
// in, every run flushed first, 9 rounds interleaved, medians.
//   "mem":     from memory; "x pure": the bare stream's time (C = 0, no
//              fetch) over this variant's;
//   "compute": the same code with plain stores into a 256 KiB buffer,
//              scaled to 64 MiB (its arithmetic alone), as a share of the
//              bare stream's time; "sum": the ratio if the compute and the
//              stream did not overlap at all (1 / (1 + compute)).
// Variants: pN  software fetch (prefetcht0) N bytes ahead, one per 64
// input bytes; each: one fetch per output line (4 per input line); bN:
// N bytes fetched in a burst every N input bytes; l1: the reads from a
// 16 KiB buffer (in L1: the writes alone from memory); s32: 32 lines
// computed into a buffer with plain stores, then streamed out.
//   g++ -O2 -mavx512f -mavx512bw -o overlap_probe overlap_probe.cc && ./overlap_probe
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Variant {
  int fetch = 0;                  // bytes ahead, 0: none
  bool each = false;              // a fetch per output line (kFetch ahead)
  int burst = 0;                  // bytes per burst, 0: none
  size_t read_mask = ~size_t{0};  // 16383: reads from L1
  int stage = 0;                  // lines staged, 0: streamed directly
};

template <int C>
__attribute__((noinline)) uint32_t Run(const Variant& v, bool nt, const uint8_t* in,
                                       size_t out_lines, uint8_t* out) {
  alignas(64) static uint8_t stage[64 * 64];
  __m512i acc = _mm512_setzero_si512();
  __m512i idx[8];
  for (int i = 0; i < 8; ++i) idx[i] = _mm512_set1_epi16(static_cast<short>(i * 3 + 1));
  for (size_t l = 0; l < out_lines; l += 4) {
    const uint8_t* const at = in + ((l * 16) & v.read_mask);
    if (nt && v.stage && l % v.stage == 0 && l) {
      for (int q = 0; q < v.stage; ++q) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + (l - v.stage + q) * 64),
                            _mm512_load_si512(stage + q * 64));
      }
    }
    if (v.burst && (l * 16) % v.burst == 0) {
      for (int q = 0; q < v.burst; q += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(at + v.burst + q), _MM_HINT_T0);
      }
    }
    if (v.fetch && !v.each) {
      _mm_prefetch(reinterpret_cast<const char*>(at + v.fetch), _MM_HINT_T0);
    }
    const __m512i x = _mm512_loadu_si512(at);
    for (int j = 0; j < 4; ++j) {
      if (v.each) _mm_prefetch(reinterpret_cast<const char*>(at + j * 16 + v.fetch), _MM_HINT_T0);
      const __m512i y = _mm512_srli_epi32(x, j);
      __m512i r = y;
      for (int c = 0; c < C; ++c) r = _mm512_add_epi32(r, _mm512_permutexvar_epi16(idx[c], y));
      uint8_t* const dst = out + (l + j) * 64;
      if (!nt) {
        _mm512_store_si512(dst, r);
      } else if (v.stage) {
        _mm512_store_si512(stage + ((l + j) % v.stage) * 64, r);
      } else {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), r);
      }
    }
    acc = _mm512_xor_si512(acc, x);
  }
  _mm_sfence();
  return static_cast<uint32_t>(_mm512_reduce_or_epi32(acc));
}

using Fn = uint32_t (*)(const Variant&, bool, const uint8_t*, size_t, uint8_t*);

}  // namespace

int main() {
  const size_t out_bytes = size_t{64} << 20, in_bytes = out_bytes / 4;
  auto* in = static_cast<uint8_t*>(aligned_alloc(64, in_bytes));
  auto* out = static_cast<uint8_t*>(aligned_alloc(64, out_bytes));
  std::memset(in, 1, in_bytes);
  std::memset(out, 0, out_bytes);
  std::vector<char> flush(size_t{256} << 20, 1);
  struct Case {
    const char* name;
    Fn fn;
    Variant v;
  };
  Variant pure, p512, p2k, p8k, each1k, b2k, l1, s32;
  p512.fetch = 512;
  p2k.fetch = 2048;
  p8k.fetch = 8192;
  each1k.fetch = 1024;
  each1k.each = true;
  b2k.burst = 2048;
  l1.read_mask = 16383;
  s32.stage = 32;
  const Case cases[] = {
      {"c0", Run<0>, pure},    {"c2", Run<2>, pure},        {"c3", Run<3>, pure},
      {"c4", Run<4>, pure},    {"c3 p512", Run<3>, p512},   {"c3 p2k", Run<3>, p2k},
      {"c3 p8k", Run<3>, p8k}, {"c3 each", Run<3>, each1k}, {"c3 b2k", Run<3>, b2k},
      {"c3 l1", Run<3>, l1},   {"c3 s32", Run<3>, s32},     {"c4 p2k", Run<4>, p2k},
      {"c4 l1", Run<4>, l1},   {"c0 p2k", Run<0>, p2k},
  };
  const int n = static_cast<int>(sizeof cases / sizeof cases[0]);
  std::vector<std::vector<double>> mem(n), comp(n);
  volatile uint32_t sink = 0;
  const size_t small = size_t{256} << 10;
  for (int rep = 0; rep < 9; ++rep) {
    for (int i = 0; i < n; ++i) {
      for (size_t j = 0; j < flush.size(); j += 64) flush[j]++;
      double a = Now();
      sink = sink ^ cases[i].fn(cases[i].v, true, in, out_bytes / 64, out);
      mem[i].push_back(Now() - a);
      Variant plain = cases[i].v;
      plain.stage = 0;
      a = Now();
      for (int r = 0; r < 64; ++r) sink = sink ^ cases[i].fn(plain, false, in, small / 64, out);
      comp[i].push_back((Now() - a) / 64 * static_cast<double>(out_bytes / small));
    }
  }
  double base = 0;
  std::printf("%-10s %9s %7s %8s %6s\n", "variant", "mem ms", "x pure", "compute", "sum");
  for (int i = 0; i < n; ++i) {
    std::sort(mem[i].begin(), mem[i].end());
    std::sort(comp[i].begin(), comp[i].end());
    const double m = mem[i][4], c = comp[i][4];
    if (i == 0) base = m;
    std::printf("%-10s %9.2f %7.3f %8.2f %6.2f\n", cases[i].name, m * 1e3, base / m, c / base,
                1 / (1 + c / base));
  }
  return 0;
}
