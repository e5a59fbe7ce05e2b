// GPTQ / AWQ / GGUF: readers, lowering and the dequant tool. Golden values
// computed by hand from the producers' formulas (../shared/FORMATS.md),
// round trips from seeded float weights written in each format, odd shapes,
// and corrupted / truncated files (clear error, nothing written).
#include "checkpoint/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/numeric.h"
#include "bench/synthetic_weights.h"
#include "checkpoint/convert.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/bitsandbytes.h"
#include "checkpoint/methods/compressed_tensors.h"
#include "checkpoint/methods/ggml.h"
#include "checkpoint/methods/gptq.h"
#include "doctest/doctest.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "kernels/dequantize.h"
#include "kernels/layouts.h"
#include "kernels/reference.h"
#include "testing/quantize_checkpoint.h"
#include "tests/checkpoint_writers.h"
#include "tests/ggml_oracle.h"
#include "tests/scratch_dir.h"
#include "tests/test_util.h"

namespace nibble {
namespace testing {
namespace {

namespace fs = std::filesystem;

// Run() into float32 (the output shape, [N, K] for GPTQ / AWQ).
std::vector<float> RunF32(const Dequantizer& d, bool /*n_by_k*/) {
  std::vector<float> y(static_cast<size_t>(d.rows() * d.cols()));
  MutableTensorView v{DType::kFloat32, d.output().shape, y.data(), y.size() * 4};
  const Status st = d.Run(v, 1);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return y;
}

// ---------------------------------------------------------------- golden --

TEST_CASE("GGUF Q4_0 block: d * (q - 8), low nibbles first then high") {
  std::vector<uint8_t> blk(18, 0);
  const uint16_t d = F16FromF32(0.5f);
  std::memcpy(blk.data(), &d, 2);
  blk[2] = 0x1F;  // element 0: 15 -> 3.5; element 16: 1 -> -3.5
  blk[3] = 0x80;  // element 1: 0 -> -4; element 17: 8 -> 0
  for (int j = 2; j < 16; ++j) blk[static_cast<size_t>(2 + j)] = 0x88;
  auto dq = PrepareGgml(kGgmlQ4_0, {32}, blk.data(), blk.size(), DType::kFloat32, "t");
  REQUIRE(dq.ok());
  const auto y = RunF32(*dq, false);
  CHECK(y[0] == 3.5f);
  CHECK(y[16] == -3.5f);
  CHECK(y[1] == -4.0f);
  CHECK(y[17] == 0.0f);
  CHECK(y[5] == 0.0f);
}

TEST_CASE("GGUF Q4_K super-block: d*sc*q - dmin*m with 6-bit packed scales") {
  std::vector<uint8_t> blk(144, 0);
  const uint16_t d = F16FromF32(1.0f), dmin = F16FromF32(0.5f);
  std::memcpy(blk.data(), &d, 2);
  std::memcpy(blk.data() + 2, &dmin, 2);
  uint8_t* q = blk.data() + 4;
  // Sub-block 0: sc 2, m 3. Sub-block 4: sc 37, m 26 (high bits in q[0], q[4]).
  q[0] = 2 | (2 << 6);   // sc0 | (sc4 >> 4) << 6
  q[4] = 3 | (1 << 6);   // m0  | (m4 >> 4) << 6
  q[8] = 5 | (10 << 4);  // (sc4 & 15) | (m4 & 15) << 4
  uint8_t* qs = blk.data() + 16;
  qs[0] = 0x97;   // element 0 (sub 0): q 7; element 32 (sub 1, sc 0, m 0): 0
  qs[64] = 0x03;  // element 128 (sub 4, low nibbles of chunk 2): q 3
  auto dq = PrepareGgml(kGgmlQ4_K, {256}, blk.data(), blk.size(), DType::kFloat32, "t");
  REQUIRE(dq.ok());
  const auto y = RunF32(*dq, false);
  CHECK(y[0] == 1.0f * 2 * 7 - 0.5f * 3);  // 12.5
  CHECK(y[1] == -1.5f);                    // q 0: -dmin * m
  CHECK(y[32] == 0.0f);                    // sub-block 1: sc 0, m 0
  CHECK(y[128] == 37.0f * 3 - 0.5f * 26);  // 98
  CHECK(y[129] == -13.0f);
}

TEST_CASE("GGUF Q4_1 and Q8_0 blocks") {
  std::vector<uint8_t> b1(20, 0);
  const uint16_t d = F16FromF32(0.25f), m = F16FromF32(-1.0f);
  std::memcpy(b1.data(), &d, 2);
  std::memcpy(b1.data() + 2, &m, 2);
  b1[4] = 0xF4;  // element 0: q 4 -> 0; element 16: q 15 -> 2.75
  auto d1 = PrepareGgml(kGgmlQ4_1, {32}, b1.data(), b1.size(), DType::kFloat32, "t");
  REQUIRE(d1.ok());
  const auto y1 = RunF32(*d1, false);
  CHECK(y1[0] == 0.0f);
  CHECK(y1[16] == 2.75f);
  CHECK(y1[1] == -1.0f);
  std::vector<uint8_t> b8(34, 0);
  std::memcpy(b8.data(), &d, 2);
  b8[2] = static_cast<uint8_t>(-128);
  b8[33] = 127;
  auto d8 = PrepareGgml(kGgmlQ8_0, {32}, b8.data(), b8.size(), DType::kFloat32, "t");
  REQUIRE(d8.ok());
  const auto y8 = RunF32(*d8, false);
  CHECK(y8[0] == -32.0f);
  CHECK(y8[31] == 31.75f);
}

// K = 16 input channels, N = 8 outputs, G = 8.
struct SmallGptq {
  std::vector<uint32_t> qweight = std::vector<uint32_t>(2 * 8);  // [K/8, N]
  std::vector<uint32_t> qzeros = std::vector<uint32_t>(2, 0x77777777u);
  std::vector<uint16_t> scales = std::vector<uint16_t>(2 * 8);
  SmallGptq() {
    for (int r = 0; r < 2; ++r) {
      for (int n = 0; n < 8; ++n) qweight[static_cast<size_t>(r * 8 + n)] = 0xFEDCBA98u;
    }
    for (int i = 0; i < 16; ++i) scales[static_cast<size_t>(i)] = F16FromF32(i < 8 ? 1.0f : 10.0f);
  }
};

TEST_CASE("GPTQ: symmetric qzeros 0x77777777 -> z = 8 (v1), z = 7 (v2) - [N, K] output") {
  SmallGptq g;
  const TensorView qw = View(DType::kInt32, {2, 8}, g.qweight);
  const TensorView qz = View(DType::kInt32, {2, 1}, g.qzeros);
  const TensorView sc = View(DType::kFloat16, {2, 8}, g.scales);
  for (bool v2 : {false, true}) {
    GptqOptions o;
    o.group_size = 8;
    o.zeros = v2 ? GptqZeros::kStored : GptqZeros::kPlusOne;
    auto d = PrepareGptq(o, qw, &qz, sc, nullptr, DType::kFloat32, "layer");
    REQUIRE_MESSAGE(d.ok(), d.status().message());
    CHECK(d->output().shape == Shape{8, 16});
    const auto y = RunF32(*d, true);  // [N = 8, K = 16]
    const float z = v2 ? 7.0f : 8.0f;
    for (int n = 0; n < 8; ++n) {
      for (int k = 0; k < 16; ++k) {
        const float q = static_cast<float>(8 + (k % 8));  // nibble j = k % 8 holds 8 + j
        const float s = k < 8 ? 1.0f : 10.0f;
        CHECK(y[static_cast<size_t>(n * 16 + k)] == (q - z) * s);
      }
    }
  }
}

TEST_CASE("GPTQ: a non-monotonic g_idx picks each channel's group - contiguous g_idx == none") {
  SmallGptq g;
  const TensorView qw = View(DType::kInt32, {2, 8}, g.qweight);
  const TensorView qz = View(DType::kInt32, {2, 1}, g.qzeros);
  const TensorView sc = View(DType::kFloat16, {2, 8}, g.scales);
  std::vector<int32_t> gidx(16);
  for (int k = 0; k < 16; ++k) gidx[static_cast<size_t>(k)] = (k % 2 == 0) ? 1 : 0;
  const TensorView gv = View(DType::kInt32, {16}, gidx);
  GptqOptions o;
  o.group_size = 8;
  auto d = PrepareGptq(o, qw, &qz, sc, &gv, DType::kFloat32, "layer");
  REQUIRE(d.ok());
  CHECK(d->plan().axis_group != nullptr);
  const auto y = RunF32(*d, true);
  for (int k = 0; k < 16; ++k) {
    const float s = k % 2 == 0 ? 10.0f : 1.0f;
    CHECK(y[static_cast<size_t>(3 * 16 + k)] == static_cast<float>(k % 8) * s);
  }
  for (int k = 0; k < 16; ++k) gidx[static_cast<size_t>(k)] = k / 8;
  auto fast = PrepareGptq(o, qw, &qz, sc, &gv, DType::kFloat32, "layer");
  REQUIRE(fast.ok());
  CHECK(fast->plan().axis_group == nullptr);  // the contiguous fast path
  auto none = PrepareGptq(o, qw, &qz, sc, nullptr, DType::kFloat32, "layer");
  CHECK(RunF32(*fast, true) == RunF32(*none, true));
  gidx[3] = 2;
  auto bad = PrepareGptq(o, qw, &qz, sc, &gv, DType::kFloat32, "layer");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "GPTQ 'layer': g_idx[3] = 2 is outside the 2 groups");
}

TEST_CASE(
    "act-order GPTQ: the [N, K] output == the scalar reference transposed, any shape, type, "
    "threads") {
  // Shapes spanning several 512-column bands and 256-row tiles with partial
  // ones, view rows (K) whose 64-byte runs are whole (register transpose)
  // or not (element path), and row ranges read on their own.
  std::mt19937 rng(5);
  // Groups: up to 128 (rows: the row kernel's tables; 17 fill two
  // registers and a bit, 65 eight) and more (the column tiles); integer
  // zero points and symmetric (one code offset).
  struct Case {
    int64_t N, K, G;
    bool sym;
  };
  for (const Case c :
       {Case{1032, 544, 32, false}, Case{40, 136, 8, false}, Case{600, 64, 16, true},
        Case{8, 40, 8, false}, Case{152, 1040, 16, true}, Case{56, 1056, 8, false}}) {
    const std::vector<float> w = MakeLlmLikeWeight(c.N, c.K, 9);
    std::vector<int32_t> g_idx(static_cast<size_t>(c.K));
    for (int64_t k = 0; k < c.K; ++k) g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / c.G);
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
    auto q = QuantizeGptq(w.data(), c.N, c.K, c.G, c.sym, false, g_idx);
    REQUIRE(q.ok());
    CAPTURE(c.sym);
    GptqOptions o;
    o.group_size = c.G;
    const TensorView z = q->qzeros.view(), g = q->g_idx.view();
    for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      CAPTURE(c.N);
      CAPTURE(c.K);
      CAPTURE(DTypeName(dt));
      auto d = PrepareGptq(o, q->qweight.view(), &z, q->scales.view(), &g, dt, "w");
      REQUIRE(d.ok());
      // The [N, K] view where the kernels have group-map column tiles,
      // else the [K, N] view written transposed.
      const bool tiles = HasGroupMapColumnTiles();
      REQUIRE(d->output_transposed() == !tiles);
      REQUIRE(d->rows() == (tiles ? c.N : c.K));
      REQUIRE(d->cols() == (tiles ? c.K : c.N));
      const size_t eb = static_cast<size_t>(DTypeBits(dt) / 8);
      std::vector<uint8_t> want(static_cast<size_t>(c.K * c.N) * eb);
      if (tiles) {
        DequantizeTileReference(d->plan(), 0, c.N, 0, c.K, want.data(), c.K);
      } else {
        std::vector<uint8_t> view(want.size());
        DequantizeTileReference(d->plan(), 0, c.K, 0, c.N, view.data(), c.N);
        for (int64_t k = 0; k < c.K; ++k) {
          for (int64_t n = 0; n < c.N; ++n) {
            std::memcpy(&want[static_cast<size_t>(n * c.K + k) * eb],
                        &view[static_cast<size_t>(k * c.N + n) * eb], eb);
          }
        }
      }
      for (int threads : {1, 2, 3, 0}) {
        CAPTURE(threads);
        auto y = d->Run(threads);
        REQUIRE(y.ok());
        REQUIRE(y->size_bytes() == want.size());
        CHECK(std::memcmp(y->data(), want.data(), want.size()) == 0);
      }
      // Output rows [r0, r1) alone, one guard byte after them.
      const int64_t r0 = static_cast<int64_t>(rng() % static_cast<uint32_t>(c.N));
      const int64_t r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(c.N - r0));
      const size_t n = static_cast<size_t>((r1 - r0) * c.K) * eb;
      std::vector<uint8_t> part(n + 1, 0xA5);
      REQUIRE(d->RunRows(r0, r1, part.data(), n, 2).ok());
      CHECK(part.back() == 0xA5);
      CHECK(std::memcmp(part.data(), &want[static_cast<size_t>(r0 * c.K) * eb], n) == 0);
      // Tiles from any row and column (mid-word, mid-band), a guard
      // element after each row.
      for (int t = 0; t < 4 && tiles; ++t) {
        const int64_t a0 = static_cast<int64_t>(rng() % static_cast<uint32_t>(c.N));
        const int64_t a1 = a0 + 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(c.N - a0));
        const int64_t b0 = static_cast<int64_t>(rng() % static_cast<uint32_t>(c.K));
        const int64_t b1 = b0 + 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(c.K - b0));
        CAPTURE(a0);
        CAPTURE(a1);
        CAPTURE(b0);
        CAPTURE(b1);
        const int64_t ld = b1 - b0 + 1;
        std::vector<uint8_t> tile(static_cast<size_t>((a1 - a0) * ld) * eb, 0xA5);
        REQUIRE(d->RunTile(a0, a1, b0, b1, tile.data(), ld).ok());
        bool same = true, guards = true;
        for (int64_t r = a0; r < a1; ++r) {
          const uint8_t* got = &tile[static_cast<size_t>((r - a0) * ld) * eb];
          same = same && std::memcmp(got, &want[static_cast<size_t>(r * c.K + b0) * eb],
                                     static_cast<size_t>(b1 - b0) * eb) == 0;
          guards = guards && got[static_cast<size_t>(b1 - b0) * eb] == 0xA5;
        }
        CHECK(same);
        CHECK(guards);
      }
    }
  }
}

