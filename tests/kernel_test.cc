// Every kernel x every compiled Highway target x a grid of sizes around the
// vector length and the group size, odd nibble starts, every zero-point
// kind, output type and store mode, tiles at any offset: `==` against the
// scalar reference (kernels/reference.h), with sentinels around the output.
#include <algorithm>
#include <array>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/numeric.h"
#include "doctest/doctest.h"
#include "hwy/targets.h"
#include "kernels/convert.h"
#include "kernels/dequantize.h"
#include "kernels/ggml_grids.h"
#include "kernels/layouts.h"
#include "kernels/matmul.h"
#include "kernels/reference.h"
#include "kernels/stream_fill.h"
#include "kernels/transpose.h"
#include "op/dequantizer.h"
#include "op/onnx.h"

namespace nibble {
namespace {

// Restores the real target set when a test ends.
struct TargetGuard {
  ~TargetGuard() { hwy::SetSupportedTargetsForTest(0); }
};

std::vector<int64_t> CompiledTargets() {
  hwy::SetSupportedTargetsForTest(0);
  return hwy::SupportedAndGeneratedTargets();
}

// Switches dispatch to `target` and checks that it really switched.
void UseTarget(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  REQUIRE(std::string(ActiveTarget()) == hwy::TargetName(target));
}

TEST_CASE("dispatch follows SetSupportedTargetsForTest for every compiled target") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  CHECK(targets.size() >= 2);  // at least one SIMD target plus the fallback
  for (int64_t t : targets) UseTarget(t);
  MESSAGE("targets: " << [&] {
    std::string s;
    for (int64_t t : targets) s += std::string(hwy::TargetName(t)) + " ";
    return s;
  }());
}

TEST_CASE("SelectTarget switches every kernel to a named target and back") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  const std::vector<std::string> names = AvailableTargets();
  REQUIRE(names.size() == targets.size());
  CHECK(names.front() == ActiveTarget());  // best first
  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(names[i] == hwy::TargetName(targets[i]));
    std::string lower = names[i];
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    REQUIRE(SelectTarget(lower));
    CHECK(std::string(ActiveTarget()) == names[i]);
    CHECK(AvailableTargets() == names);  // the list ignores the selection
  }
  CHECK_FALSE(SelectTarget("NOT_A_TARGET"));
  CHECK(std::string(ActiveTarget()) == names.back());  // unchanged by a bad name
  REQUIRE(SelectTarget(""));
  CHECK(std::string(ActiveTarget()) == names.front());
}

TEST_CASE("TransposeTile writes every element at its transposed place, nothing else") {
  TargetGuard guard;
  std::mt19937 rng(7);
  // Whole AVX-512 blocks (32 x 32 / 16 x 16), SSE2 pieces, ragged edges,
  // one row / column; source rows packed or with a gap after each; output
  // rows 64-byte aligned (streamed when asked) or not.
  const int64_t sizes[] = {1, 3, 8, 16, 17, 32, 33, 64, 80};
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    for (const size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
      for (const int64_t nr : sizes) {
        for (const int64_t nc : sizes) {
          for (const size_t pad : {size_t{0}, size_t{16}, size_t{2}}) {
            // (Three in four: a 12-byte gap after each source row; two in
            // three: streamed stores allowed.)
            const size_t src_ld = static_cast<size_t>(nc) * elem + (rng() % 4 != 0 ? 12 : 0);
            const bool stream = rng() % 3 != 0;
            std::vector<uint8_t> src(static_cast<size_t>(nr) * src_ld);
            for (auto& b : src) b = static_cast<uint8_t>(rng());
            // Output rows of at least nr + 5 elements, whole lines (pad 0:
            // every row 64-byte aligned) or pad bytes more: the bytes
            // between the runs must stay as they were.
            const size_t ld = ((static_cast<size_t>(nr) + 5) * elem + 63) / 64 * 64 + pad;
            std::vector<uint8_t> dst(static_cast<size_t>(nc) * ld + 128, 0xA5);
            uint8_t* const base = dst.data() + (64 - reinterpret_cast<uintptr_t>(dst.data()) % 64);
            std::vector<uint8_t> want(dst);
            uint8_t* const wbase = want.data() + (base - dst.data());
            for (int64_t c = 0; c < nc; ++c) {
              for (int64_t j = 0; j < nr; ++j) {
                std::memcpy(
                    wbase + static_cast<size_t>(c) * ld + static_cast<size_t>(j) * elem,
                    src.data() + static_cast<size_t>(j) * src_ld + static_cast<size_t>(c) * elem,
                    elem);
              }
            }
            TransposeTile(src.data(), src_ld, nr, nc, elem, base, ld, stream);
            StreamFence();
            CHECK_MESSAGE(dst == want, hwy::TargetName(target)
                                           << " elem " << elem << " tile " << nr << " x " << nc
                                           << " src_ld " << src_ld << " ld " << ld << " stream "
                                           << stream);
          }
        }
      }
    }
  }
}

// Weights written transposed (MatMulNBits' [N, K] as MatMul's [K, N],
// gpt-oss experts [E, R, K] as [E, K, R]): dense 4-bit codes from their
// code words transposed into PMX int4x8 tiles (WriteCodesTransposed) where
// rows start on words, else through transposed output tiles. Either way,
// every target and thread count writes the view's values (the tile API's)
// transposed, byte for byte; whole outputs and row ranges (RunRows), which
// start off the groups.
TEST_CASE("4-bit weights written transposed == the view's values transposed, every target") {
  TargetGuard guard;
  std::mt19937 rng(11);
  struct Case {
    DType xt;
    int64_t batches, r, k, block;
    bool zp;
    OutType out;
    // Scales: 0 any; 1 powers of two whose values are normal in the output
    // type (DequantizeTransposedPow2 writes them); 2 powers of two beyond
    // that and negative ones too (the tiles with one go the other way); 3
    // and 4 powers of two at the edges of the range k_lo .. k_hi of 2^k
    // keeping every nonzero value normal in the output type: 3 k_lo,
    // k_hi, k_hi + 1; 4 k_lo - 1, k_lo, k_hi (so one past either edge
    // taken as in range gives wrong bits); 5 positive powers of two in
    // range and about one scale in 1024 1.5 times one (not 2^k: a panel of
    // rows with one goes the other way).
    int pow2 = 0;
    int k_lo = 0, k_hi = 0;
  };
  const Case cases[] = {
      {DType::kFloat4E2M1, 3, 40, 96, 32, false, OutType::kBF16},   // gpt-oss experts
      {DType::kFloat4E2M1, 2, 37, 1088, 32, false, OutType::kF16},  // bands past 512
      {DType::kUInt4, 1, 48, 256, 16, true, OutType::kF32},         // MatMulNBits
      {DType::kInt4, 1, 33, 640, 128, false, OutType::kBF16},
      {DType::kUInt4, 1, 17, 96, 12, true, OutType::kF16},
      {DType::kUInt4, 1, 20, 100, 20, true, OutType::kF32},  // rows off words: output tiles
      {DType::kFloat4E2M1, 1, 1024, 1024, 32, false, OutType::kF32},  // 4 MiB: streamed
      // Tiles of 1024 view rows: three a band, the last of 52 (strips of
      // 16 rows and one of 4).
      {DType::kFloat4E2M1, 1, 2100, 1024, 32, false, OutType::kBF16},
      // Integer zero points, groups of 32 and 64.
      {DType::kUInt4, 1, 99, 320, 32, true, OutType::kF16},
      {DType::kUInt4, 2, 64, 192, 64, true, OutType::kBF16},
      {DType::kInt4, 1, 64, 512, 256, false, OutType::kF32},
      // One view row (such a tile was written as its [1, nc] view: wrong
      // values before 2026-12-02), and 1025 rows: on one thread a last
      // tile of one row (tiles of 1024 rows x 512 columns).
      {DType::kFloat4E2M1, 1, 1, 640, 128, false, OutType::kBF16},
      {DType::kInt4, 1, 1, 640, 128, false, OutType::kF16},
      {DType::kFloat4E2M1, 1, 1025, 1024, 32, false, OutType::kF32},
      {DType::kUInt4, 1, 2048, 1024, 32, true, OutType::kF16},  // streamed
      // Power-of-two scales (gpt-oss's e8m0): rows in the kernel's blocks
      // of 32 (16-bit) or 16 (float32) and the rest the other way; whole
      // tiles the other way where a scale is out of the type's range.
      {DType::kFloat4E2M1, 3, 40, 96, 32, false, OutType::kBF16, 1},
      {DType::kFloat4E2M1, 2, 37, 1088, 32, false, OutType::kF16, 1},
      {DType::kFloat4E2M1, 1, 1024, 1024, 32, false, OutType::kF32, 1},
      {DType::kFloat4E2M1, 1, 2100, 1024, 32, false, OutType::kBF16, 1},
      {DType::kFloat4E2M1, 1, 2048, 1024, 32, false, OutType::kF16, 1},
      {DType::kFloat4E2M1, 1, 2048, 512, 32, false, OutType::kF16, 2},
      {DType::kFloat4E2M1, 1, 1030, 512, 32, false, OutType::kBF16, 2},
      {DType::kInt4, 1, 64, 512, 256, false, OutType::kF32, 1},
      {DType::kUInt4, 1, 96, 256, 64, false, OutType::kBF16, 1},
      {DType::kInt4, 2, 50, 136, 8, false, OutType::kF16, 1},
      // The range's edges: e2m1 values 0.5 .. 6 (2^-1 .. 1.5 * 2^2), int4
      // 1 .. 8 in magnitude.
      {DType::kFloat4E2M1, 1, 256, 256, 32, false, OutType::kF16, 3, -13, 13},
      {DType::kFloat4E2M1, 1, 256, 256, 32, false, OutType::kF16, 4, -13, 13},
      {DType::kFloat4E2M1, 1, 256, 256, 32, false, OutType::kBF16, 3, -125, 125},
      {DType::kFloat4E2M1, 1, 256, 256, 32, false, OutType::kBF16, 4, -125, 125},
      {DType::kFloat4E2M1, 1, 256, 256, 32, false, OutType::kF32, 3, -125, 125},
      {DType::kFloat4E2M1, 1, 256, 256, 32, false, OutType::kF32, 4, -125, 125},
      {DType::kInt4, 1, 256, 256, 32, false, OutType::kF16, 3, -14, 12},
      {DType::kInt4, 1, 256, 256, 32, false, OutType::kF16, 4, -14, 12},
      // Rows wider than the 4096 columns a chunk of the whole-row path
      // takes (two chunks, the second off 128), alone and with the panels
      // the kernel leaves (scales not all 2^k) written the other way.
      {DType::kFloat4E2M1, 1, 300, 4160, 32, false, OutType::kF16, 1},
      {DType::kFloat4E2M1, 2, 150, 4192, 32, false, OutType::kBF16, 5},
      {DType::kInt4, 1, 272, 4352, 64, false, OutType::kF32, 5},
      // Scales that are not all 2^k, every one positive.
      {DType::kFloat4E2M1, 1, 512, 256, 32, false, OutType::kF16, 5},
      {DType::kFloat4E2M1, 1, 512, 256, 32, false, OutType::kBF16, 5},
      {DType::kFloat4E2M1, 1, 512, 256, 32, false, OutType::kF32, 5},
  };
  // And shapes drawn at random: 1 to 70 rows a batch, columns off words and
  // off blocks, blocks of 8 to 128 (and 24), any of the three outputs.
  std::vector<Case> all(std::begin(cases), std::end(cases));
  for (int i = 0; i < 24; ++i) {
    static constexpr DType kTypes[] = {DType::kFloat4E2M1, DType::kUInt4, DType::kInt4};
    static constexpr int64_t kBlocks[] = {8, 16, 24, 32, 64, 128};
    Case c{};
    c.xt = kTypes[rng() % 3];
    c.batches = 1 + static_cast<int64_t>(rng() % 3);
    c.r = 1 + static_cast<int64_t>(rng() % 70);
    c.k = 8 * (2 + static_cast<int64_t>(rng() % 80)) -
          (rng() % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 7) : 0);
    c.block = kBlocks[rng() % 6];
    c.zp = c.xt != DType::kFloat4E2M1 && rng() % 2 == 0;
    c.out = static_cast<OutType>(rng() % 3);
    c.pow2 = static_cast<int>(rng() % 3);
    all.push_back(c);
  }
  int64_t compared = 0;
  for (const Case& tc : all) {
    const int64_t rows = tc.batches * tc.r, k = tc.k, ng = (k + tc.block - 1) / tc.block;
    std::vector<uint8_t> x(static_cast<size_t>((rows * k + 1) / 2));
    for (auto& b : x) b = static_cast<uint8_t>(rng());
    std::vector<float> s(static_cast<size_t>(rows * ng));
    // (Exponents: f16 values of int4 codes up to 8 stay normal for 2^-12
    // to 2^12, float32 / bfloat16 ones for 2^-120 to 2^120.)
    const unsigned k_max = tc.out == OutType::kF16 ? 12 : 120;
    const unsigned k_wide = tc.out == OutType::kF16 ? 20 : 126;
    auto exponent = [&](unsigned m) {
      return static_cast<int>(rng() % (2 * m + 1)) - static_cast<int>(m);
    };
    for (auto& v : s) {
      if (tc.pow2 == 0) {
        v = std::ldexp(static_cast<float>(rng() % 200) - 100.0f, -7);
      } else if (tc.pow2 == 1) {
        v = std::ldexp(1.0f, exponent(k_max));
      } else if (tc.pow2 == 5) {
        v = std::ldexp(rng() % 1024 == 0 ? 1.5f : 1.0f, exponent(k_max));
      } else if (tc.pow2 >= 3) {
        const int edges[2][3] = {{tc.k_lo, tc.k_hi, tc.k_hi + 1}, {tc.k_lo - 1, tc.k_lo, tc.k_hi}};
        v = std::ldexp(1.0f, edges[tc.pow2 - 3][rng() % 3]);
      } else {
        const bool wide = rng() % 64 == 0;
        v = std::ldexp(rng() % 128 == 0 ? -1.0f : 1.0f, exponent(wide ? k_wide : k_max));
      }
    }
    std::vector<uint8_t> z(static_cast<size_t>((rows * ng + 1) / 2));
    for (auto& b : z) b = static_cast<uint8_t>(rng());
    OnnxDequantizeAttributes a;
    a.axis = 1;
    a.block_size = tc.block;
    a.has_axis = a.has_block_size = true;
    const TensorView xv{tc.xt, {rows, k}, x.data(), x.size()};
    const TensorView sv{DType::kFloat32, {rows, ng}, s.data(), s.size() * 4};
    const TensorView zv{tc.xt, {rows, ng}, z.data(), z.size()};
    DequantizeOptions o;
    o.convert_output = DTypeOfOut(tc.out);
    const size_t eb = static_cast<size_t>(OutBytes(tc.out));
    for (int64_t target : CompiledTargets()) {
      UseTarget(target);
      auto view = PrepareOnnx(a, xv, sv, tc.zp ? &zv : nullptr, o);
      auto d = PrepareOnnx(a, xv, sv, tc.zp ? &zv : nullptr, o);
      REQUIRE_MESSAGE(d.ok(), d.status().message());
      if (tc.batches > 1) {
        d->TransposeOutputBatches(tc.batches);
      } else {
        d->TransposeOutput();
      }
      std::vector<uint8_t> v(static_cast<size_t>(rows * k) * eb);
      REQUIRE(view->RunTile(0, rows, 0, k, v.data(), k).ok());
      // Output row c of batch b: view column c of rows [b r, (b + 1) r).
      std::vector<uint8_t> want(v.size());
      for (int64_t b = 0; b < tc.batches; ++b) {
        for (int64_t c = 0; c < k; ++c) {
          for (int64_t j = 0; j < tc.r; ++j) {
            std::memcpy(&want[static_cast<size_t>((b * k + c) * tc.r + j) * eb],
                        &v[static_cast<size_t>((b * tc.r + j) * k + c) * eb], eb);
          }
        }
      }
      for (int threads : {1, 2, 3}) {
        // On a 64-byte line (so that large outputs are streamed).
        std::vector<uint8_t> y_buf(v.size() + 64, 0xA5);
        uint8_t* const y =
            y_buf.data() + (64 - reinterpret_cast<uintptr_t>(y_buf.data()) % 64) % 64;
        REQUIRE(
            d->Run(MutableTensorView{DTypeOfOut(tc.out), d->output().shape, y, v.size()}, threads)
                .ok());
        CHECK_MESSAGE(std::memcmp(y, want.data(), want.size()) == 0,
                      hwy::TargetName(target) << " " << DTypeName(tc.xt) << " " << tc.batches << "x"
                                              << tc.r << "x" << k << " block " << tc.block
                                              << " pow2 " << tc.pow2 << " threads " << threads);
        // Output rows [r0, r1): whole batches, or view columns from 8
        // (off a group unless the block is 8) to k - 3 (off a word).
        const int64_t n0 = d->output().shape[0];
        const int64_t r0 = tc.batches > 1 ? 1 : 8, r1 = tc.batches > 1 ? 2 : k - 3;
        const size_t per = want.size() / static_cast<size_t>(n0);
        std::vector<uint8_t> part(static_cast<size_t>(r1 - r0) * per, 0xA5);
        REQUIRE(d->RunRows(r0, r1, part.data(), part.size(), threads).ok());
        CHECK_MESSAGE(
            std::memcmp(part.data(), &want[static_cast<size_t>(r0) * per], part.size()) == 0,
            hwy::TargetName(target) << " rows [" << r0 << ", " << r1 << ") threads " << threads);
        ++compared;
      }
    }
  }
  CHECK(compared == static_cast<int64_t>(all.size() * CompiledTargets().size() * 3));
}

