// Attribute validation and Dequantize on small random tensors: PMX and ONNX
// attributes, dtypes, shapes and bytes drawn from the input; every accepted
// request is run and compared bit for bit with the scalar reference.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "op/onnx.h"
#include "op/pmx.h"
#include "tests/fuzz/byte_source.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using nibble::DType;

DType PickDType(nibble::fuzz::ByteSource& in) {
  static const DType kTypes[] = {DType::kFloat32,        DType::kFloat16,        DType::kBFloat16,
                                 DType::kInt8,           DType::kUInt8,          DType::kInt16,
                                 DType::kUInt16,         DType::kInt32,          DType::kUInt32,
                                 DType::kInt4,           DType::kUInt4,          DType::kInt2,
                                 DType::kUInt2,          DType::kFloat8E4M3FN,   DType::kFloat8E5M2,
                                 DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1,
                                 DType::kFloat8E8M0,     DType::kInt64,          DType::kUndefined};
  return kTypes[in.Range(0, sizeof(kTypes) / sizeof(kTypes[0]) - 1)];
}

nibble::Shape PickShape(nibble::fuzz::ByteSource& in) {
  nibble::Shape s(static_cast<size_t>(in.Range(0, 4)));
  for (auto& d : s) d = in.Range(-1, 40);
  return s;
}

// A tensor of the given type/shape whose bytes come from the input (short
// inputs give fewer bytes than needed: validation must say so).
struct Input {
  nibble::TensorView view;
  std::vector<uint8_t> bytes;
};
Input MakeTensor(nibble::fuzz::ByteSource& in) {
  Input t;
  t.view.dtype = PickDType(in);
  t.view.shape = PickShape(in);
  auto n = nibble::CheckedNumElements(t.view.shape, "t");
  size_t need = 0;
  if (n.ok() && *n <= (int64_t{1} << 16)) {
    auto b = nibble::CheckedPackedBytes(*n, t.view.dtype, "t");
    if (b.ok()) need = *b;
  }
  if (in.Bool() && need > 0) need -= 1;  // sometimes one byte short
  t.bytes = in.Bytes(need);
  t.bytes.resize(need);
  t.view.data = t.bytes.empty() ? nullptr : t.bytes.data();
  t.view.size_bytes = t.bytes.size();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nibble::fuzz::ByteSource in(data, size);
  const bool onnx = in.Bool();
  Input x = MakeTensor(in), scale = MakeTensor(in), zp = MakeTensor(in);
  const bool has_zp = in.Bool();
  nibble::DequantizeOptions opts;
  opts.threads = 1;
  opts.output_dtype = PickDType(in);
  if (onnx) {
    nibble::OnnxDequantizeAttributes a;
    a.opset = static_cast<int>(in.Range(9, 26));
    a.axis = in.Range(-5, 5);
    a.block_size = in.Range(-2, 70);
    a.has_block_size = in.Bool();
    a.output_dtype = static_cast<int32_t>(in.Range(0, 27));
    a.has_output_dtype = in.Bool();
    auto d = nibble::PrepareOnnx(a, x.view, scale.view, has_zp ? &zp.view : nullptr, opts);
    if (d.ok()) nibble::fuzz::RunAndCrossCheck(*d);
  } else {
    nibble::PmxAttributes a;
    static const char* const kTypes[] = {"int4", "int8", "int4x4", "uint4", ""};
    a.quant_data_type = kTypes[in.Range(0, 4)];
    if (a.quant_data_type.empty()) a.quant_data_type = in.String(8);
    a.quant_axis = in.Range(-2, 3);
    a.group_size = in.Range(-2, 70);
    a.has_zeropoint = in.Range(-1, 2);
    a.float_zeropoint = in.Range(-1, 2);
    auto d = nibble::PreparePmx(a, x.view, scale.view, has_zp ? &zp.view : nullptr, opts);
    if (d.ok()) nibble::fuzz::RunAndCrossCheck(*d);
  }
  return 0;
}
