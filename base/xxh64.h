// XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0), streaming: the
// checksum of a written shard (nibble.distributed records it; a resumed run
// recomputes it to prove a kept shard complete and undamaged). A checksum
// against accidents — truncation, a torn or stale write, bit rot — not
// against tampering. Computed in the writer as the bytes go out, at several
// GB/s on one core, so that it costs no second read.
#ifndef NIBBLE_BASE_XXH64_H_
#define NIBBLE_BASE_XXH64_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nibble {

class Xxh64 {
 public:
  // Appends `n` bytes of `data` to the hashed stream.
  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    if (buffered_ > 0) {  // complete the buffered stripe first
      const size_t take = n < kStripe - buffered_ ? n : kStripe - buffered_;
      std::memcpy(buffer_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < kStripe) return;
      Stripe(buffer_);
      buffered_ = 0;
    }
    for (; n >= kStripe; p += kStripe, n -= kStripe) Stripe(p);
    std::memcpy(buffer_, p, n);
    buffered_ = n;
  }

  // The hash of every byte given so far (the stream can go on after it).
  uint64_t Digest() const {
    uint64_t h;
    if (total_ >= kStripe) {
      h = Rotl(v_[0], 1) + Rotl(v_[1], 7) + Rotl(v_[2], 12) + Rotl(v_[3], 18);
      for (const uint64_t v : v_) h = (h ^ Round(0, v)) * kP1 + kP4;
    } else {
      h = kP5;  // seed 0
    }
    h += total_;
    const uint8_t* p = buffer_;
    size_t n = buffered_;
    for (; n >= 8; p += 8, n -= 8) h = Rotl(h ^ Round(0, Load64(p)), 27) * kP1 + kP4;
    if (n >= 4) {
      h = Rotl(h ^ (uint64_t{Load32(p)} * kP1), 23) * kP2 + kP3;
      p += 4;
      n -= 4;
    }
    for (; n > 0; ++p, --n) h = Rotl(h ^ (uint64_t{*p} * kP5), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

 private:
  static constexpr size_t kStripe = 32;
  static constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full,
                            kP3 = 0x165667B19E3779F9ull, kP4 = 0x85EBCA77C2B2AE63ull,
                            kP5 = 0x27D4EB2F165667C5ull;
  static uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t Round(uint64_t acc, uint64_t input) { return Rotl(acc + input * kP2, 31) * kP1; }
  // Little-endian loads (the hash is defined on little-endian words).
  static uint64_t Load64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  static uint32_t Load32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
  void Stripe(const uint8_t* p) {
    for (int i = 0; i < 4; ++i) v_[i] = Round(v_[i], Load64(p + 8 * i));
  }

  uint64_t v_[4] = {kP1 + kP2, kP2, 0, 0 - kP1};  // seed 0
  uint64_t total_ = 0;
  uint8_t buffer_[kStripe] = {};
  size_t buffered_ = 0;
};

}  // namespace nibble

#endif  // NIBBLE_BASE_XXH64_H_
