/* nibble C API: a stable ABI for FFI (C, Rust, Go, C#, Python ctypes).
 *
 * Conventions
 *  - Every fallible call returns a nibble_status*: NULL means success; a
 *    non-NULL status carries a message naming the tensor/attribute and the
 *    problem, and must be released with nibble_status_free.
 *  - Tensors are described by nibble_tensor (caller memory, row-major,
 *    little-endian, sub-byte types packed over the flattened tensor, low
 *    bits first); nothing is copied unless the API says so.
 *  - A nibble_dequantizer is immutable once prepared and may be used from
 *    several threads at once; it references the caller's code buffer (and
 *    aligned float32 scales), which must outlive it.
 *  - Threads: `threads` = 0 uses OpenMP's default, 1 runs on the calling
 *    thread, n uses n threads (at most 1024; other values are an error);
 *    results are bit-identical for every value.
 *    Tile calls always run on the calling thread and never allocate.
 *  - No global mutable state.
 */
#ifndef NIBBLE_H_
#define NIBBLE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types: ONNX TensorProto.DataType codes. */
enum {
  NIBBLE_FLOAT32 = 1,
  NIBBLE_UINT8 = 2,
  NIBBLE_INT8 = 3,
  NIBBLE_UINT16 = 4,
  NIBBLE_INT16 = 5,
  NIBBLE_INT32 = 6,
  NIBBLE_FLOAT16 = 10,
  NIBBLE_UINT32 = 12,
  NIBBLE_BFLOAT16 = 16,
  NIBBLE_FLOAT8E4M3FN = 17,
  NIBBLE_FLOAT8E4M3FNUZ = 18,
  NIBBLE_FLOAT8E5M2 = 19,
  NIBBLE_FLOAT8E5M2FNUZ = 20,
  NIBBLE_UINT4 = 21,
  NIBBLE_INT4 = 22,
  NIBBLE_FLOAT4E2M1 = 23,
  NIBBLE_FLOAT8E8M0 = 24,
  NIBBLE_UINT2 = 25,
  NIBBLE_INT2 = 26
};

typedef struct nibble_status nibble_status;
typedef struct nibble_dequantizer nibble_dequantizer;

typedef struct {
  int32_t dtype;        /* NIBBLE_* */
  int32_t rank;         /* 0..8 */
  const int64_t* shape; /* rank entries (may be NULL when rank is 0) */
  const void* data;
  size_t size_bytes;
} nibble_tensor;

/* PMX DequantizeLinear attributes (OpenPPL PMX op set). Bools are 0/1. */
typedef struct {
  const char* quant_data_type; /* "int4" or "int8" */
  int64_t quant_axis;          /* default 1 */
  int64_t group_size;          /* default 128; 0 = per-channel / per-tensor */
  int64_t has_zeropoint;       /* default 0 */
  int64_t float_zeropoint;     /* default 0 */
} nibble_pmx_attributes;

/* ONNX DequantizeLinear attributes; has_* mark attributes present. */
typedef struct {
  int32_t opset;        /* 10, 13, 19, 21, 23, 24 or 25 */
  int64_t axis;         /* default 1 */
  int64_t block_size;   /* default 0 */
  int32_t output_dtype; /* default 0 (the scale's type) */
  int32_t has_axis, has_block_size, has_output_dtype;
} nibble_onnx_attributes;

/* The defaults of each attribute set. */
nibble_pmx_attributes nibble_pmx_defaults(void);
nibble_onnx_attributes nibble_onnx_defaults(void);

/* What kind of failure a status is (NIBBLE_STATUS_OK for NULL). */
enum {
  NIBBLE_STATUS_OK = 0,
  NIBBLE_STATUS_INVALID = 1,       /* bad argument, attribute, shape or input */
  NIBBLE_STATUS_OUT_OF_MEMORY = 2, /* an allocation failed; message starts "out of memory" */
  NIBBLE_STATUS_INTERRUPTED = 3    /* the caller's cancel callback said stop; message ends
                                      "interrupted" */
};
int32_t nibble_status_code(const nibble_status* status);
const char* nibble_status_message(const nibble_status* status);
void nibble_status_free(nibble_status* status);

