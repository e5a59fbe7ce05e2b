// The PMX operator: golden vectors (SPEC.md's worked example, each formula
// cell by hand) and every validation rule's error text.
#include "op/pmx.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/numeric.h"
#include "doctest/doctest.h"
#include "op/lowering.h"
#include "tests/test_util.h"

namespace nibble {
namespace {

using testing::Floats;
using testing::View;

TEST_CASE("SPEC worked int4x4 example: codes [[0,15],[8,9],[11,7],[4,10]]") {
  // Column 0 codes 0,8,11,4 -> 0x4B80; column 1 codes 15,9,7,10 -> 0xA79F.
  const std::vector<uint8_t> bytes = {0x80, 0x4b, 0x9f, 0xa7};
  const TensorView x{DType::kInt16, {1, 2}, bytes.data(), bytes.size()};
  const std::vector<float> scale = {0.5f};
  PmxAttributes a;
  a.quant_data_type = "int4";
  a.quant_axis = 0;
  a.group_size = 0;  // per-tensor
  auto y = DequantizePmx(a, x, View(DType::kFloat32, {1}, scale), nullptr);
  REQUIRE(y.ok());
  CHECK(y->shape() == Shape{4, 2});
  // (c - 8) * 0.5
  CHECK(Floats(*y) == std::vector<float>{-4.0f, 3.5f, 0.0f, 0.5f, 1.5f, -0.5f, -2.0f, 1.0f});
}

TEST_CASE("int4x8 in int32: nibble j holds row 8i + j") {
  // One column, codes 0..7 -> 0x76543210.
  const std::vector<uint8_t> bytes = {0x10, 0x32, 0x54, 0x76};
  const TensorView x{DType::kInt32, {1, 1}, bytes.data(), 4};
  const std::vector<float> scale = {1.0f};
  PmxAttributes a;
  a.quant_data_type = "int4";
  a.quant_axis = 0;
  a.group_size = 0;
  auto y = DequantizePmx(a, x, View(DType::kFloat32, {1}, scale), nullptr);
  REQUIRE(y.ok());
  CHECK(y->shape() == Shape{8, 1});
  CHECK(Floats(*y) == std::vector<float>{-8, -7, -6, -5, -4, -3, -2, -1});
}

// The six cells of SPEC.md §2's formula table, computed by hand.
TEST_CASE("formula cells") {
  PmxAttributes a;
  a.quant_axis = 1;
  a.group_size = 2;
  // int4: logical (4, 2): rows 0..3, codes per row [c, c'].
  // codes: row0 [0, 15], row1 [8, 9], row2 [11, 7], row3 [4, 10] (worked example).
  const std::vector<uint8_t> x4 = {0x80, 0x4b, 0x9f, 0xa7};
  const TensorView x4v{DType::kInt16, {1, 2}, x4.data(), 4};
  const std::vector<float> s4 = {0.5f, 2.0f, -1.0f, 0.25f};  // one per row (G = 2 = d1)
  const TensorView s4v = View(DType::kFloat32, {4, 1}, s4);
  a.quant_data_type = "int4";

  SUBCASE("int4, no zero point: (c - 8) * s") {
    auto y = DequantizePmx(a, x4v, s4v, nullptr);
    REQUIRE(y.ok());
    CHECK(Floats(*y) == std::vector<float>{-4.0f, 3.5f, 0.0f, 2.0f, -3.0f, 1.0f, -1.0f, 0.5f});
  }
  SUBCASE("int4, integer zero point: (c - z) * s") {
    const std::vector<int8_t> z = {1, 9, 15, 0};
    a.has_zeropoint = 1;
    const TensorView zv = View(DType::kInt8, {4, 1}, z);
    auto y = DequantizePmx(a, x4v, s4v, &zv);
    REQUIRE(y.ok());
    CHECK(Floats(*y) == std::vector<float>{-0.5f, 7.0f, -2.0f, 0.0f, 4.0f, 8.0f, 1.0f, 2.5f});
  }
  SUBCASE("int4, float zero point: (c - 8) * s + z") {
    const std::vector<float> z = {0.25f, -1.0f, 0.5f, 100.0f};
    a.has_zeropoint = 1;
    a.float_zeropoint = 1;
    const TensorView zv = View(DType::kFloat32, {4, 1}, z);
    auto y = DequantizePmx(a, x4v, s4v, &zv);
    REQUIRE(y.ok());
    CHECK(Floats(*y) == std::vector<float>{-3.75f, 3.75f, -1.0f, 1.0f, -2.5f, 1.5f, 99.0f, 100.5f});
  }
  // int8: logical (2, 2), G = 2 along axis 1.
  const std::vector<int8_t> x8 = {-128, 127, 3, -5};
  const TensorView x8v = View(DType::kInt8, {2, 2}, x8);
  const std::vector<float> s8 = {0.5f, -2.0f};
  const TensorView s8v = View(DType::kFloat32, {2, 1}, s8);
  a.quant_data_type = "int8";
  a.has_zeropoint = 0;
  a.float_zeropoint = 0;
  SUBCASE("int8, no zero point: x * s") {
    auto y = DequantizePmx(a, x8v, s8v, nullptr);
    REQUIRE(y.ok());
    CHECK(Floats(*y) == std::vector<float>{-64.0f, 63.5f, -6.0f, 10.0f});
  }
  SUBCASE("int8, integer zero point: (x - z) * s, exact integer subtraction") {
    const std::vector<int8_t> z = {127, -128};
    a.has_zeropoint = 1;
    const TensorView zv = View(DType::kInt8, {2, 1}, z);
    auto y = DequantizePmx(a, x8v, s8v, &zv);
    REQUIRE(y.ok());
    CHECK(Floats(*y) == std::vector<float>{-127.5f, 0.0f, -262.0f, -246.0f});
  }
  SUBCASE("int8, float zero point: x * s + z") {
    const std::vector<uint16_t> z = {F16FromF32(1.5f), F16FromF32(-0.25f)};  // float16
    a.has_zeropoint = 1;
    a.float_zeropoint = 1;
    const TensorView zv = View(DType::kFloat16, {2, 1}, z);
    auto y = DequantizePmx(a, x8v, s8v, &zv);
    REQUIRE(y.ok());
    CHECK(Floats(*y) == std::vector<float>{-62.5f, 65.0f, -6.25f, 9.75f});
  }
}

TEST_CASE("float zero point: multiply and add are rounded separately (no FMA)") {
  // x * s is inexact in float32; an FMA would give a different last bit.
  const std::vector<int8_t> x = {3};
  const float s = 0.1f, z = -0.3f;
  const std::vector<float> sv = {s}, zv = {z};
  PmxAttributes a;
  a.quant_data_type = "int8";
  a.quant_axis = 0;
  a.group_size = 0;
  a.has_zeropoint = 1;
  a.float_zeropoint = 1;
  const TensorView zt = View(DType::kFloat32, {1}, zv);
  auto y = DequantizePmx(a, View(DType::kInt8, {1}, x), View(DType::kFloat32, {1}, sv), &zt);
  REQUIRE(y.ok());
  volatile float prod = 3.0f * s;
  const float want = prod + z;
  const double fma_result = std::fma(3.0, static_cast<double>(s), static_cast<double>(z));
  CHECK(BitsFromF32(Floats(*y)[0]) == BitsFromF32(want));
  // The case is meaningful only if FMA would differ (it does for these values).
  CHECK(static_cast<float>(fma_result) != want);
}

TEST_CASE("output types: default is the scale's type - f16/bf16 round to nearest even") {
  const std::vector<int8_t> x = {1, 3};
  // s such that 3 * s has bits below bf16 / f16 precision.
  const float s = F32FromBits(0x3DCCCCCDu);  // 0.1f
  const std::vector<uint16_t> s16 = {F16FromF32(s)};
  PmxAttributes a;
  a.quant_data_type = "int8";
  a.quant_axis = 0;
  a.group_size = 0;
  auto y = DequantizePmx(a, View(DType::kInt8, {2}, x), View(DType::kFloat16, {1}, s16), nullptr);
  REQUIRE(y.ok());
  CHECK(y->dtype() == DType::kFloat16);
  const float s_wide = F32FromF16(s16[0]);
  CHECK(y->data_as<uint16_t>()[1] == F16FromF32(3.0f * s_wide));

  DequantizeOptions o;
  o.output_dtype = DType::kBFloat16;
  const std::vector<float> s32 = {s};
  auto yb =
      DequantizePmx(a, View(DType::kInt8, {2}, x), View(DType::kFloat32, {1}, s32), nullptr, o);
  REQUIRE(yb.ok());
  CHECK(yb->dtype() == DType::kBFloat16);
  CHECK(yb->data_as<uint16_t>()[1] == BF16FromF32(3.0f * s));
  CHECK(yb->data_as<uint16_t>()[1] != static_cast<uint16_t>(BitsFromF32(3.0f * s) >> 16));
}

TEST_CASE("scales may be negative, zero, subnormal, Inf or NaN: plain arithmetic") {
  const std::vector<int8_t> x = {2, 0, -1, 1, 5};
  const std::vector<float> s = {-1.5f, std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::infinity(), std::nanf(""),
                                std::numeric_limits<float>::denorm_min()};
  PmxAttributes a;
  a.quant_data_type = "int8";
  a.quant_axis = 0;
  a.group_size = 1;
  auto y = DequantizePmx(a, View(DType::kInt8, {5}, x), View(DType::kFloat32, {5}, s), nullptr);
  REQUIRE(y.ok());
  const auto f = Floats(*y);
  CHECK(f[0] == -3.0f);
  CHECK(std::isnan(f[1]));  // 0 * Inf
  CHECK(f[2] == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f[3]));
  CHECK(f[4] == 5 * std::numeric_limits<float>::denorm_min());
}

TEST_CASE("bfloat16: the subnormal test is skipped only when no scale is subnormal") {
  // 64 int8 codes (two 32-value units, so the vector kernels run) per
  // group, one group per scale; outputs q * s rounded to bfloat16.
  std::vector<int8_t> x(128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int8_t>(static_cast<int>(i % 7) - 3);
  PmxAttributes a;
  a.quant_data_type = "int8";
  a.quant_axis = 0;
  a.group_size = 64;
  DequantizeOptions o;
  o.output_dtype = DType::kBFloat16;
  auto run = [&](const TensorView& scale, bool want_normal) {
    auto d = PreparePmx(a, View(DType::kInt8, {128}, x), scale, nullptr, o);
    REQUIRE(d.ok());
    CHECK(d->plan().normal_values == want_normal);
    auto y = DequantizePmx(a, View(DType::kInt8, {128}, x), scale, nullptr, o);
    REQUIRE(y.ok());
    return std::vector<uint16_t>(y->data_as<uint16_t>(), y->data_as<uint16_t>() + 128);
  };
  // float32 scales with a subnormal: the products 2 * s, 3 * s are
  // subnormal and must round to their nonzero bfloat16 (not be flushed).
  const float sub = F32FromBits(0x00400000u);  // 2^-127
  const std::vector<float> s_sub = {sub, 1.0f};
  const auto y = run(View(DType::kFloat32, {2}, s_sub), false);
  for (size_t i = 0; i < 128; ++i) {
    CHECK(y[i] == BF16FromF32(static_cast<float>(x[i]) * s_sub[i / 64]));
  }
  CHECK(y[0] == BF16FromF32(-3.0f * sub));
  CHECK(y[0] != 0x8000u);
  // The smallest normal float32 scale: every product is normal.
  const std::vector<float> s_min = {FLT_MIN, -FLT_MIN};
  const auto ym = run(View(DType::kFloat32, {2}, s_min), true);
  for (size_t i = 0; i < 128; ++i) {
    CHECK(ym[i] == BF16FromF32(static_cast<float>(x[i]) * s_min[i / 64]));
  }
  // float16 scales (even subnormal ones) widen to normal float32.
  const std::vector<uint16_t> s16 = {0x0001u, 0x3C00u};
  const auto yh = run(View(DType::kFloat16, {2}, s16), true);
  for (size_t i = 0; i < 128; ++i) {
    CHECK(yh[i] == BF16FromF32(static_cast<float>(x[i]) * F32FromF16(s16[i / 64])));
  }
  // bfloat16 scales can be subnormal: scanned.
  const std::vector<uint16_t> sb = {0x0040u, 0x3F80u};
  run(View(DType::kBFloat16, {2}, sb), false);
}

TEST_CASE("empty tensors produce empty outputs") {
  const std::vector<int16_t> x;
  const std::vector<float> s;
  PmxAttributes a;
  a.quant_data_type = "int4";
  a.group_size = 32;
  auto y =
      DequantizePmx(a, View(DType::kInt16, {0, 64}, x), View(DType::kFloat32, {0, 2}, s), nullptr);
  REQUIRE(y.ok());
  CHECK(y->shape() == Shape{0, 64});
}

// ---------------------------------------------------------------------------
// Validation: every rule of SPEC.md §2 / §5 has its message checked.

struct Req {
  PmxAttributes a;
  std::vector<int16_t> x = std::vector<int16_t>(2 * 128, 0);  // int4x4 (2,128): logical (8,128)
  Shape x_shape{2, 128};
  DType x_type = DType::kInt16;
  std::vector<float> s = std::vector<float>(8 * 4, 1.0f);
  Shape s_shape{8, 4};
  DType s_type = DType::kFloat32;
  std::vector<int32_t> z;
  Shape z_shape;
  DType z_type = DType::kUndefined;
  DequantizeOptions opts;
  Req() {
    a.quant_data_type = "int4";
    a.group_size = 32;
    opts.name = "proj.w";
  }
  std::string Error() const {
    TensorView xv{x_type, x_shape, x.data(), x.size() * 2};
    TensorView sv{s_type, s_shape, s.data(), s.size() * 4};
    TensorView zv{z_type, z_shape, z.data(), z.size() * 4};
    auto y = DequantizePmx(a, xv, sv, z_type == DType::kUndefined ? nullptr : &zv, opts);
    return y.ok() ? std::string("OK") : y.status().message();
  }
};

TEST_CASE("the baseline validation request is valid") { CHECK(Req().Error() == "OK"); }

TEST_CASE("validation: attributes") {
  Req r;
  r.a.quant_data_type = "int3";
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': attribute quant_data_type must be \"int4\" or \"int8\" (got "
        "\"int3\")");
  r = Req();
  r.a.quant_axis = 2;
  CHECK(r.Error() == "DequantizeLinear 'proj.w': attribute quant_axis must be 0 or 1 (got 2)");
  r = Req();
  r.a.group_size = -32;
  CHECK(r.Error() == "DequantizeLinear 'proj.w': attribute group_size must be >= 0 (got -32)");
  r = Req();
  r.a.has_zeropoint = 2;
  CHECK(r.Error() == "DequantizeLinear 'proj.w': attribute has_zeropoint must be 0 or 1 (got 2)");
  r = Req();
  r.a.float_zeropoint = -1;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': attribute float_zeropoint must be 0 or 1 (got -1)");
  r = Req();
  r.a.float_zeropoint = 1;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': attribute float_zeropoint = 1 requires has_zeropoint = 1");
  r = Req();
  r.opts.name = "";
  r.a.quant_axis = 5;
  CHECK(r.Error() == "DequantizeLinear: attribute quant_axis must be 0 or 1 (got 5)");
}

TEST_CASE("validation: X") {
  Req r;
  r.x_type = DType::kInt8;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input X must be int16 (int4x4) or int32 (int4x8) for "
        "quant_data_type \"int4\" (got int8)");
  r = Req();
  r.a.quant_data_type = "int8";
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input X must be int8 for quant_data_type \"int8\" (got int16)");
  r = Req();
  r.x_shape = {};
  CHECK(r.Error() == "DequantizeLinear 'proj.w': input X must have rank >= 1 (got a scalar)");
  r = Req();
  r.x_shape = {64};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': attribute quant_axis = 1 needs X of rank >= 2 (got rank 1)");
  r = Req();
  r.x_shape = {2, -128};
  CHECK(
      r.Error() ==
      "DequantizeLinear 'proj.w': input X has negative dimension -128 at axis 1 in shape (2,-128)");
  r = Req();
  r.x.resize(100);
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input X holds 200 bytes but int16 shape (2,128) needs 512");
}

