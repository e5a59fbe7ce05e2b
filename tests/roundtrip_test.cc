// quantize -> dequantize: every element within s/2 of the original (plus
// float rounding, plus output rounding for float16/bfloat16), over every
// scheme, bit width, axis, group size (32, 64, 128, 256, G = d, per-channel,
// per-tensor), scale type and rank 1-4.
#include <cmath>
#include <string>
#include <vector>

#include "bench/synthetic_weights.h"
#include "doctest/doctest.h"
#include "op/onnx.h"
#include "op/pmx.h"
#include "op/quantize.h"
#include "tests/pmx_oracle.h"

namespace nibble {
namespace testing {
namespace {

TEST_CASE("round trip error <= s/2 in every mode") {
  struct SC {
    Shape d;
    int64_t axis;
  };
  const SC shapes[] = {{{64, 512}, 1},   {{256, 24}, 0},   {{512}, 0},
                       {{8, 4, 256}, 1}, {{256, 2, 3}, 0}, {{8, 2, 3, 128}, 1}};
  int checked = 0;
  for (const auto& sc : shapes) {
    const int64_t qdim = sc.d[static_cast<size_t>(sc.axis)];
    const int64_t n = NumElements(sc.d);
    const auto w = MakeLlmLikeWeight(1, n, 5 + static_cast<uint64_t>(n));
    for (int bits : {4, 8}) {
      for (QuantScheme scheme :
           {QuantScheme::kSymmetric, QuantScheme::kAsymmetric, QuantScheme::kFloatZeroPoint}) {
        for (int64_t g : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}, qdim, int64_t{0},
                          int64_t{-1}}) {
          if (g > 0 && qdim % g != 0) continue;
          for (DType st : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
            QuantizeConfig cfg;
            cfg.bits = bits;
            cfg.scheme = scheme;
            cfg.quant_axis = sc.axis;
            cfg.group_size = g < 0 ? 0 : g;
            cfg.per_tensor = g < 0;
            cfg.scale_dtype = st;
            cfg.int4x8 = bits == 4 && checked % 2 == 1;
            auto q = QuantizePmx(w.data(), sc.d, cfg);
            REQUIRE_MESSAGE(q.ok(), q.status().message());
            // Scale index per element, via the oracle's independent indexing.
            PmxCase c;
            c.attrs = q->attrs;
            c.d = sc.d;
            c.scale_shape = q->scale.shape();
            for (DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
              DequantizeOptions o;
              o.output_dtype = out;
              TensorView zs;
              auto y = DequantizePmx(q->attrs, q->x.view(), q->scale.view(),
                                     q->zero_point_view_or_null(&zs), o);
              REQUIRE_MESSAGE(y.ok(), y.status().message());
              const float out_eps = out == DType::kFloat32   ? 0.0f
                                    : out == DType::kFloat16 ? std::ldexp(1.0f, -11)
                                                             : std::ldexp(1.0f, -8);
              int64_t bad = 0;
              // float16 subnormals (below 2^-14) round to a multiple of 2^-24.
              const float out_abs = out == DType::kFloat16 ? std::ldexp(1.0f, -25) : 0.0f;
              const float levels = bits == 4 ? 16.0f : 256.0f;
              const bool float_zp = scheme == QuantScheme::kFloatZeroPoint;
              const TensorView sv = q->scale.view(), yv = y->view();
              const TensorView zv = float_zp ? q->zero_point.view() : TensorView();
              for (int64_t e = 0; e < n; ++e) {
                const int64_t si = ScaleIndex(c, e);
                const float s = std::fabs(FloatElement(sv, si));
                const float z = float_zp ? std::fabs(FloatElement(zv, si)) : 0.0f;
                const float v = FloatElement(yv, e);
                // s/2 of quantization, plus a few float32 roundings of the
                // quantities involved (z, s, the product, the sum), plus the
                // output type's rounding.
                const float f32_eps = std::ldexp(1.0f, -22);
                const float bound = s / 2 +
                                    f32_eps * (std::fabs(w[static_cast<size_t>(e)]) + std::fabs(v) +
                                               z + levels * s) +
                                    std::fabs(v) * out_eps + out_abs + 1e-30f;
                if (!(std::fabs(v - w[static_cast<size_t>(e)]) <= bound)) ++bad;
              }
              CHECK_MESSAGE(bad == 0, "bits=" << bits << " scheme=" << static_cast<int>(scheme)
                                              << " d=" << ShapeToString(sc.d) << " axis=" << sc.axis
                                              << " G=" << g << " scale=" << DTypeName(st)
                                              << " out=" << DTypeName(out));
              ++checked;
            }
          }
        }
      }
    }
  }
  CHECK(checked > 500);
}

TEST_CASE("quantizer: symmetric int4 G=4 by hand") {
  const std::vector<float> w = {0.7f, -0.35f, 0.0f, 0.1f};
  QuantizeConfig cfg;
  cfg.group_size = 4;
  cfg.quant_axis = 1;
  // Shape (4, 4): four identical rows, so int4 packing along dim 0 is exercised.
  std::vector<float> w4;
  for (int r = 0; r < 4; ++r) w4.insert(w4.end(), w.begin(), w.end());
  auto q = QuantizePmx(w4.data(), {4, 4}, cfg);
  REQUIRE(q.ok());
  CHECK(q->scale.data_as<float>()[0] == 0.1f);  // absmax / 7
  // codes: round(7) + 8 = 15, round(-3.5) = -4 (half-even) + 8 = 4, 8, 9
  auto y = DequantizePmx(q->attrs, q->x.view(), q->scale.view(), nullptr);
  REQUIRE(y.ok());
  CHECK(y->data_as<float>()[0] == 7 * 0.1f);
  CHECK(y->data_as<float>()[1] == -4 * 0.1f);
  CHECK(y->data_as<float>()[2] == 0.0f);
  CHECK(y->data_as<float>()[3] == 1 * 0.1f);
}

}  // namespace
}  // namespace testing
}  // namespace nibble

