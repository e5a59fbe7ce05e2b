#include "base/tensor.h"

#include <cstring>
#include <limits>
#include <new>

#include "base/numeric.h"

namespace nibble {

std::string ShapeToString(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

StatusOr<int64_t> CheckedNumElements(const Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      return Status::Error(what + " has negative dimension " + std::to_string(d) + " at axis " +
                           std::to_string(i) + " in shape " + ShapeToString(shape));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return Status::Error(what + " shape " + ShapeToString(shape) +
                           " has too many elements (overflows int64)");
    }
    n *= d;
  }
  return n;
}

StatusOr<size_t> CheckedPackedBytes(int64_t elements, DType t, const std::string& what) {
  const int bits = DTypeBits(t);
  if (bits == 0) return Status::Error(what + " has unsupported type " + DTypeName(t));
  const uint64_t e = static_cast<uint64_t>(elements);
  // ceil(e * bits / 8) without overflow: e * bits fits if e <= max / 64.
  if (elements < 0 || e > std::numeric_limits<uint64_t>::max() / 64u) {
    return Status::Error(what + " byte size overflows");
  }
  const uint64_t bytes = (e * static_cast<uint64_t>(bits) + 7u) / 8u;
  if (bytes > static_cast<uint64_t>(std::numeric_limits<size_t>::max() / 2)) {
    return Status::Error(what + " byte size overflows");
  }
  return static_cast<size_t>(bytes);
}

void Tensor::Storage::resize(size_t bytes) {
  count_ = (bytes + 63) / 64;
  blocks_.reset(count_ ? new Block[count_] : nullptr);
}

void Tensor::Storage::CopyFrom(const Storage& o) {
  resize(o.count_ * 64);
  if (count_) std::memcpy(blocks_.get(), o.blocks_.get(), count_ * 64);
}

float FloatElement(const TensorView& v, int64_t k) {
  const auto* p = static_cast<const uint8_t*>(v.data);
  uint32_t bits = 0;
  switch (v.dtype) {
    case DType::kFloat32:
      std::memcpy(&bits, p + 4 * k, 4);
      return F32FromBits(bits);
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * k, 2);
      return v.dtype == DType::kFloat16 ? F32FromF16(h) : F32FromBF16(h);
    }
    default:
      return F32FromBits(0x7FC00000u);
  }
}

std::string OutOfMemoryMessage(uint64_t bytes, const std::string& what) {
  return std::string(kOutOfMemory) + ": cannot allocate " + std::to_string(bytes) + " bytes for " +
         what;
}

Status OutOfMemoryError(const std::string& where) {
  return Status::Error(std::string(kOutOfMemory) + " in " + where);
}

StatusOr<Tensor> Tensor::Allocate(DType dtype, Shape shape) {
  auto n = CheckedNumElements(shape, "tensor");
  if (!n.ok()) return n.status();
  auto bytes = CheckedPackedBytes(*n, dtype, "tensor");
  if (!bytes.ok()) return bytes.status();
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_bytes_ = *bytes;
  try {
    t.storage_.resize(*bytes);
  } catch (const std::bad_alloc&) {
    return Status::Error(
        OutOfMemoryMessage(*bytes, DTypeName(dtype) + " " + ShapeToString(t.shape_)));
  }
  return t;
}

}  // namespace nibble
