#include "formats/gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>

namespace nibble {

namespace {

const char* ValueTypeName(GgufValueType t) {
  static const char* const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  const auto k = static_cast<uint32_t>(t);
  return k < 13 ? names[k] : "?";
}

// Bounds-checked little-endian reader over the file bytes.
class Reader {
 public:
  // `more`: set when a read runs past `size` while the file has more bytes.
  Reader(const uint8_t* data, size_t size, std::string who, uint64_t file_size = 0,
         bool* more = nullptr)
      : p_(data), size_(size), who_(std::move(who)), file_size_(file_size), more_(more) {}
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  // Bytes left in the whole file (bounds for counts before reading them).
  uint64_t file_left() const { return (file_size_ > size_ ? file_size_ : size_) - pos_; }
  Status Need(uint64_t n, const char* what) const {
    if (n > left()) {
      if (more_ != nullptr && file_size_ > size_ && n <= file_size_ - pos_) *more_ = true;
      return Status::Error(who_ + ": " + what + " at byte " + std::to_string(pos_) +
                           " runs past the end of the file (" +
                           std::to_string(file_size_ > size_ ? file_size_ : size_) +
                           " bytes; truncated?)");
    }
    return Status::Ok();
  }
  template <typename T>
  Status Get(T* v, const char* what) {
    NIBBLE_RETURN_IF_ERROR(Need(sizeof(T), what));
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status String(std::string* s, const char* what) {
    uint64_t n;
    NIBBLE_RETURN_IF_ERROR(Get(&n, what));
    NIBBLE_RETURN_IF_ERROR(Need(n, what));
    s->assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return Status::Ok();
  }
  Status Skip(uint64_t n, const char* what) {
    NIBBLE_RETURN_IF_ERROR(Need(n, what));
    pos_ += static_cast<size_t>(n);
    return Status::Ok();
  }
  const std::string& who() const { return who_; }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  std::string who_;
  uint64_t file_size_;
  bool* more_;
};

Status ReadValue(Reader& r, GgufValueType type, GgufValue* v, int depth, const std::string& key) {
  v->type = type;
  const char* what = "metadata value";
  switch (type) {
    case GgufValueType::kU8: {
      uint8_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->u = x;
      return Status::Ok();
    }
    case GgufValueType::kBool: {
      uint8_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      if (x > 1) {
        return Status::Error(r.who() + ": key '" + key + "': bool value " + std::to_string(x) +
                             " is not 0 or 1");
      }
      v->u = x;
      return Status::Ok();
    }
    case GgufValueType::kI8: {
      int8_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->i = x;
      return Status::Ok();
    }
    case GgufValueType::kU16: {
      uint16_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->u = x;
      return Status::Ok();
    }
    case GgufValueType::kI16: {
      int16_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->i = x;
      return Status::Ok();
    }
    case GgufValueType::kU32: {
      uint32_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->u = x;
      return Status::Ok();
    }
    case GgufValueType::kI32: {
      int32_t x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->i = x;
      return Status::Ok();
    }
    case GgufValueType::kF32: {
      float x;
      NIBBLE_RETURN_IF_ERROR(r.Get(&x, what));
      v->f = x;
      return Status::Ok();
    }
    case GgufValueType::kU64:
      return r.Get(&v->u, what);
    case GgufValueType::kI64:
      return r.Get(&v->i, what);
    case GgufValueType::kF64:
      return r.Get(&v->f, what);
    case GgufValueType::kString:
      return r.String(&v->s, what);
    case GgufValueType::kArray: {
      if (depth >= 4) {
        return Status::Error(r.who() + ": key '" + key + "': arrays nested deeper than 4");
      }
      uint32_t et;
      NIBBLE_RETURN_IF_ERROR(r.Get(&et, "array type"));
      if (et > 12) {
        return Status::Error(r.who() + ": key '" + key + "': unknown array element type " +
                             std::to_string(et));
      }
      NIBBLE_RETURN_IF_ERROR(r.Get(&v->count, "array length"));
      v->elem = static_cast<GgufValueType>(et);
      v->array_at = r.pos();
      // Every element takes at least one byte: a count beyond the bytes
      // left is corrupt (and must not drive a loop or an allocation).
      if (v->count > r.file_left()) {
        return Status::Error(r.who() + ": key '" + key + "': array of " + std::to_string(v->count) +
                             " elements is longer than the rest of the file");
      }
      static const uint8_t kFixed[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
      if (kFixed[et] != 0) {  // fixed-size elements: keep a few, skip the rest
        const uint64_t keep = std::min<uint64_t>(v->count, GgufValue::kMaxKeptItems);
        v->items.resize(static_cast<size_t>(keep));
        for (uint64_t k = 0; k < keep; ++k) {
          NIBBLE_RETURN_IF_ERROR(ReadValue(r, v->elem, &v->items[k], depth + 1, key));
        }
        const uint64_t rest = v->count - keep;
        if (rest > r.file_left() / kFixed[et]) {
          return Status::Error(r.who() + ": key '" + key + "': array of " +
                               std::to_string(v->count) + " " + ValueTypeName(v->elem) +
                               " runs past the end of the file");
        }
        return r.Skip(rest * kFixed[et], "array data");
      }
      for (uint64_t k = 0; k < v->count; ++k) {
        GgufValue item;
        NIBBLE_RETURN_IF_ERROR(ReadValue(r, v->elem, &item, depth + 1, key));
        if (v->items.size() < GgufValue::kMaxKeptItems) v->items.push_back(std::move(item));
      }
      return Status::Ok();
    }
  }
  return Status::Error(r.who() + ": key '" + key + "': unknown value type " +
                       std::to_string(static_cast<uint32_t>(type)));
}

}  // namespace

std::string GgmlTypeName(uint32_t type) {
  const GgmlTypeInfo* t = GgmlTypeTraits(type);
  return t ? t->name : "type(" + std::to_string(type) + ")";
}

std::string GgufValue::ToString() const {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kU16:
    case GgufValueType::kU32:
    case GgufValueType::kU64:
      return std::to_string(u);
    case GgufValueType::kBool:
      return u ? "true" : "false";
    case GgufValueType::kI8:
    case GgufValueType::kI16:
    case GgufValueType::kI32:
    case GgufValueType::kI64:
      return std::to_string(i);
    case GgufValueType::kF32:
    case GgufValueType::kF64: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", f);
      return buf;
    }
    case GgufValueType::kString:
      return s.size() > 60 ? "\"" + s.substr(0, 57) + "...\"" : "\"" + s + "\"";
    case GgufValueType::kArray: {
      std::string out = "[" + std::to_string(count) + " x " + ValueTypeName(elem) + "]";
      for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : " ") + items[k].ToString();
      if (count > items.size()) out += ", ...";
      return out;
    }
  }
  return "?";
}

