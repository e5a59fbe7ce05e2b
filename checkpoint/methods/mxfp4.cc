#include "checkpoint/methods/mxfp4.h"

#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "checkpoint/methods/scale_grid.h"
#include "op/lowering.h"

namespace nibble {
StatusOr<Dequantizer> PrepareMxfp4Experts(const TensorView& blocks, const TensorView& scales,
                                          DType out, const std::string& name) try {
  const std::string who = "MXFP4 '" + name + "'";
  const Shape& bs = blocks.shape;
  if (blocks.dtype != DType::kUInt8 || bs.size() != 4 || bs[3] != 16 || bs[0] <= 0 || bs[1] <= 0 ||
      bs[2] <= 0) {
    return Status::Error(who + ": the blocks are " + DTypeName(blocks.dtype) + " " +
                         ShapeToString(bs) + " (uint8 [experts, rows, groups, 16] expected)");
  }
  const int64_t E = bs[0], R = bs[1], G = bs[2];
  if (scales.dtype != DType::kUInt8 || scales.shape != Shape{E, R, G} ||
      scales.size_bytes != static_cast<size_t>(E * R * G)) {
    return Status::Error(who + ": the scales are " + DTypeName(scales.dtype) + " " +
                         ShapeToString(scales.shape) + " (uint8 " + ShapeToString({E, R, G}) +
                         " expected)");
  }
  auto ot = internal::ResolveOutType(out, DType::kBFloat16, who);
  if (!ot.ok()) return ot.status();
  ScaleGridWeight w;
  w.codes = &blocks;
  w.code = CodeKind::kF4E2M1;
  w.N = E * R;
  w.K = G * 32;
  w.block_rows = 1;
  w.block_cols = 32;
  w.out = *ot;
  const auto* s = static_cast<const uint8_t*>(scales.data);
  w.grid.resize(static_cast<size_t>(E * R * G));
  // torch.ldexp(x, s - 127) = x * pow(2.0, s - 127) in float32 (255: inf),
  // one table entry per scale byte.
  static const std::array<float, 256> kPow2 = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 255; ++i) t[static_cast<size_t>(i)] = std::ldexp(1.0f, i - 127);
    t[255] = std::numeric_limits<float>::infinity();
    return t;
  }();
  for (size_t i = 0; i < w.grid.size(); ++i) w.grid[i] = kPow2[s[i]];
  auto d = PrepareScaleGrid(std::move(w), name, who);
  if (!d.ok()) return d.status();
  d->TransposeOutputBatches(E);
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareMxfp4Experts");
}

namespace {

class Mxfp4Lister : public HfMethod {
 public:
  explicit Mxfp4Lister(std::vector<std::string> not_convert)
      : not_convert_(std::move(not_convert)) {}

  Status List(HfLayers* L) const override {
    if (!not_convert_.empty()) {
      std::string m;
      for (const auto& s : not_convert_) m += (m.empty() ? "" : ", ") + s;
      L->Property("modules_to_not_convert", m);
    }
    for (const SafetensorsSet::Entry& e : L->set().entries()) {
      const std::string& name = e.tensor->name;
      if (L->Consumed(name)) continue;
      if (internal::EndsWith(name, "_blocks")) Layer(e, L);
    }
    return Status::Ok();
  }

 private:
  void Layer(const SafetensorsSet::Entry& e, HfLayers* L) const {
    const std::string& name = e.tensor->name;
    const std::string base = internal::ModuleOf(name, "_blocks");
    const SafetensorsSet::Entry* scales = L->Find(base + "_scales");
    L->Consume(name);
    L->Consume(base + "_scales");
    CheckpointTensor ct;
    ct.name = base;
    ct.source = name;
    ct.quantized = true;
    ct.kind = "MXFP4";
    ct.stored_dtype = DType::kBFloat16;
    ct.out_default = DType::kBFloat16;
    ct.stored_bytes = internal::BytesOf(&e) + internal::BytesOf(scales);
    const Shape& bs = e.tensor->shape;
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      if (ct.shape.empty()) ct.shape = bs;
      L->Add(std::move(ct));
    };
    if (e.tensor->dtype != DType::kUInt8 || bs.size() != 4 || bs[3] != 16) {
      return refuse("'" + name + "' is " + DTypeName(e.tensor->dtype) + " " + ShapeToString(bs) +
                    " (gpt-oss MXFP4 blocks are uint8 [experts, rows, groups, 16])");
    }
    if (scales == nullptr) return refuse("'" + base + "_scales' is missing");
    const Shape want{bs[0], bs[1], bs[2]};
    if (scales->tensor->dtype != DType::kUInt8 || scales->tensor->shape != want) {
      return refuse("'" + scales->tensor->name + "' is " + DTypeName(scales->tensor->dtype) + " " +
                    ShapeToString(scales->tensor->shape) + "; the blocks need uint8 " +
                    ShapeToString(want));
    }
    const int64_t E = bs[0], R = bs[1], G = bs[2];
    if (E <= 0 || R <= 0 || G <= 0) return refuse("'" + name + "' is empty");
    ct.shape = {E, G * 32, R};
    ct.detail = "e2m1 blocks of 32, e8m0 scales, [E, R, K] transposed to [E, K, R]";
    const SafetensorsSet::Entry we = e;
    ct.prepare = [we, scales, base](DType out,
                                    CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> wv, sv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&we, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(scales, bufs, &sv));
      return PrepareMxfp4Experts(*wv, *sv, out, base);
    };
    L->Add(std::move(ct));
  }

  std::vector<std::string> not_convert_;
};

}  // namespace

StatusOr<std::unique_ptr<HfMethod>> Mxfp4Configured(const HfConfigFiles& files,
                                                    const std::string& who) {
  std::vector<std::string> not_convert;
  NIBBLE_RETURN_IF_ERROR(
      internal::JsonStringList(*files.main(), "modules_to_not_convert", who, &not_convert));
  return std::unique_ptr<HfMethod>(new Mxfp4Lister(std::move(not_convert)));
}

}  // namespace nibble
