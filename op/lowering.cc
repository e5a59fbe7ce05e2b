#include "op/lowering.h"

#include <atomic>
#include <cstring>

#include "base/numeric.h"
#include "kernels/convert.h"

namespace nibble {
namespace internal {

std::string Who(const std::string& op, const std::string& name) {
  return name.empty() ? op : op + " '" + name + "'";
}

StatusOr<int64_t> CheckView(const TensorView& v, const std::string& what) {
  auto n = CheckedNumElements(v.shape, what);
  if (!n.ok()) return n.status();
  auto need = CheckedPackedBytes(*n, v.dtype, what);
  if (!need.ok()) return need.status();
  if (v.size_bytes < *need) {
    return Status::Error(what + " holds " + std::to_string(v.size_bytes) + " bytes but " +
                         DTypeName(v.dtype) + " shape " + ShapeToString(v.shape) + " needs " +
                         std::to_string(*need));
  }
  if (*need > 0 && v.data == nullptr) return Status::Error(what + " data is null");
  return *n;
}

namespace {
// The ScaleFacts of s[0, n) (branch-free: the compiler vectorizes it).
Dequantizer::Storage::ScaleFacts ScaleFactsIn(const float* s, size_t n) {
  uint32_t subnormal = 0, nonfinite = 0;
  for (size_t k = 0; k < n; ++k) {
    uint32_t u;
    std::memcpy(&u, s + k, 4);
    subnormal |=
        static_cast<uint32_t>((u & 0x7F800000u) == 0) & static_cast<uint32_t>((u & 0x7FFFFFu) != 0);
    nonfinite |= static_cast<uint32_t>((u & 0x7F800000u) == 0x7F800000u);
  }
  return {subnormal == 0, nonfinite == 0};
}

// ScaleFactsIn over s[0, n), on the prepare threads.
Dequantizer::Storage::ScaleFacts ScanScales(const float* s, size_t n) {
  std::atomic<bool> subnormal{false}, nonfinite{false};
  ForParamRanges(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    const auto f = ScaleFactsIn(s + b, static_cast<size_t>(e - b));
    if (!f.normal) subnormal.store(true, std::memory_order_relaxed);
    if (!f.finite) nonfinite.store(true, std::memory_order_relaxed);
  });
  return {!subnormal.load(std::memory_order_relaxed), !nonfinite.load(std::memory_order_relaxed)};
}

// out[k] = decode(p[k]) for k in [0, n), on the prepare threads.
template <class Decode>
void DecodeBytes(const uint8_t* p, size_t n, float* out, Decode decode) {
  ForParamRanges(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) out[k] = decode(p[k]);
  });
}

uint32_t ReadLE(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

// out[k] = get(k) for k in [0, n), on the prepare threads (one loop per
// stored type: each vectorizes on its own).
template <class Get>
void WidenEach(int64_t n, int32_t* out, Get get) {
  ForParamRanges(n, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) out[k] = get(k);
  });
}
}  // namespace

Status WidenScale(const TensorView& v, const std::string& what, ParamVector<float>* store,
                  const float** out, Dequantizer::Storage::ScaleFacts* facts) {
  auto n = CheckView(v, what);
  if (!n.ok()) return n.status();
  const auto* p = static_cast<const uint8_t*>(v.data);
  const size_t count = static_cast<size_t>(*n);
  if (facts != nullptr) *facts = {};
  switch (v.dtype) {
    case DType::kFloat32:
      if (reinterpret_cast<uintptr_t>(p) % alignof(float) == 0) {
        *out = reinterpret_cast<const float*>(p);
        if (facts != nullptr) *facts = ScanScales(*out, count);
        return Status::Ok();
      }
      store->resize(count);
      ForParamRanges(static_cast<int64_t>(count), [&](int64_t b, int64_t e) {
        std::memcpy(store->data() + b, p + 4 * b, static_cast<size_t>(e - b) * 4);
      });
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {  // exact widening, vectorized (any alignment)
      store->resize(count);
      const OutType from = v.dtype == DType::kFloat16 ? OutType::kF16 : OutType::kBF16;
      ForParamRanges(static_cast<int64_t>(count), [&](int64_t b, int64_t e) {
        ConvertFloats(from, p + 2 * b, OutType::kF32, store->data() + b, e - b);
      });
      break;
    }
    case DType::kFloat8E8M0:
      store->resize(count);
      DecodeBytes(p, count, store->data(), DecodeF8E8M0);
      break;
    case DType::kFloat8E4M3FN:  // NVFP4 block scales
      store->resize(count);
      DecodeBytes(p, count, store->data(), DecodeF8E4M3FN);
      break;
    default:
      return Status::Error(what + " must be float32, float16 or bfloat16 (got " +
                           DTypeName(v.dtype) + ")");
  }
  // (float16 widens to normal float32: its smallest subnormal is 2^-24.)
  if (facts != nullptr) *facts = ScanScales(store->data(), count);
  // An empty vector has no storage; keep a valid pointer for empty tensors.
  if (store->empty()) store->resize(1);
  *out = store->data();
  return Status::Ok();
}

