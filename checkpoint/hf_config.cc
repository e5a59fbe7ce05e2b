#include "checkpoint/hf_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

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

// GPTQ's checkpoint_format (or "format", or the marlin flag) of one object:
// "" when it states none.
StatusOr<std::string> GptqFormatOf(const nlohmann::json& q, const std::string& who) {
  bool marlin = false;
  NIBBLE_RETURN_IF_ERROR(GetBool(q, "is_marlin_format", who, &marlin));
  std::string fmt;
  NIBBLE_RETURN_IF_ERROR(GetString(q, "checkpoint_format", who, &fmt));
  if (fmt.empty()) NIBBLE_RETURN_IF_ERROR(GetString(q, "format", who, &fmt));
  fmt = Lower(fmt);
  if (marlin) fmt = "marlin";
  if (!fmt.empty() && fmt != "gptq" && fmt != "gptq_v2") {
    return Status::Error(who + ": GPTQ checkpoint_format '" + fmt +
                         "' is not supported (gptq and gptq_v2 are)");
  }
  return fmt;
}

// The producer named by meta.quantizer (a string or a list of strings; the
// first entry), "" when none.
StatusOr<std::string> ProducerOf(const nlohmann::json& q, const std::string& who) {
  auto meta = q.find("meta");
  if (meta == q.end() || meta->is_null()) return std::string();
  if (!meta->is_object()) return Status::Error(who + ": 'meta' must be an object");
  auto it = meta->find("quantizer");
  if (it == meta->end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array() && !it->empty() && (*it)[0].is_string()) return (*it)[0].get<std::string>();
  if (it->is_array() && it->empty()) return std::string();
  return Status::Error(who + ": 'meta.quantizer' must be a string or a list of strings");
}

Status GetStringList(const nlohmann::json& j, const char* key, const std::string& who,
                     std::vector<std::string>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
    return Status::Ok();
  }
  if (!it->is_array()) return Status::Error(who + ": '" + key + "' must be a list of strings");
  for (const auto& x : *it) {
    if (!x.is_string()) return Status::Error(who + ": '" + key + "' must be a list of strings");
    out->push_back(x.get<std::string>());
  }
  return Status::Ok();
}

Status CompressedTensors(const nlohmann::json& q, const std::string& who, HfQuantConfig* c) {
  NIBBLE_RETURN_IF_ERROR(GetString(q, "format", who, &c->ct_format));
  NIBBLE_RETURN_IF_ERROR(GetStringList(q, "ignore", who, &c->ct_ignore));
  auto sp = q.find("sparsity_config");
  if (sp != q.end() && !sp->is_null() && !(sp->is_object() && sp->empty())) {
    return Status::Error(who + ": compressed-tensors sparsity_config is not supported");
  }
  auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty()) {
    return Status::Error(who + ": compressed-tensors needs a non-empty 'config_groups' object");
  }
  for (const auto& [name, g] : groups->items()) {
    const std::string gw = who + " config_groups." + name;
    if (!g.is_object()) return Status::Error(gw + " must be an object");
    CompressedTensorsGroup cg;
    cg.name = name;
    cg.format = c->ct_format;
    NIBBLE_RETURN_IF_ERROR(GetString(g, "format", gw, &cg.format));
    NIBBLE_RETURN_IF_ERROR(GetStringList(g, "targets", gw, &cg.targets));
    auto w = g.find("weights");
    if (w == g.end() || w->is_null()) continue;  // activations only: weights stay float
    if (!w->is_object()) return Status::Error(gw + ".weights must be an object");
    const std::string ww = gw + ".weights";
    int64_t bits = 4;
    NIBBLE_RETURN_IF_ERROR(GetInt(*w, "num_bits", ww, &bits));
    if (bits < 1 || bits > 32) return Status::Error(ww + ": num_bits " + std::to_string(bits));
    cg.bits = static_cast<int>(bits);
    NIBBLE_RETURN_IF_ERROR(GetString(*w, "type", ww, &cg.type));
    NIBBLE_RETURN_IF_ERROR(GetBool(*w, "symmetric", ww, &cg.symmetric));
    NIBBLE_RETURN_IF_ERROR(GetString(*w, "strategy", ww, &cg.strategy));
    NIBBLE_RETURN_IF_ERROR(GetInt(*w, "group_size", ww, &cg.group_size));
    auto ao = w->find("actorder");
    if (ao != w->end() && ao->is_string()) cg.actorder = Lower(ao->get<std::string>());
    if (ao != w->end() && ao->is_boolean() && ao->get<bool>()) cg.actorder = "group";
    cg.type = Lower(cg.type);
    cg.strategy = Lower(cg.strategy);
    c->ct_groups.push_back(std::move(cg));
  }
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
  } else if (method == "compressed-tensors") {
    c.method = HfQuantConfig::Method::kCompressedTensors;
    NIBBLE_RETURN_IF_ERROR(CompressedTensors(q, who, &c));
    return c;
  } else if (method == "bitsandbytes") {
    c.method = HfQuantConfig::Method::kBitsAndBytes;
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "load_in_4bit", who, &c.bnb_4bit));
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "load_in_8bit", who, &c.bnb_8bit));
    NIBBLE_RETURN_IF_ERROR(GetString(q, "bnb_4bit_quant_type", who, &c.bnb_quant_type));
    c.bnb_quant_type = Lower(c.bnb_quant_type);
    return c;
  } else {
    return Status::Error(who + ": quant_method '" + method +
                         "' is not supported (nibble reads gptq, awq, compressed-tensors and "
                         "bitsandbytes)");
  }
  int64_t bits = 4;
  NIBBLE_RETURN_IF_ERROR(
      GetInt(q, c.method == HfQuantConfig::Method::kAwq && q.contains("w_bit") ? "w_bit" : "bits",
             who, &bits));
  const bool bits_ok = c.method == HfQuantConfig::Method::kAwq
                           ? bits == 4
                           : (bits == 2 || bits == 3 || bits == 4 || bits == 8);
  if (!bits_ok) {
    return Status::Error(who + ": " + HfMethodName(c.method) +
                         " with bits = " + std::to_string(bits) + " is not supported (" +
                         (c.method == HfQuantConfig::Method::kAwq ? "only 4" : "2, 4 and 8 are") +
                         ")");
  }
  c.bits = static_cast<int>(bits);
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
    auto fmt = GptqFormatOf(q, who);
    if (!fmt.ok()) return fmt.status();
    c.checkpoint_format = *fmt;
    c.format_source = fmt->empty() ? "" : who + " checkpoint_format";
    auto producer = ProducerOf(q, who);
    if (!producer.ok()) return producer.status();
    c.producer = *producer;
  } else {
    std::string ver;
    NIBBLE_RETURN_IF_ERROR(GetString(q, "version", who, &ver));
    ver = Lower(ver);
    if (ver.empty()) ver = "gemm";
    if (ver != "gemm") {
      return Status::Error(who + ": AWQ version '" + ver + "' is not supported (only gemm)");
    }
    c.awq_version = ver;
    NIBBLE_RETURN_IF_ERROR(GetBool(q, "zero_point", who, &c.zero_point));
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
    case HfQuantConfig::Method::kCompressedTensors:
      return "compressed-tensors";
    case HfQuantConfig::Method::kBitsAndBytes:
      return "bitsandbytes";
    default:
      return "none";
  }
}

