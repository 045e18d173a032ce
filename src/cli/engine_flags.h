// The engine's command-line flags, shared by the commands that run an engine (serve, generate).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "engine/engine_options.h"
#include "model/causal_lm.h"

namespace deepinfer::cli {

struct EngineFlags {
  EngineOptions options;
  ModelOptions model;
  std::string kv_cache_dtype = "bf16";
  std::string activation_dtype = "f32";
  std::string prefill_attention = "expanded";  // model.prefill_attention
  std::string lm_head_dtype = "stored";        // model.lm_head_dtype
  bool no_prefix_caching = false;
  bool no_weight_relay = false;       // !model.relay_weights
  std::string speculative = "none";
  int expert_parallel = 1;            // ranks of the expert-parallel group (mpirun -np N); dist/ep/
  double ep_timeout_seconds = 60;     // deadline of each of the group's collectives
  std::string ep_wire_dtype = "f32";  // model.expert_wire_dtype
  // EPLB: model.eplb (redundant_experts, interval, window) from --eplb-*.

  void add_to(CLI::App& cmd);
  // Applies the string-valued flags; an error names the flag.
  Status resolve();
};

}  // namespace deepinfer::cli
