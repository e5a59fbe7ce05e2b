#include "checkpoint/methods/layers.h"

#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include "base/numeric.h"
#include "kernels/dequantize.h"
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

// Zero points packed 32 / bits per int32 word along N ([groups, N * bits /
// 32]): column f * c + p of group g is field field_of[p] of word (g, c),
// decoded by `rule`.
// The f = 32 / bits zero points of one stored word w, into z[0 .. f).
void DecodeZeroWord(uint32_t w, int bits, const uint8_t* field_of, GptqZeros rule, int32_t* z) {
  const int64_t f = 32 / bits;
  const uint32_t mask = (1u << bits) - 1u;
  const uint32_t ones = bits == 2 ? 0x55555555u : (bits == 4 ? 0x11111111u : 0x01010101u);
  if (rule == GptqZeros::kWordCarry) w += ones;  // modulo 2^32
  for (int64_t p = 0; p < f; ++p) {
    const int shift = bits * (field_of != nullptr ? field_of[p] : static_cast<int>(p));
    z[p] = static_cast<int32_t>((w >> shift) & mask) + (rule == GptqZeros::kPlusOne ? 1 : 0);
  }
}

// The one zero point of every column and group when they are all equal
// (symmetric GPTQ checkpoints store the same word everywhere), else none:
// then the plan subtracts it as a constant and needs no [groups, N] array.
std::optional<int32_t> UniformZeroPoint(const TensorView& qzeros, int64_t groups, int64_t N,
                                        int bits, const uint8_t* field_of, GptqZeros rule) {
  const auto* zb = static_cast<const uint8_t*>(qzeros.data);
  const int64_t words = groups * (N / (32 / bits));
  if (words == 0) return std::nullopt;
  const uint32_t w0 = ReadU32(zb);
  for (int64_t i = 1; i < words; ++i) {
    if (ReadU32(zb + 4 * i) != w0) return std::nullopt;
  }
  int32_t z[16] = {};
  DecodeZeroWord(w0, bits, field_of, rule, z);
  for (int64_t p = 1; p < 32 / bits; ++p) {
    if (z[p] != z[0]) return std::nullopt;
  }
  return z[0];
}

// DecodeZeroWord over `words` consecutive words into out[f * i + p], with
// the width known at compile time. Prepare is serial, and at 16 threads a
// GPTQ layer's zero points were a visible part of its time: preparing a
// 4096 x 4096 GPTQ layer alone took 0.11 ms with a call per word, 0.05-0.08
// ms with this loop (2-core VM, alternated three times).
template <int kBits>
void DecodeZeroWords(const uint8_t* zb, int64_t words, const uint8_t* field_of, GptqZeros rule,
                     int32_t* out) {
  constexpr int kF = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  constexpr uint32_t kOnes = kBits == 2 ? 0x55555555u : (kBits == 4 ? 0x11111111u : 0x01010101u);
  int shift[32u / static_cast<unsigned>(kBits)];
  for (int p = 0; p < kF; ++p) shift[p] = kBits * (field_of != nullptr ? field_of[p] : p);
  const uint32_t carry = rule == GptqZeros::kWordCarry ? kOnes : 0u;  // modulo 2^32
  const int32_t plus = rule == GptqZeros::kPlusOne ? 1 : 0;
  for (int64_t i = 0; i < words; ++i) {
    const uint32_t w = ReadU32(zb + 4 * i) + carry;
    int32_t* const z = out + kF * i;
    for (int p = 0; p < kF; ++p) z[p] = static_cast<int32_t>((w >> shift[p]) & kMask) + plus;
  }
}

// Into out[g * N + n] (the words of a group row are consecutive, and so
// are its N outputs).
void UnpackZeroWords(const TensorView& qzeros, int64_t groups, int64_t N, int bits,
                     const uint8_t* field_of, GptqZeros rule, ParamVector<int32_t>* out) {
  const auto* zb = static_cast<const uint8_t*>(qzeros.data);
  const int64_t words = groups * (N / (32 / bits));
  out->resize(static_cast<size_t>(groups * N));
  switch (bits) {
    case 2:
      return DecodeZeroWords<2>(zb, words, field_of, rule, out->data());
    case 4:
      return DecodeZeroWords<4>(zb, words, field_of, rule, out->data());
    default:
      return DecodeZeroWords<8>(zb, words, field_of, rule, out->data());
  }
}

