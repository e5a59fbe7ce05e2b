// Writes small checkpoints for the CLI tests (and for trying the tool):
//   gptq/        GPTQ v1 folder (config.json, model.safetensors), act-order g_idx
//   awq/         AWQ GEMM folder, sharded with model.safetensors.index.json
//   model.gguf   GGUF v3: Q4_0, Q4_1, Q8_0, Q4_K, F32 tensors
//   unsupported.gguf  an IQ2_XXS tensor and an F32 one
//   llama_tiny.gguf   a complete one-layer llama that --hf turns into a transformers folder
//   truncated.gguf, truncated/ (a GPTQ file and a GPTQ folder cut short: refused by dequant)
//   marlin/      a GPTQ folder whose config asks for the marlin format
//   fp8/         a DeepSeek-style FP8 folder (128 x 128 blocks, partial edge blocks)
// Usage: make_checkpoints OUTDIR [--large N K [LAYERS] | --large-fp8 N K [LAYERS]]
// (large: a GPTQ folder of LAYERS (default 1) N x K layers, G = 128; large-fp8:
// an FP8 folder large_fp8/ of LAYERS N x K layers, one 2 GB shard per ~2 GB).
// Prints each path it writes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench/synthetic_weights.h"
#include "formats/gguf.h"
#include "testing/quantize_checkpoint.h"
#include "tests/checkpoint_writers.h"
#include "tests/generator_args.h"

