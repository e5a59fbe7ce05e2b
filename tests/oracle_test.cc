// The operator against the independent oracle (tests/pmx_oracle.h), bit for
// bit, over every mode of SPEC.md §2, ranks 1-4, many shapes and group
// sizes, every output type and several thread counts; and the tile API
// against slices of the whole-tensor output.
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "op/pmx.h"
#include "tests/pmx_oracle.h"

namespace nibble {
namespace testing {
namespace {

const DType kOutTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
const DType kScaleTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

struct ShapeCase {
  Shape d;
  int64_t axis;
  int64_t group;  // for grouped
};

std::vector<ShapeCase> Shapes(bool int4) {
  std::vector<ShapeCase> s = {
      {{8, 128}, 1, 32},  {{8, 128}, 1, 128}, {{16, 64}, 0, 4},      {{32, 96}, 0, 32},
      {{4, 256}, 1, 256}, {{8, 3}, 1, 1},     {{8, 6}, 1, 3},        {{24, 40}, 1, 8},
      {{8, 4, 16}, 1, 2}, {{16, 2, 3}, 0, 8}, {{8, 2, 3, 32}, 1, 1}, {{8, 3, 2, 2}, 0, 4},
      {{64}, 0, 16},      {{40}, 0, 40},      {{4, 1000}, 1, 40},    {{96, 33}, 0, 32},
  };
  if (!int4) {
    s.push_back({{3, 7}, 1, 7});
    s.push_back({{5}, 0, 1});
    s.push_back({{5, 2, 3}, 0, 5});
  }
  return s;
}

void CheckCase(const PmxCase& c, const std::string& what) {
  TensorView zs;
  for (DType out : kOutTypes) {
    DequantizeOptions o;
    o.output_dtype = out;
    o.name = what;
    auto prep = PreparePmx(c.attrs, c.x.view(), c.scale_t.view(), c.zp_view(&zs), o);
    REQUIRE_MESSAGE(prep.ok(), what << ": " << prep.status().message());
    const auto want = OracleBits(c, out);
    for (int threads : {1, 2, 0}) {
      auto y = prep->Run(threads);
      REQUIRE(y.ok());
      const auto got = TensorBits(*y);
      int64_t bad = 0, first = -1;
      for (size_t k = 0; k < got.size(); ++k) {
        if (got[k] != want[k] && bad++ == 0) first = static_cast<int64_t>(k);
      }
      CHECK_MESSAGE(bad == 0, what << " out=" << DTypeName(out) << " threads=" << threads << ": "
                                   << bad << " mismatches, first at " << first);
    }
  }
}

TEST_CASE("operator == oracle: every mode, shape, group and type") {
  std::mt19937_64 rng(1234);
  int cases = 0;
  for (bool int4 : {true, false}) {
    for (const auto& sc : Shapes(int4)) {
      if (sc.axis == 1 && sc.d.size() < 2) continue;
      for (Gran gran :
           {Gran::kGrouped, Gran::kPerChannel, Gran::kPerChannelRank1, Gran::kPerTensor}) {
        if (gran == Gran::kPerChannelRank1 && sc.d.size() != 2) continue;
        for (ZpMode zp : {ZpMode::kNone, ZpMode::kInteger, ZpMode::kFloat}) {
          const DType st = kScaleTypes[cases % 3];
          DType zt = DType::kUndefined;
          if (zp == ZpMode::kInteger) {
            const DType ints[] = {DType::kInt8, DType::kInt32, DType::kUInt8};
            zt = ints[cases % 3];
          } else if (zp == ZpMode::kFloat) {
            zt = cases % 2 ? DType::kFloat16 : DType::kFloat32;
          }
          for (bool x8 : {false, true}) {
            if (x8 && (!int4 || sc.d[0] % 8 != 0)) continue;
            const auto c = RandomCase(rng, int4, sc.d, sc.axis, gran, sc.group, zp, st, zt, x8);
            const std::string what = std::string(int4 ? (x8 ? "int4x8" : "int4x4") : "int8") +
                                     " d=" + ShapeToString(sc.d) +
                                     " axis=" + std::to_string(sc.axis) +
                                     " G=" + std::to_string(c.attrs.group_size) +
                                     " gran=" + std::to_string(static_cast<int>(gran)) +
                                     " zp=" + std::to_string(static_cast<int>(zp)) +
                                     " scale=" + DTypeName(st) + " zpt=" + DTypeName(zt);
            CheckCase(c, what);
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases > 300);
}

TEST_CASE("large tensors take the threaded path and still match") {
  std::mt19937_64 rng(99);
  for (int64_t axis : {0, 1}) {
    const auto c = RandomCase(rng, true, {256, 512}, axis, Gran::kGrouped, 64, ZpMode::kInteger,
                              DType::kFloat16, DType::kUInt8);
    CheckCase(c, "large axis=" + std::to_string(axis));
  }
  // Few rows, long columns: the threaded split cuts rows into column pieces.
  const auto c = RandomCase(rng, false, {1 << 16}, 0, Gran::kGrouped, 32, ZpMode::kFloat,
                            DType::kFloat32, DType::kFloat32);
  CheckCase(c, "rank-1 long");
}

TEST_CASE("tile API == slices of the whole-tensor output, at any offsets") {
  std::mt19937_64 rng(7);
  struct TC {
    Shape d;
    int64_t axis, group;
    bool int4;
  };
  for (const TC& t : {TC{{16, 96}, 1, 32, true}, TC{{32, 40}, 0, 8, true},
                      TC{{8, 3, 20}, 1, 1, true}, TC{{24, 50}, 1, 25, false}}) {
    for (DType out : kOutTypes) {
      const auto c = RandomCase(rng, t.int4, t.d, t.axis, Gran::kGrouped, t.group, ZpMode::kFloat,
                                DType::kFloat16, DType::kFloat32);
      TensorView zs;
      DequantizeOptions o;
      o.output_dtype = out;
      auto prep = PreparePmx(c.attrs, c.x.view(), c.scale_t.view(), c.zp_view(&zs), o);
      REQUIRE(prep.ok());
      auto whole = prep->Run(1);
      REQUIRE(whole.ok());
      const auto all = TensorBits(*whole);
      const int64_t rows = prep->rows(), cols = prep->cols();
      const int ob = out == DType::kFloat32 ? 4 : 2;
      std::uniform_int_distribution<int64_t> rr(0, rows), cc(0, cols);
      for (int trial = 0; trial < 60; ++trial) {
        int64_t r0 = rr(rng), r1 = rr(rng), c0 = cc(rng), c1 = cc(rng);
        if (r0 > r1) std::swap(r0, r1);
        if (c0 > c1) std::swap(c0, c1);
        const int64_t ld = c1 - c0 + trial % 3;
        // One sentinel row past the end.
        std::vector<uint8_t> buf(static_cast<size_t>(((r1 - r0) * ld + 8) * ob), 0xA5);
        REQUIRE(prep->RunTile(r0, r1, c0, c1, buf.data(), ld).ok());
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t col = c0; col < c1; ++col) {
            const size_t k = static_cast<size_t>((r - r0) * ld + (col - c0));
            uint32_t v = 0;
            std::memcpy(&v, buf.data() + k * static_cast<size_t>(ob), static_cast<size_t>(ob));
            REQUIRE(v == all[static_cast<size_t>(r * cols + col)]);
          }
          // Padding between rows is untouched.
          for (int64_t col = c1 - c0; col < ld && r + 1 < r1; ++col) {
            const size_t k = static_cast<size_t>((r - r0) * ld + col) * static_cast<size_t>(ob);
            REQUIRE(buf[k] == 0xA5);
          }
        }
        const size_t end = static_cast<size_t>(((r1 - r0 - 1) * ld + (c1 - c0)) * ob);
        for (size_t k = r1 > r0 && c1 > c0 ? end : 0; k < buf.size() && r1 > r0 && c1 > c0; ++k) {
          REQUIRE(buf[k] == 0xA5);
        }
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace nibble