TEST_CASE("AWQ: nibble i of a word holds column 8c + [0,2,4,6,1,3,5,7][i]") {
  std::vector<uint32_t> qweight(1, 0x76543210u);  // K 1, N 8: nibble i = i
  std::vector<uint32_t> qzeros(1, 0);
  std::vector<uint16_t> scales(8, F16FromF32(1.0f));
  TensorView zv = View(DType::kInt32, {1, 1}, qzeros);
  auto d = PrepareAwq(1, View(DType::kInt32, {1, 1}, qweight), &zv,
                      View(DType::kFloat16, {1, 8}, scales), DType::kFloat32, "a");
  REQUIRE_MESSAGE(d.ok(), d.status().message());
  const auto y = RunF32(*d, true);  // [N 8, K 1]
  const float want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int n = 0; n < 8; ++n) CHECK(y[static_cast<size_t>(n)] == want[n]);
  // Zero points follow the same order: z word 0x76543210 -> z[n] = want[n].
  qzeros[0] = 0x76543210u;
  zv = View(DType::kInt32, {1, 1}, qzeros);
  auto dz = PrepareAwq(1, View(DType::kInt32, {1, 1}, qweight), &zv,
                       View(DType::kFloat16, {1, 8}, scales), DType::kFloat32, "a");
  for (float v : RunF32(*dz, true)) CHECK(v == 0.0f);
}

// ------------------------------------------------------------ round trips --

// Max |w - w'| / s per group must stay within the bound.
TEST_CASE("GPTQ / AWQ round trips from seeded weights, odd shapes, every output type") {
  struct Case {
    int64_t N, K, G;
    bool sym, v2, act_order;
  };
  const Case cases[] = {{8, 8, 8, true, false, false},      {16, 24, -1, false, false, false},
                        {24, 40, 16, false, true, false},   {64, 256, 32, true, true, true},
                        {40, 128, 128, false, false, true}, {136, 64, 64, false, true, false}};
  for (const Case& c : cases) {
    const auto w = MakeLlmLikeWeight(c.N, c.K, 99);
    const int64_t G = c.G == -1 ? c.K : c.G, groups = (c.K + G - 1) / G;
    std::vector<int32_t> gidx;
    if (c.act_order) {  // every group G members, scattered
      for (int64_t k = 0; k < c.K; ++k) gidx.push_back(static_cast<int32_t>((k * 7 % c.K) / G));
    }
    auto t = QuantizeGptq(w.data(), c.N, c.K, c.G, c.sym, c.v2, gidx);
    REQUIRE(t.ok());
    GptqOptions o;
    o.group_size = c.G;
    o.zeros = c.v2 ? GptqZeros::kStored : GptqZeros::kPlusOne;
    const TensorView qz = t->qzeros.view(), gi = t->g_idx.view();
    auto d = PrepareGptq(o, t->qweight.view(), &qz, t->scales.view(), &gi, DType::kFloat32, "g");
    REQUIRE_MESSAGE(d.ok(), d.status().message());
    const auto y = RunF32(*d, true);
    const auto* sc = t->scales.data_as<uint16_t>();
    for (int64_t n = 0; n < c.N; ++n) {
      for (int64_t k = 0; k < c.K; ++k) {
        const int64_t g = c.act_order ? gidx[static_cast<size_t>(k)] : k / G;
        const float s = F32FromF16(sc[g * c.N + n]);
        const float err =
            std::fabs(y[static_cast<size_t>(n * c.K + k)] - w[static_cast<size_t>(n * c.K + k)]);
        CHECK_MESSAGE(err <= (c.sym ? 0.5f : 1.0f) * s * 1.001f,
                      "N=" << c.N << " K=" << c.K << " n=" << n << " k=" << k);
      }
    }
    CHECK(MeasureError(w.data(), y.data(), c.N * c.K).sqnr_db > 15.0);
    // Every output type == float32 rounded (one rounding).
    for (DType out : {DType::kFloat16, DType::kBFloat16}) {
      auto dh = PrepareGptq(o, t->qweight.view(), &qz, t->scales.view(), &gi, out, "g");
      REQUIRE(dh.ok());
      std::vector<uint16_t> h(y.size());
      REQUIRE(dh->Run({out, {c.N, c.K}, h.data(), h.size() * 2}, 0).ok());
      for (size_t i = 0; i < h.size(); ++i) {
        CHECK(h[i] == (out == DType::kFloat16 ? F16FromF32(y[i]) : BF16FromF32(y[i])));
      }
    }
    (void)groups;
    // AWQ on the same weights.
    auto a = QuantizeAwq(w.data(), c.N, c.K, c.G);
    REQUIRE(a.ok());
    const TensorView az = a->qzeros.view();
    auto da = PrepareAwq(c.G, a->qweight.view(), &az, a->scales.view(), DType::kFloat32, "a");
    REQUIRE_MESSAGE(da.ok(), da.status().message());
    const auto ya = RunF32(*da, true);
    const auto* sa = a->scales.data_as<uint16_t>();
    for (int64_t n = 0; n < c.N; ++n) {
      for (int64_t k = 0; k < c.K; ++k) {
        const float s = F32FromF16(sa[(k / G) * c.N + n]);
        CHECK(std::fabs(ya[static_cast<size_t>(n * c.K + k)] -
                        w[static_cast<size_t>(n * c.K + k)]) <= s * 1.001f);
      }
    }
  }
}

TEST_CASE("compressed-tensors / bitsandbytes NF4 writers round trip through their loaders") {
  struct Case {
    int64_t N, K, G;
    bool act_order;
  };
  for (const Case c : {Case{8, 8, 8, false}, Case{24, 40, 16, false}, Case{40, 128, 32, true},
                       Case{17, 256, -1, false}, Case{64, 96, 32, true}}) {
    CAPTURE(c.N);
    CAPTURE(c.K);
    const auto w = MakeLlmLikeWeight(c.N, c.K, 7);
    const int64_t G = c.G == -1 ? c.K : c.G, groups = (c.K + G - 1) / G;
    std::vector<int32_t> gidx;
    if (c.act_order) {  // every group G members, scattered
      for (int64_t k = 0; k < c.K; ++k) gidx.push_back(static_cast<int32_t>((k * 7 % c.K) / G));
    }
    auto t = QuantizeCompressedTensors(w.data(), c.N, c.K, c.G, gidx);
    REQUIRE(t.ok());
    const TensorView wp = t->weight_packed.view(), sc = t->weight_scale.view(),
                     sh = t->weight_shape.view(), gi = t->weight_g_idx.view();
    CompressedTensorsWeight x;
    x.weight = &wp;
    x.weight_shape = &sh;
    x.scale = &sc;
    x.g_idx = c.act_order ? &gi : nullptr;
    x.group_size = G;  // (a ragged last group: the shapes alone do not say G)
    auto d = PrepareCompressedTensors(x, DType::kFloat32, "ct");
    REQUIRE_MESSAGE(d.ok(), d.status().message());
    const auto y = RunF32(*d, true);
    const auto* words = t->weight_packed.data_as<uint32_t>();
    const auto* s16 = t->weight_scale.data_as<uint16_t>();
    for (int64_t n = 0; n < c.N; ++n) {
      for (int64_t k = 0; k < c.K; ++k) {
        const int64_t g = c.act_order ? gidx[static_cast<size_t>(k)] : k / G;
        const float s = F32FromF16(s16[n * groups + g]);
        const auto q = static_cast<int32_t>((words[n * (c.K / 8) + k / 8] >> (4 * (k % 8))) & 15u);
        const size_t i = static_cast<size_t>(n * c.K + k);
        CHECK(y[i] == static_cast<float>(q - 8) * s);  // the format's own rule
        CHECK(std::fabs(y[i] - w[i]) <= 0.5f * s * 1.001f);
      }
    }
    CHECK(MeasureError(w.data(), y.data(), c.N * c.K).sqnr_db > (c.G == -1 ? 8.0 : 12.0));

    for (int64_t block : {64, 32, 4096}) {
      auto b = QuantizeBnbNf4(w.data(), c.N, c.K, block);
      REQUIRE(b.ok());
      const TensorView bw = b->weight.view(), am = b->absmax.view(), qm = b->quant_map.view();
      Bnb4Weight bx;
      bx.shape = {c.N, c.K};
      bx.blocksize = block;
      bx.weight = &bw;
      bx.absmax = &am;
      bx.quant_map = &qm;
      auto db = PrepareBnb4(bx, DType::kFloat32, "bnb");
      REQUIRE_MESSAGE(db.ok(), db.status().message());
      const auto yb = RunF32(*db, true);
      const auto* codes = b->weight.data_as<uint8_t>();
      const auto* amax = b->absmax.data_as<float>();
      const auto* levels = b->quant_map.data_as<float>();
      for (int64_t e = 0; e < c.N * c.K; ++e) {
        const int q = e % 2 == 0 ? codes[e / 2] >> 4 : codes[e / 2] & 15;
        const size_t i = static_cast<size_t>(e);
        CHECK(yb[i] == levels[q] * amax[e / block]);
        // NF4's widest gap between neighbouring levels is under 0.33.
        CHECK(std::fabs(yb[i] - w[i]) <= 0.165f * amax[e / block]);
      }
    }
  }
  CHECK(!QuantizeCompressedTensors(nullptr, 8, 12, 8).ok());  // K % 8 != 0
  CHECK(!QuantizeBnbNf4(nullptr, 8, 8, 0).ok());
}

// Each method's lowering run under ScopedPrepareThreads(1) and (4): the
// same output bits (its parameter passes split into ranges on four threads).
TEST_CASE("checkpoint lowerings prepared on four threads give one thread's bits") {
  const int64_t N = 512, K = 2048;
  const auto same = [&](const std::function<StatusOr<Dequantizer>()>& prepare) {
    std::vector<float> y[2];
    for (int i = 0; i < 2; ++i) {
      ScopedPrepareThreads scope(i == 0 ? 1 : 4);
      auto d = prepare();
      REQUIRE_MESSAGE(d.ok(), d.status().message());
      y[i] = RunF32(*d, true);
    }
    CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * 4) == 0);
  };
  const auto w = MakeLlmLikeWeight(N, K, 5);
  SUBCASE("GPTQ and AWQ: unpacked zero words, float16 scales") {
    auto t = QuantizeGptq(w.data(), N, K, 32, /*sym=*/false, /*v2=*/false, {});
    REQUIRE(t.ok());
    GptqOptions o;
    o.group_size = 32;
    const TensorView qz = t->qzeros.view();
    same([&] {
      return PrepareGptq(o, t->qweight.view(), &qz, t->scales.view(), nullptr, DType::kFloat32,
                         "g");
    });
    auto a = QuantizeAwq(w.data(), N, K, 32);
    REQUIRE(a.ok());
    const TensorView az = a->qzeros.view();
    same([&] {
      return PrepareAwq(32, a->qweight.view(), &az, a->scales.view(), DType::kFloat32, "a");
    });
  }
  SUBCASE("compressed-tensors: packed and unpacked zero points") {
    const int64_t groups = K / 32;
    std::vector<uint32_t> words(static_cast<size_t>(N * K / 8));
    std::vector<uint16_t> scale(static_cast<size_t>(N * groups));
    std::vector<uint32_t> zpacked(static_cast<size_t>(N / 8 * groups));
    std::vector<int8_t> zplain(static_cast<size_t>(N * groups));
    uint32_t r = 3;
    const auto next = [&r] { return r = r * 1664525u + 1013904223u; };
    for (auto& v : words) v = next();
    for (auto& v : scale) v = F16FromF32(static_cast<float>(next() >> 22) * 1e-4f + 1e-3f);
    for (auto& v : zpacked) v = next();
    for (auto& v : zplain) v = static_cast<int8_t>(static_cast<int>(next() >> 28) - 8);
    const std::vector<int64_t> shape{N, K};
    const TensorView wv{DType::kInt32, {N, K / 8}, words.data(), words.size() * 4};
    const TensorView sv{DType::kFloat16, {N, groups}, scale.data(), scale.size() * 2};
    const TensorView hv{DType::kInt64, {2}, shape.data(), 16};
    const TensorView zp{DType::kInt32, {N / 8, groups}, zpacked.data(), zpacked.size() * 4};
    const TensorView zu{DType::kInt8, {N, groups}, zplain.data(), zplain.size()};
    for (const TensorView* z : {&zp, &zu}) {
      CompressedTensorsWeight x;
      x.weight = &wv;
      x.weight_shape = &hv;
      x.scale = &sv;
      x.zero_point = z;
      same([&] { return PrepareCompressedTensors(x, DType::kFloat32, "ct"); });
    }
  }
  SUBCASE("bitsandbytes NF4 with double quantization") {
    const int64_t blocks = N * K / 64;
    auto b = QuantizeBnbNf4(w.data(), N, K, 64);
    REQUIRE(b.ok());
    std::vector<uint8_t> codes(static_cast<size_t>(blocks));
    std::vector<float> nested(static_cast<size_t>(blocks / 256)), levels(256);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 37 % 251);
    for (size_t i = 0; i < nested.size(); ++i) nested[i] = 0.01f + 0.001f * static_cast<float>(i);
    for (size_t i = 0; i < levels.size(); ++i) levels[i] = static_cast<float>(i) / 255.0f;
    const TensorView bw = b->weight.view(), qm = b->quant_map.view();
    const TensorView am{DType::kUInt8, {blocks}, codes.data(), codes.size()};
    const TensorView na{DType::kFloat32, {blocks / 256}, nested.data(), nested.size() * 4};
    const TensorView nq{DType::kFloat32, {256}, levels.data(), levels.size() * 4};
    Bnb4Weight x;
    x.shape = {N, K};
    x.weight = &bw;
    x.absmax = &am;
    x.quant_map = &qm;
    x.nested_absmax = &na;
    x.nested_quant_map = &nq;
    x.nested_offset = 0.0123f;
    same([&] { return PrepareBnb4(x, DType::kFloat32, "bnb"); });
    const TensorView plain = b->absmax.view();
    x.absmax = &plain;
    x.nested_absmax = x.nested_quant_map = nullptr;
    same([&] { return PrepareBnb4(x, DType::kFloat32, "bnb"); });
  }
}

