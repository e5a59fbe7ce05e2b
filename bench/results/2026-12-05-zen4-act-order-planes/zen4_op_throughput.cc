#include <chrono>
#include <cstdio>
#define REP8(x) x x x x x x x x
#define LOOP(name, body)                                                                           \
  {                                                                                                \
    auto t0 = std::chrono::steady_clock::now();                                                    \
    long n = N;                                                                                    \
    __asm__ volatile(                                                                              \
        "vpxord %%zmm0,%%zmm0,%%zmm0\n vpxord %%zmm1,%%zmm1,%%zmm1\n vpxord "                      \
        "%%zmm2,%%zmm2,%%zmm2\n vpxord %%zmm3,%%zmm3,%%zmm3\n"                                     \
        "1:\n" body "dec %0\n jnz 1b\n"                                                            \
        : "+r"(n)::"zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", \
          "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "cc");                             \
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();       \
    printf("%-14s %.3f ns per instr\n", name, s / N / 8 * 1e9);                                    \
  }
int main() {
  const long N = 50000000;
  LOOP("vpaddd",
       "vpaddd %%zmm0,%%zmm1,%%zmm4\n vpaddd %%zmm0,%%zmm1,%%zmm5\n vpaddd %%zmm0,%%zmm1,%%zmm6\n "
       "vpaddd %%zmm0,%%zmm1,%%zmm7\n vpaddd %%zmm0,%%zmm1,%%zmm8\n vpaddd %%zmm0,%%zmm1,%%zmm9\n "
       "vpaddd %%zmm0,%%zmm1,%%zmm10\n vpaddd %%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vcvtps2ph",
       "vcvtps2ph $0,%%zmm0,%%ymm4\n vcvtps2ph $0,%%zmm0,%%ymm5\n vcvtps2ph $0,%%zmm0,%%ymm6\n "
       "vcvtps2ph $0,%%zmm0,%%ymm7\n vcvtps2ph $0,%%zmm0,%%ymm8\n vcvtps2ph $0,%%zmm0,%%ymm9\n "
       "vcvtps2ph $0,%%zmm0,%%ymm10\n vcvtps2ph $0,%%zmm0,%%ymm11\n")
  LOOP("vcvtne2ps2bf16",
       "vcvtne2ps2bf16 %%zmm0,%%zmm1,%%zmm4\n vcvtne2ps2bf16 %%zmm0,%%zmm1,%%zmm5\n vcvtne2ps2bf16 "
       "%%zmm0,%%zmm1,%%zmm6\n vcvtne2ps2bf16 %%zmm0,%%zmm1,%%zmm7\n vcvtne2ps2bf16 "
       "%%zmm0,%%zmm1,%%zmm8\n vcvtne2ps2bf16 %%zmm0,%%zmm1,%%zmm9\n vcvtne2ps2bf16 "
       "%%zmm0,%%zmm1,%%zmm10\n vcvtne2ps2bf16 %%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vpermw",
       "vpermw %%zmm0,%%zmm1,%%zmm4\n vpermw %%zmm0,%%zmm1,%%zmm5\n vpermw %%zmm0,%%zmm1,%%zmm6\n "
       "vpermw %%zmm0,%%zmm1,%%zmm7\n vpermw %%zmm0,%%zmm1,%%zmm8\n vpermw %%zmm0,%%zmm1,%%zmm9\n "
       "vpermw %%zmm0,%%zmm1,%%zmm10\n vpermw %%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vpermi2w(dep)", REP8("vpermi2w %%zmm0,%%zmm1,%%zmm4\n"))
  LOOP("vpermt2w",
       "vmovdqa64 %%zmm2,%%zmm4\n vpermt2w %%zmm0,%%zmm1,%%zmm4\n vmovdqa64 %%zmm2,%%zmm5\n "
       "vpermt2w %%zmm0,%%zmm1,%%zmm5\n vmovdqa64 %%zmm2,%%zmm6\n vpermt2w %%zmm0,%%zmm1,%%zmm6\n "
       "vmovdqa64 %%zmm2,%%zmm7\n vpermt2w %%zmm0,%%zmm1,%%zmm7\n vmovdqa64 %%zmm2,%%zmm8\n "
       "vpermt2w %%zmm0,%%zmm1,%%zmm8\n vmovdqa64 %%zmm2,%%zmm9\n vpermt2w %%zmm0,%%zmm1,%%zmm9\n "
       "vmovdqa64 %%zmm2,%%zmm10\n vpermt2w %%zmm0,%%zmm1,%%zmm10\n vmovdqa64 %%zmm2,%%zmm11\n "
       "vpermt2w %%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vpunpckldq",
       "vpunpckldq %%zmm0,%%zmm1,%%zmm4\n vpunpckldq %%zmm0,%%zmm1,%%zmm5\n vpunpckldq "
       "%%zmm0,%%zmm1,%%zmm6\n vpunpckldq %%zmm0,%%zmm1,%%zmm7\n vpunpckldq %%zmm0,%%zmm1,%%zmm8\n "
       "vpunpckldq %%zmm0,%%zmm1,%%zmm9\n vpunpckldq %%zmm0,%%zmm1,%%zmm10\n vpunpckldq "
       "%%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vshufi64x2",
       "vshufi64x2 $0x44,%%zmm0,%%zmm1,%%zmm4\n vshufi64x2 $0x44,%%zmm0,%%zmm1,%%zmm5\n vshufi64x2 "
       "$0x44,%%zmm0,%%zmm1,%%zmm6\n vshufi64x2 $0x44,%%zmm0,%%zmm1,%%zmm7\n vshufi64x2 "
       "$0x44,%%zmm0,%%zmm1,%%zmm8\n vshufi64x2 $0x44,%%zmm0,%%zmm1,%%zmm9\n vshufi64x2 "
       "$0x44,%%zmm0,%%zmm1,%%zmm10\n vshufi64x2 $0x44,%%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vcvtdq2ps",
       "vcvtdq2ps %%zmm0,%%zmm4\n vcvtdq2ps %%zmm0,%%zmm5\n vcvtdq2ps %%zmm0,%%zmm6\n vcvtdq2ps "
       "%%zmm0,%%zmm7\n vcvtdq2ps %%zmm0,%%zmm8\n vcvtdq2ps %%zmm0,%%zmm9\n vcvtdq2ps "
       "%%zmm0,%%zmm10\n vcvtdq2ps %%zmm0,%%zmm11\n")
  LOOP("vmulps",
       "vmulps %%zmm0,%%zmm1,%%zmm4\n vmulps %%zmm0,%%zmm1,%%zmm5\n vmulps %%zmm0,%%zmm1,%%zmm6\n "
       "vmulps %%zmm0,%%zmm1,%%zmm7\n vmulps %%zmm0,%%zmm1,%%zmm8\n vmulps %%zmm0,%%zmm1,%%zmm9\n "
       "vmulps %%zmm0,%%zmm1,%%zmm10\n vmulps %%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vpsrld",
       "vpsrld $3,%%zmm0,%%zmm4\n vpsrld $3,%%zmm0,%%zmm5\n vpsrld $3,%%zmm0,%%zmm6\n vpsrld "
       "$3,%%zmm0,%%zmm7\n vpsrld $3,%%zmm0,%%zmm8\n vpsrld $3,%%zmm0,%%zmm9\n vpsrld "
       "$3,%%zmm0,%%zmm10\n vpsrld $3,%%zmm0,%%zmm11\n")
  LOOP("vpmultishiftqb",
       "vpmultishiftqb %%zmm0,%%zmm1,%%zmm4\n vpmultishiftqb %%zmm0,%%zmm1,%%zmm5\n vpmultishiftqb "
       "%%zmm0,%%zmm1,%%zmm6\n vpmultishiftqb %%zmm0,%%zmm1,%%zmm7\n vpmultishiftqb "
       "%%zmm0,%%zmm1,%%zmm8\n vpmultishiftqb %%zmm0,%%zmm1,%%zmm9\n vpmultishiftqb "
       "%%zmm0,%%zmm1,%%zmm10\n vpmultishiftqb %%zmm0,%%zmm1,%%zmm11\n")
  LOOP("vpternlogd",
       "vpternlogd $0xf8,%%zmm0,%%zmm1,%%zmm4\n vpternlogd $0xf8,%%zmm0,%%zmm1,%%zmm5\n vpternlogd "
       "$0xf8,%%zmm0,%%zmm1,%%zmm6\n vpternlogd $0xf8,%%zmm0,%%zmm1,%%zmm7\n vpternlogd "
       "$0xf8,%%zmm0,%%zmm1,%%zmm8\n vpternlogd $0xf8,%%zmm0,%%zmm1,%%zmm9\n vpternlogd "
       "$0xf8,%%zmm0,%%zmm1,%%zmm10\n vpternlogd $0xf8,%%zmm0,%%zmm1,%%zmm11\n")
}
