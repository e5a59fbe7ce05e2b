#include "op/pmx.h"

#include <limits>
#include <new>

#include "op/lowering.h"

namespace nibble {

namespace {

using internal::Who;

enum class Granularity { kGrouped, kPerChannel, kPerTensor };

// Everything decided from attributes, types and shapes alone.
struct Analysis {
  OutputInfo output;
  Shape d;             // logical shape
  int64_t axis = 0;    // quant_axis
  int interleave = 1;  // 1 (int8), 4 (int4x4) or 8 (int4x8)
  Granularity granularity = Granularity::kGrouped;
  bool int4 = false;
  int64_t zp_kind = 0;  // 0 none, 1 integer, 2 float
};

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

Status CheckBool(int64_t v, const char* attr) {
  if (v == 0 || v == 1) return Status::Ok();
  return Status::Error(std::string("attribute ") + attr + " must be 0 or 1 (got " +
                       std::to_string(v) + ")");
}

// Validates attributes, types and shapes; `who` prefixes every message.
StatusOr<Analysis> Analyze(const PmxAttributes& attrs, const TensorView& x, const TensorView& scale,
                           const TensorView* zp, const DequantizeOptions& options) {
  Analysis a;
  if (attrs.quant_data_type == "int4") {
    a.int4 = true;
  } else if (attrs.quant_data_type != "int8") {
    return Status::Error("attribute quant_data_type must be \"int4\" or \"int8\" (got " +
                         Quoted(attrs.quant_data_type) + ")");
  }
  if (attrs.quant_axis != 0 && attrs.quant_axis != 1) {
    return Status::Error("attribute quant_axis must be 0 or 1 (got " +
                         std::to_string(attrs.quant_axis) + ")");
  }
  a.axis = attrs.quant_axis;
  if (attrs.group_size < 0) {
    return Status::Error("attribute group_size must be >= 0 (got " +
                         std::to_string(attrs.group_size) + ")");
  }
  NIBBLE_RETURN_IF_ERROR(CheckBool(attrs.has_zeropoint, "has_zeropoint"));
  NIBBLE_RETURN_IF_ERROR(CheckBool(attrs.float_zeropoint, "float_zeropoint"));
  if (attrs.float_zeropoint == 1 && attrs.has_zeropoint == 0) {
    return Status::Error("attribute float_zeropoint = 1 requires has_zeropoint = 1");
  }

  // X type and logical shape.
  if (a.int4) {
    if (x.dtype == DType::kInt16) {
      a.interleave = 4;
    } else if (x.dtype == DType::kInt32) {
      a.interleave = 8;
    } else {
      return Status::Error(
          "input X must be int16 (int4x4) or int32 (int4x8) for quant_data_type \"int4\" "
          "(got " +
          DTypeName(x.dtype) + ")");
    }
  } else if (x.dtype != DType::kInt8) {
    return Status::Error("input X must be int8 for quant_data_type \"int8\" (got " +
                         DTypeName(x.dtype) + ")");
  }
  if (x.shape.empty()) return Status::Error("input X must have rank >= 1 (got a scalar)");
  auto x_n = CheckedNumElements(x.shape, "input X");
  if (!x_n.ok()) return x_n.status();
  a.d = x.shape;
  if (a.interleave > 1) {
    if (a.d[0] > std::numeric_limits<int64_t>::max() / a.interleave) {
      return Status::Error("input X dim 0 (" + std::to_string(a.d[0]) +
                           ") is too large for int4 unpacking");
    }
    a.d[0] *= a.interleave;
    auto d_n = CheckedNumElements(a.d, "logical output");
    if (!d_n.ok()) return d_n.status();
  }
  const int64_t rank = static_cast<int64_t>(a.d.size());
  if (a.axis == 1 && rank < 2) {
    return Status::Error("attribute quant_axis = 1 needs X of rank >= 2 (got rank " +
                         std::to_string(rank) + ")");
  }

  // Scale type and shape.
  if (!IsFloat16Or32(scale.dtype)) {
    return Status::Error("input Scale must be float32, float16 or bfloat16 (got " +
                         DTypeName(scale.dtype) + ")");
  }
  auto s_n = CheckedNumElements(scale.shape, "input Scale");
  if (!s_n.ok()) return s_n.status();
  const std::string x_desc = "X " + ShapeToString(a.d);
  const int64_t dq = a.d[static_cast<size_t>(a.axis)];
  const std::string on_axis = " on quant_axis " + std::to_string(a.axis);
  if (attrs.group_size > 0) {
    const int64_t g = attrs.group_size;
    if (dq % g != 0) {
      return Status::Error(x_desc + " dim " + std::to_string(a.axis) + " (" + std::to_string(dq) +
                           ") is not divisible by group_size " + std::to_string(g) + on_axis);
    }
    Shape expected = a.d;
    expected[static_cast<size_t>(a.axis)] = dq / g;
    if (scale.shape != expected) {
      return Status::Error("Scale shape " + ShapeToString(scale.shape) + " does not match " +
                           x_desc + " with group_size " + std::to_string(g) + on_axis +
                           " (expected " + ShapeToString(expected) + ")");
    }
    a.granularity = Granularity::kGrouped;
  } else if (*s_n == 1) {
    a.granularity = Granularity::kPerTensor;
  } else {
    Shape expected = a.d;
    expected[static_cast<size_t>(a.axis)] = 1;
    const bool rank1_form = rank == 2 && scale.shape == Shape{a.d[static_cast<size_t>(1 - a.axis)]};
    if (scale.shape != expected && !rank1_form) {
      std::string exp_text = ShapeToString(expected);
      if (rank == 2) exp_text += " or " + ShapeToString({a.d[static_cast<size_t>(1 - a.axis)]});
      return Status::Error("Scale shape " + ShapeToString(scale.shape) + " does not match " +
                           x_desc + " per-channel (group_size 0)" + on_axis + " (expected " +
                           exp_text + ", or one element for per-tensor)");
    }
    a.granularity = Granularity::kPerChannel;
  }

  // Zero point.
  const bool zp_given = zp != nullptr && zp->dtype != DType::kUndefined &&
                        !(zp->shape.size() == 1 && zp->shape[0] == 0);
  if (attrs.has_zeropoint == 1) {
    if (!zp_given)
      return Status::Error("has_zeropoint = 1 but input ZeroPoint is missing or empty");
    if (zp->shape != scale.shape) {
      return Status::Error("ZeroPoint shape " + ShapeToString(zp->shape) +
                           " must equal Scale shape " + ShapeToString(scale.shape));
    }
    if (attrs.float_zeropoint == 1) {
      if (!IsFloat16Or32(zp->dtype)) {
        return Status::Error(
            "input ZeroPoint must be float16 or float32 when float_zeropoint = 1 (got " +
            DTypeName(zp->dtype) + ")");
      }
      a.zp_kind = 2;
    } else {
      if (zp->dtype != DType::kInt8 && zp->dtype != DType::kInt32 && zp->dtype != DType::kUInt8) {
        return Status::Error(
            "input ZeroPoint must be int8, int32 or uint8 when float_zeropoint = 0 (got " +
            DTypeName(zp->dtype) + ")");
      }
      a.zp_kind = 1;
    }
  } else if (zp_given) {
    return Status::Error("input ZeroPoint is given but has_zeropoint = 0");
  }

  // Output type.
  a.output.dtype = internal::ResolveOutDType(options.output_dtype, scale.dtype);
  auto out_type = internal::OutTypeFor(a.output.dtype, "output type");
  if (!out_type.ok()) return out_type.status();
  a.output.shape = a.d;
  return a;
}

}  // namespace

StatusOr<OutputInfo> InferPmxOutput(const PmxAttributes& attrs, const TensorView& x,
                                    const TensorView& scale, const TensorView* zero_point,
                                    const DequantizeOptions& options) {
  auto a = Analyze(attrs, x, scale, zero_point, options);
  if (!a.ok()) return a.status().WithPrefix(Who("DequantizeLinear", options.name));
  return a->output;
}

StatusOr<Dequantizer> PreparePmx(const PmxAttributes& attrs, const TensorView& x,
                                 const TensorView& scale, const TensorView* zero_point,
                                 const DequantizeOptions& options) try {
  const std::string who = Who("DequantizeLinear", options.name);
  auto analysis = Analyze(attrs, x, scale, zero_point, options);
  if (!analysis.ok()) return analysis.status().WithPrefix(who);
  const Analysis& a = *analysis;

  auto x_n = internal::CheckView(x, "input X");
  if (!x_n.ok()) return x_n.status().WithPrefix(who);

  Plan plan;
  Dequantizer::Storage storage;
  plan.codes = static_cast<const uint8_t*>(x.data);
  plan.out = *internal::OutTypeFor(a.output.dtype, "output type");
  if (a.int4) {
    plan.code = CodeKind::kU4;
    plan.layout = Layout::kPmxWords;
    plan.interleave = a.interleave;
    int64_t row = 1;
    for (size_t k = 1; k < a.d.size(); ++k) row *= a.d[k];
    plan.interleave_row = row;
  } else {
    plan.code = CodeKind::kS8;
  }
  // int4 codes are offset-binary: code 8 is zero unless an integer zero
  // point says otherwise.
  plan.code_offset = (a.int4 && a.zp_kind != 1) ? 8 : 0;

  // View [outer, axis, inner] around quant_axis.
  const size_t qa = static_cast<size_t>(a.axis);
  plan.outer = 1;
  for (size_t k = 0; k < qa; ++k) plan.outer *= a.d[k];
  plan.axis = a.d[qa];
  plan.inner = 1;
  for (size_t k = qa + 1; k < a.d.size(); ++k) plan.inner *= a.d[k];
  switch (a.granularity) {
    case Granularity::kGrouped:
      plan.group = attrs.group_size;
      plan.s_axis = plan.inner;
      plan.s_outer = (plan.axis / plan.group) * plan.inner;
      plan.s_inner = 1;
      break;
    case Granularity::kPerChannel:
      plan.group = plan.axis > 0 ? plan.axis : 1;
      plan.s_axis = 0;
      plan.s_outer = plan.inner;
      plan.s_inner = 1;
      break;
    case Granularity::kPerTensor:
      plan.group = plan.axis > 0 ? plan.axis : 1;
      break;
  }

  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(scale, "input Scale", &storage.scale, &plan.scale,
                           internal::ScaleFactsFor(plan.out, &storage.scale_facts))
          .WithPrefix(who));
  if (a.zp_kind == 1) {
    plan.zp_kind = ZeroPointKind::kInteger;
    NIBBLE_RETURN_IF_ERROR(internal::WidenIntegerZeroPoint(*zero_point, "input ZeroPoint",
                                                           &storage.zp_int, &plan.zp_int)
                               .WithPrefix(who));
    if (a.int4) {
      const size_t n =
          zero_point->shape.empty()
              ? 1
              : static_cast<size_t>(*CheckedNumElements(zero_point->shape, "ZeroPoint"));
      const int32_t* const zp = plan.zp_int;
      const int64_t k = internal::FirstIndexWhere(static_cast<int64_t>(n), [zp](int64_t i) {
        return static_cast<uint32_t>(zp[i]) > 15u;  // outside [0, 15]
      });
      if (k < static_cast<int64_t>(n)) {
        return Status::Error(who + ": ZeroPoint value " + std::to_string(zp[k]) +
                             " at flat index " + std::to_string(k) +
                             " is out of range [0, 15] for quant_data_type \"int4\"");
      }
    }
  } else if (a.zp_kind == 2) {
    plan.zp_kind = ZeroPointKind::kFloat;
    NIBBLE_RETURN_IF_ERROR(internal::WidenFloatZeroPoint(*zero_point, "input ZeroPoint",
                                                         &storage.zp_float, &plan.zp_float)
                               .WithPrefix(who));
  }
  Dequantizer d(plan, std::move(storage), a.output, options.name);
  d.set_inputs({Dequantizer::InputOf("input X", &x), Dequantizer::InputOf("input Scale", &scale),
                Dequantizer::InputOf("input ZeroPoint", zero_point)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PreparePmx");
}

Status DequantizePmx(const PmxAttributes& attrs, const TensorView& x, const TensorView& scale,
                     const TensorView* zero_point, const MutableTensorView& y,
                     const DequantizeOptions& options) {
  ScopedPrepareThreads prepare_threads(options.threads);
  auto d = PreparePmx(attrs, x, scale, zero_point, options);
  if (!d.ok()) return d.status();
  return d->Run(y, options.threads);
}

StatusOr<Tensor> DequantizePmx(const PmxAttributes& attrs, const TensorView& x,
                               const TensorView& scale, const TensorView* zero_point,
                               const DequantizeOptions& options) try {
  ScopedPrepareThreads prepare_threads(options.threads);
  auto d = PreparePmx(attrs, x, scale, zero_point, options);
  if (!d.ok()) return d.status();
  return d->Run(options.threads);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantizePmx");
}

}  // namespace nibble
