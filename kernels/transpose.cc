// TransposeTile (kernels/transpose.h): whole blocks in AVX-512 registers
// on the targets that have them, 128-bit registers on the other x86
// targets, the rest element by element. Data movement only.
#include "kernels/transpose.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/transpose.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_ARCH_X86
// The unpacks TransposeInLanes is written with, per register width (each
// works inside 128-bit lanes).
HWY_INLINE __m128i Lo16(__m128i a, __m128i b) { return _mm_unpacklo_epi16(a, b); }
HWY_INLINE __m128i Hi16(__m128i a, __m128i b) { return _mm_unpackhi_epi16(a, b); }
HWY_INLINE __m128i Lo32(__m128i a, __m128i b) { return _mm_unpacklo_epi32(a, b); }
HWY_INLINE __m128i Hi32(__m128i a, __m128i b) { return _mm_unpackhi_epi32(a, b); }
HWY_INLINE __m128i Lo64(__m128i a, __m128i b) { return _mm_unpacklo_epi64(a, b); }
HWY_INLINE __m128i Hi64(__m128i a, __m128i b) { return _mm_unpackhi_epi64(a, b); }
#if HWY_TARGET <= HWY_AVX3
HWY_INLINE __m512i Lo16(__m512i a, __m512i b) { return _mm512_unpacklo_epi16(a, b); }
HWY_INLINE __m512i Hi16(__m512i a, __m512i b) { return _mm512_unpackhi_epi16(a, b); }
// (The 32- and 64-bit ones, like the lane shuffles below, in their
// all-lanes masked form: the plain
// intrinsics pass an undefined vector that GCC 12 reports as maybe
// uninitialized once inlined here; same instructions.)
HWY_INLINE __m512i Lo32(__m512i a, __m512i b) {
  return _mm512_mask_unpacklo_epi32(a, 0xFFFF, a, b);
}
HWY_INLINE __m512i Hi32(__m512i a, __m512i b) {
  return _mm512_mask_unpackhi_epi32(a, 0xFFFF, a, b);
}
HWY_INLINE __m512i Lo64(__m512i a, __m512i b) { return _mm512_mask_unpacklo_epi64(a, 0xFF, a, b); }
HWY_INLINE __m512i Hi64(__m512i a, __m512i b) { return _mm512_mask_unpackhi_epi64(a, 0xFF, a, b); }
#endif

// Transposes, in each 128-bit lane of a[0 .. 16 / kElem), the
// (16 / kElem)-square block of kElem-byte elements the vectors hold in
// that lane (a[i]'s part of a lane becomes the lane's column i).
template <size_t kElem, class V>
HWY_INLINE void TransposeInLanes(V* a) {
  if constexpr (kElem == 2) {
    const V b0 = Lo16(a[0], a[1]), b1 = Hi16(a[0], a[1]);
    const V b2 = Lo16(a[2], a[3]), b3 = Hi16(a[2], a[3]);
    const V b4 = Lo16(a[4], a[5]), b5 = Hi16(a[4], a[5]);
    const V b6 = Lo16(a[6], a[7]), b7 = Hi16(a[6], a[7]);
    const V c0 = Lo32(b0, b2), c1 = Hi32(b0, b2), c2 = Lo32(b1, b3), c3 = Hi32(b1, b3);
    const V c4 = Lo32(b4, b6), c5 = Hi32(b4, b6), c6 = Lo32(b5, b7), c7 = Hi32(b5, b7);
    a[0] = Lo64(c0, c4);
    a[1] = Hi64(c0, c4);
    a[2] = Lo64(c1, c5);
    a[3] = Hi64(c1, c5);
    a[4] = Lo64(c2, c6);
    a[5] = Hi64(c2, c6);
    a[6] = Lo64(c3, c7);
    a[7] = Hi64(c3, c7);
  } else {
    const V t0 = Lo32(a[0], a[1]), t1 = Hi32(a[0], a[1]);
    const V t2 = Lo32(a[2], a[3]), t3 = Hi32(a[2], a[3]);
    a[0] = Lo64(t0, t2);
    a[1] = Hi64(t0, t2);
    a[2] = Lo64(t1, t3);
    a[3] = Hi64(t1, t3);
  }
}

