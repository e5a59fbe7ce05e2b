#include "checkpoint/methods/ggml.h"

#include <limits>
#include <new>

#include "formats/gguf.h"
#include "kernels/layouts.h"
#include "op/lowering.h"

namespace nibble {

namespace {

// Lowers n elements of ggml block layout D (data: whole blocks, checked).
// The kernels read each block's scales from its header (no widening pass).
template <class D>
Status LowerBlocks(const uint8_t* data, int64_t /*n*/, Plan* plan, Dequantizer::Storage* /*st*/) {
  plan->layout = BlockLayoutOf<D>::kValue;
  plan->code = D::kCode;
  plan->codes = data;
  plan->code_offset = D::kCodeOffset;
  plan->zp_kind = D::kZp;
  plan->group = D::kSubElems;
  if constexpr (D::kCode == CodeKind::kTable4) plan->code_values = D::kValues;
  return Status::Ok();
}

// Lowers n elements of decoded block layout D: the kernels decode each
// block (D::Decode's values, in vectors where the layout has a vector
// decoder); no code kind, scale or zero point of their own.
template <class D>
Status LowerDecoded(const uint8_t* data, int64_t /*n*/, Plan* plan, Dequantizer::Storage* /*st*/) {
  plan->layout = BlockLayoutOf<D>::kValue;
  plan->code = CodeKind::kU8;  // (unused: the values come from D::Decode)
  plan->codes = data;
  plan->zp_kind = ZeroPointKind::kNone;
  plan->group = D::kBlockElems;
  return Status::Ok();
}

// Synthetic blocks of decoded layout D: random bytes, the scale moderate
// (D::ModerateScale).
template <class D>
void SyntheticDecoded(uint8_t* blocks, int64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n * D::kBytes; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    blocks[i] = static_cast<uint8_t>(x >> 24);
  }
  for (int64_t b = 0; b < n; ++b) D::ModerateScale(blocks + b * D::kBytes);
}

// Synthetic blocks of layout D: random code planes, every header byte 0x3C
// (f16 scales / mins 1.06, 6-bit scales 60 or 12, int8 scales 60, E8M0
// 2^-68: finite, normal values).
template <class D>
void SyntheticBlocks(uint8_t* blocks, int64_t n, uint64_t seed) {
  std::vector<bool> code(static_cast<size_t>(D::kBytes), false);
  for (const CodePlane& pl : D::kPlanes) {
    for (uint64_t i = 0; i < uint64_t(D::kBlockElems) * pl.bits / 8; ++i) code[pl.at + i] = true;
  }
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t b = 0; b < n; ++b) {
    for (size_t i = 0; i < code.size(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
      blocks[b * D::kBytes + static_cast<int64_t>(i)] =
          code[i] ? static_cast<uint8_t>(x >> 24) : uint8_t{0x3C};
    }
  }
}

// The registered block layouts, by ggml type id.
struct BlockKind {
  uint32_t type;
  const char* name;
  int64_t block_elems, bytes, sub_elems;
  Status (*lower)(const uint8_t*, int64_t, Plan*, Dequantizer::Storage*);
  void (*synthetic)(uint8_t*, int64_t, uint64_t);
};
constexpr BlockKind kBlockKinds[] = {
#define NIBBLE_BLOCK_KIND(D)                                     \
  {D::kGgmlType, D::kName,        D::kBlockElems,     D::kBytes, \
   D::kSubElems, &LowerBlocks<D>, &SyntheticBlocks<D>},
    NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_KIND)
#undef NIBBLE_BLOCK_KIND
#define NIBBLE_DECODED_KIND(D)                                     \
  {D::kGgmlType, D::kName,         D::kBlockElems,      D::kBytes, \
   D::kSubElems, &LowerDecoded<D>, &SyntheticDecoded<D>},
        NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_KIND)
#undef NIBBLE_DECODED_KIND
};

// Each registered block layout is the ggml type of the format registry
// (formats/gguf.h) it claims to be: id, name and geometry.
template <class D>
constexpr bool MatchesGgmlRegistry() {
  // A loop over the table rather than GgmlTypeTraits(): GCC 12 under
  // -fsanitize=undefined cannot constant-evaluate a pointer compared with null.
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.type != D::kGgmlType) continue;
    if (t.block != D::kBlockElems || t.bytes != D::kBytes) return false;
    size_t i = 0;
    while (t.name[i] != '\0' && t.name[i] == D::kName[i]) ++i;
    return t.name[i] == D::kName[i];
  }
  return false;
}
#define NIBBLE_CHECK_REGISTRY(D)                       \
  static_assert(MatchesGgmlRegistry<D>(), #D           \
                ": id, name or geometry differs from " \
                "formats/gguf.h");
