// The fast kernel entry: Highway dynamic dispatch over the compiled targets.
#ifndef NIBBLE_KERNELS_DEQUANTIZE_H_
#define NIBBLE_KERNELS_DEQUANTIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/plan.h"

namespace nibble {

// Writes rows [r0, r1) x cols [c0, c1) of the plan's 2-D view into `out`
// (element (r, c) at out[(r - r0) * ld + (c - c0)], plan.out's type).
// Bit-identical to DequantizeTileReference. Single-threaded, no allocation,
// no validation. Preconditions: the Plan came from op/ (valid pointers and
// sizes), 0 <= r0 <= r1 <= rows, 0 <= c0 <= c1 <= cols, ld >= c1 - c0.
void DequantizeTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                    int64_t ld);

// Plan::dot (plan.dot set) over rows [r0, r1) x cols [c0, c1) without a
// tile where a kernel decodes it by columns (1-8 rows of X; GPTQ / AWQ
// columns, compressed-tensors act-order rows, dense 4-bit [K, N] with
// Plan::Dot::columns; AVX-512 and AVX2): adds to dot->sums as Plan::dot says and
// returns true (*dot->done untouched); else returns false having done
// nothing — the caller then writes tiles its own way. Same preconditions.
bool DequantizeDot(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

// Rows [0, n) of the view's tile rows [r0, r0 + nr) x columns [c0, c0 +
// nc) written transposed to `dst` (element (r, c) at dst[((c - c0) * ld +
// r - r0) * out bytes]; non-temporal stores with `stream` where every
// 64-byte run starts on a line), bit-identical to DequantizeTileReference,
// where every scale of those rows is a power of two 2^k (gpt-oss MXFP4's
// e8m0 scales): each value's bits are then its code's value in the output
// type with k added to the exponent, no arithmetic rounded. Returns n,
// the rows written: nr rounded down to the kernel's block of rows (AVX-512:
// 16 for float32 outputs, 32 for 16-bit; AVX2: 16), fewer where a scale of the rows after
// n (blocks of 128) is not 2^k with every nonzero value times 2^k normal
// in the output type, 0 on targets without AVX-512 or AVX2, on AVX2 for
// float32 outputs, and for other plans;
// the caller writes the rest its own way. Preconditions: plan.layout kDense with
// 4-bit codes, inner 1, no group map, not Staged(); axis, c0, nc
// multiples of 8; c0 a multiple of plan.group; `scratch` holds 2 *
// (ceil(nc / group) + 1) * min(nr, 128) int32_t. Single-threaded, no allocation.
int64_t DequantizeTransposedPow2(const Plan& plan, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                                 int32_t* scratch, uint8_t* dst, int64_t ld, bool stream);

// Whether this CPU is Intel's (false on any other vendor or architecture):
// a few tile choices measured opposite ways on an Intel Xeon and an AMD
// EPYC and follow the vendor (PreferGptqBlocks, the matmul's decode tiles).
bool CpuIsIntel();

// This CPU's x86 family (CPUID leaf 1, the extended family added) when it
// is AMD's, else 0: 0x19 for Zen 3 and Zen 4, 0x1A for Zen 5. For tile
// choices that differ between AMD generations (PreferGptqBlocks,
// PreferLoads).
int AmdCpuFamily();

// Whether scattered fields (Plan::Fetch) are fetched by scalar loads
// rather than gathers here: on AMD from family 19h, where the loads were
// measured faster (Zen 4: IQ2_XS / IQ2_S / IQ1_S / IQ1_M 1.07-1.28x in
// cache, float16 block headers 1.05-1.09x; Zen 5: IQ2_XS / IQ2_S 1.1-1.2x);
// gathers elsewhere (the IQ2 loads ran 0.74-0.85x on an Intel Xeon).
inline bool PreferLoads() { return AmdCpuFamily() >= 0x19; }
// Whether `plan` fetches its scattered fields by loads: plan.fetch where it
// forces a way, else PreferLoads().
inline bool FetchByLoads(const Plan& plan) {
  return plan.fetch == Plan::Fetch::kAuto ? PreferLoads() : plan.fetch == Plan::Fetch::kLoads;
}

namespace kernels_internal {
// Whether this CPU has AVX512_BF16 (vcvtne2ps2bf16), set during static
// initialisation (kernels/dequantize.cc): a plain load in kernel loops
// (CpuHasAvx512Bf16, kernels/x86_avx512-inl.h). Read before it is set
// (from another static initializer) it is false: the exact integer-lane
// rounding.
extern const bool kCpuHasAvx512Bf16;
}  // namespace kernels_internal

// Name of the target the dispatcher selects now (e.g. "AVX3", "SSE4").
const char* ActiveTarget();

// Names of the targets compiled in that this CPU runs, best first (e.g.
// "AVX3_DL", "AVX3", "AVX2", "SSE4", "SCALAR"), whatever
// SelectTarget chose.
std::vector<std::string> AvailableTargets();

// From now on the dispatcher selects the target named `name` (one of
// AvailableTargets, any case) for every kernel, or the best one again
// with "". False, and nothing changed, for a name not in the list. For
// measuring one target against another on one machine (`nibble bench
// --target`); every target gives the same bits. Not to be called while
// kernels run on other threads.
bool SelectTarget(const std::string& name);

// True if the target the dispatcher selects now has vector tiles for
// Layout::kGptqColumns with a group map along the row (plan.axis_group,
// inner == 1); elsewhere such a plan runs the scalar reference (exact,
// about 10x slower), so op/ lowers act-order GPTQ differently there.
bool HasGroupMapColumnTiles();

}  // namespace nibble

#endif  // NIBBLE_KERNELS_DEQUANTIZE_H_