// Columns [0, nc / kLanes * kLanes) and rows [0, nr / kLanes * kLanes) of
// the tile in 128-bit registers, kLanes (16 / kElem) columns at a time:
// kLanes x kLanes blocks, four of them (64 bytes of each of kLanes output
// rows) at a time, each row's four pieces stored one after another;
// kStream: every output row's run starts on a 64-byte line, written by
// non-temporal stores.
template <size_t kElem, bool kStream>
HWY_NOINLINE void TransposeLanes128(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc,
                                    uint8_t* dst, size_t dst_ld) {
  constexpr int64_t kLanes = static_cast<int64_t>(16 / kElem);
  constexpr int64_t kLine = 4 * kLanes;  // rows per 64-byte line
  const auto load = [&](int64_t j, int64_t c) HWY_ATTR {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + static_cast<size_t>(j) * src_ld +
                                                            static_cast<size_t>(c) * kElem));
  };
  const auto store = [](uint8_t* d, __m128i v) HWY_ATTR {
    if constexpr (kStream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), v);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), v);
    }
  };
  const int64_t nr_lanes = nr / kLanes * kLanes;
  for (int64_t c = 0; c + kLanes <= nc; c += kLanes) {
    uint8_t* const d = dst + static_cast<size_t>(c) * dst_ld;
    int64_t j = 0;
    for (; j + kLine <= nr; j += kLine) {
      __m128i v[4][static_cast<size_t>(kLanes)];
      for (int64_t p = 0; p < 4; ++p) {
        for (int64_t i = 0; i < kLanes; ++i) v[p][i] = load(j + p * kLanes + i, c);
        TransposeInLanes<kElem>(v[p]);
      }
      for (int64_t i = 0; i < kLanes; ++i) {
        uint8_t* const run = d + static_cast<size_t>(i) * dst_ld + static_cast<size_t>(j) * kElem;
        for (int64_t p = 0; p < 4; ++p) store(run + 16 * p, v[p][i]);
      }
    }
    for (; j < nr_lanes; j += kLanes) {
      __m128i v[static_cast<size_t>(kLanes)];
      for (int64_t i = 0; i < kLanes; ++i) v[i] = load(j + i, c);
      TransposeInLanes<kElem>(v);
      for (int64_t i = 0; i < kLanes; ++i) {
        store(d + static_cast<size_t>(i) * dst_ld + static_cast<size_t>(j) * kElem, v[i]);
      }
    }
  }
}

#if HWY_TARGET <= HWY_AVX3
// The whole kBlock x kBlock blocks of the tile (kBlock = 64 / kElem: one
// 64-byte line of each of kBlock rows in, one line of each of kBlock
// output rows out). Per block, four groups of kLanes rows are transposed
// inside the 128-bit lanes; then the four vectors holding output row
// (q * kLanes + i)'s pieces in their lane q swap 128-bit lanes (a 4 x 4
// transpose of lanes), giving each output row its whole line. Blocks
// run down the tile (j inner): kBlock output rows are written as
// sequential streams, one whole line each per block; kStream: every
// output line is 64-byte aligned, written by non-temporal stores.
template <size_t kElem, bool kStream>
HWY_NOINLINE void TransposeBlocks512(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc,
                                     uint8_t* dst, size_t dst_ld) {
  constexpr int64_t kLanes = static_cast<int64_t>(16 / kElem);
  constexpr int64_t kBlock = 4 * kLanes;
  for (int64_t c = 0; c + kBlock <= nc; c += kBlock) {
    for (int64_t j = 0; j + kBlock <= nr; j += kBlock) {
      __m512i v[4][static_cast<size_t>(kLanes)];
      for (int64_t p = 0; p < 4; ++p) {
        for (int64_t i = 0; i < kLanes; ++i) {
          v[p][i] = _mm512_loadu_si512(src + static_cast<size_t>(j + p * kLanes + i) * src_ld +
                                       static_cast<size_t>(c) * kElem);
        }
        TransposeInLanes<kElem>(v[p]);
      }
      for (int64_t i = 0; i < kLanes; ++i) {
        const __m512i t0 = _mm512_mask_shuffle_i64x2(v[0][i], 0xFF, v[0][i], v[1][i], 0x44);
        const __m512i t1 = _mm512_mask_shuffle_i64x2(v[0][i], 0xFF, v[0][i], v[1][i], 0xEE);
        const __m512i t2 = _mm512_mask_shuffle_i64x2(v[2][i], 0xFF, v[2][i], v[3][i], 0x44);
        const __m512i t3 = _mm512_mask_shuffle_i64x2(v[2][i], 0xFF, v[2][i], v[3][i], 0xEE);
        const __m512i w[4] = {_mm512_mask_shuffle_i64x2(t0, 0xFF, t0, t2, 0x88),
                              _mm512_mask_shuffle_i64x2(t0, 0xFF, t0, t2, 0xDD),
                              _mm512_mask_shuffle_i64x2(t1, 0xFF, t1, t3, 0x88),
                              _mm512_mask_shuffle_i64x2(t1, 0xFF, t1, t3, 0xDD)};
        for (int64_t q = 0; q < 4; ++q) {
          void* const line = dst + static_cast<size_t>(c + q * kLanes + i) * dst_ld +
                             static_cast<size_t>(j) * kElem;
          if constexpr (kStream) {
            _mm512_stream_si512(static_cast<__m512i*>(line), w[q]);
          } else {
            _mm512_storeu_si512(line, w[q]);
          }
        }
      }
    }
  }
}
#endif  // HWY_TARGET <= HWY_AVX3
#endif  // HWY_ARCH_X86

