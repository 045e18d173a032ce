// `deepinfer generate`: runs prompts (token ids or text) through the engine, all batched
// together, and prints each one's generated ids with every token's log-probability under the
// full-vocabulary softmax (and, with a tokenizer, the text).
//
// Under `mpirun -np N ... --expert-parallel N` prompt i runs on rank i mod N (each rank its own
// engine, the experts spread over all), and rank 0 gathers and prints every prompt's result in
// order: exactly what one process prints.
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/token_id_list.h"
#include "dist/ep/ep_runtime.h"
#include "engine/engine.h"
#include "model/loader.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

struct GenerateFlags {
  std::string model_dir;
  std::string prompt_ids;
  std::string prompt;
  std::string prompts_file;
  SamplingParams sampling;
  bool json = false;
  EngineFlags engine;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

// One prompt per JSON line: {"prompt_ids": [...]} or {"prompt": "..."}.
Result<std::vector<nlohmann::json>> read_prompts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot open");
  std::vector<nlohmann::json> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || (!j.contains("prompt_ids") && !j.contains("prompt")))
      return Status::Error(path + ":" + std::to_string(n) + ": expected {\"prompt_ids\": [...]} or {\"prompt\": \"...\"}");
    out.push_back(std::move(j));
  }
  if (out.empty()) return Status::Error(path + ": no prompts");
  return out;
}

int run_generate(GenerateFlags& f) {
  if (Status s = f.engine.resolve(); !s.ok()) return fail(s.message());
  auto ep = EpRuntime::start(f.engine.expert_parallel, f.engine.ep_timeout_seconds);
  if (!ep.ok()) return fail(ep.status().message());
  const int rank = *ep ? (*ep)->rank() : 0, n_ranks = *ep ? (*ep)->size() : 1;
  if (*ep) {
    f.engine.model.expert_group = &(*ep)->group();
    f.engine.model.expert_load = &(*ep)->load();
  }
  const int given = int(!f.prompt_ids.empty()) + int(!f.prompt.empty()) + int(!f.prompts_file.empty());
  if (given != 1) return fail("give exactly one of --prompt-ids, --prompt, --prompts-file");

  std::vector<nlohmann::json> inputs;
  if (!f.prompts_file.empty()) {
    auto r = read_prompts_file(f.prompts_file);
    if (!r.ok()) return fail(r.status().message());
    inputs = std::move(r).value();
  } else if (!f.prompt.empty()) {
    inputs.push_back({{"prompt", f.prompt}});
  } else {
    auto ids = parse_token_id_list(f.prompt_ids, "--prompt-ids");
    if (!ids.ok()) return fail(ids.status().message());
    inputs.push_back({{"prompt_ids", ids.value()}});
  }

  std::optional<Tokenizer> tokenizer;
  bool needs_tokenizer = false;
  for (const auto& in : inputs) needs_tokenizer |= in.contains("prompt");
  auto tok = Tokenizer::Load(f.model_dir);
  if (tok.ok()) tokenizer = std::move(tok).value();
  else if (needs_tokenizer) return fail(tok.status().message());

  auto model = load_causal_lm(f.model_dir, f.engine.model);
  if (!model.ok()) return fail(model.status().message());
  std::fprintf(stderr, "%s\n", describe_causal_lm(**model, f.engine.options.block_size).c_str());
  auto engine = Engine::create(std::move(model).value(), f.engine.options, *ep ? &(*ep)->group() : nullptr);
  if (!engine.ok()) return fail(engine.status().message());

  f.sampling.logprobs = true;
  std::vector<RequestHandle> handles;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<size_t> indices;  // of the prompts that run here
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> ids;
    if (inputs[i].contains("prompt")) {
      if (!inputs[i]["prompt"].is_string()) return fail("prompt " + std::to_string(i + 1) + ": 'prompt' must be a string");
      auto enc = tokenizer->encode(inputs[i]["prompt"].get<std::string>(), /*add_special_tokens=*/true);
      if (!enc.ok()) return fail("prompt " + std::to_string(i + 1) + ": " + enc.status().message());
      ids = std::move(enc).value();
    } else {
      const auto& arr = inputs[i]["prompt_ids"];
      if (!arr.is_array() || arr.empty()) return fail("prompt " + std::to_string(i + 1) + ": 'prompt_ids' must be a non-empty list");
      for (const auto& x : arr) {
        if (!x.is_number_integer()) return fail("prompt " + std::to_string(i + 1) + ": token ids must be integers");
        ids.push_back(x.get<int32_t>());
      }
    }
    // Every rank checks every prompt, so that a bad one stops all ranks alike.
    if (Status s = (*engine)->validate(Request{ids, f.sampling, 0}); !s.ok())
      return fail("prompt " + std::to_string(i + 1) + ": " + s.message());
    if (int(i % size_t(n_ranks)) != rank) continue;
    auto h = (*engine)->submit(Request{ids, f.sampling, 0});
    if (!h.ok()) return fail("prompt " + std::to_string(i + 1) + ": " + h.status().message());
    handles.push_back(std::move(h).value());
    prompts.push_back(std::move(ids));
    indices.push_back(i);
  }

  nlohmann::json printed = nlohmann::json::array();  // [prompt index, what it prints] per prompt run here
  bool failed = false;
  // Decode timing over this process's prompts: from the last first token to the last finish.
  RequestTiming::Clock::time_point last_first_token{}, last_finished{};
  size_t n_later_tokens = 0;  // tokens sampled after last_first_token, at most
  for (size_t i = 0; i < handles.size(); ++i) {
    std::ostringstream cout;  // shadows std::cout: rank 0 prints every rank's in prompt order
    const size_t index = indices[i];
    CompletedRequest done = handles[i].wait();
    last_first_token = std::max(last_first_token, done.timing.first_token);
    last_finished = std::max(last_finished, done.timing.finished);
    if (!done.samples.empty() && !done.samples[0].token_ids.empty()) n_later_tokens += done.samples[0].token_ids.size() - 1;
    const CompletedSample& s = done.samples.at(0);
    std::vector<double> logprobs;
    for (const auto& lp : s.logprobs) logprobs.push_back(lp.logprob);
    const std::string finish(finish_reason_name(s.finish_reason));
    std::string text;
    if (tokenizer) {
      auto t = tokenizer->decode(s.token_ids, /*skip_special_tokens=*/true);
      if (t.ok()) text = t.value();
    }
    failed |= s.finish_reason == FinishReason::kError;
    if (f.json) {
      nlohmann::json j = {{"prompt_ids", prompts[i]}, {"output_ids", s.token_ids}, {"logprobs", logprobs},
                          {"finish_reason", finish}};
      if (tokenizer) j["text"] = text;
      cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      cout << "prompt " << index + 1 << " (" << prompts[i].size() << " tokens, " << finish << "):";
      for (int32_t id : s.token_ids) cout << ' ' << id;
      if (tokenizer) cout << "\n  " << text;
      cout << "\n";
    }
    printed.push_back({index, cout.str()});
  }
  if (Status s = (*engine)->health(); !s.ok()) return fail(s.message());
  if (n_later_tokens > 0 && last_finished > last_first_token)
    std::fprintf(stderr, "deepinfer: decode: %zu tokens after each prompt's first, %.4f s from the last first token to the end\n", n_later_tokens,
                 std::chrono::duration<double>(last_finished - last_first_token).count());
  const EngineStats stats = (*engine)->stats();
  engine->reset();  // an expert-parallel engine returns once every rank's has finished
  if (*ep) {
    std::fprintf(stderr, "deepinfer: %s\n", (*ep)->summary().c_str());
    auto all = (*ep)->group().gather_to_root(printed.dump());
    if (!all.ok()) return fail(all.status().message());
    printed = nlohmann::json::array();
    for (const std::string& part : all.value())
      for (auto& entry : nlohmann::json::parse(part)) printed.push_back(std::move(entry));
    std::sort(printed.begin(), printed.end());
  }
  for (const auto& entry : printed) std::cout << entry[1].get<std::string>();
  if (failed) return fail("the engine stopped before every prompt finished");
  if (f.engine.options.speculative != SpeculativeMethod::kNone) {
    std::fprintf(stderr, "speculative: %llu draft tokens, %llu accepted, %llu steps for %llu tokens\n",
                 static_cast<unsigned long long>(stats.n_draft_tokens),
                 static_cast<unsigned long long>(stats.n_accepted_draft_tokens), static_cast<unsigned long long>(stats.n_steps),
                 static_cast<unsigned long long>(stats.n_generated_tokens));
  }
  return 0;
}