TEST_CASE("GPTQ / compressed-tensors writers refuse a g_idx of the wrong length or range") {
  const auto w = MakeLlmLikeWeight(8, 16, 3);
  const std::vector<int32_t> short_idx(15, 0), bad_group(16, 2), ok_idx(16, 1);
  for (const auto* idx : {&short_idx, &bad_group}) {
    auto ct = QuantizeCompressedTensors(w.data(), 8, 16, 8, *idx);
    REQUIRE_FALSE(ct.ok());
    CHECK(ct.status().message().find("QuantizeCompressedTensors: g_idx") != std::string::npos);
    auto gq = QuantizeGptq(w.data(), 8, 16, 8, true, false, *idx);
    REQUIRE_FALSE(gq.ok());
    CHECK(gq.status().message().find("QuantizeGptq: g_idx") != std::string::npos);
  }
  CHECK(QuantizeCompressedTensors(w.data(), 8, 16, 8, ok_idx).ok());
  CHECK_FALSE(QuantizeCompressedTensors(w.data(), 8, 16, 0).ok());
}

TEST_CASE("GGUF round trips: Q4_0 / Q4_1 / Q8_0 / Q4_K / MXFP4, 1-D to 3-D, threads agree") {
  for (uint32_t type : {kGgmlQ4_0, kGgmlQ4_1, kGgmlQ8_0, kGgmlQ4_K, kGgmlMXFP4}) {
    const int64_t block = type == kGgmlQ4_K ? 256 : 32;
    for (std::vector<int64_t> ne :
         {std::vector<int64_t>{block}, {2 * block, 3}, {4 * block, 5, 2}, {8 * block, 64}}) {
      int64_t rows = 1;
      for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
      const auto w = MakeLlmLikeWeight(rows, ne[0], 5);
      auto bytes = QuantizeGgml(type, w.data(), rows, ne[0]);
      REQUIRE(bytes.ok());
      auto d = PrepareGgml(type, ne, bytes->data(), bytes->size(), DType::kFloat32, "t");
      REQUIRE_MESSAGE(d.ok(), d.status().message());
      CHECK(d->output().shape == Shape(ne.rbegin(), ne.rend()));
      const auto y = RunF32(*d, false);
      const double sqnr = MeasureError(w.data(), y.data(), rows * ne[0]).sqnr_db;
      // (SQNR over at least 1024 elements: one 32-element block with an
      // outlier is legitimately worse.)
      if (rows * ne[0] >= 1024)
        CHECK_MESSAGE(sqnr > (type == kGgmlQ8_0 ? 35.0 : 15.0),
                      "type " << type << " sqnr " << sqnr << " ne0 " << ne[0] << " rows " << rows);
      // The scalar reference over the same plan agrees bit for bit.
      std::vector<float> ref(y.size());
      DequantizeTileReference(d->plan(), 0, d->rows(), 0, d->cols(), ref.data(), d->cols());
      CHECK(std::memcmp(ref.data(), y.data(), y.size() * 4) == 0);
      std::vector<float> y2(y.size());
      REQUIRE(d->Run({DType::kFloat32, d->output().shape, y2.data(), y2.size() * 4}, 2).ok());
      CHECK(y2 == y);
    }
  }
}

TEST_CASE(
    "every registered block layout: geometry == the GGUF type table, and an oracle decodes it") {
  std::vector<uint32_t> registered;
  std::string names;
#define NIBBLE_TEST_REGISTERED(D)                                                    \
  {                                                                                  \
    const GgmlTypeInfo* info = GgmlTypeTraits(D::kGgmlType);                         \
    REQUIRE_MESSAGE(info != nullptr, D::kName);                                      \
    CHECK(std::string(info->name) == D::kName);                                      \
    CHECK(info->block == D::kBlockElems);                                            \
    CHECK(info->bytes == D::kBytes);                                                 \
    CHECK(OracleBlockElems(D::kGgmlType) == D::kBlockElems);                         \
    CHECK(OracleBlockBytes(D::kGgmlType) == D::kBytes);                              \
    CHECK(GgmlTypeIsDequantizable(D::kGgmlType));                                    \
    CHECK(GgmlBlockDescription(D::kGgmlType).find(std::to_string(D::kBlockElems)) != \
          std::string::npos);                                                        \
    registered.push_back(D::kGgmlType);                                              \
    names += (names.empty() ? "" : ", ") + std::string(D::kName);                    \
  }
  NIBBLE_BLOCK_LAYOUTS(NIBBLE_TEST_REGISTERED)
  NIBBLE_DECODED_LAYOUTS(NIBBLE_TEST_REGISTERED)
#undef NIBBLE_TEST_REGISTERED
  std::vector<uint32_t> oracle(std::begin(kOracleTypes), std::end(kOracleTypes));
  std::sort(registered.begin(), registered.end());
  std::sort(oracle.begin(), oracle.end());
  CHECK(registered == oracle);  // a layout without an independent decoder fails here
  // Unregistered types are refused by name, listing the registered ones.
  // Every type ggml defines a to_float for is registered; the two it does
  // not (its activation types) are refused with that reason.
  CHECK(!GgmlTypeIsDequantizable(9));   // q8_1
  CHECK(!GgmlTypeIsDequantizable(15));  // q8_k
  const uint8_t none[1] = {0};
  auto d = PrepareGgml(15, {256}, none, 0, DType::kFloat32, "w");
  REQUIRE(!d.ok());
  CHECK(d.status().message() ==
        "GGUF tensor 'w': ggml type q8_k is an activation type (ggml quantizes matmul inputs to "
        "it and defines no conversion back to float): no model file stores weights in it");
  d = PrepareGgml(77, {256}, none, 0, DType::kFloat32, "w");
  REQUIRE(!d.ok());
  CHECK(d.status().message() ==
        "GGUF tensor 'w': unknown ggml type id 77 (not a type ggml defines: a newer or a damaged "
        "file?)");
  CHECK(DequantizableGgmlTypeNames() == names);
}

