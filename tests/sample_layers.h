// A small layer quantized in the column layouts and a block layout, for
// tests that run every kernel family on one shape: GPTQ, act-order GPTQ
// (a random channel order), AWQ and ggml Q4_K of an LLM-like 256 x 1024
// weight, G = 128. Header-only (the test executables' own helper).
#ifndef NIBBLE_TESTS_SAMPLE_LAYERS_H_
#define NIBBLE_TESTS_SAMPLE_LAYERS_H_

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/synthetic_weights.h"
#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/ggml.h"
#include "checkpoint/methods/gptq.h"
#include "doctest/doctest.h"
#include "hwy/targets.h"
#include "testing/quantize_checkpoint.h"

namespace nibble {

struct SampleLayers {
  static constexpr int64_t kN = 256, kK = 1024, kG = 128;
  StatusOr<GptqTensors> gptq, gptq_act;
  StatusOr<AwqTensors> awq;
  StatusOr<std::vector<uint8_t>> q4k;

  // The weight from `seed`, its act-order channel order from `order_seed`.
  SampleLayers(uint64_t seed, uint32_t order_seed)
      : gptq(Status::Error("unset")),
        gptq_act(Status::Error("unset")),
        awq(Status::Error("unset")),
        q4k(Status::Error("unset")) {
    const std::vector<float> w = MakeLlmLikeWeight(kN, kK, seed);
    std::vector<int32_t> order(kK), g_idx(kK);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(order_seed));
    for (int64_t i = 0; i < kK; ++i) {
      g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / kG);
    }
    gptq = QuantizeGptq(w.data(), kN, kK, kG, /*sym=*/false, /*v2=*/false);
    gptq_act = QuantizeGptq(w.data(), kN, kK, kG, false, false, g_idx);
    awq = QuantizeAwq(w.data(), kN, kK, kG);
    q4k = QuantizeGgml(12, w.data(), kN, kK);
    REQUIRE(gptq.ok());
    REQUIRE(gptq_act.ok());
    REQUIRE(awq.ok());
    REQUIRE(q4k.ok());
  }

  // The four layers' dequantizers to `out`: GPTQ, act-order GPTQ, AWQ,
  // Q4_K (each checked ok).
  std::vector<Dequantizer> Prepare(DType out) const {
    GptqOptions o;
    o.group_size = kG;
    const TensorView z = gptq->qzeros.view(), za = gptq_act->qzeros.view();
    const TensorView g = gptq_act->g_idx.view(), zw = awq->qzeros.view();
    std::vector<StatusOr<Dequantizer>> made;
    made.push_back(
        PrepareGptq(o, gptq->qweight.view(), &z, gptq->scales.view(), nullptr, out, "g"));
    made.push_back(
        PrepareGptq(o, gptq_act->qweight.view(), &za, gptq_act->scales.view(), &g, out, "g_act"));
    made.push_back(PrepareAwq(kG, awq->qweight.view(), &zw, awq->scales.view(), out, "a"));
    made.push_back(PrepareGgml(12, {kK, kN}, q4k->data(), q4k->size(), out, "q4_k"));
    std::vector<Dequantizer> ds;
    for (auto& d : made) {
      REQUIRE(d.ok());
      ds.push_back(std::move(*d));
    }
    return ds;
  }

  // Calls f(Prepare(out), out) on every compiled target this CPU runs
  // (one at a time, hwy::SetSupportedTargetsForTest; all of them again
  // afterwards) for every output type, the target and type CAPTUREd.
  template <class F>
  void ForEachTargetAndOutput(const F& f) const {
    struct TargetGuard {
      ~TargetGuard() { hwy::SetSupportedTargetsForTest(0); }
    } guard;
    hwy::SetSupportedTargetsForTest(0);
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      const std::string target_name = hwy::TargetName(target);
      for (DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        CAPTURE(target_name);
        CAPTURE(static_cast<int>(out));
        f(Prepare(out), out);
      }
    }
  }
};

}  // namespace nibble

#endif  // NIBBLE_TESTS_SAMPLE_LAYERS_H_
