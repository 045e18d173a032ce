#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "engine/philox.h"

namespace deepinfer {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// log(sum(exp(x))) over the row, accumulated in double in index order.
double log_sum_exp(std::span<const float> x) {
  const float m = x[size_t(argmax(x))];
  double s = 0.0;
  for (float v : x) s += std::exp(double(v) - double(m));
  return double(m) + std::log(s);
}

// The allowed id with the highest raw logit (NaN counts as -inf), the lowest among equals.
int32_t best_allowed(std::span<const float> logits, std::span<const uint32_t> allowed) {
  int32_t best = -1;
  float best_value = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!mask_allows(allowed, int32_t(i))) continue;
    const float v = std::isnan(logits[i]) ? kNegInf : logits[i];
    if (best < 0 || v > best_value) {
      best = int32_t(i);
      best_value = v;
    }
  }
  DI_CHECK(best >= 0);  // the caller's mask allows at least one token
  return best;
}

}  // namespace

int32_t argmax(std::span<const float> values) {
  int32_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[size_t(best)]) best = int32_t(i);
  }
  return best;
}

Sampler::Sampler(int vocab_size) : vocab_size_(vocab_size), work_(size_t(vocab_size)) { DI_CHECK(vocab_size > 0); }

SampledToken Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                             std::span<const int32_t> tokens, int n_prompt,
                             std::span<const int32_t> eos_token_ids, uint64_t seed, int sample_index,
                             std::span<const uint32_t> allowed) {
  DI_CHECK(int(logits.size()) == vocab_size_ && n_prompt <= int(tokens.size()));
  process(logits, params, tokens, n_prompt, eos_token_ids, allowed);
  SampledToken out;
  const bool none_finite = work_[size_t(argmax(work_))] == kNegInf;
  if (none_finite && !allowed.empty()) {
    out.token = best_allowed(logits, allowed);
  } else if (params.greedy() || none_finite) {
    out.token = argmax(work_);
  } else {
    const uint64_t n_output = tokens.size() - size_t(n_prompt);
    out.token = draw(params, philox_uniform(seed, n_output, uint64_t(sample_index)));
  }
  if (params.wants_logprobs()) {
    const double lse = log_sum_exp(logits);
    out.logprob = float(double(logits[size_t(out.token)]) - lse);
    const size_t k = std::min(size_t(params.top_logprobs), logits.size());
    ids_.resize(logits.size());
    for (size_t i = 0; i < ids_.size(); ++i) ids_[i] = int32_t(i);
    std::partial_sort(ids_.begin(), ids_.begin() + ptrdiff_t(k), ids_.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i) out.top.push_back({ids_[i], float(double(logits[size_t(ids_[i])]) - lse)});
  }
  return out;
}