namespace nibble {
namespace testing {
namespace {

TEST_CASE("ONNX round trip: blocked (ragged), per-axis, per-tensor - int4 / uint4 / int8") {
  struct SC {
    Shape d;
    int64_t axis;
  };
  int checked = 0;
  for (const SC& sc : {SC{{96, 70}, 1}, SC{{70, 48}, 0}, SC{{4, 5, 33}, 2}}) {
    const int64_t n = NumElements(sc.d);
    const auto w = MakeLlmLikeWeight(1, n, 77);
    for (int bits : {4, 8}) {
      for (QuantScheme scheme : {QuantScheme::kSymmetric, QuantScheme::kAsymmetric}) {
        for (int64_t g : {int64_t{16}, int64_t{32}, int64_t{0}, int64_t{-1}}) {
          if (g == 0 && sc.d.size() != 2) continue;
          QuantizeConfig cfg;
          cfg.bits = bits;
          cfg.scheme = scheme;
          cfg.quant_axis = sc.axis;
          cfg.group_size = g < 0 ? 0 : g;
          cfg.per_tensor = g < 0;
          auto q = QuantizeOnnx(w.data(), sc.d, cfg);
          REQUIRE_MESSAGE(q.ok(), q.status().message());
          TensorView zs;
          auto y = DequantizeOnnx(q->attrs, q->x.view(), q->scale.view(),
                                  q->zero_point_view_or_null(&zs));
          REQUIRE_MESSAGE(y.ok(), y.status().message());
          // Scale of each element: from the ONNX attributes.
          const size_t rank = sc.d.size();
          int64_t bad = 0;
          for (int64_t e = 0; e < n; ++e) {
            std::vector<int64_t> idx(rank);
            int64_t r = e;
            for (size_t k = rank; k-- > 0;) {
              idx[k] = r % sc.d[k];
              r /= sc.d[k];
            }
            int64_t si = 0;
            if (g < 0) {
              si = 0;
            } else if (g == 0) {
              si = idx[static_cast<size_t>(q->attrs.axis)];
            } else {
              idx[static_cast<size_t>(sc.axis)] /= g;
              for (size_t k = 0; k < rank; ++k) si = si * q->scale.shape()[k] + idx[k];
            }
            const float s = std::fabs(q->scale.data_as<float>()[si]);
            const float v = y->data_as<float>()[e];
            const float bound = s / 2 + std::ldexp(1.0f, -22) * (std::fabs(v) + 256 * s) + 1e-30f;
            if (!(std::fabs(v - w[static_cast<size_t>(e)]) <= bound)) ++bad;
          }
          CHECK_MESSAGE(bad == 0, "bits=" << bits << " scheme=" << static_cast<int>(scheme)
                                          << " d=" << ShapeToString(sc.d) << " G=" << g);
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 30);
  QuantizeConfig fz;
  fz.scheme = QuantScheme::kFloatZeroPoint;
  const std::vector<float> w(64, 0.5f);
  CHECK(QuantizeOnnx(w.data(), {8, 8}, fz).status().message() ==
        "quantize: ONNX DequantizeLinear has no float zero point");
}

}  // namespace
}  // namespace testing
}  // namespace nibble