// The kernel reads a view row's scales at s_outer / s_axis: row-major
// [rows, groups] (what every front end makes for these plans), [groups,
// rows] (s_axis = rows) and one per row (s_axis 0: PMX per-channel).
TEST_CASE(
    "DequantizeTransposedPow2 at any scale strides == the reference transposed, every target") {
  TargetGuard guard;
  std::mt19937 rng(5);
  constexpr int64_t kR = 96, kK = 640, kG = 32, kNg = kK / kG;  // (20 groups: 16 + 4)
  std::vector<uint8_t> codes(static_cast<size_t>(kR * kK / 2));
  for (auto& b : codes) b = static_cast<uint8_t>(rng());
  struct Strides {
    int64_t s_outer, s_axis, count;
  };
  const Strides strides[] = {{kNg, 1, kR * kNg}, {1, kR, kNg * kR}, {1, 0, kR}};
  int64_t whole = 0;
  for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
    const size_t eb = static_cast<size_t>(OutBytes(out));
    for (const Strides& st : strides) {
      // (2^-12 .. 2^12: every e2m1 value times one is normal in float16)
      std::vector<float> scales(static_cast<size_t>(st.count));
      for (auto& v : scales) v = std::ldexp(1.0f, static_cast<int>(rng() % 25) - 12);
      Plan p;
      p.layout = Layout::kDense;
      p.code = CodeKind::kF4E2M1;
      p.codes = codes.data();
      p.outer = kR;
      p.axis = kK;
      p.group = kG;
      p.s_outer = st.s_outer;
      p.s_axis = st.s_axis;
      p.scale = scales.data();
      p.out = out;
      std::vector<uint8_t> ref(static_cast<size_t>(kR * kK) * eb);
      DequantizeTileReference(p, 0, kR, 0, kK, ref.data(), kK);
      for (int64_t target : CompiledTargets()) {
        UseTarget(target);
        std::vector<int32_t> scratch(static_cast<size_t>(2 * (kNg + 1) * 128));
        std::vector<uint8_t> y(ref.size(), 0xA5);
        const int64_t done =
            DequantizeTransposedPow2(p, 0, kR, 0, kK, scratch.data(), y.data(), kR, false);
        REQUIRE(done >= 0);
        REQUIRE(done <= kR);
        whole += done == kR;
        int64_t wrong = 0;
        for (int64_t c = 0; c < kK; ++c) {
          for (int64_t r = 0; r < done; ++r) {
            wrong += std::memcmp(&y[static_cast<size_t>(c * kR + r) * eb],
                                 &ref[static_cast<size_t>(r * kK + c) * eb], eb) != 0;
          }
        }
        CHECK_MESSAGE(wrong == 0, hwy::TargetName(target)
                                      << " out " << static_cast<int>(out) << " s_outer "
                                      << st.s_outer << " s_axis " << st.s_axis);
      }
    }
  }
  // (An x86-64 build compiles AVX2 and AVX-512: the 16-bit outputs at least
  // go this way on every machine with AVX2.)
#if HWY_ARCH_X86
  if (hwy::SupportedTargets() & HWY_AVX2) CHECK(whole >= 6);
#endif
}

TEST_CASE(
    "bench yardsticks: StreamFill / StreamReadWrite write the fill pattern, read every byte") {
  TargetGuard guard;
  std::mt19937_64 rng(7);
  std::vector<unsigned char> src(70000 + 64);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  for (int64_t t : CompiledTargets()) {
    UseTarget(t);
    for (size_t out_bytes : {size_t{0}, size_t{5}, size_t{64}, size_t{1000}, size_t{65537}}) {
      for (size_t out_at : {size_t{0}, size_t{3}}) {
        // Both outputs at the same address modulo 64 (the fill's pattern
        // starts at the first whole vector).
        std::vector<unsigned char> want_buf(out_bytes + 192, 0xEE), got_buf(out_bytes + 192, 0xEE);
        const auto at64 = [&](std::vector<unsigned char>& v) {
          const size_t pad = (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
          return v.data() + 64 + pad + out_at;
        };
        unsigned char* const want = at64(want_buf);
        unsigned char* const got = at64(got_buf);
        StreamFill(want, out_bytes);
        // The fill pattern: zeros where no whole vector fits at the ends,
        // float 1.0 in every 4-byte word of the vector-aligned body (which
        // covers every whole 64-byte-aligned line), nothing outside.
        const float one = 1.0f;
        unsigned char one_bytes[4];
        std::memcpy(one_bytes, &one, 4);
        size_t bad = 0;
        for (size_t i = 0; i < out_bytes; ++i) {
          const auto a = reinterpret_cast<uintptr_t>(want + i);
          const unsigned char one_byte = one_bytes[a % 4];
          const bool line = (a & ~uintptr_t{63}) >= reinterpret_cast<uintptr_t>(want) &&
                            (a | 63) + 1 <= reinterpret_cast<uintptr_t>(want + out_bytes);
          if (line ? want[i] != one_byte : (want[i] != 0 && want[i] != one_byte)) ++bad;
        }
        CHECK(bad == 0);
        CHECK(want[out_bytes] == 0xEE);
        CHECK(*(want - 1) == 0xEE);
        for (size_t in_bytes :
             {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{4099}, size_t{70000}}) {
          for (size_t in_at : {size_t{0}, size_t{5}}) {
            CAPTURE(out_bytes);
            CAPTURE(out_at);
            CAPTURE(in_bytes);
            CAPTURE(in_at);
            std::fill(got_buf.begin(), got_buf.end(), static_cast<unsigned char>(0xEE));
            // Every input byte, as the little-endian 32-bit words it is part of.
            uint32_t x = 0;
            for (size_t i = 0; i < in_bytes; ++i) {
              x ^= static_cast<uint32_t>(src[in_at + i]) << (8 * (i % 4));
            }
            CHECK(StreamReadWrite(src.data() + in_at, in_bytes, got, out_bytes) == x);
            CHECK(std::memcmp(got - out_at, want - out_at, out_bytes + 64) == 0);
            // Read only (the matmul bench's yardstick): no output at all.
            CHECK(StreamReadWrite(src.data() + in_at, in_bytes, nullptr, 0) == x);
          }
        }
      }
    }
  }
}

// Awkward scale values: the arithmetic is plain IEEE, including the
// float16 / bfloat16 overflow, subnormal and NaN paths of the rounding.
float RandomScale(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 41);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  switch (pick(rng)) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return std::numeric_limits<float>::infinity();
    case 2:
      return -std::numeric_limits<float>::infinity();
    case 3:
      return 0.0f;
    case 4:
      return 1e-40f;  // float32 subnormal
    case 5:
      return 3e-6f;  // products land in float16 subnormals
    case 6:
      return 9000.0f;  // products overflow float16
    case 7:
      return 6.5e37f;  // products overflow float32 / bfloat16
    case 8:
      return F32FromBits(0x3F808000u);  // bfloat16 ties
    case 9:
      // NaNs whose products keep a payload that rounding to bfloat16
      // would carry out of the high half (to -0 / +0): only the NaN case
      // of the rounding keeps them NaN.
      return F32FromBits(rng() % 2 == 0 ? 0x7FFFFFFFu : 0xFFFFE000u);
    default:
      return u(rng);
  }
}

struct PlanData {
  Plan plan;
  std::vector<uint8_t> codes;
  std::vector<float> scale, zpf;
  std::vector<int32_t> zpi, axis_group;
};

// Plan::normal_values and Plan::finite_values as op/ sets them
// (Dequantizer): the plan's codes and zero points allow them and none of
// `scale` (the plan's scales) is a float32 subnormal / NaN or infinite.
// Drawn from rng: whether subnormal scales first become FLT_MIN, the
// smallest normal, whose products are the smallest values normal_values
// allows, and whether NaN and infinite scales first become -FLT_MAX and
// +-FLT_MAX, whose products overflow to infinity (the largest values
// finite_values allows). Returns normal_values.
bool SetValueFacts(Plan* p, std::vector<float>* scale, std::mt19937_64& rng) {
  auto subnormal = [](float v) { return v != 0.0f && std::fabs(v) < FLT_MIN; };
  auto finite = [](float v) { return std::isfinite(v); };
  if (rng() % 2 == 0) {
    for (auto& v : *scale) {
      if (subnormal(v)) v = std::copysign(FLT_MIN, v);
    }
  }
  if (rng() % 2 == 0) {
    for (auto& v : *scale) {
      if (!finite(v)) v = std::isnan(v) ? -FLT_MAX : std::copysign(FLT_MAX, v);
    }
  }
  p->normal_values =
      p->ValuesFollowScales() && std::none_of(scale->begin(), scale->end(), subnormal);
  p->finite_values = p->ValuesFollowScales() && std::all_of(scale->begin(), scale->end(), finite);
  return p->normal_values;
}

// kDenseHigh: kDense's view with kDenseHighNibbles (bitsandbytes order).
enum class Form { kPmxAxis1, kPmxAxis0, kDense, kDenseHigh };

// Table codes (kTable4): 16 values with a signed zero, a subnormal and ties.
const float kTestTable[16] = {-1.0f,  -0.6961928f, -0.5f, -0.0f,  0.0f, 1e-40f, 0.0625f, 0.3f,
                              0.441f, 0.5626170f,  1.0f,  -12.0f, 3.0f, -0.25f, 8.5f,    65504.0f};

