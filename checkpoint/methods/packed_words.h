// The int32-packed Linear layouts GPTQ and AWQ share (checkpoint/methods/
// gptq.h, awq.h): a 2-D qweight of 32 / bits fields per word, scales
// [groups, N], zero points packed 32 / bits per word along N. Shape checks
// and the zero points' decoding, for their lowerings only.
#ifndef NIBBLE_CHECKPOINT_METHODS_PACKED_WORDS_H_
#define NIBBLE_CHECKPOINT_METHODS_PACKED_WORDS_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "kernels/plan.h"
#include "op/dequantizer.h"

namespace nibble {

// How packed zero points are decoded from their b-bit fields (32 / b per
// int32 word along N). GPTQ v1 checkpoints store z - 1; each producer's
// own loader undoes that differently, and nibble decodes as the producer
// does:
enum class GptqZeros {
  // gptq_v2 and AWQ: the fields hold z.
  kStored,
  // v1, AutoGPTQ's default loaders (and any producer not named): field + 1
  // modulo 2^bits — qlinear_cuda_old (its choice for desc_act=False),
  // exllama and exllamav2 compute `(zeros + 1) & (2^bits - 1)`, so a
  // stored 15 is z = 0 for 4 bits.
  kPlusOneWrap,
  // v1, AutoGPTQ's qlinear_cuda torch path: field + 1, no wrap (a stored
  // 15 is z = 16 for 4 bits; 255 is 256 for 8 bits).
  kPlusOne,
  // v1, GPTQModel: the word plus 0x11111111 (4 bits; 8 bits 0x01010101,
  // 2 bits 0x55555555) modulo 2^32, carries included, then the fields (the
  // inverse of its v2 -> v1 word subtraction).
  kWordCarry,
};
const char* GptqZerosName(GptqZeros z);

namespace internal {

// The shapes GPTQ and AWQ share: a 2-D int32 qweight holding K x N codes
// with `k_per_word` input channels (GPTQ 32 / bits) or `n_per_word`
// outputs (AWQ 8) per word, scales [groups, N]; the group size (the
// configured one, or — per-module overrides — the one the shapes imply)
// and the output type.
struct LinearShape {
  int64_t K = 0, N = 0, groups = 0, G = 0;
  OutType out = OutType::kF32;
};
StatusOr<LinearShape> CheckLinear(const TensorView& qweight, const TensorView& scales,
                                  int64_t k_per_word, int64_t n_per_word, int64_t group_size,
                                  DType out, const std::string& who);

// Zero points of a packed-word plan from qzeros [groups, N * bits / 32]
// (column f * c + p of group g is field field_of[p] of word (g, c), or
// field p when field_of is null), decoded by `rule`: a constant code
// offset when they are all equal, else the unpacked [groups, N] array in
// *storage.
void SetZeroPoints(const TensorView& qzeros, int64_t groups, int64_t N, int bits,
                   const uint8_t* field_of, GptqZeros rule, Plan* plan,
                   ParamVector<int32_t>* storage);

}  // namespace internal
}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_PACKED_WORDS_H_
