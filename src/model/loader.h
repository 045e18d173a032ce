// Loading a Hugging Face model folder into a CausalLM, by its config.json architecture.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"

namespace deepinfer {

// Loads DeepseekV3ForCausalLM / DeepseekV2ForCausalLM checkpoints (bf16, f16, f32 or FP8
// block-quantized; single-file or sharded) and DeepseekV4ForCausalLM ones as published (bf16, or
// FP8 linears with FP4 routed experts), by config.json's architecture. Errors name the file, tensor or field.
Result<std::unique_ptr<CausalLM>> load_causal_lm(const std::string& model_dir, const ModelOptions& options = {},
                                                 Backend& backend = cpu_backend());

// One line for logs: architecture, parameters, weight bytes, KV bytes per token for each cache
// dtype the model offers at that block size (and per sequence, for its lookback kinds).
std::string describe_causal_lm(const CausalLM& model, int block_size);

}  // namespace deepinfer
