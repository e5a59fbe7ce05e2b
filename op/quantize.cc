#include "op/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "base/numeric.h"
#include "formats/int4_packing.h"

namespace nibble {

namespace {

// Rounds `s` to `t`, then moves it one step away from zero if rounding
// shrank it (so clamping never bites more than s / 2).
float StoredScale(float s, DType t, uint16_t* bits16) {
  if (t == DType::kFloat32) return s;
  const bool f16 = t == DType::kFloat16;
  const uint16_t h = f16 ? F16FromF32(s) : BF16FromF32(s);
  const float back = f16 ? F32FromF16(h) : F32FromBF16(h);
  if (std::fabs(back) >= std::fabs(s) || !std::isfinite(back)) {
    *bits16 = h;
    return back;
  }
  *bits16 = static_cast<uint16_t>(h + 1);  // next magnitude up, same sign
  return f16 ? F32FromF16(*bits16) : F32FromBF16(*bits16);
}

void StoreScalar(DType t, void* base, int64_t idx, float v, uint16_t bits16) {
  if (t == DType::kFloat32) {
    std::memcpy(static_cast<char*>(base) + idx * 4, &v, 4);
  } else {
    std::memcpy(static_cast<char*>(base) + idx * 2, &bits16, 2);
  }
}

float RoundHalfEven(float v) { return std::nearbyint(v); }

}  // namespace

namespace {

// Quantized values before packing: codes (int4: unsigned 0..15 in the PMX
// sense, zero at 8 unless a zero point says otherwise; int8: -128..127),
// scales and zero points in their storage types.
struct Quantized {
  std::vector<int32_t> codes;
  Tensor scale, zero_point;
  Shape scale_shape;
};

Status QuantizeCore(const float* w, const Shape& shape, const QuantizeConfig& cfg,
                    bool allow_ragged, Quantized* out) {
  if (cfg.bits != 4 && cfg.bits != 8) {
    return Status::Error("quantize: bits must be 4 or 8 (got " + std::to_string(cfg.bits) + ")");
  }
  if (shape.empty()) return Status::Error("quantize: the weight must have rank >= 1");
  if (cfg.quant_axis < 0 || cfg.quant_axis >= static_cast<int64_t>(shape.size())) {
    return Status::Error("quantize: quant_axis " + std::to_string(cfg.quant_axis) +
                         " is out of range for shape " + ShapeToString(shape));
  }
  auto n_or = CheckedNumElements(shape, "quantize: weight");
  if (!n_or.ok()) return n_or.status();
  const int64_t n = *n_or;
  const size_t qa = static_cast<size_t>(cfg.quant_axis);
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < qa; ++k) outer *= shape[k];
  const int64_t axis = shape[qa];
  for (size_t k = qa + 1; k < shape.size(); ++k) inner *= shape[k];
  if (cfg.group_size < 0) {
    return Status::Error("quantize: group_size must be >= 0 (got " +
                         std::to_string(cfg.group_size) + ")");
  }
  int64_t g = cfg.per_tensor ? axis : (cfg.group_size > 0 ? cfg.group_size : axis);
  if (g <= 0) g = 1;
  if (!cfg.per_tensor && cfg.group_size > 0 && axis % cfg.group_size != 0 && !allow_ragged) {
    return Status::Error("quantize: dim " + std::to_string(cfg.quant_axis) + " (" +
                         std::to_string(axis) + ") is not divisible by group_size " +
                         std::to_string(cfg.group_size));
  }
  if (!IsFloat16Or32(cfg.scale_dtype)) {
    return Status::Error("quantize: scale dtype must be float32, float16 or bfloat16");
  }
  const bool pt = cfg.per_tensor;
  const int64_t nb = pt ? 1 : (axis + g - 1) / g;
  if (pt) {
    out->scale_shape = {1};
  } else {
    out->scale_shape = shape;
    out->scale_shape[qa] = cfg.group_size > 0 ? nb : 1;
  }
  auto scale = Tensor::Allocate(cfg.scale_dtype, out->scale_shape);
  if (!scale.ok()) return scale.status();
  out->scale = std::move(*scale);

  DType zp_dtype = cfg.zero_point_dtype;
  if (zp_dtype == DType::kUndefined) {
    zp_dtype = cfg.scheme == QuantScheme::kFloatZeroPoint ? DType::kFloat32 : DType::kInt8;
  }
  if (cfg.scheme != QuantScheme::kSymmetric) {
    auto zp = Tensor::Allocate(zp_dtype, out->scale_shape);
    if (!zp.ok()) return zp.status();
    out->zero_point = std::move(*zp);
  }

  const float qmax = cfg.bits == 4 ? 7.0f : 127.0f;  // symmetric magnitude
  const float levels = cfg.bits == 4 ? 15.0f : 255.0f;
  const float lo = cfg.bits == 4 ? -8.0f : -128.0f, hi = cfg.bits == 4 ? 7.0f : 127.0f;
  const int32_t offset = cfg.bits == 4 ? 8 : 0;  // int4 codes are stored unsigned
  out->codes.assign(static_cast<size_t>(n), 0);

