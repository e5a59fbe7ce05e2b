#include "checkpoint/gguf_source.h"

#include <memory>

#include "checkpoint/methods/ggml.h"
#include "formats/files.h"
#include "formats/gguf.h"

namespace nibble {

bool HasGgufMagic(const std::string& path) {
  auto f = ReadOnlyFile::Open(path);
  uint8_t m[4] = {};
  return f.ok() && (*f)->size() >= 4 && (*f)->Read(0, 4, m).ok() && GgufFile::HasMagic(m, 4);
}

StatusOr<CheckpointListing> ListGgufCheckpoint(const std::string& path) {
  CheckpointListing c;
  auto g = GgufFile::Open(path, &c.inputs);
  if (!g.ok()) return g.status();
  std::shared_ptr<GgufFile> f = *g;
  c.keep_alive.push_back(f);
  c.default_dtype = DType::kFloat32;
  c.description = "GGUF v" + std::to_string(f->version()) + ", " +
                  std::to_string(f->tensors().size()) + " tensors, " +
                  std::to_string(f->metadata().size()) + " metadata keys";
  c.properties.emplace_back("alignment", std::to_string(f->alignment()));
  for (const auto& [k, v] : f->metadata()) {
    c.properties.emplace_back(k, v.ToString());
    c.metadata.emplace_back(k, v.type == GgufValueType::kString ? v.s : v.ToString());
  }
  c.tensors.reserve(f->tensors().size());
  for (const GgufTensor& t : f->tensors()) {
    CheckpointTensor ct;
    ct.name = t.name;
    ct.source = t.name;
    ct.shape.assign(t.ne.rbegin(), t.ne.rend());
    ct.kind = GgmlTypeName(t.type);
    ct.stored_bytes = t.bytes;
    const GgmlTypeInfo* info = GgmlTypeTraits(t.type);
    const DType plain = info != nullptr ? info->plain : DType::kUndefined;
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
        auto d = fp->Load(*tp, bufs->NextBytes(), &bufs->cancelled);
        if (!d.ok()) return d.status();
        return PrepareGgml(tp->type, tp->ne, *d, static_cast<size_t>(tp->bytes), out, tp->name);
      };
    } else {
      ct.quantized = true;
      ct.supported = false;
      ct.why_not = GgmlRefusal(t.type);
    }
    c.tensors.push_back(std::move(ct));
  }
  return c;
}

}  // namespace nibble
