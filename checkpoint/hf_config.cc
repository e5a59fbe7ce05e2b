#include "checkpoint/hf_config.h"

#include <nlohmann/json.hpp>
#include <optional>

namespace nibble {

namespace {

// "a, b and c".
std::string ReadableList() {
  std::string list = ReadableHfMethods();
  const auto last = list.rfind(", ");
  if (last != std::string::npos) list.replace(last, 2, " and ");
  return list;
}

}  // namespace

StatusOr<HfQuantization> ParseHfQuantization(const std::string& config_json,
                                             const std::string& quantize_config_json) {
  std::optional<nlohmann::json> config, side;
  const nlohmann::json* main = nullptr;
  if (!config_json.empty()) {
    auto j = internal::ParseJsonObject(config_json, "config.json");
    if (!j.ok()) return j.status();
    config = std::move(*j);
    auto it = config->find("quantization_config");
    if (it != config->end() && !it->is_null()) {
      if (!it->is_object()) {
        return Status::Error("config.json: quantization_config must be an object");
      }
      main = &*it;
    }
  }
  if (!quantize_config_json.empty()) {
    auto j = internal::ParseJsonObject(quantize_config_json, "quantize_config.json");
    if (!j.ok()) return j.status();
    side = std::move(*j);
  }
  HfQuantization q;
  if (main == nullptr && !side) return q;
  const HfConfigFiles files{main, side ? &*side : nullptr};
  q.source = main != nullptr ? "config.json quantization_config" : "quantize_config.json";
  std::string method;
  NIBBLE_RETURN_IF_ERROR(
      internal::JsonString(main != nullptr ? *main : *side, "quant_method", q.source, &method));
  method = internal::Lower(method);
  if (method.empty()) {
    if (main != nullptr) return Status::Error(q.source + ": no quant_method");
    method = "gptq";  // AutoGPTQ's quantize_config.json has none
  }
  q.method = FindHfMethod(method);
  if (q.method == nullptr || q.method->configured == nullptr) {
    std::string what = "quant_method '" + method + "'";
    if (q.method != nullptr) what += " (" + std::string(q.method->name) + ")";
    const std::string why = q.method != nullptr && *q.method->unsupported != '\0'
                                ? std::string(": ") + q.method->unsupported
                                : std::string();
    return Status::Error(q.source + ": " + what + " is not supported" + why + " (nibble reads " +
                         ReadableList() + ")");
  }
  auto lister = q.method->configured(files, q.source);
  if (!lister.ok()) return lister.status();
  q.lister = std::move(*lister);
  return q;
}

StatusOr<HfQuantization> ReadHfQuantization(const std::string& dir, InputFiles* inputs) {
  std::string text[2];
  const char* names[2] = {"config.json", "quantize_config.json"};
  for (int i = 0; i < 2; ++i) {
    auto path = PathInside(dir, names[i], "config file");
    if (!path.ok()) return path.status();
    if (!PathExists(*path)) continue;  // absent: fine
    auto t = ReadSmallFile(*path, kMaxJsonFileBytes, "config file", inputs);
    if (!t.ok()) return t.status();
    if (t->empty()) return Status::Error("'" + EscapeBytes(*path) + "' is empty");
    text[i] = std::move(*t);
  }
  return ParseHfQuantization(text[0], text[1]);
}

}  // namespace nibble
