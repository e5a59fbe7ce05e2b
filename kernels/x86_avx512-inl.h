// Every raw x86 intrinsic of the kernels, in one place, for AVX-512 targets
// only (HWY_TARGET <= HWY_AVX3), included once per Highway target by
// kernels/dequantize-inl.h. Why they are not Highway ops:
//  - StoreBF16x32: Highway 1.0.3 has no AVX512_BF16 target, and its
//    bfloat16 DemoteTo truncates; vcvtne2ps2bf16 rounds exactly like
//    BF16FromF32, 2-3x faster than the integer-lane rounding. Chosen at
//    run time (CpuHasAvx512Bf16, the CPU's own flag: Highway's dispatch does
//    not detect this extension).
//  - PermuteHalves: a 32 x 16-bit table lookup (vpermw); Highway 1.0.3's
//    TableLookupLanes has no 16-bit lanes.
//  - Transpose16x16 / ColumnWordTiles: the in-register 16 x 16 transposes
//    of the GPTQ / AWQ [N, K] kernels (Highway 1.0.3 has no 128-bit-block
//    shuffles of two vectors).
// Every path here is checked by the tests that compare each compiled target
// with the scalar reference (==): on a CPU with AVX512_BF16 that covers
// StoreBF16x32, on one without, its integer-lane fallback.
#if defined(NIBBLE_KERNELS_X86_AVX512_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_X86_AVX512_INL_H_
#undef NIBBLE_KERNELS_X86_AVX512_INL_H_
#else
#define NIBBLE_KERNELS_X86_AVX512_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/code_loaders-inl.h"
#include "kernels/plan.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

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

// The 16-bit lanes of `table` selected by the low 5 bits of `idx` (vpermw).
template <class V>
HWY_INLINE V PermuteHalves(V table, V idx) {
  return V{_mm512_permutexvar_epi16(idx.raw, table.raw)};
}

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

// Column-packed checkpoint words (kGptqColumns, kAwqColumns) on AVX-512: tiles of
// 16 rows (outputs n) x 32 columns (inputs k). The codes of a tile arrive
// with the 16 rows in the lanes (one 64-byte load per GPTQ word row; two
// words per AWQ row), are dequantized lane-wise with each row's own scale
// and zero point (the contract's arithmetic), transposed in registers and
// stored as whole 64-byte lines. Rows are walked in super-bands of 128 so
// every loaded cache line is used up before the next column step. Returns
// the rows [r0, rt) it did not finish entirely (callers run them, and the
// column edges of the others, through `edge(r, ca, cb)`).
// K: the row kernel type (its StoreUnit stores 2N outputs).
template <bool kGptq, ZeroPointKind kZp, OutType kOut, class K, class Edge>
void ColumnWordTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, char* out,
                     int64_t ld, const Edge& edge) {
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
      if (kGptq) {
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
            if (kGptq) {
              if (kk % 8 == 0) {
                words = hn::LoadU(
                    du, reinterpret_cast<const uint32_t*>(plan.codes + (k / 8) * S + 4 * n0));
              }
              c = hn::And(hn::ShiftRightSame(words, static_cast<int>(4 * (kk % 8))), mask);
            } else {  // row k's two words of columns n0 .. n0+15: the row loader
              c = hn::BitCast(du,
                              AwqWords::Load({plan.codes + k * S + 4 * (n0 / 8), 0, false, 0}, 0));
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

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
