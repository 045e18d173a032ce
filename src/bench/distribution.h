// Rng and Distribution: the seeded randomness behind every workload. Both are defined bit for bit
// (mt19937_64 plus our own transforms, never std::*_distribution, whose output differs between
// standard libraries), so a seed gives the same workload on every machine.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace deepinfer::bench {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // A generator for a sub-stream (one session, one group): independent of the order of calls.
  static Rng Derive(uint64_t seed, uint64_t stream, uint64_t index = 0);

  uint64_t next() { return engine_(); }
  double uniform();                              // [0, 1)
  int64_t uniform_int(int64_t lo, int64_t hi);   // [lo, hi], lo <= hi
  double normal();                               // mean 0, std 1 (Box-Muller)
  double exponential(double mean);

 private:
  std::mt19937_64 engine_;
};

// A one-dimensional distribution written as a spec string:
//   "N" or "fixed:N"     always N
//   "uniform:LO:HI"      uniform on [LO, HI] (integers inclusive when sampled as counts)
//   "normal:MEAN:STD"    Gaussian, clamped at the lower bound of the sampler used
//   "exponential:MEAN"   exponential with that mean (Poisson-process gaps, think times)
class Distribution {
 public:
  static Result<Distribution> Parse(std::string_view spec);
  static Distribution Fixed(double value);

  // A count >= min_count (token lengths, turns).
  int64_t sample_count(Rng& rng, int64_t min_count = 1) const;
  // A real value >= 0 (seconds).
  double sample_seconds(Rng& rng) const;
  const std::string& spec() const { return spec_; }

 private:
  enum class Kind { kFixed, kUniform, kNormal, kExponential };
  Distribution(Kind kind, double a, double b, std::string spec) : kind_(kind), a_(a), b_(b), spec_(std::move(spec)) {}
  double sample(Rng& rng, bool integral) const;

  Kind kind_;
  double a_;  // fixed value, uniform low, normal mean, exponential mean
  double b_;  // uniform high, normal std
  std::string spec_;
};

}  // namespace deepinfer::bench
