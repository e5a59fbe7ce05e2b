// ONNX DequantizeLinear and DirectML's element-wise form: golden vectors
// from the ONNX documents, every validation message, and randomized
// configurations against the independent oracle (tests/onnx_oracle.h).
#include "op/onnx.h"

#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "op/directml.h"
#include "tests/onnx_oracle.h"
#include "tests/test_util.h"

namespace nibble {
namespace testing {
namespace {

TEST_CASE("ONNX seed example: per-tensor uint8") {
  const std::vector<uint8_t> x = {0, 3, 128, 255};
  const std::vector<float> s = {2.0f};
  const std::vector<uint8_t> z = {128};
  OnnxDequantizeAttributes a;
  a.opset = 10;
  const TensorView zv = View(DType::kUInt8, {}, z);
  auto y = DequantizeOnnx(a, View(DType::kUInt8, {4}, x), View(DType::kFloat32, {}, s), &zv);
  REQUIRE(y.ok());
  CHECK(Floats(*y) == std::vector<float>{-256, -250, 0, 254});
}

TEST_CASE("ONNX seed example: per-axis on axis 1 of a rank-4 tensor") {
  const std::vector<uint8_t> x = {3,  89, 34, 200, 74, 59, 5,   24,  24,
                                  87, 32, 13, 245, 99, 4,  142, 121, 102};
  const std::vector<float> s = {2, 4, 5};
  const std::vector<uint8_t> z = {84, 24, 196};
  OnnxDequantizeAttributes a;
  a.opset = 13;
  const TensorView zv = View(DType::kUInt8, {3}, z);
  auto y =
      DequantizeOnnx(a, View(DType::kUInt8, {1, 3, 3, 2}, x), View(DType::kFloat32, {3}, s), &zv);
  REQUIRE(y.ok());
  std::vector<float> want;
  for (int c = 0; c < 3; ++c) {
    for (int k = 0; k < 6; ++k)
      want.push_back(
          (static_cast<float>(x[static_cast<size_t>(c * 6 + k)]) - z[static_cast<size_t>(c)]) *
          s[static_cast<size_t>(c)]);
  }
  CHECK(Floats(*y) == want);
}

TEST_CASE("ONNX blocked along axis 0 with a ragged last block, int4 rows starting mid-byte") {
  // x int4 (5, 3): 15 nibbles; blocks of 2 rows along axis 0 -> 3 blocks, last short.
  std::vector<uint8_t> x(8);
  for (size_t k = 0; k < 8; ++k) x[k] = static_cast<uint8_t>(0x9E - 17 * k);
  const std::vector<float> s = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  OnnxDequantizeAttributes a;
  a.axis = 0;
  a.block_size = 2;
  a.has_axis = a.has_block_size = true;
  auto y =
      DequantizeOnnx(a, View(DType::kInt4, {5, 3}, x), View(DType::kFloat32, {3, 3}, s), nullptr);
  REQUIRE(y.ok());
  for (int64_t e = 0; e < 15; ++e) {
    const int64_t r = e / 3, c = e % 3;
    const int64_t u = (x[static_cast<size_t>(e / 2)] >> (4 * (e % 2))) & 0xF;
    const float q = static_cast<float>(u >= 8 ? u - 16 : u);
    CHECK(Floats(*y)[static_cast<size_t>(e)] == q * s[static_cast<size_t>((r / 2) * 3 + c)]);
  }
}

struct OnnxReq {
  OnnxDequantizeAttributes a;
  std::vector<uint8_t> x = std::vector<uint8_t>(64, 0);
  DType xt = DType::kInt8;
  Shape xs{4, 16};
  std::vector<float> s = std::vector<float>(16, 1.0f);
  DType st = DType::kFloat32;
  Shape ss{16};
  std::vector<uint8_t> z;
  DType zt = DType::kUndefined;
  Shape zs;
  std::string Error() const {
    TensorView xv{xt, xs, x.data(), x.size()};
    TensorView sv{st, ss, s.data(), s.size() * 4};
    TensorView zv{zt, zs, z.data(), z.size()};
    DequantizeOptions o;
    o.name = "n";
    auto y = DequantizeOnnx(a, xv, sv, zt == DType::kUndefined ? nullptr : &zv, o);
    return y.ok() ? std::string("OK") : y.status().message();
  }
};

TEST_CASE("ONNX validation messages") {
  OnnxReq r;
  CHECK(r.Error() == "OK");  // per-axis on axis 1, opset 25
  r.a.opset = 11;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': unsupported operator version 11 (supported: 10, 13, 19, 21, 23, 24, "
        "25)");
  r = OnnxReq();
  r.a.opset = 10;
  r.a.has_axis = true;
  CHECK(r.Error() == "DequantizeLinear 'n': attribute axis is not defined (DequantizeLinear-10)");
  r = OnnxReq();
  r.a.opset = 19;
  r.a.has_block_size = true;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': attribute block_size is not defined (DequantizeLinear-19)");
  r = OnnxReq();
  r.a.opset = 21;
  r.a.has_output_dtype = true;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': attribute output_dtype is not defined (DequantizeLinear-21)");
  r = OnnxReq();
  r.a.opset = 19;
  r.xt = DType::kInt4;
  r.x.resize(32);
  CHECK(r.Error() ==
        "DequantizeLinear 'n': input x has type int4, not supported (DequantizeLinear-19)");
  r = OnnxReq();
  r.xt = DType::kFloat32;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': input x has type float32, not supported (DequantizeLinear-25)");
  r = OnnxReq();
  r.a.opset = 13;
  r.st = DType::kFloat16;
  CHECK(
      r.Error() ==
      "DequantizeLinear 'n': input x_scale has type float16, not supported (DequantizeLinear-13)");
  r = OnnxReq();
  r.zt = DType::kUInt8;
  r.zs = {16};
  r.z.resize(16);
  CHECK(r.Error() ==
        "DequantizeLinear 'n': input x_zero_point has type uint8 but x has type int8 (they must "
        "match)");
  r.zt = DType::kInt8;
  r.zs = {4};
  CHECK(r.Error() == "DequantizeLinear 'n': x_zero_point shape (4) must equal x_scale shape (16)");
  r = OnnxReq();
  r.a.axis = 2;
  CHECK(
      r.Error() ==
      "DequantizeLinear 'n': attribute axis 2 is out of range for x of rank 2 (accepted [-2, 1])");
  r.a.axis = -1;
  CHECK(r.Error() == "OK");
  r.a.axis = -2;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': x_scale has 16 elements but x (4,16) has 4 along axis 0");
  r = OnnxReq();
  r.ss = {4, 4};
  CHECK(r.Error() ==
        "DequantizeLinear 'n': x_scale shape (4,4) must be a scalar or 1-D for per-axis "
        "quantization (block_size is 0)");
  r = OnnxReq();
  r.a.opset = 10;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': x_scale shape (16) must be a scalar (DequantizeLinear-10)");
  r = OnnxReq();
  r.a.block_size = -3;
  CHECK(r.Error() == "DequantizeLinear 'n': attribute block_size must be >= 0 (got -3)");
  r.a.block_size = 5;  // (4,16) axis 1 -> ceil(16/5) = 4 blocks
  r.ss = {4, 3};
  CHECK(r.Error() ==
        "DequantizeLinear 'n': Invalid shapes for blocked quantization: x (4,16), x_scale (4,3), "
        "axis 1, block_size 5 (expected x_scale (4,4))");
  r.ss = {4, 4};
  CHECK(r.Error() == "OK");
  r = OnnxReq();
  r.a.output_dtype = 3;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': attribute output_dtype 3 is not float32 (1), float16 (10) or "
        "bfloat16 (16)");
  r = OnnxReq();
  r.st = DType::kFloat8E8M0;
  r.s.resize(4);
  CHECK(r.Error() ==
        "DequantizeLinear 'n': attribute output_dtype is required when x_scale is float8e8m0");
  r.a.output_dtype = 16;
  CHECK(r.Error() == "OK");
  r = OnnxReq();
  r.xt = DType::kFloat8E4M3FN;
  r.zt = DType::kFloat8E4M3FN;
  r.zs = {16};
  r.z.assign(16, 0);
  r.z[7] = 0x80;  // -0 is zero
  CHECK(r.Error() == "OK");
  r.z[9] = 0x38;
  CHECK(r.Error() ==
        "DequantizeLinear 'n': x_zero_point must be zero for float8e4m3fn input (byte 0x38 at flat "
        "index 9)");
  r = OnnxReq();
  r.x.resize(10);
  CHECK(r.Error() == "DequantizeLinear 'n': input x holds 10 bytes but int8 shape (4,16) needs 64");
}

TEST_CASE("ONNX: the opset selects the operator version") {
  CHECK(OnnxDequantizeVersion(9) == 0);
  CHECK(OnnxDequantizeVersion(10) == 10);
  CHECK(OnnxDequantizeVersion(12) == 10);
  CHECK(OnnxDequantizeVersion(18) == 13);
  CHECK(OnnxDequantizeVersion(20) == 19);
  CHECK(OnnxDequantizeVersion(22) == 21);
  CHECK(OnnxDequantizeVersion(23) == 23);
  CHECK(OnnxDequantizeVersion(24) == 24);
  CHECK(OnnxDequantizeVersion(99) == 25);
}

// Random ONNX requests against the oracle, bit for bit.
TEST_CASE("ONNX operator == oracle on random configurations") {
  std::mt19937_64 rng(31337);
  const DType xtypes[] = {DType::kUInt8,          DType::kInt8,           DType::kInt32,
                          DType::kUInt16,         DType::kInt16,          DType::kUInt4,
                          DType::kInt4,           DType::kUInt2,          DType::kInt2,
                          DType::kFloat8E4M3FN,   DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                          DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1};
  const DType stypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat8E8M0};
  int runs = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const DType xt = xtypes[rng() % 14];
    const DType st = stypes[rng() % 4];
    const size_t rank = 1 + rng() % 4;
    Shape d(rank);
    for (auto& v : d) v = 1 + static_cast<int64_t>(rng() % 7);
    if (rng() % 2) d[rank - 1] = 20 + static_cast<int64_t>(rng() % 90);  // SIMD-sized rows
    int64_t n = 1;
    for (auto v : d) n *= v;
    OnnxDequantizeAttributes a;
    a.axis = static_cast<int64_t>(rng() % rank) - (rng() % 2 ? static_cast<int64_t>(rank) : 0);
    a.has_axis = true;
    const size_t ax =
        static_cast<size_t>(a.axis < 0 ? a.axis + static_cast<int64_t>(rank) : a.axis);
    const int gran = static_cast<int>(rng() % 3);  // 0 per-tensor, 1 per-axis, 2 blocked
    Shape ss;
    if (gran == 0) {
      ss = Shape(rng() % 3, 1);
    } else if (gran == 1) {
      ss = {d[ax]};
    } else {
      a.block_size = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(d[ax] + 2));
      a.has_block_size = true;
      ss = d;
      ss[ax] = (d[ax] + a.block_size - 1) / a.block_size;
    }
    int64_t ns = 1;
    for (auto v : ss) ns *= v;
    if (gran == 1 && ns == 1) continue;  // that is per-tensor by definition
    if (st == DType::kFloat8E8M0 || rng() % 3 == 0) {
      const int32_t outs[] = {1, 10, 16};
      a.output_dtype = outs[rng() % 3];
      a.has_output_dtype = true;
    }
    // Raw random bytes are valid encodings of every type.
    std::vector<uint8_t> xb(static_cast<size_t>((n * DTypeBits(xt) + 7) / 8));
    for (auto& b : xb) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t> sb(static_cast<size_t>(ns * DTypeBits(st) / 8));
    for (size_t k = 0; k < sb.size(); ++k) {
      // Keep most scales finite and moderate; some raw (NaN/Inf/subnormal).
      sb[k] = static_cast<uint8_t>(rng());
      if (st == DType::kFloat32 && k % 4 == 3 && rng() % 8)
        sb[k] = static_cast<uint8_t>(0x3C + rng() % 4);
      if ((st == DType::kFloat16 || st == DType::kBFloat16) && k % 2 == 1 && rng() % 8) {
        sb[k] = static_cast<uint8_t>((st == DType::kFloat16 ? 0x20 : 0x3C) + rng() % 8);
      }
      if (st == DType::kFloat8E8M0 && rng() % 8) sb[k] = static_cast<uint8_t>(110 + rng() % 30);
    }
    const bool with_zp = rng() % 2 == 0;
    std::vector<uint8_t> zb(static_cast<size_t>((ns * DTypeBits(xt) + 7) / 8));
    for (auto& b : zb) b = static_cast<uint8_t>(rng());
    const bool f8 = IsFloatType(xt) && xt != DType::kFloat4E2M1;
    if (f8) std::fill(zb.begin(), zb.end(), 0);
    const TensorView xv{xt, d, xb.data(), xb.size()};
    const TensorView sv{st, ss, sb.data(), sb.size()};
    const TensorView zv{xt, ss, zb.data(), zb.size()};
    DequantizeOptions o;
    o.threads = static_cast<int>(rng() % 3);
    auto y = DequantizeOnnx(a, xv, sv, with_zp ? &zv : nullptr, o);
    const std::string what = "x " + DTypeName(xt) + " " + ShapeToString(d) + " scale " +
                             DTypeName(st) + " " + ShapeToString(ss) + " axis " +
                             std::to_string(a.axis) + " block " + std::to_string(a.block_size) +
                             " zp " + std::to_string(with_zp) + " out " +
                             std::to_string(a.output_dtype);
    REQUIRE_MESSAGE(y.ok(), what << ": " << y.status().message());
    const DType out = a.output_dtype ? static_cast<DType>(a.output_dtype) : st;
    CHECK(y->dtype() == out);
    // The oracle's scale index, from logical indices.
    auto sidx = [&](int64_t e) -> int64_t {
      if (gran == 0) return 0;
      std::vector<int64_t> idx(rank);
      for (size_t k = rank; k-- > 0;) {
        idx[k] = e % d[k];
        e /= d[k];
      }
      if (gran == 1) return idx[ax];
      idx[ax] /= a.block_size;
      int64_t s = 0;
      for (size_t k = 0; k < rank; ++k) s = s * ss[k] + idx[k];
      return s;
    };
    const auto want = OracleOnnxBits(
        xv, sv, with_zp && xt != DType::kFloat4E2M1 && !f8 ? &zv : nullptr, out, sidx);
    std::vector<uint32_t> got(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      got[static_cast<size_t>(k)] =
          out == DType::kFloat32 ? BitsFromF32(y->data_as<float>()[k]) : y->data_as<uint16_t>()[k];
    }
    int64_t first = -1;
    CHECK_MESSAGE(SameBits(got, want, out, &first), what << ": first difference at " << first);
    ++runs;
  }
  CHECK(runs > 1000);
}

