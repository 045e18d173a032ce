// `deepinfer tokenize` and `deepinfer detokenize`: JSON lines in, JSON lines out, one output line
// per non-blank input line.
//   tokenize --model DIR [--add-special-tokens] [--report-timing]:
//                                                  {"text": "..."}  ->  {"ids": [...]}
//     --report-timing writes {"texts", "bytes", "tokens", "encode_seconds", "encode_cpu_seconds"}
//     to stderr at the end: the wall and CPU time spent in Tokenizer::encode alone (one thread),
//     without JSON reading and writing.
//   detokenize --model DIR [--skip-special-tokens]: {"ids": [...]}  ->  {"text": "..."}
// A line that cannot be handled gets {"error": "..."} and the rest continue; the exit code is 1
// if any line failed (2 if the tokenizer cannot be loaded).
#include <nlohmann/json.hpp>

#include <time.h>

#include <chrono>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/json_lines.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using json = nlohmann::json;

struct Options {
  std::string model_dir;
  bool special_tokens = false;  // tokenize: add them; detokenize: skip them
  bool report_timing = false;   // tokenize only
};

// Totals of --report-timing.
struct EncodeTiming {
  size_t texts = 0, bytes = 0, tokens = 0;
  double seconds = 0, cpu_seconds = 0;
};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// Loads the tokenizer, then maps stdin's JSON lines through `handle(tokenizer, input)`.
template <typename Handle>
int for_each_line(const std::string& model_dir, Handle handle) {
  auto tokenizer = Tokenizer::Load(model_dir);
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.status().message() << '\n';
    return 2;
  }
  return map_json_lines<json>([&](const std::string& line) -> Result<json> {
    const json input = json::parse(line, nullptr, false);
    if (input.is_discarded()) return Status::Error("input line is not valid JSON");
    return handle(*tokenizer, input);
  });
}

Result<json> tokenize_line(const Tokenizer& tokenizer, const json& input, bool add_special_tokens,
                           EncodeTiming& timing) {
  auto text = input.is_object() ? input.find("text") : input.end();
  if (!input.is_object() || text == input.end() || !text->is_string()) {
    return Status::Error("expected {\"text\": \"...\"}");
  }
  const std::string& s = text->get_ref<const std::string&>();
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  auto ids = tokenizer.encode(s, add_special_tokens);
  timing.cpu_seconds += process_cpu_seconds() - cpu_start;
  timing.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ids.ok()) return ids.status();
  timing.texts += 1;
  timing.bytes += s.size();
  timing.tokens += ids->size();
  return json{{"ids", *ids}};
}

Result<json> detokenize_line(const Tokenizer& tokenizer, const json& input, bool skip_special_tokens) {
  auto ids_field = input.is_object() ? input.find("ids") : input.end();
  if (!input.is_object() || ids_field == input.end() || !ids_field->is_array()) {
    return Status::Error("expected {\"ids\": [...]}");
  }
  std::vector<int32_t> ids;
  ids.reserve(ids_field->size());
  for (const json& id : *ids_field) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return Status::Error("ids must be non-negative integers, got " + id.dump());
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  DI_ASSIGN_OR_RETURN(std::string text, tokenizer.decode(ids, skip_special_tokens));
  return json{{"text", text}};
}

void add_tokenize_commands(CLI::App& app, Runner& run) {
  auto tokenize_options = std::make_shared<Options>();
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "Encode JSON lines {\"text\": ...} from stdin into {\"ids\": [...]} lines");
  tokenize->add_option("--model", tokenize_options->model_dir, "Checkpoint folder with tokenizer.json")
      ->required();
  tokenize->add_flag("--add-special-tokens", tokenize_options->special_tokens,
                     "Add BOS/EOS as the tokenizer's configuration says");
  tokenize->add_flag("--report-timing", tokenize_options->report_timing,
                     "Write the time spent encoding (JSON) to stderr at the end");
  tokenize->callback([&run, tokenize_options] {
    run = [tokenize_options] {
      const bool add = tokenize_options->special_tokens;
      EncodeTiming timing;
      const int code = for_each_line(tokenize_options->model_dir,
                                     [add, &timing](const Tokenizer& t, const json& in) {
                                       return tokenize_line(t, in, add, timing);
                                     });
      if (tokenize_options->report_timing) {
        std::cerr << json{{"texts", timing.texts},
                          {"bytes", timing.bytes},
                          {"tokens", timing.tokens},
                          {"encode_seconds", timing.seconds},
                          {"encode_cpu_seconds", timing.cpu_seconds}}
                         .dump()
                  << '\n';
      }
      return code;
    };
  });

  auto detokenize_options = std::make_shared<Options>();
  CLI::App* detokenize = app.add_subcommand(
      "detokenize", "Decode JSON lines {\"ids\": [...]} from stdin into {\"text\": ...} lines");
  detokenize->add_option("--model", detokenize_options->model_dir, "Checkpoint folder with tokenizer.json")
      ->required();
  detokenize->add_flag("--skip-special-tokens", detokenize_options->special_tokens,
                       "Leave special tokens out of the text");
  detokenize->callback([&run, detokenize_options] {
    run = [detokenize_options] {
      const bool skip = detokenize_options->special_tokens;
      return for_each_line(detokenize_options->model_dir, [skip](const Tokenizer& t, const json& in) {
        return detokenize_line(t, in, skip);
      });
    };
  });
}

const bool kRegistered = register_command(&add_tokenize_commands);

}  // namespace
}  // namespace deepinfer::cli