StatusOr<HfQuantConfig> ParseHfQuantConfig(const std::string& config_json,
                                           const std::string& quantize_config_json) {
  std::optional<HfQuantConfig> main, side;
  if (!config_json.empty()) {
    auto j = Parse(config_json, "config.json");
    if (!j.ok()) return j.status();
    auto it = j->find("quantization_config");
    if (it != j->end() && !it->is_null()) {
      if (!it->is_object()) {
        return Status::Error("config.json: quantization_config must be an object");
      }
      auto c = FromObject(*it, "config.json quantization_config", /*method_required=*/true);
      if (!c.ok()) return c.status();
      main = *c;
    }
  }
  if (!quantize_config_json.empty()) {
    auto j = Parse(quantize_config_json, "quantize_config.json");
    if (!j.ok()) return j.status();
    auto c = FromObject(*j, "quantize_config.json", /*method_required=*/false);
    if (!c.ok()) return c.status();
    side = *c;
  }
  if (!main && !side) return HfQuantConfig{};
  HfQuantConfig c = main ? *main : *side;
  if (main && side && c.method == HfQuantConfig::Method::kGptq &&
      side->method == HfQuantConfig::Method::kGptq) {
    // Every place that states the format (or the producer) must agree.
    if (!c.checkpoint_format.empty() && !side->checkpoint_format.empty() &&
        c.checkpoint_format != side->checkpoint_format) {
      return Status::Error("config.json quantization_config says checkpoint_format '" +
                           c.checkpoint_format + "' but quantize_config.json says '" +
                           side->checkpoint_format + "'");
    }
    if (c.checkpoint_format.empty()) {
      c.checkpoint_format = side->checkpoint_format;
      c.format_source = side->format_source;
    }
    if (c.producer.empty()) c.producer = side->producer;
  }
  if (c.method == HfQuantConfig::Method::kGptq && c.checkpoint_format.empty()) {
    // A GPTQ config that does not name a format is AutoGPTQ's, which only
    // ever wrote v1 (GPTQModel and transformers write the key).
    c.checkpoint_format = "gptq";
    c.format_source = "the default of a GPTQ config without checkpoint_format";
  }
  return c;
}

StatusOr<BnbQuantState> ParseBnbQuantState(const std::string& json, const std::string& who) {
  auto j = Parse(json, who);
  if (!j.ok()) return j.status();
  BnbQuantState b;
  NIBBLE_RETURN_IF_ERROR(GetString(*j, "quant_type", who, &b.quant_type));
  b.quant_type = Lower(b.quant_type);
  if (b.quant_type != "nf4" && b.quant_type != "fp4") {
    return Status::Error(who + ": quant_type '" + b.quant_type + "' is not nf4 or fp4");
  }
  NIBBLE_RETURN_IF_ERROR(GetInt(*j, "blocksize", who, &b.blocksize));
  if (b.blocksize <= 0) return Status::Error(who + ": 'blocksize' must be a positive integer");
  NIBBLE_RETURN_IF_ERROR(GetString(*j, "dtype", who, &b.dtype));
  auto sh = j->find("shape");
  if (sh == j->end() || !sh->is_array() || sh->empty()) {
    return Status::Error(who + ": 'shape' must be a non-empty list of integers");
  }
  for (const auto& d : *sh) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Status::Error(who + ": 'shape' must be a non-empty list of integers");
    }
    b.shape.push_back(d.get<int64_t>());
  }
  if (j->contains("nested_blocksize") || j->contains("nested_offset")) {
    b.nested = true;
    NIBBLE_RETURN_IF_ERROR(GetInt(*j, "nested_blocksize", who, &b.nested_blocksize));
    if (b.nested_blocksize <= 0) {
      return Status::Error(who + ": 'nested_blocksize' must be a positive integer");
    }
    NIBBLE_RETURN_IF_ERROR(GetString(*j, "nested_dtype", who, &b.nested_dtype));
    auto off = j->find("nested_offset");
    if (off == j->end() || !off->is_number()) {
      return Status::Error(who + ": 'nested_offset' must be a number");
    }
    b.nested_offset = off->get<double>();
  }
  return b;
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
