#include "checkpoint/hf_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

#include "formats/files.h"

namespace nibble {

namespace {

using Json = nlohmann::ordered_json;

// llama.cpp's token types (tokenizer.ggml.token_type, llama_token_type).
constexpr int kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;

// A byte-level pre-tokenizer: the tokenizer.ggml.pre names llama.cpp maps
// to it and what it sets for them (llama_vocab::impl::load and
// llm_tokenizer_bpe). Where llama.cpp adapted a regex for its own engine
// and cites the original tokenizer.json's, the original is used.
struct PreTokenizer {
  std::vector<const char*> names;
  std::vector<const char*> regexes;  // split in this order, each match isolated
  bool ignore_merges = false;
  bool add_bos = false;
  bool clean_spaces = true;  // clean_up_tokenization_spaces
  bool no_bos = false;       // no default BOS id
};

#define NIBBLE_GPT2_RE \
  R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re"
#define NIBBLE_LLAMA3_RE                                                                       \
  R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+)re" \
  R"re([\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"
#define NIBBLE_QWEN2_RE                                                                   \
  R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+)re" \
  R"re([\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"

const std::vector<PreTokenizer>& PreTokenizers() {
  static const std::vector<PreTokenizer> kTable = [] {
    std::vector<PreTokenizer> t;
    auto add = [&t](std::vector<const char*> names, std::vector<const char*> regexes) {
      PreTokenizer p;
      p.names = std::move(names);
      p.regexes = std::move(regexes);
      t.push_back(p);
      return &t.back();
    };
    add({"default"},
        {R"re([\p{P}\$\+<=>\^~\|]+)re",
         R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re",
         R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"});
    PreTokenizer* p = add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                           "midm-2.0", "lfm2", "jina-v5-nano"},
                          {NIBBLE_LLAMA3_RE});
    p->ignore_merges = true;
    p->add_bos = true;
    add({"dbrx", "smaug-bpe"}, {NIBBLE_LLAMA3_RE});
    add({"chatglm-bpe", "glm4"}, {NIBBLE_LLAMA3_RE})->no_bos = true;
    add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
         "mellum", "modern-bert", "exaone4", "mpt", "olmo", "jais"},
        {NIBBLE_GPT2_RE});
    add({"trillion", "granite-docling"}, {NIBBLE_GPT2_RE})->clean_spaces = false;
    add({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"},
        {NIBBLE_QWEN2_RE})
        ->clean_spaces = false;
    add({"megrez", "stablelm2"}, {NIBBLE_QWEN2_RE});
    add({"qwen35"}, {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)re"
                     R"re( ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"})
        ->clean_spaces = false;
    add({"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
        {R"re(\p{N}{1,3})re", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
         R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?)re"
         R"re([\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"})
        ->clean_spaces = false;
    add({"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
        {R"re(\p{N})re", NIBBLE_GPT2_RE});
    add({"command-r", "smollm"}, {R"re(\p{N})re", NIBBLE_GPT2_RE})->clean_spaces = false;
    add({"falcon"},
        {R"re([\p{P}\$\+<=>\^~\|`]+)re",
         R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re",
         R"re([0-9][0-9][0-9])re"});
    add({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
        {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
         R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+)re"
         R"re([\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|)re"
         R"re( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"})
        ->clean_spaces = false;
    p = add({"tekken"},
            {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)re"
             R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)re"
             R"re(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"});
    p->ignore_merges = true;
    p->add_bos = true;
    p->clean_spaces = false;
    return t;
  }();
  return kTable;
}

#undef NIBBLE_GPT2_RE
#undef NIBBLE_LLAMA3_RE
#undef NIBBLE_QWEN2_RE

// An error-free reading of the GGUF's tokenizer keys: every problem
// becomes the reason no tokenizer is written.
class Meta {
 public:
  explicit Meta(const GgufFile& g) : g_(g) {}
  const GgufValue* Find(const std::string& key) const { return g_.Find(key); }
  // A string key: false (and `why`) when present with another type.
  bool String(const std::string& key, std::string* v, bool* present) {
    const GgufValue* x = g_.Find(key);
    *present = x != nullptr;
    if (x == nullptr) return true;
    if (x->type != GgufValueType::kString) return Fail(key + " is not a string");
    *v = x->s;
    return true;
  }
  // An integer key (GgufIntValue); absent leaves *v.
  bool Int(const std::string& key, int64_t* v) {
    const GgufValue* x = g_.Find(key);
    if (x == nullptr) return true;
    return GgufIntValue(*x, v) || Fail(key + " is not an integer");
  }
  bool Bool(const std::string& key, bool* v) {
    const GgufValue* x = g_.Find(key);
    if (x == nullptr) return true;
    if (x->type != GgufValueType::kBool) return Fail(key + " is not a bool");
    *v = x->u != 0;
    return true;
  }
  template <typename T>
  bool Array(const std::string& key, std::vector<T>* v, bool* present) {
    const GgufValue* x = g_.Find(key);
    *present = x != nullptr;
    if (x == nullptr) return true;
    const Status st = g_.ReadArray(key, *x, v);
    if (!st.ok()) return Fail(st.message());
    return true;
  }
  bool Fail(const std::string& why) {
    if (why_.empty()) why_ = why;
    return false;
  }
  const std::string& why() const { return why_; }