void Sampler::process(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> tokens,
                      int n_prompt, std::span<const int32_t> eos_token_ids, std::span<const uint32_t> allowed) {
  // A NaN logit (a numerical fault upstream) is never chosen.
  std::transform(logits.begin(), logits.end(), work_.begin(), [](float v) { return std::isnan(v) ? kNegInf : v; });
  for (const auto& [id, bias] : params.logit_bias) work_[size_t(id)] += bias;  // -inf stays -inf

  if (params.repetition_penalty != 1.0f) {
    scratch_.assign(tokens.begin(), tokens.end());
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
    for (int32_t id : scratch_) {
      float& v = work_[size_t(id)];
      v = v > 0.0f ? v / params.repetition_penalty : v * params.repetition_penalty;
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    scratch_.assign(tokens.begin() + n_prompt, tokens.end());
    std::sort(scratch_.begin(), scratch_.end());
    for (size_t i = 0; i < scratch_.size();) {
      size_t j = i;
      while (j < scratch_.size() && scratch_[j] == scratch_[i]) ++j;
      work_[size_t(scratch_[i])] -= params.presence_penalty + params.frequency_penalty * float(j - i);
      i = j;
    }
  }
  if (int(tokens.size()) - n_prompt < params.min_tokens) {
    if (!params.ignore_eos) {
      for (int32_t id : eos_token_ids) work_[size_t(id)] = kNegInf;
    }
    for (int32_t id : params.stop_token_ids) work_[size_t(id)] = kNegInf;
  }
  if (!allowed.empty()) {
    for (size_t w = 0; w * 32 < work_.size(); ++w) {
      const uint32_t bits = w < allowed.size() ? allowed[w] : 0u;
      if (bits == ~0u) continue;
      const size_t end = std::min(work_.size(), (w + 1) * 32);
      for (size_t i = w * 32; i < end; ++i)
        if (!(bits >> (i - w * 32) & 1u)) work_[i] = kNegInf;
    }
  }
}

size_t Sampler::select_nucleus(double target) {
  auto more_likely = [&](int32_t a, int32_t b) {
    return work_[size_t(a)] > work_[size_t(b)] || (work_[size_t(a)] == work_[size_t(b)] && a < b);
  };
  // Quickselect by probability mass: ids_[0, lo) are in the nucleus, the cut lies in [lo, hi),
  // and the nucleus still needs `need` more mass from there.
  size_t lo = 0, hi = ids_.size();
  double need = target;
  while (hi - lo > 1) {
    int32_t a = ids_[lo], b = ids_[lo + (hi - lo) / 2], c = ids_[hi - 1];
    if (more_likely(b, a)) std::swap(a, b);
    if (more_likely(c, b)) std::swap(b, c);
    if (more_likely(b, a)) std::swap(a, b);
    const int32_t pivot = b;  // median of three
    auto first = ids_.begin() + ptrdiff_t(lo);
    const size_t mid = lo + size_t(std::partition(first, ids_.begin() + ptrdiff_t(hi),
                                                  [&](int32_t x) { return more_likely(x, pivot); }) - first);
    std::iter_swap(ids_.begin() + ptrdiff_t(mid), std::find(ids_.begin() + ptrdiff_t(mid), ids_.begin() + ptrdiff_t(hi), pivot));
    double upper = 0.0;
    for (size_t i = lo; i < mid; ++i) upper += work_[size_t(ids_[i])];
    if (upper >= need) {
      hi = mid;
    } else if (upper + work_[size_t(pivot)] >= need) {
      return mid + 1;
    } else {
      need -= upper + work_[size_t(pivot)];
      lo = mid + 1;
    }
  }
  return hi;
}

int32_t Sampler::draw(const SamplingParams& params, double u) {
  // Probabilities relative to the most likely token (which gets 1), in place. The maximum m is
  // finite or +inf (sample() takes the argmax when it is -inf, process() removed NaNs); tokens
  // equal to m get 1 so that an infinite m cannot make inf - inf.
  const float inv_t = 1.0f / params.temperature;  // finite: temperature >= kMinSamplingTemperature
  const float m = work_[size_t(argmax(work_))];
  const float p_min = params.min_p;  // relative to the most likely token's probability
  ids_.clear();
  for (size_t i = 0; i < work_.size(); ++i) {
    const float p = work_[i] == m ? 1.0f : std::exp((work_[i] - m) * inv_t);
    work_[i] = p;
    if (p > 0.0f && p >= p_min) ids_.push_back(int32_t(i));
  }
  auto more_likely = [&](int32_t a, int32_t b) {
    return work_[size_t(a)] > work_[size_t(b)] || (work_[size_t(a)] == work_[size_t(b)] && a < b);
  };
  // Candidates are cut without sorting: the draw walks them in whatever (deterministic) order
  // the selections leave.
  if (params.top_k > 0 && size_t(params.top_k) < ids_.size()) {
    std::nth_element(ids_.begin(), ids_.begin() + params.top_k, ids_.end(), more_likely);
    ids_.resize(size_t(params.top_k));
  }
  if (params.top_p < 1.0f) {
    double total = 0.0;
    for (int32_t id : ids_) total += work_[size_t(id)];
    ids_.resize(select_nucleus(double(params.top_p) * total));
  }
  double total = 0.0;
  for (int32_t id : ids_) total += work_[size_t(id)];
  const double r = u * total;
  double cum = 0.0;
  for (int32_t id : ids_) {
    cum += work_[size_t(id)];
    if (r < cum) return id;
  }
  DI_CHECK(!ids_.empty());  // the most likely token (p = 1 >= min_p) is always a candidate
  return ids_.back();
}

}  // namespace deepinfer