const char* nibble_version(void);
/* The SIMD target the kernels dispatch to on this CPU, e.g. "AVX3". */
const char* nibble_active_target(void);
/* Returns to the system the parameter blocks (widened scales / zero points
 * of 256 KiB or more) that the calling thread keeps after freeing them, for
 * its next preparations (at most 8 blocks and 32 MiB per thread; they are
 * also returned when the thread exits), the calling thread's matmul
 * scratch (nibble_matmul keeps its tiles per thread, ~128 KiB - 1 MiB, for
 * the next call) and its kernels' staging buffer (AVX2 GPTQ / AWQ 16-bit
 * outputs stage their rows in one, 34-144 KiB, kept for the next call).
 * Live handles are not affected. */
void nibble_release_cached_memory(void);

/* Validate and lower a request. zero_point may be NULL. output_dtype: 0 =
 * the scale's type (PMX), else NIBBLE_FLOAT32/FLOAT16/BFLOAT16. name (may be
 * NULL) is used in error messages. On success *out owns a dequantizer. */
nibble_status* nibble_prepare_pmx(const nibble_pmx_attributes* attrs, const nibble_tensor* x,
                                  const nibble_tensor* scale, const nibble_tensor* zero_point,
                                  int32_t output_dtype, const char* name, nibble_dequantizer** out);
nibble_status* nibble_prepare_onnx(const nibble_onnx_attributes* attrs, const nibble_tensor* x,
                                   const nibble_tensor* scale, const nibble_tensor* zero_point,
                                   const char* name, nibble_dequantizer** out);
void nibble_dequantizer_free(nibble_dequantizer* d);

/* Output description. shape must hold nibble_dequantizer_rank() entries. */
int32_t nibble_dequantizer_dtype(const nibble_dequantizer* d);
int32_t nibble_dequantizer_rank(const nibble_dequantizer* d);
void nibble_dequantizer_shape(const nibble_dequantizer* d, int64_t* shape);
size_t nibble_dequantizer_output_bytes(const nibble_dequantizer* d);
/* The 2-D view the tile call addresses (a rank-2 weight itself). */
int64_t nibble_dequantizer_rows(const nibble_dequantizer* d);
int64_t nibble_dequantizer_cols(const nibble_dequantizer* d);

/* Whole tensor into out (out_bytes >= nibble_dequantizer_output_bytes). */
nibble_status* nibble_dequantize(const nibble_dequantizer* d, void* out, size_t out_bytes,
                                 int32_t threads);
/* A way to stop a long call from outside (Ctrl-C): cancelled(cancel_user)
 * is called on the calling thread between pieces of the work; non-zero
 * stops the call soon after, which then returns NIBBLE_STATUS_INTERRUPTED
 * (the output's contents unspecified). It must not call back into nibble.
 * A NULL nibble_cancel or cancelled never stops anything. */
typedef struct {
  int32_t (*cancelled)(void* cancel_user);
  void* cancel_user;
} nibble_cancel;
/* nibble_dequantize, asking `cancel` before each piece of rows of at most
 * 16 MiB of output (whole rows of the first dimension, at least one; 4 MiB
 * per thread on more than 4 threads). */
nibble_status* nibble_dequantize_cancellable(const nibble_dequantizer* d, void* out,
                                             size_t out_bytes, int32_t threads,
                                             const nibble_cancel* cancel);
/* Rows [r0, r1) x cols [c0, c1) into out, element (r, c) at
 * out[(r - r0) * ld + (c - c0)]. Calling thread, no allocation (up to about
 * 64 KiB of its stack). */
nibble_status* nibble_dequantize_tile(const nibble_dequantizer* d, int64_t r0, int64_t r1,
                                      int64_t c0, int64_t c1, void* out, int64_t ld);

/* Weight-only-quant matmul straight from the packing (op/matmul.h):
 * y = x . W^T + bias when weight_in_out is 0 (the dequantizer's 2-D output
 * is W [N, K]: PyTorch / GGUF / Hugging Face), y = x . W + bias when it is
 * 1 (the output is [K, N]: an ONNX MatMul B). x: NIBBLE_FLOAT32 / FLOAT16 /
 * BFLOAT16, shape [..., K]; bias: NULL or [N] of a float type; y: y_dtype
 * (NIBBLE_FLOAT32 or x's type) with x's leading dimensions and N, y_bytes
 * at least its size. threads as above; the same bits for every count and
 * every SIMD target (a fixed-order float32 dot product: 16 partial sums of
 * fused multiply-adds, then a halving sum). */
