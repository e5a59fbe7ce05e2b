#include "checkpoint/methods/unsupported.h"

namespace nibble {

// Their quant_method, name and the tensor names of their layouts (the
// producers' own: transformers' quantizers and the producing packages).
std::vector<HfMethodInfo> UnsupportedHfMethods() {
  return {
      {"fbgemm_fp8",
       "FBGEMM FP8",
       nullptr,
       nullptr,
       {"weight_scale", "input_scale_ub"},
       "float8 weights are not read yet"},
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
