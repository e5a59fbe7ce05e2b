/* The C API from C: SPEC's worked int4x4 example, tiles, ONNX, errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api/nibble.h"

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static int32_t stop_now(void* calls) {
  ++*(int*)calls;
  return 1;
}

static int32_t never_stop(void* calls) {
  ++*(int*)calls;
  return 0;
}

int main(void) {
  /* codes [[0,15],[8,9],[11,7],[4,10]] -> int16 words 0x4B80, 0xA79F */
  const unsigned char x_bytes[4] = {0x80, 0x4b, 0x9f, 0xa7};
  const int64_t x_shape[2] = {1, 2};
  const float scale = 0.5f;
  const int64_t s_shape[1] = {1};
  nibble_tensor x = {NIBBLE_INT16, 2, x_shape, x_bytes, sizeof x_bytes};
  nibble_tensor s = {NIBBLE_FLOAT32, 1, s_shape, &scale, sizeof scale};
  nibble_pmx_attributes a = nibble_pmx_defaults();
  a.quant_axis = 0;
  a.group_size = 0;
  nibble_dequantizer* d = NULL;
  nibble_status* st = nibble_prepare_pmx(&a, &x, &s, NULL, 0, "example", &d);
  CHECK(st == NULL);
  CHECK(d != NULL);
  if (!d) return 1;
  CHECK(nibble_dequantizer_dtype(d) == NIBBLE_FLOAT32);
  CHECK(nibble_dequantizer_rank(d) == 2);
  int64_t shape[2] = {0, 0};
  nibble_dequantizer_shape(d, shape);
  CHECK(shape[0] == 4 && shape[1] == 2);
  CHECK(nibble_dequantizer_output_bytes(d) == 32);
  float y[8];
  CHECK(nibble_dequantize(d, y, sizeof y, 1) == NULL);
  const float want[8] = {-4.0f, 3.5f, 0.0f, 0.5f, 1.5f, -0.5f, -2.0f, 1.0f};
  CHECK(memcmp(y, want, sizeof y) == 0);
  /* A tile: rows [1, 3) x col [1, 2). */
  float t[2] = {0, 0};
  CHECK(nibble_dequantize_tile(d, 1, 3, 1, 2, t, 1) == NULL);
  CHECK(t[0] == 0.5f && t[1] == -0.5f);
  {
    /* Matmul: W [4, 2] as above, x = [1, 2] (+ bias 1): y = x . W^T + 1. */
    const float xv[2] = {1.0f, 2.0f}, bias[4] = {1, 1, 1, 1};
    const int64_t xs[1] = {2}, bs[1] = {4};
    nibble_tensor xt = {NIBBLE_FLOAT32, 1, xs, xv, sizeof xv};
    nibble_tensor bt = {NIBBLE_FLOAT32, 1, bs, bias, sizeof bias};
    float ym[4] = {0, 0, 0, 0};
    CHECK(nibble_matmul(d, &xt, &bt, 0, NIBBLE_FLOAT32, ym, sizeof ym, 1) == NULL);
    CHECK(ym[0] == 4.0f && ym[1] == 2.0f && ym[2] == 1.5f && ym[3] == 1.0f);
    /* x . W with W as [K, N] = [4, 2]: a 4-vector times it. */
    const float x4[4] = {1, 0, 0, 1};
    const int64_t x4s[1] = {4};
    nibble_tensor x4t = {NIBBLE_FLOAT32, 1, x4s, x4, sizeof x4};
    CHECK(nibble_matmul(d, &x4t, NULL, 1, NIBBLE_FLOAT32, ym, 2 * sizeof(float), 2) == NULL);
    CHECK(ym[0] == -6.0f && ym[1] == 4.5f);
    st = nibble_matmul(d, &x4t, NULL, 0, NIBBLE_FLOAT32, ym, sizeof ym, 1);
    CHECK(st != NULL && strstr(nibble_status_message(st), "must end in K = 2") != NULL);
    nibble_status_free(st);
  }
  {
    /* nibble_matmul_with: expert 1 of a 3-D int8 weight [2 experts, 2, 3]
     * (ONNX, per-tensor scale 0.5), and a cancel callback that stops it. */
    const int8_t q[12] = {1, 2, 3, 4, 5, 6, /* expert 1: */ -1, 0, 2, 6, -4, 8};
    const int64_t qs[3] = {2, 2, 3};
    const float half = 0.5f;
    nibble_tensor qt = {NIBBLE_INT8, 3, qs, q, sizeof q};
    nibble_tensor ht = {NIBBLE_FLOAT32, 0, NULL, &half, sizeof half};
    nibble_onnx_attributes oa = nibble_onnx_defaults();
    nibble_dequantizer* e = NULL;
    CHECK(nibble_prepare_onnx(&oa, &qt, &ht, NULL, "experts", &e) == NULL);
    const float xv[3] = {1.0f, 2.0f, 3.0f};
    const int64_t xs[1] = {3};
    nibble_tensor xt = {NIBBLE_FLOAT32, 1, xs, xv, sizeof xv};
    float ye[2] = {0, 0};
    nibble_matmul_options mo = nibble_matmul_defaults();
    CHECK(mo.expert == -1 && mo.y_dtype == NIBBLE_FLOAT32 && mo.cancelled == NULL);
    st = nibble_matmul_with(e, &xt, NULL, &mo, ye, sizeof ye);
    CHECK(st != NULL && strstr(nibble_status_message(st), "pick one") != NULL);
    nibble_status_free(st);
    mo.expert = 1; /* W = 0.5 * [[-1, 0, 2], [6, -4, 8]]: y = [2.5, 11] */
    CHECK(nibble_matmul_with(e, &xt, NULL, &mo, ye, sizeof ye) == NULL);
    CHECK(ye[0] == 2.5f && ye[1] == 11.0f);
    /* gemm: NIBBLE_GEMM_BLAS (below 32 rows of x: the exact path, the same
     * values) where the build has the BLAS, refused by name where not; any
     * other value refused. */
    CHECK(mo.gemm == NIBBLE_GEMM_EXACT);
    mo.gemm = NIBBLE_GEMM_BLAS;
    st = nibble_matmul_with(e, &xt, NULL, &mo, ye, sizeof ye);
    if (nibble_blas() != NULL) {
      CHECK(st == NULL && ye[0] == 2.5f && ye[1] == 11.0f);
      CHECK(strstr(nibble_blas(), "OpenBLAS") != NULL);
    } else {
      CHECK(st != NULL && strstr(nibble_status_message(st), "built without its BLAS") != NULL);
    }
    nibble_status_free(st);
    mo.gemm = 7;
    st = nibble_matmul_with(e, &xt, NULL, &mo, ye, sizeof ye);
    CHECK(st != NULL && strstr(nibble_status_message(st), "gemm must be") != NULL);
    nibble_status_free(st);
    mo.gemm = NIBBLE_GEMM_EXACT;
    int calls = 0;
    mo.cancelled = stop_now;
    mo.cancel_user = &calls;
    st = nibble_matmul_with(e, &xt, NULL, &mo, ye, sizeof ye);
    CHECK(st != NULL && nibble_status_code(st) == NIBBLE_STATUS_INTERRUPTED && calls == 1);
    CHECK(st != NULL && strcmp(nibble_status_message(st), "matmul: interrupted") == 0);
    nibble_status_free(st);
    nibble_dequantizer_free(e);
  }
  {
    /* nibble_dequantize_cancellable: a callback that never stops gives the
     * same values (asked once: 32 bytes is one piece); one that stops at
     * once, NIBBLE_STATUS_INTERRUPTED naming the request. */
    int calls = 0;
    float yc[8];
    nibble_cancel never = {never_stop, &calls};
    CHECK(nibble_dequantize_cancellable(d, yc, sizeof yc, 1, &never) == NULL);
    CHECK(memcmp(yc, want, sizeof yc) == 0 && calls == 1);
    CHECK(nibble_dequantize_cancellable(d, yc, sizeof yc, 1, NULL) == NULL);
    nibble_cancel now = {stop_now, &calls};
    calls = 0;
    st = nibble_dequantize_cancellable(d, yc, sizeof yc, 1, &now);
    CHECK(st != NULL && nibble_status_code(st) == NIBBLE_STATUS_INTERRUPTED && calls == 1);
    CHECK(st != NULL &&
          strcmp(nibble_status_message(st), "DequantizeLinear 'example': interrupted") == 0);
    nibble_status_free(st);
  }
  /* Errors carry a message and must be freed. */
  st = nibble_dequantize(d, y, 4, 1);
  CHECK(st != NULL);
  CHECK(strstr(nibble_status_message(st), "needs 32") != NULL);
  CHECK(nibble_status_code(st) == NIBBLE_STATUS_INVALID);
  nibble_status_free(st);
  /* Thread counts outside [0, 1024] are an error, never a crash or exit. */
  st = nibble_dequantize(d, y, sizeof y, 100000);
  CHECK(st != NULL && strstr(nibble_status_message(st), "threads must be between 0") != NULL);
  nibble_status_free(st);
  st = nibble_dequantize(d, y, sizeof y, -1);
  CHECK(st != NULL && strstr(nibble_status_message(st), "(got -1)") != NULL);
  nibble_status_free(st);
  CHECK(nibble_status_code(NULL) == NIBBLE_STATUS_OK);
  st = nibble_dequantize_tile(d, 0, 9, 0, 1, t, 1);
  CHECK(st != NULL && strstr(nibble_status_message(st), "outside") != NULL);
  nibble_status_free(st);
  nibble_dequantizer_free(d);
  {
    /* An output over the codes it reads ("in place") is refused; one just
       after them is not. */
    union {
      unsigned char b[64];
      float f[16];
    } arena;
    memset(arena.b, 0, sizeof arena.b);
    memcpy(arena.b, x_bytes, sizeof x_bytes);
    nibble_tensor xa = {NIBBLE_INT16, 2, x_shape, arena.b, sizeof x_bytes};
    nibble_dequantizer* di = NULL;
    CHECK(nibble_prepare_pmx(&a, &xa, &s, NULL, 0, "in place", &di) == NULL);
    st = nibble_dequantize(di, arena.f, 32, 1);
    CHECK(st != NULL && strstr(nibble_status_message(st), "the output overlaps input X") != NULL);
    CHECK(nibble_status_code(st) == NIBBLE_STATUS_INVALID);
    nibble_status_free(st);
    CHECK(memcmp(arena.b, x_bytes, sizeof x_bytes) == 0);
    CHECK(nibble_dequantize(di, arena.f + 1, 32, 1) == NULL);
    CHECK(arena.f[1] == -4.0f && arena.f[2] == 3.5f);
    nibble_dequantizer_free(di);
  }

  a.quant_data_type = "int3";
  st = nibble_prepare_pmx(&a, &x, &s, NULL, 0, "bad", &d);
  CHECK(st != NULL && d == NULL);
  CHECK(strcmp(nibble_status_message(st),
               "DequantizeLinear 'bad': attribute quant_data_type must be \"int4\" or \"int8\" "
               "(got \"int3\")") == 0);
  nibble_status_free(st);

  /* ONNX: uint8 per-tensor with a zero point (the ONNX document's example). */
  const unsigned char q[4] = {0, 3, 128, 255};
  const int64_t q_shape[1] = {4};
  const float two = 2.0f;
  const unsigned char zp = 128;
  nibble_tensor qx = {NIBBLE_UINT8, 1, q_shape, q, 4};
  nibble_tensor qs = {NIBBLE_FLOAT32, 0, NULL, &two, 4};
  nibble_tensor qz = {NIBBLE_UINT8, 0, NULL, &zp, 1};
  nibble_onnx_attributes oa = nibble_onnx_defaults();
  CHECK(nibble_prepare_onnx(&oa, &qx, &qs, &qz, "onnx", &d) == NULL);
  float oy[4];
  CHECK(nibble_dequantize(d, oy, sizeof oy, 0) == NULL);
  CHECK(oy[0] == -256 && oy[1] == -250 && oy[2] == 0 && oy[3] == 254);
  nibble_dequantizer_free(d);
  CHECK(strlen(nibble_version()) > 0);
  nibble_release_cached_memory(); /* nothing cached yet: a no-op */
  CHECK(strlen(nibble_active_target()) > 0);
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures != 0;
}
