#include "testing/quantize_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "base/numeric.h"

namespace nibble {

namespace {

// Rounds to float16 and back (what the checkpoint stores).
float RoundF16(float v) { return F32FromF16(F16FromF32(v)); }

int32_t Clamp15(float v) {
  return static_cast<int32_t>(std::min(15.0f, std::max(0.0f, std::nearbyint(v))));
}

void PutU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Per (group, column) asymmetric parameters over input channels of each
// group: scale (float16-rounded) and integer zero 0..15; range includes 0.
struct GroupParams {
  std::vector<float> scale;  // [groups, N]
  std::vector<int32_t> zero;
};

// min_zero 1 (GPTQ v1): a zero point of 0 is stored as 15 (z - 1), which
// AutoGPTQ's loaders read back as 16; such groups use z = 1 and a scale
// that maps [0, hi] onto codes 1..15 instead.
GroupParams AsymParams(const float* w, int64_t N, int64_t K, int64_t groups,
                       const std::vector<int32_t>& gk, bool sym, int32_t min_zero) {
  GroupParams p;
  std::vector<float> lo(static_cast<size_t>(groups * N), 0.0f), hi(lo);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(gk[static_cast<size_t>(k)] * N + n);
      const float v = w[n * K + k];
      lo[i] = std::min(lo[i], v);
      hi[i] = std::max(hi[i], v);
    }
  }
  p.scale.resize(lo.size());
  p.zero.resize(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    if (sym) {
      const float amax = std::max(-lo[i], hi[i]);
      float s = RoundF16(amax / 7.0f);
      if (s == 0.0f) s = 1.0f;
      p.scale[i] = s;
      p.zero[i] = 8;
    } else {
      float s = RoundF16((hi[i] - lo[i]) / 15.0f);
      if (s == 0.0f) s = 1.0f;
      p.scale[i] = s;
      p.zero[i] = Clamp15(-lo[i] / s);
      if (p.zero[i] < min_zero) {
        s = RoundF16(hi[i] / static_cast<float>(15 - min_zero));
        if (s == 0.0f) s = 1.0f;
        p.scale[i] = s;
        p.zero[i] = min_zero;
      }
    }
  }
  return p;
}

// The group of each of the K input channels: g_idx when given (each entry
// checked against the group count), else k / G. `who` names the writer in
// the errors.
StatusOr<std::vector<int32_t>> ChannelGroups(const char* who, int64_t K, int64_t G,
                                             const std::vector<int32_t>& g_idx) {
  if (G <= 0) return Status::Error(std::string(who) + ": group_size must be positive or -1");
  if (!g_idx.empty() && static_cast<int64_t>(g_idx.size()) != K) {
    return Status::Error(std::string(who) + ": g_idx must have K entries");
  }
  const int64_t groups = (K + G - 1) / G;
  std::vector<int32_t> gk(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    gk[static_cast<size_t>(k)] =
        g_idx.empty() ? static_cast<int32_t>(k / G) : g_idx[static_cast<size_t>(k)];
    if (gk[static_cast<size_t>(k)] < 0 || gk[static_cast<size_t>(k)] >= groups) {
      return Status::Error(std::string(who) + ": g_idx out of range");
    }
  }
  return gk;
}

StatusOr<Tensor> Alloc(DType t, Shape s) { return Tensor::Allocate(t, std::move(s)); }

}  // namespace

