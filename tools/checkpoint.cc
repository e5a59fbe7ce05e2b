#include "tools/checkpoint.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <optional>
#include <set>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "op/checkpoint.h"

namespace nibble {

namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string DirOf(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

bool HasGgufMagic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {};
  f.read(m, 4);
  return f.gcount() == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

DType DTypeOfGgml(uint32_t type) {
  switch (type) {
    case 0: return DType::kFloat32;
    case 1: return DType::kFloat16;
    case 24: return DType::kInt8;
    case 25: return DType::kInt16;
    case 26: return DType::kInt32;
    case 27: return DType::kInt64;
    case 28: return DType::kFloat64;
    case 30: return DType::kBFloat16;
    default: return DType::kUndefined;
  }
}

}  // namespace

bool Checkpoint::Recognizes(const std::string& path) {
  return IsDir(path) || EndsWith(path, ".safetensors") || EndsWith(path, ".gguf") ||
         HasGgufMagic(path);
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path) {
  Checkpoint c;
  if (!IsDir(path) && HasGgufMagic(path)) {
    auto g = GgufFile::Open(path);
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
      ct.shape.assign(t.ne.rbegin(), t.ne.rend());
      ct.kind = GgmlTypeName(t.type);
      ct.stored_bytes = t.bytes;
      const DType plain = DTypeOfGgml(t.type);
      if (plain != DType::kUndefined) {
        ct.stored_dtype = plain;
        ct.kind = "copy";
        ct.detail = GgmlTypeName(t.type);
        ct.copy = TensorView{plain, ct.shape, t.data, static_cast<size_t>(t.bytes)};
      } else if (GgmlTypeIsDequantizable(t.type)) {
        ct.quantized = true;
        ct.detail = t.type == kGgmlQ4_K ? "super-blocks of 256, sub-blocks of 32"
                                        : "blocks of 32";
        const GgufTensor* tp = &t;
        ct.prepare = [tp](DType out) {
          return PrepareGgml(tp->type, tp->ne, tp->data, static_cast<size_t>(tp->bytes), out,
                             tp->name);
        };
      } else {
        ct.quantized = true;
        ct.supported = false;
        ct.why_not = "ggml type " + GgmlTypeName(t.type) +
                     " is not dequantized by nibble (q4_0, q4_1, q8_0, q4_k are)";
      }
      c.tensors_.push_back(std::move(ct));
    }
    return c;
  }

