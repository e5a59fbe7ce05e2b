#include "op/checkpoint.h"

#include <cstring>
#include <limits>
#include <new>

#include "base/numeric.h"
#include "op/lowering.h"

namespace nibble {

namespace {

uint32_t ReadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host (x86-64 / aarch64)
}

StatusOr<OutType> ResolveOut(DType out, DType scales, const std::string& who) {
  auto t = internal::OutTypeFor(internal::ResolveOutDType(out, scales), "output type");
  if (!t.ok()) return t.status().WithPrefix(who);
  return t;
}

// Checks an int32 tensor of the given 2-D shape.
Status CheckInt32(const TensorView& v, const Shape& want, const std::string& what,
                  const std::string& who) {
  if (v.dtype != DType::kInt32 && v.dtype != DType::kUInt32) {
    return Status::Error(who + ": " + what + " must be int32 (got " + DTypeName(v.dtype) + ")");
  }
  if (v.shape != want) {
    return Status::Error(who + ": " + what + " shape " + ShapeToString(v.shape) + ", expected " +
                         ShapeToString(want));
  }
  auto n = internal::CheckView(v, what);
  return n.ok() ? Status::Ok() : n.status().WithPrefix(who);
}

// Common shape logic of GPTQ and AWQ: scales [groups, N]; returns the group
// size, from the configured one or (per-module overrides) the shapes.
StatusOr<int64_t> GroupSize(int64_t configured, int64_t K, int64_t groups, const std::string& who) {
  auto count = [&](int64_t g) { return (K + g - 1) / g; };
  if (configured == -1) configured = K;
  if (configured > 0 && count(configured) == groups) return configured;
  if (groups > 0) {
    const int64_t inferred = (K + groups - 1) / groups;
    if (inferred > 0 && count(inferred) == groups) return inferred;
  }
  return Status::Error(who + ": scales have " + std::to_string(groups) +
                       " groups, which no group size over K = " + std::to_string(K) +
                       " input channels gives (configured group_size " +
                       std::to_string(configured) + ")");
}

// The shapes GPTQ and AWQ share: a 2-D int32 qweight holding K x N codes
// with `k_per_word` input channels (GPTQ 8) or `n_per_word` outputs (AWQ 8)
// per word, scales [groups, N]; the group size and the output type.
struct LinearShape {
  int64_t K = 0, N = 0, groups = 0, G = 0;
  OutType out = OutType::kF32;
};
StatusOr<LinearShape> CheckLinear(const TensorView& qweight, const TensorView& scales,
                                  int64_t k_per_word, int64_t n_per_word, int64_t group_size,
                                  DType out, const std::string& who) {
  if (qweight.shape.size() != 2 || scales.shape.size() != 2) {
    return Status::Error(who + ": qweight and scales must be 2-D (got " +
                         ShapeToString(qweight.shape) + " and " + ShapeToString(scales.shape) +
                         ")");
  }
  if (qweight.shape[0] > (int64_t{1} << 36) || qweight.shape[1] > (int64_t{1} << 36)) {
    return Status::Error(who + ": qweight " + ShapeToString(qweight.shape) + " is too large");
  }
  NIBBLE_RETURN_IF_ERROR(CheckInt32(qweight, qweight.shape, "qweight", who));
  LinearShape l;
  l.K = qweight.shape[0] * k_per_word;
  l.N = qweight.shape[1] * n_per_word;
  l.groups = scales.shape[0];
  if (scales.shape[1] != l.N) {
    return Status::Error(who + ": scales shape " + ShapeToString(scales.shape) +
                         " does not match qweight " + ShapeToString(qweight.shape) +
                         " (expected [groups, " + std::to_string(l.N) + "])");
  }
  auto G = GroupSize(group_size, l.K, l.groups, who);
  if (!G.ok()) return G.status();
  l.G = *G;
  auto ot = ResolveOut(out, scales.dtype, who);
  if (!ot.ok()) return ot.status();
  l.out = *ot;
  return l;
}

// Zero points packed 8 per int32 word along N ([groups, N / 8]): column
// 8c + p of group g is nibble nibble_of[p] of word (g, c), plus one mod 16
// when `plus_one` (GPTQ v1 stores z - 1). Into out[g * N + n].
void UnpackZeroWords(const TensorView& qzeros, int64_t groups, int64_t N,
                     const uint8_t nibble_of[8], bool plus_one, std::vector<int32_t>* out) {
  const auto* zb = static_cast<const uint8_t*>(qzeros.data);
  out->resize(static_cast<size_t>(groups * N));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < N / 8; ++c) {
      const uint32_t w = ReadU32(zb + 4 * (g * (N / 8) + c));
      for (int p = 0; p < 8; ++p) {
        uint32_t z = (w >> (4 * nibble_of[p])) & 0xFu;
        if (plus_one) z = (z + 1) & 0xFu;
        (*out)[static_cast<size_t>(g * N + 8 * c + p)] = static_cast<int32_t>(z);
      }
    }
  }
}

constexpr uint8_t kSequentialNibbles[8] = {0, 1, 2, 3, 4, 5, 6, 7};

}  // namespace

