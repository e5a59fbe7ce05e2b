// The machine-bandwidth yardstick of the benchmark: a non-temporal fill
// with the widest vectors the CPU has (same dispatch as the kernels), so
// "fraction of streaming-store bandwidth" compares like with like.
#ifndef NIBBLE_KERNELS_STREAM_FILL_H_
#define NIBBLE_KERNELS_STREAM_FILL_H_

#include <cstddef>

namespace nibble {

// Writes `bytes` bytes at `p` (any alignment) with streaming stores for the
// aligned body, plain stores for the ends; ends with a store fence.
void StreamFill(void* p, size_t bytes);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_STREAM_FILL_H_