StatusOr<GptqTensors> QuantizeGptq(const float* w, int64_t N, int64_t K, int64_t group_size,
                                   bool sym, bool v2, const std::vector<int32_t>& g_idx) try {
  if (N <= 0 || K <= 0 || N % 8 != 0 || K % 8 != 0) {
    return Status::Error("QuantizeGptq: N and K must be positive multiples of 8");
  }
  const int64_t G = group_size == -1 ? K : group_size;
  auto gk_or = ChannelGroups("QuantizeGptq", K, G, g_idx);
  if (!gk_or.ok()) return gk_or.status();
  const std::vector<int32_t> gk = std::move(*gk_or);
  const int64_t groups = (K + G - 1) / G;
  const GroupParams p = AsymParams(w, N, K, groups, gk, sym, v2 ? 0 : 1);
  GptqTensors t;
  auto qw = Alloc(DType::kInt32, {K / 8, N});
  auto qz = Alloc(DType::kInt32, {groups, N / 8});
  auto sc = Alloc(DType::kFloat16, {groups, N});
  auto gi = Alloc(DType::kInt32, {K});
  if (!qw.ok() || !qz.ok() || !sc.ok() || !gi.ok()) return Status::Error("QuantizeGptq: too large");
  t.qweight = std::move(*qw);
  t.qzeros = std::move(*qz);
  t.scales = std::move(*sc);
  t.g_idx = std::move(*gi);
  auto* qwp = t.qweight.data_as<uint32_t>();
  std::fill(qwp, qwp + (K / 8) * N, 0u);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(gk[static_cast<size_t>(k)] * N + n);
      const auto q =
          static_cast<uint32_t>(Clamp15(w[n * K + k] / p.scale[i] + static_cast<float>(p.zero[i])));
      qwp[(k / 8) * N + n] |= q << (4 * (k % 8));
    }
  }
  auto* qzp = t.qzeros.data_as<uint32_t>();
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < N / 8; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) {
        const auto z = static_cast<uint32_t>(p.zero[static_cast<size_t>(g * N + 8 * c + j)]);
        word |= ((v2 ? z : (z - 1) & 0xFu)) << (4 * j);
      }
      qzp[g * (N / 8) + c] = word;
    }
  }
  auto* scp = t.scales.data_as<uint16_t>();
  for (size_t i = 0; i < p.scale.size(); ++i) scp[i] = F16FromF32(p.scale[i]);
  std::memcpy(t.g_idx.data(), gk.data(), gk.size() * 4);
  return t;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizeGptq");
}

StatusOr<AwqTensors> QuantizeAwq(const float* w, int64_t N, int64_t K, int64_t group_size) try {
  if (N <= 0 || K <= 0 || N % 8 != 0) {
    return Status::Error("QuantizeAwq: N must be a positive multiple of 8");
  }
  const int64_t G = group_size == -1 ? K : group_size;
  if (G <= 0) return Status::Error("QuantizeAwq: group_size must be positive or -1");
  const int64_t groups = (K + G - 1) / G;
  std::vector<int32_t> gk(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) gk[static_cast<size_t>(k)] = static_cast<int32_t>(k / G);
  const GroupParams p = AsymParams(w, N, K, groups, gk, /*sym=*/false, /*min_zero=*/0);
  static constexpr int kNibbleOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // column 8c + p
  AwqTensors t;
  auto qw = Alloc(DType::kInt32, {K, N / 8});
  auto qz = Alloc(DType::kInt32, {groups, N / 8});
  auto sc = Alloc(DType::kFloat16, {groups, N});
  if (!qw.ok() || !qz.ok() || !sc.ok()) return Status::Error("QuantizeAwq: too large");
  t.qweight = std::move(*qw);
  t.qzeros = std::move(*qz);
  t.scales = std::move(*sc);
  auto* qwp = t.qweight.data_as<uint32_t>();
  std::fill(qwp, qwp + K * (N / 8), 0u);
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      const size_t i = static_cast<size_t>((k / G) * N + n);
      const auto q =
          static_cast<uint32_t>(Clamp15(w[n * K + k] / p.scale[i] + static_cast<float>(p.zero[i])));
      qwp[k * (N / 8) + n / 8] |= q << (4 * kNibbleOf[n % 8]);
    }
  }
  auto* qzp = t.qzeros.data_as<uint32_t>();
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < N / 8; ++c) {
      uint32_t word = 0;
      for (int q = 0; q < 8; ++q) {
        word |= static_cast<uint32_t>(p.zero[static_cast<size_t>(g * N + 8 * c + q)])
                << (4 * kNibbleOf[q]);
      }
      qzp[g * (N / 8) + c] = word;
    }
  }
  auto* scp = t.scales.data_as<uint16_t>();
  for (size_t i = 0; i < p.scale.size(); ++i) scp[i] = F16FromF32(p.scale[i]);
  return t;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizeAwq");
}

