// Per-target dequantize kernels, included once per Highway target by
// kernels/dequantize.cc (the foreach_target skeleton).
//
// Contract (all kernels): out(r, c) = SPEC.md §1 value of plan element
// (r, c), bit-identical to DequantizeTileReference:
//   integer codes: float32(q - z) * s         (z = zero point or code_offset)
//   float zero pt: float32(q - code_offset) * s + zf, two roundings, no FMA
// rounded once to the output type (nearest even; bf16/f16 NaN stay NaN).
// Exactness: every vector lane performs exactly those float32 operations; a
// per-group 16-entry table T[c] (AVX-512) holds the same values computed by
// the same operations, so a lookup equals the arithmetic.
// Tails: a row is processed in units of 2N lanes; elements before the first
// aligned unit (non-temporal mode) and after the last are computed with the
// scalar formula. Stores never touch memory outside [c0, c1) of each row:
// no masked stores, no overlapping stores, so neighbouring threads and tiles
// never race. Inputs are read with unaligned loads only.
#if defined(NIBBLE_KERNELS_DEQUANTIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#undef NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#else
#define NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/numeric.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/plan.h"
#include "kernels/reference.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// The kernels' float vector type (full width).
using KernelTag = hn::ScalableTag<float>;

#if HWY_TARGET != HWY_SCALAR

// How the codes of one output row are laid out in memory.
enum class RowLayout {
  kWords16,  // PMX int4x4: element k in 16-bit word k, nibble at `shift`
  kWords32,  // PMX int4x8: element k in 32-bit word k, nibble at `shift`
  kNibbles,  // dense 4-bit (ONNX int4/uint4; PMX rank-1): 2 per byte, low first
  kBytes,    // dense 8-bit
  kHalves,   // dense 16-bit
  // Block-structured (Plan::block_elems; every row starts at a block):
  kSplit32,   // GGUF Q4_0/Q4_1: 32-element blocks, one split chunk each
  kSplit256,  // GGUF Q4_K: 256-element blocks of four 64-element chunks
  kBlock32,   // GGUF Q8_0: 32-element blocks of bytes
  kAwqWords,  // AWQ GEMM: 8 elements per 32-bit word in AWQ nibble order
  // Column-packed words (Plan::word_columns), the [N, K] view of a checkpoint:
  kGptqCols,  // 8 consecutive columns per word, words word_stride apart
  kAwqCols,   // one column per word (gathered), fixed nibble per row
};

// Nibble shift of element p (mod 8) of an AWQ word, repeated so that
// kAwqShift + (k % 8) covers 16 lanes.
alignas(64) static constexpr uint32_t kAwqShift[24] = {0, 16, 4,  20, 8, 24, 12, 28, 0, 16, 4,  20,
                                                       8, 24, 12, 28, 0, 16, 4,  20, 8, 24, 12, 28};
static constexpr uint8_t kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
alignas(64) static constexpr uint32_t kSeqShift[24] = {
    0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28};

// Where one row's codes are: the layout-specific base (element 0 of the
// row) and the facts the loaders need, held by value in the hot loops.
struct CodeRef {
  const uint8_t* codes;
  int shift;            // kWords*, kAwqCols: nibble position
  bool odd_start;       // kNibbles: element 0 is a high nibble
  int64_t block_bytes;  // block layouts: bytes from one block to the next;
                        // kGptqCols / kAwqCols: Plan::word_stride
};

HWY_INLINE int32_t DecodeIntCode(CodeKind k, uint32_t u) {
  switch (k) {
    case CodeKind::kS4:
      return static_cast<int32_t>(u ^ 8u) - 8;
    case CodeKind::kS8:
      return static_cast<int8_t>(u);
    case CodeKind::kS16:
      return static_cast<int16_t>(u);
    default:
      return static_cast<int32_t>(u);
  }
}

// Converts float32 lanes to float16 bits (in the low 16 bits of u32 lanes
// demoted to u16), round to nearest even. AVX2 and up use F16C (exact RNE);
// Highway 1.0.3's emulation on older targets truncates, so round here in
// integer lanes exactly as F16FromF32 does.
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE auto F16Bits(DF df, VF v) {
  const hn::Rebind<uint16_t, DF> du16;
#if HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::BitCast(du16, hn::DemoteTo(df16, v));
#else
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::BitCast(di, v);
  const auto abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const auto sign16 = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 0x8000));
  const auto lsb = hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 1));
  const auto normal = hn::Sub(hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(di, 0xFFF)), lsb)),
                              hn::Set(di, 0x1C000));
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, abs), hn::Set(df, 0.5f))),
                           hn::Set(di, 0x3F000000));
  const auto nan =
      hn::Or(hn::Set(di, 0x7E00), hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 0x3FF)));
  auto r = hn::IfThenElse(hn::Lt(abs, hn::Set(di, 0x38800000)), sub, normal);
  r = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x477FEFFF)), hn::Set(di, 0x7C00), r);
  r = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x7F800000)), nan, r);
  return hn::DemoteTo(du16, hn::Or(r, sign16));
#endif
}

// float32 -> bfloat16 bits, round to nearest even, NaN kept NaN (1.0.3's
// DemoteTo truncates). Same bits as BF16FromF32: a NaN keeps its high half
// with the quiet bit set (bits | 0x400000, then >> 16).
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE auto BF16Bits(DF df, VF v) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  (void)df;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb);
  const auto is_nan = hn::RebindMask(
      du,
      hn::Gt(hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7FFFFFFFu))), hn::Set(di, 0x7F800000)));
  const auto r =
      hn::ShiftRight<16>(hn::IfThenElse(is_nan, hn::Or(bits, hn::Set(du, 0x400000u)), rounded));
  return hn::DemoteTo(du16, hn::BitCast(di, r));
}

#if HWY_TARGET <= HWY_AVX3
// AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4): vcvtne2ps2bf16 rounds
// to nearest even and quiets NaNs exactly like BF16FromF32, but treats
// subnormal inputs as zero; units holding a subnormal take the exact
// integer-lane path instead. Highway 1.0.3 has no target with AVX512_BF16,
// so this is chosen at run time.
inline bool CpuHasAvx512Bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

