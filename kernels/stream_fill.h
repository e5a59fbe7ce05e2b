// The machine-bandwidth yardstick of the benchmark: a non-temporal fill
// with the widest vectors the CPU has (same dispatch as the kernels), so
// "fraction of streaming-store bandwidth" compares like with like.
#ifndef NIBBLE_KERNELS_STREAM_FILL_H_
#define NIBBLE_KERNELS_STREAM_FILL_H_

#include <cstddef>
#include <cstdint>

namespace nibble {

// Writes `bytes` bytes at `p` (any alignment) with streaming stores for the
// aligned body, plain stores for the ends; ends with a store fence.
void StreamFill(void* p, size_t bytes);

// The memory roofline of a kernel that reads `in_bytes` and writes
// `out_bytes` (the read + write yardstick): writes `out` as StreamFill does
// (StreamFill is this with nothing to read) while reading `in` front to back, in proportion (after
// the first x of the output's bytes, about x * in_bytes / out_bytes of the input's), with plain
// vector loads and no other work. Returns the XOR of the input's 32-bit words (a use of every load;
// its value means nothing). `in` may be null when in_bytes is 0, `out` when out_bytes is 0 (a
// read-only yardstick); in_bytes need not be a multiple of
// anything.
uint32_t StreamReadWrite(const void* in, size_t in_bytes, void* out, size_t out_bytes);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_STREAM_FILL_H_
