// Quantization methods nibble recognizes but does not read: their config is
// refused naming the method, and their parameter tensors are never copied.
#ifndef NIBBLE_CHECKPOINT_METHODS_UNSUPPORTED_H_
#define NIBBLE_CHECKPOINT_METHODS_UNSUPPORTED_H_

#include <vector>

#include "checkpoint/methods/method.h"

namespace nibble {

std::vector<HfMethodInfo> UnsupportedHfMethods();

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_UNSUPPORTED_H_
