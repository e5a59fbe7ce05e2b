#include "checkpoint/methods/awq.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "checkpoint/methods/packed_words.h"
#include "kernels/layouts.h"
#include "op/lowering.h"

namespace nibble {

StatusOr<Dequantizer> PrepareAwq(int64_t group_size, const TensorView& qweight,
                                 const TensorView* qzeros, const TensorView& scales, DType out,
                                 const std::string& name) try {
  const std::string who = "AWQ '" + name + "'";
  auto shape = internal::CheckLinear(qweight, scales, 1, 8, group_size, out, who);
  if (!shape.ok()) return shape.status();
  const int64_t K = shape->K, N = shape->N, groups = shape->groups;
  if (qzeros != nullptr) {
    NIBBLE_RETURN_IF_ERROR(internal::CheckInt32(*qzeros, {groups, N / 8}, "qzeros", who));
  }

  Plan plan;
  Dequantizer::Storage st;
  plan.code = CodeKind::kU4;
  plan.codes = static_cast<const uint8_t*>(qweight.data);
  plan.group = shape->G;
  plan.out = shape->out;
  // The [N, K] view gathers one word per column (the kernels need a
  // 4-byte aligned qweight and int32 word offsets); otherwise the
  // checkpoint's [K, N] order is dequantized and written transposed.
  const bool direct = reinterpret_cast<uintptr_t>(qweight.data) % 4 == 0 &&
                      (K - 1) * (N / 8) <= std::numeric_limits<int32_t>::max();
  if (direct) {
    plan.layout = Layout::kAwqColumns;
    plan.word_stride = N / 2;
    plan.outer = N;
    plan.axis = K;
    plan.inner = 1;
    plan.s_outer = 1;
    plan.s_axis = N;
  } else {
    plan.layout = Layout::kAwqWords;
    plan.outer = 1;
    plan.axis = K;
    plan.inner = N;
    plan.s_axis = N;
    plan.s_inner = 1;
  }
  NIBBLE_RETURN_IF_ERROR(internal::WidenScale(scales, "scales", &st.scale, &plan.scale,
                                              internal::ScaleFactsFor(plan.out, &st.scale_facts))
                             .WithPrefix(who));
  if (qzeros != nullptr) {
    internal::SetZeroPoints(*qzeros, groups, N, 4, kAwqNibbleOrder, GptqZeros::kStored, &plan,
                            &st.zp_int);
  } else {
    plan.code_offset = 8;
  }
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(shape->out), {N, K}}, name);
  d.set_output_transposed(!direct);
  d.set_inputs({Dequantizer::InputOf("qweight", &qweight), Dequantizer::InputOf("qzeros", qzeros),
                Dequantizer::InputOf("scales", &scales)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareAwq");
}

StatusOr<AwqConfig> ParseAwqConfig(const nlohmann::json& q, const std::string& who) {
  AwqConfig c;
  int64_t bits = 4;
  NIBBLE_RETURN_IF_ERROR(internal::JsonInt(q, q.contains("w_bit") ? "w_bit" : "bits", who, &bits));
  if (bits != 4) {
    return Status::Error(who + ": AWQ with bits = " + std::to_string(bits) +
                         " is not supported (only 4)");
  }
  NIBBLE_RETURN_IF_ERROR(internal::JsonInt(
      q, q.contains("q_group_size") ? "q_group_size" : "group_size", who, &c.group_size));
  if (c.group_size == 0 || c.group_size < -1) {
    return Status::Error(who + ": group_size " + std::to_string(c.group_size) +
                         " is invalid (a positive size or -1)");
  }
  std::string ver;
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "version", who, &ver));
  ver = internal::Lower(ver);
  if (ver.empty()) ver = "gemm";
  if (ver != "gemm") {
    return Status::Error(who + ": AWQ version '" + ver + "' is not supported (only gemm)");
  }
  c.version = ver;
  NIBBLE_RETURN_IF_ERROR(internal::JsonBool(q, "zero_point", who, &c.zero_point));
  return c;
}