// A random plan of the given form. cols is the row length of the 2-D view.
PlanData MakePlan(std::mt19937_64& rng, Form form, CodeKind code, int interleave, int64_t rows,
                  int64_t cols, int64_t group, ZeroPointKind zp, OutType out, int per_elem) {
  PlanData d;
  Plan& p = d.plan;
  p.code = code;
  p.out = out;
  p.zp_kind = zp;
  // No offset with an integer zero point or float codes; otherwise the
  // typical offset or, one time in three, none (signed codes without a zero
  // point: PMX / ONNX int8), which kernels may special-case.
  p.code_offset = zp == ZeroPointKind::kInteger || CodeIsFloat(code) || rng() % 3 == 0
                      ? 0
                      : (code == CodeKind::kU4 ? 8 : 3);
  if (code == CodeKind::kTable4) p.code_values = kTestTable;
  const bool dense = form == Form::kDense || form == Form::kDenseHigh;
  if (form == Form::kDenseHigh) p.layout = Layout::kDenseHighNibbles;
  if (form == Form::kPmxAxis1 || (dense && per_elem == 0)) {
    // Groups along the row: [outer = rows, axis = cols, inner = 1].
    p.outer = rows;
    p.axis = cols;
    p.inner = 1;
    p.group = group;
    const int64_t nb = (cols + group - 1) / group;  // ragged last group allowed
    p.s_axis = 1;
    p.s_outer = nb;
    p.s_inner = 0;
    d.scale.resize(static_cast<size_t>(rows * nb));
    if (dense && rng() % 4 == 0) {
      // A group map along the row (compressed-tensors act-order g_idx).
      d.axis_group.resize(static_cast<size_t>(cols));
      for (auto& g : d.axis_group) g = static_cast<int32_t>(rng() % static_cast<uint64_t>(nb));
      p.axis_group = d.axis_group.data();
    }
  } else {
    // Scales vary along the row (per_elem 1) or are constant (2):
    // [outer = 1, axis = rows, inner = cols].
    p.outer = 1;
    p.axis = rows;
    p.inner = cols;
    p.group = group;
    const int64_t nb = (rows + group - 1) / group;
    p.s_outer = 0;
    p.s_axis = per_elem == 1 ? cols : 1;
    p.s_inner = per_elem == 1 ? 1 : 0;
    d.scale.resize(static_cast<size_t>(per_elem == 1 ? nb * cols : nb));
  }
  const int64_t e = rows * cols;
  if (interleave > 1) {
    p.layout = Layout::kPmxWords;
    p.interleave = interleave;
    p.interleave_row = cols;  // PMX: one dim-0 index per row of the view
  }
  d.codes.resize(static_cast<size_t>((e * CodeBits(code) + 7) / 8));
  for (auto& b : d.codes) b = static_cast<uint8_t>(rng());
  for (auto& s : d.scale) s = RandomScale(rng);
  if (zp == ZeroPointKind::kInteger) {
    d.zpi.resize(d.scale.size());
    for (auto& z : d.zpi) z = static_cast<int32_t>(rng() % 300) - 150;
    p.zp_int = d.zpi.data();
  } else if (zp == ZeroPointKind::kFloat) {
    d.zpf.resize(d.scale.size());
    for (auto& z : d.zpf) z = RandomScale(rng);
    p.zp_float = d.zpf.data();
  }
  p.codes = d.codes.data();
  p.scale = d.scale.data();
  return d;
}

// The reference of a plan's whole view, computed once and sliced for each
// tile compared against it (the reference is a function of each element's
// position: SPEC.md). Contract: the plan's values — codes, parameters,
// output type, shape — stay as they were at construction while it is used;
// what only chooses how a kernel runs (nontemporal, column_order, fetch)
// and the dispatched target may change.
class ViewReference {
 public:
  explicit ViewReference(const Plan& plan)
      : cols_(plan.cols()),
        ob_(OutBytes(plan.out)),
        bytes_(static_cast<size_t>(plan.rows() * cols_ * ob_)) {
    DequantizeTileReference(plan, 0, plan.rows(), 0, cols_, bytes_.data(), cols_);
  }
  // Writes the reference of tile [r0,r1) x [c0,c1) at dst, rows ld elements
  // apart (the bytes between rows untouched).
  void Tile(int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* dst, int64_t ld) const {
    for (int64_t r = r0; r < r1; ++r) {
      std::memcpy(dst + (r - r0) * ld * ob_, bytes_.data() + (r * cols_ + c0) * ob_,
                  static_cast<size_t>((c1 - c0) * ob_));
    }
  }

 private:
  int64_t cols_, ob_;
  std::vector<uint8_t> bytes_;
};

// Runs tile [r0,r1) x [c0,c1) through the dispatched kernel and the
// reference (computed for the tile, or sliced from `ref`, the same plan's
// ViewReference) into sentinel-filled buffers; returns a description of
// the first difference, or "".
std::string CompareTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        int64_t ld, int64_t misalign_bytes, const ViewReference* ref = nullptr) {
  const int64_t ob = OutBytes(plan.out);
  const size_t bytes = static_cast<size_t>(((r1 - r0) * ld + 16) * ob + 128);
  std::vector<uint8_t> a(bytes, 0xA5), b(bytes, 0xA5);
  // Offset the output start by misalign_bytes (a multiple of the element size).
  DequantizeTile(plan, r0, r1, c0, c1, a.data() + 64 + misalign_bytes, ld);
  if (ref != nullptr) {
    ref->Tile(r0, r1, c0, c1, b.data() + 64 + misalign_bytes, ld);
  } else {
    DequantizeTileReference(plan, r0, r1, c0, c1, b.data() + 64 + misalign_bytes, ld);
  }
  if (a == b) return "";
  // Element-wise: equal bits, or both NaN (SPEC.md §1: NaN matches NaN; the
  // sign/payload of a NaN depends on operand order).
  auto is_nan = [&](const uint8_t* p) {
    if (ob == 4) {
      uint32_t u;
      std::memcpy(&u, p, 4);
      return (u & 0x7FFFFFFFu) > 0x7F800000u;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return plan.out == OutType::kF16 ? (h & 0x7FFF) > 0x7C00 : (h & 0x7FFF) > 0x7F80;
  };
  const size_t base = static_cast<size_t>(64 + misalign_bytes);
  for (size_t k = 0; k < bytes; ++k) {
    if (a[k] == b[k]) continue;
    const int64_t off = static_cast<int64_t>(k) - static_cast<int64_t>(base);
    const int64_t elem = off >= 0 ? off / ob : -1;
    if (elem >= 0) {
      const size_t start = base + static_cast<size_t>(elem * ob);
      if (start + static_cast<size_t>(ob) <= bytes && is_nan(&a[start]) && is_nan(&b[start])) {
        continue;
      }
    }
    return "first differing byte at output offset " + std::to_string(off) + " (element " +
           std::to_string(elem) + "): kernel " + std::to_string(a[k]) + ", reference " +
           std::to_string(b[k]);
  }
  return "";
}

// A random tile of a rows x cols view for Plan::dot: r0 a multiple of
// row_unit, c0 of col_unit, each end anywhere after its start.
struct DotTile {
  int64_t r0, r1, c0, c1;
};
DotTile RandomDotTile(std::mt19937_64& rng, int64_t rows, int64_t cols, int64_t row_unit,
                      int64_t col_unit) {
  auto below = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  DotTile t;
  t.r0 = below(rows) / row_unit * row_unit;
  t.r1 = t.r0 + 1 + below(rows - t.r0);
  t.c0 = below(cols) / col_unit * col_unit;
  t.c1 = t.c0 + 1 + below(cols - t.c0);
  return t;
}

// Plan::dot on tile [r0, r1) x [c0, c1) of a float32 plan: the kernels
// either fuse — the sums, from random starting values, == the reference
// tile's AccumulateDotRowsReference with one row of random X — and write
// nothing, or write the tile as without (== the reference) and leave the
// sums. (The matmul asks for up to 4 rows of X, 8 by columns; 1-9 here:
// past the column kernels' limit, the row kernels having none.) Returns a description of the first
// difference ("" if none); *fused counts the fused calls. With `columns` (Plan::Dot::columns) the
// view's columns are the weight's rows: AccumulateDotColsReference.
std::string CompareDot(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                       std::mt19937_64& rng, int64_t* fused, int64_t rows_of_x = 0,
                       bool columns = false) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  const int64_t features = columns ? cols : rows, k = columns ? rows : cols;
  // 1 to 9 rows of X (or rows_of_x), their leading dimension past K.
  const int64_t m = rows_of_x > 0 ? rows_of_x : 1 + static_cast<int64_t>(rng() % 9),
                ldx = k + static_cast<int64_t>(rng() % 3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(m * ldx)),
      sums(static_cast<size_t>(m * features * kDotLanes));
  for (auto& v : x) v = u(rng);
  for (auto& v : sums) v = u(rng);
  std::vector<float> want_tile(static_cast<size_t>(rows * cols)), want_sums = sums;
  DequantizeTileReference(plan, r0, r1, c0, c1, want_tile.data(), cols);
  if (columns) {
    AccumulateDotColsReference(x.data(), m, ldx, want_tile.data(), cols, cols, rows,
                               want_sums.data());
  } else {
    AccumulateDotRowsReference(x.data(), m, ldx, want_tile.data(), rows, cols, cols,
                               want_sums.data());
  }
  const float sentinel = -1234.5f;
  std::vector<float> tile(static_cast<size_t>(rows * cols), sentinel), got_sums = sums;
  bool done = false;
  Plan::Dot dot{x.data(), m, ldx, got_sums.data(), &done};
  dot.columns = columns;
  Plan p = plan;
  p.dot = &dot;
  DequantizeTile(p, r0, r1, c0, c1, tile.data(), cols);
  // Equal bits, or both NaN (the sign / payload of a NaN sum depends on
  // operand order).
  auto same = [](float a, float b) {
    return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b));
  };
  if (done) {
    ++*fused;
    for (size_t i = 0; i < tile.size(); ++i) {
      if (std::memcmp(&tile[i], &sentinel, 4) != 0) return "fused, yet tile element written";
    }
    for (size_t i = 0; i < sums.size(); ++i) {
      if (!same(got_sums[i], want_sums[i])) {
        return "fused sum " + std::to_string(i) + ": " + std::to_string(got_sums[i]) +
               ", reference " + std::to_string(want_sums[i]);
      }
    }
    return "";
  }
  if (std::memcmp(got_sums.data(), sums.data(), 4 * sums.size()) != 0) {
    return "not fused, yet sums changed";
  }
  for (size_t i = 0; i < tile.size(); ++i) {
    if (!same(tile[i], want_tile[i])) return "not fused: tile element " + std::to_string(i);
  }
  return "";
}

TEST_CASE("every kernel x every target == scalar reference, with sentinels") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  // Sizes around the vector lengths (4, 8, 16 float lanes; units of 2N) and
  // the group size.
  const int64_t col_sizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 65, 100, 130, 421};
  struct Layout {
    Form form;
    CodeKind code;
    int interleave;
    const char* name;
  };
  const Layout layouts[] = {
      {Form::kPmxAxis1, CodeKind::kU4, 4, "int4x4 groups along row"},
      {Form::kPmxAxis1, CodeKind::kU4, 8, "int4x8 groups along row"},
      {Form::kPmxAxis0, CodeKind::kU4, 4, "int4x4 scales along row"},
      {Form::kPmxAxis0, CodeKind::kU4, 8, "int4x8 scales along row"},
      {Form::kDense, CodeKind::kU4, 1, "dense uint4"},
      {Form::kDense, CodeKind::kS4, 1, "dense int4"},
      {Form::kDense, CodeKind::kU8, 1, "uint8"},
      {Form::kDense, CodeKind::kS8, 1, "int8"},
      {Form::kDense, CodeKind::kU16, 1, "uint16"},
      {Form::kDense, CodeKind::kS16, 1, "int16"},
      {Form::kDense, CodeKind::kU2, 1, "uint2"},
      {Form::kDense, CodeKind::kS2, 1, "int2"},
      {Form::kDense, CodeKind::kS32, 1, "int32"},
      {Form::kDense, CodeKind::kF8E4M3FN, 1, "float8e4m3fn"},
      {Form::kDense, CodeKind::kF8E4M3FNUZ, 1, "float8e4m3fnuz"},
      {Form::kDense, CodeKind::kF8E5M2, 1, "float8e5m2"},
      {Form::kDense, CodeKind::kF8E5M2FNUZ, 1, "float8e5m2fnuz"},
      {Form::kDense, CodeKind::kF4E2M1, 1, "float4e2m1"},
      {Form::kDense, CodeKind::kTable4, 1, "dense table4"},
      {Form::kDenseHigh, CodeKind::kTable4, 1, "high-nibble-first table4 (bitsandbytes)"},
      {Form::kDenseHigh, CodeKind::kU4, 1, "high-nibble-first uint4"},
      {Form::kPmxAxis0, CodeKind::kU8, 4, "8-bit fields x4 words (GPTQ 8-bit)"},
      {Form::kPmxAxis1, CodeKind::kU8, 4, "8-bit fields x4 words, groups along row"},
      {Form::kPmxAxis0, CodeKind::kU2, 16, "2-bit fields x16 words (GPTQ 2-bit)"},
  };
  // NIBBLE_TEST_SEED varies the grid's random draws (default: fixed).
  const char* seed_env = std::getenv("NIBBLE_TEST_SEED");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : 2026;
  std::mt19937_64 rng(seed);
  int64_t compared = 0, normal_plans = 0, finite_plans = 0, fused = 0, fused_avx2 = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    const int64_t fused_before = fused;
    for (const Layout& l : layouts) {
      for (int64_t cols : col_sizes) {
        for (ZeroPointKind zp :
             {ZeroPointKind::kNone, ZeroPointKind::kInteger, ZeroPointKind::kFloat}) {
          if (CodeIsFloat(l.code) && zp != ZeroPointKind::kNone) continue;
          for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
            const int64_t rows = l.interleave > 1 ? 2 * l.interleave : 5;
            const bool dense = l.form == Form::kDense || l.form == Form::kDenseHigh;
            const int per_elem =
                l.form == Form::kPmxAxis0 ? 1 : (dense ? static_cast<int>(rng() % 3) : 0);
            int64_t group;
            if (l.form == Form::kPmxAxis0) {
              group = l.interleave;  // along rows
            } else {
              const int64_t choices[] = {1, 2, 16, 32, 33, 64, cols, 2 * cols};
              group = choices[rng() % 8];
              if (per_elem != 0)
                group = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
            }
            PlanData d =
                MakePlan(rng, l.form, l.code, l.interleave, rows, cols, group, zp, out, per_elem);
            normal_plans += SetValueFacts(&d.plan, &d.scale, rng) ? 1 : 0;
            finite_plans += d.plan.finite_values && out == OutType::kBF16 ? 1 : 0;
            // The plan's own 2-D view (cols == 1 with scales along the row
            // flips to one row of `rows` elements).
            const int64_t vr = d.plan.rows(), vc = d.plan.cols();
            const ViewReference ref(d.plan);
            for (bool nt : {false, true}) {
              d.plan.nontemporal = nt;
              // Whole, then random tiles (mid-group, mid-word, odd nibbles).
              for (int trial = 0; trial < 4; ++trial) {
                int64_t r0 = 0, r1 = vr, c0 = 0, c1 = vc;
                if (trial > 0) {
                  r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vr));
                  r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vr - r0));
                  c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vc));
                  c1 = c0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vc - c0));
                }
                const int64_t ld = c1 - c0 + (trial == 3 ? 5 : 0);
                const int64_t mis = (trial % 2) * OutBytes(out);
                const std::string diff = CompareTile(d.plan, r0, r1, c0, c1, ld, mis, &ref);
                CHECK_MESSAGE(
                    diff.empty(),
                    std::string(hwy::TargetName(target))
                        << " " << std::string(l.name) << " rows=" << rows << " cols=" << cols
                        << " group=" << group << " per_elem=" << per_elem
                        << " zp=" << static_cast<int>(zp) << " out=" << static_cast<int>(out)
                        << " nt=" << nt << " normal=" << d.plan.normal_values
                        << " finite=" << d.plan.finite_values << " tile=[" << r0 << "," << r1
                        << ")x[" << c0 << "," << c1 << ") ld=" << ld << ": " << diff);
                ++compared;
              }
            }
            d.plan.nontemporal = false;
            if (out == OutType::kF32) {
              // Plan::dot: the whole view, and a tile from a unit boundary
              // (the fused kernels' tiles; others are written).
              for (int trial = 0; trial < 2; ++trial) {
                int64_t r0 = 0, r1 = vr, c0 = 0, c1 = vc;
                if (trial == 1) {
                  r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vr));
                  r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vr - r0));
                  c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vc)) / 32 * 32;
                  c1 = std::max(c0 + 1, vc / 32 * 32);
                }
                const std::string diff = CompareDot(d.plan, r0, r1, c0, c1, rng, &fused);
                CHECK_MESSAGE(diff.empty(),
                              std::string(hwy::TargetName(target))
                                  << " dot " << std::string(l.name) << " rows=" << rows << " cols="
                                  << cols << " group=" << group << " per_elem=" << per_elem
                                  << " zp=" << static_cast<int>(zp) << " tile=[" << r0 << "," << r1
                                  << ")x[" << c0 << "," << c1 << "): " << diff);
              }
            }
          }
        }
      }
    }
    if (target == HWY_AVX2) fused_avx2 += fused - fused_before;
  }
  CHECK(compared > 10000);
  CHECK(normal_plans > 1000);  // Plan::normal_values: both paths run
  CHECK(finite_plans > 300);   // Plan::finite_values: the bfloat16 NaN-free path runs
  // The fused kernels are AVX-512's and AVX2's (one row of X there): where
  // those targets run, they must run.
  if (std::find(targets.begin(), targets.end(), int64_t{HWY_AVX3}) != targets.end()) {
    CHECK(fused - fused_avx2 > 20);
  }
  if (std::find(targets.begin(), targets.end(), int64_t{HWY_AVX2}) != targets.end()) {
    CHECK(fused_avx2 > 10);
  }
}