void add_generate_command(CLI::App& app, Runner& run) {
  auto f = std::make_shared<GenerateFlags>();
  f->sampling.max_tokens = 16;
  f->sampling.temperature = 0.0f;
  CLI::App* cmd = app.add_subcommand("generate", "Generate from prompts with a checkpoint, all batched");
  cmd->add_option("--model", f->model_dir, "Hugging Face model folder")->required();
  cmd->add_option("--prompt-ids", f->prompt_ids, "Comma-separated prompt token ids");
  cmd->add_option("--prompt", f->prompt, "Prompt text (needs the model's tokenizer)");
  cmd->add_option("--prompts-file", f->prompts_file, "JSON lines {\"prompt_ids\": [...]} or {\"prompt\": \"...\"}");
  cmd->add_option("--max-tokens", f->sampling.max_tokens, "Tokens to generate per prompt")->capture_default_str();
  cmd->add_option("--temperature", f->sampling.temperature, "Sampling temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-p", f->sampling.top_p, "Nucleus sampling mass")->capture_default_str();
  cmd->add_option("--top-k", f->sampling.top_k, "Sample among the k most likely (0: all)")->capture_default_str();
  cmd->add_option("--sampling-seed", f->sampling.seed, "Seed of every prompt's sampling");
  cmd->add_flag("--ignore-eos", f->sampling.ignore_eos, "Keep generating after an end-of-sequence token");
  cmd->add_flag("--json", f->json, "Print one JSON object per prompt");
  f->engine.add_to(*cmd);
  cmd->callback([&run, f] { run = [f] { return run_generate(*f); }; });
}

const bool kRegistered = register_command(&add_generate_command);

}  // namespace
}  // namespace deepinfer::cli
