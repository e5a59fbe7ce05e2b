#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static uint32_t tab[512] __attribute__((aligned(64)));
int main() {
  for (int i = 0; i < 512; i++) tab[i] = i * 2654435761u;
  __m512i a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm512_set1_epi32(i * 7 + 1);
  __m512i t0 = _mm512_set1_epi16(3), t1 = _mm512_set1_epi16(5);
  long N = 20000000;
  double s, g, vb, ml;
  s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
      a[j] = _mm512_and_si512(_mm512_i32gather_epi32(a[j], (const int*)tab, 4),
                              _mm512_set1_epi32(511));
  }
  g = now() - s;
  s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm512_permutexvar_epi8(a[j], t1);
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
  }
  vb = now() - s;
  s = now();
  for (long i = 0; i < N; i++) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm512_multishift_epi64_epi8(a[j], t1);
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
  }
  ml = now() - s;
  double c = 3.9;
  printf("cycles: gather16x32 %.2f vpermb %.2f multishift %.2f\n", g / N / 8 * 1e9 * c,
         vb / N / 8 * 1e9 * c, ml / N / 8 * 1e9 * c);
  int x = 0;
  for (int j = 0; j < 8; j++) x += _mm512_reduce_add_epi32(a[j]);
  return x == 1234567;
}
