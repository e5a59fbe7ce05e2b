#include "checkpoint/methods/method.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace nibble {

const HfMethodInfo* FindHfMethod(const std::string& quant_method) {
  for (const HfMethodInfo& m : HfMethods()) {
    if (quant_method == m.quant_method) return &m;
  }
  return nullptr;
}

std::string ReadableHfMethods() {
  std::string out;
  for (const HfMethodInfo& m : HfMethods()) {
    if (m.configured != nullptr) out += (out.empty() ? "" : ", ") + std::string(m.quant_method);
  }
  return out;
}

namespace internal {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string ModuleOf(const std::string& name, const std::string& suffix) {
  return name.substr(0, name.size() - suffix.size());
}

uint64_t BytesOf(const SafetensorsSet::Entry* e) {
  return e == nullptr ? 0 : e->tensor->end - e->tensor->begin;
}

Status LoadInto(const SafetensorsSet::Entry* x, CheckpointTensor::Buffers* bufs,
                std::optional<TensorView>* out) {
  if (x == nullptr) return Status::Ok();
  auto v = x->file->Load(*x->tensor, bufs->NextBytes(), &bufs->cancelled);
  if (!v.ok()) return v.status();
  *out = *v;
  return Status::Ok();
}

bool IsFloatDType(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32;
}

Status JsonInt(const nlohmann::json& j, const char* key, const std::string& who, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return Status::Error(who + ": '" + key + "' must be an integer");
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status JsonBool(const nlohmann::json& j, const char* key, const std::string& who, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return Status::Error(who + ": '" + key + "' must be true or false");
  *out = it->get<bool>();
  return Status::Ok();
}

Status JsonString(const nlohmann::json& j, const char* key, const std::string& who,
                  std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return Status::Error(who + ": '" + key + "' must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

Status JsonStringList(const nlohmann::json& j, const char* key, const std::string& who,
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

StatusOr<nlohmann::json> ParseJsonObject(const std::string& text, const std::string& who) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(who + " is not valid JSON");
  if (!j.is_object()) return Status::Error(who + " is not a JSON object");
  return j;
}

}  // namespace internal
}  // namespace nibble