TEST_CASE("validation: overflowing dims are rejected") {
  Req r;
  r.x_shape = {int64_t{1} << 40, int64_t{1} << 40};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input X shape (1099511627776,1099511627776) has too many "
        "elements (overflows int64)");
  r = Req();
  r.x_shape = {std::numeric_limits<int64_t>::max() / 2, 1};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input X dim 0 (4611686018427387903) is too large for int4 "
        "unpacking");
  r = Req();
  r.x_shape = {int64_t{1} << 60, 4};  // X fits, but the logical (4x) shape overflows
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': logical output shape (4611686018427387904,4) has too many "
        "elements (overflows int64)");
  r = Req();
  r.a.quant_data_type = "int8";
  r.x_type = DType::kInt8;
  r.x_shape = {int64_t{1} << 62, 4};  // 2^64 elements
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input X shape (4611686018427387904,4) has too many elements "
        "(overflows int64)");
}

TEST_CASE("validation: Scale") {
  Req r;
  r.s_type = DType::kInt8;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input Scale must be float32, float16 or bfloat16 (got int8)");
  r = Req();
  r.s_shape = {8, 3};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': Scale shape (8,3) does not match X (8,128) with group_size 32 "
        "on quant_axis 1 (expected (8,4))");
  r = Req();
  r.a.group_size = 48;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': X (8,128) dim 1 (128) is not divisible by group_size 48 on "
        "quant_axis 1");
  r = Req();
  r.a.quant_axis = 0;
  r.a.group_size = 3;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': X (8,128) dim 0 (8) is not divisible by group_size 3 on "
        "quant_axis 0");
  r = Req();
  r.a.group_size = 0;
  r.s_shape = {4, 8};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': Scale shape (4,8) does not match X (8,128) per-channel "
        "(group_size 0) on quant_axis 1 (expected (8,1) or (8), or one element for per-tensor)");
  r = Req();
  r.s.resize(3);
  r.s_shape = {8, 4};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input Scale holds 12 bytes but float32 shape (8,4) needs 128");
}