// Stores v0 (16 lanes) then v1 as 32 bfloat16 values at dst with
// vcvtne2ps2bf16; returns false (storing nothing) if a lane is subnormal,
// for the caller's exact fallback. Not inlinable into AVX3 code (an extra
// ISA), so it costs a call per 32 outputs — far less than the integer-lane
// rounding it replaces.
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16"), noinline)) inline bool
StoreBF16x32(__m512 v0, __m512 v1, char* dst, bool stream) {
  if ((_mm512_fpclass_ps_mask(v0, 0x20) | _mm512_fpclass_ps_mask(v1, 0x20)) != 0) return false;
  const __m512i r = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0));
  if (stream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), r);
  } else {
    _mm512_storeu_si512(dst, r);
  }
  return true;
}
#endif

// One output row segment [k0, k1) (element offsets within the row), all
// loop-invariant facts of the row.
struct RowJob {
  CodeRef code;
  // Scales: per element (s_step 1) or grouped along the row.
  bool per_element;
  const float* scale;  // element 0's scale (per_element) or plan.scale
  const int32_t* zp_int;
  const float* zp_float;
  // Grouped: scale index of element k = base + (k / group) * step (rows
  // start on a group boundary).
  int64_t base, group, step;
};

template <RowLayout kLayout, CodeKind kCode, ZeroPointKind kZp, OutType kOut>
class RowKernel {
 public:
  using DF = KernelTag;
  using DI = hn::RebindToSigned<DF>;
  using DU = hn::RebindToUnsigned<DF>;
  using VF = hn::Vec<DF>;
  using VI = hn::Vec<DI>;
  static constexpr bool kFloatCode = kCode >= CodeKind::kF8E4M3FN;
  static constexpr bool kTable =
      HWY_TARGET <= HWY_AVX3 && HWY_TARGET != HWY_SCALAR &&
      (kLayout == RowLayout::kWords16 || kLayout == RowLayout::kWords32 ||
       kLayout == RowLayout::kNibbles || kLayout == RowLayout::kSplit32 ||
       kLayout == RowLayout::kSplit256 || kLayout == RowLayout::kAwqWords ||
       kLayout == RowLayout::kGptqCols || kLayout == RowLayout::kAwqCols);
  // float16/bfloat16 output from 4-bit codes on AVX-512: the group's table
  // is rounded to 16-bit output bits once, then 2N outputs are one 16-bit
  // permute (vpermw) of 2N codes. Same bits: rounding is per value.
  static constexpr bool kHalfTable = kTable && kOut != OutType::kF32;
  using DU16 = hn::Repartition<uint16_t, DF>;  // 2N x u16, a full vector
  using VU16 = hn::Vec<DU16>;

  RowKernel(const Plan& plan, const RowJob& job)
      : plan_(plan), job_(job), decode_(FloatCodeTable(kCode)) {}

  // Values of elements kk .. kk+N-1 when scales / zero points vary per
  // element (pointers already offset to the row's element 0).
  HWY_INLINE VF PerElementValues(const CodeRef& codes, const float* sp, const int32_t* zi,
                                 const float* zfp, VI off, int64_t kk) const {
    const DF df;
    const DI di;
    const VF s = hn::LoadU(df, sp + kk);
    const VI z = kZp == ZeroPointKind::kInteger ? hn::LoadU(di, zi + kk) : off;
    const VF zf = kZp == ZeroPointKind::kFloat ? hn::LoadU(df, zfp + kk) : hn::Zero(df);
    return Arith(Decode(LoadCodesAt(codes, kk)), s, z, zf);
  }

