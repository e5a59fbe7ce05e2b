// GGUF files as people download them: llama.cpp's quantization mixes put
// several ggml types in one file (Q4_K_M keeps attn_v / ffn_down of some
// layers and the output in Q6_K, falls back to Q5_0 where a row is not a
// multiple of 256, ...). Each mix below is written by the tests' own GGUF
// writer for a small Llama-shaped model (and a gpt-oss-shaped MoE block for
// MXFP4), converted whole by `dequant`, and every tensor is compared with
// the independent decoder (tests/ggml_oracle.h).
#include "formats/gguf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/numeric.h"
#include "bench/synthetic_weights.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/hf_export.h"
#include "doctest/doctest.h"
#include "formats/safetensors.h"
#include "testing/quantize_checkpoint.h"
#include "tests/checkpoint_writers.h"
#include "tests/ggml_oracle.h"
#include "tests/scratch_dir.h"

namespace nibble {
namespace testing {
namespace {

constexpr uint32_t kF32 = 0;

// Random blocks of type t with moderate scales (f16 fields ~2^-7, E8M0
// near 1): every code and packed sub-block scale bit pattern occurs.
std::vector<uint8_t> RandomBlocks(uint32_t t, int64_t elements, std::mt19937* rng) {
  const int64_t be = OracleBlockElems(t), bb = OracleBlockBytes(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(elements / be * bb));
  for (auto& x : bytes) x = static_cast<uint8_t>((*rng)());
  for (int64_t k = 0; k < elements / be; ++k) {
    OracleModerateScales(t, bytes.data() + k * bb, static_cast<uint32_t>((*rng)()));
  }
  return bytes;
}

// llama.cpp's use_more_bits(i_layer, n_layers).
bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The type llama.cpp's mix gives a 2-D Llama tensor (llama-quant.cpp's
// llama_tensor_get_type, for this model: 8 heads, 2 KV heads so n_gqa = 4),
// before the fallback for rows that are not a multiple of 256.
uint32_t MixType(const std::string& mix, const std::string& role, int layer, int n_layer) {
  const bool more = UseMoreBits(layer, n_layer);
  if (mix == "Q8_0") return kOracleQ8_0;
  if (role == "output") return kOracleQ6_K;
  if (mix == "Q4_K_M" || mix == "Q5_K_M") {
    const uint32_t base = mix == "Q4_K_M" ? kOracleQ4_K : kOracleQ5_K;
    if ((role == "attn_v" || role == "ffn_down") && more) return kOracleQ6_K;
    return base;
  }
  if (mix == "Q3_K_M") {
    if (role == "attn_v") return layer < 2 ? kOracleQ5_K : kOracleQ4_K;
    if (role == "attn_output") return kOracleQ4_K;
    if (role == "ffn_down") return more ? kOracleQ4_K : kOracleQ3_K;
    return kOracleQ3_K;
  }
  if (mix == "Q2_K") {
    if (role == "attn_v") return kOracleQ4_K;  // n_gqa >= 4
    if (role == "ffn_down" || role == "attn_output") return kOracleQ3_K;
    return kOracleQ2_K;
  }
  if (mix == "IQ4_XS") {
    if (role == "attn_v") return kOracleQ5_K;  // n_gqa >= 4
    return kOracleIQ4_XS;
  }
  return 0;
}

// llama.cpp's fallback when ne[0] is not a multiple of the K-quant block.
uint32_t Fallback(uint32_t t, int64_t ne0) {
  if (ne0 % 256 == 0) return t;
  switch (t) {
    case kOracleQ2_K:
    case kOracleQ3_K:
    case kOracleIQ4_XS:
      return kOracleIQ4_NL;
    case kOracleQ4_K:
      return kOracleQ5_0;
    case kOracleQ5_K:
      return kOracleQ5_1;
    case kOracleQ6_K:
      return kOracleQ8_0;
    default:
      return t;
  }
}

struct MixTensor {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type;
  std::vector<uint8_t> bytes;
};

// A small Llama: hidden 256, 8 heads of 32 (2 KV heads), FFN 352 (not a
// multiple of 256: ffn_down falls back), vocab 320, 4 layers.
std::vector<MixTensor> LlamaMix(const std::string& mix, std::mt19937* rng) {
  constexpr int64_t kHidden = 256, kKv = 64, kFfn = 352, kVocab = 320;
  constexpr int kLayers = 4;
  std::vector<MixTensor> ts;
  auto quant = [&](const std::string& name, const std::string& role, int layer, int64_t ne0,
                   int64_t ne1) {
    const uint32_t t = Fallback(MixType(mix, role, layer, kLayers), ne0);
    ts.push_back({name, {ne0, ne1}, t, RandomBlocks(t, ne0 * ne1, rng)});
  };
  auto norm = [&](const std::string& name, int64_t n) {
    std::vector<uint8_t> b(static_cast<size_t>(n * 4));
    for (int64_t i = 0; i < n; ++i) {
      const float v = 1.0f + static_cast<float>((*rng)() % 1000) / 1000.0f;
      std::memcpy(b.data() + i * 4, &v, 4);
    }
    ts.push_back({name, {n}, kF32, b});
  };
  quant("token_embd.weight", "token_embd", 0, kHidden, kVocab);
  for (int i = 0; i < kLayers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight", kHidden);
    quant(p + "attn_q.weight", "attn_q", i, kHidden, kHidden);
    quant(p + "attn_k.weight", "attn_k", i, kHidden, kKv);
    quant(p + "attn_v.weight", "attn_v", i, kHidden, kKv);
    quant(p + "attn_output.weight", "attn_output", i, kHidden, kHidden);
    norm(p + "ffn_norm.weight", kHidden);
    quant(p + "ffn_gate.weight", "ffn_gate", i, kHidden, kFfn);
    quant(p + "ffn_up.weight", "ffn_up", i, kHidden, kFfn);
    quant(p + "ffn_down.weight", "ffn_down", i, kFfn, kHidden);
  }
  norm("output_norm.weight", kHidden);
  quant("output.weight", "output", 0, kHidden, kVocab);
  return ts;
}

// gpt-oss's MXFP4 MoE block: 3-D expert tensors [n_expert, rows, cols]
// in MXFP4, attention in Q8_0, router and norms in F32.
std::vector<MixTensor> MoeMix(std::mt19937* rng) {
  constexpr int64_t kHidden = 128, kFfn = 96, kExperts = 4;
  std::vector<MixTensor> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, uint32_t t) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    if (t == kF32) {
      std::vector<uint8_t> b(static_cast<size_t>(n * 4));
      for (int64_t i = 0; i < n; ++i) {
        const float v = static_cast<float>((*rng)() % 2000) / 1000.0f - 1.0f;
        std::memcpy(b.data() + i * 4, &v, 4);
      }
      ts.push_back({name, ne, t, b});
    } else {
      ts.push_back({name, ne, t, RandomBlocks(t, n, rng)});
    }
  };
  add("blk.0.attn_norm.weight", {kHidden}, kF32);
  add("blk.0.attn_q.weight", {kHidden, kHidden}, kOracleQ8_0);
  add("blk.0.attn_sinks.weight", {8}, kF32);
  add("blk.0.ffn_gate_inp.weight", {kHidden, kExperts}, kF32);
  add("blk.0.ffn_gate_exps.weight", {kHidden, kFfn, kExperts}, kOracleMXFP4);
  add("blk.0.ffn_up_exps.weight", {kHidden, kFfn, kExperts}, kOracleMXFP4);
  add("blk.0.ffn_down_exps.weight", {kFfn, kHidden, kExperts}, kOracleMXFP4);
  return ts;
}

uint16_t Bf16Rne(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);  // finite inputs
}
uint16_t F16Rne(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// Writes `ts` as a GGUF, dequantizes it whole into `dtype` and compares
// every tensor with the oracle (quantized) or the stored bytes (F32).
void CheckMix(const std::string& label, const std::vector<MixTensor>& ts, DType dtype) {
  CAPTURE(label);
  const auto dir = TempDir("mix_" + label);
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  for (const MixTensor& t : ts) b.Tensor(t.name, t.ne, t.type, t.bytes);
  WriteText((dir / "m.gguf").string(), b.Bytes());
  const std::string out = (dir / "out.safetensors").string();
  DequantOptions o;
  o.dtype = dtype;
  DequantReport rep;
  const Status st = DequantCheckpoint((dir / "m.gguf").string(), out, o, &rep);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(rep.skipped.empty());
  auto f = SafetensorsFile::Open(out);
  REQUIRE(f.ok());
  CHECK((*f)->tensors().size() == ts.size());
  for (const MixTensor& t : ts) {
    CAPTURE(t.name);
    const SafetensorsTensor* st_t = (*f)->Find(t.name);
    REQUIRE(st_t != nullptr);
    Shape want_shape(t.ne.rbegin(), t.ne.rend());
    CHECK(st_t->shape == want_shape);
    std::vector<uint8_t> buf;
    auto v = (*f)->Load(*st_t, &buf);
    REQUIRE(v.ok());
    const int64_t cols = t.ne[0];
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    // Float copies (norms) are converted to the requested type as well.
    std::vector<float> want(static_cast<size_t>(n));
    if (t.type == kF32) {
      REQUIRE(t.bytes.size() == want.size() * 4);
      std::memcpy(want.data(), t.bytes.data(), t.bytes.size());
    } else {
      want = OracleDecode(t.type, t.bytes.data(), n / cols, cols);
    }
    REQUIRE(v->size_bytes == static_cast<size_t>(n * (dtype == DType::kFloat32 ? 4 : 2)));
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float w = want[static_cast<size_t>(i)];
      bool same;
      if (dtype == DType::kFloat32) {
        float g;
        std::memcpy(&g, static_cast<const uint8_t*>(v->data) + i * 4, 4);
        same = BitsFromF32(g) == BitsFromF32(w);
      } else {
        uint16_t g;
        std::memcpy(&g, static_cast<const uint8_t*>(v->data) + i * 2, 2);
        same = g == (dtype == DType::kFloat16 ? F16Rne(w) : Bf16Rne(w));
      }
      mismatches += same ? 0 : 1;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("GGUF: llama.cpp's quantization mixes convert whole, every tensor == the oracle") {
  std::mt19937 rng(2026);
  for (const char* mix : {"Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "Q8_0", "IQ4_XS"}) {
    const std::vector<MixTensor> ts = LlamaMix(mix, &rng);
    // The mix really mixes: count its ggml types.
    std::map<uint32_t, int> types;
    for (const MixTensor& t : ts) ++types[t.type];
    CAPTURE(mix);
    CHECK(types.size() >= (std::string(mix) == "Q8_0" ? 2u : 4u));
    for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      CheckMix(std::string(mix) + "_" + DTypeName(dt), ts, dt);
    }
  }
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    CheckMix(std::string("MXFP4_MOE_") + DTypeName(dt), MoeMix(&rng), dt);
  }
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// llama.cpp's convert_hf_to_gguf `permute` of q_proj / k_proj rows: GGUF
// row h * d + 2 * j + i holds HF row h * d + i * d / 2 + j.
std::vector<float> PermuteLikeLlamaCpp(const std::vector<float>& w, int64_t rows, int64_t cols,
                                       int64_t heads) {
  std::vector<float> out(w.size());
  const int64_t d = rows / heads, half = d / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        std::memcpy(&out[static_cast<size_t>((h * d + 2 * j + i) * cols)],
                    &w[static_cast<size_t>((h * d + i * half + j) * cols)],
                    static_cast<size_t>(cols) * 4);
      }
    }
  }
  return out;
}

