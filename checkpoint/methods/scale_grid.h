// The layout the float-quantized methods share (HF fp8, compressed-tensors
// float-quantized and nvfp4-pack-quantized, gpt-oss mxfp4): a weight
// [N, K] of float codes (one e4m3 / e5m2 per byte, or two e2m1 per byte,
// low nibble first) and a grid of float32 scales, one per block of
// block_rows x block_cols elements (edge blocks partial). Its lowering,
// for those methods only.
#ifndef NIBBLE_CHECKPOINT_METHODS_SCALE_GRID_H_
#define NIBBLE_CHECKPOINT_METHODS_SCALE_GRID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "kernels/plan.h"
#include "op/dequantizer.h"

namespace nibble {

struct ScaleGridWeight {
  const TensorView* codes = nullptr;  // [N, K] bytes, or [N, K / 2] (e2m1)
  CodeKind code = CodeKind::kF8E4M3FN;
  int64_t N = 0, K = 0;
  // One scale per block; block_rows = N and block_cols = K: per tensor.
  int64_t block_rows = 1, block_cols = 1;
  // The grid [ceil(N / block_rows), ceil(K / block_cols)], row-major, as
  // the producer's float32 scale (the method widened or computed it).
  ParamVector<float> grid;
  // The output type and the producer's product type (Plan::product).
  OutType out = OutType::kBF16;
  OutType product = OutType::kF32;
};

// How a scale tensor of shape `scale` covers a weight [N, K]: one value
// (per tensor), [N] / [N, 1] (per row), [N, ceil(K / group)] (groups along
// K, group > 0) or [ceil(N / bn), ceil(K / bk)] (block = {bn, bk}, when
// given). Sets *block_rows / *block_cols and *what ("per tensor", "per
// channel", "groups of 32", "blocks 128 x 128"); an error names
// `scale_name` and what would have fit.
Status MatchScaleGrid(int64_t N, int64_t K, const Shape& scale, const std::vector<int64_t>& block,
                      int64_t group, const std::string& scale_name, int64_t* block_rows,
                      int64_t* block_cols, std::string* what);

// The producer's scale tensor `scale` (float32, float16, bfloat16, e4m3 or
// e8m0; every one widens exactly) as a float32 grid in *grid (a copy:
// ScaleGridWeight owns its grid). Errors name `what`.
Status ScaleGridFrom(const TensorView& scale, const std::string& what, ParamVector<float>* grid);

// Value of (n, k): decode(code) * grid[n / block_rows][k / block_cols]
// in float32 (Plan). Checks the codes' size against N x K and the grid's
// against the blocks; errors start with `who`. The Dequantizer's output
// is [N, K] (the caller may transpose it); it reads `codes` in place.
StatusOr<Dequantizer> PrepareScaleGrid(ScaleGridWeight w, const std::string& name,
                                       const std::string& who);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_SCALE_GRID_H_
