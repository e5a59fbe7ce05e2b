// The C API (api/nibble.h) over the C++ library: translation only.
#include <cstring>
#include <new>
#include <string>

#include "api/c_api_internal.h"
#include "api/nibble.h"
#include "checkpoint/checkpoint.h"
#include "kernels/blas_gemm.h"
#include "kernels/dequantize.h"
#include "kernels/scratch.h"
#include "op/matmul.h"
#include "op/onnx.h"
#include "op/pmx.h"
#include "op/version.h"

namespace {

using nibble::c_api::Fail;

nibble_status* FromStatus(const nibble::Status& s) { return s.ok() ? nullptr : Fail(s.message()); }

bool ToView(const nibble_tensor* t, const char* what, nibble::TensorView* v, nibble_status** err) {
  if (t == nullptr) {
    *err = Fail(std::string(what) + " is NULL");
    return false;
  }
  if (t->rank < 0 || t->rank > 8 || (t->rank > 0 && t->shape == nullptr)) {
    *err = Fail(std::string(what) + ": rank " + std::to_string(t->rank) +
                " must be 0..8 with a shape");
    return false;
  }
  v->dtype = static_cast<nibble::DType>(t->dtype);
  v->shape.assign(t->shape, t->shape + t->rank);
  v->data = t->data;
  v->size_bytes = t->size_bytes;
  return true;
}

// The C++ callback of a nibble_cancel (empty for NULL or no function).
nibble::CancelCallback CancelOf(const nibble_cancel* c) {
  if (c == nullptr || c->cancelled == nullptr) return {};
  return [f = c->cancelled, user = c->cancel_user] { return f(user) != 0; };
}

}  // namespace

extern "C" {

nibble_pmx_attributes nibble_pmx_defaults(void) {
  nibble_pmx_attributes a;
  a.quant_data_type = "int4";
  a.quant_axis = 1;
  a.group_size = 128;
  a.has_zeropoint = 0;
  a.float_zeropoint = 0;
  return a;
}

nibble_onnx_attributes nibble_onnx_defaults(void) {
  nibble_onnx_attributes a;
  a.opset = nibble::kMaxOnnxDequantizeOpset;
  a.axis = 1;
  a.block_size = 0;
  a.output_dtype = 0;
  a.has_axis = a.has_block_size = a.has_output_dtype = 0;
  return a;
}

const char* nibble_status_message(const nibble_status* s) { return s ? s->message.c_str() : "OK"; }
int32_t nibble_status_code(const nibble_status* s) {
  if (s == nullptr) return NIBBLE_STATUS_OK;
  if (s->message.compare(0, std::strlen(nibble::kOutOfMemory), nibble::kOutOfMemory) == 0) {
    return NIBBLE_STATUS_OUT_OF_MEMORY;
  }
  if (nibble::IsInterrupted(s->message)) return NIBBLE_STATUS_INTERRUPTED;
  return NIBBLE_STATUS_INVALID;
}
void nibble_status_free(nibble_status* s) { delete s; }

const char* nibble_version(void) { return NIBBLE_VERSION; }
const char* nibble_active_target(void) { return nibble::ActiveTarget(); }
void nibble_release_cached_memory(void) {
  nibble::ReleaseCachedParameterBlocks();
  nibble::ReleaseMatMulScratch();
  nibble::ReleaseKernelScratch();
}

nibble_status* nibble_prepare_pmx(const nibble_pmx_attributes* attrs, const nibble_tensor* x,
                                  const nibble_tensor* scale, const nibble_tensor* zero_point,
                                  int32_t output_dtype, const char* name,
                                  nibble_dequantizer** out) try {
  if (!attrs || !out) return Fail("nibble_prepare_pmx: attrs and out must not be NULL");
  *out = nullptr;
  nibble_status* err = nullptr;
  nibble::TensorView xv, sv, zv;
  if (!ToView(x, "X", &xv, &err) || !ToView(scale, "Scale", &sv, &err)) return err;
  if (zero_point && !ToView(zero_point, "ZeroPoint", &zv, &err)) return err;
  nibble::PmxAttributes a;
  a.quant_data_type = attrs->quant_data_type ? attrs->quant_data_type : "";
  a.quant_axis = attrs->quant_axis;
  a.group_size = attrs->group_size;
  a.has_zeropoint = attrs->has_zeropoint;
  a.float_zeropoint = attrs->float_zeropoint;
  nibble::DequantizeOptions o;
  o.output_dtype = static_cast<nibble::DType>(output_dtype);
  if (name) o.name = name;
  auto d = nibble::PreparePmx(a, xv, sv, zero_point ? &zv : nullptr, o);
  if (!d.ok()) return FromStatus(d.status());
  *out = new (std::nothrow) nibble_dequantizer{std::move(*d), nullptr};
  return *out ? nullptr : Fail(nibble::kOutOfMemory);
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_prepare_pmx");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_prepare_pmx: ") + e.what());
}

