#include "checkpoint/methods/fp8.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "checkpoint/methods/scale_grid.h"
#include "op/lowering.h"

namespace nibble {

StatusOr<Fp8Config> ParseFp8Config(const nlohmann::json& q, const std::string& who) {
  Fp8Config c;
  auto b = q.find("weight_block_size");
  if (b != q.end() && !b->is_null()) {
    if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
        !(*b)[1].is_number_integer() || (*b)[0].get<int64_t>() <= 0 ||
        (*b)[1].get<int64_t>() <= 0 || (*b)[0].get<int64_t>() > (int64_t{1} << 30) ||
        (*b)[1].get<int64_t>() > (int64_t{1} << 30)) {
      return Status::Error(who +
                           ": 'weight_block_size' must be two positive integers [bn, bk] (got " +
                           b->dump() + ")");
    }
    c.block = {(*b)[0].get<int64_t>(), (*b)[1].get<int64_t>()};
  }
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "activation_scheme", who, &c.activation_scheme));
  NIBBLE_RETURN_IF_ERROR(
      internal::JsonStringList(q, "modules_to_not_convert", who, &c.not_convert));
  std::string fmt = "e4m3";
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "fmt", who, &fmt));
  if (internal::Lower(fmt) != "e4m3") {
    return Status::Error(who + ": 'fmt' '" + fmt + "' is not supported (e4m3 is)");
  }
  return c;
}

StatusOr<Dequantizer> PrepareFp8(const TensorView& weight, const TensorView& scale,
                                 const std::vector<int64_t>& block, DType out,
                                 const std::string& name) try {
  const std::string who = "FP8 '" + name + "'";
  if ((weight.dtype != DType::kFloat8E4M3FN && weight.dtype != DType::kFloat8E5M2) ||
      weight.shape.size() != 2) {
    return Status::Error(who + ": the weight is " + DTypeName(weight.dtype) + " " +
                         ShapeToString(weight.shape) + " (float8 [N, K] expected)");
  }
  const int64_t N = weight.shape[0], K = weight.shape[1];
  ScaleGridWeight w;
  std::string what;
  NIBBLE_RETURN_IF_ERROR(
      MatchScaleGrid(N, K, scale.shape, block, 0, "the scale", &w.block_rows, &w.block_cols, &what)
          .WithPrefix(who));
  auto ot = internal::ResolveOutType(out, DType::kBFloat16, who);
  if (!ot.ok()) return ot.status();
  w.codes = &weight;
  w.code = weight.dtype == DType::kFloat8E5M2 ? CodeKind::kF8E5M2 : CodeKind::kF8E4M3FN;
  w.N = N;
  w.K = K;
  w.out = *ot;
  NIBBLE_RETURN_IF_ERROR(ScaleGridFrom(scale, "the scale", &w.grid).WithPrefix(who));
  return PrepareScaleGrid(std::move(w), name, who);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareFp8");
}

namespace {

class Fp8Lister : public HfMethod {
 public:
  explicit Fp8Lister(Fp8Config c) : c_(std::move(c)) {}

  Status List(HfLayers* L) const override {
    L->Property("weight_block_size", c_.block.empty() ? "none"
                                                      : std::to_string(c_.block[0]) + " x " +
                                                            std::to_string(c_.block[1]));
    if (!c_.activation_scheme.empty()) L->Property("activation_scheme", c_.activation_scheme);
    if (!c_.not_convert.empty()) {
      std::string m;
      for (const auto& s : c_.not_convert) m += (m.empty() ? "" : ", ") + s;
      L->Property("modules_to_not_convert", m);
    }
    for (const SafetensorsSet::Entry& e : L->set().entries()) {
      const std::string& name = e.tensor->name;
      if (L->Consumed(name) || !internal::EndsWith(name, ".weight")) continue;
      const DType d = e.tensor->dtype;
      const std::string prefix = internal::ModuleOf(name, ".weight");
      // A float weight beside a scale is not claimed: the copy guard
      // (hf_source.cc) refuses both by name.
      if (d == DType::kFloat8E4M3FN || d == DType::kFloat8E5M2) Layer(e, L);
    }
    return Status::Ok();
  }

 private:
  void Layer(const SafetensorsSet::Entry& e, HfLayers* L) const {
    const std::string& name = e.tensor->name;
    const std::string prefix = internal::ModuleOf(name, ".weight");
    CheckpointTensor ct;
    ct.name = name;
    ct.source = name;
    ct.quantized = true;
    ct.kind = "FP8";
    ct.shape = e.tensor->shape;
    ct.stored_dtype = e.tensor->dtype;
    ct.out_default = DType::kBFloat16;
    const SafetensorsSet::Entry* inv = L->Find(prefix + ".weight_scale_inv");
    const SafetensorsSet::Entry* fwd = L->Find(prefix + ".weight_scale");
    L->Consume(name);
    for (const char* s : {".weight_scale_inv", ".weight_scale", ".input_scale", ".activation_scale",
                          ".input_scale_inv"}) {
      L->Consume(prefix + s);
    }
    const SafetensorsSet::Entry* scale = inv != nullptr ? inv : fwd;
    ct.stored_bytes = internal::BytesOf(&e) + internal::BytesOf(inv) + internal::BytesOf(fwd);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      L->Add(std::move(ct));
    };
    const DType d = e.tensor->dtype;
    if (inv != nullptr && fwd != nullptr) {
      return refuse("'" + name + "' has both weight_scale_inv and weight_scale");
    }
    if (scale == nullptr) {
      return refuse("'" + prefix + ".weight_scale_inv' (or '.weight_scale') is missing");
    }
    if (e.tensor->shape.size() != 2) {
      return refuse("'" + name + "' has shape " + ShapeToString(e.tensor->shape) +
                    " (an FP8 Linear weight is [N, K])");
    }
    const DType sd = scale->tensor->dtype;
    if (!internal::IsFloatDType(sd)) {
      return refuse("'" + scale->tensor->name + "' is " + DTypeName(sd) +
                    " (float32, bfloat16 or float16 expected)");
    }
    const int64_t N = e.tensor->shape[0], K = e.tensor->shape[1];
    int64_t br = 0, bc = 0;
    std::string what;
    Status m = MatchScaleGrid(N, K, scale->tensor->shape, c_.block, 0, scale->tensor->name, &br,
                              &bc, &what);
    if (!m.ok()) return refuse(m.message());
    ct.detail = std::string(d == DType::kFloat8E5M2 ? "e5m2" : "e4m3") + ", " + what + ", " +
                (inv != nullptr ? "weight_scale_inv" : "weight_scale") + " " + DTypeName(sd);
    const SafetensorsSet::Entry we = e;
    const std::vector<int64_t> block = c_.block;
    ct.prepare = [we, scale, block, prefix](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> wv, sv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&we, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(scale, bufs, &sv));
      return PrepareFp8(*wv, *sv, block, out, prefix + ".weight");
    };
    L->Add(std::move(ct));
  }

  Fp8Config c_;
};

}  // namespace

StatusOr<std::unique_ptr<HfMethod>> Fp8Configured(const HfConfigFiles& files,
                                                  const std::string& who) {
  auto c = ParseFp8Config(*files.main(), who);
  if (!c.ok()) return c.status();
  return std::unique_ptr<HfMethod>(new Fp8Lister(std::move(*c)));
}

}  // namespace nibble
