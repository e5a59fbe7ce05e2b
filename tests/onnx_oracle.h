// Test oracle for ONNX DequantizeLinear and DirectML's element-wise form:
// the ONNX reference implementation's semantics (SPEC.md §3, §4) evaluated
// per element from logical indices and raw bytes, independently of the
// Plan lowering.
#ifndef NIBBLE_TESTS_ONNX_ORACLE_H_
#define NIBBLE_TESTS_ONNX_ORACLE_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/numeric.h"
#include "base/tensor.h"

namespace nibble {
namespace testing {

// Raw bits of element k of a packed tensor of type t.
inline uint64_t RawBits(const uint8_t* p, DType t, int64_t k) {
  const int bits = DTypeBits(t);
  if (bits < 8) {
    const int64_t bit = k * bits;
    return (p[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
  }
  uint64_t v = 0;
  for (int b = bits / 8 - 1; b >= 0; --b) v = (v << 8) | p[k * (bits / 8) + b];
  return v;
}

inline bool IsFloatType(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ || t == DType::kFloat4E2M1;
}

inline int64_t IntValue(DType t, uint64_t u) {
  switch (t) {
    case DType::kInt2:
      return u >= 2 ? static_cast<int64_t>(u) - 4 : static_cast<int64_t>(u);
    case DType::kInt4:
      return u >= 8 ? static_cast<int64_t>(u) - 16 : static_cast<int64_t>(u);
    case DType::kInt8:
      return static_cast<int8_t>(u);
    case DType::kInt16:
      return static_cast<int16_t>(u);
    case DType::kInt32:
      return static_cast<int32_t>(u);
    default:
      return static_cast<int64_t>(u);
  }
}

inline float FloatValue(DType t, uint64_t u) {
  const uint8_t b = static_cast<uint8_t>(u);
  switch (t) {
    case DType::kFloat8E4M3FN:
      return DecodeF8E4M3FN(b);
    case DType::kFloat8E4M3FNUZ:
      return DecodeF8E4M3FNUZ(b);
    case DType::kFloat8E5M2:
      return DecodeF8E5M2(b);
    case DType::kFloat8E5M2FNUZ:
      return DecodeF8E5M2FNUZ(b);
    case DType::kFloat4E2M1:
      return DecodeF4E2M1(b);
    case DType::kFloat32: {
      float f;
      uint32_t v = static_cast<uint32_t>(u);
      std::memcpy(&f, &v, 4);
      return f;
    }
    case DType::kFloat16:
      return F32FromF16(static_cast<uint16_t>(u));
    case DType::kBFloat16:
      return F32FromBF16(static_cast<uint16_t>(u));
    case DType::kFloat8E8M0:
      return DecodeF8E8M0(b);
    default:
      return 0;
  }
}

// Output bits (f32 bits, or f16/bf16 bits) of y = (x - zp) * scale with the
// scale/zp element chosen by `scale_index(e)`.
template <typename IndexFn>
std::vector<uint32_t> OracleOnnxBits(const TensorView& x, const TensorView& scale,
                                     const TensorView* zp, DType out, IndexFn scale_index) {
  int64_t n = 1;
  for (auto d : x.shape) n *= d;
  std::vector<uint32_t> bits(static_cast<size_t>(n));
  const auto* xp = static_cast<const uint8_t*>(x.data);
  const auto* sp = static_cast<const uint8_t*>(scale.data);
  const auto* zpp = zp ? static_cast<const uint8_t*>(zp->data) : nullptr;
  for (int64_t e = 0; e < n; ++e) {
    const int64_t si = scale_index(e);
    const float s = FloatValue(scale.dtype, RawBits(sp, scale.dtype, si));
    float v;
    if (IsFloatType(x.dtype)) {
      v = FloatValue(x.dtype, RawBits(xp, x.dtype, e)) * s;  // zero point is zero / ignored
    } else {
      const int64_t q = IntValue(x.dtype, RawBits(xp, x.dtype, e));
      const int64_t z = zpp ? IntValue(zp->dtype, RawBits(zpp, zp->dtype, si)) : 0;
      v = static_cast<float>(q - z) * s;
    }
    bits[static_cast<size_t>(e)] = out == DType::kFloat32   ? BitsFromF32(v)
                                   : out == DType::kFloat16 ? F16FromF32(v)
                                                            : BF16FromF32(v);
  }
  return bits;
}

// NaN-aware equality of output bit vectors (SPEC.md §1: NaN matches NaN).
inline bool SameBits(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, DType out,
                     int64_t* first_diff) {
  if (a.size() != b.size()) return false;
  auto nan = [&](uint32_t u) {
    if (out == DType::kFloat32) return (u & 0x7FFFFFFFu) > 0x7F800000u;
    if (out == DType::kFloat16) return (u & 0x7FFFu) > 0x7C00u;
    return (u & 0x7FFFu) > 0x7F80u;
  };
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] != b[k] && !(nan(a[k]) && nan(b[k]))) {
      *first_diff = static_cast<int64_t>(k);
      return false;
    }
  }
  return true;
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_ONNX_ORACLE_H_
