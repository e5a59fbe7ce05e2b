// Element types and every name they go by: nibble's own (ONNX-style:
// "float32", "float8e4m3fn"), safetensors' ("F32", "F8_E4M3"), PyTorch's
// ("float32", "float8_e4m3fn") and numpy's, and the spellings of the output
// types (f32 / f16 / bf16 and their aliases). The one vocabulary: the CLI,
// the Python module, the safetensors reader and writer and the Hugging
// Face code read it here (one row per type in dtype.cc).
#ifndef NIBBLE_BASE_DTYPE_H_
#define NIBBLE_BASE_DTYPE_H_

#include <cstdint>
#include <string>

namespace nibble {

// Element types. The numeric values are ONNX's TensorProto.DataType codes, so
// the ONNX adapter maps them one to one.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

// Lower-case ONNX-style name ("float32", "int4", ...); "dtype(<n>)" if unknown.
std::string DTypeName(DType t);
// Bits per element (2, 4, 8, 16, 32, 64); 0 for kUndefined/unknown codes.
int DTypeBits(DType t);
// True for codes this library knows (any listed above).
bool IsKnownDType(int32_t code);
// The type named `name` (DTypeName's spelling), else kUndefined.
DType DTypeNamed(const std::string& name);

// safetensors' dtype name -> DType (kUndefined if unknown), and back
// (nullptr if the type has no safetensors name).
DType SafetensorsDType(const std::string& name);
const char* SafetensorsDTypeName(DType t);

// PyTorch's name of a type (torch_dtype in config.json, bitsandbytes'
// quant_state: "bfloat16", "float8_e4m3fn"), or nullptr; and back, with
// torch's aliases ("half", "float", ...), else kUndefined.
const char* TorchDTypeName(DType t);
DType TorchDType(const std::string& name);

// --- Output types ---------------------------------------------------------
// What nibble writes: float32, float16, bfloat16.
bool IsOutputDType(DType t);
// An output type in any spelling, any case: f32 fp32 float32 float; f16
// fp16 float16 half; bf16 bfloat16. kUndefined for anything else.
DType ParseOutputDType(const std::string& spelling);
// The short spelling ("f32", "f16", "bf16"); "" for other types.
const char* OutputDTypeShortName(DType t);
// "f32, f16 or bf16 (also fp32, float32, float, fp16, float16, half,
// bfloat16; any case)": for messages and help.
std::string OutputDTypeSpellings();

}  // namespace nibble

#endif  // NIBBLE_BASE_DTYPE_H_
