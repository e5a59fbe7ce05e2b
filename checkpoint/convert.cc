#include "checkpoint/convert.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "checkpoint/gguf_source.h"
#include "checkpoint/hf_export.h"
#include "formats/atomic_file.h"
#include "formats/files.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "op/version.h"

namespace nibble {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Status::Error("cannot write '" + path + "'");
  return Status::Ok();
}

}  // namespace

namespace {

// 64-bit FNV-1a of `text`, as 16 hex digits.
std::string Fnv1aHex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// What makes two runs the same job (WriteHfFolder's resume key).
std::string ResumeKey(const std::vector<HfFolderItem>& items,
                      const std::vector<std::vector<size_t>>& shards, const HfTextFiles& texts,
                      const std::vector<std::string>& copy_files, const InputFiles& inputs,
                      const DequantOptions& options) {
  std::string d = std::string("nibble ") + NIBBLE_VERSION + "\n";
  for (const auto& [id, path] : inputs.files()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return "";  // not resumable
    d += "in " + path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec) + "\n";
  }
  d += "open " + options.open.gptq_format + " " + options.open.gptq_v1_zeros + "\n";
  for (size_t s = 0; s < shards.size(); ++s) {
    d += "shard " + std::to_string(s) + "\n";
    for (size_t i : shards[s]) {
      const SafetensorsOutput& o = items[i].out;
      d += o.name + " " + DTypeName(o.dtype) + " " + ShapeToString(o.shape) + "\n";
    }
  }
  for (const std::string& f : copy_files) d += "copy " + f + "\n";
  for (const auto& [name, text] : texts) d += "text " + name + "\n" + text + "\n";
  return Fnv1aHex(d);
}

// Whether `path` is the complete shard of `outs` the manifest says it is:
// `bytes` long, its header naming exactly those tensors, types and shapes.
bool ShardComplete(const std::string& path, uint64_t bytes,
                   const std::vector<SafetensorsOutput>& outs) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != bytes) {
    return false;
  }
  auto f = SafetensorsFile::Open(path);
  if (!f.ok() || (*f)->tensors().size() != outs.size()) return false;
  for (const SafetensorsOutput& o : outs) {
    const SafetensorsTensor* t = (*f)->Find(o.name);
    if (t == nullptr || t->dtype != o.dtype || t->shape != o.shape) return false;
  }
  return true;
}

}  // namespace

namespace {

// Shards of at most max_shard_bytes (a larger tensor alone), in order.
std::vector<std::vector<size_t>> PlanShards(const std::vector<HfFolderItem>& items,
                                            uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t in_shard = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!shards.back().empty() && in_shard + items[i].bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += items[i].bytes;
  }
  return shards;
}

std::string ShardName(size_t s, size_t ns) {
  if (ns == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, ns);
  return buf;
}

std::vector<SafetensorsOutput> ShardOutputs(const std::vector<HfFolderItem>& items,
                                            const std::vector<size_t>& shard) {
  std::vector<SafetensorsOutput> outs;
  for (size_t i : shard) outs.push_back(items[i].out);
  return outs;
}

uint64_t ShardBytes(const std::vector<HfFolderItem>& items, const std::vector<size_t>& shard) {
  uint64_t bytes = 0;
  for (size_t i : shard) bytes += items[i].bytes;
  return bytes;
}

// How every shard of a model folder is written (the single-process writer
// and the steps of a distributed one must give the same bytes).
SafetensorsWriteOptions FolderShardOptions(const DequantOptions& options) {
  SafetensorsWriteOptions wo;
  wo.metadata["format"] = "pt";
  wo.cancelled = options.cancelled;
  return wo;
}

// The small files of a finished folder, into `dir`: the index (several
// shards), `text_files`, and `copy_files` under their own names.
Status WriteFolderFiles(const std::string& dir, const std::vector<HfFolderItem>& items,
                        const std::vector<std::vector<size_t>>& shards,
                        const HfTextFiles& text_files, const std::vector<std::string>& copy_files) {
  const size_t ns = shards.size();
  uint64_t total = 0;
  for (const HfFolderItem& it : items) total += it.bytes;
  if (ns > 1) {
    std::string idx = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) +
                      "},\n  \"weight_map\": {\n";
    bool first = true;
    for (size_t s = 0; s < ns; ++s) {
      for (size_t i : shards[s]) {
        idx += std::string(first ? "" : ",\n") + "    \"" + JsonEscape(items[i].out.name) +
               "\": \"" + ShardName(s, ns) + "\"";
        first = false;
      }
    }
    idx += "\n  }\n}\n";
    NIBBLE_RETURN_IF_ERROR(WriteTextFile(dir + "/model.safetensors.index.json", idx));
  }
  for (const auto& [name, text] : text_files) {
    NIBBLE_RETURN_IF_ERROR(WriteTextFile(dir + "/" + name, text));
  }
  for (const std::string& src : copy_files) {
    const std::string base = src.substr(src.rfind('/') + 1);
    auto text = ReadSmallFile(src, kMaxCopiedFileBytes, "file to copy");
    if (!text.ok()) return text.status();
    NIBBLE_RETURN_IF_ERROR(WriteTextFile(dir + "/" + base, *text));
  }
  return Status::Ok();
}

