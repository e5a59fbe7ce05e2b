#include "checkpoint/hf_export.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "checkpoint/hf_tokenizer.h"
#include "formats/atomic_file.h"
#include "formats/files.h"
#include "formats/gguf.h"
#include "formats/safetensors_writer.h"
#include "kernels/convert.h"
#include "op/lowering.h"

namespace nibble {

namespace {

namespace fs = std::filesystem;

// How a mixture-of-experts model names its experts in transformers.
enum class Moe {
  kNone,
  kMixtral,   // block_sparse_moe.gate, block_sparse_moe.experts.E.w1 / w2 / w3
  kQwen,      // mlp.gate, mlp.experts.E.gate_proj / up_proj / down_proj
  kGptOss,    // mlp.router, mlp.experts.gate_up_proj [E, hidden, 2 ff] (gate / up
              // interleaved by column), down_proj [E, ff, hidden], and their biases
  kDeepseek,  // as kQwen, mlp.shared_experts.*, mlp.gate.e_score_correction_bias (V3)
};

// An architecture --hf maps: llama.cpp's converter (convert_hf_to_gguf.py)
// defines the forward direction, transformers' GGUF loader the reverse.
struct HfArch {
  const char* arch;        // general.architecture
  const char* cls;         // config.json architectures[0]
  const char* model_type;  // config.json model_type
  bool permute_qk;         // llama.cpp permuted attn_q / attn_k rows (llama family)
  bool qkv_bias;           // q / k / v projections have biases (Qwen2)
  bool qk_norm;            // q / k RMS norms per head (Qwen3)
  bool fused;              // Phi-3's fused qkv_proj / gate_up_proj
  Moe moe;
  bool shared_expert;   // Qwen2-MoE's shared expert and its gate
  bool norm_topk_prob;  // the router's top-k weights renormalized (llama.cpp's norm_w)
  // Gemma 2 / 3: four norms per layer (input, post-attention,
  // pre- and post-feedforward), every RMS norm stored by llama.cpp's
  // converter as 1 + w (transformers' GemmaRMSNorm multiplies by 1 + w),
  // GELU (tanh) MLPs, sliding-window layers.
  bool gemma = false;
  // DeepSeek-V2 / V3 (llama.cpp's deepseek2): multi-head latent attention
  // (q_a / q_b or q, kv_a_proj_with_mqa, kv_b — which llama.cpp's newer
  // converter splits into attn_k_b / attn_v_b), the first
  // leading_dense_block_count layers dense, the others sparse MoE with
  // shared experts.
  bool mla = false;
};
constexpr HfArch kHfArchs[] = {
    {"llama", "LlamaForCausalLM", "llama", true, false, false, false, Moe::kNone, false, false},
    {"mistral", "MistralForCausalLM", "mistral", true, false, false, false, Moe::kNone, false,
     false},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", false, true, false, false, Moe::kNone, false, false},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", false, false, true, false, Moe::kNone, false, false},
    {"phi3", "Phi3ForCausalLM", "phi3", false, false, false, true, Moe::kNone, false, false},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe", false, true, false, false, Moe::kQwen, true,
     false},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", false, false, true, false, Moe::kQwen, false,
     true},
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss", false, true, false, false, Moe::kGptOss, false,
     false},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", false, false, false, false, Moe::kNone, false, false,
     true},
    // Gemma 3's text model (llama.cpp's gemma3 file holds no vision tower).
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", false, false, true, false, Moe::kNone, false,
     false, true},
    // DeepSeek-V2 (softmax router); a file with V3's sigmoid router
    // (expert_gating_func 2, exp_probs_b) is DeepSeek-V3 (kDeepseekV3).
    {"deepseek2", "DeepseekV2ForCausalLM", "deepseek_v2", false, false, false, false,
     Moe::kDeepseek, false, false, false, true},
};
constexpr HfArch kDeepseekV3 = {
    "deepseek2", "DeepseekV3ForCausalLM", "deepseek_v3", false, false, false,
    false,       Moe::kDeepseek,          false,         false, false, true};
// A llama-family file with experts is Mixtral (llama.cpp's converter writes
// MixtralForCausalLM as architecture "llama" with expert_count).
constexpr HfArch kMixtral = {"llama", "MixtralForCausalLM", "mixtral", true, false, false,
                             false,   Moe::kMixtral,        false,     true};

const HfArch* FindHfArch(const std::string& arch) {
  for (const HfArch& a : kHfArchs) {
    if (arch == a.arch) return &a;
  }
  return nullptr;
}

std::string MappedArchNames() {
  std::string names;
  for (const HfArch& a : kHfArchs) names += (names.empty() ? "" : ", ") + std::string(a.arch);
  return names;
}

// The shortest decimal that reads back as the same float32 (GGUF keeps
// float32: 1e-5 stays "1e-05", not "9.99999975e-06").
std::string JsonFloat(double v) {
  const float f = static_cast<float>(v);
  char buf[64];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// Splits "blk.N.<part>.weight" into N and <part> (false for other names).
bool SplitBlockName(const std::string& g, std::string* layer, std::string* part) {
  if (g.rfind("blk.", 0) != 0) return false;
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4) return false;
  *layer = g.substr(4, dot - 4);
  if (layer->find_first_not_of("0123456789") != std::string::npos) return false;
  const std::string rest = g.substr(dot + 1);
  if (rest.size() < 8 || rest.compare(rest.size() - 7, 7, ".weight") != 0) return false;
  *part = rest.substr(0, rest.size() - 7);
  return true;
}

// The expert matrix of llama.cpp part `part` (ffn_gate / ffn_up /
// ffn_down): Mixtral's w1 = gate, w2 = down, w3 = up (transformers'
// MixtralSparseMoeBlock), Qwen-MoE's gate_proj / up_proj / down_proj; ""
// for other parts.
const char* ExpertWeight(Moe moe, const std::string& part) {
  const bool mixtral = moe == Moe::kMixtral;
  if (part == "ffn_gate") return mixtral ? "w1" : "gate_proj";
  if (part == "ffn_down") return mixtral ? "w2" : "down_proj";
  if (part == "ffn_up") return mixtral ? "w3" : "up_proj";
  return "";
}

// "model.layers.L.<moe block>." of an MoE architecture.
std::string MoePrefix(Moe moe, const std::string& layer) {
  return "model.layers." + layer + (moe == Moe::kMixtral ? ".block_sparse_moe." : ".mlp.");
}

std::string ExpertName(Moe moe, const std::string& layer, int64_t expert, const char* w) {
  return MoePrefix(moe, layer) + "experts." + std::to_string(expert) + "." + w + ".weight";
}

// Llama 3.1+'s rope scaling: transformers computes the rotary frequencies
// from config.json's rope_scaling {factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings}; llama.cpp's
// converter stores what they produce per frequency instead (rope_freqs:
// 1 above wavelength L / hi, `factor` below L / lo, 1 / ((1 - s) / factor
// + s) with s = (L / wavelength - lo) / (hi - lo) between). The parameters
// are recovered from the tensor — a fit of the blended entries, then the
// released values (Llama 3.1 / 3.3: 8, 1, 4, 8192; 3.2: 32, 1, 4, 8192) —
// and kept only if they reproduce every entry (to float32 rounding).
struct Llama3Rope {
  double factor = 0, low = 0, high = 0;
  int64_t original_context = 0;
};
std::vector<double> Llama3RopeFactors(const Llama3Rope& r, double theta, size_t n) {
  std::vector<double> out(n);
  const double low_wavelen = static_cast<double>(r.original_context) / r.low;
  const double high_wavelen = static_cast<double>(r.original_context) / r.high;
  for (size_t i = 0; i < n; ++i) {
    const double freq =
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(2 * n));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out[i] = 1.0;
    } else if (wavelen > low_wavelen) {
      out[i] = r.factor;
    } else {
      const double smooth =
          (static_cast<double>(r.original_context) / wavelen - r.low) / (r.high - r.low);
      out[i] = 1.0 / ((1.0 - smooth) / r.factor + smooth);
    }
  }
  return out;
}
std::optional<Llama3Rope> FitLlama3Rope(const std::vector<float>& f, double theta) {
  if (f.size() < 2 || !(f.back() > 1.0f) || !std::isfinite(f.back())) return std::nullopt;
  const double factor = f.back();
  std::vector<Llama3Rope> candidates;
  // The blended entries: s = (L / wavelength - lo) / (hi - lo) is linear in
  // 1 / wavelength: s = a / wavelength + b, a = L / (hi - lo), b = -lo / (hi - lo).
  std::vector<std::pair<double, double>> pts;  // (1 / wavelength, s)
  const size_t n = f.size();
  for (size_t i = 0; i < n; ++i) {
    const double v = f[i];
    if (v > 1.0 + 1e-6 && v < factor * (1 - 1e-6)) {
      const double freq =
          1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(2 * n));
      pts.emplace_back(freq / (2 * M_PI), (1.0 / v - 1.0 / factor) / (1.0 - 1.0 / factor));
    }
  }
  if (pts.size() >= 2) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [x, y] : pts) sx += x, sy += y, sxx += x * x, sxy += x * y;
    const double m = static_cast<double>(pts.size()), den = m * sxx - sx * sx;
    if (den != 0) {
      const double a = (m * sxy - sx * sy) / den, b = (sy - a * sx) / m;
      for (double lo : {1.0, 0.5, 2.0}) {  // one more relation is needed: lo
        if (b >= 0) break;
        const double hi = lo - lo / b;
        const double context = a * (hi - lo);
        if (context > 0 && context < 1e9) {
          // The fit is only as exact as float32: the roundest values that
          // reproduce the tensor win (4, not 3.999999).
          for (double scale : {1.0, 10.0, 100.0, 1000.0, 1e6}) {
            candidates.push_back({factor, lo, std::round(hi * scale) / scale,
                                  static_cast<int64_t>(std::llround(context))});
          }
        }
      }
    }
  }
  candidates.push_back({factor, 1.0, 4.0, 8192});
  for (const Llama3Rope& r : candidates) {
    if (!(r.high > r.low) || r.original_context <= 0) continue;
    const std::vector<double> want = Llama3RopeFactors(r, theta, n);
    bool same = true;
    for (size_t i = 0; i < n && same; ++i) same = std::fabs(want[i] - f[i]) <= 1e-5 * want[i];
    if (same) return r;
  }
  return std::nullopt;
}

