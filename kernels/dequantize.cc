// DequantizeTile, ActiveTarget, HasGroupMapColumnTiles: the one dispatch
// table of the kernel family. Each layout family is its own translation
// unit (kernels/dequantize_families.h) with its own Highway dynamic
// dispatch; a Plan goes to its family by layout and code width (every
// `switch` over Layout lists all cases: -Wswitch names a missed one).
#include "kernels/dequantize.h"

#include <cctype>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/convert.h"
#include "kernels/dequantize_families.h"
#include "kernels/layouts.h"
#include "kernels/staged.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {
const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {

HWY_EXPORT(ActiveTargetName);

bool CpuIsIntel() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
#else
  return false;
#endif
}

namespace kernels_internal {
const bool kCpuHasAvx512Bf16 = [] {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();  // (before the library's other static initializers may run)
  return __builtin_cpu_supports("avx512bf16") != 0;
#else
  return false;
#endif
}();
}  // namespace kernels_internal

int AmdCpuFamily() {
#if defined(__x86_64__) || defined(__i386__)
  static const int family = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_is("amd") || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
    const unsigned base = (eax >> 8) & 0xF;
    return static_cast<int>(base == 0xF ? base + ((eax >> 20) & 0xFF) : base);
  }();
  return family;
#else
  return 0;
#endif
}

void DequantizeTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                    int64_t ld) {
  using namespace kernels_internal;  // NOLINT: the family entries
  if (plan.Staged()) {
    return DequantizeTileStaged(plan, r0, r1, c0, c1, out, ld, &DequantizeTile, &ConvertFloats);
  }
  if (plan.dot != nullptr && ColumnsDot(plan, r0, r1, c0, c1)) {
    *plan.dot->done = true;
    return;
  }
  switch (plan.layout) {
    case Layout::kDense:
      // 4-bit rows with a group map (compressed-tensors act-order): the
      // column family's word tiles where its target has them.
      if (CodeBits(plan.code) == 4 && plan.axis_group != nullptr && plan.inner == 1) {
        return DequantizeColumnFamily(plan, r0, r1, c0, c1, out, ld);
      }
      [[fallthrough]];
    case Layout::kPmxWords:
      if (CodeBits(plan.code) == 4) return DequantizeNibbleFamily(plan, r0, r1, c0, c1, out, ld);
      return DequantizeByteFamily(plan, r0, r1, c0, c1, out, ld);
    case Layout::kDenseHighNibbles:
      return DequantizeNibbleFamily(plan, r0, r1, c0, c1, out, ld);
    case Layout::kAwqWords:
    case Layout::kGptqColumns:
    case Layout::kAwqColumns:
      return DequantizeColumnFamily(plan, r0, r1, c0, c1, out, ld);
#define NIBBLE_BLOCK_CASE(D)                                        \
  case Layout::k##D:                                                \
    if (CodeBits(D::kCode) == 4) {                                  \
      return DequantizeBlock4Family(plan, r0, r1, c0, c1, out, ld); \
    }                                                               \
    return DequantizeBlock8Family(plan, r0, r1, c0, c1, out, ld);
      NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_CASE)
#undef NIBBLE_BLOCK_CASE
#define NIBBLE_DECODED_CASE(D) case Layout::k##D:
      NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
      return DequantizeDecodedFamily(plan, r0, r1, c0, c1, out, ld);
  }
}

bool DequantizeDot(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return !plan.Staged() && kernels_internal::ColumnsDot(plan, r0, r1, c0, c1);
}

const char* ActiveTarget() { return HWY_DYNAMIC_DISPATCH(ActiveTargetName)(); }

namespace {
// The targets compiled in that this CPU runs, best first (Highway's bits:
// a lower bit is a better target), as SupportedTargets() reports them
// without SelectTarget's mock.
std::vector<int64_t> CpuTargets() {
  static const std::vector<int64_t> targets = [] {
    // (Before any SelectTarget call: the mock is not set yet.)
    std::vector<int64_t> t;
    for (int64_t bits = hwy::SupportedTargets() & HWY_TARGETS; bits != 0; bits &= bits - 1) {
      t.push_back(bits & -bits);
    }
    return t;
  }();
  return targets;
}
}  // namespace

std::vector<std::string> AvailableTargets() {
  std::vector<std::string> names;
  for (const int64_t t : CpuTargets()) names.emplace_back(hwy::TargetName(t));
  return names;
}

bool SelectTarget(const std::string& name) {
  const std::vector<int64_t> targets = CpuTargets();  // (first: before any mock)
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);
    return true;
  }
  auto upper = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  };
  for (const int64_t t : targets) {
    if (upper(hwy::TargetName(t)) == upper(name)) {
      hwy::SetSupportedTargetsForTest(t);
      return true;
    }
  }
  return false;
}

bool HasGroupMapColumnTiles() { return kernels_internal::GroupMapColumnTilesActive(); }

}  // namespace nibble
#endif  // HWY_ONCE
