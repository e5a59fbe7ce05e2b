#include "formats/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace nibble {

namespace {

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {
    {"BOOL", DType::kBool},       {"U8", DType::kUInt8},          {"I8", DType::kInt8},
    {"U16", DType::kUInt16},      {"I16", DType::kInt16},         {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},   {"U32", DType::kUInt32},        {"I32", DType::kInt32},
    {"F32", DType::kFloat32},     {"U64", DType::kUInt64},        {"I64", DType::kInt64},
    {"F64", DType::kFloat64},     {"F8_E4M3", DType::kFloat8E4M3FN}, {"F8_E5M2", DType::kFloat8E5M2},
    {"F8_E8M0", DType::kFloat8E8M0},
};

// Parses JSON text, rejecting duplicate keys in any object (the last one
// would silently win otherwise).
StatusOr<nlohmann::json> ParseJsonStrict(const char* begin, const char* end,
                                         const std::string& what) {
  std::vector<std::set<std::string>> keys;
  std::string dup;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& j) {
    (void)depth;
    switch (ev) {
      case nlohmann::json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case nlohmann::json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case nlohmann::json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(j.get<std::string>()).second && dup.empty()) {
          dup = j.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(begin, end, cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(what + " is not valid JSON");
  if (!dup.empty()) return Status::Error(what + " has the key '" + dup + "' twice");
  return j;
}

// A non-negative integer JSON value that fits int64.
bool AsCount(const nlohmann::json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
  } else {
    return false;
  }
  return *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

bool IsPlainFileName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

DType SafetensorsDType(const std::string& name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return DType::kUndefined;
}

const char* SafetensorsDTypeName(DType t) {
  for (const auto& d : kDTypes) {
    if (t == d.dtype) return d.name;
  }
  return nullptr;
}

StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto f = ReadOnlyFile::Open(path);
  if (!f.ok()) return f.status();
  std::shared_ptr<SafetensorsFile> st(new SafetensorsFile());
  st->file_ = *f;
  st->label_ = path;
  const uint64_t size = (*f)->size();
  // Header length, then the header (bounded before anything is allocated).
  uint8_t len[8] = {};
  uint64_t n = 0;
  if (size >= 8) {
    NIBBLE_RETURN_IF_ERROR((*f)->Read(0, 8, len));
    for (int k = 7; k >= 0; --k) n = (n << 8) | len[k];
  }
  const uint64_t head = size < 8 ? size : 8 + std::min<uint64_t>(n, std::min<uint64_t>(
                                                          size - 8, kMaxSafetensorsHeaderBytes));
  st->header_bytes_.resize(static_cast<size_t>(head));
  if (head > 0) NIBBLE_RETURN_IF_ERROR((*f)->Read(0, static_cast<size_t>(head), &st->header_bytes_[0]));
  st->data_ = reinterpret_cast<const uint8_t*>(st->header_bytes_.data());
  st->size_ = static_cast<size_t>(size);  // the whole file, for the checks
  NIBBLE_RETURN_IF_ERROR(st->Parse());
  return st;
}

StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(const uint8_t* data,
                                                                      size_t size,
                                                                      const std::string& label) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->data_ = data;
  f->size_ = size;
  f->label_ = label;
  NIBBLE_RETURN_IF_ERROR(f->Parse());
  return f;
}

Status SafetensorsFile::Parse() {
  const std::string who = "safetensors '" + label_ + "'";
  if (size_ < 8) {
    return Status::Error(who + ": file is " + std::to_string(size_) +
                         " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | data_[k];
  if (n > kMaxSafetensorsHeaderBytes) {
    return Status::Error(who + ": header length " + std::to_string(n) + " exceeds the " +
                         std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }
  if (n > size_ - 8) {
    return Status::Error(who + ": header length " + std::to_string(n) + " runs past the end of the " +
                         std::to_string(size_) + "-byte file (truncated?)");
  }
  if (n < 2 || data_[8] != '{') return Status::Error(who + ": header is not a JSON object");
  const char* h = reinterpret_cast<const char*>(data_ + 8);
  auto parsed = ParseJsonStrict(h, h + n, who + " header");
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Status::Error(who + ": header is not a JSON object");
  buffer_offset_ = 8 + n;
  buffer_ = file_ ? nullptr : data_ + 8 + n;
  const uint64_t buffer_size = size_ - 8 - n;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return Status::Error(who + ": __metadata__ must be an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) {
          return Status::Error(who + ": __metadata__ value of '" + m.key() +
                               "' must be a string");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = who + ": tensor '" + name + "'";
    if (!e.is_object()) return Status::Error(tw + " must be an object");
    SafetensorsTensor t;
    t.name = name;
    auto dt = e.find("dtype");
    if (dt == e.end() || !dt->is_string()) return Status::Error(tw + " has no dtype string");
    t.dtype_name = dt->get<std::string>();
    t.dtype = SafetensorsDType(t.dtype_name);
    if (t.dtype == DType::kUndefined) {
      return Status::Error(tw + " has unsupported dtype '" + t.dtype_name + "'");
    }
    auto sh = e.find("shape");
    if (sh == e.end() || !sh->is_array()) return Status::Error(tw + " has no shape array");
    for (const auto& d : *sh) {
      uint64_t v;
      if (!AsCount(d, &v)) return Status::Error(tw + ": shape entries must be non-negative integers");
      t.shape.push_back(static_cast<int64_t>(v));
    }
    auto off = e.find("data_offsets");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !AsCount((*off)[0], &t.begin) ||
        !AsCount((*off)[1], &t.end)) {
      return Status::Error(tw + ": data_offsets must be [begin, end], non-negative integers");
    }
    if (t.begin > t.end) {
      return Status::Error(tw + ": data_offsets begin " + std::to_string(t.begin) +
                           " is after end " + std::to_string(t.end));
    }
    auto count = CheckedNumElements(t.shape, tw);
    if (!count.ok()) return count.status();
    auto bytes = CheckedPackedBytes(*count, t.dtype, tw);
    if (!bytes.ok()) return bytes.status();
    if (t.end - t.begin != *bytes) {
      return Status::Error(tw + ": data_offsets cover " + std::to_string(t.end - t.begin) +
                           " bytes, but " + t.dtype_name + " " + ShapeToString(t.shape) +
                           " needs " + std::to_string(*bytes));
    }
    if (t.end > buffer_size) {
      return Status::Error(tw + ": data_offsets end " + std::to_string(t.end) +
                           " is past the end of the " + std::to_string(buffer_size) +
                           "-byte data buffer (truncated file?)");
    }
    tensors_.push_back(std::move(t));
  }
  std::stable_sort(tensors_.begin(), tensors_.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t at = 0;
  for (const auto& t : tensors_) {
    if (t.begin != at) {
      return Status::Error(who + ": tensor '" + t.name + "' starts at " +
                           std::to_string(t.begin) + ", expected " + std::to_string(at) +
                           (t.begin > at ? " (a hole in the data buffer)" : " (overlapping tensors)"));
    }
    at = t.end;
  }
  if (at != buffer_size) {
    return Status::Error(who + ": tensors cover " + std::to_string(at) + " bytes but the data buffer has " +
                         std::to_string(buffer_size));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<TensorView> SafetensorsFile::Load(const SafetensorsTensor& t,
                                           std::vector<uint8_t>* storage) const {
  TensorView v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.size_bytes = static_cast<size_t>(t.end - t.begin);
  if (!file_) {
    v.data = buffer_ + t.begin;
    return v;
  }
  storage->resize(v.size_bytes);
  if (v.size_bytes > 0) {
    NIBBLE_RETURN_IF_ERROR(file_->Read(buffer_offset_ + t.begin, v.size_bytes, storage->data())
                               .WithPrefix("tensor '" + t.name + "'"));
  }
  v.data = storage->data();
  return v;
}

StatusOr<SafetensorsSet> SafetensorsSet::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::Error("cannot open '" + path + "'");
  SafetensorsSet set;
  std::vector<std::string> shard_paths;
  std::map<std::string, std::string> weight_map;
  if (!S_ISDIR(st.st_mode)) {
    shard_paths.push_back(path);
  } else {
    const std::string dir = path.back() == '/' ? path : path + "/";
    const std::string index_path = dir + "model.safetensors.index.json";
    std::ifstream in(index_path, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      auto j = ParseJsonStrict(text.data(), text.data() + text.size(), "'" + index_path + "'");
      if (!j.ok()) return j.status();
      auto wm = j->find("weight_map");
      if (!j->is_object() || wm == j->end() || !wm->is_object()) {
        return Status::Error("'" + index_path + "' has no weight_map object");
      }
      std::set<std::string> shards;
      for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it.value().is_string() || !IsPlainFileName(it.value().get<std::string>())) {
          return Status::Error("'" + index_path + "': weight_map entry '" + it.key() +
                               "' must name a file inside the folder");
        }
        weight_map[it.key()] = it.value().get<std::string>();
        shards.insert(it.value().get<std::string>());
      }
      for (const auto& s : shards) shard_paths.push_back(dir + s);
    } else if (::stat((dir + "model.safetensors").c_str(), &st) == 0) {
      shard_paths.push_back(dir + "model.safetensors");
    } else {
      DIR* d = ::opendir(path.c_str());
      if (d) {
        while (dirent* e = ::readdir(d)) {
          const std::string n = e->d_name;
          if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) {
            shard_paths.push_back(dir + n);
          }
        }
        ::closedir(d);
      }
      std::sort(shard_paths.begin(), shard_paths.end());
      if (shard_paths.size() != 1) {
        return Status::Error("'" + path + "' has no model.safetensors(.index.json) and " +
                             std::to_string(shard_paths.size()) + " .safetensors files");
      }
    }
  }
  for (const auto& p : shard_paths) {
    auto f = SafetensorsFile::Open(p);
    if (!f.ok()) return f.status();
    set.files_.push_back(*f);
  }
  for (const auto& f : set.files_) {
    for (const auto& t : f->tensors()) {
      if (set.index_.count(t.name)) {
        return Status::Error("tensor '" + t.name + "' is in more than one shard ('" + f->label() +
                             "')");
      }
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        const std::string base = f->label().substr(f->label().rfind('/') + 1);
        if (it == weight_map.end() || it->second != base) {
          return Status::Error("tensor '" + t.name + "' in '" + f->label() +
                               "' is not mapped to that shard by the index's weight_map");
        }
      }
      set.index_[t.name] = set.entries_.size();
      set.entries_.push_back({f.get(), &t});
    }
  }
  for (const auto& [name, shard] : weight_map) {
    if (!set.index_.count(name)) {
      return Status::Error("weight_map lists tensor '" + name + "' but shard '" + shard +
                           "' does not contain it");
    }
  }
  return set;
}

const SafetensorsSet::Entry* SafetensorsSet::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

}  // namespace nibble
