// Element types, tensor views and owning tensors of the public API.
#ifndef NIBBLE_BASE_TENSOR_H_
#define NIBBLE_BASE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace nibble {

using Shape = std::vector<int64_t>;

// "(8,128)" — the format used in every error message. Scalars are "()".
std::string ShapeToString(const Shape& shape);

// Number of elements, or an error if a dim is negative or the product
// overflows int64. `what` names the tensor in the message.
StatusOr<int64_t> CheckedNumElements(const Shape& shape, const std::string& what);

// Bytes needed to store `elements` elements of `t`, packed for sub-byte types
// (ceil(elements * bits / 8)); an error on overflow.
StatusOr<size_t> CheckedPackedBytes(int64_t elements, DType t, const std::string& what);

// A read-only view of caller memory: `size_bytes` bytes at `data` holding a
// row-major tensor of `dtype` and `shape`, little-endian, sub-byte types
// packed over the flattened tensor (first element in the low bits).
// `data` needs no particular alignment beyond the element type's natural
// alignment for types of 8 bits and more.
struct TensorView {
  DType dtype = DType::kUndefined;
  Shape shape;
  const void* data = nullptr;
  size_t size_bytes = 0;
};

// Element k of a float32, float16 or bfloat16 view, widened to float32
// (exact); NaN for other types. For checks and reports, not hot loops.
float FloatElement(const TensorView& v, int64_t k);

// A writable view of caller memory (the output of Dequantize).
struct MutableTensorView {
  DType dtype = DType::kUndefined;
  Shape shape;
  void* data = nullptr;
  size_t size_bytes = 0;
};

// An owning tensor. Storage is 64-byte aligned.
// float32, float16 or bfloat16: the types of scales, float zero points and
// outputs.
inline bool IsFloat16Or32(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Messages of allocation failures start with this (the Python module maps
// them to MemoryError, the C API to NIBBLE_STATUS_OUT_OF_MEMORY).
inline constexpr const char* kOutOfMemory = "out of memory";
// "out of memory: cannot allocate <bytes> bytes for <what>".
std::string OutOfMemoryMessage(uint64_t bytes, const std::string& what);
// "out of memory in <where>": what a public function returns when an
// allocation inside it fails (no exception crosses the public API).
Status OutOfMemoryError(const std::string& where);

class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised storage; an error if the size overflows.
  static StatusOr<Tensor> Allocate(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }
  size_t size_bytes() const { return size_bytes_; }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data());
  }

  TensorView view() const { return {dtype_, shape_, data(), size_bytes_}; }
  MutableTensorView mutable_view() { return {dtype_, shape_, data(), size_bytes_}; }

 private:
  struct alignas(64) Block {
    unsigned char bytes[64];
  };
  // Uninitialised on allocation (the dequantizer writes every byte; zeroing
  // first would double the memory traffic of the allocating API).
  class Storage {
   public:
    Storage() = default;
    Storage(const Storage& o) { CopyFrom(o); }
    Storage& operator=(const Storage& o) {
      if (this != &o) CopyFrom(o);
      return *this;
    }
    Storage(Storage&&) noexcept = default;
    Storage& operator=(Storage&&) noexcept = default;
    void resize(size_t bytes);
    void* data() { return blocks_.get(); }
    const void* data() const { return blocks_.get(); }

   private:
    void CopyFrom(const Storage& o);
    std::unique_ptr<Block[]> blocks_;
    size_t count_ = 0;
  };
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  size_t size_bytes_ = 0;
  Storage storage_;
};

}  // namespace nibble

#endif  // NIBBLE_BASE_TENSOR_H_
