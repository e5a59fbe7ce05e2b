#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "base/numeric.h"
#include "checkpoint/gguf_source.h"
#include "checkpoint/hf_source.h"
#include "formats/files.h"
#include "kernels/convert.h"
#include "op/lowering.h"
#include "op/onnx.h"

namespace nibble {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Checkpoint Checkpoint::FromListing(CheckpointListing listing) {
  Checkpoint c;
  c.description_ = std::move(listing.description);
  c.props_ = std::move(listing.properties);
  c.metadata_ = std::move(listing.metadata);
  c.tensors_ = std::move(listing.tensors);
  c.keep_alive_ = std::move(listing.keep_alive);
  c.inputs_ = std::move(listing.inputs);
  c.default_dtype_ = listing.default_dtype;
  c.hf_dir_ = std::move(listing.hf_dir);
  c.hf_config_json_ = std::move(listing.hf_config_json);
  c.IndexNames();
  return c;
}

bool Checkpoint::Recognizes(const std::string& path) {
  return IsDirectory(path) || EndsWith(path, ".safetensors") || EndsWith(path, ".gguf") ||
         HasGgufMagic(path);
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path,
                                      const CheckpointOptions& options) try {
  if (!options.gptq_format.empty() && options.gptq_format != "v1" && options.gptq_format != "v2") {
    return Status::Error("GPTQ format option (--gptq-format) must be v1 or v2 (got '" +
                         options.gptq_format + "')");
  }
  if (!options.gptq_v1_zeros.empty() && options.gptq_v1_zeros != "autogptq" &&
      options.gptq_v1_zeros != "autogptq-cuda" && options.gptq_v1_zeros != "gptqmodel") {
    return Status::Error(
        "GPTQ v1 zero-point option (--gptq-v1-zeros) must be autogptq, autogptq-cuda or "
        "gptqmodel (got '" +
        options.gptq_v1_zeros + "')");
  }
  if (!IsDirectory(path) && EndsWith(path, ".onnx")) {
    return Status::Error("'" + EscapeBytes(path) +
                         "' is an ONNX model: open it with OpenAnyCheckpoint / "
                         "OpenOnnxCheckpoint (onnx/onnx_checkpoint.h, library nibble) or "
                         "nibble_checkpoint_open_any (C)");
  }
  const bool dir = IsDirectory(path);
  if (!dir && !HasGgufMagic(path) && !EndsWith(path, ".safetensors")) {
    // Neither GGUF bytes nor a safetensors name: say what was expected
    // (opening it reports a missing file or a FIFO first).
    auto f = ReadOnlyFile::Open(path);
    if (!f.ok()) return f.status();
    return Status::Error("'" + EscapeBytes(path) +
                         "' is not a GGUF, safetensors or ONNX file (or a model folder)");
  }
  auto listing =
      !dir && HasGgufMagic(path) ? ListGgufCheckpoint(path) : ListHfCheckpoint(path, options);
  if (!listing.ok()) return listing.status();
  return FromListing(std::move(*listing));
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Open");
}

namespace {
// Stored float types a copy is converted from on request, each value
// rounded once (to nearest even) to the requested type: float16 /
// bfloat16 / float32 and the float8 types are exact in float32 and
// rounded from there; float64 is rounded directly (Float64To below).
bool IsFloat8(DType d) {
  return d == DType::kFloat8E4M3FN || d == DType::kFloat8E4M3FNUZ || d == DType::kFloat8E5M2 ||
         d == DType::kFloat8E5M2FNUZ;
}
bool IsConvertibleFloat(DType d) { return IsFloat16Or32(d) || IsFloat8(d) || d == DType::kFloat64; }

// float64 -> float32 rounded to odd: truncated toward zero, the lowest
// bit set when inexact. Rounding that to float16 / bfloat16 (to nearest
// even) gives the same bits as rounding the float64 there directly (the
// float32 has at least two more bits than either, also among their
// subnormals), so every value is rounded once. NaN stays NaN.
float RoundToOddF32(double v) {
  const float f = static_cast<float>(v);
  if (v != v || static_cast<double>(f) == v) return f;
  uint32_t bits = BitsFromF32(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) bits -= 1;  // one step toward zero
  return F32FromBits(bits | 1u);
}

// n float64 values (little-endian bytes) to `to`, each rounded once.
void Float64To(const uint8_t* src, DType to, uint8_t* dst, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    double v;
    std::memcpy(&v, src + 8 * k, 8);
    f[static_cast<size_t>(k)] = to == DType::kFloat32 ? static_cast<float>(v) : RoundToOddF32(v);
  }
  ConvertFloats(OutType::kF32, f.data(), internal::OutTypeOf(to), dst, n);
}

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
                               int64_t row1, void* dst, uint64_t need, int threads,
                               const CancelCallback& cancelled) {
  if (need == 0) return Status::Ok();
  if (row0 == 0 && row1 == Rows(t)) {
    MutableTensorView y{d.output().dtype, t.shape, dst, static_cast<size_t>(need)};
    return d.Run(y, threads, cancelled);
  }
  return d.RunRows(row0, row1, dst, static_cast<size_t>(need), threads, cancelled);
}

