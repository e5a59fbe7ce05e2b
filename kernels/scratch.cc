// KernelScratch (kernels/scratch.h): one grow-only block per thread, from
// operator new (so that a replaced global allocator sees it, as the
// allocation tests' counting one does), aligned by hand.
#include "kernels/scratch.h"

#include <new>

namespace nibble {
namespace {

constexpr size_t kAlign = 64;

// The calling thread's block: `raw` as allocated, `bytes` usable from the
// first 64-byte boundary in it.
struct ThreadScratch {
  void* raw = nullptr;
  size_t bytes = 0;

  ThreadScratch() = default;
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  ~ThreadScratch() { Free(); }
  void Free() {
    ::operator delete(raw, std::nothrow);
    raw = nullptr;
    bytes = 0;
  }
  uint8_t* Aligned() const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
    return reinterpret_cast<uint8_t*>((a + kAlign - 1) / kAlign * kAlign);
  }
};
thread_local ThreadScratch t_scratch;

}  // namespace

uint8_t* KernelScratch(size_t bytes) {
  if (t_scratch.bytes < bytes) {
    t_scratch.Free();
    if (bytes > SIZE_MAX - kAlign) return nullptr;
    void* raw = ::operator new(bytes + kAlign - 1, std::nothrow);
    if (raw == nullptr) return nullptr;
    t_scratch.raw = raw;
    t_scratch.bytes = bytes;
  }
  return t_scratch.Aligned();
}

void ReleaseKernelScratch() { t_scratch.Free(); }

}  // namespace nibble
