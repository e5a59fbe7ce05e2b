#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dequantize.h"
#include "kernels/plan.h"
#include "kernels/transpose.h"
using namespace nibble;
using Clock = std::chrono::steady_clock;
int main(int argc, char** argv) {
  const int64_t R = 4096, K = 4096, G = K / 32;
  const int64_t B = atoi(argv[2]), P = atoi(argv[3]);
  const OutType out = argc > 1 && argv[1][0] == 'f' ? OutType::kF16 : OutType::kF32;
  const int eb = out == OutType::kF32 ? 4 : 2;
  std::vector<uint8_t> codes(R * K / 2);
  std::vector<float> scales(R * G);
  std::mt19937 rng(1);
  for (auto& x : codes) x = rng();
  for (auto& x : scales) x = 1.0f / (1 + rng() % 8);
  std::vector<uint8_t> tb(B * P / 2);
  std::vector<float> sb(B / 32 * P);
  uint8_t* y = static_cast<uint8_t*>(aligned_alloc(64, R * K * 4));
  memset(y, 1, R * K * 4);
  std::vector<char> flush(64 << 20);
  for (int rep = 0; rep < 3; ++rep) {
    for (auto& c : flush) c++;
    double tt = 0, tg = 0, td = 0;
    for (int64_t band = 0; band < K / B; ++band) {
      for (int64_t r0 = 0; r0 < R; r0 += P) {
        auto t0 = Clock::now();
        TransposeNibbles(codes.data() + r0 * K / 2 + band * B / 2, K / 2, P, B, tb.data(), P / 2);
        auto t1 = Clock::now();
        for (int64_t r = 0; r < P; ++r)
          for (int g = 0; g < B / 32; ++g)
            sb[g * P + r] = scales[(r0 + r) * G + band * (B / 32) + g];
        auto t2 = Clock::now();
        Plan p;
        p.layout = Layout::kDense;
        p.code = CodeKind::kF4E2M1;
        p.codes = tb.data();
        p.out = out;
        p.outer = 1;
        p.axis = B;
        p.inner = P;
        p.group = 32;
        p.s_outer = 0;
        p.s_axis = P;
        p.s_inner = 1;
        p.scale = sb.data();
        p.nontemporal = true;
        DequantizeTile(p, 0, B, 0, P, y + (band * B * R + r0) * eb, R);
        auto t3 = Clock::now();
        tt += std::chrono::duration<double, std::milli>(t1 - t0).count();
        tg += std::chrono::duration<double, std::milli>(t2 - t1).count();
        td += std::chrono::duration<double, std::milli>(t3 - t2).count();
      }
    }
    printf("transpose %.3f gather %.3f dequant %.3f total %.3f ms\n", tt, tg, td, tt + tg + td);
  }
}