nibble_status* nibble_matmul(const nibble_dequantizer* w, const nibble_tensor* x,
                             const nibble_tensor* bias, int32_t weight_in_out, int32_t y_dtype,
                             void* y, size_t y_bytes, int32_t threads);

/* nibble_matmul's arguments, and what it cannot take: start from
 * nibble_matmul_defaults() (weight_in_out 0, y_dtype NIBBLE_FLOAT32,
 * threads 0, expert -1, no cancel callback, gemm NIBBLE_GEMM_EXACT). */
typedef struct {
  int32_t weight_in_out; /* as nibble_matmul's (for an expert: its matrix) */
  int32_t y_dtype;       /* NIBBLE_FLOAT32 or x's type */
  int32_t threads;       /* as above */
  /* -1: the weight is 2-D. A 3-D weight [E, ., .] (a MoE layer's experts as
   * the checkpoint holds them: GGUF ffn_*_exps [E, N, K], gpt-oss MXFP4
   * [E, K, N] with weight_in_out 1): W is expert `expert`'s matrix,
   * 0 <= expert < E; only its rows are decoded. */
  int64_t expert;
  /* NULL, or called on the calling thread before each of its tiles with
   * cancel_user: non-zero stops the call soon after (the tiles under way
   * finish); it then returns NIBBLE_STATUS_INTERRUPTED and y's contents are
   * unspecified. It must not call back into nibble. */
  int32_t (*cancelled)(void* cancel_user);
  void* cancel_user;
  /* NIBBLE_GEMM_EXACT (the default): the fixed-order dot above.
   * NIBBLE_GEMM_BLAS, for prefill: from 32 rows of x the dequantized tiles
   * go through OpenBLAS's sgemm (about 2x faster at M = 128 -
   * 512; the same bits for every thread count on one machine, not across
   * CPUs, library versions or batch sizes; op/matmul.h MatMulOptions::gemm).
   * Refused by a build without it (nibble_blas() returns NULL). */
  int32_t gemm;
} nibble_matmul_options;
enum { NIBBLE_GEMM_EXACT = 0, NIBBLE_GEMM_BLAS = 1 };
/* The BLAS behind NIBBLE_GEMM_BLAS (OpenBLAS's configuration string:
 * version and the kernels it picked for this CPU), or NULL in a build
 * without it. The string is static. */
const char* nibble_blas(void);
nibble_matmul_options nibble_matmul_defaults(void);
/* nibble_matmul with options (NULL: the defaults). */
nibble_status* nibble_matmul_with(const nibble_dequantizer* w, const nibble_tensor* x,
                                  const nibble_tensor* bias, const nibble_matmul_options* options,
                                  void* y, size_t y_bytes);

/* ---- Checkpoints: open a model file, list its tensors, read one ----------
 *
 * A checkpoint is a GGUF file, a .safetensors file, or a Hugging Face model
 * folder (config.json + safetensors shards): GPTQ, AWQ, compressed-tensors,
 * bitsandbytes 4-bit or plain float tensors. Opening reads only headers and
 * configuration; each read decodes one tensor (or a range of its rows).
 *
 * A nibble_checkpoint is immutable once opened: any number of threads may
 * read from one handle at once. Errors are returned as nibble_status (no
 * "last error" state anywhere). Strings and shapes returned by
 * nibble_checkpoint_tensor_info and nibble_checkpoint_property stay valid
 * until the handle is freed. */
typedef struct nibble_checkpoint nibble_checkpoint;

/* How to read what a checkpoint does not state. NULL or "" = as stated. */
typedef struct {
  const char* gptq_format;   /* "v1" (qzeros hold z - 1) or "v2" (z) */
  const char* gptq_v1_zeros; /* "autogptq" ((stored + 1) mod 2^bits), "autogptq-cuda"
                                (stored + 1) or "gptqmodel" (word carry) */
} nibble_checkpoint_options;

/* options may be NULL. On success *out owns the handle. */
nibble_status* nibble_checkpoint_open(const char* path, const nibble_checkpoint_options* options,
                                      nibble_checkpoint** out);