// "blk.N.<part>.weight" / ".bias" -> N, <part> and the suffix.
bool SplitBlockTensor(const std::string& g, std::string* layer, std::string* part,
                      std::string* suffix) {
  if (g.rfind("blk.", 0) != 0) return false;
  const size_t dot = g.find('.', 4), last = g.rfind('.');
  if (dot == std::string::npos || dot == 4 || last <= dot + 1) return false;
  *layer = g.substr(4, dot - 4);
  if (layer->find_first_not_of("0123456789") != std::string::npos) return false;
  *part = g.substr(dot + 1, last - dot - 1);
  *suffix = g.substr(last);
  return *suffix == ".weight" || *suffix == ".bias";
}

template <int kBytes>
void InterleaveTransposedAs(const uint8_t* const* parts, int n_parts, int64_t rows, int64_t cols,
                            uint8_t* dst) {
  const int64_t out_cols = n_parts * rows;
  constexpr int64_t kBlock = 32;  // a block of each part stays in cache
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t r1 = std::min(rows, r0 + kBlock);
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      for (int k = 0; k < n_parts; ++k) {
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* src = parts[k] + (r * cols + c0) * kBytes;
          for (int64_t c = c0; c < c1; ++c, src += kBytes) {
            std::memcpy(dst + (c * out_cols + n_parts * r + k) * kBytes, src, kBytes);
          }
        }
      }
    }
  }
}

// gpt-oss's experts back into transformers' layout (llama.cpp's converter
// took gate / up from the even / odd rows of the interleaved gate_up_proj
// and transposed both, and down_proj): of `n_parts` row-major [rows, cols]
// matrices of `bytes`-byte elements, writes the [cols, n_parts * rows]
// matrix whose column n_parts * r + k is row r of part k. One part: a
// transpose. Bytes moved, no value changed.
void InterleaveTransposed(const uint8_t* const* parts, int n_parts, int64_t rows, int64_t cols,
                          int64_t bytes, uint8_t* dst) {
  switch (bytes) {
    case 2:
      return InterleaveTransposedAs<2>(parts, n_parts, rows, cols, dst);
    case 4:
      return InterleaveTransposedAs<4>(parts, n_parts, rows, cols, dst);
    default:
      return InterleaveTransposedAs<8>(parts, n_parts, rows, cols, dst);
  }
}

// The <arch>.* metadata of a GGUF file: a key's value, an integer one
// (any integer type), a float one (f32 / f64); false where absent or of
// another type.
struct ArchKeys {
  const GgufFile& g;
  std::string arch;
  const GgufValue* Find(const std::string& key) const { return g.Find(arch + "." + key); }
  bool Int(const std::string& key, int64_t* v) const {
    const GgufValue* x = Find(key);
    return x != nullptr && GgufIntValue(*x, v);
  }
  bool Float(const std::string& key, double* v) const {
    const GgufValue* x = Find(key);
    if (x == nullptr || (x->type != GgufValueType::kF32 && x->type != GgufValueType::kF64)) {
      return false;
    }
    *v = x->f;
    return true;
  }
};

// transformers' layer_types for llama.cpp's sliding-window layers:
// is_swa(il) = il % period < period - 1 (llama_hparams::set_swa_pattern;
// period 0: every layer), none when `sliding` is false. The period is
// <arch>.attention.sliding_window_pattern when the file has one (a single
// integer; a per-layer list is refused), else `period`.
StatusOr<std::string> LayerTypes(const GgufFile& g, const std::string& arch, int64_t layers,
                                 bool sliding, int64_t period) {
  if (const GgufValue* p = g.Find(arch + ".attention.sliding_window_pattern")) {
    if (!GgufIntValue(*p, &period) || period < 0) {
      return Status::Error("'" + arch + ".attention.sliding_window_pattern' is " + p->ToString() +
                           ", not one period (a per-layer list is not mapped)");
    }
  }
  std::string types = "[";
  for (int64_t il = 0; il < layers; ++il) {
    const bool swa = sliding && (period == 0 || il % period < period - 1);
    types += std::string(il ? ", " : "") + (swa ? "\"sliding_attention\"" : "\"full_attention\"");
  }
  return types + "]";
}

// config.json's Gemma 2 / Gemma 3 keys, as llama.cpp runs the file
// (src/models/gemma2.cpp, gemma3.cpp load_arch_hparams) in the names of
// transformers' Gemma2Config / Gemma3TextConfig. `add(key, json)` appends
// one; a setting the file states that transformers cannot express is an
// error naming it.
Status AddGemmaConfig(const ArchKeys& keys, int64_t n_head,
                      const std::function<void(const std::string&, const std::string&)>& add) {
  const std::string& arch = keys.arch;
  const bool gemma2 = arch == "gemma2";
  int64_t layers = 0, hidden = 0, head_dim = 0;
  keys.Int("block_count", &layers);
  keys.Int("embedding_length", &hidden);
  add("hidden_activation", "\"gelu_pytorch_tanh\"");
  if (!keys.Int("attention.key_length", &head_dim)) {
    head_dim = hidden / n_head;  // llama.cpp's n_embd_head_k default
    add("head_dim", std::to_string(head_dim));
  }
  // The query scale: 1 / sqrt(n_embd / n_head) for the 27B models (Gemma 2:
  // 46 layers, Gemma 3: 62), 1 / sqrt(head_dim) for every other size.
  const bool is_27b = layers == (gemma2 ? 46 : 62);
  add("query_pre_attn_scalar", std::to_string(is_27b ? hidden / n_head : head_dim));
  // Sliding-window layers: llama.cpp's is_swa(il) = il % p < p - 1, p from
  // attention.sliding_window_pattern (Gemma 2: 2, Gemma 3: 6); Gemma 2
  // always slides (window 4096 unless stated), Gemma 3 only with a window.
  int64_t window = gemma2 ? 4096 : 0, period = gemma2 ? 2 : 6;
  const bool has_window = keys.Int("attention.sliding_window", &window);
  const bool sliding = gemma2 || (has_window && window > 0);
  auto types = LayerTypes(keys.g, arch, layers, sliding, period);
  if (!types.ok()) return types.status();
  keys.Int("attention.sliding_window_pattern", &period);
  add("sliding_window", sliding ? std::to_string(window) : "null");
  add("layer_types", *types);
  if (!gemma2 && sliding) add("sliding_window_pattern", std::to_string(period));
  // Soft-capping: Gemma 2 caps attention (default 50) and logits (30);
  // Gemma 3 only logits, when the file says so.
  double attn_cap = 50.0, final_cap = gemma2 ? 30.0 : 0.0;
  keys.Float("final_logit_softcapping", &final_cap);
  if (gemma2) {
    keys.Float("attn_logit_softcapping", &attn_cap);
    add("attn_logit_softcapping", JsonFloat(attn_cap));
  } else {
    add("attn_logit_softcapping", "null");
  }
  add("final_logit_softcapping", final_cap != 0.0 ? JsonFloat(final_cap) : "null");
  // RoPE: one base for both kinds of layer in Gemma 2; Gemma 3's local
  // layers have their own (default 10000) and its linear scaling applies to
  // the global layers only (as in transformers).
  double base = 10000.0, local = 10000.0;
  const bool has_base = keys.Float("rope.freq_base", &base);
  const bool has_local = keys.Float("rope.freq_base_swa", &local);
  if (!has_base) add("rope_theta", JsonFloat(base));  // llama.cpp's default
  if (gemma2) {
    if (has_local && local != base) {
      return Status::Error("'" + arch + ".rope.freq_base_swa' (" + JsonFloat(local) +
                           ") differs from rope.freq_base: Gemma2Config has one rope_theta");
    }
  } else {
    add("rope_local_base_freq", JsonFloat(local));
  }
  const GgufValue* type = keys.Find("rope.scaling.type");
  double factor = 1.0;
  keys.Float("rope.scaling.factor", &factor);
  const std::string kind = type != nullptr && type->type == GgufValueType::kString ? type->s : "";
  if (type != nullptr && kind != "none" && kind != "linear") {
    return Status::Error("'" + arch + ".rope.scaling.type' is " + type->ToString() +
                         " (Gemma maps none or linear)");
  }
  if (kind == "linear" && factor != 1.0) {
    if (gemma2) {
      return Status::Error("'" + arch + ".rope.scaling' is linear x" + JsonFloat(factor) +
                           ": Gemma2Config has no rope scaling");
    }
    add("rope_scaling", "{\"rope_type\": \"linear\", \"factor\": " + JsonFloat(factor) + "}");
  }
  return Status::Ok();
}

