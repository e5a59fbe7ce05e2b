#include "op/checkpoint_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "formats/files.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "op/checkpoint.h"
#include "op/hf_checkpoint.h"
#include "op/hf_export.h"
#include "op/lowering.h"

namespace nibble {

namespace {

bool IsDir(const std::string& p) { return IsDirectory(p); }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string DirOf(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// Opens without blocking (a FIFO is not a GGUF file).
bool HasGgufMagic(const std::string& path) {
  auto f = ReadOnlyFile::Open(path);
  uint8_t m[4] = {};
  return f.ok() && (*f)->size() >= 4 && (*f)->Read(0, 4, m).ok() && GgufFile::HasMagic(m, 4);
}

DType DTypeOfGgml(uint32_t type) {
  switch (type) {
    case 0:
      return DType::kFloat32;
    case 1:
      return DType::kFloat16;
    case 24:
      return DType::kInt8;
    case 25:
      return DType::kInt16;
    case 26:
      return DType::kInt32;
    case 27:
      return DType::kInt64;
    case 28:
      return DType::kFloat64;
    case 30:
      return DType::kBFloat16;
    default:
      return DType::kUndefined;
  }
}

}  // namespace

bool Checkpoint::Recognizes(const std::string& path) {
  return IsDir(path) || EndsWith(path, ".safetensors") || EndsWith(path, ".gguf") ||
         HasGgufMagic(path);
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path,
                                      const CheckpointOptions& options) try {
  Checkpoint c;
  if (!IsDir(path) && HasGgufMagic(path)) {
    auto g = GgufFile::Open(path, &c.inputs_);
    if (!g.ok()) return g.status();
    std::shared_ptr<GgufFile> f = *g;
    c.keep_alive_.push_back(f);
    c.default_dtype_ = DType::kFloat32;
    c.description_ = "GGUF v" + std::to_string(f->version()) + ", " +
                     std::to_string(f->tensors().size()) + " tensors, " +
                     std::to_string(f->metadata().size()) + " metadata keys";
    c.props_.emplace_back("alignment", std::to_string(f->alignment()));
    for (const auto& [k, v] : f->metadata()) c.props_.emplace_back(k, v.ToString());
    for (const GgufTensor& t : f->tensors()) {
      CheckpointTensor ct;
      ct.name = t.name;
      ct.source = t.name;
      ct.shape.assign(t.ne.rbegin(), t.ne.rend());
      ct.kind = GgmlTypeName(t.type);
      ct.stored_bytes = t.bytes;
      const DType plain = DTypeOfGgml(t.type);
      const GgufTensor* tp = &t;
      const GgufFile* fp = f.get();
      if (plain != DType::kUndefined) {
        ct.stored_dtype = plain;
        ct.kind = "copy";
        ct.detail = GgmlTypeName(t.type);
        ct.copy_to = [tp, fp](uint8_t* dst) { return fp->ReadInto(*tp, dst); };
      } else if (GgmlTypeIsDequantizable(t.type)) {
        ct.quantized = true;
        ct.detail = GgmlBlockDescription(t.type);
        ct.prepare = [tp, fp](DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
          bufs->emplace_back();
          auto d = fp->Load(*tp, &bufs->back());
          if (!d.ok()) return d.status();
          return PrepareGgml(tp->type, tp->ne, *d, static_cast<size_t>(tp->bytes), out, tp->name);
        };
      } else {
        ct.quantized = true;
        ct.supported = false;
        ct.why_not = GgmlTypeTraits(t.type) == nullptr
                         ? "unknown ggml type id " + std::to_string(t.type) +
                               " (not a type ggml defines: a newer or a damaged file?)"
                         : "ggml type " + GgmlTypeName(t.type) + " is not dequantized by nibble (" +
                               DequantizableGgmlTypeNames() + " are)";
      }
      c.tensors_.push_back(std::move(ct));
    }
    return c;
  }

  // safetensors: a file or a folder.
  auto set_or = SafetensorsSet::Open(path, &c.inputs_);
  if (!set_or.ok()) return set_or.status();
  auto set = std::make_shared<SafetensorsSet>(std::move(*set_or));
  c.keep_alive_.push_back(set);
  c.hf_dir_ = IsDir(path) ? path : DirOf(path);
  auto cfg = ReadHfQuantConfig(c.hf_dir_, &c.inputs_);
  if (!cfg.ok()) return cfg.status();
  {
    auto cp = PathInside(c.hf_dir_, "config.json", "config file");
    if (!cp.ok()) return cp.status();
    if (PathExists(*cp)) {
      auto text = ReadSmallFile(*cp, kMaxJsonFileBytes, "config file");
      if (!text.ok()) return text.status();
      c.hf_config_json_ = std::move(*text);
    }
  }
  c.description_ = "safetensors, " + std::to_string(set->num_files()) + " file(s), " +
                   std::to_string(set->entries().size()) + " tensors";
  internal::HfListing listing;
  NIBBLE_RETURN_IF_ERROR(internal::ListHfTensors(*set, *cfg, options, &listing));
  c.tensors_ = std::move(listing.tensors);
  for (auto& p : listing.props) c.props_.push_back(std::move(p));
  return c;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Open");
}

namespace {
bool IsConvertibleFloat(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32;
}
}  // namespace

DType Checkpoint::OutputDType(const CheckpointTensor& t, DType requested) const {
  if (!t.quantized) {
    return requested != DType::kUndefined && IsConvertibleFloat(t.stored_dtype) ? requested
                                                                                : t.stored_dtype;
  }
  return internal::ResolveOutDType(
      requested, t.out_default != DType::kUndefined ? t.out_default : default_dtype_);
}

Status Checkpoint::Fill(const CheckpointTensor& t, DType requested, int threads, uint8_t* dst) const
    try {
  if (!t.supported) return Status::Error("tensor '" + t.name + "': " + t.why_not);
  if (!t.quantized) {
    const DType to = OutputDType(t, requested);
    if (to == t.stored_dtype) return t.copy_to(dst);
    // A float copy in another float type: each value rounded once.
    std::vector<uint8_t> bytes(static_cast<size_t>(t.stored_bytes));
    NIBBLE_RETURN_IF_ERROR(t.copy_to(bytes.data()));
    const TensorView v{t.stored_dtype, t.shape, bytes.data(), bytes.size()};
    const auto n = CheckedNumElements(t.shape, t.name);
    if (!n.ok()) return n.status();
    for (int64_t k = 0; k < *n; ++k) {
      const float x = FloatElement(v, k);
      if (to == DType::kFloat32) {
        std::memcpy(dst + 4 * k, &x, 4);
      } else {
        const uint16_t h = to == DType::kFloat16 ? F16FromF32(x) : BF16FromF32(x);
        std::memcpy(dst + 2 * k, &h, 2);
      }
    }
    return Status::Ok();
  }
  CheckpointTensor::Buffers buffers;
  auto d = t.prepare(OutputDType(t, requested), &buffers);
  if (!d.ok()) return d.status();
  const auto n = CheckedNumElements(t.shape, t.name);
  if (!n.ok()) return n.status();
  MutableTensorView y{
      d->output().dtype, t.shape, dst,
      static_cast<size_t>(*n) * static_cast<size_t>(DTypeBits(d->output().dtype) / 8)};
  return d->Run(y, threads);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Fill");
}

StatusOr<std::vector<float>> Checkpoint::LoadFloat(const CheckpointTensor& t, int threads) const
    try {
  const auto n = CheckedNumElements(t.shape, t.name);
  if (!n.ok()) return n.status();
  std::vector<float> out(static_cast<size_t>(*n));
  if (t.quantized) {
    NIBBLE_RETURN_IF_ERROR(
        Fill(t, DType::kFloat32, threads, reinterpret_cast<uint8_t*>(out.data())));
    return out;
  }
  if (!IsFloat16Or32(t.stored_dtype)) {
    return Status::Error("tensor '" + t.name + "' is " + DTypeName(t.stored_dtype) +
                         ", not a float weight");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(t.stored_bytes));
  NIBBLE_RETURN_IF_ERROR(t.copy_to(bytes.data()));
  const TensorView v{t.stored_dtype, t.shape, bytes.data(), bytes.size()};
  for (int64_t k = 0; k < *n; ++k) out[static_cast<size_t>(k)] = FloatElement(v, k);
  return out;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::LoadFloat");
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

// A Hugging Face checkpoint -> a dequantized model folder.
Status DequantHfToFolder(const Checkpoint& ck, const std::string& in, const std::string& out_dir,
                         const DequantOptions& options, DequantReport* report) {
  const std::string who = "dequant to folder '" + EscapeBytes(out_dir) + "'";
  struct stat st;
  if (::lstat(out_dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      // A file, link, device...: the single-file checks name what it is.
      NIBBLE_RETURN_IF_ERROR(CheckOutputPath(out_dir, ck.inputs()));
      return Status::Error("output '" + EscapeBytes(out_dir) +
                           "' is an existing file; an output not ending in .safetensors is a new "
                           "model folder (give OUT.safetensors for one file)");
    }
    std::error_code ec;
    if (std::filesystem::equivalent(out_dir, ck.hf_dir(), ec)) {
      return Status::Error("output '" + EscapeBytes(out_dir) + "' is the input folder");
    }
  }
  NIBBLE_RETURN_IF_ERROR(CheckHfOutputFolder(out_dir, who));
  std::vector<const CheckpointTensor*> chosen;
  NIBBLE_RETURN_IF_ERROR(internal::SelectTensors(ck, options, in, report, &chosen));
  std::vector<HfFolderItem> items;
  DType model_dtype = options.dtype;
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
    it.out.fill = [c, t, req, threads](uint8_t* dst) { return c->Fill(*t, req, threads, dst); };
    items.push_back(std::move(it));
    if (t->quantized) {
      ++report->dequantized;
      if (model_dtype == DType::kUndefined) model_dtype = ck.OutputDType(*t, options.dtype);
    } else {
      ++report->copied;
    }
  }
  // config.json: the original without quantization_config, torch_dtype set.
  std::string config;
  if (!ck.hf_config_json().empty()) {
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
  return WriteHfFolder(out_dir, items, config, FilesToCopy(ck.hf_dir()), options, report)
      .WithPrefix(who);
}

}  // namespace

Status DequantCheckpoint(const std::string& in, const std::string& out,
                         const DequantOptions& options, DequantReport* report) try {
  const bool gguf = !IsDir(in) && HasGgufMagic(in);
  if (options.hf && gguf) return DequantGgufToHf(in, out, options, report);
  auto ck = Checkpoint::Open(in, options.open);
  if (!ck.ok()) return ck.status();
  if (!gguf && (options.hf || !EndsWith(out, ".safetensors"))) {
    // A new (or empty) folder: it can be none of the inputs.
    return DequantHfToFolder(*ck, in, out, options, report);
  }
  NIBBLE_RETURN_IF_ERROR(CheckOutputPath(out, ck->inputs()));
  std::vector<const CheckpointTensor*> chosen;
  NIBBLE_RETURN_IF_ERROR(internal::SelectTensors(*ck, options, in, report, &chosen));
  std::vector<SafetensorsOutput> outs;
  const Checkpoint* c = &*ck;
  for (const CheckpointTensor* t : chosen) {
    SafetensorsOutput o;
    o.name = t->name;
    o.dtype = c->OutputDType(*t, options.dtype);
    o.shape = t->shape;
    const DType req = options.dtype;
    const int threads = options.threads;
    o.fill = [c, t, req, threads](uint8_t* dst) { return c->Fill(*t, req, threads, dst); };
    outs.push_back(std::move(o));
    if (t->quantized) {
      ++report->dequantized;
    } else {
      ++report->copied;
    }
  }
  SafetensorsWriteOptions wo;
  wo.metadata["format"] = "pt";
  wo.metadata["nibble.source"] =
      EscapeBytes(in.substr(in.rfind('/') == std::string::npos ? 0 : in.rfind('/') + 1));
  const auto t0 = std::chrono::steady_clock::now();
  wo.progress = [&](size_t i, size_t n, uint64_t bytes) {
    report->bytes = bytes;
    if (!options.progress) return;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\r[%zu/%zu tensors] %.2f GB, %.2f GB/s   ", i, n,
                 static_cast<double>(bytes) / 1e9,
                 sec > 0 ? static_cast<double>(bytes) / 1e9 / sec : 0.0);
    if (i == n) std::fprintf(stderr, "\n");
  };
  return WriteSafetensorsStreaming(out, outs, wo);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantCheckpoint");
}

}  // namespace nibble