StatusOr<CompressedTensorsTensors> QuantizeCompressedTensors(
    const float* w, int64_t N, int64_t K, int64_t group_size,
    const std::vector<int32_t>& g_idx) try {
  if (N <= 0 || K <= 0 || K % 8 != 0) {
    return Status::Error(
        "QuantizeCompressedTensors: N must be positive, K a positive multiple of 8");
  }
  const int64_t G = group_size == -1 ? K : group_size;
  auto gk_or = ChannelGroups("QuantizeCompressedTensors", K, G, g_idx);
  if (!gk_or.ok()) return gk_or.status();
  const std::vector<int32_t> gk = std::move(*gk_or);
  const int64_t groups = (K + G - 1) / G;
  const GroupParams p = AsymParams(w, N, K, groups, gk, /*sym=*/true, /*min_zero=*/0);
  CompressedTensorsTensors t;
  auto qw = Alloc(DType::kInt32, {N, K / 8});
  auto sc = Alloc(DType::kFloat16, {N, groups});
  auto sh = Alloc(DType::kInt64, {2});
  if (!qw.ok() || !sc.ok() || !sh.ok())
    return Status::Error("QuantizeCompressedTensors: too large");
  t.weight_packed = std::move(*qw);
  t.weight_scale = std::move(*sc);
  t.weight_shape = std::move(*sh);
  auto* qwp = t.weight_packed.data_as<uint32_t>();
  std::fill(qwp, qwp + N * (K / 8), 0u);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(gk[static_cast<size_t>(k)] * N + n);
      const auto q = static_cast<uint32_t>(Clamp15(w[n * K + k] / p.scale[i] + 8.0f));
      qwp[n * (K / 8) + k / 8] |= q << (4 * (k % 8));
    }
  }
  auto* scp = t.weight_scale.data_as<uint16_t>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      scp[n * groups + g] = F16FromF32(p.scale[static_cast<size_t>(g * N + n)]);
    }
  }
  const int64_t shape[2] = {N, K};
  std::memcpy(t.weight_shape.data(), shape, sizeof shape);
  if (!g_idx.empty()) {
    auto gi = Alloc(DType::kInt32, {K});
    if (!gi.ok()) return gi.status();
    t.weight_g_idx = std::move(*gi);
    std::memcpy(t.weight_g_idx.data(), gk.data(), gk.size() * 4);
  }
  return t;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizeCompressedTensors");
}

