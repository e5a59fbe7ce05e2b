// `nibble fold` on models written by tests/make_fold_models.cc (directory
// in NIBBLE_FOLD_MODELS): structure of the folded graph, values against an
// independent decode of the source bytes, external data in and out, and
// every bad input (clear error, nothing left behind, input untouched).
#include "onnx/fold.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/numeric.h"
#include "doctest/doctest.h"
#include "onnx/external_data.h"
#include "onnx/onnx_checkpoint.h"
#include "onnx/onnx_tensor.h"

namespace nibble {
namespace {

namespace fs = std::filesystem;

fs::path Models() {
  const char* d = std::getenv("NIBBLE_FOLD_MODELS");
  return d ? fs::path(d) : fs::path("fold_models");
}

// This process's scratch root (ctest runs test cases of one binary
// concurrently), removed when the process exits.
const fs::path& ScratchRoot() {
  struct Root {
    fs::path path = fs::temp_directory_path() / ("nibble_fold_test_" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Root root;
  return root.path;
}

// A fresh scratch folder per test.
fs::path Scratch(const std::string& name) {
  const fs::path p = ScratchRoot() / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

nibble_onnx::ModelProto Load(const fs::path& p) {
  nibble_onnx::ModelProto m;
  REQUIRE(ReadProtoFile(p.string(), &m).ok());
  return m;
}

const nibble_onnx::TensorProto* Init(const nibble_onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// Files in `dir` other than `keep`: nothing may be left behind.
std::vector<std::string> Leftovers(const fs::path& dir, const std::set<std::string>& keep) {
  std::vector<std::string> extra;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!keep.count(e.path().filename().string())) extra.push_back(e.path().filename().string());
  }
  return extra;
}

TEST_CASE("fold: MatMulNBits becomes MatMul (+ Add) with a [K, N] weight equal to ORT's formula") {
  for (const char* name : {"mmnb_zp", "mmnb_nozp_bias", "mmnb8"}) {
    const fs::path dir = Scratch(name);
    const fs::path in = Models() / (std::string(name) + ".onnx");
    const fs::path out = dir / "out.onnx";
    FoldReport r;
    REQUIRE_MESSAGE(FoldModel(in.string(), out.string(), {}, &r).ok(), name);
    CHECK(r.matmulnbits_nodes == 1);
    const auto src = Load(in);
    const auto dst = Load(out);
    REQUIRE(dst.graph().node_size() >= 1);
    CHECK(dst.graph().node(0).op_type() == "MatMul");
    const bool bias = std::string(name) == "mmnb_nozp_bias";
    CHECK(dst.graph().node_size() == (bias ? 2 : 1));
    if (bias) CHECK(dst.graph().node(1).op_type() == "Add");
    CHECK(dst.graph().node(dst.graph().node_size() - 1).output(0) == "Y");
    CHECK(Init(dst, "B") == nullptr);  // nothing else used it
    CHECK(Init(dst, "scales") == nullptr);
    const auto* w = Init(dst, "B_dequantized");
    REQUIRE(w != nullptr);
    // Independent decode of the MatMulNBits bytes (FORMATS.md).
    int64_t K = 0, N = 0, bits = 0, bs = 0;
    for (const auto& a : src.graph().node(0).attribute()) {
      if (a.name() == "K") K = a.i();
      if (a.name() == "N") N = a.i();
      if (a.name() == "bits") bits = a.i();
      if (a.name() == "block_size") bs = a.i();
    }
    CHECK(std::vector<int64_t>(w->dims().begin(), w->dims().end()) == std::vector<int64_t>{K, N});
    const int64_t kb = (K + bs - 1) / bs;
    const std::string& b = Init(src, "B")->raw_data();
    const std::string& s = Init(src, "scales")->raw_data();
    const auto* zpt = Init(src, "zp");
    TensorResolver res(dir.string());
    Tensor scratch;
    auto wv = res.Resolve(*w, &scratch);
    REQUIRE(wv.ok());
    int64_t bad = 0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t blk = k / bs, in_blk = k % bs;
        const int64_t byte = (n * kb + blk) * (bs * bits / 8) + in_blk * bits / 8;
        const uint32_t raw = static_cast<uint8_t>(b[static_cast<size_t>(byte)]);
        const int32_t q = bits == 4 ? static_cast<int32_t>((raw >> (4 * (in_blk % 2))) & 0xF)
                                    : static_cast<int32_t>(raw);
        int32_t z = 1 << (bits - 1);
        if (zpt) {
          const int64_t zrow = (kb * bits + 7) / 8;
          const uint32_t zb =
              static_cast<uint8_t>(zpt->raw_data()[static_cast<size_t>(n * zrow + blk * bits / 8)]);
          z = bits == 4 ? static_cast<int32_t>((zb >> (4 * (blk % 2))) & 0xF)
                        : static_cast<int32_t>(zb);
        }
        float sc;
        std::memcpy(&sc, s.data() + 4 * (n * kb + blk), 4);
        const float want = static_cast<float>(q - z) * sc;
        if (FloatElement(*wv, k * N + n) != want) ++bad;
      }
    }
    CHECK_MESSAGE(bad == 0, name);
  }
}

TEST_CASE(
    "fold: DequantizeLinear (default and opmx) becomes an initializer named like its output") {
  for (const char* name : {"qdq_int4", "qdq_uint4_f16", "opmx_int4", "qdq_external"}) {
    const fs::path dir = Scratch(name);
    const fs::path in = Models() / (std::string(name) + ".onnx");
    const fs::path out = dir / "out.onnx";
    FoldReport r;
    const Status st = FoldModel(in.string(), out.string(), {}, &r);
    REQUIRE_MESSAGE(st.ok(), name << ": " << st.message());
    CHECK(r.dequantize_nodes == 1);
    const auto dst = Load(out);
    CHECK(dst.graph().node_size() == 1);
    CHECK(dst.graph().node(0).op_type() == "MatMul");
    const auto* w = Init(dst, "w");
    REQUIRE(w != nullptr);
    CHECK(Init(dst, "w_q") == nullptr);
    CHECK(!HasExternalData(*w));  // small output: inline
    const bool f16 = std::string(name) == "qdq_uint4_f16";
    CHECK(w->data_type() == (f16 ? 10 : 1));
    // value_info and graph outputs untouched.
    CHECK(dst.graph().output(0).name() == "Y");
    CHECK(Leftovers(dir, {"out.onnx"}).empty());
  }
}

TEST_CASE("fold: external data output is aligned and reads back identically") {
  const fs::path dir = Scratch("external_out");
  const fs::path in = Models() / "mmnb_zp.onnx";
  FoldOptions o;
  o.external = true;
  FoldReport r;
  REQUIRE(FoldModel(in.string(), (dir / "inline.onnx").string(), {}, &r).ok());
  REQUIRE(FoldModel(in.string(), (dir / "ext.onnx").string(), o, &r).ok());
  CHECK(r.external);
  CHECK(fs::exists(dir / "ext.onnx.data"));
  const auto a = Load(dir / "inline.onnx"), b = Load(dir / "ext.onnx");
  const auto* wa = Init(a, "B_dequantized");
  const auto* wb = Init(b, "B_dequantized");
  REQUIRE(wa);
  REQUIRE(wb);
  CHECK(HasExternalData(*wb));
  for (const auto& kv : wb->external_data()) {
    if (kv.key() == "offset") CHECK(std::stoll(kv.value()) % 64 == 0);
  }
  TensorResolver res(dir.string());
  Tensor s1, s2;
  auto va = res.Resolve(*wa, &s1), vb = res.Resolve(*wb, &s2);
  REQUIRE(va.ok());
  REQUIRE(vb.ok());
  REQUIRE(va->size_bytes == vb->size_bytes);
  CHECK(std::memcmp(va->data, vb->data, va->size_bytes) == 0);
  // A custom name.
  o.external_name = "weights.bin";
  REQUIRE(FoldModel(in.string(), (dir / "named.onnx").string(), o, &r).ok());
  CHECK(fs::exists(dir / "weights.bin"));
}

TEST_CASE("TensorResolver: byte ranges read only what they ask, external reads stop when asked") {
  // A 17 MiB uint8 tensor 100 bytes into its data file: two pieces of
  // kCancelCheckBytes.
  const fs::path dir = Scratch("resolver_ranges");
  const size_t n = (size_t{17} << 20) + 3;
  std::string file(n + 100, '\0');
  for (size_t k = 0; k < file.size(); ++k) file[k] = static_cast<char>(k * 131 + k / 977);
  {
    std::ofstream f(dir / "w.bin", std::ios::binary);
    f.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  nibble_onnx::TensorProto p;
  p.set_name("big");
  p.set_data_type(2);  // uint8
  p.add_dims(static_cast<int64_t>(n));
  p.set_data_location(nibble_onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", "w.bin"},
                             {"offset", "100"},
                             {"length", std::to_string(n)}}) {
    auto* e = p.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  TensorResolver res(dir.string());
  std::string got(1000, '\0');
  REQUIRE(res.ReadRange(p, 5, 1000, reinterpret_cast<uint8_t*>(got.data())).ok());
  CHECK(got == file.substr(105, 1000));
  REQUIRE(res.ReadRange(p, n - 1000, 1000, reinterpret_cast<uint8_t*>(got.data())).ok());
  CHECK(got == file.substr(100 + n - 1000, 1000));
  CHECK(res.ReadRange(p, n - 10, 11, reinterpret_cast<uint8_t*>(got.data())).message() ==
        "tensor 'big': bytes [" + std::to_string(n - 10) + ", +11) are outside its " +
            std::to_string(n));
  // Resolve: asked between the two pieces; stopped there, an error naming
  // the tensor.
  int asked = 0;
  CancelCallback never = [&] { return ++asked < 0; };
  Tensor whole;
  auto v = res.Resolve(p, &whole, &never);
  REQUIRE(v.ok());
  CHECK(asked == 1);
  CHECK(std::memcmp(v->data, file.data() + 100, n) == 0);
  asked = 0;
  CancelCallback stop = [&] { return ++asked == 1; };
  auto s = res.Resolve(p, &whole, &stop);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() == "tensor 'big': interrupted");
  CHECK(asked == 1);
  // Inline raw_data and typed fields.
  nibble_onnx::TensorProto r;
  r.set_name("inline");
  r.set_data_type(2);
  r.add_dims(6);
  r.set_raw_data("abcdef");
  std::string three(3, '\0');
  REQUIRE(res.ReadRange(r, 2, 3, reinterpret_cast<uint8_t*>(three.data())).ok());
  CHECK(three == "cde");
  nibble_onnx::TensorProto f;
  f.set_name("typed");
  f.set_data_type(1);  // float32
  f.add_dims(3);
  for (float x : {1.5f, -2.0f, 0.25f}) f.add_float_data(x);
  float last = 0;
  REQUIRE(res.ReadRange(f, 8, 4, reinterpret_cast<uint8_t*>(&last)).ok());
  CHECK(last == 0.25f);
}

TEST_CASE("fold: a model with nothing to fold is copied with a note") {
  const fs::path dir = Scratch("nothing");
  FoldReport r;
  REQUIRE(FoldModel((Models() / "nothing.onnx").string(), (dir / "o.onnx").string(), {}, &r).ok());
  CHECK(r.note == "nothing to fold; the model is copied unchanged");
  CHECK(ReadAll(dir / "o.onnx") == ReadAll(Models() / "nothing.onnx"));
}

// Writes a modified copy of a generated model (and copies its data file).
fs::path Broken(const fs::path& dir, const std::string& model,
                const std::function<void(nibble_onnx::ModelProto*)>& edit) {
  nibble_onnx::ModelProto m = Load(Models() / (model + ".onnx"));
  edit(&m);
  const fs::path p = dir / (model + ".onnx");
  REQUIRE(WriteProtoFile(p.string(), m).ok());
  return p;
}

std::string FoldError(const fs::path& in, const fs::path& out, FoldOptions o = {}) {
  FoldReport r;
  const std::string before = ReadAll(in);
  const Status st = FoldModel(in.string(), out.string(), o, &r);
  CHECK(ReadAll(in) == before);  // the input is never modified
  CHECK(!fs::exists(out));       // nothing left at the destination
  return st.ok() ? "OK" : st.message();
}

TEST_CASE("fold: bad inputs are clear errors and leave nothing behind") {
  const fs::path dir = Scratch("bad");
  const fs::path out = dir / "out.onnx";
  SUBCASE("truncated protobuf") {
    const std::string bytes = ReadAll(Models() / "qdq_int4.onnx");
    const fs::path p = dir / "trunc.onnx";
    std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    CHECK(FoldError(p, out).find("is not a valid onnx.ModelProto") != std::string::npos);
  }
  SUBCASE("corrupted protobuf") {
    std::string bytes = ReadAll(Models() / "qdq_int4.onnx");
    for (size_t k = 10; k < 40; ++k) bytes[k] = static_cast<char>(0xFF);
    const fs::path p = dir / "corrupt.onnx";
    std::ofstream(p, std::ios::binary) << bytes;
    CHECK(FoldError(p, out).find("is not a valid onnx.ModelProto") != std::string::npos);
  }
  SUBCASE("missing external data file") {
    const fs::path p = dir / "qdq_external.onnx";
    fs::copy_file(Models() / "qdq_external.onnx", p);
    CHECK(FoldError(p, out).find("tensor 'w_q': cannot open") != std::string::npos);
  }
  SUBCASE("short external data file") {
    const fs::path p = dir / "qdq_external.onnx";
    fs::copy_file(Models() / "qdq_external.onnx", p);
    const std::string data = ReadAll(Models() / "qdq_external.onnx.data");
    std::ofstream(dir / "qdq_external.onnx.data", std::ios::binary) << data.substr(0, 100);
    CHECK(FoldError(p, out).find("lies outside 'qdq_external.onnx.data'") != std::string::npos);
  }
  SUBCASE("escaping and absolute locations") {
    for (const char* loc : {"../qdq_external.onnx.data", "/etc/passwd", "a/../../x"}) {
      const fs::path p = Broken(dir, "qdq_external", [&](nibble_onnx::ModelProto* m) {
        for (auto& t : *m->mutable_graph()->mutable_initializer()) {
          for (auto& kv : *t.mutable_external_data()) {
            if (kv.key() == "location") kv.set_value(loc);
          }
        }
      });
      CHECK(FoldError(p, out).find("must be a relative path inside the model's folder") !=
            std::string::npos);
    }
  }
  SUBCASE("inconsistent shapes") {
    const fs::path p = Broken(dir, "qdq_int4", [](nibble_onnx::ModelProto* m) {
      for (auto& t : *m->mutable_graph()->mutable_initializer()) {
        if (t.name() == "w_scale") t.set_dims(0, 7);
      }
    });
    CHECK(FoldError(p, out).find("w_scale") != std::string::npos);
  }
  SUBCASE("raw_data shorter than the dims") {
    const fs::path p = Broken(dir, "mmnb_zp", [](nibble_onnx::ModelProto* m) {
      for (auto& t : *m->mutable_graph()->mutable_initializer()) {
        if (t.name() == "B") t.mutable_raw_data()->resize(10);
      }
    });
    CHECK(FoldError(p, out) ==
          "com.microsoft::MatMulNBits 'fc': tensor 'B': raw_data has 10 bytes, uint8 (48,3,16) "
          "needs 2304");
  }
  SUBCASE("unsupported type") {
    const fs::path p = Broken(dir, "qdq_int4", [](nibble_onnx::ModelProto* m) {
      for (auto& t : *m->mutable_graph()->mutable_initializer()) {
        if (t.name() == "w_scale") t.set_data_type(6);  // int32 scale
      }
    });
    CHECK(FoldError(p, out).find("x_scale has type int32, not supported") != std::string::npos);
  }
  SUBCASE("MatMulNBits with g_idx or a prepacked weight") {
    const fs::path p = Broken(dir, "mmnb_zp", [](nibble_onnx::ModelProto* m) {
      auto* n = m->mutable_graph()->mutable_node(0);
      n->add_input("scales");  // any non-empty g_idx
    });
    CHECK(FoldError(p, out) ==
          "com.microsoft::MatMulNBits 'fc': input g_idx (act-order) is not supported; refusing to "
          "fold");
    const fs::path q = Broken(dir, "mmnb8", [](nibble_onnx::ModelProto* m) {
      auto* a = m->mutable_graph()->mutable_node(0)->add_attribute();
      a->set_name("weight_prepacked");
      a->set_type(nibble_onnx::AttributeProto::INT);
      a->set_i(1);
    });
    CHECK(FoldError(q, out) ==
          "com.microsoft::MatMulNBits 'fc': attribute weight_prepacked = 1 (a device-specific "
          "layout) is not supported");
  }
  SUBCASE("unwritable output path") {
    const std::string e = FoldError(Models() / "qdq_int4.onnx", dir / "no" / "such" / "out.onnx");
    CHECK(e == "cannot write output '" + (dir / "no" / "such" / "out.onnx").string() +
                   "': its folder '" + (dir / "no" / "such").string() +
                   "': No such file or directory");
  }
  CHECK(Leftovers(dir, {"trunc.onnx", "corrupt.onnx", "qdq_external.onnx", "qdq_external.onnx.data",
                        "qdq_int4.onnx", "mmnb_zp.onnx", "mmnb8.onnx"})
            .empty());
}

TEST_CASE("inspect lists every kind with totals") {
  auto q = InspectModel((Models() / "mmnb_zp.onnx").string());
  REQUIRE(q.ok());
  REQUIRE(q->size() == 1);
  CHECK((*q)[0].kind == "MatMulNBits");
  CHECK((*q)[0].logical_shape == "(96,48)");
  CHECK((*q)[0].dequantized_bytes == 96 * 48 * 4);
  auto o = InspectModel((Models() / "opmx_int4.onnx").string());
  REQUIRE(o.ok());
  CHECK((*o)[0].element_type == "int4x4 (int16)");
  CHECK((*o)[0].granularity == "group 32");
  auto d = InspectModel((Models() / "qdq_external.onnx").string());
  REQUIRE(d.ok());  // metadata only: external data is not read
  CHECK((*d)[0].granularity == "block 32");
  CHECK(InspectModel((Models() / "nothing.onnx").string())->empty());
}

TEST_CASE(
    "ONNX checkpoint: weights == fold's initializers, and any rows, type, threads == the whole") {
  std::mt19937 rng(3);
  for (const char* m : {"qdq_int4", "qdq_uint4_f16", "qdq_external", "opmx_int4", "mmnb_zp",
                        "mmnb8", "mmnb_nozp_bias"}) {
    CAPTURE(m);
    const std::string in = (Models() / (std::string(m) + ".onnx")).string();
    const fs::path dir = Scratch(std::string("ck_") + m);
    const std::string folded = (dir / "folded.onnx").string();
    FoldReport rep;
    REQUIRE(FoldModel(in, folded, {}, &rep).ok());
    auto ck = OpenAnyCheckpoint(in);
    REQUIRE_MESSAGE(ck.ok(), ck.status().message());
    auto fk = OpenOnnxCheckpoint(folded);
    REQUIRE(fk.ok());
    int weights = 0;
    for (const CheckpointTensor& t : ck->tensors()) {
      if (!t.quantized) continue;
      ++weights;
      CAPTURE(t.name);
      const CheckpointTensor* f = fk->Find(t.name);
      REQUIRE(f != nullptr);
      CHECK(!f->quantized);
      CHECK(f->shape == t.shape);
      auto a = ck->Read(t, DType::kUndefined);
      auto b = fk->Read(*f, DType::kUndefined);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      CHECK(a->dtype() == b->dtype());
      REQUIRE(a->size_bytes() == b->size_bytes());
      CHECK(std::memcmp(a->data(), b->data(), a->size_bytes()) == 0);
      for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        auto whole = ck->Read(t, d);
        REQUIRE(whole.ok());
        const int64_t rows = Checkpoint::Rows(t);
        const size_t row_bytes = whole->size_bytes() / static_cast<size_t>(rows);
        for (int k = 0; k < 5; ++k) {
          int64_t r0 = static_cast<int64_t>(rng() % static_cast<uint32_t>(rows + 1));
          int64_t r1 = static_cast<int64_t>(rng() % static_cast<uint32_t>(rows + 1));
          if (r0 > r1) std::swap(r0, r1);
          for (int threads : {1, 2}) {
            std::vector<uint8_t> got(row_bytes * static_cast<size_t>(r1 - r0) + 1, 0xA5);
            const Status st = ck->Read(t, d, r0, r1, threads, got.data(), got.size() - 1);
            REQUIRE_MESSAGE(st.ok(), st.message());
            CHECK(got.back() == 0xA5);
            CHECK(std::memcmp(got.data(),
                              static_cast<const uint8_t*>(whole->data()) +
                                  row_bytes * static_cast<size_t>(r0),
                              got.size() - 1) == 0);
          }
        }
      }
    }
    CHECK(weights >= 1);
  }
  // The core library's Checkpoint::Open names the way to open ONNX models.
  auto core = Checkpoint::Open((Models() / "qdq_int4.onnx").string());
  REQUIRE(!core.ok());
  CHECK(core.status().message().find("OpenAnyCheckpoint") != std::string::npos);
}

}  // namespace
}  // namespace nibble
