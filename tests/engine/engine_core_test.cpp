// EngineCore against the fake model: outputs, stop conditions, forks, prefix caching, and batch
// invariance (bitwise) across batch composition, chunk size, preemption and cache warmth.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>


#include "engine/engine.h"
#include "engine_test_util.h"

namespace deepinfer::test {
namespace {

EngineOptions small_options() {
  EngineOptions o;
  o.block_size = 16;
  o.max_num_batched_tokens = 64;
  o.kv_cache_memory_bytes = size_t(4096) * 2 * 24;  // 4096 bf16 tokens of the fake model
  o.speculative_gate.measure_draft_cost = false;     // the gate's choices must not depend on timing
  return o;
}

Request greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

// n token ids counting up from `first`, wrapping within [2, 96).
std::vector<int32_t> range(int n, int first) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(int32_t(2 + (first + i) % 94));
  return v;
}

TEST(EngineCore, GreedyMatchesTheModelRunByHand) {
  FakeCausalLM model;
  auto core = make_core(model, small_options());
  std::vector<Request> reqs = {greedy({5}, 10), greedy(range(40, 2), 12), greedy(range(70, 3), 5)};
  const auto out = run_to_completion(*core, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(out[i].samples.size(), 1u);
    EXPECT_EQ(out[i].samples[0].token_ids, fake_greedy(reqs[i].prompt_token_ids, reqs[i].params.max_tokens, 96));
    EXPECT_EQ(out[i].samples[0].finish_reason, FinishReason::kLength);
    EXPECT_EQ(out[i].n_prompt_tokens, int(reqs[i].prompt_token_ids.size()));
  }
  EXPECT_GT(model.max_rows, 1) << "requests were batched together";
}

TEST(EngineCore, StopsAtEosStopTokensAndMaxTokens) {
  FakeCausalLM model;
  const auto prompt = range(20, 10);
  const auto free_run = fake_greedy(prompt, 30, 96);
  // Make the 4th generated token the eos of a second fake model, and stop at the 6th in a request.
  FakeCausalLM eos_model(96, 2, {free_run[3]});
  auto core = make_core(eos_model, small_options());
  Request stop_at_eos = greedy(prompt, 30);
  stop_at_eos.params.ignore_eos = false;
  Request ignore = greedy(prompt, 30);
  Request stop_token = greedy(prompt, 30);
  stop_token.params.stop_token_ids = {free_run[5]};
  const auto out = run_to_completion(*core, {stop_at_eos, ignore, stop_token});
  const size_t first_eos = size_t(std::find(free_run.begin(), free_run.end(), free_run[3]) - free_run.begin());
  EXPECT_EQ(out[0].samples[0].token_ids, std::vector<int32_t>(free_run.begin(), free_run.begin() + ptrdiff_t(first_eos) + 1));
  EXPECT_EQ(out[0].samples[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(out[1].samples[0].token_ids, free_run);
  EXPECT_EQ(out[1].samples[0].finish_reason, FinishReason::kLength);
  const size_t first_stop = size_t(std::find(free_run.begin(), free_run.end(), free_run[5]) - free_run.begin());
  EXPECT_EQ(out[2].samples[0].token_ids.size(), first_stop + 1);
  EXPECT_EQ(out[2].samples[0].finish_reason, FinishReason::kStop);
}

TEST(EngineCore, MinTokensDefersEos) {
  const auto prompt = range(20, 10);
  const auto free_run = fake_greedy(prompt, 2, 96);
  FakeCausalLM model(96, 2, {free_run[0]});
  auto core = make_core(model, small_options());
  Request r = greedy(prompt, 8);
  r.params.ignore_eos = false;
  r.params.min_tokens = 3;
  const auto out = run_to_completion(*core, {r});
  ASSERT_GE(out[0].samples[0].token_ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(out[0].samples[0].token_ids[i], free_run[0]);
}

TEST(EngineCore, ParallelSamplesShareThePromptAndDiffer) {
  FakeCausalLM model;
  auto core = make_core(model, small_options());
  Request r;
  r.prompt_token_ids = range(50, 4);
  r.params.n = 4;
  r.params.max_tokens = 16;
  r.params.seed = 7;
  r.params.ignore_eos = true;
  const auto out = run_to_completion(*core, {r});
  ASSERT_EQ(out[0].samples.size(), 4u);
  for (const auto& s : out[0].samples) EXPECT_EQ(s.token_ids.size(), 16u);
  EXPECT_NE(out[0].samples[0].token_ids, out[0].samples[1].token_ids);
  EXPECT_EQ(core->stats().n_computed_tokens, 50u + 4 * 15) << "the prompt ran once";
  EXPECT_EQ(core->stats().n_kv_blocks_free, core->stats().n_kv_blocks);
}

TEST(EngineCore, PrefixCacheServesASharedSystemPrompt) {
  FakeCausalLM model;
  auto core = make_core(model, small_options());
  const auto system = range(100, 2);
  auto turn = [&](int extra) {
    Request r = greedy(system, 4);
    for (int i = 0; i < extra; ++i) r.prompt_token_ids.push_back(int32_t(30 + i));
    return r;
  };
  const auto first = run_to_completion(*core, {turn(5)}, 0);
  EXPECT_EQ(first[0].n_cached_tokens, 0);
  const auto second = run_to_completion(*core, {turn(9)}, 1);
  EXPECT_EQ(second[0].n_cached_tokens, 96);
  EXPECT_EQ(second[0].samples[0].token_ids, fake_greedy(turn(9).prompt_token_ids, 4, 96));
  EXPECT_EQ(core->stats().n_prefix_hit_tokens, 96u);
  EXPECT_EQ(core->stats().n_prefix_query_tokens, 105u + 109u);
}

TEST(EngineCore, RejectsInvalidRequestsWithAMessage) {
  FakeCausalLM model;
  EngineOptions o = small_options();
  o.max_num_seqs = 4;
  auto core = make_core(model, o);
  auto message = [&](Request r) { return core->validate(r).message(); };
  EXPECT_NE(message(greedy({}, 4)).find("empty"), std::string::npos);
  EXPECT_NE(message(greedy({3, 96}, 4)).find("vocabulary"), std::string::npos);
  EXPECT_NE(message(greedy({3, -1}, 4)).find("vocabulary"), std::string::npos);
  EXPECT_NE(message(greedy(range(4095, 0), 4)).find("max model length"), std::string::npos);
  Request many = greedy({3}, 4);
  many.params.n = 5;
  EXPECT_NE(message(many).find("max-num-seqs"), std::string::npos);
  Request bad = greedy({3}, 4);
  bad.params.top_p = 2;
  EXPECT_NE(message(bad).find("top_p"), std::string::npos);
  EXPECT_TRUE(core->validate(greedy({3}, 4)).ok());
  EXPECT_EQ(core->max_model_len(), 4096);
}

TEST(EngineCore, AbortFinishesEverySampleAndFreesBlocks) {
  FakeCausalLM model;
  auto core = make_core(model, small_options());
  Request r = greedy(range(30, 2), 100);
  r.params.n = 3;
  r.params.temperature = 1;
  auto stream = std::make_shared<OutputStream>(3);
  core->add(0, r, stream, RequestTiming::Clock::now());
  core->step();
  core->step();
  core->abort(0);
  EXPECT_FALSE(core->has_work());
  EXPECT_EQ(core->stats().n_kv_blocks_free, core->stats().n_kv_blocks);
  const CompletedRequest done = RequestHandle(0, stream).wait();
  ASSERT_EQ(done.samples.size(), 3u);
  for (const auto& s : done.samples) {
    EXPECT_EQ(s.finish_reason, FinishReason::kAbort);
    EXPECT_EQ(s.token_ids.size(), 2u);
  }
  core->abort(0);  // unknown by now: ignored
}

// The heart of it: every request's ids and logprobs are bitwise the same alone, among many,
// at any chunk size, under preemption, and with its prefix from the cache.
TEST(EngineCore, OutputsAreBatchInvariant) {
  FakeCausalLM model;
  const auto requests = varied_requests(36, 11, 96);
  std::vector<CompletedRequest> reference;
  for (const Request& r : requests) reference.push_back(fake_reference(r, model));
  const auto alone = run_alone(model, small_options(), requests);
  expect_same_outputs(reference, alone, "alone vs reference");

  for (int chunk : {1, 7, 64}) {
    EngineOptions o = small_options();
    o.max_num_batched_tokens = chunk;
    auto core = make_core(model, o);
    const std::string what = "together, chunk " + std::to_string(chunk);
    expect_same_outputs(alone, run_to_completion(*core, requests), what.c_str());
    expect_same_outputs(alone, run_to_completion(*core, requests, 1000), (what + ", warm cache").c_str());
    EXPECT_GT(core->stats().n_prefix_hit_tokens, 0u);
  }
  {
    EngineOptions o = small_options();
    o.block_size = 8;
    o.kv_cache_memory_bytes = size_t(400) * 2 * 24;  // 400 tokens for ~36 sequences: preemption
    auto core = make_core(model, o);
    expect_same_outputs(alone, run_to_completion(*core, requests), "under preemption");
    EXPECT_GT(core->stats().n_preemptions, 0u);
  }
  {
    EngineOptions o = small_options();
    o.enable_prefix_caching = false;
    o.kv_cache_dtype = DType::F32;
    auto core = make_core(model, o);
    expect_same_outputs(alone, run_to_completion(*core, requests), "no prefix cache, f32 cache");
  }
}

// A model with a window kind beside the full one (as DeepSeek-V4 keeps its sliding window): the
// window's released blocks are never read (the fake model aborts if they are), and outputs stay
// bitwise those of the reference at any chunk, under preemption, from a warm prefix cache (which
// restores only the window's last blocks) and with speculative drafts rolled back.
TEST(EngineCore, OutputsAreBatchInvariantWithAWindowKind) {
  FakeCausalLM model(96, 2, {1}, 5);
  const auto requests = varied_requests(36, 11, 96);
  EngineOptions base = small_options();
  base.max_num_seqs = 48;
  base.kv_cache_memory_bytes = size_t(48 * 3 + 4) * 16 * 2 * 24 + size_t(4096) * 2 * 24;
  std::vector<CompletedRequest> reference;
  for (const Request& r : requests) reference.push_back(fake_reference(r, model));
  const auto alone = run_alone(model, base, requests);
  expect_same_outputs(reference, alone, "alone vs reference");
  for (int chunk : {1, 7, 64}) {
    EngineOptions o = base;
    o.max_num_batched_tokens = chunk;
    auto core = make_core(model, o);
    const std::string what = "window, chunk " + std::to_string(chunk);
    expect_same_outputs(alone, run_to_completion(*core, requests), what.c_str());
    expect_same_outputs(alone, run_to_completion(*core, requests, 1000), (what + ", warm cache").c_str());
    EXPECT_GT(core->stats().n_prefix_hit_tokens, 0u);
  }
  {
    EngineOptions o = base;
    o.block_size = 8;
    o.kv_cache_memory_bytes = size_t(800) * 2 * 24;  // 400 tokens of each kind for ~36 sequences: preemption
    auto core = make_core(model, o);
    expect_same_outputs(alone, run_to_completion(*core, requests), "window, under preemption");
    EXPECT_GT(core->stats().n_preemptions, 0u);
  }
  {
    EngineOptions o = base;
    o.speculative = SpeculativeMethod::kNgram;
    o.num_speculative_tokens = 3;
    o.speculative_max_batch = 64;
    auto core = make_core(model, o);
    expect_same_outputs(alone, run_to_completion(*core, requests), "window, ngram drafts");
    EXPECT_GT(core->stats().n_draft_tokens, core->stats().n_accepted_draft_tokens);  // rolled back
  }
}

// Speculative decoding with n-gram drafts is lossless by construction: ids, logprobs and finish
// reasons are bitwise those of plain decoding (the fake model's reference, and the plain engine),
// for greedy and seeded sampling alike, batched, chunked, under preemption and with the prefix
// cache warm. A 6-token vocabulary makes drafts right often, so runs of 1..k accepted drafts,
// drafts cut by max_tokens and stop tokens inside accepted runs all occur.
TEST(EngineCore, SpeculativeNgramDecodingGivesExactlyThePlainOutputs) {
  FakeCausalLM model(6);
  const auto requests = varied_requests(24, 17, 6);
  const auto alone = run_alone(model, small_options(), requests);
  for (const Request& r : requests) {
    if (r.params.n == 1) expect_same_outputs({fake_reference(r, model)}, run_alone(model, small_options(), {r}), "ref");
  }
  for (int k : {1, 2, 4}) {
    for (int chunk : {64, 7}) {
      EngineOptions o = small_options();
      o.speculative = SpeculativeMethod::kNgram;
      o.num_speculative_tokens = k;
      o.speculative_max_batch = 64;
      o.max_num_batched_tokens = chunk;
      auto core = make_core(model, o);
      const std::string what = "ngram k " + std::to_string(k) + ", chunk " + std::to_string(chunk);
      expect_same_outputs(alone, run_to_completion(*core, requests), what.c_str());
      expect_same_outputs(alone, run_to_completion(*core, requests, 1000), (what + ", warm cache").c_str());
      const EngineStats st = core->stats();
      EXPECT_GT(st.n_draft_tokens, 0u) << what;
      EXPECT_GT(st.n_accepted_draft_tokens, 0u) << what;
      EXPECT_LT(st.n_accepted_draft_tokens, st.n_draft_tokens) << what;
      uint64_t drafted = 0, accepted = 0;
      for (int j = 0; j < kMaxSpeculativeTokens; ++j) {  // a draft is accepted only after all before it
        EXPECT_LE(st.n_accepted_at[size_t(j)], st.n_drafts_at[size_t(j)]) << what;
        if (j > 0) {
          EXPECT_LE(st.n_accepted_at[size_t(j)], st.n_accepted_at[size_t(j - 1)]) << what;
        }
        if (j >= k) {
          EXPECT_EQ(st.n_drafts_at[size_t(j)], 0u) << what;
        }
        drafted += st.n_drafts_at[size_t(j)];
        accepted += st.n_accepted_at[size_t(j)];
      }
      EXPECT_EQ(drafted, st.n_draft_tokens) << what;
      EXPECT_EQ(accepted, st.n_accepted_draft_tokens) << what;
      EXPECT_LT(st.n_steps, 2 * (st.n_generated_tokens + 1)) << what;
    }
  }
  EngineOptions o = small_options();
  o.speculative = SpeculativeMethod::kNgram;
  o.speculative_max_batch = 64;
  o.block_size = 8;
  o.kv_cache_memory_bytes = size_t(400) * 2 * 24;  // preemption
  auto core = make_core(model, o);
  expect_same_outputs(alone, run_to_completion(*core, requests), "ngram under preemption");
  EXPECT_GT(core->stats().n_preemptions, 0u);
}

// The MTP path (SpeculativeMethod::kMtp through CausalLM::draft), with a model whose drafts are
// its own greedy continuation read back from the cache at the positions the engine's query names:
// every draft of a greedy request is accepted (k + 1 tokens a step), the outputs of greedy and
// sampled requests (n > 1 forks, stop tokens, max_tokens) are those of plain decoding, batched,
// chunked, from a warm cache and under preemption. A model that cannot draft refuses kMtp.
TEST(EngineCore, SpeculativeMtpDraftsFromTheModelAreVerifiedExactly) {
  FakeCausalLM model(6);
  const auto requests = varied_requests(24, 17, 6);
  const auto alone = run_alone(model, small_options(), requests);
  {
    EngineOptions o = small_options();
    o.speculative = SpeculativeMethod::kMtp;
    EXPECT_FALSE(EngineCore::create(model, o).ok());
  }
  model.drafting = true;
  std::vector<Request> greedy(1);
  greedy[0].prompt_token_ids = {2, 3, 4, 5};
  greedy[0].params.temperature = 0.0f;
  greedy[0].params.max_tokens = 40;
  greedy[0].params.ignore_eos = true;
  const auto greedy_alone = run_alone(model, small_options(), greedy);
  for (int k : {1, 2, 4}) {
    EngineOptions o = small_options();
    o.speculative = SpeculativeMethod::kMtp;
    o.num_speculative_tokens = k;
    o.speculative_max_batch = 64;
    const std::string what = "mtp k " + std::to_string(k);
    {
      auto core = make_core(model, o);
      expect_same_outputs(greedy_alone, run_to_completion(*core, greedy), (what + ", greedy").c_str());
      const EngineStats st = core->stats();
      EXPECT_GT(st.n_draft_tokens, 0u) << what;
      EXPECT_EQ(st.n_accepted_draft_tokens, st.n_draft_tokens) << what;
      // Prefill, the gate's ramp (k - 1 steps of fewer drafts), then k + 1 tokens a step.
      EXPECT_LE(st.n_steps, uint64_t(1 + (k - 1) + (39 + k) / (k + 1))) << what;
    }
    for (int chunk : {64, 7}) {
      o.max_num_batched_tokens = chunk;
      auto core = make_core(model, o);
      const std::string w = what + ", chunk " + std::to_string(chunk);
      expect_same_outputs(alone, run_to_completion(*core, requests), w.c_str());
      expect_same_outputs(alone, run_to_completion(*core, requests, 1000), (w + ", warm cache").c_str());
      const EngineStats st = core->stats();
      EXPECT_GT(st.n_accepted_draft_tokens, 0u) << w;
      EXPECT_LT(st.n_accepted_draft_tokens, st.n_draft_tokens) << w;  // sampled requests reject some
    }
  }
  EngineOptions o = small_options();
  o.speculative = SpeculativeMethod::kMtp;
  o.speculative_max_batch = 64;
  o.block_size = 8;
  o.kv_cache_memory_bytes = size_t(250) * 2 * 24;  // preemption
  const int64_t n_queries = model.n_draft_queries;
  auto core = make_core(model, o);
  expect_same_outputs(alone, run_to_completion(*core, requests), "mtp under preemption");
  EXPECT_GT(core->stats().n_preemptions, 0u);
  EXPECT_GT(model.n_draft_queries, n_queries);
  model.drafting = false;
}

// Distribution, checked statistically beside the bitwise tests: 4,000 seeded samples at
// temperature 1 from a prompt whose repeats make n-gram drafts frequent. The first sampled token
// follows the model's softmax (Pearson chi-square against the fake model's exact probabilities,
// 6 categories, df 5: critical value 20.52 at significance 0.001), plain and speculative alike; the
// pairs (first, second token), where drafts are verified, have the same histogram with and
// without speculation (two-sample chi-square over the pairs seen: df <= 35, critical value 66.62
// at 0.001); and a fixed seed repeats.
TEST(EngineCore, SpeculativeSamplingKeepsTheTargetDistribution) {
  FakeCausalLM model(6);
  const std::vector<int32_t> prompt = {2, 3, 4, 2, 3, 4, 2, 3};
  std::vector<Request> requests;
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    Request r;
    r.prompt_token_ids = prompt;
    r.params.temperature = 1.0f;
    r.params.seed = seed;
    r.params.max_tokens = 4;  // drafts cover the tokens after the first
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  EngineOptions o = small_options();
  o.max_num_seqs = 256;
  o.max_num_batched_tokens = 4096;
  const auto plain = run_to_completion(*make_core(model, o), requests);
  o.speculative = SpeculativeMethod::kNgram;
  o.num_speculative_tokens = 2;
  o.speculative_max_batch = 256;
  auto spec_core = make_core(model, o);
  const auto spec = run_to_completion(*spec_core, requests);
  EXPECT_GT(spec_core->stats().n_draft_tokens, 0u);

  std::vector<float> logits(6);
  FakeCausalLM::reference_logits(prompt, logits);
  std::vector<double> p(6);
  double sum = 0;
  for (int v = 0; v < 6; ++v) sum += p[size_t(v)] = std::exp(double(logits[size_t(v)]));
  for (const auto* run : {&plain, &spec}) {
    std::vector<double> count(6, 0);
    for (const CompletedRequest& c : *run) ++count[size_t(c.samples[0].token_ids[0])];
    double chi2 = 0;
    for (int v = 0; v < 6; ++v) {
      const double expected = 4000 * p[size_t(v)] / sum;
      chi2 += (count[size_t(v)] - expected) * (count[size_t(v)] - expected) / expected;
    }
    EXPECT_LT(chi2, 20.52) << (run == &plain ? "plain" : "speculative");
  }
  std::map<std::pair<int32_t, int32_t>, std::pair<double, double>> pairs;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& a = plain[i].samples[0].token_ids;
    const auto& b = spec[i].samples[0].token_ids;
    ++pairs[{a[0], a[1]}].first;
    ++pairs[{b[0], b[1]}].second;
  }
  double chi2 = 0;
  for (const auto& [pair, n] : pairs) chi2 += (n.first - n.second) * (n.first - n.second) / (n.first + n.second);
  EXPECT_LT(chi2, 66.62);
  const auto again = run_to_completion(*make_core(model, o), {requests[7], requests[3]});
  EXPECT_EQ(again[0].samples[0].token_ids, spec[7].samples[0].token_ids);
  EXPECT_EQ(again[1].samples[0].token_ids, spec[3].samples[0].token_ids);
}

// A draft that is always right (the model repeats a cycle the prompt already shows) is accepted
// whole: after the gate's ramp (1, 2, ... drafts) k + 1 tokens per step, and the same tokens as
// plain decoding.
TEST(EngineCore, AlwaysRightDraftsGiveKPlusOneTokensPerStep) {
  FakeCausalLM model(16);
  model.cycle = 5;
  Request r = greedy({2, 3, 4, 5, 6, 2, 3, 4, 5, 6, 2}, 40);
  const auto plain = run_alone(model, small_options(), {r});
  EXPECT_EQ(plain[0].samples[0].token_ids[0], 3);
  for (int k : {1, 3, 4}) {
    EngineOptions o = small_options();
    o.speculative = SpeculativeMethod::kNgram;
    o.num_speculative_tokens = k;
    auto core = make_core(model, o);
    expect_same_outputs(plain, run_to_completion(*core, {r}), "always right");
    const EngineStats st = core->stats();
    EXPECT_EQ(st.n_accepted_draft_tokens, st.n_draft_tokens) << k;
    EXPECT_EQ(st.n_accepted_at, st.n_drafts_at) << k;  // every position accepts
    EXPECT_GT(st.n_drafts_at[size_t(k - 1)], 0u) << k;
    EXPECT_EQ(st.n_drafts_at[size_t(k)], 0u) << k;
    // 1 prefill step, then decode steps of 1 + L tokens: L = 1, 2, .., k, k, ... (all accepted),
    // at most what max_tokens leaves after the step's own token.
    uint64_t n_decode_steps = 0;
    for (int n_out = 1, length = 1; n_out < 40; ++n_decode_steps) {
      const int n_drafts = std::min({length, k, 40 - n_out - 1});
      n_out += 1 + n_drafts;
      if (n_drafts > 0) length = n_drafts + 1;
    }
    EXPECT_LE(n_decode_steps, uint64_t(k - 1) + (39 + uint64_t(k)) / uint64_t(k + 1)) << k;
    EXPECT_EQ(st.n_steps, 1 + n_decode_steps) << k;
  }
}

// A drafter that is never right (the fake model's drafts_wrong: the MTP path) stops drafting for
// each sequence after the gate's window (fixed-length gate) or after its first rejected steps
// (adaptive gate, 1 draft each), then only probes once every probe_interval + 1 decode steps: that
// bounds the steps that pay verification; a later request starts paused. Outputs stay those of
// plain decoding; with the gate off (min_acceptance 0) every decode step drafts.
TEST(EngineCore, AlwaysWrongDraftsStopAfterTheWindow) {
  FakeCausalLM model;
  model.drafting = true;
  model.drafts_wrong = true;
  const int n_out = 150, n_seqs = 4;
  std::vector<Request> requests;
  for (int i = 0; i < n_seqs; ++i) requests.push_back(greedy(range(10 + i, 3 * i), n_out));
  const auto plain = run_to_completion(*make_core(model, small_options()), requests);
  EngineOptions o = small_options();
  o.speculative = SpeculativeMethod::kMtp;
  o.num_speculative_tokens = 3;
  o.speculative_gate = {6, 0.4, 32, false, 2, false};
  auto core = make_core(model, o);
  expect_same_outputs(plain, run_to_completion(*core, requests), "always-wrong drafts, gated");
  EngineStats st = core->stats();
  EXPECT_EQ(st.n_accepted_draft_tokens, 0u);
  // Per sequence, n_out - 2 decode steps could draft (the last one has no room left): the window
  // drafts, then one probe per probe_interval + 1 steps. A drafted step has a first draft.
  const int n_could = n_out - 2, per_seq = 6 + (n_could - 6) / (32 + 1);
  EXPECT_EQ(st.n_drafts_at[0], uint64_t(n_seqs * per_seq));
  EXPECT_EQ(st.n_draft_paused_steps + st.n_drafts_at[0], uint64_t(n_seqs * n_could));
  // A request after them starts paused (the server's recent drafts are all rejected): probes only.
  run_to_completion(*core, {requests[0]}, 100);
  EXPECT_EQ(core->stats().n_drafts_at[0] - st.n_drafts_at[0], uint64_t(n_could / (32 + 1)));

  // Adaptive: a sequence drafts 1 token on its first steps (2 at most: 1 once another sequence's
  // rejection is on record), then probes of 1 token.
  o.speculative_gate = {6, 0.4, 32, true, 2, false};
  core = make_core(model, o);
  expect_same_outputs(plain, run_to_completion(*core, requests), "always-wrong drafts, adaptive gate");
  st = core->stats();
  EXPECT_EQ(st.n_accepted_draft_tokens, 0u);
  EXPECT_EQ(st.n_drafts_at[1], 0u);
  EXPECT_EQ(st.n_draft_tokens, st.n_drafts_at[0]);
  EXPECT_GE(st.n_drafts_at[0], uint64_t(n_seqs * (1 + (n_could - 2) / (32 + 1))));
  EXPECT_LE(st.n_drafts_at[0], uint64_t(n_seqs * (2 + (n_could - 1) / (32 + 1))));
  EXPECT_EQ(st.n_draft_paused_steps + st.n_drafts_at[0], uint64_t(n_seqs * n_could));
  run_to_completion(*core, {requests[0]}, 100);
  EXPECT_EQ(core->stats().n_drafts_at[0] - st.n_drafts_at[0], uint64_t(n_could / (32 + 1)));

  o.speculative_gate.min_acceptance = 0;
  core = make_core(model, o);
  expect_same_outputs(plain, run_to_completion(*core, requests), "always-wrong drafts, ungated");
  st = core->stats();
  EXPECT_EQ(st.n_drafts_at[0], uint64_t(n_seqs * n_could));
  EXPECT_EQ(st.n_draft_paused_steps, 0u);
  model.drafting = false;
}

// The gate switching drafts on and off and varying their length (a demanding threshold, short
// pauses; adaptive and fixed-length) changes only which positions are drafted: n-gram drafts on
// the varied workload, sampled and greedy, batched, in steps of 64 and 24 tokens, give bitwise
// the outputs of plain decoding.
TEST(EngineCore, GatedDraftingGivesExactlyThePlainOutputs) {
  FakeCausalLM model(6);
  const auto requests = varied_requests(24, 23, 6);
  const auto alone = run_alone(model, small_options(), requests);
  for (int chunk : {64, 24}) for (bool adaptive : {true, false}) {
    EngineOptions o = small_options();
    o.speculative = SpeculativeMethod::kNgram;
    o.num_speculative_tokens = 3;
    o.speculative_max_batch = 64;
    o.speculative_gate = {adaptive ? 4 : 2, adaptive ? 0.2 : 0.9, adaptive ? 2 : 3, adaptive, 2, false};
    o.max_num_batched_tokens = chunk;
    auto core = make_core(model, o);
    const std::string what = "gated ngram, chunk " + std::to_string(chunk) + (adaptive ? ", adaptive" : "");
    expect_same_outputs(alone, run_to_completion(*core, requests), what.c_str());
    const EngineStats st = core->stats();
    EXPECT_GT(st.n_accepted_draft_tokens, 0u) << what;
    EXPECT_GT(st.n_draft_paused_steps, 0u) << what;
    EXPECT_GT(st.n_drafts_at[1], 0u) << what;  // adaptive: some steps grew past 1 draft
  }
}

// Above speculative_max_batch decoding sequences no step drafts (verification would cost more
// than it saves once a step is no longer bound by reading the weights).
TEST(EngineCore, NoDraftsAboveTheSpeculativeBatchLimit) {
  FakeCausalLM model(6);
  const auto requests = varied_requests(12, 3, 6);
  EngineOptions o = small_options();
  o.speculative = SpeculativeMethod::kNgram;
  o.speculative_max_batch = 0;  // never few enough
  auto core = make_core(model, o);
  run_to_completion(*core, requests);
  EXPECT_EQ(core->stats().n_draft_tokens, 0u);
}

TEST(EngineCore, OutputsAreBatchInvariantAmong255Others) {
  FakeCausalLM model;
  const auto probes = varied_requests(6, 5, 96);
  auto fillers = varied_requests(250, 99, 96);
  std::vector<Request> all = probes;
  all.insert(all.end(), fillers.begin(), fillers.end());
  for (auto& r : all) r.params.n = 1;
  std::vector<Request> probes_n1(all.begin(), all.begin() + 6);
  const auto alone = run_alone(model, small_options(), probes_n1);
  EngineOptions o = small_options();
  o.max_num_batched_tokens = 512;
  o.kv_cache_memory_bytes = size_t(60000) * 2 * 24;
  auto core = make_core(model, o);
  auto together = run_to_completion(*core, all);
  together.resize(6);
  expect_same_outputs(alone, together, "among 255 others");
  EXPECT_GE(model.max_rows, 256);
}

}  // namespace
}  // namespace deepinfer::test
