// Per-thread scratch memory for kernels whose working set does not belong
// on the stack: the threads that call nibble may have small stacks (musl's
// default is 128 KiB; a runtime's worker pool may set less), and a kernel
// staging 100+ KiB there would overflow them.
#ifndef NIBBLE_KERNELS_SCRATCH_H_
#define NIBBLE_KERNELS_SCRATCH_H_

#include <cstddef>
#include <cstdint>

namespace nibble {

// At least `bytes` bytes of the calling thread's scratch, 64-byte
// aligned, or nullptr where that memory cannot be had (the caller then
// takes a path without it). Grow-only and kept for the thread's next call
// (a fresh block per call would be fresh pages: page faults and zeroing);
// its contents mean nothing between calls. One user at a time per thread:
// a kernel holds it from the call to its return and calls nothing that
// asks for it meanwhile.
uint8_t* KernelScratch(size_t bytes);

// Frees the calling thread's kernel scratch now (a thread's exit frees
// its own): nibble_release_cached_memory, nibble.release_cached_memory.
void ReleaseKernelScratch();

}  // namespace nibble

#endif  // NIBBLE_KERNELS_SCRATCH_H_
