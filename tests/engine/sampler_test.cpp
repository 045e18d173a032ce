#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "engine/philox.h"

namespace deepinfer {
namespace {

// Known-answer vectors of Random123 (kat_vectors, philox4x32_10).
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> l;
  for (double v : p) l.push_back(float(std::log(v)));
  return l;
}

// Frequencies of tokens over many seeds (one draw each) for a one-token prompt.
std::map<int32_t, double> frequencies(Sampler& s, const std::vector<float>& logits, const SamplingParams& p, int n) {
  std::map<int32_t, double> f;
  const std::vector<int32_t> prompt = {0};
  for (int i = 0; i < n; ++i) f[s.sample(logits, p, prompt, 1, {}, uint64_t(i), 0).token] += 1.0 / n;
  return f;
}

TEST(Sampler, GreedyTakesTheLowestIdAmongEqualMaxima) {
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0;
  const std::vector<int32_t> prompt = {0};
  EXPECT_EQ(s.sample(std::vector<float>{1, 3, 2, 3, 0}, p, prompt, 1, {}, 0, 0).token, 1);
  EXPECT_EQ(argmax(std::vector<float>{-1, -1}), 0);
}

TEST(Sampler, LogprobsAreOfTheRawLogits) {
  Sampler s(4);
  const std::vector<float> logits = {1, 2, 3, 3};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0));
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 3;
  p.logit_bias = {{0, 10.0f}};  // changes the choice, not the reported logprobs
  p.repetition_penalty = 1.5f;
  const std::vector<int32_t> prompt = {2};
  const SampledToken t = s.sample(logits, p, prompt, 1, {}, 0, 0);
  EXPECT_EQ(t.token, 0);
  EXPECT_NEAR(t.logprob, 1.0 - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].token, 2);
  EXPECT_EQ(t.top[1].token, 3);
  EXPECT_EQ(t.top[2].token, 1);
  EXPECT_NEAR(t.top[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_NEAR(t.top[2].logprob, 2.0 - lse, 1e-6);
}

TEST(Sampler, TemperatureOneFollowsTheDistribution) {
  Sampler s(4);
  SamplingParams p;
  const auto f = frequencies(s, log_probs({0.1, 0.2, 0.3, 0.4}), p, 20000);
  EXPECT_NEAR(f.at(0), 0.1, 0.015);
  EXPECT_NEAR(f.at(1), 0.2, 0.015);
  EXPECT_NEAR(f.at(2), 0.3, 0.015);
  EXPECT_NEAR(f.at(3), 0.4, 0.015);
}

TEST(Sampler, LowTemperatureSharpens) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0.25f;  // p^4, normalized: 0.4 -> 0.69
  const auto f = frequencies(s, log_probs({0.1, 0.2, 0.3, 0.4}), p, 20000);
  EXPECT_NEAR(f.at(3), 256.0 / (1 + 16 + 81 + 256), 0.015);
}

TEST(Sampler, TopKTopPMinPCut) {
  Sampler s(4);
  const auto logits = log_probs({0.1, 0.2, 0.3, 0.4});
  SamplingParams k;
  k.top_k = 2;
  auto f = frequencies(s, logits, k, 20000);
  EXPECT_EQ(f.count(0) + f.count(1), 0u);
  EXPECT_NEAR(f.at(3), 4.0 / 7, 0.015);
  SamplingParams tp;
  tp.top_p = 0.5f;  // {0.4, 0.3}: the smallest head reaching 0.5
  f = frequencies(s, logits, tp, 20000);
  EXPECT_EQ(f.count(0) + f.count(1), 0u);
  EXPECT_NEAR(f.at(2), 3.0 / 7, 0.015);
  SamplingParams mp;
  mp.min_p = 0.6f;  // keeps p >= 0.24
  f = frequencies(s, logits, mp, 20000);
  EXPECT_EQ(f.count(0) + f.count(1), 0u);
  SamplingParams one;
  one.top_k = 1;
  f = frequencies(s, logits, one, 200);
  EXPECT_NEAR(f.at(3), 1.0, 1e-9);
}

TEST(Sampler, TopPOverALargeVocabularyStaysInTheNucleus) {
  const int vocab = 5000;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  // The nucleus by a full sort: most likely first, ties by lower id.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  double total = 0;
  for (float l : logits) total += std::exp(double(l));
  std::vector<bool> in_nucleus(vocab, false);
  double cum = 0;
  for (int32_t id : order) {
    if (cum >= 0.9 * total) break;
    in_nucleus[id] = true;
    cum += std::exp(double(logits[id]));
  }
  Sampler s(vocab);
  SamplingParams p;
  p.top_p = 0.9f;
  const std::vector<int32_t> prompt = {0};
  std::set<int32_t> seen;
  for (int i = 0; i < 3000; ++i) {
    const int32_t t = s.sample(logits, p, prompt, 1, {}, uint64_t(i), 0).token;
    ASSERT_TRUE(in_nucleus[t]) << t;
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 500u) << "the nucleus is large here; draws spread over it";
}