nibble_status* nibble_prepare_onnx(const nibble_onnx_attributes* attrs, const nibble_tensor* x,
                                   const nibble_tensor* scale, const nibble_tensor* zero_point,
                                   const char* name, nibble_dequantizer** out) try {
  if (!attrs || !out) return Fail("nibble_prepare_onnx: attrs and out must not be NULL");
  *out = nullptr;
  nibble_status* err = nullptr;
  nibble::TensorView xv, sv, zv;
  if (!ToView(x, "x", &xv, &err) || !ToView(scale, "x_scale", &sv, &err)) return err;
  if (zero_point && !ToView(zero_point, "x_zero_point", &zv, &err)) return err;
  nibble::OnnxDequantizeAttributes a;
  a.opset = attrs->opset;
  a.axis = attrs->axis;
  a.block_size = attrs->block_size;
  a.output_dtype = attrs->output_dtype;
  a.has_axis = attrs->has_axis != 0;
  a.has_block_size = attrs->has_block_size != 0;
  a.has_output_dtype = attrs->has_output_dtype != 0;
  nibble::DequantizeOptions o;
  if (name) o.name = name;
  auto d = nibble::PrepareOnnx(a, xv, sv, zero_point ? &zv : nullptr, o);
  if (!d.ok()) return FromStatus(d.status());
  *out = new (std::nothrow) nibble_dequantizer{std::move(*d), nullptr};
  return *out ? nullptr : Fail(nibble::kOutOfMemory);
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_prepare_onnx");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_prepare_onnx: ") + e.what());
}

void nibble_dequantizer_free(nibble_dequantizer* d) { delete d; }

int32_t nibble_dequantizer_dtype(const nibble_dequantizer* d) {
  return static_cast<int32_t>(d->impl.output().dtype);
}
int32_t nibble_dequantizer_rank(const nibble_dequantizer* d) {
  return static_cast<int32_t>(d->impl.output().shape.size());
}
void nibble_dequantizer_shape(const nibble_dequantizer* d, int64_t* shape) {
  const auto& s = d->impl.output().shape;
  if (!s.empty()) std::memcpy(shape, s.data(), s.size() * sizeof(int64_t));
}
size_t nibble_dequantizer_output_bytes(const nibble_dequantizer* d) {
  return static_cast<size_t>(d->impl.rows() * d->impl.cols()) *
         static_cast<size_t>(nibble::DTypeBits(d->impl.output().dtype) / 8);
}
int64_t nibble_dequantizer_rows(const nibble_dequantizer* d) { return d->impl.rows(); }
int64_t nibble_dequantizer_cols(const nibble_dequantizer* d) { return d->impl.cols(); }

nibble_status* nibble_dequantize(const nibble_dequantizer* d, void* out, size_t out_bytes,
                                 int32_t threads) {
  return nibble_dequantize_cancellable(d, out, out_bytes, threads, nullptr);
}

