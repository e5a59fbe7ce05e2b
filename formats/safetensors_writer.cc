#include "formats/safetensors_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "formats/atomic_file.h"
#include "formats/files.h"
#include "formats/safetensors.h"

namespace nibble {

Status WriteSafetensorsStreaming(const std::string& path,
                                 const std::vector<SafetensorsOutput>& tensors,
                                 const SafetensorsWriteOptions& options) {
  // Header first: every tensor's size must be known before any data.
  nlohmann::json header = nlohmann::json::object();
  if (!options.metadata.empty()) header["__metadata__"] = options.metadata;
  std::vector<uint64_t> sizes;
  std::set<std::string> names;
  uint64_t at = 0, largest = 0;
  for (const auto& t : tensors) {
    const std::string who = "output tensor '" + EscapeBytes(t.name) + "'";
    if (!IsValidUtf8(t.name)) {
      return Status::Error(who + ": the name is not valid UTF-8, which safetensors requires");
    }
    if (t.name == "__metadata__" || !names.insert(t.name).second) {
      return Status::Error(who + ": duplicate or reserved name");
    }
    const char* dt = SafetensorsDTypeName(t.dtype);
    if (dt == nullptr) {
      return Status::Error(who + ": " + DTypeName(t.dtype) + " has no safetensors dtype");
    }
    auto n = CheckedNumElements(t.shape, who);
    if (!n.ok()) return n.status();
    auto bytes = CheckedPackedBytes(*n, t.dtype, who);
    if (!bytes.ok()) return bytes.status();
    header[t.name] = {{"dtype", dt}, {"shape", t.shape}, {"data_offsets", {at, at + *bytes}}};
    sizes.push_back(*bytes);
    at += *bytes;
    largest = std::max<uint64_t>(largest, *bytes);
  }
  for (const auto& [k, v] : options.metadata) {
    if (!IsValidUtf8(k) || !IsValidUtf8(v)) {
      return Status::Error("safetensors metadata '" + EscapeBytes(k) + "' is not valid UTF-8");
    }
  }
  std::string h = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  h.append((8 - h.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  uint8_t len[8];
  for (int k = 0; k < 8; ++k) len[k] = static_cast<uint8_t>(uint64_t{h.size()} >> (8 * k));

  AtomicFile f;
  NIBBLE_RETURN_IF_ERROR(f.Create(path));
  NIBBLE_RETURN_IF_ERROR(f.Write(len, 8));
  NIBBLE_RETURN_IF_ERROR(f.Write(h.data(), h.size()));
  PageBuffer buf = AllocatePageBuffer(largest);
  uint64_t done = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] > 0) {
      NIBBLE_RETURN_IF_ERROR(tensors[i].fill(buf.get()));
      NIBBLE_RETURN_IF_ERROR(f.Write(buf.get(), sizes[i]));
    }
    done += sizes[i];
    if (options.progress) options.progress(i + 1, tensors.size(), done);
  }
  return f.Publish();
}

}  // namespace nibble