TEST(Sampler, ASeedReproducesAndSamplesDiffer) {
  Sampler s(100);
  std::vector<float> logits(100, 0.0f);
  SamplingParams p;
  std::vector<int32_t> seq = {1, 2, 3};
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 50; ++i) {
    a.push_back(s.sample(logits, p, seq, 3, {}, 42, 0).token);
    b.push_back(s.sample(logits, p, seq, 3, {}, 42, 0).token);
    c.push_back(s.sample(logits, p, seq, 3, {}, 42, 1).token);
    seq.push_back(a.back());
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampler, PenaltiesAndBias) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0;
  const std::vector<float> logits = {0, 2, 2, 1};
  const std::vector<int32_t> seq = {1, 9 % 4, 2, 2};  // prompt {1, 1}; output {2, 2}
  EXPECT_EQ(s.sample(logits, p, seq, 2, {}, 0, 0).token, 1);
  p.repetition_penalty = 2.0f;  // both 1 and 2 appear: 1.0 each, 3 stays at 1
  EXPECT_EQ(s.sample(logits, p, seq, 2, {}, 0, 0).token, 1);
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.6f;  // 2 -> 0.8
  EXPECT_EQ(s.sample(logits, p, seq, 2, {}, 0, 0).token, 1);
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 1.5f;  // 2 -> 0.5, 1 untouched (prompt only)
  EXPECT_EQ(s.sample(std::vector<float>{0, 1, 2, 1.5}, p, seq, 2, {}, 0, 0).token, 3);
  p.presence_penalty = 0.0f;
  p.logit_bias = {{0, 5.0f}};
  EXPECT_EQ(s.sample(logits, p, seq, 2, {}, 0, 0).token, 0);
}

TEST(Sampler, MinTokensMasksEosAndStopTokens) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  const std::vector<float> logits = {0, 5, 4, 3};
  const std::vector<int32_t> eos = {1};
  std::vector<int32_t> seq = {0, 3};  // one output token so far
  EXPECT_EQ(s.sample(logits, p, seq, 1, eos, 0, 0).token, 3);
  p.ignore_eos = true;
  EXPECT_EQ(s.sample(logits, p, seq, 1, eos, 0, 0).token, 1);
  seq.push_back(3);
  p.ignore_eos = false;
  EXPECT_EQ(s.sample(logits, p, seq, 1, eos, 0, 0).token, 1);
}

TEST(SamplingParams, ValidateNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(p.validate(10).ok());
  p.top_logprobs = 21;
  EXPECT_NE(p.validate(10).message().find("top_logprobs"), std::string::npos);
  EXPECT_EQ(p.validate(10).field(), "top_logprobs");
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(p.validate(10).message().find("logit_bias"), std::string::npos);
  EXPECT_EQ(p.validate(10).field(), "logit_bias");
  p = {};
  p.stop_token_ids = {12};
  EXPECT_EQ(p.validate(10).field(), "stop_token_ids");
  p = {};
  p.top_p = 0;
  EXPECT_FALSE(p.validate(10).ok());
  p = {};
  p.max_tokens = 2;
  p.min_tokens = 3;
  EXPECT_FALSE(p.validate(10).ok());
}

// A temperature so small that 1/T overflows f32 (1e-39 is even subnormal) is greedy, whatever
// the seed; so is every temperature below kMinSamplingTemperature.
TEST(Sampler, TinyTemperaturesAreGreedy) {
  Sampler s(6);
  const std::vector<float> logits = {0.5f, 2.0f, 1.9f, -1.0f, 2.0f, 0.0f};
  const std::vector<int32_t> prompt = {0};
  for (float t : {1e-39f, 1e-30f, 1e-6f, 9.9e-6f}) {
    SamplingParams p;
    p.temperature = t;
    EXPECT_TRUE(p.greedy()) << t;
    for (uint64_t seed = 0; seed < 50; ++seed) EXPECT_EQ(s.sample(logits, p, prompt, 1, {}, seed, 0).token, 1) << t;
  }
  SamplingParams p;
  p.temperature = kMinSamplingTemperature;
  EXPECT_FALSE(p.greedy());
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const int32_t t = s.sample(logits, p, prompt, 1, {}, seed, 0).token;
    EXPECT_TRUE(t == 1 || t == 4) << t;  // the two maxima; nothing else has any mass left
  }
}

// NaN and infinite logits (a numerical fault upstream) never leave the sampler without a
// candidate: NaN is never chosen, +inf tokens share the mass, all -inf falls back to the argmax.
TEST(Sampler, NanAndInfiniteLogitsStillGiveAToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Sampler s(5);
  const std::vector<int32_t> prompt = {0};
  SamplingParams hot;
  hot.temperature = 1.0f;
  SamplingParams cut = hot;
  cut.top_k = 2;
  cut.top_p = 0.5f;
  cut.min_p = 0.9f;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (const SamplingParams& p : {hot, cut, greedy}) {
    for (uint64_t seed = 0; seed < 40; ++seed) {
      EXPECT_NE(s.sample(std::vector<float>{nan, 1.0f, nan, 0.0f, nan}, p, prompt, 1, {}, seed, 0).token, 0);
      const int32_t t = s.sample(std::vector<float>{0.0f, inf, nan, inf, 3.0f}, p, prompt, 1, {}, seed, 0).token;
      EXPECT_TRUE(t == 1 || t == 3) << t;
      EXPECT_EQ(s.sample(std::vector<float>{nan, nan, nan, nan, nan}, p, prompt, 1, {}, seed, 0).token, 0);
      EXPECT_EQ(s.sample(std::vector<float>{-inf, -inf, nan, -inf, -inf}, p, prompt, 1, {}, seed, 0).token, 0);
    }
  }
  // Both +inf tokens are drawn: the mass is shared, not collapsed onto the first.
  std::map<int32_t, int> seen;
  for (uint64_t seed = 0; seed < 200; ++seed)
    ++seen[s.sample(std::vector<float>{0.0f, inf, nan, inf, 3.0f}, hot, prompt, 1, {}, seed, 0).token];
  EXPECT_GT(seen[1], 50);
  EXPECT_GT(seen[3], 50);
}

}  // namespace
}  // namespace deepinfer