struct HfWeight {
  std::string hf, gguf;
  int64_t rows, cols;  // [out, in]; cols == 0: a 1-D tensor of `rows`
  int64_t permute_heads = 0;
  uint32_t type = 8;  // q8_0, or kF32 for norms
};

// A tiny Llama (or Qwen2) from known HF-layout weights -> GGUF (Q8_0 /
// Q4_K / Q6_K, q and k rows permuted for llama) -> `dequant --hf` -> the
// original weights (to quantization error; bit-exact against the oracle's
// decoding of the same blocks), in the original layout, with config.json.
// The shard holding tensor `name`, from a model.safetensors.index.json text.
std::string ShardOf(const std::string& index, const std::string& name) {
  const std::string key = "\"" + name + "\": \"";
  const size_t at = index.find(key);
  REQUIRE_MESSAGE(at != std::string::npos, name);
  return index.substr(at + key.size(), index.find('"', at + key.size()) - at - key.size());
}

// Tensor `name` of the safetensors file `path` holds exactly the float32
// values `want`.
void CheckStoredFloats(const std::filesystem::path& path, const std::string& name,
                       const std::vector<float>& want) {
  CAPTURE(name);
  auto f = SafetensorsFile::Open(path.string());
  REQUIRE(f.ok());
  const SafetensorsTensor* t = (*f)->Find(name);
  REQUIRE(t != nullptr);
  std::vector<uint8_t> buf;
  auto v = (*f)->Load(*t, &buf);
  REQUIRE(v.ok());
  REQUIRE(v->size_bytes == want.size() * 4);
  CHECK(std::memcmp(v->data, want.data(), v->size_bytes) == 0);
}

