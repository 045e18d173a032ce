// constrained_decode_bench: decode tokens/s of the engine with and without a JSON Schema
// constraint, at each batch size. For each batch B, B requests of --prompt-len random prompt
// tokens decode --output-len tokens at temperature 1 (seeded) on one EngineCore, first
// unconstrained (ignore_eos), then with every request under the schema (one GrammarMaskCache per
// run, cold at its start, shared by the run's requests as the server shares it by schema), and
// so on for --repeats rounds, interleaved so that all see similar machine load. The constrained
// run is made twice: masks computed on the engine thread before sampling, and masks computed on
// another thread during the forward pass (overlap, the engine's default), whose tokens must be
// the same (same_tokens_as_not_overlapped). The default
// schema (an array of at least 1000 objects) cannot end within the output, so both variants decode
// exactly B x output-len tokens. Decode tok/s counts the tokens of the steps after the first
// (which prefills every prompt: B x prompt-len must fit --max-num-batched-tokens) over their time.
// For constrained runs, the outputs are then replayed through matchers over a fresh (cold) mask
// cache, timing what the constraint adds per token on the engine thread (mask fill, masking the
// logits row, accept) apart from the forward pass: mask_us_per_token.
//
//   constrained_decode_bench --model DIR [--batches 1,32,128] [--prompt-len 16] [--output-len 16]
//       [--schema FILE] [--repeats 1] [--threads N]
// One JSON object per run on stdout.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "engine/engine_core.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "model/loader.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

constexpr const char* kDefaultSchema = R"({"type": "array", "minItems": 1000, "items": {"type": "object",
  "properties": {"id": {"type": "integer"}, "name": {"type": "string", "maxLength": 16},
                 "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 4},
                 "score": {"type": "number"}},
  "required": ["id", "name", "tags", "score"], "additionalProperties": false}})";

struct BenchOptions {
  std::string model_dir;
  std::string batches = "1,32,128";
  std::string schema_file;
  int prompt_len = 16;
  int output_len = 16;
  int repeats = 1;
  int max_num_batched_tokens = 2048;
  int threads = 0;
};

double load_average() {
  std::ifstream f("/proc/loadavg");
  double one_minute = -1;
  f >> one_minute;
  return one_minute;
}

struct RunResult {
  double decode_seconds = 0;
  uint64_t decode_tokens = 0;
  uint64_t steps = 0;
  double cpu_seconds = 0;
  std::vector<std::vector<int32_t>> outputs;  // per request
};

// Seconds per token of the constraint's own work over `outputs`, with a cold mask cache shared
// by all of them, sequences interleaved token by token as in the engine.
double replay_seconds_per_token(const grammar::CompiledGrammar& grammar,
                                const std::shared_ptr<const grammar::TokenVocabulary>& vocabulary,
                                const std::vector<std::vector<int32_t>>& outputs, int vocab_size) {
  auto cache = std::make_shared<grammar::GrammarMaskCache>(grammar, vocabulary);
  std::vector<grammar::GrammarMatcher> matchers(outputs.size(), grammar::GrammarMatcher(cache));
  std::vector<uint32_t> mask(vocabulary->bitmask_words());
  std::vector<float> row(size_t(vocab_size), 0.0f);
  size_t n_tokens = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t t = 0;; ++t) {
    bool any = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (t >= outputs[i].size()) continue;
      any = true;
      matchers[i].fill_next_token_bitmask(mask.data());
      for (size_t w = 0; w * 32 < row.size(); ++w) {  // what Sampler does with the mask
        const uint32_t bits = w < mask.size() ? mask[w] : 0u;
        if (bits == ~0u) continue;
        for (size_t id = w * 32; id < std::min(row.size(), (w + 1) * 32); ++id)
          if (!(bits >> (id - w * 32) & 1u)) row[id] = -1e30f;
      }
      DI_CHECK(matchers[i].accept_token(outputs[i][t]));
      ++n_tokens;
    }
    if (!any) break;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(n_tokens);
}

