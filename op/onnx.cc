#include "op/onnx.h"

#include <new>
#include <vector>

#include "base/numeric.h"
#include "op/lowering.h"

namespace nibble {

namespace {

using internal::Who;

bool IsFloat8(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ;
}

// The opset that introduced x type `t` for DequantizeLinear (0: never).
int XTypeSince(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt32:
      return 10;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return 19;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt4:
    case DType::kUInt4:
      return 21;
    case DType::kFloat4E2M1:
      return 23;
    case DType::kInt2:
    case DType::kUInt2:
      return 25;
    default:
      return 0;
  }
}

int ScaleTypeSince(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 10;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 19;
    case DType::kFloat8E8M0:
      return 24;
    default:
      return 0;
  }
}

CodeKind CodeFor(DType t) {
  switch (t) {
    case DType::kUInt2:
      return CodeKind::kU2;
    case DType::kInt2:
      return CodeKind::kS2;
    case DType::kUInt4:
      return CodeKind::kU4;
    case DType::kInt4:
      return CodeKind::kS4;
    case DType::kUInt8:
      return CodeKind::kU8;
    case DType::kInt8:
      return CodeKind::kS8;
    case DType::kUInt16:
      return CodeKind::kU16;
    case DType::kInt16:
      return CodeKind::kS16;
    case DType::kInt32:
      return CodeKind::kS32;
    case DType::kFloat8E4M3FN:
      return CodeKind::kF8E4M3FN;
    case DType::kFloat8E4M3FNUZ:
      return CodeKind::kF8E4M3FNUZ;
    case DType::kFloat8E5M2:
      return CodeKind::kF8E5M2;
    case DType::kFloat8E5M2FNUZ:
      return CodeKind::kF8E5M2FNUZ;
    default:
      return CodeKind::kF4E2M1;
  }
}

enum class Granularity { kPerTensor, kPerAxis, kBlocked };

struct Analysis {
  OutputInfo output;
  Granularity granularity = Granularity::kPerTensor;
  int64_t axis = 0;  // normalized (per-axis / blocked)
  bool zp_present = false;
};

std::string Vs(int opset) { return " (DequantizeLinear-" + std::to_string(opset) + ")"; }