TEST_CASE("dequant --hf: GGUF back to a Hugging Face folder (names, Q/K order, config, shards)") {
  for (const std::string arch : {"llama", "qwen2"}) {
    CAPTURE(arch);
    const bool llama = arch == "llama";
    constexpr int64_t kHidden = 256, kHeads = 8, kKvHeads = 2, kFfn = 512, kVocab = 320;
    std::vector<HfWeight> ws = {
        {"model.embed_tokens.weight", "token_embd.weight", kVocab, kHidden, 0, kOracleQ4_K},
        {"model.norm.weight", "output_norm.weight", kHidden, 0, 0, kF32},
        {"lm_head.weight", "output.weight", kVocab, kHidden, 0, kOracleQ6_K},
    };
    for (int l = 0; l < 2; ++l) {
      const std::string h = "model.layers." + std::to_string(l) + ".";
      const std::string g = "blk." + std::to_string(l) + ".";
      ws.push_back({h + "input_layernorm.weight", g + "attn_norm.weight", kHidden, 0, 0, kF32});
      ws.push_back({h + "self_attn.q_proj.weight", g + "attn_q.weight", kHidden, kHidden,
                    llama ? kHeads : 0});
      ws.push_back(
          {h + "self_attn.k_proj.weight", g + "attn_k.weight", 64, kHidden, llama ? kKvHeads : 0});
      ws.push_back({h + "self_attn.v_proj.weight", g + "attn_v.weight", 64, kHidden});
      if (!llama) {  // Qwen2: q / k / v biases
        ws.push_back({h + "self_attn.q_proj.bias", g + "attn_q.bias", kHidden, 0, 0, kF32});
        ws.push_back({h + "self_attn.k_proj.bias", g + "attn_k.bias", 64, 0, 0, kF32});
        ws.push_back({h + "self_attn.v_proj.bias", g + "attn_v.bias", 64, 0, 0, kF32});
      }
      ws.push_back({h + "self_attn.o_proj.weight", g + "attn_output.weight", kHidden, kHidden});
      ws.push_back(
          {h + "post_attention_layernorm.weight", g + "ffn_norm.weight", kHidden, 0, 0, kF32});
      ws.push_back({h + "mlp.gate_proj.weight", g + "ffn_gate.weight", kFfn, kHidden});
      ws.push_back({h + "mlp.up_proj.weight", g + "ffn_up.weight", kFfn, kHidden});
      ws.push_back({h + "mlp.down_proj.weight", g + "ffn_down.weight", kHidden, kFfn});
    }
    GgufBuilder b;
    b.KvString("general.architecture", arch);
    b.KvU32(arch + ".attention.head_count", kHeads);
    b.KvU32(arch + ".attention.head_count_kv", kKvHeads);
    b.KvU32(arch + ".embedding_length", kHidden);
    b.KvU32(arch + ".feed_forward_length", kFfn);
    b.KvU32(arch + ".block_count", 2);
    b.KvU32(arch + ".context_length", 2048);
    b.Kv(arch + ".rope.freq_base", 6, GgufBuilder::Enc(10000.0f));
    b.Kv(arch + ".attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-5f));
    b.KvU32("tokenizer.ggml.bos_token_id", 1);
    std::map<std::string, std::vector<float>> original, want;
    int seed = 1;
    for (const HfWeight& w : ws) {
      const int64_t cols = w.cols == 0 ? 1 : w.cols;
      std::vector<float> x = MakeLlmLikeWeight(w.rows, cols, static_cast<uint64_t>(seed++));
      original[w.hf] = x;
      if (w.type == kF32) {
        std::vector<uint8_t> bytes(x.size() * 4);
        std::memcpy(bytes.data(), x.data(), bytes.size());
        b.Tensor(w.gguf, {w.rows}, kF32, bytes);
        want[w.hf] = x;
        continue;
      }
      const std::vector<float> stored =
          w.permute_heads ? PermuteLikeLlamaCpp(x, w.rows, cols, w.permute_heads) : x;
      auto q =
          QuantizeGgml(w.type == kOracleQ6_K ? kOracleQ8_0 : w.type, stored.data(), w.rows, cols);
      REQUIRE(q.ok());
      const uint32_t type = w.type == kOracleQ6_K ? kOracleQ8_0 : w.type;
      b.Tensor(w.gguf, {cols, w.rows}, type, *q);
      // The expected output: the oracle's decoding, rows put back in HF order.
      std::vector<float> dec = OracleDecode(type, q->data(), w.rows, cols);
      if (w.permute_heads) {
        std::vector<float> back(dec.size());
        const int64_t d = w.rows / w.permute_heads, half = d / 2;
        for (int64_t h = 0; h < w.permute_heads; ++h)
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < half; ++j)
              std::memcpy(&back[static_cast<size_t>((h * d + i * half + j) * cols)],
                          &dec[static_cast<size_t>((h * d + 2 * j + i) * cols)],
                          static_cast<size_t>(cols) * 4);
        dec = back;
      }
      want[w.hf] = dec;
    }
    const auto dir = TempDir("hf_" + arch);
    WriteText((dir / "m.gguf").string(), b.Bytes());
    const auto out = dir / "hf";
    DequantOptions o;
    o.hf = true;
    o.dtype = DType::kFloat32;
    o.max_shard_bytes = 600000;  // several shards
    DequantReport rep;
    const Status st = DequantCheckpoint((dir / "m.gguf").string(), out.string(), o, &rep);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(rep.dequantized + rep.copied == static_cast<int>(ws.size()));
    // Only the folder: no temporary left beside it.
    int entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      (void)e;
      ++entries;
    }
    CHECK(entries == 2);
    const std::string index = ReadFile(out / "model.safetensors.index.json");
    const std::string config = ReadFile(out / "config.json");
    CHECK(config.find(llama ? "\"architectures\": [\"LlamaForCausalLM\"]"
                            : "\"architectures\": [\"Qwen2ForCausalLM\"]") != std::string::npos);
    for (const char* kv :
         {"\"hidden_size\": 256", "\"intermediate_size\": 512", "\"num_hidden_layers\": 2",
          "\"num_attention_heads\": 8", "\"num_key_value_heads\": 2", "\"rms_norm_eps\": 1e-05",
          "\"rope_theta\": 10000.0", "\"vocab_size\": 320", "\"tie_word_embeddings\": false",
          "\"max_position_embeddings\": 2048", "\"bos_token_id\": 1",
          "\"torch_dtype\": \"float32\""}) {
      CHECK_MESSAGE(config.find(kv) != std::string::npos, kv);
    }
    for (const HfWeight& w : ws) {
      CAPTURE(w.hf);
      auto f = SafetensorsFile::Open((out / ShardOf(index, w.hf)).string());
      REQUIRE(f.ok());
      const SafetensorsTensor* t = (*f)->Find(w.hf);
      REQUIRE(t != nullptr);
      CHECK(t->shape == (w.cols == 0 ? Shape{w.rows} : Shape{w.rows, w.cols}));
      std::vector<uint8_t> buf;
      auto v = (*f)->Load(*t, &buf);
      REQUIRE(v.ok());
      const std::vector<float>& e = want[w.hf];
      REQUIRE(v->size_bytes == e.size() * 4);
      CHECK(std::memcmp(v->data, e.data(), v->size_bytes) == 0);
      // And close to the original HF weight in its own row order.
      const auto err = MeasureError(original[w.hf].data(), static_cast<const float*>(v->data),
                                    static_cast<int64_t>(e.size()));
      CHECK(err.sqnr_db > 20.0);
    }
  }
}

