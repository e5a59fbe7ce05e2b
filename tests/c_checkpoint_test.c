/* The checkpoint part of the C API, from C, on the tests' generated
 * checkpoints (GGUF, GPTQ, AWQ, ONNX models): listing, whole and row-range
 * reads in every output type and thread count, bfloat16 ==
 * round-to-nearest-even of the float32 read, and every misuse answered
 * with a status. Usage: c_checkpoint_test PATH... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/nibble.h"

static int failures = 0, checks = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* Expects a failure whose message contains `needle`; frees it. */
static void ExpectError(nibble_status* st, const char* needle) {
  CHECK(st != NULL);
  if (st == NULL) return;
  CHECK(nibble_status_code(st) == NIBBLE_STATUS_INVALID);
  if (strstr(nibble_status_message(st), needle) == NULL) {
    fprintf(stderr, "message '%s' lacks '%s'\n", nibble_status_message(st), needle);
    ++failures;
  }
  nibble_status_free(st);
}

static int32_t NeverStop(void* calls) {
  ++*(int*)calls;
  return 0;
}

static int32_t StopNow(void* calls) {
  ++*(int*)calls;
  return 1;
}

static int Ok(nibble_status* st) {
  if (st == NULL) return 1;
  fprintf(stderr, "unexpected error: %s\n", nibble_status_message(st));
  nibble_status_free(st);
  ++failures;
  return 0;
}