// Calls f(kElem, kStream) as integral constants for elem (2 or 4) and
// whether the output rows take non-temporal stores (every one starts on a
// 64-byte line): the register paths' one dispatch.
template <class F>
HWY_INLINE void WithElemStream(size_t elem, const uint8_t* dst, size_t dst_ld, bool stream_ok,
                               F f) {
  const bool stream = stream_ok && reinterpret_cast<uintptr_t>(dst) % 64 == 0 && dst_ld % 64 == 0;
  using E2 = std::integral_constant<size_t, 2>;
  using E4 = std::integral_constant<size_t, 4>;
  if (elem == 2) {
    stream ? f(E2(), std::true_type()) : f(E2(), std::false_type());
  } else {
    stream ? f(E4(), std::true_type()) : f(E4(), std::false_type());
  }
}

// The nr x nc tile at src (src_ld bytes between its rows) in 128-bit
// registers where the target has them, then element by element.
void TransposeRegion128(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc, size_t elem,
                        uint8_t* dst, size_t dst_ld, bool stream_ok) {
  if (nr <= 0 || nc <= 0) return;
  int64_t nr_done = 0, nc_done = 0;  // the register part's rows and columns
#if HWY_ARCH_X86
  if (elem == 2 || elem == 4) {
    WithElemStream(elem, dst, dst_ld, stream_ok, [&](auto e, auto stream) HWY_ATTR {
      TransposeLanes128<decltype(e)::value, decltype(stream)::value>(src, src_ld, nr, nc, dst,
                                                                     dst_ld);
    });
    const int64_t lanes = static_cast<int64_t>(16 / elem);
    nr_done = nr / lanes * lanes;
    nc_done = nc / lanes * lanes;
  }
#endif  // HWY_ARCH_X86
  // The rest element by element: rows [nr_done, nr) of the register
  // part's columns, then every row of the columns after them.
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t j = c < nc_done ? nr_done : 0; j < nr; ++j) {
      std::memcpy(dst + static_cast<size_t>(c) * dst_ld + static_cast<size_t>(j) * elem,
                  src + static_cast<size_t>(j) * src_ld + static_cast<size_t>(c) * elem, elem);
    }
  }
}

void TransposeTileImpl(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc, size_t elem,
                       uint8_t* dst, size_t dst_ld, bool stream_ok) {
  if (nr <= 0 || nc <= 0) return;
#if HWY_TARGET <= HWY_AVX3
  if (elem == 2 || elem == 4) {
    WithElemStream(elem, dst, dst_ld, stream_ok, [&](auto e, auto stream) HWY_ATTR {
      TransposeBlocks512<decltype(e)::value, decltype(stream)::value>(src, src_ld, nr, nc, dst,
                                                                      dst_ld);
    });
    const int64_t block = static_cast<int64_t>(64 / elem);
    const int64_t nr_done = nr / block * block, nc_done = nc / block * block;
    // The rows under the blocks, then the columns right of them.
    TransposeRegion128(src + static_cast<size_t>(nr_done) * src_ld, src_ld, nr - nr_done, nc_done,
                       elem, dst + static_cast<size_t>(nr_done) * elem, dst_ld, stream_ok);
    TransposeRegion128(src + static_cast<size_t>(nc_done) * elem, src_ld, nr, nc - nc_done, elem,
                       dst + static_cast<size_t>(nc_done) * dst_ld, dst_ld, stream_ok);
    return;
  }
#endif
  TransposeRegion128(src, src_ld, nr, nc, elem, dst, dst_ld, stream_ok);
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
HWY_EXPORT(TransposeTileImpl);
void TransposeTile(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc, size_t elem,
                   uint8_t* dst, size_t dst_ld, bool stream) {
  HWY_DYNAMIC_DISPATCH(TransposeTileImpl)(src, src_ld, nr, nc, elem, dst, dst_ld, stream);
}
}  // namespace nibble
#endif
