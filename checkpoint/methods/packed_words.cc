#include "checkpoint/methods/packed_words.h"

#include <optional>

#include "op/lowering.h"

namespace nibble {

const char* GptqZerosName(GptqZeros z) {
  switch (z) {
    case GptqZeros::kStored:
      return "stored (gptq_v2)";
    case GptqZeros::kPlusOneWrap:
      return "v1, AutoGPTQ's default loader: (stored + 1) mod 2^bits";
    case GptqZeros::kPlusOne:
      return "v1, AutoGPTQ qlinear_cuda rule: stored + 1, no wrap";
    case GptqZeros::kWordCarry:
      return "v1, GPTQModel rule: word + 0x11111111 with carries";
  }
  return "";
}

namespace internal {
namespace {

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

}  // namespace

// The shapes GPTQ and AWQ share: a 2-D int32 qweight holding K x N codes
// with `k_per_word` input channels (GPTQ 8) or `n_per_word` outputs (AWQ 8)
// per word, scales [groups, N]; the group size and the output type.
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
  NIBBLE_RETURN_IF_ERROR(internal::CheckInt32(qweight, qweight.shape, "qweight", who));
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
  auto ot = internal::ResolveOutType(out, scales.dtype, who);
  if (!ot.ok()) return ot.status();
  l.out = *ot;
  return l;
}

namespace {

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
    const uint32_t field = (w >> shift) & mask;
    z[p] = rule == GptqZeros::kPlusOneWrap
               ? static_cast<int32_t>((field + 1u) & mask)
               : static_cast<int32_t>(field) + (rule == GptqZeros::kPlusOne ? 1 : 0);
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
  const uint32_t w0 = internal::LoadU32(zb);
  if (internal::FirstIndexWhere(
          words, [zb, w0](int64_t i) { return internal::LoadU32(zb + 4 * i) != w0; }, 32 / bits) <
      words) {
    return std::nullopt;
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
// ms with this loop (2-core VM, alternated three times); UnpackZeroWords
// runs it on the prepare threads (ScopedPrepareThreads).
template <int kBits>
void DecodeZeroWords(const uint8_t* zb, int64_t words, const uint8_t* field_of, GptqZeros rule,
                     int32_t* out) {
  constexpr int kF = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1u;
  constexpr uint32_t kOnes = kBits == 2 ? 0x55555555u : (kBits == 4 ? 0x11111111u : 0x01010101u);
  int shift[32u / static_cast<unsigned>(kBits)];
  for (int p = 0; p < kF; ++p) shift[p] = kBits * (field_of != nullptr ? field_of[p] : p);
  const uint32_t carry = rule == GptqZeros::kWordCarry ? kOnes : 0u;  // modulo 2^32
  const uint32_t plus = rule == GptqZeros::kPlusOne || rule == GptqZeros::kPlusOneWrap ? 1u : 0u;
  // kPlusOneWrap keeps the sum in the field's bits; kPlusOne does not.
  const uint32_t wrap = rule == GptqZeros::kPlusOneWrap ? kMask : 0xFFFFFFFFu;
  for (int64_t i = 0; i < words; ++i) {
    const uint32_t w = internal::LoadU32(zb + 4 * i) + carry;
    int32_t* const z = out + kF * i;
    for (int p = 0; p < kF; ++p) {
      z[p] = static_cast<int32_t>((((w >> shift[p]) & kMask) + plus) & wrap);
    }
  }
}

// Into out[g * N + n] (the words of a group row are consecutive, and so
// are its N outputs).
void UnpackZeroWords(const TensorView& qzeros, int64_t groups, int64_t N, int bits,
                     const uint8_t* field_of, GptqZeros rule, ParamVector<int32_t>* out) {
  const auto* zb = static_cast<const uint8_t*>(qzeros.data);
  const int64_t words = groups * (N / (32 / bits));
  out->resize(static_cast<size_t>(groups * N));
  const int64_t f = 32 / bits;
  int32_t* const z = out->data();
  internal::ForParamRanges(
      words,
      [&](int64_t b, int64_t e) {
        switch (bits) {
          case 2:
            return DecodeZeroWords<2>(zb + 4 * b, e - b, field_of, rule, z + f * b);
          case 4:
            return DecodeZeroWords<4>(zb + 4 * b, e - b, field_of, rule, z + f * b);
          default:
            return DecodeZeroWords<8>(zb + 4 * b, e - b, field_of, rule, z + f * b);
        }
      },
      f);
}

}  // namespace

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

}  // namespace internal
}  // namespace nibble