// One FolderStep of WriteHfFolder (convert.h).
Status RunFolderStep(const std::string& out_dir, const std::vector<HfFolderItem>& items,
                     const std::vector<std::vector<size_t>>& shards, const std::string& key,
                     const HfTextFiles& text_files, const std::vector<std::string>& copy_files,
                     const DequantOptions& options, DequantReport* report) {
  FolderStep& step = *options.step;
  if (key.empty()) {
    return Status::Error("cannot read the input files' size and modification time");
  }
  const size_t ns = shards.size();
  step.key = key;
  step.shards.clear();
  for (size_t s = 0; s < ns; ++s) {
    step.shards.push_back({ShardName(s, ns), ShardBytes(items, shards[s]), shards[s].size()});
  }
  if (step.kind == FolderStep::Kind::kPlan) return Status::Ok();
  if (!step.expected_key.empty() && step.expected_key != key) {
    return Status::Error(
        "this conversion's plan differs from the one it started with (the input files changed, "
        "or this machine runs another nibble version than " NIBBLE_VERSION "'s): nothing written");
  }
  if (!IsDirectory(step.staging)) {
    return Status::Error("staging folder '" + EscapeBytes(step.staging) + "' is not a folder");
  }
  if (out_dir == step.staging) {
    return Status::Error("the staging folder must not be the output folder");
  }
  if (step.kind == FolderStep::Kind::kIndex) {
    NIBBLE_RETURN_IF_ERROR(CheckCancelled(options.cancelled));
    return WriteFolderFiles(step.staging, items, shards, text_files, copy_files);
  }
  if (step.shard >= ns) {
    return Status::Error("shard " + std::to_string(step.shard) + " does not exist (the plan has " +
                         std::to_string(ns) + ")");
  }
  const std::vector<size_t>& shard = shards[step.shard];
  const uint64_t total = ShardBytes(items, shard);
  SafetensorsWriteOptions wo = FolderShardOptions(options);
  wo.progress = [&](size_t i, size_t n, uint64_t bytes) {
    report->bytes = bytes;
    if (options.progress) options.progress(Progress{i, n, bytes, total});
  };
  std::vector<std::string> stale;
  wo.removed_stale = &stale;
  wo.xxh64 = &step.xxh64;
  const Status st = WriteSafetensorsStreaming(step.staging + "/" + ShardName(step.shard, ns),
                                              ShardOutputs(items, shard), wo);
  for (const std::string& p : stale) report->notes.push_back(StaleTemporaryNote(p));
  return st;
}

}  // namespace

