// `deepinfer generate`: runs a prompt (token ids) through a checkpoint and prints the generated
// ids with each token's log-probability under the full-vocabulary softmax.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kernels/ops.h"
#include "model/deepseek/model.h"

namespace deepinfer::cli {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string prompt_ids;
  int max_tokens = 16;
  double temperature = 0.0;
  bool ignore_eos = false;
  bool json = false;
};

Result<std::vector<int32_t>> parse_ids(const std::string& text, int vocab_size) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') return Status::Error("--prompt-ids: '" + item + "' is not an integer");
    if (v < 0 || v >= vocab_size)
      return Status::Error("--prompt-ids: token id " + item + " is outside the vocabulary [0, " +
                           std::to_string(vocab_size) + ")");
    ids.push_back(int32_t(v));
  }
  if (ids.empty()) return Status::Error("--prompt-ids: no token ids given");
  return ids;
}

// Greedy choice (lowest id on ties) and its natural-log softmax probability.
std::pair<int32_t, double> greedy_with_logprob(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - double(logits[best]));
  return {best, -std::log(sum)};
}

int run_generate(const GenerateOptions& o) {
  auto model = DeepseekModel::Load(o.model_dir, cpu_backend());
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  DeepseekModel& m = **model;
  const CausalLMInfo& info = m.info();
  auto prompt = parse_ids(o.prompt_ids, info.vocab_size);
  if (!prompt.ok()) {
    std::fprintf(stderr, "error: %s\n", prompt.status().message().c_str());
    return 1;
  }
  if (o.temperature != 0.0) {
    std::fprintf(stderr, "error: --temperature: only 0 (greedy) is supported here\n");
    return 1;
  }
  const int n_prompt = int(prompt->size());
  const int n_total = n_prompt + o.max_tokens;
  if (n_total > info.max_position_embeddings) {
    std::fprintf(stderr, "error: prompt (%d) + max tokens (%d) exceeds the context of %d\n", n_prompt, o.max_tokens,
                 info.max_position_embeddings);
    return 1;
  }

  // One sequence over a private paged cache with f32 storage.
  KvCacheView kv;
  kv.layout = {DType::F32, info.kv_lora_rank, info.qk_rope_head_dim};
  kv.block_size = 64;
  kv.num_blocks = (n_total + kv.block_size - 1) / kv.block_size;
  const size_t layer_bytes = size_t(kv.num_blocks) * kv.block_size * kv.layout.bytes_per_token();
  std::vector<std::vector<uint8_t>> storage(size_t(info.n_layers), std::vector<uint8_t>(layer_bytes));
  for (auto& s : storage) kv.layer_base.push_back(s.data());
  std::vector<int32_t> block_table(size_t(kv.num_blocks));
  for (int i = 0; i < kv.num_blocks; ++i) block_table[size_t(i)] = i;

  std::vector<int32_t> out_ids;
  std::vector<double> logprobs;
  std::vector<float> logits(size_t(info.vocab_size));
  std::vector<int32_t> pending = *prompt;
  int n_ctx = 0;
  for (int step = 0; step < o.max_tokens; ++step) {
    ForwardBatch b;
    b.token_ids = pending;
    for (int i = 0; i < int(pending.size()); ++i) b.positions.push_back(n_ctx + i);
    n_ctx += int(pending.size());
    b.seqs.push_back({0, int32_t(pending.size()), n_ctx, block_table.data()});
    b.logit_rows.push_back(int32_t(pending.size()) - 1);
    m.forward(b, kv, logits.data());
    auto [id, lp] = greedy_with_logprob(logits.data(), info.vocab_size);
    out_ids.push_back(id);
    logprobs.push_back(lp);
    pending = {id};
    bool is_eos = false;
    for (int32_t e : info.eos_token_ids) is_eos |= (e == id);
    if (is_eos && !o.ignore_eos) break;
  }

  if (o.json) {
    nlohmann::json j = {{"prompt_ids", *prompt}, {"output_ids", out_ids}, {"logprobs", logprobs}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "output ids:";
    for (int32_t id : out_ids) std::cout << ' ' << id;
    std::cout << "\n";
  }
  return 0;
}

void add_generate_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens from a prompt with a checkpoint");
  cmd->add_option("--model", o->model_dir, "Hugging Face model folder")->required();
  cmd->add_option("--prompt-ids", o->prompt_ids, "Comma-separated prompt token ids")->required();
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (0: greedy)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after an end-of-sequence token");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([&run, o] { run = [o] { return run_generate(*o); }; });
}

const bool kRegistered = register_command(&add_generate_command);

}  // namespace
}  // namespace deepinfer::cli
