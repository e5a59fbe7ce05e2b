#include "checkpoint/methods/scale_grid.h"

#include <utility>

#include "op/lowering.h"

namespace nibble {

Status MatchScaleGrid(int64_t N, int64_t K, const Shape& scale, const std::vector<int64_t>& block,
                      int64_t group, const std::string& scale_name, int64_t* block_rows,
                      int64_t* block_cols, std::string* what) {
  constexpr int64_t kMaxDim = int64_t{1} << 40;
  if (N <= 0 || K <= 0 || N > kMaxDim || K > kMaxDim) {
    return Status::Error("the weight shape [" + std::to_string(N) + ", " + std::to_string(K) +
                         "] is invalid for '" + scale_name + "'");
  }
  auto count = CheckedNumElements(scale, "'" + scale_name + "'");
  if (!count.ok()) return count.status();
  const int64_t elements = *count;
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  if (elements == 1 && scale.size() <= 2) {
    *block_rows = N;
    *block_cols = K;
    *what = "per tensor";
  } else if ((scale == Shape{N} || scale == Shape{N, 1}) && N > 1) {
    *block_rows = 1;
    *block_cols = K;
    *what = "per channel";
  } else if (group > 0 && group <= kMaxDim && scale == Shape{N, cdiv(K, group)}) {
    *block_rows = 1;
    *block_cols = group;
    *what = "groups of " + std::to_string(group);
  } else if (block.size() == 2 && block[0] > 0 && block[1] > 0 && block[0] <= kMaxDim &&
             block[1] <= kMaxDim && scale == Shape{cdiv(N, block[0]), cdiv(K, block[1])}) {
    *block_rows = block[0];
    *block_cols = block[1];
    *what = "blocks " + std::to_string(block[0]) + " x " + std::to_string(block[1]);
  } else {
    std::string fits = "one value, [" + std::to_string(N) + "] or [" + std::to_string(N) + ", 1]";
    if (group > 0 && group <= kMaxDim) {
      fits += ", [" + std::to_string(N) + ", " + std::to_string(cdiv(K, group)) + "] (groups of " +
              std::to_string(group) + ")";
    }
    if (block.size() == 2 && block[0] > 0 && block[1] > 0 && block[0] <= kMaxDim &&
        block[1] <= kMaxDim) {
      fits += ", [" + std::to_string(cdiv(N, block[0])) + ", " + std::to_string(cdiv(K, block[1])) +
              "] (blocks " + std::to_string(block[0]) + " x " + std::to_string(block[1]) + ")";
    } else {
      fits += " (no block size is stated)";
    }
    return Status::Error("'" + scale_name + "' has shape " + ShapeToString(scale) + "; a weight [" +
                         std::to_string(N) + ", " + std::to_string(K) + "] takes " + fits);
  }
  return Status::Ok();
}

Status ScaleGridFrom(const TensorView& scale, const std::string& what, ParamVector<float>* grid) {
  const float* s = nullptr;
  NIBBLE_RETURN_IF_ERROR(internal::WidenScale(scale, what, grid, &s, nullptr));
  if (s != grid->data()) {  // aligned float32, read in place: copy it
    auto n = CheckedNumElements(scale.shape, what);
    if (!n.ok()) return n.status();
    grid->assign(s, s + *n);
  }
  return Status::Ok();
}

StatusOr<Dequantizer> PrepareScaleGrid(ScaleGridWeight w, const std::string& name,
                                       const std::string& who) try {
  const int64_t N = w.N, K = w.K;
  if (w.codes == nullptr || N <= 0 || K <= 0 || N > (int64_t{1} << 40) || K > (int64_t{1} << 40) ||
      N > (int64_t{1} << 62) / K) {
    return Status::Error(who + ": the weight shape [" + std::to_string(N) + ", " +
                         std::to_string(K) + "] is invalid");
  }
  if (w.block_rows <= 0 || w.block_cols <= 0) {
    return Status::Error(who + ": the block size [" + std::to_string(w.block_rows) + ", " +
                         std::to_string(w.block_cols) + "] is invalid");
  }
  const bool nibbles = CodeBits(w.code) == 4;
  if (nibbles && K % 2 != 0) {
    return Status::Error(who + ": K = " + std::to_string(K) +
                         " is odd (two 4-bit codes per byte along a row)");
  }
  const TensorView& q = *w.codes;
  auto qn = internal::CheckView(q, "the codes");
  if (!qn.ok()) return qn.status().WithPrefix(who);
  const uint64_t want = static_cast<uint64_t>(N) * static_cast<uint64_t>(nibbles ? K / 2 : K);
  if (q.size_bytes != want || DTypeBits(q.dtype) != 8) {
    return Status::Error(who + ": the codes are " + DTypeName(q.dtype) + " " +
                         ShapeToString(q.shape) + " (" + std::to_string(q.size_bytes) +
                         " bytes); a weight [" + std::to_string(N) + ", " + std::to_string(K) +
                         "] needs " + std::to_string(want) + " bytes of " +
                         (nibbles ? "packed 4-bit codes" : "8-bit codes"));
  }
  const int64_t gr = (N + w.block_rows - 1) / w.block_rows;
  const int64_t gc = (K + w.block_cols - 1) / w.block_cols;
  if (static_cast<int64_t>(w.grid.size()) != gr * gc) {
    return Status::Error(who + ": " + std::to_string(w.grid.size()) + " scales for blocks of [" +
                         std::to_string(w.block_rows) + ", " + std::to_string(w.block_cols) +
                         "] over [" + std::to_string(N) + ", " + std::to_string(K) + "] (" +
                         std::to_string(gr) + " x " + std::to_string(gc) + " expected)");
  }
  Plan plan;
  Dequantizer::Storage st;
  plan.layout = Layout::kDense;
  plan.code = w.code;
  plan.codes = static_cast<const uint8_t*>(q.data);
  plan.out = w.out;
  plan.product = w.product;
  plan.outer = N;
  plan.axis = K;
  plan.inner = 1;
  plan.group = w.block_cols;
  plan.s_axis = 1;
  if (gr == 1) {
    plan.s_outer = 0;  // one row of blocks: every row shares it
    st.scale = std::move(w.grid);
  } else if (w.block_rows == 1) {
    plan.s_outer = gc;
    st.scale = std::move(w.grid);
  } else {
    // Blocks of several rows: the Plan indexes scales by row, so each row
    // gets its block row's scales (ceil(K / block_cols) floats per row).
    plan.s_outer = gc;
    st.scale.resize(static_cast<size_t>(N * gc));
    for (int64_t n = 0; n < N; ++n) {
      const float* src = w.grid.data() + (n / w.block_rows) * gc;
      std::copy(src, src + gc, st.scale.data() + n * gc);
    }
  }
  if (st.scale.empty()) st.scale.resize(1);
  plan.scale = st.scale.data();
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(w.out), {N, K}}, name);
  d.set_inputs({Dequantizer::InputOf("weight", w.codes)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareScaleGrid");
}

}  // namespace nibble
