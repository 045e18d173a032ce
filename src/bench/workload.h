// Workload: what a benchmark run sends, as a set of conversations. A single-turn request is a
// conversation of one turn; an agentic session is a conversation of many, each turn sent
// `think_time_s` after the previous one finished. Everything is a pure function of the seed and
// the conversation's index, so any order of generation gives the same requests.
#pragma once

#include "bench/distribution.h"
#include "core/status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::bench {

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// One request: the whole conversation so far, ending with a user message.
struct TurnRequest {
  std::vector<Message> messages;
  int64_t n_tokens_in = 0;   // intended prompt length: the contents' tokens, without chat template
  int64_t n_tokens_out = 0;  // max_tokens
  double think_time_s = 0;   // pause after this turn's answer before the next turn is sent
};

// The completions API takes one string: the contents in order, which (all starting with a space,
// see WordText) keeps token counts additive and each turn's prompt a prefix of the next one's.
std::string flatten_prompt(const std::vector<Message>& messages);

// A conversation's turns, produced one at a time. Not thread-safe.
class Conversation {
 public:
  virtual ~Conversation() = default;
  // The next turn, or nullopt when the conversation is over.
  virtual std::optional<TurnRequest> next_turn() = 0;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual int64_t n_conversations() const = 0;
  // Conversation `index` in [0, n_conversations()). Thread-safe; deterministic given the seed.
  // A conversation may refer to its workload and must not outlive it.
  virtual std::unique_ptr<Conversation> conversation(int64_t index) const = 0;
  // When the workload carries its own timing (a trace), the arrival of conversation `index` in
  // seconds after the start; nullopt otherwise.
  virtual std::optional<double> arrival_s(int64_t /*index*/) const { return std::nullopt; }
  // Multi-turn conversations (roles matter): the chat API is the natural default.
  virtual bool multi_turn() const { return false; }
};

struct WorkloadOptions {
  std::string kind = "random";  // random | shared-prefix | agentic | replay
  uint64_t seed = 0;
  int64_t n_conversations = 200;  // requests; sessions for agentic; 0 = the whole trace for replay
  Distribution input_len = Distribution::Fixed(1024);  // prompt (random), suffix (shared-prefix),
                                                       // task message (agentic)
  Distribution output_len = Distribution::Fixed(128);  // max_tokens per request or turn
  // shared-prefix: conversation i uses prefix i % n_prefix_groups.
  int64_t n_prefix_groups = 4;
  int64_t prefix_len = 2048;
  // agentic: one system prompt with tool definitions shared by every session.
  int64_t system_len = 4096;
  Distribution turns = Distribution::Fixed(8);
  Distribution tool_result_len = Distribution::Fixed(512);
  Distribution think_time_s = Distribution::Fixed(1);
  // replay
  std::string trace_path;
  double trace_speed = 1.0;       // arrival_s = trace time / trace_speed
  int64_t trace_block_len = 512;  // tokens per hash_ids block
};

Result<std::unique_ptr<Workload>> make_workload(const WorkloadOptions& options);
std::unique_ptr<Workload> make_random_workload(const WorkloadOptions& options);
Result<std::unique_ptr<Workload>> make_shared_prefix_workload(const WorkloadOptions& options);
Result<std::unique_ptr<Workload>> make_agentic_workload(const WorkloadOptions& options);
Result<std::unique_ptr<Workload>> make_replay_workload(const WorkloadOptions& options);

// A conversation of exactly one turn.
class SingleTurn : public Conversation {
 public:
  explicit SingleTurn(TurnRequest request) : request_(std::move(request)) {}
  std::optional<TurnRequest> next_turn() override;

 private:
  std::optional<TurnRequest> request_;
};

// Sub-stream tags for Rng::Derive, one per kind of generated text.
enum class Stream : uint64_t { kRandom = 1, kPrefix, kSuffix, kSystem, kSession, kHashBlock, kReplay };

}  // namespace deepinfer::bench
