#include "onnx/external_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "onnx/onnx_tensor.h"

namespace nibble {

bool HasExternalData(const nibble_onnx::TensorProto& p) {
  return p.data_location() == nibble_onnx::TensorProto::EXTERNAL || p.external_data_size() > 0;
}

StatusOr<TensorView> TensorResolver::Describe(const nibble_onnx::TensorProto& p) {
  const std::string who = "tensor '" + p.name() + "'";
  if (!IsKnownDType(p.data_type())) {
    return Status::Error(who + ": unsupported data_type " + std::to_string(p.data_type()));
  }
  TensorView v;
  v.dtype = static_cast<DType>(p.data_type());
  v.shape.assign(p.dims().begin(), p.dims().end());
  auto n = CheckedNumElements(v.shape, who);
  if (!n.ok()) return n.status();
  auto bytes = CheckedPackedBytes(*n, v.dtype, who);
  if (!bytes.ok()) return bytes.status();
  v.size_bytes = *bytes;
  return v;
}

namespace {

// Parses a non-negative decimal integer (the whole string).
bool ParseSize(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// A safe relative location: not absolute, no ".." component, not empty.
bool SafeLocation(const std::string& loc) {
  if (loc.empty() || loc[0] == '/' || loc.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= loc.size()) {
    const size_t end = loc.find('/', start);
    const std::string part =
        loc.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part == "..") return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

}  // namespace

StatusOr<const ReadOnlyFile*> TensorResolver::ExternalFile(const nibble_onnx::TensorProto& p,
                                                           const std::string& location) {
  const std::string who = "tensor '" + EscapeBytes(p.name()) + "'";
  if (location.empty()) return Status::Error(who + ": external data has no location");
  if (!SafeLocation(location)) {
    return Status::Error(who + ": external data location '" + EscapeBytes(location) +
                         "' must be a relative path inside the model's folder");
  }
  auto path = PathInside(model_dir_, location, who + ": external data");
  if (!path.ok()) return path.status();
  auto it = files_.find(*path);
  if (it == files_.end()) {
    auto f = ReadOnlyFile::Open(*path, inputs_);
    if (!f.ok()) return f.status().WithPrefix(who);
    it = files_.emplace(*path, std::move(*f)).first;
  }
  return it->second.get();
}

Status TensorResolver::OpenExternal(const nibble_onnx::TensorProto& p) {
  if (!HasExternalData(p)) return Status::Ok();
  std::string location;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
  }
  auto f = ExternalFile(p, location);
  return f.ok() ? Status::Ok() : f.status();
}

StatusOr<std::pair<const ReadOnlyFile*, uint64_t>> TensorResolver::ExternalRange(
    const nibble_onnx::TensorProto& p, const TensorView& v) {
  const std::string who = "tensor '" + p.name() + "'";
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_length = false;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      if (!ParseSize(kv.value(), &offset)) {
        return Status::Error(who + ": external data offset '" + kv.value() +
                             "' is not a non-negative integer");
      }
    } else if (kv.key() == "length") {
      if (!ParseSize(kv.value(), &length)) {
        return Status::Error(who + ": external data length '" + kv.value() +
                             "' is not a non-negative integer");
      }
      has_length = true;
    }
  }
  auto file = ExternalFile(p, location);
  if (!file.ok()) return file.status();
  const ReadOnlyFile& f = **file;
  if (!has_length) length = v.size_bytes;
  if (length != v.size_bytes) {
    return Status::Error(who + ": external data length " + std::to_string(length) + " but " +
                         DTypeName(v.dtype) + " " + ShapeToString(v.shape) + " needs " +
                         std::to_string(v.size_bytes));
  }
  if (offset > f.size() || length > f.size() - offset) {
    return Status::Error(who + ": external data [" + std::to_string(offset) + ", " +
                         std::to_string(offset + length) + ") lies outside '" + location + "' (" +
                         std::to_string(f.size()) + " bytes)");
  }
  return std::make_pair(&f, offset);
}

Status TensorResolver::ReadRange(const nibble_onnx::TensorProto& p, uint64_t offset, uint64_t n,
                                 uint8_t* dst, const CancelCallback* cancelled) {
  auto desc = Describe(p);
  if (!desc.ok()) return desc.status();
  const uint64_t size = desc->size_bytes;
  if (offset > size || n > size - offset) {
    return Status::Error("tensor '" + EscapeBytes(p.name()) + "': bytes [" +
                         std::to_string(offset) + ", +" + std::to_string(n) + ") are outside its " +
                         std::to_string(size));
  }
  if (n == 0) return Status::Ok();
  if (HasExternalData(p)) {
    auto range = ExternalRange(p, *desc);
    if (!range.ok()) return range.status();
    return range->first->Read(range->second + offset, static_cast<size_t>(n), dst, cancelled)
        .WithPrefix("tensor '" + EscapeBytes(p.name()) + "'");
  }
  Tensor storage;  // inline raw_data: a view; typed fields: decoded whole
  auto v = Resolve(p, &storage);
  if (!v.ok()) return v.status();
  std::memcpy(dst, static_cast<const uint8_t*>(v->data) + offset, static_cast<size_t>(n));
  return Status::Ok();
}

StatusOr<TensorView> TensorResolver::Resolve(const nibble_onnx::TensorProto& p, Tensor* storage,
                                             const CancelCallback* cancelled) {
  const std::string who = "tensor '" + p.name() + "'";
  auto desc = Describe(p);
  if (!desc.ok()) return desc.status();
  TensorView v = *desc;
  if (!HasExternalData(p)) {
    if (p.has_raw_data()) {
      if (p.raw_data().size() != v.size_bytes) {
        return Status::Error(who + ": raw_data has " + std::to_string(p.raw_data().size()) +
                             " bytes, " + DTypeName(v.dtype) + " " + ShapeToString(v.shape) +
                             " needs " + std::to_string(v.size_bytes));
      }
      v.data = p.raw_data().data();
      return v;
    }
    auto t = TensorFromProto(p);  // typed fields
    if (!t.ok()) return t.status();
    *storage = std::move(*t);
    v.data = storage->data();
    return v;
  }
  auto range = ExternalRange(p, v);
  if (!range.ok()) return range.status();
  auto t = Tensor::Allocate(v.dtype, v.shape);
  if (!t.ok()) return t.status().WithPrefix(who);
  if (v.size_bytes > 0) {
    NIBBLE_RETURN_IF_ERROR(
        range->first->Read(range->second, v.size_bytes, t->data(), cancelled).WithPrefix(who));
  }
  *storage = std::move(*t);
  v.data = storage->data();
  return v;
}

}  // namespace nibble
