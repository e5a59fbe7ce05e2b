// Writes ONNX models the way exporters lay out quantized weights, for the
// fold tests and the ONNX Runtime integration test:
//   qdq_int4.onnx        DequantizeLinear (int4, blocked on axis 0, zero
//                        point) -> MatMul, ONNX Runtime quantizer layout
//   qdq_uint4_f16.onnx   the same with uint4, float16 scales, no zero point
//   opmx_int4.onnx       opmx DequantizeLinear (int4x4, quant_axis 0) -> MatMul
//   mmnb_zp.onnx         MatMulNBits, bits 4, packed uint8 zero points, odd k_blocks
//   mmnb_nozp_bias.onnx  MatMulNBits, bits 4, no zero points, bias
//   mmnb8.onnx           MatMulNBits, bits 8, zero points, K not a multiple of block_size
//   qdq_external.onnx    DequantizeLinear with its weight in qdq_external.onnx.data
//   nothing.onnx         no quantized weights (Relu)
//   qdq_overridable.onnx like qdq_int4 but its scale is also a graph input (left unfolded)
// With --large N [DIM]: one model large.onnx (external data) holding N DIM x DIM MatMulNBits
// weights (default 8192 x 8192, 256 MiB float32 each), for memory measurements.
//
// Usage: make_fold_models OUTDIR [--large N [DIM]]
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "base/numeric.h"
#include "formats/int4_packing.h"
#include "onnx/onnx_tensor.h"
#include "tests/generator_args.h"

