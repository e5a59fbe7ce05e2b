// Dequantizer::RunTile's contract for the embedding path: single-threaded
// and allocation-free (a runtime calls it per tile inside its own loops)
// but for the thread's kernel scratch, grown once.
// This executable replaces the global operator new / delete with counting
// versions, so it is kept apart from the other suites.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/synthetic_weights.h"
#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/ggml.h"
#include "checkpoint/methods/gptq.h"
#include "doctest/doctest.h"
#include "hwy/targets.h"
#include "kernels/dequantize.h"
#include "kernels/scratch.h"
#include "op/dequantizer.h"
#include "op/quantize.h"
#include "testing/quantize_checkpoint.h"

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

struct TargetGuard {
  ~TargetGuard() { hwy::SetSupportedTargetsForTest(0); }
};

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
  TargetGuard guard;
  constexpr int64_t kN = 256, kK = 1024, kG = 128;
  const std::vector<float> w = MakeLlmLikeWeight(kN, kK, 5);
  std::vector<int32_t> g_idx(kK);
  {
    std::vector<int32_t> order(kK);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(3));
    for (int64_t i = 0; i < kK; ++i)
      g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / kG);
  }
  auto gptq = QuantizeGptq(w.data(), kN, kK, kG, /*sym=*/false, /*v2=*/false);
  auto gptq_act = QuantizeGptq(w.data(), kN, kK, kG, false, false, g_idx);
  auto awq = QuantizeAwq(w.data(), kN, kK, kG);
  auto q4k = QuantizeGgml(12, w.data(), kN, kK);
  REQUIRE(gptq.ok());
  REQUIRE(gptq_act.ok());
  REQUIRE(awq.ok());
  REQUIRE(q4k.ok());
  hwy::SetSupportedTargetsForTest(0);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string target_name = hwy::TargetName(target);
    for (DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      CAPTURE(target_name);
      CAPTURE(static_cast<int>(out));
      GptqOptions o;
      o.group_size = kG;
      {
        const TensorView z = gptq->qzeros.view();
        auto d = PrepareGptq(o, gptq->qweight.view(), &z, gptq->scales.view(), nullptr, out, "g");
        REQUIRE(d.ok());
        CHECK(TileAllocations(*d) == 0);
      }
      {
        const TensorView z = gptq_act->qzeros.view(), g = gptq_act->g_idx.view();
        auto d =
            PrepareGptq(o, gptq_act->qweight.view(), &z, gptq_act->scales.view(), &g, out, "g_act");
        REQUIRE(d.ok());
        CHECK(TileAllocations(*d) == 0);
      }
      {
        const TensorView z = awq->qzeros.view();
        auto d = PrepareAwq(kG, awq->qweight.view(), &z, awq->scales.view(), out, "a");
        REQUIRE(d.ok());
        CHECK(TileAllocations(*d) == 0);
      }
      {
        auto d = PrepareGgml(12, {kK, kN}, q4k->data(), q4k->size(), out, "q4_k");
        REQUIRE(d.ok());
        CHECK(TileAllocations(*d) == 0);
      }
    }
  }
}

}  // namespace
}  // namespace nibble