TEST_CASE("validation: ZeroPoint") {
  Req r;
  r.a.has_zeropoint = 1;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': has_zeropoint = 1 but input ZeroPoint is missing or empty");
  r.z_type = DType::kInt32;
  r.z_shape = {0};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': has_zeropoint = 1 but input ZeroPoint is missing or empty");
  r.z = std::vector<int32_t>(32, 8);
  r.z_shape = {8, 4};
  CHECK(r.Error() == "OK");
  r.z_shape = {4, 8};
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': ZeroPoint shape (4,8) must equal Scale shape (8,4)");
  r.z_shape = {8, 4};
  r.z[5] = 16;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': ZeroPoint value 16 at flat index 5 is out of range [0, 15] for "
        "quant_data_type \"int4\"");
  r.z[5] = -1;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': ZeroPoint value -1 at flat index 5 is out of range [0, 15] for "
        "quant_data_type \"int4\"");
  r.z[5] = 3;
  r.z_type = DType::kFloat32;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input ZeroPoint must be int8, int32 or uint8 when "
        "float_zeropoint = 0 (got float32)");
  r.a.float_zeropoint = 1;
  CHECK(r.Error() == "OK");
  r.z_type = DType::kInt8;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': input ZeroPoint must be float16 or float32 when "
        "float_zeropoint = 1 (got int8)");
  Req q;
  q.z = std::vector<int32_t>(32, 8);
  q.z_shape = {8, 4};
  q.z_type = DType::kInt32;
  CHECK(q.Error() == "DequantizeLinear 'proj.w': input ZeroPoint is given but has_zeropoint = 0");
}

