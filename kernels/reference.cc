#include "kernels/reference.h"

#include <cstring>

#include "base/numeric.h"
#include "kernels/convert.h"
#include "kernels/decoded_blocks.h"

namespace nibble {

namespace {

// Bits of code `bits` wide at bit offset `bit` of the stream (little-endian
// words for 16 / 32-bit codes).
uint32_t StreamBits(const uint8_t* codes, uint64_t bit, int bits) {
  const uint8_t* byte = codes + bit / 8;
  if (bits <= 8) return (uint32_t{*byte} >> (bit % 8)) & ((1u << bits) - 1u);
  uint32_t v = 0;
  for (int k = bits / 8 - 1; k >= 0; --k) v = (v << 8) | byte[k];  // little-endian
  return v;
}

uint32_t NibbleOfWord(const uint8_t* word, int nibble) {
  return (uint32_t{word[nibble / 2]} >> (4 * (nibble % 2))) & 0xFu;
}

template <class D>
uint32_t BlockCodeOfElement(const Plan& plan, int64_t e) {
  return BlockCode<D>(plan.codes + (e / D::kBlockElems) * D::kBytes, e % D::kBlockElems);
}

// The scale and zero of element e's sub-block, from its block's header.
template <class D>
void BlockParamsOf(const Plan& plan, int64_t e, float* s, float* z) {
  constexpr size_t kSubs = static_cast<size_t>(D::kBlockElems / D::kSubElems);
  float sc[kSubs], zf[kSubs] = {};
  D::Params(plan.codes + (e / D::kBlockElems) * D::kBytes, sc, zf);
  const int64_t sub = (e % D::kBlockElems) / D::kSubElems;
  *s = sc[sub];
  *z = zf[sub];
}

// Block layouts: sets *s / *z from the block header and returns true.
bool BlockParams(const Plan& plan, int64_t e, float* s, float* z) {
  switch (plan.layout) {
    case Layout::kDense:
    case Layout::kDenseHighNibbles:
    case Layout::kPmxWords:
    case Layout::kAwqWords:
    case Layout::kGptqColumns:
    case Layout::kAwqColumns:
      return false;
#define NIBBLE_BLOCK_CASE(D)         \
  case Layout::k##D:                 \
    BlockParamsOf<D>(plan, e, s, z); \
    return true;
      NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_CASE)
#undef NIBBLE_BLOCK_CASE
#define NIBBLE_DECODED_CASE(D) case Layout::k##D:
      NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
      return false;  // (ReferenceValue decodes them)
  }
  return false;
}

}  // namespace

uint32_t LoadCodeBits(const Plan& plan, int64_t e) {
  switch (plan.layout) {
    case Layout::kDense:
      return StreamBits(plan.codes,
                        static_cast<uint64_t>(e) * static_cast<uint64_t>(CodeBits(plan.code)),
                        CodeBits(plan.code));
    case Layout::kDenseHighNibbles:
      return StreamBits(plan.codes, (static_cast<uint64_t>(e) * 4u) ^ 4u, 4);
    case Layout::kPmxWords: {
      const int64_t r = plan.interleave_row, p = plan.interleave, b = CodeBits(plan.code);
      const int64_t d = e / r, j = e % r;
      const int64_t word = (d / p) * r + j;
      return StreamBits(plan.codes, static_cast<uint64_t>(word * p * b + (d % p) * b),
                        static_cast<int>(b));
    }
    case Layout::kAwqWords:
      return NibbleOfWord(plan.codes + (e / 8) * 4, kAwqNibbleOrder[e % 8]);
    case Layout::kGptqColumns: {
      const int64_t r = e / plan.axis, c = e % plan.axis;  // inner == 1
      return NibbleOfWord(plan.codes + (c / 8) * plan.word_stride + 4 * r, static_cast<int>(c % 8));
    }
    case Layout::kAwqColumns: {
      const int64_t r = e / plan.axis, c = e % plan.axis;  // inner == 1
      return NibbleOfWord(plan.codes + c * plan.word_stride + 4 * (r / 8), kAwqNibbleOrder[r % 8]);
    }
#define NIBBLE_BLOCK_CASE(D) \
  case Layout::k##D:         \
    return BlockCodeOfElement<D>(plan, e);
      NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_CASE)
#undef NIBBLE_BLOCK_CASE
#define NIBBLE_DECODED_CASE(D) case Layout::k##D:
      NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
      return 0;  // no code bits: ReferenceValue decodes the block
  }
  return 0;
}