  // Writes elements [k0, k1) of the row to y[k - k0]. `stream`: use
  // non-temporal stores for the aligned body; the caller must FlushStream.
  void Run(int64_t k0, int64_t k1, void* y, bool stream) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const int64_t unit = static_cast<int64_t>(2 * N);
    constexpr int64_t kOutBytes = kOut == OutType::kF32 ? 4 : 2;
    char* const out = static_cast<char*>(y);
    // Prologue: reach an even nibble (kNibbles) and, when streaming, an
    // output address aligned to a full vector (N * 4 bytes for every output
    // type: 2N f16/bf16 lanes or N f32 lanes per store).
    const uintptr_t vec_bytes = N * 4;
    auto aligned = [&](int64_t kk) {
      return reinterpret_cast<uintptr_t>(out + (kk - k0) * kOutBytes) % vec_bytes == 0;
    };
    // Vector loads start where the layout allows (kCodeAlign elements).
    const int64_t odd = kLayout == RowLayout::kNibbles && job_.code.odd_start ? 1 : 0;
    auto parity_ok = [&](int64_t kk) { return (kk + odd) % CodeAlign() == 0; };
    int64_t k = k0;
    if (stream) {
      const int64_t limit = k0 + 2 * unit;
      while (k < k1 && k < limit && !(aligned(k) && parity_ok(k))) ++k;
      if (k >= limit || k >= k1) stream = false;  // not alignable: plain stores
    }
    if (!stream) k = k0 + (CodeAlign() - (k0 + odd) % CodeAlign()) % CodeAlign();
    k = k < k1 ? k : k1;
    ScalarRange(k0, k, out);
    char* const base = out - k0 * kOutBytes;  // element k at base + k * kOutBytes
    if (job_.per_element) {
      // Loop invariants in locals (see below).
      const CodeRef codes = job_.code;
      const float* const sp = job_.scale;
      const int32_t* const zi = job_.zp_int;
      const float* const zfp = job_.zp_float;
      const DI di;
      const VI off = hn::Set(di, plan_.code_offset);
      auto at = [&](int64_t kk) HWY_ATTR { return PerElementValues(codes, sp, zi, zfp, off, kk); };

      if (stream) {
        for (; k + unit <= k1; k += unit) {
          StoreUnit(df, at(k), at(k + static_cast<int64_t>(N)), base + k * kOutBytes, true);
        }
      } else {
        for (; k + unit <= k1; k += unit) {
          StoreUnit(df, at(k), at(k + static_cast<int64_t>(N)), base + k * kOutBytes, false);
        }
      }
    } else {
      // Loop invariants in locals: vector stores may alias anything, so
      // members would be reloaded after every store.
      const CodeRef codes = job_.code;
      SetGroup(k);
      // The current group lives in locals (registers): as a member it would
      // be written back to memory at every group change, since the output
      // stores may alias it — for small groups that is more store traffic
      // than the output itself.
      Group g = cur_;
      int64_t g_idx = cur_idx_, g_end = cur_end_;
      while (k + unit <= k1) {
        const int64_t stop = g_end < k1 ? g_end : k1;
        if (kHalfTable) {
          const DU16 du16;
          for (; k + unit <= stop; k += unit) {
            const VU16 h = HalfLookup(g.table16, LoadCodes16At(codes, k));
            uint16_t* p = reinterpret_cast<uint16_t*>(base + k * kOutBytes);
            if (stream) {
              hn::Stream(h, du16, p);
            } else {
              hn::StoreU(h, du16, p);
            }
          }
        } else if (stream) {
          for (; k + unit <= stop; k += unit) {
            const VF v0 = GroupValue(g, LoadCodesAt(codes, k));
            const VF v1 = GroupValue(g, LoadCodesAt(codes, k + static_cast<int64_t>(N)));
            StoreUnit(df, v0, v1, base + k * kOutBytes, true);
          }
        } else {
          for (; k + unit <= stop; k += unit) {
            const VF v0 = GroupValue(g, LoadCodesAt(codes, k));
            const VF v1 = GroupValue(g, LoadCodesAt(codes, k + static_cast<int64_t>(N)));
            StoreUnit(df, v0, v1, base + k * kOutBytes, false);
          }
        }
        if (k + unit > k1) break;
        if (k == g_end) {  // groups aligned with units: step to the next
          g_idx += job_.step;
          g_end += job_.group;
          g = MakeGroup(g_idx);
          continue;
        }
        // This unit straddles a group boundary (through the members).
        cur_ = g;
        cur_idx_ = g_idx;
        cur_end_ = g_end;
        const VF v0 = Compute(k);
        const VF v1 = Compute(k + static_cast<int64_t>(N));
        StoreUnit(df, v0, v1, base + k * kOutBytes, stream);
        k += unit;
        g = cur_;
        g_idx = cur_idx_;
        g_end = cur_end_;
      }
    }
    ScalarRange(k, k1, out + (k - k0) * kOutBytes);
  }

  // Elements a vector load must start at a multiple of (relative to the
  // row; kNibbles: relative to the byte boundary).
  static constexpr int64_t CodeAlign() {
    constexpr int64_t n = static_cast<int64_t>(hn::MaxLanes(DF()));
    switch (kLayout) {
      case RowLayout::kNibbles:
        return 2;
      case RowLayout::kSplit32:
      case RowLayout::kSplit256:
      case RowLayout::kBlock32:
        return n;
      case RowLayout::kAwqWords:
      case RowLayout::kGptqCols:
        return n < 8 ? n : 8;
      default:
        return 1;
    }
  }

 private:
  // --- Scalar path (prologue, tails) -------------------------------------
  void ScalarRange(int64_t k0, int64_t k1, char* out) const {
    for (int64_t k = k0; k < k1; ++k) {
      const float v = ScalarValue(k);
      char* dst = out + (k - k0) * (kOut == OutType::kF32 ? 4 : 2);
      if (kOut == OutType::kF32) {
        std::memcpy(dst, &v, 4);
      } else {
        const uint16_t h = kOut == OutType::kF16 ? F16FromF32(v) : BF16FromF32(v);
        std::memcpy(dst, &h, 2);
      }
    }
  }

  uint32_t ScalarCode(int64_t k) const {
    switch (kLayout) {
      case RowLayout::kWords16: {
        uint16_t w;
        std::memcpy(&w, job_.code.codes + 2 * k, 2);
        return (uint32_t{w} >> job_.code.shift) & 0xFu;
      }
      case RowLayout::kWords32: {
        uint32_t w;
        std::memcpy(&w, job_.code.codes + 4 * k, 4);
        return (w >> job_.code.shift) & 0xFu;
      }
      case RowLayout::kNibbles: {
        const int64_t e = k + (job_.code.odd_start ? 1 : 0);
        return (uint32_t{job_.code.codes[e / 2]} >> (4 * (e % 2))) & 0xFu;
      }
      case RowLayout::kBytes:
        return job_.code.codes[k];
      case RowLayout::kHalves: {
        uint16_t h;
        std::memcpy(&h, job_.code.codes + 2 * k, 2);
        return h;
      }
      case RowLayout::kSplit32:
      case RowLayout::kSplit256:
      case RowLayout::kBlock32: {
        int shift;
        const uint8_t* p = BlockBytes(job_.code, k, &shift);
        return (uint32_t{*p} >> shift) & (kLayout == RowLayout::kBlock32 ? 0xFFu : 0xFu);
      }
      case RowLayout::kAwqWords: {
        const uint8_t nib = kAwqNibble[k % 8];
        return (uint32_t{job_.code.codes[(k / 8) * 4 + nib / 2]} >> (4 * (nib % 2))) & 0xFu;
      }
      case RowLayout::kGptqCols: {
        const int64_t nib = k % 8;
        return (uint32_t{job_.code.codes[(k / 8) * job_.code.block_bytes + nib / 2]} >>
                (4 * (nib % 2))) &
               0xFu;
      }
      case RowLayout::kAwqCols: {
        uint32_t w;
        std::memcpy(&w, job_.code.codes + k * job_.code.block_bytes, 4);
        return (w >> job_.code.shift) & 0xFu;
      }
    }
    return 0;
  }

  int64_t ScaleIndex(int64_t k) const {
    return job_.per_element ? k : job_.base + (k / job_.group) * job_.step;
  }

  float ScalarValue(int64_t k) const {
    const int64_t idx = ScaleIndex(k);
    const float s = job_.scale[idx];
    if (kFloatCode) return decode_[ScalarCode(k)] * s;
    const int32_t q = DecodeIntCode(kCode, ScalarCode(k));
    if (kZp == ZeroPointKind::kInteger) return static_cast<float>(q - job_.zp_int[idx]) * s;

    const float prod = static_cast<float>(q - plan_.code_offset) * s;
    if (kZp == ZeroPointKind::kFloat) return prod + job_.zp_float[idx];
    return prod;
  }

  // --- Vector path ---------------------------------------------------------
  // Raw codes (unsigned bit fields) of elements k .. k+N-1.
  HWY_INLINE VI LoadCodes(int64_t k) const { return LoadCodesAt(job_.code, k); }

  // Block layouts: the byte holding element k of the row, and the shift of
  // its nibble (0 for bytes). For a vector start (k % CodeAlign() == 0) the
  // whole vector's codes are the following bytes at the same shift.
  static HWY_INLINE const uint8_t* BlockBytes(const CodeRef& c, int64_t k, int* shift) {
    if (kLayout == RowLayout::kSplit32) {
      const int64_t p = k & 31;
      *shift = p >= 16 ? 4 : 0;
      return c.codes + (k >> 5) * c.block_bytes + (p & 15);
    } else if (kLayout == RowLayout::kSplit256) {
      const int64_t p = k & 255;
      *shift = (p & 32) != 0 ? 4 : 0;
      return c.codes + (k >> 8) * c.block_bytes + (p >> 6) * 32 + (p & 31);
    }
    *shift = 0;  // kBlock32
    return c.codes + (k >> 5) * c.block_bytes + (k & 31);
  }

 public:
  // Raw codes (unsigned bit fields) of elements k .. k+N-1 of the row
  // described by `c` (k a multiple of CodeAlign()).
  static HWY_INLINE VI LoadCodesAt(const CodeRef& c, int64_t k) {
    const DI di;
    const DU du;
    const uint8_t* const codes = c.codes;
    const int shift = c.shift;
    const bool odd_start = c.odd_start;
    if (kLayout == RowLayout::kSplit32 || kLayout == RowLayout::kSplit256 ||
        kLayout == RowLayout::kBlock32) {
      int sh;
      const uint8_t* p = BlockBytes(c, k, &sh);
      if (kLayout == RowLayout::kBlock32 && kCode == CodeKind::kS8) {
        const hn::Rebind<int8_t, DI> di8;
        return hn::PromoteTo(di, hn::LoadU(di8, reinterpret_cast<const int8_t*>(p)));
      }
      const hn::Rebind<uint8_t, DI> du8;
      const auto u = hn::PromoteTo(du, hn::LoadU(du8, p));
      if (kLayout == RowLayout::kBlock32) return hn::BitCast(di, u);
      return hn::BitCast(di, hn::And(hn::ShiftRightSame(u, sh), hn::Set(du, 0xFu)));
    } else if (kLayout == RowLayout::kAwqCols) {
      // One word per column, word_stride bytes apart: a gather (op/ checked
      // the base is 4-byte aligned and every offset fits int32).
      const auto idx =
          hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(c.block_bytes / 4)));
      const auto* base = reinterpret_cast<const uint32_t*>(codes + k * c.block_bytes);
      const auto w = hn::GatherIndex(du, base, idx);
      return hn::BitCast(di, hn::And(hn::ShiftRightSame(w, shift), hn::Set(du, 0xFu)));
    } else if (kLayout == RowLayout::kAwqWords || kLayout == RowLayout::kGptqCols) {
      // Lane i holds word (k + i) / 8 shifted by its nibble's position
      // (AWQ words are adjacent; GPTQ column words word_stride apart).
      constexpr size_t kN = hn::MaxLanes(DU());
      const int64_t step = kLayout == RowLayout::kAwqWords ? 4 : c.block_bytes;
      const uint8_t* w = codes + (k >> 3) * step;
      const uint32_t* shifts = kLayout == RowLayout::kAwqWords ? kAwqShift : kSeqShift;
      hn::Vec<DU> words;
      if constexpr (kN > 8) {
        uint32_t w0, w1;
        std::memcpy(&w0, w, 4);
        std::memcpy(&w1, w + step, 4);
        const uint64_t two = uint64_t{w0} | (uint64_t{w1} << 32);
        const hn::Repartition<uint64_t, DU> du64;
        const auto idx = hn::ShiftRight<3>(hn::Iota(du, 0));
        words =
            hn::TableLookupLanes(hn::BitCast(du, hn::Set(du64, two)), hn::IndicesFromVec(du, idx));
      } else {
        uint32_t one;
        std::memcpy(&one, w, 4);
        words = hn::Set(du, one);
      }
      const auto sh = hn::LoadU(du, shifts + (k & 7));
      return hn::BitCast(di, hn::And(words >> sh, hn::Set(du, 0xFu)));
    } else if (kLayout == RowLayout::kWords16) {
      const hn::Rebind<uint16_t, DI> du16;
      const auto w = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(codes) + k);
      const auto u = hn::PromoteTo(du, w);
      return hn::BitCast(di, hn::And(hn::ShiftRightSame(u, shift), hn::Set(du, 0xFu)));
    } else if (kLayout == RowLayout::kWords32) {
      const auto u = hn::LoadU(du, reinterpret_cast<const uint32_t*>(codes) + k);
      return hn::BitCast(di, hn::And(hn::ShiftRightSame(u, shift), hn::Set(du, 0xFu)));
    } else if (kLayout == RowLayout::kNibbles) {
      // N codes = N/2 bytes: widen each byte b to a u16 lane holding
      // (b & 0xF) | (b >> 4) << 8, whose two bytes are the two codes in
      // order; then widen those N bytes to N lanes.
      const hn::Rebind<uint8_t, DI> du8n;                     // N x u8
      const hn::Repartition<uint16_t, decltype(du8n)> du16h;  // N/2 x u16
      const hn::Rebind<uint8_t, decltype(du16h)> du8h;        // N/2 x u8
      const int64_t e = k + (odd_start ? 1 : 0);              // even by construction
      const auto b = hn::PromoteTo(du16h, hn::LoadU(du8h, codes + e / 2));
      const auto pair =
          hn::Or(hn::And(b, hn::Set(du16h, 0xF)), hn::ShiftLeft<8>(hn::ShiftRight<4>(b)));
      return hn::BitCast(di, hn::PromoteTo(du, hn::BitCast(du8n, pair)));
    } else if (kLayout == RowLayout::kHalves) {
      if (kCode == CodeKind::kS16) {
        const hn::Rebind<int16_t, DI> di16;
        return hn::PromoteTo(di, hn::LoadU(di16, reinterpret_cast<const int16_t*>(codes) + k));
      }
      const hn::Rebind<uint16_t, DI> du16;
      return hn::BitCast(
          di, hn::PromoteTo(du, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(codes) + k)));
    } else {
      if (kCode == CodeKind::kS8) {
        const hn::Rebind<int8_t, DI> di8;
        return hn::PromoteTo(di, hn::LoadU(di8, reinterpret_cast<const int8_t*>(codes) + k));
      }
      const hn::Rebind<uint8_t, DI> du8;
      return hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(du8, codes + k)));
    }
  }

 private:
  // Raw 4-bit codes of elements k .. k+2N-1 in 16-bit lanes (kHalfTable).
  static HWY_INLINE VU16 LoadCodes16At(const CodeRef& c, int64_t k) {
    const DU16 du16;
    const uint8_t* const codes = c.codes;
    const int shift = c.shift;
    const bool odd_start = c.odd_start;
    if (kLayout == RowLayout::kSplit32 || kLayout == RowLayout::kSplit256) {
      // Two runs of N codes, each N bytes at one nibble shift, widened
      // straight to 16-bit lanes.
      const hn::Half<DU16> dh;
      const hn::Rebind<uint8_t, decltype(dh)> d8;
      auto half = [&](int64_t kk) HWY_ATTR {
        int sh;
        const uint8_t* p = BlockBytes(c, kk, &sh);
        const auto b = hn::PromoteTo(dh, hn::LoadU(d8, p));
        return hn::And(hn::ShiftRightSame(b, sh), hn::Set(dh, 0xF));
      };
      return hn::Combine(du16, half(k + static_cast<int64_t>(hn::Lanes(dh))), half(k));
    } else if (kLayout == RowLayout::kAwqWords || kLayout == RowLayout::kGptqCols ||
               kLayout == RowLayout::kAwqCols) {
      const hn::Rebind<uint16_t, DU> du16h;
      const auto lo = LoadCodesAt(c, k);
      const auto hi = LoadCodesAt(c, k + static_cast<int64_t>(hn::Lanes(DU())));
      return hn::Combine(du16, hn::DemoteTo(du16h, hi), hn::DemoteTo(du16h, lo));
    } else if (kLayout == RowLayout::kWords16) {
      const auto w = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(codes) + k);
      return hn::And(hn::ShiftRightSame(w, shift), hn::Set(du16, 0xF));
    } else if (kLayout == RowLayout::kWords32) {
      const DU du;
      const hn::Rebind<uint16_t, DU> du16h;
      const auto* p = reinterpret_cast<const uint32_t*>(codes) + k;
      const auto lo = hn::And(hn::ShiftRightSame(hn::LoadU(du, p), shift), hn::Set(du, 0xFu));
      const auto hi =
          hn::And(hn::ShiftRightSame(hn::LoadU(du, p + hn::Lanes(du)), shift), hn::Set(du, 0xFu));
      return hn::Combine(du16, hn::DemoteTo(du16h, hn::BitCast(DI(), hi)),
                         hn::DemoteTo(du16h, hn::BitCast(DI(), lo)));
    } else {
      // 2N codes = N bytes; see LoadCodesAt for the pairing trick.
      const hn::Rebind<uint16_t, DI> du16h;                  // N x u16
      const hn::Rebind<uint8_t, decltype(du16h)> du8h;       // N x u8
      const hn::Repartition<uint8_t, decltype(du16h)> du8f;  // 2N x u8
      const int64_t e = k + (odd_start ? 1 : 0);
      const auto b = hn::PromoteTo(du16h, hn::LoadU(du8h, codes + e / 2));
      const auto pair =
          hn::Or(hn::And(b, hn::Set(du16h, 0xF)), hn::ShiftLeft<8>(hn::ShiftRight<4>(b)));
      return hn::PromoteTo(du16, hn::BitCast(du8f, pair));
    }
  }

  static HWY_INLINE VU16 HalfLookup(VU16 table16, VU16 c) {
#if HWY_TARGET <= HWY_AVX3
    return VU16{_mm512_permutexvar_epi16(c.raw, table16.raw)};
#else
    (void)c;
    return table16;  // unreachable: kHalfTable is false here
#endif
  }

  // Integer value q of raw codes (sign extension for signed sub-byte codes).
  HWY_INLINE VI Decode(VI c) const {
    const DI di;
    if (kCode == CodeKind::kS4) return hn::Sub(hn::Xor(c, hn::Set(di, 8)), hn::Set(di, 8));
    return c;
  }

  // The contract's arithmetic on N lanes (for float codes, q holds the raw
  // bit patterns: decode through the table, then x * s).
  HWY_INLINE VF Arith(VI q, VF s, VI z, VF zf) const {
    const DF df;
    if (kFloatCode) {
      (void)z;
      (void)zf;
      return hn::Mul(hn::GatherIndex(df, decode_, q), s);
    }
    const VF prod = hn::Mul(hn::ConvertTo(df, hn::Sub(q, z)), s);
    return kZp == ZeroPointKind::kFloat ? hn::Add(prod, zf) : prod;
  }

  struct Group {
    VF s, zf, table;
    VI z;
    VU16 table16;  // kHalfTable: output bits of T[c] in lanes c and 16 + c
  };

  HWY_INLINE Group MakeGroup(int64_t idx) const {
    const DF df;
    const DI di;
    Group g;
    g.s = hn::Set(df, job_.scale[idx]);
    g.z = hn::Set(di, kZp == ZeroPointKind::kInteger ? job_.zp_int[idx] : plan_.code_offset);
    g.zf = hn::Set(df, kZp == ZeroPointKind::kFloat ? job_.zp_float[idx] : 0.0f);
    if (kTable) {
      // T[c] for every 4-bit code c, by the same operations as Arith.
      g.table = Arith(Decode(hn::Iota(di, 0)), g.s, g.z, g.zf);
    } else {
      g.table = g.s;
    }
    if (kHalfTable) {
      const DU16 du16;
      const auto h = kOut == OutType::kF16 ? F16Bits(df, g.table) : BF16Bits(df, g.table);
      g.table16 = hn::Combine(du16, h, h);
    } else {
      g.table16 = hn::Zero(DU16());
    }
    return g;
  }

  HWY_INLINE VF GroupValue(const Group& g, VI c) const {
    if (kTable) {
      const DF df;
      return hn::TableLookupLanes(g.table, hn::IndicesFromVec(df, c));
    }
    return Arith(Decode(c), g.s, g.z, g.zf);
  }

  // Grouped rows: current group's parameters and where it ends.
  void SetGroup(int64_t k) {
    cur_idx_ = ScaleIndex(k);
    cur_ = MakeGroup(cur_idx_);
    cur_end_ = k / job_.group * job_.group + job_.group;
  }

  // The group after the current one (no division: cheap for small groups).
  HWY_INLINE void NextGroup() {
    cur_idx_ += job_.step;
    cur_end_ += job_.group;
    cur_ = MakeGroup(cur_idx_);
  }

  // Values of elements k .. k+N-1 (called in increasing k).
  HWY_INLINE VF Compute(int64_t k) {
    const DF df;
    const DI di;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    const VI c = LoadCodes(k);
    if (job_.per_element) {
      const VF s = hn::LoadU(df, job_.scale + k);
      const VI z = kZp == ZeroPointKind::kInteger ? hn::LoadU(di, job_.zp_int + k)
                                                  : hn::Set(di, plan_.code_offset);
      const VF zf = kZp == ZeroPointKind::kFloat ? hn::LoadU(df, job_.zp_float + k) : hn::Zero(df);
      return Arith(Decode(c), s, z, zf);
    }
    if (k + n <= cur_end_) return GroupValue(cur_, c);
    if (k >= cur_end_) {  // first lane already in a later group
      SetGroup(k);
      if (k + n <= cur_end_) return GroupValue(cur_, c);
    }
    // The vector straddles a group boundary (group >= N: at most one).
    const VF a = GroupValue(cur_, c);
    const size_t in_first = static_cast<size_t>(cur_end_ - k);
    NextGroup();
    const VF b = GroupValue(cur_, c);
    return hn::IfThenElse(hn::FirstN(df, in_first), a, b);
  }

  // Stores v0 then v1 (2N outputs) at dst; `stream`: non-temporal (dst
  // aligned to a full vector).
 public:
  static HWY_INLINE void StoreUnit(DF df, VF v0, VF v1, char* dst, bool stream) {
    const size_t N = hn::Lanes(df);
    if (kOut == OutType::kF32) {
      float* p = reinterpret_cast<float*>(dst);
      if (stream) {
        hn::Stream(v0, df, p);
        hn::Stream(v1, df, p + N);
      } else {
        hn::StoreU(v0, df, p);
        hn::StoreU(v1, df, p + N);
      }
    } else {
#if HWY_TARGET <= HWY_AVX3
      if constexpr (kOut == OutType::kBF16 && hn::MaxLanes(DF()) == 16) {
        if (CpuHasAvx512Bf16() && StoreBF16x32(v0.raw, v1.raw, dst, stream)) return;
      }
#endif
      const hn::Repartition<uint16_t, DF> du16;  // 2N lanes: one full vector
      const auto h0 = kOut == OutType::kF16 ? F16Bits(df, v0) : BF16Bits(df, v0);
      const auto h1 = kOut == OutType::kF16 ? F16Bits(df, v1) : BF16Bits(df, v1);
      const auto both = hn::Combine(du16, h1, h0);
      uint16_t* p = reinterpret_cast<uint16_t*>(dst);
      if (stream) {
        hn::Stream(both, du16, p);
      } else {
        hn::StoreU(both, du16, p);
      }
    }
  }

 private:
  const Plan& plan_;
  const RowJob& job_;
  const float* decode_;  // float codes: decoded value of each bit pattern
  Group cur_;
  int64_t cur_idx_ = 0, cur_end_ = 0;
};

