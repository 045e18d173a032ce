// Structured output in the engine: the Sampler under an allowed-token mask, and EngineCore with
// grammar constraints (SequenceGrammars) on the fake model: outputs inside the grammar at
// temperature 1, end only where the grammar accepts, finish reasons, n > 1, batch invariance,
// speculative drafts verified under the mask, the constraint starting after reasoning, and masks
// overlapped with the forward pass giving the same tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/sampler.h"
#include "engine/sequence_grammars.h"
#include "engine_test_util.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/token_vocabulary.h"

namespace deepinfer::test {
namespace {

constexpr int kVocab = 96;
constexpr int32_t kEos = 1;
constexpr int32_t kHash = 47;  // "#": outside every grammar below

// The fake model's 96 ids as text: 0 has no bytes, 1 is the end id, then digits, letters,
// punctuation and a few multi-byte tokens.
std::vector<std::string> token_bytes() {
  std::vector<std::string> t(kVocab);
  for (int d = 0; d < 10; ++d) t[size_t(2 + d)] = std::string(1, char('0' + d));
  for (int c = 0; c < 26; ++c) t[size_t(12 + c)] = std::string(1, char('a' + c));
  const char* punct[] = {"{", "}", "\"", ":", ",", " ", "[", "]", "-", "#"};
  for (int i = 0; i < 10; ++i) t[size_t(38 + i)] = punct[i];
  const char* multi[] = {"ab", "abc", "12", "00", "-1", "ba", "ca", "cab", "a-", "b-", "9-", "x"};
  int id = 48;
  for (const char* m : multi) t[size_t(id++)] = m;
  for (; id < kVocab; ++id) t[size_t(id)] = std::string(1, char('a' + id % 3)) + char('0' + id % 10);
  return t;
}

std::shared_ptr<const grammar::TokenVocabulary> vocabulary() {
  static const auto v = std::make_shared<const grammar::TokenVocabulary>(token_bytes(), std::vector<int32_t>{kEos});
  return v;
}

std::shared_ptr<const GrammarConstraint> regex_constraint(const std::string& pattern, int32_t start_after = -1) {
  auto g = grammar::CompiledGrammar::FromRegex(pattern);
  EXPECT_TRUE(g.ok()) << g.status().message();
  auto c = std::make_shared<GrammarConstraint>();
  c->masks = std::make_shared<grammar::GrammarMaskCache>(g.value(), vocabulary());
  c->start_after_token = start_after;
  return c;
}

std::string text_of(const std::vector<int32_t>& ids) {
  const auto bytes = token_bytes();
  std::string s;
  for (int32_t id : ids) s += bytes[size_t(id)];
  return s;
}

Request sampled(std::vector<int32_t> prompt, int max_tokens, uint64_t seed, int n = 1) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 1.0f;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  r.params.n = n;
  return r;
}

EngineOptions options() {
  EngineOptions o;
  o.block_size = 16;
  o.max_num_batched_tokens = 64;
  o.kv_cache_memory_bytes = size_t(4096) * 2 * 24;
  return o;
}

// Every sample ended by the grammar (stop) with text the pattern matches whole; an end id, if
// any, only as its last token.
void expect_in_grammar(const CompletedRequest& out, const std::string& pattern) {
  for (const CompletedSample& s : out.samples) {
    EXPECT_EQ(s.finish_reason, FinishReason::kStop);
    std::vector<int32_t> ids = s.token_ids;
    if (!ids.empty() && ids.back() == kEos) ids.pop_back();
    for (int32_t id : ids) EXPECT_NE(id, kEos);
    EXPECT_TRUE(std::regex_match(text_of(ids), std::regex(pattern))) << pattern << " vs '" << text_of(ids) << "'";
  }
}

TEST(SamplerMask, DisallowedTokensAreNeverDrawnAndLogprobsStayRaw) {
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[size_t(i)] = float(i % 7) * 0.5f;
  logits[90] = 20.0f;  // by far the likeliest, and disallowed
  std::vector<uint32_t> mask((kVocab + 31) / 32, 0u);
  for (int32_t id : {3, 10, 44, 70}) mask[size_t(id / 32)] |= 1u << (id % 32);
  Sampler sampler(kVocab);
  SamplingParams p;
  p.logprobs = true;
  const std::vector<int32_t> tokens = {5, 6};
  std::vector<int> seen(kVocab, 0);
  double sum_exp = 0;  // raw logprobs: the softmax of the unmasked row (max 20)
  for (float v : logits) sum_exp += std::exp(double(v) - 20.0);
  const double lse = 20.0 + std::log(sum_exp);
  for (int i = 0; i < 400; ++i) {
    const SampledToken t = sampler.sample(logits, p, tokens, 2, std::vector<int32_t>{kEos}, uint64_t(i), 0, mask);
    ASSERT_TRUE(mask_allows(mask, t.token)) << t.token;
    ++seen[size_t(t.token)];
    const SampledToken raw = sampler.sample(logits, p, tokens, 2, std::vector<int32_t>{kEos}, uint64_t(i), 0);
    EXPECT_NEAR(t.logprob, double(logits[size_t(t.token)]) - lse, 1e-4);
    EXPECT_EQ(raw.token, 90);
  }
  for (int32_t id : {3, 10, 44, 70}) EXPECT_GT(seen[size_t(id)], 0) << id;  // the mask cuts, it does not pick
  p.temperature = 0;
  // Greedy: the allowed token with the highest logit, the lowest id among equals.
  const SampledToken g = sampler.sample(logits, p, tokens, 2, std::vector<int32_t>{kEos}, 0, 0, mask);
  int32_t best = -1;
  for (int32_t id : {3, 10, 44, 70})
    if (best < 0 || logits[size_t(id)] > logits[size_t(best)]) best = id;
  EXPECT_EQ(g.token, best);
}

// min_tokens bans the end id, the grammar allows only the end id: the grammar wins.
TEST(SamplerMask, GrammarWinsWhenProcessingLeavesNoAllowedToken) {
  std::vector<float> logits(kVocab, 0.0f);
  std::vector<uint32_t> mask((kVocab + 31) / 32, 0u);
  mask[0] = 1u << kEos;
  Sampler sampler(kVocab);
  SamplingParams p;
  p.min_tokens = 10;
  const std::vector<int32_t> tokens = {5};
  EXPECT_EQ(sampler.sample(logits, p, tokens, 1, std::vector<int32_t>{kEos}, 7, 0, mask).token, kEos);
}

TEST(EngineGrammar, SampledOutputsStayInsideTheGrammarAndEndByIt) {
  FakeCausalLM model(kVocab);
  const std::string pattern = "[a-c]{1,4}-[0-9]{1,3}";
  std::vector<Request> requests;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    Request r = sampled({int32_t(2 + seed), 20, 30}, 40, seed, seed % 3 == 0 ? 3 : 1);
    r.params.constraint = regex_constraint(pattern);
    r.params.logprobs = seed % 2 == 0;
    requests.push_back(std::move(r));
  }
  const auto alone = run_alone(model, options(), requests);
  for (const auto& out : alone) expect_in_grammar(out, pattern);
  // The n samples of a request diverge (each has its own matcher).
  EXPECT_NE(alone[0].samples[0].token_ids, alone[0].samples[1].token_ids);

