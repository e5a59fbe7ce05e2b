#include "formats/safetensors_writer.h"

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

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
  std::vector<uint64_t> sizes, chunk_rows;
  std::set<std::string> names;
  uint64_t at = 0, largest_whole = 0, largest_chunk = 0;
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
    const uint64_t rows = t.shape.empty() ? 1 : static_cast<uint64_t>(t.shape[0]);
    if (t.open_rows && rows > 0 && *bytes > 0) {
      // Whole rows of at most chunk_bytes (at least one).
      const uint64_t row_bytes = *bytes / rows;
      const uint64_t per_chunk = std::clamp<uint64_t>(options.chunk_bytes / row_bytes, 1, rows);
      chunk_rows.push_back(per_chunk);
      largest_chunk = std::max(largest_chunk, per_chunk * row_bytes);
    } else {
      if (!t.fill && *bytes > 0) return Status::Error(who + ": nothing produces its bytes");
      chunk_rows.push_back(0);
      largest_whole = std::max<uint64_t>(largest_whole, *bytes);
    }
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

  NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
  AtomicFile f;
  NIBBLE_RETURN_IF_ERROR(f.Create(path, options.removed_stale));
  Xxh64 hash;
  if (options.xxh64 != nullptr) f.set_hash(&hash);
  NIBBLE_RETURN_IF_ERROR(f.Write(len, 8));
  NIBBLE_RETURN_IF_ERROR(f.Write(h.data(), h.size()));
  PageBuffer whole = AllocatePageBuffer(largest_whole);
  PageBuffer chunks[2] = {AllocatePageBuffer(largest_chunk), AllocatePageBuffer(largest_chunk)};
  int next_chunk = 0;
  // At most one write in flight, on an I/O thread, while the next bytes are
  // produced into another buffer. Declared after the buffers and the file:
  // destroyed (which waits for the write) before them.
  std::future<Status> in_flight;
  auto wait = [&in_flight]() -> Status {
    return in_flight.valid() ? in_flight.get() : Status::Ok();
  };
  auto submit = [&](const uint8_t* p, uint64_t n) -> Status {
    NIBBLE_RETURN_IF_ERROR(wait());
    try {
      in_flight = std::async(std::launch::async, [&f, p, n] { return f.Write(p, n); });
      return Status::Ok();
    } catch (const std::system_error&) {  // no thread to be had: write here
      return f.Write(p, n);
    }
  };
  uint64_t done = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsOutput& t = tensors[i];
    NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
    if (sizes[i] > 0 && chunk_rows[i] == 0) {
      NIBBLE_RETURN_IF_ERROR(wait());  // `whole` may be in flight
      NIBBLE_RETURN_IF_ERROR(t.fill(whole.get()));
      NIBBLE_RETURN_IF_ERROR(submit(whole.get(), sizes[i]));
    } else if (sizes[i] > 0) {
      auto rows_of = t.open_rows();
      if (!rows_of.ok()) return rows_of.status();
      const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
      const uint64_t row_bytes = sizes[i] / static_cast<uint64_t>(rows);
      const auto step = static_cast<int64_t>(chunk_rows[i]);
      for (int64_t r0 = 0; r0 < rows; r0 += step) {
        if (r0 > 0) NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
        const int64_t r1 = std::min(rows, r0 + step);
        const uint64_t n = static_cast<uint64_t>(r1 - r0) * row_bytes;
        // The other chunk may be in flight; this one was waited for by the
        // submit that put the other in flight.
        uint8_t* const dst = chunks[next_chunk].get();
        next_chunk ^= 1;
        NIBBLE_RETURN_IF_ERROR((*rows_of)(r0, r1, dst, static_cast<size_t>(n)));
        NIBBLE_RETURN_IF_ERROR(submit(dst, n));
      }
    }
    done += sizes[i];
    if (options.progress) options.progress(i + 1, tensors.size(), done);
  }
  NIBBLE_RETURN_IF_ERROR(wait());
  NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
  NIBBLE_RETURN_IF_ERROR(f.Publish());
  if (options.xxh64 != nullptr) *options.xxh64 = hash.Digest();
  return Status::Ok();
}

}  // namespace nibble