// Adds float32 tensor `name` (ne as GGUF orders it) to `b`: `x`, or an
// LLM-like weight from `seed` when x is empty. Returns the values.
std::vector<float> AddF32Tensor(GgufBuilder* b, const std::string& name,
                                const std::vector<int64_t>& ne, uint64_t seed,
                                std::vector<float> x = {}) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  if (x.empty()) x = MakeLlmLikeWeight(1, n, seed);
  std::vector<uint8_t> bytes(x.size() * 4);
  std::memcpy(bytes.data(), x.data(), bytes.size());
  b->Tensor(name, ne, kF32, bytes);
  return x;
}

// Adds llama.cpp's stacked expert tensor blk.0.<part>.weight ([E, rows,
// cols], Q8_0) to `b` and each expert's decoded values to `want` under
// name(e).
void AddStackedExperts(GgufBuilder* b, const std::string& part, int64_t experts, int64_t rows,
                       int64_t cols, uint64_t seed, const std::function<std::string(int64_t)>& name,
                       std::map<std::string, std::vector<float>>* want) {
  const std::vector<float> x = MakeLlmLikeWeight(experts * rows, cols, seed);
  auto q = QuantizeGgml(kOracleQ8_0, x.data(), experts * rows, cols);
  REQUIRE(q.ok());
  b->Tensor("blk.0." + part + ".weight", {cols, rows, experts}, kOracleQ8_0, *q);
  const std::vector<float> dec = OracleDecode(kOracleQ8_0, q->data(), experts * rows, cols);
  for (int64_t e = 0; e < experts; ++e) {
    (*want)[name(e)] =
        std::vector<float>(dec.begin() + e * rows * cols, dec.begin() + (e + 1) * rows * cols);
  }
}