StatusOr<Bnb4Tensors> QuantizeBnbNf4(const float* w, int64_t N, int64_t K, int64_t blocksize) try {
  // bitsandbytes' NF4 levels (float32).
  static constexpr float kNf4[16] = {-1.0f,
                                     -0.6961928009986877f,
                                     -0.5250730514526367f,
                                     -0.39491748809814453f,
                                     -0.28444138169288635f,
                                     -0.18477343022823334f,
                                     -0.09105003625154495f,
                                     0.0f,
                                     0.07958029955625534f,
                                     0.16093020141124725f,
                                     0.24611230194568634f,
                                     0.33791524171829224f,
                                     0.44070982933044434f,
                                     0.5626170039176941f,
                                     0.7229568362236023f,
                                     1.0f};
  if (N <= 0 || K <= 0 || blocksize <= 0) {
    return Status::Error("QuantizeBnbNf4: N, K and blocksize must be positive");
  }
  const int64_t n = N * K, blocks = (n + blocksize - 1) / blocksize;
  Bnb4Tensors t;
  auto wt = Alloc(DType::kUInt8, {(n + 1) / 2, 1});
  auto am = Alloc(DType::kFloat32, {blocks});
  auto qm = Alloc(DType::kFloat32, {16});
  if (!wt.ok() || !am.ok() || !qm.ok()) return Status::Error("QuantizeBnbNf4: too large");
  t.weight = std::move(*wt);
  t.absmax = std::move(*am);
  t.quant_map = std::move(*qm);
  std::memcpy(t.quant_map.data(), kNf4, sizeof kNf4);
  auto* wp = t.weight.data_as<uint8_t>();
  std::fill(wp, wp + (n + 1) / 2, uint8_t{0});
  auto* ap = t.absmax.data_as<float>();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t e0 = b * blocksize, e1 = std::min(n, e0 + blocksize);
    float amax = 0.0f;
    for (int64_t e = e0; e < e1; ++e) amax = std::max(amax, std::fabs(w[e]));
    ap[b] = amax;
    for (int64_t e = e0; e < e1; ++e) {
      const float x = amax > 0.0f ? w[e] / amax : 0.0f;
      int best = 0;
      for (int c = 1; c < 16; ++c) {
        if (std::fabs(x - kNf4[c]) < std::fabs(x - kNf4[best])) best = c;
      }
      wp[e / 2] = static_cast<uint8_t>(wp[e / 2] | (best << (e % 2 == 0 ? 4 : 0)));
    }
  }
  return t;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizeBnbNf4");
}

