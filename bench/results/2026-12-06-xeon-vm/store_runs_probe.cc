// NT-store 64 MiB as runs of R bytes: output rows of 16 KiB (f32, 4096 x 4096) or
// 8 KiB; a pass writes run j of every row (rows in order), then run j + 1.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
static double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main() {
  const size_t bytes = size_t{64} << 20;
  auto* out = static_cast<char*>(aligned_alloc(4096, bytes));
  std::memset(out, 0, bytes);
  std::vector<char> flush(size_t{512} << 20, 1);
  const __m512i v = _mm512_set1_epi32(1);
  for (size_t row : {size_t{16384}, size_t{8192}}) {
    const size_t rows = bytes / row;
    for (size_t run : {size_t{64}, size_t{128}, size_t{256}, size_t{512}, size_t{1024},
                       size_t{2048}, size_t{4096}, row}) {
      std::vector<double> t;
      for (int rep = 0; rep < 7; ++rep) {
        for (size_t j = 0; j < flush.size(); j += 64) flush[j]++;
        const double a = Now();
        for (size_t c = 0; c < row; c += run)
          for (size_t r = 0; r < rows; ++r)
            for (size_t o = 0; o < run; o += 64)
              _mm512_stream_si512(reinterpret_cast<__m512i*>(out + r * row + c + o), v);
        _mm_sfence();
        t.push_back(Now() - a);
      }
      std::sort(t.begin(), t.end());
      std::printf("row %5zu run %5zu: %6.2f GB/s\n", row, run, bytes / t[3] / 1e9);
    }
  }
}
