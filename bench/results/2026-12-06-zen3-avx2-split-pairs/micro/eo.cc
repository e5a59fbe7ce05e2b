#include <immintrin.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
static inline __m256i Round(__m256 v) {
  __m256i b = _mm256_castps_si256(v);
  __m256i l = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), l);
}
__attribute__((noinline)) void A(const uint8_t* c, const float* s, uint16_t* o, int64_t K,
                                 int rows) {
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m256i x8 = _mm256_set1_epi32(8), m8 = _mm256_set1_epi32(-8);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* cr = c + r * K / 2;
    uint16_t* orow = o + r * K;
    for (int64_t k = 0; k < K; k += 16) {
      __m128i b = _mm_loadl_epi64((const __m128i*)(cr + k / 2));
      __m128i t = _mm_and_si128(_mm_unpacklo_epi8(b, _mm_srli_epi16(b, 4)), m);
      __m256i lo = _mm256_cvtepu8_epi32(t), hi = _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(t, t));
      lo = _mm256_add_epi32(_mm256_xor_si256(lo, x8), m8);
      hi = _mm256_add_epi32(_mm256_xor_si256(hi, x8), m8);
      __m256 vl = _mm256_mul_ps(_mm256_cvtepi32_ps(lo), _mm256_loadu_ps(s + k));
      __m256 vh = _mm256_mul_ps(_mm256_cvtepi32_ps(hi), _mm256_loadu_ps(s + k + 8));
      __m256i p = _mm256_permute4x64_epi64(
          _mm256_packus_epi32(_mm256_srli_epi32(Round(vl), 16), _mm256_srli_epi32(Round(vh), 16)),
          0xD8);
      _mm256_storeu_si256((__m256i*)(orow + k), p);
    }
  }
}
// scales permuted: per 16, [even 8][odd 8]
__attribute__((noinline)) void B(const uint8_t* c, const float* s2, uint16_t* o, int64_t K,
                                 int rows) {
  const __m256i m = _mm256_set1_epi32(0x0F), m8 = _mm256_set1_epi32(8);
  const __m128i x88 = _mm_set1_epi8((char)0x88);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* cr = c + r * K / 2;
    uint16_t* orow = o + r * K;
    for (int64_t k = 0; k < K; k += 16) {
      __m128i b = _mm_xor_si128(_mm_loadl_epi64((const __m128i*)(cr + k / 2)), x88);
      __m256i d = _mm256_cvtepu8_epi32(b);
      __m256i ev = _mm256_sub_epi32(_mm256_and_si256(d, m), m8),
              od = _mm256_sub_epi32(_mm256_srli_epi32(d, 4), m8);
      __m256 ve = _mm256_mul_ps(_mm256_cvtepi32_ps(ev), _mm256_loadu_ps(s2 + k));
      __m256 vo = _mm256_mul_ps(_mm256_cvtepi32_ps(od), _mm256_loadu_ps(s2 + k + 8));
      __m256i p = _mm256_blend_epi16(_mm256_srli_epi32(Round(ve), 16), Round(vo), 0xAA);
      _mm256_storeu_si256((__m256i*)(orow + k), p);
    }
  }
}
// C: FP magic rounding (normal, bounded values only)
static inline __m256i RoundF(__m256 v) {
  __m256 e = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0xFF800000)));
  __m256 C =
      _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(e), _mm256_set1_epi32(16 << 23)));
  return _mm256_castps_si256(_mm256_sub_ps(_mm256_add_ps(v, C), C));
}
__attribute__((noinline)) void Cf(const uint8_t* c, const float* s2, uint16_t* o, int64_t K,
                                  int rows) {
  const __m256i m = _mm256_set1_epi32(0x0F), m8 = _mm256_set1_epi32(8);
  const __m128i x88 = _mm_set1_epi8((char)0x88);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* cr = c + r * K / 2;
    uint16_t* orow = o + r * K;
    for (int64_t k = 0; k < K; k += 16) {
      __m128i b = _mm_xor_si128(_mm_loadl_epi64((const __m128i*)(cr + k / 2)), x88);
      __m256i d = _mm256_cvtepu8_epi32(b);
      __m256i ev = _mm256_sub_epi32(_mm256_and_si256(d, m), m8),
              od = _mm256_sub_epi32(_mm256_srli_epi32(d, 4), m8);
      __m256 ve = _mm256_mul_ps(_mm256_cvtepi32_ps(ev), _mm256_loadu_ps(s2 + k));
      __m256 vo = _mm256_mul_ps(_mm256_cvtepi32_ps(od), _mm256_loadu_ps(s2 + k + 8));
      __m256i p = _mm256_or_si256(_mm256_srli_epi32(RoundF(ve), 16), RoundF(vo));
      _mm256_storeu_si256((__m256i*)(orow + k), p);
    }
  }
}
int main() {
  const int64_t K = 4096;
  const int rows = 32;
  std::vector<uint8_t> c(rows * K / 2);
  std::vector<float> s(K), s2(K);
  uint32_t x = 1;
  for (auto& v : c) {
    x = x * 1664525 + 1013904223;
    v = x >> 24;
  }
  for (int64_t k = 0; k < K; ++k) {
    x = x * 1664525 + 1013904223;
    s[k] = std::ldexp(1.f + (x >> 9) / 8388608.f, -8 - (int)(x % 5));
  }
  for (int64_t k = 0; k < K; k += 16)
    for (int j = 0; j < 8; ++j) {
      s2[k + j] = s[k + 2 * j];
      s2[k + 8 + j] = s[k + 2 * j + 1];
    }
  std::vector<uint16_t> oa(rows * K), ob(rows * K), oc(rows * K);
  A(c.data(), s.data(), oa.data(), K, rows);
  B(c.data(), s2.data(), ob.data(), K, rows);
  Cf(c.data(), s2.data(), oc.data(), K, rows);
  printf("B==A %d C==A %d\n", (int)(oa == ob), (int)(oa == oc));
  for (int round = 0; round < 4; ++round) {
    for (int w = 0; w < 3; ++w) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 200; ++it) {
        if (w == 0)
          A(c.data(), s.data(), oa.data(), K, rows);
        else if (w == 1)
          B(c.data(), s2.data(), ob.data(), K, rows);
        else
          Cf(c.data(), s2.data(), oc.data(), K, rows);
      }
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      printf("%c %.2f Gel/s  ", "ABC"[w], 200.0 * rows * K / dt / 1e9);
    }
    printf("\n");
  }
}