// Zero points of a GPTQ / AWQ plan: a constant code offset when uniform,
// else the unpacked [groups, N] array.
void SetZeroPoints(const TensorView& qzeros, int64_t groups, int64_t N, int bits,
                   const uint8_t* field_of, GptqZeros rule, Plan* plan,
                   ParamVector<int32_t>* storage) {
  if (const auto z = UniformZeroPoint(qzeros, groups, N, bits, field_of, rule)) {
    plan->zp_kind = ZeroPointKind::kNone;
    plan->code_offset = *z;
    return;
  }
  UnpackZeroWords(qzeros, groups, N, bits, field_of, rule, storage);
  plan->zp_kind = ZeroPointKind::kInteger;
  plan->zp_int = storage->data();
}

}  // namespace

const char* GptqZerosName(GptqZeros z) {
  switch (z) {
    case GptqZeros::kStored:
      return "stored (gptq_v2)";
    case GptqZeros::kPlusOne:
      return "v1, AutoGPTQ rule: stored + 1, no wrap";
    case GptqZeros::kWordCarry:
      return "v1, GPTQModel rule: word + 0x11111111 with carries";
  }
  return "";
}

StatusOr<Dequantizer> PrepareGptq(const GptqOptions& o, const TensorView& qweight,
                                  const TensorView* qzeros, const TensorView& scales,
                                  const TensorView* g_idx, DType out, const std::string& name) try {
  const std::string who = "GPTQ '" + name + "'";
  if (o.bits == 3) {
    return Status::Error(who +
                         ": 3-bit GPTQ packs values across word boundaries and is not supported "
                         "(2, 4 and 8 bits are)");
  }
  if (o.bits != 2 && o.bits != 4 && o.bits != 8) {
    return Status::Error(who + ": " + std::to_string(o.bits) +
                         "-bit GPTQ is not supported (2, 4 and 8 bits are)");
  }
  const int64_t per_word = 32 / o.bits;
  auto shape = CheckLinear(qweight, scales, per_word, 1, o.group_size, out, who);
  if (!shape.ok()) return shape.status();
  const int64_t K = shape->K, N = shape->N, groups = shape->groups;
  const int64_t G = shape->G;
  const OutType ot = shape->out;

  Plan plan;
  Dequantizer::Storage st;
  plan.code = o.bits == 4 ? CodeKind::kU4 : (o.bits == 8 ? CodeKind::kU8 : CodeKind::kU2);
  plan.codes = static_cast<const uint8_t*>(qweight.data);
  plan.group = G;
  plan.out = ot;
  // 4 bits: the [N, K] view reading qweight's columns directly (with a
  // g_idx: where the kernels have tiles for it); the other widths, and a
  // g_idx elsewhere, use the [K, N] view, written transposed (below).
  plan.layout = Layout::kGptqColumns;
  plan.word_stride = 4 * N;
  plan.outer = N;
  plan.axis = K;
  plan.inner = 1;
  plan.s_outer = 1;
  plan.s_axis = N;
  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(scales, "scales", &st.scale, &plan.scale, &st.scales_normal)
          .WithPrefix(who));
  if (qzeros != nullptr) {
    if (N % per_word != 0) {
      return Status::Error(who + ": N = " + std::to_string(N) + " is not a multiple of " +
                           std::to_string(per_word) + " (the zero points' packing)");
    }
    NIBBLE_RETURN_IF_ERROR(CheckInt32(*qzeros, {groups, N / per_word}, "qzeros", who));
    SetZeroPoints(*qzeros, groups, N, o.bits, nullptr, o.zeros, &plan, &st.zp_int);
  } else {
    plan.code_offset = 1 << (o.bits - 1);
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
  // 4 bits with a g_idx where the kernels have tiles for it (AVX-512):
  // the [N, K] view, each column's group from the map.
  if (o.bits == 4 && (st.axis_group.empty() || HasGroupMapColumnTiles())) {
    Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(ot), {N, K}}, name);
    d.set_inputs({Dequantizer::InputOf("qweight", &qweight), Dequantizer::InputOf("qzeros", qzeros),
                  Dequantizer::InputOf("scales", &scales), Dequantizer::InputOf("g_idx", g_idx)});
    return d;
  }
  // The checkpoint's [K, N] order (words of `per_word` fields along K), one
  // scale row per input channel k (picked by g_idx[k] when given).
  plan.layout = Layout::kPmxWords;
  plan.word_stride = 0;
  plan.interleave = static_cast<int32_t>(per_word);
  plan.interleave_row = N;
  plan.outer = 1;
  plan.axis = K;
  plan.inner = N;
  plan.s_outer = 0;
  plan.s_axis = N;
  plan.s_inner = 1;
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(ot), {N, K}}, name);
  d.set_output_transposed(true);
  d.set_inputs({Dequantizer::InputOf("qweight", &qweight), Dequantizer::InputOf("qzeros", qzeros),
                Dequantizer::InputOf("scales", &scales), Dequantizer::InputOf("g_idx", g_idx)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareGptq");
}

StatusOr<Dequantizer> PrepareAwq(int64_t group_size, const TensorView& qweight,
                                 const TensorView* qzeros, const TensorView& scales, DType out,
                                 const std::string& name) try {
  const std::string who = "AWQ '" + name + "'";
  auto shape = CheckLinear(qweight, scales, 1, 8, group_size, out, who);
  if (!shape.ok()) return shape.status();
  const int64_t K = shape->K, N = shape->N, groups = shape->groups;
  if (qzeros != nullptr) {
    NIBBLE_RETURN_IF_ERROR(CheckInt32(*qzeros, {groups, N / 8}, "qzeros", who));
  }

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
      internal::WidenScale(scales, "scales", &st.scale, &plan.scale, &st.scales_normal)
          .WithPrefix(who));
  if (qzeros != nullptr) {
    SetZeroPoints(*qzeros, groups, N, 4, kAwqNibbleOrder, GptqZeros::kStored, &plan, &st.zp_int);
  } else {
    plan.code_offset = 8;
  }
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(shape->out), {N, K}}, name);
  d.set_output_transposed(!direct);
  d.set_inputs({Dequantizer::InputOf("qweight", &qweight), Dequantizer::InputOf("qzeros", qzeros),
                Dequantizer::InputOf("scales", &scales)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareAwq");
}

namespace {

// Reads element i of an integer tensor (int32 / int64 / int8 / uint8 ...)
// as int64.
int64_t IntElement(const TensorView& v, int64_t i) {
  const auto* b = static_cast<const uint8_t*>(v.data);
  switch (v.dtype) {
    case DType::kInt64: {
      int64_t x;
      std::memcpy(&x, b + 8 * i, 8);
      return x;
    }
    case DType::kInt32: {
      int32_t x;
      std::memcpy(&x, b + 4 * i, 4);
      return x;
    }
    case DType::kInt16: {
      int16_t x;
      std::memcpy(&x, b + 2 * i, 2);
      return x;
    }
    case DType::kInt8:
      return static_cast<int8_t>(b[i]);
    case DType::kUInt8:
      return b[i];
    default:
      return 0;
  }
}

bool IsIntDType(DType d) {
  return d == DType::kInt64 || d == DType::kInt32 || d == DType::kInt16 || d == DType::kInt8 ||
         d == DType::kUInt8;
}

}  // namespace

StatusOr<Dequantizer> PrepareCompressedTensors(const CompressedTensorsWeight& w, DType out,
                                               const std::string& name) try {
  const std::string who = "compressed-tensors '" + name + "'";
  if (w.weight == nullptr || w.scale == nullptr) {
    return Status::Error(who + ": needs the weight and its weight_scale");
  }
  const TensorView& q = *w.weight;
  int64_t N = 0, K = 0;
  if (w.packed) {
    if (w.bits != 4 && w.bits != 8) {
      return Status::Error(who + ": pack-quantized with " + std::to_string(w.bits) +
                           " bits is not supported (4 and 8 are; other widths straddle words)");
    }
    if (w.weight_shape == nullptr) return Status::Error(who + ": weight_shape is missing");
    const TensorView& ws = *w.weight_shape;
    if (!IsIntDType(ws.dtype) || ws.shape.size() != 1 || ws.shape[0] != 2 ||
        ws.size_bytes != static_cast<size_t>(2 * DTypeBits(ws.dtype) / 8)) {
      return Status::Error(who + ": weight_shape must be an integer tensor [2] (got " +
                           DTypeName(ws.dtype) + " " + ShapeToString(ws.shape) + ")");
    }
    N = IntElement(ws, 0);
    K = IntElement(ws, 1);
    const int64_t per_word = 32 / w.bits;
    if (N <= 0 || K <= 0 || N > (int64_t{1} << 36) || K > (int64_t{1} << 36)) {
      return Status::Error(who + ": weight_shape [" + std::to_string(N) + ", " + std::to_string(K) +
                           "] is invalid");
    }
    const Shape want{N, (K + per_word - 1) / per_word};
    NIBBLE_RETURN_IF_ERROR(CheckInt32(q, q.shape, "weight_packed", who));
    if (q.shape != want) {
      return Status::Error(who + ": weight_packed shape " + ShapeToString(q.shape) +
                           " does not match weight_shape [" + std::to_string(N) + ", " +
                           std::to_string(K) + "] at " + std::to_string(w.bits) +
                           " bits (expected " + ShapeToString(want) + ")");
    }
    if (K % per_word != 0) {
      return Status::Error(who + ": K = " + std::to_string(K) + " is not a multiple of " +
                           std::to_string(per_word) +
                           " (rows padded to whole words are not supported)");
    }
  } else {
    if (q.dtype != DType::kInt8 || q.shape.size() != 2) {
      return Status::Error(who + ": an int-quantized weight must be int8 [N, K] (got " +
                           DTypeName(q.dtype) + " " + ShapeToString(q.shape) + ")");
    }
    N = q.shape[0];
    K = q.shape[1];
    auto n = internal::CheckView(q, "weight");
    if (!n.ok()) return n.status().WithPrefix(who);
  }
  const TensorView& sc = *w.scale;
  // Scale: [N, groups] / [N] (channel) / one value (tensor).
  int64_t groups = 1;
  bool per_tensor = false;
  int64_t scale_elems = 1;
  for (int64_t d : sc.shape) scale_elems *= d;
  if (sc.shape.size() == 2 && sc.shape[0] == N) {
    groups = sc.shape[1];
  } else if (sc.shape.size() == 1 && sc.shape[0] == N && N != 1) {
    groups = 1;
  } else if (scale_elems == 1) {
    per_tensor = true;
  } else {
    return Status::Error(who + ": weight_scale shape " + ShapeToString(sc.shape) +
                         " fits neither [N, groups] nor one value (N = " + std::to_string(N) + ")");
  }
  if (groups <= 0) return Status::Error(who + ": weight_scale has no groups");
  int64_t G = (K + groups - 1) / groups;
  if (w.group_size > 0 && w.g_idx == nullptr && (K + w.group_size - 1) / w.group_size == groups) {
    G = w.group_size;
  }
  if ((K + G - 1) / G != groups) {
    return Status::Error(who + ": weight_scale has " + std::to_string(groups) +
                         " groups, which no group size over K = " + std::to_string(K) + " gives");
  }
  auto ot = ResolveOut(out, sc.dtype, who);
  if (!ot.ok()) return ot.status();

  Plan plan;
  Dequantizer::Storage st;
  plan.layout = Layout::kDense;
  plan.codes = static_cast<const uint8_t*>(q.data);
  plan.out = *ot;
  plan.outer = N;
  plan.axis = K;
  plan.inner = 1;
  plan.group = per_tensor ? K : G;
  plan.s_outer = per_tensor ? 0 : groups;
  plan.s_axis = per_tensor ? 0 : 1;
  const int32_t offset = w.packed ? (1 << (w.bits - 1)) : 0;
  plan.code = w.packed ? (w.bits == 4 ? CodeKind::kU4 : CodeKind::kU8) : CodeKind::kS8;
  NIBBLE_RETURN_IF_ERROR(
      internal::WidenScale(sc, "weight_scale", &st.scale, &plan.scale, &st.scales_normal)
          .WithPrefix(who));
  if (w.zero_point != nullptr) {
    const TensorView& z = *w.zero_point;
    const int64_t zn = per_tensor ? 1 : N;
    st.zp_int.resize(static_cast<size_t>(zn * groups));
    if (w.packed && (z.dtype == DType::kInt32 || z.dtype == DType::kUInt32)) {
      // Packed down the rows, stored + offset like the codes.
      const int64_t per_word = 32 / w.bits;
      const Shape want{(zn + per_word - 1) / per_word, groups};
      NIBBLE_RETURN_IF_ERROR(CheckInt32(z, want, "weight_zero_point", who));
      const auto* zb = static_cast<const uint8_t*>(z.data);
      const uint32_t mask = (1u << w.bits) - 1u;
      for (int64_t n = 0; n < zn; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          const uint32_t word = ReadU32(zb + 4 * ((n / per_word) * groups + g));
          st.zp_int[static_cast<size_t>(n * groups + g)] =
              static_cast<int32_t>((word >> (w.bits * (n % per_word))) & mask);
        }
      }
    } else {
      // Unpacked zero points: int8 [N, groups] (or one) holding zp itself.
      int64_t ze = 1;
      for (int64_t d : z.shape) ze *= d;
      if (!IsIntDType(z.dtype) || ze != zn * groups) {
        return Status::Error(who + ": weight_zero_point " + DTypeName(z.dtype) + " " +
                             ShapeToString(z.shape) + " does not match weight_scale " +
                             ShapeToString(sc.shape));
      }
      auto n = internal::CheckView(z, "weight_zero_point");
      if (!n.ok()) return n.status().WithPrefix(who);
      for (int64_t i = 0; i < ze; ++i) {
        st.zp_int[static_cast<size_t>(i)] = static_cast<int32_t>(IntElement(z, i) + offset);
      }
    }
    plan.zp_kind = ZeroPointKind::kInteger;
    plan.zp_int = st.zp_int.data();
  } else {
    plan.code_offset = offset;
  }
  if (w.g_idx != nullptr && !per_tensor) {
    const TensorView& gi = *w.g_idx;
    if ((gi.dtype != DType::kInt32 && gi.dtype != DType::kInt64) || gi.shape != Shape{K}) {
      return Status::Error(who + ": weight_g_idx must be int32 / int64 [" + std::to_string(K) +
                           "] (got " + DTypeName(gi.dtype) + " " + ShapeToString(gi.shape) + ")");
    }
    auto n = internal::CheckView(gi, "weight_g_idx");
    if (!n.ok()) return n.status().WithPrefix(who);
    st.axis_group.resize(static_cast<size_t>(K));
    bool contiguous = true;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = IntElement(gi, k);
      if (g < 0 || g >= groups) {
        return Status::Error(who + ": weight_g_idx[" + std::to_string(k) +
                             "] = " + std::to_string(g) + " is outside the " +
                             std::to_string(groups) + " groups");
      }
      st.axis_group[static_cast<size_t>(k)] = static_cast<int32_t>(g);
      contiguous = contiguous && g == k / G;
    }
    if (contiguous) {
      st.axis_group.clear();
    } else {
      plan.axis_group = st.axis_group.data();
    }
  }
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), {N, K}}, name);
  d.set_inputs({Dequantizer::InputOf(w.packed ? "weight_packed" : "weight", w.weight),
                Dequantizer::InputOf("weight_scale", w.scale),
                Dequantizer::InputOf("weight_zero_point", w.zero_point),
                Dequantizer::InputOf("weight_g_idx", w.g_idx)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareCompressedTensors");
}

StatusOr<Dequantizer> PrepareBnb4(const Bnb4Weight& w, DType out, const std::string& name) try {
  const std::string who = "bitsandbytes '" + name + "'";
  if (w.weight == nullptr || w.absmax == nullptr || w.quant_map == nullptr) {
    return Status::Error(who + ": needs the weight, its absmax and its quant_map");
  }
  auto n_or = CheckedNumElements(w.shape, who);
  if (!n_or.ok()) return n_or.status();
  const int64_t n = *n_or;
  if (w.shape.empty() || n <= 0) {
    return Status::Error(who + ": quant_state shape " + ShapeToString(w.shape) + " is empty");
  }
  if (w.blocksize <= 0 || w.blocksize > (int64_t{1} << 20)) {
    return Status::Error(who + ": blocksize " + std::to_string(w.blocksize) + " is invalid");
  }
  const TensorView& q = *w.weight;
  if (q.dtype != DType::kUInt8 && q.dtype != DType::kInt8) {
    return Status::Error(who + ": the packed weight must be uint8 (got " + DTypeName(q.dtype) +
                         ")");
  }
  if (q.size_bytes != static_cast<size_t>((n + 1) / 2)) {
    return Status::Error(who + ": the packed weight has " + std::to_string(q.size_bytes) +
                         " bytes; quant_state shape " + ShapeToString(w.shape) + " needs " +
                         std::to_string((n + 1) / 2));
  }
  const int64_t blocks = (n + w.blocksize - 1) / w.blocksize;
  auto f32_count = [&](const TensorView& v, int64_t count, const char* what) -> Status {
    int64_t e = 1;
    for (int64_t d : v.shape) e *= d;
    if (v.dtype != DType::kFloat32 || e != count ||
        v.size_bytes != static_cast<size_t>(4 * count)) {
      return Status::Error(who + ": " + what + " must be float32 with " + std::to_string(count) +
                           " values (got " + DTypeName(v.dtype) + " " + ShapeToString(v.shape) +
                           ")");
    }
    return Status::Ok();
  };
  NIBBLE_RETURN_IF_ERROR(f32_count(*w.quant_map, 16, "quant_map"));
  auto read_f32 = [](const TensorView& v, int64_t i) {
    float x;
    std::memcpy(&x, static_cast<const uint8_t*>(v.data) + 4 * i, 4);
    return x;
  };
  Dequantizer::Storage st;
  st.code_values.resize(16);
  for (int i = 0; i < 16; ++i) st.code_values[static_cast<size_t>(i)] = read_f32(*w.quant_map, i);
  st.scale.resize(static_cast<size_t>(blocks));
  const TensorView& am = *w.absmax;
  if (w.nested_absmax == nullptr) {
    NIBBLE_RETURN_IF_ERROR(f32_count(am, blocks, "absmax"));
    for (int64_t b = 0; b < blocks; ++b) st.scale[static_cast<size_t>(b)] = read_f32(am, b);
  } else {
    if (w.nested_quant_map == nullptr) {
      return Status::Error(who + ": double quantization needs nested_quant_map");
    }
    if (w.nested_blocksize <= 0 || w.nested_blocksize > (int64_t{1} << 20)) {
      return Status::Error(who + ": nested_blocksize " + std::to_string(w.nested_blocksize) +
                           " is invalid");
    }
    if ((am.dtype != DType::kUInt8 && am.dtype != DType::kInt8) ||
        am.size_bytes != static_cast<size_t>(blocks)) {
      return Status::Error(who + ": absmax must be uint8 with " + std::to_string(blocks) +
                           " codes under double quantization (got " + DTypeName(am.dtype) + " " +
                           ShapeToString(am.shape) + ")");
    }
    const int64_t nested = (blocks + w.nested_blocksize - 1) / w.nested_blocksize;
    NIBBLE_RETURN_IF_ERROR(f32_count(*w.nested_absmax, nested, "nested_absmax"));
    NIBBLE_RETURN_IF_ERROR(f32_count(*w.nested_quant_map, 256, "nested_quant_map"));
    const auto* codes = static_cast<const uint8_t*>(am.data);
    for (int64_t b = 0; b < blocks; ++b) {
      // bitsandbytes: dequantize_blockwise (one float32 product), then
      // `absmax += offset` (one float32 sum): two roundings, never fused.
      const volatile float prod = read_f32(*w.nested_quant_map, codes[b]) *
                                  read_f32(*w.nested_absmax, b / w.nested_blocksize);
      st.scale[static_cast<size_t>(b)] = prod + w.nested_offset;
    }
  }
  auto ot = ResolveOut(out, w.dtype, who);
  if (!ot.ok()) return ot.status();
  Plan plan;
  plan.layout = Layout::kDenseHighNibbles;
  plan.code = CodeKind::kTable4;
  plan.codes = static_cast<const uint8_t*>(q.data);
  plan.code_values = st.code_values.data();
  plan.scale = st.scale.data();
  plan.out = *ot;
  plan.inner = 1;
  plan.group = w.blocksize;
  const int64_t cols = w.shape.back();
  if (w.shape.size() >= 2 && cols % w.blocksize == 0 && cols % 2 == 0) {
    // Rows of whole blocks: [rows, cols] so the threads split rows.
    plan.outer = n / cols;
    plan.axis = cols;
    plan.s_outer = cols / w.blocksize;
    plan.s_axis = 1;
  } else {
    plan.outer = 1;
    plan.axis = n;
    plan.s_outer = 0;
    plan.s_axis = 1;
  }
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), w.shape}, name);
  d.set_inputs({Dequantizer::InputOf("weight", w.weight), Dequantizer::InputOf("absmax", w.absmax),
                Dequantizer::InputOf("quant_map", w.quant_map),
                Dequantizer::InputOf("nested_absmax", w.nested_absmax),
                Dequantizer::InputOf("nested_quant_map", w.nested_quant_map)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareBnb4");
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
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), shape}, name);
  d.set_inputs({{"the tensor's blocks", data, bytes}});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareGgml");
}

}  // namespace nibble
