// grammar_bench: the grammar engine's costs over the schema corpus at the DeepSeek-V3 vocabulary
// (bench/RESULTS.md, "Grammar engine").
//   grammar_bench [--corpus FILE]... [--model DIR] [--outputs-per-schema N] [--compile-repeats N]
//                 [--dump-outputs FILE] [--warm]
// Reports, as one JSON object on stdout:
//   vocabulary_seconds: building the TokenVocabulary (bytes of every token and the byte trie);
//   warm_seconds: with --warm, warming its JSON frames first (grammar/frame_warmup.h), as a
//                 server does in the background at start;
//   compile: median/p99 milliseconds of CompiledGrammar::FromJsonSchema per supported schema
//            (each schema compiled --compile-repeats times, the median of those taken);
//   mask_cache_per_output / mask_cache_per_schema: median/p99/max microseconds of
//         fill_next_token_bitmask per token, over the canonical tokenization of random valid
//         outputs, with a GrammarMaskCache per output (every request pays its first visits to
//         states) and with one cache per schema shared by its outputs; each with the share of
//         calls that hit the per-state mask cache and the median/p99 of the misses alone.
// Outputs come from random walks through the matcher (as `deepinfer grammar-sample` does) and are
// re-encoded with the tokenizer, so the measured token sequence is what a model would emit.
// --dump-outputs writes, per schema, JSON lines {"schema", "compile_ms", "outputs": [[ids]]} (or
// {"schema", "error"}): the measured sequences, for bench/grammar/xgrammar_compare.py to replay.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/grammar_matcher.h"
#include "grammar/frame_warmup.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace deepinfer;
using namespace deepinfer::grammar;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

