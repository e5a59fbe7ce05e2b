// Dequantizer::RunTile's contract for the embedding path: single-threaded
// and allocation-free (a runtime calls it per tile inside its own loops)
// but for the thread's kernel scratch, grown once.
// This executable replaces the global operator new / delete with counting
// versions, so it is kept apart from the other suites.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/dequantize.h"
#include "kernels/scratch.h"
#include "op/dequantizer.h"
#include "op/quantize.h"
#include "tests/sample_layers.h"

namespace {

// Allocations made by this thread while `counting` is set.
thread_local bool counting = false;
thread_local long allocations = 0;

void* Allocate(std::size_t n) {
  if (counting) ++allocations;
  return std::malloc(n == 0 ? 1 : n);
}

}  // namespace

void* operator new(std::size_t n) {
  if (void* p = Allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = Allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace nibble {
namespace {

// Allocations made by RunTile over a few tile shapes of `d` (whole view,
// whole 16- and 128-row bands, odd offsets), every output byte written.
// The one allocation RunTile may make is the calling thread's kernel
// scratch (kernels/scratch.h: grow-only, kept for the thread's next call;
// AVX2's GPTQ / AWQ 16-bit stages): grown here beyond any kernel's need
// first, so that every allocation counted is one the contract forbids.
long TileAllocations(const Dequantizer& d) {
  REQUIRE(KernelScratch(size_t{1} << 20) != nullptr);
  const int64_t rows = d.rows(), cols = d.cols();
  const int64_t bytes = DTypeBits(d.output().dtype) / 8;
  std::vector<unsigned char> out(static_cast<size_t>(rows * cols * bytes));
  const int64_t shapes[][4] = {{0, rows, 0, cols},
                               {0, std::min<int64_t>(rows, 16), 0, cols},
                               {0, std::min<int64_t>(rows, 128), 0, cols},
                               {3, std::min<int64_t>(rows, 37), 5, std::min<int64_t>(cols, 300)},
                               {rows / 2, rows, cols / 2, cols}};
  long n = 0;
  for (const auto& s : shapes) {
    counting = true;
    allocations = 0;
    const Status st = d.RunTile(s[0], s[1], s[2], s[3], out.data(), s[3] - s[2]);
    n += allocations;
    counting = false;
    CHECK(st.ok());
  }
  return n;
}

TEST_CASE("RunTile allocates nothing: GPTQ (with and without act-order), AWQ, GGUF, PMX") {
  const SampleLayers layers(5, 3);
  layers.ForEachTargetAndOutput([&](const std::vector<Dequantizer>& ds, DType) {
    for (size_t i = 0; i < ds.size(); ++i) {
      CAPTURE(i);  // GPTQ, act-order GPTQ, AWQ, Q4_K
      CHECK(TileAllocations(ds[i]) == 0);
    }
  });
}

}  // namespace
}  // namespace nibble
