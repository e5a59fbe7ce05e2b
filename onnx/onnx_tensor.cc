#include "onnx/onnx_tensor.h"

#include <cstring>
#include <limits>

#include "onnx/onnx_writer.h"

namespace nibble {

namespace {

std::string TensorWho(const nibble_onnx::TensorProto& p) { return "tensor '" + p.name() + "'"; }

void PutLE(uint8_t* dst, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) dst[k] = static_cast<uint8_t>(v >> (8 * k));
}

}  // namespace

StatusOr<Tensor> TensorFromProto(const nibble_onnx::TensorProto& p) {
  const std::string who = TensorWho(p);
  if (p.data_location() == nibble_onnx::TensorProto::EXTERNAL || p.external_data_size() > 0) {
    return Status::Error(who + ": external data is not supported here");
  }
  if (p.has_segment()) return Status::Error(who + ": segmented tensors are not supported");
  if (!IsKnownDType(p.data_type())) {
    return Status::Error(who + ": unsupported data_type " + std::to_string(p.data_type()));
  }
  const DType t = static_cast<DType>(p.data_type());
  Shape shape(p.dims().begin(), p.dims().end());
  auto n_or = CheckedNumElements(shape, who);
  if (!n_or.ok()) return n_or.status();
  const int64_t n = *n_or;
  auto tensor = Tensor::Allocate(t, shape);
  if (!tensor.ok()) return tensor.status().WithPrefix(who);
  auto* dst = static_cast<uint8_t*>(tensor->data());
  const size_t bytes = tensor->size_bytes();
  const int bits = DTypeBits(t);

  if (p.has_raw_data()) {
    if (p.raw_data().size() != bytes) {
      return Status::Error(who + ": raw_data has " + std::to_string(p.raw_data().size()) +
                           " bytes, " + DTypeName(t) + " " + ShapeToString(shape) + " needs " +
                           std::to_string(bytes));
    }
    if (bytes) std::memcpy(dst, p.raw_data().data(), bytes);
    return tensor;
  }

  auto count_error = [&](const char* field, int64_t got, int64_t want) {
    return Status::Error(who + ": " + field + " has " + std::to_string(got) + " entries, " +
                         DTypeName(t) + " " + ShapeToString(shape) + " needs " +
                         std::to_string(want));
  };
  switch (t) {
    case DType::kFloat32: {
      if (p.float_data_size() != n) return count_error("float_data", p.float_data_size(), n);
      if (n) std::memcpy(dst, p.float_data().data(), bytes);
      break;
    }
    case DType::kFloat64: {
      if (p.double_data_size() != n) return count_error("double_data", p.double_data_size(), n);
      if (n) std::memcpy(dst, p.double_data().data(), bytes);
      break;
    }
    case DType::kInt64: {
      if (p.int64_data_size() != n) return count_error("int64_data", p.int64_data_size(), n);
      if (n) std::memcpy(dst, p.int64_data().data(), bytes);
      break;
    }
    case DType::kUInt32:
    case DType::kUInt64: {
      if (p.uint64_data_size() != n) return count_error("uint64_data", p.uint64_data_size(), n);
      for (int64_t k = 0; k < n; ++k) {
        PutLE(dst + k * (bits / 8), p.uint64_data(static_cast<int>(k)), bits / 8);
      }
      break;
    }
    default: {
      // int32_data: one element per entry for >= 8-bit types, one packed
      // byte per entry for sub-byte types.
      const int64_t want = bits < 8 ? static_cast<int64_t>(bytes) : n;
      if (p.int32_data_size() != want) return count_error("int32_data", p.int32_data_size(), want);
      const int step = bits < 8 ? 1 : bits / 8;
      for (int64_t k = 0; k < want; ++k) {
        const uint32_t v = static_cast<uint32_t>(p.int32_data(static_cast<int>(k)));
        PutLE(dst + k * step, bits < 8 ? (v & 0xFFu) : v, step);
      }
      break;
    }
  }
  return tensor;
}

nibble_onnx::TensorProto TensorToProto(const TensorView& view, const std::string& name) {
  nibble_onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(view.dtype));
  for (int64_t d : view.shape) p.add_dims(d);
  auto n = CheckedNumElements(view.shape, name);
  size_t bytes = 0;
  if (n.ok()) {
    auto b = CheckedPackedBytes(*n, view.dtype, name);
    if (b.ok()) bytes = std::min(*b, view.size_bytes);
  }
  p.set_raw_data(static_cast<const char*>(view.data), bytes);
  return p;
}

Status ReadProtoFile(const std::string& path, google::protobuf::MessageLite* msg,
                     InputFiles* inputs) {
  auto data = ReadSmallFile(path, kMaxProtoFileBytes, "protobuf file", inputs);
  if (!data.ok()) return data.status();
  if (!msg->ParseFromString(*data)) {
    std::string type = msg->GetTypeName();  // "nibble_onnx.ModelProto"
    if (type.rfind("nibble_", 0) == 0) type.erase(0, 7);
    return Status::Error("'" + EscapeBytes(path) + "' is not a valid " + type +
                         " (protobuf parse failed)");
  }
  return Status::Ok();
}

Status WriteProtoFile(const std::string& path, const google::protobuf::MessageLite& msg) {
  std::string bytes;
  if (!msg.SerializeToString(&bytes)) return Status::Error("cannot serialize '" + path + "'");
  return WriteFileAtomic(path, bytes);
}

}  // namespace nibble
