// Test oracle: SPEC.md §2 evaluated in logical coordinates, independently of
// the Plan lowering (it never builds a Plan). Tests compare the operator's
// output with this bit for bit.
#ifndef NIBBLE_TESTS_PMX_ORACLE_H_
#define NIBBLE_TESTS_PMX_ORACLE_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "base/tensor.h"
#include "formats/int4_packing.h"
#include "op/pmx.h"

namespace nibble {
namespace testing {

// A PMX request in logical form, and its packed tensors.
struct PmxCase {
  PmxAttributes attrs;
  Shape d;                 // logical shape
  std::vector<int32_t> q;  // logical codes: int4 unsigned 0..15; int8 -128..127
  Shape scale_shape;
  std::vector<float> scale;  // values (exactly representable in scale_dtype)
  DType scale_dtype = DType::kFloat32;
  std::vector<int32_t> zp_int;  // integer zero point values (has_zeropoint, !float)
  std::vector<float> zp_float;  // float zero point values (float_zeropoint)
  DType zp_dtype = DType::kUndefined;
  bool int4x8 = false;
  // Packed inputs (filled by Pack()).
  Tensor x, scale_t, zp_t;

  bool has_zp() const { return attrs.has_zeropoint == 1; }
  const TensorView* zp_view(TensorView* store) const {
    if (!has_zp()) return nullptr;
    *store = zp_t.view();
    return store;
  }
};

inline int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

inline void PutScalar(Tensor* t, int64_t k, float v) {
  switch (t->dtype()) {
    case DType::kFloat32:
      std::memcpy(t->data_as<char>() + 4 * k, &v, 4);
      break;
    case DType::kFloat16: {
      uint16_t h = F16FromF32(v);
      std::memcpy(t->data_as<char>() + 2 * k, &h, 2);
      break;
    }
    case DType::kBFloat16: {
      uint16_t h = BF16FromF32(v);
      std::memcpy(t->data_as<char>() + 2 * k, &h, 2);
      break;
    }
    default:
      break;
  }
}

// Packs the logical case into the operator's input tensors.
inline void Pack(PmxCase* c) {
  const int64_t n = NumElements(c->d);
  const bool int4 = c->attrs.quant_data_type == "int4";
  if (int4) {
    const int p = c->int4x8 ? 8 : 4;
    Shape xs = c->d;
    xs[0] /= p;
    c->x = *Tensor::Allocate(c->int4x8 ? DType::kInt32 : DType::kInt16, xs);
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
      codes[static_cast<size_t>(k)] = static_cast<uint8_t>(c->q[static_cast<size_t>(k)]);
    PackInt4Interleaved(codes.data(), c->d[0], c->d[0] ? n / c->d[0] : 0, p, c->x.data());
  } else {
    c->x = *Tensor::Allocate(DType::kInt8, c->d);
    for (int64_t k = 0; k < n; ++k)
      c->x.data_as<int8_t>()[k] = static_cast<int8_t>(c->q[static_cast<size_t>(k)]);
  }
  c->scale_t = *Tensor::Allocate(c->scale_dtype, c->scale_shape);
  for (size_t k = 0; k < c->scale.size(); ++k)
    PutScalar(&c->scale_t, static_cast<int64_t>(k), c->scale[k]);
  if (c->has_zp()) {
    c->zp_t = *Tensor::Allocate(c->zp_dtype, c->scale_shape);
    for (size_t k = 0; k < c->scale.size(); ++k) {
      switch (c->zp_dtype) {
        case DType::kInt8:
          c->zp_t.data_as<int8_t>()[k] = static_cast<int8_t>(c->zp_int[k]);
          break;
        case DType::kUInt8:
          c->zp_t.data_as<uint8_t>()[k] = static_cast<uint8_t>(c->zp_int[k]);
          break;
        case DType::kInt32:
          c->zp_t.data_as<int32_t>()[k] = c->zp_int[k];
          break;
        default:
          PutScalar(&c->zp_t, static_cast<int64_t>(k), c->zp_float[k]);
      }
    }
  }
}

// Flat scale index of logical element e (SPEC.md §2 granularity rules).
inline int64_t ScaleIndex(const PmxCase& c, int64_t e) {
  const size_t rank = c.d.size();
  std::vector<int64_t> idx(rank);
  for (size_t k = rank; k-- > 0;) {
    idx[k] = e % c.d[k];
    e /= c.d[k];
  }
  const size_t qa = static_cast<size_t>(c.attrs.quant_axis);
  if (NumElements(c.scale_shape) == 1 && c.attrs.group_size == 0) return 0;
  if (c.attrs.group_size > 0) {
    idx[qa] /= c.attrs.group_size;
  } else if (c.scale_shape.size() == 1 && rank == 2) {
    return idx[1 - qa];  // rank-1 per-channel form
  } else {
    idx[qa] = 0;
  }
  int64_t s = 0;
  for (size_t k = 0; k < rank; ++k) s = s * c.scale_shape[k] + idx[k];
  return s;
}

// float32 value of every logical element (before output rounding).
inline std::vector<float> OracleValues(const PmxCase& c) {
  const int64_t n = NumElements(c.d);
  const bool int4 = c.attrs.quant_data_type == "int4";
  const bool fz = c.attrs.float_zeropoint == 1;
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const size_t si = static_cast<size_t>(ScaleIndex(c, e));
    const int32_t q = c.q[static_cast<size_t>(e)];
    const float s = c.scale[si];
    float v;
    if (c.has_zp() && !fz) {
      v = static_cast<float>(q - c.zp_int[si]) * s;
    } else {
      const int32_t centered = int4 ? q - 8 : q;
      volatile float prod = static_cast<float>(centered) * s;
      v = fz ? prod + c.zp_float[si] : prod;
    }
    y[static_cast<size_t>(e)] = v;
  }
  return y;
}

// Output bits of the oracle in `out` type, as raw uint32 (f32) or uint16.
inline std::vector<uint32_t> OracleBits(const PmxCase& c, DType out) {
  const auto v = OracleValues(c);
  std::vector<uint32_t> bits(v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    bits[k] = out == DType::kFloat32   ? BitsFromF32(v[k])
              : out == DType::kFloat16 ? F16FromF32(v[k])
                                       : BF16FromF32(v[k]);
  }
  return bits;
}

inline std::vector<uint32_t> TensorBits(const Tensor& t) {
  const int64_t n = NumElements(t.shape());
  std::vector<uint32_t> bits(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    if (t.dtype() == DType::kFloat32) {
      bits[static_cast<size_t>(k)] = BitsFromF32(t.data_as<float>()[k]);
    } else {
      bits[static_cast<size_t>(k)] = t.data_as<uint16_t>()[k];
    }
  }
  return bits;
}

// Rounds v to something exactly representable in t.
inline float Representable(float v, DType t) {
  if (t == DType::kFloat16) return F32FromF16(F16FromF32(v));
  if (t == DType::kBFloat16) return F32FromBF16(BF16FromF32(v));
  return v;
}

enum class ZpMode { kNone, kInteger, kFloat };
enum class Gran { kGrouped, kPerChannel, kPerChannelRank1, kPerTensor };

// A random case: random codes over the full range, random scales (some
// negative), random zero points within range.
inline PmxCase RandomCase(std::mt19937_64& rng, bool int4, Shape d, int64_t axis, Gran gran,
                          int64_t group, ZpMode zp, DType scale_dtype, DType zp_dtype,
                          bool int4x8 = false) {
  PmxCase c;
  c.attrs.quant_data_type = int4 ? "int4" : "int8";
  c.attrs.quant_axis = axis;
  c.attrs.group_size = gran == Gran::kGrouped ? group : 0;
  c.attrs.has_zeropoint = zp == ZpMode::kNone ? 0 : 1;
  c.attrs.float_zeropoint = zp == ZpMode::kFloat ? 1 : 0;
  c.d = d;
  c.int4x8 = int4x8;
  c.scale_dtype = scale_dtype;
  c.zp_dtype = zp == ZpMode::kNone ? DType::kUndefined : zp_dtype;
  const size_t qa = static_cast<size_t>(axis);
  switch (gran) {
    case Gran::kGrouped:
      c.scale_shape = d;
      c.scale_shape[qa] = d[qa] / group;
      break;
    case Gran::kPerChannel:
      c.scale_shape = d;
      c.scale_shape[qa] = 1;
      break;
    case Gran::kPerChannelRank1:
      c.scale_shape = {d[1 - qa]};
      break;
    case Gran::kPerTensor:
      c.scale_shape = {1};
      break;
  }
  const int64_t n = NumElements(d), ns = NumElements(c.scale_shape);
  std::uniform_int_distribution<int> code(int4 ? 0 : -128, int4 ? 15 : 127);
  std::uniform_real_distribution<float> mag(-0.05f, 0.05f);
  c.q.resize(static_cast<size_t>(n));
  for (auto& v : c.q) v = code(rng);
  c.scale.resize(static_cast<size_t>(ns));
  for (auto& s : c.scale) s = Representable(mag(rng), scale_dtype);
  if (zp == ZpMode::kInteger) {
    const int lo = int4 ? 0 : (zp_dtype == DType::kUInt8 ? 0 : -128);
    const int hi = int4 ? 15 : (zp_dtype == DType::kUInt8 ? 255 : 127);
    std::uniform_int_distribution<int> z(lo, hi);
    c.zp_int.resize(static_cast<size_t>(ns));
    for (auto& v : c.zp_int) v = z(rng);
  } else if (zp == ZpMode::kFloat) {
    c.zp_float.resize(static_cast<size_t>(ns));
    for (auto& v : c.zp_float) v = Representable(mag(rng), zp_dtype);
  }
  Pack(&c);
  return c;
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_PMX_ORACLE_H_
