#include "model/deepseek_v41/numpy_rng.h"

#include <array>
#include <vector>

namespace deepinfer {
namespace {

// numpy/random/bit_generator.pyx
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

// SeedSequence(seed).generate_state(4, np.uint64).
std::array<uint64_t, 4> seed_sequence_state(uint64_t seed) {
  std::vector<uint32_t> entropy;  // the seed's 32-bit words, least significant first
  do {
    entropy.push_back(uint32_t(seed));
    seed >>= 32;
  } while (seed != 0);
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) pool[i] = hashmix(size_t(i) < entropy.size() ? entropy[size_t(i)] : 0, hash_const);
  for (int s = 0; s < kPoolSize; ++s)
    for (int d = 0; d < kPoolSize; ++d)
      if (s != d) pool[d] = mix(pool[d], hashmix(pool[s], hash_const));
  for (size_t s = kPoolSize; s < entropy.size(); ++s)
    for (int d = 0; d < kPoolSize; ++d) pool[d] = mix(pool[d], hashmix(entropy[s], hash_const));
  std::array<uint32_t, 8> words{};
  hash_const = kInitB;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    words[i] = v;
  }
  std::array<uint64_t, 4> out{};
  for (int i = 0; i < 4; ++i) out[i] = uint64_t(words[2 * i]) | (uint64_t(words[2 * i + 1]) << 32);  // little-endian view
  return out;
}

constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

}  // namespace

NumpyRng::NumpyRng(uint64_t seed) {
  const std::array<uint64_t, 4> w = seed_sequence_state(seed);
  const unsigned __int128 init_state = (static_cast<unsigned __int128>(w[0]) << 64) | w[1];
  const unsigned __int128 init_seq = (static_cast<unsigned __int128>(w[2]) << 64) | w[3];
  state_ = 0;
  inc_ = (init_seq << 1) | 1;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += init_state;
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyRng::next_uint64() {
  state_ = state_ * kPcgMultiplier + inc_;
  const uint64_t x = uint64_t(state_ >> 64) ^ uint64_t(state_);
  const unsigned rot = unsigned(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

Result<int64_t> NumpyRng::integers(int64_t low, int64_t high) {
  if (high <= low) return Status::Error("integers: high must exceed low");
  const uint64_t rng = uint64_t(high) - uint64_t(low) - 1;  // inclusive span, as numpy
  if (rng == 0) return low;
  if (rng <= 0xFFFFFFFFULL) return Status::Error("integers: ranges of at most 2^32 values are not supported");
  if (rng == ~0ULL) return int64_t(uint64_t(low) + next_uint64());
  const uint64_t rng_excl = rng + 1;
  unsigned __int128 m = static_cast<unsigned __int128>(next_uint64()) * rng_excl;
  uint64_t leftover = uint64_t(m);
  if (leftover < rng_excl) {
    const uint64_t threshold = (~0ULL - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<unsigned __int128>(next_uint64()) * rng_excl;
      leftover = uint64_t(m);
    }
  }
  return int64_t(uint64_t(low) + uint64_t(m >> 64));
}

}  // namespace deepinfer