// DirectML element-wise dequantize: broadcasts that fit the per-axis plan
// and ones that must be materialized.
TEST_CASE("DirectML broadcast == oracle") {
  std::mt19937_64 rng(4242);
  const DType itypes[] = {DType::kInt8,   DType::kUInt8, DType::kInt16,
                          DType::kUInt16, DType::kInt32, DType::kUInt32};
  for (int trial = 0; trial < 400; ++trial) {
    const DType it = itypes[rng() % 6];
    const size_t rank = 1 + rng() % 4;
    Shape d(rank);
    for (auto& v : d) v = 1 + static_cast<int64_t>(rng() % 6);
    if (rng() % 2) d[rank - 1] = 33 + static_cast<int64_t>(rng() % 40);
    // Scale shape: a suffix of d with random dims set to 1.
    const size_t srank = rng() % (rank + 1);
    Shape ss(d.end() - static_cast<std::ptrdiff_t>(srank), d.end());
    for (auto& v : ss) {
      if (rng() % 2) v = 1;
    }
    const bool zp = rng() % 2;
    int64_t n = 1, ns = 1;
    for (auto v : d) n *= v;
    for (auto v : ss) ns *= v;
    const int bytes = DTypeBits(it) / 8;
    std::vector<uint8_t> xb(static_cast<size_t>(n * bytes)), zb(static_cast<size_t>(ns * bytes));
    for (auto& b : xb) b = static_cast<uint8_t>(rng());
    for (auto& b : zb) b = static_cast<uint8_t>(rng());
    std::vector<float> s(static_cast<size_t>(ns));
    for (auto& v : s) v = static_cast<float>(static_cast<int>(rng() % 2000) - 1000) / 7.0f;
    const TensorView xv{it, d, xb.data(), xb.size()};
    const TensorView sv{DType::kFloat32, ss, s.data(), s.size() * 4};
    const TensorView zv{it, ss, zb.data(), zb.size()};
    const DType out = rng() % 2 ? DType::kFloat32 : DType::kFloat16;
    auto y =
        BroadcastDequantize(xv, sv, zp ? &zv : nullptr, out, "dml", static_cast<int>(rng() % 3));
    const std::string what = DTypeName(it) + " " + ShapeToString(d) + " scale " + ShapeToString(ss);
    REQUIRE_MESSAGE(y.ok(), what << ": " << y.status().message());
    // Oracle: numpy broadcasting of the right-aligned scale / zero point.
    auto sidx = [&](int64_t e) {
      std::vector<int64_t> idx(rank);
      for (size_t k = rank; k-- > 0;) {
        idx[k] = e % d[k];
        e /= d[k];
      }
      int64_t s_i = 0;
      for (size_t k = 0; k < ss.size(); ++k) {
        const size_t dk = rank - ss.size() + k;
        s_i = s_i * ss[k] + (ss[k] == 1 ? 0 : idx[dk]);
      }
      return s_i;
    };
    const auto want = OracleOnnxBits(xv, sv, zp ? &zv : nullptr, out, sidx);
    std::vector<uint32_t> got(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      got[static_cast<size_t>(k)] =
          out == DType::kFloat32 ? BitsFromF32(y->data_as<float>()[k]) : y->data_as<uint16_t>()[k];
    }
    int64_t first = -1;
    CHECK_MESSAGE(SameBits(got, want, out, &first), what << ": first difference at " << first);
  }
}

