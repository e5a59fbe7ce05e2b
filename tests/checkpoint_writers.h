// Test-side writers of checkpoint files: GGUF bytes built field by field
// (every metadata value type), and Hugging Face GPTQ / AWQ folders written
// from known float weights through op/quantize_checkpoint.h.
#ifndef NIBBLE_TESTS_CHECKPOINT_WRITERS_H_
#define NIBBLE_TESTS_CHECKPOINT_WRITERS_H_

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "formats/safetensors_writer.h"
#include "testing/quantize_checkpoint.h"

namespace nibble {
namespace testing {

// Builds a GGUF file: metadata, then tensors (data appended in order at
// aligned offsets).
class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3, uint64_t alignment = 32)
      : version_(version), alignment_(alignment) {}
  // Raw metadata: key, type code, already-encoded value bytes.
  void Kv(const std::string& key, uint32_t type, const std::string& value) {
    Str(&kv_, key);
    Put(&kv_, type);
    kv_ += value;
    ++n_kv_;
  }
  void KvU32(const std::string& key, uint32_t v) { Kv(key, 4, Enc(v)); }
  void KvString(const std::string& key, const std::string& v) {
    std::string b;
    Str(&b, v);
    Kv(key, 8, b);
  }
  void Tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type,
              const std::vector<uint8_t>& bytes) {
    Str(&ti_, name);
    Put(&ti_, static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) Put(&ti_, static_cast<uint64_t>(d));
    Put(&ti_, type);
    data_.append((alignment_ - data_.size() % alignment_) % alignment_, '\0');
    Put(&ti_, static_cast<uint64_t>(data_.size()));
    data_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ++n_t_;
  }
  std::string Bytes() const {
    std::string out = "GGUF";
    Put(&out, version_);
    Put(&out, n_t_);
    Put(&out, n_kv_);
    out += kv_;
    out += ti_;
    out.append((alignment_ - out.size() % alignment_) % alignment_, '\0');
    return out + data_;
  }
  template <typename T>
  static std::string Enc(T v) {
    std::string s(sizeof(T), '\0');
    std::memcpy(&s[0], &v, sizeof(T));
    return s;
  }
  static void Str(std::string* s, const std::string& v) {
    Put(s, static_cast<uint64_t>(v.size()));
    *s += v;
  }
  template <typename T>
  static void Put(std::string* s, T v) {
    *s += Enc(v);
  }

 private:
  uint32_t version_;
  uint64_t alignment_;
  uint64_t n_kv_ = 0, n_t_ = 0;
  std::string kv_, ti_, data_;
};

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A safetensors file of the given tensors (copied from Tensor objects).
inline Status WriteSafetensors(
    const std::string& path, const std::vector<std::pair<std::string, const nibble::Tensor*>>& ts) {
  std::vector<SafetensorsOutput> outs;
  for (const auto& [name, t] : ts) {
    SafetensorsOutput o;
    o.name = name;
    o.dtype = t->dtype();
    o.shape = t->shape();
    const nibble::Tensor* tp = t;
    o.fill = [tp](uint8_t* dst) {
      if (tp->size_bytes()) std::memcpy(dst, tp->data(), tp->size_bytes());
      return Status::Ok();
    };
    outs.push_back(std::move(o));
  }
  return WriteSafetensorsStreaming(path, outs, {});
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_CHECKPOINT_WRITERS_H_