TEST_CASE("validation: output type and output buffer") {
  Req r;
  r.opts.output_dtype = DType::kInt8;
  CHECK(r.Error() ==
        "DequantizeLinear 'proj.w': output type must be float32, float16 or bfloat16 (got int8)");

  Req ok;
  TensorView xv{ok.x_type, ok.x_shape, ok.x.data(), ok.x.size() * 2};
  TensorView sv{ok.s_type, ok.s_shape, ok.s.data(), ok.s.size() * 4};
  auto d = PreparePmx(ok.a, xv, sv, nullptr, ok.opts);
  REQUIRE(d.ok());
  std::vector<float> out(8 * 128);
  MutableTensorView y{DType::kFloat16, {8, 128}, out.data(), out.size() * 4};
  CHECK(d->Run(y).message() == "DequantizeLinear 'proj.w': output Y must be float32 (got float16)");
  y.dtype = DType::kFloat32;
  y.shape = {8, 127};
  CHECK(d->Run(y).message() ==
        "DequantizeLinear 'proj.w': output Y shape (8,127) does not match the expected (8,128)");
  y.shape = {8, 128};
  y.size_bytes = 100;
  CHECK(d->Run(y).message() == "DequantizeLinear 'proj.w': output Y has 100 bytes, needs 4096");
  y.size_bytes = out.size() * 4;
  CHECK(d->Run(y).ok());
  CHECK(d->RunTile(0, 9, 0, 1, out.data(), 1).message() ==
        "RunTile: tile rows [0, 9) x cols [0, 1) is outside the 8 x 128 view");
  CHECK(d->RunTile(0, 2, 0, 16, out.data(), 8).message() ==
        "RunTile: leading dimension 8 is smaller than the tile width 16");
}