#if HWY_TARGET <= HWY_AVX3
// 16 x 16 float32 transpose in registers: on return r[i] holds what was
// column i.
HWY_INLINE void Transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16], v[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      v[8 * i + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0x88);
      v[8 * i + 4 + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0xDD);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xDD);
  }
}

// Column-packed checkpoint words (kGptqCols, kAwqCols) on AVX-512: tiles of
// 16 rows (outputs n) x 32 columns (inputs k). The codes of a tile arrive
// with the 16 rows in the lanes (one 64-byte load per GPTQ word row; two
// words per AWQ row), are dequantized lane-wise with each row's own scale
// and zero point (the contract's arithmetic), transposed in registers and
// stored as whole 64-byte lines. Rows are walked in super-bands of 128 so
// every loaded cache line is used up before the next column step. Returns
// the rows [r0, rt) it did not finish entirely (callers run them, and the
// column edges of the others, through `edge(r, ca, cb)`).
template <RowLayout kLayout, ZeroPointKind kZp, OutType kOut, class Edge>
void ColumnWordTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, char* out,
                     int64_t ld, const Edge& edge) {
  using K = RowKernel<kLayout, CodeKind::kU4, kZp, kOut>;
  using AwqRow = RowKernel<RowLayout::kAwqWords, CodeKind::kU4, kZp, kOut>;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  constexpr int64_t kOutBytes = kOut == OutType::kF32 ? 4 : 2;
  const bool stream = plan.nontemporal;
  const int64_t rb0 = std::min(r1, (r0 + 15) / 16 * 16);
  const int64_t rb1 = rb0 + (r1 - rb0) / 16 * 16;
  const int64_t ka = std::min(c1, (c0 + 7) / 8 * 8);
  const int64_t kb = ka + (c1 - ka) / 32 * 32;
  for (int64_t r = r0; r < rb0; ++r) edge(r, c0, c1);
  for (int64_t r = rb1; r < r1; ++r) edge(r, c0, c1);
  if (rb0 >= rb1 || ka >= kb) {
    for (int64_t r = rb0; r < rb1; ++r) edge(r, c0, c1);
    return;
  }
  for (int64_t r = rb0; r < rb1; ++r) {
    if (c0 < ka) edge(r, c0, ka);
    if (kb < c1) edge(r, kb, c1);
  }
  const int64_t S = plan.word_stride, N = plan.s_axis, G = plan.group;
  const auto mask = hn::Set(du, 0xFu);
  const auto off = hn::Set(di, plan.code_offset);
  // Super-bands of 1024 rows: a column step reads 4 KiB runs of each GPTQ
  // word row (or AWQ row), which the prefetchers follow; measured against
  // 128 rows and whole tiles (README, "Checkpoint formats").
  constexpr int64_t kSuperBand = 1024;
  for (int64_t sb = rb0; sb < rb1; sb += kSuperBand) {
    const int64_t se = std::min(rb1, sb + kSuperBand);
    for (int64_t k0 = ka; k0 < kb; k0 += 32) {
      if (kLayout == RowLayout::kGptqCols) {
        // The word rows two column steps ahead: each run starts a new page
        // far from the last, where the hardware prefetchers do not look.
        const int64_t words = plan.axis / 8;
        for (int64_t w = k0 / 8 + 8; w < std::min(words, k0 / 8 + 12); ++w) {
          const uint8_t* row = plan.codes + w * S + 4 * sb;
          for (int64_t l = 0; l < 4 * (se - sb); l += 64) hwy::Prefetch(row + l);
        }
      }
      for (int64_t n0 = sb; n0 < se; n0 += 16) {
        // Two halves of 16 columns; the first half's transposed rows wait
        // in an L1 buffer (explicitly, rather than as register spills).
        alignas(64) float first[16][16];
        for (int half = 0; half < 2; ++half) {
          __m512 v[16];
          const int64_t kh = k0 + 16 * half;
          // The group of column kh, and where the next one starts (no
          // division in the loop).
          int64_t g = kh / G, g_end = (g + 1) * G;
          hn::Vec<decltype(df)> s = hn::Zero(df), zf = hn::Zero(df);
          hn::Vec<decltype(di)> z = off;
          auto load_group = [&]() HWY_ATTR {
            s = hn::LoadU(df, plan.scale + g * N + n0);
            if (kZp == ZeroPointKind::kInteger) z = hn::LoadU(di, plan.zp_int + g * N + n0);
            if (kZp == ZeroPointKind::kFloat) zf = hn::LoadU(df, plan.zp_float + g * N + n0);
          };
          hn::Vec<decltype(du)> words = hn::Zero(du);
          load_group();
#pragma GCC unroll 16
          for (int64_t kk = 0; kk < 16; ++kk) {
            const int64_t k = kh + kk;
            if (k == g_end) {
              ++g;
              g_end += G;
              load_group();
            }
            hn::Vec<decltype(du)> c;
            if (kLayout == RowLayout::kGptqCols) {
              if (kk % 8 == 0) {
                words = hn::LoadU(
                    du, reinterpret_cast<const uint32_t*>(plan.codes + (k / 8) * S + 4 * n0));
              }
              c = hn::And(hn::ShiftRightSame(words, static_cast<int>(4 * (kk % 8))), mask);
            } else {  // row k's two words of columns n0 .. n0+15: the row loader
              c = hn::BitCast(
                  du, AwqRow::LoadCodesAt({plan.codes + k * S + 4 * (n0 / 8), 0, false, 0}, 0));
            }
            auto val = hn::Mul(hn::ConvertTo(df, hn::Sub(hn::BitCast(di, c), z)), s);
            if (kZp == ZeroPointKind::kFloat) val = hn::Add(val, zf);
            v[kk] = val.raw;
          }
          Transpose16x16(v);
          if (half == 0) {
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) _mm512_store_ps(first[i], v[i]);
          } else {
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) {
              char* dst = out + ((n0 + i - r0) * ld + (k0 - c0)) * kOutBytes;
              const bool nt = stream && reinterpret_cast<uintptr_t>(dst) % 64 == 0;
              K::StoreUnit(df, hn::Load(df, first[i]), hn::Vec<decltype(df)>{v[i]}, dst, nt);
            }
          }
        }
      }
    }
  }
}
#endif  // HWY_TARGET <= HWY_AVX3