NIBBLE_BLOCK_LAYOUTS(NIBBLE_CHECK_REGISTRY)
NIBBLE_DECODED_LAYOUTS(NIBBLE_CHECK_REGISTRY)
#undef NIBBLE_CHECK_REGISTRY

const BlockKind* FindBlockKind(uint32_t type) {
  for (const BlockKind& k : kBlockKinds) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

}  // namespace

std::string DequantizableGgmlTypeNames() {
  std::string names;
  for (const BlockKind& k : kBlockKinds) names += std::string(names.empty() ? "" : ", ") + k.name;
  return names;
}

bool GgmlTypeIsDequantizable(uint32_t type) { return FindBlockKind(type) != nullptr; }

std::string GgmlRefusal(uint32_t type) {
  if (GgmlTypeTraits(type) == nullptr) {
    return "unknown ggml type id " + std::to_string(type) +
           " (not a type ggml defines: a newer or a damaged file?)";
  }
  if (type == 9 || type == 15) {
    // ggml's type traits give q8_1 and q8_K no to_float: they hold the
    // quantized activations of its dot products, never a model's weights.
    return "ggml type " + GgmlTypeName(type) +
           " is an activation type (ggml quantizes matmul inputs to it and defines no conversion "
           "back to float): no model file stores weights in it";
  }
  return "ggml type " + GgmlTypeName(type) + " is not dequantized by nibble (" +
         DequantizableGgmlTypeNames() + " are)";
}

uint32_t DequantizableGgmlTypeId(const std::string& name) {
  for (const BlockKind& k : kBlockKinds) {
    if (name == k.name) return k.type;
  }
  return 0;
}

StatusOr<std::vector<uint8_t>> SyntheticGgmlBlocks(uint32_t type, int64_t rows, int64_t cols,
                                                   uint64_t seed) try {
  const BlockKind* k = FindBlockKind(type);
  if (k == nullptr) return Status::Error("SyntheticGgmlBlocks: type " + std::to_string(type));
  if (rows < 0 || cols < 0 || cols % k->block_elems != 0) {
    return Status::Error("SyntheticGgmlBlocks: cols must be a multiple of " +
                         std::to_string(k->block_elems));
  }
  const int64_t n = rows * (cols / k->block_elems);
  std::vector<uint8_t> out(static_cast<size_t>(n * k->bytes));
  k->synthetic(out.data(), n, seed);
  return out;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("SyntheticGgmlBlocks");
}

std::string GgmlBlockDescription(uint32_t type) {
  const BlockKind* k = FindBlockKind(type);
  if (k == nullptr) return "";
  if (k->sub_elems == k->block_elems) return "blocks of " + std::to_string(k->block_elems);
  return "super-blocks of " + std::to_string(k->block_elems) + ", sub-blocks of " +
         std::to_string(k->sub_elems);
}

StatusOr<Dequantizer> PrepareGgml(uint32_t type, const std::vector<int64_t>& ne,
                                  const uint8_t* data, size_t bytes, DType out,
                                  const std::string& name) try {
  const std::string who = "GGUF tensor '" + name + "'";
  const BlockKind* kind = FindBlockKind(type);
  if (kind == nullptr) {
    return Status::Error(who + ": " + GgmlRefusal(type));
  }
  if (ne.empty() || ne.size() > 4) return Status::Error(who + ": needs 1 to 4 dims");
  Shape shape(ne.rbegin(), ne.rend());
  auto n = CheckedNumElements(shape, who);
  if (!n.ok()) return n.status();
  const int64_t cols = ne[0], rows = cols == 0 ? 0 : *n / cols;
  const int64_t block = kind->block_elems, bb = kind->bytes;
  if (cols % block != 0) {
    return Status::Error(who + ": ne[0] = " + std::to_string(cols) + " is not a multiple of " +
                         std::to_string(block));
  }
  const int64_t blocks = *n / block;
  if (static_cast<uint64_t>(blocks) > std::numeric_limits<uint64_t>::max() / 1024 ||
      bytes != static_cast<size_t>(blocks * bb)) {
    return Status::Error(who + ": has " + std::to_string(bytes) + " bytes, expected " +
                         std::to_string(blocks * bb));
  }
  auto ot = internal::OutTypeFor(internal::ResolveOutDType(out, DType::kFloat32), "output type");
  if (!ot.ok()) return ot.status().WithPrefix(who);

  Plan plan;
  Dequantizer::Storage st;
  plan.outer = rows;
  plan.axis = cols;
  plan.inner = 1;
  plan.out = *ot;
  NIBBLE_RETURN_IF_ERROR(kind->lower(data, *n, &plan, &st).WithPrefix(who));
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), shape}, name);
  d.set_inputs({{"the tensor's blocks", data, bytes}});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareGgml");
}

}  // namespace nibble