// Scales (and zero points) along the row, shared by runs of rows (PMX /
// ONNX groups along axis 0 of an [N, K] or [K, N] weight): runs long enough
// that AVX2's 16-bit outputs take the parameters in pair-split order
// (RowKernel::SplitRow, copied once per run), for 4-bit codes in bytes
// (both nibble orders) and in PMX int4x4 words, and 8-bit codes (element
// order beside them); row lengths on and off the 16-element chunks, tiles
// from mid-run rows and odd columns, outputs misaligned and streamed:
// every target == the reference.
TEST_CASE("per-element rows in runs sharing their parameters x every target == reference") {
  TargetGuard guard;
  struct Layout {
    Form form;
    CodeKind code;
    int interleave;
  };
  const Layout layouts[] = {
      {Form::kDense, CodeKind::kU4, 1},     {Form::kDense, CodeKind::kS4, 1},
      {Form::kDenseHigh, CodeKind::kU4, 1}, {Form::kPmxAxis0, CodeKind::kU4, 4},
      {Form::kDense, CodeKind::kS8, 1},     {Form::kDense, CodeKind::kU8, 1}};
  std::mt19937_64 rng(77);
  int64_t compared = 0;
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    for (const Layout& l : layouts) {
      for (int64_t cols : {16, 17, 33, 64, 100, 421}) {
        for (ZeroPointKind zp :
             {ZeroPointKind::kNone, ZeroPointKind::kInteger, ZeroPointKind::kFloat}) {
          for (OutType out : {OutType::kF16, OutType::kBF16}) {
            const int64_t rows = 48;
            const int64_t group = std::array<int64_t, 4>{8, 12, 16, 48}[rng() % 4];
            PlanData d = MakePlan(rng, l.form, l.code, l.interleave, rows, cols, group, zp, out,
                                  /*per_elem=*/1);
            SetValueFacts(&d.plan, &d.scale, rng);
            const ViewReference ref(d.plan);
            for (bool nt : {false, true}) {
              d.plan.nontemporal = nt;
              for (int trial = 0; trial < 4; ++trial) {
                int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;
                if (trial > 0) {
                  r0 = static_cast<int64_t>(rng() % 20);
                  r1 = r0 + 9 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - r0 - 8));
                  c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(cols));
                  c1 = c0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(cols - c0));
                }
                const int64_t ld = c1 - c0 + (trial == 3 ? 5 : 0);
                const int64_t mis = (trial % 2) * OutBytes(out);
                const std::string diff = CompareTile(d.plan, r0, r1, c0, c1, ld, mis, &ref);
                CHECK_MESSAGE(diff.empty(),
                              std::string(hwy::TargetName(target))
                                  << " form=" << static_cast<int>(l.form)
                                  << " code=" << static_cast<int>(l.code) << " cols=" << cols
                                  << " group=" << group << " zp=" << static_cast<int>(zp)
                                  << " out=" << static_cast<int>(out) << " nt=" << nt << " finite="
                                  << d.plan.finite_values << " tile=[" << r0 << "," << r1 << ")x["
                                  << c0 << "," << c1 << ") ld=" << ld << ": " << diff);
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  CHECK(compared > 1000);
}

// float8_e4m3fn codes to float16 / bfloat16 (on AVX3_DL through each
// group's byte-plane table, kept across the rows of a call): every code
// value, groups of 64 to 512 and whole rows, scales shared by runs of rows
// (2-D blocks as DeepSeek's 128 x 128) or by all rows, more groups per row
// than the table cache holds, scales of every kind (RandomScale: negative,
// zero, subnormal, infinite, NaN), whole views and tiles from mid-group
// and mid-row, streamed or not: every target == the reference.
TEST_CASE("float8 e4m3fn groups to 16-bit outputs x every target == scalar reference") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(11);
  struct Shape {
    int64_t rows, cols, group, block_rows;  // block_rows 0: every row shares the scales
  };
  const Shape shapes[] = {{6, 256, 64, 1},      {9, 384, 128, 4}, {5, 1024, 512, 5},
                          {7, 640, 128, 0},     {4, 448, 448, 2}, {3, 64 * 170, 64, 3},
                          {130, 128, 128, 128}, {16, 512, 32, 1}};
  // The last shape's scales: both ends of the AVX2 tables' scale ranges
  // (s = +-2^E x 1.f with min_exp <= E <= max_exp - 9: bfloat16 -126 ..
  // 118, float16 -14 .. 6), each also one ulp and one binade outside, and
  // every E that gives the tables' lowest exponent field e_lo > 1 (1 to 4
  // low tables), with both signs.
  std::vector<float> edges;
  for (int e = -127; e <= -119; ++e) edges.push_back(std::ldexp(1.0f, e));
  for (int e = -15; e <= -7; ++e) edges.push_back(std::ldexp(1.9f, e));
  for (int e : {119, 7}) {
    const float v = std::ldexp(1.0f, e);
    for (float m : {std::nextafter(v, 0.0f), v, 1.9f * v, 2 * v}) edges.push_back(m);
  }
  edges.push_back(std::nextafter(std::ldexp(1.0f, -14), 0.0f));
  for (size_t i = 0, n = edges.size(); i < n; ++i) edges.push_back(-edges[i]);
  int64_t compared = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    for (const Shape& sh : shapes) {
      for (OutType out : {OutType::kF16, OutType::kBF16}) {
        const int64_t gc = sh.cols / sh.group;
        const int64_t block_rows = sh.block_rows == 0 ? sh.rows : sh.block_rows;
        std::vector<uint8_t> codes(static_cast<size_t>(sh.rows * sh.cols));
        for (size_t i = 0; i < codes.size(); ++i) {
          codes[i] = static_cast<uint8_t>(i % 7 == 0 ? i / 7 : rng());  // every byte value
        }
        std::vector<float> block_scales(static_cast<size_t>(((sh.rows - 1) / block_rows + 1) * gc));
        for (size_t i = 0; i < block_scales.size(); ++i) {
          block_scales[i] = &sh == &shapes[7] ? edges[i % edges.size()] : RandomScale(rng);
        }
        std::vector<float> scale(static_cast<size_t>(sh.rows * gc));
        for (int64_t r = 0; r < sh.rows; ++r) {
          for (int64_t g = 0; g < gc; ++g) {
            scale[static_cast<size_t>(r * gc + g)] =
                block_scales[static_cast<size_t>((r / block_rows) * gc + g)];
          }
        }
        Plan p;
        p.layout = Layout::kDense;
        p.code = CodeKind::kF8E4M3FN;
        p.codes = codes.data();
        p.outer = sh.rows;
        p.axis = sh.cols;
        p.group = sh.group;
        p.s_outer = sh.block_rows == 0 ? 0 : gc;
        p.s_axis = 1;
        p.scale = scale.data();
        p.out = out;
        const ViewReference ref(p);
        for (bool nt : {false, true}) {
          p.nontemporal = nt;
          for (int trial = 0; trial < 4; ++trial) {
            int64_t r0 = 0, r1 = sh.rows, c0 = 0, c1 = sh.cols;
            if (trial > 0) {
              r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(sh.rows));
              r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(sh.rows - r0));
              c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(sh.cols));
              if (trial == 1) c0 = c0 / sh.group * sh.group;  // from a group's start
              c1 = c0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(sh.cols - c0));
            }
            const int64_t ld = c1 - c0 + (trial == 3 ? 3 : 0);
            const std::string diff = CompareTile(p, r0, r1, c0, c1, ld, (trial % 2) * 2, &ref);
            CHECK_MESSAGE(diff.empty(),
                          std::string(hwy::TargetName(target))
                              << " rows=" << sh.rows << " cols=" << sh.cols << " group=" << sh.group
                              << " block_rows=" << sh.block_rows << " out=" << static_cast<int>(out)
                              << " nt=" << nt << " tile=[" << r0 << "," << r1 << ")x[" << c0 << ","
                              << c1 << "): " << diff);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared == static_cast<int64_t>(targets.size()) * 8 * 2 * 2 * 4);
}

// Random inputs of a 4-bit weight under a group map: rows x cols codes
// (two a byte), a map of cols columns in groups of `group` naming groups
// [0, used) in a random order, and rows x ng scales, float zero points and
// integer zero points (0-15).
struct MappedInputs {
  std::vector<int32_t> map;
  std::vector<uint8_t> codes;
  std::vector<float> scale, zpf;
  std::vector<int32_t> zpi;
};
MappedInputs RandomMappedInputs(int64_t rows, int64_t cols, int64_t group, int64_t used, int64_t ng,
                                std::mt19937_64& rng) {
  MappedInputs in;
  in.map.resize(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    in.map[static_cast<size_t>(c)] = static_cast<int32_t>((c / group) % used);
  }
  std::shuffle(in.map.begin(), in.map.end(), rng);
  in.codes.resize(static_cast<size_t>((rows * cols + 1) / 2));
  for (auto& b : in.codes) b = static_cast<uint8_t>(rng());
  in.scale.resize(static_cast<size_t>(rows * ng));
  in.zpf.resize(in.scale.size());
  in.zpi.resize(in.scale.size());
  for (auto& v : in.scale) v = RandomScale(rng);
  for (auto& v : in.zpf) v = RandomScale(rng);
  for (auto& v : in.zpi) v = static_cast<int32_t>(rng() % 16);
  return in;
}

// The plan of `in` (rows x cols of 4-bit codes, groups of `group` along
// the row) for `layout`, `out` and zero points `zp` (kInteger: in.zpi;
// kFloat: in.zpf; else the offset 8); the caller sets the layout's strides
// (inner, s_outer, s_axis, word_stride).
Plan MappedPlan(Layout layout, MappedInputs& in, OutType out, int64_t rows, int64_t cols,
                int64_t group, ZeroPointKind zp) {
  Plan p;
  p.layout = layout;
  p.code = CodeKind::kU4;
  p.codes = in.codes.data();
  p.out = out;
  p.outer = rows;
  p.axis = cols;
  p.group = group;
  p.axis_group = in.map.data();
  p.scale = in.scale.data();
  p.zp_kind = zp;
  p.code_offset = zp == ZeroPointKind::kInteger ? 0 : 8;
  if (zp == ZeroPointKind::kInteger) p.zp_int = in.zpi.data();
  if (zp == ZeroPointKind::kFloat) p.zp_float = in.zpf.data();
  return p;
}