// Hand-built blocks with values worked out by hand (the comments), checked
// through PrepareGgml (SIMD path: one 256- or 32-element row per block is
// >= 2N) and through the test oracle, so neither can drift from the format.
TEST_CASE("GGUF golden blocks: hand-computed values of every bit-plane and scale packing") {
  struct Golden {
    const char* name;
    uint32_t type;
    std::vector<std::pair<int, uint8_t>> bytes;  // (offset, value); rest 0
    std::vector<std::pair<int, float>> want;     // (element, value)
  };
  const float kTiny = std::ldexp(1.0f, -24);  // f16 0x0001 / 0x8001
  const std::vector<Golden> goldens = {
      // Q5_0 {d; qh[4]; qs[16]}, d = 0.5, qh = 0x80000001:
      // e0 = (0xF | 16) - 16 = 15 -> 7.5; e16 = 3 - 16 -> -6.5;
      // e15 = 0 - 16 -> -8; e31 = (0xA | 16) - 16 = 10 -> 5.
      {"q5_0",
       kOracleQ5_0,
       {{0, 0x00}, {1, 0x38}, {2, 0x01}, {5, 0x80}, {6, 0x3F}, {21, 0xA0}},
       {{0, 7.5f}, {16, -6.5f}, {15, -8.0f}, {31, 5.0f}, {1, -8.0f}}},
      // Q5_1 {d; m; qh; qs}, d = 0.25, m = -2^-24 (negative subnormal),
      // qh bit 1: e1 = (2 | 16) * 0.25 + m = 4.5 - 2^-24 (rounds to 4.5);
      // e17 = 5 * 0.25 + m; e0 = 0 * 0.25 + m = -2^-24.
      {"q5_1",
       kOracleQ5_1,
       {{0, 0x00}, {1, 0x34}, {2, 0x01}, {3, 0x80}, {4, 0x02}, {9, 0x52}},
       {{1, 4.5f}, {17, 1.25f - kTiny}, {0, -kTiny}}},
      // Q2_K {scales[16]; qs[64]; d; dmin}, d = 2, dmin = 0.5:
      // sub 0 (sc 1, m 2): e0 = 2 * 0 - 1 = -1; sub 2 (sc 2, m 1): e32 =
      // field 1 of qs[0] = 1 -> 4 - 0.5 = 3.5; sub 6 (sc 1, m 15): e96 =
      // field 3 = 3 -> 6 - 7.5 = -1.5; sub 3 (sc 15, m 5): e48 = field 1 of
      // qs[16] = 3 -> 90 - 2.5 = 87.5; sub 15 (sc 3, m 1): e255 = field 3
      // of qs[63] = 2 -> 12 - 0.5 = 11.5.
      {"q2_k",
       kOracleQ2_K,
       {{0, 0x21},
        {2, 0x12},
        {3, 0x5F},
        {6, 0xF1},
        {15, 0x13},
        {16 + 0, 0xE4},
        {16 + 16, 0x0C},
        {16 + 63, 0x80},
        {81, 0x40},
        {83, 0x38}},
       {{0, -1.0f}, {32, 3.5f}, {96, -1.5f}, {48, 87.5f}, {255, 11.5f}}},
      // Q3_K {hmask[32]; qs[64]; scales[12]; d}, d = 1; 6-bit scales
      // sc0 = 33 (low 1 in scales[0], high 2 in scales[8] bits 0-1),
      // sc15 = 63 (low 15 in scales[7]'s high nibble, high 3 in scales[11]
      // bits 6-7), every other sc = 0. e0 = (3 | 4) - 4 = 3 -> 1 * 3;
      // e1 = 0 - 4 -> -4; e144 (sub 9: -32) = qs[48] field 0 = 2, hmask[16]
      // bit 4 set -> 6 - 4 = 2 -> -64; e255 (sub 15: 31) = qs[63] field 3
      // = 1, hmask[31] bit 7 clear -> 1 - 4 = -3 -> -93.
      {"q3_k",
       kOracleQ3_K,
       {{0, 0x01},
        {16, 0x10},
        {32 + 0, 0x03},
        {32 + 48, 0x02},
        {32 + 63, 0x40},
        {96 + 0, 0x01},
        {96 + 7, 0xF0},
        {96 + 8, 0x02},
        {96 + 11, 0xC0},
        {109, 0x3C}},
       {{0, 3.0f}, {1, -4.0f}, {144, -64.0f}, {255, -93.0f}}},
      // Q5_K {d; dmin; scales[12]; qh[32]; qs[128]}, d = dmin = 1;
      // sub 0: sc 2, m 1 (scales[0], scales[4]); sub 7: sc 40 = 0x28, m 17
      // = 0x11 (scales[11] = 0x18: low nibbles 8 and 1; scales[3] bits 6-7
      // = 2, scales[7] bits 6-7 = 1). e0 = 0xF | 16 = 31 -> 62 - 1 = 61;
      // e255 = high nibble of qs[127] (9) | qh[31] bit 7 (16) = 25 ->
      // 1000 - 17 = 983.
      {"q5_k",
       kOracleQ5_K,
       {{1, 0x3C},
        {3, 0x3C},
        {4 + 0, 0x02},
        {4 + 3, 0x80},
        {4 + 4, 0x01},
        {4 + 7, 0x40},
        {4 + 11, 0x18},
        {16 + 0, 0x01},
        {16 + 31, 0x80},
        {48 + 0, 0x0F},
        {48 + 127, 0x90}},
       {{0, 61.0f}, {255, 983.0f}, {1, -1.0f}}},
      // Q6_K {ql[128]; qh[64]; i8 scales[16]; d}, d = 0.5; sc0 = -3,
      // sc6 = 1, sc15 = 100. e0 = 0xA | 2 << 4 = 42 - 32 = 10 -> -1.5 * 10
      // = -15; e101 (sub 6) = high nibble of ql[37] (7) | qh[5] bits 6-7
      // (3) << 4 = 55 - 32 = 23 -> 11.5; e255 = high nibble of ql[127]
      // (15), qh[63] bits 6-7 = 0 -> 15 - 32 = -17 -> 50 * -17 = -850.
      {"q6_k",
       kOracleQ6_K,
       {{0, 0x0A},
        {37, 0x70},
        {127, 0xF0},
        {128 + 0, 0x02},
        {128 + 5, 0xC0},
        {192 + 0, 0xFD},
        {192 + 6, 0x01},
        {192 + 15, 100},
        {209, 0x38}},
       {{0, -15.0f}, {101, 11.5f}, {255, -850.0f}}},
      // Q6_K with d = 0: every value is a signed zero (sign from sc and q).
      {"q6_k d=0", kOracleQ6_K, {{0, 0x0A}, {192, 0xFD}}, {{0, 0.0f}, {255, 0.0f}}},
      // Q3_K with d = -1 (0xBC00) and sc0 = 33: e0 = (3 | 4) - 4 = 3 ->
      // (-1 * 1) * 3 = -3; e1 (q 0 - 4, sc0) -> 4.
      {"q3_k d<0",
       kOracleQ3_K,
       {{0, 0x01}, {32, 0x03}, {96, 0x01}, {104, 0x02}, {109, 0xBC}},
       {{0, -3.0f}, {1, 4.0f}}},
      // TQ2_0 {qs[64]; d}, d = 2: e0 = (2 - 1) * 2 = 2; e255 = field 3 of
      // qs[63] = 0 -> -2; e32 = field 1 of qs[0] = 3 -> 4.
      {"tq2_0", kOracleTQ2_0, {{0, 0x0E}, {65, 0x40}}, {{0, 2.0f}, {255, -2.0f}, {32, 4.0f}}},
      // Q2_0 {d; qs[16]}, d = 2, qs[0] = 0b11'10'01'00: e0..e3 = (0, 1, 2, 3)
      // - 1 times 2 = -2, 0, 2, 4; e63 = bits 6-7 of qs[15] = 0 -> -2.
      {"q2_0",
       kOracleQ2_0,
       {{1, 0x40}, {2, 0xE4}},
       {{0, -2.0f}, {1, 0.0f}, {2, 2.0f}, {3, 4.0f}, {63, -2.0f}}},
      // TQ1_0, d = 2 (bytes 52-53): digit n of byte b = ((uint8)(b * 3^n) * 3)
      // >> 8; 0xFF has digits 2, 2, 2, 2, 2; 0x33: 0, 1, 2, 1, 0; 86: 1, 0, 0,
      // 0, 0. qs[0] = 0xFF: e0, e32, e128 = 2; qs[5] = 0x33: e5 -2, e37 0,
      // e69 2, e101 0; qs[32] = 86: e160 = 0; qh[0] = 0xFF: e240, e244 = 2;
      // zero bytes: -2 (e1, e161, e241).
      {"tq1_0",
       kOracleTQ1_0,
       {{0, 0xFF}, {5, 0x33}, {32, 86}, {48, 0xFF}, {53, 0x40}},
       {{0, 2.0f},
        {32, 2.0f},
        {128, 2.0f},
        {1, -2.0f},
        {5, -2.0f},
        {37, 0.0f},
        {69, 2.0f},
        {101, 0.0f},
        {160, 0.0f},
        {161, -2.0f},
        {240, 2.0f},
        {244, 2.0f},
        {241, -2.0f}}},
      // Q1_0, d = 2: bit 0 of qs[0] -> e0 = 2, e1 = -2; bit 7 of qs[15] ->
      // e127 = 2, e126 = -2.
      {"q1_0",
       kOracleQ1_0,
       {{1, 0x40}, {2, 0x01}, {17, 0x80}},
       {{0, 2.0f}, {1, -2.0f}, {127, 2.0f}, {126, -2.0f}}},
      // The grid i-quants, d = 1 (0x3C00) unless said. Grid entries from
      // ggml-common.h: iq2 1 = {43, 8 x7}, 3 = {8, 43, 8 x6}, 0 = {8 x8};
      // iq2s 256 = {25 x5, 8, 25, 8}; iq3xxs 1 = {20, 4, 4, 4}, 0 = {4 x4};
      // iq3s 1 = {3, 1, 1, 1}, 256 = {7, 5, 9, 5}; iq1s 1 = {1, -1 x7}, 0 =
      // {-1 x8}. ksigns(1) = 0x81, ksigns(2) = 0x82 (parity bit 7).
      // IQ2_XXS: sub-block 0 grid indices {1, 0, ..}, aux = 0x10000001:
      // scale 1 -> db = (0.5 + 1) * 0.25 = 0.375, sign index 1 -> 0x81: e0 =
      // -0.375 * 43, e1 = 3, e7 = -3, e8 = 3; last sub-block db = 0.125: 1.
      {"iq2_xxs",
       kOracleIQ2_XXS,
       {{1, 0x3C}, {2, 0x01}, {6, 0x01}, {9, 0x10}},
       {{0, -16.125f}, {1, 3.0f}, {7, -3.0f}, {8, 3.0f}, {255, 1.0f}}},
      // IQ2_XS: qs[0] = 3 | 2 << 9 (signs 0x82), scales[0] = 0x21 (db 0.375
      // for e0-15, 0.625 for e16-31): e0 = 3, e1 = -16.125, e7 = -3, e16 = 5.
      {"iq2_xs",
       kOracleIQ2_XS,
       {{1, 0x3C}, {2, 0x03}, {3, 0x04}, {66, 0x21}},
       {{0, 3.0f}, {1, -16.125f}, {7, -3.0f}, {16, 5.0f}, {255, 1.0f}}},
      // IQ2_S: qs[0] = 1, sign byte 0x01 (byte 34), qh[0] = 0x04 (index of
      // values 8-15: 256 + qs[1]), scales[0] = 0x21: e0 = -16.125, e1 = 3,
      // e8 = 0.375 * 25, e13 = 3.
      {"iq2_s",
       kOracleIQ2_S,
       {{1, 0x3C}, {2, 0x01}, {34, 0x01}, {66, 0x04}, {74, 0x21}},
       {{0, -16.125f}, {1, 3.0f}, {8, 9.375f}, {13, 3.0f}, {255, 1.0f}}},
      // IQ3_XXS: qs[0] = 1, qs[1] = 0, aux = 0x20000001 (byte 66): db = (0.5
      // + 2) * 0.5 = 1.25, signs 0x81: e0 = -25, e1 = 5, e4 = 5, e7 = -5;
      // last sub-block db = 0.25, grid 4: 1.
      {"iq3_xxs",
       kOracleIQ3_XXS,
       {{1, 0x3C}, {2, 0x01}, {66, 0x01}, {69, 0x20}},
       {{0, -25.0f}, {1, 5.0f}, {4, 5.0f}, {7, -5.0f}, {255, 1.0f}}},
      // IQ3_S: qs[0] = 1, qh[0] = 0x02 (index of e4-7: 256 + qs[1]), sign
      // byte 0x02 (byte 74), scales[0] = 0x02: db = 1 + 2 * 2 = 5: e0 = 15,
      // e1 = -5, e4 = 35, e6 = 45; last sub-block db = 1, grid 1: 1.
      {"iq3_s",
       kOracleIQ3_S,
       {{1, 0x3C}, {2, 0x01}, {66, 0x02}, {74, 0x02}, {106, 0x02}},
       {{0, 15.0f}, {1, -5.0f}, {4, 35.0f}, {6, 45.0f}, {255, 1.0f}}},
      // IQ1_S: qs[0] = 1, qh[0] = 0x9000 (dl = 2 * 1 + 1 = 3, delta -1/8): e0
      // = 3 * (1 - 0.125), e1 = 3 * (-1 - 0.125); e32 (qh 0: dl 1, +1/8) =
      // -0.875.
      {"iq1_s",
       kOracleIQ1_S,
       {{1, 0x3C}, {2, 0x01}, {35, 0x90}},
       {{0, 2.625f}, {1, -3.375f}, {32, -0.875f}}},
      // IQ1_M: d's nibbles (high nibbles of scale bytes 1, 3, 5, 7) 0, 0,
      // 0xC, 3 = 0x3C00 = 1; scale byte 0 = 0x0A: dl 2 * 2 + 1 = 5 for e0-15,
      // 2 * 1 + 1 = 3 for e16-31; qs[0] = 1, qh[0] = 0x08 (delta -1/8 for
      // e0-7): e0 = 5 * 0.875, e1 = 5 * -1.125, e16 = 3 * (-1 + 0.125).
      {"iq1_m",
       kOracleIQ1_M,
       {{0, 0x01}, {32, 0x08}, {48, 0x0A}, {53, 0xC0}, {55, 0x30}},
       {{0, 4.375f}, {1, -5.625f}, {16, -2.625f}}},
      // NVFP4: d[0] = 0x38 (1.0, halved: 0.5), qs[0] = 0x71: e0 = 1 * 0.5, e8
      // = 12 * 0.5; d[1] = 0x7F (NaN: 0) -> e16 = -12 * 0 = -0; d[2] = 0x01
      // (2^-9, halved) and code 14 (-8): e32 = -2^-7; d[3] = 0xFF (bit 7
      // ignored: 1.875 * 2^8, halved 240) and code 2: e48 = 480.
      {"nvfp4",
       kOracleNVFP4,
       {{0, 0x38}, {1, 0x7F}, {2, 0x01}, {3, 0xFF}, {4, 0x71}, {12, 0x0F}, {20, 0x0E}, {28, 0x02}},
       {{0, 0.5f}, {8, 6.0f}, {1, 0.0f}, {16, -0.0f}, {32, -0.0078125f}, {48, 480.0f}}},
  };
  for (const Golden& g : goldens) {
    CAPTURE(g.name);
    const int64_t be = OracleBlockElems(g.type);
    std::vector<uint8_t> block(static_cast<size_t>(OracleBlockBytes(g.type)), 0);
    for (const auto& [at, v] : g.bytes) block[static_cast<size_t>(at)] = v;
    const std::vector<float> oracle = OracleDecode(g.type, block.data(), 1, be);
    auto d = PrepareGgml(g.type, {be}, block.data(), block.size(), DType::kFloat32, g.name);
    REQUIRE_MESSAGE(d.ok(), d.status().message());
    auto y = d->Run(1);
    REQUIRE(y.ok());
    const float* got = static_cast<const float*>(y->data());
    for (const auto& [e, want] : g.want) {
      CAPTURE(e);
      CHECK(got[e] == want);
      CHECK(oracle[static_cast<size_t>(e)] == want);
    }
    for (int64_t e = 0; e < be; ++e) {
      CHECK(BitsFromF32(got[e]) == BitsFromF32(oracle[static_cast<size_t>(e)]));
    }
  }
}

TEST_CASE("GGUF lowering == an independent decoder, on random block bytes, every output type") {
  // Random bytes: every code, every packed scale bit pattern, and f16
  // scales of every kind (normal, subnormal, zero, negative, Inf, NaN).
  std::mt19937 rng(11);
  for (uint32_t type : kOracleTypes) {
    CAPTURE(type);
    const int64_t be = OracleBlockElems(type), bb = OracleBlockBytes(type);
    for (const auto& [rows, blocks] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {17, 8}}) {
      const int64_t cols = blocks * be;
      std::vector<uint8_t> bytes(static_cast<size_t>(rows * blocks * bb));
      for (auto& x : bytes) x = static_cast<uint8_t>(rng());
      const std::vector<float> want = OracleDecode(type, bytes.data(), rows, cols);
      for (DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        auto d = PrepareGgml(type, {cols, rows}, bytes.data(), bytes.size(), out, "t");
        REQUIRE_MESSAGE(d.ok(), d.status().message());
        const size_t eb = out == DType::kFloat32 ? 4 : 2;
        for (int threads : {1, 2}) {
          std::vector<uint8_t> y(want.size() * eb);
          REQUIRE(d->Run({out, d->output().shape, y.data(), y.size()}, threads).ok());
          size_t bad = 0;
          for (size_t i = 0; i < want.size(); ++i) {
            bool same;
            if (out == DType::kFloat32) {
              float g;
              std::memcpy(&g, &y[4 * i], 4);
              same = (std::isnan(g) && std::isnan(want[i])) || std::memcmp(&g, &want[i], 4) == 0;
            } else {
              uint16_t g;
              std::memcpy(&g, &y[2 * i], 2);
              const uint16_t w =
                  out == DType::kFloat16 ? F16FromF32(want[i]) : BF16FromF32(want[i]);
              const bool g_nan = out == DType::kFloat16 ? (g & 0x7C00) == 0x7C00 && (g & 0x3FF)
                                                        : (g & 0x7F80) == 0x7F80 && (g & 0x7F);
              same = g == w || (g_nan && std::isnan(want[i]));
            }
            bad += same ? 0 : 1;
          }
          CHECK_MESSAGE(bad == 0, "type " << type << " rows " << rows << " blocks " << blocks
                                          << " out " << DTypeName(out) << " threads " << threads
                                          << ": " << bad << " elements differ");
        }
      }
    }
  }
}

// --------------------------------------------------------------- readers --

std::string SampleGguf(uint32_t version = 3) {
  GgufBuilder b(version);
  b.KvString("general.architecture", "llama");
  b.KvU32("general.alignment", 32);
  b.Kv("u8", 0, GgufBuilder::Enc<uint8_t>(200));
  b.Kv("i8", 1, GgufBuilder::Enc<int8_t>(-3));
  b.Kv("u16", 2, GgufBuilder::Enc<uint16_t>(65000));
  b.Kv("i16", 3, GgufBuilder::Enc<int16_t>(-300));
  b.Kv("i32", 5, GgufBuilder::Enc<int32_t>(-70000));
  b.Kv("f32", 6, GgufBuilder::Enc<float>(0.5f));
  b.Kv("bool", 7, GgufBuilder::Enc<uint8_t>(1));
  b.Kv("u64", 10, GgufBuilder::Enc<uint64_t>(1ull << 40));
  b.Kv("i64", 11, GgufBuilder::Enc<int64_t>(-(1ll << 40)));
  b.Kv("f64", 12, GgufBuilder::Enc<double>(2.25));
  std::string arr;  // array of 3 strings
  GgufBuilder::Put(&arr, uint32_t{8});
  GgufBuilder::Put(&arr, uint64_t{3});
  for (const char* s : {"a", "bb", "ccc"}) GgufBuilder::Str(&arr, s);
  b.Kv("tokens", 9, arr);
  std::string nested;  // array of 2 arrays of i32
  GgufBuilder::Put(&nested, uint32_t{9});
  GgufBuilder::Put(&nested, uint64_t{2});
  for (int i = 0; i < 2; ++i) {
    GgufBuilder::Put(&nested, uint32_t{5});
    GgufBuilder::Put(&nested, uint64_t{2});
    GgufBuilder::Put(&nested, int32_t{i});
    GgufBuilder::Put(&nested, int32_t{i + 10});
  }
  b.Kv("nested", 9, nested);
  const auto w = MakeLlmLikeWeight(4, 256, 3);
  b.Tensor("blk.0.attn_q.weight", {256, 4}, kGgmlQ4_0, *QuantizeGgml(kGgmlQ4_0, w.data(), 4, 256));
  b.Tensor("blk.0.ffn_up.weight", {256, 4}, kGgmlQ4_K, *QuantizeGgml(kGgmlQ4_K, w.data(), 4, 256));
  b.Tensor("blk.0.ffn_down.weight", {256, 4}, kGgmlQ8_0,
           *QuantizeGgml(kGgmlQ8_0, w.data(), 4, 256));
  b.Tensor("blk.0.attn_k.weight", {256, 4}, kGgmlQ4_1, *QuantizeGgml(kGgmlQ4_1, w.data(), 4, 256));
  std::vector<uint8_t> norm(256 * 4);
  for (size_t i = 0; i < 256; ++i) std::memcpy(&norm[4 * i], &w[i], 4);
  b.Tensor("blk.0.attn_norm.weight", {256}, kGgmlF32, norm);
  return b.Bytes();
}

