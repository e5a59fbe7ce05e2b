// Progress of a long conversion (nibble dequant, nibble fold), reported to
// an optional callback: the library never prints; the CLI draws a bar
// (tools/nibble_main.cc), a runtime may log or ignore it.
#ifndef NIBBLE_CHECKPOINT_PROGRESS_H_
#define NIBBLE_CHECKPOINT_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/cancel.h"

namespace nibble {

struct Progress {
  size_t tensors_done = 0, tensors_total = 0;
  uint64_t bytes_done = 0;   // output bytes written so far
  uint64_t bytes_total = 0;  // 0 when not known in advance
};

// Called on the converting thread after each tensor is written. Must not
// throw; an empty function means no reporting.
using ProgressCallback = std::function<void(const Progress&)>;

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_PROGRESS_H_