bool GgufIntValue(const GgufValue& v, int64_t* out) {
  switch (v.type) {
    case GgufValueType::kU8:
    case GgufValueType::kU16:
    case GgufValueType::kU32:
    case GgufValueType::kU64:
    case GgufValueType::kBool:
      *out = v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? std::numeric_limits<int64_t>::max()
                 : static_cast<int64_t>(v.u);
      return true;
    case GgufValueType::kI8:
    case GgufValueType::kI16:
    case GgufValueType::kI32:
    case GgufValueType::kI64:
      *out = v.i;
      return true;
    default:
      return false;
  }
}

int64_t GgufTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // checked at parse time
  return n;
}

bool GgufFile::HasMagic(const uint8_t* data, size_t size) {
  return size >= 4 && std::memcmp(data, "GGUF", 4) == 0;
}

StatusOr<std::shared_ptr<GgufFile>> GgufFile::Open(const std::string& path, InputFiles* inputs) {
  auto file = ReadOnlyFile::Open(path, inputs);
  if (!file.ok()) return file.status();
  const uint64_t size = (*file)->size();
  // Parse a prefix of the file, growing it while the header needs more
  // (metadata such as tokenizer arrays can be many megabytes), up to
  // kMaxGgufHeaderBytes.
  const uint64_t most = std::min<uint64_t>(size, kMaxGgufHeaderBytes);
  uint64_t prefix = std::min<uint64_t>(most, uint64_t{1} << 20);
  for (;;) {
    std::shared_ptr<GgufFile> f(new GgufFile());
    f->file_ = *file;
    f->label_ = path;
    f->prefix_.resize(static_cast<size_t>(prefix));
    if (prefix > 0)
      NIBBLE_RETURN_IF_ERROR((*file)->Read(0, static_cast<size_t>(prefix), &f->prefix_[0]));
    f->data_ = reinterpret_cast<const uint8_t*>(f->prefix_.data());
    f->size_ = static_cast<size_t>(prefix);
    f->file_size_ = size;
    const Status st = f->Parse();
    if (st.ok()) return f;
    if (!f->need_more_ || prefix == size) return st;
    if (prefix == most) {
      return Status::Error("GGUF '" + EscapeBytes(path) + "': the header (metadata and tensor " +
                           "infos) is larger than " + std::to_string(kMaxGgufHeaderBytes) +
                           " bytes, the most nibble reads (a model's is a few MB)");
    }
    prefix = std::min<uint64_t>(most, prefix * 4);
  }
}