// A group map along the row (compressed-tensors act-order weight_g_idx:
// inner 1, s_axis 1) with 1 to 130 groups per row — around the register
// tables of at most 32, 64 and 128 groups (16 per register) and past them —
// with every
// zero-point kind and output type: every target == the reference.
TEST_CASE("group maps along a row x every target == scalar reference") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(7);
  int64_t compared = 0, fused = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    for (int64_t ng : {1, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128, 129, 130}) {
      for (ZeroPointKind zp :
           {ZeroPointKind::kNone, ZeroPointKind::kInteger, ZeroPointKind::kFloat}) {
        for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
          const int64_t group = ng == 130 ? 4 : 8 + static_cast<int64_t>(rng() % 3) * 8;
          // (37 rows: more than two strips of the fused dot's 16 rows)
          const int64_t rows = ng % 2 == 0 ? 3 : 37, cols = ng * group;
          // Groups in a random order; one in three maps leaves the last
          // groups unused (the row's table is then shorter than s_outer).
          const int64_t used = rng() % 3 == 0 && ng > 1 ? ng - 1 : ng;
          MappedInputs in = RandomMappedInputs(rows, cols, group, used, ng, rng);
          std::vector<float>& scale = in.scale;
          Plan p = MappedPlan(Layout::kDense, in, out, rows, cols, group, zp);
          p.inner = 1;
          p.s_outer = ng;
          p.s_axis = 1;
          SetValueFacts(&p, &scale, rng);
          const ViewReference ref(p);
          for (bool nt : {false, true}) {
            p.nontemporal = nt;
            for (int trial = 0; trial < 3; ++trial) {
              int64_t c0 = 0, c1 = cols, r0 = 0, r1 = rows;
              if (trial > 0) {
                c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(cols));
                c1 = c0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(cols - c0));
                r0 = trial - 1;
              }
              const std::string diff =
                  CompareTile(p, r0, r1, c0, c1, c1 - c0, trial == 2 ? OutBytes(out) : 0, &ref);
              CHECK_MESSAGE(diff.empty(),
                            std::string(hwy::TargetName(target))
                                << " groups=" << ng << " used=" << used << " group=" << group
                                << " zp=" << static_cast<int>(zp)
                                << " out=" << static_cast<int>(out) << " nt=" << nt
                                << " normal=" << p.normal_values << " tile=[" << r0 << "," << r1
                                << ")x[" << c0 << "," << c1 << "): " << diff);
              ++compared;
            }
          }
          p.nontemporal = false;
          if (out == OutType::kF32) {
            // Plan::dot (one row of X, then any): the whole view, then
            // tiles from a multiple of 16.
            for (int trial = 0; trial < 4; ++trial) {
              const DotTile t =
                  trial == 0 ? DotTile{0, rows, 0, cols} : RandomDotTile(rng, rows, cols, 1, 16);
              const int64_t r0 = t.r0, r1 = t.r1, c0 = t.c0, c1 = t.c1;
              const std::string diff =
                  CompareDot(p, r0, r1, c0, c1, rng, &fused, trial < 3 ? 1 : 0);
              CHECK_MESSAGE(diff.empty(),
                            std::string(hwy::TargetName(target))
                                << " dot groups=" << ng << " used=" << used << " group=" << group
                                << " zp=" << static_cast<int>(zp) << " tile=[" << r0 << "," << r1
                                << ")x[" << c0 << "," << c1 << "): " << diff);
            }
          }
        }
      }
    }
  }
  CHECK(compared > 500);
  if (std::find(targets.begin(), targets.end(), int64_t{HWY_AVX3}) != targets.end()) {
    CHECK(fused > 40);
  }
}

// Act-order GPTQ (GPTQ's [K / 8, N] words read as the [N, K] weight with a
// random group per column) at every group count that changes how the
// kernels hold the groups: the byte-plane tables' classes of 8 groups (1
// to 4: MapRows' 16-bit outputs up to 32 groups on AVX3_DL), the 16-bit
// and 32-bit row paths past them (up to 64 and 128), MapRows' 16-bit
// gathers past 64 (up to 128) and the column tiles past those; whole views and tiles at any row and
// column, cached and non-temporal stores: every target == the reference.
TEST_CASE("act-order GPTQ columns by group count x every target == scalar reference") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(11);
  int64_t compared = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    for (int64_t ng : {1, 8, 9, 16, 17, 24, 32, 33, 40, 48, 56, 57, 64, 65, 86, 128, 129}) {
      for (ZeroPointKind zp : {ZeroPointKind::kNone, ZeroPointKind::kInteger}) {
        for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
          // K: at least 5 of the planes' 64-element units, a multiple of 8.
          const int64_t group = std::max<int64_t>(8, (320 / ng + 7) / 8 * 8);
          // Rows: one band of MapRows, or two to three (bands of 32 rows
          // with the planes, 16 to 32 otherwise).
          const int64_t extra = rng() % 2 == 0 ? 48 : 0;
          const int64_t rows = 8 + extra + static_cast<int64_t>(rng() % 20), cols = ng * group;
          const int64_t used = rng() % 3 == 0 && ng > 1 ? ng - 1 : ng;
          MappedInputs in = RandomMappedInputs(rows, cols, group, used, ng, rng);
          std::vector<float>& scale = in.scale;
          Plan p = MappedPlan(Layout::kGptqColumns, in, out, rows, cols, group, zp);
          p.s_outer = 1;
          p.s_axis = rows;
          p.word_stride = 4 * rows;
          SetValueFacts(&p, &scale, rng);
          const ViewReference ref(p);
          for (bool nt : {false, true}) {
            p.nontemporal = nt;
            for (int trial = 0; trial < 3; ++trial) {
              int64_t c0 = 0, c1 = cols, r0 = 0, r1 = rows;
              if (trial > 0) {
                c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(cols / 2));
                c1 = c0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(cols - c0));
                r0 = static_cast<int64_t>(rng() % 5);
                r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - r0));
              }
              const std::string diff =
                  CompareTile(p, r0, r1, c0, c1, c1 - c0, trial == 2 ? OutBytes(out) : 0, &ref);
              CHECK_MESSAGE(diff.empty(),
                            std::string(hwy::TargetName(target))
                                << " groups=" << ng << " used=" << used << " group=" << group
                                << " zp=" << static_cast<int>(zp)
                                << " out=" << static_cast<int>(out) << " nt=" << nt << " tile=["
                                << r0 << "," << r1 << ")x[" << c0 << "," << c1 << "): " << diff);
              ++compared;
            }
          }
        }
      }
    }
  }
  CHECK(compared > 500);
}

// A block descriptor's value table (kTable4 codes), else nullptr.
template <class D>
const float* TableValuesOf() {
  if constexpr (D::kCode == CodeKind::kTable4) {
    return D::kValues;
  } else {
    return nullptr;
  }
}

TEST_CASE("block layouts whose values can never be float32 subnormals") {
  // BlockNormalValues: float16 headers times integers and integer code
  // values; MXFP4's E8M0 scales reach 2^-128.
  std::string normal;
#define NIBBLE_TEST_NORMAL(D) \
  if (BlockNormalValues<D>()) normal += std::string(D::kName) + " ";
  NIBBLE_BLOCK_LAYOUTS(NIBBLE_TEST_NORMAL)
#undef NIBBLE_TEST_NORMAL
  CHECK(normal == "q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k tq2_0 q2_0 iq4_nl iq4_xs ");
}

// The grids' value sets and index grids (kernels/ggml_grids.h): every byte
// of every grid is in its set, the set holds no value the grid lacks, and
// the index grid holds each byte's position in the set.
template <class T, size_t N>
void CheckIndexGrid(const char* name, const T (&grid)[N], const T* index,
                    const GgmlGridValues& values) {
  CAPTURE(name);
  std::vector<bool> seen(static_cast<size_t>(values.n), false);
  int64_t bad = 0;
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = 0; j < sizeof(T); ++j) {
      const auto byte = static_cast<int8_t>(static_cast<uint8_t>(grid[i] >> (8 * j)));
      const auto position = static_cast<uint8_t>(index[i] >> (8 * j));
      if (position >= values.n || values.v[position] != byte) {
        ++bad;
      } else {
        seen[position] = true;
      }
    }
  }
  CHECK(bad == 0);
  CHECK(std::count(seen.begin(), seen.end(), true) == values.n);
  for (int32_t k = 1; k < values.n; ++k) CHECK(values.v[k - 1] < values.v[k]);
}

TEST_CASE("grid value sets and index grids") {
  CheckIndexGrid("iq2_xxs", kGgmlIq2xxsGrid, kGgmlIq2xxsIndexGrid, kGgmlIq2GridValues);
  CheckIndexGrid("iq2_xs", kGgmlIq2xsGrid, kGgmlIq2xsIndexGrid, kGgmlIq2GridValues);
  CheckIndexGrid("iq2_s", kGgmlIq2sGrid, kGgmlIq2sIndexGrid, kGgmlIq2GridValues);
  CheckIndexGrid("iq3_xxs", kGgmlIq3xxsGrid, kGgmlIq3xxsIndexGrid, kGgmlIq3xxsGridValues);
  CheckIndexGrid("iq3_s", kGgmlIq3sGrid, kGgmlIq3sIndexGrid, kGgmlIq3sGridValues);
  CheckIndexGrid("iq1_s", kGgmlIq1sGrid, kGgmlIq1sIndexGrid, kGgmlIq1GridValues);
  // The packed index grids: position j of entry i at bits [b j, b j + b)
  // of entry(i) — the 16-bit words, and the byte planes (low bytes, then
  // high bytes).
  const auto check_packed = [](const char* name, const auto* index, const void* table,
                               const auto& entry, int bits, size_t entries) {
    CAPTURE(name);
    CHECK(reinterpret_cast<uintptr_t>(table) % 64 == 0);
    int64_t bad = 0;
    for (size_t i = 0; i < entries; ++i) {
      const unsigned packed = entry(i);
      for (size_t j = 0; j < sizeof(index[0]); ++j) {
        const unsigned position = static_cast<unsigned>((index[i] >> (8 * j)) & 0xFF);
        bad += ((packed >> (bits * static_cast<int>(j))) & ((1u << bits) - 1)) != position;
      }
      bad += (packed >> (bits * static_cast<int>(sizeof(index[0])))) != 0;
    }
    CHECK(bad == 0);
  };
  const auto words = [](const uint16_t* w) { return [w](size_t i) -> unsigned { return w[i]; }; };
  const auto planes = [](const uint8_t* p, size_t n) {
    return [p, n](size_t i) -> unsigned { return p[i] | unsigned{p[n + i]} << 8; };
  };
  check_packed("iq3_xxs", kGgmlIq3xxsIndexGrid, kGgmlIq3xxsPackedIndexGrid,
               words(kGgmlIq3xxsPackedIndexGrid), 3, 256);
  check_packed("iq3_s", kGgmlIq3sIndexGrid, kGgmlIq3sPackedIndexGrid,
               words(kGgmlIq3sPackedIndexGrid), 3, 512);
  check_packed("iq3_xxs planes", kGgmlIq3xxsIndexGrid, kGgmlIq3xxsPackedIndexPlanes,
               planes(kGgmlIq3xxsPackedIndexPlanes, 256), 3, 256);
  check_packed("iq3_s planes", kGgmlIq3sIndexGrid, kGgmlIq3sPackedIndexPlanes,
               planes(kGgmlIq3sPackedIndexPlanes, 512), 3, 512);
  // The pair grids: bytes 2 j, 2 j + 1 of entry i (2 sizeof(index[0])
  // bytes an entry) are 2 p, 2 p + 1 for position p of byte j of the index
  // grid's entry i.
  const auto check_pairs = [](const char* name, const auto* index, const uint8_t* pairs,
                              size_t entries) {
    CAPTURE(name);
    CHECK(reinterpret_cast<uintptr_t>(pairs) % 64 == 0);
    constexpr size_t kPositions = sizeof(index[0]);
    int64_t bad = 0;
    for (size_t i = 0; i < entries; ++i) {
      for (size_t j = 0; j < kPositions; ++j) {
        const unsigned p = static_cast<unsigned>((index[i] >> (8 * j)) & 0xFF);
        bad += pairs[2 * kPositions * i + 2 * j] != 2 * p;
        bad += pairs[2 * kPositions * i + 2 * j + 1] != 2 * p + 1;
      }
    }
    CHECK(bad == 0);
  };
  check_pairs("iq2_xxs pairs", kGgmlIq2xxsIndexGrid, kGgmlIq2xxsPairGrid, 256);
  check_pairs("iq2_xs pairs", kGgmlIq2xsIndexGrid, kGgmlIq2xsPairGrid, 512);
  check_pairs("iq2_s pairs", kGgmlIq2sIndexGrid, kGgmlIq2sPairGrid, 1024);
  check_pairs("iq3_xxs pairs", kGgmlIq3xxsIndexGrid, kGgmlIq3xxsPairGrid, 256);
  check_pairs("iq3_s pairs", kGgmlIq3sIndexGrid, kGgmlIq3sPairGrid, 512);
  check_pairs("iq1 pairs", kGgmlIq1sIndexGrid, kGgmlIq1sPairGrid, 2048);
}