// config.json's gpt-oss keys (GptOssConfig), as llama.cpp runs the file
// (src/models/openai-moe.cpp): sliding-window layers every other layer
// (window required), SwiGLU clamped at 7 (llama-graph.cpp's constant for
// gpt-oss), YaRN rope scaling from rope.scaling.* with llama.cpp's default
// betas 32 / 1. Settings transformers' YaRN cannot hold are errors.
Status AddGptOssConfig(const ArchKeys& keys,
                       const std::function<void(const std::string&, const std::string&)>& add) {
  const std::string& arch = keys.arch;
  int64_t layers = 0, window = 0, orig = 0;
  keys.Int("block_count", &layers);
  if (!keys.Int("attention.sliding_window", &window) || window <= 0) {
    return Status::Error("GGUF key '" + arch +
                         ".attention.sliding_window' is missing (llama.cpp requires it)");
  }
  auto types = LayerTypes(keys.g, arch, layers, true, 2);
  if (!types.ok()) return types.status();
  add("attention_bias", "true");
  add("sliding_window", std::to_string(window));
  add("layer_types", *types);
  add("swiglu_limit", "7.0");
  const GgufValue* type = keys.Find("rope.scaling.type");
  const std::string kind = type != nullptr && type->type == GgufValueType::kString ? type->s : "";
  if (type != nullptr && kind != "none" && kind != "yarn") {
    return Status::Error("'" + arch + ".rope.scaling.type' is " + type->ToString() +
                         " (gpt-oss maps none or yarn)");
  }
  double factor = 1.0, beta_fast = 32.0, beta_slow = 1.0, v = 0;
  if (keys.Float("rope.scaling.attn_factor", &v) && v != 1.0) {
    return Status::Error("'" + arch + ".rope.scaling.attn_factor' is " + JsonFloat(v) +
                         " (transformers' YaRN derives it from the factor)");
  }
  if (keys.Float("rope.scaling.yarn_log_multiplier", &v) && v != 0.0) {
    return Status::Error("'" + arch + ".rope.scaling.yarn_log_multiplier' is " + JsonFloat(v) +
                         " (not mapped for gpt-oss)");
  }
  if (kind == "yarn") {
    keys.Float("rope.scaling.factor", &factor);
    keys.Float("rope.scaling.yarn_beta_fast", &beta_fast);
    keys.Float("rope.scaling.yarn_beta_slow", &beta_slow);
    if (!keys.Int("rope.scaling.original_context_length", &orig) || orig <= 0) {
      return Status::Error("GGUF key '" + arch +
                           ".rope.scaling.original_context_length' is missing (YaRN needs it)");
    }
    add("rope_scaling",
        "{\"rope_type\": \"yarn\", \"factor\": " + JsonFloat(factor) + ", \"beta_fast\": " +
            JsonFloat(beta_fast) + ", \"beta_slow\": " + JsonFloat(beta_slow) +
            ", \"original_max_position_embeddings\": " + std::to_string(orig) + "}");
    add("initial_context_length", std::to_string(orig));
  }
  return Status::Ok();
}

// config.json's DeepSeek-V2 / V3 keys (DeepseekV2Config / DeepseekV3Config)
// from llama.cpp's deepseek2 metadata (convert_hf_to_gguf.py
// DeepseekV2Model.set_gguf_parameters wrote them). YaRN: llama.cpp keeps
// factor, original context and yarn_log_multiplier = 0.1 * mscale_all_dim
// (and runs with mscale == mscale_all_dim, beta_fast 32, beta_slow 1,
// which is what is written).
Status AddDeepseekConfig(const ArchKeys& keys, bool v3,
                         const std::function<void(const std::string&, const std::string&)>& add) {
  const std::string& arch = keys.arch;
  int64_t v = 0, rope = 0, qk = 0, vdim = 0;
  double f = 0;
  auto int_or = [&](const char* key, int64_t fallback) {
    int64_t x = fallback;
    keys.Int(key, &x);
    return std::to_string(x);
  };
  if (keys.Int("expert_feed_forward_length", &v)) add("moe_intermediate_size", std::to_string(v));
  add("n_shared_experts", int_or("expert_shared_count", 0));
  add("first_k_dense_replace", int_or("leading_dense_block_count", 0));
  add("routed_scaling_factor", JsonFloat(keys.Float("expert_weights_scale", &f) ? f : 1.0));
  const GgufValue* norm = keys.Find("expert_weights_norm");
  add("norm_topk_prob",
      norm != nullptr && norm->type == GgufValueType::kBool && norm->u != 0 ? "true" : "false");
  add("kv_lora_rank", int_or("attention.kv_lora_rank", 0));
  if (keys.Int("attention.q_lora_rank", &v) && v > 0) {
    add("q_lora_rank", std::to_string(v));
  } else {
    add("q_lora_rank", "null");  // DeepSeek-V2-Lite: a plain q_proj
  }
  keys.Int("rope.dimension_count", &rope);
  if (!keys.Int("attention.key_length_mla", &qk)) keys.Int("attention.key_length", &qk);
  if (!keys.Int("attention.value_length_mla", &vdim)) keys.Int("attention.value_length", &vdim);
  add("qk_rope_head_dim", std::to_string(rope));
  add("qk_nope_head_dim", std::to_string(qk - rope));
  add("v_head_dim", std::to_string(vdim));
  const std::string groups = int_or("expert_group_count", 1);
  add("n_group", groups);
  add("topk_group", int_or("expert_group_used_count", 1));
  add("topk_method",
      v3 ? "\"noaux_tc\"" : (groups == "1" ? "\"greedy\"" : "\"group_limited_greedy\""));
  if (!v3) add("scoring_func", "\"softmax\"");
  add("attention_bias", "false");
  const GgufValue* type = keys.Find("rope.scaling.type");
  if (type != nullptr && type->type == GgufValueType::kString && type->s != "none") {
    if (type->s != "yarn") {
      return Status::Error("'" + arch + ".rope.scaling.type' is '" + EscapeBytes(type->s) +
                           "' (DeepSeek maps none or yarn)");
    }
    double factor = 0, log_mul = 0;
    int64_t orig = 0;
    if (!keys.Float("rope.scaling.factor", &factor) || !(factor > 0)) {
      return Status::Error("GGUF key '" + arch +
                           ".rope.scaling.factor' is missing (YaRN needs it)");
    }
    if (!keys.Int("rope.scaling.original_context_length", &orig) || orig <= 0) {
      return Status::Error("GGUF key '" + arch +
                           ".rope.scaling.original_context_length' is missing (YaRN needs it)");
    }
    keys.Float("rope.scaling.yarn_log_multiplier", &log_mul);
    const std::string mscale = JsonFloat(log_mul / 0.1);
    add("rope_scaling", "{\"type\": \"yarn\", \"factor\": " + JsonFloat(factor) +
                            ", \"original_max_position_embeddings\": " + std::to_string(orig) +
                            ", \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": " + mscale +
                            ", \"mscale_all_dim\": " + mscale + "}");
  }
  return Status::Ok();
}

}  // namespace