template <RowLayout kLayout, CodeKind kCode, ZeroPointKind kZp, OutType kOut>
void RunRows(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
             int64_t ld) {
  const int64_t cols = plan.cols();
  constexpr int64_t kOutBytes = kOut == OutType::kF32 ? 4 : 2;
  const bool stream = plan.nontemporal;
  // Row r, columns [ca, cb), written at y.
  auto run_row = [&](int64_t r, int64_t ca, int64_t cb, char* y) HWY_ATTR {
    RowJob job;
    const int64_t e0 = r * cols;  // element (r, 0)
    // Codes.
    if (kLayout == RowLayout::kWords16 || kLayout == RowLayout::kWords32) {
      const int64_t p = plan.interleave, rr = plan.interleave_row;
      const int64_t d = e0 / rr, j = e0 % rr;
      job.code = {plan.codes + ((d / p) * rr + j) * (p / 2), static_cast<int>(4 * (d % p)), false,
                  0};
    } else if (kLayout == RowLayout::kNibbles) {
      job.code = {plan.codes + e0 / 2, 0, (e0 & 1) != 0, 0};
    } else if (kLayout == RowLayout::kBytes || kLayout == RowLayout::kHalves) {
      job.code = {plan.codes + e0 * (kLayout == RowLayout::kHalves ? 2 : 1), 0, false, 0};
    } else if (kLayout == RowLayout::kGptqCols) {
      job.code = {plan.codes + 4 * r, 0, false, plan.word_stride};
    } else if (kLayout == RowLayout::kAwqCols) {
      job.code = {plan.codes + 4 * (r / 8), 4 * plan.word_nibble[r % 8], false, plan.word_stride};
    } else {  // block layouts: the row starts at a block
      job.code = {plan.codes + (e0 / plan.block_elems) * plan.block_bytes, 0, false,
                  plan.block_bytes};
    }
    // Scales.
    if (plan.inner == 1) {
      job.per_element = plan.group == 1 && plan.s_axis == 1;
      job.base = r * plan.s_outer;
      job.group = plan.group;
      job.step = plan.s_axis;
    } else {
      const int64_t o = r / plan.axis, a = r % plan.axis;
      const int64_t ga = plan.axis_group != nullptr ? plan.axis_group[a] : a / plan.group;
      job.base = o * plan.s_outer + ga * plan.s_axis;
      job.per_element = plan.s_inner == 1;
      job.group = cols;  // constant along the row
      job.step = 0;
    }
    if (job.step == 0) job.group = cols;  // scale constant along the row
    job.scale = plan.scale;
    job.zp_int = plan.zp_int;
    job.zp_float = plan.zp_float;
    if (job.per_element) {
      job.scale = plan.scale + job.base;
      if (plan.zp_int) job.zp_int = plan.zp_int + job.base;
      if (plan.zp_float) job.zp_float = plan.zp_float + job.base;
    }
    RowKernel<kLayout, kCode, kZp, kOut> kernel(plan, job);
    kernel.Run(ca, cb, y, stream);
  };
  char* const base = static_cast<char*>(out);
#if HWY_TARGET <= HWY_AVX3
  if constexpr ((kLayout == RowLayout::kGptqCols || kLayout == RowLayout::kAwqCols) &&
                kZp != ZeroPointKind::kFloatSubtract) {
    ColumnWordTiles<kLayout, kZp, kOut>(
        plan, r0, r1, c0, c1, base, ld, [&](int64_t r, int64_t ca, int64_t cb) HWY_ATTR {
          run_row(r, ca, cb, base + ((r - r0) * ld + (ca - c0)) * kOutBytes);
        });
    if (stream) hwy::FlushStream();
    return;
  }
#endif
  if (kLayout == RowLayout::kGptqCols) {
    // A row reads one word per 8 columns, word_stride bytes apart: the 16
    // rows sharing those cache lines run together over column chunks, so
    // each line is fetched once (large power-of-two strides map every word
    // of a row to the same cache sets).
    constexpr int64_t kBand = 16, kChunk = 256;  // measured: 64 and 1024 slower
    for (int64_t rb = r0; rb < r1; rb = (rb / kBand + 1) * kBand) {
      const int64_t re = std::min<int64_t>(r1, (rb / kBand + 1) * kBand);
      for (int64_t cc = c0; cc < c1; cc += kChunk) {
        const int64_t ce = std::min<int64_t>(c1, cc + kChunk);
        // The next chunk's lines (no hardware prefetcher follows this stride).
        const int64_t pe = std::min<int64_t>(c1, ce + kChunk);
        for (int64_t w = ce / 8; w < (pe + 7) / 8; ++w) {
          hwy::Prefetch(plan.codes + w * plan.word_stride + 4 * rb);
        }
        for (int64_t r = rb; r < re; ++r) {
          run_row(r, cc, ce, base + ((r - r0) * ld + (cc - c0)) * kOutBytes);
        }
      }
    }
  } else {
    for (int64_t r = r0; r < r1; ++r) run_row(r, c0, c1, base + (r - r0) * ld * kOutBytes);
  }
  // Order the non-temporal stores before anything the caller does next
  // (once per call: an sfence per row would drain the write-combining
  // buffers thousands of times per tensor).
  if (stream) hwy::FlushStream();
}

