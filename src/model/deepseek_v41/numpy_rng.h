// NumpyRng: numpy's default_rng(seed) bit for bit (numpy >= 1.17, unchanged through 2.x): a
// SeedSequence over the seed's 32-bit words (pool of 4, its hashmix/mix), whose generate_state(4,
// uint64) seeds PCG64 (XSL-RR 128/64; state = words 0..1, increment = words 2..3, high word
// first), and Generator.integers(low, high) for int64 by Lemire's bounded method. DeepSeek-V4.1's
// Engram draws its hash multipliers this way (default_rng(10007 * layer_id)).
#pragma once

#include <cstdint>

#include "core/status.h"

namespace deepinfer {

class NumpyRng {
 public:
  explicit NumpyRng(uint64_t seed);  // default_rng(seed), seed >= 0

  uint64_t next_uint64();
  // One draw of Generator.integers(low, high) (dtype int64, high exclusive). Ranges of at most
  // 2^32 values take numpy's buffered 32-bit path, which this does not reproduce: an error.
  Result<int64_t> integers(int64_t low, int64_t high);

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
};

}  // namespace deepinfer