StatusOr<std::vector<uint8_t>> QuantizeGgml(uint32_t type, const float* w, int64_t rows,
                                            int64_t cols) try {
  const int64_t block = type == 12 ? 256 : 32;
  const int64_t bb = type == 2    ? 18
                     : type == 3  ? 20
                     : type == 8  ? 34
                     : type == 12 ? 144
                     : type == 39 ? 17
                                  : 0;
  if (bb == 0) return Status::Error("QuantizeGgml: unsupported ggml type " + std::to_string(type));
  if (rows < 0 || cols < 0 || cols % block != 0) {
    return Status::Error("QuantizeGgml: cols must be a multiple of " + std::to_string(block));
  }
  const int64_t blocks = rows * cols / block;
  std::vector<uint8_t> out(static_cast<size_t>(blocks * bb), 0);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = w + b * block;
    uint8_t* o = out.data() + b * bb;
    if (type == 2) {  // Q4_0 (ggml's reference: d = max / -8)
      float amax = 0, mx = 0;
      for (int j = 0; j < 32; ++j) {
        if (std::fabs(x[j]) > amax) {
          amax = std::fabs(x[j]);
          mx = x[j];
        }
      }
      const float d = RoundF16(mx / -8.0f);
      PutU16(o, F16FromF32(d));
      for (int j = 0; j < 16; ++j) {
        const int32_t lo = d != 0 ? Clamp15(x[j] / d + 8.0f) : 8;
        const int32_t hi = d != 0 ? Clamp15(x[j + 16] / d + 8.0f) : 8;
        o[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
      }
    } else if (type == 3) {  // Q4_1: d * q + m
      float mn = x[0], mx = x[0];
      for (int j = 0; j < 32; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
      const float d = RoundF16((mx - mn) / 15.0f), m = RoundF16(mn);
      PutU16(o, F16FromF32(d));
      PutU16(o + 2, F16FromF32(m));
      for (int j = 0; j < 16; ++j) {
        const int32_t lo = d != 0 ? Clamp15((x[j] - m) / d) : 0;
        const int32_t hi = d != 0 ? Clamp15((x[j + 16] - m) / d) : 0;
        o[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
      }
    } else if (type == 8) {  // Q8_0: d * q
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = RoundF16(amax / 127.0f);
      PutU16(o, F16FromF32(d));
      for (int j = 0; j < 32; ++j) {
        const float q = d != 0 ? std::nearbyint(x[j] / d) : 0.0f;
        o[2 + j] =
            static_cast<uint8_t>(static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, q))));
      }
    } else if (type == 39) {
      // MXFP4 as ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2
      // + 127 (0 for an all-zero block; clamped to a byte here, where ggml
      // converts out of range), d = 2^(e - 128) (GGML_E8M0_TO_FP32_HALF),
      // each value the first code of least |kvalues_mxfp4[c] * d - x|.
      static constexpr float kValues[16] = {0,  1,  2,  3,  4,  6,  8,  12,
                                            -0, -1, -2, -3, -4, -6, -8, -12};
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float ef = amax > 0 ? std::floor(std::log2(amax)) - 2 + 127 : 0.0f;
      const uint32_t e = static_cast<uint32_t>(std::min(255.0f, std::max(0.0f, ef)));
      const float d = F32FromBits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
      o[0] = static_cast<uint8_t>(e);
      auto best = [&](float v) {
        int c = 0;
        for (int i = 1; i < 16; ++i) {
          if (std::fabs(kValues[i] * d - v) < std::fabs(kValues[c] * d - v)) c = i;
        }
        return static_cast<uint8_t>(c);
      };
      for (int j = 0; j < 16; ++j)
        o[1 + j] = static_cast<uint8_t>(best(x[j]) | best(x[j + 16]) << 4);
    } else {  // Q4_K: eight 32-element sub-blocks, 6-bit scales and mins
      float sub_scale[8], sub_min[8];
      for (int s = 0; s < 8; ++s) {
        float mn = 0, mx = 0;  // range includes 0: mins are subtracted, >= 0
        for (int j = 0; j < 32; ++j)
          mn = std::min(mn, x[32 * s + j]), mx = std::max(mx, x[32 * s + j]);
        sub_scale[s] = (mx - mn) / 15.0f;
        sub_min[s] = -mn;
      }
      const float max_scale = *std::max_element(sub_scale, sub_scale + 8);
      const float max_min = *std::max_element(sub_min, sub_min + 8);
      const float d = RoundF16(max_scale / 63.0f), dmin = RoundF16(max_min / 63.0f);
      uint8_t sc[8], mq[8];
      for (int s = 0; s < 8; ++s) {
        // Round the scale up so the sub-block's range still fits 0..15.
        sc[s] = static_cast<uint8_t>(d > 0 ? std::min(63.0f, std::ceil(sub_scale[s] / d)) : 0);
        mq[s] =
            static_cast<uint8_t>(dmin > 0 ? std::min(63.0f, std::nearbyint(sub_min[s] / dmin)) : 0);
      }
      PutU16(o, F16FromF32(d));
      PutU16(o + 2, F16FromF32(dmin));
      uint8_t* q = o + 4;
      for (int j = 0; j < 4; ++j) {
        q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = static_cast<uint8_t>((mq[j] & 63) | ((mq[j + 4] >> 4) << 6));
        q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mq[j + 4] & 0xF) << 4));
      }
      uint8_t* qs = o + 16;
      for (int c = 0; c < 4; ++c) {  // chunks of 64: sub-blocks 2c (low), 2c+1 (high)
        const float s0 = d * static_cast<float>(sc[2 * c]),
                    m0 = dmin * static_cast<float>(mq[2 * c]);
        const float s1 = d * static_cast<float>(sc[2 * c + 1]),
                    m1 = dmin * static_cast<float>(mq[2 * c + 1]);
        for (int l = 0; l < 32; ++l) {
          const int32_t lo = s0 > 0 ? Clamp15((x[64 * c + l] + m0) / s0) : 0;
          const int32_t hi = s1 > 0 ? Clamp15((x[64 * c + 32 + l] + m1) / s1) : 0;
          qs[32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  }
  return out;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("QuantizeGgml");
}

namespace {

// The code of `kind` (float8 e4m3fn: 0..126; e2m1: 0..7) whose value is
// nearest to |x| (ties to the even code), with x's sign bit.
uint8_t NearestFloatCode(float x, const float* values, int count, int sign_bit) {
  const float a = std::fabs(x);
  int best = 0;
  for (int c = 1; c < count; ++c) {
    const float d = std::fabs(values[c] - a), e = std::fabs(values[best] - a);
    if (d < e || (d == e && c % 2 == 0)) best = c;
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? sign_bit : 0));
}

}  // namespace

