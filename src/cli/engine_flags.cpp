#include "cli/engine_flags.h"

#include "engine/kv_cache.h"

namespace deepinfer::cli {

void EngineFlags::add_to(CLI::App& cmd) {
  EngineOptions& o = options;
  cmd.add_option("--block-size", o.block_size, "Tokens per KV cache block")->capture_default_str();
  cmd.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Token budget of one engine step")
      ->capture_default_str();
  cmd.add_option("--max-num-seqs", o.max_num_seqs, "Sequences running at once")->capture_default_str();
  cmd.add_option("--kv-cache-memory", o.kv_cache_memory_bytes, "KV cache size in bytes (0: use the fraction)")
      ->capture_default_str();
  cmd.add_option("--kv-cache-memory-fraction", o.kv_cache_memory_fraction,
                 "KV cache size as a fraction of the memory available at start")
      ->capture_default_str();
  cmd.add_option("--kv-cache-dtype", kv_cache_dtype, "KV cache storage: bf16, fp8 (e4m3 latent) or f32")
      ->capture_default_str();
  cmd.add_option("--activation-dtype", activation_dtype,
                 "Inputs of the bf16, fp8 and FP4 linear layers (and attention queries with a bf16 cache): f32, or bf16 "
                 "(rounded; about twice the arithmetic rate on AVX-512 BF16 CPUs, accuracy in bench/RESULTS.md)")
      ->capture_default_str();
  cmd.add_option("--lm-head-dtype", lm_head_dtype,
                 "The lm_head's precision: stored (as the checkpoint has it), or quantized at load from bf16, f16 or "
                 "f32 to half the bytes a decode step reads for it: int8 (a scale per row and 128 columns, about as "
                 "precise as Q8_0) or fp8 (e4m3 with 128x128 block scales, about 4x int8's error); accuracy in "
                 "bench/RESULTS.md")
      ->capture_default_str();
  cmd.add_option("--prefill-attention", prefill_attention,
                 "DeepSeek-V2/V3: attention of prompt tokens, expanded (MLA expanded to per-head keys and values; "
                 "generated tokens stay absorbed, and cached blocks holding them are not reused as prompt) or "
                 "absorbed (as generated tokens)")
      ->capture_default_str();
  cmd.add_flag("--no-prefix-caching", no_prefix_caching, "Do not reuse cached prompt prefixes");
  cmd.add_flag("--no-weight-relay", no_weight_relay,
               "Keep every weight in the checkpoint's layout, read from its file mapping, instead of copying the ones "
               "the CPU kernels read faster in another layout (fp8 and int8 weights with bf16 activations on AVX-512 "
               "BF16 and AMX, FP4 on AMX) into it at load: a faster load and page cache shared between processes, "
               "slower steps; outputs are bitwise the same");
  cmd.add_option("--max-model-len", o.max_model_len, "Prompt + output tokens per sequence (0: the model's limit)")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "Seed for requests that give none")->capture_default_str();
  cmd.add_option("--speculative", speculative,
                 "Speculative decoding: none, ngram (drafts looked up in the sequence's own tokens) or mtp (drafts "
                 "from the model's MTP block; DeepSeek-V4), verified in one step; outputs are exactly those of plain "
                 "decoding. Drafts only while at most 8 sequences decode")
      ->capture_default_str();
  cmd.add_option("--expert-parallel", expert_parallel,
                 "Ranks the routed experts are spread over: run under mpirun -np N with the same N; each rank "
                 "loads only its slice of the experts and runs its own requests (data-parallel attention)")
      ->capture_default_str();
  cmd.add_option("--ep-timeout", ep_timeout_seconds,
                 "Seconds a rank waits for the others in one collective before it declares the group failed "
                 "(its requests then fail and /health answers 503)")
      ->capture_default_str();
  cmd.add_option("--ep-wire-dtype", ep_wire_dtype,
                 "Expert parallelism: token rows between ranks as f32 (outputs bitwise those of one process) or bf16 "
                 "(half the bytes; accuracy in bench/RESULTS.md)")
      ->capture_default_str();
  cmd.add_option("--eplb-redundant-experts", model.eplb.redundant_experts,
                 "Expert parallelism: extra expert slots (the routed experts + this must be a multiple of the ranks) "
                 "for copies of the busiest experts")
      ->capture_default_str();
  cmd.add_option("--eplb-interval", model.eplb.interval,
                 "Expert parallelism: rebalance the experts over the ranks every this many steps, from the tokens "
                 "each expert got over --eplb-window steps (DeepSeek's EPLB policy; 0: never)")
      ->capture_default_str();
  cmd.add_option("--eplb-window", model.eplb.window, "Steps of expert load a rebalance weighs (0: the interval)")
      ->capture_default_str();
  cmd.add_option("--eplb-nodes", model.eplb.n_nodes,
                 "Machines the ranks run on (consecutive ranks per machine): EPLB keeps each expert group's copies "
                 "on one machine where the groups divide over them")
      ->capture_default_str();
  cmd.add_option("--num-speculative-tokens", o.num_speculative_tokens, "Draft tokens per sequence and step (with --speculative)")
      ->capture_default_str();
}

