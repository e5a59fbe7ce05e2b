/* Opens a checkpoint with nibble's C API, lists its tensors and prints the
 * statistics of one of them (default: the first quantized one), read as
 * float32 on all cores.
 *
 *   cc checkpoint_stats.c $(pkg-config --cflags --libs nibble-core) -o checkpoint_stats
 *   ./checkpoint_stats model.gguf [TENSOR]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nibble.h"

static int Fail(nibble_status* st) {
  fprintf(stderr, "checkpoint_stats: %s\n", nibble_status_message(st));
  nibble_status_free(st);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: checkpoint_stats CHECKPOINT [TENSOR]\n");
    return 2;
  }
  nibble_checkpoint* ck = NULL;
  nibble_status* st = nibble_checkpoint_open(argv[1], NULL, &ck);
  if (st) return Fail(st);
  printf("%s: %s\n", argv[1], nibble_checkpoint_description(ck));
  const int64_t count = nibble_checkpoint_tensor_count(ck);
  int64_t pick = argc == 3 ? nibble_checkpoint_find(ck, argv[2]) : -1;
  if (argc == 3 && pick < 0) {
    fprintf(stderr, "checkpoint_stats: no tensor named '%s'\n", argv[2]);
    nibble_checkpoint_free(ck);
    return 1;
  }
  for (int64_t i = 0; i < count; ++i) {
    nibble_tensor_info t;
    if ((st = nibble_checkpoint_tensor_info(ck, i, &t)) != NULL) {
      nibble_checkpoint_free(ck);
      return Fail(st);
    }
    printf("  %-40s %-6s [", t.name, t.kind);
    for (int32_t d = 0; d < t.rank; ++d) printf(d ? ", %lld" : "%lld", (long long)t.shape[d]);
    printf("]%s\n", t.supported ? "" : "  (not supported)");
    if (pick < 0 && argc == 2 && t.quantized && t.supported) pick = i;
  }
  if (pick < 0) {
    printf("no quantized tensor to read\n");
    nibble_checkpoint_free(ck);
    return 0;
  }
  size_t bytes = 0;
  st = nibble_checkpoint_read_size(ck, pick, NIBBLE_FLOAT32, 0, -1, &bytes, NULL);
  float* w = st ? NULL : malloc(bytes ? bytes : 1);
  if (!st && !w) {
    fprintf(stderr, "checkpoint_stats: out of memory\n");
    nibble_checkpoint_free(ck);
    return 1;
  }
  if (!st) st = nibble_checkpoint_read(ck, pick, NIBBLE_FLOAT32, 0, -1, w, bytes, 0);
  if (st) {
    free(w);
    nibble_checkpoint_free(ck);
    return Fail(st);
  }
  const size_t n = bytes / sizeof(float);
  double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
  for (size_t k = 0; k < n; ++k) {
    sum += w[k];
    sq += (double)w[k] * w[k];
    if (w[k] < lo) lo = w[k];
    if (w[k] > hi) hi = w[k];
  }
  const double mean = n ? sum / (double)n : 0.0;
  nibble_tensor_info t;
  nibble_checkpoint_tensor_info(ck, pick, &t);
  printf("%s: %zu values, mean %.6g, std %.6g, min %.6g, max %.6g\n", t.name, n, mean,
         n ? sqrt(fmax(0.0, sq / (double)n - mean * mean)) : 0.0, lo, hi);
  free(w);
  nibble_checkpoint_free(ck);
  return 0;
}