StatusOr<Analysis> Analyze(const OnnxDequantizeAttributes& at, const TensorView& x,
                           const TensorView& scale, const TensorView* zp) {
  Analysis a;
  const int v = at.opset;
  if (v != 10 && v != 13 && v != 19 && v != 21 && v != 23 && v != 24 && v != 25) {
    return Status::Error("unsupported operator version " + std::to_string(v) +
                         " (supported: 10, 13, 19, 21, 23, 24, 25)");
  }
  if (at.has_axis && v < 13) return Status::Error("attribute axis is not defined" + Vs(v));
  if (at.has_block_size && v < 21) {
    return Status::Error("attribute block_size is not defined" + Vs(v));
  }
  if (at.has_output_dtype && v < 23) {
    return Status::Error("attribute output_dtype is not defined" + Vs(v));
  }
  const int xs = XTypeSince(x.dtype);
  if (xs == 0 || xs > v) {
    return Status::Error("input x has type " + DTypeName(x.dtype) + ", not supported" + Vs(v));
  }
  const int ss = ScaleTypeSince(scale.dtype);
  if (ss == 0 || ss > v) {
    return Status::Error("input x_scale has type " + DTypeName(scale.dtype) + ", not supported" +
                         Vs(v));
  }
  auto x_n = CheckedNumElements(x.shape, "input x");
  if (!x_n.ok()) return x_n.status();
  auto s_n = CheckedNumElements(scale.shape, "input x_scale");
  if (!s_n.ok()) return s_n.status();

  a.zp_present = zp != nullptr && zp->dtype != DType::kUndefined;
  if (a.zp_present) {
    if (zp->dtype != x.dtype) {
      return Status::Error("input x_zero_point has type " + DTypeName(zp->dtype) +
                           " but x has type " + DTypeName(x.dtype) + " (they must match)");
    }
    auto z_n = CheckedNumElements(zp->shape, "input x_zero_point");
    if (!z_n.ok()) return z_n.status();
    // One element each, of any ranks, is per-tensor; otherwise the shapes match.
    if (zp->shape != scale.shape && !(*z_n == 1 && *s_n == 1)) {
      return Status::Error("x_zero_point shape " + ShapeToString(zp->shape) +
                           " must equal x_scale shape " + ShapeToString(scale.shape));
    }
  }

  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (at.block_size < 0) {
    return Status::Error("attribute block_size must be >= 0 (got " + std::to_string(at.block_size) +
                         ")");
  }
  auto normalized_axis = [&]() -> StatusOr<int64_t> {
    if (at.axis < -rank || at.axis >= rank) {
      return Status::Error("attribute axis " + std::to_string(at.axis) +
                           " is out of range for x of rank " + std::to_string(rank) +
                           " (accepted [" + std::to_string(-rank) + ", " +
                           std::to_string(rank - 1) + "])");
    }
    return at.axis < 0 ? at.axis + rank : at.axis;
  };
  if (*s_n == 1) {  // a one-element scale of any rank is per-tensor
    a.granularity = Granularity::kPerTensor;
  } else if (at.block_size == 0) {
    if (v < 13) {
      return Status::Error("x_scale shape " + ShapeToString(scale.shape) + " must be a scalar" +
                           Vs(v));
    }
    if (scale.shape.size() != 1) {
      return Status::Error("x_scale shape " + ShapeToString(scale.shape) +
                           " must be a scalar or 1-D for per-axis quantization "
                           "(block_size is 0)");
    }
    auto ax = normalized_axis();
    if (!ax.ok()) return ax.status();
    a.axis = *ax;
    const int64_t d = x.shape[static_cast<size_t>(a.axis)];
    if (scale.shape[0] != d) {
      return Status::Error("x_scale has " + std::to_string(scale.shape[0]) + " elements but x " +
                           ShapeToString(x.shape) + " has " + std::to_string(d) + " along axis " +
                           std::to_string(a.axis));
    }
    a.granularity = Granularity::kPerAxis;
  } else {
    auto ax = normalized_axis();
    if (!ax.ok()) return ax.status();
    a.axis = *ax;
    Shape expected = x.shape;
    const int64_t d = x.shape[static_cast<size_t>(a.axis)];
    expected[static_cast<size_t>(a.axis)] = d / at.block_size + (d % at.block_size != 0);
    if (scale.shape != expected) {
      return Status::Error(
          "Invalid shapes for blocked quantization: x " + ShapeToString(x.shape) + ", x_scale " +
          ShapeToString(scale.shape) + ", axis " + std::to_string(a.axis) + ", block_size " +
          std::to_string(at.block_size) + " (expected x_scale " + ShapeToString(expected) + ")");
    }
    a.granularity = Granularity::kBlocked;
  }

  // Output type.
  DType out;
  if (at.output_dtype != 0) {
    out = static_cast<DType>(at.output_dtype);
    if (!IsFloat16Or32(out)) {
      return Status::Error("attribute output_dtype " + std::to_string(at.output_dtype) +
                           " is not float32 (1), float16 (10) or bfloat16 (16)");
    }
  } else if (v < 19) {
    out = DType::kFloat32;
  } else if (scale.dtype == DType::kFloat8E8M0) {
    return Status::Error("attribute output_dtype is required when x_scale is float8e8m0");
  } else {
    out = scale.dtype;
  }
  a.output.dtype = out;
  a.output.shape = x.shape;
  return a;
}

}  // namespace

int OnnxDequantizeVersion(int64_t model_opset) {
  for (int v : {25, 24, 23, 21, 19, 13, 10}) {
    if (model_opset >= v) return v;
  }
  return 0;
}

StatusOr<OutputInfo> InferOnnxOutput(const OnnxDequantizeAttributes& attrs, const TensorView& x,
                                     const TensorView& scale, const TensorView* zero_point,
                                     const std::string& name) {
  auto a = Analyze(attrs, x, scale, zero_point);
  if (!a.ok()) return a.status().WithPrefix(Who("DequantizeLinear", name));
  return a->output;
}