// A random valid output: uniform picks among allowed tokens for a few steps, then steered
// toward an end half of the time (the candidate leaving the fewest bytes to an end).
std::string random_output(const CompiledGrammar& g, const std::shared_ptr<const TokenVocabulary>& vocab,
                          std::mt19937_64& rng, bool& finished) {
  GrammarMatcher m(g, vocab);
  std::vector<uint32_t> mask(vocab->bitmask_words());
  std::vector<int32_t> allowed;
  std::string text;
  for (size_t n = 0; n < 300; ++n) {
    m.fill_next_token_bitmask(mask.data());
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
        const int32_t id = int32_t(w * 32 + size_t(__builtin_ctz(bits)));
        if (!vocab->is_end(id)) allowed.push_back(id);
      }
    }
    if (m.can_end() && (allowed.empty() || (n >= 12 && rng() % 2 == 0))) {
      finished = true;
      return text;
    }
    if (allowed.empty()) break;
    int32_t pick = allowed[rng() % allowed.size()];
    if (n >= 12 && rng() % 2 == 0) {
      uint32_t best = UINT32_MAX;
      std::vector<int32_t> candidates;
      for (int k = 0; k < 8; ++k) candidates.push_back(allowed[rng() % allowed.size()]);
      for (int32_t id : allowed) {
        if (vocab->bytes(id).size() == 1) candidates.push_back(id);
      }
      for (int32_t id : candidates) {
        m.accept_token(id);
        const uint32_t d = m.min_bytes_to_end();
        m.rollback(1);
        if (d < best) {
          best = d;
          pick = id;
        }
      }
    }
    m.accept_token(pick);
    text += vocab->bytes(pick);
  }
  finished = false;
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("grammar engine benchmark");
  std::vector<std::string> corpora = {"tests/grammar/corpus/json_schema_test_suite.jsonl",
                                      "tests/grammar/corpus/jsonschemabench_sample.jsonl",
                                      "tests/grammar/corpus/tool_schemas.jsonl"};
  std::string model_dir = "tests/data/tokenizers/deepseek-v3";
  size_t outputs_per_schema = 2, compile_repeats = 5;
  std::string dump_path;
  app.add_option("--corpus", corpora, "JSON lines {\"schema\": ...}");
  app.add_option("--model", model_dir, "Folder with tokenizer.json");
  app.add_option("--outputs-per-schema", outputs_per_schema, "Random outputs measured per schema");
  app.add_option("--compile-repeats", compile_repeats, "Compiles per schema (median taken)");
  app.add_option("--dump-outputs", dump_path, "Write each schema's measured token sequences here (JSON lines)");
  bool warm = false;
  app.add_flag("--warm", warm, "Warm the vocabulary's JSON frames first (grammar/frame_warmup.h), as a server does at start");
  CLI11_PARSE(app, argc, argv);

  auto tokenizer = Tokenizer::Load(model_dir);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status().message() << '\n';
    return 2;
  }
  auto t0 = Clock::now();
  auto v = TokenVocabulary::FromTokenizer(*tokenizer);
  const double vocabulary_seconds = seconds_since(t0);
  if (!v.ok()) {
    std::cerr << v.status().message() << '\n';
    return 2;
  }
  auto vocab = std::make_shared<const TokenVocabulary>(std::move(v).value());
  double warm_seconds = 0;
  if (warm) {
    const std::atomic<bool> cancel = false;
    t0 = Clock::now();
    warm_json_frames(vocab, {}, cancel);
    warm_seconds = seconds_since(t0);
  }

  std::vector<std::string> schemas;
  for (const std::string& path : corpora) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) schemas.push_back(json::parse(line)["schema"].dump());
    }
  }
  // Mask calls with a cache per output (every request cold) and with one cache per schema
  // shared by its outputs (requests after the first find the states met before).
  struct Timing {
    std::vector<double> all_us, miss_us;
    size_t n_hits = 0;
    json report() const {
      return {{"calls", all_us.size()},
              {"median_us", percentile(all_us, 0.5)}, {"p99_us", percentile(all_us, 0.99)},
              {"max_us", percentile(all_us, 1.0)},
              {"cache_hit_share", all_us.empty() ? 0.0 : double(n_hits) / double(all_us.size())},
              {"miss_median_us", percentile(miss_us, 0.5)}, {"miss_p99_us", percentile(miss_us, 0.99)}};
    }
  } cold, shared;
  std::vector<double> compile_ms;
  size_t n_supported = 0, n_outputs = 0, n_unfinished = 0;
  std::mt19937_64 rng(1);
  std::vector<uint32_t> mask(vocab->bitmask_words());
  std::ofstream dump;
  if (!dump_path.empty()) dump.open(dump_path);
  for (const std::string& schema : schemas) {
    std::vector<double> times;
    Result<CompiledGrammar> g = Status::Error("not compiled");
    for (size_t r = 0; r < compile_repeats; ++r) {
      t0 = Clock::now();
      g = CompiledGrammar::FromJsonSchema(schema);
      times.push_back(seconds_since(t0) * 1e3);
    }
    json dumped = {{"schema", json::parse(schema)}};
    if (!g.ok()) {
      dumped["error"] = g.status().message();
      if (dump.is_open()) dump << dumped.dump() << '\n';
      continue;
    }
    ++n_supported;
    compile_ms.push_back(percentile(times, 0.5));
    dumped["compile_ms"] = compile_ms.back();
    dumped["outputs"] = json::array();
    auto shared_cache = std::make_shared<GrammarMaskCache>(g.value(), vocab);
    for (size_t k = 0; k < outputs_per_schema; ++k) {
      bool finished = false;
      const std::string text = random_output(g.value(), vocab, rng, finished);
      if (!finished) {
        ++n_unfinished;
        continue;
      }
      auto ids = tokenizer->encode(text, false);
      if (!ids.ok()) continue;
      ++n_outputs;
      dumped["outputs"].push_back(*ids);
      for (Timing* t : {&cold, &shared}) {
        GrammarMatcher m(t == &cold ? std::make_shared<GrammarMaskCache>(g.value(), vocab) : shared_cache);
        for (size_t i = 0; i <= ids->size(); ++i) {
          const size_t cached_before = m.cache()->n_cached_masks();
          t0 = Clock::now();
          m.fill_next_token_bitmask(mask.data());
          const double us = seconds_since(t0) * 1e6;
          t->all_us.push_back(us);
          if (m.cache()->n_cached_masks() == cached_before) {
            ++t->n_hits;
          } else {
            t->miss_us.push_back(us);
          }
          if (i < ids->size() && !m.accept_token((*ids)[i])) {
            std::cerr << "re-encoded output rejected: " << text << '\n';
            return 1;
          }
        }
      }
    }
    if (dump.is_open()) dump << dumped.dump() << '\n';
  }
  json report = {
      {"vocabulary_tokens", vocab->size()},
      {"vocabulary_trie_nodes", vocab->trie().size()},
      {"vocabulary_seconds", vocabulary_seconds},
      {"warm_seconds", warm_seconds},
      {"schemas", schemas.size()},
      {"supported", n_supported},
      {"compile_ms", {{"median", percentile(compile_ms, 0.5)}, {"p99", percentile(compile_ms, 0.99)},
                      {"max", percentile(compile_ms, 1.0)}}},
      {"outputs", n_outputs},
      {"outputs_unfinished", n_unfinished},
      {"mask_cache_per_output", cold.report()},
      {"mask_cache_per_schema", shared.report()},
  };
  std::cout << report.dump(2) << '\n';
  return 0;
}
