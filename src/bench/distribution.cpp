#include "bench/distribution.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace deepinfer::bench {

Rng Rng::Derive(uint64_t seed, uint64_t stream, uint64_t index) {
  // splitmix64 over the three inputs: nearby (seed, stream, index) give unrelated engines.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return Rng(mix(mix(mix(seed) ^ stream) ^ index));
}

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(span == 0 ? engine_() : engine_() % span);
}

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Rng::exponential(double mean) { return -mean * std::log(1.0 - uniform()); }

namespace {

Result<double> parse_number(std::string_view text, std::string_view spec) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0) {
    return Status::Error("distribution '" + std::string(spec) + "': '" + std::string(text) +
                         "' is not a non-negative number");
  }
  return value;
}

}  // namespace

Result<Distribution> Distribution::Parse(std::string_view spec) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t colon = spec.find(':', start);
    parts.push_back(spec.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  const std::string s(spec);
  auto bad = [&] {
    return Status::Error("distribution '" + s +
                         "': expected N, fixed:N, uniform:LO:HI, normal:MEAN:STD or exponential:MEAN");
  };
  std::vector<double> args;
  for (size_t i = 1; i < parts.size(); ++i) {
    DI_ASSIGN_OR_RETURN(double v, parse_number(parts[i], spec));
    args.push_back(v);
  }
  if (parts.size() == 1) {
    DI_ASSIGN_OR_RETURN(double v, parse_number(parts[0], spec));
    return Distribution(Kind::kFixed, v, 0, s);
  }
  const std::string_view kind = parts[0];
  if (kind == "fixed" && args.size() == 1) return Distribution(Kind::kFixed, args[0], 0, s);
  if (kind == "uniform" && args.size() == 2) {
    if (args[0] > args[1]) return Status::Error("distribution '" + s + "': LO > HI");
    return Distribution(Kind::kUniform, args[0], args[1], s);
  }
  if (kind == "normal" && args.size() == 2) return Distribution(Kind::kNormal, args[0], args[1], s);
  if (kind == "exponential" && args.size() == 1) return Distribution(Kind::kExponential, args[0], 0, s);
  return bad();
}

Distribution Distribution::Fixed(double value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return Distribution(Kind::kFixed, value, 0, std::string(buf, end));
}

double Distribution::sample(Rng& rng, bool integral) const {
  switch (kind_) {
    case Kind::kFixed:
      return a_;
    case Kind::kUniform:
      if (integral) {
        return static_cast<double>(rng.uniform_int(static_cast<int64_t>(std::llround(a_)),
                                                   static_cast<int64_t>(std::llround(b_))));
      }
      return a_ + (b_ - a_) * rng.uniform();
    case Kind::kNormal:
      return a_ + b_ * rng.normal();
    case Kind::kExponential:
      return rng.exponential(a_);
  }
  return a_;
}

int64_t Distribution::sample_count(Rng& rng, int64_t min_count) const {
  return std::max<int64_t>(min_count, std::llround(sample(rng, true)));
}

double Distribution::sample_seconds(Rng& rng) const { return std::max(0.0, sample(rng, false)); }

}  // namespace deepinfer::bench
