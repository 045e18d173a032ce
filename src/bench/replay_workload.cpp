// replay: one single-turn request per line of a JSON-lines trace. Recognized fields (others are
// ignored), so that published traces (e.g. Mooncake's) replay as they are:
//   timestamp | timestamp_ms        arrival in milliseconds; the earliest one is time zero (optional)
//   messages                        [{"role", "content"}, ...]     the prompt: the first of these
//   prompt                          a string                        three that is present
//   input_length | input_tokens     a length, filled with WordText
//   hash_ids                        with input_length: ids of trace_block_len-token blocks; equal
//                                   ids give equal text, so the trace's prefix sharing is kept
//   output_length | output_tokens | max_tokens   max_tokens (else drawn from output_len)
#include "bench/word_text.h"
#include "bench/workload.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>

namespace deepinfer::bench {
namespace {

using nlohmann::json;

const json* find_first(const json& line, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = line.find(key);
    if (it != line.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

class ReplayWorkload : public Workload {
 public:
  ReplayWorkload(const WorkloadOptions& options, std::vector<json> lines)
      : options_(options), lines_(std::move(lines)) {
    for (const json& line : lines_) {
      if (const json* t = find_first(line, {"timestamp", "timestamp_ms"})) t0_ms_ = std::min(t0_ms_, t->get<double>());
    }
  }

  int64_t n_conversations() const override { return static_cast<int64_t>(lines_.size()); }

  std::unique_ptr<Conversation> conversation(int64_t index) const override {
    const json& line = lines_[static_cast<size_t>(index)];
    Rng rng = Rng::Derive(options_.seed, static_cast<uint64_t>(Stream::kReplay), static_cast<uint64_t>(index));
    TurnRequest r;
    if (const json* messages = find_first(line, {"messages"})) {
      for (const json& m : *messages) r.messages.push_back({m.value("role", "user"), m.value("content", "")});
      r.n_tokens_in = WordText::count_tokens(flatten_prompt(r.messages));
    } else if (const json* prompt = find_first(line, {"prompt"})) {
      r.messages.push_back({"user", prompt->get<std::string>()});
      r.n_tokens_in = WordText::count_tokens(r.messages.back().content);
    } else {
      r.n_tokens_in = find_first(line, {"input_length", "input_tokens"})->get<int64_t>();
      r.messages.push_back({"user", text_of_length(line, r.n_tokens_in, rng)});
    }
    const json* out = find_first(line, {"output_length", "output_tokens", "max_tokens"});
    r.n_tokens_out = out ? std::max<int64_t>(1, out->get<int64_t>()) : options_.output_len.sample_count(rng);
    return std::make_unique<SingleTurn>(std::move(r));
  }

  std::optional<double> arrival_s(int64_t index) const override {
    const json* t = find_first(lines_[static_cast<size_t>(index)], {"timestamp", "timestamp_ms"});
    if (!t) return std::nullopt;
    return (t->get<double>() - t0_ms_) / 1000.0 / options_.trace_speed;
  }

 private:
  // n_tokens of text; with hash_ids, block k is the text of hash id k, cut at n_tokens.
  std::string text_of_length(const json& line, int64_t n_tokens, Rng& rng) const {
    const json* hash_ids = find_first(line, {"hash_ids"});
    if (!hash_ids) return WordText::make(n_tokens, rng);
    std::string text;
    int64_t left = n_tokens;
    for (const json& id : *hash_ids) {
      if (left == 0) break;
      const int64_t n = std::min(left, options_.trace_block_len);
      Rng block_rng = Rng::Derive(options_.seed, static_cast<uint64_t>(Stream::kHashBlock), id.get<uint64_t>());
      WordText::append(text, n, block_rng);
      left -= n;
    }
    WordText::append(text, left, rng);
    return text;
  }

  WorkloadOptions options_;
  std::vector<json> lines_;
  double t0_ms_ = std::numeric_limits<double>::infinity();  // the earliest timestamp: time zero
};

// A line must say what to send: messages, prompt or an input length, each of the right type.
Status check_line(const json& line) {
  if (!line.is_object()) return Status::Error("not a JSON object");
  if (const json* m = find_first(line, {"messages"})) {
    if (!m->is_array()) return Status::Error("'messages' is not an array");
    for (const json& msg : *m) {
      if (!msg.is_object() || !msg.contains("content") || !msg["content"].is_string()) {
        return Status::Error("a message lacks a string 'content'");
      }
    }
  } else if (const json* p = find_first(line, {"prompt"})) {
    if (!p->is_string()) return Status::Error("'prompt' is not a string");
  } else if (const json* n = find_first(line, {"input_length", "input_tokens"})) {
    if (!n->is_number_integer() || n->get<int64_t>() < 1) return Status::Error("input length is not a positive integer");
    if (const json* h = find_first(line, {"hash_ids"})) {
      if (!h->is_array()) return Status::Error("'hash_ids' is not an array");
      for (const json& id : *h) {
        if (!id.is_number_unsigned()) return Status::Error("'hash_ids' holds a non-integer");
      }
    }
  } else {
    return Status::Error("no 'messages', 'prompt' or 'input_length'");
  }
  if (const json* out = find_first(line, {"output_length", "output_tokens", "max_tokens"})) {
    if (!out->is_number_integer()) return Status::Error("output length is not an integer");
  }
  if (const json* t = find_first(line, {"timestamp", "timestamp_ms"})) {
    if (!t->is_number()) return Status::Error("'timestamp' is not a number");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Workload>> make_replay_workload(const WorkloadOptions& options) {
  if (options.trace_path.empty()) return Status::Error("replay: --trace FILE is required");
  if (!(options.trace_speed > 0)) return Status::Error("replay: --trace-speed must be > 0");
  std::ifstream in(options.trace_path);
  if (!in) return Status::Error("replay: cannot open trace '" + options.trace_path + "'");
  std::vector<json> lines;
  std::string text;
  for (int64_t line_no = 1; std::getline(in, text); ++line_no) {
    if (options.n_conversations > 0 && static_cast<int64_t>(lines.size()) == options.n_conversations) break;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
    Status status = line.is_discarded() ? Status::Error("not JSON") : check_line(line);
    if (!status.ok()) {
      return Status::Error("replay: " + options.trace_path + ":" + std::to_string(line_no) + ": " + status.message());
    }
    lines.push_back(std::move(line));
  }
  if (lines.empty()) return Status::Error("replay: trace '" + options.trace_path + "' has no requests");
  return std::unique_ptr<Workload>(std::make_unique<ReplayWorkload>(options, std::move(lines)));
}

}  // namespace deepinfer::bench