StatusOr<Fp8BlockTensors> QuantizeFp8Blocks(const float* w, int64_t N, int64_t K,
                                            int64_t block) try {
  if (N <= 0 || K <= 0 || block <= 0) {
    return Status::Error("QuantizeFp8Blocks: N, K and block must be positive");
  }
  float values[127];
  for (int c = 0; c < 127; ++c) values[c] = DecodeF8E4M3FN(static_cast<uint8_t>(c));
  const int64_t gr = (N + block - 1) / block, gc = (K + block - 1) / block;
  auto wt = Alloc(DType::kUInt8, {N, K});
  auto sc = Alloc(DType::kFloat32, {gr, gc});
  if (!wt.ok() || !sc.ok()) return Status::Error("QuantizeFp8Blocks: too large");
  Fp8BlockTensors t{std::move(*wt), std::move(*sc)};
  auto* q = t.weight.data_as<uint8_t>();
  auto* s = t.scale_inv.data_as<float>();
  for (int64_t bi = 0; bi < gr; ++bi) {
    for (int64_t bj = 0; bj < gc; ++bj) {
      const int64_t r1 = std::min(N, (bi + 1) * block), c1 = std::min(K, (bj + 1) * block);
      float amax = 0.0f;
      for (int64_t r = bi * block; r < r1; ++r) {
        for (int64_t c = bj * block; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * K + c]));
      }
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      s[bi * gc + bj] = scale;
      for (int64_t r = bi * block; r < r1; ++r) {
        for (int64_t c = bj * block; c < c1; ++c) {
          q[r * K + c] = NearestFloatCode(w[r * K + c] / scale, values, 127, 0x80);
        }
      }
    }
  }
  return t;
} catch (const std::bad_alloc&) {
  return Status::Error("QuantizeFp8Blocks: out of memory");
}

StatusOr<Mxfp4Tensors> QuantizeMxfp4Experts(const float* w, int64_t N, int64_t K) try {
  if (N <= 0 || K <= 0 || N % 32 != 0) {
    return Status::Error("QuantizeMxfp4Experts: N and K must be positive, N a multiple of 32");
  }
  static constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const int64_t G = N / 32;
  auto bl = Alloc(DType::kUInt8, {1, K, G, 16});
  auto sc = Alloc(DType::kUInt8, {1, K, G});
  if (!bl.ok() || !sc.ok()) return Status::Error("QuantizeMxfp4Experts: too large");
  Mxfp4Tensors t{std::move(*bl), std::move(*sc)};
  auto* b = t.blocks.data_as<uint8_t>();
  auto* s = t.scales.data_as<uint8_t>();
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t g = 0; g < G; ++g) {
      float amax = 0.0f;
      for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[(g * 32 + i) * K + k]));
      int e = amax > 0.0f ? static_cast<int>(std::floor(std::log2(amax))) - 2 : -127;
      e = std::min(127, std::max(-127, e));
      s[k * G + g] = static_cast<uint8_t>(e + 127);
      const float scale = std::ldexp(1.0f, e);
      for (int64_t i = 0; i < 32; i += 2) {
        const uint8_t lo = NearestFloatCode(w[(g * 32 + i) * K + k] / scale, kE2M1, 8, 8);
        const uint8_t hi = NearestFloatCode(w[(g * 32 + i + 1) * K + k] / scale, kE2M1, 8, 8);
        b[(k * G + g) * 16 + i / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
  return t;
} catch (const std::bad_alloc&) {
  return Status::Error("QuantizeMxfp4Experts: out of memory");
}

}  // namespace nibble