nibble_status* nibble_dequantize_cancellable(const nibble_dequantizer* d, void* out,
                                             size_t out_bytes, int32_t threads,
                                             const nibble_cancel* cancel) try {
  if (!d) return Fail("nibble_dequantize: dequantizer is NULL");
  const auto& o = d->impl.output();
  return FromStatus(d->impl.Run(nibble::MutableTensorView{o.dtype, o.shape, out, out_bytes},
                                threads, CancelOf(cancel)));
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_dequantize");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_dequantize: ") + e.what());
}

nibble_status* nibble_dequantize_tile(const nibble_dequantizer* d, int64_t r0, int64_t r1,
                                      int64_t c0, int64_t c1, void* out, int64_t ld) try {
  if (!d) return Fail("nibble_dequantize_tile: dequantizer is NULL");
  return FromStatus(d->impl.RunTile(r0, r1, c0, c1, out, ld));
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_dequantize_tile");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_dequantize_tile: ") + e.what());
}

nibble_matmul_options nibble_matmul_defaults(void) {
  nibble_matmul_options o{};
  o.y_dtype = NIBBLE_FLOAT32;
  o.expert = -1;
  return o;
}

nibble_status* nibble_matmul_with(const nibble_dequantizer* w, const nibble_tensor* x,
                                  const nibble_tensor* bias, const nibble_matmul_options* options,
                                  void* y, size_t y_bytes) try {
  const nibble_matmul_options opts = options ? *options : nibble_matmul_defaults();
  if (!w) return Fail("nibble_matmul: the dequantizer is NULL");
  nibble_status* err = nullptr;
  nibble::TensorView xv, bv;
  if (!ToView(x, "nibble_matmul: x", &xv, &err)) return err;
  if (bias && !ToView(bias, "nibble_matmul: bias", &bv, &err)) return err;
  if (opts.weight_in_out != 0 && opts.weight_in_out != 1) {
    return Fail("nibble_matmul: weight_in_out must be 0 or 1");
  }
  if (opts.gemm != NIBBLE_GEMM_EXACT && opts.gemm != NIBBLE_GEMM_BLAS) {
    return Fail("nibble_matmul: gemm must be NIBBLE_GEMM_EXACT (0) or NIBBLE_GEMM_BLAS (1), not " +
                std::to_string(opts.gemm));
  }
  nibble::MatMulOptions o;
  o.weight = opts.weight_in_out ? nibble::MatMulOptions::Weight::kInOut
                                : nibble::MatMulOptions::Weight::kOutIn;
  o.gemm = opts.gemm == NIBBLE_GEMM_BLAS ? nibble::MatMulOptions::Gemm::kBlas
                                         : nibble::MatMulOptions::Gemm::kExact;
  o.threads = opts.threads;
  o.expert = opts.expert;
  const nibble_cancel cancel{opts.cancelled, opts.cancel_user};
  o.cancelled = CancelOf(&cancel);
  auto ys = nibble::MatMulOutputShape(w->impl, xv.shape, o);
  if (!ys.ok()) return FromStatus(ys.status());
  const nibble::MutableTensorView yv{static_cast<nibble::DType>(opts.y_dtype), *ys, y, y_bytes};
  return FromStatus(nibble::MatMul(w->impl, xv, yv, bias ? &bv : nullptr, o));
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_matmul");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_matmul: ") + e.what());
}

const char* nibble_blas(void) { return nibble::BlasAvailable() ? nibble::BlasName() : nullptr; }

nibble_status* nibble_matmul(const nibble_dequantizer* w, const nibble_tensor* x,
                             const nibble_tensor* bias, int32_t weight_in_out, int32_t y_dtype,
                             void* y, size_t y_bytes, int32_t threads) {
  nibble_matmul_options o = nibble_matmul_defaults();
  o.weight_in_out = weight_in_out;
  o.y_dtype = y_dtype;
  o.threads = threads;
  return nibble_matmul_with(w, x, bias, &o, y, y_bytes);
}

