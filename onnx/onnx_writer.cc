#include "onnx/onnx_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

#include "formats/atomic_file.h"
#include "formats/files.h"

namespace nibble {

namespace {

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

uint64_t VarintSize(uint64_t v) {
  uint64_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

constexpr uint8_t kModelGraphTag = (7 << 3) | 2;        // ModelProto.graph
constexpr uint8_t kGraphInitializerTag = (5 << 3) | 2;  // GraphProto.initializer
constexpr uint8_t kTensorRawDataTag = (9 << 3) | 2;     // TensorProto.raw_data

std::string BaseName(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}
std::string DirName(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash + 1);
}

}  // namespace

std::string OldDataNameFor(const std::string& data_path) {
  std::string p = TempPrefixFor(data_path);
  p.replace(p.rfind(".nibble-tmp-"), 12, ".nibble-old-");
  return p + AtomicFile::RandomSuffix();
}

StatusOr<std::string> ExternalDataPathFor(const std::string& model_path,
                                          const std::string& external_name) {
  const std::string name = external_name.empty() ? BaseName(model_path) + ".data" : external_name;
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
      name.find('\0') != std::string::npos) {
    return Status::Error("external data name '" + EscapeBytes(name) +
                         "' must be a plain file name (it is written beside the model)");
  }
  if (name == BaseName(model_path)) {
    return Status::Error("external data name '" + EscapeBytes(name) +
                         "' is the model's own file name: the data would overwrite the model");
  }
  return DirName(model_path) + name;
}

Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  AtomicFile f;
  NIBBLE_RETURN_IF_ERROR(f.Create(path));
  NIBBLE_RETURN_IF_ERROR(f.Write(bytes.data(), bytes.size()));
  return f.Publish();
}

uint64_t InlineModelBytes(const nibble_onnx::ModelProto& model,
                          const std::vector<StreamedTensor>& t) {
  uint64_t total = model.ByteSizeLong();
  for (const auto& s : t) {
    const uint64_t rec = s.meta.ByteSizeLong() + 1 + VarintSize(s.bytes) + s.bytes;
    total += 1 + VarintSize(rec) + rec;
  }
  return total + 16;
}

Status WriteModelStreaming(const std::string& path, const nibble_onnx::ModelProto& model,
                           std::vector<StreamedTensor>& tensors, const ModelWriteOptions& options) {
  std::string data_path, data_name;
  if (options.external) {
    auto p = ExternalDataPathFor(path, options.external_name);
    if (!p.ok()) return p.status();
    data_path = *p;
    data_name = BaseName(data_path);
  }

  NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
  AtomicFile model_file, data_file;
  NIBBLE_RETURN_IF_ERROR(model_file.Create(path, options.removed_stale));
  if (options.external) NIBBLE_RETURN_IF_ERROR(data_file.Create(data_path, options.removed_stale));

  // Record metadata (and, in external mode, the data placement) first: the
  // graph's length must be known before its bytes.
  std::vector<std::string> metas(tensors.size());
  std::vector<uint64_t> data_offsets(tensors.size(), 0);
  uint64_t next = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    nibble_onnx::TensorProto meta = tensors[i].meta;
    meta.clear_raw_data();
    if (options.external) {
      const uint64_t align = tensors[i].bytes >= (uint64_t{1} << 20) ? 4096 : 64;
      next = (next + align - 1) / align * align;
      data_offsets[i] = next;
      next += tensors[i].bytes;
      meta.clear_external_data();
      auto add = [&](const char* k, const std::string& v) {
        auto* e = meta.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", data_name);
      add("offset", std::to_string(data_offsets[i]));
      add("length", std::to_string(tensors[i].bytes));
      meta.set_data_location(nibble_onnx::TensorProto::EXTERNAL);
    }
    metas[i] = meta.SerializeAsString();
  }
  nibble_onnx::ModelProto head = model;
  head.clear_graph();
  const std::string head_bytes = head.SerializeAsString();
  const std::string graph_bytes = model.graph().SerializeAsString();
  auto record_len = [&](size_t i) {
    uint64_t r = metas[i].size();
    if (!options.external) r += 1 + VarintSize(tensors[i].bytes) + tensors[i].bytes;
    return r;
  };
  uint64_t graph_len = graph_bytes.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    graph_len += 1 + VarintSize(record_len(i)) + record_len(i);
  }
  std::string prefix = head_bytes;
  prefix.push_back(static_cast<char>(kModelGraphTag));
  PutVarint(&prefix, graph_len);
  prefix += graph_bytes;
  NIBBLE_RETURN_IF_ERROR(model_file.Write(prefix.data(), prefix.size()));

  uint64_t done_bytes = 0;
  // One buffer, sized for the largest tensor and reused (uninitialized:
  // each fill writes every byte).
  uint64_t largest = 0;
  for (const auto& t : tensors) largest = std::max(largest, t.bytes);
  PageBuffer buf = AllocatePageBuffer(largest);
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string rec;
    rec.push_back(static_cast<char>(kGraphInitializerTag));
    PutVarint(&rec, record_len(i));
    rec += metas[i];
    if (!options.external) {
      rec.push_back(static_cast<char>(kTensorRawDataTag));
      PutVarint(&rec, tensors[i].bytes);
    }
    NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
    NIBBLE_RETURN_IF_ERROR(model_file.Write(rec.data(), rec.size()));
    // Produce the data (one tensor in memory at a time).
    NIBBLE_RETURN_IF_ERROR(tensors[i].fill(buf.get()));
    if (options.external) {
      NIBBLE_RETURN_IF_ERROR(data_file.PadTo(data_offsets[i]));
      NIBBLE_RETURN_IF_ERROR(data_file.Write(buf.get(), tensors[i].bytes));
    } else {
      NIBBLE_RETURN_IF_ERROR(model_file.Write(buf.get(), tensors[i].bytes));
    }
    done_bytes += tensors[i].bytes;
    if (options.progress) options.progress(i + 1, tensors.size(), done_bytes);
  }
  // Both files complete and durable before either gets its name.
  if (options.external) NIBBLE_RETURN_IF_ERROR(data_file.Stage());
  NIBBLE_RETURN_IF_ERROR(model_file.Stage());
  NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
  if (!options.external) return model_file.Commit();
  // Data first, then the model: a model never points at a missing file. A
  // data file already at data_path is kept under a backup name
  // (OldDataNameFor) and put back if the model cannot be named, so a
  // failure leaves the folder as it was. Between the two commits (two
  // renames) the old model sits beside the new data; a process killed in
  // that instant leaves the backup, and `mv BACKUP DATA` restores the old
  // pair (README, hardening).
  std::string old;
  if (PathExists(data_path)) {
    old = OldDataNameFor(data_path);
    if (std::rename(data_path.c_str(), old.c_str()) != 0) {
      return Status::Error("cannot replace '" + data_path + "': " + std::strerror(errno));
    }
  }
  auto restore = [&] {
    if (!old.empty()) (void)std::rename(old.c_str(), data_path.c_str());
  };
  Status st = data_file.Commit();
  if (!st.ok()) {
    restore();
    return st;
  }
  st = model_file.Commit();
  if (!st.ok()) {
    std::remove(data_path.c_str());
    restore();
    return st;
  }
  if (!old.empty()) std::remove(old.c_str());
  return Status::Ok();
}

}  // namespace nibble