  // Neighbours (unconstrained requests of every kind) change nothing.
  std::vector<Request> mixed = varied_requests(18, 5, kVocab);
  mixed.insert(mixed.begin() + 3, requests.begin(), requests.end());
  auto core = make_core(model, options());
  const auto together = run_to_completion(*core, mixed);
  expect_same_outputs(alone, std::vector<CompletedRequest>(together.begin() + 3, together.begin() + 3 + 12),
                      "constrained, batched with unconstrained requests");
  expect_same_outputs(run_alone(model, options(), varied_requests(18, 5, kVocab)),
                      [&] {
                        std::vector<CompletedRequest> v(together.begin(), together.begin() + 3);
                        v.insert(v.end(), together.begin() + 15, together.end());
                        return v;
                      }(),
                      "unconstrained, batched with constrained requests");
}

// An unbounded pattern: the model ends only where the grammar accepts; past max_tokens it is
// cut with finish_reason length, never ended by an end id in the middle of the pattern.
TEST(EngineGrammar, MaxTokensCutsWithLengthAndEndIdsComeOnlyWhereTheGrammarAccepts) {
  FakeCausalLM model(kVocab);
  Request r = sampled({4, 5, 6}, 5, 3, 4);
  r.params.constraint = regex_constraint("[a-z]{30}");
  const auto cut = run_alone(model, options(), {r});
  for (const CompletedSample& s : cut[0].samples) {
    EXPECT_EQ(s.finish_reason, FinishReason::kLength);
    ASSERT_EQ(s.token_ids.size(), 5u);
    EXPECT_TRUE(std::regex_match(text_of(s.token_ids), std::regex("[a-z]{5,15}"))) << text_of(s.token_ids);
  }
  // ignore_eos does not let a constrained sequence run past its grammar's end.
  Request short_one = sampled({4, 5, 6}, 30, 9);
  short_one.params.constraint = regex_constraint("(ab|c){1,2}");
  short_one.params.ignore_eos = true;
  expect_in_grammar(run_alone(model, options(), {short_one})[0], "(ab|c){1,2}");
}