namespace {

float DecodeFloat(CodeKind k, uint32_t u);

struct FloatTables {
  float f8[4][256];
  float f4[16];
  FloatTables() {
    const CodeKind kinds[4] = {CodeKind::kF8E4M3FN, CodeKind::kF8E4M3FNUZ, CodeKind::kF8E5M2,
                               CodeKind::kF8E5M2FNUZ};
    for (int t = 0; t < 4; ++t) {
      for (uint32_t b = 0; b < 256; ++b) f8[t][b] = DecodeFloat(kinds[t], b);
    }
    for (uint32_t b = 0; b < 16; ++b) f4[b] = DecodeFloat(CodeKind::kF4E2M1, b);
  }
};

int64_t DecodeInteger(CodeKind k, uint32_t u) {
  switch (k) {
    case CodeKind::kS2:
      return static_cast<int64_t>(u ^ 2u) - 2;
    case CodeKind::kS4:
      return static_cast<int64_t>(u ^ 8u) - 8;
    case CodeKind::kS8:
      return static_cast<int8_t>(u);
    case CodeKind::kS16:
      return static_cast<int16_t>(u);
    case CodeKind::kS32:
      return static_cast<int32_t>(u);
    default:
      return u;
  }
}

float DecodeFloat(CodeKind k, uint32_t u) {
  const uint8_t b = static_cast<uint8_t>(u);
  switch (k) {
    case CodeKind::kF8E4M3FN:
      return DecodeF8E4M3FN(b);
    case CodeKind::kF8E4M3FNUZ:
      return DecodeF8E4M3FNUZ(b);
    case CodeKind::kF8E5M2:
      return DecodeF8E5M2(b);
    case CodeKind::kF8E5M2FNUZ:
      return DecodeF8E5M2FNUZ(b);
    default:
      return DecodeF4E2M1(b);
  }
}

}  // namespace

const float* FloatCodeTable(CodeKind k) {
  static const FloatTables tables;
  switch (k) {
    case CodeKind::kF8E4M3FN:
      return tables.f8[0];
    case CodeKind::kF8E4M3FNUZ:
      return tables.f8[1];
    case CodeKind::kF8E5M2:
      return tables.f8[2];
    case CodeKind::kF8E5M2FNUZ:
      return tables.f8[3];
    case CodeKind::kF4E2M1:
      return tables.f4;
    default:
      return nullptr;
  }
}

float ReferenceValue(const Plan& plan, int64_t r, int64_t c) {
  int64_t o, a, i;
  if (plan.inner == 1) {
    o = r, a = c, i = 0;
  } else {
    o = r / plan.axis, a = r % plan.axis, i = c;
  }
  const int64_t e = r * plan.cols() + c;
  switch (plan.layout) {
#define NIBBLE_DECODED_CASE(D) \
  case Layout::k##D:           \
    return DecodedBlockValue<D>(plan, e);
    NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
    default:
      break;
  }
  float s, block_zero = 0.0f;
  int64_t idx = 0;
  const bool block = BlockParams(plan, e, &s, &block_zero);
  if (!block) {
    const int64_t ga = plan.axis_group != nullptr ? plan.axis_group[a] : a / plan.group;
    idx = o * plan.s_outer + ga * plan.s_axis + i * plan.s_inner;
    s = plan.scale[idx];
  }
  const uint32_t bits = LoadCodeBits(plan, e);
  if (CodeIsFloat(plan.code)) {
    // volatile keeps the compiler from contracting across statements.
    const volatile float x =
        plan.code == CodeKind::kTable4 ? plan.code_values[bits] : DecodeFloat(plan.code, bits);
    return x * s;
  }
  const int64_t q = DecodeInteger(plan.code, bits);
  switch (plan.zp_kind) {
    case ZeroPointKind::kInteger: {
      // uint32 codes (DirectML) keep their zero point's uint32 bits.
      const int64_t z = plan.code == CodeKind::kU32
                            ? static_cast<int64_t>(static_cast<uint32_t>(plan.zp_int[idx]))
                            : plan.zp_int[idx];
      return static_cast<float>(q - z) * s;
    }
    case ZeroPointKind::kFloat: {
      const volatile float prod = static_cast<float>(q - plan.code_offset) * s;
      return prod + (block ? block_zero : plan.zp_float[idx]);
    }
    case ZeroPointKind::kFloatSubtract: {
      const volatile float diff = static_cast<float>(q) - plan.zp_float[idx];
      return diff * s;
    }
    case ZeroPointKind::kNone:
      break;
  }
  return static_cast<float>(q - plan.code_offset) * s;
}

void DequantizeTileReference(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = c0; c < c1; ++c) {
      float v = ReferenceValue(plan, r, c);
      if (plan.post_scale != 1.0f) v = v * plan.post_scale;
      if (plan.product != OutType::kF32 && plan.product != plan.out) {
        char mid[4];
        StoreOut(plan.product, v, mid);
        ConvertFloatsReference(plan.product, mid, OutType::kF32, &v, 1);
      }
      const int64_t k = (r - r0) * ld + (c - c0);
      StoreOut(plan.out, v, static_cast<char*>(out) + k * OutBytes(plan.out));
    }
  }
}

}  // namespace nibble
