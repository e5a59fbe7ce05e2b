// Writes ONNX node-test directories for default-domain DequantizeLinear
// covering what ONNX's own backend tests lack (FNUZ types, e8m0 scales,
// output_dtype, bfloat16 scales/outputs, negative axes, ragged blocks, int32
// with a zero point, odd-length int4/int2 rows, rank-4 blocked, axis-0
// blocked [K, N] weights) and one directory per error case (with an
// `expected_error` file). Expected outputs come from tests/onnx_oracle.h.
//
// Usage: make_onnx_node_tests OUTDIR
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>

#include "onnx/onnx_tensor.h"
#include "tests/generator_args.h"
#include "tests/onnx_oracle.h"

namespace nibble {
namespace testing {
namespace {

namespace fs = std::filesystem;

struct Case {
  Case(std::string n, int op, DType x_type, Shape x_shape, DType s_type, Shape s_shape,
       std::optional<int64_t> ax = {}, std::optional<int64_t> bs = {},
       std::optional<int32_t> out = {}, bool with_zp = false)
      : name(std::move(n)),
        opset(op),
        xt(x_type),
        xs(std::move(x_shape)),
        st(s_type),
        ss(std::move(s_shape)),
        axis(ax),
        block_size(bs),
        output_dtype(out),
        zp(with_zp) {}
  std::string name;
  int opset = 25;
  DType xt;
  Shape xs;
  DType st;
  Shape ss;
  std::optional<int64_t> axis, block_size;
  std::optional<int32_t> output_dtype;
  bool zp = false;
  std::string error;        // non-empty: an error case
  int64_t zp_nonzero = -1;  // float8: put a non-zero byte here (error case)
};

void AddValueInfo(nibble_onnx::ValueInfoProto* vi, const std::string& name, DType t,
                  const Shape& s) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t));
  for (int64_t d : s) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

int Write(const fs::path& root, const Case& c, std::mt19937_64& rng) {
  int64_t n = 1, ns = 1;
  for (auto v : c.xs) n *= v;
  for (auto v : c.ss) ns *= v;
  std::vector<uint8_t> xb(static_cast<size_t>((n * DTypeBits(c.xt) + 7) / 8));
  for (auto& b : xb) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> sb(static_cast<size_t>((ns * DTypeBits(c.st) + 7) / 8));
  for (size_t k = 0; k < sb.size(); ++k) {
    sb[k] = static_cast<uint8_t>(rng());
    // Moderate finite scales.
    if (c.st == DType::kFloat32 && k % 4 == 3) sb[k] = static_cast<uint8_t>(0x3C + rng() % 3);
    if ((c.st == DType::kFloat16) && k % 2 == 1) sb[k] = static_cast<uint8_t>(0x28 + rng() % 8);
    if ((c.st == DType::kBFloat16) && k % 2 == 1) sb[k] = static_cast<uint8_t>(0x3C + rng() % 3);
    if (c.st == DType::kFloat8E8M0) sb[k] = static_cast<uint8_t>(120 + rng() % 10);
  }
  std::vector<uint8_t> zb(static_cast<size_t>((ns * DTypeBits(c.xt) + 7) / 8));
  const bool float_x = IsFloatType(c.xt);
  for (auto& b : zb) b = float_x && c.xt != DType::kFloat4E2M1 ? 0 : static_cast<uint8_t>(rng());
  if (c.zp_nonzero >= 0) zb[static_cast<size_t>(c.zp_nonzero)] = 0x38;

  nibble_onnx::ModelProto m;
  m.set_ir_version(11);
  m.set_producer_name("nibble make_onnx_node_tests");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(c.opset);
  auto* g = m.mutable_graph();
  g->set_name(c.name);
  auto* node = g->add_node();
  node->set_op_type("DequantizeLinear");
  node->set_name(c.name);
  node->add_input("x");
  node->add_input("x_scale");
  if (c.zp) node->add_input("x_zero_point");
  node->add_output("y");
  auto add_int = [&](const char* name, int64_t v) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(nibble_onnx::AttributeProto::INT);
    a->set_i(v);
  };
  if (c.axis) add_int("axis", *c.axis);
  if (c.block_size) add_int("block_size", *c.block_size);
  if (c.output_dtype) add_int("output_dtype", *c.output_dtype);
  AddValueInfo(g->add_input(), "x", c.xt, c.xs);
  AddValueInfo(g->add_input(), "x_scale", c.st, c.ss);
  if (c.zp) AddValueInfo(g->add_input(), "x_zero_point", c.xt, c.ss);
  const DType out = c.output_dtype ? static_cast<DType>(*c.output_dtype) : c.st;
  AddValueInfo(g->add_output(), "y", out, c.xs);