  const int64_t groups_outer = pt ? 1 : outer, groups_inner = pt ? 1 : inner;
  for (int64_t o = 0; o < groups_outer; ++o) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t i = 0; i < groups_inner; ++i) {
        auto for_each = [&](auto&& fn) {
          if (pt) {
            for (int64_t e = 0; e < n; ++e) fn(e);
            return;
          }
          const int64_t a_end = std::min(axis, (b + 1) * g);
          for (int64_t a = b * g; a < a_end; ++a) fn((o * axis + a) * inner + i);
        };
        float mn = 0.0f, mx = 0.0f, amax = 0.0f;  // ranges include 0
        for_each([&](int64_t e) {
          const float v = w[e];
          mn = std::min(mn, v);
          mx = std::max(mx, v);
          amax = std::max(amax, std::fabs(v));
        });
        const int64_t sidx = pt ? 0 : (o * (cfg.group_size > 0 ? nb : 1) + b) * inner + i;
        uint16_t s16 = 0;
        float s = cfg.scheme == QuantScheme::kSymmetric ? (amax > 0 ? amax / qmax : 1.0f)
                                                        : (mx > mn ? (mx - mn) / levels : 1.0f);
        s = StoredScale(s, cfg.scale_dtype, &s16);
        StoreScalar(cfg.scale_dtype, out->scale.data(), sidx, s, s16);
        if (cfg.scheme == QuantScheme::kAsymmetric) {
          // Code range [0, 15] (int4) or [-128, 127] (int8).
          const float zlo = cfg.bits == 4 ? 0.0f : -128.0f;
          const float zhi = cfg.bits == 4 ? 15.0f : 127.0f;
          const int32_t zi =
              static_cast<int32_t>(std::clamp(RoundHalfEven(zlo - mn / s), zlo, zhi));
          switch (zp_dtype) {
            case DType::kInt32:
              std::memcpy(out->zero_point.data_as<char>() + sidx * 4, &zi, 4);
              break;
            case DType::kUInt8:
              out->zero_point.data_as<uint8_t>()[sidx] = static_cast<uint8_t>(zi);
              break;
            default:
              out->zero_point.data_as<int8_t>()[sidx] = static_cast<int8_t>(zi);
          }
          for_each([&](int64_t e) {
            out->codes[static_cast<size_t>(e)] = static_cast<int32_t>(
                std::clamp(RoundHalfEven(w[e] / s) + static_cast<float>(zi), zlo, zhi));
          });
        } else {
          float zf = 0.0f;
          if (cfg.scheme == QuantScheme::kFloatZeroPoint) {
            zf = (mx + mn) / 2;
            uint16_t z16 = 0;
            if (zp_dtype == DType::kFloat16) z16 = F16FromF32(zf), zf = F32FromF16(z16);
            if (zp_dtype == DType::kBFloat16) z16 = BF16FromF32(zf), zf = F32FromBF16(z16);
            StoreScalar(zp_dtype, out->zero_point.data(), sidx, zf, z16);
          }
          for_each([&](int64_t e) {
            out->codes[static_cast<size_t>(e)] =
                static_cast<int32_t>(std::clamp(RoundHalfEven((w[e] - zf) / s), lo, hi)) + offset;
          });
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<QuantizedWeight> QuantizePmx(const float* w, const Shape& shape,
                                      const QuantizeConfig& cfg) try {
  if (cfg.quant_axis != 0 && cfg.quant_axis != 1) {
    return Status::Error("quantize: quant_axis must be 0 or 1");
  }
  if (shape.empty() || (cfg.quant_axis == 1 && shape.size() < 2)) {
    return Status::Error("quantize: shape " + ShapeToString(shape) + " has too few dims");
  }
  const int p = cfg.int4x8 ? 8 : 4;
  if (cfg.bits == 4 && shape[0] % p != 0) {
    return Status::Error("quantize: int4 needs dim 0 (" + std::to_string(shape[0]) +
                         ") divisible by " + std::to_string(p));
  }
  Quantized qz;
  NIBBLE_RETURN_IF_ERROR(QuantizeCore(w, shape, cfg, /*allow_ragged=*/false, &qz));
  QuantizedWeight q;
  q.attrs.quant_data_type = cfg.bits == 4 ? "int4" : "int8";
  q.attrs.quant_axis = cfg.quant_axis;
  q.attrs.group_size = cfg.per_tensor ? 0 : cfg.group_size;
  q.attrs.has_zeropoint = cfg.scheme == QuantScheme::kSymmetric ? 0 : 1;
  q.attrs.float_zeropoint = cfg.scheme == QuantScheme::kFloatZeroPoint ? 1 : 0;
  q.scale = std::move(qz.scale);
  q.zero_point = std::move(qz.zero_point);
  const int64_t n = static_cast<int64_t>(qz.codes.size());
  if (cfg.bits == 8) {
    auto x = Tensor::Allocate(DType::kInt8, shape);
    if (!x.ok()) return x.status();
    for (int64_t e = 0; e < n; ++e) {
      x->data_as<int8_t>()[e] = static_cast<int8_t>(qz.codes[static_cast<size_t>(e)]);
    }
    q.x = std::move(*x);
  } else {
    Shape xs = shape;
    xs[0] /= p;
    auto x = Tensor::Allocate(cfg.int4x8 ? DType::kInt32 : DType::kInt16, xs);
    if (!x.ok()) return x.status();
    std::vector<uint8_t> c4(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      c4[static_cast<size_t>(e)] = static_cast<uint8_t>(qz.codes[static_cast<size_t>(e)]);
    }
    PackInt4Interleaved(c4.data(), shape[0], n / std::max<int64_t>(shape[0], 1), p, x->data());
    q.x = std::move(*x);
  }
  return q;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizePmx");
}

StatusOr<OnnxQuantizedWeight> QuantizeOnnx(const float* w, const Shape& shape,
                                           const QuantizeConfig& cfg) try {
  if (cfg.scheme == QuantScheme::kFloatZeroPoint) {
    return Status::Error("quantize: ONNX DequantizeLinear has no float zero point");
  }
  if (!cfg.per_tensor && cfg.group_size == 0 && shape.size() != 2) {
    return Status::Error("quantize: ONNX per-axis form needs a rank-2 weight");
  }
  QuantizeConfig c = cfg;
  // Zero points take the codes' type.
  c.zero_point_dtype = cfg.bits == 8 ? DType::kInt8 : DType::kInt32;
  Quantized qz;
  NIBBLE_RETURN_IF_ERROR(QuantizeCore(w, shape, c, /*allow_ragged=*/true, &qz));
  OnnxQuantizedWeight q;
  const bool sym = cfg.scheme == QuantScheme::kSymmetric;
  const int64_t n = static_cast<int64_t>(qz.codes.size());
  if (cfg.per_tensor) {
    q.attrs.axis = 1;
  } else if (cfg.group_size > 0) {
    q.attrs.axis = cfg.quant_axis;
    q.attrs.block_size = cfg.group_size;
    q.attrs.has_axis = q.attrs.has_block_size = true;
  } else {
    // Per-channel: one scale per index of the other axis (a 1-D scale).
    q.attrs.axis = 1 - cfg.quant_axis;
    q.attrs.has_axis = true;
    qz.scale_shape = {shape[static_cast<size_t>(1 - cfg.quant_axis)]};
  }
  const DType xt = cfg.bits == 8 ? DType::kInt8 : (sym ? DType::kInt4 : DType::kUInt4);
  auto x = Tensor::Allocate(xt, shape);
  if (!x.ok()) return x.status();
  if (cfg.bits == 8) {
    for (int64_t e = 0; e < n; ++e) {
      x->data_as<int8_t>()[e] = static_cast<int8_t>(qz.codes[static_cast<size_t>(e)]);
    }
  } else {
    // Symmetric: int4 value c - 8 (two's complement nibble c ^ 8);
    // asymmetric: uint4 c with a uint4 zero point.
    std::vector<uint8_t> nib(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      const uint32_t c = static_cast<uint32_t>(qz.codes[static_cast<size_t>(e)]);
      nib[static_cast<size_t>(e)] = static_cast<uint8_t>(sym ? (c ^ 8u) : c);
    }
    PackDense(nib.data(), n, 4, x->data_as<uint8_t>());
  }
  q.x = std::move(*x);
  // The scale keeps its values; reshape (per-axis) by copying bytes.
  auto scale = Tensor::Allocate(qz.scale.dtype(), qz.scale_shape);
  if (!scale.ok()) return scale.status();
  std::memcpy(scale->data(), qz.scale.data(), qz.scale.size_bytes());
  q.scale = std::move(*scale);
  if (!sym) {
    auto zp = Tensor::Allocate(xt, qz.scale_shape);
    if (!zp.ok()) return zp.status();
    const int64_t nz = *CheckedNumElements(qz.scale_shape, "zero point");
    std::vector<uint8_t> zb(static_cast<size_t>(nz));
    for (int64_t k = 0; k < nz; ++k) {
      const int32_t z =
          cfg.bits == 8 ? qz.zero_point.data_as<int8_t>()[k] : qz.zero_point.data_as<int32_t>()[k];
      zb[static_cast<size_t>(k)] = static_cast<uint8_t>(z);
    }
    if (cfg.bits == 8) {
      std::memcpy(zp->data(), zb.data(), zb.size());
    } else {
      PackDense(zb.data(), nz, 4, zp->data_as<uint8_t>());
    }
    q.zero_point = std::move(*zp);
  }
  return q;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizeOnnx");
}

}  // namespace nibble
