#include "op/directml.h"

#include <new>
#include <vector>

#include "op/lowering.h"

namespace nibble {

namespace {

using internal::Who;

CodeKind InputCode(DType t, bool* ok) {
  *ok = true;
  switch (t) {
    case DType::kInt8:
      return CodeKind::kS8;
    case DType::kUInt8:
      return CodeKind::kU8;
    case DType::kInt16:
      return CodeKind::kS16;
    case DType::kUInt16:
      return CodeKind::kU16;
    case DType::kInt32:
      return CodeKind::kS32;
    case DType::kUInt32:
      return CodeKind::kU32;
    default:
      *ok = false;
      return CodeKind::kU8;
  }
}

// `s` right-aligned to rank `r` (leading 1s); error unless it broadcasts to
// `d` (each dim 1 or equal).
StatusOr<Shape> Aligned(const Shape& s, const Shape& d, const std::string& what) {
  if (s.size() > d.size()) {
    return Status::Error(what + " shape " + ShapeToString(s) + " has more dims than input " +
                         ShapeToString(d));
  }
  Shape a(d.size() - s.size(), 1);
  a.insert(a.end(), s.begin(), s.end());
  for (size_t k = 0; k < d.size(); ++k) {
    if (a[k] != 1 && a[k] != d[k]) {
      return Status::Error(what + " shape " + ShapeToString(s) + " does not broadcast to input " +
                           ShapeToString(d) + " (dim " + std::to_string(k) + ": " +
                           std::to_string(a[k]) + " vs " + std::to_string(d[k]) + ")");
    }
  }
  return a;
}

// Dims where the aligned shape varies (is not a broadcast 1).
std::vector<bool> Varying(const Shape& a, const Shape& d) {
  std::vector<bool> v(d.size());
  for (size_t k = 0; k < d.size(); ++k) v[k] = a[k] == d[k] && d[k] != 1;
  return v;
}

// Index into a tensor of aligned shape `a` for each element of `d`.
template <typename Fn>
void ForEachBroadcastIndex(const Shape& a, const Shape& d, Fn fn) {
  const size_t r = d.size();
  std::vector<int64_t> stride(r, 0), idx(r, 0);
  int64_t s = 1;
  for (size_t k = r; k-- > 0;) {
    stride[k] = a[k] == 1 ? 0 : s;
    s *= a[k];
  }
  int64_t n = 1;
  for (auto v : d) n *= v;
  int64_t off = 0;
  for (int64_t e = 0; e < n; ++e) {
    fn(e, off);
    for (size_t k = r; k-- > 0;) {  // odometer
      ++idx[k];
      off += stride[k];
      if (idx[k] < d[k]) break;
      off -= stride[k] * idx[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

StatusOr<Dequantizer> PrepareBroadcastDequantize(const TensorView& input, const TensorView& scale,
                                                 const TensorView* zero_point, DType output_dtype,
                                                 const std::string& name) try {
  const std::string who = Who("DequantizeLinear (element-wise)", name);
  auto fail = [&](const Status& s) { return s.WithPrefix(who); };
  bool ok;
  const CodeKind code = InputCode(input.dtype, &ok);
  if (!ok) {
    return Status::Error(who + ": input must be int8, int16, int32, uint8, uint16 or uint32 (got " +
                         DTypeName(input.dtype) + ")");
  }
  if (!IsFloat16Or32(scale.dtype)) {
    return Status::Error(who + ": scale must be float32 or float16 (got " + DTypeName(scale.dtype) +
                         ")");
  }
  const bool has_zp = zero_point != nullptr && zero_point->dtype != DType::kUndefined;
  if (has_zp && zero_point->dtype != input.dtype) {
    return Status::Error(who + ": zero point type " + DTypeName(zero_point->dtype) +
                         " must equal the input type " + DTypeName(input.dtype));
  }
  const DType out = internal::ResolveOutDType(output_dtype, scale.dtype);
  auto out_type = internal::OutTypeFor(out, "output type");
  if (!out_type.ok()) return fail(out_type.status());
  auto n = internal::CheckView(input, "input");
  if (!n.ok()) return fail(n.status());
  const Shape& d = input.shape;
  auto sa = Aligned(scale.shape, d, "scale");
  if (!sa.ok()) return fail(sa.status());
  Shape za = *sa;
  if (has_zp) {
    auto z = Aligned(zero_point->shape, d, "zero point");
    if (!z.ok()) return fail(z.status());
    za = *z;
  }

  Plan plan;
  Dequantizer::Storage storage;
  plan.code = code;
  plan.codes = static_cast<const uint8_t*>(input.data);
  plan.out = *out_type;
  const float* scale_f = nullptr;
  NIBBLE_RETURN_IF_ERROR(
      fail(internal::WidenScale(scale, "scale", &storage.scale, &scale_f,
                                internal::ScaleFactsFor(plan.out, &storage.scale_facts))));
  const int32_t* zp_i = nullptr;
  if (has_zp) {
    NIBBLE_RETURN_IF_ERROR(
        fail(internal::WidenIntegerZeroPoint(*zero_point, "zero point", &storage.zp_int, &zp_i)));
    plan.zp_kind = ZeroPointKind::kInteger;
  }

  const std::vector<bool> vs = Varying(*sa, d), vz = Varying(za, d);
  // The run of varying dims [a0, a1), if contiguous and shared.
  size_t a0 = d.size(), a1 = d.size();
  for (size_t k = 0; k < d.size(); ++k) {
    if (vs[k]) {
      if (a0 == d.size()) a0 = k;
      a1 = k + 1;
    }
  }
  bool contiguous = vs == vz;
  for (size_t k = a0; k < a1 && contiguous; ++k) contiguous = vs[k];
  auto prod = [&](size_t from, size_t to) {
    int64_t p = 1;
    for (size_t k = from; k < to; ++k) p *= d[k];
    return p;
  };
  const size_t r = d.size();
  if (contiguous) {
    if (a0 == r) {  // nothing varies: per-tensor, rows along the last dim
      plan.outer = r ? prod(0, r - 1) : 1;
      plan.axis = r ? d[r - 1] : 1;
      plan.inner = 1;
      plan.group = plan.axis > 0 ? plan.axis : 1;
    } else {  // per-axis over the flattened run
      plan.outer = prod(0, a0);
      plan.axis = prod(a0, a1);
      plan.inner = prod(a1, r);
      plan.group = 1;
      plan.s_axis = 1;
    }
    plan.scale = scale_f;
    plan.zp_int = zp_i;
  } else {
    // Materialize the broadcast operands to the input's size; one scale per
    // element (rows along the last dim).
    ParamVector<float> s_full(static_cast<size_t>(*n ? *n : 1));
    ParamVector<int32_t> z_full(has_zp ? s_full.size() : 0);
    ForEachBroadcastIndex(
        *sa, d, [&](int64_t e, int64_t off) { s_full[static_cast<size_t>(e)] = scale_f[off]; });
    if (has_zp) {
      ForEachBroadcastIndex(
          za, d, [&](int64_t e, int64_t off) { z_full[static_cast<size_t>(e)] = zp_i[off]; });
    }
    storage.scale = std::move(s_full);
    storage.zp_int = std::move(z_full);
    plan.outer = r ? prod(0, r - 1) : 1;
    plan.axis = r ? d[r - 1] : 1;
    plan.inner = 1;
    plan.group = 1;
    plan.s_outer = plan.axis;
    plan.s_axis = 1;
    plan.scale = storage.scale.data();
    plan.zp_int = has_zp ? storage.zp_int.data() : nullptr;
  }
  Dequantizer deq(plan, std::move(storage), OutputInfo{out, d}, name);
  deq.set_inputs({Dequantizer::InputOf("input", &input), Dequantizer::InputOf("scale", &scale),
                  Dequantizer::InputOf("zero point", zero_point)});
  return deq;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareBroadcastDequantize");
}

StatusOr<Tensor> BroadcastDequantize(const TensorView& input, const TensorView& scale,
                                     const TensorView* zero_point, DType output_dtype,
                                     const std::string& name, int threads) {
  auto d = PrepareBroadcastDequantize(input, scale, zero_point, output_dtype, name);
  if (!d.ok()) return d.status();
  return d->Run(threads);
}

}  // namespace nibble