namespace nibble {
namespace testing {
namespace {

namespace fs = std::filesystem;

int Fail(const Status& s) {
  std::cerr << "make_checkpoints: " << s.message() << "\n";
  return 1;
}

// `layers` > 1: the same quantized weight stored under `layers` names
// (model.layers.L.self_attn.q_proj), a multi-GB checkpoint made quickly.
Status WriteGptq(const fs::path& dir, int64_t N, int64_t K, int64_t G, bool act_order,
                 int layers = 1) {
  fs::create_directories(dir);
  const auto w = MakeLlmLikeWeight(N, K, 21);
  std::vector<int32_t> gidx;
  if (act_order) {
    for (int64_t k = 0; k < K; ++k) gidx.push_back(static_cast<int32_t>((k * 5 % K) / G));
  }
  auto t = QuantizeGptq(w.data(), N, K, G, false, false, gidx);
  if (!t.ok()) return t.status();
  auto bias = *Tensor::Allocate(DType::kFloat32, {N});
  for (int64_t n = 0; n < N; ++n) bias.data_as<float>()[n] = 0.25f * static_cast<float>(n);
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.q_proj";
    tensors.insert(tensors.end(), {{p + ".qweight", &t->qweight},
                                   {p + ".qzeros", &t->qzeros},
                                   {p + ".scales", &t->scales},
                                   {p + ".g_idx", &t->g_idx},
                                   {p + ".bias", &bias}});
  }
  NIBBLE_RETURN_IF_ERROR(WriteSafetensors((dir / "model.safetensors").string(), tensors));
  WriteText(
      (dir / "config.json").string(),
      R"({"model_type":"llama","quantization_config":{"quant_method":"gptq","bits":4,"group_size":)" +
          std::to_string(G) + R"(,"desc_act":)" + (act_order ? "true" : "false") +
          R"(,"sym":false,"checkpoint_format":"gptq"}})");
  return Status::Ok();
}

// A DeepSeek-V3-style FP8 folder: `layers` q_proj weights [N, K] in
// float8_e4m3fn with float32 weight_scale_inv blocks of 128 x 128, a bf16
// embedding, shards of at most `shard_bytes` with an index when there is
// more than one.
Status WriteFp8(const fs::path& dir, int64_t N, int64_t K, int layers, uint64_t shard_bytes) {
  fs::create_directories(dir);
  const auto w = MakeLlmLikeWeight(N, K, 41);
  auto q = QuantizeFp8Blocks(w.data(), N, K, 128);
  if (!q.ok()) return q.status();
  auto codes = Tensor::Allocate(DType::kFloat8E4M3FN, {N, K});
  if (!codes.ok()) return codes.status();
  std::memcpy(codes->data(), q->weight.data(), q->weight.size_bytes());
  auto embed = Tensor::Allocate(DType::kBFloat16, {16, K});
  if (!embed.ok()) return embed.status();
  for (int64_t i = 0; i < 16 * K; ++i) {
    embed->data_as<uint16_t>()[i] = static_cast<uint16_t>(0x3C00 + (i % 251));
  }
  std::vector<std::vector<std::pair<std::string, const Tensor*>>> shards(1);
  uint64_t in_shard = embed->size_bytes();
  shards[0].push_back({"model.embed_tokens.weight", &*embed});
  std::vector<std::string> names;
  for (int l = 0; l < layers; ++l) {
    const uint64_t bytes = codes->size_bytes() + q->scale_inv.size_bytes();
    if (in_shard > 0 && in_shard + bytes > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.q_proj";
    shards.back().push_back({p + ".weight", &*codes});
    shards.back().push_back({p + ".weight_scale_inv", &q->scale_inv});
    in_shard += bytes;
  }
  std::string index = R"({"metadata":{},"weight_map":{)";
  bool first = true;
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    const std::string file = shards.size() == 1 ? "model.safetensors" : name;
    NIBBLE_RETURN_IF_ERROR(WriteSafetensors((dir / file).string(), shards[i]));
    std::cout << (dir / file).string() << "\n";
    for (const auto& t : shards[i]) {
      index += std::string(first ? "" : ",") + "\"" + t.first + "\":\"" + file + "\"";
      first = false;
    }
  }
  if (shards.size() > 1) WriteText((dir / "model.safetensors.index.json").string(), index + "}}");
  WriteText((dir / "config.json").string(),
            R"({"architectures":["DeepseekV3ForCausalLM"],"model_type":"deepseek_v3",)"
            R"("torch_dtype":"bfloat16","quantization_config":{"quant_method":"fp8",)"
            R"("activation_scheme":"dynamic","fmt":"e4m3","weight_block_size":[128,128]}})");
  std::cout << dir.string() << "/\n";
  return Status::Ok();
}

int Main(int argc, char** argv) {
  if (const int rc =
          CheckGeneratorArgs(argc, argv,
                             "make_checkpoints OUTDIR [--large N K [LAYERS] | --large-fp8 N K "
                             "[LAYERS]]");
      rc >= 0) {
    return rc;
  }
  if (argc < 2) {
    std::cerr
        << "usage: make_checkpoints OUTDIR [--large N K [LAYERS] | --large-fp8 N K [LAYERS]]\n";
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out);
  if ((argc == 5 || argc == 6) && std::string(argv[2]) == "--large-fp8") {
    const int layers = argc == 6 ? std::atoi(argv[5]) : 1;
    if (layers < 1 || layers > 100000) {
      std::cerr << "make_checkpoints: LAYERS must be 1..100000\n";
      return 2;
    }
    const Status s = WriteFp8(out / "large_fp8", std::atoll(argv[3]), std::atoll(argv[4]), layers,
                              uint64_t{2} << 30);
    return s.ok() ? 0 : Fail(s);
  }
  if ((argc == 5 || argc == 6) && std::string(argv[2]) == "--large") {
    const int layers = argc == 6 ? std::atoi(argv[5]) : 1;
    if (layers < 1 || layers > 100000) {
      std::cerr << "make_checkpoints: LAYERS must be 1..100000\n";
      return 2;
    }
    const Status s =
        WriteGptq(out / "large_gptq", std::atoll(argv[3]), std::atoll(argv[4]), 128, false, layers);
    return s.ok() ? 0 : Fail(s);
  }
  Status s = WriteGptq(out / "gptq", 64, 256, 64, true);
  if (!s.ok()) return Fail(s);

  {  // AWQ, two shards and an index.
    const fs::path dir = out / "awq";
    fs::create_directories(dir);
    const int64_t N = 128, K = 192, G = 64;
    const auto w = MakeLlmLikeWeight(N, K, 22);
    auto a = QuantizeAwq(w.data(), N, K, G);
    if (!a.ok()) return Fail(a.status());
    const std::string p = "model.layers.0.mlp.gate_proj";
    s = WriteSafetensors((dir / "model-00001-of-00002.safetensors").string(),
                         {{p + ".qweight", &a->qweight}, {p + ".qzeros", &a->qzeros}});
    if (!s.ok()) return Fail(s);
    s = WriteSafetensors((dir / "model-00002-of-00002.safetensors").string(),
                         {{p + ".scales", &a->scales}});
    if (!s.ok()) return Fail(s);
    WriteText(
        (dir / "config.json").string(),
        R"({"quantization_config":{"quant_method":"awq","bits":4,"group_size":64,"version":"gemm","zero_point":true}})");
    WriteText((dir / "model.safetensors.index.json").string(),
              R"({"metadata":{},"weight_map":{")" + p +
                  R"(.qweight":"model-00001-of-00002.safetensors",")" + p +
                  R"(.qzeros":"model-00001-of-00002.safetensors",")" + p +
                  R"(.scales":"model-00002-of-00002.safetensors"}})");
  }
  std::string gguf;
  {
    GgufBuilder b;
    b.KvString("general.architecture", "llama");
    b.KvU32("general.alignment", 32);
    const auto w = MakeLlmLikeWeight(32, 512, 23);
    for (uint32_t type : {kGgmlQ4_0, kGgmlQ4_1, kGgmlQ8_0, kGgmlQ4_K}) {
      auto q = QuantizeGgml(type, w.data(), 32, 512);
      if (!q.ok()) return Fail(q.status());
      b.Tensor("blk.0." + GgmlTypeName(type) + ".weight", {512, 32}, type, *q);
    }
    std::vector<uint8_t> norm(512 * 4);
    std::memcpy(norm.data(), w.data(), norm.size());
    b.Tensor("output_norm.weight", {512}, kGgmlF32, norm);
    gguf = b.Bytes();
    WriteText((out / "model.gguf").string(), gguf);
    WriteText((out / "truncated.gguf").string(), gguf.substr(0, gguf.size() - 100));
    // A complete one-layer llama (hidden 256, 4 heads of 64, 2 KV heads,
    // FFN 512, vocabulary 64) that --hf turns into a folder transformers
    // loads.
    GgufBuilder t;
    t.KvString("general.architecture", "llama");
    t.KvU32("llama.attention.head_count", 4);
    t.KvU32("llama.attention.head_count_kv", 2);
    t.KvU32("llama.embedding_length", 256);
    t.KvU32("llama.feed_forward_length", 512);
    t.KvU32("llama.block_count", 1);
    t.KvU32("llama.context_length", 2048);
    t.Kv("llama.attention.layer_norm_rms_epsilon", 6, GgufBuilder::Enc(1e-5f));
    t.Kv("llama.rope.freq_base", 6, GgufBuilder::Enc(10000.0f));
    struct Part {
      const char* name;
      uint32_t type;  // 0: float32 vector
      int64_t rows, cols;
    };
    uint64_t seed = 30;
    for (const Part& p :
         {Part{"token_embd.weight", kGgmlQ4_K, 64, 256}, Part{"output_norm.weight", 0, 256, 1},
          Part{"output.weight", kGgmlQ8_0, 64, 256}, Part{"blk.0.attn_norm.weight", 0, 256, 1},
          Part{"blk.0.attn_q.weight", kGgmlQ8_0, 256, 256},
          Part{"blk.0.attn_k.weight", kGgmlQ4_0, 128, 256},
          Part{"blk.0.attn_v.weight", kGgmlQ4_K, 128, 256},
          Part{"blk.0.attn_output.weight", kGgmlQ8_0, 256, 256},
          Part{"blk.0.ffn_norm.weight", 0, 256, 1},
          Part{"blk.0.ffn_gate.weight", kGgmlQ4_0, 512, 256},
          Part{"blk.0.ffn_up.weight", kGgmlQ4_1, 512, 256},
          Part{"blk.0.ffn_down.weight", kGgmlQ4_K, 256, 512}}) {
      const auto x = MakeLlmLikeWeight(p.rows, p.cols, seed++);
      if (p.type == 0) {
        std::vector<uint8_t> bytes(x.size() * 4);
        std::memcpy(bytes.data(), x.data(), bytes.size());
        t.Tensor(p.name, {p.rows}, kGgmlF32, bytes);
        continue;
      }
      auto q = QuantizeGgml(p.type, x.data(), p.rows, p.cols);
      if (!q.ok()) return Fail(q.status());
      t.Tensor(p.name, {p.cols, p.rows}, p.type, *q);
    }
    WriteText((out / "llama_tiny.gguf").string(), t.Bytes());
    GgufBuilder u;
    u.Tensor("output.weight", {256, 2}, 15 /* q8_k: an activation type */,
             std::vector<uint8_t>(2 * 292));
    u.Tensor("output_norm.weight", {512}, kGgmlF32, norm);
    WriteText((out / "unsupported.gguf").string(), u.Bytes());
  }
  s = WriteGptq(out / "truncated", 16, 64, 32, false);
  if (!s.ok()) return Fail(s);
  fs::resize_file(out / "truncated" / "model.safetensors",
                  fs::file_size(out / "truncated" / "model.safetensors") - 7);
  s = WriteFp8(out / "fp8", 200, 300, 2, uint64_t{1} << 40);
  if (!s.ok()) return Fail(s);
  s = WriteGptq(out / "marlin", 16, 64, 32, false);
  if (!s.ok()) return Fail(s);
  WriteText(
      (out / "marlin" / "config.json").string(),
      R"({"quantization_config":{"quant_method":"gptq","bits":4,"group_size":32,"checkpoint_format":"marlin"}})");
  for (const char* name : {"gptq/", "awq/", "model.gguf", "unsupported.gguf", "llama_tiny.gguf",
                           "truncated.gguf", "truncated/", "marlin/"}) {
    std::cout << (out / name).string() << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace testing
}  // namespace nibble

int main(int argc, char** argv) { return nibble::testing::Main(argc, argv); }
