// The index grids of kernels/ggml_grids.h: each ggml grid entry with its
// bytes replaced by their positions in the grid's value set, computed from
// the grids (kernels/ggml_grids.cc) during static initialization.
#include <cstddef>
#include <cstdint>

#include "kernels/ggml_grids.h"

namespace nibble {
namespace {

// grid with each byte b replaced by the position of int8(b) in `values`
// (a byte outside the set would become 0xFF; tests/kernel_test.cc checks
// that every byte is in its set).
template <class T, size_t N>
struct IndexGrid {
  T v[N];
  IndexGrid(const T (&grid)[N], const GgmlGridValues& values) : v() {
    for (size_t i = 0; i < N; ++i) {
      T entry = 0;
      for (size_t j = 0; j < sizeof(T); ++j) {
        const auto byte = static_cast<int8_t>(static_cast<uint8_t>(grid[i] >> (8 * j)));
        T position = 0xFF;
        for (int32_t k = 0; k < values.n; ++k) {
          if (values.v[k] == byte) position = static_cast<T>(k);
        }
        entry = static_cast<T>(entry | (position << (8 * j)));
      }
      v[i] = entry;
    }
  }
};

const IndexGrid<uint64_t, 256> kIq2xxs(kGgmlIq2xxsGrid, kGgmlIq2GridValues);
const IndexGrid<uint64_t, 512> kIq2xs(kGgmlIq2xsGrid, kGgmlIq2GridValues);
const IndexGrid<uint64_t, 1024> kIq2s(kGgmlIq2sGrid, kGgmlIq2GridValues);
const IndexGrid<uint32_t, 256> kIq3xxs(kGgmlIq3xxsGrid, kGgmlIq3xxsGridValues);
const IndexGrid<uint32_t, 512> kIq3s(kGgmlIq3sGrid, kGgmlIq3sGridValues);
const IndexGrid<uint64_t, 2048> kIq1s(kGgmlIq1sGrid, kGgmlIq1GridValues);

// An index grid's positions, `bits` each, packed into 16 bits an entry
// (entries of sizeof(T) positions; sizeof(T) * bits <= 16).
template <class T, size_t N>
struct PackedIndexGrid {
  alignas(64) uint16_t v[N];
  PackedIndexGrid(const IndexGrid<T, N>& grid, unsigned bits) : v() {
    for (size_t i = 0; i < N; ++i) {
      unsigned packed = 0;
      for (size_t j = 0; j < sizeof(T); ++j) {
        packed |= static_cast<unsigned>((grid.v[i] >> (8 * j)) & 0xFF) << (bits * j);
      }
      v[i] = static_cast<uint16_t>(packed);
    }
  }
};

const PackedIndexGrid<uint32_t, 256> kIq3xxsPacked(kIq3xxs, 3);
const PackedIndexGrid<uint32_t, 512> kIq3sPacked(kIq3s, 3);

// A packed index grid as two byte planes: the N entries' low bytes, then
// their high bytes.
template <size_t N>
struct BytePlanes {
  alignas(64) uint8_t v[2 * N];
  template <class T>
  explicit BytePlanes(const PackedIndexGrid<T, N>& packed) : v() {
    for (size_t i = 0; i < N; ++i) {
      v[i] = static_cast<uint8_t>(packed.v[i]);
      v[N + i] = static_cast<uint8_t>(packed.v[i] >> 8);
    }
  }
};

const BytePlanes<256> kIq3xxsPlanes(kIq3xxsPacked);
const BytePlanes<512> kIq3sPlanes(kIq3sPacked);

// An index grid of sizeof(T) positions an entry as byte pairs: entry i's
// 2 sizeof(T) bytes, bytes 2 j and 2 j + 1 the pair (2 p, 2 p + 1) of
// position j's p.
template <class T, size_t N>
struct PairGrid {
  static constexpr size_t kBytes = 2 * sizeof(T);
  alignas(64) uint8_t v[kBytes * N];
  explicit PairGrid(const IndexGrid<T, N>& grid) : v() {
    for (size_t i = 0; i < N; ++i) {
      for (size_t j = 0; j < sizeof(T); ++j) {
        const auto p = static_cast<uint8_t>(grid.v[i] >> (8 * j));
        v[kBytes * i + 2 * j] = static_cast<uint8_t>(2 * p);
        v[kBytes * i + 2 * j + 1] = static_cast<uint8_t>(2 * p + 1);
      }
    }
  }
};

const PairGrid<uint64_t, 256> kIq2xxsPairs(kIq2xxs);
const PairGrid<uint64_t, 512> kIq2xsPairs(kIq2xs);
const PairGrid<uint64_t, 1024> kIq2sPairs(kIq2s);
const PairGrid<uint32_t, 256> kIq3xxsPairs(kIq3xxs);
const PairGrid<uint32_t, 512> kIq3sPairs(kIq3s);
const PairGrid<uint64_t, 2048> kIq1sPairs(kIq1s);

}  // namespace

const uint64_t* const kGgmlIq2xxsIndexGrid = kIq2xxs.v;
const uint64_t* const kGgmlIq2xsIndexGrid = kIq2xs.v;
const uint64_t* const kGgmlIq2sIndexGrid = kIq2s.v;
const uint32_t* const kGgmlIq3xxsIndexGrid = kIq3xxs.v;
const uint32_t* const kGgmlIq3sIndexGrid = kIq3s.v;
const uint64_t* const kGgmlIq1sIndexGrid = kIq1s.v;
const uint16_t* const kGgmlIq3xxsPackedIndexGrid = kIq3xxsPacked.v;
const uint16_t* const kGgmlIq3sPackedIndexGrid = kIq3sPacked.v;
const uint8_t* const kGgmlIq3xxsPackedIndexPlanes = kIq3xxsPlanes.v;
const uint8_t* const kGgmlIq3sPackedIndexPlanes = kIq3sPlanes.v;
const uint8_t* const kGgmlIq2xxsPairGrid = kIq2xxsPairs.v;
const uint8_t* const kGgmlIq2xsPairGrid = kIq2xsPairs.v;
const uint8_t* const kGgmlIq2sPairGrid = kIq2sPairs.v;
const uint8_t* const kGgmlIq3xxsPairGrid = kIq3xxsPairs.v;
const uint8_t* const kGgmlIq3sPairGrid = kIq3sPairs.v;
const uint8_t* const kGgmlIq1sPairGrid = kIq1sPairs.v;

}  // namespace nibble
