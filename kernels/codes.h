// Code kinds and zero-point kinds (output types: kernels/out_types.h): the element-level
// vocabulary of the Plan (kernels/plan.h) and the layout descriptors
// (kernels/layouts.h).
#ifndef NIBBLE_KERNELS_CODES_H_
#define NIBBLE_KERNELS_CODES_H_

#include <cstdint>

#include "kernels/out_types.h"

namespace nibble {

// How one element's bits are interpreted.
enum class CodeKind : uint8_t {
  kU2,
  kS2,
  kU4,
  kS4,
  kU8,
  kS8,
  kU16,
  kS16,
  kU32,
  kS32,
  kF8E4M3FN,
  kF8E4M3FNUZ,
  kF8E5M2,
  kF8E5M2FNUZ,
  kF4E2M1,
  // A 4-bit index into a 16-entry float32 value table (Plan::code_values;
  // ggml IQ4_NL's non-linear grid).
  kTable4,
};

constexpr int CodeBits(CodeKind k) {
  switch (k) {
    case CodeKind::kU2:
    case CodeKind::kS2:
      return 2;
    case CodeKind::kU4:
    case CodeKind::kS4:
    case CodeKind::kF4E2M1:
    case CodeKind::kTable4:
      return 4;
    case CodeKind::kU16:
    case CodeKind::kS16:
      return 16;
    case CodeKind::kU32:
    case CodeKind::kS32:
      return 32;
    case CodeKind::kU8:
    case CodeKind::kS8:
    case CodeKind::kF8E4M3FN:
    case CodeKind::kF8E4M3FNUZ:
    case CodeKind::kF8E5M2:
    case CodeKind::kF8E5M2FNUZ:
      return 8;
  }
  return 8;
}
// Codes whose value is looked up (float8 / float4 formats, value tables):
// value = decode(q) * s, never a zero point.
constexpr bool CodeIsFloat(CodeKind k) { return k >= CodeKind::kF8E4M3FN; }

// kFloat: additive (PMX float_zeropoint); kFloatSubtract: subtracted before
// scaling (ONNX Runtime MatMulNBits with float zero points).
enum class ZeroPointKind : uint8_t { kNone, kInteger, kFloat, kFloatSubtract };

}  // namespace nibble

#endif  // NIBBLE_KERNELS_CODES_H_
