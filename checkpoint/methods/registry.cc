// Every Hugging Face quantization method nibble knows, in listing order:
// the ones it reads (their own files), then the ones it only recognizes
// (unsupported.cc). Adding a method is its file and one entry here.
#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/bitsandbytes.h"
#include "checkpoint/methods/compressed_tensors.h"
#include "checkpoint/methods/fp8.h"
#include "checkpoint/methods/gptq.h"
#include "checkpoint/methods/method.h"
#include "checkpoint/methods/mxfp4.h"
#include "checkpoint/methods/unsupported.h"

namespace nibble {

const std::vector<HfMethodInfo>& HfMethods() {
  static const std::vector<HfMethodInfo> kMethods = [] {
    std::vector<HfMethodInfo> m = {
        {"gptq",
         "GPTQ",
         &GptqConfigured,
         &GptqUnconfigured,
         {"qweight", "qzeros", "scales", "g_idx"}},
        {"awq", "AWQ", &AwqConfigured, &AwqUnconfigured, {"qweight", "qzeros", "scales"}},
        {"compressed-tensors",
         "compressed-tensors",
         &CompressedTensorsConfigured,
         &CompressedTensorsUnconfigured,
         {"weight_packed", "weight_scale", "weight_zero_point", "weight_shape", "weight_g_idx",
          "weight_global_scale", "input_scale", "input_global_scale", "input_zero_point",
          "output_scale", "output_zero_point", "k_scale", "v_scale", "q_scale"}},
        {"bitsandbytes",
         "bitsandbytes",
         &BnbConfigured,
         &BnbUnconfigured,
         {"absmax", "quant_map", "nested_absmax", "nested_quant_map", "bitsandbytes__*", "SCB",
          "weight_format"}},
    };
    m.push_back({"fp8",
                 "fine-grained FP8 (DeepSeek, Qwen3-FP8)",
                 &Fp8Configured,
                 nullptr,
                 {"weight_scale_inv", "weight_scale", "input_scale", "activation_scale"}});
    m.push_back({"mxfp4", "MXFP4 (gpt-oss)", &Mxfp4Configured, nullptr, {"*_blocks", "*_scales"}});
    for (const HfMethodInfo& u : UnsupportedHfMethods()) m.push_back(u);
    return m;
  }();
  return kMethods;
}

}  // namespace nibble