/* The same, and ONNX models (a path ending in ".onnx", external data beside
 * it): their constant DequantizeLinear / MatMulNBits weights dequantized,
 * other initializers as stored. In library nibble only (it needs
 * protobuf); nibble_checkpoint_open (nibble-core) refuses ONNX models. */
nibble_status* nibble_checkpoint_open_any(const char* path,
                                          const nibble_checkpoint_options* options,
                                          nibble_checkpoint** out);
void nibble_checkpoint_free(nibble_checkpoint* ck);
/* e.g. "GGUF v3, 291 tensors, 24 metadata keys". */
const char* nibble_checkpoint_description(const nibble_checkpoint* ck);
/* Format properties and metadata as text key/value pairs (GGUF metadata,
 * the quantization config of a Hugging Face checkpoint). */
int64_t nibble_checkpoint_property_count(const nibble_checkpoint* ck);
nibble_status* nibble_checkpoint_property(const nibble_checkpoint* ck, int64_t index,
                                          const char** key, const char** value);

typedef struct {
  const char* name;   /* output name ("model.layers.0.mlp.up_proj.weight") */
  const char* source; /* stored name ("...up_proj.qweight"); = name for copies */
  const char* kind;   /* "GPTQ", "AWQ", "q4_K", ... or "copy" */
  const char* detail; /* e.g. "G=128 v1 sym" */
  int32_t rank;
  const int64_t* shape;  /* rank entries, PyTorch order (rows first) */
  int32_t quantized;     /* 1: dequantized on read; 0: copied */
  int32_t supported;     /* 0: listed, but reading it fails with why_not */
  const char* why_not;   /* "" when supported */
  int32_t stored_dtype;  /* copies: the stored NIBBLE_* type (0 for quantized) */
  int32_t default_dtype; /* the type a read with dtype 0 returns */
} nibble_tensor_info;

int64_t nibble_checkpoint_tensor_count(const nibble_checkpoint* ck);
/* The index of the tensor with this output name, else this stored name, or
 * -1 when there is none. */
int64_t nibble_checkpoint_find(const nibble_checkpoint* ck, const char* name);
nibble_status* nibble_checkpoint_tensor_info(const nibble_checkpoint* ck, int64_t index,
                                             nibble_tensor_info* info);
/* The bytes and element type nibble_checkpoint_read writes for rows
 * [row0, row1) of the first dimension (row1 = -1: to the end; any other
 * negative row0 or row1 is an error). dtype: 0 = the tensor's default, else
 * NIBBLE_FLOAT32, NIBBLE_FLOAT16 or NIBBLE_BFLOAT16 (float copies, float8
 * included, are converted too, rounded once; other copies keep their type).
 * out_dtype may be NULL. */
nibble_status* nibble_checkpoint_read_size(const nibble_checkpoint* ck, int64_t index,
                                           int32_t dtype, int64_t row0, int64_t row1, size_t* bytes,
                                           int32_t* out_dtype);
/* Prepares quantized tensor `index` once (its packed inputs read into the
 * handle) as a dequantizer for dtype (0 = the tensor's default): for
 * nibble_matmul, tiles or whole reads. The checkpoint must outlive it. A
 * float (not quantized) tensor is an error. */
nibble_status* nibble_checkpoint_prepare(const nibble_checkpoint* ck, int64_t index, int32_t dtype,
                                         nibble_dequantizer** out);
/* Rows [row0, row1) of tensor `index`, dequantized (or copied), row-major
 * into out (out_bytes >= nibble_checkpoint_read_size). threads as above;
 * the bits do not depend on the thread count or the row range. */
nibble_status* nibble_checkpoint_read(const nibble_checkpoint* ck, int64_t index, int32_t dtype,
                                      int64_t row0, int64_t row1, void* out, size_t out_bytes,
                                      int32_t threads);
/* nibble_checkpoint_read, asking `cancel` (see nibble_cancel) before
 * anything is read, between 16 MiB pieces of each input read from its file
 * and before each piece of rows of output (as
 * nibble_dequantize_cancellable's). */
nibble_status* nibble_checkpoint_read_cancellable(const nibble_checkpoint* ck, int64_t index,
                                                  int32_t dtype, int64_t row0, int64_t row1,
                                                  void* out, size_t out_bytes, int32_t threads,
                                                  const nibble_cancel* cancel);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NIBBLE_H_ */