  // safetensors: a file or a folder.
  auto set_or = SafetensorsSet::Open(path);
  if (!set_or.ok()) return set_or.status();
  auto set = std::make_shared<SafetensorsSet>(std::move(*set_or));
  c.keep_alive_.push_back(set);
  auto cfg = ReadHfQuantConfig(IsDir(path) ? path : DirOf(path));
  if (!cfg.ok()) return cfg.status();
  const HfQuantConfig q = *cfg;
  c.description_ = "safetensors, " + std::to_string(set->num_files()) + " file(s), " +
                   std::to_string(set->entries().size()) + " tensors";
  if (q.method != HfQuantConfig::Method::kNone) {
    c.props_.emplace_back("quantization", HfMethodName(q.method));
    c.props_.emplace_back("from", q.source);
    c.props_.emplace_back("bits", std::to_string(q.bits));
    c.props_.emplace_back("group_size", std::to_string(q.group_size));
    if (q.method == HfQuantConfig::Method::kGptq) {
      c.props_.emplace_back("checkpoint_format", q.checkpoint_format);
      c.props_.emplace_back("desc_act", q.desc_act ? "true" : "false");
      c.props_.emplace_back("sym", q.sym ? "true" : "false");
    } else {
      c.props_.emplace_back("version", q.awq_version);
    }
  }
  std::set<std::string> consumed;
  for (const auto& e : set->entries()) {
    const std::string& name = e.tensor->name;
    if (!EndsWith(name, ".qweight")) continue;
    const std::string prefix = name.substr(0, name.size() - 8);
    const auto* scales = set->Find(prefix + ".scales");
    const auto* qzeros = set->Find(prefix + ".qzeros");
    const auto* g_idx = set->Find(prefix + ".g_idx");
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.quantized = true;
    const TensorView qw = e.file->View(*e.tensor);
    ct.stored_bytes = qw.size_bytes;
    HfQuantConfig::Method method = q.method;
    if (method == HfQuantConfig::Method::kNone && scales != nullptr && qw.shape.size() == 2 &&
        scales->tensor->shape.size() == 2) {
      // No config: tell GPTQ from AWQ by the shapes (scales [G, N]).
      if (scales->tensor->shape[1] == qw.shape[1]) method = HfQuantConfig::Method::kGptq;
      if (scales->tensor->shape[1] == qw.shape[1] * 8) method = HfQuantConfig::Method::kAwq;
    }
    ct.kind = HfMethodName(method);
    if (scales == nullptr || method == HfQuantConfig::Method::kNone ||
        qw.shape.size() != 2) {
      ct.supported = false;
      ct.kind = "qweight";
      ct.why_not = scales == nullptr ? "'" + prefix + ".scales' is missing"
                                     : "no quantization_config and the shapes fit neither GPTQ nor AWQ";
      c.tensors_.push_back(std::move(ct));
      continue;
    }
    consumed.insert(name);
    consumed.insert(prefix + ".scales");
    if (qzeros) consumed.insert(prefix + ".qzeros");
    if (g_idx) consumed.insert(prefix + ".g_idx");
    const TensorView sv = scales->file->View(*scales->tensor);
    std::optional<TensorView> zv, gv;
    if (qzeros) zv = qzeros->file->View(*qzeros->tensor);
    if (g_idx) gv = g_idx->file->View(*g_idx->tensor);
    ct.stored_bytes += sv.size_bytes + (zv ? zv->size_bytes : 0) + (gv ? gv->size_bytes : 0);
    const int64_t groups = sv.shape.empty() ? 0 : sv.shape[0];
    if (method == HfQuantConfig::Method::kGptq) {
      ct.shape = {qw.shape[1], qw.shape[0] * 8};
      GptqOptions o;
      o.group_size = q.group_size;
      o.v2 = q.checkpoint_format == "gptq_v2";
      ct.detail = std::string(o.v2 ? "gptq_v2" : "gptq (v1)") + ", " + std::to_string(groups) +
                  " groups" + (gv ? ", g_idx" : "") + (zv ? "" : ", no qzeros (z = 8)");
      ct.prepare = [o, qw, sv, zv, gv, prefix](DType out) {
        return PrepareGptq(o, qw, zv ? &*zv : nullptr, sv, gv ? &*gv : nullptr, out, prefix);
      };
    } else {
      ct.shape = {qw.shape[1] * 8, qw.shape[0]};
      ct.detail = "gemm, " + std::to_string(groups) + " groups";
      if (!zv) {
        ct.supported = false;
        ct.why_not = "AWQ GEMM needs '" + prefix + ".qzeros'";
      }
      const int64_t g = q.group_size;
      ct.prepare = [g, qw, sv, zv, prefix](DType out) -> StatusOr<Dequantizer> {
        if (!zv) return Status::Error("AWQ '" + prefix + "': qzeros missing");
        return PrepareAwq(g, qw, *zv, sv, out, prefix);
      };
    }
    c.tensors_.push_back(std::move(ct));
  }
  // Everything else is copied through (HF names and shapes as stored).
  for (const auto& e : set->entries()) {
    if (consumed.count(e.tensor->name) || EndsWith(e.tensor->name, ".qweight")) continue;
    CheckpointTensor ct;
    ct.name = e.tensor->name;
    ct.kind = "copy";
    ct.detail = e.tensor->dtype_name;
    ct.shape = e.tensor->shape;
    ct.stored_dtype = e.tensor->dtype;
    ct.copy = e.file->View(*e.tensor);
    ct.stored_bytes = ct.copy.size_bytes;
    c.tensors_.push_back(std::move(ct));
  }
  return c;
}