nibble_status* nibble_checkpoint_open(const char* path, const nibble_checkpoint_options* options,
                                      nibble_checkpoint** out) try {
  if (!path || !out) return Fail("nibble_checkpoint_open: path and out must not be NULL");
  *out = nullptr;
  return nibble::c_api::Wrap(
      nibble::Checkpoint::Open(path, nibble::c_api::ToCheckpointOptions(options)), out);
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_checkpoint_open");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_checkpoint_open: ") + e.what());
}

void nibble_checkpoint_free(nibble_checkpoint* ck) { delete ck; }

const char* nibble_checkpoint_description(const nibble_checkpoint* ck) {
  return ck ? ck->impl.description().c_str() : "";
}

int64_t nibble_checkpoint_property_count(const nibble_checkpoint* ck) {
  return ck ? static_cast<int64_t>(ck->impl.properties().size()) : 0;
}

nibble_status* nibble_checkpoint_property(const nibble_checkpoint* ck, int64_t index,
                                          const char** key, const char** value) {
  if (!ck || !key || !value) return Fail("nibble_checkpoint_property: NULL argument");
  const auto& p = ck->impl.properties();
  if (index < 0 || static_cast<uint64_t>(index) >= p.size()) {
    return Fail("nibble_checkpoint_property: index " + std::to_string(index) + " is outside [0, " +
                std::to_string(p.size()) + ")");
  }
  *key = p[static_cast<size_t>(index)].first.c_str();
  *value = p[static_cast<size_t>(index)].second.c_str();
  return nullptr;
}

int64_t nibble_checkpoint_tensor_count(const nibble_checkpoint* ck) {
  return ck ? static_cast<int64_t>(ck->impl.tensors().size()) : 0;
}

int64_t nibble_checkpoint_find(const nibble_checkpoint* ck, const char* name) {
  if (!ck || !name) return -1;
  const nibble::CheckpointTensor* t = ck->impl.Find(name);
  return t ? static_cast<int64_t>(t - ck->impl.tensors().data()) : -1;
}

namespace {
const nibble::CheckpointTensor* TensorAt(const nibble_checkpoint* ck, int64_t index,
                                         const char* who, nibble_status** err) {
  if (!ck) {
    *err = Fail(std::string(who) + ": checkpoint is NULL");
    return nullptr;
  }
  const auto& ts = ck->impl.tensors();
  if (index < 0 || static_cast<uint64_t>(index) >= ts.size()) {
    *err = Fail(std::string(who) + ": tensor index " + std::to_string(index) + " is outside [0, " +
                std::to_string(ts.size()) + ")");
    return nullptr;
  }
  return &ts[static_cast<size_t>(index)];
}

bool ToReadDType(int32_t dtype, const char* who, nibble::DType* d, nibble_status** err) {
  if (dtype != 0 && dtype != NIBBLE_FLOAT32 && dtype != NIBBLE_FLOAT16 &&
      dtype != NIBBLE_BFLOAT16) {
    *err = Fail(std::string(who) +
                ": dtype must be 0 (the tensor's default), NIBBLE_FLOAT32, "
                "NIBBLE_FLOAT16 or NIBBLE_BFLOAT16 (got " +
                std::to_string(dtype) + ")");
    return false;
  }
  *d = static_cast<nibble::DType>(dtype);
  return true;
}
}  // namespace

nibble_status* nibble_checkpoint_tensor_info(const nibble_checkpoint* ck, int64_t index,
                                             nibble_tensor_info* info) {
  nibble_status* err = nullptr;
  const nibble::CheckpointTensor* t = TensorAt(ck, index, "nibble_checkpoint_tensor_info", &err);
  if (!t) return err;
  if (!info) return Fail("nibble_checkpoint_tensor_info: info is NULL");
  info->name = t->name.c_str();
  info->source = t->source.c_str();
  info->kind = t->kind.c_str();
  info->detail = t->detail.c_str();
  info->rank = static_cast<int32_t>(t->shape.size());
  info->shape = t->shape.data();
  info->quantized = t->quantized ? 1 : 0;
  info->supported = t->supported ? 1 : 0;
  info->why_not = t->why_not.c_str();
  info->stored_dtype = t->quantized ? 0 : static_cast<int32_t>(t->stored_dtype);
  info->default_dtype = static_cast<int32_t>(ck->impl.OutputDType(*t, nibble::DType::kUndefined));
  return nullptr;
}