StatusOr<Dequantizer> PrepareOnnx(const OnnxDequantizeAttributes& attrs, const TensorView& x,
                                  const TensorView& scale, const TensorView* zero_point,
                                  const DequantizeOptions& options) try {
  const std::string who = Who("DequantizeLinear", options.name);
  auto analysis = Analyze(attrs, x, scale, zero_point);
  if (!analysis.ok()) return analysis.status().WithPrefix(who);
  Analysis a = *analysis;
  if (options.convert_output != DType::kUndefined) {
    if (options.convert_output != DType::kFloat32 && options.convert_output != DType::kFloat16 &&
        options.convert_output != DType::kBFloat16) {
      return Status::Error(who + ": output type must be float32, float16 or bfloat16 (got " +
                           DTypeName(options.convert_output) + ")");
    }
    a.output.dtype = options.convert_output;
  }
  if (options.output_dtype != DType::kUndefined && options.output_dtype != a.output.dtype) {
    return Status::Error(who + ": requested output type " + DTypeName(options.output_dtype) +
                         " differs from the node's " + DTypeName(a.output.dtype));
  }
  auto x_n = internal::CheckView(x, "input x");
  if (!x_n.ok()) return x_n.status().WithPrefix(who);

  Plan plan;
  Dequantizer::Storage storage;
  plan.code = CodeFor(x.dtype);
  plan.codes = static_cast<const uint8_t*>(x.data);
  plan.out = *internal::OutTypeFor(a.output.dtype, "output type");
  const Shape& d = x.shape;
  const size_t rank = d.size();
  auto prod = [&](size_t from, size_t to) {
    int64_t p = 1;
    for (size_t k = from; k < to; ++k) p *= d[k];
    return p;
  };
  switch (a.granularity) {
    case Granularity::kPerTensor:
      // Rows along the last dim; every element shares scale index 0.
      plan.outer = rank ? prod(0, rank - 1) : 1;
      plan.axis = rank ? d[rank - 1] : 1;
      plan.inner = 1;
      plan.group = plan.axis > 0 ? plan.axis : 1;
      break;
    case Granularity::kPerAxis: {
      const size_t ax = static_cast<size_t>(a.axis);
      plan.outer = prod(0, ax);
      plan.axis = d[ax];
      plan.inner = prod(ax + 1, rank);
      plan.group = 1;
      plan.s_axis = 1;
      break;
    }
    case Granularity::kBlocked: {
      const size_t ax = static_cast<size_t>(a.axis);
      plan.outer = prod(0, ax);
      plan.axis = d[ax];
      plan.inner = prod(ax + 1, rank);
      plan.group = attrs.block_size;
      const int64_t nb = plan.axis / plan.group + (plan.axis % plan.group != 0);
      plan.s_outer = nb * plan.inner;
      plan.s_axis = plan.inner;
      plan.s_inner = 1;
      break;
    }
  }
  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(scale, "input x_scale", &storage.scale, &plan.scale,
                           internal::ScaleFactsFor(plan.out, &storage.scale_facts))
          .WithPrefix(who));

  if (a.zp_present && x.dtype != DType::kFloat4E2M1) {  // float4 zero points are ignored
    if (IsFloat8(x.dtype)) {
      // Must be all zero: then y = x * s, the plan's no-zero-point form.
      auto zn = internal::CheckView(*zero_point, "input x_zero_point");
      if (!zn.ok()) return zn.status().WithPrefix(who);
      const auto* zb = static_cast<const uint8_t*>(zero_point->data);
      for (int64_t k = 0; k < *zn; ++k) {
        const uint8_t b = zb[k];
        const bool zero = x.dtype == DType::kFloat8E4M3FNUZ || x.dtype == DType::kFloat8E5M2FNUZ
                              ? b == 0
                              : (b & 0x7F) == 0;
        if (!zero) {
          return Status::Error(who + ": x_zero_point must be zero for " + DTypeName(x.dtype) +
                               " input (byte 0x" + std::string(1, "0123456789abcdef"[b >> 4]) +
                               std::string(1, "0123456789abcdef"[b & 15]) + " at flat index " +
                               std::to_string(k) + ")");
        }
      }
    } else {
      plan.zp_kind = ZeroPointKind::kInteger;
      NIBBLE_RETURN_IF_ERROR(internal::WidenIntegerZeroPoint(*zero_point, "input x_zero_point",
                                                             &storage.zp_int, &plan.zp_int)
                                 .WithPrefix(who));
    }
  }
  Dequantizer deq(plan, std::move(storage), a.output, options.name);
  deq.set_inputs({Dequantizer::InputOf("input x", &x),
                  Dequantizer::InputOf("input x_scale", &scale),
                  Dequantizer::InputOf("input x_zero_point", zero_point)});
  return deq;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareOnnx");
}

StatusOr<Tensor> DequantizeOnnx(const OnnxDequantizeAttributes& attrs, const TensorView& x,
                                const TensorView& scale, const TensorView* zero_point,
                                const DequantizeOptions& options) try {
  ScopedPrepareThreads prepare_threads(options.threads);
  auto d = PrepareOnnx(attrs, x, scale, zero_point, options);
  if (!d.ok()) return d.status();
  return d->Run(options.threads);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantizeOnnx");
}

}  // namespace nibble