 private:
  const GgufFile& g_;
  std::string why_;
};

Json AddedToken(int64_t id, const std::string& content, bool special) {
  Json t;
  t["id"] = id;
  t["content"] = content;
  t["single_word"] = false;
  t["lstrip"] = false;
  t["rstrip"] = false;
  t["normalized"] = false;
  t["special"] = special;
  return t;
}

// transformers' LlamaTokenizerFast.update_post_processor: [bos] $A [eos]
// (and $B for pairs); null when neither is added.
Json PostProcessor(const std::vector<std::string>& tokens, int64_t bos, bool add_bos, int64_t eos,
                   bool add_eos) {
  if (!add_bos && !add_eos) return Json(nullptr);
  auto special = [&](int64_t id, int type_id) {
    Json s;
    s["SpecialToken"] = Json{{"id", tokens[static_cast<size_t>(id)]}, {"type_id", type_id}};
    return s;
  };
  auto sequence = [](const char* id, int type_id) {
    Json s;
    s["Sequence"] = Json{{"id", id}, {"type_id", type_id}};
    return s;
  };
  Json single = Json::array(), pair = Json::array(), specials = Json::object();
  for (int part = 0; part < 2; ++part) {
    if (add_bos) pair.push_back(special(bos, part));
    pair.push_back(sequence(part == 0 ? "A" : "B", part));
    if (add_eos) pair.push_back(special(eos, part));
    if (part == 0) single = pair;
  }
  for (const auto& [flag, id] : {std::pair<bool, int64_t>{add_bos, bos}, {add_eos, eos}}) {
    if (!flag) continue;
    const std::string& t = tokens[static_cast<size_t>(id)];
    specials[t] = Json{{"id", t}, {"ids", Json::array({id})}, {"tokens", Json::array({t})}};
  }
  Json p;
  p["type"] = "TemplateProcessing";
  p["single"] = single;
  p["pair"] = pair;
  p["special_tokens"] = specials;
  return p;
}

Json Replace(const std::string& from, const std::string& to) {
  Json r;
  r["type"] = "Replace";
  r["pattern"] = Json{{"String", from}};
  r["content"] = to;
  return r;
}

// The merges SentencePiece's scores imply (transformers'
// convert_slow_tokenizer.generate_merges with scores): for each piece, in
// vocabulary order, its splits into two vocabulary pieces ordered by their
// ids, then all of them stably by the piece's score, high first.
std::vector<std::pair<std::string, std::string>> SpmMerges(
    const std::vector<std::string>& tokens, const std::vector<double>& scores,
    const std::unordered_map<std::string, int64_t>& ids) {
  struct Merge {
    int64_t left, right;
    double score;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& piece = tokens[i];
    std::vector<Merge> local;
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;  // inside a char
      auto l = ids.find(piece.substr(0, cut));
      if (l == ids.end()) continue;
      auto r = ids.find(piece.substr(cut));
      if (r == ids.end()) continue;
      local.push_back({l->second, r->second, scores[i]});
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const Merge& m : merges) {
    out.emplace_back(tokens[static_cast<size_t>(m.left)], tokens[static_cast<size_t>(m.right)]);
  }
  return out;
}

}  // namespace

