// speculative_bench: decode speed of the engine with and without speculative decoding, side by
// side in one process on one checkpoint. For each batch size N: N requests of --prompt-len random
// prompt tokens and --output-len greedy output tokens (ignore_eos), run to completion on a fresh
// EngineCore in each mode:
//   plain           no drafts
//   ceiling         ReplayDrafter (replay_drafter.h): k drafts that are always right, the
//                   engine's defaults otherwise (drafts while at most speculative_max_batch decode)
//   ceiling-nocap   the same with no batch cap: what verification costs where the cap stops it
//   wrong           k drafts that are never right, with the acceptance gate (draft_gate.h)
//   wrong-nogate    the same with the gate off: every decode step verifies k useless drafts
//   wrong-warm      never right, gated, on an engine that ran the same requests once before
//                   (untimed): new sequences start from the server's recent (rejected) outcomes
//   mtp, mtp-nogate the checkpoint's own MTP predictor (the model loaded a second time for
//                   drafting), with and without the gate
//   mtp-plain       no drafts on that second model: what keeping the MTP layer's state costs
//   MODE-oldgate    any mode but plain with the gate not adaptive (DraftGateOptions::adaptive:
//                   a fixed k and only the window pauses), for comparison
// Decode is timed from the step after every request has its first token to the end: wall time,
// process CPU time (all threads; the fair measure on a shared machine), output tokens, steps,
// drafts, accepted drafts, accept length (1 + accepted / drafting steps), steps the gate held
// drafts back; and the CPU-time ratio against plain of the same N. One JSON object per line with
// --json.
//
//   speculative_bench --model DIR [--batches 1,4,8,32] [--prompt-len 64] [--output-len 32]
//       [--num-speculative-tokens 3] [--modes plain,ceiling,...] [--threads 1] [--json]
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "model/loader.h"
#include "replay_drafter.h"