// Drafts are verified under the mask: outputs are those of plain decoding, and right drafts
// (a model that cycles through digits, a grammar of digits) are accepted.
TEST(EngineGrammar, SpeculativeDraftsAreVerifiedUnderTheMask) {
  FakeCausalLM model(kVocab);
  model.cycle = 5;  // greedy: 2 + (t - 1) % 5, the digits 0-4
  Request cyc;
  cyc.prompt_token_ids = {2, 3, 4, 5, 6, 2, 3, 4, 5, 6, 2};
  cyc.params.temperature = 0;
  cyc.params.max_tokens = 60;
  cyc.params.constraint = regex_constraint("[0-9]{1,40}");
  std::vector<Request> requests = {cyc};
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Request r = sampled({int32_t(10 + seed), 3, 3}, 30, seed, seed == 2 ? 2 : 1);
    r.params.constraint = regex_constraint("[a-c0-9]{2,12}x|[0-9-]+");
    requests.push_back(std::move(r));
  }
  const auto plain = run_alone(model, options(), requests);
  ASSERT_EQ(plain[0].samples[0].token_ids.size(), 40u);
  EXPECT_EQ(plain[0].samples[0].finish_reason, FinishReason::kStop);
  EngineOptions o = options();
  o.speculative = SpeculativeMethod::kNgram;
  o.num_speculative_tokens = 3;
  o.speculative_max_batch = 64;
  auto core = make_core(model, o);
  expect_same_outputs(plain, run_to_completion(*core, requests), "ngram drafts under a grammar");
  EXPECT_GT(core->stats().n_accepted_draft_tokens, 0u);
}

// A reasoning model's constraint starts after the token that closes its reasoning: the first
// token (forced by logit_bias, and outside the grammar) is sampled freely, the rest obey.
TEST(EngineGrammar, TheConstraintStartsAfterTheReasoningEnds) {
  FakeCausalLM model(kVocab);
  Request r = sampled({7, 8}, 30, 11, 2);
  r.params.logit_bias = {{kHash, 100.0f}};
  r.params.constraint = regex_constraint("[a-c]{2,6}", kHash);
  const auto reasoned = run_alone(model, options(), {r});
  for (const CompletedSample& s : reasoned[0].samples) {
    ASSERT_GE(s.token_ids.size(), 2u);
    EXPECT_EQ(s.token_ids[0], kHash);
    CompletedRequest rest;
    rest.samples.push_back({std::vector<int32_t>(s.token_ids.begin() + 1, s.token_ids.end()), {}, s.finish_reason});
    expect_in_grammar(rest, "[a-c]{2,6}");
  }
  // Without the reasoning start the forced token is out of the grammar and never drawn.
  r.params.constraint = regex_constraint("[a-c]{2,6}");
  expect_in_grammar(run_alone(model, options(), {r})[0], "[a-c]{2,6}");
}