DType Checkpoint::OutputDType(const CheckpointTensor& t, DType requested) const {
  if (!t.quantized) return t.stored_dtype;
  return requested == DType::kUndefined ? default_dtype_ : requested;
}

Status Checkpoint::Fill(const CheckpointTensor& t, DType requested, int threads,
                        uint8_t* dst) const {
  if (!t.supported) return Status::Error("tensor '" + t.name + "': " + t.why_not);
  if (!t.quantized) {
    if (t.copy.size_bytes) std::memcpy(dst, t.copy.data, t.copy.size_bytes);
    return Status::Ok();
  }
  auto d = t.prepare(OutputDType(t, requested));
  if (!d.ok()) return d.status();
  const auto n = CheckedNumElements(t.shape, t.name);
  if (!n.ok()) return n.status();
  MutableTensorView y{d->output().dtype, t.shape, dst,
                      static_cast<size_t>(*n) * static_cast<size_t>(DTypeBits(d->output().dtype) / 8)};
  return d->Run(y, threads);
}

StatusOr<std::vector<float>> Checkpoint::LoadFloat(const CheckpointTensor& t, int threads) const {
  const auto n = CheckedNumElements(t.shape, t.name);
  if (!n.ok()) return n.status();
  std::vector<float> out(static_cast<size_t>(*n));
  if (t.quantized) {
    NIBBLE_RETURN_IF_ERROR(Fill(t, DType::kFloat32, threads, reinterpret_cast<uint8_t*>(out.data())));
    return out;
  }
  if (t.stored_dtype != DType::kFloat32 && t.stored_dtype != DType::kFloat16 &&
      t.stored_dtype != DType::kBFloat16) {
    return Status::Error("tensor '" + t.name + "' is " + DTypeName(t.stored_dtype) +
                         ", not a float weight");
  }
  for (int64_t k = 0; k < *n; ++k) out[static_cast<size_t>(k)] = FloatElement(t.copy, k);
  return out;
}

Status DequantCheckpoint(const std::string& in, const std::string& out,
                         const DequantOptions& options, DequantReport* report) {
  auto ck = Checkpoint::Open(in);
  if (!ck.ok()) return ck.status();
  std::regex re;
  if (!options.tensors.empty()) {
    try {
      re = std::regex(options.tensors, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::Error("--tensors '" + options.tensors + "' is not a valid regex: " + e.what());
    }
  }
  std::vector<const CheckpointTensor*> chosen;
  for (const auto& t : ck->tensors()) {
    if (!options.tensors.empty() && !std::regex_search(t.name, re)) continue;
    if (!t.supported) {
      return Status::Error("tensor '" + t.name + "': " + t.why_not +
                           " (leave it out with --tensors)");
    }
    chosen.push_back(&t);
  }
  if (chosen.empty()) return Status::Error("no tensors selected from '" + in + "'");
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
  wo.metadata["nibble.source"] = in.substr(in.rfind('/') == std::string::npos ? 0 : in.rfind('/') + 1);
  const auto t0 = std::chrono::steady_clock::now();
  wo.progress = [&](size_t i, size_t n, uint64_t bytes) {
    report->bytes = bytes;
    if (!options.progress) return;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\r[%zu/%zu tensors] %.2f GB, %.2f GB/s   ", i, n,
                 static_cast<double>(bytes) / 1e9, sec > 0 ? static_cast<double>(bytes) / 1e9 / sec : 0.0);
    if (i == n) std::fprintf(stderr, "\n");
  };
  return WriteSafetensorsStreaming(out, outs, wo);
}

}  // namespace nibble
