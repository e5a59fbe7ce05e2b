#include "checkpoint/methods/mxfp4.h"

#include <cstdint>
#include <cstring>
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
  // torch.ldexp(x, s - 127) = x * pow(2.0, s - 127) in float32: the bits
  // s << 23 for s in 1 .. 254, 2^-127 (a subnormal) for 0, inf for 255.
  // Selects rather than a table lookup, so that the loop vectorizes; on
  // the prepare threads. (This widening is most of a gpt-oss expert's
  // preparation: 7-10 % of its whole 16-bit time on an Intel Xeon guest,
  // mostly writing the 4-byte scales.)
  float* const grid = w.grid.data();
  internal::ForParamRanges(E * R * G, [s, grid](int64_t b, int64_t e) {
    const uint8_t* const in = s + b;  // (locals: the stores cannot alias them)
    float* const to = grid + b;
    for (int64_t i = 0; i < e - b; ++i) {
      const uint32_t x = in[i];
      const uint32_t bits = x == 0 ? 0x00400000u : x == 255 ? 0x7F800000u : x << 23;
      std::memcpy(to + i, &bits, 4);
    }
  });
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