// One run of `n` requests; `grammar` null: unconstrained. `overlap`: masks computed during the
// forward pass (GrammarConstraint::overlap_masks).
Result<RunResult> run_batch(CausalLM& model, const BenchOptions& o, int n, const grammar::CompiledGrammar* grammar,
                            const std::shared_ptr<const grammar::TokenVocabulary>& vocabulary, bool overlap) {
  EngineOptions eo;
  eo.max_num_batched_tokens = o.max_num_batched_tokens;
  eo.max_num_seqs = std::max(256, n);
  eo.kv_cache_memory_bytes = size_t(2) << 30;
  DI_ASSIGN_OR_RETURN(auto core, EngineCore::create(model, eo));
  std::shared_ptr<GrammarConstraint> constraint;
  if (grammar) {
    constraint = std::make_shared<GrammarConstraint>();
    constraint->masks = std::make_shared<grammar::GrammarMaskCache>(*grammar, vocabulary);
    constraint->overlap_masks = overlap;
  }
  std::mt19937 rng{uint32_t(n)};
  const int vocab = int(vocabulary->size());
  std::vector<std::shared_ptr<OutputStream>> streams;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    Request r;
    for (int k = 0; k < o.prompt_len; ++k) r.prompt_token_ids.push_back(int32_t(rng() % uint32_t(vocab)));
    r.params.temperature = 1.0f;
    r.params.seed = uint64_t(i);
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    r.params.constraint = constraint;
    DI_RETURN_IF_ERROR(core->validate(r));
    streams.push_back(std::make_shared<OutputStream>(1));
    core->add(uint64_t(i), std::move(r), streams.back(), t0);
  }
  RunResult out;
  const std::clock_t cpu0 = std::clock();
  for (uint64_t step = 0; core->has_work(); ++step) {
    const uint64_t before = core->stats().n_generated_tokens;
    const auto s0 = std::chrono::steady_clock::now();
    core->step();
    if (step == 0) continue;
    out.decode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    out.decode_tokens += core->stats().n_generated_tokens - before;
  }
  out.cpu_seconds = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
  out.steps = core->stats().n_steps;
  for (auto& stream : streams) {
    std::vector<int32_t> ids;
    while (auto update = stream->next()) ids.insert(ids.end(), update->token_ids.begin(), update->token_ids.end());
    out.outputs.push_back(std::move(ids));
  }
  if (core->stats().n_generated_tokens != uint64_t(n) * uint64_t(o.output_len))
    return Status::Error("a sequence ended before --output-len: the schema must not let outputs end that early");
  return out;
}

int run(const BenchOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  auto model = load_causal_lm(o.model_dir);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s\n", describe_causal_lm(**model, EngineOptions{}.block_size).c_str());
  auto tokenizer = Tokenizer::Load(o.model_dir);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "error: %s\n", tokenizer.status().message().c_str());
    return 1;
  }
  auto v = grammar::TokenVocabulary::FromTokenizer(*tokenizer);
  if (!v.ok()) {
    std::fprintf(stderr, "error: %s\n", v.status().message().c_str());
    return 1;
  }
  const auto vocabulary = std::make_shared<const grammar::TokenVocabulary>(std::move(v).value());
  std::string schema = kDefaultSchema;
  if (!o.schema_file.empty()) {
    std::ifstream f(o.schema_file);
    std::stringstream ss;
    ss << f.rdbuf();
    schema = ss.str();
  }
  const auto t_compile = std::chrono::steady_clock::now();
  auto compiled = grammar::CompiledGrammar::FromJsonSchema(schema);
  if (!compiled.ok()) {
    std::fprintf(stderr, "error: schema: %s\n", compiled.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "schema compiled in %.2f ms\n",
               1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t_compile).count());

  std::stringstream levels(o.batches);
  for (std::string item; std::getline(levels, item, ',');) {
    const int n = std::stoi(item);
    for (int rep = 0; rep < o.repeats; ++rep) {
      std::vector<std::vector<int32_t>> before_outputs;  // of the constrained run without overlap
      for (const int variant : {0, 1, 2}) {  // unconstrained; masks before sampling; masks overlapped
        const bool constrained = variant > 0, overlap = variant == 2;
        auto r = run_batch(**model, o, n, constrained ? &compiled.value() : nullptr, vocabulary, overlap);
        if (!r.ok()) {
          std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
          return 1;
        }
        nlohmann::json j = {{"batch", n},
                                  {"constrained", constrained},
                                  {"overlap", overlap},
                                  {"repeat", rep},
                                  {"decode_tokens_per_s", double(r->decode_tokens) / r->decode_seconds},
                                  {"decode_tokens", r->decode_tokens},
                                  {"decode_seconds", r->decode_seconds},
                                  {"steps", r->steps},
                                  {"cpu_seconds", r->cpu_seconds},
                                  {"loadavg_1m", load_average()}};
        if (constrained)
          j["mask_us_per_token"] =
              1e6 * replay_seconds_per_token(compiled.value(), vocabulary, r->outputs, (*model)->info().vocab_size);
        if (variant == 1) before_outputs = r->outputs;
        if (overlap) j["same_tokens_as_not_overlapped"] = r->outputs == before_outputs;
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
  deepinfer::BenchOptions o;
  CLI::App app{"Decode speed of the DeepInfer engine with and without a JSON Schema constraint"};
  app.add_option("--model", o.model_dir, "Hugging Face model folder (with tokenizer.json)")->required();
  app.add_option("--batches", o.batches, "Comma-separated batch sizes")->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "Prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", o.output_len, "Output tokens per request")->capture_default_str();
  app.add_option("--schema", o.schema_file, "JSON Schema file (default: an array of at least 1000 objects)");
  app.add_option("--repeats", o.repeats, "Rounds of (unconstrained, constrained, constrained overlapped) per batch size")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Token budget per step")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (0: default)");
  CLI11_PARSE(app, argc, argv);
  return deepinfer::run(o);
}