Status WriteHfFolder(const std::string& out_dir, const std::vector<HfFolderItem>& items,
                     const HfTextFiles& text_files, const std::vector<std::string>& copy_files,
                     const InputFiles& inputs, const DequantOptions& options,
                     DequantReport* report) try {
  if (items.empty()) return Status::Error("no tensors to write");
  const std::vector<std::vector<size_t>> shards = PlanShards(items, options.max_shard_bytes);
  uint64_t total = 0;
  for (const HfFolderItem& it : items) total += it.bytes;
  const size_t ns = shards.size();
  auto shard_name = [ns](size_t s) { return ShardName(s, ns); };
  if (options.step != nullptr) {
    return RunFolderStep(out_dir, items, shards,
                         ResumeKey(items, shards, text_files, copy_files, inputs, options),
                         text_files, copy_files, options, report);
  }

  // Everything goes into a temporary sibling folder, renamed at the end
  // (removed on an error or interruption before a shard was complete; kept
  // for the next run of the same job after that, see convert.h).
  const std::string key =
      ns > 1 ? ResumeKey(items, shards, text_files, copy_files, inputs, options) : "";
  AtomicFolder folder;
  std::vector<std::string> stale;
  NIBBLE_RETURN_IF_ERROR(folder.Create(out_dir, &stale, key));
  for (const std::string& p : stale) {
    report->notes.push_back(StaleTemporaryNote(p));
  }
  const std::string& tmp = folder.path();
  const std::string manifest_path = tmp + "/" + AtomicFolder::kResumeManifest;
  // Shard name -> bytes, of the shards complete in `tmp`.
  std::map<std::string, uint64_t> complete;
  if (!folder.adopted().empty()) {
    auto text = ReadSmallFile(manifest_path, 1 << 20, "resume manifest");
    auto j = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (j.is_object() && j.contains("shards") && j["shards"].is_object()) {
      for (const auto& [name, bytes] : j["shards"].items()) {
        if (bytes.is_number_unsigned()) complete[name] = bytes.get<uint64_t>();
      }
    }
  }
  auto write_manifest = [&]() -> Status {
    nlohmann::ordered_json m;
    m["key"] = key;
    m["shards"] = complete;
    const std::string part = manifest_path + ".part";
    NIBBLE_RETURN_IF_ERROR(WriteTextFile(part, m.dump() + "\n"));
    if (::rename(part.c_str(), manifest_path.c_str()) != 0) {
      return Status::Error("cannot update '" + EscapeBytes(manifest_path) + "'");
    }
    return Status::Ok();
  };
  // An error or interruption once a shard is complete keeps the folder.
  size_t reused = 0;
  auto keep_for_resume = [&](const Status& st) {
    if (!options.resumable || key.empty() || complete.empty()) return st;
    folder.set_keep(true);
    return Status::Error(st.message() + " (" + std::to_string(complete.size()) + " of " +
                         std::to_string(ns) + " shards are kept in '" + EscapeBytes(tmp) +
                         "': run the same command again to resume, or delete it)");
  };

  size_t done = 0;
  uint64_t written = 0;
  for (size_t s = 0; s < ns; ++s) {
    const std::vector<SafetensorsOutput> outs = ShardOutputs(items, shards[s]);
    const uint64_t shard_bytes = ShardBytes(items, shards[s]);
    const std::string shard_path = tmp + "/" + shard_name(s);
    auto c = complete.find(shard_name(s));
    if (c != complete.end() && ShardComplete(shard_path, c->second, outs)) {
      ++reused;
      written += shard_bytes;
      done += shards[s].size();
      report->bytes = written;
      if (options.progress) options.progress(Progress{done, items.size(), written, total});
      continue;
    }
    if (c != complete.end()) complete.erase(c);
    SafetensorsWriteOptions wo = FolderShardOptions(options);
    wo.progress = [&](size_t i, size_t, uint64_t bytes) {
      report->bytes = written + bytes;
      if (options.progress) {
        options.progress(Progress{done + i, items.size(), written + bytes, total});
      }
    };
    Status w = WriteSafetensorsStreaming(shard_path, outs, wo);
    if (!w.ok()) return keep_for_resume(w);
    if (!key.empty()) {
      struct stat st {};
      if (::stat(shard_path.c_str(), &st) == 0) {
        complete[shard_name(s)] = static_cast<uint64_t>(st.st_size);
        w = write_manifest();
        if (!w.ok()) return keep_for_resume(w);
      }
    }
    written += shard_bytes;
    done += shards[s].size();
  }
  if (reused > 0) {
    report->notes.push_back("resumed the interrupted run in '" + EscapeBytes(folder.adopted()) +
                            "': " + std::to_string(reused) + " of " + std::to_string(ns) +
                            " shards were complete and kept");
  }
  if (!key.empty()) std::remove(manifest_path.c_str());
  NIBBLE_RETURN_IF_ERROR(WriteFolderFiles(tmp, items, shards, text_files, copy_files));

  // Publish: rename over the absent (or empty) destination.
  Status st = CheckCancelled(options.cancelled);
  if (!st.ok()) return st;
  return folder.Publish();
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("WriteHfFolder");
}

