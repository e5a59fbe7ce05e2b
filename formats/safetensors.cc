#include "formats/safetensors.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

namespace nibble {

namespace {

// A SAX pass that finds the first key repeated within one object. Linear
// in the text: one hash set per open object.
class DuplicateKeyFinder {
 public:
  using json = nlohmann::json;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    keys_.emplace_back();
    return true;
  }
  bool key(json::string_t& k) {
    if (!keys_.back().insert(k).second) {
      dup_ = k;
      found_ = true;
      return false;  // stop: found
    }
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
  bool found() const { return found_; }
  const std::string& dup() const { return dup_; }

 private:
  bool found_ = false;
  std::vector<std::unordered_set<std::string>> keys_;
  std::string dup_;
};

// Parses JSON text, rejecting duplicate keys in any object (the last one
// would silently win otherwise). Linear time: nlohmann's parse callback
// rescans the parent object at every nested object's end (quadratic in the
// number of tensors), so duplicates are found by a separate SAX pass.
StatusOr<nlohmann::json> ParseJsonStrict(const char* begin, const char* end,
                                         const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(begin, end, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(what + " is not valid JSON");
  DuplicateKeyFinder finder;
  nlohmann::json::sax_parse(begin, end, &finder);
  if (finder.found()) {
    return Status::Error(what + " has the key '" + EscapeBytes(finder.dup()) + "' twice");
  }
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

// A shard name of an index: a relative path (a subfolder is fine) with no
// empty, "." or ".." component; PathInside then checks where it resolves.
bool IsShardPath(const std::string& s) {
  if (s.empty() || s.front() == '/' || s.find('\0') != std::string::npos) return false;
  size_t at = 0;
  while (at <= s.size()) {
    size_t slash = s.find('/', at);
    if (slash == std::string::npos) slash = s.size();
    const std::string part = s.substr(at, slash - at);
    if (part.empty() || part == "." || part == "..") return false;
    at = slash + 1;
  }
  return true;
}

}  // namespace

StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path,
                                                                 InputFiles* inputs) {
  auto f = ReadOnlyFile::Open(path, inputs);
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
  const uint64_t head =
      size < 8
          ? size
          : 8 + std::min<uint64_t>(n, std::min<uint64_t>(size - 8, kMaxSafetensorsHeaderBytes));
  st->header_bytes_.resize(static_cast<size_t>(head));
  if (head > 0)
    NIBBLE_RETURN_IF_ERROR((*f)->Read(0, static_cast<size_t>(head), &st->header_bytes_[0]));
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
    return Status::Error(who + ": header length " + std::to_string(n) +
                         " runs past the end of the " + std::to_string(size_) +
                         "-byte file (truncated?)");
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
          return Status::Error(who + ": __metadata__ value of '" + m.key() + "' must be a string");
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
      if (!AsCount(d, &v))
        return Status::Error(tw + ": shape entries must be non-negative integers");
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
      return Status::Error(
          who + ": tensor '" + t.name + "' starts at " + std::to_string(t.begin) + ", expected " +
          std::to_string(at) +
          (t.begin > at ? " (a hole in the data buffer)" : " (overlapping tensors)"));
    }
    at = t.end;
  }
  if (at != buffer_size) {
    return Status::Error(who + ": tensors cover " + std::to_string(at) +
                         " bytes but the data buffer has " + std::to_string(buffer_size));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<TensorView> SafetensorsFile::Load(const SafetensorsTensor& t,
                                           std::vector<uint8_t>* storage,
                                           const CancelCallback* cancelled) const {
  TensorView v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.size_bytes = static_cast<size_t>(t.end - t.begin);
  if (!file_) {
    v.data = buffer_ + t.begin;
    return v;
  }
  if (storage->size() < v.size_bytes) storage->resize(v.size_bytes);
  if (v.size_bytes > 0) {
    NIBBLE_RETURN_IF_ERROR(
        file_->Read(buffer_offset_ + t.begin, v.size_bytes, storage->data(), cancelled)
            .WithPrefix("tensor '" + t.name + "'"));
  }
  v.data = storage->data();
  return v;
}

Status SafetensorsFile::ReadInto(const SafetensorsTensor& t, uint8_t* dst, uint64_t offset,
                                 uint64_t n) const {
  const uint64_t size = t.end - t.begin;
  if (n == UINT64_MAX && offset <= size) n = size - offset;
  if (offset > size || n > size - offset) {
    return Status::Error("tensor '" + EscapeBytes(t.name) + "': bytes [" + std::to_string(offset) +
                         ", +" + std::to_string(n) + ") are outside its " + std::to_string(size));
  }
  if (n == 0) return Status::Ok();
  if (!file_) {
    std::memcpy(dst, buffer_ + t.begin + offset, static_cast<size_t>(n));
    return Status::Ok();
  }
  return file_->Read(buffer_offset_ + t.begin + offset, static_cast<size_t>(n), dst)
      .WithPrefix("tensor '" + EscapeBytes(t.name) + "'");
}

StatusOr<SafetensorsSet> SafetensorsSet::Open(const std::string& path, InputFiles* inputs) {
  SafetensorsSet set;
  std::vector<std::string> shard_paths;
  std::map<std::string, std::string> weight_map;
  std::map<std::string, std::string> shard_names;  // shard path -> its weight_map name
  if (!IsDirectory(path)) {
    shard_paths.push_back(path);  // ReadOnlyFile::Open reports what it is
  } else {
    auto index_path = PathInside(path, "model.safetensors.index.json", "index file");
    if (!index_path.ok()) return index_path.status();
    auto single = PathInside(path, "model.safetensors", "safetensors file");
    if (!single.ok()) return single.status();
    if (PathExists(*index_path)) {
      const std::string who = "'" + EscapeBytes(*index_path) + "'";
      auto text = ReadSmallFile(*index_path, kMaxJsonFileBytes, "index file", inputs);
      if (!text.ok()) return text.status();
      auto j = ParseJsonStrict(text->data(), text->data() + text->size(), who);
      if (!j.ok()) return j.status();
      if (!j->is_object()) return Status::Error(who + " is not a JSON object");
      auto wm = j->find("weight_map");
      if (wm == j->end() || !wm->is_object()) {
        return Status::Error(who + " has no weight_map object");
      }
      std::set<std::string> shards;
      for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it.value().is_string()) {
          return Status::Error(who + ": weight_map entry '" + EscapeBytes(it.key()) +
                               "' must be a string naming a shard file");
        }
        const std::string shard = it.value().get<std::string>();
        if (!IsShardPath(shard)) {
          return Status::Error(who + ": weight_map entry '" + EscapeBytes(it.key()) + "' names '" +
                               EscapeBytes(shard) +
                               "': shards must be relative paths inside the folder (no '..', "
                               "no absolute paths)");
        }
        weight_map[it.key()] = shard;
        shards.insert(shard);
      }
      for (const auto& sh : shards) {
        auto p = PathInside(path, sh, "shard");
        if (!p.ok()) return p.status();
        if (!PathExists(*p)) {
          return Status::Error(who + ": shard '" + EscapeBytes(sh) +
                               "' named by the weight_map does not exist in '" + EscapeBytes(path) +
                               "'");
        }
        shard_paths.push_back(*p);
        shard_names[*p] = sh;
      }
    } else if (PathExists(*single)) {
      shard_paths.push_back(*single);
    } else {
      std::vector<std::string> names, subdirs;
      if (DIR* d = ::opendir(path.c_str())) {
        while (dirent* e = ::readdir(d)) {
          const std::string n = e->d_name;
          if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) {
            names.push_back(n);
          } else if (n != "." && n != ".." && IsDirectory(path + "/" + n)) {
            subdirs.push_back(n);
          }
        }
        ::closedir(d);
      }
      std::sort(names.begin(), names.end());
      std::sort(subdirs.begin(), subdirs.end());
      if (names.empty()) {
        // The weights may sit one level down (a repository with the model
        // in a subfolder): name it instead of "0 files".
        for (const auto& sd : subdirs) {
          const std::string sub = path + "/" + sd;
          if (PathExists(sub + "/model.safetensors") ||
              PathExists(sub + "/model.safetensors.index.json")) {
            return Status::Error(
                "'" + EscapeBytes(path) + "' holds no .safetensors files; its subfolder '" +
                EscapeBytes(sd) + "' has a model: open '" + EscapeBytes(sub) + "'");
          }
        }
      }
      if (names.empty()) {
        return Status::Error("'" + EscapeBytes(path) +
                             "' is not a Hugging Face checkpoint folder: no " +
                             (PathExists(path + "/config.json") ? "" : "config.json and no ") +
                             "*.safetensors files");
      }
      if (names.size() != 1) {
        return Status::Error("'" + EscapeBytes(path) +
                             "' has no model.safetensors(.index.json) and " +
                             std::to_string(names.size()) + " .safetensors files");
      }
      auto p = PathInside(path, names[0], "safetensors file");
      if (!p.ok()) return p.status();
      shard_paths.push_back(*p);
    }
  }
  for (const auto& p : shard_paths) {
    auto f = SafetensorsFile::Open(p, inputs);
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
        const std::string base = shard_names[f->label()];
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
