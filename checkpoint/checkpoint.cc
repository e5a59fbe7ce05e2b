#include "checkpoint/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "formats/files.h"
#include "formats/gguf.h"
#include "checkpoint/hf_config.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "kernels/convert.h"
#include "checkpoint/methods/layers.h"
#include "checkpoint/hf_source.h"
#include "checkpoint/hf_export.h"
#include "op/lowering.h"
#include "op/onnx.h"

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

Checkpoint Checkpoint::FromParts(std::string description,
                                 std::vector<std::pair<std::string, std::string>> properties,
                                 std::vector<CheckpointTensor> tensors,
                                 std::vector<std::shared_ptr<void>> keep_alive, InputFiles inputs) {
  Checkpoint c;
  c.description_ = std::move(description);
  c.props_ = std::move(properties);
  c.tensors_ = std::move(tensors);
  c.keep_alive_ = std::move(keep_alive);
  c.inputs_ = std::move(inputs);
  c.default_dtype_ = DType::kFloat32;
  c.IndexNames();
  return c;
}

bool Checkpoint::Recognizes(const std::string& path) {
  return IsDir(path) || EndsWith(path, ".safetensors") || EndsWith(path, ".gguf") ||
         HasGgufMagic(path);
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path,
                                      const CheckpointOptions& options) try {
  if (!options.gptq_format.empty() && options.gptq_format != "v1" && options.gptq_format != "v2") {
    return Status::Error("GPTQ format option (--gptq-format) must be v1 or v2 (got '" +
                         options.gptq_format + "')");
  }
  if (!options.gptq_v1_zeros.empty() && options.gptq_v1_zeros != "autogptq" &&
      options.gptq_v1_zeros != "gptqmodel") {
    return Status::Error(
        "GPTQ v1 zero-point option (--gptq-v1-zeros) must be autogptq or "
        "gptqmodel (got '" +
        options.gptq_v1_zeros + "')");
  }
  Checkpoint c;
  if (!IsDir(path) && EndsWith(path, ".onnx")) {
    return Status::Error("'" + EscapeBytes(path) +
                         "' is an ONNX model: open it with OpenAnyCheckpoint / "
                         "OpenOnnxCheckpoint (onnx/onnx_checkpoint.h, library nibble) or "
                         "nibble_checkpoint_open_any (C)");
  }
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
        ct.read_stored = [tp, fp](uint64_t offset, uint64_t n, uint8_t* dst) {
          return fp->ReadInto(*tp, dst, offset, n);
        };
      } else if (GgmlTypeIsDequantizable(t.type)) {
        ct.quantized = true;
        ct.detail = GgmlBlockDescription(t.type);
        ct.prepare = [tp, fp](DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
          auto d = fp->Load(*tp, bufs->NextBytes());
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
    c.IndexNames();
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
  c.IndexNames();
  return c;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Open");
}

namespace {
// Stored float types a copy is converted from on request: every value of
// each is exact in float32, and rounded once to float16 / bfloat16 (the
// float8 types are exact in both).
bool IsFloat8(DType d) {
  return d == DType::kFloat8E4M3FN || d == DType::kFloat8E4M3FNUZ || d == DType::kFloat8E5M2 ||
         d == DType::kFloat8E5M2FNUZ;
}
bool IsConvertibleFloat(DType d) { return IsFloat16Or32(d) || IsFloat8(d); }

// Converts n float8 values at src to `to` (float32 / float16 / bfloat16):
// the operator's own float8 decoding (ONNX DequantizeLinear, per-tensor
// scale 1: float32(x) * 1 is x, exactly), single-threaded.
Status ConvertFloat8(DType from, const uint8_t* src, DType to, uint8_t* dst, int64_t n,
                     const std::string& name) {
  const float one = 1.0f;
  const TensorView x{from, {n}, src, static_cast<size_t>(n)};
  const TensorView scale{DType::kFloat32, {}, &one, sizeof one};
  OnnxDequantizeAttributes a;
  a.output_dtype = static_cast<int32_t>(to);
  a.has_output_dtype = true;
  DequantizeOptions o;
  o.name = name;
  auto d = PrepareOnnx(a, x, scale, nullptr, o);
  if (!d.ok()) return d.status();
  MutableTensorView y{
      to, {n}, dst, static_cast<size_t>(n) * static_cast<size_t>(DTypeBits(to) / 8)};
  return d->Run(y, 1);
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

int64_t Checkpoint::Rows(const CheckpointTensor& t) { return t.shape.empty() ? 1 : t.shape[0]; }

StatusOr<uint64_t> Checkpoint::OutputBytes(const CheckpointTensor& t, DType requested, int64_t row0,
                                           int64_t row1) const {
  const int64_t rows = Rows(t);
  if (row1 == -1) row1 = rows;
  if (row0 < 0 || row0 > row1 || row1 > rows) {
    return Status::Error("tensor '" + t.name + "': rows [" + std::to_string(row0) + ", " +
                         std::to_string(row1) + ") are outside its first dimension (" +
                         std::to_string(rows) + " rows)");
  }
  const auto n = CheckedNumElements(t.shape, t.name);
  if (!n.ok()) return n.status();
  const DType to = OutputDType(t, requested);
  const int64_t per_row = rows == 0 ? 0 : *n / rows;
  if (!t.quantized && to == t.stored_dtype) {
    // Stored bytes, whatever the type.
    const uint64_t row_bytes = rows == 0 ? 0 : t.stored_bytes / static_cast<uint64_t>(rows);
    return row_bytes * static_cast<uint64_t>(row1 - row0);
  }
  const auto elements = static_cast<uint64_t>(per_row * (row1 - row0));
  if (elements > (uint64_t{1} << 60)) {
    return Status::Error("tensor '" + t.name + "': " + std::to_string(elements) +
                         " elements are too many to read at once");
  }
  return elements * static_cast<uint64_t>(DTypeBits(to) / 8);
}

Status Checkpoint::CheckRequest(const CheckpointTensor& t, DType requested, int threads) {
  if (!t.supported) return Status::Error("tensor '" + t.name + "': " + t.why_not);
  if (requested != DType::kUndefined && requested != DType::kFloat32 &&
      requested != DType::kFloat16 && requested != DType::kBFloat16) {
    return Status::Error("tensor '" + t.name +
                         "': output type must be float32, float16 or "
                         "bfloat16 (got " +
                         DTypeName(requested) + ")");
  }
  return CheckThreads(threads).WithPrefix("tensor '" + t.name + "'");
}

StatusOr<uint64_t> Checkpoint::CheckRead(const CheckpointTensor& t, DType requested, int64_t row0,
                                         int64_t* row1, int threads, const void* dst,
                                         size_t dst_bytes) const {
  NIBBLE_RETURN_IF_ERROR(CheckRequest(t, requested, threads));
  if (*row1 == -1) *row1 = Rows(t);
  const auto need = OutputBytes(t, requested, row0, *row1);
  if (!need.ok()) return need.status();
  if (dst_bytes < *need) {
    return Status::Error("tensor '" + t.name + "': the output buffer has " +
                         std::to_string(dst_bytes) + " bytes, rows [" + std::to_string(row0) +
                         ", " + std::to_string(*row1) + ") need " + std::to_string(*need));
  }
  if (*need > 0 && dst == nullptr) {
    return Status::Error("tensor '" + t.name + "': the output buffer is null");
  }
  return *need;
}

Status Checkpoint::RunPrepared(const Dequantizer& d, const CheckpointTensor& t, int64_t row0,
                               int64_t row1, void* dst, uint64_t need, int threads) {
  if (need == 0) return Status::Ok();
  if (row0 == 0 && row1 == Rows(t)) {
    MutableTensorView y{d.output().dtype, t.shape, dst, static_cast<size_t>(need)};
    return d.Run(y, threads);
  }
  return d.RunRows(row0, row1, dst, static_cast<size_t>(need), threads);
}

StatusOr<Checkpoint::RowReader> Checkpoint::PrepareRows(const CheckpointTensor& t, DType requested,
                                                        int threads,
                                                        CheckpointTensor::Buffers* scratch) const
    try {
  NIBBLE_RETURN_IF_ERROR(CheckRequest(t, requested, threads));
  if (!t.quantized) {
    // Copies are positioned reads of their byte range: nothing to prepare.
    return RowReader(
        [this, &t, requested, threads](int64_t r0, int64_t r1, void* dst, size_t dst_bytes) {
          return Read(t, requested, r0, r1, threads, dst, dst_bytes);
        });
  }
  if (scratch == nullptr) return Status::Error("tensor '" + t.name + "': no scratch buffers");
  scratch->Reuse();
  auto d = t.prepare(OutputDType(t, requested), scratch);
  if (!d.ok()) return d.status();
  auto prepared = std::make_shared<const Dequantizer>(std::move(*d));
  return RowReader([this, &t, requested, threads, prepared](int64_t r0, int64_t r1, void* dst,
                                                            size_t dst_bytes) -> Status {
    const auto need = CheckRead(t, requested, r0, &r1, threads, dst, dst_bytes);
    if (!need.ok()) return need.status();
    return RunPrepared(*prepared, t, r0, r1, dst, *need, threads);
  });
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::PrepareRows");
}

Status Checkpoint::Read(const CheckpointTensor& t, DType requested, int64_t row0, int64_t row1,
                        int threads, void* dst, size_t dst_bytes,
                        CheckpointTensor::Buffers* scratch) const try {
  const auto need = CheckRead(t, requested, row0, &row1, threads, dst, dst_bytes);
  if (!need.ok()) return need.status();
  if (*need == 0) return Status::Ok();
  const int64_t rows = Rows(t);
  uint8_t* const out = static_cast<uint8_t*>(dst);
  if (!t.quantized) {
    if (rows > 0 && t.stored_bytes % static_cast<uint64_t>(rows) != 0) {
      return Status::Error("tensor '" + t.name + "': " + std::to_string(t.stored_bytes) +
                           " stored bytes do not divide into " + std::to_string(rows) + " rows");
    }
    const uint64_t row_bytes = rows == 0 ? 0 : t.stored_bytes / static_cast<uint64_t>(rows);
    const uint64_t offset = row_bytes * static_cast<uint64_t>(row0);
    const uint64_t stored = row_bytes * static_cast<uint64_t>(row1 - row0);
    const DType to = OutputDType(t, requested);
    if (to == t.stored_dtype) return t.read_stored(offset, stored, out);
    // A float copy in another float type: each value rounded once. Read in
    // pieces of at most 4 MiB (a multi-GB embedding is not held twice).
    const uint64_t in_bytes = static_cast<uint64_t>(DTypeBits(t.stored_dtype) / 8);
    const uint64_t out_bytes = static_cast<uint64_t>(DTypeBits(to) / 8);
    const uint64_t n = stored / in_bytes;
    const uint64_t piece = std::min<uint64_t>(n, uint64_t{1} << 20);
    std::vector<uint8_t> bytes(static_cast<size_t>(piece * in_bytes));
    for (uint64_t k = 0; k < n; k += piece) {
      const uint64_t m = std::min(piece, n - k);
      NIBBLE_RETURN_IF_ERROR(t.read_stored(offset + k * in_bytes, m * in_bytes, bytes.data()));
      if (IsFloat8(t.stored_dtype)) {
        NIBBLE_RETURN_IF_ERROR(ConvertFloat8(t.stored_dtype, bytes.data(), to, out + k * out_bytes,
                                             static_cast<int64_t>(m), t.name));
        continue;
      }
      ConvertFloats(internal::OutTypeOf(t.stored_dtype), bytes.data(), internal::OutTypeOf(to),
                    out + k * out_bytes, static_cast<int64_t>(m));
    }
    return Status::Ok();
  }
  CheckpointTensor::Buffers own;
  CheckpointTensor::Buffers* buffers = scratch != nullptr ? scratch : &own;
  buffers->Reuse();
  auto d = t.prepare(OutputDType(t, requested), buffers);
  if (!d.ok()) return d.status();
  return RunPrepared(*d, t, row0, row1, dst, *need, threads);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Read");
}

Status Checkpoint::Fill(const CheckpointTensor& t, DType requested, int threads, uint8_t* dst,
                        CheckpointTensor::Buffers* scratch) const {
  return Read(t, requested, 0, -1, threads, dst, SIZE_MAX, scratch);
}

StatusOr<Tensor> Checkpoint::Read(const CheckpointTensor& t, DType requested, int64_t row0,
                                  int64_t row1, int threads) const try {
  const int64_t rows = Rows(t);
  if (row1 == -1) row1 = rows;
  const auto need = OutputBytes(t, requested, row0, row1);
  if (!need.ok()) return need.status();
  Shape shape = t.shape;
  if (!shape.empty()) shape[0] = row1 - row0;
  auto y = Tensor::Allocate(OutputDType(t, requested), shape);
  if (!y.ok()) return y.status().WithPrefix("tensor '" + t.name + "'");
  NIBBLE_RETURN_IF_ERROR(Read(t, requested, row0, row1, threads, y->mutable_view().data,
                              y->mutable_view().size_bytes));
  return y;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Read");
}

void Checkpoint::IndexNames() {
  by_name_.clear();
  by_name_.reserve(tensors_.size());
  by_source_.clear();
  by_source_.reserve(tensors_.size());
  // The first of equal names wins, as a scan in order would find.
  for (size_t i = 0; i < tensors_.size(); ++i) {
    by_name_.emplace(tensors_[i].name, i);
    by_source_.emplace(tensors_[i].source, i);
  }
}

const CheckpointTensor* Checkpoint::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return &tensors_[it->second];
  it = by_source_.find(name);
  return it != by_source_.end() ? &tensors_[it->second] : nullptr;
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
  NIBBLE_RETURN_IF_ERROR(t.read_stored(0, t.stored_bytes, bytes.data()));
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
  {
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
    it.out.open_rows = [c, t, req, threads, scratch]() {
      return c->PrepareRows(*t, req, threads, scratch.get());
    };
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
  return DequantOpenCheckpoint(*ck, in, out, options, report);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantCheckpoint");
}

Status DequantOpenCheckpoint(const Checkpoint& ck, const std::string& in, const std::string& out,
                             const DequantOptions& options, DequantReport* report) try {
  if (!ck.hf_dir().empty() && (options.hf || !EndsWith(out, ".safetensors"))) {
    // A new (or empty) folder: it can be none of the inputs.
    return DequantHfToFolder(ck, in, out, options, report);
  }
  if (options.hf) {
    return Status::Error("--hf (a Hugging Face model folder) needs a GGUF or Hugging Face input");
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
    o.open_rows = [c, t, req, threads, scratch]() {
      return c->PrepareRows(*t, req, threads, scratch.get());
    };
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
    report->notes.push_back("removed '" + EscapeBytes(p) +
                            "', left by an earlier nibble run that was killed");
  }
  return st;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantCheckpoint");
}

}  // namespace nibble