namespace internal {

Status SelectTensors(const Checkpoint& ck, const DequantOptions& options, const std::string& in,
                     DequantReport* report, std::vector<const CheckpointTensor*>* chosen) {
  std::regex include, exclude;
  for (const auto& [flag, pattern, re] : {std::tuple<const char*, const std::string&, std::regex&>{
                                              "--tensors", options.tensors, include},
                                          {"--exclude", options.exclude, exclude}}) {
    if (pattern.empty()) continue;
    try {
      re = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::Error(std::string(flag) + " '" + pattern +
                           "' is not a valid regex: " + e.what());
    }
  }
  chosen->clear();
  report->skipped.clear();
  for (const auto& t : ck.tensors()) {
    if (!options.tensors.empty() && !std::regex_search(t.source, include)) continue;
    if (!options.exclude.empty() && std::regex_search(t.source, exclude)) continue;
    if (!t.supported) {
      if (options.skip_unsupported) {
        report->skipped.push_back(t.source + ": " + t.why_not);
        continue;
      }
      return Status::Error("tensor '" + t.source + "': " + t.why_not +
                           " (leave it out with --exclude, or --skip-unsupported)");
    }
    chosen->push_back(&t);
  }
  if (chosen->empty()) {
    return Status::Error(
        "no tensors selected from '" + in + "'" +
        (report->skipped.empty() ? "" : " (every selected tensor is unsupported)"));
  }
  return Status::Ok();
}

}  // namespace internal