nibble_status* nibble_checkpoint_read_size(const nibble_checkpoint* ck, int64_t index,
                                           int32_t dtype, int64_t row0, int64_t row1, size_t* bytes,
                                           int32_t* out_dtype) try {
  static const char kWho[] = "nibble_checkpoint_read_size";
  nibble_status* err = nullptr;
  const nibble::CheckpointTensor* t = TensorAt(ck, index, kWho, &err);
  nibble::DType d;
  if (!t || !ToReadDType(dtype, kWho, &d, &err)) return err;
  if (!bytes) return Fail(std::string(kWho) + ": bytes is NULL");
  auto n = ck->impl.OutputBytes(*t, d, row0, row1);
  if (!n.ok()) return FromStatus(n.status());
  *bytes = static_cast<size_t>(*n);
  if (out_dtype) *out_dtype = static_cast<int32_t>(ck->impl.OutputDType(*t, d));
  return nullptr;
} catch (const std::exception& e) {
  return Fail(std::string("nibble_checkpoint_read_size: ") + e.what());
}

nibble_status* nibble_checkpoint_prepare(const nibble_checkpoint* ck, int64_t index, int32_t dtype,
                                         nibble_dequantizer** out) try {
  static const char kWho[] = "nibble_checkpoint_prepare";
  if (!out) return Fail(std::string(kWho) + ": out is NULL");
  *out = nullptr;
  nibble_status* err = nullptr;
  const nibble::CheckpointTensor* t = TensorAt(ck, index, kWho, &err);
  nibble::DType d;
  if (!t || !ToReadDType(dtype, kWho, &d, &err)) return err;
  if (!t->quantized || !t->prepare) {
    return Fail(std::string(kWho) + ": tensor '" + t->name +
                "' is not quantized (read it with nibble_checkpoint_read)");
  }
  if (!t->supported) return Fail(std::string(kWho) + ": tensor '" + t->name + "': " + t->why_not);
  auto buffers = std::make_shared<nibble::CheckpointTensor::Buffers>();
  auto prepared = t->prepare(ck->impl.OutputDType(*t, d), buffers.get());
  if (!prepared.ok()) return Fail(prepared.status().message());
  *out = new nibble_dequantizer{std::move(*prepared), std::move(buffers)};
  return nullptr;
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_checkpoint_prepare");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_checkpoint_prepare: ") + e.what());
}

nibble_status* nibble_checkpoint_read(const nibble_checkpoint* ck, int64_t index, int32_t dtype,
                                      int64_t row0, int64_t row1, void* out, size_t out_bytes,
                                      int32_t threads) {
  return nibble_checkpoint_read_cancellable(ck, index, dtype, row0, row1, out, out_bytes, threads,
                                            nullptr);
}

nibble_status* nibble_checkpoint_read_cancellable(const nibble_checkpoint* ck, int64_t index,
                                                  int32_t dtype, int64_t row0, int64_t row1,
                                                  void* out, size_t out_bytes, int32_t threads,
                                                  const nibble_cancel* cancel) try {
  static const char kWho[] = "nibble_checkpoint_read";
  nibble_status* err = nullptr;
  const nibble::CheckpointTensor* t = TensorAt(ck, index, kWho, &err);
  nibble::DType d;
  if (!t || !ToReadDType(dtype, kWho, &d, &err)) return err;
  return FromStatus(
      ck->impl.Read(*t, d, row0, row1, threads, out, out_bytes, nullptr, CancelOf(cancel)));
} catch (const std::bad_alloc&) {
  return Fail(std::string(nibble::kOutOfMemory) + " in nibble_checkpoint_read");
} catch (const std::exception& e) {
  return Fail(std::string("nibble_checkpoint_read: ") + e.what());
}

}  // extern "C"
