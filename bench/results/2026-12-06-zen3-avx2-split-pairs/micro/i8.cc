#include <immintrin.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
static inline __m256i Round2(__m256 v) {
  __m256i b = _mm256_castps_si256(v);
  __m256i tie = _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x1FFFF)),
                                   _mm256_set1_epi32(0x8000));
  return _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x8000)), tie);
}
__attribute__((noinline)) void A(const int8_t* c, const float* s, uint16_t* o, int64_t K,
                                 int rows) {
  for (int r = 0; r < rows; ++r) {
    const int8_t* cr = c + r * K;
    uint16_t* orow = o + r * K;
    for (int64_t k = 0; k < K; k += 16) {
      __m256i lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(cr + k))),
              hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(cr + k + 8)));
      __m256 vl = _mm256_mul_ps(_mm256_cvtepi32_ps(lo), _mm256_loadu_ps(s + k));
      __m256 vh = _mm256_mul_ps(_mm256_cvtepi32_ps(hi), _mm256_loadu_ps(s + k + 8));
      __m256i p = _mm256_permute4x64_epi64(
          _mm256_packus_epi32(_mm256_srli_epi32(Round2(vl), 16), _mm256_srli_epi32(Round2(vh), 16)),
          0xD8);
      _mm256_storeu_si256((__m256i*)(orow + k), p);
    }
  }
}
__attribute__((noinline)) void B(const int8_t* c, const float* s2, uint16_t* o, int64_t K,
                                 int rows) {
  for (int r = 0; r < rows; ++r) {
    const int8_t* cr = c + r * K;
    uint16_t* orow = o + r * K;
    for (int64_t k = 0; k < K; k += 16) {
      __m256i d = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i*)(cr + k)));
      __m256i ev = _mm256_srai_epi32(_mm256_slli_epi32(d, 24), 24), od = _mm256_srai_epi32(d, 8);
      __m256 ve = _mm256_mul_ps(_mm256_cvtepi32_ps(ev), _mm256_loadu_ps(s2 + k));
      __m256 vo = _mm256_mul_ps(_mm256_cvtepi32_ps(od), _mm256_loadu_ps(s2 + k + 8));
      __m256i p = _mm256_blend_epi16(_mm256_srli_epi32(Round2(ve), 16), Round2(vo), 0xAA);
      _mm256_storeu_si256((__m256i*)(orow + k), p);
    }
  }
}
int main() {
  const int64_t K = 4096;
  const int rows = 32;
  std::vector<int8_t> c(rows * K);
  std::vector<float> s(K), s2(K);
  uint32_t x = 1;
  for (auto& v : c) {
    x = x * 1664525 + 1013904223;
    v = (int8_t)(x >> 24);
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
  std::vector<uint16_t> oa(rows * K), ob(rows * K);
  A(c.data(), s.data(), oa.data(), K, rows);
  B(c.data(), s2.data(), ob.data(), K, rows);
  printf("eq %d\n", (int)(oa == ob));
  for (int round = 0; round < 4; ++round) {
    for (int w = 0; w < 2; ++w) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 200; ++it) {
        if (w == 0)
          A(c.data(), s.data(), oa.data(), K, rows);
        else
          B(c.data(), s2.data(), ob.data(), K, rows);
      }
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      printf("%d %.2f Gel/s  ", w, 200.0 * rows * K / dt / 1e9);
    }
    printf("\n");
  }
}
