// agentic: sessions modeled on an agent harness (AgentX-style traffic). Every session starts from
// the same long system prompt with tool definitions, then a task message of its own (input_len);
// each later turn appends the previous answer (a tool call of that turn's output_len tokens) and
// a tool result (tool_result_len) and asks again, after think_time_s. The context grows turn by
// turn and each prompt is the previous prompt plus the new messages, so most of it is a cached
// prefix on a server with prefix caching.
//
// The appended answer is the one the workload planned (same length as the turn's max_tokens),
// not the text the server returned: the requests are then identical on every server, which is
// what a comparison between engines needs. Servers that cache generated tokens see a miss on the
// answer's part of the prefix.
#include "bench/word_text.h"
#include "bench/workload.h"

namespace deepinfer::bench {
namespace {

constexpr int64_t kToolCount = 16;

// Appends structural text (words and single marks, see WordText) and returns its token count.
int64_t put(std::string& out, std::string_view text) {
  out += text;
  return WordText::count_tokens(text);
}

// Appends `label` and then words up to n_tokens in total (at least the label).
int64_t put_labeled(std::string& out, std::string_view label, int64_t n_tokens, Rng& rng) {
  const int64_t n_label = put(out, label);
  if (n_tokens > n_label) WordText::append(out, n_tokens - n_label, rng);
  return std::max(n_tokens, n_label);
}

// An instruction, up to kToolCount tool definitions (as many as fit), then instructions up to
// n_tokens; exactly n_tokens long unless the opening sentence alone is longer.
std::string make_system_prompt(int64_t n_tokens, Rng& rng) {
  std::string out;
  int64_t n = put(out, " you are an agent working in a software project. you can call one tool in each turn. tools:");
  for (int64_t t = 0; t < kToolCount; ++t) {
    std::string tool;
    int64_t n_tool = put(tool, " tool: ");
    n_tool += put(tool, WordText::word(rng));
    n_tool += put(tool, ". description:");
    const int64_t n_description = rng.uniform_int(12, 40);
    WordText::append(tool, n_description, rng);
    n_tool += n_description + put(tool, ". parameters:");
    const int64_t n_params = rng.uniform_int(1, 4);
    for (int64_t p = 0; p < n_params; ++p) {
      n_tool += put(tool, p == 0 ? " " : ", ");
      n_tool += put(tool, WordText::word(rng));
    }
    n_tool += put(tool, ".");
    if (n + n_tool > n_tokens) break;
    out += tool;
    n += n_tool;
  }
  if (n_tokens - n >= 2) {
    put_labeled(out, " instructions:", n_tokens - n, rng);
  } else if (n_tokens > n) {
    WordText::append(out, n_tokens - n, rng);
  }
  return out;
}

class AgenticConversation : public Conversation {
 public:
  AgenticConversation(const WorkloadOptions& options, const std::string& system_prompt,
                      int64_t n_tokens_system, int64_t index)
      : options_(options),
        rng_(Rng::Derive(options.seed, static_cast<uint64_t>(Stream::kSession), static_cast<uint64_t>(index))) {
    n_turns_left_ = options.turns.sample_count(rng_);
    messages_.push_back({"system", system_prompt});
    messages_.push_back({"user", ""});
    n_tokens_ = n_tokens_system +
                put_labeled(messages_.back().content, " task:", options.input_len.sample_count(rng_), rng_);
  }

  std::optional<TurnRequest> next_turn() override {
    if (n_turns_left_ == 0) return std::nullopt;
    if (n_tokens_answer_ > 0) {
      messages_.push_back({"assistant", ""});
      n_tokens_ += put_labeled(messages_.back().content, " call:", n_tokens_answer_, rng_);
      messages_.push_back({"user", ""});
      n_tokens_ += put_labeled(messages_.back().content, " result:", options_.tool_result_len.sample_count(rng_), rng_);
    }
    --n_turns_left_;
    TurnRequest r;
    r.messages = messages_;
    r.n_tokens_in = n_tokens_;
    r.n_tokens_out = n_tokens_answer_ = options_.output_len.sample_count(rng_);
    r.think_time_s = n_turns_left_ > 0 ? options_.think_time_s.sample_seconds(rng_) : 0.0;
    return r;
  }

 private:
  const WorkloadOptions& options_;
  Rng rng_;
  std::vector<Message> messages_;
  int64_t n_tokens_ = 0;         // tokens in messages_
  int64_t n_tokens_answer_ = 0;  // the last turn's planned answer, appended before the next turn
  int64_t n_turns_left_ = 0;
};

class AgenticWorkload : public Workload {
 public:
  explicit AgenticWorkload(const WorkloadOptions& options) : options_(options) {
    Rng rng = Rng::Derive(options.seed, static_cast<uint64_t>(Stream::kSystem));
    system_prompt_ = make_system_prompt(options.system_len, rng);
    n_tokens_system_ = WordText::count_tokens(system_prompt_);
  }
  int64_t n_conversations() const override { return options_.n_conversations; }
  std::unique_ptr<Conversation> conversation(int64_t index) const override {
    return std::make_unique<AgenticConversation>(options_, system_prompt_, n_tokens_system_, index);
  }
  bool multi_turn() const override { return true; }

 private:
  WorkloadOptions options_;
  std::string system_prompt_;
  int64_t n_tokens_system_ = 0;
};

}  // namespace

Result<std::unique_ptr<Workload>> make_agentic_workload(const WorkloadOptions& options) {
  if (options.system_len < 1) return Status::Error("agentic: --system-len must be >= 1");
  return std::unique_ptr<Workload>(std::make_unique<AgenticWorkload>(options));
}

}  // namespace deepinfer::bench