Status WidenIntegerZeroPoint(const TensorView& v, const std::string& what,
                             ParamVector<int32_t>* store, const int32_t** out) {
  auto n = CheckView(v, what);
  if (!n.ok()) return n.status();
  const auto* p = static_cast<const uint8_t*>(v.data);
  const size_t count = static_cast<size_t>(*n);
  store->resize(count ? count : 1);
  (*store)[0] = 0;  // an empty tensor still gets a valid pointer
  int32_t* const z = store->data();
  const auto n64 = static_cast<int64_t>(count);
  switch (v.dtype) {
    case DType::kInt8:
      WidenEach(n64, z, [p](int64_t k) { return int32_t{static_cast<int8_t>(p[k])}; });
      break;
    case DType::kUInt8:
      WidenEach(n64, z, [p](int64_t k) { return int32_t{p[k]}; });
      break;
    case DType::kInt16:
      WidenEach(n64, z,
                [p](int64_t k) { return int32_t{static_cast<int16_t>(ReadLE(p + 2 * k, 2))}; });
      break;
    case DType::kUInt16:
      WidenEach(n64, z, [p](int64_t k) { return static_cast<int32_t>(ReadLE(p + 2 * k, 2)); });
      break;
    case DType::kInt32:
    case DType::kUInt32:  // uint32 (DirectML): the bits; kernels read them back as uint32
      WidenEach(n64, z, [p](int64_t k) { return static_cast<int32_t>(ReadLE(p + 4 * k, 4)); });
      break;
    case DType::kUInt4:
    case DType::kInt4: {
      const uint32_t sign = v.dtype == DType::kInt4 ? 8u : 0u;  // (u ^ 8) - 8 sign-extends
      WidenEach(n64, z, [p, sign](int64_t k) {
        const uint32_t u = (uint32_t{p[k / 2]} >> (4 * (k % 2))) & 0xFu;
        return static_cast<int32_t>(u ^ sign) - static_cast<int32_t>(sign);
      });
      break;
    }
    case DType::kUInt2:
    case DType::kInt2: {
      const uint32_t sign = v.dtype == DType::kInt2 ? 2u : 0u;
      WidenEach(n64, z, [p, sign](int64_t k) {
        const uint32_t u = (uint32_t{p[k / 4]} >> (2 * (k % 4))) & 0x3u;
        return static_cast<int32_t>(u ^ sign) - static_cast<int32_t>(sign);
      });
      break;
    }
    default:
      return Status::Error(what + " has unsupported integer type " + DTypeName(v.dtype));
  }
  *out = z;
  return Status::Ok();
}

Status WidenFloatZeroPoint(const TensorView& v, const std::string& what, ParamVector<float>* store,
                           const float** out) {
  if (v.dtype == DType::kFloat8E8M0) {
    return Status::Error(what + " must be float32, float16 or bfloat16 (got " + DTypeName(v.dtype) +
                         ")");
  }
  // (No scan: a float zero point makes normal_values and finite_values
  // false anyway.)
  return WidenScale(v, what, store, out, /*facts=*/nullptr);
}

StatusOr<OutType> OutTypeFor(DType t, const std::string& what) {
  OutType out;
  if (!OutTypeOfDType(t, &out)) {
    return Status::Error(what + " must be float32, float16 or bfloat16 (got " + DTypeName(t) + ")");
  }
  return out;
}

StatusOr<OutType> ResolveOutType(DType requested, DType scale_dtype, const std::string& who) {
  auto t = OutTypeFor(ResolveOutDType(requested, scale_dtype), "output type");
  if (!t.ok()) return t.status().WithPrefix(who);
  return t;
}

Status CheckInt32(const TensorView& v, const Shape& want, const std::string& what,
                  const std::string& who) {
  if (v.dtype != DType::kInt32 && v.dtype != DType::kUInt32) {
    return Status::Error(who + ": " + what + " must be int32 (got " + DTypeName(v.dtype) + ")");
  }
  if (v.shape != want) {
    return Status::Error(who + ": " + what + " shape " + ShapeToString(v.shape) + ", expected " +
                         ShapeToString(want));
  }
  auto n = CheckView(v, what);
  return n.ok() ? Status::Ok() : n.status().WithPrefix(who);
}

bool IsIntegerDType(DType d) {
  return d == DType::kInt64 || d == DType::kInt32 || d == DType::kInt16 || d == DType::kInt8 ||
         d == DType::kUInt8;
}

int64_t IntegerElement(const TensorView& v, int64_t i) {
  const auto* b = static_cast<const uint8_t*>(v.data);
  switch (v.dtype) {
    case DType::kInt64: {
      int64_t x;
      std::memcpy(&x, b + 8 * i, 8);
      return x;
    }
    case DType::kInt32: {
      int32_t x;
      std::memcpy(&x, b + 4 * i, 4);
      return x;
    }
    case DType::kInt16: {
      int16_t x;
      std::memcpy(&x, b + 2 * i, 2);
      return x;
    }
    case DType::kInt8:
      return static_cast<int8_t>(b[i]);
    case DType::kUInt8:
      return b[i];
    default:
      return 0;
  }
}

}  // namespace internal
}  // namespace nibble