TEST_CASE("GGUF reader: header, every metadata type, arrays, tensor infos") {
  const std::string bytes = SampleGguf();
  auto f = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m");
  REQUIRE_MESSAGE(f.ok(), f.status().message());
  CHECK((*f)->version() == 3);
  CHECK((*f)->Find("general.architecture")->s == "llama");
  CHECK((*f)->Find("i8")->i == -3);
  CHECK((*f)->Find("u64")->u == (1ull << 40));
  CHECK((*f)->Find("f64")->f == 2.25);
  CHECK((*f)->Find("tokens")->ToString() == "[3 x string] \"a\", \"bb\", \"ccc\"");
  CHECK((*f)->Find("nested")->count == 2);
  REQUIRE((*f)->tensors().size() == 5);
  CHECK((*f)->tensors()[0].ne == std::vector<int64_t>{256, 4});
  CHECK((*f)->tensors()[1].bytes == 4 * 144);
  auto v2 = SampleGguf(2);
  CHECK(GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(v2.data()), v2.size(), "m").ok());
  auto v1 = SampleGguf(1);
  auto e = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(v1.data()), v1.size(), "m");
  REQUIRE(!e.ok());
  CHECK(e.status().message() == "GGUF 'm': version 1 is not supported (2 or 3)");
}

TEST_CASE("corrupted and truncated GGUF: a clear error, never a crash") {
  const std::string good = SampleGguf();
  // Every truncation of the header and metadata, then a sample of the data.
  for (size_t len = 0; len < good.size(); len += (len < 1200 ? 1 : 97)) {
    auto f = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(good.data()), len, "t");
    REQUIRE_MESSAGE(!f.ok(), "truncated to " << len);
    CHECK(f.status().message().rfind("GGUF 't': ", 0) == 0);
  }
  // Random byte flips: parse, and dequantize whatever parses.
  std::mt19937_64 rng(11);
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      const size_t at = static_cast<size_t>(rng() % std::min<size_t>(bad.size(), 900));
      bad[at] = static_cast<char>(rng());
    }
    auto f = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "t");
    if (!f.ok()) {
      CHECK(!f.status().message().empty());
      continue;
    }
    ++parsed;
    for (const auto& t : (*f)->tensors()) {
      if (!GgmlTypeIsDequantizable(t.type) || t.data == nullptr) continue;
      auto d =
          PrepareGgml(t.type, t.ne, t.data, static_cast<size_t>(t.bytes), DType::kFloat32, t.name);
      if (d.ok() && d->rows() * d->cols() < (1 << 22)) (void)d->Run(1);
    }
  }
  CHECK(parsed > 0);
  // Hostile counts and sizes.
  GgufBuilder huge;
  huge.Kv("x", 8, GgufBuilder::Enc<uint64_t>(1ull << 62));  // string length far past the end
  const std::string hb = huge.Bytes();
  auto h = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(hb.data()), hb.size(), "t");
  REQUIRE(!h.ok());
  CHECK(h.status().message().find("runs past the end of the file") != std::string::npos);
  GgufBuilder off;
  off.Tensor("w", {32, 1}, kGgmlQ4_0, std::vector<uint8_t>(17));  // one byte short
  const std::string ob = off.Bytes();
  auto o = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(ob.data()), ob.size(), "t");
  REQUIRE(!o.ok());
  CHECK(o.status().message().find(
            "tensor 'w' (q4_0, 18 bytes at data offset 0) runs past the end") != std::string::npos);
  GgufBuilder odd;
  odd.Tensor("w", {48, 1}, kGgmlQ4_0, std::vector<uint8_t>(36));
  const std::string db = odd.Bytes();
  auto dd = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(db.data()), db.size(), "t");
  REQUIRE(!dd.ok());
  CHECK(dd.status().message() ==
        "GGUF 't': tensor 'w': ne[0] = 48 is not a multiple of q4_0's block of 32");
}

TEST_CASE("GGUF header limits: counts, names and size refused at once, by name") {
  // Counts are refused before anything is allocated or parsed.
  auto header = [](uint64_t tensors, uint64_t kv) {
    std::string s = "GGUF";
    GgufBuilder::Put(&s, uint32_t{3});
    GgufBuilder::Put(&s, tensors);
    GgufBuilder::Put(&s, kv);
    s.append(static_cast<size_t>(kv * 13 + tensors * 24), '\0');  // "fits" the file
    return s;
  };
  const std::string many_keys = header(0, kMaxGgufKeys + 1);
  auto k = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(many_keys.data()), many_keys.size(),
                               "t");
  REQUIRE(!k.ok());
  CHECK(k.status().message() ==
        "GGUF 't': 65537 metadata keys, more than the 65536 nibble "
        "reads (models have tens)");
  const std::string many_tensors = header(kMaxGgufTensors + 1, 0);
  auto n = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(many_tensors.data()),
                               many_tensors.size(), "t");
  REQUIRE(!n.ok());
  CHECK(n.status().message() ==
        "GGUF 't': 131073 tensors, more than the 131072 nibble reads "
        "(models have a few thousand)");
  GgufBuilder long_name;
  long_name.Tensor(std::string(64, 'n'), {4}, kGgmlF32, std::vector<uint8_t>(16));
  const std::string lb = long_name.Bytes();
  auto l = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(lb.data()), lb.size(), "t");
  REQUIRE(!l.ok());
  CHECK(l.status().message() == "GGUF 't': tensor '" + std::string(64, 'n') +
                                    "': the name has 64 bytes (ggml's limit is 63)");
  GgufBuilder twice;
  twice.KvU32("a", 1);
  twice.KvU32("a", 2);
  const std::string tb = twice.Bytes();
  auto t = GgufFile::FromBytes(reinterpret_cast<const uint8_t*>(tb.data()), tb.size(), "t");
  REQUIRE(!t.ok());
  CHECK(t.status().message() == "GGUF 't': metadata key 'a' twice");
  // A header larger than kMaxGgufHeaderBytes (a string that runs on past
  // it, in a sparse file): refused once the prefix read reaches the limit.
  const fs::path dir =
      fs::temp_directory_path() / ("nibble_gguf_cap_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "big.gguf").string();
  GgufBuilder big;
  big.Kv("s", 8, GgufBuilder::Enc<uint64_t>(kMaxGgufHeaderBytes + 10));
  WriteText(path, big.Bytes());
  fs::resize_file(path, kMaxGgufHeaderBytes + 4096);
  auto b = GgufFile::Open(path);
  REQUIRE(!b.ok());
  CHECK(b.status().message() == "GGUF '" + path +
                                    "': the header (metadata and tensor infos) is larger than "
                                    "100000000 bytes, the most nibble reads (a model's is a few "
                                    "MB)");
  fs::remove_all(dir);
}

TEST_CASE("safetensors reader: validation messages, misaligned data, tiling") {
  auto make = [](const std::string& header, size_t data_bytes) {
    std::string s(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(&s[0], &n, 8);
    return s + header + std::string(data_bytes, '\x01');
  };
  auto parse = [](const std::string& b) {
    return SafetensorsFile::FromBytes(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "f");
  };
  // A misaligned F32 tensor after a 3-byte one: read through memcpy only.
  const std::string ok = make(
      R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"F32","shape":[2],"data_offsets":[3,11]},"__metadata__":{"format":"pt"}})",
      11);
  auto f = parse(ok);
  REQUIRE_MESSAGE(f.ok(), f.status().message());
  CHECK((*f)->tensors().size() == 2);
  CHECK((*f)->metadata().at("format") == "pt");
  std::vector<uint8_t> unused;
  const TensorView b = *(*f)->Load(*(*f)->Find("b"), &unused);
  CHECK(reinterpret_cast<uintptr_t>(b.data) % 4 != 0);
  CHECK(FloatElement(b, 1) == FloatElement(b, 0));
  struct Bad {
    std::string header;
    size_t data;
    std::string message;
  };
  const Bad bads[] = {
      {R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", 4,
       "safetensors 'f': tensors cover 3 bytes but the data buffer has 4"},
      {R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[1,4]}})", 4,
       "safetensors 'f': tensor 'a' starts at 1, expected 0 (a hole in the data buffer)"},
      {R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})", 4,
       "safetensors 'f': tensor 'a': data_offsets cover 4 bytes, but F16 (3) needs 6"},
      {R"({"a":{"dtype":"Q4","shape":[3],"data_offsets":[0,3]}})", 3,
       "safetensors 'f': tensor 'a' has unsupported dtype 'Q4'"},
      {R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})",
       3, "safetensors 'f' header has the key 'a' twice"},
      {R"({"a":{"dtype":"U8","shape":[-3],"data_offsets":[0,3]}})", 3,
       "safetensors 'f': tensor 'a': shape entries must be non-negative integers"},
      {R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,30]}})", 3,
       "safetensors 'f': tensor 'a': data_offsets cover 30 bytes, but U8 (3) needs 3"},
      {R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,3]}})", 3,
       "safetensors 'f': tensor 'a': data_offsets cover 3 bytes, but U8 (4294967296,4294967296) "
       "needs 18446744073709551616"},
      {R"([1,2])", 0, "safetensors 'f': header is not a JSON object"},
      {R"({"a":)", 0, "safetensors 'f' header is not valid JSON"},
  };
  for (const Bad& bd : bads) {
    auto r = parse(make(bd.header, bd.data));
    REQUIRE_MESSAGE(!r.ok(), bd.header);
    // Overflowing shapes are caught by CheckedPackedBytes: accept its message.
    if (bd.message.find("18446744073709551616") != std::string::npos) {
      CHECK(r.status().message().find("tensor 'a'") != std::string::npos);
    } else {
      CHECK(r.status().message() == bd.message);
    }
  }
  std::string big(8, '\0');
  const uint64_t n = 200'000'000;
  std::memcpy(&big[0], &n, 8);
  auto r = parse(big + "{}");
  REQUIRE(!r.ok());
  CHECK(r.status().message() ==
        "safetensors 'f': header length 200000000 exceeds the 100000000-byte limit");
  for (size_t len = 0; len < ok.size(); ++len) {
    CHECK(!parse(ok.substr(0, len)).ok());
  }
}

// A config.json / quantize_config.json pair's settings for one method: the
// files as ParseHfQuantization sees them.
struct ConfigTexts {
  nlohmann::json main, side;
  HfConfigFiles Files() const {
    HfConfigFiles f;
    auto it = main.find("quantization_config");
    if (!main.is_null() && it != main.end()) f.quantization_config = &*it;
    if (!side.is_null()) f.quantize_config = &side;
    return f;
  }
};
ConfigTexts Texts(const std::string& config, const std::string& quantize_config) {
  ConfigTexts t;
  if (!config.empty()) t.main = nlohmann::json::parse(config);
  if (!quantize_config.empty()) t.side = nlohmann::json::parse(quantize_config);
  return t;
}