StatusOr<Dequantizer> PrepareGptq(const GptqOptions& o, const TensorView& qweight,
                                  const TensorView* qzeros, const TensorView& scales,
                                  const TensorView* g_idx, DType out, const std::string& name) try {
  const std::string who = "GPTQ '" + name + "'";
  auto shape = CheckLinear(qweight, scales, 8, 1, o.group_size, out, who);
  if (!shape.ok()) return shape.status();
  const int64_t K = shape->K, N = shape->N, groups = shape->groups;
  const int64_t G = shape->G;
  const OutType ot = shape->out;

  Plan plan;
  Dequantizer::Storage st;
  plan.code = CodeKind::kU4;
  plan.codes = static_cast<const uint8_t*>(qweight.data);
  plan.group = G;
  plan.out = ot;
  // The [N, K] view reading qweight's columns directly; the g_idx gather
  // path (below) switches to the [K, N] view, written transposed.
  plan.layout = Layout::kGptqColumns;
  plan.word_stride = 4 * N;
  plan.outer = N;
  plan.axis = K;
  plan.inner = 1;
  plan.s_outer = 1;
  plan.s_axis = N;
  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(scales, "scales", &st.scale, &plan.scale).WithPrefix(who));
  if (qzeros != nullptr) {
    if (N % 8 != 0) {
      return Status::Error(who + ": N = " + std::to_string(N) + " is not a multiple of 8");
    }
    NIBBLE_RETURN_IF_ERROR(CheckInt32(*qzeros, {groups, N / 8}, "qzeros", who));
    UnpackZeroWords(*qzeros, groups, N, kSequentialNibbles, /*plus_one=*/!o.v2, &st.zp_int);
    plan.zp_kind = ZeroPointKind::kInteger;
    plan.zp_int = st.zp_int.data();
  } else {
    plan.code_offset = 8;
  }
  if (g_idx != nullptr) {
    NIBBLE_RETURN_IF_ERROR(CheckInt32(*g_idx, {K}, "g_idx", who));
    const auto* gb = static_cast<const uint8_t*>(g_idx->data);
    bool contiguous = true;
    st.axis_group.resize(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) {
      const auto g = static_cast<int32_t>(ReadU32(gb + 4 * k));
      if (g < 0 || g >= groups) {
        return Status::Error(who + ": g_idx[" + std::to_string(k) + "] = " + std::to_string(g) +
                             " is outside the " + std::to_string(groups) + " groups");
      }
      st.axis_group[static_cast<size_t>(k)] = g;
      contiguous = contiguous && g == k / G;
    }
    if (contiguous) st.axis_group.clear();  // fast path: k / G
  }
  if (st.axis_group.empty()) {
    return Dequantizer(plan, std::move(st), OutputInfo{internal::OutDTypeOf(ot), {N, K}}, name);
  }
  // Gather: the checkpoint's [K, N] order (int4x8 words along K), one scale
  // row per input channel k picked by g_idx[k].
  plan.layout = Layout::kPmxWords;
  plan.word_stride = 0;
  plan.interleave = 8;
  plan.interleave_row = N;
  plan.outer = 1;
  plan.axis = K;
  plan.inner = N;
  plan.s_outer = 0;
  plan.s_axis = N;
  plan.s_inner = 1;
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(ot), {N, K}}, name);
  d.set_output_transposed(true);
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareGptq");
}

StatusOr<Dequantizer> PrepareAwq(int64_t group_size, const TensorView& qweight,
                                 const TensorView& qzeros, const TensorView& scales, DType out,
                                 const std::string& name) try {
  const std::string who = "AWQ '" + name + "'";
  auto shape = CheckLinear(qweight, scales, 1, 8, group_size, out, who);
  if (!shape.ok()) return shape.status();
  const int64_t K = shape->K, N = shape->N, groups = shape->groups;
  NIBBLE_RETURN_IF_ERROR(CheckInt32(qzeros, {groups, N / 8}, "qzeros", who));

  Plan plan;
  Dequantizer::Storage st;
  plan.code = CodeKind::kU4;
  plan.codes = static_cast<const uint8_t*>(qweight.data);
  plan.group = shape->G;
  plan.out = shape->out;
  // The [N, K] view gathers one word per column (the kernels need a
  // 4-byte aligned qweight and int32 word offsets); otherwise the
  // checkpoint's [K, N] order is dequantized and written transposed.
  const bool direct = reinterpret_cast<uintptr_t>(qweight.data) % 4 == 0 &&
                      (K - 1) * (N / 8) <= std::numeric_limits<int32_t>::max();
  if (direct) {
    plan.layout = Layout::kAwqColumns;
    plan.word_stride = N / 2;
    plan.outer = N;
    plan.axis = K;
    plan.inner = 1;
    plan.s_outer = 1;
    plan.s_axis = N;
  } else {
    plan.layout = Layout::kAwqWords;
    plan.outer = 1;
    plan.axis = K;
    plan.inner = N;
    plan.s_axis = N;
    plan.s_inner = 1;
  }
  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(scales, "scales", &st.scale, &plan.scale).WithPrefix(who));
  UnpackZeroWords(qzeros, groups, N, kAwqNibbleOrder, /*plus_one=*/false, &st.zp_int);
  plan.zp_kind = ZeroPointKind::kInteger;
  plan.zp_int = st.zp_int.data();
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(shape->out), {N, K}}, name);
  d.set_output_transposed(!direct);
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareAwq");
}

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
};

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
    return Status::Error(who + ": ggml type " + std::to_string(type) +
                         " is not dequantized by nibble (" + DequantizableGgmlTypeNames() +
                         " are)");
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
  return Dequantizer(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), shape}, name);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareGgml");
}

}  // namespace nibble
