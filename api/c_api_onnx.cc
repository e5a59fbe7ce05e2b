// The C API functions that need library nibble (ONNX protobuf).
#include <string>

#include "api/c_api_internal.h"
#include "api/nibble.h"
#include "onnx/onnx_checkpoint.h"

extern "C" {

nibble_status* nibble_checkpoint_open_any(const char* path,
                                          const nibble_checkpoint_options* options,
                                          nibble_checkpoint** out) try {
  if (!path || !out)
    return nibble::c_api::Fail("nibble_checkpoint_open_any: path and out must not be NULL");
  *out = nullptr;
  return nibble::c_api::Wrap(
      nibble::OpenAnyCheckpoint(path, nibble::c_api::ToCheckpointOptions(options)), out);
} catch (const std::bad_alloc&) {
  return nibble::c_api::Fail(std::string(nibble::kOutOfMemory) + " in nibble_checkpoint_open_any");
} catch (const std::exception& e) {
  return nibble::c_api::Fail(std::string("nibble_checkpoint_open_any: ") + e.what());
}

}  // extern "C"
