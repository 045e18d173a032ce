#include "bench/workload.h"

namespace deepinfer::bench {

std::string flatten_prompt(const std::vector<Message>& messages) {
  std::string prompt;
  for (const Message& m : messages) prompt += m.content;
  return prompt;
}

std::optional<TurnRequest> SingleTurn::next_turn() {
  std::optional<TurnRequest> out = std::move(request_);
  request_.reset();
  return out;
}

Result<std::unique_ptr<Workload>> make_workload(const WorkloadOptions& options) {
  if (options.kind == "random") return make_random_workload(options);
  if (options.kind == "shared-prefix") return make_shared_prefix_workload(options);
  if (options.kind == "agentic") return make_agentic_workload(options);
  if (options.kind == "replay") return make_replay_workload(options);
  return Status::Error("unknown workload '" + options.kind +
                       "' (expected random, shared-prefix, agentic or replay)");
}

}  // namespace deepinfer::bench
