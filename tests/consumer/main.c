/* Consumer of the installed C API. */
#include <stdio.h>

#include "nibble.h"

int main(void) {
  const unsigned char x_bytes[4] = {0x80, 0x4b, 0x9f, 0xa7};
  const int64_t x_shape[2] = {1, 2}, s_shape[1] = {1};
  const float scale = 0.5f;
  nibble_tensor x = {NIBBLE_INT16, 2, x_shape, x_bytes, 4};
  nibble_tensor s = {NIBBLE_FLOAT32, 1, s_shape, &scale, 4};
  nibble_pmx_attributes a = nibble_pmx_defaults();
  a.quant_axis = 0;
  a.group_size = 0;
  nibble_dequantizer* d = NULL;
  nibble_status* st = nibble_prepare_pmx(&a, &x, &s, NULL, 0, "c", &d);
  float y[8];
  if (st || nibble_dequantize(d, y, sizeof y, 1) || y[1] != 3.5f) {
    printf("consumer (C): FAILED %s\n", nibble_status_message(st));
    return 1;
  }
  nibble_dequantizer_free(d);
  printf("consumer (C, nibble %s, %s): ok\n", nibble_version(), nibble_active_target());
  return 0;
}
