#include "checkpoint/methods/unsupported.h"

namespace nibble {

// Their quant_method, name and the tensor names of their layouts (the
// producers' own: transformers' quantizers and the producing packages).
std::vector<HfMethodInfo> UnsupportedHfMethods() {
  return {
      {"fp8",
       "fine-grained FP8: DeepSeek, Qwen3-FP8",
       nullptr,
       nullptr,
       {"weight_scale_inv", "activation_scale"},
       "float8 weights are not read yet"},
      {"fbgemm_fp8",
       "FBGEMM FP8",
       nullptr,
       nullptr,
       {"weight_scale", "input_scale_ub"},
       "float8 weights are not read yet"},
      {"mxfp4",
       "MXFP4 (gpt-oss)",
       nullptr,
       nullptr,
       {"*_blocks", "*_scales"},
       "MXFP4 blocks are not read yet"},
      {"hqq", "HQQ", nullptr, nullptr, {"W_q"}, ""},
      {"quanto", "optimum-quanto", nullptr, nullptr, {"_data", "_scale"}, ""},
      {"eetq", "EETQ", nullptr, nullptr, {"weight_scales"}, ""},
      {"bitnet", "BitNet", nullptr, nullptr, {"weight_scale"}, ""},
      {"aqlm", "AQLM", nullptr, nullptr, {"codebooks"}, ""},
      {"vptq", "VPTQ", nullptr, nullptr, {"centroids"}, ""},
      {"higgs", "HIGGS", nullptr, nullptr, {}, ""},
      {"spqr", "SpQR", nullptr, nullptr, {}, ""},
      {"torchao", "torchao", nullptr, nullptr, {}, ""},
      {"quark", "AMD Quark", nullptr, nullptr, {}, ""},
  };
}

}  // namespace nibble