TEST_CASE("dequant --hf: a Mixtral GGUF (llama with experts) -> MixtralForCausalLM's layout") {
  // llama.cpp stacks each layer's experts into [E, rows, cols] tensors
  // (ffn_{gate,up,down}_exps) and the router into ffn_gate_inp; transformers'
  // Mixtral wants block_sparse_moe.gate and experts.E.w1 / w2 / w3.
  constexpr int64_t kHidden = 32, kFfn = 64, kVocab = 48, kExperts = 3;
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  b.KvU32("llama.attention.head_count", 2);
  b.KvU32("llama.attention.head_count_kv", 2);
  b.KvU32("llama.embedding_length", kHidden);
  b.KvU32("llama.feed_forward_length", kFfn);
  b.KvU32("llama.block_count", 1);
  b.KvU32("llama.context_length", 512);
  b.KvU32("llama.expert_count", kExperts);
  b.KvU32("llama.expert_used_count", 2);
  b.Kv("llama.attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-5f));
  int seed = 7;
  auto f32 = [&](const std::string& name, std::vector<int64_t> ne) {
    AddF32Tensor(&b, name, ne, static_cast<uint64_t>(seed++));
  };
  f32("token_embd.weight", {kHidden, kVocab});
  f32("output_norm.weight", {kHidden});
  f32("blk.0.attn_norm.weight", {kHidden});
  f32("blk.0.ffn_norm.weight", {kHidden});
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
    f32(std::string("blk.0.") + n + ".weight", {kHidden, kHidden});
  }
  f32("blk.0.ffn_gate_inp.weight", {kHidden, kExperts});
  std::map<std::string, std::vector<float>> want;  // HF name -> values
  for (const auto& [part, w, rows, cols] : {std::tuple<const char*, const char*, int64_t, int64_t>{
                                                "ffn_gate_exps", "w1", kFfn, kHidden},
                                            {"ffn_up_exps", "w3", kFfn, kHidden},
                                            {"ffn_down_exps", "w2", kHidden, kFfn}}) {
    const std::string weight = w;
    AddStackedExperts(
        &b, part, kExperts, rows, cols, static_cast<uint64_t>(seed++),
        [&](int64_t e) {
          return "model.layers.0.block_sparse_moe.experts." + std::to_string(e) + "." + weight +
                 ".weight";
        },
        &want);
  }
  const auto dir = TempDir("hf_mixtral");
  WriteText((dir / "m.gguf").string(), b.Bytes());
  DequantOptions o;
  o.hf = true;
  o.dtype = DType::kFloat32;
  o.max_shard_bytes = 30000;  // the experts spread over several shards
  DequantReport rep;
  const Status st = DequantCheckpoint((dir / "m.gguf").string(), (dir / "hf").string(), o, &rep);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::string config = ReadFile(dir / "hf" / "config.json");
  for (const char* kv :
       {"\"architectures\": [\"MixtralForCausalLM\"]", "\"model_type\": \"mixtral\"",
        "\"num_local_experts\": 3", "\"num_experts_per_tok\": 2", "\"intermediate_size\": 64"}) {
    CHECK_MESSAGE(config.find(kv) != std::string::npos, kv);
  }
  const std::string index = ReadFile(dir / "hf" / "model.safetensors.index.json");
  CHECK(index.find("\"model.layers.0.block_sparse_moe.gate.weight\"") != std::string::npos);
  CHECK(index.find("mlp.") == std::string::npos);
  for (const auto& [name, values] : want) {
    CheckStoredFloats(dir / "hf" / ShardOf(index, name), name, values);
  }
  // Without expert_count the same tensors are refused as MoE tensors, by name.
  GgufBuilder dense;
  dense.KvString("general.architecture", "llama");
  dense.KvU32("llama.attention.head_count", 2);
  dense.Tensor("blk.0.ffn_gate_exps.weight", {32, 2, 2}, kF32, std::vector<uint8_t>(512));
  WriteText((dir / "d.gguf").string(), dense.Bytes());
  const Status refused =
      DequantCheckpoint((dir / "d.gguf").string(), (dir / "hf2").string(), o, &rep);
  CHECK(refused.message().find("'blk.0.ffn_gate_exps.weight' is a mixture-of-experts tensor") !=
        std::string::npos);
  CHECK(!std::filesystem::exists(dir / "hf2"));
}