namespace deepinfer {
namespace {

struct BenchOptions {
  std::string model_dir;
  std::string batches = "1,4,8,32";
  std::string modes = "plain,ceiling,ceiling-nocap,wrong,wrong-nogate,wrong-warm";
  int prompt_len = 64;
  int output_len = 32;
  int k = 3;
  int threads = 1;
  size_t kv_cache_memory = size_t(2) << 30;
  bool json = false;
};

struct Run {
  double decode_s = 0, decode_cpu_s = 0;
  uint64_t decode_tokens = 0, steps = 0, drafts = 0, accepted = 0, drafting_steps = 0, paused = 0;
  std::map<uint64_t, std::vector<int32_t>> tokens;  // per request: prompt + output
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

Result<Run> run_mode(CausalLM& model, const BenchOptions& o, int n, const std::string& named_mode,
                     const std::map<uint64_t, std::vector<int32_t>>& plain_tokens) {
  const std::string old_suffix = "-oldgate";
  const bool old_gate = named_mode.size() > old_suffix.size() &&
                        named_mode.compare(named_mode.size() - old_suffix.size(), old_suffix.size(), old_suffix) == 0;
  const std::string mode = old_gate ? named_mode.substr(0, named_mode.size() - old_suffix.size()) : named_mode;
  const std::vector<std::string> modes = {"plain", "ceiling", "ceiling-nocap", "wrong", "wrong-nogate",
                                          "wrong-warm", "mtp", "mtp-nogate", "mtp-plain"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end() || (old_gate && (mode == "plain" || mode == "mtp-plain")))
    return Status::Error("unknown mode " + named_mode);
  const bool mtp = mode.rfind("mtp", 0) == 0;
  EngineOptions eo;
  eo.speculative_gate.adaptive = !old_gate;
  eo.kv_cache_memory_bytes = o.kv_cache_memory;
  eo.max_num_seqs = std::max(256, n);
  if (mode != "plain" && mode != "mtp-plain") {
    eo.speculative = SpeculativeMethod::kNgram;  // replaced below
    eo.num_speculative_tokens = o.k;
  }
  if (mode == "ceiling-nocap") eo.speculative_max_batch = 1 << 20;
  if (mode == "wrong-nogate" || mode == "mtp-nogate") eo.speculative_gate.min_acceptance = 0;
  if (mtp && mode != "mtp-plain") eo.speculative = SpeculativeMethod::kMtp;
  DI_ASSIGN_OR_RETURN(auto core, EngineCore::create(model, eo));
  // Request i has id i, and id n + i in the untimed first wave of wrong-warm.
  const bool warm = mode == "wrong-warm";
  if (mode != "plain" && !mtp) {
    if (plain_tokens.empty()) return Status::Error("mode " + mode + " needs the plain mode first");
    std::map<uint64_t, std::vector<int32_t>> known = plain_tokens;
    for (const auto& [id, tokens] : plain_tokens) known[id + uint64_t(n)] = tokens;
    core->set_drafter(std::make_unique<bench::ReplayDrafter>(std::move(known), model.info().vocab_size,
                                                             mode.rfind("wrong", 0) == 0));
  }
  std::mt19937 rng{uint32_t(n)};
  std::vector<Request> requests;
  for (int i = 0; i < n; ++i) {
    Request r;
    for (int k = 0; k < o.prompt_len; ++k) r.prompt_token_ids.push_back(int32_t(rng() % uint32_t(model.info().vocab_size)));
    r.params.temperature = 0;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    DI_RETURN_IF_ERROR(core->validate(r));
    requests.push_back(std::move(r));
  }
  std::vector<std::shared_ptr<OutputStream>> streams;
  Run run;
  const auto t0 = std::chrono::steady_clock::now();
  if (warm) {
    for (int i = 0; i < n; ++i) core->add(uint64_t(n + i), requests[size_t(i)], std::make_shared<OutputStream>(1), t0);
    while (core->has_work()) core->step();
  }
  const uint64_t n_generated_before = core->stats().n_generated_tokens;
  for (int i = 0; i < n; ++i) {
    run.tokens[uint64_t(i)] = requests[size_t(i)].prompt_token_ids;
    streams.push_back(std::make_shared<OutputStream>(1));
    core->add(uint64_t(i), requests[size_t(i)], streams.back(), t0);
  }
  while (core->has_work() && core->stats().n_generated_tokens < n_generated_before + uint64_t(n)) core->step();  // prefill
  const EngineStats before = core->stats();
  const auto d0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();
  while (core->has_work()) core->step();
  run.decode_cpu_s = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
  run.decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
  const EngineStats st = core->stats();
  run.decode_tokens = st.n_generated_tokens - before.n_generated_tokens;
  run.steps = st.n_steps - before.n_steps;
  run.drafts = st.n_draft_tokens - before.n_draft_tokens;
  run.accepted = st.n_accepted_draft_tokens - before.n_accepted_draft_tokens;
  run.drafting_steps = st.n_drafts_at[0] - before.n_drafts_at[0];
  run.paused = st.n_draft_paused_steps - before.n_draft_paused_steps;
  for (int i = 0; i < n; ++i) {
    while (auto u = streams[size_t(i)]->try_next()) {
      auto& t = run.tokens[u->request_id];
      t.insert(t.end(), u->token_ids.begin(), u->token_ids.end());
    }
  }
  return run;
}

int run(const BenchOptions& o) {
  omp_set_num_threads(o.threads);
  auto model = load_causal_lm(o.model_dir);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s\n", describe_causal_lm(**model, EngineOptions{}.block_size).c_str());
  std::unique_ptr<CausalLM> drafting;  // the same checkpoint loaded with its MTP predictor
  if (o.modes.find("mtp") != std::string::npos) {
    ModelOptions mo;
    mo.mtp_drafting = true;
    auto m = load_causal_lm(o.model_dir, mo);
    if (!m.ok()) {
      std::fprintf(stderr, "error: %s\n", m.status().message().c_str());
      return 1;
    }
    drafting = std::move(m).value();
  }
  for (const std::string& batch : split(o.batches)) {
    const int n = std::stoi(batch);
    std::map<uint64_t, std::vector<int32_t>> plain_tokens;
    double plain_cpu_per_token = 0;
    for (const std::string& mode : split(o.modes)) {
      auto r = run_mode(mode.rfind("mtp", 0) == 0 ? *drafting : **model, o, n, mode, plain_tokens);
      if (!r.ok()) {
        std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
        return 1;
      }
      const double cpu_per_token = r->decode_cpu_s / double(r->decode_tokens);
      if (mode == "plain") {
        plain_tokens = r->tokens;
        plain_cpu_per_token = cpu_per_token;
      } else if (r->tokens != plain_tokens) {
        std::fprintf(stderr, "error: mode %s at batch %d changed the outputs\n", mode.c_str(), n);
        return 1;
      }
      const double speedup = plain_cpu_per_token > 0 ? plain_cpu_per_token / cpu_per_token : 1.0;
      const double accept_length = r->drafting_steps ? 1.0 + double(r->accepted) / double(r->drafting_steps) : 0.0;
      if (o.json) {
        nlohmann::json j = {{"batch", n}, {"mode", mode}, {"k", o.k}, {"prompt_len", o.prompt_len},
                            {"output_len", o.output_len}, {"decode_s", r->decode_s}, {"decode_cpu_s", r->decode_cpu_s},
                            {"decode_tokens", r->decode_tokens}, {"tokens_per_cpu_s", 1.0 / cpu_per_token},
                            {"tokens_per_s", double(r->decode_tokens) / r->decode_s}, {"steps", r->steps},
                            {"drafts", r->drafts}, {"accepted", r->accepted}, {"accept_length", accept_length},
                            {"paused_steps", r->paused}, {"speedup_vs_plain_cpu", speedup}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("N=%-3d %-13s decode %6.1f s (cpu %6.1f s)  %7.2f tok/cpu-s  %4llu steps  drafts %5llu accepted %5llu "
                    "(accept length %.2f, paused %llu)  vs plain %.2fx\n",
                    n, mode.c_str(), r->decode_s, r->decode_cpu_s, 1.0 / cpu_per_token, (unsigned long long)r->steps,
                    (unsigned long long)r->drafts, (unsigned long long)r->accepted, accept_length,
                    (unsigned long long)r->paused, speedup);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
  deepinfer::BenchOptions o;
  CLI::App app{"Decode speed with and without speculative decoding"};
  app.add_option("--model", o.model_dir, "Hugging Face model folder")->required();
  app.add_option("--batches", o.batches, "Comma-separated numbers of concurrent requests")->capture_default_str();
  app.add_option("--modes", o.modes, "Comma-separated modes, plain first")->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "Prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", o.output_len, "Output tokens per request")->capture_default_str();
  app.add_option("--num-speculative-tokens", o.k, "Drafts per sequence and step")->capture_default_str();
  app.add_option("--kv-cache-memory", o.kv_cache_memory, "KV cache bytes")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads")->capture_default_str();
  app.add_flag("--json", o.json, "One JSON object per batch size and mode");
  CLI11_PARSE(app, argc, argv);
  return deepinfer::run(o);
}
