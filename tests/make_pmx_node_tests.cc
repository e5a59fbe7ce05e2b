// Writes ONNX node-test directories for the PMX operator (domain "opmx"):
// model.onnx with one DequantizeLinear node + test_data_set_0/{input,output}_N.pb,
// the layout of ONNX's backend tests. Expected outputs come from the
// independent oracle (tests/pmx_oracle.h), never from the operator.
//
// Usage: make_pmx_node_tests OUTDIR/pmx   (also writes OUTDIR/bad: cases that must fail)
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>

#include "onnx/onnx_tensor.h"
#include "tests/generator_args.h"
#include "tests/pmx_oracle.h"

namespace nibble {
namespace testing {
namespace {

namespace fs = std::filesystem;

void AddInput(nibble_onnx::GraphProto* g, const std::string& name, const Tensor& t) {
  auto* vi = g->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

using Mutator = std::function<void(nibble_onnx::ModelProto*, Tensor*)>;

int Write(const fs::path& root, const std::string& name, const PmxCase& c, DType out,
          const Mutator& mutate = nullptr) {
  nibble_onnx::ModelProto m;
  m.set_ir_version(10);
  m.set_producer_name("nibble make_pmx_node_tests");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(21);
  op = m.add_opset_import();
  op->set_domain("opmx");
  op->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name(name);
  auto* node = g->add_node();
  node->set_op_type("DequantizeLinear");
  node->set_domain("opmx");
  node->set_name(name);
  node->add_input("X");
  node->add_input("Scale");
  if (c.has_zp()) node->add_input("ZeroPoint");
  node->add_output("Y");
  auto add_int = [&](const char* n, int64_t v) {
    auto* a = node->add_attribute();
    a->set_name(n);
    a->set_type(nibble_onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto* a = node->add_attribute();
  a->set_name("quant_data_type");
  a->set_type(nibble_onnx::AttributeProto::STRING);
  a->set_s(c.attrs.quant_data_type);
  add_int("quant_axis", c.attrs.quant_axis);
  add_int("group_size", c.attrs.group_size);
  add_int("has_zeropoint", c.attrs.has_zeropoint);
  add_int("float_zeropoint", c.attrs.float_zeropoint);
  AddInput(g, "X", c.x);
  AddInput(g, "Scale", c.scale_t);
  if (c.has_zp()) AddInput(g, "ZeroPoint", c.zp_t);

  // The expected output: oracle bits in the requested type. The node has no
  // output-type attribute, so `out` must be the scale's type.
  auto y = *Tensor::Allocate(out, c.d);
  const auto bits = OracleBits(c, out);
  for (size_t k = 0; k < bits.size(); ++k) {
    if (out == DType::kFloat32) {
      std::memcpy(y.data_as<char>() + 4 * k, &bits[k], 4);
    } else {
      const uint16_t h = static_cast<uint16_t>(bits[k]);
      std::memcpy(y.data_as<char>() + 2 * k, &h, 2);
    }
  }
  auto* vo = g->add_output();
  vo->set_name("Y");
  auto* tt = vo->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(out));
  for (int64_t d : c.d) tt->mutable_shape()->add_dim()->set_dim_value(d);

  if (mutate) mutate(&m, &y);
  const fs::path dir = root / name, set = dir / "test_data_set_0";
  fs::create_directories(set);
  Status st = WriteProtoFile((dir / "model.onnx").string(), m);
  int k = 0;
  for (const Tensor* t : {&c.x, &c.scale_t, c.has_zp() ? &c.zp_t : nullptr}) {
    if (!t || !st.ok()) continue;
    const char* names[] = {"X", "Scale", "ZeroPoint"};
    st = WriteProtoFile((set / ("input_" + std::to_string(k) + ".pb")).string(),
                        TensorToProto(t->view(), names[k]));
    ++k;
  }
  if (st.ok()) st = WriteProtoFile((set / "output_0.pb").string(), TensorToProto(y.view(), "Y"));
  if (!st.ok()) {
    std::cerr << st.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << dir.string() << "\n";
  return 0;
}

int Main(const fs::path& root) {
  std::mt19937_64 rng(20261121);
  const DType f32 = DType::kFloat32, f16 = DType::kFloat16, bf16 = DType::kBFloat16;
  const DType none = DType::kUndefined;
  int rc = 0;
  auto gen = [&](const std::string& name, bool int4, Shape d, int64_t axis, Gran gran, int64_t g,
                 ZpMode zp, DType st, DType zt, bool x8 = false) {
    const auto c = RandomCase(rng, int4, d, axis, gran, g, zp, st, zt, x8);
    rc |= Write(root, name, c, st);
  };
  gen("pmx_int4x4_axis1_g32", true, {8, 128}, 1, Gran::kGrouped, 32, ZpMode::kNone, f32, none);
  gen("pmx_int4x4_axis1_g128_zp_int8_f16", true, {16, 256}, 1, Gran::kGrouped, 128,
      ZpMode::kInteger, f16, DType::kInt8);
  gen("pmx_int4x4_axis0_g64_float_zp", true, {128, 24}, 0, Gran::kGrouped, 64, ZpMode::kFloat, f32,
      f16);
  gen("pmx_int4x4_axis0_g4_zp_uint8_bf16", true, {16, 5}, 0, Gran::kGrouped, 4, ZpMode::kInteger,
      bf16, DType::kUInt8);
  gen("pmx_int4x4_axis1_per_channel", true, {12, 40}, 1, Gran::kPerChannel, 0, ZpMode::kNone, f16,
      none);
  gen("pmx_int4x4_axis1_per_channel_rank1_scale", true, {8, 33}, 1, Gran::kPerChannelRank1, 0,
      ZpMode::kInteger, f32, DType::kInt32);
  gen("pmx_int4x4_axis0_per_channel_float_zp", true, {32, 7}, 0, Gran::kPerChannel, 0,
      ZpMode::kFloat, bf16, f32);
  gen("pmx_int4x4_per_tensor", true, {8, 9}, 1, Gran::kPerTensor, 0, ZpMode::kNone, f32, none);
  gen("pmx_int4x4_rank3_axis1_g2", true, {4, 6, 5}, 1, Gran::kGrouped, 2, ZpMode::kInteger, f32,
      DType::kInt8);
  gen("pmx_int4x4_rank4_axis0_g8", true, {16, 2, 3, 4}, 0, Gran::kGrouped, 8, ZpMode::kNone, f16,
      none);
  gen("pmx_int4x4_rank1_axis0_g16", true, {64}, 0, Gran::kGrouped, 16, ZpMode::kFloat, f32, f32);
  gen("pmx_int4x8_axis1_g16_zp_int32", true, {16, 48}, 1, Gran::kGrouped, 16, ZpMode::kInteger, f32,
      DType::kInt32, true);
  gen("pmx_int4x8_axis0_g8_f16", true, {24, 10}, 0, Gran::kGrouped, 8, ZpMode::kNone, f16, none,
      true);
  gen("pmx_int8_axis1_g32", false, {6, 96}, 1, Gran::kGrouped, 32, ZpMode::kNone, f32, none);
  gen("pmx_int8_axis0_g8_zp_uint8", false, {24, 9}, 0, Gran::kGrouped, 8, ZpMode::kInteger, f32,
      DType::kUInt8);
  gen("pmx_int8_axis1_float_zp_f16", false, {5, 64}, 1, Gran::kGrouped, 16, ZpMode::kFloat, f16,
      f16);
  gen("pmx_int8_axis1_per_channel_bf16", false, {7, 50}, 1, Gran::kPerChannel, 0, ZpMode::kInteger,
      bf16, DType::kInt8);
  gen("pmx_int8_per_tensor_rank3", false, {3, 4, 5}, 0, Gran::kPerTensor, 0, ZpMode::kNone, f32,
      none);
  gen("pmx_int8_rank1_axis0_g1", false, {11}, 0, Gran::kGrouped, 1, ZpMode::kFloat, f32, f32);

  // Directories that must FAIL (tests/data/bad): the runner reports the
  // operator's error or the mismatch, never crashes.
  const fs::path bad = root.parent_path() / "bad";
  auto c = RandomCase(rng, true, {8, 64}, 1, Gran::kGrouped, 32, ZpMode::kNone, f32, none);
  rc |= Write(bad, "bad_quant_axis", c, f32, [](nibble_onnx::ModelProto* m, Tensor*) {
    for (auto& a : *m->mutable_graph()->mutable_node(0)->mutable_attribute()) {
      if (a.name() == "quant_axis") a.set_i(2);
    }
  });
  rc |= Write(bad, "bad_expected_output", c, f32,
              [](nibble_onnx::ModelProto*, Tensor* y) { y->data_as<float>()[5] += 1.0f; });
  auto z =
      RandomCase(rng, true, {8, 64}, 1, Gran::kGrouped, 32, ZpMode::kInteger, f32, DType::kInt8);
  z.zp_t.data_as<int8_t>()[3] = 16;
  rc |= Write(bad, "bad_int4_zero_point_range", z, f32);
  rc |= Write(bad, "bad_corrupt_model", c, f32);
  std::ofstream((bad / "bad_corrupt_model" / "model.onnx").string(),
                std::ios::binary | std::ios::trunc)
      << "\x0a\xff\xff\xff\xff\x0f garbage";
  return rc;
}

}  // namespace
}  // namespace testing
}  // namespace nibble

int main(int argc, char** argv) {
  if (const int rc = nibble::testing::CheckGeneratorArgs(argc, argv, "make_pmx_node_tests OUTDIR");
      rc >= 0) {
    return rc;
  }
  if (argc != 2) {
    std::cerr << "usage: make_pmx_node_tests OUTDIR\n";
    return 2;
  }
  return nibble::testing::Main(argv[1]);
}