TEST_CASE("dequant --hf: Qwen2-MoE and Qwen3-MoE GGUFs -> their transformers layouts") {
  // llama.cpp's qwen2moe / qwen3moe: router ffn_gate_inp, stacked experts
  // ffn_{gate,up,down}_exps [E, rows, cols]; Qwen2-MoE adds a shared expert
  // (ffn_*_shexp) and its one-row gate ffn_gate_inp_shexp (here a vector,
  // as llama.cpp may store it), and q / k / v biases; Qwen3-MoE q / k norms.
  // Nothing is permuted (only llama-family Q / K rows are).
  constexpr int64_t kHidden = 32, kFfnE = 32, kFfnShared = 48, kVocab = 40, kExperts = 4;
  constexpr int64_t kHeads = 4, kHeadsKv = 2, kHeadDim = 8;
  for (const std::string arch : {"qwen2moe", "qwen3moe"}) {
    CAPTURE(arch);
    const bool v2 = arch == "qwen2moe";
    GgufBuilder b;
    b.KvString("general.architecture", arch);
    b.KvU32(arch + ".attention.head_count", kHeads);
    b.KvU32(arch + ".attention.head_count_kv", kHeadsKv);
    b.KvU32(arch + ".attention.key_length", kHeadDim);
    b.KvU32(arch + ".embedding_length", kHidden);
    b.KvU32(arch + ".feed_forward_length", 96);  // the dense width: unused by the experts
    b.KvU32(arch + ".expert_feed_forward_length", kFfnE);
    if (v2) b.KvU32(arch + ".expert_shared_feed_forward_length", kFfnShared);
    b.KvU32(arch + ".block_count", 1);
    b.KvU32(arch + ".context_length", 4096);
    b.KvU32(arch + ".expert_count", kExperts);
    b.KvU32(arch + ".expert_used_count", 2);
    b.Kv(arch + ".attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-6f));
    std::map<std::string, std::vector<float>> want;  // HF name -> values
    std::map<std::string, Shape> shapes;
    int seed = 11;
    auto f32 = [&](const std::string& gguf, const std::string& hf, std::vector<int64_t> ne) {
      want[hf] = AddF32Tensor(&b, gguf, ne, static_cast<uint64_t>(seed++));
    };
    const std::string p = "model.layers.0.";
    f32("token_embd.weight", "model.embed_tokens.weight", {kHidden, kVocab});
    f32("output_norm.weight", "model.norm.weight", {kHidden});
    f32("output.weight", "lm_head.weight", {kHidden, kVocab});
    f32("blk.0.attn_norm.weight", p + "input_layernorm.weight", {kHidden});
    f32("blk.0.ffn_norm.weight", p + "post_attention_layernorm.weight", {kHidden});
    f32("blk.0.attn_q.weight", p + "self_attn.q_proj.weight", {kHidden, kHeads * kHeadDim});
    f32("blk.0.attn_k.weight", p + "self_attn.k_proj.weight", {kHidden, kHeadsKv * kHeadDim});
    f32("blk.0.attn_v.weight", p + "self_attn.v_proj.weight", {kHidden, kHeadsKv * kHeadDim});
    f32("blk.0.attn_output.weight", p + "self_attn.o_proj.weight", {kHeads * kHeadDim, kHidden});
    if (v2) {
      f32("blk.0.attn_q.bias", p + "self_attn.q_proj.bias", {kHeads * kHeadDim});
      f32("blk.0.attn_k.bias", p + "self_attn.k_proj.bias", {kHeadsKv * kHeadDim});
      f32("blk.0.attn_v.bias", p + "self_attn.v_proj.bias", {kHeadsKv * kHeadDim});
      f32("blk.0.ffn_gate_shexp.weight", p + "mlp.shared_expert.gate_proj.weight",
          {kHidden, kFfnShared});
      f32("blk.0.ffn_up_shexp.weight", p + "mlp.shared_expert.up_proj.weight",
          {kHidden, kFfnShared});
      f32("blk.0.ffn_down_shexp.weight", p + "mlp.shared_expert.down_proj.weight",
          {kFfnShared, kHidden});
      f32("blk.0.ffn_gate_inp_shexp.weight", p + "mlp.shared_expert_gate.weight", {kHidden});
      shapes[p + "mlp.shared_expert_gate.weight"] = {1, kHidden};
    } else {
      f32("blk.0.attn_q_norm.weight", p + "self_attn.q_norm.weight", {kHeadDim});
      f32("blk.0.attn_k_norm.weight", p + "self_attn.k_norm.weight", {kHeadDim});
    }
    f32("blk.0.ffn_gate_inp.weight", p + "mlp.gate.weight", {kHidden, kExperts});
    for (const auto& [part, w, rows, cols] :
         {std::tuple<const char*, const char*, int64_t, int64_t>{"ffn_gate_exps", "gate_proj",
                                                                 kFfnE, kHidden},
          {"ffn_up_exps", "up_proj", kFfnE, kHidden},
          {"ffn_down_exps", "down_proj", kHidden, kFfnE}}) {
      const std::string weight = w;
      const Shape shape = {rows, cols};
      AddStackedExperts(
          &b, part, kExperts, rows, cols, static_cast<uint64_t>(seed++),
          [&](int64_t e) {
            const std::string name =
                p + "mlp.experts." + std::to_string(e) + "." + weight + ".weight";
            shapes[name] = shape;
            return name;
          },
          &want);
    }
    const auto dir = TempDir("hf_" + arch);
    WriteText((dir / "m.gguf").string(), b.Bytes());
    DequantOptions o;
    o.hf = true;
    o.dtype = DType::kFloat32;
    o.max_shard_bytes = 30000;  // several shards, with an index
    DequantReport rep;
    const Status st = DequantCheckpoint((dir / "m.gguf").string(), (dir / "hf").string(), o, &rep);
    REQUIRE_MESSAGE(st.ok(), st.message());
    const std::string config = ReadFile(dir / "hf" / "config.json");
    std::vector<std::string> keys = {
        "\"num_experts\": 4", "\"num_experts_per_tok\": 2", "\"moe_intermediate_size\": 32",
        "\"head_dim\": 8",    "\"num_key_value_heads\": 2", "\"tie_word_embeddings\": false"};
    if (v2) {
      keys.insert(keys.end(),
                  {"\"architectures\": [\"Qwen2MoeForCausalLM\"]", "\"model_type\": \"qwen2_moe\"",
                   "\"shared_expert_intermediate_size\": 48", "\"norm_topk_prob\": false"});
    } else {
      keys.insert(keys.end(), {"\"architectures\": [\"Qwen3MoeForCausalLM\"]",
                               "\"model_type\": \"qwen3_moe\"", "\"norm_topk_prob\": true"});
    }
    for (const std::string& kv : keys) CHECK_MESSAGE(config.find(kv) != std::string::npos, kv);
    const std::string index = ReadFile(dir / "hf" / "model.safetensors.index.json");
    CHECK(index.find("block_sparse_moe") == std::string::npos);
    for (const auto& [name, values] : want) {
      CheckStoredFloats(dir / "hf" / ShardOf(index, name), name, values);
      if (shapes.count(name) != 0) {
        auto f = SafetensorsFile::Open((dir / "hf" / ShardOf(index, name)).string());
        REQUIRE(f.ok());
        CHECK((*f)->Find(name)->shape == shapes[name]);
      }
    }
    // A layer without its experts is not a Qwen-MoE model: refused by name.
    DequantOptions some = o;
    some.exclude = "ffn_up_exps";
    rep = DequantReport();
    CHECK(DequantCheckpoint((dir / "m.gguf").string(), (dir / "hf3").string(), some, &rep).ok());
    bool noted = false;
    for (const std::string& n : rep.notes) {
      noted |= n.find("missing or misshapen tensor " + p + "mlp.experts.0.up_proj.weight") !=
               std::string::npos;
    }
    CHECK(noted);  // (a selection was given: written, with the note)
  }
}

TEST_CASE("dequant --hf: llama 3.1+ rope_freqs -> config.json's llama3 rope_scaling") {
  // llama.cpp's converter turns rope_scaling {factor, low_freq_factor,
  // high_freq_factor, original_max_position_embeddings} into rope_freqs
  // (float32 arithmetic, as convert_hf_to_gguf.py does it with torch);
  // --hf recovers the parameters, or says it could not.
  constexpr int64_t kHidden = 32, kFfn = 64, kVocab = 40, kHeadDim = 128;
  struct Case {
    float factor, low, high;
    int context;
    bool garbage;
    const char* want;
  };
  const Case cases[] = {
      {8, 1, 4, 8192, false,
       "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
       "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}"},
      {32, 1, 4, 8192, false, "\"factor\": 32.0, \"low_freq_factor\": 1.0"},
      {16, 1, 2, 4096, false,
       "\"factor\": 16.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 2.0, "
       "\"original_max_position_embeddings\": 4096"},
      {8, 1, 4, 8192, true, nullptr},
  };
  for (const Case& k : cases) {
    CAPTURE(k.factor);
    CAPTURE(k.garbage);
    GgufBuilder b;
    b.KvString("general.architecture", "llama");
    b.KvU32("llama.attention.head_count", 1);
    b.KvU32("llama.attention.head_count_kv", 1);
    b.KvU32("llama.attention.key_length", kHeadDim);
    b.KvU32("llama.embedding_length", kHidden);
    b.KvU32("llama.feed_forward_length", kFfn);
    b.KvU32("llama.block_count", 1);
    b.KvU32("llama.context_length", 131072);
    b.Kv("llama.rope.freq_base", 6, GgufBuilder::Enc(500000.0f));
    b.Kv("llama.attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-5f));
    auto f32 = [&](const std::string& name, std::vector<int64_t> ne, std::vector<float> x = {}) {
      AddF32Tensor(&b, name, ne, 5, std::move(x));
    };
    f32("token_embd.weight", {kHidden, kVocab});
    f32("output_norm.weight", {kHidden});
    f32("blk.0.attn_norm.weight", {kHidden});
    f32("blk.0.ffn_norm.weight", {kHidden});
    f32("blk.0.attn_q.weight", {kHidden, kHeadDim});
    f32("blk.0.attn_k.weight", {kHidden, kHeadDim});
    f32("blk.0.attn_v.weight", {kHidden, kHeadDim});
    f32("blk.0.attn_output.weight", {kHeadDim, kHidden});
    f32("blk.0.ffn_gate.weight", {kHidden, kFfn});
    f32("blk.0.ffn_up.weight", {kHidden, kFfn});
    f32("blk.0.ffn_down.weight", {kFfn, kHidden});
    std::vector<float> rope;
    const float low_wavelen = static_cast<float>(k.context) / k.low;
    const float high_wavelen = static_cast<float>(k.context) / k.high;
    for (int64_t i = 0; i < kHeadDim; i += 2) {
      const float freq =
          1.0f / std::pow(500000.0f, static_cast<float>(i) / static_cast<float>(kHeadDim));
      const float wavelen = static_cast<float>(2 * M_PI) / freq;
      if (k.garbage) {
        rope.push_back(1.0f + static_cast<float>(i % 7));
      } else if (wavelen < high_wavelen) {
        rope.push_back(1.0f);
      } else if (wavelen > low_wavelen) {
        rope.push_back(k.factor);
      } else {
        const float smooth = (static_cast<float>(k.context) / wavelen - k.low) / (k.high - k.low);
        rope.push_back(1.0f / ((1.0f - smooth) / k.factor + smooth));
      }
    }
    f32("rope_freqs.weight", {kHeadDim / 2}, rope);
    const auto dir = TempDir("hf_rope");
    WriteText((dir / "m.gguf").string(), b.Bytes());
    DequantOptions o;
    o.hf = true;
    o.dtype = DType::kFloat32;
    DequantReport rep;
    const Status st = DequantCheckpoint((dir / "m.gguf").string(), (dir / "hf").string(), o, &rep);
    REQUIRE_MESSAGE(st.ok(), st.message());
    const std::string config = ReadFile(dir / "hf" / "config.json");
    CHECK(ReadFile(dir / "hf" / "model.safetensors").find("rope_freqs") == std::string::npos);
    if (k.want != nullptr) {
      CHECK_MESSAGE(config.find(k.want) != std::string::npos, config);
    } else {
      CHECK(config.find("rope_scaling") == std::string::npos);
      bool noted = false;
      for (const std::string& n : rep.notes) {
        noted |= n.rfind("rope_freqs.weight is not the llama3 rope scaling", 0) == 0;
      }
      CHECK(noted);
    }
  }
}

TEST_CASE("dequant --hf: a Phi-3 GGUF keeps its fused projections, LongRoPE factors go to config") {
  constexpr int64_t kHidden = 32, kHeads = 4, kFfn = 48, kVocab = 40;
  GgufBuilder b;
  b.KvString("general.architecture", "phi3");
  b.KvU32("phi3.attention.head_count", kHeads);
  b.KvU32("phi3.attention.head_count_kv", kHeads);
  b.KvU32("phi3.embedding_length", kHidden);
  b.KvU32("phi3.feed_forward_length", kFfn);
  b.KvU32("phi3.block_count", 1);
  b.KvU32("phi3.context_length", 131072);
  b.KvU32("phi3.rope.scaling.original_context_length", 4096);
  b.KvU32("phi3.attention.sliding_window", 262144);
  b.Kv("phi3.attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-5f));
  std::map<std::string, std::vector<float>> want;
  int seed = 3;
  auto f32 = [&](const std::string& gguf, const std::string& hf, std::vector<int64_t> ne) {
    const std::vector<float> x = AddF32Tensor(&b, gguf, ne, static_cast<uint64_t>(seed++));
    if (!hf.empty()) want[hf] = x;
  };
  f32("token_embd.weight", "model.embed_tokens.weight", {kHidden, kVocab});
  f32("output_norm.weight", "model.norm.weight", {kHidden});
  f32("output.weight", "lm_head.weight", {kHidden, kVocab});
  f32("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight", {kHidden});
  f32("blk.0.attn_qkv.weight", "model.layers.0.self_attn.qkv_proj.weight", {kHidden, 3 * kHidden});
  f32("blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight", {kHidden, kHidden});
  f32("blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight", {kHidden});
  f32("blk.0.ffn_up.weight", "model.layers.0.mlp.gate_up_proj.weight", {kHidden, 2 * kFfn});
  f32("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", {kFfn, kHidden});
  for (const auto& [name, first] : {std::pair<const char*, float>{"rope_factors_long.weight", 1.5f},
                                    {"rope_factors_short.weight", 1.0f}}) {
    const std::vector<float> f = {first, 2.25f, 3.0f, 40.0f};
    std::vector<uint8_t> bytes(16);
    std::memcpy(bytes.data(), f.data(), 16);
    b.Tensor(name, {4}, kF32, bytes);
  }
  const auto dir = TempDir("hf_phi3");
  WriteText((dir / "m.gguf").string(), b.Bytes());
  DequantOptions o;
  o.hf = true;
  DequantReport rep;
  const Status st = DequantCheckpoint((dir / "m.gguf").string(), (dir / "hf").string(), o, &rep);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::string config = ReadFile(dir / "hf" / "config.json");
  for (const char* kv :
       {"\"architectures\": [\"Phi3ForCausalLM\"]", "\"model_type\": \"phi3\"",
        "\"sliding_window\": 262144", "\"original_max_position_embeddings\": 4096",
        "\"max_position_embeddings\": 131072",
        "\"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": [1.5, 2.25, 3.0, 40.0], "
        "\"short_factor\": [1.0, 2.25, 3.0, 40.0]}"}) {
    CHECK_MESSAGE(config.find(kv) != std::string::npos, kv);
  }
  auto f = SafetensorsFile::Open((dir / "hf" / "model.safetensors").string());
  REQUIRE(f.ok());
  CHECK((*f)->tensors().size() == want.size());
  for (const auto& [name, values] : want) {
    CheckStoredFloats(dir / "hf" / "model.safetensors", name, values);
  }
}

TEST_CASE("dequant --hf: refusals leave nothing behind") {
  const auto dir = TempDir("hf_refuse");
  GgufBuilder b;
  b.KvString("general.architecture", "gpt2");
  b.Tensor("token_embd.weight", {4}, kF32, std::vector<uint8_t>(16, 0));
  WriteText((dir / "gpt2.gguf").string(), b.Bytes());
  DequantOptions o;
  o.hf = true;
  DequantReport rep;
  Status st = DequantCheckpoint((dir / "gpt2.gguf").string(), (dir / "out").string(), o, &rep);
  CHECK(st.message() ==
        "--hf: architecture 'gpt2' is not mapped to Hugging Face names (llama, mistral, qwen2, "
        "qwen3, phi3, qwen2moe, qwen3moe, gpt-oss, gemma2, gemma3, deepseek2 are); convert without "
        "--hf to keep the GGUF names");
  // No general.architecture at all: named as such.
  GgufBuilder none;
  none.Tensor("token_embd.weight", {4}, kF32, std::vector<uint8_t>(16, 0));
  WriteText((dir / "none.gguf").string(), none.Bytes());
  st = DequantCheckpoint((dir / "none.gguf").string(), (dir / "out").string(), o, &rep);
  CHECK(st.message() ==
        "--hf: the file has no general.architecture string, so its model is not known; convert "
        "without --hf to keep the GGUF names");
  // A llama file with a tensor that has no HF name; an existing output.
  GgufBuilder l;
  l.KvString("general.architecture", "llama");
  l.KvU32("llama.attention.head_count", 2);
  l.Tensor("token_embd.weight", {4}, kF32, std::vector<uint8_t>(16, 0));
  l.Tensor("blk.0.mystery.weight", {4}, kF32, std::vector<uint8_t>(16, 0));
  WriteText((dir / "l.gguf").string(), l.Bytes());
  st = DequantCheckpoint((dir / "l.gguf").string(), (dir / "out").string(), o, &rep);
  CHECK(st.message() ==
        "--hf: tensor 'blk.0.mystery.weight' has no Hugging Face name for architecture llama "
        "(leave it out with --exclude)");
  std::filesystem::create_directory(dir / "full");
  WriteText((dir / "full" / "x").string(), "x");
  o.exclude = "mystery";
  st = DequantCheckpoint((dir / "l.gguf").string(), (dir / "full").string(), o, &rep);
  CHECK(st.message() == "--hf output '" + (dir / "full").string() +
                            "' is a folder that is not empty (give a new path, or an empty "
                            "folder)");
  st = DequantCheckpoint((dir / "l.gguf").string(), (dir / "l.gguf").string(), o, &rep);
  CHECK(st.message() == "--hf output '" + (dir / "l.gguf").string() + "' is the input file '" +
                            (dir / "l.gguf").string() +
                            "' (same file); the input is never modified");
  // A file with a trailing slash is still a file: refused before any work.
  st = DequantCheckpoint((dir / "l.gguf").string(), (dir / "full" / "x").string() + "/", o, &rep);
  CHECK(st.message() == "--hf output '" + (dir / "full" / "x").string() +
                            "/' exists and is a regular file, not a folder (a model folder is "
                            "written here: give a new path, or an empty folder)");
  // Neither GGUF nor safetensors.
  st = DequantCheckpoint((dir / "full" / "x").string(), (dir / "o2").string(), o, &rep);
  CHECK(!st.ok());
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    left.insert(e.path().filename().string());
  }
  CHECK(left == std::set<std::string>{"gpt2.gguf", "none.gguf", "l.gguf", "full"});
  // An empty folder is a fine destination.
  std::filesystem::create_directory(dir / "empty");
  st = DequantCheckpoint((dir / "l.gguf").string(), (dir / "empty").string(), o, &rep);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(std::filesystem::exists(dir / "empty" / "model.safetensors"));
  CHECK(std::filesystem::exists(dir / "empty" / "config.json"));
  CHECK(!std::filesystem::exists(dir / "empty" / "model.safetensors.index.json"));
  // Not a model transformers loads: without a selection, refused naming what
  // is missing (a config key, the tensors of the layers); with one (the
  // --exclude above), noted.
  // The file has no tokenizer metadata: the second note says so.
  REQUIRE(rep.notes.size() == 2);
  CHECK(rep.notes[0].find("is not a complete llama model for transformers") != std::string::npos);
  CHECK(rep.notes[1].find("no tokenizer written: the GGUF has no tokenizer.ggml.model") !=
        std::string::npos);
  GgufBuilder inc;
  inc.KvString("general.architecture", "llama");
  inc.KvU32("llama.attention.head_count", 2);
  inc.KvU32("llama.embedding_length", 4);
  inc.KvU32("llama.feed_forward_length", 8);
  inc.KvU32("llama.block_count", 1);
  inc.Kv("llama.attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-5f));
  inc.Tensor("token_embd.weight", {4, 3}, kF32, std::vector<uint8_t>(48, 0));
  inc.Tensor("output_norm.weight", {4}, kF32, std::vector<uint8_t>(16, 0));
  inc.Tensor("blk.0.attn_q.weight", {4, 8}, kF32, std::vector<uint8_t>(128, 0));
  WriteText((dir / "inc.gguf").string(), inc.Bytes());
  DequantOptions all;
  all.hf = true;
  DequantReport inc_rep;
  st = DequantCheckpoint((dir / "inc.gguf").string(), (dir / "inc").string(), all, &inc_rep);
  CHECK(st.message() ==
        "--hf: '" + (dir / "inc.gguf").string() +
            "' is not a complete llama model for transformers: missing or misshapen config key "
            "llama.context_length; tensor model.layers.0.input_layernorm.weight (4); tensor "
            "model.layers.0.post_attention_layernorm.weight (4); tensor "
            "model.layers.0.self_attn.q_proj.weight is (8,4), expected (4,4); tensor "
            "model.layers.0.self_attn.k_proj.weight (4,4); tensor "
            "model.layers.0.self_attn.v_proj.weight (4,4); tensor "
            "model.layers.0.self_attn.o_proj.weight (4,4); tensor "
            "model.layers.0.mlp.gate_proj.weight (8,4); and 2 more");
  CHECK(!std::filesystem::exists(dir / "inc"));
}

}  // namespace
}  // namespace testing
}  // namespace nibble
