// Python bindings (pybind11): the extension module `nibble._nibble`, wrapped
// by the pure-Python package in tools/python/nibble (nibble.open etc.).
// numpy arrays in and out, zero-copy inputs; the GIL is released while
// nibble works.
//
//   import nibble, numpy as np
//   q = nibble.quantize(w, bits=4, group_size=128)           # PMX int4x4
//   y = nibble.dequantize_pmx(q["x"], q["scale"], **q["attrs"])
//   d = nibble.Dequantizer.pmx(q["x"], q["scale"], **q["attrs"])
//   tile = d.tile(0, 16, 0, 256)
//
// Inputs must be C-contiguous arrays of the expected dtype (no silent
// conversion); sub-byte and float8 ONNX inputs are passed as packed uint8
// arrays with `x_dtype` and `shape`. bfloat16 outputs are returned as
// uint16 arrays of bfloat16 bits (numpy has no bfloat16).
#include <fcntl.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/byte_size.h"
#include "base/xxh64.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/gguf_source.h"
#include "formats/files.h"
#include "formats/gguf.h"
#include "kernels/blas_gemm.h"
#include "kernels/dequantize.h"
#include "kernels/scratch.h"
#include "onnx/fold.h"
#include "onnx/onnx_checkpoint.h"
#include "op/matmul.h"
#include "op/onnx.h"
#include "op/pmx.h"
#include "op/quantize.h"
#include "op/version.h"

namespace py = pybind11;
using nibble::DType;

namespace {

// `v` as 16 lower-case hex digits.
std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

namespace {

// A type name: an output type in any spelling (base/dtype.h), or nibble's
// name of any type ("int4", "float8e4m3fn": packed inputs).
DType ParseDType(const std::string& s) {
  DType t = nibble::ParseOutputDType(s);
  if (t == DType::kUndefined) t = nibble::DTypeNamed(s);
  if (t == DType::kUndefined) throw py::value_error("unknown dtype '" + s + "'");
  return t;
}

// An output type: None (the default), or float32 / float16 / bfloat16 in
// any common spelling.
DType ParseOutputDType(const std::optional<std::string>& s) {
  if (!s) return DType::kUndefined;
  const DType d = nibble::ParseOutputDType(*s);
  if (d == DType::kUndefined) {
    throw py::value_error("dtype must be an output type: " + nibble::OutputDTypeSpellings() +
                          "; got '" + *s + "'");
  }
  return d;
}

// The nibble dtype of a numpy array's element type.
DType FromNumpy(const py::array& a) {
  const char k = a.dtype().kind();
  const auto size = a.dtype().itemsize();
  if (k == 'f' && size == 4) return DType::kFloat32;
  if (k == 'f' && size == 2) return DType::kFloat16;
  if (k == 'i' && size == 1) return DType::kInt8;
  if (k == 'u' && size == 1) return DType::kUInt8;
  if (k == 'i' && size == 2) return DType::kInt16;
  if (k == 'u' && size == 2) return DType::kUInt16;
  if (k == 'i' && size == 4) return DType::kInt32;
  if (k == 'u' && size == 4) return DType::kUInt32;
  // (no operand takes these: the operation names what it wants, e.g.
  // "matmul: X must be float32, float16 or bfloat16, not float64")
  if (k == 'f' && size == 8) return DType::kFloat64;
  if (k == 'i' && size == 8) return DType::kInt64;
  if (k == 'b' && size == 1) return DType::kBool;
  throw py::type_error("unsupported numpy dtype " + std::string(py::str(a.dtype())));
}

// A zero-copy view of a C-contiguous array; `as` overrides the element type
// (packed sub-byte data), `shape` the logical shape.
nibble::TensorView View(const py::array& a, const char* what, std::optional<std::string> as = {},
                        std::optional<std::vector<int64_t>> shape = {}) {
  if (!(a.flags() & py::array::c_style)) {
    throw py::value_error(std::string(what) + " must be C-contiguous (use np.ascontiguousarray)");
  }
  nibble::TensorView v;
  v.dtype = as ? ParseDType(*as) : FromNumpy(a);
  if (shape) {
    v.shape = *shape;
  } else {
    v.shape.assign(a.shape(), a.shape() + a.ndim());
  }
  v.data = a.data();
  v.size_bytes = static_cast<size_t>(a.nbytes());
  return v;
}

// The numpy element type holding a nibble type (bfloat16: uint16 bits).
// Built from numpy's type numbers (py::dtype::of), never from a format
// string: no Python code runs, so no thread can be switched out while it
// holds a C++ static's guard (the first reads of several threads at once
// deadlocked that way). The numpy C API itself is looked up once, at
// module import (WarmUpNumpy).
py::dtype NumpyDType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat16:
      return py::dtype(23);  // NPY_HALF (numpy has no C++ float16 type)
    case DType::kBFloat16:
    case DType::kUInt16:
      return py::dtype::of<uint16_t>();  // bfloat16 bits
    case DType::kFloat64:
      return py::dtype::of<double>();
    case DType::kInt8:
      return py::dtype::of<int8_t>();
    case DType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DType::kInt16:
      return py::dtype::of<int16_t>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kUInt32:
      return py::dtype::of<uint32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kUInt64:
      return py::dtype::of<uint64_t>();
    case DType::kBool:
      return py::dtype::of<bool>();
    default:
      throw py::value_error("numpy has no type for " + nibble::DTypeName(t) +
                            ": ask for dtype='float32', 'float16' or 'bfloat16' (exact)");
  }
}

// Called once at import, under the import lock: everything NumpyDType and
// the array casters need from numpy, looked up before any thread can race.
void WarmUpNumpy() {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                  DType::kUInt8, DType::kInt16, DType::kInt32, DType::kUInt32, DType::kInt64,
                  DType::kUInt64, DType::kBool}) {
    (void)NumpyDType(t);
  }
  (void)py::array(py::dtype::of<float>(), std::vector<py::ssize_t>{1});
  (void)py::dtype("float32");
}

