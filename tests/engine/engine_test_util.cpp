#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/engine.h"
#include "engine/sampler.h"

namespace deepinfer::test {

std::unique_ptr<EngineCore> make_core(CausalLM& model, const EngineOptions& options) {
  auto core = EngineCore::create(model, options);
  EXPECT_TRUE(core.ok()) << core.status().message();
  return std::move(core).value();
}

std::vector<CompletedRequest> run_to_completion(EngineCore& core, const std::vector<Request>& requests,
                                                uint64_t first_id) {
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Status s = core.validate(requests[i]);
    EXPECT_TRUE(s.ok()) << s.message();
    auto stream = std::make_shared<OutputStream>(requests[i].params.n);
    core.add(first_id + i, requests[i], stream, RequestTiming::Clock::now());
    handles.emplace_back(first_id + i, stream);
  }
  while (core.has_work()) core.step();
  std::vector<CompletedRequest> out;
  for (auto& h : handles) out.push_back(h.wait());
  return out;
}

std::vector<CompletedRequest> run_alone(CausalLM& model, const EngineOptions& options, const std::vector<Request>& requests) {
  std::vector<CompletedRequest> out;
  for (const Request& r : requests) {
    auto core = make_core(model, options);
    out.push_back(run_to_completion(*core, {r}).front());
  }
  return out;
}

std::vector<Request> varied_requests(int n, uint32_t seed, int vocab_size) {
  std::mt19937 rng(seed);
  auto token = [&] { return int32_t(2 + rng() % uint32_t(vocab_size - 2)); };
  std::vector<std::vector<int32_t>> systems(3);
  for (auto& s : systems) {
    for (int i = 40 + int(rng() % 90); i > 0; --i) s.push_back(token());
  }
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    if (rng() % 3 != 0) r.prompt_token_ids = systems[rng() % systems.size()];
    for (int k = 1 + int(rng() % 40); k > 0; --k) r.prompt_token_ids.push_back(token());
    SamplingParams& p = r.params;
    p.max_tokens = 1 + int(rng() % 24);
    p.seed = rng();
    switch (i % 6) {
      case 0: p.temperature = 0; break;
      case 1: p.temperature = 0.8f; p.top_p = 0.9f; p.top_k = 20; break;
      case 2: p.temperature = 1.2f; p.min_p = 0.05f; p.repetition_penalty = 1.3f; break;
      case 3: p.temperature = 1.0f; p.presence_penalty = 0.5f; p.frequency_penalty = 0.3f; p.logit_bias = {{5, 3.0f}}; break;
      case 4: p.temperature = 0.7f; p.n = 2 + int(rng() % 2); break;
      case 5: p.temperature = 0; p.stop_token_ids = {token(), token()}; p.min_tokens = std::min(3, p.max_tokens); break;
    }
    p.logprobs = rng() % 2 == 0;
    p.top_logprobs = rng() % 3 == 0 ? 5 : 0;
    p.ignore_eos = rng() % 4 == 0;
    out.push_back(std::move(r));
  }
  return out;
}

void expect_same_outputs(const std::vector<CompletedRequest>& expected, const std::vector<CompletedRequest>& actual,
                         const char* what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& e = expected[i].samples;
    const auto& a = actual[i].samples;
    ASSERT_EQ(e.size(), a.size()) << what << ": request " << i;
    for (size_t s = 0; s < e.size(); ++s) {
      EXPECT_EQ(e[s].token_ids, a[s].token_ids) << what << ": request " << i << " sample " << s;
      EXPECT_EQ(e[s].finish_reason, a[s].finish_reason) << what << ": request " << i << " sample " << s;
      ASSERT_EQ(e[s].logprobs.size(), a[s].logprobs.size()) << what;
      for (size_t t = 0; t < e[s].logprobs.size(); ++t) {
        EXPECT_EQ(std::memcmp(&e[s].logprobs[t].logprob, &a[s].logprobs[t].logprob, sizeof(float)), 0) << what;
        ASSERT_EQ(e[s].logprobs[t].top.size(), a[s].logprobs[t].top.size()) << what;
        for (size_t k = 0; k < e[s].logprobs[t].top.size(); ++k) {
          EXPECT_EQ(e[s].logprobs[t].top[k].token, a[s].logprobs[t].top[k].token) << what;
          EXPECT_EQ(std::memcmp(&e[s].logprobs[t].top[k].logprob, &a[s].logprobs[t].top[k].logprob, sizeof(float)), 0)
              << what;
        }
      }
    }
  }
}

CompletedRequest fake_reference(const Request& request, const FakeCausalLM& model) {
  const SamplingParams& p = request.params;
  const auto& eos = model.info().eos_token_ids;
  Sampler sampler(model.info().vocab_size);
  std::vector<float> logits(static_cast<size_t>(model.info().vocab_size));
  CompletedRequest done;
  done.samples.resize(size_t(p.n));
  const int n_prompt = int(request.prompt_token_ids.size());
  for (int i = 0; i < p.n; ++i) {
    std::vector<int32_t> seq = request.prompt_token_ids;
    CompletedSample& s = done.samples[size_t(i)];
    while (s.finish_reason == FinishReason::kNone) {
      FakeCausalLM::reference_logits(seq, logits);
      SampledToken t = sampler.sample(logits, p, seq, n_prompt, eos, p.seed.value(), i);
      seq.push_back(t.token);
      s.token_ids.push_back(t.token);
      if (p.wants_logprobs()) s.logprobs.push_back({t.logprob, t.top});
      const bool is_eos = std::find(eos.begin(), eos.end(), t.token) != eos.end();
      const bool is_stop = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t.token) != p.stop_token_ids.end();
      if ((is_eos && !p.ignore_eos) || is_stop) {
        s.finish_reason = FinishReason::kStop;
      } else if (int(s.token_ids.size()) == p.max_tokens) {
        s.finish_reason = FinishReason::kLength;
      }
    }
  }
  return done;
}

std::vector<int32_t> fake_greedy(std::vector<int32_t> prompt, int n_tokens, int vocab_size) {
  std::vector<float> logits(static_cast<size_t>(vocab_size));
  std::vector<int32_t> out;
  for (int i = 0; i < n_tokens; ++i) {
    FakeCausalLM::reference_logits(prompt, logits);
    out.push_back(argmax(logits));
    prompt.push_back(out.back());
  }
  return out;
}

}  // namespace deepinfer::test