TEST_CASE("HF quantization config: each method's settings and refused variants") {
  // The method a checkpoint states, by config.json or quantize_config.json.
  auto method = [](const std::string& config, const std::string& side) {
    auto q = ParseHfQuantization(config, side);
    REQUIRE_MESSAGE(q.ok(), q.status().message());
    return q->method == nullptr ? std::string("none") : std::string(q->method->quant_method);
  };
  CHECK(method(R"({"quantization_config":{"quant_method":"gptq","bits":4}})", "") == "gptq");
  CHECK(method("", R"({"bits":4,"group_size":128,"format":"gptq"})") == "gptq");
  CHECK(method(R"({"quantization_config":{"quant_method":"AWQ","bits":4}})", "") == "awq");
  CHECK(method(R"({"model_type":"llama"})", "") == "none");
  CHECK(method("", "") == "none");

  const std::string gptq_who = "config.json quantization_config";
  {
    const auto t = Texts(
        R"({"quantization_config":{"quant_method":"gptq","bits":4,"group_size":-1,"desc_act":true,"sym":false,"checkpoint_format":"gptq_v2"}})",
        "");
    auto c = ParseGptqConfig(t.Files(), gptq_who);
    REQUIRE(c.ok());
    CHECK(c->group_size == -1);
    CHECK(c->desc_act);
    CHECK(!c->sym);
    CHECK(c->checkpoint_format == "gptq_v2");
  }
  {
    const auto t = Texts(
        R"({"quantization_config":{"quant_method":"awq","bits":4,"group_size":64,"version":"GEMM","zero_point":true}})",
        "");
    auto a = ParseAwqConfig(*t.Files().quantization_config, gptq_who);
    REQUIRE(a.ok());
    CHECK(a->group_size == 64);
  }
  const std::pair<const char*, const char*> refused[] = {
      {R"({"quantization_config":{"quant_method":"gptq","bits":4,"checkpoint_format":"marlin"}})",
       "config.json quantization_config: GPTQ checkpoint_format 'marlin' is not supported (gptq "
       "and gptq_v2 are)"},
      {R"({"quantization_config":{"quant_method":"gptq","bits":4,"checkpoint_format":"gptq_p"}})",
       "config.json quantization_config: GPTQ checkpoint_format 'gptq_p' is not supported (gptq "
       "and gptq_v2 are)"},
      {R"({"quantization_config":{"quant_method":"gptq","bits":4,"is_marlin_format":true}})",
       "config.json quantization_config: GPTQ checkpoint_format 'marlin' is not supported (gptq "
       "and gptq_v2 are)"},
      {R"({"quantization_config":{"quant_method":"gptq","bits":5}})",
       "config.json quantization_config: GPTQ with bits = 5 is not supported (2, 4 and 8 are)"},
      {R"({"quantization_config":{"quant_method":"awq","bits":8}})",
       "config.json quantization_config: AWQ with bits = 8 is not supported (only 4)"},
      {R"({"quantization_config":{"quant_method":"compressed-tensors","config_groups":{}}})",
       "config.json quantization_config: compressed-tensors needs a non-empty 'config_groups' "
       "object"},
      {R"({"quantization_config":{"quant_method":"gptq","meta":{"quantizer":7}}})",
       "config.json quantization_config: 'meta.quantizer' must be a string or a list of strings"},
      {R"({"quantization_config":{"quant_method":"awq","bits":4,"version":"gemv_fast"}})",
       "config.json quantization_config: AWQ version 'gemv_fast' is not supported (only gemm)"},
      {R"({"quantization_config":{"quant_method":"awq","bits":4,"version":"marlin"}})",
       "config.json quantization_config: AWQ version 'marlin' is not supported (only gemm)"},
      {R"({"quantization_config":{"quant_method":"nonesuch"}})",
       "config.json quantization_config: quant_method 'nonesuch' is not supported (nibble reads "
       "gptq, awq, compressed-tensors, bitsandbytes, fp8 and mxfp4)"},
      {R"({"quantization_config":{"quant_method":"hqq"}})",
       "config.json quantization_config: quant_method 'hqq' (HQQ) is not supported (nibble reads "
       "gptq, awq, compressed-tensors, bitsandbytes, fp8 and mxfp4)"},
      {R"({"quantization_config":{"quant_method":"fp8","weight_block_size":[128]}})",
       "config.json quantization_config: 'weight_block_size' must be two positive integers "
       "[bn, bk] (got [128])"},
      {R"({"quantization_config":{"bits":4}})", "config.json quantization_config: no quant_method"},
      {R"({"quantization_config":{"quant_method":"gptq","bits":"4"}})",
       "config.json quantization_config: 'bits' must be an integer"},
      {R"({"quantization_config":[1]})", "config.json: quantization_config must be an object"},
      {R"({nope)", "config.json is not valid JSON"},
  };
  for (const auto& [text, msg] : refused) {
    auto r = ParseHfQuantization(text, "");
    REQUIRE_MESSAGE(!r.ok(), text);
    CHECK(r.status().message() == msg);
  }
  // The format and the producer, from every file that states them.
  {
    const auto t =
        Texts(R"({"quantization_config":{"quant_method":"gptq","bits":4}})",
              R"({"bits":4,"checkpoint_format":"gptq","meta":{"quantizer":["gptqmodel:2.2.0"]}})");
    auto gm = ParseGptqConfig(t.Files(), gptq_who);
    REQUIRE(gm.ok());
    CHECK(gm->checkpoint_format == "gptq");
    CHECK(gm->format_source == "quantize_config.json checkpoint_format");
    CHECK(gm->producer == "gptqmodel:2.2.0");
  }
  {
    const auto t = Texts("", R"({"bits":8,"group_size":128})");
    auto plain = ParseGptqConfig(t.Files(), "quantize_config.json");
    REQUIRE(plain.ok());
    CHECK(plain->bits == 8);
    CHECK(plain->checkpoint_format == "gptq");
    CHECK(plain->format_source == "the default of a GPTQ config without checkpoint_format");
    CHECK(plain->producer.empty());
  }
  auto clash = ParseHfQuantization(
      R"({"quantization_config":{"quant_method":"gptq","checkpoint_format":"gptq_v2"}})",
      R"({"checkpoint_format":"gptq"})");
  REQUIRE(!clash.ok());
  CHECK(clash.status().message() ==
        "config.json quantization_config says checkpoint_format 'gptq_v2' but "
        "quantize_config.json says 'gptq'");
  {
    const auto t = Texts(
        R"({"quantization_config":{"quant_method":"awq","bits":4,"version":"gemm","zero_point":false}})",
        "");
    auto awq_sym = ParseAwqConfig(*t.Files().quantization_config, gptq_who);
    REQUIRE(awq_sym.ok());
    CHECK(!awq_sym->zero_point);
  }
  {
    const auto t = Texts(
        R"({"quantization_config":{"quant_method":"compressed-tensors","format":"pack-quantized",
          "ignore":["lm_head"],"config_groups":{"group_0":{"targets":["Linear"],
          "weights":{"num_bits":4,"type":"int","symmetric":false,"strategy":"group",
          "group_size":128,"actorder":"group"}}}}})",
        "");
    auto ct = ParseCompressedTensorsConfig(*t.Files().quantization_config, gptq_who);
    REQUIRE_MESSAGE(ct.ok(), ct.status().message());
    REQUIRE(ct->groups.size() == 1);
    CHECK(ct->groups[0].format == "pack-quantized");
    CHECK(!ct->groups[0].symmetric);
    CHECK(ct->groups[0].group_size == 128);
    CHECK(ct->groups[0].actorder == "group");
    CHECK(ct->ignore == std::vector<std::string>{"lm_head"});
    CHECK(MatchCompressedTensorsGroup(*ct, "model.layers.0.mlp.up_proj") == &ct->groups[0]);
  }
  {
    const auto t = Texts(
        R"({"quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_quant_type":"NF4"}})",
        "");
    auto bnb = ParseBnbConfig(*t.Files().quantization_config, gptq_who);
    REQUIRE(bnb.ok());
    CHECK(bnb->load_in_4bit);
    CHECK(bnb->quant_type == "nf4");
  }
  auto qs = ParseBnbQuantState(
      R"({"quant_type":"nf4","absmax":[],"blocksize":64,"quant_map":[],"dtype":"bfloat16","shape":[32,64],"nested_blocksize":256,"nested_offset":0.0123456,"nested_dtype":"float32"})",
      "w");
  REQUIRE_MESSAGE(qs.ok(), qs.status().message());
  CHECK(qs->nested);
  CHECK(static_cast<float>(qs->nested_offset) == 0.0123456f);
  CHECK(qs->shape == std::vector<int64_t>{32, 64});
}

// ------------------------------------------------------------ dequant tool --

struct HfFolder {
  fs::path dir;
  std::vector<float> w;  // [N, K]
  Tensor bias;
};

// A GPTQ (or AWQ) folder with one quantized layer "model.layers.0.mlp.up_proj"
// plus a float bias, sharded in two files with an index.
HfFolder WriteHfFolder(const std::string& name, bool awq, int64_t N, int64_t K, int64_t G) {
  HfFolder h;
  h.dir = TempDir(name);
  h.w = MakeLlmLikeWeight(N, K, 17);
  h.bias = *Tensor::Allocate(DType::kFloat16, {N});
  for (int64_t n = 0; n < N; ++n)
    h.bias.data_as<uint16_t>()[n] = F16FromF32(0.5f * static_cast<float>(n));
  const std::string p = "model.layers.0.mlp.up_proj";
  if (awq) {
    auto a = QuantizeAwq(h.w.data(), N, K, G);
    REQUIRE(a.ok());
    static AwqTensors keep;
    keep = std::move(*a);
    REQUIRE(WriteSafetensors((h.dir / "model-00001-of-00002.safetensors").string(),
                             {{p + ".qweight", &keep.qweight}, {p + ".qzeros", &keep.qzeros}})
                .ok());
    REQUIRE(WriteSafetensors((h.dir / "model-00002-of-00002.safetensors").string(),
                             {{p + ".scales", &keep.scales}, {p + ".bias", &h.bias}})
                .ok());
    WriteText((h.dir / "config.json").string(),
              R"({"quantization_config":{"quant_method":"awq","bits":4,"group_size":)" +
                  std::to_string(G) + R"(,"version":"gemm","zero_point":true}})");
    WriteText((h.dir / "model.safetensors.index.json").string(),
              R"({"metadata":{},"weight_map":{")" + p +
                  R"(.qweight":"model-00001-of-00002.safetensors",")" + p +
                  R"(.qzeros":"model-00001-of-00002.safetensors",")" + p +
                  R"(.scales":"model-00002-of-00002.safetensors",")" + p +
                  R"(.bias":"model-00002-of-00002.safetensors"}})");
  } else {
    auto t = QuantizeGptq(h.w.data(), N, K, G, false, false);
    REQUIRE(t.ok());
    static GptqTensors keep;
    keep = std::move(*t);
    REQUIRE(
        WriteSafetensors((h.dir / "model.safetensors").string(), {{p + ".qweight", &keep.qweight},
                                                                  {p + ".qzeros", &keep.qzeros},
                                                                  {p + ".scales", &keep.scales},
                                                                  {p + ".g_idx", &keep.g_idx},
                                                                  {p + ".bias", &h.bias}})
            .ok());
    WriteText((h.dir / "config.json").string(),
              R"({"quantization_config":{"quant_method":"gptq","bits":4,"group_size":)" +
                  std::to_string(G) + R"(,"desc_act":false,"sym":false}})");
  }
  return h;
}

TEST_CASE("dequant: GPTQ and AWQ folders -> float safetensors with HF names and [N, K]") {
  for (bool awq : {false, true}) {
    const int64_t N = 48, K = 96, G = 32;
    HfFolder h = WriteHfFolder(awq ? "awq" : "gptq", awq, N, K, G);
    const std::string out = (h.dir / "out.safetensors").string();
    DequantOptions o;
    o.dtype = DType::kFloat32;
    DequantReport rep;
    const Status st = DequantCheckpoint(h.dir.string(), out, o, &rep);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(rep.dequantized == 1);
    CHECK(rep.copied == 1);
    auto f = SafetensorsFile::Open(out);
    REQUIRE(f.ok());
    const auto* wt = (*f)->Find("model.layers.0.mlp.up_proj.weight");
    REQUIRE(wt != nullptr);
    CHECK(wt->dtype == DType::kFloat32);
    CHECK(wt->shape == Shape{N, K});
    const auto* bt = (*f)->Find("model.layers.0.mlp.up_proj.bias");
    REQUIRE(bt != nullptr);
    CHECK(bt->dtype == DType::kFloat32);  // float copies follow --dtype too
    std::vector<uint8_t> bias_bytes, weight_bytes;
    const TensorView bv = *(*f)->Load(*bt, &bias_bytes);
    for (int64_t n = 0; n < N; ++n) {
      float b;
      std::memcpy(&b, static_cast<const uint8_t*>(bv.data) + 4 * n, 4);
      CHECK(b == 0.5f * static_cast<float>(n));
    }
    CHECK((*f)->Find("model.layers.0.mlp.up_proj.qweight") == nullptr);
    // Values: the lowering's own output, and close to the original weights.
    const TensorView wv = *(*f)->Load(*wt, &weight_bytes);
    std::vector<float> y(static_cast<size_t>(N * K));
    std::memcpy(y.data(), wv.data, y.size() * 4);
    CHECK(MeasureError(h.w.data(), y.data(), N * K).sqnr_db > 15.0);
    auto ck = Checkpoint::Open(h.dir.string());
    REQUIRE(ck.ok());
    CHECK(*ck->LoadFloat(ck->tensors()[0], 1) == y);
    // Default dtype float16; --tensors / --exclude match input names
    // (the quantized weight is "<prefix>.qweight" there).
    DequantOptions o2;
    o2.tensors = "bias$";
    DequantReport rep2;
    REQUIRE(DequantCheckpoint(h.dir.string(), out, o2, &rep2).ok());
    auto f2 = SafetensorsFile::Open(out);
    REQUIRE(f2.ok());
    CHECK((*f2)->tensors().size() == 1);
    o2.tensors = "up_proj\\.qweight$";
    REQUIRE(DequantCheckpoint(h.dir.string(), out, o2, &rep2).ok());
    f2 = SafetensorsFile::Open(out);
    REQUIRE(f2.ok());
    REQUIRE((*f2)->tensors().size() == 1);
    CHECK((*f2)->tensors()[0].name == "model.layers.0.mlp.up_proj.weight");
    o2.tensors = "";
    o2.exclude = "qweight";
    REQUIRE(DequantCheckpoint(h.dir.string(), out, o2, &rep2).ok());
    f2 = SafetensorsFile::Open(out);
    REQUIRE(f2.ok());
    CHECK((*f2)->Find("model.layers.0.mlp.up_proj.weight") == nullptr);
  }
}

