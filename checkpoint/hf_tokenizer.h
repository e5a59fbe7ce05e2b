// Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json)
// rebuilt from a GGUF's tokenizer.ggml.* metadata, for `nibble dequant
// IN.gguf OUT/ --hf`.
//
// Whose rules: the token ids a tokenizer.json gives must be the ones
// llama.cpp's tokenizer gives for the same GGUF (src/llama-vocab.cpp:
// llm_tokenizer_spm_session, llm_tokenizer_bpe_session, the pre-tokenizer
// table and the add_bos / add_eos / add_space_prefix defaults of
// llama_vocab::impl::load), written in the form transformers' own GGUF
// loader builds (integrations/ggml.py and convert_slow_tokenizer.py):
//  - tokenizer.ggml.model "llama" (SentencePiece BPE): a BPE model with
//    byte_fallback whose merges are generated from the vocabulary and the
//    scores as transformers' `generate_merges` does (every split of a
//    piece into two vocabulary pieces, ranked by the piece's score, high
//    first, ties in vocabulary order); normalizer Prepend("▁") (when
//    add_space_prefix) + Replace(" ", "▁"); decoder Replace / ByteFallback
//    / Fuse / Strip — the llama 2 tokenizer.json layout. SentencePiece's
//    rule (the highest-scoring adjacent pair first, leftmost on a tie) and
//    BPE's (the best-ranked merge first) agree except where two different
//    pieces have equal scores, which transformers accepts too.
//  - tokenizer.ggml.model "gpt2" (byte-level BPE): the vocabulary and
//    merges as stored; the pre-tokenizer is the split regex(es) of
//    tokenizer.ggml.pre (the originals llama.cpp cites where it adapted
//    them) followed by ByteLevel; ignore_merges, add_bos and
//    clean_up_tokenization_spaces as llama.cpp sets them for that pre.
//  - Control and unknown tokens (token_type 3, 2) are special added tokens,
//    user-defined ones (4) plain added tokens, all matched before
//    normalization, as llama.cpp matches them in the text (parse_special).
//  - tokenizer_config.json: add_bos_token / add_eos_token, the bos / eos /
//    unk / pad tokens named by their ids, model_max_length (the context
//    length), clean_up_tokenization_spaces, chat_template when present,
//    tokenizer_class LlamaTokenizerFast (SentencePiece) or
//    PreTrainedTokenizerFast (byte-level).
#ifndef NIBBLE_CHECKPOINT_HF_TOKENIZER_H_
#define NIBBLE_CHECKPOINT_HF_TOKENIZER_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "formats/gguf.h"

namespace nibble {

struct HfTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  // Non-empty when no files are written: why (no tokenizer metadata, a
  // tokenizer model or pre-tokenizer this exporter does not reproduce, or
  // metadata llama.cpp would refuse: wrong types, lengths, duplicate or
  // invalid tokens, merges of pieces outside the vocabulary).
  std::string not_written;
};

// The tokenizer files of `gguf`; `model_max_length` <= 0 leaves it out.
HfTokenizerFiles HfTokenizerFromGguf(const GgufFile& gguf, int64_t model_max_length);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_HF_TOKENIZER_H_
