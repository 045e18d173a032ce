// `deepinfer mtp-probe --model DIR --ids 5,17,... [--json]`: DeepSeek-V4's MTP block over a token
// sequence, for checking it against its reference. The main model runs over the ids; for every
// t = 0 .. len(ids)-2 the MTP block reads the main model's streams at t and ids[t+1] and predicts
// ids[t+2]. With --json, one line:
//   {"positions": [{"t": 0, "top5": [[id, logprob], ...], "target_logprob": x}, ...]}
// logprobs under the full-vocabulary softmax, top5 best first (ties: lower id first),
// target_logprob the logprob of ids[t+2] (null at the last t). Without --json, one line per t.
// Errors (not a V4 checkpoint, fewer than 2 ids, ids outside the vocabulary) exit with 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/token_id_list.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/mtp_block.h"
#include "model/loader.h"

namespace deepinfer::cli {
namespace {

struct MtpProbeFlags {
  std::string model_dir;
  std::string ids;
  bool json = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

int run_mtp_probe(const MtpProbeFlags& f) {
  auto ids = parse_token_id_list(f.ids, "--ids");
  if (!ids.ok()) return fail(ids.status().message());
  auto loaded = load_causal_lm(f.model_dir);
  if (!loaded.ok()) return fail(loaded.status().message());
  auto* model = dynamic_cast<DeepseekV4Model*>(loaded->get());
  if (!model)
    return fail(f.model_dir + " is a " + (*loaded)->info().architecture +
                " checkpoint: mtp-probe runs DeepSeek-V4's MTP block (DeepseekV4ForCausalLM)");
  auto logits = v4_mtp_probe_logits(*model, *ids);
  if (!logits.ok()) return fail(logits.status().message());

  const int vocab = model->info().vocab_size;
  const size_t n = ids->size() - 1;
  nlohmann::ordered_json positions = nlohmann::ordered_json::array();
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (size_t t = 0; t < n; ++t) {
    const float* l = logits->data() + t * size_t(vocab);
    double mx = l[0], sum = 0;
    for (int v = 1; v < vocab; ++v) mx = std::max(mx, double(l[v]));
    for (int v = 0; v < vocab; ++v) sum += std::exp(double(l[v]) - mx);
    const double lse = mx + std::log(sum);
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(5, vocab);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    nlohmann::ordered_json top5 = nlohmann::ordered_json::array();
    for (int i = 0; i < k; ++i) top5.push_back({order[size_t(i)], double(l[order[size_t(i)]]) - lse});
    nlohmann::ordered_json target = nullptr;
    if (t + 2 < ids->size()) target = double(l[(*ids)[t + 2]]) - lse;
    if (f.json) {
      positions.push_back({{"t", t}, {"top5", top5}, {"target_logprob", target}});
    } else {
      std::cout << "t " << t << ": next " << (*ids)[t + 1] << ", top1 " << order[0] << " (" << top5[0][1].get<double>()
                << ")";
      if (!target.is_null()) std::cout << ", target " << (*ids)[t + 2] << " (" << target.get<double>() << ")";
      std::cout << "\n";
    }
  }
  if (f.json) std::cout << nlohmann::ordered_json{{"positions", positions}}.dump() << "\n";
  return 0;
}

void add_mtp_probe_command(CLI::App& app, Runner& run) {
  auto f = std::make_shared<MtpProbeFlags>();
  CLI::App* cmd = app.add_subcommand("mtp-probe", "DeepSeek-V4's MTP predictions at every position of a token sequence");
  cmd->add_option("--model", f->model_dir, "Hugging Face model folder (DeepseekV4ForCausalLM)")->required();
  cmd->add_option("--ids", f->ids, "Comma-separated token ids (at least 2)")->required();
  cmd->add_flag("--json", f->json, "Print {\"positions\": [{\"t\", \"top5\", \"target_logprob\"}, ...]}");
  cmd->callback([&run, f] { run = [f] { return run_mtp_probe(*f); }; });
}

const bool kRegistered = register_command(&add_mtp_probe_command);

}  // namespace
}  // namespace deepinfer::cli