// Block-structured checkpoint layouts (GGUF Q4_0 / Q4_1 / Q8_0 / Q4_K, AWQ
// GEMM) and the GPTQ g_idx (the [K, N] gather and the [N, K] columns):
// every target == the reference.
TEST_CASE("block layouts and g_idx gather x every target == scalar reference") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  const char* seed_env = std::getenv("NIBBLE_TEST_SEED");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : 2027;
  std::mt19937_64 rng(seed);
  struct Kind {
    const char* name;
    CodeKind code;
    Layout layout;
    int64_t block_elems = 0, block_bytes = 0, header = 0;
    const float* values = nullptr;  // kTable4 codes
    bool gptq_gather = false;
    // Block layouts: scales come from the block headers (random bytes
    // here: every f16 bit pattern), with the descriptor's zero-point kind.
    bool block = false;
    ZeroPointKind block_zp = ZeroPointKind::kNone;
    int32_t block_offset = 0;
    // kGptqColumns with a random group per column (act-order g_idx).
    bool column_map = false;
  };
  const Kind kinds[] = {
  // Every registered block layout (a new one is tested without an edit here).
#define NIBBLE_TEST_BLOCK(D) \
  {D::kName,                 \
   D::kCode,                 \
   BlockLayoutOf<D>::kValue, \
   D::kBlockElems,           \
   D::kBytes,                \
   0,                        \
   TableValuesOf<D>(),       \
   false,                    \
   true,                     \
   D::kZp,                   \
   D::kCodeOffset},
      NIBBLE_BLOCK_LAYOUTS(NIBBLE_TEST_BLOCK)
#undef NIBBLE_TEST_BLOCK
  // Every decoded block layout: decode + rounding per target vs the
  // reference's per-element decode (the values themselves are checked
  // against the independent decoder in checkpoint_test.cc).
#define NIBBLE_TEST_DECODED(D) \
  {D::kName,                   \
   CodeKind::kU8,              \
   BlockLayoutOf<D>::kValue,   \
   D::kBlockElems,             \
   D::kBytes,                  \
   0,                          \
   nullptr,                    \
   false,                      \
   true,                       \
   ZeroPointKind::kNone,       \
   0},
          NIBBLE_DECODED_LAYOUTS(NIBBLE_TEST_DECODED)
#undef NIBBLE_TEST_DECODED
              {"awq", CodeKind::kU4, Layout::kAwqWords},
      {"gptq g_idx", CodeKind::kU4, Layout::kPmxWords, 0, 0, 0, nullptr, true},
      {"gptq [N, K] columns", CodeKind::kU4, Layout::kGptqColumns},
      {"awq [N, K] columns", CodeKind::kU4, Layout::kAwqColumns},
      {"gptq [N, K] columns g_idx", CodeKind::kU4, Layout::kGptqColumns, 0, 0, 0, nullptr, false,
       false, ZeroPointKind::kNone, 0, true},
  };
  int64_t compared = 0, fused = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    for (const Kind& kd : kinds) {
      for (int64_t units : {1, 2, 3, 5, 17}) {
        for (ZeroPointKind zp :
             {ZeroPointKind::kNone, ZeroPointKind::kInteger, ZeroPointKind::kFloat}) {
          for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
            PlanData d;
            Plan& p = d.plan;
            p.code = kd.code;
            p.layout = kd.layout;
            p.code_values = kd.values;
            if (CodeIsFloat(kd.code) && zp != ZeroPointKind::kNone) continue;
            if (kd.block && zp != kd.block_zp) continue;
            p.out = out;
            p.zp_kind = zp;
            p.code_offset = zp == ZeroPointKind::kNone ? (kd.code == CodeKind::kS8 ? 0 : 8) : 0;
            if (kd.block) p.code_offset = kd.block_offset;
            int64_t rows, cols, nscale;
            int64_t map_extra = 0;  // groups of a column map past K / G
            const bool columns =
                kd.layout == Layout::kGptqColumns || kd.layout == Layout::kAwqColumns;
            if (columns) {
              // The [N rows, K cols] view of a [K, N] checkpoint: groups of
              // G input channels along the row, scales [K / G, N].
              const bool g = kd.layout == Layout::kGptqColumns;
              // N: a few words, or (units 5) more than one 128-row band of
              // the AVX-512 column tiles.
              rows = 8 * (units == 5 ? 16 + static_cast<int64_t>(rng() % 20)
                                     : 1 + static_cast<int64_t>(rng() % 6));
              cols = (g ? 8 : 1) * (units * 7 + static_cast<int64_t>(rng() % 9));  // K
              if (units == 5) {
                // Long rows: K past several of streaming AWQ's staging
                // chunks (128 / 64 columns), and GPTQ rows of ~100 tiles.
                cols = g ? 8 * (380 + static_cast<int64_t>(rng() % 24))
                         : 230 + static_cast<int64_t>(rng() % 80);
                if (g) rows = 8 * (3 + static_cast<int64_t>(rng() % 3));  // > one 16-row band
                if (g && rng() % 2 == 0) {
                  // More than one 128-row band of GPTQ's blocks, each row
                  // over a few of their 256 / 512-column chunks.
                  rows = 8 * (17 + static_cast<int64_t>(rng() % 6));
                  cols = 8 * (70 + static_cast<int64_t>(rng() % 20));
                }
              }
              // G = 16 takes the row kernels, 32 .. 128 the column tiles
              // (96: AWQ's 128-column chunks end at group boundaries).
              const uint64_t gpick = rng() % 5;
              int64_t group = gpick == 4 ? 96 : int64_t{16} << gpick;
              // Group maps over more groups than the column tiles keep on
              // the stack (256: then read in place).
              if (kd.column_map && units == 5 && gpick == 0) group = 8;
              p.outer = rows;
              p.axis = cols;
              p.group = group;
              p.s_outer = 1;
              p.s_axis = rows;
              // A g_idx may name more groups than K / G (its scales have
              // that many rows): units 2 maps over 5 more.
              map_extra = kd.column_map && units == 2 ? 5 : 0;
              nscale = ((cols + group - 1) / group + map_extra) * rows;
              p.word_stride = g ? 4 * rows : rows / 2;
              d.codes.resize(static_cast<size_t>(rows * cols / 2));
            } else if (kd.layout == Layout::kAwqWords || kd.gptq_gather) {
              // [K rows, N cols], scales [K / G, N] along the row.
              cols = 8 * units;
              rows = 16 + static_cast<int64_t>(rng() % 40);
              const int64_t group = kd.gptq_gather ? 8 : int64_t{1} << (rng() % 5);
              const int64_t ng = (rows + group - 1) / group;
              p.outer = 1;
              p.axis = rows;
              p.inner = cols;
              p.group = group;
              p.s_axis = cols;
              p.s_inner = 1;
              nscale = ng * cols;
              if (kd.layout == Layout::kAwqWords) {
                d.codes.resize(static_cast<size_t>(rows * cols / 2));
              } else {
                rows = (rows + 7) / 8 * 8;
                p.axis = rows;
                p.interleave = 8;
                p.interleave_row = cols;
                d.codes.resize(static_cast<size_t>(rows * cols / 2));
                d.zpi.resize(static_cast<size_t>(rows));  // reused below as g_idx
              }
            } else {
              // [N rows, K cols], one scale per 32 elements along the row.
              cols = kd.block_elems * units;
              rows = 1 + static_cast<int64_t>(rng() % 5);
              p.outer = rows;
              p.axis = cols;
              p.group = 32;
              p.s_axis = 1;
              p.s_outer = cols / 32;
              nscale = rows * cols / 32;
              d.codes.resize(static_cast<size_t>(rows * cols / kd.block_elems * kd.block_bytes));
            }
            // Block layouts: a quarter of the bytes tiny (0, 1, 2), so that
            // headers often hold the smallest scales: MXFP4's e = 0, 1 give
            // float32 subnormal values, which the bfloat16 rounding must not
            // flush (layouts.h BlockNormalValues: only types whose values
            // cannot be subnormal skip that test); an eighth 0xFF and a
            // sixteenth 0x7F, so that float16 headers often hold 0xFFFF /
            // 0x7FFF, NaNs whose products the bfloat16 rounding must keep
            // NaN (RowJob::finite: only chunks without them skip that test).
            for (auto& b : d.codes) {
              const uint64_t r = kd.block ? rng() % 16 : 15;
              b = static_cast<uint8_t>(r < 4 ? rng() % 3 : r < 6 ? 0xFF : r == 6 ? 0x7F : rng());
            }
            d.scale.resize(static_cast<size_t>(nscale));
            for (auto& v : d.scale) v = RandomScale(rng);
            std::vector<int32_t> zpi(d.scale.size()), gidx;
            if (zp == ZeroPointKind::kInteger) {
              for (auto& z : zpi) z = static_cast<int32_t>(rng() % 16);
              if (kd.column_map && rng() % 3 == 0) {
                // A zero point at or past the bounds of act-order GPTQ's
                // 16-bit row path (MappedRow16: [-32752, 32767]).
                static constexpr int32_t kEdges[] = {-32752, 32767, -32753, 32768, 1 << 20};
                zpi[rng() % zpi.size()] = kEdges[rng() % 5];
              }
              p.zp_int = zpi.data();
            } else if (zp == ZeroPointKind::kFloat) {
              d.zpf.resize(d.scale.size());
              for (auto& z : d.zpf) z = RandomScale(rng);
              p.zp_float = d.zpf.data();
            }
            if (kd.gptq_gather) {  // a non-monotonic g_idx over all groups
              const int64_t ng = (rows + p.group - 1) / p.group;
              gidx.resize(static_cast<size_t>(rows));
              for (auto& g : gidx) g = static_cast<int32_t>(rng() % static_cast<uint64_t>(ng));
              p.axis_group = gidx.data();
            }
            if (kd.column_map) {  // any group for each column, over all groups
              const int64_t ng = (cols + p.group - 1) / p.group + map_extra;
              gidx.resize(static_cast<size_t>(cols));
              for (auto& g : gidx) g = static_cast<int32_t>(rng() % static_cast<uint64_t>(ng));
              p.axis_group = gidx.data();
            }
            p.codes = d.codes.data() + kd.header;
            p.scale = d.scale.data();
            if (kd.block) {  // the headers are the only source of scales
              p.scale = nullptr;
              p.zp_float = nullptr;
            } else {
              SetValueFacts(&p, &d.scale, rng);
            }
            const int64_t vr = p.rows(), vc = p.cols();
            const ViewReference ref(p);
            // GPTQ columns: both AVX-512 traversals, whichever this CPU
            // prefers (kernels/plan.h ColumnOrder); block layouts: both ways
            // of fetching scattered fields (Fetch: IQ2_XS / IQ2_S / IQ1_S /
            // IQ1_M grid entries, float16 block headers).
            const bool orders = kd.layout == Layout::kGptqColumns && !kd.column_map;
            const bool fetches = kd.block;
            for (int o = 0; o < (orders || fetches ? 4 : 2); ++o) {
              const bool nt = o % 2 == 1;
              p.nontemporal = nt;
              p.column_order =
                  !orders ? Plan::ColumnOrder::kAuto
                          : (o < 2 ? Plan::ColumnOrder::kBlocks : Plan::ColumnOrder::kBands);
              p.fetch = !fetches ? Plan::Fetch::kAuto
                                 : (o < 2 ? Plan::Fetch::kGathers : Plan::Fetch::kLoads);
              for (int trial = 0; trial < 4; ++trial) {
                int64_t r0 = 0, r1 = vr, c0 = 0, c1 = vc;
                if (trial > 0) {
                  r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vr));
                  r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vr - r0));
                  c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vc));
                  c1 = c0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vc - c0));
                }
                const int64_t ld = c1 - c0 + (trial == 3 ? 3 : 0);
                const int64_t mis = (trial % 2) * OutBytes(out);
                const std::string diff = CompareTile(p, r0, r1, c0, c1, ld, mis, &ref);
                CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                                << " " << std::string(kd.name) << " rows=" << vr
                                                << " cols=" << vc << " zp=" << static_cast<int>(zp)
                                                << " out=" << static_cast<int>(out) << " nt=" << nt
                                                << " order=" << static_cast<int>(p.column_order)
                                                << " fetch=" << static_cast<int>(p.fetch)
                                                << " tile=[" << r0 << "," << r1 << ")x[" << c0
                                                << "," << c1 << "): " << diff);
                ++compared;
              }
            }
            p.nontemporal = false;
            if (out == OutType::kF32) {
              // Plan::dot: the whole view, then tiles from a unit boundary.
              for (int trial = 0; trial < 3; ++trial) {
                int64_t r0 = 0, r1 = vr, c0 = 0, c1 = vc;
                if (trial > 0) {
                  r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vr));
                  r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vr - r0));
                  c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(vc)) / 32 * 32;
                  c1 = c0 + 32 +
                       static_cast<int64_t>(rng() % static_cast<uint64_t>(vc - c0)) / 32 * 32;
                  c1 = std::min(c1, vc);
                }
                const std::string diff = CompareDot(p, r0, r1, c0, c1, rng, &fused);
                CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                                << " dot " << std::string(kd.name) << " rows=" << vr
                                                << " cols=" << vc << " zp=" << static_cast<int>(zp)
                                                << " tile=[" << r0 << "," << r1 << ")x[" << c0
                                                << "," << c1 << "): " << diff);
              }
            }
          }
        }
      }
    }
  }
  CHECK(compared > 1000);
  if (std::find(targets.begin(), targets.end(), int64_t{HWY_AVX3}) != targets.end()) {
    CHECK(fused > 40);
  }
}