StatusOr<Dequantizer> Checkpoint::Prepare(const CheckpointTensor& t, DType requested, int threads,
                                          CheckpointTensor::Buffers* buffers,
                                          const CancelCallback& cancelled) const {
  buffers->Reuse();
  buffers->cancelled = cancelled;
  ScopedPrepareThreads prepare_threads(threads);
  auto d = t.prepare(OutputDType(t, requested), buffers);
  buffers->cancelled = nullptr;  // (it may refer to the caller's frame)
  // The file readers name the tensor their own way: say which, once.
  if (!d.ok() && cancelled && IsInterrupted(d.status().message())) {
    return Status::Error("tensor '" + t.name + "': " + kInterrupted);
  }
  return d;
}

StatusOr<Checkpoint::RowReader> Checkpoint::PrepareRows(const CheckpointTensor& t, DType requested,
                                                        int threads,
                                                        CheckpointTensor::Buffers* scratch,
                                                        const CancelCallback& cancelled) const try {
  NIBBLE_RETURN_IF_ERROR(CheckRequest(t, requested, threads));
  if (!t.quantized) {
    // Copies are positioned reads of their byte range: nothing to prepare.
    return RowReader(
        [this, &t, requested, threads](int64_t r0, int64_t r1, void* dst, size_t dst_bytes) {
          return Read(t, requested, r0, r1, threads, dst, dst_bytes);
        });
  }
  if (scratch == nullptr) return Status::Error("tensor '" + t.name + "': no scratch buffers");
  auto d = Prepare(t, requested, threads, scratch, cancelled);
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
                        CheckpointTensor::Buffers* scratch, const CancelCallback& cancelled) const
    try {
  const auto need = CheckRead(t, requested, row0, &row1, threads, dst, dst_bytes);
  if (!need.ok()) return need.status();
  if (*need == 0) return Status::Ok();
  const std::string who = "tensor '" + t.name + "'";
  NIBBLE_RETURN_IF_ERROR(CheckCancelled(cancelled).WithPrefix(who));
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
    if (to == t.stored_dtype) {
      // In pieces of kCancelCheckBytes when the read may be cancelled.
      const uint64_t piece = cancelled ? kCancelCheckBytes : stored;
      for (uint64_t k = 0; k < stored; k += piece) {
        if (k > 0) NIBBLE_RETURN_IF_ERROR(CheckCancelled(cancelled).WithPrefix(who));
        NIBBLE_RETURN_IF_ERROR(t.read_stored(offset + k, std::min(piece, stored - k), out + k));
      }
      return Status::Ok();
    }
    // A float copy in another float type: each value rounded once. Read in
    // pieces of at most 4 MiB (a multi-GB embedding is not held twice).
    const uint64_t in_bytes = static_cast<uint64_t>(DTypeBits(t.stored_dtype) / 8);
    const uint64_t out_bytes = static_cast<uint64_t>(DTypeBits(to) / 8);
    const uint64_t n = stored / in_bytes;
    const uint64_t piece = std::min<uint64_t>(n, uint64_t{1} << 20);
    std::vector<uint8_t> bytes(static_cast<size_t>(piece * in_bytes));
    for (uint64_t k = 0; k < n; k += piece) {
      if (k > 0) NIBBLE_RETURN_IF_ERROR(CheckCancelled(cancelled).WithPrefix(who));
      const uint64_t m = std::min(piece, n - k);
      NIBBLE_RETURN_IF_ERROR(t.read_stored(offset + k * in_bytes, m * in_bytes, bytes.data()));
      if (IsFloat8(t.stored_dtype)) {
        NIBBLE_RETURN_IF_ERROR(ConvertFloat8(t.stored_dtype, bytes.data(), to, out + k * out_bytes,
                                             static_cast<int64_t>(m), t.name));
        continue;
      }
      if (t.stored_dtype == DType::kFloat64) {
        Float64To(bytes.data(), to, out + k * out_bytes, static_cast<int64_t>(m));
        continue;
      }
      ConvertFloats(internal::OutTypeOf(t.stored_dtype), bytes.data(), internal::OutTypeOf(to),
                    out + k * out_bytes, static_cast<int64_t>(m));
    }
    return Status::Ok();
  }
  CheckpointTensor::Buffers own;
  auto d = Prepare(t, requested, threads, scratch != nullptr ? scratch : &own, cancelled);
  if (!d.ok()) return d.status();
  const Status st = RunPrepared(*d, t, row0, row1, dst, *need, threads, cancelled);
  // The dequantizer names the request its own way: say which tensor.
  return cancelled && IsInterrupted(st.message()) ? Status::Error(who + ": " + kInterrupted) : st;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Checkpoint::Read");
}

Status Checkpoint::Fill(const CheckpointTensor& t, DType requested, int threads, uint8_t* dst,
                        CheckpointTensor::Buffers* scratch) const {
  return Read(t, requested, 0, -1, threads, dst, SIZE_MAX, scratch);
}

StatusOr<Tensor> Checkpoint::Read(const CheckpointTensor& t, DType requested, int64_t row0,
                                  int64_t row1, int threads, const CancelCallback& cancelled) const
    try {
  const int64_t rows = Rows(t);
  if (row1 == -1) row1 = rows;
  const auto need = OutputBytes(t, requested, row0, row1);
  if (!need.ok()) return need.status();
  Shape shape = t.shape;
  if (!shape.empty()) shape[0] = row1 - row0;
  auto y = Tensor::Allocate(OutputDType(t, requested), shape);
  if (!y.ok()) return y.status().WithPrefix("tensor '" + t.name + "'");
  NIBBLE_RETURN_IF_ERROR(Read(t, requested, row0, row1, threads, y->mutable_view().data,
                              y->mutable_view().size_bytes, nullptr, cancelled));
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

}  // namespace nibble
