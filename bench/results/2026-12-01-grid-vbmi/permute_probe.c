#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main() {
  __m512i a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm512_set1_epi32(i * 7 + 1);
  __m512i t0 = _mm512_set1_epi16(3), t1 = _mm512_set1_epi16(5);
  long N = 100000000;
  double s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm512_permutex2var_epi16(t0, a[j], t1);
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
  }
  double w = now() - s;
  s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm512_permutex2var_epi8(t0, a[j], t1);
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
  }
  double b = now() - s;
  s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm512_permutexvar_epi16(a[j], t1);
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
  }
  double p = now() - s;
  s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(a[j]));
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
  }
  double z = now() - s;
  double ghz = 2.6;
  printf(
      "ns per op: vpermt2w %.3f vpermt2b %.3f vpermw %.3f vpmovzxbw %.3f (cycles @2.6: %.2f %.2f "
      "%.2f %.2f)\n",
      w / N / 8 * 1e9, b / N / 8 * 1e9, p / N / 8 * 1e9, z / N / 8 * 1e9, w / N / 8 * 1e9 * ghz,
      b / N / 8 * 1e9 * ghz, p / N / 8 * 1e9 * ghz, z / N / 8 * 1e9 * ghz);
}