TEST_CASE("dequant: GGUF file - unsupported types refused before anything is written") {
  const fs::path dir = TempDir("gguf");
  GgufBuilder b;
  const auto w = MakeLlmLikeWeight(4, 256, 3);
  b.Tensor("tok.weight", {256, 4}, kGgmlQ4_K, *QuantizeGgml(kGgmlQ4_K, w.data(), 4, 256));
  b.Tensor("norm.weight", {4}, kGgmlF32, std::vector<uint8_t>(16, 0));
  b.Tensor("out.weight", {256, 4}, 15 /* q8_k */, std::vector<uint8_t>(4 * 292));
  WriteText((dir / "m.gguf").string(), b.Bytes());
  const std::string out = (dir / "out.safetensors").string();
  DequantReport rep;
  const Status st = DequantCheckpoint((dir / "m.gguf").string(), out, {}, &rep);
  REQUIRE(!st.ok());
  CHECK(st.message() ==
        "tensor 'out.weight': ggml type q8_k is an activation type (ggml quantizes matmul inputs "
        "to it and defines no conversion back to float): no model file stores weights in it "
        "(leave it out with --exclude, or --skip-unsupported)");
  CHECK(!fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename() == "m.gguf");
  // Three ways to leave it out: --tensors, --exclude, --skip-unsupported.
  for (int way = 0; way < 3; ++way) {
    CAPTURE(way);
    DequantOptions o;
    if (way == 0) o.tensors = "^(tok|norm)";
    if (way == 1) o.exclude = "^out\\.";
    if (way == 2) o.skip_unsupported = true;
    REQUIRE(DequantCheckpoint((dir / "m.gguf").string(), out, o, &rep).ok());
    CHECK(rep.skipped.size() == (way == 2 ? 1u : 0u));
    if (way == 2)
      CHECK(rep.skipped[0].rfind("out.weight: ggml type q8_k is an activation", 0) == 0);
    auto f = SafetensorsFile::Open(out);
    REQUIRE(f.ok());
    CHECK((*f)->tensors().size() == 2);
    CHECK((*f)->Find("tok.weight")->shape == Shape{4, 256});
    CHECK((*f)->Find("tok.weight")->dtype == DType::kFloat32);
    CHECK((*f)->Find("norm.weight")->shape == Shape{4});
    CHECK((*f)->Find("out.weight") == nullptr);
  }
  // Only unsupported tensors selected: an error, nothing written.
  fs::remove(out);
  DequantOptions only;
  only.tensors = "^out";
  only.skip_unsupported = true;
  const Status none = DequantCheckpoint((dir / "m.gguf").string(), out, only, &rep);
  CHECK(none.message() == "no tensors selected from '" + (dir / "m.gguf").string() +
                              "' (every selected tensor is unsupported)");
  CHECK(!fs::exists(out));
  DequantOptions bad;
  bad.exclude = "[";
  CHECK(DequantCheckpoint((dir / "m.gguf").string(), out, bad, &rep)
            .message()
            .rfind("--exclude '[' is not a valid regex", 0) == 0);
}

TEST_CASE("GGUF: every ggml type is named, an unknown type id is named as such, both skippable") {
  const fs::path dir = TempDir("gguf_names");
  GgufBuilder b;
  b.Tensor("a.weight", {256, 2}, 9 /* q8_1 */, std::vector<uint8_t>(16 * 36));
  b.Tensor("b.weight", {256, 2}, 99, std::vector<uint8_t>(64));
  b.Tensor("c.weight", {4}, kGgmlF32, std::vector<uint8_t>(16, 0));
  WriteText((dir / "m.gguf").string(), b.Bytes());
  auto ck = Checkpoint::Open((dir / "m.gguf").string());
  REQUIRE_MESSAGE(ck.ok(), ck.status().message());
  REQUIRE(ck->tensors().size() == 3);
  CHECK(ck->tensors()[0].kind == "q8_1");
  CHECK(ck->tensors()[0].why_not.rfind("ggml type q8_1 is an activation type", 0) == 0);
  CHECK(ck->tensors()[1].kind == "type(99)");
  CHECK(ck->tensors()[1].why_not ==
        "unknown ggml type id 99 (not a type ggml defines: a newer or a damaged file?)");
  const std::string out = (dir / "o.safetensors").string();
  DequantReport rep;
  DequantOptions o;
  o.skip_unsupported = true;
  REQUIRE(DequantCheckpoint((dir / "m.gguf").string(), out, o, &rep).ok());
  CHECK(rep.skipped.size() == 2);
  CHECK(rep.copied == 1);
  // The names of the types ggml defines, as ggml spells them (lower case).
  const std::pair<uint32_t, const char*> names[] = {
      {9, "q8_1"},   {15, "q8_k"},  {16, "iq2_xxs"}, {17, "iq2_xs"}, {18, "iq3_xxs"}, {19, "iq1_s"},
      {21, "iq3_s"}, {22, "iq2_s"}, {29, "iq1_m"},   {34, "tq1_0"},  {35, "tq2_0"},   {39, "mxfp4"},
      {30, "bf16"},  {28, "f64"},   {14, "q6_k"},    {40, "nvfp4"},  {41, "q1_0"},    {42, "q2_0"}};
  for (const auto& [id, name] : names) CHECK(GgmlTypeName(id) == name);
}