template <RowLayout kLayout, CodeKind kCode>
void DispatchZpOut(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                   int64_t ld) {
#define NIBBLE_CASE(ZP, OUT)                                                                   \
  if (plan.zp_kind == ZeroPointKind::ZP && plan.out == OutType::OUT) {                         \
    return RunRows<kLayout, kCode, ZeroPointKind::ZP, OutType::OUT>(plan, r0, r1, c0, c1, out, \
                                                                    ld);                       \
  }
  NIBBLE_CASE(kNone, kF32)
  NIBBLE_CASE(kNone, kF16)
  NIBBLE_CASE(kNone, kBF16)
  NIBBLE_CASE(kInteger, kF32)
  NIBBLE_CASE(kInteger, kF16)
  NIBBLE_CASE(kInteger, kBF16)
  NIBBLE_CASE(kFloat, kF32)
  NIBBLE_CASE(kFloat, kF16)
  NIBBLE_CASE(kFloat, kBF16)
#undef NIBBLE_CASE
  // kFloatSubtract (MatMulNBits float zero points, rare): the reference.
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

// Float codes have no zero point (op/ validated that ONNX float8 zero points
// are zero and drops float4 ones).
template <RowLayout kLayout, CodeKind kCode>
void DispatchOut(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                 int64_t ld) {
  switch (plan.out) {
    case OutType::kF32:
      return RunRows<kLayout, kCode, ZeroPointKind::kNone, OutType::kF32>(plan, r0, r1, c0, c1, out,
                                                                          ld);
    case OutType::kF16:
      return RunRows<kLayout, kCode, ZeroPointKind::kNone, OutType::kF16>(plan, r0, r1, c0, c1, out,
                                                                          ld);
    case OutType::kBF16:
      return RunRows<kLayout, kCode, ZeroPointKind::kNone, OutType::kBF16>(plan, r0, r1, c0, c1,
                                                                           out, ld);
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

#if HWY_TARGET != HWY_SCALAR
// True if the SIMD row kernels handle this tile: rows long enough for one
// unit of 2N lanes, and groups along a row at least N long (so a vector
// straddles at most one group boundary).
HWY_INLINE bool SimdEligible(const Plan& plan, int64_t c0, int64_t c1) {
  const KernelTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const bool groups_ok = plan.inner != 1 || plan.group >= n ||
                         (plan.group == 1 && plan.s_axis == 1) || plan.s_axis == 0;
  return groups_ok && c1 - c0 >= 2 * n;
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
