// ONNX TensorProto <-> nibble tensors, and protobuf file I/O. Bytes only:
// no arithmetic beyond copying and little-endian (re)assembly.
#ifndef NIBBLE_ONNX_ONNX_TENSOR_H_
#define NIBBLE_ONNX_ONNX_TENSOR_H_

#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "formats/files.h"
#include "onnx/onnx.pb.h"

namespace nibble {

// Decodes a TensorProto held inline (raw_data, or the typed field ONNX uses
// for its type: float_data; int32_data for 8/16-bit, bool, float16,
// bfloat16 and float8 bit patterns; int32_data holding one packed byte per
// entry (`& 0xFF`) for 4- and 2-bit types; int64_data; uint64_data for
// uint32/uint64; double_data). The element count / byte size must match the
// dims exactly. External data is reported as an error naming the tensor.
StatusOr<Tensor> TensorFromProto(const nibble_onnx::TensorProto& proto);

// Encodes a tensor as a TensorProto with raw_data (little-endian).
nibble_onnx::TensorProto TensorToProto(const TensorView& view, const std::string& name);

// Reads / writes a serialized protobuf message from / to a file. Read
// errors and parse failures name the path. The file must be a regular file
// under 2 GiB (checked before reading); `inputs`, if given, records it.
Status ReadProtoFile(const std::string& path, google::protobuf::MessageLite* msg,
                     InputFiles* inputs = nullptr);
// Writes atomically (WriteFileAtomic): never leaves a half-written `path`.
Status WriteProtoFile(const std::string& path, const google::protobuf::MessageLite& msg);

}  // namespace nibble

#endif  // NIBBLE_ONNX_ONNX_TENSOR_H_
