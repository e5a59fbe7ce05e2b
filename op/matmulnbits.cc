#include "op/matmulnbits.h"

#include <limits>
#include <new>
#include <vector>

#include "formats/int4_packing.h"
#include "op/lowering.h"

namespace nibble {

Status ValidateMatMulNBitsAttributes(const MatMulNBitsAttributes& a, const std::string& who) {
  auto fail = [&](const std::string& m) { return Status::Error(who + ": " + m); };
  if (a.bits != 4 && a.bits != 8) {
    return fail("attribute bits must be 4 or 8 (got " + std::to_string(a.bits) + ")");
  }
  if (a.weight_prepacked != 0) {
    return fail("attribute weight_prepacked = " + std::to_string(a.weight_prepacked) +
                " (a device-specific layout) is not supported");
  }
  if (a.K <= 0 || a.N <= 0) {
    return fail("attributes K and N must be positive (got K " + std::to_string(a.K) + ", N " +
                std::to_string(a.N) + ")");
  }
  if (a.block_size < 16 || (a.block_size & (a.block_size - 1)) != 0 || a.block_size > (1 << 20)) {
    return fail("attribute block_size must be a power of two >= 16 (got " +
                std::to_string(a.block_size) + ")");
  }
  constexpr int64_t kMaxDim = int64_t{1} << 40;
  if (a.K > kMaxDim || a.N > kMaxDim) {
    return fail("K " + std::to_string(a.K) + " or N " + std::to_string(a.N) + " exceeds 2^40");
  }
  if (a.K > std::numeric_limits<int64_t>::max() / 8 / a.N) {
    return fail("K * N = " + std::to_string(a.K) + " * " + std::to_string(a.N) +
                " elements is too large");
  }
  return Status::Ok();
}

StatusOr<Dequantizer> PrepareMatMulNBits(const MatMulNBitsAttributes& a, const TensorView& b,
                                         const TensorView& scales, const TensorView* zp,
                                         const std::string& name, DType out) try {
  const std::string who = internal::Who("com.microsoft::MatMulNBits", name);
  auto fail = [&](const std::string& m) { return Status::Error(who + ": " + m); };
  if (out != DType::kUndefined && out != DType::kFloat32 && out != DType::kFloat16 &&
      out != DType::kBFloat16) {
    return fail("output type must be float32, float16 or bfloat16 (got " + DTypeName(out) + ")");
  }
  NIBBLE_RETURN_IF_ERROR(ValidateMatMulNBitsAttributes(a, who));
  const int64_t kb = (a.K + a.block_size - 1) / a.block_size;
  const int64_t blob = a.block_size * a.bits / 8;
  if (b.dtype != DType::kUInt8)
    return fail("input B must be uint8 (got " + DTypeName(b.dtype) + ")");
  if (b.shape != Shape{a.N, kb, blob}) {
    return fail("input B shape " + ShapeToString(b.shape) + " does not match K " +
                std::to_string(a.K) + ", N " + std::to_string(a.N) + ", bits " +
                std::to_string(a.bits) + ", block_size " + std::to_string(a.block_size) +
                " (expected " + ShapeToString({a.N, kb, blob}) + ")");
  }
  auto bn = internal::CheckView(b, "input B");
  if (!bn.ok()) return bn.status().WithPrefix(who);
  if (!IsFloat16Or32(scales.dtype)) {
    return fail("input scales must be float32, float16 or bfloat16 (got " +
                DTypeName(scales.dtype) + ")");
  }
  if (scales.shape != Shape{a.N, kb} && scales.shape != Shape{a.N * kb}) {
    return fail("input scales shape " + ShapeToString(scales.shape) + " must be " +
                ShapeToString({a.N, kb}) + " (or " + ShapeToString({a.N * kb}) + ")");
  }

  Plan plan;
  Dequantizer::Storage storage;
  plan.code = a.bits == 4 ? CodeKind::kU4 : CodeKind::kU8;
  plan.codes = static_cast<const uint8_t*>(b.data);
  const DType out_dtype = out == DType::kUndefined ? scales.dtype : out;
  plan.out = *internal::OutTypeFor(out_dtype, "output type");
  plan.outer = a.N;
  plan.axis = kb * a.block_size;  // padded row length in memory
  plan.inner = 1;
  plan.group = a.block_size;
  plan.s_outer = kb;
  plan.s_axis = 1;
  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(scales, "input scales", &storage.scale, &plan.scale,
                           internal::ScaleFactsFor(plan.out, &storage.scale_facts))
          .WithPrefix(who));

  const bool has_zp = zp != nullptr && zp->dtype != DType::kUndefined;
  if (!has_zp) {
    plan.code_offset = 1 << (a.bits - 1);
  } else if (zp->dtype == DType::kUInt8) {
    const int64_t zrow = (kb * a.bits + 7) / 8;
    if (zp->shape != Shape{a.N, zrow} && zp->shape != Shape{a.N * zrow}) {
      return fail("input zero_points (uint8) shape " + ShapeToString(zp->shape) + " must be " +
                  ShapeToString({a.N, zrow}) + " (or " + ShapeToString({a.N * zrow}) + ")");
    }
    auto zn = internal::CheckView(*zp, "input zero_points");
    if (!zn.ok()) return zn.status().WithPrefix(who);
    // Unpack per row: each row of zero points starts on a byte.
    std::vector<uint8_t> row(static_cast<size_t>(kb));
    storage.zp_int.resize(static_cast<size_t>(a.N * kb));
    const auto* zb = static_cast<const uint8_t*>(zp->data);
    for (int64_t n = 0; n < a.N; ++n) {
      UnpackDense(zb + n * zrow, kb, static_cast<int>(a.bits), row.data());
      for (int64_t k = 0; k < kb; ++k) {
        storage.zp_int[static_cast<size_t>(n * kb + k)] = row[static_cast<size_t>(k)];
      }
    }
    plan.zp_kind = ZeroPointKind::kInteger;
    plan.zp_int = storage.zp_int.data();
  } else {
    if (zp->dtype != scales.dtype) {
      return fail("input zero_points must be uint8 or " + DTypeName(scales.dtype) +
                  " like the scales (got " + DTypeName(zp->dtype) + ")");
    }
    if (zp->shape != Shape{a.N, kb} && zp->shape != Shape{a.N * kb}) {
      return fail("input zero_points shape " + ShapeToString(zp->shape) + " must be " +
                  ShapeToString({a.N, kb}) + " (or " + ShapeToString({a.N * kb}) + ")");
    }
    plan.zp_kind = ZeroPointKind::kFloatSubtract;
    NIBBLE_RETURN_IF_ERROR(
        internal::WidenFloatZeroPoint(*zp, "input zero_points", &storage.zp_float, &plan.zp_float)
            .WithPrefix(who));
  }
  Dequantizer d(plan, std::move(storage), OutputInfo{out_dtype, {a.N, a.K}}, name, a.K);
  d.set_inputs({Dequantizer::InputOf("input B", &b), Dequantizer::InputOf("input scales", &scales),
                Dequantizer::InputOf("input zero_points", zp)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareMatMulNBits");
}

}  // namespace nibble
