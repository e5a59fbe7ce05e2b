// Opens a checkpoint with nibble's C++ API, lists its tensors and prints the
// statistics of one of them (default: the first quantized one), read as
// float32 on all cores — rows in slices of 256, as a loader that streams a
// large tensor into its own buffers would.
//
//   find_package(nibble CONFIG REQUIRED)
//   target_link_libraries(checkpoint_stats PRIVATE nibble::nibble_core)
//   ./checkpoint_stats model.gguf [TENSOR]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: checkpoint_stats CHECKPOINT [TENSOR]\n");
    return 2;
  }
  auto ck = nibble::Checkpoint::Open(argv[1]);
  if (!ck.ok()) {
    std::fprintf(stderr, "checkpoint_stats: %s\n", ck.status().message().c_str());
    return 1;
  }
  std::printf("%s: %s\n", argv[1], ck->description().c_str());
  const nibble::CheckpointTensor* pick = argc == 3 ? ck->Find(argv[2]) : nullptr;
  if (argc == 3 && pick == nullptr) {
    std::fprintf(stderr, "checkpoint_stats: no tensor named '%s'\n", argv[2]);
    return 1;
  }
  for (const nibble::CheckpointTensor& t : ck->tensors()) {
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      shape += (d ? ", " : "") + std::to_string(t.shape[d]);
    }
    std::printf("  %-40s %-6s [%s]%s\n", t.name.c_str(), t.kind.c_str(), shape.c_str(),
                t.supported ? "" : "  (not supported)");
    if (pick == nullptr && argc == 2 && t.quantized && t.supported) pick = &t;
  }
  if (pick == nullptr) {
    std::printf("no quantized tensor to read\n");
    return 0;
  }
  const int64_t rows = nibble::Checkpoint::Rows(*pick);
  double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
  size_t n = 0;
  std::vector<float> slice;
  for (int64_t r0 = 0; r0 < rows; r0 += 256) {
    const int64_t r1 = std::min(rows, r0 + 256);
    auto bytes = ck->OutputBytes(*pick, nibble::DType::kFloat32, r0, r1);
    if (!bytes.ok()) {
      std::fprintf(stderr, "checkpoint_stats: %s\n", bytes.status().message().c_str());
      return 1;
    }
    slice.resize(*bytes / sizeof(float));
    const nibble::Status st =
        ck->Read(*pick, nibble::DType::kFloat32, r0, r1, /*threads=*/0, slice.data(), *bytes);
    if (!st.ok()) {
      std::fprintf(stderr, "checkpoint_stats: %s\n", st.message().c_str());
      return 1;
    }
    for (float v : slice) {
      sum += v;
      sq += static_cast<double>(v) * v;
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
    }
    n += slice.size();
  }
  const double mean = n ? sum / static_cast<double>(n) : 0.0;
  std::printf("%s: %zu values, mean %.6g, std %.6g, min %.6g, max %.6g\n", pick->name.c_str(), n,
              mean, n ? std::sqrt(std::max(0.0, sq / static_cast<double>(n) - mean * mean)) : 0.0,
              lo, hi);
  return 0;
}