Status EngineFlags::resolve() {
  auto dtype = parse_kv_cache_dtype(kv_cache_dtype);
  if (!dtype) return Status::Error("--kv-cache-dtype: '" + kv_cache_dtype + "' is not one of bf16, fp8, f32");
  options.kv_cache_dtype = *dtype;
  if (activation_dtype != "f32" && activation_dtype != "bf16")
    return Status::Error("--activation-dtype: '" + activation_dtype + "' is not one of f32, bf16");
  model.activation_dtype = activation_dtype == "bf16" ? DType::BF16 : DType::F32;
  if (lm_head_dtype == "fp8") model.lm_head_dtype = DType::F8_E4M3;
  else if (lm_head_dtype == "int8") model.lm_head_dtype = DType::I8_SM;
  else if (lm_head_dtype != "stored")
    return Status::Error("--lm-head-dtype: '" + lm_head_dtype + "' is not one of stored, int8, fp8");
  if (prefill_attention != "expanded" && prefill_attention != "absorbed")
    return Status::Error("--prefill-attention: '" + prefill_attention + "' is not one of expanded, absorbed");
  model.prefill_attention =
      prefill_attention == "expanded" ? PrefillAttention::kExpanded : PrefillAttention::kAbsorbed;
  options.enable_prefix_caching = !no_prefix_caching;
  model.relay_weights = !no_weight_relay;
  if (speculative == "none") options.speculative = SpeculativeMethod::kNone;
  else if (speculative == "ngram") options.speculative = SpeculativeMethod::kNgram;
  else if (speculative == "mtp") options.speculative = SpeculativeMethod::kMtp;
  else return Status::Error("--speculative: '" + speculative + "' is not one of none, ngram, mtp");
  model.mtp_drafting = options.speculative == SpeculativeMethod::kMtp;
  const EplbOptions& eplb = model.eplb;
  if (eplb.redundant_experts < 0 || eplb.interval < 0 || eplb.window < 0)
    return Status::Error("--eplb-redundant-experts, --eplb-interval and --eplb-window must not be negative");
  if (eplb.n_nodes < 1 || expert_parallel % eplb.n_nodes != 0)
    return Status::Error("--eplb-nodes: must divide --expert-parallel (" + std::to_string(expert_parallel) + ")");
  if ((eplb.redundant_experts > 0 || eplb.interval > 0) && expert_parallel <= 1)
    return Status::Error("--eplb-*: balances experts over the ranks of --expert-parallel N (N > 1)");
  if (eplb.window == 0) model.eplb.window = eplb.interval;
  if (ep_wire_dtype != "f32" && ep_wire_dtype != "bf16")
    return Status::Error("--ep-wire-dtype: '" + ep_wire_dtype + "' is not one of f32, bf16");
  model.expert_wire_dtype = ep_wire_dtype == "bf16" ? DType::BF16 : DType::F32;
  return options.validate();
}

}  // namespace deepinfer::cli