  const fs::path dir = root / c.name, set = dir / "test_data_set_0";
  fs::create_directories(set);
  Status st = WriteProtoFile((dir / "model.onnx").string(), m);
  const TensorView xv{c.xt, c.xs, xb.data(), xb.size()};
  const TensorView sv{c.st, c.ss, sb.data(), sb.size()};
  const TensorView zv{c.xt, c.ss, zb.data(), zb.size()};
  if (st.ok()) st = WriteProtoFile((set / "input_0.pb").string(), TensorToProto(xv, "x"));
  if (st.ok()) st = WriteProtoFile((set / "input_1.pb").string(), TensorToProto(sv, "x_scale"));
  if (st.ok() && c.zp) {
    st = WriteProtoFile((set / "input_2.pb").string(), TensorToProto(zv, "x_zero_point"));
  }
  if (!c.error.empty()) {
    std::ofstream(dir / "expected_error") << c.error << "\n";
  } else if (st.ok()) {
    // Oracle: the scale element of each x element from logical indices.
    const size_t rank = c.xs.size();
    const int64_t ax = c.axis ? (*c.axis < 0 ? *c.axis + static_cast<int64_t>(rank) : *c.axis) : 1;
    auto sidx = [&](int64_t e) -> int64_t {
      if (ns == 1) return 0;
      std::vector<int64_t> idx(rank);
      for (size_t k = rank; k-- > 0;) {
        idx[k] = e % c.xs[k];
        e /= c.xs[k];
      }
      if (!c.block_size || *c.block_size == 0) return idx[static_cast<size_t>(ax)];
      idx[static_cast<size_t>(ax)] /= *c.block_size;
      int64_t s = 0;
      for (size_t k = 0; k < rank; ++k) s = s * c.ss[k] + idx[k];
      return s;
    };
    const bool use_zp = c.zp && !float_x;
    const auto bits = OracleOnnxBits(xv, sv, use_zp ? &zv : nullptr, out, sidx);
    auto y = *Tensor::Allocate(out, c.xs);
    for (size_t k = 0; k < bits.size(); ++k) {
      if (out == DType::kFloat32) {
        std::memcpy(y.data_as<char>() + 4 * k, &bits[k], 4);
      } else {
        const uint16_t h = static_cast<uint16_t>(bits[k]);
        std::memcpy(y.data_as<char>() + 2 * k, &h, 2);
      }
    }
    st = WriteProtoFile((set / "output_0.pb").string(), TensorToProto(y.view(), "y"));
  }
  if (!st.ok()) {
    std::cerr << st.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << dir.string() << "\n";
  return 0;
}

int Main(const fs::path& root) {
  std::mt19937_64 rng(20261122);
  const DType f32 = DType::kFloat32, f16 = DType::kFloat16, bf16 = DType::kBFloat16;
  std::vector<Case> cases = {
      {"onnx_e4m3fnuz_per_tensor", 25, DType::kFloat8E4M3FNUZ, {7}, f32, {}, {}, {}, {}, true},
      {"onnx_e5m2fnuz_per_axis", 25, DType::kFloat8E5M2FNUZ, {3, 5}, f16, {3}, 0, {}, {}, false},
      {"onnx_e8m0_scale_blocked",
       25,
       DType::kFloat8E4M3FN,
       {4, 64},
       DType::kFloat8E8M0,
       {4, 2},
       1,
       32,
       1},
      {"onnx_output_dtype_f16_from_f32_scale",
       25,
       DType::kInt8,
       {6, 40},
       f32,
       {6},
       0,
       {},
       10,
       true},
      {"onnx_output_dtype_bf16", 25, DType::kUInt4, {3, 50}, f16, {3, 2}, -1, 32, 16, true},
      {"onnx_bf16_scale_bf16_output", 25, DType::kUInt8, {5, 37}, bf16, {37}, 1, {}, {}, true},
      {"onnx_negative_axis_per_axis", 25, DType::kInt8, {2, 3, 4}, f32, {3}, -2, {}, {}, true},
      {"onnx_ragged_last_block_axis1", 25, DType::kInt4, {3, 70}, f32, {3, 3}, 1, 32, {}, true},
      {"onnx_ragged_last_block_axis0", 25, DType::kUInt8, {50, 6}, f16, {4, 6}, 0, 16, {}, true},
      {"onnx_int32_with_zero_point", 25, DType::kInt32, {3, 4}, f32, {4}, 1, {}, {}, true},
      {"onnx_int4_odd_rows", 25, DType::kInt4, {5, 7}, f32, {5}, 0, {}, {}, true},
      {"onnx_uint4_odd_rows_blocked", 25, DType::kUInt4, {9, 45}, f32, {9, 3}, 1, 16, {}, true},
      {"onnx_int2_odd_rows", 25, DType::kInt2, {3, 5}, f32, {3, 5}, 0, 1, {}, true},
      {"onnx_uint2_blocked", 25, DType::kUInt2, {4, 6}, f32, {4, 2}, 1, 3, {}, true},
      {"onnx_rank4_blocked", 25, DType::kInt4, {2, 3, 8, 4}, f32, {2, 3, 2, 4}, 2, 4, {}, true},
      {"onnx_blocked_axis0_KxN_int4", 21, DType::kInt4, {256, 48}, f32, {8, 48}, 0, 32, {}, true},
      {"onnx_blocked_axis0_KxN_uint4_f16",
       21,
       DType::kUInt4,
       {128, 33},
       f16,
       {4, 33},
       0,
       32,
       {},
       true},
      {"onnx_opset10_per_tensor", 10, DType::kUInt8, {2, 3}, f32, {}, {}, {}, {}, true},
      {"onnx_opset13_per_axis", 13, DType::kInt8, {4, 3}, f32, {3}, 1, {}, {}, true},
      {"onnx_opset19_bf16_scale_e5m2", 19, DType::kFloat8E5M2, {4, 3}, bf16, {}, {}, {}, {}, false},
      {"onnx_uint16_per_axis_neg", 21, DType::kUInt16, {3, 40}, f32, {40}, -1, {}, {}, true},
      {"onnx_float4_zero_point_ignored",
       25,
       DType::kFloat4E2M1,
       {3, 9},
       f32,
       {3, 1},
       1,
       9,
       {},
       true},
  };
  // Error cases: the node must be rejected with this message.
  auto err = [&](Case c, std::string e) {
    c.error = std::move(e);
    cases.push_back(c);
  };
  err({"error_blocked_bad_scale_shape", 25, DType::kInt4, {4, 64}, f32, {4, 3}, 1, 32},
      "Invalid shapes for blocked quantization");
  err({"error_axis_out_of_range", 25, DType::kInt8, {4, 8}, f32, {8}, 2},
      "attribute axis 2 is out of range");
  err({"error_negative_block_size", 25, DType::kInt8, {4, 8}, f32, {4, 1}, 1, -1},
      "attribute block_size must be >= 0");
  err({"error_per_axis_length", 25, DType::kInt8, {4, 8}, f32, {5}, 1}, "x_scale has 5 elements");
  err({"error_scale_rank_without_block", 25, DType::kInt8, {4, 8}, f32, {4, 2}, 1},
      "must be a scalar or 1-D");
  err({"error_block_size_before_opset21", 19, DType::kInt8, {4, 8}, f32, {4, 1}, 1, 8},
      "attribute block_size is not defined");
  err({"error_output_dtype_before_opset23", 21, DType::kInt8, {4, 8}, f32, {}, {}, {}, 1},
      "attribute output_dtype is not defined");
  err({"error_int4_before_opset21", 19, DType::kInt4, {4, 8}, f32, {}, {}},
      "input x has type int4, not supported");
  err({"error_e8m0_without_output_dtype", 25, DType::kInt8, {4, 8}, DType::kFloat8E8M0, {}, {}},
      "output_dtype is required");
  err({"error_output_dtype_int8", 25, DType::kInt8, {4, 8}, f32, {}, {}, {}, 3},
      "attribute output_dtype 3 is not");
  Case nz{"error_float8_nonzero_zero_point",
          25,
          DType::kFloat8E4M3FN,
          {4, 8},
          f32,
          {8},
          1,
          {},
          {},
          true};
  nz.zp_nonzero = 2;
  err(nz, "x_zero_point must be zero");
  err({"error_opset10_per_axis", 10, DType::kInt8, {4, 8}, f32, {8}, {}},
      "must be a scalar (DequantizeLinear-10)");
  int rc = 0;
  for (const auto& c : cases) rc |= Write(root, c, rng);

  // A folder mixing operators, as ONNX's backend test tree does: the Relu
  // directory must be reported as SKIP, not as a failure.
  const fs::path mixed = root.parent_path() / "mixed";
  rc |= Write(mixed, cases[0], rng);
  nibble_onnx::ModelProto m;
  m.set_ir_version(11);
  auto* op = m.add_opset_import();
  op->set_version(21);
  auto* g = m.mutable_graph();
  auto* node = g->add_node();
  node->set_op_type("Relu");
  node->add_input("x");
  node->add_output("y");
  AddValueInfo(g->add_input(), "x", DType::kFloat32, {2});
  AddValueInfo(g->add_output(), "y", DType::kFloat32, {2});
  const fs::path relu = mixed / "relu_node";
  fs::create_directories(relu / "test_data_set_0");
  const std::vector<float> xs = {-1.0f, 2.0f};
  Status st = WriteProtoFile((relu / "model.onnx").string(), m);
  if (st.ok()) {
    st = WriteProtoFile((relu / "test_data_set_0" / "input_0.pb").string(),
                        TensorToProto({DType::kFloat32, {2}, xs.data(), 8}, "x"));
  }
  if (!st.ok()) {
    std::cerr << st.message() << "\n";
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace testing
}  // namespace nibble

int main(int argc, char** argv) {
  if (const int rc = nibble::testing::CheckGeneratorArgs(argc, argv, "make_onnx_node_tests OUTDIR");
      rc >= 0) {
    return rc;
  }
  if (argc != 2) {
    std::cerr << "usage: make_onnx_node_tests OUTDIR\n";
    return 2;
  }
  return nibble::testing::Main(argv[1]);
}
