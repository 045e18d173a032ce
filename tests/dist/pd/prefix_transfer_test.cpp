// The engine hooks of prefill/decode disaggregation (engine/prefix_transfer.h) on the fake model,
// with and without a lookback kind: a prompt's leading blocks computed by one EngineCore, copied
// byte for byte into another's reserved blocks and imported, give bitwise the outputs of one
// engine computing everything, through the ordinary prefix-hit path; every pool ends idle.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "fake_causal_lm.h"

namespace deepinfer::test {
namespace {

constexpr int kBlock = 8;

EngineOptions options() {
  EngineOptions o;
  o.block_size = kBlock;
  o.max_num_batched_tokens = 24;  // prompts run in several chunks
  o.kv_cache_memory_bytes = size_t(1024) * 2 * 24 * 2;
  return o;
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(int32_t(2 + (i * 7 + salt) % 90));
  return v;
}

Request sampled(std::vector<int32_t> tokens, int max_tokens) {
  Request r;
  r.prompt_token_ids = std::move(tokens);
  r.params.temperature = 0.8f;
  r.params.seed = 1234;
  r.params.n = 2;
  r.params.logprobs = true;
  r.params.top_logprobs = 2;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

void run(EngineCore& core) {
  while (core.has_work()) core.step();
}

void copy_block(const EngineCore& from, int32_t src, EngineCore& to, int32_t dst, uint32_t kind) {
  const KvKindView& a = from.kv_cache_view().kinds[kind];
  const KvKindView& b = to.kv_cache_view().kinds[kind];
  ASSERT_EQ(a.bytes_per_block, b.bytes_per_block);
  for (size_t s = 0; s < a.slab_base.size(); ++s) std::memcpy(b.block(int(s), dst), a.block(int(s), src), a.bytes_per_block);
}

void expect_idle(const EngineCore& core) {
  const EngineStats s = core.stats();
  EXPECT_EQ(s.n_kv_blocks_pinned, 0);
  EXPECT_EQ(s.n_kv_blocks_free, s.n_kv_blocks);
  EXPECT_EQ(s.n_running + s.n_waiting, 0);
}

// Moves the blocks decode lacks for request.prompt from prefill to decode as the workers do,
// and runs the request on decode; returns its output.
CompletedRequest disaggregated(EngineCore& prefill, EngineCore& decode, const Request& request, uint64_t id,
                               int* n_moved) {
  const auto& tokens = request.prompt_token_ids;
  const int h = (int(tokens.size()) - 1) / kBlock;
  // Decode: pin what it holds, reserve the rest.
  auto reservation = decode.reserve_prefix(tokens, h);
  EXPECT_TRUE(reservation.has_value());
  // Prefill: compute the leading h blocks and one more token, then pin the wanted blocks.
  Request pre;
  pre.prompt_token_ids.assign(tokens.begin(), tokens.begin() + h * kBlock + 1);
  pre.params.temperature = 0;
  pre.params.max_tokens = 1;
  prefill.add(id, pre, std::make_shared<OutputStream>(1), RequestTiming::Clock::now());
  run(prefill);
  auto pinned = prefill.pin_prefix(pre.prompt_token_ids, reservation->receive);
  EXPECT_TRUE(pinned.has_value());
  EXPECT_EQ(prefill.stats().n_kv_blocks_pinned, int(reservation->receive.size()));
  for (size_t i = 0; i < pinned->size(); ++i) {
    EXPECT_EQ((*pinned)[i].kind, reservation->receive[i].kind);
    EXPECT_EQ((*pinned)[i].index, reservation->receive[i].index);
    copy_block(prefill, (*pinned)[i].block, decode, reservation->receive[i].block, (*pinned)[i].kind);
  }
  prefill.unpin(*pinned);
  *n_moved = int(pinned->size());
  // Decode: file them and run the request through the prefix-hit path.
  std::vector<PinnedBlock> held = decode.import_prefix(tokens, *reservation);
  EXPECT_EQ(decode.stats().n_kv_blocks_pinned, int(held.size()));
  auto stream = std::make_shared<OutputStream>(request.params.n);
  decode.add(id, request, stream, RequestTiming::Clock::now(), held);
  run(decode);
  RequestHandle handle(id, stream);
  CompletedRequest done = handle.wait();
  EXPECT_EQ(done.n_cached_tokens, h * kBlock) << "admitted through the prefix hit";
  return done;
}

class PrefixTransfer : public ::testing::TestWithParam<int> {};  // the window's lookback (0: none)

TEST_P(PrefixTransfer, MovedBlocksGiveTheOutputsOfOneEngine) {
  FakeCausalLM model(96, 2, {1}, GetParam());
  auto prefill = make_core(model, options());
  auto decode = make_core(model, options());
  // The second prompt shares 3 blocks with the first: decode holds those and asks only for the rest.
  const std::vector<Request> requests = {sampled(prompt(45, 3), 9), sampled([] {
                                                                       auto p = prompt(45, 3);
                                                                       p.resize(24);
                                                                       auto tail = prompt(30, 11);
                                                                       p.insert(p.end(), tail.begin(), tail.end());
                                                                       return p;
                                                                     }(), 7),
                                         sampled(prompt(17, 5), 5), sampled(prompt(9, 1), 4)};
  const auto expected = run_alone(model, options(), requests);
  std::vector<CompletedRequest> actual;
  std::vector<int> moved;
  for (size_t i = 0; i < requests.size(); ++i) {
    int n_moved = 0;
    actual.push_back(disaggregated(*prefill, *decode, requests[i], i, &n_moved));
    actual.back().request_id = i;
    moved.push_back(n_moved);
  }
  expect_same_outputs(expected, actual, "prefill on one engine, decode on another");
  EXPECT_EQ(moved[0], int(decode->prefix_hit_slots(5).size())) << "decode held nothing yet";
  EXPECT_LT(moved[1], int(decode->prefix_hit_slots(6).size())) << "decode's own prefix cache held part of it";
  expect_idle(*prefill);
  expect_idle(*decode);
}

INSTANTIATE_TEST_SUITE_P(Lookback, PrefixTransfer, ::testing::Values(0, 6, 16));

TEST(PrefixTransferHooks, ReserveFailsWhole) {
  FakeCausalLM model;
  EngineOptions o = options();
  o.kv_cache_memory_bytes = size_t(4) * kBlock * 2 * 24;  // 4 blocks
  auto core = make_core(model, o);
  EXPECT_FALSE(core->reserve_prefix(prompt(41, 0), 5).has_value());
  expect_idle(*core);
  auto r = core->reserve_prefix(prompt(41, 0), 3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->receive.size(), 3u);
  EXPECT_EQ(core->stats().n_kv_blocks_pinned, 3);
  core->unpin(r->receive);  // a failed transfer: the fresh blocks go back unfiled
  expect_idle(*core);
  EXPECT_EQ(core->reserve_prefix(prompt(41, 0), 3)->held.size(), 0u) << "nothing was filed";
}

TEST(PrefixTransferHooks, PinFailsWholeWhenABlockIsNotFiled) {
  FakeCausalLM model;
  auto core = make_core(model, options());
  const auto tokens = prompt(33, 2);
  auto slots = core->prefix_hit_slots(4);
  EXPECT_FALSE(core->pin_prefix(tokens, slots).has_value());
  expect_idle(*core);
}

TEST(PrefixTransferHooks, PinsHandedToARequestAreDroppedWhenItIsAbortedBeforeAdmission) {
  FakeCausalLM model;
  auto core = make_core(model, options());
  const auto tokens = prompt(33, 2);
  auto r = core->reserve_prefix(tokens, 4);
  ASSERT_TRUE(r.has_value());
  auto held = core->import_prefix(tokens, *r);
  core->add(7, sampled(tokens, 3), std::make_shared<OutputStream>(2), RequestTiming::Clock::now(), held);
  EXPECT_EQ(core->stats().n_kv_blocks_pinned, 4);
  core->abort(7);
  expect_idle(*core);
}

TEST(PrefixTransferHooks, ImportKeepsTheBlocksAComputeFiledMeanwhile) {
  FakeCausalLM model(96, 2, {1}, 6);
  auto prefill = make_core(model, options());
  auto decode = make_core(model, options());
  const auto tokens = prompt(33, 4);
  auto r = decode->reserve_prefix(tokens, 4);
  ASSERT_TRUE(r.has_value());
  // While the blocks travel, a request with the same prompt computes and files them on decode.
  run_to_completion(*decode, {sampled(tokens, 2)}, 50);
  Request pre = sampled(tokens, 1);
  pre.params.n = 1;
  pre.prompt_token_ids.resize(4 * kBlock + 1);
  prefill->add(1, pre, std::make_shared<OutputStream>(1), RequestTiming::Clock::now());
  run(*prefill);
  auto pinned = prefill->pin_prefix(pre.prompt_token_ids, r->receive);
  ASSERT_TRUE(pinned.has_value());
  for (size_t i = 0; i < pinned->size(); ++i)
    copy_block(*prefill, (*pinned)[i].block, *decode, r->receive[i].block, (*pinned)[i].kind);
  prefill->unpin(*pinned);
  std::vector<PinnedBlock> held = decode->import_prefix(tokens, *r);
  ASSERT_EQ(held.size(), r->receive.size());
  for (size_t i = 0; i < held.size(); ++i) EXPECT_NE(held[i].block, r->receive[i].block) << "the filed block is kept";
  EXPECT_EQ(decode->stats().n_kv_blocks_pinned, int(held.size()));
  const auto expected = run_alone(model, options(), {sampled(tokens, 5)});
  auto stream = std::make_shared<OutputStream>(2);
  decode->add(2, sampled(tokens, 5), stream, RequestTiming::Clock::now(), held);
  run(*decode);
  CompletedRequest done = RequestHandle(2, stream).wait();
  done.request_id = 0;
  expect_same_outputs(expected, {done}, "blocks filed while the transfer ran");
  expect_idle(*prefill);
  expect_idle(*decode);
}

}  // namespace
}  // namespace deepinfer::test