// Text from nibble for Python. Names (tensors, metadata keys) are bytes
// that are usually UTF-8: decoded with surrogateescape, like os.fsdecode,
// so a name that is not valid UTF-8 still round-trips (NameArg encodes
// it back). Messages: backslashreplace.
py::str DecodeName(const std::string& s) {
  PyObject* o =
      PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "surrogateescape");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}
py::str DecodeMessage(const std::string& s) {
  PyObject* o =
      PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "backslashreplace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}
// A name argument: str (encoded with surrogateescape) or bytes.
std::string NameArg(const py::handle& h) {
  if (PyBytes_Check(h.ptr())) return std::string(py::reinterpret_borrow<py::bytes>(h));
  if (!PyUnicode_Check(h.ptr())) throw py::type_error("a tensor name must be str or bytes");
  PyObject* b = PyUnicode_AsEncodedString(h.ptr(), "utf-8", "surrogateescape");
  if (b == nullptr) throw py::error_already_set();
  return std::string(py::reinterpret_steal<py::bytes>(b));
}

py::array NewOutput(DType t, const nibble::Shape& shape) {
  return py::array(NumpyDType(t), std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

// Errors become ValueError; allocation failures MemoryError. The message
// is decoded with backslashreplace (it may quote names that are not
// UTF-8).
void Check(const nibble::Status& s) {
  if (s.ok()) return;
  const bool oom = s.message().rfind(nibble::kOutOfMemory, 0) == 0;
  PyErr_SetObject(oom ? PyExc_MemoryError : PyExc_ValueError, DecodeMessage(s.message()).ptr());
  throw py::error_already_set();
}

// How a long call (dequant, fold, matmul) is stopped from Python: a pending
// signal's exception (Ctrl-C: KeyboardInterrupt) or an exception raised by
// the progress callback. The library asks `cancelled` between tensors and
// row chunks (a matmul: between tiles; a read: between pieces of rows of
// kCancelCheckBytes); the first exception is kept and re-raised when the
// call returns, with nothing published. Lives on the calling frame, which
// outlives the conversion.
class PyStop {
 public:
  PyStop() = default;
  PyStop(const PyStop&) = delete;
  PyStop& operator=(const PyStop&) = delete;
  ~PyStop() {
    if (type_ != nullptr || value_ != nullptr || tb_ != nullptr) {
      py::gil_scoped_acquire gil;
      Py_XDECREF(type_);
      Py_XDECREF(value_);
      Py_XDECREF(tb_);
    }
  }
  // With the GIL: keeps the pending Python error (the first one only).
  void KeepError() {
    if (type_ != nullptr) {
      PyErr_Clear();
      return;
    }
    PyErr_Fetch(&type_, &value_, &tb_);
  }
  // Called without the GIL (from the converting thread).
  bool Cancelled() {
    py::gil_scoped_acquire gil;
    if (type_ != nullptr) return true;
    if (PyErr_CheckSignals() != 0) {
      KeepError();
      return true;
    }
    return false;
  }
  // With the GIL, after the call: re-raises the kept exception, if any.
  void RaiseIfStopped() {
    if (type_ == nullptr) return;
    PyErr_Restore(type_, value_, tb_);
    type_ = value_ = tb_ = nullptr;
    throw py::error_already_set();
  }
  nibble::CancelCallback Callback() {
    return [this] { return Cancelled(); };
  }

 private:
  PyObject* type_ = nullptr;
  PyObject* value_ = nullptr;
  PyObject* tb_ = nullptr;
};

// A prepared request, keeping the arrays it references alive.
struct PyDequantizer {
  std::unique_ptr<nibble::Dequantizer> d;
  std::vector<py::object> keep;
  std::shared_ptr<const void> hold;  // what a checkpoint's Dequantizer reads

  // Y = X · W (op/matmul.h), GIL released.
  py::array MatMul(const py::array& x, const std::optional<py::array>& bias,
                   const std::string& weight, int threads, std::optional<std::string> out_dtype,
                   std::optional<std::string> x_dtype, std::optional<int64_t> expert,
                   const std::string& gemm) const {
    Check(nibble::CheckThreads(threads));
    nibble::MatMulOptions o;
    if (gemm == "exact") {
      o.gemm = nibble::MatMulOptions::Gemm::kExact;
    } else if (gemm == "blas") {
      o.gemm = nibble::MatMulOptions::Gemm::kBlas;
    } else {
      throw py::value_error("gemm must be 'exact' or 'blas', not '" + gemm + "'");
    }
    if (weight == "out_in") {
      o.weight = nibble::MatMulOptions::Weight::kOutIn;
    } else if (weight == "in_out") {
      o.weight = nibble::MatMulOptions::Weight::kInOut;
    } else {
      throw py::value_error(
          "weight must be 'out_in' ([N, K], y = x @ W.T) or 'in_out' ([K, N], "
          "y = x @ W), not '" +
          weight + "'");
    }
    o.threads = threads;
    o.expert = expert ? *expert : -1;
    if (expert && *expert < 0) {
      throw py::value_error("expert must be >= 0, not " + std::to_string(*expert));
    }
    const nibble::TensorView xv = View(x, "x", x_dtype);
    nibble::TensorView bv;
    if (bias) bv = View(*bias, "bias");
    const DType yt = out_dtype ? ParseOutputDType(out_dtype) : DType::kFloat32;
    auto ys = nibble::MatMulOutputShape(*d, xv.shape, o);
    Check(ys.status());
    py::array y = NewOutput(yt, *ys);
    nibble::MutableTensorView yv{yt, *ys, y.mutable_data(), static_cast<size_t>(y.nbytes())};
    PyStop stop;  // Ctrl-C stops a long matmul between tiles
    o.cancelled = stop.Callback();
    nibble::Status st;
    {
      py::gil_scoped_release release;
      st = nibble::MatMul(*d, xv, yv, bias ? &bv : nullptr, o);
    }
    stop.RaiseIfStopped();
    Check(st);
    return y;
  }

  py::array Run(int threads, std::optional<py::array> out) const {
    py::array y = out ? *out : NewOutput(d->output().dtype, d->output().shape);
    if (out) {
      if (!(y.flags() & py::array::c_style) || !y.writeable()) {
        throw py::value_error("out must be a writeable C-contiguous array");
      }
      const DType want = d->output().dtype;
      const bool ok_type = want == DType::kFloat32   ? y.dtype().is(py::dtype("float32"))
                           : want == DType::kFloat16 ? y.dtype().is(py::dtype("float16"))
                                                     : y.dtype().is(py::dtype("uint16"));
      if (!ok_type) throw py::value_error("out has the wrong dtype for " + nibble::DTypeName(want));
    }
    nibble::MutableTensorView v{d->output().dtype, d->output().shape, y.mutable_data(),
                                static_cast<size_t>(y.nbytes())};
    PyStop stop;  // Ctrl-C stops a long run between pieces of rows
    nibble::Status st;
    {
      py::gil_scoped_release release;
      st = d->Run(v, threads, stop.Callback());
    }
    stop.RaiseIfStopped();
    Check(st);
    return y;
  }
  py::array Tile(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    // Bounds first: nothing is allocated for a tile outside the view.
    if (r0 < 0 || r1 < r0 || r1 > d->rows() || c0 < 0 || c1 < c0 || c1 > d->cols()) {
      throw py::value_error("tile rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                            ") x cols [" + std::to_string(c0) + ", " + std::to_string(c1) +
                            ") is outside the " + std::to_string(d->rows()) + " x " +
                            std::to_string(d->cols()) + " view");
    }
    py::array y = NewOutput(d->output().dtype, {r1 - r0, c1 - c0});
    void* out = y.mutable_data();
    nibble::Status st;
    {
      py::gil_scoped_release release;
      st = d->RunTile(r0, r1, c0, c1, out, c1 - c0);
    }
    Check(st);
    return y;
  }
};

nibble::PmxAttributes PmxAttrs(const std::string& quant_data_type, int64_t quant_axis,
                               int64_t group_size, bool has_zeropoint, bool float_zeropoint) {
  nibble::PmxAttributes a;
  a.quant_data_type = quant_data_type;
  a.quant_axis = quant_axis;
  a.group_size = group_size;
  a.has_zeropoint = has_zeropoint ? 1 : 0;
  a.float_zeropoint = float_zeropoint ? 1 : 0;
  return a;
}

PyDequantizer PreparePmx(const py::array& x, const py::array& scale,
                         const std::optional<py::array>& zero_point,
                         const std::string& quant_data_type, int64_t quant_axis, int64_t group_size,
                         std::optional<bool> has_zeropoint, bool float_zeropoint,
                         std::optional<std::string> output_dtype) {
  PyDequantizer p;
  const nibble::TensorView xv = View(x, "x"), sv = View(scale, "scale");
  nibble::TensorView zv;
  if (zero_point) zv = View(*zero_point, "zero_point");
  nibble::DequantizeOptions o;
  o.output_dtype = ParseOutputDType(output_dtype);
  auto d =
      nibble::PreparePmx(PmxAttrs(quant_data_type, quant_axis, group_size,
                                  has_zeropoint.value_or(zero_point.has_value()), float_zeropoint),
                         xv, sv, zero_point ? &zv : nullptr, o);
  Check(d.status());
  p.d = std::make_unique<nibble::Dequantizer>(std::move(*d));
  p.keep = {x, scale};
  if (zero_point) p.keep.push_back(*zero_point);
  return p;
}

PyDequantizer PrepareOnnx(const py::array& x, const py::array& scale,
                          const std::optional<py::array>& zero_point, int64_t axis,
                          int64_t block_size, std::optional<std::string> output_dtype, int opset,
                          std::optional<std::string> x_dtype,
                          std::optional<std::vector<int64_t>> shape,
                          std::optional<std::string> scale_dtype) {
  PyDequantizer p;
  const nibble::TensorView xv = View(x, "x", x_dtype, shape);
  nibble::TensorView sv = View(scale, "scale", scale_dtype);
  nibble::TensorView zv;
  if (zero_point) {
    // The zero point has x's type; a packed one has scale's shape.
    std::optional<std::vector<int64_t>> zshape;
    if (x_dtype) zshape = std::vector<int64_t>(sv.shape.begin(), sv.shape.end());
    zv = View(*zero_point, "zero_point", x_dtype, zshape);
  }
  nibble::OnnxDequantizeAttributes a;
  a.opset = opset;
  a.axis = axis;
  a.has_axis = opset >= 13;
  a.block_size = block_size;
  a.has_block_size = block_size != 0;
  if (output_dtype) {
    a.output_dtype = static_cast<int32_t>(ParseOutputDType(output_dtype));
    a.has_output_dtype = true;
  }
  auto d = nibble::PrepareOnnx(a, xv, sv, zero_point ? &zv : nullptr);
  Check(d.status());
  p.d = std::make_unique<nibble::Dequantizer>(std::move(*d));
  p.keep = {x, scale};
  if (zero_point) p.keep.push_back(*zero_point);
  return p;
}

py::array TensorToNumpy(const nibble::Tensor& t) {
  py::array a = NewOutput(t.dtype(), t.shape());
  std::memcpy(a.mutable_data(), t.data(), t.size_bytes());
  return a;
}

// A Python callable as a progress callback: called with (tensors_done,
// tensors_total, bytes_done, bytes_total) under the GIL; an exception it
// raises stops the conversion (kept in `stop` and re-raised by the
// caller). The object is held through a shared_ptr whose deleter takes the
// GIL, so copies of the callback made while the GIL is released never
// touch refcounts.
nibble::ProgressCallback PyProgress(const py::object& cb, PyStop* stop) {
  if (cb.is_none()) return {};
  if (!PyCallable_Check(cb.ptr())) throw py::type_error("progress must be callable or None");
  std::shared_ptr<py::object> held(new py::object(cb), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held, stop](const nibble::Progress& p) {
    py::gil_scoped_acquire gil;
    try {
      (*held)(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total);
    } catch (py::error_already_set& e) {
      e.restore();
      stop->KeepError();
    }
  };
}

// A GGUF metadata value as a Python object: int, float, bool, str (names'
// decoding: surrogateescape); an array whose elements the header kept
// whole (at most GgufValue::kMaxKeptItems) as a list, a longer one as a
// _GgufArray that reads its elements from the file when asked.
py::object GgufToPython(const std::shared_ptr<const nibble::GgufFile>& f, const std::string& key,
                        const nibble::GgufValue& v);

// A long GGUF metadata array, read on request (tokenizer vocabularies hold
// hundreds of thousands of strings).
class PyGgufArray {
 public:
  PyGgufArray(std::shared_ptr<const nibble::GgufFile> f, std::string key,
              const nibble::GgufValue* v)
      : f_(std::move(f)), key_(std::move(key)), v_(v) {}
  uint64_t count() const { return v_->count; }
  std::string elem_type() const {
    static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                         "bool", "string", "array", "u64", "i64", "f64"};
    const auto k = static_cast<uint32_t>(v_->elem);
    return k < 13 ? kNames[k] : "?";
  }
  py::list Load() const {
    py::list out;
    using T = nibble::GgufValueType;
    if (v_->elem == T::kString) {
      std::vector<std::string> items;
      Check(f_->ReadArray(key_, *v_, &items));
      for (const std::string& s : items) out.append(DecodeName(s));
      return out;
    }
    std::vector<double> items;
    Check(f_->ReadArray(key_, *v_, &items));
    for (double d : items) {
      if (v_->elem == T::kF32 || v_->elem == T::kF64) {
        out.append(py::float_(d));
      } else if (v_->elem == T::kBool) {
        out.append(py::bool_(d != 0));
      } else {
        out.append(py::int_(static_cast<int64_t>(d)));
      }
    }
    return out;
  }

 private:
  std::shared_ptr<const nibble::GgufFile> f_;
  std::string key_;
  const nibble::GgufValue* v_;  // owned by *f_
};

py::object GgufToPython(const std::shared_ptr<const nibble::GgufFile>& f, const std::string& key,
                        const nibble::GgufValue& v) {
  using T = nibble::GgufValueType;
  switch (v.type) {
    case T::kU8:
    case T::kU16:
    case T::kU32:
    case T::kU64:
      return py::int_(v.u);
    case T::kI8:
    case T::kI16:
    case T::kI32:
    case T::kI64:
      return py::int_(v.i);
    case T::kF32:
    case T::kF64:
      return py::float_(v.f);
    case T::kBool:
      return py::bool_(v.u != 0);
    case T::kString:
      return DecodeName(v.s);
    case T::kArray:
      break;
  }
  if (v.count <= v.items.size()) {  // kept whole
    py::list out;
    for (const nibble::GgufValue& item : v.items) out.append(GgufToPython(f, key, item));
    return out;
  }
  if (v.elem == T::kArray) return DecodeName(v.ToString());  // nested: shown, not read
  return py::cast(PyGgufArray(f, key, &v));
}

// An open checkpoint (nibble::Checkpoint); reads release the GIL, and one
// object may be read from several Python threads at once.
class PyCheckpoint {
 public:
  PyCheckpoint(const std::string& path, const std::string& gptq_format,
               const std::string& gptq_v1_zeros) {
    nibble::CheckpointOptions o;
    o.gptq_format = gptq_format;
    o.gptq_v1_zeros = gptq_v1_zeros;
    nibble::StatusOr<nibble::Checkpoint> ck = nibble::Status::Error("not opened");
    {
      py::gil_scoped_release release;
      ck = nibble::OpenAnyCheckpoint(path, o);
    }
    Check(ck.status());
    ck_ = std::make_shared<nibble::Checkpoint>(std::move(*ck));
    if (!nibble::IsDirectory(path) && nibble::HasGgufMagic(path)) {
      // The typed metadata (GgufMetadata) reads the header once more.
      py::gil_scoped_release release;
      auto g = nibble::GgufFile::Open(path);
      Check(g.status());
      gguf_ = *g;
    }
  }

  void Close() {
    ck_.reset();
    gguf_.reset();
  }
  bool closed() const { return ck_ == nullptr; }

  const nibble::Checkpoint& ck() const { return *Held(); }

  std::shared_ptr<const nibble::Checkpoint> Held() const {
    if (!ck_) throw py::value_error("the checkpoint is closed");
    return ck_;
  }

  py::str Description() const { return DecodeMessage(ck().description()); }

  // (key, value) pairs, decoded as names (surrogateescape): inspect's
  // properties, or the files' own metadata.
  static py::list Pairs(const std::vector<std::pair<std::string, std::string>>& kv) {
    py::list out;
    for (const auto& [k, v] : kv) out.append(py::make_tuple(DecodeName(k), DecodeName(v)));
    return out;
  }
  py::list Properties() const { return Pairs(ck().properties()); }
  py::list Metadata() const { return Pairs(ck().metadata()); }
  // A GGUF file's metadata with typed values (GgufToPython); None for
  // other checkpoints.
  py::object GgufMetadata() const {
    Held();
    if (!gguf_) return py::none();
    py::list out;
    for (const auto& [k, v] : gguf_->metadata()) {
      out.append(py::make_tuple(DecodeName(k), GgufToPython(gguf_, k, v)));
    }
    return out;
  }

  py::list Tensors() const {
    py::list out;
    for (const auto& t : ck().tensors()) out.append(Info(t));
    return out;
  }

  // Output names, in checkpoint order.
  py::list Names() const {
    py::list out;
    for (const auto& t : ck().tensors()) out.append(DecodeName(t.name));
    return out;
  }

  // The info of the tensor named `name` (output or input name; KeyError).
  py::dict InfoOf(const py::object& name) const { return Info(Find(NameArg(name))); }

  // The output name of `name` (output or input name), or None.
  py::object Resolve(const py::object& name) const {
    const nibble::CheckpointTensor* t = ck().Find(NameArg(name));
    return t == nullptr ? py::object(py::none()) : py::object(DecodeName(t->name));
  }

  py::dict Info(const nibble::CheckpointTensor& t) const {
    py::dict d;
    d["name"] = DecodeName(t.name);
    d["source"] = DecodeName(t.source);
    d["kind"] = t.kind;
    d["detail"] = DecodeMessage(t.detail);
    d["shape"] = py::tuple(py::cast(t.shape));
    d["quantized"] = t.quantized;
    d["supported"] = t.supported;
    d["why_not"] = DecodeMessage(t.why_not);
    d["stored_bytes"] = t.stored_bytes;
    d["stored_dtype"] = t.quantized ? py::object(py::none())
                                    : py::object(py::str(nibble::DTypeName(t.stored_dtype)));
    const DType out = ck().OutputDType(t, DType::kUndefined);
    d["dtype"] = nibble::DTypeName(out);
    const char* st = nibble::SafetensorsDTypeName(out);
    d["safetensors_dtype"] = st != nullptr ? std::string(st) : nibble::DTypeName(out);
    return d;
  }

  // A prepared Dequantizer of quantized tensor `name` (for matmul and
  // tiles), holding the checkpoint and the inputs it read.
  PyDequantizer DequantizerOf(const py::object& name, std::optional<std::string> dtype) const {
    const nibble::CheckpointTensor& t = Find(NameArg(name));
    if (!t.quantized || !t.prepare) {
      throw py::value_error("tensor '" + nibble::EscapeBytes(t.name) +
                            "' is not quantized (read it with get_tensor)");
    }
    if (!t.supported) {
      throw py::value_error("tensor '" + nibble::EscapeBytes(t.name) + "': " + t.why_not);
    }
    const DType req = ParseOutputDType(dtype);
    auto held = Held();
    auto buffers = std::make_shared<nibble::CheckpointTensor::Buffers>();
    nibble::StatusOr<nibble::Dequantizer> d = nibble::Status::Error("not prepared");
    {
      py::gil_scoped_release release;
      d = t.prepare(held->OutputDType(t, req), buffers.get());
    }
    Check(d.status());
    PyDequantizer p;
    p.d = std::make_unique<nibble::Dequantizer>(std::move(*d));
    p.hold = std::make_shared<std::pair<std::shared_ptr<const nibble::Checkpoint>,
                                        std::shared_ptr<nibble::CheckpointTensor::Buffers>>>(
        std::move(held), std::move(buffers));
    return p;
  }

  const nibble::CheckpointTensor& Find(const std::string& name) const {
    const nibble::CheckpointTensor* t = ck().Find(name);
    if (t == nullptr) {
      PyErr_SetObject(PyExc_KeyError,
                      DecodeMessage("no tensor named '" + nibble::EscapeBytes(name) + "'").ptr());
      throw py::error_already_set();
    }
    return *t;
  }

  // Rows [start, stop) of the first dimension (stop None = to the end).
  // Returns (array, nibble's name of the element type): bfloat16 is a
  // uint16 array of its bits.
  py::tuple Read(const py::object& name_arg, const std::optional<std::string>& dtype, int64_t start,
                 std::optional<int64_t> stop, int threads) const {
    const std::string name = NameArg(name_arg);
    // Hold the checkpoint: another Python thread may close() it while this
    // read runs without the GIL.
    const std::shared_ptr<const nibble::Checkpoint> hold = Held();
    const nibble::Checkpoint& c = *hold;
    const nibble::CheckpointTensor& t = Find(name);
    const DType want = ParseOutputDType(dtype);
    Check(nibble::CheckThreads(threads));
    if (!t.supported) Check(nibble::Status::Error("tensor '" + t.name + "': " + t.why_not));
    const int64_t r1 = stop.value_or(nibble::Checkpoint::Rows(t));
    // Validated before anything is allocated.
    auto bytes = c.OutputBytes(t, want, start, r1);
    Check(bytes.status());
    const DType out = c.OutputDType(t, want);
    if (want == DType::kUndefined && out != DType::kBFloat16 && out != DType::kFloat16) {
      try {
        (void)NumpyDType(out);
      } catch (py::value_error&) {
        Check(nibble::Status::Error("tensor '" + t.name + "' is " + nibble::DTypeName(out) +
                                    ", which numpy has no type for: read it with dtype='float32' "
                                    "(or 'bfloat16', 'float16'; exact)"));
      }
    }
    nibble::Shape shape = t.shape;
    if (!shape.empty()) shape[0] = r1 - start;
    std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    py::array y(NumpyDType(out), dims);
    void* dst = y.mutable_data();
    const size_t n = static_cast<size_t>(y.nbytes());
    PyStop ctrl_c;  // Ctrl-C stops a long read between pieces of rows
    nibble::Status st;
    {
      py::gil_scoped_release release;
      st = c.Read(t, want, start, r1, threads, dst, n, nullptr, ctrl_c.Callback());
    }
    ctrl_c.RaiseIfStopped();
    Check(st);
    return py::make_tuple(y, nibble::DTypeName(out));
  }

 private:
  std::shared_ptr<nibble::Checkpoint> ck_;
  std::shared_ptr<const nibble::GgufFile> gguf_;  // GGUF files only
};

}  // namespace

PYBIND11_MODULE(_nibble, m) {
  WarmUpNumpy();
  m.doc() = "nibble: exact, fast dequantization of grouped int4/int8 weights";
  m.attr("__version__") = NIBBLE_VERSION;
  m.def("active_target", [] { return std::string(nibble::ActiveTarget()); });
  m.def(
      "blas",
      []() -> std::optional<std::string> {
        if (!nibble::BlasAvailable()) return std::nullopt;
        return std::string(nibble::BlasName());
      },
      "The BLAS behind matmul(gemm='blas') (OpenBLAS's configuration: version and the "
      "kernels it picked for this CPU), or None in a build without it.");
  m.def(
      "safetensors_dtype",
      [](const std::string& spelling) {
        const char* st = nibble::SafetensorsDTypeName(ParseOutputDType(spelling));
        return std::string(st != nullptr ? st : "");
      },
      "The safetensors name ('BF16') of an output type in any spelling.");
  m.def(
      "release_cached_memory",
      [] {
        nibble::ReleaseCachedParameterBlocks();
        nibble::ReleaseMatMulScratch();
        nibble::ReleaseKernelScratch();
      },
      "Returns to the system the large parameter blocks (widened scales / zero points) the "
      "calling thread keeps for its next preparations, its matmul scratch and its kernels' "
      "staging buffer; live dequantizers are not affected.");

  py::class_<PyDequantizer>(m, "Dequantizer")
      .def_static("pmx", &PreparePmx, py::arg("x"), py::arg("scale"),
                  py::arg("zero_point") = py::none(), py::kw_only(),
                  py::arg("quant_data_type") = "int4", py::arg("quant_axis") = 1,
                  py::arg("group_size") = 128, py::arg("has_zeropoint") = py::none(),
                  py::arg("float_zeropoint") = false, py::arg("output_dtype") = py::none(),
                  "Validate and lower a PMX DequantizeLinear request.")
      .def_static("onnx", &PrepareOnnx, py::arg("x"), py::arg("scale"),
                  py::arg("zero_point") = py::none(), py::kw_only(), py::arg("axis") = 1,
                  py::arg("block_size") = 0, py::arg("output_dtype") = py::none(),
                  py::arg("opset") = 25, py::arg("x_dtype") = py::none(),
                  py::arg("shape") = py::none(), py::arg("scale_dtype") = py::none(),
                  "Validate and lower an ONNX DequantizeLinear request.")
      .def("run", &PyDequantizer::Run, py::arg("threads") = 0, py::arg("out") = py::none(),
           "Dequantize the whole tensor (threads: 0 = all, 1 = this thread) into a new array, "
           "or into `out` (C-contiguous, the output's dtype and shape).")
      .def("tile", &PyDequantizer::Tile, py::arg("r0"), py::arg("r1"), py::arg("c0"), py::arg("c1"),
           "Rows [r0, r1) x cols [c0, c1) of the 2-D view.")
      .def("matmul", &PyDequantizer::MatMul, py::arg("x"), py::arg("bias") = py::none(),
           py::kw_only(), py::arg("weight") = "out_in", py::arg("threads") = 0,
           py::arg("out_dtype") = py::none(), py::arg("x_dtype") = py::none(),
           py::arg("expert") = py::none(), py::arg("gemm") = "exact",
           "y = x @ W.T (weight='out_in': the output is [N, K]) or x @ W ('in_out': [K, N]), "
           "+ bias; x float32 / float16 / bfloat16 (uint16 bits with x_dtype='bfloat16'), y "
           "float32 or x's type (out_dtype). A 3-D weight [E, ., .] (MoE experts): W is "
           "expert `expert`'s matrix. Same bits for every thread count. gemm='exact': a "
           "fixed-order dot (the same bits on every machine and batch size); 'blas': from 32 "
           "rows of x, dequantized tiles through OpenBLAS's sgemm (prefill, about "
           "2x faster; its bits depend on the CPU and library; nibble.blas() says which).")
      .def_property_readonly("rows", [](const PyDequantizer& p) { return p.d->rows(); })
      .def_property_readonly("cols", [](const PyDequantizer& p) { return p.d->cols(); })
      .def_property_readonly("shape", [](const PyDequantizer& p) { return p.d->output().shape; })
      .def_property_readonly(
          "dtype", [](const PyDequantizer& p) { return nibble::DTypeName(p.d->output().dtype); });

  m.def(
      "dequantize_pmx",
      [](const py::array& x, const py::array& scale, const std::optional<py::array>& zp,
         const std::string& qdt, int64_t qa, int64_t g, std::optional<bool> hz, bool fz,
         std::optional<std::string> out, int threads) {
        return PreparePmx(x, scale, zp, qdt, qa, g, hz, fz, out).Run(threads, std::nullopt);
      },
      py::arg("x"), py::arg("scale"), py::arg("zero_point") = py::none(), py::kw_only(),
      py::arg("quant_data_type") = "int4", py::arg("quant_axis") = 1, py::arg("group_size") = 128,
      py::arg("has_zeropoint") = py::none(), py::arg("float_zeropoint") = false,
      py::arg("output_dtype") = py::none(), py::arg("threads") = 0,
      "PMX DequantizeLinear (OpenPPL): x int8 codes, or int4 packed four per int16 word\n"
      "(int4x4), grouped along quant_axis; returns a new array (bfloat16 as uint16 bits).");
  m.def(
      "dequantize_onnx",
      [](const py::array& x, const py::array& scale, const std::optional<py::array>& zp,
         int64_t axis, int64_t bs, std::optional<std::string> out, int opset,
         std::optional<std::string> xd, std::optional<std::vector<int64_t>> shape,
         std::optional<std::string> sd, int threads) {
        return PrepareOnnx(x, scale, zp, axis, bs, out, opset, xd, shape, sd)
            .Run(threads, std::nullopt);
      },
      py::arg("x"), py::arg("scale"), py::arg("zero_point") = py::none(), py::kw_only(),
      py::arg("axis") = 1, py::arg("block_size") = 0, py::arg("output_dtype") = py::none(),
      py::arg("opset") = 25, py::arg("x_dtype") = py::none(), py::arg("shape") = py::none(),
      py::arg("scale_dtype") = py::none(), py::arg("threads") = 0,
      "ONNX DequantizeLinear (opsets 10-25).");
  m.def(
      "quantize",
      [](const py::array_t<float, py::array::c_style>& w, int bits, const std::string& scheme,
         int64_t quant_axis, int64_t group_size, bool per_tensor, const std::string& scale_dtype) {
        nibble::QuantizeConfig c;
        c.bits = bits;
        if (scheme == "symmetric")
          c.scheme = nibble::QuantScheme::kSymmetric;
        else if (scheme == "asymmetric")
          c.scheme = nibble::QuantScheme::kAsymmetric;
        else if (scheme == "float_zeropoint")
          c.scheme = nibble::QuantScheme::kFloatZeroPoint;
        else
          throw py::value_error("scheme must be symmetric, asymmetric or float_zeropoint");
        c.quant_axis = quant_axis;
        c.group_size = group_size;
        c.per_tensor = per_tensor;
        c.scale_dtype = ParseDType(scale_dtype);
        nibble::Shape shape(w.shape(), w.shape() + w.ndim());
        auto q = nibble::QuantizePmx(w.data(), shape, c);
        Check(q.status());
        py::dict out;
        out["x"] = TensorToNumpy(q->x);
        out["scale"] = TensorToNumpy(q->scale);
        out["zero_point"] = q->zero_point.dtype() == DType::kUndefined
                                ? py::object(py::none())
                                : py::object(TensorToNumpy(q->zero_point));
        py::dict attrs;
        attrs["quant_data_type"] = q->attrs.quant_data_type;
        attrs["quant_axis"] = q->attrs.quant_axis;
        attrs["group_size"] = q->attrs.group_size;
        attrs["float_zeropoint"] = q->attrs.float_zeropoint == 1;
        out["attrs"] = attrs;
        return out;
      },
      py::arg("w"), py::kw_only(), py::arg("bits") = 4, py::arg("scheme") = "symmetric",
      py::arg("quant_axis") = 1, py::arg("group_size") = 128, py::arg("per_tensor") = false,
      py::arg("scale_dtype") = "float32",
      "Quantize a float32 weight as PMX DequantizeLinear expects it (round to nearest,\n"
      "ties to even): returns a dict with x, scale, zero_point and attrs.");

  py::class_<PyGgufArray>(m, "_GgufArrayRef")
      .def_property_readonly("count", &PyGgufArray::count)
      .def_property_readonly("elem_type", &PyGgufArray::elem_type)
      .def("load", &PyGgufArray::Load);

  py::class_<PyCheckpoint>(m, "_Checkpoint")
      .def(py::init<const std::string&, const std::string&, const std::string&>(), py::arg("path"),
           py::arg("gptq_format") = "", py::arg("gptq_v1_zeros") = "")
      .def("close", &PyCheckpoint::Close)
      .def_property_readonly("closed", &PyCheckpoint::closed)
      .def("description", &PyCheckpoint::Description)
      .def("properties", &PyCheckpoint::Properties)
      .def("metadata", &PyCheckpoint::Metadata)
      .def("gguf_metadata", &PyCheckpoint::GgufMetadata)
      .def("tensors", &PyCheckpoint::Tensors)
      .def("names", &PyCheckpoint::Names)
      .def("info", &PyCheckpoint::InfoOf, py::arg("name"))
      .def("resolve", &PyCheckpoint::Resolve, py::arg("name"))
      .def("dequantizer", &PyCheckpoint::DequantizerOf, py::arg("name"),
           py::arg("dtype") = py::none())
      .def("read", &PyCheckpoint::Read, py::arg("name"), py::arg("dtype") = py::none(),
           py::arg("start") = 0, py::arg("stop") = py::none(), py::arg("threads") = 0);

  // nibble.dequant and the steps of nibble.distributed: the same options.
  struct DequantArgs {
    std::optional<std::string> dtype;
    std::string tensors, exclude;
    bool skip_unsupported = false;
    int threads = 0;
    bool hf = false;
    int64_t max_shard_bytes = 5'000'000'000;
    std::string gptq_format, gptq_v1_zeros;
  };
  py::class_<DequantArgs>(m, "_DequantArgs")
      .def(py::init([](std::optional<std::string> dtype, std::string tensors, std::string exclude,
                       bool skip_unsupported, int threads, bool hf, const py::object& max_shard,
                       std::string gptq_format, std::string gptq_v1_zeros) {
             Check(nibble::CheckThreads(threads));
             // An int of bytes, or a size as transformers writes it ("5GB").
             int64_t max_shard_bytes = 0;
             if (py::isinstance<py::str>(max_shard)) {
               const uint64_t n = nibble::ParseByteSize(max_shard.cast<std::string>());
               if (n == 0 || n > uint64_t{INT64_MAX}) {
                 throw py::value_error(
                     "max_shard_bytes must be a positive size: bytes, or a string with a unit "
                     "(\"5GB\", \"500MB\", \"4GiB\"), not '" +
                     max_shard.cast<std::string>() + "'");
               }
               max_shard_bytes = static_cast<int64_t>(n);
             } else {
               max_shard_bytes = max_shard.cast<int64_t>();
               if (max_shard_bytes <= 0) throw py::value_error("max_shard_bytes must be positive");
             }
             return DequantArgs{std::move(dtype),
                                std::move(tensors),
                                std::move(exclude),
                                skip_unsupported,
                                threads,
                                hf,
                                max_shard_bytes,
                                std::move(gptq_format),
                                std::move(gptq_v1_zeros)};
           }),
           py::kw_only(), py::arg("dtype") = py::none(), py::arg("tensors") = "",
           py::arg("exclude") = "", py::arg("skip_unsupported") = false, py::arg("threads") = 0,
           py::arg("hf") = false, py::arg("max_shard_bytes") = int64_t{5'000'000'000},
           py::arg("gptq_format") = "", py::arg("gptq_v1_zeros") = "");
  // Runs DequantAnyCheckpoint with `args` (GIL released); a dict report.
  auto run_dequant = [](const std::string& in, const std::string& out, const DequantArgs& args,
                        const py::object& progress, nibble::FolderStep* step) {
    PyStop stop;
    nibble::DequantOptions o;
    o.progress = PyProgress(progress, &stop);
    o.cancelled = stop.Callback();
    o.dtype = ParseOutputDType(args.dtype);
    o.tensors = args.tensors;
    o.exclude = args.exclude;
    o.skip_unsupported = args.skip_unsupported;
    o.threads = args.threads;
    o.hf = args.hf;
    o.max_shard_bytes = static_cast<uint64_t>(args.max_shard_bytes);
    o.open.gptq_format = args.gptq_format;
    o.open.gptq_v1_zeros = args.gptq_v1_zeros;
    o.step = step;
    nibble::DequantReport r;
    nibble::Status st;
    {
      py::gil_scoped_release release;
      st = nibble::DequantAnyCheckpoint(in, out, o, &r);
    }
    if (!st.ok()) stop.RaiseIfStopped();
    Check(st);
    py::dict d;
    d["dequantized"] = r.dequantized;
    d["copied"] = r.copied;
    d["bytes"] = r.bytes;
    py::list skipped, notes;
    for (const auto& x : r.skipped) skipped.append(DecodeMessage(x));
    for (const auto& x : r.notes) notes.append(DecodeMessage(x));
    d["skipped"] = skipped;
    d["notes"] = notes;
    return d;
  };
  m.def(
      "dequant",
      [run_dequant](const std::string& in, const std::string& out, const DequantArgs& args,
                    const py::object& progress) {
        return run_dequant(in, out, args, progress, nullptr);
      },
      py::arg("input"), py::arg("output"), py::arg("args"), py::arg("progress") = py::none());
  // One FolderStep (checkpoint/convert.h) for nibble.distributed: kind
  // "plan", "shard" or "index"; the report gains "key" and "shards"
  // (name, bytes, tensors).
  m.def(
      "_dequant_step",
      [run_dequant](const std::string& in, const std::string& out, const DequantArgs& args,
                    const std::string& kind, const std::string& staging, size_t shard,
                    const std::string& expected_key, const py::object& progress) {
        nibble::FolderStep step;
        if (kind == "plan") {
          step.kind = nibble::FolderStep::Kind::kPlan;
        } else if (kind == "shard") {
          step.kind = nibble::FolderStep::Kind::kShard;
        } else if (kind == "index") {
          step.kind = nibble::FolderStep::Kind::kIndex;
        } else {
          throw py::value_error("step kind must be plan, shard or index, not '" + kind + "'");
        }
        step.staging = staging;
        step.shard = shard;
        step.expected_key = expected_key;
        py::dict d = run_dequant(in, out, args, progress, &step);
        d["key"] = step.key;
        py::list shards;
        for (const auto& s : step.shards) shards.append(py::make_tuple(s.name, s.bytes, s.tensors));
        d["shards"] = shards;
        d["xxh64"] = Hex16(step.xxh64);
        return d;
      },
      py::arg("input"), py::arg("output"), py::arg("args"), py::arg("kind"),
      py::arg("staging") = "", py::arg("shard") = 0, py::arg("expected_key") = "",
      py::arg("progress") = py::none());
  // The XXH64 of a file's bytes as 16 hex digits (the GIL released): how
  // nibble.distributed proves a kept shard complete.
  m.def(
      "_xxh64_file",
      [](const std::string& path) {
        std::string error;
        uint64_t h = 0;
        {
          py::gil_scoped_release release;
          const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) {
            error = std::strerror(errno);
          } else {
            nibble::Xxh64 x;
            std::vector<uint8_t> buf(size_t{4} << 20);
            for (;;) {
              const ssize_t n = ::read(fd, buf.data(), buf.size());
              if (n < 0 && errno == EINTR) continue;
              if (n < 0) error = std::strerror(errno);
              if (n <= 0) break;
              x.Update(buf.data(), static_cast<size_t>(n));
            }
            ::close(fd);
            h = x.Digest();
          }
        }
        if (!error.empty()) {
          throw py::value_error("cannot read '" + nibble::EscapeBytes(path) + "': " + error);
        }
        return Hex16(h);
      },
      py::arg("path"));
  m.def(
      "fold",
      [](const std::string& in, const std::string& out, int threads, bool external,
         const std::string& external_name, const py::object& progress) {
        PyStop stop;
        nibble::FoldOptions o;
        o.progress = PyProgress(progress, &stop);
        o.cancelled = stop.Callback();
        Check(nibble::CheckThreads(threads));
        o.threads = threads;
        o.external = external || !external_name.empty();
        o.external_name = external_name;
        nibble::FoldReport r;
        nibble::Status st;
        {
          py::gil_scoped_release release;
          st = nibble::FoldModel(in, out, o, &r);
        }
        if (!st.ok()) stop.RaiseIfStopped();
        Check(st);
        py::dict d;
        d["dequantize_nodes"] = r.dequantize_nodes;
        d["matmulnbits_nodes"] = r.matmulnbits_nodes;
        d["removed_initializers"] = r.removed_initializers;
        d["overridable_nodes"] = r.overridable_nodes;
        d["dequantized_bytes"] = r.dequantized_bytes;
        d["external"] = r.external;
        d["note"] = r.note;
        py::list notes;
        for (const auto& x : r.notes) notes.append(DecodeMessage(x));
        d["notes"] = notes;
        return d;
      },
      py::arg("input"), py::arg("output"), py::kw_only(), py::arg("threads") = 0,
      py::arg("external") = false, py::arg("external_name") = "", py::arg("progress") = py::none());
}