namespace {

// The AWQ layers: with an AWQ config every `.qweight`; without one, those
// whose scales are [groups, 8 N] (N = qweight's columns).
class AwqLister : public HfMethod {
 public:
  explicit AwqLister(std::optional<AwqConfig> config) : c_(std::move(config)) {}

  Status List(HfLayers* L) const override {
    if (c_) {
      L->Property("bits", "4");
      L->Property("group_size", std::to_string(c_->group_size));
      L->Property("version", c_->version);
      L->Property("zero_point", c_->zero_point ? "true" : "false");
    }
    for (const SafetensorsSet::Entry& e : L->set().entries()) {
      const std::string& name = e.tensor->name;
      if (!internal::EndsWith(name, ".qweight") || L->Consumed(name)) continue;
      const std::string prefix = internal::ModuleOf(name, ".qweight");
      const SafetensorsSet::Entry* scales = L->Find(prefix + ".scales");
      const Shape& qs = e.tensor->shape;
      const bool shaped = scales != nullptr && qs.size() == 2 &&
                          scales->tensor->shape.size() == 2 &&
                          scales->tensor->shape[1] == qs[1] * 8;
      if (!c_ && !shaped) continue;  // not AWQ's
      Layer(e, prefix, scales, L);
    }
    return Status::Ok();
  }

 private:
  void Layer(const SafetensorsSet::Entry& e, const std::string& prefix,
             const SafetensorsSet::Entry* scales, HfLayers* L) const {
    const SafetensorsSet::Entry* qzeros = L->Find(prefix + ".qzeros");
    const Shape& qs = e.tensor->shape;
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = e.tensor->name;
    ct.quantized = true;
    ct.kind = "AWQ";
    ct.stored_bytes = internal::BytesOf(&e) + internal::BytesOf(scales) + internal::BytesOf(qzeros);
    for (const char* s : {".qweight", ".scales", ".qzeros"}) L->Consume(prefix + s);
    if (scales == nullptr || qs.size() != 2 || scales->tensor->shape.size() != 2) {
      ct.supported = false;
      ct.shape = qs;
      ct.why_not = scales == nullptr ? "'" + prefix + ".scales' is missing"
                                     : "qweight and scales must be 2-D (got " + ShapeToString(qs) +
                                           " and " + ShapeToString(scales->tensor->shape) + ")";
      L->Add(std::move(ct));
      return;
    }
    ct.stored_dtype = scales->tensor->dtype;
    if (internal::IsFloatDType(scales->tensor->dtype)) ct.out_default = scales->tensor->dtype;
    const int64_t groups = scales->tensor->shape[0];
    ct.shape = {qs[1] * 8, qs[0]};
    const bool zero_point = !c_ || c_->zero_point;
    ct.detail =
        "gemm, " + std::to_string(groups) + " groups" + (qzeros ? "" : ", symmetric (z = 8)");
    if (!qzeros && zero_point) {
      ct.supported = false;
      ct.why_not = "AWQ GEMM with zero_point needs '" + prefix + ".qzeros'";
    }
    // Without an AWQ config the group size comes from the shapes (0).
    const int64_t g = c_ ? c_->group_size : 0;
    const SafetensorsSet::Entry qe = e;
    ct.prepare = [g, qe, scales, qzeros, prefix](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> qw, sv, zv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&qe, bufs, &qw));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(scales, bufs, &sv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(qzeros, bufs, &zv));
      return PrepareAwq(g, *qw, internal::Ptr(zv), *sv, out, prefix);
    };
    L->Add(std::move(ct));
  }

  std::optional<AwqConfig> c_;
};

}  // namespace

StatusOr<std::unique_ptr<HfMethod>> AwqConfigured(const HfConfigFiles& files,
                                                  const std::string& who) {
  auto c = ParseAwqConfig(*files.main(), who);
  if (!c.ok()) return c.status();
  return std::unique_ptr<HfMethod>(new AwqLister(*c));
}

std::unique_ptr<HfMethod> AwqUnconfigured() {
  return std::unique_ptr<HfMethod>(new AwqLister(std::nullopt));
}

}  // namespace nibble