TEST_CASE("shape inference") {
  Req r;
  TensorView xv{r.x_type, r.x_shape, nullptr, 0};  // data not needed
  TensorView sv{DType::kBFloat16, r.s_shape, nullptr, 0};
  auto info = InferPmxOutput(r.a, xv, sv, nullptr);
  REQUIRE(info.ok());
  CHECK(info->shape == Shape{8, 128});
  CHECK(info->dtype == DType::kBFloat16);
  sv.shape = {8, 5};
  CHECK(!InferPmxOutput(r.a, xv, sv, nullptr).ok());
}

TEST_CASE("ForParamRanges: one range outside a scope, disjoint ranges covering all inside") {
  const auto ranges = [](int64_t n, int64_t per_unit) {
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> got;
    internal::ForParamRanges(
        n,
        [&](int64_t b, int64_t e) {
          std::lock_guard<std::mutex> lock(m);
          got.emplace_back(b, e);
        },
        per_unit);
    std::sort(got.begin(), got.end());
    return got;
  };
  const int64_t n = int64_t{1} << 16;
  CHECK(ranges(n, 1) == std::vector<std::pair<int64_t, int64_t>>{{0, n}});
  CHECK(ranges(0, 1).empty());
  {
    ScopedPrepareThreads four(4);
    const auto got = ranges(n, 1);
#ifdef _OPENMP               // (the library's OpenMP flag reaches its users' builds)
    CHECK(got.size() == 4);  // 2^16 parameters pay for four threads
#endif
    int64_t at = 0;
    for (const auto& [b, e] : got) {
      CHECK(b == at);
      CHECK(e > b);
      at = e;
    }
    CHECK(at == n);
    CHECK(ranges(100, 1).size() == 1);  // too few to split
    // Packed words: the parameters they hold count, not the words.
    CHECK(ranges(n / 8, 8).size() == ranges(n, 1).size());
    {
      ScopedPrepareThreads one(1);  // the innermost scope counts
      CHECK(ranges(n, 1).size() == 1);
    }
    CHECK(ranges(n, 1).size() == got.size());
  }
  CHECK(ranges(n, 1).size() == 1);  // the scope ended
  CHECK(internal::FirstIndexWhere(n, [](int64_t i) { return i % 40000 == 39999; }) == 39999);
}