// Plan::dot by columns (an ONNX MatMul's [K, N] B): dense int4 / uint4
// [K, N] blocked along K (ColumnsDot's kDenseKN: one row of X, tiles from
// multiples of 16), every other plan writing its tile; sums in
// AccumulateDotCols's layout == the reference's, every target.
// CompareTile lets any NaN match any NaN (SPEC.md); the grid types' 16-bit
// tables go further and keep the reference's NaN bits: a block whose d
// is NaN gives NaN products with d's sign for every value, negated or not
// (the 16-bit paths that flip bit 15 for a negated value flip nothing
// there: kernels/dequantize_decoded.cc). Every grid layout with d in its
// first two bytes (all but IQ1_M), d a NaN of either sign, whole blocks,
// every target, both fetches, bits compared exactly — except AVX2's IQ3
// 16-bit tables, whose NaNs take the other sign for negated values (still
// NaN: SPEC.md; not traced).
TEST_CASE("grid blocks with a NaN d keep the reference's NaN bits on every target") {
  TargetGuard guard;
  std::mt19937_64 rng(77);
  struct Kind {
    const char* name;
    Layout layout;
    int64_t block_elems, block_bytes;
    bool grid;
  };
  const Kind kinds[] = {
#define NIBBLE_TEST_NAN_D(D) \
  {D::kName, BlockLayoutOf<D>::kValue, D::kBlockElems, D::kBytes, IsGridLayout<D>::value},
      NIBBLE_DECODED_LAYOUTS(NIBBLE_TEST_NAN_D)
#undef NIBBLE_TEST_NAN_D
  };
  int64_t compared = 0;
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    for (const Kind& kd : kinds) {
      if (!kd.grid || std::string(kd.name) == "iq1_m") continue;
      for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
        PlanData d;
        Plan& p = d.plan;
        p.code = CodeKind::kU8;
        p.layout = kd.layout;
        p.out = out;
        const int64_t rows = 2, cols = 4 * kd.block_elems;
        p.outer = rows;
        p.axis = cols;
        p.group = 32;
        p.s_axis = 1;
        p.s_outer = cols / 32;
        d.codes.resize(static_cast<size_t>(rows * cols / kd.block_elems * kd.block_bytes));
        for (auto& b : d.codes) b = static_cast<uint8_t>(rng());
        for (size_t k = 0; k < d.codes.size(); k += static_cast<size_t>(kd.block_bytes)) {
          const auto nan = static_cast<uint16_t>((rng() % 2 ? 0xFE00u : 0x7E00u) | (rng() & 0x1FF));
          std::memcpy(&d.codes[k], &nan, 2);
        }
        p.codes = d.codes.data();
        for (Plan::Fetch fetch : {Plan::Fetch::kGathers, Plan::Fetch::kLoads}) {
          p.fetch = fetch;
          const size_t bytes = static_cast<size_t>(rows * cols * OutBytes(out));
          std::vector<uint8_t> a(bytes, 0xA5), b(bytes, 0xA5);
          DequantizeTile(p, 0, rows, 0, cols, a.data(), cols);
          DequantizeTileReference(p, 0, rows, 0, cols, b.data(), cols);
          std::string first;
          for (size_t i = 0; i < bytes && first.empty(); i += static_cast<size_t>(OutBytes(out))) {
            if (std::memcmp(&a[i], &b[i], static_cast<size_t>(OutBytes(out))) != 0) {
              uint32_t x = 0, y = 0;
              std::memcpy(&x, &a[i], static_cast<size_t>(OutBytes(out)));
              std::memcpy(&y, &b[i], static_cast<size_t>(OutBytes(out)));
              first = "element " + std::to_string(i / static_cast<size_t>(OutBytes(out))) + ": " +
                      std::to_string(x) + " vs the reference's " + std::to_string(y);
            }
          }
          CHECK_MESSAGE(a == b, std::string(hwy::TargetName(target))
                                    << " " << first << " " << std::string(kd.name)
                                    << " out=" << static_cast<int>(out)
                                    << " fetch=" << static_cast<int>(fetch));
          ++compared;
        }
      }
    }
  }
  CHECK(compared > 0);
}

// GGUF MXFP4's scales are powers of two (2^(e - 128)); where one's
// products are normal in a 16-bit output, the AVX2 block tables take its
// exponent instead of a multiply (kernels/dequantize-inl.h kPow2Tables).
// Every exponent byte, each block's 32 codes random, rows starting at
// different blocks, plain and streamed stores: every target == the
// reference, so both sides of each range end are checked.
TEST_CASE("MXFP4 blocks of every exponent byte x every target == scalar reference") {
  TargetGuard guard;
  std::mt19937_64 rng(2028);
  using D = GgufMXFP4;
  PlanData d;
  Plan& p = d.plan;
  p.code = D::kCode;
  p.layout = BlockLayoutOf<D>::kValue;
  p.code_values = TableValuesOf<D>();
  p.zp_kind = D::kZp;
  p.code_offset = D::kCodeOffset;
  const int64_t rows = 16, cols = 16 * D::kBlockElems;  // 256 blocks: e = 0 .. 255
  p.outer = rows;
  p.axis = cols;
  p.group = 32;
  p.s_axis = 1;
  p.s_outer = cols / 32;
  d.codes.resize(static_cast<size_t>(rows * cols / D::kBlockElems * D::kBytes));
  for (auto& b : d.codes) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < rows * cols / D::kBlockElems; ++b) {
    d.codes[static_cast<size_t>(b * D::kBytes)] = static_cast<uint8_t>((b * 37) % 256);
  }
  p.codes = d.codes.data();
  int64_t compared = 0;
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
      p.out = out;
      for (bool nt : {false, true}) {
        p.nontemporal = nt;
        for (int64_t c0 : {int64_t{0}, int64_t{32}, int64_t{96}}) {
          const std::string diff = CompareTile(p, 0, rows, c0, cols, cols - c0, 0);
          CHECK_MESSAGE(diff.empty(), hwy::TargetName(target)
                                          << " out=" << static_cast<int>(out) << " nt=" << nt
                                          << " c0=" << c0 << ": " << diff);
          ++compared;
        }
      }
    }
  }
  CHECK(compared > 0);
}

TEST_CASE("Plan::dot by columns over [K, N] weights x every target == reference") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(2033);
  int64_t compared = 0, fused = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    for (int trial = 0; trial < 24; ++trial) {
      const CodeKind code = trial % 2 == 0 ? CodeKind::kU4 : CodeKind::kS4;
      const ZeroPointKind zp = trial % 3 == 0   ? ZeroPointKind::kNone
                               : trial % 3 == 1 ? ZeroPointKind::kInteger
                                                : ZeroPointKind::kFloat;
      const int64_t group = int64_t{16} << (rng() % 4);               // along K
      const int64_t n = 16 * (1 + static_cast<int64_t>(rng() % 40));  // features
      const int64_t kk =
          group * (1 + static_cast<int64_t>(rng() % 4)) +
          (trial % 4 == 3 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(group)) : 0);
      const int64_t ng = (kk + group - 1) / group;
      std::vector<uint8_t> codes(static_cast<size_t>(kk * n / 2));
      for (auto& b : codes) b = static_cast<uint8_t>(rng());
      std::vector<float> scale(static_cast<size_t>(ng * n)), zpf(scale.size());
      for (auto& v : scale) v = RandomScale(rng);
      for (auto& v : zpf) v = RandomScale(rng);
      std::vector<int32_t> zpi(scale.size());
      for (auto& z : zpi) {
        z = code == CodeKind::kS4 ? static_cast<int32_t>(rng() % 16) - 8
                                  : static_cast<int32_t>(rng() % 16);
      }
      Plan p;
      p.layout = Layout::kDense;
      p.code = code;
      p.codes = codes.data();
      p.out = OutType::kF32;
      p.outer = 1;
      p.axis = kk;
      p.inner = n;
      p.group = group;
      p.s_axis = n;
      p.s_inner = 1;
      p.scale = scale.data();
      p.zp_kind = zp;
      p.code_offset = 0;
      if (zp == ZeroPointKind::kInteger) p.zp_int = zpi.data();
      if (zp == ZeroPointKind::kFloat) p.zp_float = zpf.data();
      for (int t = 0; t < 4; ++t) {
        const DotTile tile = t == 0 ? DotTile{0, kk, 0, n} : RandomDotTile(rng, kk, n, 16, 16);
        const int64_t r0 = tile.r0, r1 = tile.r1, c0 = tile.c0, c1 = tile.c1;
        const std::string diff = CompareDot(p, r0, r1, c0, c1, rng, &fused, t < 3 ? 1 : 0, true);
        CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                        << " code=" << static_cast<int>(code)
                                        << " zp=" << static_cast<int>(zp) << " K=" << kk
                                        << " N=" << n << " G=" << group << " tile=[" << r0 << ","
                                        << r1 << ")x[" << c0 << "," << c1 << "): " << diff);
        ++compared;
      }
    }
  }
  CHECK(compared > 0);
  if (std::find(targets.begin(), targets.end(), int64_t{HWY_AVX3}) != targets.end()) {
    CHECK(fused > 20);
  }
}

// The fused M = 1 dot by columns computes q - z as (2^23 + q) - (2^23 + z):
// exact for |z| < 2^22 only. A zero point beyond takes the tile (the
// reference's bits either way), on GPTQ / AWQ columns and act-order rows.
TEST_CASE("fused column dot: a zero point beyond 2^22 is declined, the tile's bits kept") {
  TargetGuard guard;
  std::mt19937_64 rng(2032);
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    // (AVX-512 and AVX2 have the column dot; the other targets tile.)
    const bool dot = target <= int64_t{HWY_AVX2};
    for (int kind = 0; kind < 3; ++kind) {
      for (bool huge : {false, true}) {
        const int64_t rows = 48, cols = 512, group = 128, ng = cols / group;
        std::vector<uint8_t> codes(static_cast<size_t>(rows * cols / 2));
        for (auto& b : codes) b = static_cast<uint8_t>(rng());
        std::vector<float> scale(static_cast<size_t>(rows * ng));
        for (auto& v : scale) v = RandomScale(rng);
        std::vector<int32_t> zpi(scale.size()), map(static_cast<size_t>(cols));
        for (auto& z : zpi) z = static_cast<int32_t>(rng() % 16);
        if (huge) zpi[static_cast<size_t>(rng() % zpi.size())] = (1 << 23) + 5;
        for (int64_t c = 0; c < cols; ++c)
          map[static_cast<size_t>(c)] = static_cast<int32_t>(c / group);
        std::shuffle(map.begin(), map.end(), rng);
        Plan p;
        p.code = CodeKind::kU4;
        p.out = OutType::kF32;
        p.zp_kind = ZeroPointKind::kInteger;
        p.zp_int = zpi.data();
        p.scale = scale.data();
        p.codes = codes.data();
        p.outer = rows;
        p.axis = cols;
        p.group = group;
        if (kind < 2) {  // GPTQ / AWQ [N, K] columns, scales [K / G, N]
          p.layout = kind == 0 ? Layout::kGptqColumns : Layout::kAwqColumns;
          p.s_outer = 1;
          p.s_axis = rows;
          p.word_stride = kind == 0 ? 4 * rows : rows / 2;
        } else {  // compressed-tensors act-order rows, scales [N, K / G]
          p.layout = Layout::kDense;
          p.s_outer = ng;
          p.s_axis = 1;
          p.axis_group = map.data();
        }
        int64_t fused = 0;
        const std::string diff = CompareDot(p, 0, rows, 0, cols, rng, &fused, 1);
        CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                        << " kind=" << kind << " huge=" << huge << ": " << diff);
        CHECK(fused == (dot && !huge ? 1 : 0));
      }
    }
  }
}

// AWQ's and GPTQ's [N, K] column tiles load each band a 64-byte line at a
// time from the line's start when every word row has the same line offset
// (word stride a multiple of 64): codes at every 4-byte offset within a
// line (the layouts' words are 4-byte aligned), N of one to four 128-row
// bands, tiles starting at any row, GPTQ in both traversals: every
// target == the reference.
TEST_CASE("AWQ / GPTQ column tiles at every line offset x every target == scalar reference") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(2031);
  int64_t compared = 0;
  for (int64_t target : targets) {
    UseTarget(target);
    for (int64_t at = 0; at < 64; at += 4) {  // bytes past a 64-byte boundary
      for (int kind = 0; kind < 9; ++kind) {
        const OutType out = static_cast<OutType>(kind % 3);
        const bool gptq = kind >= 3;
        const int64_t rows =
            128 * (1 + static_cast<int64_t>(rng() % 4)) - (gptq && rng() % 2 == 0 ? 112 : 0);  // N
        const int64_t group = int64_t{32} << (rng() % 3);
        // K: a few groups, at times past a chunk of the 16-bit column tiles.
        const int64_t cols =
            group * (1 + static_cast<int64_t>(rng() % 3)) + 32 + (rng() % 4 == 0 ? 640 : 0);
        const ZeroPointKind zp = rng() % 2 == 0 ? ZeroPointKind::kNone : ZeroPointKind::kInteger;
        Plan p;
        p.code = CodeKind::kU4;
        p.layout = gptq ? Layout::kGptqColumns : Layout::kAwqColumns;
        p.column_order = kind >= 6 ? Plan::ColumnOrder::kBands : Plan::ColumnOrder::kBlocks;
        p.out = out;
        p.zp_kind = zp;
        p.code_offset = zp == ZeroPointKind::kNone ? 8 : 0;
        p.outer = rows;
        p.axis = cols;
        p.group = group;
        p.s_outer = 1;
        p.s_axis = rows;
        p.word_stride = gptq ? 4 * rows : rows / 2;
        const size_t code_bytes = static_cast<size_t>(rows * cols / 2);
        std::vector<uint8_t> storage(code_bytes + 256);
        for (auto& b : storage) b = static_cast<uint8_t>(rng());
        const auto line = (reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64;
        p.codes = storage.data() + (line - reinterpret_cast<uintptr_t>(storage.data())) +
                  static_cast<size_t>(at);
        const int64_t nscale = ((cols + group - 1) / group) * rows;
        std::vector<float> scale(static_cast<size_t>(nscale));
        for (auto& v : scale) v = RandomScale(rng);
        std::vector<int32_t> zpi(scale.size());
        for (auto& z : zpi) z = static_cast<int32_t>(rng() % 16);
        p.scale = scale.data();
        if (zp == ZeroPointKind::kInteger) p.zp_int = zpi.data();
        SetValueFacts(&p, &scale, rng);
        const ViewReference ref(p);
        for (int trial = 0; trial < 6; ++trial) {
          p.nontemporal = trial % 2 == 1;
          // The whole tensor, then tiles from any row (a multiple of 8 or
          // not) and column, of any height.
          int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;
          if (trial > 1) {
            r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
            if (trial < 4) r0 = r0 / 8 * 8;
            r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - r0));
            c0 = static_cast<int64_t>(rng() % 40);
            c1 = cols - static_cast<int64_t>(rng() % 8);
          }
          const std::string diff = CompareTile(p, r0, r1, c0, c1, c1 - c0, 0, &ref);
          CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                          << std::string(gptq ? " gptq" : " awq")
                                          << " order=" << static_cast<int>(p.column_order)
                                          << " at=" << at << " rows=" << rows << " cols=" << cols
                                          << " G=" << group << " out=" << static_cast<int>(out)
                                          << " tile=[" << r0 << "," << r1 << ")x[" << c0 << ","
                                          << c1 << "): " << diff);
          ++compared;
        }
      }
    }
  }
  CHECK(compared >= 16 * 9 * 6);
}

