// GGUF v2/v3 files (llama.cpp): header, metadata, tensor infos and
// zero-copy views of the tensor data. Bytes only; no arithmetic.
//
// Checked before anything is allocated or read: magic "GGUF"; version 2 or
// 3; the header (metadata and tensor infos) at most kMaxGgufHeaderBytes, at
// most kMaxGgufKeys keys and kMaxGgufTensors tensors, tensor names shorter
// than ggml's GGML_MAX_NAME (64 bytes) — limits far above any model's
// (tens of keys, a few thousand tensors, a tokenizer of a few MB), which
// bound the memory and time a hostile header can cost; tensor and
// key/value counts bounded by the bytes left in the file;
// every string and array length inside the file; array nesting depth <= 4;
// general.alignment a non-zero power of two; tensor n_dims 1..4, dims >= 0
// with a non-overflowing product; a known ggml type's ne[0] a multiple of
// its block size; offsets aligned and every tensor's bytes inside the file;
// no duplicate tensor or key names.
#ifndef NIBBLE_FORMATS_GGUF_H_
#define NIBBLE_FORMATS_GGUF_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "formats/files.h"

namespace nibble {

inline constexpr uint64_t kMaxGgufHeaderBytes = 100'000'000;
inline constexpr uint64_t kMaxGgufKeys = 65'536;
inline constexpr uint64_t kMaxGgufTensors = 131'072;
inline constexpr size_t kMaxGgufNameBytes = 63;  // ggml: GGML_MAX_NAME - 1

// Named ids of a few ggml types (tests, examples).
enum GgmlType : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ8_0 = 8,
  kGgmlQ4_K = 12,
  kGgmlBF16 = 30,
  kGgmlMXFP4 = 39,
};

// Every type ggml defines (ggml.h's enum ggml_type, ggml.c's type_traits):
// the one registry of ggml type ids, names and block geometry — `block`
// elements in `bytes` bytes — and, for the plain (unblocked) types, their
// element type. Which block types nibble dequantizes is the kernels'
// registry (NIBBLE_BLOCK_LAYOUTS in kernels/layouts.h), checked against
// this one at compile time (checkpoint/methods/ggml.cc).
struct GgmlTypeInfo {
  uint32_t type;
  const char* name;
  int64_t block;
  int64_t bytes;
  DType plain;  // kUndefined for block types
};
inline constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "f32", 1, 4, DType::kFloat32},
    {1, "f16", 1, 2, DType::kFloat16},
    {2, "q4_0", 32, 18, DType::kUndefined},
    {3, "q4_1", 32, 20, DType::kUndefined},
    {6, "q5_0", 32, 22, DType::kUndefined},
    {7, "q5_1", 32, 24, DType::kUndefined},
    {8, "q8_0", 32, 34, DType::kUndefined},
    {9, "q8_1", 32, 36, DType::kUndefined},
    {10, "q2_k", 256, 84, DType::kUndefined},
    {11, "q3_k", 256, 110, DType::kUndefined},
    {12, "q4_k", 256, 144, DType::kUndefined},
    {13, "q5_k", 256, 176, DType::kUndefined},
    {14, "q6_k", 256, 210, DType::kUndefined},
    {15, "q8_k", 256, 292, DType::kUndefined},
    {16, "iq2_xxs", 256, 66, DType::kUndefined},
    {17, "iq2_xs", 256, 74, DType::kUndefined},
    {18, "iq3_xxs", 256, 98, DType::kUndefined},
    {19, "iq1_s", 256, 50, DType::kUndefined},
    {20, "iq4_nl", 32, 18, DType::kUndefined},
    {21, "iq3_s", 256, 110, DType::kUndefined},
    {22, "iq2_s", 256, 82, DType::kUndefined},
    {23, "iq4_xs", 256, 136, DType::kUndefined},
    {24, "i8", 1, 1, DType::kInt8},
    {25, "i16", 1, 2, DType::kInt16},
    {26, "i32", 1, 4, DType::kInt32},
    {27, "i64", 1, 8, DType::kInt64},
    {28, "f64", 1, 8, DType::kFloat64},
    {29, "iq1_m", 256, 56, DType::kUndefined},
    {30, "bf16", 1, 2, DType::kBFloat16},
    {34, "tq1_0", 256, 54, DType::kUndefined},
    {35, "tq2_0", 256, 66, DType::kUndefined},
    {39, "mxfp4", 32, 17, DType::kUndefined},
    {40, "nvfp4", 64, 36, DType::kUndefined},
    {41, "q1_0", 128, 18, DType::kUndefined},
    {42, "q2_0", 64, 18, DType::kUndefined},
};
// The entry of `type`, or nullptr for ids this registry does not know.
constexpr const GgmlTypeInfo* GgmlTypeTraits(uint32_t type) {
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}
std::string GgmlTypeName(uint32_t type);  // "q4_0", or "type(<n>)"

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t u = 0;  // unsigned integers and bool
  int64_t i = 0;   // signed integers
  double f = 0;    // f32 / f64
  std::string s;   // strings
  // Arrays: element type, length, and the first kMaxKeptItems elements.
  GgufValueType elem = GgufValueType::kU8;
  uint64_t count = 0;
  std::vector<GgufValue> items;
  static constexpr size_t kMaxKeptItems = 8;
  uint64_t array_at = 0;  // arrays: file offset of the first element

  // Short human-readable form (arrays: "[n x type] first, items, ...").
  std::string ToString() const;
};