namespace nibble {
namespace testing {
namespace {

namespace fs = std::filesystem;
std::mt19937_64 rng(7);

nibble_onnx::TensorProto Random(const std::string& name, DType t, const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::string bytes(static_cast<size_t>((n * DTypeBits(t) + 7) / 8), '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  nibble_onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(t));
  for (auto d : s) p.add_dims(d);
  p.set_raw_data(bytes);
  return p;
}

nibble_onnx::TensorProto Scales(const std::string& name, DType t, const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  std::string bytes;
  for (int64_t k = 0; k < n; ++k) {
    const float v = (rng() % 2 ? 1 : -1) * u(rng);
    if (t == DType::kFloat32) {
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const uint16_t h = F16FromF32(v);
      bytes.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  nibble_onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(t));
  for (auto d : s) p.add_dims(d);
  p.set_raw_data(bytes);
  return p;
}

void ValueInfo(nibble_onnx::ValueInfoProto* vi, const std::string& name, DType t, const Shape& s) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t));
  for (auto d : s) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

nibble_onnx::ModelProto NewModel(int opset, bool ms = false, bool opmx = false) {
  nibble_onnx::ModelProto m;
  m.set_ir_version(10);
  m.set_producer_name("nibble make_fold_models");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  if (ms) {
    o = m.add_opset_import();
    o->set_domain("com.microsoft");
    o->set_version(1);
  }
  if (opmx) {
    o = m.add_opset_import();
    o->set_domain("opmx");
    o->set_version(1);
  }
  return m;
}

void Attr(nibble_onnx::NodeProto* n, const char* name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(nibble_onnx::AttributeProto::INT);
  a->set_i(v);
}

void Save(const fs::path& p, const nibble_onnx::ModelProto& m) {
  const Status st = WriteProtoFile(p.string(), m);
  if (!st.ok()) {
    std::cerr << st.message() << "\n";
    std::exit(1);
  }
  std::cout << "wrote " << p.string() << "\n";
}

// A -> DequantizeLinear(weight) -> MatMul -> Y with A [M, K].
nibble_onnx::ModelProto QdqMatMul(DType xt, DType st, int64_t K, int64_t N, int64_t bs, bool zp) {
  nibble_onnx::ModelProto m = NewModel(21);
  auto* g = m.mutable_graph();
  g->set_name("qdq");
  *g->add_initializer() = Random("w_q", xt, {K, N});
  *g->add_initializer() = Scales("w_scale", st, {(K + bs - 1) / bs, N});
  if (zp) *g->add_initializer() = Random("w_zp", xt, {(K + bs - 1) / bs, N});
  auto* dq = g->add_node();
  dq->set_op_type("DequantizeLinear");
  dq->set_name("w_dq");
  dq->add_input("w_q");
  dq->add_input("w_scale");
  if (zp) dq->add_input("w_zp");
  dq->add_output("w");
  Attr(dq, "axis", 0);
  Attr(dq, "block_size", bs);
  auto* mm = g->add_node();
  mm->set_op_type("MatMul");
  mm->set_name("mm");
  mm->add_input("A");
  mm->add_input("w");
  mm->add_output("Y");
  ValueInfo(g->add_input(), "A", st, {3, K});
  ValueInfo(g->add_output(), "Y", st, {3, N});
  ValueInfo(g->add_value_info(), "w", st, {K, N});
  return m;
}

nibble_onnx::ModelProto MatMulNBits(int64_t K, int64_t N, int64_t bits, int64_t bs, bool zp,
                                    bool bias, DType st = DType::kFloat32) {
  nibble_onnx::ModelProto m = NewModel(21, true);
  auto* g = m.mutable_graph();
  g->set_name("mmnb");
  const int64_t kb = (K + bs - 1) / bs, blob = bs * bits / 8;
  *g->add_initializer() = Random("B", DType::kUInt8, {N, kb, blob});
  *g->add_initializer() = Scales("scales", st, {N, kb});
  if (zp) *g->add_initializer() = Random("zp", DType::kUInt8, {N, (kb * bits + 7) / 8});
  if (bias) *g->add_initializer() = Scales("bias", st, {N});
  auto* n = g->add_node();
  n->set_op_type("MatMulNBits");
  n->set_domain("com.microsoft");
  n->set_name("fc");
  n->add_input("A");
  n->add_input("B");
  n->add_input("scales");
  if (zp || bias) n->add_input(zp ? "zp" : "");
  if (bias) {
    n->add_input("");  // g_idx
    n->add_input("bias");
  }
  n->add_output("Y");
  Attr(n, "K", K);
  Attr(n, "N", N);
  Attr(n, "bits", bits);
  Attr(n, "block_size", bs);
  Attr(n, "accuracy_level", 0);
  ValueInfo(g->add_input(), "A", st, {2, K});
  ValueInfo(g->add_output(), "Y", st, {2, N});
  return m;
}

// Moves an initializer's raw_data into an external file beside the model.
void Externalize(nibble_onnx::ModelProto* m, const std::string& name, const fs::path& data_file,
                 const std::string& location) {
  std::ofstream f(data_file, std::ios::binary | std::ios::app);
  const auto offset = static_cast<int64_t>(f.tellp());
  for (auto& t : *m->mutable_graph()->mutable_initializer()) {
    if (t.name() != name) continue;
    f.write(t.raw_data().data(), static_cast<std::streamsize>(t.raw_data().size()));
    auto add = [&](const char* k, const std::string& v) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(t.raw_data().size()));
    t.set_data_location(nibble_onnx::TensorProto::EXTERNAL);
    t.clear_raw_data();
  }
}

int Main(const fs::path& dir, int large, int64_t dim) {
  fs::create_directories(dir);
  if (large > 0) {
    // N MatMulNBits layers dim x dim (default 8192), weights in external data.
    nibble_onnx::ModelProto m = NewModel(21, true);
    auto* g = m.mutable_graph();
    g->set_name("large");
    const int64_t K = dim, N = dim, bs = 128, kb = K / bs;
    const fs::path data = dir / "large.onnx.data";
    fs::remove(data);
    std::string prev = "A";
    for (int l = 0; l < large; ++l) {
      const std::string s = std::to_string(l);
      *g->add_initializer() = Random("B" + s, DType::kUInt8, {N, kb, bs / 2});
      *g->add_initializer() = Scales("scales" + s, DType::kFloat32, {N, kb});
      Externalize(&m, "B" + s, data, "large.onnx.data");
      auto* n = g->add_node();
      n->set_op_type("MatMulNBits");
      n->set_domain("com.microsoft");
      n->set_name("fc" + s);
      n->add_input(prev);
      n->add_input("B" + s);
      n->add_input("scales" + s);
      prev = "h" + s;
      n->add_output(prev);
      Attr(n, "K", K);
      Attr(n, "N", N);
      Attr(n, "bits", 4);
      Attr(n, "block_size", bs);
    }
    ValueInfo(g->add_input(), "A", DType::kFloat32, {1, K});
    ValueInfo(g->add_output(), prev, DType::kFloat32, {1, N});
    Save(dir / "large.onnx", m);
    return 0;
  }
  Save(dir / "qdq_int4.onnx", QdqMatMul(DType::kInt4, DType::kFloat32, 256, 96, 32, true));
  Save(dir / "qdq_uint4_f16.onnx", QdqMatMul(DType::kUInt4, DType::kFloat16, 128, 40, 64, false));
  {
    // opmx int4x4: logical [K, N] = [128, 64], groups of 32 along K (quant_axis 0).
    nibble_onnx::ModelProto m = NewModel(21, false, true);
    auto* g = m.mutable_graph();
    g->set_name("opmx");
    *g->add_initializer() = Random("w_q", DType::kInt16, {32, 64});
    *g->add_initializer() = Scales("w_scale", DType::kFloat32, {4, 64});
    auto* dq = g->add_node();
    dq->set_op_type("DequantizeLinear");
    dq->set_domain("opmx");
    dq->set_name("w_dq");
    dq->add_input("w_q");
    dq->add_input("w_scale");
    dq->add_output("w");
    auto* a = dq->add_attribute();
    a->set_name("quant_data_type");
    a->set_type(nibble_onnx::AttributeProto::STRING);
    a->set_s("int4");
    Attr(dq, "quant_axis", 0);
    Attr(dq, "group_size", 32);
    auto* mm = g->add_node();
    mm->set_op_type("MatMul");
    mm->add_input("A");
    mm->add_input("w");
    mm->add_output("Y");
    ValueInfo(g->add_input(), "A", DType::kFloat32, {3, 128});
    ValueInfo(g->add_output(), "Y", DType::kFloat32, {3, 64});
    Save(dir / "opmx_int4.onnx", m);
    // The same weight as ONNX DequantizeLinear (PMX int4 without a zero
    // point = uint4 with zero point 8), which ONNX Runtime can run.
    nibble_onnx::ModelProto e = QdqMatMul(DType::kUInt4, DType::kFloat32, 128, 64, 32, true);
    std::vector<uint8_t> codes(128 * 64);
    UnpackInt4Interleaved(g->initializer(0).raw_data().data(), 128, 64, 4, codes.data());
    std::string packed(128 * 64 / 2, '\0');
    PackDense(codes.data(), 128 * 64, 4, reinterpret_cast<uint8_t*>(packed.data()));
    std::string zp8(4 * 64 / 2, static_cast<char>(0x88));
    for (auto& t : *e.mutable_graph()->mutable_initializer()) {
      if (t.name() == "w_q") t.set_raw_data(packed);
      if (t.name() == "w_scale") t.set_raw_data(g->initializer(1).raw_data());
      if (t.name() == "w_zp") t.set_raw_data(zp8);
    }
    Save(dir / "opmx_int4_as_onnx.onnx", e);
  }
  Save(dir / "mmnb_zp.onnx", MatMulNBits(96, 48, 4, 32, true, false));          // k_blocks 3
  Save(dir / "mmnb_nozp_bias.onnx", MatMulNBits(160, 24, 4, 32, false, true));  // k_blocks 5
  Save(dir / "mmnb8.onnx", MatMulNBits(72, 16, 8, 32, true, false));            // K % 32 != 0
  {
    nibble_onnx::ModelProto m = QdqMatMul(DType::kInt4, DType::kFloat32, 128, 64, 32, true);
    const fs::path data = dir / "qdq_external.onnx.data";
    fs::remove(data);
    Externalize(&m, "w_q", data, "qdq_external.onnx.data");
    Externalize(&m, "w_scale", data, "qdq_external.onnx.data");
    Save(dir / "qdq_external.onnx", m);
  }
  {
    // The scale is also a graph input (IR >= 4): a default the caller may
    // override, so the node must not be folded.
    nibble_onnx::ModelProto m = QdqMatMul(DType::kInt4, DType::kFloat32, 128, 64, 32, true);
    auto* g = m.mutable_graph();
    for (const auto& t : g->initializer()) {
      if (t.name() != "w_scale") continue;
      ValueInfo(g->add_input(), "w_scale", DType::kFloat32,
                Shape(t.dims().begin(), t.dims().end()));
    }
    Save(dir / "qdq_overridable.onnx", m);
  }
  {
    nibble_onnx::ModelProto m = NewModel(21);
    auto* g = m.mutable_graph();
    auto* n = g->add_node();
    n->set_op_type("Relu");
    n->add_input("A");
    n->add_output("Y");
    ValueInfo(g->add_input(), "A", DType::kFloat32, {4});
    ValueInfo(g->add_output(), "Y", DType::kFloat32, {4});
    Save(dir / "nothing.onnx", m);
  }
  return 0;
}

}  // namespace
}  // namespace testing
}  // namespace nibble

int main(int argc, char** argv) {
  if (const int rc = nibble::testing::CheckGeneratorArgs(
          argc, argv, "make_fold_models OUTDIR [--large N [DIM]]");
      rc >= 0) {
    return rc;
  }
  if (argc != 2 && !((argc == 4 || argc == 5) && std::string(argv[2]) == "--large")) {
    std::cerr << "usage: make_fold_models OUTDIR [--large N [DIM]]\n";
    return 2;
  }
  const int64_t dim = argc == 5 ? std::atoll(argv[4]) : 8192;
  if (dim < 128 || dim % 128 != 0) {
    std::cerr << "make_fold_models: DIM must be a positive multiple of 128\n";
    return 2;
  }
  return nibble::testing::Main(argv[1], argc >= 4 ? std::atoi(argv[3]) : 0, dim);
}
