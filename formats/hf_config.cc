#include "formats/hf_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace nibble {

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Optional typed fields: absent keeps the default; a wrong type is an error.
Status GetInt(const nlohmann::json& j, const char* key, const std::string& who, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return Status::Error(who + ": '" + key + "' must be an integer");
  *out = it->get<int64_t>();
  return Status::Ok();
}
Status GetBool(const nlohmann::json& j, const char* key, const std::string& who, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return Status::Error(who + ": '" + key + "' must be true or false");
  *out = it->get<bool>();
  return Status::Ok();
}
Status GetString(const nlohmann::json& j, const char* key, const std::string& who,
                 std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return Status::Error(who + ": '" + key + "' must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

StatusOr<HfQuantConfig> FromObject(const nlohmann::json& q, const std::string& who,
                                   bool method_required) {
  HfQuantConfig c;
  c.source = who;
  std::string method;
  NIBBLE_RETURN_IF_ERROR(GetString(q, "quant_method", who, &method));
  method = Lower(method);
  if (method.empty()) {
    if (method_required) return Status::Error(who + ": no quant_method");
    method = "gptq";  // quantize_config.json of AutoGPTQ has none
  }
  if (method == "gptq") {
    c.method = HfQuantConfig::Method::kGptq;
  } else if (method == "awq") {
    c.method = HfQuantConfig::Method::kAwq;
  } else {
    return Status::Error(who + ": quant_method '" + method +
                         "' is not supported (nibble reads gptq and awq)");
  }
  int64_t bits = 4;
  NIBBLE_RETURN_IF_ERROR(
      GetInt(q, c.method == HfQuantConfig::Method::kAwq && q.contains("w_bit") ? "w_bit" : "bits",
             who, &bits));
  if (bits != 4) {
    return Status::Error(who + ": " + HfMethodName(c.method) +
                         " with bits = " + std::to_string(bits) + " is not supported (only 4)");
  }
  c.bits = 4;
  const char* gkey = c.method == HfQuantConfig::Method::kAwq && q.contains("q_group_size")
                         ? "q_group_size"
                         : "group_size";
  NIBBLE_RETURN_IF_ERROR(GetInt(q, gkey, who, &c.group_size));
  if (c.group_size == 0 || c.group_size < -1) {
    return Status::Error(who + ": group_size " + std::to_string(c.group_size) +
                         " is invalid (a positive size or -1)");
  }
  if (c.method == HfQuantConfig::Method::kGptq) {
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "desc_act", who, &c.desc_act));
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "sym", who, &c.sym));
    bool marlin = false;
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "is_marlin_format", who, &marlin));
    std::string fmt;
    NIBBLE_RETURN_IF_ERROR(GetString(q, "checkpoint_format", who, &fmt));
    if (fmt.empty()) NIBBLE_RETURN_IF_ERROR(GetString(q, "format", who, &fmt));
    fmt = Lower(fmt);
    if (marlin) fmt = "marlin";
    if (fmt.empty()) fmt = "gptq";
    if (fmt != "gptq" && fmt != "gptq_v2") {
      return Status::Error(who + ": GPTQ checkpoint_format '" + fmt +
                           "' is not supported (gptq and gptq_v2 are)");
    }
    c.checkpoint_format = fmt;
  } else {
    std::string ver;
    NIBBLE_RETURN_IF_ERROR(GetString(q, "version", who, &ver));
    ver = Lower(ver);
    if (ver.empty()) ver = "gemm";
    if (ver != "gemm") {
      return Status::Error(who + ": AWQ version '" + ver + "' is not supported (only gemm)");
    }
    c.awq_version = ver;
    bool zero_point = true;
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "zero_point", who, &zero_point));
    if (!zero_point) {
      return Status::Error(who + ": AWQ with zero_point = false is not supported");
    }
  }
  return c;
}

StatusOr<nlohmann::json> Parse(const std::string& text, const std::string& who) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(who + " is not valid JSON");
  if (!j.is_object()) return Status::Error(who + " is not a JSON object");
  return j;
}

}  // namespace

const char* HfMethodName(HfQuantConfig::Method m) {
  switch (m) {
    case HfQuantConfig::Method::kGptq:
      return "GPTQ";
    case HfQuantConfig::Method::kAwq:
      return "AWQ";
    default:
      return "none";
  }
}

StatusOr<HfQuantConfig> ParseHfQuantConfig(const std::string& config_json,
                                           const std::string& quantize_config_json) {
  if (!config_json.empty()) {
    auto j = Parse(config_json, "config.json");
    if (!j.ok()) return j.status();
    auto it = j->find("quantization_config");
    if (it != j->end() && !it->is_null()) {
      if (!it->is_object()) {
        return Status::Error("config.json: quantization_config must be an object");
      }
      return FromObject(*it, "config.json quantization_config", /*method_required=*/true);
    }
  }
  if (!quantize_config_json.empty()) {
    auto j = Parse(quantize_config_json, "quantize_config.json");
    if (!j.ok()) return j.status();
    return FromObject(*j, "quantize_config.json", /*method_required=*/false);
  }
  return HfQuantConfig{};
}

StatusOr<HfQuantConfig> ReadHfQuantConfig(const std::string& dir, InputFiles* inputs) {
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
  return ParseHfQuantConfig(text[0], text[1]);
}

}  // namespace nibble