TEST_CASE("DirectML: uint32 with a zero point above 2^31 is exact") {
  const std::vector<uint32_t> x = {0xFFFFFFFFu, 0x80000000u, 5u};
  const std::vector<uint32_t> z = {0xFFFFFFF0u};
  const std::vector<float> s = {1.0f};
  const TensorView zv = View(DType::kUInt32, {1}, z);
  auto y = BroadcastDequantize(View(DType::kUInt32, {3}, x), View(DType::kFloat32, {1}, s), &zv);
  REQUIRE(y.ok());
  CHECK(Floats(*y) == std::vector<float>{15.0f, static_cast<float>(0x80000000LL - 0xFFFFFFF0LL),
                                         static_cast<float>(5LL - 0xFFFFFFF0LL)});
}

TEST_CASE("DirectML validation messages") {
  const std::vector<int8_t> x(12, 1);
  const std::vector<float> s(4, 1.0f);
  auto err = [&](DType xt, Shape ss, DType st = DType::kFloat32) {
    auto y = BroadcastDequantize(View(xt, {3, 4}, x), TensorView{st, std::move(ss), s.data(), 16},
                                 nullptr, DType::kUndefined, "d");
    return y.ok() ? std::string("OK") : y.status().message();
  };
  CHECK(err(DType::kInt8, {4}) == "OK");
  CHECK(err(DType::kInt8, {3, 1}) == "OK");
  CHECK(err(DType::kInt8, {3}) ==
        "DequantizeLinear (element-wise) 'd': scale shape (3) does not broadcast to input (3,4) "
        "(dim 1: 3 vs 4)");
  CHECK(err(DType::kInt8, {1, 3, 4}) ==
        "DequantizeLinear (element-wise) 'd': scale shape (1,3,4) has more dims than input (3,4)");
  CHECK(err(DType::kFloat32, {4}) ==
        "DequantizeLinear (element-wise) 'd': input must be int8, int16, int32, uint8, uint16 or "
        "uint32 (got float32)");
  CHECK(err(DType::kInt8, {4}, DType::kInt8) ==
        "DequantizeLinear (element-wise) 'd': scale must be float32 or float16 (got int8)");
}

}  // namespace
}  // namespace testing
}  // namespace nibble
