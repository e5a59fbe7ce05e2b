// The exact texts of the errors a user sees for bad MatMulNBits nodes and
// bad GPTQ / AWQ / GGUF tensors: each names the operator or tensor, the
// attribute or input, and what was wrong, so a message cannot silently turn
// vague.
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/ggml.h"
#include "checkpoint/methods/gptq.h"
#include "doctest/doctest.h"
#include "op/matmulnbits.h"

namespace nibble {
namespace {

template <class T>
std::string ErrorOf(const StatusOr<T>& s) {
  return s.ok() ? std::string("(ok)") : s.status().message();
}

TEST_CASE("MatMulNBits errors: exact texts") {
  std::vector<uint8_t> b(8 * 2 * 16), sc(8 * 2 * 4);
  MatMulNBitsAttributes a;
  a.K = 64;
  a.N = 8;
  a.block_size = 32;
  const TensorView good_b{DType::kUInt8, {8, 2, 16}, b.data(), b.size()};
  const TensorView good_s{DType::kFloat32, {8, 2}, sc.data(), sc.size()};
  const std::string who = "com.microsoft::MatMulNBits 'fc': ";
  auto run = [&](const MatMulNBitsAttributes& at, const TensorView& bv, const TensorView& sv) {
    return ErrorOf(PrepareMatMulNBits(at, bv, sv, nullptr, "fc"));
  };
  CHECK(run(a, good_b, good_s) == "(ok)");
  MatMulNBitsAttributes x = a;
  x.bits = 3;
  CHECK(run(x, good_b, good_s) == who + "attribute bits must be 4 or 8 (got 3)");
  x = a;
  x.weight_prepacked = 1;
  CHECK(run(x, good_b, good_s) ==
        who + "attribute weight_prepacked = 1 (a device-specific layout) is not supported");
  x = a;
  x.K = 0;
  CHECK(run(x, good_b, good_s) == who + "attributes K and N must be positive (got K 0, N 8)");
  x = a;
  x.block_size = 48;
  CHECK(run(x, good_b, good_s) ==
        who + "attribute block_size must be a power of two >= 16 (got 48)");
  x = a;
  x.N = (int64_t{1} << 40) + 1;
  CHECK(run(x, good_b, good_s) == who + "K 64 or N 1099511627777 exceeds 2^40");
  const TensorView int8_b{DType::kInt8, {8, 2, 16}, b.data(), b.size()};
  CHECK(run(a, int8_b, good_s) == who + "input B must be uint8 (got int8)");
  const TensorView short_b{DType::kUInt8, {8, 2, 8}, b.data(), b.size()};
  CHECK(run(a, short_b, good_s) ==
        who + "input B shape (8,2,8) does not match K 64, N 8, bits 4, block_size 32 (expected " +
            "(8,2,16))");
  const TensorView int_s{DType::kInt32, {8, 2}, sc.data(), sc.size()};
  CHECK(run(a, good_b, int_s) ==
        who + "input scales must be float32, float16 or bfloat16 (got int32)");
  const TensorView bad_s{DType::kFloat32, {2, 8}, sc.data(), sc.size()};
  CHECK(run(a, good_b, bad_s) == who + "input scales shape (2,8) must be (8,2) (or (16))");
}

TEST_CASE("GGUF tensor errors: exact texts") {
  std::vector<uint8_t> data(18 * 4);
  auto prep = [&](uint32_t type, std::vector<int64_t> ne, size_t bytes, DType out) {
    return ErrorOf(PrepareGgml(type, ne, data.data(), bytes, out, "blk.0.w"));
  };
  CHECK(prep(2, {32, 4}, 72, DType::kFloat32) == "(ok)");
  CHECK(prep(2, {48, 4}, 72, DType::kFloat32) ==
        "GGUF tensor 'blk.0.w': ne[0] = 48 is not a multiple of 32");
  CHECK(prep(2, {32, 4}, 70, DType::kFloat32) ==
        "GGUF tensor 'blk.0.w': has 70 bytes, expected 72");
  CHECK(prep(2, {}, 0, DType::kFloat32) == "GGUF tensor 'blk.0.w': needs 1 to 4 dims");
  CHECK(prep(2, {32, 4}, 72, DType::kInt8).rfind("GGUF tensor 'blk.0.w': output type", 0) == 0);
}

TEST_CASE("GPTQ / AWQ tensor errors: exact texts") {
  // K = 64 (8 word rows), N = 16, G = 32: qweight [8, 16], scales [2, 16],
  // qzeros [2, 2].
  std::vector<uint8_t> qw(8 * 16 * 4), sc(2 * 16 * 4), qz(2 * 2 * 4), gi(64 * 4);
  const TensorView qweight{DType::kInt32, {8, 16}, qw.data(), qw.size()};
  const TensorView scales{DType::kFloat16, {2, 16}, sc.data(), sc.size() / 2};
  const TensorView qzeros{DType::kInt32, {2, 2}, qz.data(), qz.size()};
  GptqOptions o;
  o.group_size = 32;
  auto gptq = [&](const TensorView& w, const TensorView* z, const TensorView& s,
                  const TensorView* g) {
    return ErrorOf(PrepareGptq(o, w, z, s, g, DType::kUndefined, "q_proj"));
  };
  CHECK(gptq(qweight, &qzeros, scales, nullptr) == "(ok)");
  const TensorView f_qweight{DType::kFloat32, {8, 16}, qw.data(), qw.size()};
  CHECK(gptq(f_qweight, &qzeros, scales, nullptr) ==
        "GPTQ 'q_proj': qweight must be int32 (got float32)");
  const TensorView bad_zeros{DType::kInt32, {2, 3}, qz.data(), qz.size()};
  CHECK(gptq(qweight, &bad_zeros, scales, nullptr) ==
        "GPTQ 'q_proj': qzeros shape (2,3), expected (2,2)");
  const TensorView bad_scales{DType::kFloat16, {2, 8}, sc.data(), sc.size()};
  CHECK(gptq(qweight, &qzeros, bad_scales, nullptr) ==
        "GPTQ 'q_proj': scales shape (2,8) does not match qweight (8,16) (expected [groups, 16])");
  // 9 groups: no group size G gives ceil(64 / G) == 9 (7 groups would: G = 10).
  std::vector<uint8_t> big(9 * 16 * 2);
  const TensorView nine{DType::kFloat16, {9, 16}, big.data(), big.size()};
  CHECK(gptq(qweight, nullptr, nine, nullptr) ==
        "GPTQ 'q_proj': scales have 9 groups, which no group size over K = 64 input channels "
        "gives (configured group_size 32)");
  // g_idx pointing outside the groups.
  gi[4 * 5] = 9;
  const TensorView g_idx{DType::kInt32, {64}, gi.data(), gi.size()};
  CHECK(gptq(qweight, &qzeros, scales, &g_idx) ==
        "GPTQ 'q_proj': g_idx[5] = 9 is outside the 2 groups");
  // AWQ: qweight [K, N / 8] = [64, 2].
  std::vector<uint8_t> aw(64 * 2 * 4);
  const TensorView awq_w{DType::kInt32, {64, 2}, aw.data(), aw.size()};
  CHECK(ErrorOf(PrepareAwq(32, awq_w, &qzeros, scales, DType::kUndefined, "k_proj")) == "(ok)");
  CHECK(ErrorOf(PrepareAwq(32, awq_w, &bad_zeros, scales, DType::kUndefined, "k_proj")) ==
        "AWQ 'k_proj': qzeros shape (2,3), expected (2,2)");
  CHECK(ErrorOf(PrepareAwq(32, awq_w, &qzeros, scales, DType::kInt8, "k_proj"))
            .rfind("AWQ 'k_proj': output type", 0) == 0);
}

}  // namespace
}  // namespace nibble