TEST_CASE("dequant: a GGUF file holding every registered block type == the independent decoder") {
  // One tensor per oracle type (random blocks with finite, moderate
  // scales), through the whole path: file -> reader -> lowering -> kernels
  // -> safetensors writer, read back and compared bit for bit.
  const fs::path dir = TempDir("gguf_all");
  std::mt19937 rng(5);
  GgufBuilder b;
  std::vector<std::pair<std::string, std::vector<float>>> want;
  for (uint32_t type : kOracleTypes) {
    const int64_t be = OracleBlockElems(type), bb = OracleBlockBytes(type), rows = 3, blocks = 2;
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * blocks * bb));
    for (auto& x : bytes) x = static_cast<uint8_t>(rng());
    for (int64_t k = 0; k < rows * blocks; ++k) {  // scales: f16 0.0x, E8M0 near 1
      OracleModerateScales(type, bytes.data() + k * bb, static_cast<uint32_t>(rng()));
    }
    const std::string name = "blk." + std::to_string(type) + ".weight";
    b.Tensor(name, {blocks * be, rows}, type, bytes);
    want.emplace_back(name, OracleDecode(type, bytes.data(), rows, blocks * be));
  }
  WriteText((dir / "m.gguf").string(), b.Bytes());
  const std::string out = (dir / "out.safetensors").string();
  DequantReport rep;
  DequantOptions o;
  o.dtype = DType::kFloat32;
  const Status st = DequantCheckpoint((dir / "m.gguf").string(), out, o, &rep);
  REQUIRE_MESSAGE(st.ok(), st.message());
  auto f = SafetensorsFile::Open(out);
  REQUIRE(f.ok());
  for (const auto& [name, values] : want) {
    CAPTURE(name);
    const auto* t = (*f)->Find(name);
    REQUIRE(t != nullptr);
    CHECK(t->dtype == DType::kFloat32);
    std::vector<float> got(values.size());
    REQUIRE((*f)->ReadInto(*t, reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(std::memcmp(got.data(), values.data(), got.size() * 4) == 0);
  }
}

TEST_CASE("dequant: truncated / corrupted inputs fail cleanly and write nothing") {
  HfFolder h = WriteHfFolder("corrupt", false, 16, 64, 32);
  const fs::path st = h.dir / "model.safetensors";
  const std::string good = [&] {
    std::ifstream f(st, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  const std::string out = (h.dir / "out.safetensors").string();
  for (size_t len :
       {size_t{0}, size_t{5}, size_t{8}, size_t{40}, good.size() / 2, good.size() - 1}) {
    WriteText(st.string(), good.substr(0, len));
    DequantReport rep;
    const Status s = DequantCheckpoint(h.dir.string(), out, {}, &rep);
    CHECK_MESSAGE(!s.ok(), "length " << len);
    CHECK(!fs::exists(out));
  }
  // Shape mismatches between qweight / scales / qzeros are named.
  WriteText(st.string(), good);
  WriteText((h.dir / "config.json").string(),
            R"({"quantization_config":{"quant_method":"gptq","bits":4,"group_size":48}})");
  DequantReport rep;
  CHECK(DequantCheckpoint(h.dir.string(), out, {}, &rep).ok());  // G from shapes (2 groups of 32)
  WriteText(
      (h.dir / "config.json").string(),
      R"({"quantization_config":{"quant_method":"gptq","bits":4,"checkpoint_format":"marlin"}})");
  const Status m = DequantCheckpoint(h.dir.string(), out, {}, &rep);
  REQUIRE(!m.ok());
  CHECK(m.message().find("'marlin' is not supported") != std::string::npos);
}

// Every row range, output type and thread count of Checkpoint::Read gives
// exactly the bytes of the same rows of the whole tensor.
void CheckRowReads(const Checkpoint& ck, std::mt19937* rng) {
  // One set of input buffers reused by every tensor, type and reader below
  // (tensors of different sizes one after another, as the file writers do).
  CheckpointTensor::Buffers scratch;
  for (const CheckpointTensor& t : ck.tensors()) {
    if (!t.supported) continue;
    for (DType d : {DType::kUndefined, DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      CAPTURE(t.name);
      CAPTURE(DTypeName(d));
      auto whole = ck.Read(t, d);
      REQUIRE_MESSAGE(whole.ok(), whole.status().message());
      {  // Whole reads through the reused buffers.
        std::vector<uint8_t> again(whole->size_bytes() + 1, 0xA5);
        const Status st = ck.Read(t, d, 0, -1, 1, again.data(), whole->size_bytes(), &scratch);
        REQUIRE_MESSAGE(st.ok(), st.message());
        CHECK(again.back() == 0xA5);
        CHECK(std::memcmp(again.data(), whole->data(), whole->size_bytes()) == 0);
      }
      // Prepared once, read in pieces (the file writers' way).
      auto prepared = ck.PrepareRows(t, d, 0, &scratch);
      REQUIRE_MESSAGE(prepared.ok(), prepared.status().message());
      CHECK(whole->dtype() == ck.OutputDType(t, d));
      CHECK(whole->shape() == t.shape);
      const int64_t rows = Checkpoint::Rows(t);
      const size_t row_bytes = rows == 0 ? 0 : whole->size_bytes() / static_cast<size_t>(rows);
      std::vector<std::pair<int64_t, int64_t>> ranges = {{0, rows}, {0, 0}, {rows, rows}};
      for (int k = 0; k < 6 && rows > 0; ++k) {
        int64_t a = static_cast<int64_t>((*rng)() % static_cast<uint32_t>(rows + 1));
        int64_t b = static_cast<int64_t>((*rng)() % static_cast<uint32_t>(rows + 1));
        ranges.emplace_back(std::min(a, b), std::max(a, b));
      }
      if (rows > 1) ranges.emplace_back(rows - 1, rows);
      for (const auto& [r0, r1] : ranges) {
        for (int threads : {1, 2, 0}) {
          CAPTURE(r0);
          CAPTURE(r1);
          CAPTURE(threads);
          const auto n = ck.OutputBytes(t, d, r0, r1);
          REQUIRE(n.ok());
          CHECK(*n == row_bytes * static_cast<size_t>(r1 - r0));
          // Read() and the prepared reader: those rows of the whole, one
          // guard byte past the range untouched.
          for (bool use_prepared : {false, true}) {
            CAPTURE(use_prepared);
            std::vector<uint8_t> got(static_cast<size_t>(*n) + 1, 0xA5);
            const Status st = use_prepared ? (*prepared)(r0, r1, got.data(), *n)
                                           : ck.Read(t, d, r0, r1, threads, got.data(), *n);
            REQUIRE_MESSAGE(st.ok(), st.message());
            CHECK(got.back() == 0xA5);
            CHECK(std::memcmp(got.data(),
                              static_cast<const uint8_t*>(whole->data()) +
                                  row_bytes * static_cast<size_t>(r0),
                              static_cast<size_t>(*n)) == 0);
          }
        }
      }
    }
    // Misuse: a clear error naming the tensor, nothing written.
    const int64_t rows = Checkpoint::Rows(t);
    std::vector<uint8_t> buf(64, 0x5A);
    for (const auto& [r0, r1] : std::vector<std::pair<int64_t, int64_t>>{
             {-1, 1}, {1, 0}, {0, rows + 1}, {rows + 1, rows + 2}}) {
      const Status st = ck.Read(t, DType::kFloat32, r0, r1, 1, buf.data(), buf.size());
      CHECK(!st.ok());
      CHECK(st.message().find(t.name) != std::string::npos);
    }
    if (rows > 0) {
      const auto n = ck.OutputBytes(t, DType::kFloat32, 0, 1);
      REQUIRE(n.ok());
      std::vector<uint8_t> small(static_cast<size_t>(*n));
      const Status st = ck.Read(t, DType::kFloat32, 0, 1, 1, small.data(), small.size() - 1);
      CHECK(st.message().find("need") != std::string::npos);
      CHECK(!ck.Read(t, DType::kInt8, 0, 1, 1, small.data(), small.size()).ok());
      CHECK(!ck.Read(t, DType::kFloat32, 0, 1, -1, small.data(), small.size()).ok());
      CHECK(!ck.Read(t, DType::kFloat32, 0, 1, 1, nullptr, small.size()).ok());
      // A prepared reader checks each range and buffer the same way.
      auto prepared = ck.PrepareRows(t, DType::kFloat32, 1, &scratch);
      REQUIRE(prepared.ok());
      for (const auto& [r0, r1] : std::vector<std::pair<int64_t, int64_t>>{
               {-1, 1}, {1, 0}, {0, rows + 1}, {rows + 1, rows + 2}}) {
        const Status sp = (*prepared)(r0, r1, buf.data(), buf.size());
        CHECK(!sp.ok());
        CHECK(sp.message().find(t.name) != std::string::npos);
      }
      CHECK((*prepared)(0, 1, small.data(), small.size() - 1).message().find("need") !=
            std::string::npos);
      CHECK(!(*prepared)(0, 1, nullptr, small.size()).ok());
      CHECK(!ck.PrepareRows(t, DType::kInt8, 1, &scratch).ok());
      CHECK(!ck.PrepareRows(t, DType::kFloat32, -1, &scratch).ok());
    }
    CHECK(std::all_of(buf.begin(), buf.end(), [](uint8_t b) { return b == 0x5A; }));
  }
}

TEST_CASE("Checkpoint::Read: any row range, type and thread count == those rows of the whole") {
  std::mt19937 rng(11);
  SUBCASE("GPTQ and AWQ folders (quantized weight + float16 bias copy)") {
    for (bool awq : {false, true}) {
      HfFolder h = WriteHfFolder(awq ? "rows_awq" : "rows_gptq", awq, 48, 96, 32);
      auto ck = Checkpoint::Open(h.dir.string());
      REQUIRE(ck.ok());
      CheckRowReads(*ck, &rng);
      // Found by output and by stored name.
      CHECK(ck->Find("model.layers.0.mlp.up_proj.weight") != nullptr);
      CHECK(ck->Find("model.layers.0.mlp.up_proj." + std::string(awq ? "qweight" : "qweight")) ==
            ck->Find("model.layers.0.mlp.up_proj.weight"));
      CHECK(ck->Find("nope") == nullptr);
    }
  }
  SUBCASE("GPTQ act-order: output rows are columns of the stored [K, N] view") {
    const int64_t N = 40, K = 64, G = 16;
    const std::vector<float> w = MakeLlmLikeWeight(N, K, 3);
    std::vector<int32_t> g_idx(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / G);
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
    auto q = QuantizeGptq(w.data(), N, K, G, false, false, g_idx);
    REQUIRE(q.ok());
    const fs::path dir = TempDir("rows_actorder");
    const std::string p = "model.layers.0.mlp.down_proj";
    REQUIRE(WriteSafetensors((dir / "model.safetensors").string(), {{p + ".qweight", &q->qweight},
                                                                    {p + ".qzeros", &q->qzeros},
                                                                    {p + ".scales", &q->scales},
                                                                    {p + ".g_idx", &q->g_idx}})
                .ok());
    WriteText((dir / "config.json").string(),
              R"({"quantization_config":{"quant_method":"gptq","bits":4,"group_size":16,)"
              R"("desc_act":true,"sym":false}})");
    auto ck = Checkpoint::Open(dir.string());
    REQUIRE(ck.ok());
    REQUIRE(ck->tensors().size() == 1);
    CHECK(ck->tensors()[0].shape == Shape{N, K});
    CheckRowReads(*ck, &rng);
  }
  SUBCASE("GGUF: every block type, 1-D and 3-D tensors, float copies") {
    const fs::path dir = TempDir("rows_gguf");
    GgufBuilder b;
    for (uint32_t type : kOracleTypes) {
      const int64_t be = OracleBlockElems(type), bb = OracleBlockBytes(type);
      for (const std::vector<int64_t>& ne : {std::vector<int64_t>{2 * be, 5}, {be}, {be, 3, 2}}) {
        int64_t blocks = 1;
        for (int64_t e : ne) blocks *= e;
        blocks /= be;
        std::vector<uint8_t> bytes(static_cast<size_t>(blocks * bb));
        for (auto& x : bytes) x = static_cast<uint8_t>(rng());
        for (int64_t k = 0; k < blocks; ++k) {
          OracleModerateScales(type, bytes.data() + k * bb, static_cast<uint32_t>(rng()));
        }
        b.Tensor("t" + std::to_string(type) + "." + std::to_string(ne.size()), ne, type, bytes);
      }
    }
    std::vector<uint8_t> f16(2 * 7 * 3);
    for (size_t k = 0; k < f16.size(); k += 2) {
      const uint16_t h = F16FromF32(0.25f * static_cast<float>(k) - 3.0f);
      std::memcpy(&f16[k], &h, 2);
    }
    b.Tensor("norm.f16", {7, 3}, 1, f16);
    WriteText((dir / "m.gguf").string(), b.Bytes());
    auto ck = Checkpoint::Open((dir / "m.gguf").string());
    REQUIRE(ck.ok());
    CheckRowReads(*ck, &rng);
  }
}

TEST_CASE("Checkpoint: one open checkpoint read from several threads at once") {
  HfFolder h = WriteHfFolder("threads_gptq", false, 64, 128, 32);
  auto ck = Checkpoint::Open(h.dir.string());
  REQUIRE(ck.ok());
  const CheckpointTensor* t = ck->Find("model.layers.0.mlp.up_proj.weight");
  REQUIRE(t != nullptr);
  auto want = ck->Read(*t, DType::kBFloat16);
  REQUIRE(want.ok());
  std::vector<std::vector<uint8_t>> got(4, std::vector<uint8_t>(want->size_bytes()));
  std::vector<Status> status(4);
  std::vector<std::thread> pool;
  for (size_t i = 0; i < 4; ++i) {
    pool.emplace_back([&, i] {
      for (int rep = 0; rep < 20 && status[i].ok(); ++rep) {
        status[i] = ck->Read(*t, DType::kBFloat16, 0, -1, 1, got[i].data(), got[i].size());
      }
    });
  }
  for (auto& th : pool) th.join();
  for (size_t i = 0; i < 4; ++i) {
    CHECK(status[i].ok());
    CHECK(std::memcmp(got[i].data(), want->data(), want->size_bytes()) == 0);
  }
}

TEST_CASE("Checkpoint::Read and Dequantizer::Run stop between pieces of rows when cancelled") {
  // Q4_0 [2048, 4096]: 32 MiB of float32, two pieces of kCancelCheckBytes;
  // Q8_0 [4096, 4096]: 17 MiB of blocks read in two pieces, 32 MiB of
  // bfloat16 written in two; a float16 copy [1024, 2048]: two 1M-value
  // conversion pieces to float32, and as stored (4 MiB) one read; a 3-D
  // Q8_0 tensor for Run's pieces.
  std::mt19937 rng(23);
  const fs::path dir = TempDir("cancel_reads");
  GgufBuilder b;
  auto blocks = [&](uint32_t type, int64_t values) {
    const int64_t n = values / OracleBlockElems(type), bb = OracleBlockBytes(type);
    std::vector<uint8_t> bytes(static_cast<size_t>(n * bb));
    for (auto& x : bytes) x = static_cast<uint8_t>(rng());
    for (int64_t k = 0; k < n; ++k) {
      OracleModerateScales(type, bytes.data() + k * bb, static_cast<uint32_t>(rng()));
    }
    return bytes;
  };
  b.Tensor("big.q4_0", {4096, 2048}, 2, blocks(2, 4096 * 2048));
  b.Tensor("big.q8_0", {4096, 4096}, 8, blocks(8, 4096 * 4096));  // 17 MiB stored
  b.Tensor("experts.q8_0", {64, 16, 6}, 8, blocks(8, 64 * 16 * 6));
  std::vector<uint8_t> f16(2 * 1024 * 2048);
  for (size_t k = 0; k < f16.size(); k += 2) {
    const uint16_t h = F16FromF32(static_cast<float>(k % 1000) * 0.01f - 5.0f);
    std::memcpy(&f16[k], &h, 2);
  }
  b.Tensor("emb.f16", {2048, 1024}, 1, f16);
  WriteText((dir / "m.gguf").string(), b.Bytes());
  auto ck = Checkpoint::Open((dir / "m.gguf").string());
  REQUIRE(ck.ok());

  // Reads `name` as `dtype` asking a callback that says stop at its
  // `stop_at`-th question (0: never); returns the status, the questions
  // asked and the bytes.
  struct Result {
    Status status;
    int asked = 0;
    std::vector<uint8_t> bytes;
  };
  auto read = [&](const std::string& name, DType dtype, int stop_at) {
    const CheckpointTensor* t = ck->Find(name);
    REQUIRE(t != nullptr);
    auto need = ck->OutputBytes(*t, dtype);
    REQUIRE(need.ok());
    Result r;
    r.bytes.assign(static_cast<size_t>(*need), 0);
    r.status = ck->Read(*t, dtype, 0, -1, 2, r.bytes.data(), r.bytes.size(), nullptr,
                        [&] { return ++r.asked == stop_at; });
    return r;
  };
  // pieces: questions after the first (input pieces after the first of
  // each, output pieces).
  for (const auto& [name, dtype, pieces] :
       {std::tuple<std::string, DType, int>{"big.q4_0", DType::kFloat32, 2},
        {"big.q8_0", DType::kBFloat16, 1 + 2},
        {"emb.f16", DType::kFloat32, 2},
        {"emb.f16", DType::kUndefined, 1}}) {
    CAPTURE(name);
    const CheckpointTensor* t = ck->Find(name);
    auto want = ck->Read(*t, dtype);
    REQUIRE(want.ok());
    // Never stopping: asked before the inputs are read and before each
    // piece but the first of a copy; the same bytes.
    const Result all = read(name, dtype, 0);
    REQUIRE(all.status.ok());
    CHECK(all.asked == (t->quantized ? 1 + pieces : pieces));
    CHECK(std::memcmp(all.bytes.data(), want->data(), want->size_bytes()) == 0);
    // Stopped at any question (the inputs' reads, the output's pieces): an
    // error naming the tensor, asked no more.
    for (int stop_at = 1; stop_at <= all.asked; ++stop_at) {
      CAPTURE(stop_at);
      const Result stopped = read(name, dtype, stop_at);
      CHECK_FALSE(stopped.status.ok());
      CHECK(IsInterrupted(stopped.status.message()));
      CHECK(stopped.status.message() == "tensor '" + name + "': interrupted");
      CHECK(stopped.asked == stop_at);
    }
  }
  // PrepareRows (a conversion's step): asked while the inputs are read.
  {
    const CheckpointTensor* q8 = ck->Find("big.q8_0");
    CheckpointTensor::Buffers scratch;
    int asked = 0;
    auto rows = ck->PrepareRows(*q8, DType::kFloat32, 1, &scratch, [&] { return ++asked == 1; });
    CHECK(asked == 1);
    REQUIRE_FALSE(rows.ok());
    CHECK(rows.status().message() == "tensor 'big.q8_0': interrupted");
    asked = 0;
    CHECK(ck->PrepareRows(*q8, DType::kFloat32, 1, &scratch, [&] { return ++asked < 0; }).ok());
    CHECK(asked == 1);  // between its two pieces
  }
  // Dequantizer::Run in pieces of any size: the same bits as one run;
  // stopped, asked no more. The 3-D tensor's rows are its 6 experts.
  const CheckpointTensor* t = ck->Find("experts.q8_0");
  CheckpointTensor::Buffers scratch;
  auto d = t->prepare(DType::kBFloat16, &scratch);
  REQUIRE(d.ok());
  auto whole = d->Run(1);
  REQUIRE(whole.ok());
  const size_t bytes = whole->size_bytes();
  for (const uint64_t check_bytes :
       {uint64_t{1}, uint64_t{2048}, uint64_t{4096}, uint64_t{1} << 30}) {
    CAPTURE(check_bytes);
    std::vector<uint8_t> got(bytes, 0);
    int asked = 0;
    MutableTensorView y{DType::kBFloat16, whole->shape(), got.data(), bytes};
    REQUIRE(d->Run(
                 y, 2, [&] { return ++asked < 0; }, check_bytes)
                .ok());
    CHECK(std::memcmp(got.data(), whole->data(), bytes) == 0);
    // 2 KiB per expert: one question per expert, per 2 experts, or all.
    const int pieces = check_bytes < 2048 ? 6 : check_bytes < 4096 ? 6 : check_bytes < 8192 ? 3 : 1;
    CHECK(asked == pieces);
    int asked_stop = 0;
    const Status st = d->Run(
        y, 1, [&] { return ++asked_stop == pieces; }, check_bytes);
    CHECK(IsInterrupted(st.message()));
    CHECK(asked_stop == pieces);
  }
}

TEST_CASE("float64 copies: converted on request, each value rounded once") {
  // Values where rounding through float32 first (double rounding) would
  // give other bits: 1 + 2^-11 + 2^-40 is above the float16 midpoint
  // between 1 and 1 + 2^-10 (so 1 + 2^-10), but float32 drops the 2^-40
  // and float16 then ties to even (1); likewise for bfloat16 with 2^-8.
  const fs::path dir = TempDir("gguf_f64");
  const double vals[] = {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                         1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
                         -(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)),
                         1e300,
                         -1e-300,
                         -0.0,
                         std::numeric_limits<double>::infinity(),
                         0.1,
                         65519.99,
                         65520.0,
                         std::ldexp(1.0, -25) + std::ldexp(1.0, -60),
                         std::ldexp(1.0, -140) * 1.5};
  const int64_t n = static_cast<int64_t>(std::size(vals));
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 8);
  std::memcpy(bytes.data(), vals, bytes.size());
  GgufBuilder b;
  b.Tensor("x", {n}, 28 /* f64 */, bytes);
  WriteText((dir / "m.gguf").string(), b.Bytes());
  auto ck = Checkpoint::Open((dir / "m.gguf").string());
  REQUIRE_MESSAGE(ck.ok(), ck.status().message());
  const CheckpointTensor& t = ck->tensors()[0];
  CHECK(ck->OutputDType(t, DType::kUndefined) == DType::kFloat64);  // kept without a request
  // The expected bits, from exact rational reasoning on each value.
  const uint16_t want_f16[] = {0x3C01, 0x3C04, 0xBC01, 0x7C00, 0x8000, 0x8000,
                               0x7C00, 0x2E66, 0x7BFF, 0x7C00, 0x0001, 0x0000};
  const uint16_t want_bf16[] = {0x3F80, 0x3F81, 0xBF80, 0x7F80, 0x8000, 0x8000,
                                0x7F80, 0x3DCD, 0x4780, 0x4780, 0x3300, 0x0000};
  for (DType to : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    CAPTURE(DTypeName(to));
    auto y = ck->Read(t, to);
    REQUIRE_MESSAGE(y.ok(), y.status().message());
    REQUIRE(y->dtype() == to);
    for (int64_t k = 0; k < n; ++k) {
      CAPTURE(k);
      if (to == DType::kFloat32) {
        float f;
        std::memcpy(&f, static_cast<const uint8_t*>(y->data()) + 4 * k, 4);
        CHECK(BitsFromF32(f) == BitsFromF32(static_cast<float>(vals[k])));
      } else {
        uint16_t h;
        std::memcpy(&h, static_cast<const uint8_t*>(y->data()) + 2 * k, 2);
        CHECK(h == (to == DType::kFloat16 ? want_f16[k] : want_bf16[k]));
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace nibble