// An integer metadata value (any integer type, or bool) as int64 (u64
// values above INT64_MAX clamp to it); false for other types.
bool GgufIntValue(const GgufValue& v, int64_t* out);

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] varies fastest
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data section
  uint64_t bytes = 0;   // 0 if the type is unknown
  // FromBytes: the tensor's bytes (nullptr if the type is unknown). Open():
  // nullptr — use GgufFile::Load.
  const uint8_t* data = nullptr;
  bool known() const { return GgmlTypeTraits(type) != nullptr; }
  int64_t elements() const;
};

class GgufFile {
 public:
  // `inputs`, if given, records the file.
  static StatusOr<std::shared_ptr<GgufFile>> Open(const std::string& path,
                                                  InputFiles* inputs = nullptr);
  // Parses caller-owned bytes (must outlive the object).
  static StatusOr<std::shared_ptr<GgufFile>> FromBytes(const uint8_t* data, size_t size,
                                                       const std::string& label);
  // True if the bytes start with the GGUF magic.
  static bool HasMagic(const uint8_t* data, size_t size);

  const std::string& label() const { return label_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* Find(const std::string& key) const;
  // Every element of a top-level array value `v` (one of metadata()'s; the
  // header keeps only the first kMaxKeptItems): strings, or numbers of any
  // integer / float / bool element type (exact in a double for every type
  // but 64-bit integers beyond 2^53, which are an error). An error names
  // `key` when the element type is not the one asked for.
  Status ReadArray(const std::string& key, const GgufValue& v, std::vector<std::string>* out) const;
  Status ReadArray(const std::string& key, const GgufValue& v, std::vector<double>* out) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // A known-type tensor's bytes: read from the file into the first bytes
  // of `*storage` (grown when smaller, never shrunk, so a reused buffer
  // costs no allocation; an error if the file has shrunk), or its view for
  // FromBytes.
  // `cancelled` (optional): as ReadOnlyFile::Read's.
  StatusOr<const uint8_t*> Load(const GgufTensor& t, std::vector<uint8_t>* storage,
                                const CancelCallback* cancelled = nullptr) const;
  // Copies a known-type tensor's bytes [offset, offset + n) (default: all,
  // t.bytes of them) straight to `dst`; a range past the tensor is an error.
  Status ReadInto(const GgufTensor& t, uint8_t* dst, uint64_t offset = 0,
                  uint64_t n = UINT64_MAX) const;

 private:
  GgufFile() = default;
  Status Parse();
  std::shared_ptr<ReadOnlyFile> file_;  // Open(): read with pread, never mapped
  std::string prefix_;                  // Open(): the file's first bytes
  const uint8_t* data_ = nullptr;       // bytes available to the parser
  size_t size_ = 0;
  uint64_t file_size_ = 0;  // the whole file
  bool need_more_ = false;  // the parser ran past the prefix
  std::string label_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace nibble

#endif  // NIBBLE_FORMATS_GGUF_H_
