// Stopping a long conversion or read from outside (Ctrl-C in the CLI,
// Python's KeyboardInterrupt): the caller's function is asked between
// tensors and between the row chunks of a tensor, on the calling thread.
#ifndef NIBBLE_BASE_CANCEL_H_
#define NIBBLE_BASE_CANCEL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace nibble {

// True: stop now. The conversion then publishes nothing, removes its
// temporaries and returns an error whose message ends in kInterrupted.
// Must not throw; an empty function never stops anything.
using CancelCallback = std::function<bool()>;

inline constexpr const char* kInterrupted = "interrupted";

// How much output a cancellable read (Dequantizer::Run / RunRows,
// Checkpoint::Read) writes between two questions: whole rows of the first
// dimension of at most this many bytes (at least one row; a dequantization
// on more than 4 threads takes 4 MiB per thread). 16 MiB is a few
// milliseconds of work: Ctrl-C answered at once, the question's cost (a
// Python callback takes the GIL) lost in the work.
inline constexpr uint64_t kCancelCheckBytes = uint64_t{16} << 20;

// Whether an error message is a stopped call's (it ends in kInterrupted).
inline bool IsInterrupted(const std::string& message) {
  const size_t n = std::char_traits<char>::length(kInterrupted);
  return message.size() >= n && message.compare(message.size() - n, n, kInterrupted) == 0;
}

// The error to return when `cancelled` says stop, else OK.
inline Status CheckCancelled(const CancelCallback& cancelled) {
  if (cancelled && cancelled()) return Status::Error(kInterrupted);
  return Status::Ok();
}

}  // namespace nibble

#endif  // NIBBLE_BASE_CANCEL_H_
