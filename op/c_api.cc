// The C API (op/nibble.h) over the C++ library: translation only.
#include <cstring>
#include <new>
#include <string>

#include "kernels/dequantize.h"
#include "op/nibble.h"
#include "op/onnx.h"
#include "op/pmx.h"
#include "op/version.h"

struct nibble_status {
  std::string message;
};

struct nibble_dequantizer {
  nibble::Dequantizer impl;
};

namespace {

nibble_status* Fail(const std::string& m) { return new (std::nothrow) nibble_status{m}; }

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
  return s->message.compare(0, std::strlen(nibble::kOutOfMemory), nibble::kOutOfMemory) == 0
             ? NIBBLE_STATUS_OUT_OF_MEMORY
             : NIBBLE_STATUS_INVALID;
}
void nibble_status_free(nibble_status* s) { delete s; }

const char* nibble_version(void) { return NIBBLE_VERSION; }
const char* nibble_active_target(void) { return nibble::ActiveTarget(); }

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
  *out = new (std::nothrow) nibble_dequantizer{std::move(*d)};
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
  *out = new (std::nothrow) nibble_dequantizer{std::move(*d)};
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
                                 int32_t threads) try {
  if (!d) return Fail("nibble_dequantize: dequantizer is NULL");
  const auto& o = d->impl.output();
  return FromStatus(
      d->impl.Run(nibble::MutableTensorView{o.dtype, o.shape, out, out_bytes}, threads));
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

}  // extern "C"
