// `deepinfer grammar-sample` (a development command, hidden from --help): random outputs of the
// grammar engine, for checking them against outside validators (tests/grammar/).
//   grammar-sample [--model DIR] [--max-tokens N]: JSON lines in, JSON lines out:
//     {"schema": {...} | "regex": "..." | "grammar": "..." | "json_object": true,
//      "seed": N, "count": K}
//       -> {"samples": [{"text": "...", "tokens": n, "terminated": bool}, ...], "compile_seconds": s}
//          (a sample also has "stuck": true if no token and no end was allowed, and
//          "matcher_error" if the matcher passed a limit)
//       or {"error": "..."} when the constraint does not compile.
// Each sample is a random walk over the tokens the matcher allows, so that the mask alone makes
// the output valid: the first steps pick uniformly among allowed tokens; later steps try a few
// tokens (a few random allowed ones and every allowed one-byte token) and, half of the time (every
// time after 150 steps), keep the one that leaves the fewest bytes to a possible end, else a
// random one; they end when the grammar allows it with probability 1/2. So walks explore and
// still finish. The samples of one line share a GrammarMaskCache. "terminated": false means the walk
// hit --max-tokens first.
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <string>

#include "cli/commands.h"
#include "cli/json_lines.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using json = nlohmann::ordered_json;
using grammar::CompiledGrammar;
using grammar::GrammarMaskCache;
using grammar::GrammarMatcher;
using grammar::TokenVocabulary;

struct Options {
  std::string model_dir = "tests/data/tokenizers/deepseek-v3";
  size_t max_tokens = 400;
};

constexpr size_t kFreeSteps = 12;     // uniform picks before steering toward an end
constexpr size_t kAlwaysSteer = 150;  // steps after which every step steers
constexpr size_t kCandidates = 8;     // tokens tried per steered step

Result<CompiledGrammar> compile(const json& in) {
  if (in.contains("schema")) return CompiledGrammar::FromJsonSchema(in["schema"].dump());
  if (in.contains("regex") && in["regex"].is_string()) {
    return CompiledGrammar::FromRegex(in["regex"].get<std::string>());
  }
  if (in.contains("grammar") && in["grammar"].is_string()) {
    return CompiledGrammar::FromEbnf(in["grammar"].get<std::string>());
  }
  if (in.value("json_object", false)) return CompiledGrammar::AnyJsonObject();
  return Status::Error("expected one of \"schema\", \"regex\", \"grammar\", \"json_object\"");
}

json sample(const std::shared_ptr<GrammarMaskCache>& cache, const std::shared_ptr<const TokenVocabulary>& vocab,
            size_t max_tokens, std::mt19937_64& rng) {
  GrammarMatcher m(cache);
  std::vector<uint32_t> mask(vocab->bitmask_words());
  std::vector<int32_t> allowed;
  std::string text;
  size_t n = 0;
  for (; n < max_tokens && !m.is_terminated(); ++n) {
    m.fill_next_token_bitmask(mask.data());
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
        const int32_t id = int32_t(w * 32 + size_t(__builtin_ctz(bits)));
        if (!vocab->is_end(id)) allowed.push_back(id);
      }
    }
    if (allowed.empty() || (m.can_end() && n >= kFreeSteps && rng() % 2 == 0)) break;
    int32_t pick = allowed[rng() % allowed.size()];
    if (n >= kFreeSteps && (n >= kAlwaysSteer || rng() % 2 == 0)) {
      std::vector<int32_t> candidates;
      for (size_t k = 0; k < kCandidates; ++k) candidates.push_back(allowed[rng() % allowed.size()]);
      for (int32_t id : allowed) {
        if (vocab->bytes(id).size() == 1) candidates.push_back(id);
      }
      uint32_t best = UINT32_MAX;
      for (int32_t id : candidates) {
        if (!m.accept_token(id)) continue;
        const uint32_t distance = m.min_bytes_to_end();
        m.rollback(1);
        if (distance < best) {
          best = distance;
          pick = id;
        }
      }
    }
    m.accept_token(pick);
    text += vocab->bytes(pick);
  }
  const bool terminated = m.can_end() && (m.is_terminated() || n < max_tokens);
  json out = {{"text", text}, {"tokens", n}, {"terminated", terminated}};
  // No token allowed and no end either: the matcher led the walk into a dead end.
  if (allowed.empty() && !m.can_end()) out["stuck"] = true;
  if (!m.status().ok()) out["matcher_error"] = m.status().message();
  return out;
}

void add_grammar_sample_command(CLI::App& app, Runner& run) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("grammar-sample", "Random outputs under a grammar constraint");
  cmd->group("");  // a development command: not listed in --help
  cmd->add_option("--model", options->model_dir, "Folder with tokenizer.json");
  cmd->add_option("--max-tokens", options->max_tokens, "Tokens per sample at most");
  cmd->callback([&run, options] {
    run = [options] {
      auto tokenizer = Tokenizer::Load(options->model_dir);
      if (!tokenizer.ok()) {
        std::cerr << "error: " << tokenizer.status().message() << '\n';
        return 2;
      }
      auto v = TokenVocabulary::FromTokenizer(*tokenizer);
      if (!v.ok()) {
        std::cerr << "error: " << v.status().message() << '\n';
        return 2;
      }
      auto vocab = std::make_shared<const TokenVocabulary>(std::move(v).value());
      return map_json_lines<json>([&](const std::string& line) -> Result<json> {
        const json in = json::parse(line, nullptr, false);
        if (in.is_discarded() || !in.is_object()) return Status::Error("input line is not a JSON object");
        const auto start = std::chrono::steady_clock::now();
        DI_ASSIGN_OR_RETURN(CompiledGrammar g, compile(in));
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::mt19937_64 rng(in.value("seed", uint64_t(0)));
        auto cache = std::make_shared<GrammarMaskCache>(g, vocab);  // shared by the samples
        json samples = json::array();
        for (size_t i = 0, count = in.value("count", size_t(1)); i < count; ++i) {
          samples.push_back(sample(cache, vocab, options->max_tokens, rng));
        }
        return json{{"samples", samples}, {"compile_seconds", seconds}};
      });
    };
  });
}

const bool kRegistered = register_command(&add_grammar_sample_command);

}  // namespace
}  // namespace deepinfer::cli
