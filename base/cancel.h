// Stopping a long conversion from outside (Ctrl-C in the CLI, Python's
// KeyboardInterrupt): the caller's function is asked between tensors and
// between the row chunks of a tensor, on the converting thread.
#ifndef NIBBLE_BASE_CANCEL_H_
#define NIBBLE_BASE_CANCEL_H_

#include <functional>

#include "base/status.h"

namespace nibble {

// True: stop now. The conversion then publishes nothing, removes its
// temporaries and returns an error whose message ends in kInterrupted.
// Must not throw; an empty function never stops anything.
using CancelCallback = std::function<bool()>;

inline constexpr const char* kInterrupted = "interrupted";

// The error to return when `cancelled` says stop, else OK.
inline Status CheckCancelled(const CancelCallback& cancelled) {
  if (cancelled && cancelled()) return Status::Error(kInterrupted);
  return Status::Ok();
}

}  // namespace nibble

#endif  // NIBBLE_BASE_CANCEL_H_