StatusOr<const uint8_t*> GgufFile::Load(const GgufTensor& t, std::vector<uint8_t>* storage,
                                        const CancelCallback* cancelled) const {
  if (!t.known()) {
    return Status::Error("GGUF tensor '" + t.name + "': unknown type " + GgmlTypeName(t.type));
  }
  if (!file_) return t.data;
  if (storage->size() < t.bytes) storage->resize(static_cast<size_t>(t.bytes));
  if (t.bytes > 0) {
    NIBBLE_RETURN_IF_ERROR(file_
                               ->Read(data_offset_ + t.offset, static_cast<size_t>(t.bytes),
                                      storage->data(), cancelled)
                               .WithPrefix("GGUF tensor '" + t.name + "'"));
  }
  return static_cast<const uint8_t*>(storage->data());
}

Status GgufFile::ReadInto(const GgufTensor& t, uint8_t* dst, uint64_t offset, uint64_t n) const {
  if (!t.known()) {
    return Status::Error("GGUF tensor '" + EscapeBytes(t.name) + "': unknown type " +
                         GgmlTypeName(t.type));
  }
  if (n == UINT64_MAX && offset <= t.bytes) n = t.bytes - offset;
  if (offset > t.bytes || n > t.bytes - offset) {
    return Status::Error("GGUF tensor '" + EscapeBytes(t.name) + "': bytes [" +
                         std::to_string(offset) + ", +" + std::to_string(n) + ") are outside its " +
                         std::to_string(t.bytes));
  }
  if (n == 0) return Status::Ok();
  if (!file_) {
    std::memcpy(dst, t.data + offset, static_cast<size_t>(n));
    return Status::Ok();
  }
  return file_->Read(data_offset_ + t.offset + offset, static_cast<size_t>(n), dst)
      .WithPrefix("GGUF tensor '" + EscapeBytes(t.name) + "'");
}

StatusOr<std::shared_ptr<GgufFile>> GgufFile::FromBytes(const uint8_t* data, size_t size,
                                                        const std::string& label) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->data_ = data;
  f->size_ = size;
  f->file_size_ = size;
  f->label_ = label;
  NIBBLE_RETURN_IF_ERROR(f->Parse());
  return f;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Status GgufFile::ReadArray(const std::string& key, const GgufValue& v,
                           std::vector<std::string>* out) const {
  const std::string who = "GGUF '" + label_ + "': key '" + EscapeBytes(key) + "'";
  if (v.type != GgufValueType::kArray || v.elem != GgufValueType::kString) {
    return Status::Error(who + " is not an array of strings");
  }
  // The header parsed from data_ holds the whole array.
  Reader r(data_, size_, who);
  NIBBLE_RETURN_IF_ERROR(r.Skip(v.array_at, "array"));
  out->clear();
  out->reserve(static_cast<size_t>(v.count));
  for (uint64_t k = 0; k < v.count; ++k) {
    out->emplace_back();
    NIBBLE_RETURN_IF_ERROR(r.String(&out->back(), "array element"));
  }
  return Status::Ok();
}