std::string HfTensorName(const std::string& arch, const std::string& g) {
  const HfArch* spec = FindHfArch(arch);
  if (spec == nullptr) return "";
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.rfind("blk.", 0) != 0) return "";
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4) return "";
  const std::string layer = g.substr(4, dot - 4);
  if (layer.find_first_not_of("0123456789") != std::string::npos) return "";
  const std::string rest = g.substr(dot + 1);
  const size_t last = rest.rfind('.');
  if (last == std::string::npos) return "";
  const std::string part = rest.substr(0, last), suffix = rest.substr(last);  // ".weight"
  static const std::pair<const char*, const char*> kBlock[] = {
      {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  // Phi-3 keeps its fused projections (transformers' Phi3Attention.qkv_proj,
  // Phi3MLP.gate_up_proj), which llama.cpp stores as attn_qkv / ffn_up.
  static const std::pair<const char*, const char*> kPhi3[] = {
      {"attn_norm", "input_layernorm"},    {"attn_qkv", "self_attn.qkv_proj"},
      {"attn_output", "self_attn.o_proj"}, {"ffn_norm", "post_attention_layernorm"},
      {"ffn_up", "mlp.gate_up_proj"},      {"ffn_down", "mlp.down_proj"},
  };
  // Gemma 2 / 3 (gguf-py's ATTN_POST_NORM, FFN_PRE_NORM, FFN_POST_NORM):
  // ffn_norm is the pre-feedforward norm here, not post_attention_layernorm.
  static const std::pair<const char*, const char*> kGemma[] = {
      {"attn_norm", "input_layernorm"},
      {"post_attention_norm", "post_attention_layernorm"},
      {"ffn_norm", "pre_feedforward_layernorm"},
      {"post_ffw_norm", "post_feedforward_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  // gpt-oss (GptOssForCausalLM): attention with biases and sinks, the
  // router (its experts: DequantGgufToHf).
  static const std::pair<const char*, const char*> kGptOss[] = {
      {"attn_norm", "input_layernorm"}, {"post_attention_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},   {"attn_output", "self_attn.o_proj"},
      {"ffn_gate_inp", "mlp.router"},
  };
  // DeepSeek-V2 / V3 (gguf-py's DEEPSEEK2 tensors; attn_k_b / attn_v_b and
  // the experts: DequantGgufToHf).
  static const std::pair<const char*, const char*> kDeepseek[] = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_q_a", "self_attn.q_a_proj"},
      {"attn_q_a_norm", "self_attn.q_a_layernorm"},
      {"attn_q_b", "self_attn.q_b_proj"},
      {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
      {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
      {"attn_kv_b", "self_attn.kv_b_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_inp", "mlp.gate"},
      {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
      {"ffn_down_shexp", "mlp.shared_experts.down_proj"},
  };
  if (suffix != ".weight" && suffix != ".bias") return "";
  if (spec->mla) {
    // V3's router bias: a parameter of the gate module, not a module.
    if (part == "exp_probs_b" && suffix == ".bias") {
      return "model.layers." + layer + ".mlp.gate.e_score_correction_bias";
    }
    for (const auto& [gguf, hf] : kDeepseek) {
      if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
    }
    return "";
  }
  if (spec->moe == Moe::kGptOss) {
    if (part == "attn_sinks" && suffix == ".weight") {
      return "model.layers." + layer + ".self_attn.sinks";  // a parameter, not a module
    }
    for (const auto& [gguf, hf] : kGptOss) {
      if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
    }
    return "";
  }
  if (spec->gemma) {
    for (const auto& [gguf, hf] : kGemma) {
      if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
    }
    return "";
  }
  static const std::pair<const char*, const char*> kSharedExpert[] = {
      {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
      {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
      {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
  };
  if (spec->shared_expert && suffix == ".weight") {
    for (const auto& [gguf, hf] : kSharedExpert) {
      if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
    }
  }
  const auto* begin = spec->fused ? std::begin(kPhi3) : std::begin(kBlock);
  const auto* end = spec->fused ? std::end(kPhi3) : std::end(kBlock);
  for (const auto* m = begin; m != end; ++m) {
    if (part == m->first) return "model.layers." + layer + "." + m->second + suffix;
  }
  return "";
}

Status UnpermuteQkRows(uint8_t* data, int64_t rows, int64_t row_bytes, int64_t heads) try {
  if (heads <= 0 || rows % (2 * heads) != 0) {
    return Status::Error(std::to_string(rows) + " rows do not split into " + std::to_string(heads) +
                         " heads of an even size");
  }
  const int64_t d = rows / heads, half = d / 2;
  std::vector<uint8_t> head(static_cast<size_t>(d * row_bytes));
  for (int64_t h = 0; h < heads; ++h) {
    uint8_t* base = data + h * d * row_bytes;
    std::memcpy(head.data(), base, head.size());
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        std::memcpy(base + (i * half + j) * row_bytes, head.data() + (2 * j + i) * row_bytes,
                    static_cast<size_t>(row_bytes));
      }
    }
  }
  return Status::Ok();
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("UnpermuteQkRows");
}

Status DequantGgufToHf(const std::string& in, const std::string& out_dir,
                       const DequantOptions& options, DequantReport* report) try {
  const std::string who = "--hf";
  InputFiles meta_inputs;
  auto g = GgufFile::Open(in, &meta_inputs);
  if (!g.ok()) return g.status().WithPrefix(who + " needs a GGUF file");
  const GgufFile& gguf = **g;
  const GgufValue* av = gguf.Find("general.architecture");
  const std::string arch =
      av != nullptr && av->type == GgufValueType::kString ? av->s : std::string();
  if (av == nullptr || av->type != GgufValueType::kString) {
    return Status::Error(who +
                         ": the file has no general.architecture string, so its model "
                         "is not known; convert without --hf to keep the GGUF names");
  }
  const HfArch* spec = FindHfArch(arch);
  if (spec == nullptr) {
    return Status::Error(who + ": architecture '" + EscapeBytes(arch) +
                         "' is not mapped to Hugging Face names (" + MappedArchNames() +
                         " are); convert without --hf to keep the GGUF names");
  }
  const ArchKeys keys{gguf, arch};
  auto uint_key = [&](const std::string& key, int64_t* v) { return keys.Int(key, v); };
  auto float_key = [&](const std::string& key, double* v) { return keys.Float(key, v); };
  int64_t n_head = 0, n_head_kv = 0;
  if (!uint_key("attention.head_count", &n_head) || n_head <= 0) {
    return Status::Error(who + ": GGUF key '" + arch +
                         ".attention.head_count' is missing or not a positive integer");
  }
  if (!uint_key("attention.head_count_kv", &n_head_kv)) n_head_kv = n_head;
  if (n_head_kv <= 0) {
    return Status::Error(who + ": '" + arch + ".attention.head_count_kv' must be positive");
  }

  int64_t n_expert = 0, n_expert_used = 0;
  const bool has_experts = uint_key("expert_count", &n_expert) && n_expert > 0;
  if (spec->permute_qk && has_experts) spec = &kMixtral;
  // (A deepseek2 file without experts — a dense model of that
  // architecture — has dense MLPs in every layer.)
  const Moe moe_kind = spec->mla && !has_experts ? Moe::kNone : spec->moe;
  const bool moe = moe_kind != Moe::kNone;
  if (moe && !has_experts) {
    return Status::Error(who + ": GGUF key '" + arch +
                         ".expert_count' is missing or not a positive integer");
  }
  if (moe) uint_key("expert_used_count", &n_expert_used);

  NIBBLE_RETURN_IF_ERROR(CheckOutputFolder(out_dir, meta_inputs, who + " output"));
  auto ck = Checkpoint::Open(in);
  if (!ck.ok()) return ck.status();
  std::vector<const CheckpointTensor*> chosen;
  NIBBLE_RETURN_IF_ERROR(internal::SelectTensors(*ck, options, in, report, &chosen));

  std::vector<HfFolderItem> items;
  std::set<std::string> names;
  std::vector<float> rope_long, rope_short;  // Phi-3 LongRoPE factors
  std::vector<float> rope_freqs;             // Llama 3.1+ rope factors
  bool has_output = false;
  int64_t vocab = 0;
  int dequantized = 0;
  const Checkpoint* c = &*ck;
  // The writer prepares tensors one at a time: they share one set of
  // input buffers.
  const auto scratch = std::make_shared<CheckpointTensor::Buffers>();
  std::map<std::string, const CheckpointTensor*> by_source;
  for (const CheckpointTensor* t : chosen) by_source[t->source] = t;
  // DeepSeek-V3: the sigmoid router (LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID)
  // and its bias, exp_probs_b.
  bool v3 = false;
  if (spec->mla) {
    int64_t gating = 0;
    v3 = uint_key("expert_gating_func", &gating) && gating == 2;
    for (const CheckpointTensor& t : ck->tensors()) {
      if (t.source.size() > 17 &&
          t.source.compare(t.source.size() - 17, 17, ".exp_probs_b.bias") == 0) {
        v3 = true;
      }
    }
    if (v3) spec = &kDeepseekV3;
  }
  for (const CheckpointTensor* t : chosen) {
    std::string layer, part;
    const bool blk = SplitBlockName(t->source, &layer, &part);
    if (spec->mla && blk && (part == "attn_k_b" || part == "attn_v_b")) {
      // llama.cpp's newer converter splits kv_b_proj [H * (nope + v), rank]
      // head by head into attn_k_b [H, rank, nope] (transposed) and
      // attn_v_b [H, v, rank]; transformers has the one matrix. Where the
      // file also keeps attn_kv_b, that one is written.
      const std::string pre = "blk." + layer + ".";
      if (by_source.count(pre + "attn_kv_b.weight") != 0) continue;
      const std::string k_name = pre + "attn_k_b.weight", v_name = pre + "attn_v_b.weight";
      const std::string other = part == "attn_k_b" ? v_name : k_name;
      if (by_source.count(other) == 0) {
        return Status::Error(who + ": tensor '" + EscapeBytes(t->source) + "' has no '" + other +
                             "' beside it (kv_b_proj is made of the two)");
      }
      if (part == "attn_v_b") continue;  // written with its attn_k_b
      const CheckpointTensor* kt = t;
      const CheckpointTensor* vt = by_source[v_name];
      if (kt->shape.size() != 3 || vt->shape.size() != 3 || kt->shape[0] != vt->shape[0] ||
          kt->shape[1] != vt->shape[2]) {
        return Status::Error(who + ": tensors '" + EscapeBytes(kt->source) + "' " +
                             ShapeToString(kt->shape) + " and '" + EscapeBytes(vt->source) + "' " +
                             ShapeToString(vt->shape) +
                             " are not [heads, rank, nope] and [heads, v, rank]");
      }
      const int64_t heads = kt->shape[0], rank = kt->shape[1], nope = kt->shape[2],
                    vdim = vt->shape[1];
      const DType out_dtype = c->OutputDType(*kt, options.dtype);
      if (c->OutputDType(*vt, options.dtype) != out_dtype) {
        return Status::Error(who + ": tensors '" + EscapeBytes(kt->source) + "' and '" +
                             EscapeBytes(vt->source) + "' would be written as different types");
      }
      dequantized += (kt->quantized ? 1 : 0) + (vt->quantized ? 1 : 0);
      HfFolderItem it;
      it.out.name = "model.layers." + layer + ".self_attn.kv_b_proj.weight";
      if (!names.insert(it.out.name).second) {
        return Status::Error(who + ": two tensors map to '" + it.out.name + "'");
      }
      it.out.dtype = out_dtype;
      it.out.shape = {heads * (nope + vdim), rank};
      const int64_t eb = DTypeBits(out_dtype) / 8;
      it.bytes = static_cast<uint64_t>(heads * (nope + vdim) * rank * eb);
      const DType req = options.dtype;
      const int threads = options.threads;
      it.out.fill = [c, kt, vt, req, threads, heads, rank, nope, vdim, eb,
                     scratch](uint8_t* dst) -> Status {
        std::vector<uint8_t> kb(static_cast<size_t>(heads * rank * nope * eb));
        std::vector<uint8_t> vb(static_cast<size_t>(heads * vdim * rank * eb));
        NIBBLE_RETURN_IF_ERROR(c->Fill(*kt, req, threads, kb.data(), scratch.get()));
        NIBBLE_RETURN_IF_ERROR(c->Fill(*vt, req, threads, vb.data(), scratch.get()));
        const int64_t head_bytes = (nope + vdim) * rank * eb;
        for (int64_t h = 0; h < heads; ++h) {
          const uint8_t* k_head = kb.data() + h * rank * nope * eb;
          uint8_t* out = dst + h * head_bytes;
          InterleaveTransposed(&k_head, 1, rank, nope, eb, out);  // [rank, nope] -> [nope, rank]
          std::memcpy(out + nope * rank * eb, vb.data() + h * vdim * rank * eb,
                      static_cast<size_t>(vdim * rank * eb));
        }
        return Status::Ok();
      };
      items.push_back(std::move(it));
      continue;
    }
    std::string gl, gp, gs;  // gpt-oss experts: layer, part, suffix
    if (moe_kind == Moe::kGptOss && SplitBlockTensor(t->source, &gl, &gp, &gs) &&
        (gp == "ffn_gate_exps" || gp == "ffn_up_exps" || gp == "ffn_down_exps" ||
         gp == "ffn_gate_up_exps")) {
      // transformers' GptOssExperts: gate_up_proj [E, hidden, 2 ff] with
      // gate in the even and up in the odd columns (llama.cpp's converter
      // took them apart: gate = rows ::2, up = rows 1::2 of the transposed
      // tensor; or, fused, gate then up), down_proj [E, ff, hidden]
      // (transposed there), the biases the same way without transposing.
      const std::string up_name = "blk." + gl + ".ffn_up_exps" + gs;
      const std::string gate_name = "blk." + gl + ".ffn_gate_exps" + gs;
      if (gp == "ffn_up_exps") {
        if (by_source.count(gate_name) == 0) {
          return Status::Error(who + ": tensor '" + EscapeBytes(t->source) + "' has no '" +
                               gate_name + "' beside it (gpt-oss interleaves the two)");
        }
        continue;  // written with its gate
      }
      const bool bias = gs == ".bias";
      std::vector<const CheckpointTensor*> srcs = {t};
      if (gp == "ffn_gate_exps") {
        auto up = by_source.find(up_name);
        if (up == by_source.end()) {
          return Status::Error(who + ": tensor '" + EscapeBytes(t->source) + "' has no '" +
                               up_name + "' beside it (gpt-oss interleaves the two)");
        }
        srcs.push_back(up->second);
      }
      const size_t rank = bias ? 2 : 3;
      for (const CheckpointTensor* x : srcs) {
        if (x->shape.size() != rank || x->shape[0] != n_expert || x->shape != t->shape) {
          return Status::Error(who + ": tensor '" + EscapeBytes(x->source) + "' is " +
                               ShapeToString(x->shape) + ", not [" + std::to_string(n_expert) +
                               " experts" + (bias ? ", n]" : ", rows, cols]") +
                               (srcs.size() > 1 ? " like its gate / up pair" : ""));
        }
        if (x->quantized) ++dequantized;
      }
      const bool down = gp == "ffn_down_exps", fused = gp == "ffn_gate_up_exps";
      if (fused && t->shape[1] % 2 != 0) {
        return Status::Error(who + ": tensor '" + EscapeBytes(t->source) + "' has an odd " +
                             "gate + up width " + std::to_string(t->shape[1]));
      }
      // Each expert: parts of `rows` x `cols` interleaved into [cols, parts * rows].
      const int n_parts = down ? 1 : 2;
      const int64_t rows = down ? (bias ? 1 : t->shape[1]) : t->shape[1] / (fused ? 2 : 1);
      const int64_t cols = bias ? (down ? t->shape[1] : 1) : t->shape[2];
      const DType out_dtype = c->OutputDType(*t, options.dtype);
      for (const CheckpointTensor* x : srcs) {
        if (c->OutputDType(*x, options.dtype) != out_dtype) {
          return Status::Error(who + ": tensors '" + EscapeBytes(t->source) + "' and '" +
                               EscapeBytes(x->source) + "' would be written as different types");
        }
      }
      HfFolderItem it;
      it.out.name = "model.layers." + gl + ".mlp.experts." + (down ? "down_proj" : "gate_up_proj") +
                    (bias ? "_bias" : "");
      if (!names.insert(it.out.name).second) {
        return Status::Error(who + ": two tensors map to '" + it.out.name + "'");
      }
      it.out.dtype = out_dtype;
      it.out.shape =
          bias ? Shape{n_expert, n_parts * rows * cols} : Shape{n_expert, cols, n_parts * rows};
      const int64_t eb = DTypeBits(out_dtype) / 8;
      const int64_t expert_bytes = n_parts * rows * cols * eb;
      it.bytes = static_cast<uint64_t>(n_expert * expert_bytes);
      const DType req = options.dtype;
      const int threads = options.threads;
      it.out.open_rows = [c, srcs, req, threads, n_parts, rows, cols, eb,
                          cancelled = options.cancelled,
                          expert_bytes]() -> StatusOr<SafetensorsOutput::RowWriter> {
        struct State {
          std::vector<Checkpoint::RowReader> readers;
          std::vector<CheckpointTensor::Buffers> buffers;
          std::vector<std::vector<uint8_t>> experts;
        };
        auto st = std::make_shared<State>();
        st->buffers.resize(srcs.size());
        for (size_t k = 0; k < srcs.size(); ++k) {
          auto r = c->PrepareRows(*srcs[k], req, threads, &st->buffers[k], cancelled);
          if (!r.ok()) return r.status();
          st->readers.push_back(std::move(*r));
          st->experts.emplace_back(
              static_cast<size_t>(expert_bytes / static_cast<int64_t>(srcs.size())));
        }
        return SafetensorsOutput::RowWriter(
            [st, n_parts, rows, cols, eb, expert_bytes](int64_t r0, int64_t r1, void* dst,
                                                        size_t) -> Status {
              auto* out = static_cast<uint8_t*>(dst);
              for (int64_t e = r0; e < r1; ++e) {
                for (size_t k = 0; k < st->readers.size(); ++k) {
                  NIBBLE_RETURN_IF_ERROR(
                      st->readers[k](e, e + 1, st->experts[k].data(), st->experts[k].size()));
                }
                const uint8_t* parts[2] = {st->experts[0].data(), nullptr};
                if (n_parts == 2) {  // gate and up: two tensors, or the halves of one
                  parts[1] = st->experts.size() == 2 ? st->experts[1].data()
                                                     : st->experts[0].data() + rows * cols * eb;
                }
                InterleaveTransposed(parts, n_parts, rows, cols, eb, out + (e - r0) * expert_bytes);
              }
              return Status::Ok();
            });
      };
      items.push_back(std::move(it));
      continue;
    }
    if (moe && blk && part.size() > 5 && part.compare(part.size() - 5, 5, "_exps") == 0 &&
        *ExpertWeight(moe_kind, part.substr(0, part.size() - 5)) != '\0') {
      // [E, rows, cols] -> E tensors [rows, cols], one per expert, each
      // read as its row of the first dimension; the experts of one tensor
      // are consecutive items and share one prepared reader (made at the
      // first expert written, dropped after the last).
      const char* w = ExpertWeight(moe_kind, part.substr(0, part.size() - 5));
      if (t->shape.size() != 3 || t->shape[0] != n_expert) {
        return Status::Error(who + ": tensor '" + EscapeBytes(t->source) + "' is " +
                             ShapeToString(t->shape) + ", not [" + std::to_string(n_expert) +
                             " experts, rows, cols]");
      }
      if (t->quantized) ++dequantized;
      struct Shared {
        std::optional<Checkpoint::RowReader> reader;
        CheckpointTensor::Buffers buffers;
      };
      const auto shared = std::make_shared<Shared>();
      const DType req = options.dtype;
      const int threads = options.threads;
      const int64_t experts = n_expert;
      for (int64_t e = 0; e < experts; ++e) {
        HfFolderItem it;
        it.out.name = ExpertName(moe_kind, layer, e, w);
        if (!names.insert(it.out.name).second) {
          return Status::Error(who + ": two tensors map to '" + it.out.name + "'");
        }
        it.out.dtype = c->OutputDType(*t, options.dtype);
        it.out.shape = {t->shape[1], t->shape[2]};
        it.bytes = static_cast<uint64_t>(t->shape[1] * t->shape[2] * DTypeBits(it.out.dtype) / 8);
        const uint64_t bytes = it.bytes;
        it.out.fill = [c, t, req, threads, shared, e, experts, bytes,
                       cancelled = options.cancelled](uint8_t* dst) -> Status {
          if (!shared->reader) {
            auto r = c->PrepareRows(*t, req, threads, &shared->buffers, cancelled);
            if (!r.ok()) return r.status();
            shared->reader.emplace(std::move(*r));
          }
          const Status st = (*shared->reader)(e, e + 1, dst, static_cast<size_t>(bytes));
          if (e == experts - 1 || !st.ok()) {
            shared->reader.reset();
            shared->buffers = CheckpointTensor::Buffers();
          }
          return st;
        };
        items.push_back(std::move(it));
      }
      continue;
    }
    std::string hf = HfTensorName(arch, t->source);
    if (moe && moe_kind != Moe::kGptOss && blk && part == "ffn_gate_inp") {
      hf = MoePrefix(moe_kind, layer) + "gate.weight";
    }
    if (moe && blk && hf.empty()) {  // llama.cpp's older per-expert names: ffn_gate.E
      const size_t dot = part.rfind('.');
      const std::string base = dot == std::string::npos ? "" : part.substr(0, dot);
      const std::string num = dot == std::string::npos ? "" : part.substr(dot + 1);
      if (*ExpertWeight(moe_kind, base) != '\0' && !num.empty() &&
          num.find_first_not_of("0123456789") == std::string::npos && num.size() < 9) {
        hf = ExpertName(moe_kind, layer, std::stoll(num), ExpertWeight(moe_kind, base));
      }
    }
    if (hf.empty() && spec->fused &&
        (t->source == "rope_factors_long.weight" || t->source == "rope_factors_short.weight")) {
      // Phi-3 LongRoPE: transformers reads these from config.json's
      // rope_scaling (long_factor / short_factor), where they came from.
      auto v = c->LoadFloat(*t, options.threads);
      if (!v.ok()) return v.status().WithPrefix(who);
      (t->source == "rope_factors_long.weight" ? rope_long : rope_short) = std::move(*v);
      continue;
    }
    if (hf.empty()) {
      if (t->source == "rope_freqs.weight" && spec->permute_qk) {
        // Llama 3.1+: back into config.json's rope_scaling (below).
        auto v = c->LoadFloat(*t, options.threads);
        if (!v.ok()) return v.status().WithPrefix(who);
        rope_freqs = std::move(*v);
        continue;
      }
      if (blk && (part == "ffn_gate_inp" || part.find("_exps") != std::string::npos ||
                  part.find("_shexp") != std::string::npos)) {
        return Status::Error(
            who + ": tensor '" + EscapeBytes(t->source) +
            "' is a mixture-of-experts tensor, which --hf maps for " + "llama-family files with " +
            arch + ".expert_count (Mixtral), qwen2moe, qwen3moe, gpt-oss and " +
            "deepseek2 only; " + "convert " + "without --hf to keep the GGUF names");
      }
      return Status::Error(who + ": tensor '" + EscapeBytes(t->source) +
                           "' has no Hugging Face name for architecture " + arch +
                           " (leave it out with --exclude)");
    }
    if (!names.insert(hf).second) {
      return Status::Error(who + ": two tensors map to '" + hf + "'");
    }
    if (t->source == "output.weight") has_output = true;
    if (t->quantized) ++dequantized;
    if (t->source == "token_embd.weight" && t->shape.size() == 2) vocab = t->shape[0];
    int64_t heads = 0;
    if (spec->permute_qk && t->shape.size() >= 1) {
      // "blk.N.attn_q.weight" -> "attn_q.weight"
      const size_t second = t->source.find('.', t->source.find('.') + 1);
      const std::string tail =
          second == std::string::npos ? std::string() : t->source.substr(second + 1);
      if (tail == "attn_q.weight" || tail == "attn_q.bias") heads = n_head;
      if (tail == "attn_k.weight" || tail == "attn_k.bias") heads = n_head_kv;
      if (heads != 0 && t->shape[0] % (2 * heads) != 0) {
        return Status::Error(who + ": tensor '" + t->source + "' has " +
                             std::to_string(t->shape[0]) + " rows, not " + std::to_string(heads) +
                             " heads of an even size");
      }
    }
    HfFolderItem it;
    it.out.name = hf;
    it.out.dtype = c->OutputDType(*t, options.dtype);
    it.out.shape = t->shape;
    // Qwen2-MoE's shared_expert_gate is a [1, hidden] Linear that
    // llama.cpp may store as a vector.
    if (blk && part == "ffn_gate_inp_shexp" && t->shape.size() == 1) {
      it.out.shape = {1, t->shape[0]};
    }
    int64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    const int64_t eb = DTypeBits(it.out.dtype) / 8;
    it.bytes = static_cast<uint64_t>(n * eb);
    const int64_t rows = t->shape.empty() ? 1 : t->shape[0];
    const int64_t row_bytes = rows == 0 ? 0 : n / rows * eb;
    const DType req = options.dtype;
    const int threads = options.threads;
    const std::string src = t->source;
    const bool norm_offset =
        spec->gemma && hf.size() > 11 && hf.compare(hf.size() - 11, 11, "norm.weight") == 0;
    if (norm_offset) {
      // Gemma's norms: llama.cpp's converter stored 1 + w; transformers'
      // GGUF loader (SubtractOne) takes 1 away in float32, and the model's
      // type is one rounding of that.
      OutType out_type;
      if (!OutTypeOfDType(it.out.dtype, &out_type)) {
        return Status::Error(who + ": tensor '" + EscapeBytes(src) + "' would be written as " +
                             DTypeName(it.out.dtype) + "; Gemma's norms need float32, float16 " +
                             "or bfloat16 (--dtype)");
      }
      it.out.fill = [c, t, threads, out_type, n](uint8_t* dst) -> Status {
        auto v = c->LoadFloat(*t, threads);
        if (!v.ok()) return v.status();
        for (float& x : *v) x -= 1.0f;
        ConvertFloats(OutType::kF32, v->data(), out_type, dst, n);
        return Status::Ok();
      };
    } else if (heads == 0 && it.out.shape == t->shape) {
      it.out.open_rows = [c, t, req, threads, scratch, cancelled = options.cancelled]() {
        return c->PrepareRows(*t, req, threads, scratch.get(), cancelled);
      };
    } else {  // rows permuted within each head, or reshaped: the whole tensor at once
      it.out.fill = [c, t, req, threads, rows, row_bytes, src, heads,
                     scratch](uint8_t* dst) -> Status {
        NIBBLE_RETURN_IF_ERROR(c->Fill(*t, req, threads, dst, scratch.get()));
        if (heads == 0) return Status::Ok();
        return UnpermuteQkRows(dst, rows, row_bytes, heads).WithPrefix("tensor '" + src + "'");
      };
    }
    items.push_back(std::move(it));
  }
  if (items.empty()) return Status::Error(who + ": no tensors to write");

  // A folder transformers loads: every config value its model class needs
  // and every tensor it expects, in the shape it expects (a missing one
  // would be initialized at random, a misshapen one fails to load). With
  // a selection (--tensors, --exclude, --skip-unsupported) what it leaves
  // out is only noted.
  {
    std::vector<std::string> problems;
    int64_t hidden = 0, ffn = 0, layers = 0, ctx = 0, head_dim = 0;
    double eps = 0;
    for (const auto& [key, v] : {std::pair<const char*, int64_t*>{"embedding_length", &hidden},
                                 {"feed_forward_length", &ffn},
                                 {"block_count", &layers},
                                 {"context_length", &ctx}}) {
      // (Qwen-MoE's dense width is unused: its experts have their own.)
      const bool needed = !(moe_kind == Moe::kQwen && v == &ffn);
      if ((!uint_key(key, v) || *v <= 0) && needed) {
        problems.push_back("config key " + arch + "." + key);
      }
    }
    int64_t ffn_e = ffn, ffn_shared = 0;  // an expert's / the shared expert's width
    if (moe_kind == Moe::kQwen || moe_kind == Moe::kGptOss || moe_kind == Moe::kDeepseek) {
      if (!uint_key("expert_feed_forward_length", &ffn_e) || ffn_e <= 0) {
        problems.push_back("config key " + arch + ".expert_feed_forward_length");
      }
      if (ffn <= 0) ffn = ffn_e;
    } else {
      uint_key("expert_feed_forward_length", &ffn_e);
    }
    if (spec->shared_expert &&
        (!uint_key("expert_shared_feed_forward_length", &ffn_shared) || ffn_shared <= 0)) {
      problems.push_back("config key " + arch + ".expert_shared_feed_forward_length");
    }
    if (!float_key("attention.layer_norm_rms_epsilon", &eps)) {
      problems.push_back("config key " + arch + ".attention.layer_norm_rms_epsilon");
    }
    if (!uint_key("attention.key_length", &head_dim)) {
      head_dim = hidden > 0 && hidden % n_head == 0 ? hidden / n_head : 0;
    }
    std::map<std::string, Shape> written;
    for (const HfFolderItem& it : items) written[it.out.name] = it.out.shape;
    auto expect = [&](const std::string& name, Shape shape) {
      auto w = written.find(name);
      if (w == written.end()) {
        problems.push_back("tensor " + name + " " + ShapeToString(shape));
      } else if (w->second != shape) {
        problems.push_back("tensor " + name + " is " + ShapeToString(w->second) + ", expected " +
                           ShapeToString(shape));
      }
    };
    auto expect_top = [&] {
      expect("model.embed_tokens.weight", {vocab, hidden});
      expect("model.norm.weight", {hidden});
      if (has_output) expect("lm_head.weight", {vocab, hidden});
    };
    // A gated MLP of `width` under prefix m ("model.layers.L.mlp.", ...).
    auto expect_mlp = [&](const std::string& m, int64_t width) {
      expect(m + "gate_proj.weight", {width, hidden});
      expect(m + "up_proj.weight", {width, hidden});
      expect(m + "down_proj.weight", {hidden, width});
    };
    // Layer l's router and routed experts.
    auto expect_experts = [&](int64_t l) {
      expect(MoePrefix(moe_kind, std::to_string(l)) + "gate.weight", {n_expert, hidden});
      for (int64_t e = 0; e < n_expert; ++e) {
        for (const char* part : {"ffn_gate", "ffn_up", "ffn_down"}) {
          const bool down = std::string(part) == "ffn_down";
          expect(ExpertName(moe_kind, std::to_string(l), e, ExpertWeight(moe_kind, part)),
                 down ? Shape{hidden, ffn_e} : Shape{ffn_e, hidden});
        }
      }
    };
    if (spec->mla) {
      // DeepSeek-V2 / V3 (transformers' DeepseekV2/V3 modules; llama.cpp's
      // llm_build_deepseek2 reads the same keys).
      int64_t rank = 0, q_rank = 0, rope = 0, qk = 0, vdim = 0, dense = 0, n_shared = 0;
      if (!uint_key("attention.kv_lora_rank", &rank) || rank <= 0) {
        problems.push_back("config key " + arch + ".attention.kv_lora_rank");
      }
      uint_key("attention.q_lora_rank", &q_rank);
      if (!uint_key("rope.dimension_count", &rope) || rope <= 0) {
        problems.push_back("config key " + arch + ".rope.dimension_count");
      }
      // Head sizes: key_length_mla / value_length_mla where llama.cpp's MLA
      // converter wrote them (its key_length is then rank + rope), else
      // key_length / value_length.
      if (!uint_key("attention.key_length_mla", &qk) && !uint_key("attention.key_length", &qk)) {
        problems.push_back("config key " + arch + ".attention.key_length");
      }
      if (!uint_key("attention.value_length_mla", &vdim) &&
          !uint_key("attention.value_length", &vdim)) {
        problems.push_back("config key " + arch + ".attention.value_length");
      }
      uint_key("leading_dense_block_count", &dense);
      uint_key("expert_shared_count", &n_shared);
      if (hidden > 0 && rank > 0 && rope > 0 && qk > rope && vdim > 0) {
        expect_top();
        for (int64_t l = 0; l < layers; ++l) {
          const std::string p = "model.layers." + std::to_string(l) + ".";
          expect(p + "input_layernorm.weight", {hidden});
          expect(p + "post_attention_layernorm.weight", {hidden});
          if (q_rank > 0) {
            expect(p + "self_attn.q_a_proj.weight", {q_rank, hidden});
            expect(p + "self_attn.q_a_layernorm.weight", {q_rank});
            expect(p + "self_attn.q_b_proj.weight", {n_head * qk, q_rank});
          } else {
            expect(p + "self_attn.q_proj.weight", {n_head * qk, hidden});
          }
          expect(p + "self_attn.kv_a_proj_with_mqa.weight", {rank + rope, hidden});
          expect(p + "self_attn.kv_a_layernorm.weight", {rank});
          expect(p + "self_attn.kv_b_proj.weight", {n_head * (qk - rope + vdim), rank});
          expect(p + "self_attn.o_proj.weight", {hidden, n_head * vdim});
          if (l < dense || !moe) {
            expect_mlp(p + "mlp.", ffn);
            continue;
          }
          expect_experts(l);
          if (v3) expect(p + "mlp.gate.e_score_correction_bias", {n_expert});
          // The shared experts: one MLP of n_shared experts' width.
          if (n_shared > 0) expect_mlp(p + "mlp.shared_experts.", ffn_e * n_shared);
        }
      }
    } else if (hidden > 0 && ffn > 0 && head_dim > 0) {
      const int64_t q = n_head * head_dim, kv = n_head_kv * head_dim;
      expect_top();
      for (int64_t l = 0; l < layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        expect(p + "input_layernorm.weight", {hidden});
        expect(p + "post_attention_layernorm.weight", {hidden});
        if (spec->gemma) {
          expect(p + "pre_feedforward_layernorm.weight", {hidden});
          expect(p + "post_feedforward_layernorm.weight", {hidden});
        }
        if (spec->fused) {  // Phi-3's fused projections
          expect(p + "self_attn.qkv_proj.weight", {q + 2 * kv, hidden});
          expect(p + "self_attn.o_proj.weight", {hidden, q});
          expect(p + "mlp.gate_up_proj.weight", {2 * ffn, hidden});
          expect(p + "mlp.down_proj.weight", {hidden, ffn});
          continue;
        }
        expect(p + "self_attn.q_proj.weight", {q, hidden});
        expect(p + "self_attn.k_proj.weight", {kv, hidden});
        expect(p + "self_attn.v_proj.weight", {kv, hidden});
        expect(p + "self_attn.o_proj.weight", {hidden, q});
        if (moe_kind == Moe::kGptOss) {  // biased attention with sinks; router, fused experts
          expect(p + "self_attn.o_proj.bias", {hidden});
          expect(p + "self_attn.sinks", {n_head});
          expect(p + "mlp.router.weight", {n_expert, hidden});
          expect(p + "mlp.router.bias", {n_expert});
          expect(p + "mlp.experts.gate_up_proj", {n_expert, hidden, 2 * ffn_e});
          expect(p + "mlp.experts.gate_up_proj_bias", {n_expert, 2 * ffn_e});
          expect(p + "mlp.experts.down_proj", {n_expert, ffn_e, hidden});
          expect(p + "mlp.experts.down_proj_bias", {n_expert, hidden});
        } else if (moe) {  // the sparse MoE block: router and experts
          expect_experts(l);
          if (spec->shared_expert) {
            expect_mlp(p + "mlp.shared_expert.", ffn_shared);
            expect(p + "mlp.shared_expert_gate.weight", {1, hidden});
          }
        } else {
          expect_mlp(p + "mlp.", ffn);
        }
        if (spec->qkv_bias) {  // Qwen2's attention has q / k / v biases
          expect(p + "self_attn.q_proj.bias", {q});
          expect(p + "self_attn.k_proj.bias", {kv});
          expect(p + "self_attn.v_proj.bias", {kv});
        }
        if (spec->qk_norm) {  // and Qwen3 q / k norms
          expect(p + "self_attn.q_norm.weight", {head_dim});
          expect(p + "self_attn.k_norm.weight", {head_dim});
        }
      }
    }
    if (!problems.empty()) {
      std::string list;
      for (size_t i = 0; i < problems.size() && i < 8; ++i) list += (i ? "; " : "") + problems[i];
      if (problems.size() > 8) list += "; and " + std::to_string(problems.size() - 8) + " more";
      const std::string what = "'" + EscapeBytes(in) + "' is not a complete " + arch +
                               " model for transformers: missing or misshapen " + list;
      const bool selected =
          !options.tensors.empty() || !options.exclude.empty() || !report->skipped.empty();
      if (!selected) return Status::Error(who + ": " + what);
      report->notes.push_back(what + " (a selection was given: written anyway)");
    }
  }

  // config.json from the metadata.
  std::string cfg = "{\n  \"architectures\": [\"" + std::string(spec->cls) +
                    "\"],\n  \"model_type\": \"" + spec->model_type + "\",\n  \"hidden_act\": \"" +
                    (spec->gemma ? "gelu_pytorch_tanh" : "silu") + "\"";
  auto add = [&cfg](const std::string& k, const std::string& v) {
    cfg += ",\n  \"" + k + "\": " + v;
  };
  const std::pair<const char*, const char*> ints[] = {
      {"embedding_length", "hidden_size"},  {"feed_forward_length", "intermediate_size"},
      {"block_count", "num_hidden_layers"}, {"context_length", "max_position_embeddings"},
      {"attention.key_length", "head_dim"},
  };
  for (const auto& [key, name] : ints) {
    int64_t v;
    if (spec->mla && std::strcmp(name, "head_dim") == 0) continue;  // (below)
    if (uint_key(key, &v)) add(name, std::to_string(v));
  }
  if (moe) {
    // Mixtral's config calls the expert count num_local_experts, Qwen-MoE's
    // num_experts (with the experts' own width apart from the dense one).
    add(moe_kind == Moe::kQwen       ? "num_experts"
        : moe_kind == Moe::kDeepseek ? "n_routed_experts"
                                     : "num_local_experts",
        std::to_string(n_expert));
    if (n_expert_used > 0) add("num_experts_per_tok", std::to_string(n_expert_used));
    if (n_expert_used > 0 && moe_kind == Moe::kGptOss) {
      add("experts_per_token", std::to_string(n_expert_used));
    }
    int64_t v = 0;
    if (moe_kind == Moe::kQwen) {
      if (uint_key("expert_feed_forward_length", &v))
        add("moe_intermediate_size", std::to_string(v));
      if (spec->shared_expert && uint_key("expert_shared_feed_forward_length", &v)) {
        add("shared_expert_intermediate_size", std::to_string(v));
      }
      add("norm_topk_prob", spec->norm_topk_prob ? "true" : "false");
    }
  }
  add("num_attention_heads", std::to_string(n_head));
  // (MLA: llama.cpp writes head_count_kv 1 — its MQA form of the latent
  // attention; transformers' DeepSeek configs count the heads.)
  add("num_key_value_heads", std::to_string(spec->mla ? n_head : n_head_kv));
  double f;
  if (float_key("attention.layer_norm_rms_epsilon", &f)) add("rms_norm_eps", JsonFloat(f));
  if (float_key("rope.freq_base", &f)) add("rope_theta", JsonFloat(f));
  if (!rope_freqs.empty()) {
    double theta = 10000.0;
    float_key("rope.freq_base", &theta);
    const std::optional<Llama3Rope> r = FitLlama3Rope(rope_freqs, theta);
    if (r) {
      add("rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": " + JsonFloat(r->factor) +
                              ", \"low_freq_factor\": " + JsonFloat(r->low) +
                              ", \"high_freq_factor\": " + JsonFloat(r->high) +
                              ", \"original_max_position_embeddings\": " +
                              std::to_string(r->original_context) + "}");
    } else {
      report->notes.push_back(
          "rope_freqs.weight is not the llama3 rope scaling of any factor / low_freq_factor / "
          "high_freq_factor / original_max_position_embeddings: config.json has no "
          "rope_scaling (add it by hand)");
    }
  }
  if (vocab > 0) add("vocab_size", std::to_string(vocab));
  if (spec->gemma) NIBBLE_RETURN_IF_ERROR(AddGemmaConfig(keys, n_head, add).WithPrefix(who));
  if (moe_kind == Moe::kGptOss) NIBBLE_RETURN_IF_ERROR(AddGptOssConfig(keys, add).WithPrefix(who));
  if (spec->mla) NIBBLE_RETURN_IF_ERROR(AddDeepseekConfig(keys, v3, add).WithPrefix(who));
  if (spec->fused) {  // Phi-3
    int64_t v = 0;
    if (uint_key("attention.sliding_window", &v) && v > 0) add("sliding_window", std::to_string(v));
    if (uint_key("rope.scaling.original_context_length", &v) && v > 0) {
      add("original_max_position_embeddings", std::to_string(v));
    }
    if (rope_long.empty() != rope_short.empty()) {
      return Status::Error(who + ": '" + EscapeBytes(in) + "' has only one of " +
                           "rope_factors_long / rope_factors_short (Phi-3 LongRoPE needs both)");
    }
    if (!rope_long.empty()) {
      auto list = [](const std::vector<float>& x) {
        std::string out = "[";
        for (size_t i = 0; i < x.size(); ++i) out += (i ? ", " : "") + JsonFloat(x[i]);
        return out + "]";
      };
      add("rope_scaling", "{\"type\": \"longrope\", \"long_factor\": " + list(rope_long) +
                              ", \"short_factor\": " + list(rope_short) + "}");
    }
  }
  for (const auto& [key, name] :
       {std::pair<const char*, const char*>{"tokenizer.ggml.bos_token_id", "bos_token_id"},
        {"tokenizer.ggml.eos_token_id", "eos_token_id"}}) {
    const GgufValue* x = gguf.Find(key);
    if (x != nullptr && x->type == GgufValueType::kU32) add(name, std::to_string(x->u));
  }
  add("tie_word_embeddings", has_output ? "false" : "true");
  add("torch_dtype", std::string("\"") +
                         TorchDTypeName(internal::ResolveOutDType(options.dtype, DType::kFloat32)) +
                         "\"");
  cfg += ",\n  \"nibble_source\": \"" + JsonEscape(in.substr(in.rfind('/') + 1)) + "\"\n}\n";
  HfTextFiles texts = {{"config.json", cfg}};
  int64_t ctx = 0;
  uint_key("context_length", &ctx);
  HfTokenizerFiles tok = HfTokenizerFromGguf(gguf, ctx);
  if (tok.not_written.empty()) {
    texts.emplace_back("tokenizer.json", std::move(tok.tokenizer_json));
    texts.emplace_back("tokenizer_config.json", std::move(tok.tokenizer_config_json));
  } else {
    report->notes.push_back("no tokenizer written: " + tok.not_written +
                            " (copy tokenizer.json from the original model)");
  }
  NIBBLE_RETURN_IF_ERROR(
      WriteHfFolder(out_dir, items, texts, {}, ck->inputs(), options, report).WithPrefix(who));
  report->dequantized = dequantized;
  if (dequantized > 0) report->dtype = internal::ResolveOutDType(options.dtype, DType::kFloat32);
  report->copied = static_cast<int>(items.size()) - dequantized;
  return Status::Ok();
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("DequantGgufToHf");
}

}  // namespace nibble