namespace {

// Files of a Hugging Face folder that belong in the dequantized one
// (tokenizer, generation settings, chat template, model card): regular
// files other than weights, configs rewritten here, and indexes.
std::vector<std::string> FilesToCopy(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!e.is_regular_file(ec)) continue;
    static const char* const kSkip[] = {"config.json", "quantize_config.json", "quant_config.json",
                                        "model.safetensors.index.json"};
    bool skip = false;
    for (const char* k : kSkip) skip = skip || n == k;
    for (const char* ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx", ".data"}) {
      skip = skip || EndsWith(n, ext);
    }
    if (!skip && !n.empty() && n[0] != '.') {
      auto p = PathInside(dir, n, "file to copy");
      if (p.ok()) out.push_back(*p);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A checkpoint -> a model folder: every selected tensor in safetensors
// shards with an index; for a Hugging Face input also config.json (without
// quantization_config) and the tokenizer / generation files.
Status DequantToFolder(const Checkpoint& ck, const std::string& in, const std::string& out_dir,
                       const DequantOptions& options, DequantReport* report) {
  const std::string who = "dequant to folder '" + EscapeBytes(out_dir) + "'";
  const bool hf = !ck.hf_dir().empty();
  if (hf) {
    std::error_code ec;
    if (std::filesystem::equivalent(out_dir, ck.hf_dir(), ec)) {
      return Status::Error("output '" + EscapeBytes(out_dir) + "' is the input folder");
    }
  }
  NIBBLE_RETURN_IF_ERROR(CheckOutputFolder(out_dir, ck.inputs()));
  std::vector<const CheckpointTensor*> chosen;
  NIBBLE_RETURN_IF_ERROR(internal::SelectTensors(ck, options, in, report, &chosen));
  std::vector<HfFolderItem> items;
  DType model_dtype = options.dtype;
  // The writer prepares tensors one at a time (reading each in row
  // chunks): they share one set of input buffers.
  const auto scratch = std::make_shared<CheckpointTensor::Buffers>();
  for (const CheckpointTensor* t : chosen) {
    HfFolderItem it;
    it.out.name = t->name;
    it.out.dtype = ck.OutputDType(*t, options.dtype);
    it.out.shape = t->shape;
    auto n = CheckedNumElements(t->shape, t->name);
    if (!n.ok()) return n.status();
    it.bytes = static_cast<uint64_t>(*n) * static_cast<uint64_t>(DTypeBits(it.out.dtype) / 8);
    const DType req = options.dtype;
    const int threads = options.threads;
    const Checkpoint* c = &ck;
    it.out.open_rows = [c, t, req, threads, scratch, cancelled = options.cancelled]() {
      return c->PrepareRows(*t, req, threads, scratch.get(), cancelled);
    };
    items.push_back(std::move(it));
    if (t->quantized) {
      ++report->dequantized;
      if (model_dtype == DType::kUndefined) model_dtype = ck.OutputDType(*t, options.dtype);
      if (report->dtype == DType::kUndefined) report->dtype = ck.OutputDType(*t, options.dtype);
    } else {
      ++report->copied;
    }
  }
  // config.json: the original without quantization_config, torch_dtype set.
  std::string config;
  if (!hf) {
    report->notes.push_back(
        "the folder holds the tensors under their stored names and no config.json (a GGUF file "
        "becomes a Hugging Face model folder with --hf)");
  } else if (!ck.hf_config_json().empty()) {
    auto j = nlohmann::ordered_json::parse(ck.hf_config_json(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return Status::Error(who + ": config.json is not a JSON object");
    }
    j.erase("quantization_config");
    if (model_dtype != DType::kUndefined) {
      j["torch_dtype"] = TorchDTypeName(model_dtype);
      if (j.contains("dtype")) j["dtype"] = TorchDTypeName(model_dtype);
    }
    config = j.dump(2) + "\n";
  } else {
    report->skipped.push_back("config.json: the input has none (the folder holds weights only)");
  }
  HfTextFiles texts;
  if (!config.empty()) texts.emplace_back("config.json", std::move(config));
  return WriteHfFolder(out_dir, items, texts,
                       hf ? FilesToCopy(ck.hf_dir()) : std::vector<std::string>(), ck.inputs(),
                       options, report)
      .WithPrefix(who);
}

}  // namespace

Status DequantCheckpoint(const std::string& in, const std::string& out,
                         const DequantOptions& options, DequantReport* report) try {
  if (options.hf && EndsWith(out, ".safetensors")) {
    return Status::Error("--hf writes a model folder: give a folder path, not '" +
                         EscapeBytes(out) + "' (a name ending in .safetensors is one file)");
  }
  const bool gguf = !IsDirectory(in) && HasGgufMagic(in);
  if (options.hf && gguf) return DequantGgufToHf(in, out, options, report);
  auto ck = Checkpoint::Open(in, options.open);
  if (!ck.ok()) return ck.status();
  return DequantOpenCheckpoint(*ck, in, out, options, report);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantCheckpoint");
}

Status DequantOpenCheckpoint(const Checkpoint& ck, const std::string& in, const std::string& out,
                             const DequantOptions& options, DequantReport* report) try {
  if (options.hf && ck.hf_dir().empty()) {
    return Status::Error("--hf (a Hugging Face model folder) needs a GGUF or Hugging Face input");
  }
  // The one rule of every input: a name ending in .safetensors is one
  // file; anything else (a trailing '/' included) is a model folder.
  if (options.hf || !EndsWith(out, ".safetensors")) {
    return DequantToFolder(ck, in, out, options, report);
  }
  if (options.step != nullptr) {
    return Status::Error("'" + EscapeBytes(out) +
                         "' is one file: a conversion in steps writes a model folder");
  }
  NIBBLE_RETURN_IF_ERROR(CheckOutputPath(out, ck.inputs()));
  std::vector<const CheckpointTensor*> chosen;
  NIBBLE_RETURN_IF_ERROR(internal::SelectTensors(ck, options, in, report, &chosen));
  std::vector<SafetensorsOutput> outs;
  const Checkpoint* c = &ck;
  // The writer prepares tensors one at a time (reading each in row
  // chunks): they share one set of input buffers.
  const auto scratch = std::make_shared<CheckpointTensor::Buffers>();
  for (const CheckpointTensor* t : chosen) {
    SafetensorsOutput o;
    o.name = t->name;
    o.dtype = c->OutputDType(*t, options.dtype);
    o.shape = t->shape;
    const DType req = options.dtype;
    const int threads = options.threads;
    o.open_rows = [c, t, req, threads, scratch, cancelled = options.cancelled]() {
      return c->PrepareRows(*t, req, threads, scratch.get(), cancelled);
    };
    outs.push_back(std::move(o));
    if (t->quantized) {
      ++report->dequantized;
      if (report->dtype == DType::kUndefined) report->dtype = c->OutputDType(*t, options.dtype);
    } else {
      ++report->copied;
    }
  }
  SafetensorsWriteOptions wo;
  wo.metadata["format"] = "pt";
  wo.metadata["nibble.source"] =
      EscapeBytes(in.substr(in.rfind('/') == std::string::npos ? 0 : in.rfind('/') + 1));
  uint64_t total = 0;
  for (const SafetensorsOutput& o : outs) {
    const auto n = CheckedNumElements(o.shape, o.name);
    if (n.ok()) total += static_cast<uint64_t>(*n) * static_cast<uint64_t>(DTypeBits(o.dtype) / 8);
  }
  wo.progress = [&](size_t i, size_t n, uint64_t bytes) {
    report->bytes = bytes;
    if (options.progress) options.progress(Progress{i, n, bytes, total});
  };
  wo.cancelled = options.cancelled;
  std::vector<std::string> stale;
  wo.removed_stale = &stale;
  const Status st = WriteSafetensorsStreaming(out, outs, wo);
  for (const std::string& p : stale) {
    report->notes.push_back(StaleTemporaryNote(p));
  }
  return st;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantCheckpoint");
}

}  // namespace nibble