Status GgufFile::ReadArray(const std::string& key, const GgufValue& v,
                           std::vector<double>* out) const {
  const std::string who = "GGUF '" + label_ + "': key '" + EscapeBytes(key) + "'";
  if (v.type != GgufValueType::kArray || v.elem == GgufValueType::kString ||
      v.elem == GgufValueType::kArray) {
    return Status::Error(who + " is not an array of numbers");
  }
  Reader r(data_, size_, who);
  NIBBLE_RETURN_IF_ERROR(r.Skip(v.array_at, "array"));
  out->clear();
  out->reserve(static_cast<size_t>(v.count));
  for (uint64_t k = 0; k < v.count; ++k) {
    GgufValue x;
    NIBBLE_RETURN_IF_ERROR(ReadValue(r, v.elem, &x, 1, key));
    double d = x.f;
    switch (x.type) {
      case GgufValueType::kU8:
      case GgufValueType::kU16:
      case GgufValueType::kU32:
      case GgufValueType::kU64:
      case GgufValueType::kBool:
        if (x.u > (uint64_t{1} << 53)) return Status::Error(who + ": a value is beyond 2^53");
        d = static_cast<double>(x.u);
        break;
      case GgufValueType::kI8:
      case GgufValueType::kI16:
      case GgufValueType::kI32:
      case GgufValueType::kI64:
        if (x.i > (int64_t{1} << 53) || x.i < -(int64_t{1} << 53)) {
          return Status::Error(who + ": a value is beyond 2^53");
        }
        d = static_cast<double>(x.i);
        break;
      default:
        break;
    }
    out->push_back(d);
  }
  return Status::Ok();
}

