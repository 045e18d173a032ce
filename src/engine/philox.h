// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The output is a pure function of (key, counter), so a request's
// draws depend only on its seed and on which draw it is, never on other traffic or on how
// often it was preempted and recomputed.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = kM0 * ctr[0];
    const uint64_t p1 = kM1 * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
  }
  return ctr;
}

// A uniform double in [0, 1) with 53 random bits: draw number `draw` of stream `stream` under `seed`.
inline double philox_uniform(uint64_t seed, uint64_t draw, uint64_t stream) {
  const auto r = philox4x32_10({uint32_t(draw), uint32_t(draw >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                               {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = ((uint64_t(r[0]) << 32) | r[1]) >> 11;
  return double(bits) * 0x1.0p-53;
}

}  // namespace deepinfer
