// GGUF -> a Hugging Face style model folder (`nibble dequant IN.gguf OUT/
// --hf`): the llama family (GGUF architectures "llama", "mistral"; with
// `<arch>.expert_count`, Mixtral), qwen2 / qwen3 and phi3 (its fused
// qkv_proj / gate_up_proj kept; LongRoPE's rope_factors_long / _short
// tensors written back into config.json's rope_scaling).
//
// What is written, into OUT/ (which must not exist, or be an empty folder;
// it appears complete or not at all: everything is written into a
// temporary sibling folder that is renamed at the end):
//  - model.safetensors, or model-0000i-of-0000n.safetensors shards of at
//    most `max_shard_bytes` each (a larger single tensor gets a shard of its
//    own) with model.safetensors.index.json;
//  - config.json built from the GGUF metadata (architectures, model_type,
//    sizes, heads, rope_theta, rms_norm_eps, vocab_size, torch_dtype,
//    tie_word_embeddings, bos / eos ids where present).
// Tensor names are mapped to the transformers names
// (blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight, ...);
// for the llama family, llama.cpp's row permutation of attn_q / attn_k
// (convert_hf_to_gguf's `permute`, for its interleaved rotary layout) is
// undone, so q_proj / k_proj are in the original checkpoint's row order.
// Shapes are the GGUF ne reversed ([out_features, in_features]). Mixtral:
// the stacked experts blk.N.ffn_{gate,down,up}_exps [E, rows, cols] become
// model.layers.N.block_sparse_moe.experts.E.{w1,w2,w3}.weight (llama.cpp's
// older per-expert blk.N.ffn_gate.E names too) and ffn_gate_inp the router
// block_sparse_moe.gate; config.json MixtralForCausalLM with
// num_local_experts / num_experts_per_tok. Other mixture-of-experts tensors
// are refused by name.
//
//  - tokenizer.json and tokenizer_config.json rebuilt from the
//    tokenizer.ggml.* metadata (hf_tokenizer.h); where that is not
//    possible, a note in DequantReport::notes says why.
// Not written: rope_freqs.weight
// (llama 3's precomputed rope factors, which transformers derives from a
// rope_scaling entry this exporter does not reconstruct: it is listed in
// DequantReport::skipped).
#ifndef NIBBLE_CHECKPOINT_HF_EXPORT_H_
#define NIBBLE_CHECKPOINT_HF_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "checkpoint/convert.h"

namespace nibble {

// The transformers name of GGUF tensor `gguf_name` for `arch`, or "" when
// it has none.
std::string HfTensorName(const std::string& arch, const std::string& gguf_name);

// Undoes llama.cpp's attn_q / attn_k row permutation in place: `rows` rows
// of `row_bytes` bytes, `heads` heads of rows / heads rows each. HF row
// h * d + i * d / 2 + j comes from GGUF row h * d + 2 * j + i.
Status UnpermuteQkRows(uint8_t* data, int64_t rows, int64_t row_bytes, int64_t heads);

// Converts GGUF file `in` into the folder `out_dir` (see above). Selection,
// dtype, threads and skip_unsupported as for DequantCheckpoint.
Status DequantGgufToHf(const std::string& in, const std::string& out_dir,
                       const DequantOptions& options, DequantReport* report);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_HF_EXPORT_H_