// The row kernels' fused dot over a K of several slices
// (kernels/dequantize-inl.h FusedDot: without a table, more than one row of
// X goes over K in slices of 1024, the weight rows one after the other per
// slice) and 2-8 rows of X in one call, from a row and an element past the
// first: AVX2 and AVX-512 fuse every one (FP8, and AVX2's table codes, up
// to 4 rows of X), the others write tiles.
TEST_CASE("fused row dot over several slices of K, 2-8 rows of X x every target") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(2042);
  struct Layout {
    Form form;
    CodeKind code;
    int interleave;
  };
  const Layout layouts[] = {{Form::kPmxAxis1, CodeKind::kU4, 4},
                            {Form::kDense, CodeKind::kU4, 1},
                            {Form::kDense, CodeKind::kS8, 1},
                            {Form::kDense, CodeKind::kF8E4M3FN, 1},
                            {Form::kDense, CodeKind::kTable4, 1}};
  const int64_t rows = 8, cols = 3168;  // (three slices and a part)
  for (int64_t target : targets) {
    UseTarget(target);
    int64_t fused = 0, compared = 0, want_fused = 0;
    for (const Layout& l : layouts) {
      const bool lookup = CodeIsFloat(l.code) || l.code == CodeKind::kTable4;
      const ZeroPointKind zp = lookup ? ZeroPointKind::kNone : ZeroPointKind::kInteger;
      PlanData d =
          MakePlan(rng, l.form, l.code, l.interleave, rows, cols, 128, zp, OutType::kF32, 0);
      SetValueFacts(&d.plan, &d.scale, rng);
      for (const int64_t m : {2, 3, 4, 5, 6, 8}) {
        for (const bool whole : {true, false}) {
          const int64_t r0 = whole ? 0 : 1 + static_cast<int64_t>(rng() % 3);  // (4 + 1-3)
          const int64_t c0 = whole ? 0 : 32 * (1 + static_cast<int64_t>(rng() % 40));
          const std::string diff = CompareDot(d.plan, r0, rows, c0, cols, rng, &fused, m);
          CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                          << " code=" << static_cast<int>(l.code) << " interleave="
                                          << l.interleave << " m=" << m << " rows [" << r0 << ", "
                                          << rows << ") from " << c0 << ": " << diff);
          ++compared;
          // (FP8, and table codes where decoded without a table: up to 4)
          const bool table = l.code == CodeKind::kTable4 && target <= HWY_AVX3;
          want_fused += lookup && !table && m > 4 ? 0 : 1;
        }
      }
    }
    CHECK(compared == 60);
    if (target <= HWY_AVX3 || target == HWY_AVX2) {
      CHECK_MESSAGE(fused == want_fused, std::string(hwy::TargetName(target))
                                             << " fused " << fused);
    }
  }
}

// The matmul hands the column dot up to 512 rows at a time; the kernel
// goes over longer ranges block by block (kernels/dequantize_columns_dot.cc
// kColumnsDotBlock), each block its own pass over K.
TEST_CASE("fused column dot over several blocks of rows, 1-8 rows of X x every target") {
  TargetGuard guard;
  const auto targets = CompiledTargets();
  std::mt19937_64 rng(2041);
  for (int64_t target : targets) {
    UseTarget(target);
    int64_t fused = 0, compared = 0;
    for (const bool gptq : {true, false}) {
      for (const ZeroPointKind zp : {ZeroPointKind::kNone, ZeroPointKind::kInteger}) {
        const int64_t rows = 1104, cols = 192, group = 64;  // N: 2 blocks and a part
        Plan p;
        p.code = CodeKind::kU4;
        p.layout = gptq ? Layout::kGptqColumns : Layout::kAwqColumns;
        p.out = OutType::kF32;
        p.zp_kind = zp;
        p.code_offset = zp == ZeroPointKind::kNone ? 8 : 0;
        p.outer = rows;
        p.axis = cols;
        p.group = group;
        p.s_outer = 1;
        p.s_axis = rows;
        p.word_stride = gptq ? 4 * rows : rows / 2;
        std::vector<uint8_t> codes(static_cast<size_t>(rows * cols / 2));
        for (auto& b : codes) b = static_cast<uint8_t>(rng());
        p.codes = codes.data();
        std::vector<float> scale(static_cast<size_t>(cols / group * rows));
        for (auto& v : scale) v = RandomScale(rng);
        std::vector<int32_t> zpi(scale.size());
        for (auto& z : zpi) z = static_cast<int32_t>(rng() % 16);
        p.scale = scale.data();
        if (zp == ZeroPointKind::kInteger) p.zp_int = zpi.data();
        SetValueFacts(&p, &scale, rng);
        for (const int64_t m : {1, 3, 8}) {
          // All rows, then from a row past the first block.
          for (const int64_t r0 : {int64_t{0}, 520 + static_cast<int64_t>(rng() % 64)}) {
            const int64_t c0 = 16 * static_cast<int64_t>(rng() % 4);
            const std::string diff = CompareDot(p, r0, rows, c0, cols, rng, &fused, m);
            CHECK_MESSAGE(diff.empty(), std::string(hwy::TargetName(target))
                                            << (gptq ? " gptq" : " awq") << " zp="
                                            << static_cast<int>(zp) << " m=" << m << " rows [" << r0
                                            << ", " << rows << ") from " << c0 << ": " << diff);
            ++compared;
          }
        }
      }
    }
    CHECK(compared == 24);
    // (AVX-512 and AVX2 fuse every one of them; the other targets write
    // tiles.)
    if (target <= HWY_AVX2) CHECK_MESSAGE(fused == compared, hwy::TargetName(target));
  }
}

TEST_CASE(
    "ConvertFloats: every float16 / bfloat16 pattern and awkward float32 x every target == "
    "scalar") {
  TargetGuard guard;
  // Sources: all 65536 16-bit patterns; float32 around every rounding edge
  // (ties, subnormals, overflow, NaN payloads, signs) plus random bits.
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<uint32_t> singles;
  std::mt19937_64 rng(17);
  for (uint32_t h = 0; h < 65536; h += 7) {
    const uint32_t hi = h << 16;
    for (uint32_t low : {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x0FFFu, 0x1000u, 0x1001u}) {
      singles.push_back(hi | low);
    }
    singles.push_back(hi | static_cast<uint32_t>(rng() & 0xFFFF));
  }
  for (int k = 0; k < 20000; ++k) singles.push_back(static_cast<uint32_t>(rng()));
  const OutType types[] = {OutType::kF32, OutType::kF16, OutType::kBF16};
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    for (OutType from : types) {
      for (OutType to : types) {
        CAPTURE(std::string(hwy::TargetName(target)));
        CAPTURE(static_cast<int>(from));
        CAPTURE(static_cast<int>(to));
        const void* src = from == OutType::kF32 ? static_cast<const void*>(singles.data())
                                                : static_cast<const void*>(halves.data());
        const size_t count = from == OutType::kF32 ? singles.size() : halves.size();
        const size_t ob = static_cast<size_t>(OutBytes(to));
        // Every length up to a few vectors (tails), then everything, at an
        // odd source and destination offset too.
        for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{17}, size_t{33}, size_t{65},
                         count - 1, count}) {
          for (size_t skew : {size_t{0}, size_t{1}}) {
            if (n + skew > count) continue;
            const auto* s =
                static_cast<const uint8_t*>(src) + skew * static_cast<size_t>(OutBytes(from));
            std::vector<uint8_t> want(n * ob + 3, 0xA5), got(n * ob + 3, 0xA5);
            ConvertFloatsReference(from, s, to, want.data(), static_cast<int64_t>(n));
            ConvertFloats(from, s, to, got.data() + 1, static_cast<int64_t>(n));
            CHECK(std::memcmp(got.data() + 1, want.data(), n * ob) == 0);
            CHECK(got[0] == 0xA5);
            CHECK(got[n * ob + 1] == 0xA5);
          }
        }
      }
    }
  }
  // The reference is the scalar rounding of the exact widening.
  for (uint16_t h : {uint16_t{0x0001}, uint16_t{0x7C01}, uint16_t{0xFBFF}, uint16_t{0x3555}}) {
    uint16_t b = 0;
    ConvertFloatsReference(OutType::kF16, &h, OutType::kBF16, &b, 1);
    CHECK(b == BF16FromF32(F32FromF16(h)));
    float f = 0;
    ConvertFloatsReference(OutType::kBF16, &h, OutType::kF32, &f, 1);
    CHECK(BitsFromF32(f) == uint32_t{h} << 16);
  }
}

TEST_CASE("threaded whole-tensor runs give identical bits for 1, 2, 3 and all threads") {
  TargetGuard guard;
  std::mt19937_64 rng(77);
  for (int64_t target : CompiledTargets()) {
    UseTarget(target);
    for (Form form : {Form::kPmxAxis1, Form::kPmxAxis0}) {
      // 160 x 4096: two threads' worth of elements (op/dequantizer.cc's
      // kMinElementsPerThread); 512 x 4096 (8 MiB) also crosses the
      // streaming threshold.
      for (int64_t rows : {int64_t{160}, int64_t{512}}) {
        PlanData d =
            MakePlan(rng, form, CodeKind::kU4, 4, rows, 4096, form == Form::kPmxAxis1 ? 128 : 4,
                     ZeroPointKind::kInteger, OutType::kF32, form == Form::kPmxAxis0 ? 1 : 0);
        const size_t n = static_cast<size_t>(rows * 4096);
        std::vector<float> ref(n), got(n);
        DequantizeTileReference(d.plan, 0, rows, 0, 4096, ref.data(), 4096);
        for (int threads : {1, 2, 3, 0}) {
          std::fill(got.begin(), got.end(), -1.0f);
          RunPlanThreaded(d.plan, got.data(), threads);
          CHECK_MESSAGE(std::memcmp(got.data(), ref.data(), n * 4) == 0,
                        std::string(hwy::TargetName(target))
                            << " rows=" << rows << " threads=" << threads);
        }
      }
    }
  }
}

// A producer's extra roundings (Plan::post_scale, Plan::product) run staged
// through float32 tiles: every target and tile offset gives the reference's
// bits, and the reference is the producers' arithmetic written out.
TEST_CASE("staged plans: post_scale and product roundings on every target") {
  TargetGuard guard;
  std::mt19937_64 rng(99);
  const int64_t rows = 7, cols = 2500;  // rows over two chunks of 1024
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  std::vector<float> scale(static_cast<size_t>(rows * 20));
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (auto& s : scale) s = std::ldexp(u(rng), static_cast<int>(rng() % 40) - 20);
  struct Case {
    CodeKind code;
    float post;
    OutType product;
  };
  const Case cases[] = {{CodeKind::kS8, 7.874015718698502e-3f, OutType::kF32},
                        {CodeKind::kF8E4M3FN, 1.0f, OutType::kBF16},
                        {CodeKind::kF8E4M3FN, 1.0f, OutType::kF16},
                        {CodeKind::kF8E5M2, 0.5f, OutType::kBF16}};
  for (const Case& k : cases) {
    for (OutType out : {OutType::kF32, OutType::kF16, OutType::kBF16}) {
      Plan plan;
      plan.layout = Layout::kDense;
      plan.code = k.code;
      plan.codes = codes.data();
      plan.outer = rows;
      plan.axis = cols;
      plan.group = 128;
      plan.s_outer = 20;
      plan.s_axis = 1;
      plan.scale = scale.data();
      plan.out = out;
      plan.post_scale = k.post;
      plan.product = k.product;
      const int64_t eb = OutBytes(out);
      // The arithmetic itself, for the first row: ((q * s) * post) rounded
      // to `product`, then to `out`.
      if (k.product == OutType::kF32 || k.product == out) {
        const bool staged = k.post != 1.0f;
        CHECK(plan.Staged() == staged);
      }
      std::vector<uint8_t> ref(static_cast<size_t>(rows * cols * eb));
      DequantizeTileReference(plan, 0, rows, 0, cols, ref.data(), cols);
      for (int64_t c = 0; c < cols; c += 97) {
        const uint8_t q = codes[static_cast<size_t>(c)];
        const float decoded = k.code == CodeKind::kS8 ? static_cast<float>(static_cast<int8_t>(q))
                                                      : FloatCodeTable(k.code)[q];
        float v = decoded * scale[static_cast<size_t>(c / 128)];
        v = v * k.post;
        if (k.product == OutType::kBF16) v = F32FromBF16(BF16FromF32(v));
        if (k.product == OutType::kF16) v = F32FromF16(F16FromF32(v));
        float got = 0;
        ConvertFloatsReference(out, ref.data() + c * eb, OutType::kF32, &got, 1);
        float want = 0;
        uint16_t h = 0;
        if (out == OutType::kF32) want = v;
        if (out == OutType::kF16) h = F16FromF32(v), want = F32FromF16(h);
        if (out == OutType::kBF16) h = BF16FromF32(v), want = F32FromBF16(h);
        CHECK((std::isnan(want) ? std::isnan(got) : BitsFromF32(got) == BitsFromF32(want)));
      }
      for (int64_t target : CompiledTargets()) {
        UseTarget(target);
        for (auto [r0, r1, c0, c1] :
             {std::array<int64_t, 4>{0, rows, 0, cols}, std::array<int64_t, 4>{2, 5, 1, 1030},
              std::array<int64_t, 4>{6, 7, 2047, 2500}}) {
          const int64_t w = c1 - c0;
          std::vector<uint8_t> got(static_cast<size_t>((r1 - r0) * w * eb) + 64, 0xEE);
          DequantizeTile(plan, r0, r1, c0, c1, got.data(), w);
          bool same = got[static_cast<size_t>((r1 - r0) * w * eb)] == 0xEE;
          for (int64_t r = r0; r < r1; ++r) {
            same = same &&
                   std::memcmp(got.data() + (r - r0) * w * eb, ref.data() + (r * cols + c0) * eb,
                               static_cast<size_t>(w * eb)) == 0;
          }
          CHECK_MESSAGE(same, hwy::TargetName(target) << " out " << static_cast<int>(out)
                                                      << " code " << static_cast<int>(k.code));
        }
      }
    }
  }
}

}  // namespace
}  // namespace nibble