TEST_CASE("preparing on many threads: the same plan parameters, bits and first bad zero point") {
  // int4x4 [N, K] asymmetric, G = 32: 2^16 float16 scales and uint8 zero
  // points (enough for four prepare threads).
  const int64_t N = 512, K = 4096, G = 32, P = N * (K / G);
  std::vector<uint16_t> x(static_cast<size_t>(N / 4 * K)), s(static_cast<size_t>(P));
  std::vector<uint8_t> z(static_cast<size_t>(P));
  uint32_t r = 1;
  const auto next = [&r] { return r = r * 1664525u + 1013904223u; };
  for (auto& w : x) w = static_cast<uint16_t>(next() >> 16);
  for (auto& v : s) v = F16FromF32(static_cast<float>(next() >> 20) * 1e-5f + 1e-4f);
  for (auto& v : z) v = static_cast<uint8_t>(next() >> 28);
  PmxAttributes a;
  a.quant_data_type = "int4";
  a.group_size = G;
  a.has_zeropoint = 1;
  const TensorView xv{DType::kInt16, {N / 4, K}, x.data(), x.size() * 2};
  const TensorView sv{DType::kFloat16, {N, K / G}, s.data(), s.size() * 2};
  const TensorView zv{DType::kUInt8, {N, K / G}, z.data(), z.size()};
  DequantizeOptions o;
  o.output_dtype = DType::kFloat32;
  o.name = "w";
  const auto prepared = [&](int threads) {
    ScopedPrepareThreads scope(threads);
    auto d = PreparePmx(a, xv, sv, &zv, o);
    REQUIRE_MESSAGE(d.ok(), d.status().message());
    return std::move(*d);
  };
  const Dequantizer one = prepared(1);
  for (int threads : {2, 4, 0}) {
    CAPTURE(threads);
    const Dequantizer many = prepared(threads);
    CHECK(std::memcmp(one.plan().scale, many.plan().scale, static_cast<size_t>(P) * 4) == 0);
    CHECK(std::memcmp(one.plan().zp_int, many.plan().zp_int, static_cast<size_t>(P) * 4) == 0);
    CHECK(one.plan().normal_values == many.plan().normal_values);
    auto y1 = one.Run(1), y2 = many.Run(2);
    REQUIRE(y1.ok());
    REQUIRE(y2.ok());
    CHECK(std::memcmp(y1->data(), y2->data(), y1->size_bytes()) == 0);
  }
  // Out-of-range zero points in different threads' ranges: the first is named.
  z[static_cast<size_t>(P - 3)] = 200;
  z[40000] = 16;
  for (int threads : {1, 4}) {
    ScopedPrepareThreads scope(threads);
    auto d = PreparePmx(a, xv, sv, &zv, o);
    REQUIRE(!d.ok());
    CHECK(d.status().message() ==
          "DequantizeLinear 'w': ZeroPoint value 16 at flat index 40000 is out of range [0, 15] "
          "for quant_data_type \"int4\"");
  }
  // Every stored integer type widens alike on one and on four threads.
  for (DType t : {DType::kInt8, DType::kInt16, DType::kUInt16, DType::kInt32, DType::kUInt4,
                  DType::kInt4, DType::kUInt2, DType::kInt2}) {
    CAPTURE(DTypeName(t));
    std::vector<uint8_t> bytes(static_cast<size_t>(P) * 4);
    for (auto& b : bytes) b = static_cast<uint8_t>(next() >> 24);
    const TensorView v{t, {P}, bytes.data(), bytes.size()};
    ParamVector<int32_t> w1, w4;
    const int32_t *p1 = nullptr, *p4 = nullptr;
    {
      ScopedPrepareThreads scope(1);
      REQUIRE(internal::WidenIntegerZeroPoint(v, "zp", &w1, &p1).ok());
    }
    {
      ScopedPrepareThreads scope(4);
      REQUIRE(internal::WidenIntegerZeroPoint(v, "zp", &w4, &p4).ok());
    }
    CHECK(std::memcmp(p1, p4, static_cast<size_t>(P) * 4) == 0);
    // Spot values against the stored bits.
    const int64_t k = 12345;
    int32_t want = 0;
    switch (t) {
      case DType::kInt8:
        want = static_cast<int8_t>(bytes[k]);
        break;
      case DType::kInt16:
        want = static_cast<int16_t>(bytes[2 * k] | bytes[2 * k + 1] << 8);
        break;
      case DType::kUInt16:
        want = bytes[2 * k] | bytes[2 * k + 1] << 8;
        break;
      case DType::kInt32: {
        uint32_t u;
        std::memcpy(&u, &bytes[4 * k], 4);
        want = static_cast<int32_t>(u);
        break;
      }
      case DType::kUInt4:
      case DType::kInt4: {
        const int u = (bytes[k / 2] >> (4 * (k % 2))) & 15;
        want = t == DType::kInt4 && u >= 8 ? u - 16 : u;
        break;
      }
      default: {
        const int u = (bytes[k / 4] >> (2 * (k % 4))) & 3;
        want = t == DType::kInt2 && u >= 2 ? u - 4 : u;
      }
    }
    CHECK(p1[k] == want);
  }
}

}  // namespace
}  // namespace nibble