/* bfloat16 bits of a float32, round to nearest even (NaN kept quiet). */
static uint16_t Bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void CheckTensor(const nibble_checkpoint* ck, int64_t i) {
  nibble_tensor_info info;
  if (!Ok(nibble_checkpoint_tensor_info(ck, i, &info))) return;
  CHECK(nibble_checkpoint_find(ck, info.name) == i);
  if (!info.supported) {
    char buf[16];
    ExpectError(nibble_checkpoint_read(ck, i, 0, 0, -1, buf, sizeof buf, 1), info.name);
    return;
  }
  const int64_t rows = info.rank == 0 ? 1 : info.shape[0];
  size_t bytes = 0;
  int32_t out_dtype = 0;
  if (!Ok(nibble_checkpoint_read_size(ck, i, 0, 0, -1, &bytes, &out_dtype))) return;
  CHECK(out_dtype == info.default_dtype);
  int is_float =
      out_dtype == NIBBLE_FLOAT32 || out_dtype == NIBBLE_FLOAT16 || out_dtype == NIBBLE_BFLOAT16;
  if (!is_float) return; /* an integer copy: read as stored, nothing to convert */
  size_t n32 = 0, n16 = 0;
  if (!Ok(nibble_checkpoint_read_size(ck, i, NIBBLE_FLOAT32, 0, -1, &n32, &out_dtype))) return;
  CHECK(out_dtype == NIBBLE_FLOAT32);
  if (!Ok(nibble_checkpoint_read_size(ck, i, NIBBLE_BFLOAT16, 0, -1, &n16, NULL))) return;
  CHECK(n16 * 2 == n32);
  const size_t count = n32 / 4;
  float* f32 = malloc(n32 + 4);
  uint16_t* b16 = malloc(n16 + 2);
  uint16_t* part = malloc(n16 + 2);
  if (!f32 || !b16 || !part) {
    ++failures;
    free(f32);
    free(b16);
    free(part);
    return;
  }
  if (Ok(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 0, -1, f32, n32, 1)) &&
      Ok(nibble_checkpoint_read(ck, i, NIBBLE_BFLOAT16, 0, -1, b16, n16, 2))) {
    size_t bad = 0;
    for (size_t k = 0; k < count; ++k) bad += b16[k] != Bf16(f32[k]);
    CHECK(bad == 0);
    /* Two halves of the rows, each read on its own, == the whole. */
    const int64_t mid = rows / 2;
    size_t first = 0, second = 0;
    if (Ok(nibble_checkpoint_read_size(ck, i, NIBBLE_BFLOAT16, 0, mid, &first, NULL)) &&
        Ok(nibble_checkpoint_read_size(ck, i, NIBBLE_BFLOAT16, mid, rows, &second, NULL))) {
      CHECK(first + second == n16);
      part[n16 / 2] = 0xBEEF; /* guard */
      if (Ok(nibble_checkpoint_read(ck, i, NIBBLE_BFLOAT16, 0, mid, part, first, 0)) &&
          Ok(nibble_checkpoint_read(ck, i, NIBBLE_BFLOAT16, mid, rows, (char*)part + first, second,
                                    3))) {
        CHECK(memcmp(part, b16, n16) == 0);
        CHECK(part[n16 / 2] == 0xBEEF);
      }
    }
    /* Cancellable: a callback that never stops gives the same bytes (asked
     * at least once); one that stops at once, NIBBLE_STATUS_INTERRUPTED
     * naming the tensor, asked once. */
    int calls = 0;
    nibble_cancel never = {NeverStop, &calls};
    memset(part, 0, n16);
    if (Ok(nibble_checkpoint_read_cancellable(ck, i, NIBBLE_BFLOAT16, 0, -1, part, n16, 2,
                                              &never))) {
      CHECK(memcmp(part, b16, n16) == 0 && (n16 == 0 || calls >= 1));
    }
    if (n16 > 0) { /* (nothing to write: nothing asked) */
      nibble_cancel now = {StopNow, &calls};
      calls = 0;
      nibble_status* st =
          nibble_checkpoint_read_cancellable(ck, i, NIBBLE_BFLOAT16, 0, -1, part, n16, 2, &now);
      CHECK(st != NULL && nibble_status_code(st) == NIBBLE_STATUS_INTERRUPTED && calls == 1);
      CHECK(st != NULL && strstr(nibble_status_message(st), info.name) != NULL);
      nibble_status_free(st);
    }
    /* Misuse. */
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 0, -1, f32, n32 - 1, 1), "need");
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_INT8, 0, -1, f32, n32, 1), "dtype");
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 0, rows + 1, f32, n32, 1), "outside");
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 1, 0, f32, n32, 1), "outside");
    /* Only -1 means "to the end": other negative row bounds are errors. */
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 0, -2, f32, n32, 1), "outside");
    ExpectError(nibble_checkpoint_read_size(ck, i, NIBBLE_FLOAT32, 0, -2, &first, NULL), "outside");
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, -1, -1, f32, n32, 1), "outside");
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 0, -1, f32, n32, -3), "threads");
    ExpectError(nibble_checkpoint_read(ck, i, NIBBLE_FLOAT32, 0, -1, NULL, n32, 1), "null");
  }
  free(f32);
  free(b16);
  free(part);
}

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0) {
    printf("usage: c_checkpoint_test CHECKPOINT...\n");
    return argc < 2 ? 2 : 0;
  }
  for (int a = 1; a < argc; ++a) {
    nibble_checkpoint* ck = NULL;
    nibble_checkpoint_options o = {NULL, NULL};
    const size_t len = strlen(argv[a]);
    const int onnx = len > 5 && strcmp(argv[a] + len - 5, ".onnx") == 0;
    if (onnx) {
      /* The core library refuses ONNX models, naming the function that opens them. */
      ExpectError(nibble_checkpoint_open(argv[a], &o, &ck), "nibble_checkpoint_open_any");
      CHECK(ck == NULL);
    } else {
      /* Both entry points list the same tensors. */
      if (!Ok(nibble_checkpoint_open(argv[a], &o, &ck))) continue;
      const int64_t n_core = nibble_checkpoint_tensor_count(ck);
      nibble_checkpoint_free(ck);
      ck = NULL;
      if (!Ok(nibble_checkpoint_open_any(argv[a], &o, &ck))) continue;
      CHECK(nibble_checkpoint_tensor_count(ck) == n_core);
      nibble_checkpoint_free(ck);
      ck = NULL;
    }
    if (!Ok(nibble_checkpoint_open_any(argv[a], &o, &ck))) continue;
    const int64_t n = nibble_checkpoint_tensor_count(ck);
    CHECK(n > 0 || onnx);
    CHECK(strlen(nibble_checkpoint_description(ck)) > 0);
    for (int64_t p = 0; p < nibble_checkpoint_property_count(ck); ++p) {
      const char *k = NULL, *v = NULL;
      CHECK(Ok(nibble_checkpoint_property(ck, p, &k, &v)) && k && v);
    }
    for (int64_t i = 0; i < n; ++i) CheckTensor(ck, i);
    nibble_tensor_info info;
    ExpectError(nibble_checkpoint_tensor_info(ck, n, &info), "outside");
    ExpectError(nibble_checkpoint_tensor_info(ck, -1, &info), "outside");
    CHECK(nibble_checkpoint_find(ck, "no such tensor") == -1);
    CHECK(nibble_checkpoint_find(ck, NULL) == -1);
    printf("%s: %lld tensors\n", argv[a], (long long)n);
    nibble_checkpoint_free(ck);
  }
  nibble_checkpoint* ck = NULL;
  ExpectError(nibble_checkpoint_open("/nonexistent/model.gguf", NULL, &ck), "nonexistent");
  CHECK(ck == NULL);
  ExpectError(nibble_checkpoint_open(NULL, NULL, &ck), "NULL");
  nibble_checkpoint_options bad = {"v7", NULL};
  ExpectError(nibble_checkpoint_open(argv[1], &bad, &ck), "v1 or v2");
  CHECK(ck == NULL);
  nibble_checkpoint_options bad_zeros = {NULL, "mine"};
  ExpectError(nibble_checkpoint_open(argv[1], &bad_zeros, &ck),
              "autogptq, autogptq-cuda or gptqmodel");
  nibble_checkpoint_free(NULL);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
