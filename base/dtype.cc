#include "base/dtype.h"

#include <cctype>

namespace nibble {

namespace {

// One row per type: every name it goes by. Output types list their
// spellings, the short one first.
struct DTypeRow {
  DType dtype;
  const char* name;  // nibble / ONNX style
  int bits;
  const char* safetensors;              // or nullptr
  const char* torch;                    // or nullptr
  const char* const* output_spellings;  // null-terminated, or nullptr
};

constexpr const char* kF32Spellings[] = {"f32", "fp32", "float32", "float", nullptr};
constexpr const char* kF16Spellings[] = {"f16", "fp16", "float16", "half", nullptr};
constexpr const char* kBF16Spellings[] = {"bf16", "bfloat16", nullptr};

constexpr DTypeRow kRows[] = {
    {DType::kFloat32, "float32", 32, "F32", "float32", kF32Spellings},
    {DType::kFloat16, "float16", 16, "F16", "float16", kF16Spellings},
    {DType::kBFloat16, "bfloat16", 16, "BF16", "bfloat16", kBF16Spellings},
    {DType::kFloat64, "float64", 64, "F64", "float64", nullptr},
    {DType::kUInt8, "uint8", 8, "U8", "uint8", nullptr},
    {DType::kInt8, "int8", 8, "I8", "int8", nullptr},
    {DType::kUInt16, "uint16", 16, "U16", "uint16", nullptr},
    {DType::kInt16, "int16", 16, "I16", "int16", nullptr},
    {DType::kUInt32, "uint32", 32, "U32", "uint32", nullptr},
    {DType::kInt32, "int32", 32, "I32", "int32", nullptr},
    {DType::kUInt64, "uint64", 64, "U64", "uint64", nullptr},
    {DType::kInt64, "int64", 64, "I64", "int64", nullptr},
    {DType::kBool, "bool", 8, "BOOL", "bool", nullptr},
    {DType::kFloat8E4M3FN, "float8e4m3fn", 8, "F8_E4M3", "float8_e4m3fn", nullptr},
    {DType::kFloat8E4M3FNUZ, "float8e4m3fnuz", 8, nullptr, "float8_e4m3fnuz", nullptr},
    {DType::kFloat8E5M2, "float8e5m2", 8, "F8_E5M2", "float8_e5m2", nullptr},
    {DType::kFloat8E5M2FNUZ, "float8e5m2fnuz", 8, nullptr, "float8_e5m2fnuz", nullptr},
    {DType::kFloat8E8M0, "float8e8m0", 8, "F8_E8M0", "float8_e8m0fnu", nullptr},
    {DType::kFloat4E2M1, "float4e2m1", 4, nullptr, "float4_e2m1fn_x2", nullptr},
    {DType::kUInt4, "uint4", 4, nullptr, nullptr, nullptr},
    {DType::kInt4, "int4", 4, nullptr, nullptr, nullptr},
    {DType::kUInt2, "uint2", 2, nullptr, nullptr, nullptr},
    {DType::kInt2, "int2", 2, nullptr, nullptr, nullptr},
};

const DTypeRow* Row(DType t) {
  for (const DTypeRow& r : kRows) {
    if (r.dtype == t) return &r;
  }
  return nullptr;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string DTypeName(DType t) {
  if (t == DType::kUndefined) return "undefined";
  const DTypeRow* r = Row(t);
  return r != nullptr ? r->name : "dtype(" + std::to_string(static_cast<int32_t>(t)) + ")";
}

int DTypeBits(DType t) {
  const DTypeRow* r = Row(t);
  return r != nullptr ? r->bits : 0;
}

bool IsKnownDType(int32_t code) { return code != 0 && Row(static_cast<DType>(code)) != nullptr; }

DType DTypeNamed(const std::string& name) {
  for (const DTypeRow& r : kRows) {
    if (name == r.name) return r.dtype;
  }
  return DType::kUndefined;
}

DType SafetensorsDType(const std::string& name) {
  for (const DTypeRow& r : kRows) {
    if (r.safetensors != nullptr && name == r.safetensors) return r.dtype;
  }
  return DType::kUndefined;
}

const char* SafetensorsDTypeName(DType t) {
  const DTypeRow* r = Row(t);
  return r != nullptr ? r->safetensors : nullptr;
}

const char* TorchDTypeName(DType t) {
  const DTypeRow* r = Row(t);
  return r != nullptr ? r->torch : nullptr;
}

DType TorchDType(const std::string& name) {
  std::string n = name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
  if (n == "half") return DType::kFloat16;
  if (n == "float") return DType::kFloat32;
  if (n == "double") return DType::kFloat64;
  for (const DTypeRow& r : kRows) {
    if (r.torch != nullptr && n == r.torch) return r.dtype;
  }
  return DType::kUndefined;
}

bool IsOutputDType(DType t) {
  const DTypeRow* r = Row(t);
  return r != nullptr && r->output_spellings != nullptr;
}

DType ParseOutputDType(const std::string& spelling) {
  const std::string s = Lower(spelling);
  for (const DTypeRow& r : kRows) {
    if (r.output_spellings == nullptr) continue;
    for (const char* const* p = r.output_spellings; *p != nullptr; ++p) {
      if (s == *p) return r.dtype;
    }
  }
  return DType::kUndefined;
}

const char* OutputDTypeShortName(DType t) {
  const DTypeRow* r = Row(t);
  return r != nullptr && r->output_spellings != nullptr ? r->output_spellings[0] : "";
}

std::string OutputDTypeSpellings() {
  std::string shorts, others;
  int count = 0;
  for (const DTypeRow& r : kRows) {
    if (r.output_spellings != nullptr) ++count;
  }
  int k = 0;
  for (const DTypeRow& r : kRows) {
    if (r.output_spellings == nullptr) continue;
    ++k;
    shorts += std::string(k == 1 ? "" : (k == count ? " or " : ", ")) + r.output_spellings[0];
    for (const char* const* p = r.output_spellings + 1; *p != nullptr; ++p) {
      others += std::string(others.empty() ? "" : ", ") + *p;
    }
  }
  return shorts + " (also " + others + "; any case)";
}

}  // namespace nibble
