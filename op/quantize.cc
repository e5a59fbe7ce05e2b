#include "op/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "formats/int4_packing.h"
#include "kernels/numeric.h"

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

StatusOr<QuantizedWeight> QuantizePmx(const float* w, const Shape& shape,
                                      const QuantizeConfig& cfg) {
  if (cfg.bits != 4 && cfg.bits != 8) {
    return Status::Error("quantize: bits must be 4 or 8 (got " + std::to_string(cfg.bits) + ")");
  }
  if (cfg.quant_axis != 0 && cfg.quant_axis != 1) {
    return Status::Error("quantize: quant_axis must be 0 or 1");
  }
  if (shape.empty() || (cfg.quant_axis == 1 && shape.size() < 2)) {
    return Status::Error("quantize: shape " + ShapeToString(shape) + " has too few dims");
  }
  auto n_or = CheckedNumElements(shape, "quantize: weight");
  if (!n_or.ok()) return n_or.status();
  const int64_t n = *n_or;
  const size_t qa = static_cast<size_t>(cfg.quant_axis);
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < qa; ++k) outer *= shape[k];
  const int64_t axis = shape[qa];
  for (size_t k = qa + 1; k < shape.size(); ++k) inner *= shape[k];
  const int p = cfg.int4x8 ? 8 : 4;
  if (cfg.bits == 4 && shape[0] % p != 0) {
    return Status::Error("quantize: int4 needs dim 0 (" + std::to_string(shape[0]) +
                         ") divisible by " + std::to_string(p));
  }
  int64_t g = cfg.per_tensor ? axis : (cfg.group_size > 0 ? cfg.group_size : axis);
  if (g <= 0) g = 1;
  if (!cfg.per_tensor && cfg.group_size > 0 && axis % cfg.group_size != 0) {
    return Status::Error("quantize: dim " + std::to_string(cfg.quant_axis) + " (" +
                         std::to_string(axis) + ") is not divisible by group_size " +
                         std::to_string(cfg.group_size));
  }
  if (cfg.scale_dtype != DType::kFloat32 && cfg.scale_dtype != DType::kFloat16 &&
      cfg.scale_dtype != DType::kBFloat16) {
    return Status::Error("quantize: scale dtype must be float32, float16 or bfloat16");
  }

  QuantizedWeight q;
  q.attrs.quant_data_type = cfg.bits == 4 ? "int4" : "int8";
  q.attrs.quant_axis = cfg.quant_axis;
  q.attrs.group_size = cfg.per_tensor ? 0 : cfg.group_size;
  q.attrs.has_zeropoint = cfg.scheme == QuantScheme::kSymmetric ? 0 : 1;
  q.attrs.float_zeropoint = cfg.scheme == QuantScheme::kFloatZeroPoint ? 1 : 0;

  Shape scale_shape;
  if (cfg.per_tensor) {
    scale_shape = {1};
  } else {
    scale_shape = shape;
    scale_shape[qa] = cfg.group_size > 0 ? axis / cfg.group_size : 1;
  }
  const int64_t nb = (cfg.per_tensor || cfg.group_size <= 0) ? 1 : axis / g;
  auto scale = Tensor::Allocate(cfg.scale_dtype, scale_shape);
  if (!scale.ok()) return scale.status();
  q.scale = std::move(*scale);

  DType zp_dtype = cfg.zero_point_dtype;
  if (zp_dtype == DType::kUndefined) {
    zp_dtype = cfg.scheme == QuantScheme::kFloatZeroPoint ? DType::kFloat32 : DType::kInt8;
  }
  if (cfg.scheme != QuantScheme::kSymmetric) {
    auto zp = Tensor::Allocate(zp_dtype, scale_shape);
    if (!zp.ok()) return zp.status();
    q.zero_point = std::move(*zp);
  }

  const float qmax = cfg.bits == 4 ? 7.0f : 127.0f;    // symmetric magnitude
  const float levels = cfg.bits == 4 ? 15.0f : 255.0f;
  const int32_t lo = cfg.bits == 4 ? -8 : -128, hi = cfg.bits == 4 ? 7 : 127;
  // Signed codes (value of c - 8 for int4) per logical element.
  std::vector<int32_t> codes(static_cast<size_t>(n));

  const bool pt = cfg.per_tensor;
  const int64_t groups_outer = pt ? 1 : outer, groups_inner = pt ? 1 : inner;
  for (int64_t o = 0; o < groups_outer; ++o) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t i = 0; i < groups_inner; ++i) {
        // Visit the group's elements.
        auto for_each = [&](auto&& fn) {
          if (pt) {
            for (int64_t e = 0; e < n; ++e) fn(e);
            return;
          }
          for (int64_t a = b * g; a < (b + 1) * g; ++a) fn((o * axis + a) * inner + i);
        };
        float mn = 0.0f, mx = 0.0f, amax = 0.0f;
        for_each([&](int64_t e) {
          const float v = w[e];
          mn = std::min(mn, v);
          mx = std::max(mx, v);
          amax = std::max(amax, std::fabs(v));
        });
        const int64_t sidx = pt ? 0 : (o * nb + b) * inner + i;
        float s;
        float zf = 0.0f;
        int32_t zi = 0;
        uint16_t s16 = 0;
        if (cfg.scheme == QuantScheme::kSymmetric) {
          s = amax > 0 ? amax / qmax : 1.0f;
        } else {
          s = mx > mn ? (mx - mn) / levels : 1.0f;
        }
        s = StoredScale(s, cfg.scale_dtype, &s16);
        StoreScalar(cfg.scale_dtype, q.scale.data(), sidx, s, s16);
        if (cfg.scheme == QuantScheme::kAsymmetric) {
          // Code range [0, 15] (int4) or [-128, 127] (int8).
          const float zlo = cfg.bits == 4 ? 0.0f : -128.0f;
          const float zhi = cfg.bits == 4 ? 15.0f : 127.0f;
          zi = static_cast<int32_t>(std::clamp(RoundHalfEven(zlo - mn / s), zlo, zhi));
          switch (zp_dtype) {
            case DType::kInt32:
              std::memcpy(q.zero_point.data_as<char>() + sidx * 4, &zi, 4);
              break;
            case DType::kUInt8:
              q.zero_point.data_as<uint8_t>()[sidx] = static_cast<uint8_t>(zi);
              break;
            default:
              q.zero_point.data_as<int8_t>()[sidx] = static_cast<int8_t>(zi);
          }
          for_each([&](int64_t e) {
            const float c = std::clamp(RoundHalfEven(w[e] / s) + static_cast<float>(zi), zlo, zhi);
            // Store relative to the int4 offset so packing is uniform below.
            codes[static_cast<size_t>(e)] =
                static_cast<int32_t>(c) - (cfg.bits == 4 ? 8 : 0);
          });
        } else {
          if (cfg.scheme == QuantScheme::kFloatZeroPoint) {
            zf = (mx + mn) / 2;
            uint16_t z16 = 0;
            if (zp_dtype == DType::kFloat16) z16 = F16FromF32(zf), zf = F32FromF16(z16);
            if (zp_dtype == DType::kBFloat16) z16 = BF16FromF32(zf), zf = F32FromBF16(z16);
            StoreScalar(zp_dtype, q.zero_point.data(), sidx, zf, z16);
          }
          for_each([&](int64_t e) {
            const float c = std::clamp(RoundHalfEven((w[e] - zf) / s), static_cast<float>(lo),
                                       static_cast<float>(hi));
            codes[static_cast<size_t>(e)] = static_cast<int32_t>(c);
          });
        }
      }
    }
  }

  if (cfg.bits == 8) {
    auto x = Tensor::Allocate(DType::kInt8, shape);
    if (!x.ok()) return x.status();
    for (int64_t e = 0; e < n; ++e) {
      x->data_as<int8_t>()[e] = static_cast<int8_t>(codes[static_cast<size_t>(e)]);
    }
    q.x = std::move(*x);
  } else {
    Shape xs = shape;
    xs[0] /= p;
    auto x = Tensor::Allocate(cfg.int4x8 ? DType::kInt32 : DType::kInt16, xs);
    if (!x.ok()) return x.status();
    std::vector<uint8_t> c4(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      c4[static_cast<size_t>(e)] = static_cast<uint8_t>(codes[static_cast<size_t>(e)] + 8);
    }
    PackInt4Interleaved(c4.data(), shape[0], n / std::max<int64_t>(shape[0], 1), p, x->data());
    q.x = std::move(*x);
  }
  return q;
}

}  // namespace nibble