// A sequence whose grammar work passes its time budget finishes with an error; within the
// budget the same sampling goes on.
TEST(SequenceGrammars, ASequencePastItsTimeBudgetFinishesWithAnError) {
  Sampler sampler(kVocab);
  SamplingParams p;
  const std::vector<float> logits(kVocab, 0.0f);
  const std::vector<int32_t> tokens = {5, 6};
  const std::vector<int32_t> eos = {kEos};
  const auto constraint = regex_constraint("[a-c]{1,20}");
  SequenceGrammars spent({0.0, 0.0});
  spent.add(7, constraint);
  const SampledToken cut = spent.sample(sampler, 7, logits, p, tokens, 2, eos, 1, 0);
  EXPECT_EQ(cut.grammar_finish, FinishReason::kError);
  SequenceGrammars roomy({10.0, 0.0});
  roomy.add(7, constraint);
  const SampledToken kept = roomy.sample(sampler, 7, logits, p, tokens, 2, eos, 1, 0);
  EXPECT_EQ(kept.grammar_finish, FinishReason::kNone);
  EXPECT_TRUE(std::regex_match(text_of({kept.token}), std::regex("[a-c]+"))) << kept.token;
}

// Masks computed during the forward pass (the default) give the tokens of masks computed before
// sampling: n > 1, drafts, reasoning and unconstrained neighbours alike.
TEST(EngineGrammar, OverlappedMasksGiveTheSameTokens) {
  FakeCausalLM model(kVocab);
  const auto requests = [](bool overlap) {
    std::vector<Request> out = varied_requests(4, 9, kVocab);
    for (uint64_t seed = 0; seed < 8; ++seed) {
      Request r = sampled({int32_t(2 + seed), 20, 30}, 30, seed, seed % 3 == 0 ? 3 : 1);
      auto c = std::make_shared<GrammarConstraint>(
          *regex_constraint(seed % 2 ? "[a-c]{1,4}-[0-9]{1,3}" : "[a-c0-9]{2,12}x|[0-9-]+", seed == 5 ? 14 : -1));
      c->overlap_masks = overlap;
      r.params.constraint = c;
      out.push_back(std::move(r));
    }
    return out;
  };
  for (SpeculativeMethod method : {SpeculativeMethod::kNone, SpeculativeMethod::kNgram}) {
    EngineOptions o = options();
    o.speculative = method;
    o.num_speculative_tokens = 2;
    o.speculative_max_batch = 64;
    auto before = make_core(model, o), during = make_core(model, o);
    expect_same_outputs(run_to_completion(*before, requests(false)), run_to_completion(*during, requests(true)),
                        "masks overlapped with the forward pass");
  }
  // SequenceGrammars takes the prefetched mask.
  Sampler sampler(kVocab);
  SamplingParams p;
  p.temperature = 1.0f;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[size_t(i)] = float(i % 7) * 0.3f;
  const std::vector<int32_t> eos = {kEos};
  SequenceGrammars plain, overlapped;
  plain.add(3, regex_constraint("[a-c]{1,6}"));
  overlapped.add(3, regex_constraint("[a-c]{1,6}"));
  std::vector<int32_t> tokens = {5, 6};
  for (int step = 0; step < 4; ++step) {
    const std::vector<int64_t> ids = {3};
    overlapped.prefetch_masks(ids);
    overlapped.join_masks();
    const SampledToken a = plain.sample(sampler, 3, logits, p, tokens, 2, eos, 11, 0);
    const SampledToken b = overlapped.sample(sampler, 3, logits, p, tokens, 2, eos, 11, 0);
    EXPECT_EQ(a.token, b.token);
    tokens.push_back(a.token);
  }
  EXPECT_EQ(overlapped.n_masks_overlapped(), 4u);
  EXPECT_EQ(plain.n_masks_overlapped(), 0u);
}

TEST(EngineGrammar, ValidateRefusesAConstraintOverALargerVocabulary) {
  FakeCausalLM model(64);
  auto core = make_core(model, options());
  Request r = sampled({3, 4}, 5, 1);
  r.params.constraint = regex_constraint("a+");
  const Status s = core->validate(r);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.field(), "constraint");
}

}  // namespace
}  // namespace deepinfer::test