Status GgufFile::Parse() {
  const std::string who = "GGUF '" + label_ + "'";
  Reader r(data_, size_, who, file_size_, &need_more_);
  if (!HasMagic(data_, size_)) return Status::Error(who + ": no GGUF magic");
  NIBBLE_RETURN_IF_ERROR(r.Skip(4, "magic"));
  NIBBLE_RETURN_IF_ERROR(r.Get(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return Status::Error(who + ": version " + std::to_string(version_) +
                         " is not supported (2 or 3)");
  }
  uint64_t n_tensors, n_kv;
  NIBBLE_RETURN_IF_ERROR(r.Get(&n_tensors, "tensor count"));
  NIBBLE_RETURN_IF_ERROR(r.Get(&n_kv, "metadata count"));
  // A key/value takes >= 13 bytes, a tensor info >= 24: bound both by the
  // bytes left before trusting them.
  if (n_kv > r.file_left() / 13) {
    return Status::Error(who + ": metadata count " + std::to_string(n_kv) +
                         " cannot fit in the file");
  }
  if (n_kv > kMaxGgufKeys) {
    return Status::Error(who + ": " + std::to_string(n_kv) + " metadata keys, more than the " +
                         std::to_string(kMaxGgufKeys) + " nibble reads (models have tens)");
  }
  if (n_tensors > kMaxGgufTensors) {
    return Status::Error(who + ": " + std::to_string(n_tensors) + " tensors, more than the " +
                         std::to_string(kMaxGgufTensors) +
                         " nibble reads (models have a few thousand)");
  }
  // Reserved up front (bounded above), so the keys and names the duplicate
  // checks view never move.
  kv_.reserve(static_cast<size_t>(n_kv));
  std::unordered_set<std::string_view> keys;
  keys.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    NIBBLE_RETURN_IF_ERROR(r.String(&key, "metadata key"));
    if (keys.count(key)) {
      return Status::Error(who + ": metadata key '" + EscapeBytes(key) + "' twice");
    }
    uint32_t t;
    NIBBLE_RETURN_IF_ERROR(r.Get(&t, "metadata type"));
    if (t > 12) {
      return Status::Error(who + ": key '" + key + "' has unknown value type " + std::to_string(t));
    }
    GgufValue v;
    NIBBLE_RETURN_IF_ERROR(ReadValue(r, static_cast<GgufValueType>(t), &v, 0, key));
    if (key == "general.alignment") {
      if (v.type != GgufValueType::kU32 || v.u == 0 || (v.u & (v.u - 1)) != 0) {
        return Status::Error(who + ": general.alignment must be a u32 power of two (got " +
                             v.ToString() + ")");
      }
      alignment_ = v.u;
    }
    kv_.emplace_back(std::move(key), std::move(v));
    keys.insert(kv_.back().first);
  }
  if (n_tensors > r.file_left() / 24) {
    return Status::Error(who + ": tensor count " + std::to_string(n_tensors) +
                         " cannot fit in the file");
  }
  tensors_.reserve(static_cast<size_t>(n_tensors));
  std::unordered_set<std::string_view> names;
  names.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    NIBBLE_RETURN_IF_ERROR(r.String(&t.name, "tensor name"));
    const std::string tw = who + ": tensor '" + EscapeBytes(t.name) + "'";
    if (t.name.size() > kMaxGgufNameBytes) {
      return Status::Error(tw + ": the name has " + std::to_string(t.name.size()) +
                           " bytes (ggml's limit is " + std::to_string(kMaxGgufNameBytes) + ")");
    }
    if (names.count(t.name)) return Status::Error(tw + " appears twice");
    uint32_t n_dims;
    NIBBLE_RETURN_IF_ERROR(r.Get(&n_dims, "n_dims"));
    if (n_dims < 1 || n_dims > 4) {
      return Status::Error(tw + ": n_dims " + std::to_string(n_dims) + " is not 1..4");
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne;
      NIBBLE_RETURN_IF_ERROR(r.Get(&ne, "ne"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(ne))) {
        return Status::Error(tw + ": dims overflow");
      }
      elements *= static_cast<int64_t>(ne);
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    NIBBLE_RETURN_IF_ERROR(r.Get(&t.type, "tensor type"));
    NIBBLE_RETURN_IF_ERROR(r.Get(&t.offset, "tensor offset"));
    if (t.offset % alignment_ != 0) {
      return Status::Error(tw + ": offset " + std::to_string(t.offset) +
                           " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    if (const GgmlTypeInfo* info = GgmlTypeTraits(t.type)) {
      if (t.ne[0] % info->block != 0) {
        return Status::Error(tw + ": ne[0] = " + std::to_string(t.ne[0]) +
                             " is not a multiple of " + info->name + "'s block of " +
                             std::to_string(info->block));
      }
      const uint64_t blocks = static_cast<uint64_t>(elements / info->block);
      if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info->bytes)) {
        return Status::Error(tw + ": byte size overflows");
      }
      t.bytes = blocks * static_cast<uint64_t>(info->bytes);
    }
    tensors_.push_back(std::move(t));
    names.insert(tensors_.back().name);
  }
  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > file_size_) {
    if (!tensors_.empty()) {
      return Status::Error(who + ": data section starts at " + std::to_string(data_offset_) +
                           ", past the end of the file");
    }
    data_offset_ = file_size_;
  }
  const uint64_t data_size = file_size_ - data_offset_;
  for (auto& t : tensors_) {
    if (!t.known()) continue;
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return Status::Error(who + ": tensor '" + t.name + "' (" + GgmlTypeName(t.type) + ", " +
                           std::to_string(t.bytes) + " bytes at data offset " +
                           std::to_string(t.offset) +
                           ") runs past the end of the file (truncated?)");
    }
    if (!file_) t.data = data_ + data_offset_ + t.offset;
  }
  return Status::Ok();
}

}  // namespace nibble
