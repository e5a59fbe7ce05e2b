// Internal helpers shared by the front ends (PMX, ONNX, DirectML) to check
// tensor views and to widen scales / zero points into the Plan's float32 /
// int32 form. Not part of the public API.
#ifndef NIBBLE_OP_LOWERING_H_
#define NIBBLE_OP_LOWERING_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {
namespace internal {

// "DequantizeLinear 'name'" or "DequantizeLinear".
std::string Who(const std::string& op, const std::string& name);

// Runs fn(begin, end) on disjoint ranges that cover [0, n): concurrently
// on the prepare threads (ScopedPrepareThreads) when the n units hold
// enough parameters (`per_unit` each: a packed word's fields), else once on
// [0, n). fn must not throw; ranges may run in any order.
void ForParamRanges(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t per_unit = 1);

// The first i in [0, n) with bad(i), or n when there is none. The first
// kSerialPrefix units are looked at on the calling thread, stopping at the
// first hit (an asymmetric GPTQ layer's zero words differ within the first
// few); the rest on the prepare threads (ForParamRanges, `per_unit` as there).
template <class Pred>
int64_t FirstIndexWhere(int64_t n, Pred bad, int64_t per_unit = 1) {
  constexpr int64_t kSerialPrefix = 1024;
  const int64_t head = n < kSerialPrefix ? n : kSerialPrefix;
  for (int64_t i = 0; i < head; ++i) {
    if (bad(i)) return i;
  }
  std::atomic<int64_t> first{n};
  ForParamRanges(
      n - head,
      [&](int64_t b0, int64_t e0) {
        const int64_t b = head + b0, e = head + e0;
        uint32_t any = 0;  // branch-free first (vectorized): the common case finds nothing
        for (int64_t i = b; i < e; ++i) any |= static_cast<uint32_t>(bad(i));
        if (any == 0) return;
        int64_t i = b;
        while (!bad(i)) ++i;
        int64_t seen = first.load(std::memory_order_relaxed);
        while (i < seen && !first.compare_exchange_weak(seen, i, std::memory_order_relaxed)) {
        }
      },
      per_unit);
  return first.load(std::memory_order_relaxed);
}

// Checks that `v` has a non-negative, non-overflowing shape, and at least
// the bytes its dtype and shape need, with non-null data if non-empty.
// Returns the element count.
StatusOr<int64_t> CheckView(const TensorView& v, const std::string& what);

// Sets *out to float32 scales for `v` (float32, float16, bfloat16,
// float8e8m0 or float8e4m3fn; every one widens exactly): a pointer into `v` when it is aligned
// float32, else widened into `store`. *facts (unless null): whether no scale is a float32
// subnormal and whether every scale is finite (one scan of the widened scales; float16
// scales are never subnormal), for Plan::normal_values and Plan::finite_values.
Status WidenScale(const TensorView& v, const std::string& what, ParamVector<float>* store,
                  const float** out, Dequantizer::Storage::ScaleFacts* facts);

// WidenScale's `facts` for a plan writing `out`: `facts` for bfloat16 (the
// only output whose kernels read Plan::normal_values / finite_values:
// AVX512_BF16 rounding flushes subnormal inputs, the integer-lane rounding
// tests for NaN), else null — no scan of in-place float32 scales (a
// 4096 x 4096 layer's G = 128 scales, 512 KiB, measured as part of its
// preparation), *facts left false.
inline Dequantizer::Storage::ScaleFacts* ScaleFactsFor(OutType out,
                                                       Dequantizer::Storage::ScaleFacts* facts) {
  return out == OutType::kBF16 ? facts : nullptr;
}

// Integer zero point (any integer dtype incl. packed 2/4-bit) -> int32.
Status WidenIntegerZeroPoint(const TensorView& v, const std::string& what,
                             ParamVector<int32_t>* store, const int32_t** out);

// Float zero point (float32, float16, bfloat16) -> float32.
Status WidenFloatZeroPoint(const TensorView& v, const std::string& what, ParamVector<float>* store,
                           const float** out);

// The DType of a plan output type (kernels/out_types.h).
inline DType OutDTypeOf(OutType t) { return DTypeOfOut(t); }

// The plan output type of an output DType (others: kF32; the callers have
// checked the type).
inline OutType OutTypeOf(DType d) {
  OutType t = OutType::kF32;
  (void)OutTypeOfDType(d, &t);
  return t;
}

// The one output-dtype rule of every front end: the requested type, or
// kUndefined for "the default", which is the scale tensor's type (PMX,
// ONNX, DirectML, GPTQ, AWQ) or float32 where the format has no scale
// tensor (GGUF: pass DType::kFloat32 as `scale_dtype`).
inline DType ResolveOutDType(DType requested, DType scale_dtype) {
  return requested == DType::kUndefined ? scale_dtype : requested;
}

// Maps an output DType (float32 / float16 / bfloat16) to the plan's
// output type; others are an error naming `what`.
StatusOr<OutType> OutTypeFor(DType t, const std::string& what);

// The plan output type for `requested` (kUndefined: the scales' type
// `scale_dtype`); errors are prefixed with `who`.
StatusOr<OutType> ResolveOutType(DType requested, DType scale_dtype, const std::string& who);

// Checks an int32 (or uint32) tensor of shape `want`; errors name `what`
// and are prefixed with `who`.
Status CheckInt32(const TensorView& v, const Shape& want, const std::string& what,
                  const std::string& who);

// True for the integer types IntegerElement reads.
bool IsIntegerDType(DType d);
// Element i of an int64 / int32 / int16 / int8 / uint8 view (0 for other
// types), any alignment.
int64_t IntegerElement(const TensorView& v, int64_t i);

// Sets *p's view to an [axis, inner] weight whose codes are kPmxWords
// words of `per_word` fields along axis 0 (word (a / per_word) * inner + i
// holds element (a, i): GPTQ's [K, N] qweight, a transposed tile of code
// words) and whose scales (and zero points) are a row-major [groups,
// inner] grid: element (a, i)'s at group_of(a) * inner + i.
inline void SetWordsAlongAxis0(Plan* p, int32_t per_word, int64_t axis, int64_t inner) {
  p->layout = Layout::kPmxWords;
  p->word_stride = 0;
  p->interleave = per_word;
  p->interleave_row = inner;
  p->outer = 1;
  p->axis = axis;
  p->inner = inner;
  p->s_outer = 0;
  p->s_axis = inner;
  p->s_inner = 1;
}

// A little-endian 32-bit word at p (any alignment).
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host (x86-64 / aarch64)
}

}  // namespace internal
}  // namespace nibble

#endif  // NIBBLE_OP_LOWERING_H_