HfTokenizerFiles HfTokenizerFromGguf(const GgufFile& gguf, int64_t model_max_length) try {
  HfTokenizerFiles out;
  Meta m(gguf);
  auto fail = [&](const std::string& why) {
    out = HfTokenizerFiles();
    out.not_written = why.empty() ? m.why() : why;
    return out;
  };
  std::string model, pre;
  bool has_model = false, has_pre = false;
  if (!m.String("tokenizer.ggml.model", &model, &has_model)) return fail("");
  if (!has_model) return fail("the GGUF has no tokenizer.ggml.model");
  const bool spm = model == "llama";
  if (!spm && model != "gpt2") {
    return fail("tokenizer.ggml.model '" + EscapeBytes(model) +
                "' is not reproduced (\"llama\" SentencePiece and \"gpt2\" byte-level BPE are)");
  }
  if (!m.String("tokenizer.ggml.pre", &pre, &has_pre)) return fail("");
  const PreTokenizer* pt = nullptr;
  if (!spm) {
    if (!has_pre) pre = "default";  // llama.cpp's fallback (with a warning)
    for (const PreTokenizer& p : PreTokenizers()) {
      for (const char* n : p.names) {
        if (pre == n) pt = &p;
      }
    }
    if (pt == nullptr) {
      return fail("tokenizer.ggml.pre '" + EscapeBytes(pre) +
                  "' is a pre-tokenizer this exporter does not reproduce");
    }
  }

  std::vector<std::string> tokens;
  std::vector<double> scores, types;
  bool present = false;
  if (!m.Array("tokenizer.ggml.tokens", &tokens, &present)) return fail("");
  if (!present || tokens.empty()) return fail("the GGUF has no tokenizer.ggml.tokens");
  const size_t n = tokens.size();
  if (!m.Array("tokenizer.ggml.scores", &scores, &present)) return fail("");
  if (present && scores.size() < n) {
    return fail("tokenizer.ggml.scores has " + std::to_string(scores.size()) + " entries for " +
                std::to_string(n) + " tokens");
  }
  if (!present) scores.assign(n, 0.0);
  if (!m.Array("tokenizer.ggml.token_type", &types, &present)) return fail("");
  if (present && types.size() < n) {
    return fail("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                std::to_string(n) + " tokens");
  }
  const bool has_types = present;
  std::unordered_map<std::string, int64_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    if (!IsValidUtf8(tokens[i])) {
      return fail("token " + std::to_string(i) + " is not valid UTF-8");
    }
    if (!ids.emplace(tokens[i], static_cast<int64_t>(i)).second) {
      return fail("token '" + EscapeBytes(tokens[i]) + "' appears twice (ids " +
                  std::to_string(ids[tokens[i]]) + " and " + std::to_string(i) + ")");
    }
  }

  // Special ids: llama.cpp's defaults per model, then the keys (an id
  // outside the vocabulary keeps the default; a default outside it is none).
  int64_t bos = spm ? 1 : 11, eos = spm ? 2 : 11, unk = spm ? 0 : -1, pad = -1;
  if (pt != nullptr && pt->no_bos) bos = -1;
  const std::pair<const char*, int64_t*> special_keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos},
      {"tokenizer.ggml.eos_token_id", &eos},
      {"tokenizer.ggml.unknown_token_id", &unk},
      {"tokenizer.ggml.padding_token_id", &pad}};
  const int64_t nt = static_cast<int64_t>(n);
  for (const auto& [key, id] : special_keys) {
    if (*id >= nt) *id = -1;
    int64_t v = -1;
    if (!m.Int(key, &v)) return fail("");
    if (v >= 0 && v < nt) *id = v;
  }
  bool add_bos = spm || (pt != nullptr && pt->add_bos), add_eos = false, add_prefix = spm;
  bool remove_extra_ws = false;
  if (!m.Bool("tokenizer.ggml.add_bos_token", &add_bos) ||
      !m.Bool("tokenizer.ggml.add_eos_token", &add_eos) ||
      !m.Bool("tokenizer.ggml.add_space_prefix", &add_prefix) ||
      !m.Bool("tokenizer.ggml.remove_extra_whitespaces", &remove_extra_ws)) {
    return fail("");
  }
  if (spm && remove_extra_ws) {
    return fail("tokenizer.ggml.remove_extra_whitespaces is set (not reproduced)");
  }
  if ((add_bos && bos < 0) || (add_eos && eos < 0)) {
    return fail(std::string(add_bos && bos < 0 ? "add_bos_token" : "add_eos_token") +
                " is set but the token id is missing or outside the vocabulary");
  }

  Json added = Json::array();
  for (size_t i = 0; i < n; ++i) {
    const int type = has_types ? static_cast<int>(types[i]) : 0;
    const int64_t id = static_cast<int64_t>(i);
    const bool special = has_types ? type == kTypeControl || type == kTypeUnknown
                                   : id == unk || id == bos || id == eos;
    if (special || type == kTypeUserDefined) added.push_back(AddedToken(id, tokens[i], special));
  }

  std::vector<std::pair<std::string, std::string>> merges;
  if (spm) {
    merges = SpmMerges(tokens, scores, ids);
  } else {
    std::vector<std::string> lines;
    if (!m.Array("tokenizer.ggml.merges", &lines, &present)) return fail("");
    if (!present) return fail("the byte-level tokenizer has no tokenizer.ggml.merges");
    merges.reserve(lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& w = lines[i];
      const size_t sp = w.size() > 1 ? w.find(' ', 1) : std::string::npos;  // as llama.cpp
      if (sp == std::string::npos) {
        return fail("merge " + std::to_string(i) + " '" + EscapeBytes(w) + "' has no space");
      }
      std::string a = w.substr(0, sp), b = w.substr(sp + 1);
      if (!ids.count(a) || !ids.count(b) || !ids.count(a + b)) {
        return fail("merge " + std::to_string(i) + " '" + EscapeBytes(w) +
                    "' joins pieces that are not all in the vocabulary");
      }
      merges.emplace_back(std::move(a), std::move(b));
    }
  }
  bool spaces_in_pieces = false;
  for (const auto& [a, b] : merges) {
    if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos) {
      spaces_in_pieces = true;
    }
  }
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) {
    // "a b" as tokenizers has always read it; pairs where a piece holds a
    // space (tokenizers >= 0.20 reads both).
    if (spaces_in_pieces) {
      merge_list.push_back(Json::array({a, b}));
    } else {
      merge_list.push_back(a + " " + b);
    }
  }
  Json vocab = Json::object();
  for (size_t i = 0; i < n; ++i) vocab[tokens[i]] = static_cast<int64_t>(i);

  Json tj;
  tj["version"] = "1.0";
  tj["truncation"] = nullptr;
  tj["padding"] = nullptr;
  tj["added_tokens"] = added;
  const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  if (spm) {
    Json norms = Json::array();
    if (add_prefix) norms.push_back(Json{{"type", "Prepend"}, {"prepend", kSpace}});
    norms.push_back(Replace(" ", kSpace));
    tj["normalizer"] = Json{{"type", "Sequence"}, {"normalizers", norms}};
    tj["pre_tokenizer"] = nullptr;
  } else {
    tj["normalizer"] = nullptr;
    Json pres = Json::array();
    for (const char* re : pt->regexes) {
      Json s;
      s["type"] = "Split";
      s["pattern"] = Json{{"Regex", re}};
      s["behavior"] = "Isolated";
      s["invert"] = false;
      pres.push_back(s);
    }
    Json bl;
    bl["type"] = "ByteLevel";
    bl["add_prefix_space"] = false;
    bl["trim_offsets"] = true;
    bl["use_regex"] = false;
    pres.push_back(bl);
    tj["pre_tokenizer"] = Json{{"type", "Sequence"}, {"pretokenizers", pres}};
  }
  tj["post_processor"] = PostProcessor(tokens, bos, add_bos, eos, add_eos);
  if (spm) {
    Json decs = Json::array();
    decs.push_back(Replace(kSpace, " "));
    decs.push_back(Json{{"type", "ByteFallback"}});
    decs.push_back(Json{{"type", "Fuse"}});
    if (add_prefix) {
      decs.push_back(Json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    }
    tj["decoder"] = Json{{"type", "Sequence"}, {"decoders", decs}};
  } else {
    Json d;
    d["type"] = "ByteLevel";
    d["add_prefix_space"] = true;
    d["trim_offsets"] = true;
    d["use_regex"] = true;
    tj["decoder"] = d;
  }
  Json model_json;
  model_json["type"] = "BPE";
  model_json["dropout"] = nullptr;
  model_json["unk_token"] =
      spm && unk >= 0 ? Json(tokens[static_cast<size_t>(unk)]) : Json(nullptr);
  model_json["continuing_subword_prefix"] = nullptr;
  model_json["end_of_word_suffix"] = nullptr;
  model_json["fuse_unk"] = spm;
  model_json["byte_fallback"] = spm;
  model_json["ignore_merges"] = pt != nullptr && pt->ignore_merges;
  model_json["vocab"] = std::move(vocab);
  model_json["merges"] = std::move(merge_list);
  tj["model"] = std::move(model_json);

  Json cfg;
  cfg["add_bos_token"] = add_bos;
  cfg["add_eos_token"] = add_eos;
  for (const auto& [name, id] : {std::pair<const char*, int64_t>{"bos_token", bos},
                                 {"eos_token", eos},
                                 {"unk_token", unk},
                                 {"pad_token", pad}}) {
    if (id >= 0) cfg[name] = tokens[static_cast<size_t>(id)];
  }
  cfg["clean_up_tokenization_spaces"] = spm ? false : pt->clean_spaces;
  if (spm) cfg["legacy"] = true;  // the normalizer form above is the legacy one
  if (model_max_length > 0) cfg["model_max_length"] = model_max_length;
  const GgufValue* tmpl = gguf.Find("tokenizer.chat_template");
  if (tmpl != nullptr && tmpl->type == GgufValueType::kString && IsValidUtf8(tmpl->s)) {
    cfg["chat_template"] = tmpl->s;
  }
  cfg["tokenizer_class"] = spm ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast";

  out.tokenizer_json = tj.dump(2, ' ', false) + "\n";
  out.tokenizer_config_json = cfg.dump(2, ' ', false) + "\n";
  return out;
} catch (const std::exception& e) {  // bad_alloc, or a JSON type error
  HfTokenizerFiles failed;
  failed.not_written = std::string("could not build it: ") + e.what();
  return failed;
}

}  // namespace nibble
